//! Hardware tests of what porting NVIDIA's CUDA samples needed (issue 11, "Newcomers"):
//! a non-primary context with flags used from another thread, the occupancy block-size
//! queries, `cuMemGetInfo`, host-to-device and device-to-host copy nodes (explicit and
//! captured) in a graph launched several times, pinned host memory with flags (mapped
//! memory written by a kernel through its device pointer), a conditional node added
//! inside a stream capture, and, last, a primary context reset followed by a fresh
//! context.
//!
//! Kernels come from `ptx/generated/kernels.ptx` (`fill`: `out[i] = 3 i + 1`;
//! `write_value`: `out[0] = value`; `vec_add`: `c = a + b`).

use core::ffi::c_int;
use std::sync::atomic::{AtomicUsize, Ordering};

use cuda_workspace::{
    Kernels, TestResult, check, check_eq, check_filled, hw_tests, require_gpu, run_suite, skip,
};
use cudadrv::graph::{CaptureMode, EdgeData, Graph, GraphNode, InstantiateFlags};
use cudadrv::launch::{LaunchConfig, launch};
use cudadrv::memory::HostAllocFlags;
use cudadrv::{
    Context, ContextFlags, Device, DeviceBuffer, DevicePtr, Error, PinnedHostBuffer, Pod, Stream,
};
use cudadrv_sys::{CUgraphNodeType, CUoccupancy_flags};

fn main() {
    run_suite(
        "hw_samples",
        hw_tests![
            created_context_with_flags_from_another_thread,
            occupancy_block_size_launches,
            mem_info_drops_after_a_big_allocation,
            copy_nodes_round_trip_through_three_launches,
            captured_host_copies_round_trip_through_three_launches,
            mapped_pinned_memory_written_by_a_kernel,
            conditional_if_node_inside_a_capture,
            conditional_if_else_node_inside_a_capture,
            // Last: it resets the primary context every other test used.
            primary_context_reset_then_a_new_context_works,
        ],
    );
}

fn ctx() -> Result<Context, Error> {
    Context::primary(Device::get(0)?)
}

fn kernels(ctx: &Context) -> Result<Kernels, Error> {
    Kernels::load(ctx)
}

/// Launches `fill(out, n)` with `block` threads per block on `stream`.
///
/// # Safety
/// `out` must hold `n` writable `u32`s until the kernel has finished, and no host code
/// may touch them meanwhile.
unsafe fn fill_raw(
    k: &Kernels,
    out: DevicePtr<u32>,
    n: u32,
    block: u32,
    stream: &Stream,
) -> Result<(), Error> {
    let cfg = LaunchConfig::new(n.div_ceil(block).max(1), block).stream(stream);
    // SAFETY: fill takes (u32*, u32); the caller vouches for `out`.
    unsafe { launch(&k.fill, &cfg, &(out, n)) }
}

fn read_u32(buf: &DeviceBuffer<u32>) -> Result<Vec<u32>, Error> {
    let mut v = vec![0u32; buf.len()];
    buf.copy_to_host(&mut v)?;
    Ok(v)
}

/// `Context::create` with flags: current on the creating thread, not the primary
/// context, its flags as asked; then moved to another thread, where a kernel, a copy and
/// `cuMemGetInfo` run in it while the primary context stays current here.
fn created_context_with_flags_from_another_thread() -> TestResult {
    require_gpu()?;
    let dev = Device::get(0)?;
    let created = Context::create(dev, ContextFlags::SCHED_BLOCKING_SYNC)?;
    check(created.is_current()?, || {
        "cuCtxCreate did not make the context current".into()
    })?;
    check(!created.is_primary()?, || {
        "a created context is the primary one".into()
    })?;
    let flags = created.flags()?;
    check(flags.contains(ContextFlags::SCHED_BLOCKING_SYNC), || {
        format!("flags {flags:?} lack SCHED_BLOCKING_SYNC")
    })?;
    created.set_flags(ContextFlags::SCHED_SPIN)?;
    let flags = created.flags()?;
    check(
        flags.contains(ContextFlags::SCHED_SPIN)
            && !flags.contains(ContextFlags::SCHED_BLOCKING_SYNC),
        || format!("flags after cuCtxSetFlags(SCHED_SPIN): {flags:?}"),
    )?;

    let primary = ctx()?;
    primary.bind()?;
    let worker = std::thread::spawn(move || -> TestResult {
        check(!created.is_current()?, || {
            "a fresh thread has the created context current".into()
        })?;
        let k = kernels(&created)?;
        let stream = Stream::non_blocking(&created)?;
        let out = DeviceBuffer::<u32>::zeroed(&created, 5000)?;
        let (free, total) = created.mem_info()?;
        check(free <= total && total > 0, || {
            format!("mem_info in the created context: free {free}, total {total}")
        })?;
        // SAFETY: `out` holds 5000 u32s, read only after the synchronize.
        unsafe { fill_raw(&k, out.as_arg(), 5000, 128, &stream)? };
        stream.synchronize()?;
        drop(created); // the handles keep the context alive
        check_filled(&read_u32(&out)?, "fill in the created context")
    });
    worker.join().map_err(|_| "thread panicked")??;
    check(primary.is_current()?, || {
        "primary context no longer current on the main thread".into()
    })
}

