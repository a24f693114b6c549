//! Hardware tests of replay regions (`cudadrv::graph::Region`) and automatic PDL
//! (`cudadrv::launch::AutoPdl`): results, never times.
//!
//! - A region replayed 1000 times with changing kernel arguments (values, pointers,
//!   sizes), memset values and destinations, copies, a stateless host function and an
//!   event record produces exactly what the same calls produce on a plain stream.
//! - Structure changes are captured again, with least-recently-used eviction, and stay
//!   correct; a host closure with state is captured at every execution.
//! - A PDL launch in a region becomes a programmatic edge, and the chain's values are
//!   exact.
//! - An invalid launch, a bad memset and a failing body return the errors the same calls
//!   return outside a region, and the region stays usable.
//! - Device-to-host copies into a pinned buffer bound to the region, replayed 200 times
//!   with changing sources and values, read back exactly.
//! - Automatic PDL never changes results: chains of one-thread-per-element kernels from
//!   one block to four waves, on a stream and in a region, under every plan; a plan
//!   measured by `AutoPdl::tune` is the one later launches of that shape get, and its
//!   chains (and the tuning's own) are exact.
//!
//! Kernels (ptx/src/region.rs, ptx/src/chain.rs): `region_axpb`, `auto_step_u32`,
//! `chain_step`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use cuda_workspace::{Outcome, TestResult, check, check_eq, ptx, require_sm};
use cudadrv::graph::Region;
use cudadrv::launch::{AutoPdl, LaunchConfig, PdlPlan, launch};
use cudadrv::{
    Context, Device, DeviceBuffer, DevicePtr, Error, Event, EventFlags, Module, PinnedHostBuffer,
    Stream,
};
use cudadrv_sys::CUgraphDependencyType;

fn main() {
    cuda_workspace::run_suite(
        "hw_region",
        cuda_workspace::hw_tests![
            replays_1000_times_like_plain_launches,
            structure_changes_recapture_with_lru_eviction,
            stateful_host_closure_is_captured_each_time,
            pdl_in_a_region_becomes_programmatic_edges,
            errors_match_the_stream_errors_and_the_region_stays_usable,
            auto_pdl_never_changes_results,
            auto_pdl_tune_keeps_the_measured_plan,
            device_to_host_copies_in_a_region,
        ],
    );
}

const THREADS: u32 = 256;
const N: u32 = 4096;

fn setup() -> Result<(Context, Module, Stream), Outcome> {
    require_sm(9, 0)?;
    let ctx = Context::primary(Device::get(0)?)?;
    let module = Module::from_ptx(&ctx, ptx::KERNELS)?;
    let stream = Stream::non_blocking(&ctx)?;
    Ok((ctx, module, stream))
}

fn read(buf: &DeviceBuffer<u32>) -> Result<Vec<u32>, Error> {
    let mut v = vec![0u32; buf.len()];
    buf.copy_to_host(&mut v)?;
    Ok(v)
}

fn same(a: &[u32], b: &[u32], what: &str) -> TestResult {
    match a.iter().zip(b).position(|(x, y)| x != y) {
        None => check_eq(a.len(), b.len(), what),
        Some(i) => Err(Outcome::Fail(format!(
            "{what}: element {i} is {}, expected {}",
            a[i], b[i]
        ))),
    }
}

/// The buffers of [`iteration`]: two scratch buffers, an accumulator, a copy target.
struct Bufs {
    tmp: [DeviceBuffer<u32>; 2],
    acc: DeviceBuffer<u32>,
    copy: DeviceBuffer<u32>,
}

impl Bufs {
    fn new(ctx: &Context) -> Result<Self, Error> {
        Ok(Self {
            tmp: [
                DeviceBuffer::zeroed(ctx, N as usize)?,
                DeviceBuffer::zeroed(ctx, N as usize)?,
            ],
            acc: DeviceBuffer::zeroed(ctx, N as usize)?,
            copy: DeviceBuffer::zeroed(ctx, N as usize)?,
        })
    }
}

/// Iteration `i`'s arguments: `acc[j] = acc[j] * (2i + 1) + i` for `j < n_i`, `n_i`
/// alternating between `N` and `N / 2 + i` (a size argument), on `tmp[i % 2]` (a pointer
/// argument) `tmp = i` then `tmp = tmp * 3 + 7i`, and `copy = tmp`.
fn iteration_args(i: u32) -> (u32, u32, u32) {
    let n = if i % 2 == 0 { N } else { N / 2 + i % 97 };
    (n, 2 * i + 1, i)
}

