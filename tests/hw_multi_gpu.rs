//! Hardware tests of several devices in one process (`cudadrv::memory::peer`, Programming Guide
//! 4.3.3 and 4.2.5.6): peer capabilities and attributes, peer access on and off, peer
//! copies (sync and async, both directions), a kernel on GPU 1 reading GPU 0's memory,
//! a pool on GPU 0 opened to GPU 1, an event of GPU 0 waited for by a stream of GPU 1,
//! and a graph allocation on GPU 0 mapped for GPU 1.
//!
//! What one GPU can show runs on one: the queries and their error paths, peer copies and
//! a cross-context event wait between two contexts of device 0 (`cuMemcpyPeer` works
//! within one device too), pool access of the pool's own device, a graph allocation
//! whose peer list names only its own device. The two-GPU tests report themselves
//! skipped with "needs 2 GPUs (found 1)" on a one-GPU machine.
//!
//! Kernels (ptx/, `ptx::KERNELS`): `fill` (`out[i] = 3i + 1`), `pdl_primary` (busy-waits
//! `work_ns` per block, then `out[i] = 3i + 7`) and `pdl_secondary` (`out[i] = 2 in[i] +
//! 1`), the last two launched plainly (no PDL attribute): they stand in for a long
//! kernel and for a kernel that reads another buffer.

use cuda_workspace::{
    Kernels, Outcome, TestResult, check, check_eq, check_filled, fill_value, hw_tests, ptx,
    require_gpu, require_sm, run_suite, skip,
};
use cudadrv::cuda_sys::{CUdevice_P2PAttribute, CUresult};
use cudadrv::graph::{Graph, InstantiateFlags};
use cudadrv::launch::{LaunchConfig, launch};
use cudadrv::memory::peer::MemAccess;
use cudadrv::{
    Context, ContextFlags, Device, DeviceBuffer, DevicePtr, Error, Event, EventFlags, Function,
    MemPool, Module, Stream,
};

fn main() {
    run_suite(
        "hw_multi_gpu",
        hw_tests![
            // One GPU.
            p2p_queries_and_their_errors_on_one_device,
            peer_access_needs_two_devices,
            peer_copies_between_two_contexts_of_one_device,
            peer_copy_checks_lengths_and_capture,
            event_of_one_context_waited_in_another,
            pool_access_of_its_own_device,
            graph_alloc_listing_its_own_device,
            // Two GPUs.
            p2p_attributes_of_two_devices,
            enable_and_disable_peer_access,
            peer_copies_both_directions,
            kernel_on_gpu1_reads_gpu0_memory,
            pool_on_gpu0_used_from_gpu1,
            event_on_gpu0_waited_by_gpu1,
            graph_alloc_on_gpu0_mapped_for_gpu1,
        ],
    );
}

/// Elements of the buffers the kernels write (4 MiB of `u32`).
const N: u32 = 1 << 20;
/// Grid of the `pdl_*` kernels (grid-stride loops) and their stamp buffers.
const GRID: u32 = 132;

/// `pdl_primary`'s value at `i`.
fn primary_value(i: u32) -> u32 {
    i.wrapping_mul(3).wrapping_add(7)
}

/// `pdl_secondary`'s value for input `x`.
fn secondary_value(x: u32) -> u32 {
    x.wrapping_mul(2).wrapping_add(1)
}

/// Fails unless `got[i] == want(i)` for all `i`, naming the first difference.
fn check_all(got: &[u32], want: impl Fn(u32) -> u32, what: &str) -> TestResult {
    match (0..got.len()).find(|&i| got[i] != want(i as u32)) {
        None => Ok(()),
        Some(i) => Err(Outcome::Fail(format!(
            "{what}: element {i} is {}, expected {}",
            got[i],
            want(i as u32)
        ))),
    }
}

