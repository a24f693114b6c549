//! Hardware tests of what outside users needed without `unsafe` (issue 34): views of
//! device memory (`cudadrv::memory::view`) in copies, memsets, kernels, batches, graphs
//! and replay regions; stream-ordered views; memory and streams from elsewhere (raw
//! parts, pointer queries, context queries without side effects); DLPack with its
//! stream handshake; managed memory in a scope; the `dependent` rule of typed launches.
//!
//! Values: `typed_iota` writes `base + 3i`; `typed_mad` adds `k * x[i]`.

use cuda_workspace::typed::{typed_iota, typed_mad};
use cuda_workspace::{Outcome, TestResult, check, check_eq, hw_tests, ptx, require_sm, run_suite};
use cudadrv::graph::{Graph, Region};
use cudadrv::kernel::{self, DeviceSliceMut, KernelModule, TypedKernel};
use cudadrv::memory::batch::CopyBatch;
use cudadrv::memory::dlpack::{self, DlpackTensor};
use cudadrv::memory::managed::Attach;
use cudadrv::memory::{DeviceViewMut, ManagedBuffer, MemoryKind, Release, pointer_info};
use cudadrv::{
    AsyncDeviceBuffer, Context, Device, DeviceBuffer, Error, LaunchConfig, PinnedHostBuffer, Stream,
};

fn main() {
    run_suite(
        "hw_views",
        hw_tests![
            copies_and_memsets_on_slices,
            kernels_on_split_halves_on_two_streams,
            views_in_a_batch,
            views_in_graph_and_region_nodes,
            stream_ordered_views_stay_on_their_stream,
            foreign_memory_from_raw_parts,
            foreign_capture_on_a_borrowed_stream,
            context_queries_have_no_side_effects,
            dlpack_round_trip_with_the_stream_handshake,
            managed_views_in_a_scope,
            typed_pdl_needs_a_dependent_kernel,
        ],
    );
}

fn setup() -> Result<(Context, KernelModule), Outcome> {
    require_sm(9, 0)?;
    let ctx = Context::primary(Device::get(0)?)?;
    let module = KernelModule::load(&ctx, &ptx::TRUSTED)?;
    Ok((ctx, module))
}

fn read(buf: &DeviceBuffer<u32>) -> Result<Vec<u32>, Error> {
    let mut v = vec![0u32; buf.len()];
    buf.copy_to_host(&mut v)?;
    Ok(v)
}

/// Every element against `want`, naming the first mismatch.
fn check_all(got: &[u32], want: impl Fn(usize) -> u32, what: &str) -> TestResult {
    match got.iter().enumerate().find(|&(i, &v)| v != want(i)) {
        None => Ok(()),
        Some((i, &v)) => Err(Outcome::Fail(format!(
            "{what}: element {i} is {v}, want {}",
            want(i)
        ))),
    }
}

/// Synchronous and asynchronous copies and memsets on parts of buffers land exactly in
/// their part: 1 Mi values, five regions, every value checked.
fn copies_and_memsets_on_slices() -> TestResult {
    let (ctx, _) = setup()?;
    const N: usize = 1 << 20;
    const M: usize = 4096;
    let stream = Stream::non_blocking(&ctx)?;
    let mut buf = DeviceBuffer::<u32>::zeroed(&ctx, N)?;
    let src_host: Vec<u32> = (0..N as u32).map(|i| i ^ 0x5a5a).collect();
    let src = DeviceBuffer::from_slice(&ctx, &src_host)?;
    let data: Vec<u32> = (0..M as u32).map(|i| 100_000 + i).collect();
    buf.slice_mut(1000..1000 + M)?.copy_from_host(&data)?;
    buf.slice_mut(..1000)?.memset_d32(7)?;
    buf.slice_mut(N - M..)?
        .copy_from_async(src.slice(..M)?, &stream)?;
    buf.slice_mut(N / 2..N / 2 + M)?
        .memset_d32_async(0xdead_beef, &stream)?;
    buf.slice_mut(N / 4..N / 4 + M)?
        .copy_from(src.slice(N / 4..N / 4 + M)?)?;
    stream.synchronize()?;
    let got = read(&buf)?;
    check_all(
        &got,
        |i| match i {
            _ if i < 1000 => 7,
            _ if (1000..1000 + M).contains(&i) => 100_000 + (i - 1000) as u32,
            _ if (N / 4..N / 4 + M).contains(&i) => src_host[i],
            _ if (N / 2..N / 2 + M).contains(&i) => 0xdead_beef,
            _ if i >= N - M => src_host[i - (N - M)],
            _ => 0,
        },
        "five regions",
    )?;
    let mut part = vec![0u32; M];
    buf.slice(N - M..)?.copy_to_host(&mut part)?;
    check_eq(&part[..], &src_host[..M], "a slice read back")
}

