//! Typed kernels and `kernel::scope` against a mock driver, on the CPU and under Miri:
//! the layout check at load, what a safe launch hands the driver (the slices it makes
//! from borrowed buffers, the lane's stream), what is refused before the driver is
//! called, and that every lane's stream is synchronized when the scope ends and when its
//! closure panics (`Lane` and `Owned` have no drop glue: leaking one skips nothing).
//!
//! Every entry appends a line to `LOG`. One `#[test]` drives the checks in order (the
//! driver table is process-wide).

#![cfg(not(feature = "linked"))]

mod mock_common;
use mock_common::*;

use std::collections::BTreeMap;
use std::ffi::{CStr, c_char, c_uint, c_void};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use cudadrv::args::KernelArgs;
use cudadrv::kernel::{
    self, DeviceSlice, DeviceSliceMut, Kernel, KernelModule, KernelPtx, MAX_LANES, TypedKernel,
};
use cudadrv::launch::LaunchConfig;
use cudadrv::{Context, Device, DeviceBuffer, Error, Event, EventFlags, JitOptions, Stream};
use cudadrv_sys::{
    CUdeviceptr, CUevent, CUfunction, CUjit_option, CUlaunchConfig, CUmodule, CUresult, CUstream,
};

cudadrv::kernel! {
    /// `out[i] = a[i] * k` (the body is the device half's; the host sees the handle).
    pub safe fn scale(a: DeviceSlice<f32>, out: DeviceSliceMut<f32>, k: f32) {}
}

cudadrv::kernel! {
    /// Waits for its predecessor, then writes `out`.
    pub safe dependent fn follow(out: DeviceSliceMut<u32>) {}
}

/// Host-only declarations that must never launch safely: `scale` again with other
/// element types (same layout: 16 + 16 + 4 bytes), and `raw_fill`, the name of a kernel
/// the mock module has without a safe-body marker (an `unsafe fn` kernel).
mod impostors {
    use cudadrv::kernel::{DeviceSlice, DeviceSliceMut};
    cudadrv::kernel! {
        /// `scale` with 8-byte elements: the device build's marker says 4-byte ones.
        pub safe fn scale(a: DeviceSlice<u64>, out: DeviceSliceMut<u64>, k: f32) {}
    }
    cudadrv::kernel! {
        /// Declared `safe` here; the module's `raw_fill` is not a safe body.
        pub safe fn raw_fill(out: DeviceSliceMut<u32>) {}
    }
    /// `scale` claimed `dependent` (so PDL launches would be accepted): the device
    /// build's `scale` does not wait for its predecessor.
    pub mod waiting {
        use cudadrv::kernel::{DeviceSlice, DeviceSliceMut};
        cudadrv::kernel! {
            pub safe dependent fn scale(a: DeviceSlice<f32>, out: DeviceSliceMut<f32>, k: f32) {}
        }
    }
}

/// The mock's stand-in for PTX built from the declarations above.
// SAFETY: the mock module's `scale` and `follow` are these declarations (the mock driver
// runs nothing).
static PTX: KernelPtx = unsafe {
    KernelPtx::new(
        ".version 8.0\n.target sm_90\n\
         .visible .global .align 8 .b8 __cudadrv_safe_scale[8];\n\
         .visible .global .align 8 .b8 __cudadrv_safe_follow[8];\n",
    )
};

const SCALE: usize = 0xF1;
const FOLLOW: usize = 0xF2;
const RAW_FILL: usize = 0xF3;
/// Device addresses of the safe-body markers the device build of `scale` and `follow`
/// would emit.
const SCALE_MARKER: u64 = 0xD0;
const FOLLOW_MARKER: u64 = 0xD8;

/// A stream whose synchronization fails (0: none).
static FAILING: AtomicUsize = AtomicUsize::new(0);
static DEVICE: Mutex<BTreeMap<u64, usize>> = Mutex::new(BTreeMap::new());