fn read(buf: &DeviceBuffer<u32>) -> Result<Vec<u32>, Outcome> {
    let mut v = vec![0u32; buf.len()];
    buf.copy_to_host(&mut v)?;
    Ok(v)
}

/// The two primary contexts, or a skip on a machine with fewer than two GPUs.
fn two_gpus() -> Result<(Context, Context), Outcome> {
    require_gpu()?;
    let count = Device::count()?;
    if count < 2 {
        return skip(format!("needs 2 GPUs (found {count})"));
    }
    Ok((
        Context::primary(Device::get(0)?)?,
        Context::primary(Device::get(1)?)?,
    ))
}

/// A skip unless `from`'s kernels can reach `to`'s memory.
fn require_peer(from: Device, to: Device) -> TestResult {
    if from.can_access_peer(to)? {
        Ok(())
    } else {
        skip(format!(
            "device {} cannot access device {} (cuDeviceCanAccessPeer = 0)",
            from.as_raw(),
            to.as_raw()
        ))
    }
}

/// `pdl_primary` and `pdl_secondary` of a context (their module stays loaded with them).
struct Pdl {
    primary: Function,
    secondary: Function,
    stamps: DeviceBuffer<u64>,
}

impl Pdl {
    fn load(ctx: &Context) -> Result<Self, Outcome> {
        let m = Module::from_ptx(ctx, ptx::KERNELS)?;
        Ok(Self {
            primary: m.function("pdl_primary")?,
            secondary: m.function("pdl_secondary")?,
            stamps: DeviceBuffer::zeroed(ctx, 4 * GRID as usize)?,
        })
    }

    /// `out[i] = 3i + 7` after `work_ms` of busy waiting, on `stream`.
    fn busy_write(&self, stream: &Stream, out: DevicePtr<u32>, n: u32, work_ms: u32) -> TestResult {
        stream.context().bind()?;
        let cfg = LaunchConfig::new(GRID, 256).stream(stream);
        // SAFETY: pdl_primary(out, n, stamps, work_ns): the callers pass `n` writable
        // elements that outlive the kernel (they synchronize before dropping them);
        // `stamps` holds 4 per block and lives in `self`.
        unsafe {
            launch(
                &self.primary,
                &cfg,
                &(out, n, self.stamps.as_arg(), work_ms * 1_000_000),
            )?
        };
        Ok(())
    }

    /// `out[i] = 2 input[i] + 1` on `stream`.
    fn double_plus_one(
        &self,
        stream: &Stream,
        input: DevicePtr<u32>,
        out: DevicePtr<u32>,
        n: u32,
    ) -> TestResult {
        stream.context().bind()?;
        let cfg = LaunchConfig::new(GRID, 256).stream(stream);
        // SAFETY: pdl_secondary(in, out, n, stamps, prolog): the callers pass `n`
        // readable elements (mapped for this device) and `n` writable ones, both alive
        // until they synchronize; `stamps` holds 4 per block.
        unsafe {
            launch(
                &self.secondary,
                &cfg,
                &(input, out, n, self.stamps.as_arg(), 0u32),
            )?
        };
        Ok(())
    }
}

/// `fill` on `stream`, with the stream's context made current (the launch path binds
/// none, and these tests switch between contexts).
fn fill(k: &Kernels, stream: &Stream, out: DevicePtr<u32>, n: u32) -> TestResult {
    stream.context().bind()?;
    let cfg = LaunchConfig::new(n.div_ceil(256), 256).stream(stream);
    // SAFETY: fill(out, n) writes out[0..n]; the callers pass `n` elements alive until
    // they synchronize.
    unsafe { launch(&k.fill, &cfg, &(out, n))? };
    Ok(())
}

// ---------------------------------------------------------------------------------------
// One GPU.
// ---------------------------------------------------------------------------------------

