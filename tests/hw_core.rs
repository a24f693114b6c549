//! Hardware tests of cuda-core's RAII handles: device, context, module (PTX, JIT log),
//! linker (libcudadevrt), function (attributes, parameter layout, occupancy), stream,
//! event, memory (device, pinned, stream-ordered, pools), limits, and runtime interop.
//!
//! Kernels come from `ptx/generated/kernels.ptx`; launches use the raw `cuLaunchKernel`
//! with the handles' `as_raw()` (the launch API is tested in hw_launch).

use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use cuda_workspace::{
    TestResult, check, check_eq, cudadevrt_path, hw_tests, ptx, require_gpu, require_sm, run_suite,
    skip,
};
use cudadrv::{
    AsyncDeviceBuffer, ClusterConfig, Context, Device, DeviceBuffer, Error, Event, EventFlags,
    Function, JitOptions, Linker, MemPool, Module, PinnedHostBuffer, Stream, StreamFlags,
};
use cudadrv_sys::{CUdevice_attribute, CUresult};

fn main() {
    run_suite(
        "hw_core",
        hw_tests![
            device_enumeration_and_attributes,
            primary_context,
            module_from_ptx_and_globals,
            bad_ptx_returns_the_jit_error_log,
            function_attributes_and_param_info,
            function_occupancy_and_clusters,
            vec_add_through_raw_launch,
            out_of_memory_is_an_error,
            device_buffer_copies_and_memsets,
            stream_priorities,
            host_functions_run_in_order_once,
            events_time_a_kernel,
            pinned_memory_async_copies,
            stream_ordered_allocation_and_pools,
            device_runtime_limits,
            linker_with_cudadevrt,
            runtime_interop_on_core_handles,
        ],
    );
}

fn ctx() -> Result<Context, Error> {
    Context::primary(Device::get(0)?)
}

/// Launches `vec_add(a, b, c, n)` with the raw driver call on `stream`.
fn launch_vec_add(
    f: &Function,
    a: &DeviceBuffer<f32>,
    b: &DeviceBuffer<f32>,
    c: &mut DeviceBuffer<f32>,
    stream: &Stream,
) -> TestResult {
    let n = u32::try_from(c.len()).map_err(|_| "n too large")?;
    let (mut pa, mut pb, mut pc, mut pn) = (a.as_raw(), b.as_raw(), c.as_raw(), n);
    let mut params: [*mut c_void; 4] = [
        (&raw mut pa).cast(),
        (&raw mut pb).cast(),
        (&raw mut pc).cast(),
        (&raw mut pn).cast(),
    ];
    let cu = cudadrv_sys::driver()?;
    let grid = n.div_ceil(256).clamp(1, 132 * 8);
    // SAFETY: vec_add takes (f32*, f32*, f32*, u32); params points at four values of
    // those types that outlive the call; the buffers hold n floats each.
    let rc = unsafe {
        cu.cuLaunchKernel()?(
            f.as_raw(),
            grid,
            1,
            1,
            256,
            1,
            1,
            0,
            stream.as_raw(),
            params.as_mut_ptr(),
            std::ptr::null_mut(),
        )
    };
    check(rc.is_success(), || {
        format!("cuLaunchKernel(vec_add, n={n}) failed: {rc}")
    })
}

