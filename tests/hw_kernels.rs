//! Hardware tests of `cudadrv::kernel` (sm_90): typed handles checked against
//! `cuFuncGetParamInfo` (Rust kernels declared with `kernel!` in ptx/src/typed.rs, and a
//! C++ kernel compiled by `nvcc` here), safe launches in a `kernel::scope` on one and two
//! streams with events, the scope's synchronization on panic, bounds-checked device
//! slices, and the refusals of the safe path.
//!
//! Values: `typed_iota` writes `base + 3i`; `typed_mad` adds `k * x[i]`; `typed_bounds`
//! writes `value` where the slice has element `i`; `typed_read_at` traps past the end.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::process::Command;

use cuda_workspace::typed::{typed_bounds, typed_iota, typed_mad, typed_read_at};
use cuda_workspace::{Outcome, TestResult, check, check_eq, ptx, require_sm, skip};
use cudadrv::args::LayoutMismatch;
use cudadrv::kernel::{self, DeviceSlice, DeviceSliceMut, KernelModule, TypedKernel};
use cudadrv::{
    Context, ContextFlags, Device, DeviceBuffer, Error, Event, EventFlags, LaunchConfig, Module,
    Stream,
};

fn main() {
    cuda_workspace::run_suite(
        "hw_kernels",
        cuda_workspace::hw_tests![
            typed_handles_check_the_layout,
            safe_launches_on_one_lane,
            safe_launches_on_two_streams_with_events,
            scope_waits_for_its_streams_when_the_closure_panics,
            device_slices_check_bounds,
            safe_path_refusals,
            nvcc_kernel_typed_handle,
            async_stores_and_reductions_across_a_cluster,
            out_of_bounds_read_traps,
        ],
    );
}

fn setup() -> Result<(Context, KernelModule), Outcome> {
    require_sm(9, 0)?;
    let ctx = Context::primary(Device::get(0)?)?;
    let module = KernelModule::load(&ctx, &ptx::TRUSTED)?;
    Ok((ctx, module))
}

fn read_u32(buf: &DeviceBuffer<u32>) -> Result<Vec<u32>, Error> {
    let mut v = vec![0u32; buf.len()];
    buf.copy_to_host(&mut v)?;
    Ok(v)
}

fn check_values(got: &[u32], want: impl Fn(u32) -> u32, what: &str) -> TestResult {
    match got.iter().enumerate().find(|&(i, &v)| v != want(i as u32)) {
        None => Ok(()),
        Some((i, v)) => Err(Outcome::Fail(format!(
            "{what}: element {i} is {v}, expected {}",
            want(i as u32)
        ))),
    }
}

/// Declarations that disagree with the kernels in kernels.ptx.
mod wrong {
    use cudadrv::kernel::DeviceSliceMut;
    cudadrv::kernel! {
        /// `typed_iota` without its second parameter.
        pub extern fn typed_iota(out: DeviceSliceMut<u32>);
    }
    pub mod size {
        cudadrv::kernel! {
            /// `typed_iota` with a pointer where the slice is.
            pub extern fn typed_iota(out: *mut u32, base: u32);
        }
    }
}

/// Each typed handle of ptx/src/typed.rs loads (layout checked against
/// `cuFuncGetParamInfo`), and declarations with a missing parameter or a wrong type are
/// refused naming the difference.
fn typed_handles_check_the_layout() -> TestResult {
    let (_ctx, module) = setup()?;
    let iota: TypedKernel<typed_iota> = module.kernel()?;
    check(iota.is_trusted(), || {
        "a KernelModule handle is trusted".into()
    })?;
    module.kernel::<typed_mad>()?;
    module.kernel::<typed_bounds>()?;
    module.kernel::<typed_read_at>()?;
    module.kernel::<cuda_workspace::typed::typed_axpy>()?;
    check_eq(
        iota.function().param_count()?,
        2,
        "typed_iota's parameter count",
    )?;
    check_eq(
        iota.function().param_info(0)?,
        (0, 16),
        "a DeviceSliceMut parameter (offset, size)",
    )?;
    match module.kernel::<wrong::typed_iota>() {
        Err(Error::Layout(LayoutMismatch::Count {
            packed: 1,
            reported: 2,
        })) => {}
        other => return Err(Outcome::Fail(format!("missing parameter: {other:?}"))),
    }
    match module.kernel::<wrong::size::typed_iota>() {
        Err(Error::Layout(LayoutMismatch::Size {
            index: 0,
            packed: 8,
            reported: 16,
        })) => {}
        other => return Err(Outcome::Fail(format!("pointer for a slice: {other:?}"))),
    }
    // From a plain Module, the handle loads but is not trusted for safe launches.
    let plain = Module::from_ptx(module.module().context(), ptx::KERNELS)?;
    let untrusted = TypedKernel::<typed_iota>::from_module(&plain)?;
    check(!untrusted.is_trusted(), || {
        "a Module handle must not be trusted".into()
    })
}