fn p2p_queries_and_their_errors_on_one_device() -> TestResult {
    let gpu = require_gpu()?;
    let d0 = Device::get(0)?;
    check(!d0.can_access_peer(d0)?, || {
        "cuDeviceCanAccessPeer says a device is its own peer".into()
    })?;
    // A pair needs two devices: the driver refuses (src, src).
    let e = d0
        .p2p_attribute(
            d0,
            CUdevice_P2PAttribute::CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK,
        )
        .err()
        .ok_or("cuDeviceGetP2PAttribute(d0, d0) succeeded")?;
    println!("    p2p_attribute(d0, d0): {e}");
    check(e.is(CUresult::CUDA_ERROR_INVALID_DEVICE), || {
        format!("p2p_attribute(d0, d0) failed with {e}, expected CUDA_ERROR_INVALID_DEVICE")
    })?;
    // An ordinal past the last device.
    let none = Device::from_raw(gpu.count);
    let e = d0
        .can_access_peer(none)
        .err()
        .ok_or("cuDeviceCanAccessPeer with a device past the last succeeded")?;
    check(e.is(CUresult::CUDA_ERROR_INVALID_DEVICE), || {
        format!("can_access_peer(no device) failed with {e}, expected CUDA_ERROR_INVALID_DEVICE")
    })?;
    // Every pair of this machine, for the log.
    for a in 0..gpu.count {
        for b in 0..gpu.count {
            if a != b {
                let (da, db) = (Device::from_raw(a), Device::from_raw(b));
                println!(
                    "    {a} -> {b}: can_access_peer {}, {:?}",
                    da.can_access_peer(db)?,
                    da.p2p_attributes(db)?
                );
            }
        }
    }
    Ok(())
}

fn peer_access_needs_two_devices() -> TestResult {
    require_gpu()?;
    let d0 = Device::get(0)?;
    let c0 = Context::primary(d0)?;
    let other = Context::create(d0, ContextFlags::empty())?;
    // Two contexts of one device are no peers (cuDeviceCanAccessPeer(d0, d0) is 0).
    let e = c0
        .enable_peer_access(&other)
        .err()
        .ok_or("peer access between two contexts of one device was enabled")?;
    println!("    enable_peer_access within one device: {e}");
    // Driver 580 answers PEER_ACCESS_UNSUPPORTED (seen on H100 and H200).
    check(e.is(CUresult::CUDA_ERROR_PEER_ACCESS_UNSUPPORTED), || {
        format!("unexpected error {e}")
    })?;
    // Turning off what was never on is not an error: nothing changes.
    check_eq(
        c0.disable_peer_access(&other)?,
        false,
        "disable_peer_access of a never-enabled peer",
    )
}

fn peer_copies_between_two_contexts_of_one_device() -> TestResult {
    require_gpu()?;
    let d0 = Device::get(0)?;
    let c0 = Context::primary(d0)?;
    let c1 = Context::create(d0, ContextFlags::empty())?;
    let host: Vec<u32> = (0..N).map(fill_value).collect();
    let src = DeviceBuffer::from_slice(&c0, &host)?;
    let mut dst = DeviceBuffer::<u32>::zeroed(&c1, N as usize)?;
    dst.copy_from_peer(&src)?;
    check_filled(&read(&dst)?, "cuMemcpyPeer c0 -> c1")?;

    // Back, asynchronously, on a stream of either context.
    let back_host: Vec<u32> = (0..N).map(primary_value).collect();
    let back_src = DeviceBuffer::from_slice(&c1, &back_host)?;
    for (name, stream) in [
        ("stream of the destination", Stream::non_blocking(&c0)?),
        ("stream of the source", Stream::non_blocking(&c1)?),
    ] {
        let mut back = DeviceBuffer::<u32>::zeroed(&c0, N as usize)?;
        // SAFETY: both buffers live past the synchronization below.
        unsafe { back.copy_from_peer_async(&back_src, &stream)? };
        stream.synchronize()?;
        check_all(
            &read(&back)?,
            primary_value,
            &format!("cuMemcpyPeerAsync c1 -> c0 on the {name}"),
        )?;
    }
    Ok(())
}