static SMEM_CALLS: AtomicUsize = AtomicUsize::new(0);

/// 32 bytes of dynamic shared memory per thread, counting the driver's calls.
extern "C" fn smem_per_block(block_size: c_int) -> usize {
    SMEM_CALLS.fetch_add(1, Ordering::Relaxed);
    usize::try_from(block_size).unwrap_or(0) * 32
}

/// `cuOccupancyMaxPotentialBlockSize` and its flag and callback forms give sane numbers
/// (a warp multiple within the kernel's limit, a minimum grid of blocks-per-SM times
/// SMs), and launches with the suggested shapes compute the right values.
fn occupancy_block_size_launches() -> TestResult {
    require_gpu()?;
    let ctx = ctx()?;
    let k = kernels(&ctx)?;
    let stream = Stream::non_blocking(&ctx)?;
    let sms = ctx.device().multiprocessor_count()?;
    let max_threads = k.fill.max_threads_per_block()?;

    let (min_grid, block) = k.fill.max_potential_block_size(0, 0)?;
    check(
        block >= 32 && block <= max_threads && block % 32 == 0,
        || format!("block size {block} (kernel limit {max_threads})"),
    )?;
    let per_sm = k.fill.max_active_blocks_per_sm(block, 0)?;
    check_eq(
        min_grid,
        per_sm * sms,
        "minimum grid = resident blocks per SM x SMs",
    )?;

    let (grid_128, block_128) = k.fill.max_potential_block_size_with_flags(
        0,
        128,
        CUoccupancy_flags::CU_OCCUPANCY_DISABLE_CACHING_OVERRIDE,
    )?;
    check(block_128 > 0 && block_128 <= 128 && grid_128 >= sms, || {
        format!("with a 128-thread cap: block {block_128}, grid {grid_128}")
    })?;

    SMEM_CALLS.store(0, Ordering::Relaxed);
    let (grid_smem, block_smem) = k.fill.max_potential_block_size_with(
        smem_per_block,
        0,
        CUoccupancy_flags::CU_OCCUPANCY_DEFAULT,
    )?;
    let calls = SMEM_CALLS.load(Ordering::Relaxed);
    check(calls > 0, || {
        "the driver never called smem_per_block".into()
    })?;
    check(
        block_smem > 0 && block_smem <= max_threads && grid_smem >= 1,
        || format!("with 32 B/thread of shared memory: block {block_smem}, grid {grid_smem}"),
    )?;
    let smem = u32::try_from(smem_per_block(block_smem as c_int))?;

    let n = 1_000_003u32;
    let mut out = DeviceBuffer::<u32>::zeroed(&ctx, n as usize)?;
    for (what, grid, threads, shared) in [
        ("plain suggestion", n.div_ceil(block), block, 0),
        ("minimum grid, grid-stride", min_grid, block, 0),
        ("capped at 128", n.div_ceil(block_128), block_128, 0),
        ("with shared memory", grid_smem, block_smem, smem),
    ] {
        out.memset_d8(0)?;
        let cfg = LaunchConfig::new(grid, threads)
            .shared_mem(shared)
            .stream(&stream);
        // SAFETY: fill takes (u32*, u32) and loops over all `n` elements whatever the
        // grid; `out` holds them and is read after the synchronize.
        unsafe { launch(&k.fill, &cfg, &(out.as_arg(), n))? };
        stream.synchronize()?;
        check_filled(&read_u32(&out)?, what)?;
    }
    Ok(())
}

