//! Hardware tests of the ownership and soundness rules: what an outside review found
//! reachable from safe code (capture turning safe calls into graph nodes, one-shot host
//! closures in graphs, misaligned pinned memory, handles that could not leave their
//! thread or their struct), each checked on the GPU with the driver's real behaviour.
//!
//! Kernels come from `ptx/generated/kernels.ptx` (`fill`: `out[i] = 3 i + 1`;
//! `write_value`: `out[0] = value`; `vec_add`: `c = a + b`).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use cuda_workspace::{
    Kernels, TestResult, check, check_eq, check_filled, hw_tests, ptx, require_gpu, run_suite,
};
use cudadrv::graph::{CaptureMode, EdgeData, Graph, GraphNode, InstantiateFlags};
use cudadrv::launch::{LaunchConfig, launch, launch_packed};
use cudadrv::{
    AsyncDeviceBuffer, Context, Device, DeviceBuffer, DevicePtr, Error, Event, EventFlags,
    EventWaitFlags, MemPool, Module, PinnedHostBuffer, Pod, Stream,
};

fn main() {
    if std::env::var_os("HW_SOUNDNESS_STICKY").is_some() {
        // Child of `sticky_error_names_the_users_call`: a faulting kernel poisons the
        // context for the rest of the process.
        match sticky_error_child() {
            Ok(()) => std::process::exit(0),
            Err(e) => {
                println!("{e:?}");
                std::process::exit(2)
            }
        }
    }
    run_suite(
        "hw_soundness",
        hw_tests![
            cross_context_async_work_is_refused,
            foreign_graph_nodes_are_refused,
            async_copy_lengths_are_checked,
            sticky_error_names_the_users_call,
            refused_host_node_drops_its_closure,
            fork_join_capture_records_both_streams,
            captured_host_fn_runs_at_every_launch_and_is_freed_once,
            one_shot_host_fn_is_refused_while_capturing,
            capture_refuses_calls_that_would_name_memory_by_address,
            joined_stream_refuses_the_same_calls,
            captured_memset_writes_only_its_own_buffer,
            capture_dependencies_are_typed_nodes,
            per_thread_stream_is_not_captured,
            pinned_buffer_is_aligned_for_its_type,
            handles_outlive_their_context_and_module_values,
            graph_kernel_node_keeps_its_function,
            launch_names_its_stream,
            packed_size_mismatch_is_an_error,
            every_handle_from_another_thread,
            created_context_from_another_thread,
            sixteen_threads_share_one_context,
            host_only_safe_declarations_are_refused,
            forgotten_region_keeps_its_host_buffer,
            registration_scope_outlasts_a_forgotten_reference,
        ],
    );
}

fn ctx() -> Result<Context, Error> {
    Context::primary(Device::get(0)?)
}

fn kernels(ctx: &Context) -> Result<Kernels, Error> {
    Kernels::load(ctx)
}

/// Launches `fill(out, n)` on `stream`.
fn fill(k: &Kernels, out: &DeviceBuffer<u32>, stream: &Stream) -> Result<(), Error> {
    let n = u32::try_from(out.len()).map_err(|_| Error::InvalidArgument("n"))?;
    let cfg = LaunchConfig::new(n.div_ceil(256).clamp(1, 1024), 256).stream(stream);
    // SAFETY: fill takes (u32*, u32); `out` holds n u32s and outlives the kernel (the
    // callers synchronize before dropping it).
    unsafe { launch(&k.fill, &cfg, &(out.as_arg(), n)) }
}

fn is_capturing_refusal(r: Result<(), Error>) -> bool {
    matches!(r, Err(Error::StreamCapturing(_)))
}