/// The halves of one buffer (`split_at_mut`) written by kernels on two streams at once
/// (no ordering between them), a third kernel reading a shared view of part of another
/// buffer: every value checked.
fn kernels_on_split_halves_on_two_streams() -> TestResult {
    let (ctx, module) = setup()?;
    let iota = module.kernel::<typed_iota>()?;
    let mad = module.kernel::<typed_mad>()?;
    const N: usize = 1 << 22;
    let x_host: Vec<u32> = (0..N as u32).collect();
    let x = DeviceBuffer::from_slice(&ctx, &x_host)?;
    let mut out = DeviceBuffer::<u32>::zeroed(&ctx, N)?;
    let (s1, s2) = (Stream::non_blocking(&ctx)?, Stream::non_blocking(&ctx)?);
    let cfg = LaunchConfig::new(132, 256);
    kernel::scope(&ctx, |s| {
        let (l1, l2) = (s.lane(&s1)?, s.lane(&s2)?);
        let (lo, hi) = out.split_at_mut(N / 2)?;
        let mut lo = l1.own(lo)?;
        l2.launch(&iota, &cfg, (hi, 1000))?; // 1000 + 3i over the upper half
        l1.launch(&iota, &cfg, (&mut lo, 5))?; // 5 + 3i over the lower half
        // + 2 * x[N/2 + i] from a shared view of x's upper half
        l1.launch(&mad, &cfg, (x.slice(N / 2..)?, 2, &mut lo))?;
        Ok(())
    })?;
    let got = read(&out)?;
    check_all(
        &got,
        |i| {
            if i < N / 2 {
                5 + 3 * i as u32 + 2 * (N / 2 + i) as u32
            } else {
                1000 + 3 * (i - N / 2) as u32
            }
        },
        "two halves, two streams",
    )
}

/// A batch of four copies between quarters of two buffers (in reverse order), as views.
fn views_in_a_batch() -> TestResult {
    let (ctx, _) = setup()?;
    const N: usize = 1 << 16;
    let src_host: Vec<u32> = (0..N as u32).map(|i| 3 * i + 1).collect();
    let src = DeviceBuffer::from_slice(&ctx, &src_host)?;
    let mut dst = DeviceBuffer::<u32>::zeroed(&ctx, N)?;
    let stream = Stream::non_blocking(&ctx)?;
    let q = N / 4;
    {
        let (a, rest) = dst.split_at_mut(q)?;
        let (b, rest) = rest.split_at_mut(q)?;
        let (c, d) = rest.split_at_mut(q)?;
        let mut quarters = [a, b, c, d];
        let parts: Vec<_> = (0..4)
            .map(|k| src.slice((3 - k) * q..(4 - k) * q))
            .collect::<Result<_, _>>()?;
        let mut batch = CopyBatch::new();
        for (dst, src) in quarters.iter_mut().zip(&parts) {
            batch.copy(dst, src)?;
        }
        batch.submit(&stream)?;
        stream.synchronize()?;
    }
    let got = read(&dst)?;
    check_all(
        &got,
        |i| src_host[(3 - i / q) * q + i % q],
        "quarters reversed by a batch",
    )
}