fn device_enumeration_and_attributes() -> TestResult {
    let g = require_gpu()?;
    let n = Device::count()?;
    check_eq(n as i32, g.count, "Device::count vs cuDeviceGetCount")?;
    for i in 0..n {
        let d = Device::get(i)?;
        let name = d.name()?;
        check(!name.is_empty(), || format!("device {i} has an empty name"))?;
        let uuid = d.uuid()?;
        check(uuid != [0; 16], || {
            format!("device {i} ({name}) has an all-zero UUID")
        })?;
        check(d.total_memory()? > 1 << 30, || {
            format!("device {i} reports under 1 GiB")
        })?;
    }
    check(
        Device::get(n).is_err_and(|e| e.is(CUresult::CUDA_ERROR_INVALID_DEVICE)),
        || format!("Device::get({n}) past the last device should be CUDA_ERROR_INVALID_DEVICE"),
    )?;
    let d = Device::get(0)?;
    check_eq(d.compute_capability()?, g.cc, "compute capability")?;
    check_eq(d.name()?.as_str(), g.name.as_str(), "device 0 name")?;
    let sms = d.multiprocessor_count()?;
    check(sms > 0, || "zero SMs".into())?;
    check_eq(d.max_threads_per_block()?, 1024, "max threads per block")?;
    check(d.max_shared_memory_per_block_optin()? > 48 * 1024, || {
        "opt-in shared memory <= 48 KiB".into()
    })?;
    check_eq(
        d.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32,
        sms,
        "raw vs typed SM count",
    )?;
    if g.cc >= (9, 0) {
        check(d.supports_cluster_launch()?, || {
            "sm_90 without cluster launch".into()
        })?;
        check(d.supports_cooperative_launch()?, || {
            "sm_90 without cooperative launch".into()
        })?;
        check(d.supports_memory_pools()?, || {
            "sm_90 without memory pools".into()
        })?;
        println!(
            "    {}: {sms} SMs, opt-in smem {} B",
            g.name,
            d.max_shared_memory_per_block_optin()?
        );
    }
    Ok(())
}

fn primary_context() -> TestResult {
    require_gpu()?;
    let ctx = ctx()?;
    check(ctx.is_current()?, || {
        "Context::primary did not make the context current".into()
    })?;
    check(ctx.is_primary()?, || {
        "Context::primary is not the device's primary context".into()
    })?;
    check_eq(Context::current_raw()?, ctx.as_raw(), "cuCtxGetCurrent")?;
    let _flags = ctx.flags()?;
    let r = ctx.stream_priority_range()?;
    check(r.greatest <= r.least, || {
        format!("priority range {r:?}: greatest > least")
    })?;
    ctx.synchronize()?;
    // A second retain of the same primary context is the same handle.
    let again = Context::primary(Device::get(0)?)?;
    check_eq(
        again.as_raw(),
        ctx.as_raw(),
        "second Context::primary handle",
    )?;
    drop(again);
    // Bind on another thread.
    let raw = ctx.as_raw() as usize;
    let ok = std::thread::scope(|s| {
        s.spawn(|| -> Result<bool, Error> {
            let before = Context::current_raw()? as usize;
            ctx.bind()?;
            Ok(before != raw && ctx.is_current()?)
        })
        .join()
    })
    .map_err(|_| "bind thread panicked")??;
    check(ok, || {
        "Context::bind on a fresh thread did not make the context current".into()
    })
}

/// PTX with a global for `Module::global`.
const GLOBAL_PTX: &str = ".version 8.0\n.target sm_90\n.address_size 64\n\
.visible .global .align 4 .u32 counter = 7;\n\
.visible .entry bump()\n{\n\t.reg .b32 %r<2>;\n\tld.global.u32 %r1, [counter];\n\tadd.u32 %r1, %r1, 1;\n\tst.global.u32 [counter], %r1;\n\tret;\n}\n";

fn module_from_ptx_and_globals() -> TestResult {
    require_sm(9, 0)?;
    let ctx = ctx()?;
    let module = Module::from_ptx(&ctx, ptx::KERNELS)?;
    check(module.function_count()? >= 1, || {
        "kernels.ptx loaded with no functions".into()
    })?;
    module.function("vec_add")?;
    let missing = module.function("no_such_kernel");
    check(
        missing.as_ref().is_err_and(|e| {
            e.is(CUresult::CUDA_ERROR_NOT_FOUND) && e.to_string().contains("\"no_such_kernel\"")
        }),
        || format!("missing kernel: expected CUDA_ERROR_NOT_FOUND naming it, got {missing:?}"),
    )?;
    // Info log into a caller buffer.
    let mut info = vec![0u8; 4096];
    let opts = JitOptions {
        info_log: Some(&mut info),
        log_verbose: true,
        ..JitOptions::default()
    };
    let m2 = Module::from_ptx_with(&ctx, GLOBAL_PTX, opts)?;
    let g = m2.global("counter")?;
    check_eq(g.size, 4, "size of `counter`")?;
    let mut v = 0u32;
    let cu = cudadrv_sys::driver()?;
    // SAFETY: `counter` is 4 bytes of device memory; `v` is 4 writable bytes.
    let rc = unsafe { cu.cuMemcpyDtoH()?((&raw mut v).cast(), g.ptr, 4) };
    check(rc.is_success(), || {
        format!("cuMemcpyDtoH of `counter`: {rc}")
    })?;
    check_eq(v, 7, "initial value of `counter`")?;
    let info_len = info.iter().position(|&b| b == 0).unwrap_or(0);
    println!(
        "    JIT info log: {:?}",
        String::from_utf8_lossy(&info[..info_len.min(200)])
    );
    Ok(())
}