/// `cuMemGetInfo`: free <= total; free drops by about the size of a big allocation and
/// comes back when it is freed; the call works from a thread with no current context.
fn mem_info_drops_after_a_big_allocation() -> TestResult {
    require_gpu()?;
    let ctx = ctx()?;
    let (free0, total) = ctx.mem_info()?;
    check(free0 <= total && total > 0, || {
        format!("free {free0}, total {total}")
    })?;
    let size = (free0 / 4).min(1 << 30) & !0xFFFFF;
    if size < 64 << 20 {
        return skip(format!("only {free0} bytes free"));
    }
    let big = DeviceBuffer::<u8>::new(&ctx, size)?;
    let (free1, total1) = ctx.mem_info()?;
    check_eq(total1, total, "total after allocating")?;
    check(free1 + size / 2 <= free0, || {
        format!("free went from {free0} to {free1} after allocating {size}")
    })?;
    let other = ctx.clone();
    let (free_there, _) = std::thread::spawn(move || other.mem_info())
        .join()
        .map_err(|_| "thread panicked")??;
    check(free_there + size / 2 <= free0, || {
        format!("free from another thread {free_there}, before allocating {free0}")
    })?;
    drop(big);
    let (free2, _) = ctx.mem_info()?;
    check(free2 >= free1 + size / 2, || {
        format!("free went from {free1} to {free2} after freeing {size}")
    })
}

const ROUND_TRIP_N: usize = 4096;

/// `0, 1, 2, ...` as `f32`.
fn ramp() -> Vec<f32> {
    (0..ROUND_TRIP_N).map(|i| i as f32).collect()
}

/// After launch `k` of a graph adding the ramp into an accumulator, the ramp times `k`.
fn check_accumulated(got: &[f32], launches: u32, what: &str) -> TestResult {
    match got
        .iter()
        .enumerate()
        .find(|&(i, &v)| v != (i as f32) * launches as f32)
    {
        None => Ok(()),
        Some((i, v)) => check(false, || {
            format!(
                "{what}, launch {launches}: element {i} is {v}, expected {}",
                i as f32 * launches as f32
            )
        }),
    }
}

/// A graph with a host-to-device copy node (pinned `input` into `a`), `vec_add` (`acc +=
/// a`) and a device-to-host copy node (`acc` into pinned `output`), launched 3 times:
/// after launch `k`, `output` holds `k * input`.
fn copy_nodes_round_trip_through_three_launches() -> TestResult {
    require_gpu()?;
    let ctx = ctx()?;
    let k = kernels(&ctx)?;
    let stream = Stream::non_blocking(&ctx)?;
    let input = PinnedHostBuffer::from_slice(&ctx, &ramp())?;
    let output = PinnedHostBuffer::<f32>::zeroed(&ctx, ROUND_TRIP_N)?;
    let a = DeviceBuffer::<f32>::zeroed(&ctx, ROUND_TRIP_N)?;
    let acc = DeviceBuffer::<f32>::zeroed(&ctx, ROUND_TRIP_N)?;
    let n = ROUND_TRIP_N as u32;
    // What the graph borrows must outlive it: declared before it.
    let short = DeviceBuffer::<f32>::zeroed(&ctx, 3)?;
    let (empty_dev, empty_host) = (
        DeviceBuffer::<f32>::new(&ctx, 0)?,
        PinnedHostBuffer::<f32>::zeroed(&ctx, 0)?,
    );

    let graph = Graph::new(&ctx)?;
    let h2d = graph.add_copy_from_host_node(&[], &a, &input)?;
    // SAFETY: vec_add(a, b, c, n) reads a[..n] and b[..n] and writes c[..n]; `a` and
    // `acc` hold n f32s and outlive the executable graph (the graph borrows them).
    let add = unsafe {
        graph.add_kernel_node(
            &[h2d],
            &k.vec_add,
            &LaunchConfig::new(n.div_ceil(256), 256),
            &(a.as_arg(), acc.as_arg(), acc.as_arg(), n),
        )?
    };
    // SAFETY: `output` is read only after the stream has been synchronized, and
    // outlives every launch (synchronized before it is dropped).
    let d2h = unsafe { graph.add_copy_to_host_node(&[add], &output, &acc)? };
    for node in [h2d, d2h] {
        check_eq(
            node.node_type()?,
            CUgraphNodeType::CU_GRAPH_NODE_TYPE_MEMCPY,
            "copy node type",
        )?;
    }
    // Mismatched lengths are refused, naming both.
    match graph.add_copy_from_host_node(&[], &short, &input) {
        Err(Error::LengthMismatch {
            expected, found, ..
        }) => check_eq((expected, found), (3, ROUND_TRIP_N), "lengths named")?,
        other => check(false, || format!("short copy: {other:?}"))?,
    }
    // Empty copies are empty nodes.
    let empty = graph.add_copy_from_host_node(&[], &empty_dev, &empty_host)?;
    check_eq(
        empty.node_type()?,
        CUgraphNodeType::CU_GRAPH_NODE_TYPE_EMPTY,
        "empty copy",
    )?;

    let exec = graph.instantiate(InstantiateFlags::empty())?;
    for launch_no in 1..=3 {
        exec.launch(&stream)?;
        stream.synchronize()?;
        check_accumulated(&output, launch_no, "explicit copy nodes")?;
    }
    check(input[..] == ramp()[..], || "the input changed".into())
}