/// A graph with a memset node on a slice and a copy node between slices, and a replay
/// region doing the same through its recorder, each launched twice; a node naming
/// stream-ordered memory is refused.
fn views_in_graph_and_region_nodes() -> TestResult {
    let (ctx, _) = setup()?;
    const N: usize = 1 << 14;
    let src_host: Vec<u32> = (0..N as u32).map(|i| i * 7).collect();
    let src = DeviceBuffer::from_slice(&ctx, &src_host)?;
    let dst = DeviceBuffer::<u32>::zeroed(&ctx, N)?;
    let mut stream = Stream::non_blocking(&ctx)?;
    {
        let graph = Graph::new(&ctx)?;
        let set = graph.add_memset_d32_node(&[], dst.slice(..N / 2)?, 9)?;
        graph.add_copy_node(&[set], dst.slice(N / 2..)?, src.slice(..N / 2)?)?;
        let exec = graph.instantiate(Default::default())?;
        exec.launch(&stream)?;
        exec.launch(&stream)?;
        stream.synchronize()?;
    }
    check_all(
        &read(&dst)?,
        |i| if i < N / 2 { 9 } else { src_host[i - N / 2] },
        "graph nodes on views",
    )?;
    let region_dst = DeviceBuffer::<u32>::zeroed(&ctx, N)?;
    let mut region = Region::new(&ctx);
    for round in 0..2u32 {
        region.run(&mut stream, |r| {
            r.memset_d32(region_dst.slice(N / 2..)?, 11 + round)?;
            r.copy(region_dst.slice(..N / 2)?, src.slice(N / 2..)?)
        })?;
    }
    stream.synchronize()?;
    check_all(
        &read(&region_dst)?,
        |i| if i < N / 2 { src_host[N / 2 + i] } else { 12 },
        "region nodes on views (second round's value)",
    )?;
    let pooled = AsyncDeviceBuffer::<u32>::new(&stream, 256)?;
    let graph = Graph::new(&ctx)?;
    let refused = graph.add_memset_d32_node(&[], pooled.view(), 1);
    check(matches!(refused, Err(Error::InvalidArgument(_))), || {
        format!("a graph node on stream-ordered memory: {refused:?}")
    })?;
    drop(graph);
    drop(pooled);
    stream.synchronize()?;
    Ok(())
}

/// A stream-ordered buffer's views take asynchronous work on its own stream and are
/// refused on another; the values of the allowed work are right.
fn stream_ordered_views_stay_on_their_stream() -> TestResult {
    let (ctx, _) = setup()?;
    let (s1, s2) = (Stream::non_blocking(&ctx)?, Stream::non_blocking(&ctx)?);
    let mut pooled = AsyncDeviceBuffer::<u32>::new(&s1, 1 << 16)?;
    check_eq(
        pooled.view().release(),
        Release::Stream(s1.as_raw()),
        "release",
    )?;
    let refused = pooled.view_mut().memset_d32_async(1, &s2);
    check(matches!(refused, Err(Error::InvalidArgument(_))), || {
        format!("another stream: {refused:?}")
    })?;
    pooled.slice_mut(..1 << 15)?.memset_d32_async(5, &s1)?;
    pooled.slice_mut(1 << 15..)?.memset_d32_async(6, &s1)?;
    let mut host = vec![0u32; 1 << 16];
    // SAFETY: `host` is neither read nor dropped before `s1` is synchronized below.
    unsafe { pooled.view().copy_to_host_async(&mut host, &s1)? };
    s1.synchronize()?;
    check_all(&host, |i| if i < 1 << 15 { 5 } else { 6 }, "pooled halves")
}