fn bad_ptx_returns_the_jit_error_log() -> TestResult {
    require_gpu()?;
    let ctx = ctx()?;
    let bad = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry broken()\n{\n\tthis_is_not_an_instruction %r1;\n\tret;\n}\n";
    let e = match Module::from_ptx(&ctx, bad) {
        Ok(_) => return Err("bad PTX loaded without an error".into()),
        Err(e) => e,
    };
    check(matches!(e, Error::Jit { .. }), || {
        format!("expected Error::Jit, got {e:?}")
    })?;
    check(e.is(CUresult::CUDA_ERROR_INVALID_PTX), || {
        format!("expected CUDA_ERROR_INVALID_PTX: {e}")
    })?;
    let log = e.jit_log().unwrap_or_default();
    check(!log.is_empty(), || {
        format!("empty JIT error log; error: {e}")
    })?;
    let lower = log.to_lowercase();
    check(lower.contains("ptxas") || lower.contains("error"), || {
        format!("JIT log mentions no error: {log:?}")
    })?;
    check(e.to_string().contains(log.trim_end()), || {
        format!("Display lacks the log: {e}")
    })?;
    println!(
        "    JIT error log: {}",
        log.lines().next().unwrap_or_default()
    );
    Ok(())
}

fn function_attributes_and_param_info() -> TestResult {
    require_sm(9, 0)?;
    let ctx = ctx()?;
    let module = Module::from_ptx(&ctx, ptx::KERNELS)?;
    let f = module.function("vec_add")?;
    check_eq(f.param_count()?, 4, "vec_add parameter count")?;
    let layout: Vec<(usize, usize)> = (0..4).map(|i| f.param_info(i)).collect::<Result<_, _>>()?;
    check_eq(
        layout,
        vec![(0, 8), (8, 8), (16, 8), (24, 4)],
        "vec_add (offset, size) per parameter",
    )?;
    // Past the last parameter: a function that has not learned its count yet asks the
    // driver, which refuses; once `param_count` has cached the count, cuda-core refuses
    // without a driver call.
    let fresh = module.function("vec_add")?;
    let past = fresh.param_info(4);
    check(
        past.as_ref()
            .is_err_and(|e| e.is(CUresult::CUDA_ERROR_INVALID_VALUE)),
        || format!("param_info(4), count unknown: expected CUDA_ERROR_INVALID_VALUE, got {past:?}"),
    )?;
    let past = f.param_info(4);
    check(matches!(past, Err(Error::InvalidArgument(_))), || {
        format!("param_info(4), count cached: expected Error::InvalidArgument, got {past:?}")
    })?;
    let buf = DeviceBuffer::<f32>::new(&ctx, 1)?;
    let packed = cudadrv::args::PackedArgs::<4096>::from_args(&(
        buf.as_arg(),
        buf.as_arg(),
        buf.as_arg(),
        1u32,
    ))?;
    f.verify_params(&packed)?;
    check(f.num_regs()? > 0, || "vec_add uses no registers?".into())?;
    check(f.max_threads_per_block()? >= 256, || {
        "vec_add max threads per block < 256".into()
    })?;
    let optin = Device::get(0)?.max_shared_memory_per_block_optin()?;
    let static_smem = f.static_shared_size_bytes()?;
    let want = optin - static_smem;
    f.set_max_dynamic_shared_size_bytes(want)?;
    check_eq(
        f.max_dynamic_shared_size_bytes()?,
        want,
        "max dynamic shared memory after opt-in",
    )?;
    check_eq(
        f.required_cluster_dims()?,
        [0, 0, 0],
        "vec_add compile-time cluster dims",
    )?;
    // The carveout preference reads back as set; a percentage above 100 is refused
    // before the driver.
    f.set_preferred_shared_memory_carveout(100)?;
    check_eq(
        f.attribute(
            cudadrv_sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
        )?,
        100,
        "preferred shared memory carveout after setting 100",
    )?;
    let refused = f.set_preferred_shared_memory_carveout(101);
    check(matches!(refused, Err(Error::InvalidArgument(_))), || {
        format!("carveout 101: expected Error::InvalidArgument, got {refused:?}")
    })?;
    Ok(())
}