/// `typed_iota` then `typed_mad` twice on one lane through an `Owned` buffer (stream
/// order), with a second buffer read shared: every value checked after the scope.
fn safe_launches_on_one_lane() -> TestResult {
    let (ctx, module) = setup()?;
    let iota = module.kernel::<typed_iota>()?;
    let mad = module.kernel::<typed_mad>()?;
    let n = 1usize << 20;
    let x_host: Vec<u32> = (0..n as u32).collect();
    let x = DeviceBuffer::from_slice(&ctx, &x_host)?;
    let mut out = DeviceBuffer::<u32>::zeroed(&ctx, n)?;
    let stream = Stream::non_blocking(&ctx)?;
    let cfg = LaunchConfig::new(264, 256);
    kernel::scope(&ctx, |s| {
        let lane = s.lane(&stream)?;
        let mut o = lane.own(&mut out)?;
        lane.launch(&iota, &cfg, (&mut o, 11))?; // 11 + 3i
        lane.launch(&mad, &cfg, (&x, 2, &mut o))?; // + 2i
        lane.launch(&mad, &cfg, (&x, 5, &mut o))?; // + 5i
        Ok(())
    })?;
    check_values(
        &read_u32(&out)?,
        |i| 11 + 3 * i + 2 * i + 5 * i,
        "iota, mad 2, mad 5",
    )
}

/// Two streams: lane 1 writes `a`, lane 2 writes `b`; `a` is handed over to lane 2
/// (event), which adds `5 a` into `b`; `b` is handed back to lane 1, which adds `2 c`
/// (`c` read shared). Large enough that an unordered read would see unwritten data.
fn safe_launches_on_two_streams_with_events() -> TestResult {
    let (ctx, module) = setup()?;
    let iota = module.kernel::<typed_iota>()?;
    let mad = module.kernel::<typed_mad>()?;
    let n = 1usize << 24;
    let c_host: Vec<u32> = (0..n as u32).collect();
    let c = DeviceBuffer::from_slice(&ctx, &c_host)?;
    let mut a = DeviceBuffer::<u32>::zeroed(&ctx, n)?;
    let mut b = DeviceBuffer::<u32>::zeroed(&ctx, n)?;
    let (s1, s2) = (Stream::non_blocking(&ctx)?, Stream::non_blocking(&ctx)?);
    let mut e1 = Event::new(&ctx, EventFlags::DISABLE_TIMING)?;
    let mut e2 = Event::new(&ctx, EventFlags::DISABLE_TIMING)?;
    // Few threads: each kernel takes a while, so the second stream would overtake.
    let cfg = LaunchConfig::new(8, 128);
    let misuse = kernel::scope(&ctx, |s| {
        let (l1, l2) = (s.lane(&s1)?, s.lane(&s2)?);
        let mut a = l1.own(&mut a)?;
        let mut b = l2.own(&mut b)?;
        l1.launch(&iota, &cfg, (&mut a, 1))?; // a = 1 + 3i
        l2.launch(&iota, &cfg, (&mut b, 7))?; // b = 7 + 3i
        // `a` is on lane 1: lane 2 may not read it before the hand-over.
        let early = l2.launch(&mad, &cfg, (&a, 5, &mut b));
        l1.hand_over(&mut a, &l2, &mut e1)?;
        l2.launch(&mad, &cfg, (&a, 5, &mut b))?; // b += 5 a
        l2.hand_over(&mut b, &l1, &mut e2)?;
        l1.launch(&mad, &cfg, (&c, 2, &mut b))?; // b += 2 c
        // Handing over from a lane the buffer is not on is refused.
        let wrong_hand = l2.hand_over(&mut b, &l1, &mut e1);
        Ok((early, wrong_hand))
    })?;
    check(matches!(misuse.0, Err(Error::InvalidArgument(_))), || {
        format!("reading an Owned buffer on another lane: {:?}", misuse.0)
    })?;
    check(matches!(misuse.1, Err(Error::InvalidArgument(_))), || {
        format!("hand_over from the wrong lane: {:?}", misuse.1)
    })?;
    check_values(&read_u32(&a)?, |i| 1 + 3 * i, "a after lane 1")?;
    check_values(
        &read_u32(&b)?,
        |i| {
            (7 + 3 * i)
                .wrapping_add(5u32.wrapping_mul(1 + 3 * i))
                .wrapping_add(2 * i)
        },
        "b after both lanes",
    )
}