unsafe extern "C" fn cu_stream_sync(s: CUstream) -> CUresult {
    log(format!("sync {:#x}", s.addr()));
    if s.addr() == FAILING.load(Ordering::Relaxed) {
        return CUresult::CUDA_ERROR_LAUNCH_FAILED;
    }
    OK
}
unsafe extern "C" fn cu_stream_is_capturing(
    _: CUstream,
    status: *mut cudadrv_sys::CUstreamCaptureStatus,
) -> CUresult {
    unsafe { *status = cudadrv_sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE };
    OK
}
unsafe extern "C" fn cu_event_record(e: CUevent, s: CUstream) -> CUresult {
    log(format!("record {:#x} on {:#x}", e.addr(), s.addr()));
    OK
}
unsafe extern "C" fn cu_stream_wait_event(s: CUstream, e: CUevent, _flags: c_uint) -> CUresult {
    log(format!("wait {:#x} for {:#x}", s.addr(), e.addr()));
    OK
}
unsafe extern "C" fn cu_mem_alloc(p: *mut CUdeviceptr, bytes: usize) -> CUresult {
    let addr = NEXT.fetch_add(bytes.next_multiple_of(256).max(256), Ordering::Relaxed) as u64;
    lock(&DEVICE).insert(addr, bytes);
    unsafe { *p = addr };
    OK
}
unsafe extern "C" fn cu_mem_free(p: CUdeviceptr) -> CUresult {
    match lock(&DEVICE).remove(&p) {
        Some(_) => OK,
        None => CUresult::CUDA_ERROR_INVALID_VALUE,
    }
}
unsafe extern "C" fn cu_module_get_function(
    f: *mut CUfunction,
    _m: CUmodule,
    name: *const c_char,
) -> CUresult {
    let addr = match unsafe { CStr::from_ptr(name) }.to_bytes() {
        b"scale" => SCALE,
        b"follow" => FOLLOW,
        b"raw_fill" => RAW_FILL,
        _ => return CUresult::CUDA_ERROR_NOT_FOUND,
    };
    unsafe { *f = std::ptr::without_provenance_mut(addr) };
    OK
}
/// The module's globals: the markers of its two safe kernels (`raw_fill` has none).
unsafe extern "C" fn cu_module_get_global(
    p: *mut CUdeviceptr,
    size: *mut usize,
    _m: CUmodule,
    name: *const c_char,
) -> CUresult {
    let name = unsafe { CStr::from_ptr(name) }.to_bytes();
    log(format!(
        "cuModuleGetGlobal {}",
        String::from_utf8_lossy(name)
    ));
    let addr = match name {
        b"__cudadrv_safe_scale" => SCALE_MARKER,
        b"__cudadrv_safe_follow" => FOLLOW_MARKER,
        _ => return CUresult::CUDA_ERROR_NOT_FOUND,
    };
    unsafe {
        *p = addr;
        *size = 8;
    }
    OK
}
/// What the device build of `K`'s declaration records in its marker.
fn marker<K: Kernel>() -> u64 {
    kernel::__safe_marker(
        <K::Params as KernelArgs>::SIGNATURE,
        K::WAITS_FOR_DEPENDENCY,
    )
}
/// Reads a marker: what the device builds of `scale` and `follow` record.
unsafe extern "C" fn cu_memcpy_dtoh(dst: *mut c_void, src: CUdeviceptr, n: usize) -> CUresult {
    let value = match (src, n) {
        (SCALE_MARKER, 8) => marker::<scale>(),
        (FOLLOW_MARKER, 8) => marker::<follow>(),
        _ => return CUresult::CUDA_ERROR_INVALID_VALUE,
    };
    unsafe { dst.cast::<u64>().write_unaligned(value) };
    OK
}
/// The kernels' layouts as a compiler lays them out: `scale` (16-byte slice, 16-byte
/// slice, `f32`), `follow` (16-byte slice).
unsafe extern "C" fn cu_func_get_param_info(
    f: CUfunction,
    index: usize,
    offset: *mut usize,
    size: *mut usize,
) -> CUresult {
    let params: &[(usize, usize)] = match f.addr() {
        SCALE => &[(0, 16), (16, 16), (32, 4)],
        FOLLOW | RAW_FILL => &[(0, 16)],
        _ => return CUresult::CUDA_ERROR_INVALID_HANDLE,
    };
    let Some(&(o, s)) = params.get(index) else {
        return CUresult::CUDA_ERROR_INVALID_VALUE;
    };
    unsafe {
        *offset = o;
        *size = s;
    }
    OK
}
/// One line per launch: the function, grid, block, stream and the parameters as the
/// kernel reads them (a slice as `ptr+len`).
fn describe_launch(f: CUfunction, params: *mut *mut c_void) -> String {
    let slice = |i: usize| {
        let p = unsafe { *params.add(i) }.cast::<[u64; 2]>();
        let [ptr, len] = unsafe { p.read() };
        format!("{ptr:#x}+{len}")
    };
    match f.addr() {
        SCALE => {
            let k = unsafe { (*params.add(2)).cast::<f32>().read() };
            format!("scale({}, {}, {k})", slice(0), slice(1))
        }
        FOLLOW => format!("follow({})", slice(0)),
        other => format!("function {other:#x}"),
    }
}
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn cu_launch_kernel(
    f: CUfunction,
    gx: c_uint,
    _gy: c_uint,
    _gz: c_uint,
    bx: c_uint,
    _by: c_uint,
    _bz: c_uint,
    _smem: c_uint,
    s: CUstream,
    params: *mut *mut c_void,
    _extra: *mut *mut c_void,
) -> CUresult {
    log(format!(
        "cuLaunchKernel {} grid {gx} block {bx} on {:#x}",
        describe_launch(f, params),
        s.addr()
    ));
    OK
}
unsafe extern "C" fn cu_launch_kernel_ex(
    cfg: *const CUlaunchConfig,
    f: CUfunction,
    params: *mut *mut c_void,
    _extra: *mut *mut c_void,
) -> CUresult {
    let cfg = unsafe { &*cfg };
    let attrs = unsafe { std::slice::from_raw_parts(cfg.attrs, cfg.numAttrs as usize) };
    let ids: Vec<u32> = attrs.iter().map(|a| a.id.0).collect();
    log(format!(
        "cuLaunchKernelEx {} on {:#x} attrs {ids:?}",
        describe_launch(f, params),
        cfg.hStream.addr()
    ));
    OK
}