fn function_occupancy_and_clusters() -> TestResult {
    require_sm(9, 0)?;
    let ctx = ctx()?;
    let module = Module::from_ptx(&ctx, ptx::KERNELS)?;
    let f = module.function("vec_add")?;
    f.set_max_dynamic_shared_size_bytes(0)?;
    let blocks = f.max_active_blocks_per_sm(256, 0)?;
    check(blocks >= 1, || {
        format!("max active blocks per SM = {blocks}")
    })?;
    let cfg = ClusterConfig {
        grid: [64, 1, 1],
        block: [128, 1, 1],
        cluster: [2, 1, 1],
        shared_mem_bytes: 0,
    };
    let size = f.max_potential_cluster_size(&cfg)?;
    check(size >= 2, || format!("max potential cluster size = {size}"))?;
    let clusters = f.max_active_clusters(&cfg)?;
    check(clusters >= 1, || {
        format!("max active clusters of 2 = {clusters}")
    })?;
    f.set_non_portable_cluster_size_allowed(true)?;
    let np = f.max_potential_cluster_size(&cfg)?;
    check(np >= size, || {
        format!("non-portable cluster size {np} < portable {size}")
    })?;
    println!(
        "    vec_add: {blocks} blocks/SM at 256 thr, cluster size {size} (non-portable {np}), {clusters} clusters of 2"
    );
    Ok(())
}

fn vec_add_through_raw_launch() -> TestResult {
    require_sm(9, 0)?;
    let ctx = ctx()?;
    let module = Module::from_ptx(&ctx, ptx::KERNELS)?;
    let f = module.function("vec_add")?;
    let stream = Stream::non_blocking(&ctx)?;
    let n = 100_003usize;
    let a: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let b: Vec<f32> = (0..n).map(|i| 2.0 * i as f32 + 0.5).collect();
    let (da, db) = (
        DeviceBuffer::from_slice(&ctx, &a)?,
        DeviceBuffer::from_slice(&ctx, &b)?,
    );
    let mut dc = DeviceBuffer::<f32>::zeroed(&ctx, n)?;
    launch_vec_add(&f, &da, &db, &mut dc, &stream)?;
    stream.synchronize()?;
    let mut c = vec![0.0f32; n];
    dc.copy_to_host(&mut c)?;
    if let Some(i) = (0..n).find(|&i| c[i] != a[i] + b[i]) {
        return Err(format!("c[{i}] = {} != {} + {}", c[i], a[i], b[i]).into());
    }
    Ok(())
}

fn out_of_memory_is_an_error() -> TestResult {
    require_gpu()?;
    let ctx = ctx()?;
    let e = match DeviceBuffer::<u8>::new(&ctx, 1 << 50) {
        Ok(_) => return Err("a 1 PiB cuMemAlloc succeeded".into()),
        Err(e) => e,
    };
    check(e.is(CUresult::CUDA_ERROR_OUT_OF_MEMORY), || {
        format!("expected CUDA_ERROR_OUT_OF_MEMORY, got {e}")
    })?;
    check_eq(e.call(), Some("cuMemAlloc"), "failed call")?;
    check(e.to_string().contains("CUDA_ERROR_OUT_OF_MEMORY"), || {
        format!("Display: {e}")
    })?;
    // The context still works.
    let b = DeviceBuffer::<u8>::zeroed(&ctx, 1024)?;
    drop(b);
    ctx.synchronize()?;
    Ok(())
}

