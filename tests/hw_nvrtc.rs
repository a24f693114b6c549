//! Hardware tests of `cudadrv::nvrtc` (sm_90): the repository's C++ reference kernels
//! (`xtask/cpp/kernels.cuh`) compiled at run time for the device at hand, loaded, and
//! run through typed handles checked at load: `vector_add`, a PDL chain of `chain_step`
//! and the `pdl_primary`/`pdl_secondary` pair; the PTX path through the driver's JIT;
//! template kernels found by name expression; a CUBIN of another architecture refused
//! with the driver's error; and a module loaded from the disk cache.
//!
//! NVRTC comes from the host (`$CUDA_SYS_LIBNVRTC`, the CUDA toolkit, a pip wheel);
//! without one the tests report themselves skipped.

use cuda_workspace::nvrtc::{TEMPLATE, reference};
use cuda_workspace::{Outcome, TestResult, check, check_eq, require_sm, skip};
use cudadrv::args::LayoutMismatch;
use cudadrv::nvrtc::{self, Output, Program, Target};
use cudadrv::{Context, Device, DeviceBuffer, Error, LaunchConfig, Stream};

/// The C++ signatures of kernels.cuh and the template, as `extern fn` declarations.
mod cpp {
    use cudadrv::DevicePtr;
    cudadrv::kernel! {
        /// `vector_add(const float*, const float*, float*, unsigned)`.
        pub extern fn vector_add(a: DevicePtr<f32>, b: DevicePtr<f32>, c: DevicePtr<f32>, n: u32);
    }
    cudadrv::kernel! {
        /// `chain_step(const unsigned*, unsigned*, unsigned n, unsigned mode)`: waits with
        /// griddepcontrol.wait for modes 1 to 3.
        pub extern dependent fn chain_step(input: DevicePtr<u32>, out: DevicePtr<u32>, n: u32, mode: u32);
    }
    cudadrv::kernel! {
        /// `pdl_primary(unsigned*, unsigned, unsigned long long*, unsigned)`.
        pub extern fn pdl_primary(out: DevicePtr<u32>, n: u32, stamps: DevicePtr<u64>, work_ns: u32);
    }
    cudadrv::kernel! {
        /// `pdl_secondary(const unsigned*, unsigned*, unsigned, unsigned long long*, unsigned)`.
        pub extern dependent fn pdl_secondary(input: DevicePtr<u32>, out: DevicePtr<u32>, n: u32, stamps: DevicePtr<u64>, prolog: u32);
    }
    cudadrv::kernel! {
        /// `scale<float>(float*, float, unsigned)`.
        pub extern fn scale_f32(data: DevicePtr<f32>, factor: f32, n: u32);
    }
    cudadrv::kernel! {
        /// `scale<double>(double*, double, unsigned)`.
        pub extern fn scale_f64(data: DevicePtr<f64>, factor: f64, n: u32);
    }
}

fn main() {
    cuda_workspace::run_suite(
        "hw_nvrtc",
        cuda_workspace::hw_tests![
            reference_kernels_compiled_for_the_device_run,
            ptx_output_runs_through_the_jit,
            template_kernels_by_name_expression,
            a_cubin_of_another_architecture_is_refused,
            a_module_from_the_disk_cache_runs,
        ],
    );
}

/// The context, after checking the GPU and NVRTC.
fn setup() -> Result<Context, Outcome> {
    require_sm(9, 0)?;
    match nvrtc::version() {
        Ok((major, minor)) => println!("  NVRTC {major}.{minor}"),
        Err(e) => return skip(format!("no NVRTC on this host: {e}")),
    }
    Ok(Context::primary(Device::get(0)?)?)
}

fn read<T: cudadrv::memory::Pod + Default>(buf: &DeviceBuffer<T>) -> Result<Vec<T>, Error> {
    let mut v = vec![T::default(); buf.len()];
    buf.copy_to_host(&mut v)?;
    Ok(v)
}