mock_entries! {
    fn mock_entry {
        "cuModuleLoadDataEx" =>
            cu_module_load_data_ex_recorded as unsafe extern "C" fn(_, _, _, _, _) -> _,
        "cuStreamSynchronize" => cu_stream_sync as unsafe extern "C" fn(_) -> _,
        "cuStreamIsCapturing" => cu_stream_is_capturing as unsafe extern "C" fn(_, _) -> _,
        "cuEventRecord" => cu_event_record as unsafe extern "C" fn(_, _) -> _,
        "cuStreamWaitEvent" => cu_stream_wait_event as unsafe extern "C" fn(_, _, _) -> _,
        "cuMemAlloc" => cu_mem_alloc as unsafe extern "C" fn(_, _) -> _,
        "cuMemFree" => cu_mem_free as unsafe extern "C" fn(_) -> _,
        "cuModuleGetFunction" => cu_module_get_function as unsafe extern "C" fn(_, _, _) -> _,
        "cuModuleGetGlobal" => cu_module_get_global as unsafe extern "C" fn(_, _, _, _) -> _,
        "cuMemcpyDtoH" => cu_memcpy_dtoh as unsafe extern "C" fn(_, _, _) -> _,
        "cuFuncGetParamInfo" => cu_func_get_param_info as unsafe extern "C" fn(_, _, _, _) -> _,
        "cuLaunchKernel" =>
            cu_launch_kernel as unsafe extern "C" fn(_, _, _, _, _, _, _, _, _, _, _) -> _,
        "cuLaunchKernelEx" => cu_launch_kernel_ex as unsafe extern "C" fn(_, _, _, _) -> _,
    }
}

/// The `CU_JIT_MAX_REGISTERS` value of the last module load (0: not given).
static MAX_REGISTERS: AtomicUsize = AtomicUsize::new(0);

/// Records the register cap among the JIT options, then loads as the shared mock does.
unsafe extern "C" fn cu_module_load_data_ex_recorded(
    m: *mut CUmodule,
    image: *const c_void,
    n: c_uint,
    options: *mut CUjit_option,
    values: *mut *mut c_void,
) -> CUresult {
    // SAFETY: the driver's contract: `n` options and as many values.
    let (opts, vals) = unsafe { cuda_workspace::mock::jit_options(n, options, values) };
    let cap = opts
        .iter()
        .rposition(|&o| o == CUjit_option::CU_JIT_MAX_REGISTERS)
        .map_or(0, |i| vals[i].addr());
    MAX_REGISTERS.store(cap, Ordering::SeqCst);
    // SAFETY: forwarded unchanged.
    unsafe { cu_module_load_data_ex(m, image, n, options, values) }
}