/// Memory allocated outside the crate (a raw `cuMemAlloc`, as a framework's allocator
/// would): the pointer query describes it, a view made from raw parts is written and
/// read through the crate's calls.
fn foreign_memory_from_raw_parts() -> TestResult {
    let (ctx, _) = setup()?;
    const N: usize = 1 << 16;
    let cu = cudadrv::cuda_sys::driver()?;
    let mut ptr = 0;
    ctx.bind()?;
    // SAFETY: a valid out-pointer; the primary context is current (bound above).
    let rc = unsafe { cu.cuMemAlloc()?(&mut ptr, N * 4 + 256) };
    check(rc.is_success(), || format!("cuMemAlloc: {rc:?}"))?;
    let base = ptr;
    let ptr = base + 256;
    let info = pointer_info(ptr)?;
    let checks = (|| {
        check_eq(info.kind, MemoryKind::Device, "kind")?;
        check_eq(info.device_ordinal, ctx.device().as_raw(), "device")?;
        check_eq(info.context, ctx.as_raw(), "context")?;
        check_eq(info.range_start, base, "allocation start")?;
        check(info.contains(ptr, N * 4), || format!("range {info:?}"))?;
        check(!info.contains(ptr, N * 4 + 1), || "past the end".into())?;
        let stream = Stream::non_blocking(&ctx)?;
        // SAFETY: N values inside the allocation above, freed only after the stream
        // and the synchronous calls below are done; nothing else touches it.
        let mut view = unsafe { DeviceViewMut::<u32>::from_raw_parts(ptr, N, &ctx) };
        let data: Vec<u32> = (0..N as u32).map(|i| i * 5).collect();
        view.copy_from_host(&data)?;
        view.reborrow()
            .into_slice(..16)?
            .memset_d32_async(77, &stream)?;
        stream.synchronize()?;
        let mut back = vec![0u32; N];
        view.as_view().copy_to_host(&mut back)?;
        check_all(
            &back,
            |i| if i < 16 { 77 } else { i as u32 * 5 },
            "raw parts",
        )
    })();
    // SAFETY: the allocation made above; the stream work on it has finished.
    let rc = unsafe { cu.cuMemFree()?(base) };
    checks?;
    check(rc.is_success(), || format!("cuMemFree: {rc:?}"))?;
    let gone = pointer_info(ptr)?;
    check_eq(gone.kind, MemoryKind::Unknown, "after the free")
}

/// On a fresh thread: no current context; `retain_primary` leaves it so; after a bind,
/// `Context::current` and `Device::current` name the primary context and its device.
/// Pointer kinds of managed, pinned and stack memory.
fn context_queries_have_no_side_effects() -> TestResult {
    let (ctx, _) = setup()?;
    let dev = ctx.device();
    let raw = ctx.as_raw() as usize;
    let fresh = std::thread::spawn(move || -> Result<[bool; 4], Error> {
        let none_at_start = Context::current()?.is_none();
        let retained = Context::retain_primary(dev)?;
        let still_none = Context::current()?.is_none();
        retained.bind()?;
        let current = Context::current()?;
        let same = current.as_ref().is_some_and(|c| c.as_raw() as usize == raw);
        Ok([none_at_start, still_none, same, Device::current()? == dev])
    })
    .join()
    .map_err(|_| Outcome::Fail("the thread panicked".into()))??;
    check_eq(
        fresh,
        [true, true, true, true],
        "none, none after retain_primary, primary after bind, its device",
    )?;
    let managed = ManagedBuffer::<u32>::new(&ctx, 64, Attach::Global)?;
    let pinned = PinnedHostBuffer::<u32>::zeroed(&ctx, 64)?;
    let stack = [0u32; 4];
    check_eq(
        pointer_info(managed.as_raw())?.kind,
        MemoryKind::Managed,
        "managed",
    )?;
    check_eq(
        pointer_info(pinned.as_ptr() as u64)?.kind,
        MemoryKind::Host,
        "pinned",
    )?;
    let s = pointer_info(stack.as_ptr() as u64)?;
    check_eq(
        (s.kind, s.range_bytes),
        (MemoryKind::Unknown, 0),
        "a stack array",
    )
}