/// Waits (up to 2 s) until `f()` holds: user-object destructors run on a driver thread
/// some time after the last holder is destroyed.
fn eventually(f: impl Fn() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(2) {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    f()
}

/// A host closure recorded in a capture becomes a host node that runs at every launch of
/// every executable graph (the old one-shot trampoline freed it at the first, and the
/// second launch crashed). Cloned and twice-instantiated graphs run it too; it is freed
/// once, after the last of them is gone, launched or not.
fn captured_host_fn_runs_at_every_launch_and_is_freed_once() -> TestResult {
    require_gpu()?;
    let ctx = ctx()?;
    let mut stream = Stream::non_blocking(&ctx)?;
    let runs = Arc::new(AtomicUsize::new(0));
    let cap = stream.begin_capture(CaptureMode::Global)?;
    let counter = Arc::clone(&runs);
    cap.host_fn(move || {
        counter.fetch_add(1, Ordering::SeqCst);
    })?;
    let graph = cap.end()?;
    check_eq(Arc::strong_count(&runs), 2, "closure held by the graph")?;
    let exec_a = graph.instantiate(InstantiateFlags::empty())?;
    let exec_b = graph.instantiate(InstantiateFlags::empty())?;
    let clone = graph.try_clone()?;
    let exec_c = clone.instantiate(InstantiateFlags::empty())?;
    for _ in 0..3 {
        exec_a.launch(&stream)?;
        exec_b.launch(&stream)?;
        exec_c.launch(&stream)?;
    }
    stream.synchronize()?;
    check_eq(
        runs.load(Ordering::SeqCst),
        9,
        "host node runs, 3 launches x 3 execs",
    )?;
    // A graph that is never launched still frees it.
    let never = graph.try_clone()?;
    drop((graph, clone, exec_a, exec_b, exec_c, never));
    check(eventually(|| Arc::strong_count(&runs) == 1), || {
        format!(
            "closure not freed after every graph was dropped (strong count {})",
            Arc::strong_count(&runs)
        )
    })
}

/// `Stream::launch_host_fn` (a one-shot `FnOnce`) on a capturing stream is refused, and
/// the closure is dropped, not leaked.
fn one_shot_host_fn_is_refused_while_capturing() -> TestResult {
    require_gpu()?;
    let ctx = ctx()?;
    let mut stream = Stream::non_blocking(&ctx)?;
    let token = Arc::new(());
    let cap = stream.begin_capture(CaptureMode::Global)?;
    let held = Arc::clone(&token);
    let r = cap.stream().launch_host_fn(move || drop(held));
    check(is_capturing_refusal(r), || {
        "launch_host_fn was not refused".into()
    })?;
    check_eq(Arc::strong_count(&token), 1, "refused closure dropped")?;
    let graph = cap.end()?;
    check_eq(graph.node_count()?, 0, "nothing captured")?;
    // Outside a capture it runs once.
    let held = Arc::clone(&token);
    stream.launch_host_fn(move || drop(held))?;
    stream.synchronize()?;
    check(eventually(|| Arc::strong_count(&token) == 1), || {
        "one-shot closure not run".into()
    })
}

/// The calls the review used to corrupt memory through a capture are refused on the
/// capturing stream: the buffers' async memsets and copy, an external event wait, a
/// graph launch, stream-ordered allocation.
fn capture_refuses_calls_that_would_name_memory_by_address() -> TestResult {
    require_gpu()?;
    let ctx = ctx()?;
    let mut stream = Stream::non_blocking(&ctx)?;
    let mut a = DeviceBuffer::<u32>::zeroed(&ctx, 1024)?;
    let b = DeviceBuffer::<u32>::zeroed(&ctx, 1024)?;
    let event = Event::new(&ctx, EventFlags::DISABLE_TIMING)?;
    let empty = Graph::new(&ctx)?.instantiate(InstantiateFlags::empty())?;
    let cap = stream.begin_capture(CaptureMode::Global)?;
    let s = cap.stream();
    check(is_capturing_refusal(a.memset_d8_async(0xAB, s)), || {
        "memset_d8_async".into()
    })?;
    check(is_capturing_refusal(a.memset_d32_async(7, s)), || {
        "memset_d32_async".into()
    })?;
    check(
        is_capturing_refusal(a.copy_from_device_async(&b, s)),
        || "copy_from_device_async".into(),
    )?;
    check(is_capturing_refusal(empty.launch(s)), || {
        "GraphExec::launch".into()
    })?;
    let alloc = AsyncDeviceBuffer::<u32>::new(s, 64).map(drop);
    check(is_capturing_refusal(alloc), || "cuMemAllocAsync".into())?;
    let graph = cap.end()?;
    check_eq(graph.node_count()?, 0, "nothing captured by refused calls")?;
    // The external wait goes through the capture, which borrows the event.
    event.record(&stream)?;
    stream.synchronize()?;
    let mut other = Stream::non_blocking(&ctx)?;
    let cap = other.begin_capture(CaptureMode::Global)?;
    cap.wait_event_external(&event)?;
    let graph = cap.end()?;
    check_eq(graph.node_count()?, 1, "one external-wait node")?;
    let mut nodes = [GraphNode::NULL; 1];
    graph.nodes(&mut nodes)?;
    check_eq(
        nodes[0].node_type()?,
        cudadrv_sys::CUgraphNodeType::CU_GRAPH_NODE_TYPE_WAIT_EVENT,
        "node type",
    )?;
    let exec = graph.instantiate(InstantiateFlags::empty())?;
    exec.launch(&other)?;
    other.synchronize()?;
    Ok(())
}

/// A stream that joins another stream's capture (by waiting on an event recorded in
/// it) refuses the same calls, and leaves the capture again when joined back.
fn joined_stream_refuses_the_same_calls() -> TestResult {
    require_gpu()?;
    let ctx = ctx()?;
    let k = kernels(&ctx)?;
    let mut origin = Stream::non_blocking(&ctx)?;
    let mut side = Stream::non_blocking(&ctx)?;
    let out = DeviceBuffer::<u32>::zeroed(&ctx, 4096)?;
    let mut scratch = DeviceBuffer::<u32>::zeroed(&ctx, 16)?;
    let fork = Event::new(&ctx, EventFlags::DISABLE_TIMING)?;
    let join = Event::new(&ctx, EventFlags::DISABLE_TIMING)?;
    let ext = Event::new(&ctx, EventFlags::DISABLE_TIMING)?;
    let cap = origin.begin_capture(CaptureMode::Global)?;
    fork.record(cap.stream())?;
    side.wait_event(&fork)?;
    check(
        side.capture_status()?
            == cudadrv_sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_ACTIVE,
        || "side stream did not join the capture".into(),
    )?;
    check(
        is_capturing_refusal(scratch.memset_d8_async(1, &side)),
        || "memset on joined stream".into(),
    )?;
    check(is_capturing_refusal(side.launch_host_fn(|| {})), || {
        "host fn on joined stream".into()
    })?;
    check(
        is_capturing_refusal(side.wait_event_with_flags(&ext, EventWaitFlags::EXTERNAL)),
        || "external wait on joined stream".into(),
    )?;
    check(
        is_capturing_refusal(AsyncDeviceBuffer::<u32>::new(&side, 8).map(drop)),
        || "stream-ordered allocation on joined stream".into(),
    )?;
    // Unsafe launches are recorded on the joined stream, as the contract says.
    fill(&k, &out, &side)?;
    join.record(&side)?;
    cap.wait_event(&join)?;
    let graph = cap.end()?;
    check_eq(
        side.capture_status()?,
        cudadrv_sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE,
        "side stream left the capture",
    )?;
    let exec = graph.instantiate(InstantiateFlags::empty())?;
    exec.launch(&origin)?;
    origin.synchronize()?;
    let mut got = vec![0u32; out.len()];
    out.copy_to_host(&mut got)?;
    check_filled(&got, "fill")
}

/// The review's H100 corruption: a captured memset whose buffer was freed wrote 0xAB into
/// the next allocation. Now the graph borrows the buffer (dropping it first does not
/// compile, see the `compile_fail` tests in cuda-core's graph docs), so the executable
/// graph writes its own buffer and nothing else.
fn captured_memset_writes_only_its_own_buffer() -> TestResult {
    require_gpu()?;
    let ctx = ctx()?;
    let mut stream = Stream::non_blocking(&ctx)?;
    let target = DeviceBuffer::<u8>::zeroed(&ctx, 1 << 20)?;
    let copy_dst = DeviceBuffer::<u8>::zeroed(&ctx, 1 << 20)?;
    let cap = stream.begin_capture(CaptureMode::Global)?;
    cap.memset_d8(&target, 0xAB)?;
    cap.copy(&copy_dst, &target)?;
    let graph = cap.end()?;
    let exec = graph.instantiate(InstantiateFlags::empty())?;
    // An unrelated allocation made while the graph lives.
    let neighbour = DeviceBuffer::<u8>::zeroed(&ctx, 1 << 20)?;
    for _ in 0..3 {
        exec.launch(&stream)?;
    }
    stream.synchronize()?;
    let mut got = vec![0u8; 1 << 20];
    target.copy_to_host(&mut got)?;
    check(got.iter().all(|&b| b == 0xAB), || "target not set".into())?;
    copy_dst.copy_to_host(&mut got)?;
    check(got.iter().all(|&b| b == 0xAB), || "copy not made".into())?;
    neighbour.copy_to_host(&mut got)?;
    check(got.iter().all(|&b| b == 0), || {
        "the graph wrote into an unrelated allocation".into()
    })
}

/// Capture dependencies come back as typed nodes of the capture graph and go back in
/// through the safe `set_dependencies` (the raw form is `unsafe`).
fn capture_dependencies_are_typed_nodes() -> TestResult {
    require_gpu()?;
    let ctx = ctx()?;
    let k = kernels(&ctx)?;
    let mut stream = Stream::non_blocking(&ctx)?;
    let a = DeviceBuffer::<u32>::zeroed(&ctx, 1)?;
    let b = DeviceBuffer::<u32>::zeroed(&ctx, 1)?;
    let cap = stream.begin_capture(CaptureMode::Global)?;
    let cfg = LaunchConfig::new(1, 32);
    // SAFETY: write_value takes (u32*, u32); `a` outlives the graph.
    unsafe { cap.launch(&k.write_value, &cfg, &(a.as_arg(), 5u32))? };
    let mut nodes = [GraphNode::NULL; 4];
    let mut data = [EdgeData::DEFAULT; 4];
    let info = cap.dependencies(&mut nodes, &mut data)?;
    check_eq(info.num_dependencies, 1, "one dependency after one launch")?;
    let first = nodes[0];
    check_eq(
        first.node_type()?,
        cudadrv_sys::CUgraphNodeType::CU_GRAPH_NODE_TYPE_KERNEL,
        "dependency is the kernel node",
    )?;
    // SAFETY: as above, for `b`.
    unsafe { cap.launch(&k.write_value, &cfg, &(b.as_arg(), 6u32))? };
    // Make the next node depend on the first kernel only (not the second).
    cap.set_dependencies(&[first], None, true)?;
    cap.memset_d32(&b, 9)?;
    let graph = cap.end()?;
    check_eq(graph.node_count()?, 3, "three nodes")?;
    let mut roots = [GraphNode::NULL; 4];
    let n_roots = graph.root_nodes(&mut roots)?;
    check_eq(n_roots, 1, "one root: the first kernel")?;
    let mut deps = [GraphNode::NULL; 4];
    let mut dd = [EdgeData::DEFAULT; 4];
    let n_dependents = roots[0].dependents(&mut deps, &mut dd)?;
    check_eq(
        n_dependents,
        2,
        "the first kernel fans out to the second and the memset",
    )?;
    Ok(())
}

/// The per-thread default stream is not captured by this crate (synchronous calls of a
/// per-thread build run on it); the legacy stream is refused by the driver.
fn per_thread_stream_is_not_captured() -> TestResult {
    require_gpu()?;
    let ctx = ctx()?;
    let mut per_thread = Stream::per_thread(&ctx);
    let r = per_thread.begin_capture(CaptureMode::Global).map(drop);
    check(matches!(r, Err(Error::InvalidArgument(_))), || {
        format!("per-thread capture: {r:?}")
    })?;
    let mut legacy = Stream::legacy(&ctx);
    let r = legacy.begin_capture(CaptureMode::Global).map(drop);
    check(r.is_err(), || "legacy stream capture was accepted".into())
}

#[repr(C, align(4096))]
#[derive(Clone, Copy, Debug, PartialEq)]
struct Page([u32; 1024]);
// SAFETY: an array of u32 with no padding (4096 bytes, 4096-aligned).
unsafe impl Pod for Page {}

/// The driver promises 256-byte alignment; on the H100 allocations came 512 bytes apart.
/// A 4096-aligned `T` still gets an aligned slice, and copies through it are exact.
fn pinned_buffer_is_aligned_for_its_type() -> TestResult {
    require_gpu()?;
    let ctx = ctx()?;
    let stream = Stream::non_blocking(&ctx)?;
    let mut keep = Vec::new();
    for round in 0..8u32 {
        // Odd sizes shift the driver's next address.
        keep.push(PinnedHostBuffer::<u8>::zeroed(&ctx, 300 + round as usize)?);
        let mut pages = PinnedHostBuffer::<Page>::zeroed(&ctx, 3)?;
        let addr = pages.as_ptr() as usize;
        check_eq(addr % 4096, 0, "Page buffer alignment")?;
        for (p, page) in pages.iter_mut().enumerate() {
            for (i, w) in page.0.iter_mut().enumerate() {
                *w = round * 100_000 + (p * 1024 + i) as u32;
            }
        }
        let dev = DeviceBuffer::<Page>::new(&ctx, 3)?;
        let mut back = PinnedHostBuffer::<Page>::zeroed(&ctx, 3)?;
        check_eq(back.as_ptr() as usize % 4096, 0, "second buffer alignment")?;
        let mut dev = dev;
        // SAFETY: `pages` and `back` stay alive and untouched until the synchronize.
        unsafe {
            dev.copy_from_host_async(&pages, &stream)?;
            dev.copy_to_host_async(&mut back, &stream)?;
        }
        stream.synchronize()?;
        check(back[..] == pages[..], || {
            format!("round {round}: round trip differs")
        })?;
    }
    Ok(())
}

/// Handles keep what they need alive: a stream, buffer and function work after the
/// `Context` and `Module` values they came from are dropped.
fn handles_outlive_their_context_and_module_values() -> TestResult {
    require_gpu()?;
    let (stream, out, f) = {
        let ctx = ctx()?;
        let module = Module::from_ptx(&ctx, ptx::KERNELS)?;
        let f = module.function("fill")?;
        let stream = Stream::non_blocking(&ctx)?;
        let out = DeviceBuffer::<u32>::zeroed(&ctx, 10_000)?;
        (stream, out, f)
        // `ctx` and `module` are dropped here.
    };
    let cfg = LaunchConfig::new(40, 256).stream(&stream);
    // SAFETY: fill(u32*, u32) on a buffer of 10000 that outlives the kernel.
    unsafe { launch(&f, &cfg, &(out.as_arg(), 10_000u32))? };
    stream.synchronize()?;
    let mut got = vec![0u32; 10_000];
    out.copy_to_host(&mut got)?;
    check_filled(&got, "fill")
}

/// A kernel node borrows its function, which keeps the module loaded for every launch of
/// the executable graph.
fn graph_kernel_node_keeps_its_function() -> TestResult {
    require_gpu()?;
    let ctx = ctx()?;
    let stream = Stream::non_blocking(&ctx)?;
    let out = DeviceBuffer::<u32>::zeroed(&ctx, 1)?;
    let f = Module::from_ptx(&ctx, ptx::KERNELS)?.function("write_value")?;
    let graph = Graph::new(&ctx)?;
    // SAFETY: write_value(u32*, u32); `out` outlives the graph and its exec.
    unsafe { graph.add_kernel_node(&[], &f, &LaunchConfig::new(1, 32), &(out.as_arg(), 77u32))? };
    let exec = graph.instantiate(InstantiateFlags::empty())?;
    drop(graph);
    exec.launch(&stream)?;
    stream.synchronize()?;
    let mut got = [0u32];
    out.copy_to_host(&mut got)?;
    check_eq(got[0], 77, "kernel node result")
}

/// A launch names its stream: a configuration without one is refused, the legacy stream
/// is an explicit choice.
fn launch_names_its_stream() -> TestResult {
    require_gpu()?;
    let ctx = ctx()?;
    let k = kernels(&ctx)?;
    let out = DeviceBuffer::<u32>::zeroed(&ctx, 1)?;
    let args = (out.as_arg(), 3u32);
    // SAFETY: write_value(u32*, u32) on a live one-element buffer.
    let r = unsafe { launch(&k.write_value, &LaunchConfig::new(1, 32), &args) };
    check(matches!(r, Err(Error::InvalidArgument(_))), || {
        format!("launch without a stream: {r:?}")
    })?;
    let legacy = Stream::legacy(&ctx);
    // SAFETY: as above.
    unsafe {
        launch(
            &k.write_value,
            &LaunchConfig::new(1, 32).stream(&legacy),
            &args,
        )?
    };
    legacy.synchronize()?;
    let mut got = [0u32];
    out.copy_to_host(&mut got)?;
    check_eq(got[0], 3, "legacy-stream launch")
}

/// A packed buffer whose size differs from the kernel's parameters. Driver 580 on an H100
/// refuses a buffer larger than the kernel's parameters (`launch_packed` documents the
/// code) but accepts a shorter one without a word: only the layout check
/// (`verify_packed`, `launch_checked`) catches that, which is why the unchecked packed
/// launch is `unsafe`.
fn packed_size_mismatch_is_an_error() -> TestResult {
    require_gpu()?;
    let ctx = ctx()?;
    let k = kernels(&ctx)?;
    let stream = Stream::non_blocking(&ctx)?;
    let out = DeviceBuffer::<u32>::zeroed(&ctx, 1)?;
    let cfg = LaunchConfig::new(1, 32).stream(&stream);
    let mut long = cudadrv::args::PackedArgs::new();
    long.extend(&(out.as_arg(), 5u32, 6u64))?;
    // SAFETY: write_value(u32*, u32) reads its two parameters from the front of the
    // buffer; the pointer is live. The extra bytes are what is tested.
    let r = unsafe { launch_packed(&k.write_value, &cfg, &long) };
    println!("    launch_packed with 24 bytes for 12 bytes of parameters: {r:?}");
    check(
        r.as_ref().err().and_then(Error::code)
            == Some(cudadrv_sys::CUresult::CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES),
        || format!("expected CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, got {r:?}"),
    )?;
    let mut short = cudadrv::args::PackedArgs::new();
    short.push(&out.as_arg())?;
    for packed in [&long, &short] {
        let r = k.write_value.verify_packed(packed);
        check(matches!(r, Err(Error::Layout(_))), || {
            format!("verify_packed: {r:?}")
        })?;
        // SAFETY: checked launch: the mismatch is refused before the driver is called.
        let r = unsafe { cudadrv::launch::launch_checked(&k.write_value, &cfg, packed) };
        check(matches!(r, Err(Error::Layout(_))), || {
            format!("launch_checked: {r:?}")
        })?;
    }
    stream.synchronize()?;
    Ok(())
}

/// Every handle type, made on this thread, used and dropped on another thread where no
/// context is current.
fn every_handle_from_another_thread() -> TestResult {
    require_gpu()?;
    let ctx = ctx()?;
    let module = Module::from_ptx(&ctx, ptx::KERNELS)?;
    let k = kernels(&ctx)?;
    let stream = Stream::non_blocking(&ctx)?;
    let start = Event::new(&ctx, EventFlags::empty())?;
    let end = Event::new(&ctx, EventFlags::empty())?;
    let buf = DeviceBuffer::<u32>::zeroed(&ctx, 4096)?;
    let other = DeviceBuffer::<u32>::zeroed(&ctx, 4096)?;
    let pinned = PinnedHostBuffer::<u32>::zeroed(&ctx, 4096)?;
    let pool = MemPool::new(&ctx)?;
    // A graph made here that borrows a buffer made here: it crosses to the other thread
    // inside a scope that the buffer outlives.
    let graph_target = DeviceBuffer::<u32>::zeroed(&ctx, 4096)?;
    let graph = Graph::new(&ctx)?;
    graph.add_memset_d32_node(&[], &graph_target, 3)?;
    let graph_target = &graph_target;
    let outcome = std::thread::scope(|scope| {
        scope
            .spawn(move || -> TestResult {
                check(Context::current_raw()?.is_null(), || {
                    "a fresh thread has a current context".into()
                })?;
                let (mut buf, mut other, mut pinned) = (buf, other, pinned);
                // Synchronous copies and memsets (the review saw INVALID_CONTEXT here).
                let host: Vec<u32> = (0..4096).map(|i| i * 7).collect();
                buf.copy_from_host(&host)?;
                other.copy_from_device(&buf)?;
                let mut back = vec![0u32; 4096];
                other.copy_to_host(&mut back)?;
                check(back == host, || "copy chain differs".into())?;
                other.memset_d32(0xDEAD_BEEF)?;
                other.copy_to_host(&mut back)?;
                check(back.iter().all(|&v| v == 0xDEAD_BEEF), || {
                    "memset_d32".into()
                })?;
                other.memset_d8(0x11)?;
                other.copy_to_host(&mut back)?;
                check(back.iter().all(|&v| v == 0x1111_1111), || {
                    "memset_d8".into()
                })?;
                // Module, function, launch, events, stream.
                let looked_up = module.function("fill")?;
                check(looked_up.num_regs()? > 0, || "num_regs".into())?;
                check(module.function_count()? >= 3, || "function_count".into())?;
                check(k.fill.max_threads_per_block()? >= 256, || {
                    "attributes".into()
                })?;
                k.fill.verify_args::<(DevicePtr<u32>, u32)>()?;
                start.record(&stream)?;
                fill(&k, &buf, &stream)?;
                end.record(&stream)?;
                end.synchronize()?;
                let ms = Event::elapsed_ms(&start, &end)?;
                check(ms >= 0.0, || format!("elapsed {ms}"))?;
                check(stream.query()?, || "stream idle".into())?;
                // Pinned async copy, pool and stream-ordered allocation.
                // SAFETY: `pinned` is untouched until the synchronize.
                unsafe { buf.copy_to_host_async(&mut pinned, &stream)? };
                stream.synchronize()?;
                check_filled(&pinned, "fill")?;
                let _ = pool.used_mem_current()?;
                {
                    let mut tmp = pool.alloc_async::<u32>(&stream, 1024)?;
                    tmp.memset_d32_async(5)?;
                }
                stream.synchronize()?;
                // The graph made on the other thread, instantiated and launched here.
                let exec = graph.instantiate(InstantiateFlags::empty())?;
                exec.launch(&stream)?;
                stream.synchronize()?;
                graph_target.copy_to_host(&mut back)?;
                check(back.iter().all(|&v| v == 3), || "graph memset".into())?;
                drop(exec);
                drop(graph);
                check(Context::current_raw()?.is_null(), || {
                    "a context was left current on the thread".into()
                })?;
                // Every handle made on the other thread is dropped on this one.
                drop((module, k, stream, start, end, buf, other, pinned, pool));
                Ok(())
            })
            .join()
    })
    .map_err(|_| "thread panicked")?;
    outcome?;
    ctx.synchronize()?;
    Ok(())
}

/// A context of our own (`cuCtxCreate`) used from another thread and destroyed when the
/// last handle goes.
fn created_context_from_another_thread() -> TestResult {
    require_gpu()?;
    let created = Context::create(Device::get(0)?, Default::default())?;
    // cuCtxCreate makes it current here; the primary one is current again after a bind.
    let primary = ctx()?;
    primary.bind()?;
    let handle = std::thread::spawn(move || -> TestResult {
        let k = kernels(&created)?;
        let stream = Stream::non_blocking(&created)?;
        let out = DeviceBuffer::<u32>::zeroed(&created, 1000)?;
        drop(created);
        fill(&k, &out, &stream)?;
        stream.synchronize()?;
        let mut got = vec![0u32; 1000];
        out.copy_to_host(&mut got)?;
        check_filled(&got, "fill")
    });
    handle.join().map_err(|_| "thread panicked")??;
    check(primary.is_current()?, || {
        "primary context no longer current".into()
    })
}

/// 16 threads share one context (a clone each) for `HW_STRESS_SECS` seconds (30 by
/// default): each makes its own streams, buffers and events, launches and copies, and
/// checks every result exactly. No drop may fail.
fn sixteen_threads_share_one_context() -> TestResult {
    require_gpu()?;
    let secs: u64 = std::env::var("HW_STRESS_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(30);
    let ctx = ctx()?;
    let k = Arc::new(kernels(&ctx)?);
    let drop_errors = cudadrv::drop_error_count();
    let deadline = Instant::now() + Duration::from_secs(secs);
    let threads: Vec<_> = (0..16u32)
        .map(|t| {
            let ctx = ctx.clone();
            let k = Arc::clone(&k);
            std::thread::spawn(move || -> Result<u64, String> {
                let mut iterations = 0u64;
                let n = 4096 + 256 * t as usize;
                while Instant::now() < deadline {
                    let stream = Stream::non_blocking(&ctx).map_err(|e| e.to_string())?;
                    let run = || -> Result<(), String> {
                        let e = |e: Error| e.to_string();
                        let a: Vec<f32> = (0..n).map(|i| (i as u32 ^ t) as f32).collect();
                        let b: Vec<f32> = (0..n)
                            .map(|i| (iterations % 1000) as f32 + i as f32)
                            .collect();
                        let da = DeviceBuffer::from_slice(&ctx, &a).map_err(e)?;
                        let db = DeviceBuffer::from_slice(&ctx, &b).map_err(e)?;
                        let dc = DeviceBuffer::<f32>::zeroed(&ctx, n).map_err(e)?;
                        let done = Event::new(&ctx, EventFlags::DISABLE_TIMING).map_err(e)?;
                        let cfg = LaunchConfig::new((n as u32).div_ceil(256), 256).stream(&stream);
                        let args = (da.as_arg(), db.as_arg(), dc.as_arg(), n as u32);
                        // SAFETY: vec_add(f32*, f32*, f32*, u32) on three buffers of n
                        // floats that outlive the kernel (synchronized below).
                        unsafe { launch(&k.vec_add, &cfg, &args).map_err(e)? };
                        done.record(&stream).map_err(e)?;
                        done.synchronize().map_err(e)?;
                        let mut c = vec![0f32; n];
                        dc.copy_to_host(&mut c).map_err(e)?;
                        match (0..n).find(|&i| c[i] != a[i] + b[i]) {
                            None => Ok(()),
                            Some(i) => {
                                Err(format!("element {i} is {}, expected {}", c[i], a[i] + b[i]))
                            }
                        }
                    };
                    run().map_err(|e| format!("thread {t} iteration {iterations}: {e}"))?;
                    iterations += 1;
                }
                Ok(iterations)
            })
        })
        .collect();
    let mut total = 0;
    for (t, h) in threads.into_iter().enumerate() {
        let n = h.join().map_err(|_| format!("thread {t} panicked"))??;
        check(n > 0, || format!("thread {t} made no iteration"))?;
        total += n;
    }
    println!("    16 threads, {secs} s: {total} checked iterations");
    check_eq(
        cudadrv::drop_error_count(),
        drop_errors,
        "drops that failed during the stress run",
    )
}

/// The audit's first H100 corruption: a memset queued on another context's stream into
/// a buffer whose `cuMemFree` (in its own context) did not wait for it. Every safe call
/// that queues work naming memory or a graph on a stream refuses a stream of another
/// context (`hw_promises` shows the driver behaviour behind the rule); the same calls on
/// the buffer's own context work and write what they should.
fn cross_context_async_work_is_refused() -> TestResult {
    require_gpu()?;
    let dev = Device::get(0)?;
    let a = ctx()?;
    let b = Context::create(dev, cudadrv::ContextFlags::empty())?;
    let stream_a = Stream::non_blocking(&a)?;
    let stream_b = Stream::non_blocking(&b)?;
    let mut dst = DeviceBuffer::<u32>::zeroed(&a, 4096)?;
    let src = DeviceBuffer::from_slice(&a, &vec![5u32; 4096])?;
    let src_b = DeviceBuffer::from_slice(&b, &vec![6u32; 4096])?;
    let mismatch = |r: Result<(), Error>, what: &str| {
        check(matches!(r, Err(Error::ContextMismatch { .. })), || {
            format!("{what}: {r:?}")
        })
    };
    mismatch(
        dst.memset_d8_async(1, &stream_b),
        "memset_d8_async, stream of B",
    )?;
    mismatch(
        dst.memset_d32_async(1, &stream_b),
        "memset_d32_async, stream of B",
    )?;
    mismatch(
        dst.copy_from_device_async(&src, &stream_b),
        "copy_from_device_async, stream of B",
    )?;
    mismatch(
        dst.copy_from_device_async(&src_b, &stream_a),
        "copy_from_device_async, source of B",
    )?;
    let mut host = vec![0u32; 4096];
    // SAFETY: `host` outlives the call (it is refused before anything is queued).
    mismatch(
        unsafe { src.copy_to_host_slice_async(&mut host, &stream_b) },
        "copy_to_host_slice_async, stream of B",
    )?;
    let event = Event::new(&a, EventFlags::DISABLE_TIMING)?;
    mismatch(event.record(&stream_b), "Event::record, stream of B")?;
    let graph = Graph::new(&a)?;
    mismatch(
        graph.add_memset_d32_node(&[], &src_b, 1).map(drop),
        "memset node on a buffer of B",
    )?;
    mismatch(
        graph.add_copy_node(&[], &dst, &src_b).map(drop),
        "copy node from a buffer of B",
    )?;
    mismatch(
        graph.add_child_graph_node(&[], &Graph::new(&b)?).map(drop),
        "child graph of B",
    )?;
    graph.add_memset_d32_node(&[], &dst, 3)?;
    let exec = graph.instantiate(InstantiateFlags::empty())?;
    mismatch(exec.launch(&stream_b), "GraphExec::launch, stream of B")?;
    mismatch(exec.upload(&stream_b), "GraphExec::upload, stream of B")?;
    let upload = graph
        .instantiate_with_upload(InstantiateFlags::empty(), Some(&stream_b))
        .map(drop);
    mismatch(upload, "instantiate_with_upload, stream of B")?;
    let mut capturing = Stream::non_blocking(&b)?;
    let cap = capturing.begin_capture(CaptureMode::Global)?;
    mismatch(
        cap.memset_d32(&src, 1),
        "Capturing::memset_d32, buffer of A",
    )?;
    let captured = cap.end()?;
    check_eq(
        captured.node_count()?,
        0,
        "nothing captured by the refusals",
    )?;
    drop(exec);
    drop(graph);
    stream_b.synchronize()?;
    let mut back = vec![0u32; 4096];
    dst.copy_to_host(&mut back)?;
    check(back.iter().all(|&v| v == 0), || {
        "a refused call wrote".into()
    })?;
    // The same calls in the buffers' own context.
    dst.copy_from_device_async(&src, &stream_a)?;
    stream_a.synchronize()?;
    dst.copy_to_host(&mut back)?;
    check(back.iter().all(|&v| v == 5), || "same-context copy".into())?;
    dst.memset_d32_async(8, &stream_a)?;
    stream_a.synchronize()?;
    dst.copy_to_host(&mut back)?;
    check(back.iter().all(|&v| v == 8), || {
        "same-context memset".into()
    })
}

/// The audit's second H100 corruption: `child_graph` accepted a node of another graph
/// and returned its body with the caller's lifetime, so a node naming a short-lived
/// buffer could be copied into a graph that outlived it. Nodes now remember their
/// graph; every call that takes nodes refuses those of other graphs and the null node.
fn foreign_graph_nodes_are_refused() -> TestResult {
    require_gpu()?;
    let ctx = ctx()?;
    let long = Graph::new(&ctx)?;
    let mine = long.add_empty_node(&[])?;
    let short_buf = DeviceBuffer::<u32>::zeroed(&ctx, 64)?;
    let short = Graph::new(&ctx)?;
    let body = Graph::new(&ctx)?;
    body.add_memset_d32_node(&[], &short_buf, 0xAB)?;
    let foreign = short.add_child_graph_node(&[], &body)?;
    let refused = |r: Result<(), Error>, what: &str| {
        check(matches!(r, Err(Error::ForeignNode { .. })), || {
            format!("{what}: {r:?}")
        })
    };
    refused(
        long.child_graph(foreign).map(drop),
        "child_graph of a foreign node",
    )?;
    refused(
        long.add_empty_node(&[foreign]).map(drop),
        "foreign dependency",
    )?;
    refused(
        long.add_empty_node(&[mine, GraphNode::NULL]).map(drop),
        "null dependency",
    )?;
    refused(long.add_edge(mine, foreign, EdgeData::DEFAULT), "add_edge")?;
    refused(
        long.add_edges(&[foreign], &[mine], &[EdgeData::DEFAULT]),
        "add_edges",
    )?;
    refused(
        long.remove_edge(foreign, mine, EdgeData::DEFAULT),
        "remove_edge",
    )?;
    refused(
        GraphNode::NULL.node_type().map(drop),
        "node_type of the null node",
    )?;
    // Its own child graph node works.
    let own_child = long.add_child_graph_node(&[mine], &Graph::new(&ctx)?)?;
    let inner = long.child_graph(own_child)?;
    check_eq(inner.node_count()?, 0, "own child graph")?;
    // Executable graphs accept only nodes of the graph they came from.
    let exec = long.instantiate(InstantiateFlags::empty())?;
    refused(
        exec.set_node_enabled(foreign, false),
        "exec set_node_enabled",
    )?;
    refused(exec.node_enabled(foreign).map(drop), "exec node_enabled")?;
    // Capture dependencies: nodes of another graph are refused too.
    let mut stream = Stream::non_blocking(&ctx)?;
    let cap = stream.begin_capture(CaptureMode::Global)?;
    cap.memset_d32(&short_buf, 1)?;
    refused(
        cap.set_dependencies(&[mine], None, true),
        "capture set_dependencies",
    )?;
    drop(cap);
    // More dependencies than fit on the stack go through the heap path, checked too.
    let many: Vec<_> = (0..40)
        .map(|_| long.add_empty_node(&[]))
        .collect::<Result<_, _>>()?;
    let joined = long.add_empty_node(&many)?;
    check_eq(
        joined.dependencies(&mut [GraphNode::NULL; 64], &mut [EdgeData::DEFAULT; 64])?,
        40,
        "40 dependencies",
    )?;
    let mut with_foreign = many.clone();
    with_foreign.push(foreign);
    refused(
        long.add_empty_node(&with_foreign).map(drop),
        "a foreign node among 41",
    )
}

/// `copy_from_device_async` compares the lengths like the synchronous copy (it did
/// not); the destination is left untouched.
fn async_copy_lengths_are_checked() -> TestResult {
    require_gpu()?;
    let ctx = ctx()?;
    let stream = Stream::non_blocking(&ctx)?;
    let mut small = DeviceBuffer::<u32>::zeroed(&ctx, 4)?;
    let mut big = DeviceBuffer::from_slice(&ctx, &[9u32; 8])?;
    let r = small.copy_from_device_async(&big, &stream);
    check(
        matches!(
            r,
            Err(Error::LengthMismatch {
                expected: 4,
                found: 8
            })
        ),
        || format!("larger source: {r:?}"),
    )?;
    let r = big.copy_from_device_async(&small, &stream);
    check(
        matches!(
            r,
            Err(Error::LengthMismatch {
                expected: 8,
                found: 4
            })
        ),
        || format!("smaller source: {r:?}"),
    )?;
    stream.synchronize()?;
    let mut back = [1u32; 4];
    small.copy_to_host(&mut back)?;
    check_eq(back, [0; 4], "destination untouched")
}

/// After a kernel faults, the context's sticky error comes back from the call the user
/// made (`cuGraphLaunch`, `cuLaunchHostFunc`), not from the crate's internal capture
/// check. Runs in a child process (the fault poisons the context).
fn sticky_error_names_the_users_call() -> TestResult {
    require_gpu()?;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let out = std::process::Command::new(exe)
        .env("HW_SOUNDNESS_STICKY", "1")
        .output()
        .map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&out.stdout);
    print!("{text}");
    check(out.status.success(), || {
        format!("child: {} {text}", out.status)
    })
}

fn sticky_error_child() -> Result<(), String> {
    let ctx = ctx().map_err(|e| e.to_string())?;
    let k = kernels(&ctx).map_err(|e| e.to_string())?;
    let stream = Stream::non_blocking(&ctx).map_err(|e| e.to_string())?;
    let graph = Graph::<'static>::new(&ctx).map_err(|e| e.to_string())?;
    graph.add_empty_node(&[]).map_err(|e| e.to_string())?;
    let exec = graph
        .instantiate(InstantiateFlags::empty())
        .map_err(|e| e.to_string())?;
    let cfg = LaunchConfig::new(1, 1).stream(&stream);
    // SAFETY: deliberately not: write_value writes to address 0x10, which faults on the
    // GPU (an illegal address, the sticky error this test needs); the host is untouched.
    unsafe {
        launch(
            &k.write_value,
            &cfg,
            &(DevicePtr::<u32>::from_raw(0x10), 1u32),
        )
    }
    .map_err(|e| e.to_string())?;
    let fault = stream.synchronize();
    println!("    fault: {fault:?}");
    let code = fault.err().and_then(|e| e.code()).ok_or("no fault")?;
    let launched = exec.launch(&stream);
    println!("    GraphExec::launch after the fault: {launched:?}");
    match launched {
        Err(Error::Driver {
            call: "cuGraphLaunch",
            code: c,
        }) if c == code => {}
        other => return Err(format!("GraphExec::launch: {other:?}")),
    }
    let host = stream.launch_host_fn(|| {});
    println!("    Stream::launch_host_fn after the fault: {host:?}");
    match host {
        Err(Error::Driver {
            call: "cuLaunchHostFunc",
            code: c,
        }) if c == code => Ok(()),
        other => Err(format!("launch_host_fn: {other:?}")),
    }
}

/// A host node the crate refuses does not keep its closure (and what it captured) alive
/// until the graph drops: it is dropped before the call returns.
fn refused_host_node_drops_its_closure() -> TestResult {
    require_gpu()?;
    let ctx = ctx()?;
    let graph = Graph::new(&ctx)?;
    let other = Graph::new(&ctx)?;
    let foreign = other.add_empty_node(&[])?;
    let held = Arc::new(AtomicUsize::new(0));
    let captured = Arc::clone(&held);
    let r = graph.add_host_node(&[foreign], move || {
        captured.fetch_add(1, Ordering::SeqCst);
    });
    check(matches!(r, Err(Error::ForeignNode { .. })), || {
        format!("refused host node: {r:?}")
    })?;
    check_eq(Arc::strong_count(&held), 1, "closure dropped at once")?;
    check_eq(graph.node_count()?, 0, "no node left behind")?;
    // An accepted one is held by the graph and runs.
    let captured = Arc::clone(&held);
    graph.add_host_node(&[], move || {
        captured.fetch_add(1, Ordering::SeqCst);
    })?;
    let stream = Stream::non_blocking(&ctx)?;
    let exec = graph.instantiate(InstantiateFlags::empty())?;
    exec.launch(&stream)?;
    stream.synchronize()?;
    check_eq(held.load(Ordering::SeqCst), 1, "accepted host node ran")?;
    drop((exec, graph));
    check(eventually(|| Arc::strong_count(&held) == 1), || {
        "closure not freed after the graph".into()
    })
}

/// The CUDA samples' fork/join capture, in safe code: a memset recorded on a second
/// stream that joined the capture (it was refused there before, with no safe form).
/// Both branches run at every launch.
fn fork_join_capture_records_both_streams() -> TestResult {
    require_gpu()?;
    let ctx = ctx()?;
    let mut main = Stream::non_blocking(&ctx)?;
    let mut side = Stream::non_blocking(&ctx)?;
    let fork = Event::new(&ctx, EventFlags::DISABLE_TIMING)?;
    let join = Event::new(&ctx, EventFlags::DISABLE_TIMING)?;
    let a = DeviceBuffer::<u32>::zeroed(&ctx, 1 << 16)?;
    let b = DeviceBuffer::<u32>::zeroed(&ctx, 1 << 16)?;
    let c = DeviceBuffer::<u32>::zeroed(&ctx, 1 << 16)?;
    let cap = main.begin_capture(CaptureMode::Global)?;
    let branch = cap.fork(&mut side, &fork)?;
    cap.memset_d32(&a, 1)?;
    branch.memset_d32(&b, 2)?;
    branch.copy(&c, &b)?;
    cap.join(&branch, &join)?;
    drop(branch);
    let graph = cap.end()?;
    check_eq(graph.node_count()?, 3, "three nodes")?;
    check_eq(graph.root_nodes(&mut [])?, 2, "two roots: the branches")?;
    check_eq(
        side.capture_status()?,
        cudadrv_sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE,
        "the branch stream left the capture",
    )?;
    let exec = graph.instantiate(InstantiateFlags::empty())?;
    exec.launch(&main)?;
    main.synchronize()?;
    let mut back = vec![0u32; 1 << 16];
    for (buf, v) in [(&a, 1u32), (&b, 2), (&c, 2)] {
        buf.copy_to_host(&mut back)?;
        check(back.iter().all(|&x| x == v), || format!("expected {v}"))?;
    }
    Ok(())
}

/// Host-only `safe fn` declarations (never compiled for the device) that the third audit
/// launched safely: one named like the project's `unsafe` kernel `write_value(u32*, u32)`
/// (a safe launch then wrote wherever its pointer value said), and `typed_iota` with
/// 8-byte elements (the device build's are 4 bytes). The first loads untrusted and its
/// safe launch is refused before the driver; the second does not load. The honest
/// declaration of `typed_iota` is trusted and runs.
mod impostors {
    cudadrv::kernel! {
        /// The device's `write_value` is an `unsafe fn`: no safe-body marker.
        pub safe fn write_value(out: *mut u32, value: u32) {}
    }
    cudadrv::kernel! {
        /// The device's `typed_iota` takes `DeviceSliceMut<u32>`.
        pub safe fn typed_iota(out: cudadrv::kernel::DeviceSliceMut<u64>, base: u32) {}
    }
}

fn host_only_safe_declarations_are_refused() -> TestResult {
    use cudadrv::kernel::{self, KernelModule, TypedKernel};
    require_gpu()?;
    let ctx = ctx()?;
    let module = KernelModule::load(&ctx, &ptx::TRUSTED)?;
    let twin: TypedKernel<impostors::write_value> = module.kernel()?;
    check(!twin.is_trusted(), || {
        "a host-only safe declaration of an unsafe kernel was trusted".into()
    })?;
    let victim = DeviceBuffer::<u32>::zeroed(&ctx, 1)?;
    let stream = Stream::non_blocking(&ctx)?;
    let refused = kernel::scope(&ctx, |s| {
        let lane = s.lane(&stream)?;
        lane.launch(
            &twin,
            &LaunchConfig::new(1, 1),
            (victim.as_raw() as *mut u32, 0xBAD_u32),
        )
    });
    check(matches!(refused, Err(Error::InvalidArgument(_))), || {
        format!("the impostor's launch: {refused:?}")
    })?;
    let mut word = [1u32];
    victim.copy_to_host(&mut word)?;
    check_eq(word[0], 0, "the buffer the impostor named")?;
    let variant = TypedKernel::<impostors::typed_iota>::new(&module);
    check(matches!(variant, Err(Error::InvalidArgument(_))), || {
        format!("an element-type variant loaded: {variant:?}")
    })?;
    let honest: TypedKernel<cuda_workspace::typed::typed_iota> = module.kernel()?;
    check(honest.is_trusted(), || "the real declaration".into())?;
    let mut out = DeviceBuffer::<u32>::zeroed(&ctx, 256)?;
    kernel::scope(&ctx, |s| {
        s.lane(&stream)?
            .launch(&honest, &LaunchConfig::new(1, 256), (&mut out, 5u32))
    })?;
    let mut got = vec![0u32; 256];
    out.copy_to_host(&mut got)?;
    check(
        got.iter().enumerate().all(|(i, &v)| v == 5 + 3 * i as u32),
        || "typed_iota through the trusted handle".into(),
    )?;
    println!("    impostor untrusted and refused, element variant refused at load, real one ran");
    Ok(())
}

/// A region with a device-to-host copy queued behind a long kernel, forgotten
/// (`mem::forget`) mid-flight: the bound buffer is the region's (taken by value), so it
/// leaks with it; host memory allocated afterwards is never written by the pending copy.
fn forgotten_region_keeps_its_host_buffer() -> TestResult {
    use cudadrv::graph::Region;
    require_gpu()?;
    const N: usize = 1 << 22;
    let ctx = ctx()?;
    let k = kernels(&ctx)?;
    let mut stream = Stream::non_blocking(&ctx)?;
    let src = DeviceBuffer::<u32>::zeroed(&ctx, N)?;
    let host = PinnedHostBuffer::<u32>::zeroed(&ctx, N)?;
    let mut region = Region::new(&ctx);
    let out = region.bind_host(host);
    region.run(&mut stream, |r| {
        for _ in 0..8 {
            let cfg = LaunchConfig::new(1024, 256);
            // SAFETY: fill(u32*, u32) writes N words of `src`, alive until the end of
            // this test (after the synchronization below).
            unsafe { r.launch(&k.fill, &cfg, &(src.as_arg(), N as u32))? };
        }
        r.copy_to_host(out, &src)
    })?;
    std::mem::forget(region);
    // New pinned and pageable memory while the copy may be pending: untouched.
    let fresh = PinnedHostBuffer::<u32>::zeroed(&ctx, N)?;
    let plain = vec![0u32; N];
    ctx.synchronize()?;
    check(fresh.iter().all(|&v| v == 0), || {
        "pinned memory allocated after the forget was written".into()
    })?;
    check(plain.iter().all(|&v| v == 0), || {
        "a Vec allocated after the forget was written".into()
    })?;
    Ok(())
}

/// `HostRegistration::scope`: references and parts forgotten inside the closure end
/// nothing; the scope waits for the device-to-host copy before the `Vec` is the host's.
fn registration_scope_outlasts_a_forgotten_reference() -> TestResult {
    use cudadrv::memory::registered::{HostRegisterFlags, HostRegistration};
    require_gpu()?;
    const N: usize = 1 << 22;
    let ctx = ctx()?;
    let k = kernels(&ctx)?;
    let stream = Stream::non_blocking(&ctx)?;
    let src = DeviceBuffer::<u32>::zeroed(&ctx, N)?;
    let mut data = vec![0u32; N];
    HostRegistration::scope(&ctx, &mut data, HostRegisterFlags::empty(), |reg| {
        for _ in 0..8 {
            fill(&k, &src, &stream)?;
        }
        reg.copy_from_device_async(&src, &stream)?;
        // All a closure can forget: a part, and its reference (a no-op, which is the
        // point: the registration itself is out of its reach).
        #[allow(clippy::forget_non_drop)]
        std::mem::forget(reg.part(0..N)?);
        #[allow(forgetting_references)]
        std::mem::forget(reg);
        Ok(())
    })?;
    check_filled(&data, "the Vec after the scope")
}