fn peer_copy_checks_lengths_and_capture() -> TestResult {
    require_gpu()?;
    let d0 = Device::get(0)?;
    let c0 = Context::primary(d0)?;
    let c1 = Context::create(d0, ContextFlags::empty())?;
    let src = DeviceBuffer::<u32>::zeroed(&c0, 100)?;
    let mut short = DeviceBuffer::<u32>::zeroed(&c1, 99)?;
    match short.copy_from_peer(&src) {
        Err(Error::LengthMismatch {
            expected: 99,
            found: 100,
        }) => {}
        other => return Err(Outcome::Fail(format!("sync length check: {other:?}"))),
    }
    let mut stream = Stream::non_blocking(&c0)?;
    // SAFETY: refused before anything is queued.
    match unsafe { short.copy_from_peer_async(&src, &stream) } {
        Err(Error::LengthMismatch {
            expected: 99,
            found: 100,
        }) => {}
        other => return Err(Outcome::Fail(format!("async length check: {other:?}"))),
    }
    // Empty buffers: nothing to copy, no driver call.
    let (e0, mut e1) = (
        DeviceBuffer::<u32>::new(&c0, 0)?,
        DeviceBuffer::<u32>::new(&c1, 0)?,
    );
    e1.copy_from_peer(&e0)?;
    // On a capturing stream the copy would become a graph node naming both buffers by
    // address: refused.
    let mut dst = DeviceBuffer::<u32>::zeroed(&c1, 100)?;
    let cap = stream.begin_capture(Default::default())?;
    // SAFETY: refused, nothing is queued.
    let r = unsafe { dst.copy_from_peer_async(&src, cap.stream()) };
    drop(cap);
    match r {
        Err(Error::StreamCapturing("cuMemcpyPeerAsync")) => {}
        other => {
            return Err(Outcome::Fail(format!(
                "copy on a capturing stream: {other:?}"
            )));
        }
    }
    // The stream works normally afterwards.
    // SAFETY: both buffers outlive the synchronization below.
    unsafe { dst.copy_from_peer_async(&src, &stream)? };
    stream.synchronize()?;
    Ok(())
}

fn event_of_one_context_waited_in_another() -> TestResult {
    require_sm(9, 0)?;
    let d0 = Device::get(0)?;
    let c0 = Context::primary(d0)?;
    let c1 = Context::create(d0, ContextFlags::empty())?;
    let pdl = Pdl::load(&c0)?;
    let (s0, mut s1) = (Stream::non_blocking(&c0)?, Stream::non_blocking(&c1)?);
    let src = DeviceBuffer::<u32>::zeroed(&c0, N as usize)?;
    let mut dst = DeviceBuffer::<u32>::zeroed(&c1, N as usize)?;
    pdl.busy_write(&s0, src.as_arg(), N, 30)?;
    let done = Event::new(&c0, EventFlags::DISABLE_TIMING)?;
    done.record(&s0)?;
    let pending = !done.query()?;
    // The stream of the other context waits for the event of this one; without the wait
    // the copy would read zeros.
    s1.wait_event(&done)?;
    // SAFETY: both buffers live past `s1.synchronize()` below.
    unsafe { dst.copy_from_peer_async(&src, &s1)? };
    s1.synchronize()?;
    println!("    the 30 ms kernel was pending when the wait was queued: {pending}");
    check(pending, || {
        "the busy kernel had finished before the wait was queued (the order was not tested)".into()
    })?;
    check(done.query()?, || {
        "the event is not complete after the waiting stream".into()
    })?;
    check_all(
        &read(&dst)?,
        primary_value,
        "copy after the cross-context wait",
    )
}