/// The same round trip recorded by stream capture: `Capturing::copy_from_host`, a
/// captured launch, and `Capturing::copy_to_host`.
fn captured_host_copies_round_trip_through_three_launches() -> TestResult {
    require_gpu()?;
    let ctx = ctx()?;
    let k = kernels(&ctx)?;
    let mut stream = Stream::non_blocking(&ctx)?;
    let input = PinnedHostBuffer::from_slice(&ctx, &ramp())?;
    let output = PinnedHostBuffer::<f32>::zeroed(&ctx, ROUND_TRIP_N)?;
    let a = DeviceBuffer::<f32>::zeroed(&ctx, ROUND_TRIP_N)?;
    let acc = DeviceBuffer::<f32>::zeroed(&ctx, ROUND_TRIP_N)?;
    let n = ROUND_TRIP_N as u32;

    let cap = stream.begin_capture(CaptureMode::Global)?;
    cap.copy_from_host(&a, &input)?;
    // SAFETY: as in the explicit test: vec_add touches n f32s of `a` and `acc`, which
    // outlive the executable graph.
    unsafe {
        cap.launch(
            &k.vec_add,
            &LaunchConfig::new(n.div_ceil(256), 256),
            &(a.as_arg(), acc.as_arg(), acc.as_arg(), n),
        )?
    };
    // SAFETY: `output` is read only after the stream has been synchronized.
    unsafe { cap.copy_to_host(&output, &acc)? };
    let graph = cap.end()?;
    check_eq(graph.node_count()?, 3, "captured nodes")?;
    let exec = graph.instantiate(InstantiateFlags::empty())?;
    for launch_no in 1..=3 {
        exec.launch(&stream)?;
        stream.synchronize()?;
        check_accumulated(&output, launch_no, "captured copies")?;
    }
    Ok(())
}

/// Over-aligned plain data: 8 KiB, aligned to 8 KiB (more than a page).
#[derive(Clone, Copy)]
#[repr(C, align(8192))]
struct Big([u32; 2048]);
// SAFETY: an array of u32 filling the whole size: no padding, any bits valid.
unsafe impl Pod for Big {}

/// `cuMemHostAlloc` with `DEVICEMAP` (and `PORTABLE`, and `WRITECOMBINED`): the flags
/// read back, and `fill` writes the host memory directly through `device_ptr()`; an
/// over-aligned type stays aligned and its device pointer follows the same offset.
fn mapped_pinned_memory_written_by_a_kernel() -> TestResult {
    require_gpu()?;
    let ctx = ctx()?;
    let k = kernels(&ctx)?;
    let stream = Stream::non_blocking(&ctx)?;
    let n = 10_000u32;
    for flags in [
        HostAllocFlags::DEVICEMAP,
        HostAllocFlags::DEVICEMAP | HostAllocFlags::PORTABLE,
        HostAllocFlags::DEVICEMAP | HostAllocFlags::WRITECOMBINED,
    ] {
        let buf = PinnedHostBuffer::<u32>::with_flags(&ctx, n as usize, flags)?;
        let got = buf.flags()?;
        check(got.contains(flags), || {
            format!("asked for {flags:?}, cuMemHostGetFlags says {got:?}")
        })?;
        check(buf.iter().all(|&v| v == 0), || "not zero-filled".into())?;
        let dptr = buf.device_ptr()?;
        // SAFETY: the mapped buffer holds n u32s; host code reads it only after the
        // synchronize, and it outlives the kernel.
        unsafe { fill_raw(&k, dptr, n, 256, &stream)? };
        stream.synchronize()?;
        check_filled(&buf, &format!("mapped memory {flags:?}"))?;
    }

    let mut keep = Vec::new();
    for round in 0..4u32 {
        // Odd sizes shift the driver's next address.
        keep.push(PinnedHostBuffer::<u8>::with_flags(
            &ctx,
            4096 + 100 * round as usize,
            HostAllocFlags::DEVICEMAP,
        )?);
        let big = PinnedHostBuffer::<Big>::with_flags(&ctx, 3, HostAllocFlags::DEVICEMAP)?;
        check_eq(
            big.as_ptr() as usize % 8192,
            0,
            "over-aligned mapped buffer",
        )?;
        let dptr = big.device_ptr()?;
        let words = 3 * 2048u32;
        // SAFETY: three `Big`s are 3 * 2048 u32s; read after the synchronize.
        unsafe { fill_raw(&k, DevicePtr::from_raw(dptr.as_raw()), words, 256, &stream)? };
        stream.synchronize()?;
        let flat: Vec<u32> = big.iter().flat_map(|b| b.0).collect();
        check_filled(&flat, &format!("over-aligned mapped memory, round {round}"))?;
    }
    let empty = PinnedHostBuffer::<u32>::with_flags(&ctx, 0, HostAllocFlags::DEVICEMAP)?;
    check_eq(
        empty.device_ptr()?.as_raw(),
        0,
        "empty buffer's device pointer",
    )
}