fn invalid(r: cudadrv::Result<()>, what: &str) {
    assert!(
        matches!(&r, Err(Error::InvalidArgument(m)) if m.contains(what)),
        "expected a refusal naming {what:?}, got {r:?}"
    );
}

#[test]
fn typed_kernels_and_scopes_against_a_mock_driver() {
    install(mock_entry);
    let ctx = Context::primary(Device::get(0).unwrap()).unwrap();
    let module = KernelModule::load(&ctx, &PTX).unwrap();
    assert_eq!(
        MAX_REGISTERS.load(Ordering::SeqCst),
        0,
        "no register cap by default"
    );
    // JIT options reach the driver, and the module's handles stay trusted.
    let capped = KernelModule::load_with(
        &ctx,
        &PTX,
        JitOptions {
            max_registers: Some(128),
            ..JitOptions::default()
        },
    )
    .unwrap();
    assert_eq!(MAX_REGISTERS.load(Ordering::SeqCst), 128);
    let capped_scale: TypedKernel<scale> = capped.kernel().unwrap();
    assert!(capped_scale.is_trusted());
    drop((capped_scale, capped));
    take_log();
    let scale: TypedKernel<scale> = module.kernel().unwrap();
    let follow: TypedKernel<follow> = module.kernel().unwrap();
    assert!(scale.is_trusted() && follow.is_trusted());
    assert_eq!(
        take_log(),
        [
            "cuModuleGetGlobal __cudadrv_safe_scale",
            "cuModuleGetGlobal __cudadrv_safe_follow"
        ]
    );
    host_only_declarations(&ctx, &module);
    let streams: Vec<Stream> = (0..MAX_LANES + 1)
        .map(|_| Stream::non_blocking(&ctx).unwrap())
        .collect();
    let raw = |i: usize| streams[i].as_raw().addr();
    take_log();

    launches_and_the_end_of_the_scope(&ctx, &scale, &streams, &raw);
    refusals(&ctx, &scale, &follow, &streams);
    panics_and_leaks(&ctx, &scale, &streams, &raw);
    hand_over_between_lanes(&ctx, &scale, &streams, &raw);
    a_failed_wait_is_returned(&ctx, &scale, &streams, &raw);
}

/// A `safe fn` declared only on the host is not trusted by its name: a kernel without
/// the device build's marker loads untrusted and is refused by safe launches, and a
/// marker recording other parameter types refuses the load.
fn host_only_declarations(ctx: &Context, module: &KernelModule) {
    let variant = TypedKernel::<impostors::scale>::new(module);
    assert!(
        matches!(&variant, Err(Error::InvalidArgument(m)) if m.contains("differs from the host")),
        "{variant:?}"
    );
    let waiting = TypedKernel::<impostors::waiting::scale>::new(module);
    assert!(
        matches!(&waiting, Err(Error::InvalidArgument(_))),
        "{waiting:?}"
    );
    let twin: TypedKernel<impostors::raw_fill> = module.kernel().unwrap();
    assert!(!twin.is_trusted());
    let mut buf = DeviceBuffer::<u32>::new(ctx, 64).unwrap();
    let stream = Stream::non_blocking(ctx).unwrap();
    take_log();
    kernel::scope(ctx, |s| {
        let lane = s.lane(&stream)?;
        invalid(
            lane.launch(&twin, &LaunchConfig::new(1, 64), (&mut buf,)),
            "marked the kernel",
        );
        Ok(())
    })
    .unwrap();
    let log = take_log();
    assert!(
        !log.iter().any(|l| l.starts_with("cuLaunch")),
        "a refused launch reached the driver: {log:?}"
    );
}