fn pool_access_of_its_own_device() -> TestResult {
    let gpu = require_gpu()?;
    let d0 = Device::get(0)?;
    let c0 = Context::primary(d0)?;
    if !d0.supports_memory_pools()? {
        return skip("the device has no memory pools");
    }
    for (name, pool) in [
        ("created pool", MemPool::new(&c0)?),
        ("default pool", MemPool::default_for(&c0)?),
    ] {
        check_eq(pool.access(d0)?, MemAccess::ReadWrite, name)?;
        // Granting the own device what it has: the driver may accept it (a no-op) or
        // refuse it as an argument error; either way the access stays read-write.
        match pool.set_access(d0, MemAccess::ReadWrite) {
            Ok(()) => println!("    {name}: set_access(own device, ReadWrite) accepted"),
            Err(e)
                if e.is(CUresult::CUDA_ERROR_INVALID_VALUE)
                    || e.is(CUresult::CUDA_ERROR_INVALID_DEVICE) =>
            {
                println!("    {name}: set_access(own device, ReadWrite) refused: {e}")
            }
            Err(e) => return Err(e.into()),
        }
        check_eq(pool.access(d0)?, MemAccess::ReadWrite, name)?;
    }
    let pool = MemPool::new(&c0)?;
    let none = Device::from_raw(gpu.count);
    let e = pool
        .set_access(none, MemAccess::ReadWrite)
        .err()
        .ok_or("cuMemPoolSetAccess for a device past the last succeeded")?;
    println!("    set_access(no device): {e}");
    check(
        e.is(CUresult::CUDA_ERROR_INVALID_DEVICE) || e.is(CUresult::CUDA_ERROR_INVALID_VALUE),
        || format!("unexpected error {e}"),
    )
}

fn graph_alloc_listing_its_own_device() -> TestResult {
    require_gpu()?;
    let d0 = Device::get(0)?;
    let c0 = Context::primary(d0)?;
    let k = Kernels::load(&c0)?;
    let stream = Stream::non_blocking(&c0)?;
    let keep = DeviceBuffer::<u32>::zeroed(&c0, N as usize)?;
    let graph = Graph::new(&c0)?;
    // The own device is left out of the descriptors: the same node as without peers.
    let (alloc, dptr) = graph.add_mem_alloc_node_with_peers(&[], N as usize * 4, &[d0, d0])?;
    let cfg = LaunchConfig::new(N / 256, 256);
    // SAFETY: `fill` writes N u32 of the allocation, live from the alloc node to the free
    // node; the copy reads them into `keep`, which outlives `exec`; the free comes last.
    unsafe {
        let f = graph.add_kernel_node(
            &[alloc],
            &k.fill,
            &cfg,
            &(DevicePtr::<u32>::from_raw(dptr), N),
        )?;
        let c = graph.add_memcpy_dtod_node(&[f], keep.as_raw(), dptr, N as usize * 4)?;
        graph.add_mem_free_node(&[c], dptr)?;
    }
    let exec = graph.instantiate(InstantiateFlags::empty())?;
    exec.launch(&stream)?;
    stream.synchronize()?;
    check_filled(&read(&keep)?, "graph allocation listing its own device")?;
    // More peers than the descriptor array holds: refused before the driver.
    let too_many: Vec<Device> = (1..=cudadrv::memory::peer::MAX_ALLOC_PEERS as i32 + 1)
        .map(Device::from_raw)
        .collect();
    match graph.add_mem_alloc_node_with_peers(&[], 4096, &too_many) {
        Err(Error::InvalidArgument(_)) => Ok(()),
        other => Err(Outcome::Fail(format!(
            "{} peers accepted: {other:?}",
            too_many.len()
        ))),
    }
}

// ---------------------------------------------------------------------------------------
// Two GPUs.
// ---------------------------------------------------------------------------------------