/// A scope whose closure panics after a long launch still waits for the stream before
/// the panic leaves `kernel::scope`: the stream is idle when `catch_unwind` returns, and
/// the buffer holds the kernel's complete output.
fn scope_waits_for_its_streams_when_the_closure_panics() -> TestResult {
    let (ctx, module) = setup()?;
    let iota = module.kernel::<typed_iota>()?;
    let n = 1usize << 25;
    let mut out = DeviceBuffer::<u32>::zeroed(&ctx, n)?;
    let stream = Stream::non_blocking(&ctx)?;
    // The panic is expected: keep its message out of the report.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let caught = catch_unwind(AssertUnwindSafe(|| {
        kernel::scope::<_, ()>(&ctx, |s| {
            let lane = s.lane(&stream)?;
            // One block: tens of milliseconds of work.
            lane.launch(&iota, &LaunchConfig::new(1, 128), (&mut out, 3))?;
            panic!("closure panics with the kernel in flight");
        })
    }));
    std::panic::set_hook(hook);
    let idle = stream.query()?;
    check(caught.is_err(), || "the panic must propagate".into())?;
    check(idle, || {
        "the stream was still busy after the scope unwound".into()
    })?;
    check_values(
        &read_u32(&out)?,
        |i| 3 + 3 * i,
        "output of the unwound scope",
    )
}

/// `typed_bounds` on a slice shorter than its buffer (an `unsafe` typed launch of a
/// prefix): threads past the slice's end write nothing, and `get(len)` is `None` on the
/// device. Then the same kernel safely on a whole buffer with more threads than elements.
fn device_slices_check_bounds() -> TestResult {
    let (ctx, module) = setup()?;
    let bounds = module.kernel::<typed_bounds>()?;
    let n = 1000usize;
    let short = n - 37;
    let poison = 0xDEAD_BEEFu32;
    let mut out = DeviceBuffer::<u32>::new(&ctx, n)?;
    out.memset_d32(poison)?;
    let mut flag = DeviceBuffer::<u32>::zeroed(&ctx, 1)?;
    let stream = Stream::non_blocking(&ctx)?;
    // SAFETY: `out` holds `n >= short` elements and `flag` one; both outlive the launch
    // (the stream is synchronized below) and nothing else touches them meanwhile.
    unsafe {
        let prefix = DeviceSliceMut::<u32>::from_raw_parts(out.as_raw() as *mut u32, short);
        let f = DeviceSliceMut::<u32>::from_raw_parts(flag.as_raw() as *mut u32, 1);
        bounds.launch(&LaunchConfig::new(8, 256).stream(&stream), &(prefix, 42, f))?;
    }
    stream.synchronize()?;
    let got = read_u32(&out)?;
    check_values(&got[..short], |_| 42, "inside the slice")?;
    check_values(&got[short..], |_| poison, "past the slice's end")?;
    check_eq(read_u32(&flag)?[0], 1, "get(len) on the device is None")?;

    kernel::scope(&ctx, |s| {
        s.lane(&stream)?.launch(
            &bounds,
            &LaunchConfig::new(8, 256),
            (&mut out, 9, &mut flag),
        )
    })?;
    check_values(&read_u32(&out)?, |_| 9, "whole buffer, 2048 threads")
}

/// What the safe path refuses before any launch: a PDL attribute on a kernel not
/// declared `dependent`, a configuration naming another stream, a default stream as a
/// lane, a buffer of another context (a handle from a plain `Module` does not compile:
/// `TypedKernel`'s compile-fail doctest).
fn safe_path_refusals() -> TestResult {
    let (ctx, module) = setup()?;
    let iota = module.kernel::<typed_iota>()?;
    let mut out = DeviceBuffer::<u32>::zeroed(&ctx, 256)?;
    let (stream, other) = (Stream::non_blocking(&ctx)?, Stream::non_blocking(&ctx)?);
    let legacy = Stream::legacy(&ctx);
    let ctx2 = Context::create(Device::get(0)?, ContextFlags::empty())?;
    let mut foreign = DeviceBuffer::<u32>::zeroed(&ctx2, 256)?;
    let results = kernel::scope(&ctx, |s| {
        let lane = s.lane(&stream)?;
        let mut out = lane.own(&mut out)?;
        let pdl = LaunchConfig::new(1, 256).programmatic_stream_serialization()?;
        let r_pdl = lane.launch(&iota, &pdl, (&mut out, 0));
        let named = LaunchConfig::new(1, 256).stream(&other);
        let r_named = lane.launch(&iota, &named, (&mut out, 0));
        let r_default = s.lane(&legacy).map(|_| ());
        let r_foreign = lane.launch(&iota, &LaunchConfig::new(1, 256), (&mut foreign, 0));
        Ok([r_pdl, r_named, r_default, r_foreign])
    })?;
    let names = ["pdl", "other stream", "default stream", "foreign"];
    for (i, (r, name)) in results.iter().zip(names).enumerate() {
        let ok = if i == 3 {
            matches!(r, Err(Error::ContextMismatch { .. }))
        } else {
            matches!(r, Err(Error::InvalidArgument(_)))
        };
        check(ok, || format!("{name}: {r:?}"))?;
    }
    // Nothing ran: `out` is still zero.
    check_values(&read_u32(&out)?, |_| 0, "no refused launch ran")
}