fn device_buffer_copies_and_memsets() -> TestResult {
    require_gpu()?;
    let ctx = ctx()?;
    let src: Vec<u32> = (0..1000).collect();
    let a = DeviceBuffer::from_slice(&ctx, &src)?;
    let mut b = DeviceBuffer::<u32>::new(&ctx, src.len())?;
    b.copy_from_device(&a)?;
    let mut back = vec![0u32; src.len()];
    b.copy_to_host(&mut back)?;
    check_eq(&back, &src, "HtoD, DtoD, DtoH round trip")?;
    b.memset_d32(0xDEAD_BEEF)?;
    b.copy_to_host(&mut back)?;
    check(back.iter().all(|&v| v == 0xDEAD_BEEF), || {
        "memset_d32".into()
    })?;
    b.memset_d8(0xAB)?;
    b.copy_to_host(&mut back)?;
    check(back.iter().all(|&v| v == 0xABAB_ABAB), || {
        "memset_d8".into()
    })?;
    let wrong = b.copy_to_host(&mut back[..10]);
    check(
        matches!(
            wrong,
            Err(Error::LengthMismatch {
                expected: 1000,
                found: 10
            })
        ),
        || format!("length mismatch: {wrong:?}"),
    )?;
    let mut empty = DeviceBuffer::<u32>::new(&ctx, 0)?;
    empty.copy_from_host(&[])?;
    empty.copy_to_host(&mut [])?;
    empty.memset_d32(1)?;
    check_eq(empty.as_raw(), 0, "empty buffer pointer")?;
    let mut odd = DeviceBuffer::<u8>::new(&ctx, 3)?;
    check(odd.memset_d32(0).is_err(), || {
        "memset_d32 of 3 bytes should fail".into()
    })?;
    odd.memset_d8(1)?;
    Ok(())
}

fn stream_priorities() -> TestResult {
    require_gpu()?;
    let ctx = ctx()?;
    let r = ctx.stream_priority_range()?;
    let hi = Stream::with_priority(&ctx, StreamFlags::NON_BLOCKING, r.greatest)?;
    let lo = Stream::with_priority(&ctx, StreamFlags::empty(), r.least)?;
    check_eq(hi.priority()?, r.greatest, "greatest-priority stream")?;
    check_eq(lo.priority()?, r.least, "least-priority stream")?;
    check_eq(
        hi.flags()?,
        StreamFlags::NON_BLOCKING,
        "flags of the non-blocking stream",
    )?;
    check_eq(
        lo.flags()?,
        StreamFlags::empty(),
        "flags of the default-flag stream",
    )?;
    check(hi.query()? && lo.query()?, || {
        "idle streams not ready".into()
    })?;
    println!(
        "    priority range: least {} greatest {}",
        r.least, r.greatest
    );
    Ok(())
}