/// The driver version, or a skip below `need` (`12040` = 12.4).
fn require_driver(need: i32, what: &str) -> TestResult {
    let v = cudadrv::driver::driver_version()?;
    if v < need {
        return skip(format!(
            "{what} needs driver {}.{}, this one is {}.{}",
            need / 1000,
            need % 1000 / 10,
            v / 1000,
            v % 1000 / 10
        ));
    }
    Ok(())
}

/// An IF node added inside a capture (`Capturing::add_if_node`): a memset before it, a
/// kernel in its body writing 42, a copy after it. With the handle's default 1 the body
/// runs at every launch; with 0 it never does. The capture's dependencies after the
/// node are the node itself, and the copy after it sees the body's write.
fn conditional_if_node_inside_a_capture() -> TestResult {
    require_gpu()?;
    require_driver(12040, "conditional nodes")?;
    let ctx = ctx()?;
    let k = kernels(&ctx)?;
    let one = LaunchConfig::new(1, 1);
    for default in [1u32, 0] {
        let mut stream = Stream::non_blocking(&ctx)?;
        let out = DeviceBuffer::<u32>::zeroed(&ctx, 1)?;
        let after = DeviceBuffer::<u32>::zeroed(&ctx, 1)?;
        let cap = stream.begin_capture(CaptureMode::Global)?;
        cap.memset_d32(&out, 5)?;
        let handle = cap.create_conditional_handle(Some(default))?;
        let (node, body) = cap.add_if_node(handle)?;
        check_eq(
            node.node_type()?,
            CUgraphNodeType::CU_GRAPH_NODE_TYPE_CONDITIONAL,
            "node type",
        )?;
        let mut deps = [GraphNode::NULL; 4];
        let mut data = [EdgeData::DEFAULT; 4];
        let info = cap.dependencies(&mut deps, &mut data)?;
        check_eq(info.num_dependencies, 1, "dependencies after the IF node")?;
        check_eq(deps[0], node, "the IF node is the dependency")?;
        let mut before = [GraphNode::NULL; 2];
        let n_before = node.dependencies(&mut before, &mut [EdgeData::DEFAULT; 2])?;
        check_eq(n_before, 1, "the IF node follows the memset")?;
        // SAFETY: write_value(out, value) writes one u32 of `out`, which outlives the
        // executable graph.
        unsafe { body.add_kernel_node(&[], &k.write_value, &one, &(out.as_arg(), 42u32))? };
        check_eq(body.node_count()?, 1, "nodes in the body")?;
        drop(body);
        cap.copy(&after, &out)?;
        let graph = cap.end()?;
        check_eq(graph.node_count()?, 3, "memset, IF, copy")?;
        let exec = graph.instantiate(InstantiateFlags::empty())?;
        let want = if default != 0 { 42 } else { 5 };
        for launch_no in 1..=2 {
            exec.launch(&stream)?;
            stream.synchronize()?;
            check_eq(
                (read_u32(&out)?[0], read_u32(&after)?[0]),
                (want, want),
                &format!("handle default {default}, launch {launch_no}"),
            )?;
        }
    }
    Ok(())
}