/// C++ source of the nvcc kernels: a slice struct laid out as `DeviceSlice`.
const CPP: &str = r#"
template <class T> struct Slice { T *ptr; unsigned long long len; };
extern "C" __global__ void cpp_saxpy(float a, Slice<const float> x, Slice<float> y) {
    unsigned long long i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < x.len && i < y.len) y.ptr[i] = a * x.ptr[i] + y.ptr[i];
}
"#;

/// `nvcc` next to the CUDA install, or `$NVCC`.
fn nvcc() -> Option<PathBuf> {
    let mut cands: Vec<PathBuf> = Vec::new();
    if let Some(p) = std::env::var_os("NVCC") {
        cands.push(p.into());
    }
    cands.push("/usr/local/cuda/bin/nvcc".into());
    cands.into_iter().find(|p| p.is_file())
}

mod cpp {
    use cudadrv::kernel::{DeviceSlice, DeviceSliceMut};
    cudadrv::kernel! {
        /// `cpp_saxpy(float, Slice<const float>, Slice<float>)` from nvcc.
        pub extern fn cpp_saxpy(a: f32, x: DeviceSlice<f32>, y: DeviceSliceMut<f32>);
    }
    pub mod wrong {
        cudadrv::kernel! {
            /// The C++ kernel declared with raw pointers: refused at load.
            pub extern fn cpp_saxpy(a: f32, x: *const f32, y: *mut f32);
        }
    }
}