/// Export a buffer a kernel is still writing on the producer stream, import it on a
/// consumer stream (the handshake orders them with an event, the host never waits),
/// copy it on the consumer stream: the copy sees the kernel's and the memset's values
/// (without the handshake it would start at once and read zeros). Dropping the
/// import runs the export's deleter, which frees the buffer.
fn dlpack_round_trip_with_the_stream_handshake() -> TestResult {
    let (ctx, module) = setup()?;
    let iota = module.kernel::<typed_iota>()?;
    const N: usize = 1 << 24;
    let (producer, consumer) = (Stream::non_blocking(&ctx)?, Stream::non_blocking(&ctx)?);
    let mut buf = DeviceBuffer::<u32>::zeroed(&ctx, N)?;
    // Pending on the producer when the export returns: a slow kernel (two blocks over
    // 16 Mi values), then a memset of the first values.
    let cfg = LaunchConfig::new(2, 64).stream(&producer);
    let args = (
        // SAFETY: the buffer's N values; it is freed only by the export's deleter, after
        // the consumer stream (which waits for this launch) has finished.
        unsafe { DeviceSliceMut::from_raw_parts(buf.as_raw() as *mut u32, N) },
        3u32,
    );
    // SAFETY: as above; nothing else touches the buffer before the consumer's copy.
    unsafe { iota.launch(&cfg, &args)? };
    buf.slice_mut(..1024)?.memset_d32_async(42, &producer)?;
    let addr = buf.as_raw();
    let raw = dlpack::export(buf, &producer, Some(consumer.as_raw()))?;
    // SAFETY: exported above for this consumer, ordered before `consumer`.
    let tensor = unsafe { DlpackTensor::from_versioned(raw, &ctx, &consumer)? };
    check_eq(tensor.shape(), &[N as i64][..], "shape")?;
    let mut copy = DeviceBuffer::<u32>::zeroed(&ctx, N)?;
    copy.view_mut()
        .copy_from_async(tensor.view::<u32>()?, &consumer)?;
    drop(tensor); // synchronizes `consumer`, then frees the buffer
    check_eq(
        pointer_info(addr)?.kind,
        MemoryKind::Unknown,
        "freed by the deleter",
    )?;
    check_all(
        &read(&copy)?,
        |i| if i < 1024 { 42 } else { 3 + 3 * i as u32 },
        "the consumer's copy",
    )?;
    // A buffer of a created context: its free would not wait for a framework's work in
    // the primary context, so the export is refused (and the buffer freed here).
    let own = Context::create(ctx.device(), cudadrv::ContextFlags::empty())?;
    let stream2 = Stream::non_blocking(&own)?;
    let refused = dlpack::export(DeviceBuffer::<u32>::zeroed(&own, 16)?, &stream2, None);
    check(matches!(refused, Err(Error::InvalidArgument(_))), || {
        format!("export from a created context: {refused:?}")
    })
}

/// A managed buffer written by a kernel through a view in a scope, read by the host
/// after the scope.
fn managed_views_in_a_scope() -> TestResult {
    let (ctx, module) = setup()?;
    let iota = module.kernel::<typed_iota>()?;
    let stream = Stream::non_blocking(&ctx)?;
    let mut buf = ManagedBuffer::<u32>::new(&ctx, 1 << 16, Attach::Global)?;
    kernel::scope(&ctx, |s| {
        let lane = s.lane(&stream)?;
        lane.launch(
            &iota,
            &LaunchConfig::new(64, 256),
            (buf.slice_mut(100..)?, 9),
        )
    })?;
    let host = buf.host()?;
    check_all(
        host,
        |i| if i < 100 { 0 } else { 9 + 3 * (i - 100) as u32 },
        "managed through a view",
    )
}

/// A typed (unsafe) launch with a programmatic attribute of a kernel not declared
/// `dependent` is refused before the driver; nothing runs.
fn typed_pdl_needs_a_dependent_kernel() -> TestResult {
    let (ctx, module) = setup()?;
    let iota: TypedKernel<typed_iota> = module.kernel()?;
    let out = DeviceBuffer::<u32>::zeroed(&ctx, 256)?;
    let stream = Stream::non_blocking(&ctx)?;
    let cfg = LaunchConfig::new(1, 256)
        .stream(&stream)
        .programmatic_stream_serialization()?;
    let args = (
        // SAFETY: the buffer's 256 values, alive past the launch (which is refused).
        unsafe { DeviceSliceMut::from_raw_parts(out.as_raw() as *mut u32, 256) },
        1u32,
    );
    // SAFETY: the argument names live memory of this context for as long as a launch
    // could run; the call refuses before the driver.
    let r = unsafe { iota.launch(&cfg, &args) };
    check(matches!(r, Err(Error::InvalidArgument(_))), || {
        format!("PDL on a kernel not declared dependent: {r:?}")
    })?;
    stream.synchronize()?;
    check_all(&read(&out)?, |_| 0, "nothing ran")
}