fn launches_and_the_end_of_the_scope(
    ctx: &Context,
    scale: &TypedKernel<scale>,
    streams: &[Stream],
    raw: &dyn Fn(usize) -> usize,
) {
    let a = DeviceBuffer::<f32>::new(ctx, 256).unwrap();
    let mut out = DeviceBuffer::<f32>::new(ctx, 256).unwrap();
    let mut out2 = DeviceBuffer::<f32>::new(ctx, 256).unwrap();
    let cfg = LaunchConfig::new(2, 128);
    let v = kernel::scope(ctx, |s| {
        let l0 = s.lane(&streams[0])?;
        let l1 = s.lane(&streams[1])?;
        let again = s.lane(&streams[0])?; // the same stream: one lane to wait for
        l0.launch(scale, &cfg, (&a, &mut out, 2.0f32))?;
        l1.launch(scale, &cfg, (&a, &mut out2, 3.0f32))?;
        assert_eq!(again.stream().as_raw(), l0.stream().as_raw());
        Ok(7)
    })
    .unwrap();
    assert_eq!(v, 7);
    let (pa, po, po2) = (a.as_raw(), out.as_raw(), out2.as_raw());
    assert_eq!(
        take_log(),
        [
            format!(
                "cuLaunchKernel scale({pa:#x}+256, {po:#x}+256, 2) grid 2 block 128 on {:#x}",
                raw(0)
            ),
            format!(
                "cuLaunchKernel scale({pa:#x}+256, {po2:#x}+256, 3) grid 2 block 128 on {:#x}",
                raw(1)
            ),
            format!("sync {:#x}", raw(0)),
            format!("sync {:#x}", raw(1)),
        ]
    );
    // A scope with no lane waits for nothing.
    kernel::scope(ctx, |_| Ok(())).unwrap();
    assert!(take_log().is_empty());
}

fn refusals(
    ctx: &Context,
    scale: &TypedKernel<scale>,
    follow: &TypedKernel<follow>,
    streams: &[Stream],
) {
    let a = DeviceBuffer::<f32>::new(ctx, 64).unwrap();
    // One output per refused launch: each borrows its buffer for the whole scope.
    let mut outs: Vec<DeviceBuffer<f32>> = (0..2)
        .map(|_| DeviceBuffer::new(ctx, 64).unwrap())
        .collect();
    let mut flags = DeviceBuffer::<u32>::new(ctx, 64).unwrap();
    let legacy = Stream::legacy(ctx);
    take_log();
    let r = kernel::scope(ctx, |s| {
        // A default stream cannot be a lane.
        invalid(s.lane(&legacy).map(drop), "default stream");
        let lane = s.lane(&streams[0])?;
        let [o2, o3] = &mut outs[..] else {
            unreachable!()
        };
        // A configuration naming another stream.
        invalid(
            lane.launch(
                scale,
                &LaunchConfig::new(1, 64).stream(&streams[1]),
                (&a, o2, 1.0f32),
            ),
            "another stream",
        );
        // PDL for a kernel that does not wait for its predecessor.
        let pdl = LaunchConfig::new(1, 64).programmatic_stream_serialization()?;
        invalid(
            lane.launch(scale, &pdl, (&a, o3, 1.0f32)),
            "not declared `dependent`",
        );
        // ... and accepted for one that does.
        lane.launch(follow, &pdl, (&mut flags,))?;
        // More lanes than MAX_LANES.
        for s2 in &streams[1..MAX_LANES] {
            s.lane(s2)?;
        }
        invalid(s.lane(&streams[MAX_LANES]).map(drop), "MAX_LANES");
        Ok(())
    });
    r.unwrap();
    let log = take_log();
    let launches: Vec<&String> = log.iter().filter(|l| l.starts_with("cuLaunch")).collect();
    assert_eq!(
        launches,
        [&format!(
            "cuLaunchKernelEx follow({:#x}+64) on {:#x} attrs [{}]",
            flags.as_raw(),
            streams[0].as_raw().addr(),
            cudadrv_sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
                .0
        )],
        "only the accepted launch reaches the driver"
    );
    // Every one of the MAX_LANES lanes is waited for, once.
    assert_eq!(
        log.iter().filter(|l| l.starts_with("sync")).count(),
        MAX_LANES
    );
}