fn p2p_attributes_of_two_devices() -> TestResult {
    let (c0, c1) = two_gpus()?;
    let (d0, d1) = (c0.device(), c1.device());
    for (a, b) in [(d0, d1), (d1, d0)] {
        let can = a.can_access_peer(b)?;
        let attrs = a.p2p_attributes(b)?;
        println!(
            "    {} -> {}: can_access_peer {can}, {attrs:?}",
            a.as_raw(),
            b.as_raw()
        );
        check_eq(
            attrs.access_supported,
            can,
            "ACCESS_SUPPORTED vs cuDeviceCanAccessPeer",
        )?;
        check(attrs.performance_rank >= 0, || {
            format!("negative performance rank {}", attrs.performance_rank)
        })?;
    }
    Ok(())
}

fn enable_and_disable_peer_access() -> TestResult {
    let (c0, c1) = two_gpus()?;
    require_peer(c1.device(), c0.device())?;
    require_peer(c0.device(), c1.device())?;
    for (a, b) in [(&c1, &c0), (&c0, &c1)] {
        a.disable_peer_access(b)?; // a known start, whatever ran before
        check_eq(a.enable_peer_access(b)?, true, "first enable")?;
        check_eq(
            a.enable_peer_access(b)?,
            false,
            "second enable (already on)",
        )?;
        check_eq(a.disable_peer_access(b)?, true, "first disable")?;
        check_eq(
            a.disable_peer_access(b)?,
            false,
            "second disable (already off)",
        )?;
    }
    Ok(())
}

fn peer_copies_both_directions() -> TestResult {
    let (c0, c1) = two_gpus()?;
    let host: Vec<u32> = (0..N).map(fill_value).collect();
    let back_host: Vec<u32> = (0..N).map(primary_value).collect();
    let peer =
        c0.device().can_access_peer(c1.device())? && c1.device().can_access_peer(c0.device())?;
    // Without peer access (staged by the driver), then with it (direct).
    for with_access in [false, true] {
        if with_access {
            if !peer {
                println!("    no peer access between the devices: staged copies only");
                break;
            }
            c0.enable_peer_access(&c1)?;
            c1.enable_peer_access(&c0)?;
        } else {
            c0.disable_peer_access(&c1)?;
            c1.disable_peer_access(&c0)?;
        }
        let what = if with_access {
            "with peer access"
        } else {
            "without peer access"
        };
        let a0 = DeviceBuffer::from_slice(&c0, &host)?;
        let b1 = DeviceBuffer::from_slice(&c1, &back_host)?;
        // Sync, both directions.
        let mut a1 = DeviceBuffer::<u32>::zeroed(&c1, N as usize)?;
        a1.copy_from_peer(&a0)?;
        check_filled(&read(&a1)?, &format!("sync GPU0 -> GPU1 {what}"))?;
        let mut b0 = DeviceBuffer::<u32>::zeroed(&c0, N as usize)?;
        b0.copy_from_peer(&b1)?;
        check_all(
            &read(&b0)?,
            primary_value,
            &format!("sync GPU1 -> GPU0 {what}"),
        )?;
        // Async, both directions, each on the other side's stream and on its own.
        for on_dst in [false, true] {
            let (s0, s1) = (Stream::non_blocking(&c0)?, Stream::non_blocking(&c1)?);
            let mut x1 = DeviceBuffer::<u32>::zeroed(&c1, N as usize)?;
            let mut x0 = DeviceBuffer::<u32>::zeroed(&c0, N as usize)?;
            // SAFETY: every buffer lives past both synchronizations below.
            unsafe {
                x1.copy_from_peer_async(&a0, if on_dst { &s1 } else { &s0 })?;
                x0.copy_from_peer_async(&b1, if on_dst { &s0 } else { &s1 })?;
            }
            s0.synchronize()?;
            s1.synchronize()?;
            let side = if on_dst {
                "destination's stream"
            } else {
                "source's stream"
            };
            check_filled(
                &read(&x1)?,
                &format!("async GPU0 -> GPU1 on the {side} {what}"),
            )?;
            check_all(
                &read(&x0)?,
                primary_value,
                &format!("async GPU1 -> GPU0 on the {side} {what}"),
            )?;
        }
    }
    c0.disable_peer_access(&c1)?;
    c1.disable_peer_access(&c0)?;
    Ok(())
}