struct DropCount(Arc<AtomicUsize>);
impl Drop for DropCount {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn host_functions_run_in_order_once() -> TestResult {
    require_gpu()?;
    let ctx = ctx()?;
    let stream = Stream::non_blocking(&ctx)?;
    let order = Arc::new(Mutex::new(Vec::new()));
    let (runs, drops) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    // Hold the stream behind a small device memset so the host functions queue up.
    let mut buf = DeviceBuffer::<u32>::new(&ctx, 1 << 20)?;
    buf.memset_d32_async(0, &stream)?;
    for i in 1..=3 {
        let (order, runs, guard) = (order.clone(), runs.clone(), DropCount(drops.clone()));
        stream.launch_host_fn(move || {
            let _keep = &guard;
            runs.fetch_add(1, Ordering::SeqCst);
            order.lock().map(|mut v| v.push(i)).ok();
        })?;
    }
    stream.synchronize()?;
    check_eq(
        order.lock().map(|v| v.clone()).unwrap_or_default(),
        vec![1, 2, 3],
        "host function order",
    )?;
    check_eq(runs.load(Ordering::SeqCst), 3, "host functions run")?;
    check_eq(
        drops.load(Ordering::SeqCst),
        3,
        "host-function closures freed",
    )?;
    Ok(())
}

fn events_time_a_kernel() -> TestResult {
    require_sm(9, 0)?;
    let ctx = ctx()?;
    let module = Module::from_ptx(&ctx, ptx::KERNELS)?;
    let f = module.function("vec_add")?;
    let stream = Stream::non_blocking(&ctx)?;
    let n = 1 << 24;
    let (a, b) = (
        DeviceBuffer::<f32>::zeroed(&ctx, n)?,
        DeviceBuffer::<f32>::zeroed(&ctx, n)?,
    );
    let mut c = DeviceBuffer::<f32>::new(&ctx, n)?;
    let start = Event::new(&ctx, EventFlags::empty())?;
    let end = Event::new(&ctx, EventFlags::BLOCKING_SYNC)?;
    start.record(&stream)?;
    for _ in 0..10 {
        launch_vec_add(&f, &a, &b, &mut c, &stream)?;
    }
    end.record(&stream)?;
    end.synchronize()?;
    check(end.query()?, || "event not ready after synchronize".into())?;
    let ms = Event::elapsed_ms(&start, &end)?;
    check(ms > 0.0, || format!("elapsed {ms} ms"))?;
    // Cross-stream wait on the event.
    let mut other = Stream::non_blocking(&ctx)?;
    other.wait_event(&end)?;
    other.synchronize()?;
    let untimed = Event::new(&ctx, EventFlags::DISABLE_TIMING)?;
    untimed.record(&stream)?;
    untimed.synchronize()?;
    let e = Event::elapsed_ms(&start, &untimed);
    check(
        e.as_ref()
            .is_err_and(|e| e.is(CUresult::CUDA_ERROR_INVALID_HANDLE)),
        || {
            format!(
                "elapsed time to a DISABLE_TIMING event: expected CUDA_ERROR_INVALID_HANDLE, got {e:?}"
            )
        },
    )?;
    println!("    10 x vec_add over 16M floats: {ms:.3} ms");
    Ok(())
}

fn pinned_memory_async_copies() -> TestResult {
    require_gpu()?;
    let ctx = ctx()?;
    let stream = Stream::non_blocking(&ctx)?;
    let n = 1 << 20;
    let src: Vec<u32> = (0..n as u32)
        .map(|i| i.wrapping_mul(2_654_435_761))
        .collect();
    let host_in = PinnedHostBuffer::from_slice(&ctx, &src)?;
    let mut host_out = PinnedHostBuffer::<u32>::zeroed(&ctx, n)?;
    let mut dev = DeviceBuffer::<u32>::new(&ctx, n)?;
    // SAFETY: both pinned buffers outlive the synchronize below and are not touched
    // until then.
    unsafe {
        dev.copy_from_host_async(&host_in, &stream)?;
        dev.copy_to_host_async(&mut host_out, &stream)?;
    }
    stream.synchronize()?;
    check(host_out[..] == src[..], || {
        "pinned HtoD + DtoH round trip differs".into()
    })?;
    dev.memset_d32_async(7, &stream)?;
    // SAFETY: as above.
    unsafe { dev.copy_to_host_async(&mut host_out, &stream)? };
    stream.synchronize()?;
    check(host_out.iter().all(|&v| v == 7), || {
        "memset_d32_async result".into()
    })?;
    let mut dev2 = DeviceBuffer::<u32>::new(&ctx, n)?;
    dev2.copy_from_device_async(&dev, &stream)?;
    dev2.memset_d8_async(0, &stream)?;
    stream.synchronize()?;
    Ok(())
}

fn stream_ordered_allocation_and_pools() -> TestResult {
    require_gpu()?;
    let ctx = ctx()?;
    if !ctx.device().supports_memory_pools()? {
        return skip("device without memory pools");
    }
    let stream = Stream::non_blocking(&ctx)?;
    let pool = MemPool::new(&ctx)?;
    pool.set_release_threshold(u64::MAX)?;
    check_eq(pool.release_threshold()?, u64::MAX, "release threshold")?;
    let n = 1 << 20;
    let mut host = vec![0u32; n];
    {
        let mut buf = pool.alloc_async::<u32>(&stream, n)?;
        buf.memset_d32_async(0x1234_5678)?;
        // SAFETY: `host` outlives the synchronize below and is untouched until then.
        unsafe { buf.copy_to_host_async(&mut host)? };
        stream.synchronize()?;
        check(host.iter().all(|&v| v == 0x1234_5678), || {
            "pool allocation memset".into()
        })?;
        let used = pool.used_mem_current()?;
        check(used >= (n * 4) as u64, || {
            format!("used_mem_current {used} < {}", n * 4)
        })?;
    }
    stream.synchronize()?;
    check_eq(pool.used_mem_current()?, 0, "used after cuMemFreeAsync")?;
    check(pool.reserved_mem_current()? >= (n * 4) as u64, || {
        "threshold u64::MAX keeps memory reserved".into()
    })?;
    check(pool.used_mem_high()? >= (n * 4) as u64, || {
        "used_mem_high".into()
    })?;
    pool.trim_to(0)?;
    // The default pool via cuMemAllocAsync.
    let default = MemPool::default_for(&ctx)?;
    let _threshold = default.release_threshold()?;
    let mut buf = AsyncDeviceBuffer::<u32>::new(&stream, n)?;
    buf.memset_d32_async(9)?;
    // SAFETY: as above.
    unsafe { buf.copy_to_host_async(&mut host)? };
    drop(buf);
    stream.synchronize()?;
    check(host.iter().all(|&v| v == 9), || {
        "default-pool allocation memset".into()
    })?;
    let empty = AsyncDeviceBuffer::<u32>::new(&stream, 0)?;
    check_eq(empty.as_raw(), 0, "empty stream-ordered buffer")?;
    Ok(())
}

fn device_runtime_limits() -> TestResult {
    let g = require_gpu()?;
    let ctx = ctx()?;
    let named = |what: &'static str| move |e: Error| format!("{what}: {e}");
    // Device-side cudaDeviceSynchronize is gone on sm_90+, and with it the sync-depth limit.
    let sync_depth = ctx.dev_runtime_sync_depth();
    if g.cc >= (9, 0) {
        let unsupported = |r: &Result<_, Error>| {
            r.as_ref()
                .is_err_and(|e| e.is(CUresult::CUDA_ERROR_UNSUPPORTED_LIMIT))
        };
        check(unsupported(&sync_depth), || {
            format!(
                "CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH get on sm_90+: expected CUDA_ERROR_UNSUPPORTED_LIMIT, got {sync_depth:?}"
            )
        })?;
        let set = ctx.set_dev_runtime_sync_depth(4);
        check(unsupported(&set.map(|()| 0usize)), || {
            "CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH set on sm_90+: expected CUDA_ERROR_UNSUPPORTED_LIMIT"
                .into()
        })?;
    } else {
        let depth0 = sync_depth.map_err(named("get CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH"))?;
        ctx.set_dev_runtime_sync_depth(4)
            .map_err(named("set CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH"))?;
        check_eq(ctx.dev_runtime_sync_depth()?, 4, "dev runtime sync depth")?;
        ctx.set_dev_runtime_sync_depth(depth0)?;
    }
    let pending0 = ctx
        .dev_runtime_pending_launch_count()
        .map_err(named("get CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT"))?;
    ctx.set_dev_runtime_pending_launch_count(4096)
        .map_err(named("set CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT"))?;
    let pending = ctx.dev_runtime_pending_launch_count()?;
    check(pending >= 4096, || {
        format!("pending launch count {pending} after setting 4096")
    })?;
    let heap = ctx
        .malloc_heap_size()
        .map_err(named("get CU_LIMIT_MALLOC_HEAP_SIZE"))?;
    ctx.set_malloc_heap_size(16 << 20)
        .map_err(named("set CU_LIMIT_MALLOC_HEAP_SIZE"))?;
    let heap_now = ctx.malloc_heap_size()?;
    check(heap_now >= 16 << 20, || {
        format!("malloc heap {heap_now} after setting 16 MiB")
    })?;
    let stack = ctx.stack_size().map_err(named("get CU_LIMIT_STACK_SIZE"))?;
    ctx.set_stack_size(4096)
        .map_err(named("set CU_LIMIT_STACK_SIZE"))?;
    let stack_now = ctx.stack_size()?;
    check(stack_now >= 4096, || {
        format!("stack size {stack_now} after setting 4096")
    })?;
    ctx.set_stack_size(stack)?;
    ctx.set_malloc_heap_size(heap)?;
    ctx.set_dev_runtime_pending_launch_count(pending0)?;
    println!("    defaults: pending launches {pending0}, heap {heap}, stack {stack}");
    Ok(())
}

fn linker_with_cudadevrt() -> TestResult {
    require_sm(9, 0)?;
    let Some(devrt) = cudadevrt_path() else {
        return skip(
            "libcudadevrt.a not found under CUDA_PATH, CUDA_HOME or /usr/local/cuda/lib64",
        );
    };
    let ctx = ctx()?;
    // Unresolved device-runtime calls without the library: an error with a log.
    let mut linker = Linker::new(&ctx, JitOptions::default())?;
    linker.add_ptx(ptx::DEVRT, "devrt.ptx")?;
    match linker.complete() {
        Ok(_) => return Err("linking devrt.ptx without libcudadevrt.a succeeded".into()),
        Err(e) => {
            let log = e.jit_log().unwrap_or_default().to_string();
            check(!log.is_empty(), || format!("link error without a log: {e}"))?;
            println!(
                "    expected link error: {}",
                log.lines().next().unwrap_or_default()
            );
        }
    }
    drop(linker);
    let mut linker = Linker::new(&ctx, JitOptions::default())?;
    linker.add_ptx(ptx::DEVRT, "devrt.ptx")?;
    linker.add_library_file(devrt.to_str().ok_or("non-UTF-8 path")?)?;
    let module = linker.into_module()?;
    module.function("dyn_parent")?;
    // The same library through add_library (bytes).
    let bytes = std::fs::read(&devrt).map_err(|e| format!("read {}: {e}", devrt.display()))?;
    let mut linker = Linker::new(&ctx, JitOptions::default())?;
    linker.add_ptx(ptx::DEVRT, "devrt.ptx")?;
    linker.add_library(&bytes, "libcudadevrt.a")?;
    let cubin = linker.complete()?.to_vec();
    check(cubin.starts_with(b"\x7fELF"), || {
        "linked output is not an ELF cubin".into()
    })?;
    let m2 = Module::from_image(&ctx, &cubin)?;
    m2.function("dyn_parent")?;
    check(
        Module::from_image(&ctx, &cubin[..cubin.len() / 2]).is_err(),
        || "a truncated cubin was accepted".into(),
    )?;
    Ok(())
}

fn runtime_interop_on_core_handles() -> TestResult {
    require_gpu()?;
    let rt = match cudadrv_sys::runtime() {
        Ok(rt) => rt,
        Err(e) => return skip(format!("libcudart not loadable: {e}")),
    };
    let ctx = ctx()?;
    let stream = Stream::non_blocking(&ctx)?;
    let n = 1 << 16;
    let mut buf = DeviceBuffer::<u8>::zeroed(&ctx, n)?;
    // SAFETY: cudaSetDevice/cudaGetDevice take plain values and a valid out-pointer.
    unsafe {
        let rc = rt.cudaSetDevice()?(ctx.device().as_raw());
        check(rc.is_success(), || format!("cudaSetDevice: {rc}"))?;
    }
    // The runtime uses the primary context: after its initialization, the current
    // context is still ours.
    check_eq(
        Context::current_raw()?,
        ctx.as_raw(),
        "context current after cudaSetDevice (runtime = primary)",
    )?;
    // SAFETY: `buf` holds n bytes in this (primary) context; the stream is live.
    unsafe {
        let rc = rt.cudaMemsetAsync()?(buf.as_raw() as *mut c_void, 0x5A, n, stream.as_raw());
        check(rc.is_success(), || {
            format!("cudaMemsetAsync on a cuda-core stream and buffer: {rc}")
        })?;
    }
    stream.synchronize()?;
    let mut host = vec![0u8; n];
    buf.copy_to_host(&mut host)?;
    check(host.iter().all(|&b| b == 0x5A), || {
        "cudaMemsetAsync result not seen through cuda-core".into()
    })?;
    // And the other way: a cuda-core memset seen by cudaMemcpyAsync.
    buf.memset_d8_async(0x33, &stream)?;
    // SAFETY: `host` holds n bytes and is not touched until the synchronize.
    unsafe {
        let rc = rt.cudaMemcpyAsync()?(
            host.as_mut_ptr().cast(),
            buf.as_raw() as *const c_void,
            n,
            cudadrv_sys::cudaMemcpyKind::cudaMemcpyDeviceToHost,
            stream.as_raw(),
        );
        check(rc.is_success(), || format!("cudaMemcpyAsync: {rc}"))?;
    }
    stream.synchronize()?;
    check(host.iter().all(|&b| b == 0x33), || {
        "cudaMemcpyAsync did not see the cuda-core memset".into()
    })
}