fn panics_and_leaks(
    ctx: &Context,
    scale: &TypedKernel<scale>,
    streams: &[Stream],
    raw: &dyn Fn(usize) -> usize,
) {
    let a = DeviceBuffer::<f32>::new(ctx, 32).unwrap();
    let mut out = DeviceBuffer::<f32>::new(ctx, 32).unwrap();
    take_log();
    // A panic in the closure: the lanes are waited for while it unwinds, before
    // `catch_unwind` returns (and before the buffers could be dropped).
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = kernel::scope(ctx, |s| {
            let lane = s.lane(&streams[2])?;
            lane.launch(scale, &LaunchConfig::new(1, 32), (&a, &mut out, 1.0f32))?;
            panic!("the closure panics after a launch");
            #[allow(unreachable_code)]
            Ok(())
        });
    }));
    assert!(caught.is_err());
    let log = take_log();
    assert_eq!(log.len(), 2, "{log:?}");
    assert!(log[0].starts_with("cuLaunchKernel scale"));
    assert_eq!(log[1], format!("sync {:#x}", raw(2)));
}

fn hand_over_between_lanes(
    ctx: &Context,
    scale: &TypedKernel<scale>,
    streams: &[Stream],
    raw: &dyn Fn(usize) -> usize,
) {
    let a = DeviceBuffer::<f32>::new(ctx, 64).unwrap();
    let mut shared = DeviceBuffer::<f32>::new(ctx, 64).unwrap();
    let ps = shared.as_raw();
    let mut event = Event::new(ctx, EventFlags::DISABLE_TIMING).unwrap();
    let e = event.as_raw().addr();
    take_log();
    kernel::scope(ctx, |s| {
        let (l0, l1) = (s.lane(&streams[0])?, s.lane(&streams[1])?);
        let mut owned = l0.own(&mut shared)?;
        let cfg = LaunchConfig::new(1, 64);
        l0.launch(scale, &cfg, (&a, &mut owned, 1.0f32))?;
        // On the other lane before the hand-over: refused.
        assert!(matches!(
            l1.launch(scale, &cfg, (&a, &mut owned, 1.0f32)),
            Err(Error::InvalidArgument(_))
        ));
        // Handing over from a lane it is not bound to: refused.
        invalid(l1.hand_over(&mut owned, &l0, &mut event), "another lane");
        l0.hand_over(&mut owned, &l1, &mut event)?;
        assert_eq!(owned.lane_stream().addr(), raw(1));
        l1.launch(scale, &cfg, (&a, &mut owned, 2.0f32))?;
        // And now the first lane may not use it.
        assert!(matches!(
            l0.launch(scale, &cfg, (&a, &mut owned, 1.0f32)),
            Err(Error::InvalidArgument(_))
        ));
        Ok(())
    })
    .unwrap();
    let pa = a.as_raw();
    assert_eq!(
        take_log(),
        [
            format!(
                "cuLaunchKernel scale({pa:#x}+64, {ps:#x}+64, 1) grid 1 block 64 on {:#x}",
                raw(0)
            ),
            format!("record {e:#x} on {:#x}", raw(0)),
            format!("wait {:#x} for {e:#x}", raw(1)),
            format!(
                "cuLaunchKernel scale({pa:#x}+64, {ps:#x}+64, 2) grid 1 block 64 on {:#x}",
                raw(1)
            ),
            format!("sync {:#x}", raw(0)),
            format!("sync {:#x}", raw(1)),
        ]
    );
}

fn a_failed_wait_is_returned(
    ctx: &Context,
    scale: &TypedKernel<scale>,
    streams: &[Stream],
    raw: &dyn Fn(usize) -> usize,
) {
    let a = DeviceBuffer::<f32>::new(ctx, 16).unwrap();
    let mut out = DeviceBuffer::<f32>::new(ctx, 16).unwrap();
    FAILING.store(raw(4), Ordering::Relaxed);
    take_log();
    let r = kernel::scope(ctx, |s| {
        s.lane(&streams[4])?
            .launch(scale, &LaunchConfig::new(1, 16), (&a, &mut out, 1.0f32))?;
        s.lane(&streams[5])?;
        Ok(())
    });
    FAILING.store(0, Ordering::Relaxed);
    let e = r.unwrap_err();
    assert!(e.is(CUresult::CUDA_ERROR_LAUNCH_FAILED), "{e}");
    let log = take_log();
    // Both lanes are still waited for, then the context.
    assert_eq!(
        log[1..],
        [
            format!("sync {:#x}", raw(4)),
            format!("sync {:#x}", raw(5)),
            "cuCtxSynchronize".to_string(),
        ]
    );
}