/// `vector_add` from `module` on `n` elements, checked against the host's sums.
fn run_vector_add(ctx: &Context, module: &nvrtc::RtcModule, stream: &Stream) -> TestResult {
    let add = module.kernel::<cpp::vector_add>()?;
    let n = 100_003usize;
    let a: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
    let b: Vec<f32> = (0..n).map(|i| (n - i) as f32).collect();
    let (da, db) = (
        DeviceBuffer::from_slice(ctx, &a)?,
        DeviceBuffer::from_slice(ctx, &b)?,
    );
    let dc = DeviceBuffer::<f32>::new(ctx, n)?;
    let cfg = LaunchConfig::new((n as u32).div_ceil(256), 256).stream(stream);
    // SAFETY: the three buffers hold `n` floats and outlive the kernel (synchronized
    // below); vector_add touches a[i], b[i], c[i] for i < n only.
    unsafe { add.launch(&cfg, &(da.as_arg(), db.as_arg(), dc.as_arg(), n as u32))? };
    stream.synchronize()?;
    let c = read(&dc)?;
    match (0..n).find(|&i| c[i] != a[i] + b[i]) {
        None => Ok(()),
        Some(i) => Err(Outcome::Fail(format!(
            "c[{i}] = {}, expected {}",
            c[i],
            a[i] + b[i]
        ))),
    }
}

/// kernels.cuh compiled for this device (a CUBIN), loaded, and run: vector_add; a chain
/// of 16 chain_step launches with PDL (each waits, then triggers); the PDL pair.
fn reference_kernels_compiled_for_the_device_run() -> TestResult {
    let ctx = setup()?;
    let target = Target::for_device(ctx.device())?;
    check_eq(target, Target::cubin(90), "the target for an sm_90 device")?;
    let module = reference().load(&ctx)?;
    check_eq(module.compiled().target().output(), Output::Cubin, "output")?;
    let stream = Stream::non_blocking(&ctx)?;
    run_vector_add(&ctx, &module, &stream)?;

    // The chain: a -> b -> a ..., 16 links, each +1, with the PDL attribute.
    let step = module.kernel::<cpp::chain_step>()?;
    let n = 33_792u32;
    let start: Vec<u32> = (0..n).map(|i| i * 7).collect();
    let bufs = [
        DeviceBuffer::from_slice(&ctx, &start)?,
        DeviceBuffer::<u32>::new(&ctx, n as usize)?,
    ];
    let pdl = LaunchConfig::new(132, 256)
        .stream(&stream)
        .programmatic_stream_serialization()?;
    for link in 0..16 {
        let (src, dst) = (&bufs[link % 2], &bufs[(link + 1) % 2]);
        // SAFETY: both buffers hold `n` words and outlive the chain (synchronized below);
        // mode 1 waits for the previous link before reading `src`.
        unsafe { step.launch(&pdl, &(src.as_arg(), dst.as_arg(), n, 1))? };
    }
    stream.synchronize()?;
    let got = read(&bufs[0])?;
    if let Some(i) = (0..n as usize).find(|&i| got[i] != start[i] + 16) {
        return Err(Outcome::Fail(format!(
            "chain: [{i}] = {}, expected {}",
            got[i],
            start[i] + 16
        )));
    }

    // The pair: the secondary (PDL) reads what the primary wrote.
    let (primary, secondary) = (
        module.kernel::<cpp::pdl_primary>()?,
        module.kernel::<cpp::pdl_secondary>()?,
    );
    let grid = 8u32;
    let n = grid * 256 * 4;
    let a = DeviceBuffer::<u32>::new(&ctx, n as usize)?;
    let b = DeviceBuffer::<u32>::new(&ctx, n as usize)?;
    let stamps = DeviceBuffer::<u64>::new(&ctx, 4 * grid as usize)?;
    let plain = LaunchConfig::new(grid, 256).stream(&stream);
    let dependent = LaunchConfig::new(grid, 256)
        .stream(&stream)
        .programmatic_stream_serialization()?;
    // SAFETY: `a` and `b` hold `n` words, `stamps` 4 per block; all outlive the pair
    // (synchronized below); the secondary waits before reading `a`.
    unsafe {
        primary.launch(&plain, &(a.as_arg(), n, stamps.as_arg(), 20_000))?;
        secondary.launch(
            &dependent,
            &(a.as_arg(), b.as_arg(), n, stamps.as_arg(), 64),
        )?;
    }
    stream.synchronize()?;
    let got = read(&b)?;
    match (0..n).find(|&i| got[i as usize] != (i * 3 + 7) * 2 + 1) {
        None => Ok(()),
        Some(i) => Err(Outcome::Fail(format!("pair: [{i}] = {}", got[i as usize]))),
    }
}

/// The same kernels as PTX, compiled by the driver's JIT when loaded, give the same sums.
fn ptx_output_runs_through_the_jit() -> TestResult {
    let ctx = setup()?;
    let compiled = reference().compile(Target::ptx(90))?;
    check(
        compiled
            .ptx()
            .is_some_and(|t| t.contains(".entry vector_add(")),
        || "PTX without vector_add".into(),
    )?;
    let module = compiled.load(&ctx)?;
    let stream = Stream::non_blocking(&ctx)?;
    run_vector_add(&ctx, &module, &stream)
}