fn kernel_on_gpu1_reads_gpu0_memory() -> TestResult {
    require_sm(9, 0)?;
    let (c0, c1) = two_gpus()?;
    require_peer(c1.device(), c0.device())?;
    let k0 = Kernels::load(&c0)?;
    let pdl1 = Pdl::load(&c1)?;
    let (s0, s1) = (Stream::non_blocking(&c0)?, Stream::non_blocking(&c1)?);
    let src = DeviceBuffer::<u32>::zeroed(&c0, N as usize)?;
    let out = DeviceBuffer::<u32>::zeroed(&c1, N as usize)?;
    fill(&k0, &s0, src.as_arg(), N)?;
    s0.synchronize()?;
    c1.enable_peer_access(&c0)?;
    // A kernel on GPU 1 dereferencing GPU 0's memory.
    pdl1.double_plus_one(&s1, src.as_arg(), out.as_arg(), N)?;
    let r = s1.synchronize();
    c1.disable_peer_access(&c0)?;
    r?;
    check_all(
        &read(&out)?,
        |i| secondary_value(fill_value(i)),
        "GPU 1 kernel reading GPU 0 memory",
    )
}

fn pool_on_gpu0_used_from_gpu1() -> TestResult {
    require_sm(9, 0)?;
    let (c0, c1) = two_gpus()?;
    let (d0, d1) = (c0.device(), c1.device());
    require_peer(d1, d0)?;
    if !d0.supports_memory_pools()? {
        return skip("device 0 has no memory pools");
    }
    // Pool access is its own permission: context peer access stays off.
    c1.disable_peer_access(&c0)?;
    let k0 = Kernels::load(&c0)?;
    let pdl1 = Pdl::load(&c1)?;
    let pool = MemPool::new(&c0)?;
    check_eq(
        pool.access(d1)?,
        MemAccess::None,
        "GPU 1's access before set_access",
    )?;
    pool.set_access(d1, MemAccess::ReadWrite)?;
    check_eq(
        pool.access(d1)?,
        MemAccess::ReadWrite,
        "GPU 1's access after set_access",
    )?;
    let (s0, mut s1) = (Stream::non_blocking(&c0)?, Stream::non_blocking(&c1)?);
    let out = DeviceBuffer::<u32>::zeroed(&c1, N as usize)?;
    {
        let buf = pool.alloc_async::<u32>(&s0, N as usize)?;
        fill(&k0, &s0, buf.as_arg(), N)?;
        let filled = Event::new(&c0, EventFlags::DISABLE_TIMING)?;
        filled.record(&s0)?;
        s1.wait_event(&filled)?;
        pdl1.double_plus_one(&s1, buf.as_arg(), out.as_arg(), N)?;
        s1.synchronize()?;
        // `buf` is freed on s0 here, after GPU 1's kernel completed.
    }
    s0.synchronize()?;
    check_all(
        &read(&out)?,
        |i| secondary_value(fill_value(i)),
        "GPU 1 kernel reading GPU 0 pool memory",
    )?;
    pool.set_access(d1, MemAccess::None)?;
    check_eq(
        pool.access(d1)?,
        MemAccess::None,
        "GPU 1's access after revoking it",
    )
}

