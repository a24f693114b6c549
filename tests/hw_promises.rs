//! The driver's promises that cudadrv's SAFETY arguments rely on, each probed on the GPU.
//!
//! A safe call is sound only if what the driver does *later* (after the call returned)
//! is what the argument says. These probes hold work back on a stream with a gate (a
//! host function that waits until the test opens it), do the thing whose safety is in
//! question while the work is pending, and look at what happened:
//!
//! | promise | relied on by |
//! |---|---|
//! | `cuMemFree` waits for the pending work of its own context, and only of it | `DeviceBuffer`'s drop after its async memsets and copies; why those refuse streams of other contexts |
//! | `cuCtxSynchronize` before `cuGraphExecDestroy` waits for the graph's launches on its context's streams | `GraphExec`'s drop (its `'a` borrows end with it); launches elsewhere are refused |
//! | kernel arguments are copied when a launch or a kernel node is made | launches and kernel nodes taking arguments by reference |
//! | `cuEventDestroy` of an event another stream waits on keeps the wait | `Event`'s drop while waits are pending |
//! | `cuStreamDestroy` with pending work lets the work complete | `Stream`'s drop |
//! | `cuModuleUnload` with a pending launch of its kernel lets it run (or waits) | `Function`/`Module` drops after a launch |
//! | `cuMemFreeHost` with a pending copy that reads the buffer lets it finish (or waits) | safe graph copy nodes that read pinned memory, when the executable graph is leaked |
//!
//! Kernels come from `ptx/generated/kernels.ptx` (`fill`: `out[i] = 3 i + 1`;
//! `write_value`: `out[0] = value`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use cuda_workspace::{
    Kernels, TestResult, check, check_eq, check_filled, hw_tests, require_gpu, run_suite,
};
use cudadrv::graph::{Graph, InstantiateFlags};
use cudadrv::launch::{LaunchConfig, launch};
use cudadrv::{
    Context, ContextFlags, Device, DeviceBuffer, Error, Event, EventFlags, PinnedHostBuffer, Stream,
};

fn main() {
    run_suite(
        "hw_promises",
        hw_tests![
            mem_free_waits_only_for_its_own_context,
            exec_drop_waits_for_its_launches,
            kernel_arguments_are_copied_at_the_call,
            event_destroy_keeps_pending_waits,
            stream_destroy_lets_pending_work_finish,
            module_unload_lets_a_pending_launch_run,
            mem_free_host_lets_a_pending_copy_finish,
        ],
    );
}

/// How long a gate stays closed in the probes that measure whether a call waited.
const HOLD: Duration = Duration::from_millis(400);

/// Work held back on a stream: a host function that waits until [`Gate::open`] (or 10 s
/// at most, so a failing probe cannot hang the suite).
struct Gate(Arc<AtomicBool>);

impl Gate {
    fn close(stream: &Stream) -> Result<Self, Error> {
        let open = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&open);
        stream.launch_host_fn(move || {
            let start = Instant::now();
            while !flag.load(Ordering::SeqCst) && start.elapsed() < Duration::from_secs(10) {
                std::thread::sleep(Duration::from_millis(1));
            }
        })?;
        Ok(Self(open))
    }

    fn open(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// Opens the gate from another thread after `after`.
    fn open_after(&self, after: Duration) -> std::thread::JoinHandle<()> {
        let flag = Arc::clone(&self.0);
        std::thread::spawn(move || {
            std::thread::sleep(after);
            flag.store(true, Ordering::SeqCst);
        })
    }
}