/// A C++ kernel compiled by `nvcc -ptx` here gets a typed handle (checked at load; a
/// wrong declaration refused) and runs through its `unsafe` typed launch.
fn nvcc_kernel_typed_handle() -> TestResult {
    require_sm(9, 0)?;
    let Some(nvcc) = nvcc() else {
        return skip("nvcc not found ($NVCC, /usr/local/cuda/bin/nvcc)");
    };
    let dir = std::env::temp_dir().join(format!("hw_kernels_{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let (src, out) = (dir.join("saxpy.cu"), dir.join("saxpy.ptx"));
    std::fs::write(&src, CPP)?;
    let status = Command::new(&nvcc)
        .args(["-arch=sm_90", "-ptx", "-o"])
        .arg(&out)
        .arg(&src)
        .status()?;
    check(status.success(), || format!("nvcc failed: {status}"))?;
    let text = std::fs::read_to_string(&out)?;
    let _ = std::fs::remove_dir_all(&dir);

    let ctx = Context::primary(Device::get(0)?)?;
    let module = Module::from_ptx(&ctx, &text)?;
    let saxpy = TypedKernel::<cpp::cpp_saxpy>::from_module(&module)?;
    match TypedKernel::<cpp::wrong::cpp_saxpy>::from_module(&module) {
        Err(Error::Layout(LayoutMismatch::Size { index: 1, .. })) => {}
        other => return Err(Outcome::Fail(format!("pointer declaration: {other:?}"))),
    }
    let n = 10_000usize;
    let x_host: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let x = DeviceBuffer::from_slice(&ctx, &x_host)?;
    let y = DeviceBuffer::from_slice(&ctx, &vec![1.0f32; n])?;
    let stream = Stream::non_blocking(&ctx)?;
    // SAFETY: `x` and `y` hold `n` floats, outlive the launch (synchronized below), and
    // nothing else touches them meanwhile; the C++ kernel checks both lengths.
    unsafe {
        let xs = DeviceSlice::<f32>::from_raw_parts(x.as_raw() as *const f32, n);
        let ys = DeviceSliceMut::<f32>::from_raw_parts(y.as_raw() as *mut f32, n);
        saxpy.launch(
            &LaunchConfig::new((n as u32).div_ceil(256), 256).stream(&stream),
            &(2.0, xs, ys),
        )?;
    }
    stream.synchronize()?;
    let mut got = vec![0.0f32; n];
    y.copy_to_host(&mut got)?;
    match got
        .iter()
        .enumerate()
        .find(|&(i, &v)| v != 2.0 * i as f32 + 1.0)
    {
        None => Ok(()),
        Some((i, v)) => Err(Outcome::Fail(format!(
            "y[{i}] = {v}, expected {}",
            2 * i + 1
        ))),
    }
}

/// `async_store_exchange` (ptx/async81): in clusters of 2 CTAs, each CTA writes into its
/// peer's shared memory with `st.async` (u32, u64), `red.async` (add, min, max) and a
/// cluster `cp.reduce.async.bulk`, all completing on the peer's mbarrier; each CTA then
/// reports what it received. Every word checked.
fn async_stores_and_reductions_across_a_cluster() -> TestResult {
    require_sm(9, 0)?;
    let ctx = Context::primary(Device::get(0)?)?;
    let module = Module::from_ptx(&ctx, ptx::ASYNC81)?;
    let f = module.function("async_store_exchange")?;
    f.verify_args::<(cudadrv::DevicePtr<u32>,)>()?;
    const PER_BLOCK: usize = 7 * 64;
    let blocks = 8u32;
    let mut out = DeviceBuffer::<u32>::new(&ctx, blocks as usize * PER_BLOCK)?;
    out.memset_d32(0xDEAD_BEEF)?;
    let stream = Stream::non_blocking(&ctx)?;
    let cfg = LaunchConfig::new(blocks, 64)
        .stream(&stream)
        .cluster_dim(2)?;
    // SAFETY: `async_store_exchange(u32 *out)` (verified above) writes `gridDim.x * 448`
    // words of `out`, which lives until the stream is synchronized below.
    unsafe { cfg.launch(&f, &(out.as_arg(),))? };
    stream.synchronize()?;
    let got = read_u32(&out)?;
    for b in 0..blocks as usize {
        let r = (b % 2) as u32;
        let p = r ^ 1;
        for i in 0..64u32 {
            let want = [
                100_000 * p + i,
                i,
                p << 8,
                1000 * r + i + (p + 1) * i + 5,
                (20 * i + p).min(1000),
                (20 * i + p).max(500),
                7 * i + 3 * i + p,
            ];
            for (k, w) in want.into_iter().enumerate() {
                let v = got[b * PER_BLOCK + k * 64 + i as usize];
                check(v == w, || {
                    let what = [
                        "st.async.u32",
                        "st.async.u64 low",
                        "st.async.u64 high",
                        "red.async.add",
                        "red.async.min",
                        "red.async.max",
                        "cp.reduce.async.bulk add",
                    ][k];
                    format!("block {b} (rank {r}) element {i}, {what}: {v:#x}, expected {w:#x}")
                })?;
            }
        }
    }
    Ok(())
}

/// `read` past the end traps: in a context of its own (a trap ends the context's
/// usefulness), the scope returns the launch failure from its synchronization.
fn out_of_bounds_read_traps() -> TestResult {
    require_sm(9, 0)?;
    if cuda_workspace::under_sanitizer() {
        return skip("a deliberate trap: not run under compute-sanitizer");
    }
    let ctx = Context::create(Device::get(0)?, ContextFlags::empty())?;
    let module = KernelModule::load(&ctx, &ptx::TRUSTED)?;
    let read_at = module.kernel::<typed_read_at>()?;
    let x = DeviceBuffer::from_slice(&ctx, &[5u32, 6, 7])?;
    let mut out = DeviceBuffer::<u32>::zeroed(&ctx, 1)?;
    let stream = Stream::non_blocking(&ctx)?;
    let cfg = LaunchConfig::new(1, 32);
    kernel::scope(&ctx, |s| {
        s.lane(&stream)?.launch(&read_at, &cfg, (&x, 2, &mut out))
    })?;
    check_eq(read_u32(&out)?[0], 7, "x.read(2)")?;
    let r = kernel::scope(&ctx, |s| {
        s.lane(&stream)?.launch(&read_at, &cfg, (&x, 3, &mut out))
    });
    check(r.is_err(), || {
        "reading index 3 of a 3-element slice must fail the launch".into()
    })?;
    println!(
        "    trap reported as: {}",
        r.err().map(|e| e.to_string()).unwrap_or_default()
    );
    Ok(())
}