/// `scale<float>` and `scale<double>` found by their name expressions, typed and run; a
/// declaration with the wrong parameter sizes refused at load.
fn template_kernels_by_name_expression() -> TestResult {
    let ctx = setup()?;
    let module = Program::new("scale.cu", TEMPLATE)
        .name_expression("scale<float>")
        .name_expression("scale<double>")
        .option("-std=c++17")
        .load(&ctx)?;
    let f = module.kernel_as::<cpp::scale_f32>("scale<float>")?;
    let d = module.kernel_as::<cpp::scale_f64>("scale<double>")?;
    match module.kernel_as::<cpp::scale_f32>("scale<double>") {
        Err(Error::Layout(LayoutMismatch::Size { index: 1, .. })) => {}
        other => {
            return Err(Outcome::Fail(format!(
                "f32 declaration of scale<double>: {other:?}"
            )));
        }
    }
    check(
        matches!(
            module.kernel_as::<cpp::scale_f32>("scale<int>"),
            Err(Error::InvalidArgument(_))
        ),
        || "an expression the program lacks".into(),
    )?;
    let n = 5000usize;
    let hf: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let hd: Vec<f64> = (0..n).map(|i| i as f64 + 0.25).collect();
    let (df, dd) = (
        DeviceBuffer::from_slice(&ctx, &hf)?,
        DeviceBuffer::from_slice(&ctx, &hd)?,
    );
    let stream = Stream::non_blocking(&ctx)?;
    let cfg = LaunchConfig::new((n as u32).div_ceil(128), 128).stream(&stream);
    // SAFETY: each buffer holds `n` elements and outlives the kernels (synchronized
    // below); scale touches data[i] for i < n only.
    unsafe {
        f.launch(&cfg, &(df.as_arg(), 3.0f32, n as u32))?;
        d.launch(&cfg, &(dd.as_arg(), -2.0f64, n as u32))?;
    }
    stream.synchronize()?;
    let (gf, gd) = (read(&df)?, read(&dd)?);
    check((0..n).all(|i| gf[i] == hf[i] * 3.0), || {
        "scale<float>".into()
    })?;
    check((0..n).all(|i| gd[i] == hd[i] * -2.0), || {
        "scale<double>".into()
    })
}

/// A CUBIN for sm_80 does not run on sm_90: loading it is the driver's error, not a
/// crash; the same source for the device loads.
fn a_cubin_of_another_architecture_is_refused() -> TestResult {
    let ctx = setup()?;
    let other = Program::new("scale.cu", TEMPLATE)
        .name_expression("scale<float>")
        .compile(Target::cubin(80))?;
    match other.load(&ctx) {
        Err(e) if e.is(cudadrv_sys::CUresult::CUDA_ERROR_NO_BINARY_FOR_GPU) => {
            println!("  sm_80 CUBIN on sm_90: {e}");
        }
        Err(e) => return Err(Outcome::Fail(format!("unexpected error: {e}"))),
        Ok(_) => return Err(Outcome::Fail("an sm_80 CUBIN loaded on sm_90".into())),
    }
    Program::new("scale.cu", TEMPLATE)
        .name_expression("scale<float>")
        .load(&ctx)
        .map(drop)
        .map_err(Outcome::from)
}

/// A module compiled in "another process" (the map cleared, the file kept) loads from
/// the cache directory and runs.
fn a_module_from_the_disk_cache_runs() -> TestResult {
    let ctx = setup()?;
    let dir = std::env::temp_dir().join(format!("hw_nvrtc_cache_{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    nvrtc::set_cache_dir(Some(dir.clone()));
    nvrtc::clear_cache();
    let program = reference().define("FROM_CACHE", "1");
    program.compile(Target::for_device(ctx.device())?)?;
    nvrtc::clear_cache();
    let module = program.load(&ctx)?;
    let stats = nvrtc::cache_stats();
    nvrtc::set_cache_dir(None);
    let _ = std::fs::remove_dir_all(&dir);
    check_eq(
        (stats.disk_hits, stats.compiles),
        (1, 0),
        "disk hits, compiles",
    )?;
    let stream = Stream::non_blocking(&ctx)?;
    run_vector_add(&ctx, &module, &stream)
}