/// A stream another library owns and captures (what `torch.cuda.graph` does; here raw
/// `cuStreamBeginCapture` / `cuStreamEndCapture`), borrowed with `Stream::borrow_raw`:
/// a safe call naming memory is refused while it captures, an `unsafe` typed launch is
/// recorded into the other library's graph, and that graph's replays write the values.
fn foreign_capture_on_a_borrowed_stream() -> TestResult {
    use cudadrv::cuda_sys::{CUresult, CUstreamCaptureMode};
    let (ctx, module) = setup()?;
    let iota = module.kernel::<typed_iota>()?;
    let cu = cudadrv::cuda_sys::driver()?;
    const N: usize = 4096;
    let owner = Stream::non_blocking(&ctx)?; // the other library's stream
    let raw = owner.as_raw();
    let mut out = DeviceBuffer::<u32>::zeroed(&ctx, N)?;
    let ok = |rc: CUresult, what: &str| check(rc.is_success(), || format!("{what}: {rc:?}"));
    ctx.bind()?;
    // SAFETY: a live stream of the current context; relaxed mode (no other thread's
    // calls are affected).
    ok(
        unsafe {
            cu.cuStreamBeginCapture()?(raw, CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED)
        },
        "cuStreamBeginCapture",
    )?;
    // SAFETY: `raw` is a stream of `ctx` that outlives `borrowed`; the capture was begun
    // before and ends after the crate's calls on it, on this thread.
    let borrowed = unsafe { Stream::borrow_raw(raw, &ctx) };
    let refused = out.memset_d32_async(1, &borrowed);
    let cfg = LaunchConfig::new(4, 256).stream(&borrowed);
    let args = (
        // SAFETY: `out`'s N values, alive until after the graph's replays below.
        unsafe { DeviceSliceMut::from_raw_parts(out.as_raw() as *mut u32, N) },
        7u32,
    );
    // SAFETY: the argument stays valid for every replay of the captured graph, which
    // runs and is destroyed below, before `out` is dropped.
    let launched = unsafe { iota.launch(&cfg, &args) };
    drop(borrowed);
    let mut graph = std::ptr::null_mut();
    // SAFETY: the capture begun above; valid out-pointer.
    let ended = unsafe { cu.cuStreamEndCapture()?(raw, &mut graph) };
    ok(ended, "cuStreamEndCapture")?;
    let mut exec = std::ptr::null_mut();
    // SAFETY: the graph just captured; valid out-pointer.
    let rc = unsafe { cu.cuGraphInstantiate()?(&mut exec, graph, 0) };
    let replayed = ok(rc, "cuGraphInstantiate").and_then(|()| {
        for _ in 0..2 {
            // SAFETY: a live executable graph and stream.
            ok(unsafe { cu.cuGraphLaunch()?(exec, raw) }, "cuGraphLaunch")?;
        }
        owner.synchronize().map_err(Outcome::from)
    });
    // SAFETY: the graph and executable graph made above, their launches finished (or
    // none); destroyed once.
    let destroyed = unsafe {
        let e = if exec.is_null() {
            CUresult::CUDA_SUCCESS
        } else {
            cu.cuGraphExecDestroy()?(exec)
        };
        (e, cu.cuGraphDestroy()?(graph))
    };
    replayed?;
    ok(destroyed.0, "cuGraphExecDestroy")?;
    ok(destroyed.1, "cuGraphDestroy")?;
    check(matches!(refused, Err(Error::StreamCapturing(_))), || {
        format!("a safe memset on the captured stream: {refused:?}")
    })?;
    check(launched.is_ok(), || {
        format!("the recorded launch: {launched:?}")
    })?;
    check_all(
        &read(&out)?,
        |i| 7 + 3 * i as u32,
        "the other library's graph",
    )
}