/// Host reference of `acc` after iterations `0..count`.
fn acc_reference(count: u32) -> Vec<u32> {
    let mut acc = vec![0u32; N as usize];
    for i in 0..count {
        let (n, a, b) = iteration_args(i);
        for x in acc.iter_mut().take(n as usize) {
            *x = x.wrapping_mul(a).wrapping_add(b);
        }
    }
    acc
}

static HOST_CALLS: AtomicU32 = AtomicU32::new(0);

fn replays_1000_times_like_plain_launches() -> TestResult {
    let (ctx, module, mut stream) = setup()?;
    let axpb = module.function("region_axpb")?;
    axpb.verify_args::<(DevicePtr<u32>, DevicePtr<u32>, u32, u32, u32)>()?;
    const RUNS: u32 = 1000;
    let grid = N.div_ceil(THREADS);

    // Plain stream launches.
    let mut plain = Bufs::new(&ctx)?;
    for i in 0..RUNS {
        let (n, a, b) = iteration_args(i);
        let t = &mut plain.tmp[(i % 2) as usize];
        let cfg = LaunchConfig::new(grid, THREADS).stream(&stream);
        t.memset_d32_async(i, &stream)?;
        // SAFETY: region_axpb(in, out, n, a, b) on buffers of N >= n words, alive until the
        // stream is synchronized below.
        unsafe {
            launch(
                &axpb,
                &cfg,
                &(plain.acc.as_arg(), plain.acc.as_arg(), n, a, b),
            )?;
            launch(&axpb, &cfg, &(t.as_arg(), t.as_arg(), N, 3u32, 7 * i))?;
        }
        plain.copy.copy_from_device_async(t, &stream)?;
    }
    stream.synchronize()?;

    // The same calls in a region.
    let bufs = Bufs::new(&ctx)?;
    let done = Event::new(&ctx, EventFlags::DISABLE_TIMING)?;
    HOST_CALLS.store(0, Ordering::SeqCst);
    let mut region = Region::new(&ctx);
    for i in 0..RUNS {
        let (n, a, b) = iteration_args(i);
        let t = &bufs.tmp[(i % 2) as usize];
        region.run(&mut stream, |r| {
            let cfg = LaunchConfig::new(grid, THREADS);
            r.memset_d32(t, i)?;
            // SAFETY: as above, for this execution.
            unsafe {
                r.launch(
                    &axpb,
                    &cfg,
                    &(bufs.acc.as_arg(), bufs.acc.as_arg(), n, a, b),
                )?;
                r.launch(&axpb, &cfg, &(t.as_arg(), t.as_arg(), N, 3u32, 7 * i))?;
            }
            r.copy(&bufs.copy, t)?;
            r.host_fn(|| {
                HOST_CALLS.fetch_add(1, Ordering::SeqCst);
            })?;
            r.record_event(&done)
        })?;
    }
    done.synchronize()?;
    stream.synchronize()?;
    let stats = region.stats();
    check_eq(
        (stats.executions, stats.captures, stats.replays),
        (1000, 1, 999),
        "executions, captures, replays",
    )?;
    check(stats.updated_nodes >= 999 * 3, || {
        format!("updated nodes: {stats:?}")
    })?;
    check_eq(
        HOST_CALLS.load(Ordering::SeqCst),
        RUNS,
        "host function calls",
    )?;
    let want = acc_reference(RUNS);
    same(&read(&plain.acc)?, &want, "plain acc vs host reference")?;
    same(&read(&bufs.acc)?, &want, "region acc vs host reference")?;
    for k in 0..2 {
        same(
            &read(&bufs.tmp[k])?,
            &read(&plain.tmp[k])?,
            "region tmp vs plain",
        )?;
    }
    same(
        &read(&bufs.copy)?,
        &read(&plain.copy)?,
        "region copy vs plain",
    )?;
    let last = RUNS - 1;
    check_eq(
        read(&bufs.copy)?[0],
        last.wrapping_mul(3).wrapping_add(7 * last),
        "last copy",
    )
}