/// How long `f` took.
fn timed(f: impl FnOnce()) -> Duration {
    let start = Instant::now();
    f();
    start.elapsed()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// `cuMemsetD32Async` through the raw table, on `stream` (of `ctx`, made current).
fn raw_memset_d32(ctx: &Context, ptr: u64, value: u32, n: usize, stream: &Stream) -> TestResult {
    let cu = cudadrv_sys::driver().map_err(|e| e.to_string())?;
    ctx.bind()?;
    let f = cu.cuMemsetD32Async().map_err(|e| e.to_string())?;
    // SAFETY: `ptr` holds `n` words while the call runs (the caller's buffer); live
    // stream of the current context. What runs later is the point of the probe.
    let rc = unsafe { f(ptr, value, n, stream.as_raw()) };
    check(rc.is_success(), || format!("cuMemsetD32Async: {rc}"))
}

/// `cuMemFree` in context A waits for a memset queued on A's stream, and returns at once
/// while a memset queued on a stream of context B (same device) into the same memory is
/// still pending; the address can then be handed out again and B's memset lands in the
/// new allocation. This is why the safe async memsets and copies take streams of the
/// buffer's own context only (`Error::ContextMismatch` otherwise).
fn mem_free_waits_only_for_its_own_context() -> TestResult {
    require_gpu()?;
    const N: usize = 1 << 20;
    let dev = Device::get(0)?;
    let a = Context::primary(dev)?;
    let b = Context::create(dev, ContextFlags::empty())?;
    // Own context: the free waits for the gated memset.
    let stream_a = Stream::non_blocking(&a)?;
    let mut buf = DeviceBuffer::<u32>::zeroed(&a, N)?;
    let gate = Gate::close(&stream_a)?;
    buf.memset_d32_async(0xA5A5_A5A5, &stream_a)?;
    let opener = gate.open_after(HOLD);
    let own = timed(|| drop(buf));
    opener.join().map_err(|_| "opener panicked")?;
    stream_a.synchronize()?;
    println!(
        "    cuMemFree with a memset pending in its own context: {:.1} ms (gate held {:.0} ms)",
        ms(own),
        ms(HOLD)
    );
    check(own >= HOLD.mul_f32(0.8), || {
        format!(
            "cuMemFree returned after {:.1} ms, before its own context's pending memset ran",
            ms(own)
        )
    })?;

    // Another context: the crate refuses; the raw call shows why.
    let stream_b = Stream::non_blocking(&b)?;
    let mut buf = DeviceBuffer::<u32>::zeroed(&a, N)?;
    let refused = buf.memset_d32_async(1, &stream_b);
    check(
        matches!(refused, Err(Error::ContextMismatch { .. })),
        || format!("memset_d32_async on another context's stream: {refused:?}"),
    )?;
    let addr = buf.as_raw();
    let gate = Gate::close(&stream_b)?;
    raw_memset_d32(&b, addr, 0xDEAD_BEEF, N, &stream_b)?;
    let opener = gate.open_after(HOLD * 2);
    let other = timed(|| drop(buf));
    let fresh = DeviceBuffer::<u32>::from_slice(&a, &vec![7u32; N])?;
    let reused = fresh.as_raw() == addr;
    opener.join().map_err(|_| "opener panicked")?;
    stream_b.synchronize()?;
    let mut back = vec![0u32; N];
    fresh.copy_to_host(&mut back)?;
    let overwritten = back.iter().filter(|&&v| v == 0xDEAD_BEEF).count();
    println!(
        "    cuMemFree with a memset pending on another context's stream: {:.1} ms; address \
         reused: {reused}; words of the new allocation overwritten by the old memset: {overwritten}",
        ms(other)
    );
    check(other < HOLD, || {
        format!(
            "cuMemFree waited {:.1} ms for another context's work (the driver changed: revisit the rule)",
            ms(other)
        )
    })?;
    if reused {
        check_eq(
            overwritten,
            N,
            "a reused allocation overwritten by the pending memset",
        )?;
    }
    a.bind()?;
    Ok(())
}

/// An executable graph's drop synchronizes its context (`cuCtxSynchronize`) before
/// `cuGraphExecDestroy`, which must wait for its launches on that context's streams: the
/// SAFETY argument of `GraphExec`'s drop, whose `'a` borrows end with it. Launches on
/// other contexts' streams are refused by the crate. What the driver does with such a
/// launch (made here through the raw table) is printed: on the H100 with driver 580
/// `cuCtxSynchronize` of the graph's context waited for it too, though it does not wait
/// for an ordinary memset on the other context's stream (also printed), which is what
/// `cuMemFree` does not wait for either.
fn exec_drop_waits_for_its_launches() -> TestResult {
    require_gpu()?;
    let dev = Device::get(0)?;
    let a = Context::primary(dev)?;
    let b = Context::create(dev, ContextFlags::empty())?;
    let buf = DeviceBuffer::<u32>::zeroed(&a, 256)?;
    let graph = Graph::new(&a)?;
    graph.add_memset_d32_node(&[], &buf, 9)?;
    let exec = graph.instantiate(InstantiateFlags::empty())?;
    let stream_a = Stream::non_blocking(&a)?;
    let stream_b = Stream::non_blocking(&b)?;
    let launched = exec.launch(&stream_b);
    check(
        matches!(launched, Err(Error::ContextMismatch { .. })),
        || format!("GraphExec::launch on another context's stream: {launched:?}"),
    )?;
    let uploaded = exec.upload(&stream_b);
    check(
        matches!(uploaded, Err(Error::ContextMismatch { .. })),
        || format!("GraphExec::upload on another context's stream: {uploaded:?}"),
    )?;

    // Another context's work: a raw launch of the graph and, separately, a memset, each
    // held back on B; how long `cuCtxSynchronize` of A takes with each pending.
    let cu = cudadrv_sys::driver().map_err(|e| e.to_string())?;
    let gate = Gate::close(&stream_b)?;
    b.bind()?;
    // SAFETY: live executable graph and stream; `buf` outlives the launch (the stream is
    // synchronized below before it is dropped).
    let rc =
        unsafe { cu.cuGraphLaunch().map_err(|e| e.to_string())?(exec.as_raw(), stream_b.as_raw()) };
    check(rc.is_success(), || format!("raw cuGraphLaunch on B: {rc}"))?;
    let opener = gate.open_after(HOLD);
    let graph_on_b = timed(|| drop(a.synchronize()));
    opener.join().map_err(|_| "opener panicked")?;
    stream_b.synchronize()?;
    let scratch = DeviceBuffer::<u32>::zeroed(&a, 256)?;
    let gate = Gate::close(&stream_b)?;
    raw_memset_d32(&b, scratch.as_raw(), 1, 256, &stream_b)?;
    let opener = gate.open_after(HOLD);
    let memset_on_b = timed(|| drop(a.synchronize()));
    opener.join().map_err(|_| "opener panicked")?;
    stream_b.synchronize()?;
    println!(
        "    cuCtxSynchronize of A with A's graph launched on B's stream pending: {:.1} ms; \
         with a memset on B's stream pending: {:.1} ms (gate {:.0} ms)",
        ms(graph_on_b),
        ms(memset_on_b),
        ms(HOLD)
    );

    // The promise the drop relies on: its own context's launch is waited for.
    let gate = Gate::close(&stream_a)?;
    exec.launch(&stream_a)?;
    let opener = gate.open_after(HOLD);
    let waited = timed(|| drop(exec));
    opener.join().map_err(|_| "opener panicked")?;
    println!(
        "    executable graph dropped with a launch pending on its own context: {:.1} ms",
        ms(waited)
    );
    check(waited >= HOLD.mul_f32(0.8), || {
        format!(
            "the drop returned after {:.1} ms, before its pending launch ran",
            ms(waited)
        )
    })?;
    let mut back = vec![0u32; 256];
    buf.copy_to_host(&mut back)?;
    check(back.iter().all(|&v| v == 9), || {
        "the launch did not run".into()
    })?;
    a.bind()?;
    Ok(())
}

/// The driver copies kernel arguments when the launch (or the kernel node) is made:
/// changing the argument values afterwards, while the launch is still pending, does not
/// change what the kernel gets.
fn kernel_arguments_are_copied_at_the_call() -> TestResult {
    require_gpu()?;
    let ctx = Context::primary(Device::get(0)?)?;
    let k = Kernels::load(&ctx)?;
    let stream = Stream::non_blocking(&ctx)?;
    let out = DeviceBuffer::<u32>::zeroed(&ctx, 1)?;
    let gate = Gate::close(&stream)?;
    let mut args = (out.as_arg(), 5u32);
    let cfg = LaunchConfig::new(1, 1).stream(&stream);
    // SAFETY: write_value takes (u32*, u32); `out` outlives the launch (synchronized below).
    unsafe { launch(&k.write_value, &cfg, &args)? };
    args.1 = 9;
    std::hint::black_box(&args);
    gate.open();
    stream.synchronize()?;
    let mut v = [0u32];
    out.copy_to_host(&mut v)?;
    check_eq(v[0], 5, "stream launch: value at the call")?;

    // Kernel node: the arguments given to add_kernel_node, not later ones.
    let graph = Graph::new(&ctx)?;
    let mut args = (out.as_arg(), 11u32);
    let node_cfg = LaunchConfig::new(1, 1);
    // SAFETY: as above; `out` outlives every launch of the graph (same scope).
    unsafe { graph.add_kernel_node(&[], &k.write_value, &node_cfg, &args)? };
    args.1 = 13;
    std::hint::black_box(&args);
    let exec = graph.instantiate(InstantiateFlags::empty())?;
    exec.launch(&stream)?;
    stream.synchronize()?;
    out.copy_to_host(&mut v)?;
    check_eq(v[0], 11, "kernel node: value at add_kernel_node")
}

/// Stream B waits on an event recorded behind a gate on stream A; the event is destroyed
/// while the wait is pending. B's later work still runs after A's (the wait holds).
fn event_destroy_keeps_pending_waits() -> TestResult {
    require_gpu()?;
    let ctx = Context::primary(Device::get(0)?)?;
    let stream_a = Stream::non_blocking(&ctx)?;
    let mut stream_b = Stream::non_blocking(&ctx)?;
    let mut src = DeviceBuffer::<u32>::zeroed(&ctx, 1 << 16)?;
    let mut dst = DeviceBuffer::<u32>::zeroed(&ctx, 1 << 16)?;
    let gate = Gate::close(&stream_a)?;
    src.memset_d32_async(21, &stream_a)?;
    let event = Event::new(&ctx, EventFlags::DISABLE_TIMING)?;
    event.record(&stream_a)?;
    stream_b.wait_event(&event)?;
    dst.copy_from_device_async(&src, &stream_b)?;
    drop(event);
    std::thread::sleep(Duration::from_millis(50));
    gate.open();
    stream_b.synchronize()?;
    stream_a.synchronize()?;
    let mut back = vec![0u32; 1 << 16];
    dst.copy_to_host(&mut back)?;
    check(back.iter().all(|&v| v == 21), || {
        format!(
            "the copy on B ran before A's memset (first value {})",
            back[0]
        )
    })
}

/// A stream destroyed with work pending: the work still completes.
fn stream_destroy_lets_pending_work_finish() -> TestResult {
    require_gpu()?;
    let ctx = Context::primary(Device::get(0)?)?;
    let stream = Stream::non_blocking(&ctx)?;
    let mut buf = DeviceBuffer::<u32>::zeroed(&ctx, 1 << 16)?;
    let gate = Gate::close(&stream)?;
    buf.memset_d32_async(33, &stream)?;
    let opener = gate.open_after(Duration::from_millis(100));
    drop(stream);
    opener.join().map_err(|_| "opener panicked")?;
    ctx.synchronize()?;
    let mut back = vec![0u32; 1 << 16];
    buf.copy_to_host(&mut back)?;
    check(back.iter().all(|&v| v == 33), || {
        "the pending memset did not run".into()
    })
}

/// A module unloaded (its `Function` and `Module` dropped) while a launch of its kernel
/// is pending: the launch still runs and writes the right values.
fn module_unload_lets_a_pending_launch_run() -> TestResult {
    require_gpu()?;
    let ctx = Context::primary(Device::get(0)?)?;
    let stream = Stream::non_blocking(&ctx)?;
    let out = DeviceBuffer::<u32>::zeroed(&ctx, 1 << 16)?;
    let k = Kernels::load(&ctx)?;
    let gate = Gate::close(&stream)?;
    let cfg = LaunchConfig::new(256, 256).stream(&stream);
    // SAFETY: fill takes (u32*, u32); `out` holds 65536 u32s and outlives the launch.
    unsafe { launch(&k.fill, &cfg, &(out.as_arg(), 1u32 << 16))? };
    let opener = gate.open_after(HOLD);
    let waited = timed(|| drop(k));
    opener.join().map_err(|_| "opener panicked")?;
    stream.synchronize()?;
    println!(
        "    module unloaded with a launch pending: {:.1} ms",
        ms(waited)
    );
    let mut back = vec![0u32; 1 << 16];
    out.copy_to_host(&mut back)?;
    check_filled(&back, "kernel of the unloaded module")
}

/// A safe graph copy node reads pinned memory; safe code can leak the executable graph
/// (`mem::forget`), which ends the borrow while a launch is pending, and then free the
/// pinned buffer. `cuMemFreeHost` must not free the pages under the pending copy.
fn mem_free_host_lets_a_pending_copy_finish() -> TestResult {
    require_gpu()?;
    const N: usize = 1 << 20;
    let ctx = Context::primary(Device::get(0)?)?;
    let stream = Stream::non_blocking(&ctx)?;
    let dst = DeviceBuffer::<u32>::zeroed(&ctx, N)?;
    let src = PinnedHostBuffer::from_slice(&ctx, &vec![44u32; N])?;
    let waited;
    {
        let graph = Graph::new(&ctx)?;
        graph.add_copy_from_host_node(&[], &dst, &src)?;
        let exec = graph.instantiate(InstantiateFlags::empty())?;
        let gate = Gate::close(&stream)?;
        exec.launch(&stream)?;
        std::mem::forget(exec);
        drop(graph);
        let opener = gate.open_after(HOLD);
        waited = timed(|| drop(src));
        opener.join().map_err(|_| "opener panicked")?;
    }
    stream.synchronize()?;
    println!(
        "    cuMemFreeHost with a graph copy reading it pending: {:.1} ms",
        ms(waited)
    );
    let mut back = vec![0u32; N];
    dst.copy_to_host(&mut back)?;
    check(back.iter().all(|&v| v == 44), || {
        format!(
            "the pending copy read freed pinned memory (first value {}, cuMemFreeHost took {:.1} ms)",
            back[0],
            ms(waited)
        )
    })
}