fn event_on_gpu0_waited_by_gpu1() -> TestResult {
    require_sm(9, 0)?;
    let (c0, c1) = two_gpus()?;
    let pdl0 = Pdl::load(&c0)?;
    let (s0, mut s1) = (Stream::non_blocking(&c0)?, Stream::non_blocking(&c1)?);
    let src = DeviceBuffer::<u32>::zeroed(&c0, N as usize)?;
    let mut dst = DeviceBuffer::<u32>::zeroed(&c1, N as usize)?;
    pdl0.busy_write(&s0, src.as_arg(), N, 50)?;
    let done = Event::new(&c0, EventFlags::DISABLE_TIMING)?;
    done.record(&s0)?;
    let pending = !done.query()?;
    s1.wait_event(&done)?;
    // SAFETY: both buffers live past `s1.synchronize()` below.
    unsafe { dst.copy_from_peer_async(&src, &s1)? };
    let copy_waited = !s1.query()?;
    s1.synchronize()?;
    println!(
        "    GPU 0's 50 ms kernel pending at the wait: {pending}; GPU 1's stream busy \
         right after queuing the copy: {copy_waited}"
    );
    check(pending, || {
        "the busy kernel had finished before the wait was queued (the order was not tested)".into()
    })?;
    check(done.query()?, || {
        "GPU 0's event is not complete after GPU 1's stream".into()
    })?;
    check_all(
        &read(&dst)?,
        primary_value,
        "GPU 1 copy after waiting for GPU 0's event",
    )
}

fn graph_alloc_on_gpu0_mapped_for_gpu1() -> TestResult {
    require_sm(9, 0)?;
    let (c0, c1) = two_gpus()?;
    let (d0, d1) = (c0.device(), c1.device());
    require_peer(d1, d0)?;
    if cuda_workspace::under_sanitizer() {
        // memcheck does not see the mapping an alloc node's access descriptors give
        // another device: GPU 1's reads of it are reported out of bounds and the kernel
        // is stopped, while the same run without the sanitizer reads every value exactly.
        return skip("memcheck does not track graph allocations mapped for a peer device");
    }
    // The mapping comes from the alloc node's access descriptors, not context peer access.
    c1.disable_peer_access(&c0)?;
    let k0 = Kernels::load(&c0)?;
    let pdl1 = Pdl::load(&c1)?;
    let (s0, mut s1) = (Stream::non_blocking(&c0)?, Stream::non_blocking(&c1)?);
    let mut out = DeviceBuffer::<u32>::zeroed(&c1, N as usize)?;
    let graph = Graph::new(&c0)?;
    let (alloc, dptr) = graph.add_mem_alloc_node_with_peers(&[], N as usize * 4, &[d1])?;
    let cfg = LaunchConfig::new(N / 256, 256);
    // SAFETY: `fill` writes N u32 of the allocation, live from the alloc node until the
    // cuMemFree below, which follows every use of it.
    unsafe {
        graph.add_kernel_node(
            &[alloc],
            &k0.fill,
            &cfg,
            &(DevicePtr::<u32>::from_raw(dptr), N),
        )?;
    }
    let exec = graph.instantiate(InstantiateFlags::empty())?;
    let launched = Event::new(&c0, EventFlags::DISABLE_TIMING)?;
    let cu = cudadrv::cuda_sys::driver()?;
    // Twice: the allocation, not freed in the graph, is used on GPU 1 after the graph and
    // freed (cuMemFree) before the next launch.
    for round in 0..2 {
        exec.launch(&s0)?;
        launched.record(&s0)?;
        s1.wait_event(&launched)?;
        pdl1.double_plus_one(&s1, DevicePtr::from_raw(dptr), out.as_arg(), N)?;
        s1.synchronize()?;
        s0.synchronize()?;
        c0.bind()?;
        // SAFETY: `dptr` is the graph's allocation, which the graph does not free; every
        // use of it (the graph on s0, the kernel on s1) has completed; c0 is current.
        let rc = unsafe { (cu.cuMemFree()?)(dptr) };
        check_eq(
            rc,
            CUresult::CUDA_SUCCESS,
            "cuMemFree of the graph allocation",
        )?;
        check_all(
            &read(&out)?,
            |i| secondary_value(fill_value(i)),
            &format!("round {round}: GPU 1 kernel reading GPU 0's graph allocation"),
        )?;
        out.copy_from_host(&vec![0; N as usize])?;
    }
    Ok(())
}