fn structure_changes_recapture_with_lru_eviction() -> TestResult {
    let (ctx, module, mut stream) = setup()?;
    let axpb = module.function("region_axpb")?;
    let acc = DeviceBuffer::<u32>::zeroed(&ctx, N as usize)?;
    let mut host = vec![0u32; N as usize];
    let mut region = Region::with_capacity(&ctx, 2)?;
    check(Region::with_capacity(&ctx, 0).is_err(), || {
        "capacity 0 accepted".into()
    })?;
    // Structures: 0 one launch, 1 two launches, 2 a memset then one launch; 3: as 0
    // with another grid.
    let order = [0u32, 1, 0, 2, 1, 0, 0, 3, 3, 0];
    for (k, &s) in order.iter().enumerate() {
        let grid = if s == 3 { 3 } else { N.div_ceil(THREADS) };
        let add = k as u32 + 1;
        region.run(&mut stream, |r| {
            let cfg = LaunchConfig::new(grid, THREADS);
            if s == 2 {
                r.memset_d32(&acc, add)?;
            }
            let reps = if s == 1 { 2 } else { 1 };
            for _ in 0..reps {
                // SAFETY: region_axpb on `acc`'s N words, in place.
                unsafe { r.launch(&axpb, &cfg, &(acc.as_arg(), acc.as_arg(), N, 3u32, add))? };
            }
            Ok(())
        })?;
        if s == 2 {
            host.iter_mut().for_each(|x| *x = add);
        }
        for _ in 0..if s == 1 { 2 } else { 1 } {
            host.iter_mut()
                .for_each(|x| *x = x.wrapping_mul(3).wrapping_add(add));
        }
        stream.synchronize()?;
        same(
            &read(&acc)?,
            &host,
            &format!("after execution {k} (structure {s})"),
        )?;
    }
    // LRU with capacity 2: 0 c, 1 c, 0 r, 2 c (evicts 1), 1 c (evicts 0), 0 c (evicts
    // 2), 0 r, 3 c (evicts 1), 3 r, 0 r.
    let stats = region.stats();
    check_eq(
        (stats.captures, stats.replays, stats.evictions),
        (6, 4, 4),
        "captures, replays, evictions",
    )?;
    check_eq(region.cached(), 2, "cached executables")
}