/// An IF/else node inside a capture (`Capturing::add_if_else_node`, CUDA 12.8+): the
/// first body runs for a non-zero handle, the second for zero.
fn conditional_if_else_node_inside_a_capture() -> TestResult {
    require_gpu()?;
    require_driver(12080, "IF nodes with an else body")?;
    let ctx = ctx()?;
    let k = kernels(&ctx)?;
    let one = LaunchConfig::new(1, 1);
    for (default, want) in [(3u32, 42u32), (0, 7)] {
        let mut stream = Stream::non_blocking(&ctx)?;
        let out = DeviceBuffer::<u32>::zeroed(&ctx, 1)?;
        let cap = stream.begin_capture(CaptureMode::Global)?;
        cap.memset_d32(&out, 0)?;
        let handle = cap.create_conditional_handle(Some(default))?;
        let (_, [then, otherwise]) = cap.add_if_else_node(handle)?;
        // SAFETY: write_value writes one u32 of `out`, which outlives the graph.
        unsafe {
            then.add_kernel_node(&[], &k.write_value, &one, &(out.as_arg(), 42u32))?;
            otherwise.add_kernel_node(&[], &k.write_value, &one, &(out.as_arg(), 7u32))?;
        }
        drop((then, otherwise));
        let graph = cap.end()?;
        let exec = graph.instantiate(InstantiateFlags::empty())?;
        exec.launch(&stream)?;
        stream.synchronize()?;
        check_eq(
            read_u32(&out)?,
            vec![want],
            &format!("IF/else with handle {default}"),
        )?;
    }
    Ok(())
}

/// `cuDevicePrimaryCtxReset` frees what the primary context held (a leaked allocation
/// comes back as free memory) while a `Context` of it is still retained; the primary
/// context flags set after it apply to the fresh context, which runs a kernel; the old
/// `Context` value is dropped last, as the contract allows.
fn primary_context_reset_then_a_new_context_works() -> TestResult {
    require_gpu()?;
    let dev = Device::get(0)?;
    let old = Context::primary(dev)?;
    let (old_flags, active) = dev.primary_context_state()?;
    check(active, || {
        "primary context not active while retained".into()
    })?;
    let (free0, _) = old.mem_info()?;
    let size = (free0 / 4).min(512 << 20) & !0xFFFFF;
    if size < 64 << 20 {
        return skip(format!("only {free0} bytes free"));
    }
    // Leaked on purpose: only the reset frees it.
    let (_leaked, _) = DeviceBuffer::<u8>::new(&old, size)?.into_raw();
    let (free_leaked, _) = old.mem_info()?;
    check(free_leaked + size / 2 <= free0, || {
        format!("free went from {free0} to {free_leaked} after allocating {size}")
    })?;

    // SAFETY: every handle of the primary context made by this process is gone (the
    // other tests dropped theirs; the leaked allocation is never used again), except
    // `old`, which is only dropped below; nothing else uses the context.
    unsafe { dev.primary_context_reset()? };
    dev.set_primary_context_flags(ContextFlags::SCHED_BLOCKING_SYNC)?;
    let (flags, _) = dev.primary_context_state()?;
    check(flags.contains(ContextFlags::SCHED_BLOCKING_SYNC), || {
        format!("primary context flags after cuDevicePrimaryCtxSetFlags: {flags:?}")
    })?;

    let fresh = Context::primary(dev)?;
    let (free_after, _) = fresh.mem_info()?;
    check(free_after >= free_leaked + size / 2, || {
        format!(
            "free memory {free_leaked} before the reset, {free_after} after: the leaked \
             {size} bytes were not freed"
        )
    })?;
    let fresh_flags = fresh.flags()?;
    check(
        fresh_flags.contains(ContextFlags::SCHED_BLOCKING_SYNC),
        || format!("fresh context flags {fresh_flags:?}"),
    )?;
    drop(old); // releases the old retain, which the driver allows after a reset
    let k = kernels(&fresh)?;
    let stream = Stream::non_blocking(&fresh)?;
    let out = DeviceBuffer::<u32>::zeroed(&fresh, 3000)?;
    // SAFETY: `out` holds 3000 u32s, read after the synchronize.
    unsafe { fill_raw(&k, out.as_arg(), 3000, 256, &stream)? };
    stream.synchronize()?;
    check_filled(&read_u32(&out)?, "fill in the fresh primary context")?;
    dev.set_primary_context_flags(old_flags)?;
    Ok(())
}