fn stateful_host_closure_is_captured_each_time() -> TestResult {
    let (ctx, module, mut stream) = setup()?;
    let axpb = module.function("region_axpb")?;
    let acc = DeviceBuffer::<u32>::zeroed(&ctx, N as usize)?;
    let seen = Arc::new(AtomicU32::new(0));
    let mut region = Region::new(&ctx);
    const RUNS: u32 = 20;
    for i in 0..RUNS {
        let seen = Arc::clone(&seen);
        region.run(&mut stream, |r| {
            // SAFETY: region_axpb on `acc`'s N words, in place.
            unsafe {
                r.launch(
                    &axpb,
                    &LaunchConfig::new(N / THREADS, THREADS),
                    &(acc.as_arg(), acc.as_arg(), N, 1u32, 1u32),
                )?
            };
            r.host_fn(move || {
                seen.fetch_add(i, Ordering::SeqCst);
            })
        })?;
    }
    stream.synchronize()?;
    let stats = region.stats();
    check_eq(
        (stats.captures, stats.replays),
        (RUNS as u64, 0),
        "captures, replays",
    )?;
    check_eq(region.cached(), 1, "one entry per structure")?;
    check_eq(
        seen.load(Ordering::SeqCst),
        (0..RUNS).sum::<u32>(),
        "each run's closure",
    )?;
    drop(region);
    // The driver releases user objects on its own thread, after the graphs are gone.
    let start = std::time::Instant::now();
    while Arc::strong_count(&seen) != 1 && start.elapsed() < std::time::Duration::from_secs(5) {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    check_eq(
        Arc::strong_count(&seen),
        1,
        "closures freed with the region",
    )?;
    check(read(&acc)?.iter().all(|&x| x == RUNS), || "acc".into())
}

fn pdl_in_a_region_becomes_programmatic_edges() -> TestResult {
    let (ctx, module, mut stream) = setup()?;
    let step = module.function("chain_step")?;
    let n = 132 * THREADS;
    let bufs = [
        DeviceBuffer::<u32>::zeroed(&ctx, n as usize)?,
        DeviceBuffer::<u32>::zeroed(&ctx, n as usize)?,
    ];
    const K: usize = 16;
    let mut region = Region::new(&ctx);
    const RUNS: u32 = 50;
    for _ in 0..RUNS {
        region.run(&mut stream, |r| {
            let plain = LaunchConfig::new(132, THREADS);
            let pdl = plain.clone().programmatic_stream_serialization()?;
            for k in 0..K {
                // SAFETY: chain_step(in, out, n, 1: wait then trigger) between the two
                // distinct buffers of n words.
                unsafe {
                    r.launch(
                        &step,
                        if k == 0 { &plain } else { &pdl },
                        &(bufs[k % 2].as_arg(), bufs[(k + 1) % 2].as_arg(), n, 1u32),
                    )?
                };
            }
            Ok(())
        })?;
    }
    stream.synchronize()?;
    check(
        read(&bufs[0])?.iter().all(|&x| x == RUNS * K as u32),
        || "chain values (stale read?)".into(),
    )?;
    let graph = region
        .last_graph()
        .ok_or_else(|| Outcome::Fail("no cached graph".into()))?;
    let edges = graph.edges_vec()?;
    check_eq(edges.len(), K - 1, "edges")?;
    for (_, _, e) in &edges {
        check(
            e.kind() == CUgraphDependencyType::CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC,
            || format!("edge not programmatic: {e:?}"),
        )?;
    }
    Ok(())
}

fn errors_match_the_stream_errors_and_the_region_stays_usable() -> TestResult {
    let (ctx, module, mut stream) = setup()?;
    let axpb = module.function("region_axpb")?;
    let acc = DeviceBuffer::<u32>::zeroed(&ctx, N as usize)?;
    let mut odd = DeviceBuffer::<u8>::zeroed(&ctx, 6)?;
    let too_big = LaunchConfig::new(1, 4096);
    // SAFETY: the launch is refused (4096 threads per block) before anything runs.
    let outside = unsafe {
        launch(
            &axpb,
            &too_big.clone().stream(&stream),
            &(acc.as_arg(), acc.as_arg(), N, 1u32, 1u32),
        )
    };
    let mut region = Region::new(&ctx);
    let inside = region.run(&mut stream, |r| {
        r.memset_d32(&acc, 5)?;
        // SAFETY: as above.
        unsafe {
            r.launch(
                &axpb,
                &too_big,
                &(acc.as_arg(), acc.as_arg(), N, 1u32, 1u32),
            )
        }
    });
    check_eq(
        format!("{:?}", inside.as_ref().err()),
        format!("{:?}", outside.as_ref().err()),
        "invalid launch: region error vs stream error",
    )?;
    check(outside.is_err(), || {
        "the oversized launch was accepted".into()
    })?;
    let outside = odd.memset_d32_async(1, &stream);
    let inside = region.run(&mut stream, |r| r.memset_d32(&odd, 1));
    check_eq(
        format!("{:?}", inside.as_ref().err()),
        format!("{:?}", outside.as_ref().err()),
        "memset_d32 of 6 bytes: region error vs stream error",
    )?;
    // A failing body: nothing of the execution runs.
    let failed = region.run(&mut stream, |r| {
        r.memset_d32(&acc, 9)?;
        Err(Error::InvalidArgument("the body gives up"))
    });
    check(matches!(failed, Err(Error::InvalidArgument(_))), || {
        format!("body error: {failed:?}")
    })?;
    stream.synchronize()?;
    check(read(&acc)?.iter().all(|&x| x == 0), || {
        "the failed executions wrote".into()
    })?;
    check_eq(region.stats().executions, 0, "executions after errors")?;
    // Still usable.
    for v in 1..=3u32 {
        region.run(&mut stream, |r| r.memset_d32(&acc, v))?;
        stream.synchronize()?;
        check(read(&acc)?.iter().all(|&x| x == v), || {
            format!("memset {v} after the errors")
        })?;
    }
    check_eq(region.stats().captures, 1, "captures after the errors")?;
    Ok(())
}

/// `(grid, plan)` chains of `auto_step_u32` with one thread per element, checked
/// exactly: the plan never changes what the kernels compute.
fn auto_pdl_never_changes_results() -> TestResult {
    let (ctx, module, mut stream) = setup()?;
    let step = module.function("auto_step_u32")?;
    step.verify_args::<(DevicePtr<u32>, DevicePtr<u32>, u32, PdlPlan)>()?;
    let auto = AutoPdl::new(&step)?;
    let wave = auto.capacity(THREADS, 0)? as u32;
    check(wave > 0, || "occupancy 0".into())?;
    let grids = [1u32, 7, 132, wave, wave + 1, 2 * wave + 5, 4 * wave];
    const LINKS: u32 = 24;
    let max_n = 4 * wave * THREADS;
    let x0: Vec<u32> = (0..max_n).map(|i| i.wrapping_mul(2_654_435_761)).collect();
    let mut bufs = [
        DeviceBuffer::from_slice(&ctx, &x0)?,
        DeviceBuffer::<u32>::zeroed(&ctx, max_n as usize)?,
    ];
    for &grid in &grids {
        bufs[0].copy_from_host(&x0)?;
        let bufs = &bufs;
        let mut region = Region::new(&ctx);
        let n = grid * THREADS;
        let (_, plan) = LaunchConfig::new(grid, THREADS).auto_pdl(&auto)?;
        let sms = ctx.device().multiprocessor_count()?;
        let want_plan = if u64::from(grid) * 16 <= u64::from(sms) {
            PdlPlan::EARLY_TRIGGER
        } else {
            PdlPlan::WAIT_ONLY
        };
        check_eq(plan, want_plan, &format!("plan for {grid} blocks"))?;
        let mut expect = x0.clone();
        let check_chain = |stream: &Stream, what: &str, expect: &mut Vec<u32>| -> TestResult {
            stream.synchronize()?;
            for x in expect.iter_mut().take(n as usize) {
                *x = x.wrapping_add(LINKS);
            }
            let got = read(&bufs[0])?;
            same(&got[..n as usize], &expect[..n as usize], what)
        };
        // On the stream: automatic, then each fixed plan.
        for fixed in [
            None,
            Some(PdlPlan::NONE),
            Some(PdlPlan::WAIT_ONLY),
            Some(PdlPlan::EARLY_TRIGGER),
        ] {
            for k in 0..LINKS as usize {
                let (cfg, plan) = LaunchConfig::new(grid, THREADS)
                    .stream(&stream)
                    .auto_pdl(&auto)?;
                let (mut cfg, plan) = match fixed {
                    Some(p) => (cfg, p),
                    None => (cfg, plan),
                };
                plan.apply(&mut cfg)?;
                // SAFETY: auto_step_u32(in, out, n, plan) between two distinct buffers of
                // at least n words; the kernel waits (pdl_auto) when the attribute is set.
                unsafe {
                    launch(
                        &step,
                        &cfg,
                        &(bufs[k % 2].as_arg(), bufs[(k + 1) % 2].as_arg(), n, plan),
                    )?
                };
            }
            check_chain(
                &stream,
                &format!("stream, {grid} blocks, {fixed:?}"),
                &mut expect,
            )?;
        }
        // In a region (programmatic edges), automatic.
        region.run(&mut stream, |r| {
            for k in 0..LINKS as usize {
                let (cfg, plan) = LaunchConfig::new(grid, THREADS).auto_pdl(&auto)?;
                // SAFETY: as above.
                unsafe {
                    r.launch(
                        &step,
                        &cfg,
                        &(bufs[k % 2].as_arg(), bufs[(k + 1) % 2].as_arg(), n, plan),
                    )?
                };
            }
            Ok(())
        })?;
        check_chain(&stream, &format!("region, {grid} blocks"), &mut expect)?;
    }
    Ok(())
}

/// `AutoPdl::tune` runs the caller's chain under each plan (all of them exact), keeps
/// the fastest for the shape, and `auto_pdl` returns it until `clear_tuned`.
fn auto_pdl_tune_keeps_the_measured_plan() -> TestResult {
    let (ctx, module, mut stream) = setup()?;
    let step = module.function("auto_step_u32")?;
    let auto = AutoPdl::new(&step)?;
    let grid = (auto.capacity(THREADS, 0)? / 2) as u32;
    let n = grid * THREADS;
    const LINKS: usize = 24;
    const ROUNDS: usize = 3;
    let x0: Vec<u32> = (0..n).map(|i| i.wrapping_mul(2_654_435_761)).collect();
    let bufs = [
        DeviceBuffer::from_slice(&ctx, &x0)?,
        DeviceBuffer::<u32>::zeroed(&ctx, n as usize)?,
    ];
    let shape = LaunchConfig::new(grid, THREADS);
    check(
        matches!(
            auto.tune(&mut stream, &shape, 0, |_, _| Ok(())),
            Err(Error::InvalidArgument(_))
        ),
        || "0 rounds accepted".into(),
    )?;
    let mut samples = [0usize; 3];
    let chain = |stream: &Stream, plan: PdlPlan| -> Result<(), Error> {
        for k in 0..LINKS {
            let mut cfg = shape.clone().stream(stream);
            plan.apply(&mut cfg)?;
            // SAFETY: auto_step_u32(in, out, n, plan) between two distinct buffers of n
            // words; the kernel waits (pdl_auto) when the attribute is set.
            unsafe {
                launch(
                    &step,
                    &cfg,
                    &(bufs[k % 2].as_arg(), bufs[(k + 1) % 2].as_arg(), n, plan),
                )?
            };
        }
        Ok(())
    };
    let plans = [PdlPlan::NONE, PdlPlan::WAIT_ONLY, PdlPlan::EARLY_TRIGGER];
    let tuned = auto.tune(&mut stream, &shape, ROUNDS, |s, plan| {
        if let Some(i) = plans.iter().position(|&p| p == plan) {
            samples[i] += 1;
        }
        chain(s, plan)
    })?;
    check_eq(samples, [ROUNDS; 3], "samples per plan")?;
    check(plans.contains(&tuned), || format!("tuned plan {tuned:?}"))?;
    check_eq(auto.tuned(&shape), Some(tuned), "tuned() for the shape")?;
    let (_, plan) = shape.clone().auto_pdl(&auto)?;
    check_eq(plan, tuned, "auto_pdl after tune")?;
    // Another shape still gets the rule.
    let other = LaunchConfig::new(grid + 1, THREADS);
    check_eq(
        auto.plan(&other)?,
        auto.rule_plan(&other)?,
        "an untuned shape",
    )?;
    // The tuned plan in a region.
    let mut region = Region::new(&ctx);
    region.run(&mut stream, |r| {
        for k in 0..LINKS {
            let (cfg, plan) = shape.clone().auto_pdl(&auto)?;
            // SAFETY: as above.
            unsafe {
                r.launch(
                    &step,
                    &cfg,
                    &(bufs[k % 2].as_arg(), bufs[(k + 1) % 2].as_arg(), n, plan),
                )?
            };
        }
        Ok(())
    })?;
    stream.synchronize()?;
    let links = (3 * ROUNDS * LINKS + LINKS) as u32;
    let want: Vec<u32> = x0.iter().map(|x| x.wrapping_add(links)).collect();
    same(
        &read(&bufs[0])?,
        &want,
        "tuning chains and the tuned region",
    )?;
    drop(region);
    auto.clear_tuned();
    check_eq(auto.tuned(&shape), None, "after clear_tuned")?;
    check_eq(
        auto.plan(&shape)?,
        auto.rule_plan(&shape)?,
        "the rule again",
    )?;
    Ok(())
}

/// A region whose executions memset, transform and copy back to pinned host memory bound
/// to it: 200 executions alternating two sources and changing the kernel's arguments,
/// each read back exactly through `Region::host`.
fn device_to_host_copies_in_a_region() -> TestResult {
    let (ctx, module, mut stream) = setup()?;
    let axpb = module.function("region_axpb")?;
    let src = [
        DeviceBuffer::<u32>::zeroed(&ctx, N as usize)?,
        DeviceBuffer::<u32>::zeroed(&ctx, N as usize)?,
    ];
    let host = PinnedHostBuffer::<u32>::zeroed(&ctx, N as usize)?;
    let mut region = Region::new(&ctx);
    let out = region.bind_host(host);
    for i in 0..200u32 {
        let s = &src[(i % 2) as usize];
        let (a, b) = (i + 3, i * 7 + 1);
        region.run(&mut stream, |r| {
            r.memset_d32(s, i)?;
            let cfg = LaunchConfig::new(N / THREADS, THREADS);
            // SAFETY: region_axpb(in, out, n, a, b) in place on a live buffer of N words.
            unsafe { r.launch(&axpb, &cfg, &(s.as_arg(), s.as_arg(), N, a, b))? };
            r.copy_to_host(out, s)
        })?;
        let got = region.host(out)?;
        let want = i.wrapping_mul(a).wrapping_add(b);
        if let Some(k) = got.iter().position(|&x| x != want) {
            return Err(Outcome::Fail(format!(
                "execution {i}: element {k} is {}, expected {want}",
                got[k]
            )));
        }
    }
    let st = region.stats();
    check_eq((st.captures, st.replays), (1, 199), "captures, replays")?;
    check(st.updated_nodes >= 199 * 3, || {
        format!("updated nodes {st:?}")
    })?;
    let host = region.unbind_host(out)?;
    drop(region);
    check_eq(
        host[0],
        199u32.wrapping_mul(202).wrapping_add(199 * 7 + 1),
        "after the region",
    )?;
    Ok(())
}
