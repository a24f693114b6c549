//! Hardware tests of lazy loading (Programming Guide 4.7) and green contexts (4.6).
//!
//! Lazy loading: the loading mode (`CUDA_MODULE_LOADING`), a module's functions
//! enumerated with their names, and a function that is not loaded yet becoming loaded on
//! `Function::load` (under `EAGER`, every function is loaded from the start).
//!
//! Green contexts: the device's SMs split into two partitions, a green context on each,
//! and `pdl_primary` (ptx/src/pdl.rs) launched in each as the recording kernel: per block
//! it busy-waits `work_ns` on `%globaltimer` and writes `[start, mid, end, smid]` (thread
//! 0, 4 `u64`s per block). Every block of a partition must run on an SM of that
//! partition: the SM sets seen in the two partitions are disjoint and none is larger than
//! its partition's SM count. `pdl_primary`'s `griddepcontrol.launch_dependents` needs
//! sm_90, so the green-context tests need it too.

use std::collections::BTreeSet;

use cuda_workspace::{
    Outcome, TestResult, check, check_eq, check_filled, hw_tests, ptx, require_gpu, require_sm,
    run_suite,
};
use cudadrv::cuda_sys::CUmoduleLoadingMode;
use cudadrv::green::{
    self, GreenContext, GroupParams, ResourceDesc, SmPartition, SmResource, SplitFlags, Workqueue,
    WorkqueueConfig,
};
use cudadrv::launch::{LaunchConfig, launch};
use cudadrv::{Context, Device, DeviceBuffer, Error, Event, EventFlags, Function, Module, Stream};

fn main() {
    run_suite(
        "hw_green",
        hw_tests![
            loading_mode_is_reported,
            module_functions_are_enumerated_with_names,
            unloaded_function_loads_on_request,
            split_rules_are_checked_up_front,
            green_context_lives_while_its_handles_do,
            green_partitions_run_on_their_own_sms,
            two_partitions_run_concurrently_within_their_sms,
            lazy_and_eager_loading_timings,
            latency_with_a_busy_neighbour_partition,
            calls_of_13_1_match_the_driver,
            groups_of_different_sizes_run_on_their_own_sms,
            context_events_order_work_across_green_contexts,
        ],
    );
}

/// `u64` stamps `pdl_primary` writes per block: `[start, mid, end, smid]`.
const STAMPS_PER_BLOCK: usize = 4;
/// Slots for the kernels module's functions (it has about a dozen).
const SLOTS: usize = 64;

/// A green-context call on a driver before CUDA 12.4 (12.5 for `cuGreenCtxStreamCreate`)
/// becomes a skip naming the call; anything else stays a failure.
fn or_skip_old<T>(r: Result<T, Error>) -> Result<T, Outcome> {
    match r {
        Ok(v) => Ok(v),
        Err(e @ Error::DriverTooOld { .. }) => Err(Outcome::Skip(e.to_string())),
        Err(e) => Err(e.into()),
    }
}

fn mode_name(mode: CUmoduleLoadingMode) -> String {
    match mode {
        CUmoduleLoadingMode::CU_MODULE_LAZY_LOADING => "LAZY".into(),
        CUmoduleLoadingMode::CU_MODULE_EAGER_LOADING => "EAGER".into(),
        other => format!("unknown ({})", other.0),
    }
}

fn loading_mode_is_reported() -> TestResult {
    require_gpu()?;
    let mode = Module::loading_mode()?;
    let env = std::env::var("CUDA_MODULE_LOADING").ok();
    println!(
        "    loading mode {} (CUDA_MODULE_LOADING={})",
        mode_name(mode),
        env.as_deref().unwrap_or("<unset>")
    );
    check(
        mode == CUmoduleLoadingMode::CU_MODULE_LAZY_LOADING
            || mode == CUmoduleLoadingMode::CU_MODULE_EAGER_LOADING,
        || format!("cuModuleGetLoadingMode returned {}", mode.0),
    )?;
    match env.as_deref().map(str::to_ascii_uppercase).as_deref() {
        Some("EAGER") => check_eq(
            mode,
            CUmoduleLoadingMode::CU_MODULE_EAGER_LOADING,
            "mode under CUDA_MODULE_LOADING=EAGER",
        ),
        Some("LAZY") => check_eq(
            mode,
            CUmoduleLoadingMode::CU_MODULE_LAZY_LOADING,
            "mode under CUDA_MODULE_LOADING=LAZY",
        ),
        _ => Ok(()),
    }
}

fn name_of(f: &Function) -> Result<String, Error> {
    Ok(f.name()?.to_string_lossy().into_owned())
}

fn module_functions_are_enumerated_with_names() -> TestResult {
    require_gpu()?;
    let ctx = Context::primary(Device::get(0)?)?;
    let module = Module::from_ptx(&ctx, ptx::KERNELS)?;
    let count = module.function_count()? as usize;
    let mut slots: [Option<Function>; SLOTS] = std::array::from_fn(|_| None);
    let n = or_skip_old(module.functions(&mut slots))?;
    check_eq(n, count, "functions() total vs cuModuleGetFunctionCount")?;
    check(n <= SLOTS, || {
        format!("{n} functions, more than {SLOTS} slots")
    })?;
    check(
        slots[..n].iter().all(Option::is_some) && slots[n..].iter().all(Option::is_none),
        || format!("slots [..{n}] filled, the rest empty"),
    )?;
    let mut names = Vec::new();
    for f in slots.iter().flatten() {
        names.push(or_skip_old(name_of(f))?);
    }
    println!("    {n} functions: {}", names.join(", "));
    for expected in ["fill", "vec_add", "pdl_primary", "write_value"] {
        check(names.iter().any(|s| s == expected), || {
            format!("`{expected}` missing from the enumerated names {names:?}")
        })?;
    }
    let by_name = module.function("fill")?;
    check_eq(
        name_of(&by_name)?,
        "fill".to_string(),
        "name of a looked-up function",
    )?;

    // A short slice: only its length is filled, the total is still reported.
    let mut two: [Option<Function>; 2] = [None, None];
    check_eq(module.functions(&mut two)?, count, "total with two slots")?;
    check(two.iter().all(Option::is_some), || {
        "both slots filled".into()
    })?;
    let (a, b) = (
        name_of(two[0].as_ref().unwrap())?,
        name_of(two[1].as_ref().unwrap())?,
    );
    check_eq(
        (a.as_str(), b.as_str()),
        (names[0].as_str(), names[1].as_str()),
        "first two",
    )?;

    // The functions keep the module loaded after it and its context are dropped.
    drop(module);
    drop(ctx);
    let f = slots[0].take().unwrap();
    check_eq(
        name_of(&f)?,
        names[0].clone(),
        "name after the module value is gone",
    )?;
    Ok(())
}

fn unloaded_function_loads_on_request() -> TestResult {
    require_gpu()?;
    let mode = Module::loading_mode()?;
    let ctx = Context::primary(Device::get(0)?)?;
    // A fresh module: nothing of it has been launched or looked up yet.
    let module = Module::from_ptx(&ctx, ptx::KERNELS)?;
    let mut slots: [Option<Function>; SLOTS] = std::array::from_fn(|_| None);
    let n = or_skip_old(module.functions(&mut slots))?.min(SLOTS);
    let funcs: Vec<&Function> = slots[..n].iter().flatten().collect();
    let mut loaded = Vec::new();
    for f in &funcs {
        loaded.push(or_skip_old(f.is_loaded())?);
    }
    let unloaded: Vec<usize> = (0..funcs.len()).filter(|&i| !loaded[i]).collect();
    println!(
        "    mode {}: {} of {} functions loaded right after cuModuleLoadDataEx",
        mode_name(mode),
        funcs.len() - unloaded.len(),
        funcs.len()
    );
    if mode == CUmoduleLoadingMode::CU_MODULE_EAGER_LOADING {
        println!("    EAGER loading: every function must be loaded from the start");
        check(unloaded.is_empty(), || {
            format!("under EAGER, {} functions were not loaded", unloaded.len())
        })?;
        for f in &funcs {
            f.load()?; // a no-op on a loaded function
            check(f.is_loaded()?, || "loaded after a no-op load".into())?;
        }
        return Ok(());
    }
    let Some(&first) = unloaded.first() else {
        return Err(Outcome::Fail(
            "under LAZY loading, every function of a fresh module reported loaded".into(),
        ));
    };
    let f = funcs[first];
    let name = name_of(f)?;
    let t = std::time::Instant::now();
    f.load()?;
    let load_us = t.elapsed().as_secs_f64() * 1e6;
    check(f.is_loaded()?, || {
        format!("`{name}` not loaded after cuFuncLoad")
    })?;
    println!("    `{name}`: unloaded, loaded after cuFuncLoad ({load_us:.0} us)");
    // Another unloaded one, looked up by name: whether cuModuleGetFunction loads it is
    // the driver's choice; reported, not checked.
    if let Some(&second) = unloaded.get(1) {
        let other = name_of(funcs[second])?;
        let by_name = module.function(&other)?;
        println!(
            "    `{other}` after cuModuleGetFunction: loaded = {} (enumerated handle: {})",
            by_name.is_loaded()?,
            funcs[second].is_loaded()?
        );
    }
    // The rest still unloaded: loading is per function.
    for &i in unloaded.iter().skip(2) {
        check(!funcs[i].is_loaded()?, || {
            format!("function {i} became loaded without being loaded")
        })?;
    }
    Ok(())
}

fn split_rules_are_checked_up_front() -> TestResult {
    require_gpu()?;
    let dev = Device::get(0)?;
    let _primary = Context::primary(dev)?;
    let sms = or_skip_old(SmResource::of_device(dev))?;
    let (count, min, align) = (
        sms.sm_count(),
        sms.min_partition_size(),
        sms.coscheduled_alignment(),
    );
    println!("    device SMs: {count}, minimum partition {min}, alignment {align}");
    check(count > 0 && min > 0, || format!("{sms:?}"))?;
    let a = align.max(1);
    // The rounding rule.
    check_eq(
        sms.partition_size(0),
        Some(min.next_multiple_of(a)),
        "size for 0",
    )?;
    check_eq(
        sms.partition_size(1),
        Some(min.next_multiple_of(a)),
        "size for 1",
    )?;
    check_eq(
        sms.partition_size(min + 1),
        Some((min + 1).next_multiple_of(a)),
        "size for min + 1",
    )?;
    // Refused before the driver sees them.
    let mut groups = [SmPartition::EMPTY; 2];
    let invalid = |r: Result<_, Error>, what: &str| -> TestResult {
        match r {
            Err(Error::InvalidArgument(why)) => {
                println!("    {what}: {why}");
                Ok(())
            }
            other => Err(Outcome::Fail(format!(
                "{what}: expected InvalidArgument, got {other:?}"
            ))),
        }
    };
    invalid(
        sms.split_by_count(&mut groups, count + 1, SplitFlags::empty())
            .map(|_| ()),
        "min_count above the SM count",
    )?;
    invalid(
        sms.split_by_count(&mut [], min, SplitFlags::empty())
            .map(|_| ()),
        "no slots",
    )?;
    if count % a != 0 {
        invalid(
            sms.split_by_count(&mut groups, count, SplitFlags::empty())
                .map(|_| ()),
            "min_count rounding up past the SM count",
        )?;
    }
    invalid(ResourceDesc::new(&[]).map(|_| ()), "empty descriptor")?;
    invalid(
        ResourceDesc::new(&[SmPartition::EMPTY]).map(|_| ()),
        "unfilled partition in a descriptor",
    )?;
    invalid(
        green::stream(&Context::primary(dev)?, 0).map(|_| ()),
        "green stream on a regular context",
    )?;
    // What the driver makes matches the rule.
    let size = sms.partition_size(min).unwrap_or(min);
    let expect = count / size;
    let predicted = or_skip_old(sms.split_count(min, SplitFlags::empty()))?;
    println!("    split by {min}: {predicted} groups of {size} predicted");
    // At most what the SM count divided by the size allows (fewer is the driver's right,
    // for cluster or hierarchy reasons), at least one.
    check((1..=expect).contains(&predicted), || {
        format!("{predicted} groups predicted, expected 1..={expect}")
    })?;
    let mut many = vec![SmPartition::EMPTY; predicted as usize + 1];
    let split = sms.split_by_count(&mut many, min, SplitFlags::empty())?;
    check_eq(split.count, predicted as usize, "groups made")?;
    for (i, g) in many[..split.count].iter().enumerate() {
        check(g.sm_count() >= size && g.sm_count() % a == 0, || {
            format!(
                "group {i} has {} SMs (size {size}, alignment {a})",
                g.sm_count()
            )
        })?;
    }
    let used: u32 = many[..split.count].iter().map(SmPartition::sm_count).sum();
    check_eq(
        used + split.remaining.sm_count(),
        count,
        "groups + remainder = device SMs",
    )?;
    Ok(())
}

/// A green context on `part`, as a [`Context`].
fn green_ctx(dev: Device, part: &SmPartition) -> Result<Context, Error> {
    let green = GreenContext::create(dev, &ResourceDesc::new(std::slice::from_ref(part))?)?;
    // SAFETY: the tests use each green context, its clones and its handles on the test's
    // thread only.
    unsafe { Context::from_green(green) }
}

/// The device split into two equal partitions of whole alignment units.
struct Halves {
    dev: Device,
    primary: Context,
    parts: [SmPartition; 2],
    device_sms: u32,
}

fn halves() -> Result<Halves, Outcome> {
    require_sm(9, 0)?;
    let dev = Device::get(0)?;
    let primary = Context::primary(dev)?;
    let sms = or_skip_old(SmResource::of_device(dev))?;
    let a = sms.coscheduled_alignment().max(1);
    let half = (sms.sm_count() / 2 / a * a).max(sms.min_partition_size());
    if sms
        .partition_size(half)
        .is_none_or(|s| 2 * s > sms.sm_count())
    {
        return Err(Outcome::Skip(format!(
            "{sms:?}: too few SMs for two partitions"
        )));
    }
    let mut parts = [SmPartition::EMPTY; 2];
    let split = sms.split_by_count(&mut parts, half, SplitFlags::empty())?;
    check_eq(split.count, 2, "partitions made")?;
    println!(
        "    {} SMs split into {} + {} (remainder {})",
        sms.sm_count(),
        parts[0].sm_count(),
        parts[1].sm_count(),
        split.remaining.sm_count()
    );
    Ok(Halves {
        dev,
        primary,
        parts,
        device_sms: sms.sm_count(),
    })
}

/// Per-block stamps of one `pdl_primary` launch.
struct Stamps {
    blocks: Vec<[u64; STAMPS_PER_BLOCK]>,
}

impl Stamps {
    fn sms(&self) -> BTreeSet<u64> {
        self.blocks.iter().map(|b| b[3]).collect()
    }
    /// `[first start, last end]` in `%globaltimer` ns.
    fn window(&self) -> (u64, u64) {
        let start = self.blocks.iter().map(|b| b[0]).min().unwrap_or(0);
        let end = self.blocks.iter().map(|b| b[2]).max().unwrap_or(0);
        (start, end)
    }
}

/// Launches `pdl_primary` with `grid` blocks of 128 threads on `stream`, each busy for
/// `work_ns`; the stamps are read after `finish` (called once the launch is queued).
struct Recording {
    stamps: DeviceBuffer<u64>,
    _out: DeviceBuffer<u32>,
    grid: u32,
}

fn record(
    f: &Function,
    stream: &Stream,
    ctx: &Context,
    grid: u32,
    work_ns: u32,
) -> Result<Recording, Error> {
    let rec = Recording::alloc(ctx, grid)?;
    rec.launch(f, stream, work_ns)?;
    Ok(rec)
}

impl Recording {
    /// The buffers of a recording of `grid` blocks, allocated ahead of the launch (the
    /// allocation's memset synchronizes, which must not happen while another partition
    /// is meant to be busy).
    fn alloc(ctx: &Context, grid: u32) -> Result<Self, Error> {
        Ok(Self {
            stamps: DeviceBuffer::<u64>::zeroed(ctx, STAMPS_PER_BLOCK * grid as usize)?,
            _out: DeviceBuffer::<u32>::zeroed(ctx, 1)?,
            grid,
        })
    }

    /// Launches `pdl_primary` (`f`) into these buffers.
    fn launch(&self, f: &Function, stream: &Stream, work_ns: u32) -> Result<(), Error> {
        let cfg = LaunchConfig::new(self.grid, 128).stream(stream);
        // SAFETY: pdl_primary(out, n, stamps, work_ns): n = 0 writes nothing to `out`;
        // it writes 4 stamps per block into `stamps` (sized for `grid` blocks). Both
        // buffers live in `self` until its stream is synchronized in `finish`.
        unsafe {
            launch(
                f,
                &cfg,
                &(self._out.as_arg(), 0u32, self.stamps.as_arg(), work_ns),
            )
        }
    }

    fn finish(self, stream: &Stream) -> Result<Stamps, Error> {
        stream.synchronize()?;
        let mut raw = vec![0u64; STAMPS_PER_BLOCK * self.grid as usize];
        self.stamps.copy_to_host(&mut raw)?;
        let blocks = raw
            .chunks_exact(STAMPS_PER_BLOCK)
            .map(|c| [c[0], c[1], c[2], c[3]])
            .collect();
        Ok(Stamps { blocks })
    }
}

fn check_all_ran(s: &Stamps, what: &str) -> TestResult {
    check(s.blocks.iter().all(|b| b[2] != 0 && b[2] >= b[0]), || {
        format!("{what}: a block did not run (zero stamps)")
    })
}

fn green_context_lives_while_its_handles_do() -> TestResult {
    let h = halves()?;
    let before = cudadrv::drop_error_count();
    let ctx = green_ctx(h.dev, &h.parts[0])?;
    check(ctx.green_raw().is_some(), || {
        "context made from a green context".into()
    })?;
    check(ctx != h.primary, || {
        "a context of its own, not the primary".into()
    })?;
    let resource = SmResource::of_context(&ctx)?;
    check_eq(
        resource.sm_count(),
        h.parts[0].sm_count(),
        "cuGreenCtxGetDevResource SM count",
    )?;
    let stream = or_skip_old(green::stream(&ctx, 0))?;
    let plain = Stream::non_blocking(&ctx)?;
    let module = Module::from_ptx(&ctx, ptx::KERNELS)?;
    let fill = module.function("fill")?;
    let buf = DeviceBuffer::<u32>::zeroed(&ctx, 4096)?;
    // Only the handles keep the green context now.
    drop(module);
    drop(ctx);
    for s in [&stream, &plain] {
        let cfg = LaunchConfig::new(16, 256).stream(s);
        // SAFETY: fill(out, n) writes out[0..n] = 3i + 1; `buf` holds 4096 u32s and
        // outlives the synchronize below.
        unsafe { launch(&fill, &cfg, &(buf.as_arg(), 4096u32))? };
        s.synchronize()?;
    }
    let mut got = vec![0u32; 4096];
    buf.copy_to_host(&mut got)?;
    check(
        got.iter()
            .enumerate()
            .all(|(i, &v)| v == (i as u32).wrapping_mul(3).wrapping_add(1)),
        || "fill in the green context wrote wrong values".into(),
    )?;
    drop((stream, plain, fill, buf));
    check_eq(
        cudadrv::drop_error_count(),
        before,
        "drop errors (streams and buffers destroyed before cuGreenCtxDestroy)",
    )
}

fn green_partitions_run_on_their_own_sms() -> TestResult {
    let h = halves()?;
    // The whole device first, for reference: many short blocks reach most SMs.
    let module = Module::from_ptx(&h.primary, ptx::KERNELS)?;
    let rec = module.function("pdl_primary")?;
    let stream = Stream::non_blocking(&h.primary)?;
    let grid = 8 * h.device_sms;
    let whole = record(&rec, &stream, &h.primary, grid, 20_000)?.finish(&stream)?;
    check_all_ran(&whole, "whole device")?;
    println!("    whole device: {} SMs seen", whole.sms().len());

    let mut seen: Vec<BTreeSet<u64>> = Vec::new();
    for (i, part) in h.parts.iter().enumerate() {
        let ctx = green_ctx(h.dev, part)?;
        let module = Module::from_ptx(&ctx, ptx::KERNELS)?;
        let rec = module.function("pdl_primary")?;
        let mut set = BTreeSet::new();
        // A stream of the green context (cuGreenCtxStreamCreate), then a plain one made
        // in its context (cuStreamCreate): both must stay on the partition.
        let green_stream = or_skip_old(green::stream(&ctx, 0))?;
        let plain = Stream::non_blocking(&ctx)?;
        for (kind, s) in [("green stream", &green_stream), ("plain stream", &plain)] {
            let stamps = record(&rec, s, &ctx, grid, 20_000)?.finish(s)?;
            check_all_ran(&stamps, kind)?;
            let sms = stamps.sms();
            println!(
                "    partition {i} ({} SMs), {kind}: {grid} blocks on {} SMs",
                part.sm_count(),
                sms.len()
            );
            set.extend(sms);
        }
        check(set.len() <= part.sm_count() as usize, || {
            format!(
                "partition {i}: blocks ran on {} distinct SMs, more than its {}: {set:?}",
                set.len(),
                part.sm_count()
            )
        })?;
        seen.push(set);
    }
    let shared: Vec<&u64> = seen[0].intersection(&seen[1]).collect();
    check(shared.is_empty(), || {
        format!("SMs used by both partitions: {shared:?}")
    })?;
    Ok(())
}

fn two_partitions_run_concurrently_within_their_sms() -> TestResult {
    let h = halves()?;
    let ctxs = [
        green_ctx(h.dev, &h.parts[0])?,
        green_ctx(h.dev, &h.parts[1])?,
    ];
    let modules = [
        Module::from_ptx(&ctxs[0], ptx::KERNELS)?,
        Module::from_ptx(&ctxs[1], ptx::KERNELS)?,
    ];
    let recs = [
        modules[0].function("pdl_primary")?,
        modules[1].function("pdl_primary")?,
    ];
    let streams = [
        or_skip_old(green::stream(&ctxs[0], 0))?,
        or_skip_old(green::stream(&ctxs[1], 0))?,
    ];
    // Load both kernels first, so neither launch waits for a lazy load.
    for r in &recs {
        r.load()?;
    }
    // Two blocks per SM of each partition, each busy for 5 ms: both grids are resident
    // at once, so if the partitions run concurrently the windows overlap by milliseconds.
    const WORK_NS: u32 = 5_000_000;
    let grids = [2 * h.parts[0].sm_count(), 2 * h.parts[1].sm_count()];
    let a = record(&recs[0], &streams[0], &ctxs[0], grids[0], WORK_NS)?;
    let b = record(&recs[1], &streams[1], &ctxs[1], grids[1], WORK_NS)?;
    let a = a.finish(&streams[0])?;
    let b = b.finish(&streams[1])?;
    check_all_ran(&a, "partition 0")?;
    check_all_ran(&b, "partition 1")?;
    let (wa, wb) = (a.window(), b.window());
    let overlap = wa.1.min(wb.1).saturating_sub(wa.0.max(wb.0));
    println!(
        "    partition 0: {:.2} ms on {} SMs; partition 1: {:.2} ms on {} SMs; overlap {:.2} ms",
        (wa.1 - wa.0) as f64 / 1e6,
        a.sms().len(),
        (wb.1 - wb.0) as f64 / 1e6,
        b.sms().len(),
        overlap as f64 / 1e6
    );
    check(wa.0 < wb.1 && wb.0 < wa.1, || {
        format!("the partitions did not run concurrently: windows {wa:?} and {wb:?}")
    })?;
    let (sa, sb) = (a.sms(), b.sms());
    check(sa.len() <= h.parts[0].sm_count() as usize, || {
        format!("partition 0 ran on {} SMs: {sa:?}", sa.len())
    })?;
    check(sb.len() <= h.parts[1].sm_count() as usize, || {
        format!("partition 1 ran on {} SMs: {sb:?}", sb.len())
    })?;
    let shared: Vec<&u64> = sa.intersection(&sb).collect();
    check(shared.is_empty(), || {
        format!("SMs used by both partitions while running together: {shared:?}")
    })
}

/// What the loading-timings test measures in one process.
struct LoadTimings {
    mode: String,
    module_ms: f64,
    first_ms: f64,
    second_ms: f64,
    load_all_ms: f64,
    loaded: usize,
    functions: usize,
}

/// The prefix of the line a child process prints its timings on.
const TIMINGS_LINE: &str = "    timings:";

impl LoadTimings {
    fn line(&self) -> String {
        format!(
            "{TIMINGS_LINE} mode={} module_ms={:.3} first_ms={:.3} second_ms={:.3} \
             load_all_ms={:.3} loaded={} functions={}",
            self.mode,
            self.module_ms,
            self.first_ms,
            self.second_ms,
            self.load_all_ms,
            self.loaded,
            self.functions
        )
    }

    fn parse(line: &str) -> Option<Self> {
        let rest = line.strip_prefix(TIMINGS_LINE)?;
        let field = |key: &str| {
            rest.split_whitespace()
                .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
        };
        Some(Self {
            mode: field("mode")?.to_string(),
            module_ms: field("module_ms")?.parse().ok()?,
            first_ms: field("first_ms")?.parse().ok()?,
            second_ms: field("second_ms")?.parse().ok()?,
            load_all_ms: field("load_all_ms")?.parse().ok()?,
            loaded: field("loaded")?.parse().ok()?,
            functions: field("functions")?.parse().ok()?,
        })
    }
}

/// Set in the child process the loading-timings test starts: it only measures and prints.
const CHILD_ENV: &str = "HW_GREEN_CHILD";

/// Loads the kernels module in a fresh module, launches `fill` twice and loads every
/// function, timing each step with `Instant`; checks `fill`'s output.
fn measure_loading() -> Result<LoadTimings, Outcome> {
    let mode = mode_name(Module::loading_mode()?);
    let ctx = Context::primary(Device::get(0)?)?;
    let stream = Stream::non_blocking(&ctx)?;
    const N: u32 = 4096;
    let buf = DeviceBuffer::<u32>::zeroed(&ctx, N as usize)?;

    let t = std::time::Instant::now();
    let module = Module::from_ptx(&ctx, ptx::KERNELS)?;
    let module_ms = t.elapsed().as_secs_f64() * 1e3;

    // Enumerated handles (no cuModuleGetFunction, which may load by itself).
    let mut slots: [Option<Function>; SLOTS] = std::array::from_fn(|_| None);
    let n = or_skip_old(module.functions(&mut slots))?.min(SLOTS);
    let funcs: Vec<&Function> = slots[..n].iter().flatten().collect();
    let mut loaded = 0;
    let mut fill = None;
    for f in &funcs {
        if or_skip_old(f.is_loaded())? {
            loaded += 1;
        }
        if name_of(f)? == "fill" {
            fill = Some(*f);
        }
    }
    let fill = fill.ok_or_else(|| Outcome::Fail("`fill` not among the functions".into()))?;

    let cfg = LaunchConfig::new(N / 256, 256).stream(&stream);
    let mut launch_ms = [0.0; 2];
    for ms in &mut launch_ms {
        let t = std::time::Instant::now();
        // SAFETY: fill(out, n) writes out[0..n] = 3i + 1; `buf` holds N u32s and outlives
        // the synchronize right after.
        unsafe { launch(fill, &cfg, &(buf.as_arg(), N))? };
        stream.synchronize()?;
        *ms = t.elapsed().as_secs_f64() * 1e3;
    }
    let mut got = vec![0u32; N as usize];
    buf.copy_to_host(&mut got)?;
    check_filled(&got, &format!("fill under {mode} loading"))?;

    let t = std::time::Instant::now();
    for f in &funcs {
        f.load()?;
    }
    let load_all_ms = t.elapsed().as_secs_f64() * 1e3;
    for f in &funcs {
        check(f.is_loaded()?, || {
            format!(
                "`{}` not loaded after cuFuncLoad",
                name_of(f).unwrap_or_default()
            )
        })?;
    }
    Ok(LoadTimings {
        mode,
        module_ms,
        first_ms: launch_ms[0],
        second_ms: launch_ms[1],
        load_all_ms,
        loaded,
        functions: funcs.len(),
    })
}

fn lazy_and_eager_loading_timings() -> TestResult {
    require_gpu()?;
    let here = measure_loading()?;
    println!("{}", here.line());
    if std::env::var_os(CHILD_ENV).is_some() {
        return Ok(());
    }

    // The same measurement in a child process under EAGER loading.
    let exe = std::env::current_exe().map_err(|e| Outcome::Fail(format!("current_exe: {e}")))?;
    let out = std::process::Command::new(&exe)
        .arg("lazy_and_eager_loading_timings")
        .env(CHILD_ENV, "1")
        .env("CUDA_MODULE_LOADING", "EAGER")
        .output()
        .map_err(|e| Outcome::Fail(format!("running {}: {e}", exe.display())))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(Outcome::Fail(format!(
            "child under CUDA_MODULE_LOADING=EAGER failed ({}):\n{stderr}\n{stdout}",
            out.status
        )));
    }
    let Some(eager) = stdout.lines().find_map(LoadTimings::parse) else {
        if let Some(skip) = stdout.lines().find(|l| l.contains("SKIPPED")) {
            return Err(Outcome::Skip(format!("child: {}", skip.trim())));
        }
        return Err(Outcome::Fail(format!(
            "child printed no timings:\n{stdout}\n{stderr}"
        )));
    };
    println!(
        "    module load ({} kernels): {} {:.2} ms, {} {:.2} ms",
        here.functions, here.mode, here.module_ms, eager.mode, eager.module_ms
    );
    println!(
        "    first launch of `fill`: {} {:.3} ms, {} {:.3} ms",
        here.mode, here.first_ms, eager.mode, eager.first_ms
    );
    println!(
        "    second launch of `fill`: {} {:.3} ms, {} {:.3} ms",
        here.mode, here.second_ms, eager.mode, eager.second_ms
    );
    println!(
        "    load() of every function: {} {:.3} ms, {} {:.3} ms",
        here.mode, here.load_all_ms, eager.mode, eager.load_all_ms
    );
    println!(
        "    loaded right after module load: {} {}/{}, {} {}/{}",
        here.mode, here.loaded, here.functions, eager.mode, eager.loaded, eager.functions
    );
    check_eq(eager.mode.as_str(), "EAGER", "child's loading mode")?;
    check_eq(
        eager.loaded,
        eager.functions,
        "functions loaded right after module load under EAGER",
    )?;
    check(eager.functions > 0, || {
        "the child enumerated no functions".into()
    })
}

/// Median of `v` (sorted in place); 0 for an empty slice.
fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// `LAUNCHES` launches of `fill` (1 block of 256 on a 256-element buffer) on `stream`, each
/// between two events and synchronized: the event and host round-trip times in ms, and
/// the buffer's check.
/// Elements `time_short_kernel`'s `fill` writes.
const SHORT_N: u32 = 256;

/// Times 200 launches of `fill` (1 block) into `buf` (`SHORT_N` elements, allocated by
/// the caller ahead of any load it measures against), events and host round trip.
fn time_short_kernel(
    fill: &Function,
    stream: &Stream,
    ctx: &Context,
    buf: &DeviceBuffer<u32>,
    what: &str,
) -> Result<(Vec<f64>, Vec<f64>), Outcome> {
    const LAUNCHES: usize = 200;
    const N: u32 = SHORT_N;
    let (start, end) = (
        Event::new(ctx, EventFlags::empty())?,
        Event::new(ctx, EventFlags::empty())?,
    );
    let cfg = LaunchConfig::new(1, N).stream(stream);
    let (mut events, mut host) = (Vec::new(), Vec::new());
    for _ in 0..LAUNCHES {
        let t = std::time::Instant::now();
        start.record(stream)?;
        // SAFETY: fill(out, n) writes out[0..n]; `buf` holds N u32s and outlives the
        // synchronize below.
        unsafe { launch(fill, &cfg, &(buf.as_arg(), N))? };
        end.record(stream)?;
        end.synchronize()?;
        host.push(t.elapsed().as_secs_f64() * 1e3);
        events.push(f64::from(Event::elapsed_ms(&start, &end)?));
    }
    // Only now a synchronous copy (after the measurement).
    let mut got = vec![0u32; N as usize];
    buf.copy_to_host(&mut got)?;
    check_filled(&got, what)?;
    Ok((events, host))
}

fn latency_with_a_busy_neighbour_partition() -> TestResult {
    if cuda_workspace::under_sanitizer() {
        return cuda_workspace::skip(
            "a timing comparison: compute-sanitizer serializes and slows kernels, so the \
             neighbour's load cannot be made to overlap the measurement",
        );
    }
    let h = halves()?;
    let ctxs = [
        green_ctx(h.dev, &h.parts[0])?,
        green_ctx(h.dev, &h.parts[1])?,
    ];
    let modules = [
        Module::from_ptx(&ctxs[0], ptx::KERNELS)?,
        Module::from_ptx(&ctxs[1], ptx::KERNELS)?,
    ];
    let fill = modules[0].function("fill")?;
    let recs = [
        modules[0].function("pdl_primary")?,
        modules[1].function("pdl_primary")?,
    ];
    let streams = [
        or_skip_old(green::stream(&ctxs[0], 0))?,
        or_skip_old(green::stream(&ctxs[1], 0))?,
    ];
    for f in [&fill, &recs[0], &recs[1]] {
        f.load()?;
    }
    // Everything A uses is allocated before B is loaded: an allocation's memset (and
    // any synchronous copy) waits for the device's work, B's included, so it would let
    // B drain before A is measured.
    let bufs = [
        DeviceBuffer::<u32>::zeroed(&ctxs[0], SHORT_N as usize)?,
        DeviceBuffer::<u32>::zeroed(&ctxs[0], SHORT_N as usize)?,
        DeviceBuffer::<u32>::zeroed(&ctxs[0], SHORT_N as usize)?,
    ];
    let a_rec = Recording::alloc(&ctxs[0], 2 * h.parts[0].sm_count())?;
    // Warm-up, then A alone.
    time_short_kernel(&fill, &streams[0], &ctxs[0], &bufs[0], "warm-up")?;
    let t = std::time::Instant::now();
    let (mut alone, mut alone_host) =
        time_short_kernel(&fill, &streams[0], &ctxs[0], &bufs[1], "partition A alone")?;
    let alone_wall_ns = t.elapsed().as_nanos() as u64;

    // B busy: every SM of B holds as many spinning blocks as fit, kernel after kernel,
    // for well beyond A's measurement alone (a 10x margin, at least 50 ms).
    const WORK_NS: u32 = 10_000_000;
    let per_sm = recs[1].max_active_blocks_per_sm(128, 0)?.max(1);
    let grid_b = per_sm * h.parts[1].sm_count();
    let cover_ns = (10 * alone_wall_ns).max(50_000_000);
    let kernels_b = (cover_ns / u64::from(WORK_NS) + 1).min(100) as usize;
    let mut busy = Vec::with_capacity(kernels_b);
    for _ in 0..kernels_b {
        busy.push(Recording::alloc(&ctxs[1], grid_b)?);
    }
    for r in &busy {
        r.launch(&recs[1], &streams[1], WORK_NS)?;
    }
    std::thread::sleep(std::time::Duration::from_millis(2));
    // A's measurement and the check that B was busy through it use no synchronous
    // allocation or copy: the stream query before and after.
    let b_busy_before = !streams[1].query()?;
    let mut loaded = Vec::new();
    let mut loaded_host = Vec::new();
    {
        const LAUNCHES: usize = 200;
        let (start, end) = (
            Event::new(&ctxs[0], EventFlags::empty())?,
            Event::new(&ctxs[0], EventFlags::empty())?,
        );
        let cfg = LaunchConfig::new(1, SHORT_N).stream(&streams[0]);
        for _ in 0..LAUNCHES {
            let t = std::time::Instant::now();
            start.record(&streams[0])?;
            // SAFETY: fill(out, n) writes out[0..n]; `bufs[2]` holds SHORT_N u32s and
            // outlives the synchronize below.
            unsafe { launch(&fill, &cfg, &(bufs[2].as_arg(), SHORT_N))? };
            end.record(&streams[0])?;
            end.synchronize()?;
            loaded_host.push(t.elapsed().as_secs_f64() * 1e3);
            loaded.push(f64::from(Event::elapsed_ms(&start, &end)?));
        }
    }
    // A's SMs, recorded while B is still busy.
    a_rec.launch(&recs[0], &streams[0], 20_000)?;
    streams[0].synchronize()?;
    let b_still_busy = b_busy_before && !streams[1].query()?;
    let mut got = vec![0u32; SHORT_N as usize];
    bufs[2].copy_to_host(&mut got)?;
    check_filled(&got, "partition A, B busy")?;
    let a_stamps = a_rec.finish(&streams[0])?;
    let mut b_sms = BTreeSet::new();
    let mut b_windows = Vec::new();
    for (i, r) in busy.into_iter().enumerate() {
        let s = r.finish(&streams[1])?;
        check_all_ran(&s, &format!("B kernel {i}"))?;
        b_sms.extend(s.sms());
        b_windows.push(s.window());
    }
    check_all_ran(&a_stamps, "A recording")?;
    // Where B's kernels ran, relative to A's recording (which follows A's loaded
    // measurement): whether the load really overlapped the measurement.
    let a_start = a_stamps.window().0;
    let rel = |t: u64| (t as i64 - a_start as i64) as f64 / 1e6;
    let spans: Vec<String> = b_windows
        .iter()
        .map(|&(s, e)| format!("{:.1}..{:.1}", rel(s), rel(e)))
        .collect();
    println!(
        "    B kernels (ms, relative to A's recording start): {}",
        spans.join(" ")
    );
    let a_sms = a_stamps.sms();

    let (m_alone, m_loaded) = (median(&mut alone), median(&mut loaded));
    let (h_alone, h_loaded) = (median(&mut alone_host), median(&mut loaded_host));
    println!(
        "    B busy: {kernels_b} x pdl_primary ({grid_b} blocks of 128, {} ms each) on {} SMs; \
         still busy when A finished: {b_still_busy}",
        WORK_NS / 1_000_000,
        b_sms.len()
    );
    println!(
        "    short kernel on A (fill, 1 block), median of 200 (events): alone {:.2} us, \
         B busy {:.2} us, ratio {:.2}",
        m_alone * 1e3,
        m_loaded * 1e3,
        m_loaded / m_alone
    );
    println!(
        "    host round trip (launch + sync), median: alone {:.2} us, B busy {:.2} us, \
         ratio {:.2}",
        h_alone * 1e3,
        h_loaded * 1e3,
        h_loaded / h_alone
    );
    println!(
        "    A's SMs (pdl_primary on A while B busy): {} of {}",
        a_sms.len(),
        h.parts[0].sm_count()
    );
    check(b_still_busy, || {
        "B was not busy through A's measurement: the loaded numbers measure nothing".into()
    })?;
    check(a_sms.len() <= h.parts[0].sm_count() as usize, || {
        format!("partition A ran on {} SMs: {a_sms:?}", a_sms.len())
    })?;
    check(b_sms.len() <= h.parts[1].sm_count() as usize, || {
        format!("partition B ran on {} SMs: {b_sms:?}", b_sms.len())
    })?;
    let shared: Vec<&u64> = a_sms.intersection(&b_sms).collect();
    check(shared.is_empty(), || {
        format!("SMs used by both partitions: {shared:?}")
    })
}

/// The driver's CUDA version (`13000` = 13.0).
fn driver() -> Result<u32, Outcome> {
    Ok(u32::try_from(cudadrv::driver::driver_version()?).unwrap_or(0))
}

/// The 13.1 calls on this driver: before 13.1 each is `DriverTooOld` naming the call,
/// 13.1 and the driver's version (found before any work is done); from 13.1 on, each
/// answers, and a primary-context stream runs on all the device's SMs.
fn calls_of_13_1_match_the_driver() -> TestResult {
    require_sm(9, 0)?;
    let dev = Device::get(0)?;
    let ctx = Context::primary(dev)?;
    let version = driver()?;
    let sms = or_skip_old(SmResource::of_device(dev))?;
    let stream = Stream::non_blocking(&ctx)?;
    let mut groups = [SmPartition::EMPTY; 2];
    let split = sms.split(
        &[GroupParams::sms(16), GroupParams::sms(0).backfill()],
        &mut groups,
    );
    let of_stream = SmResource::of_stream(&stream);
    let wq_device = WorkqueueConfig::of_device(dev);
    let wq_stream = WorkqueueConfig::of_stream(&stream);
    let wq_ctx = Workqueue::of_context(&ctx);
    if version < 13010 {
        println!("    driver {version}: the 13.1 calls must be DriverTooOld");
        let too_old = |r: Result<(), Error>, call: &str| -> TestResult {
            match r {
                Err(Error::DriverTooOld {
                    call: c,
                    needs: 13010,
                    driver: d,
                }) if c == call && d == version => Ok(()),
                other => Err(format!(
                    "{call}: expected DriverTooOld(13.1, {version}), got {other:?}"
                )
                .into()),
            }
        };
        too_old(split.map(drop), "cuDevSmResourceSplit")?;
        too_old(of_stream.map(drop), "cuStreamGetDevResource")?;
        too_old(wq_stream.map(drop), "cuStreamGetDevResource")?;
        too_old(
            wq_device.map(drop),
            "cuDeviceGetDevResource (CU_DEV_RESOURCE_TYPE_WORKQUEUE_CONFIG)",
        )?;
        too_old(
            wq_ctx.map(drop),
            "cuCtxGetDevResource (CU_DEV_RESOURCE_TYPE_WORKQUEUE)",
        )?;
        // The message names all three.
        let e = SmResource::of_stream(&stream).unwrap_err().to_string();
        let want = format!(
            "cuStreamGetDevResource needs a CUDA 13.1 driver (this one is {}.{})",
            version / 1000,
            version % 1000 / 10
        );
        check_eq(e, want, "the error's text")?;
        return Ok(());
    }
    println!("    driver {version}: the 13.1 calls run");
    let split = split?;
    check_eq(split.count, 2, "groups")?;
    check_eq(groups[0].sm_count(), 16, "the first group's SMs")?;
    check(groups[1].sm_count() > 0, || {
        "an empty backfill group".to_string()
    })?;
    check_eq(
        of_stream?.sm_count(),
        sms.sm_count(),
        "a primary stream's SMs",
    )?;
    let config = wq_device?;
    check_eq(config.device(), dev, "the workqueue configuration's device")?;
    wq_stream?;
    wq_ctx?;
    Ok(())
}

/// The guide's example (4.6.4): 16 SMs for one green context, the rest for another,
/// with the 13.1 split on a 13.1+ driver and the by-count split (one group of 16, then
/// the remainder) before; each context's kernel blocks run only on its group's SMs
/// (distinct `%smid` values no more than the group's SM count) and the two sets of SMs
/// are disjoint.
fn groups_of_different_sizes_run_on_their_own_sms() -> TestResult {
    require_sm(9, 0)?;
    let dev = Device::get(0)?;
    let _primary = Context::primary(dev)?;
    let sms = or_skip_old(SmResource::of_device(dev))?;
    let mut groups = [SmPartition::EMPTY; 2];
    let params = [
        GroupParams::sms(16),
        GroupParams::sms(0).coscheduled(2).backfill(),
    ];
    match sms.split(&params, &mut groups) {
        Ok(_) => println!("    13.1 split (cuDevSmResourceSplit)"),
        Err(Error::DriverTooOld { .. }) => {
            let split = sms.split_by_count(&mut groups[..1], 16, SplitFlags::empty())?;
            check_eq(split.count, 1, "groups of 16")?;
            groups[1] = split.remaining;
            println!("    12.4 split (cuDevSmResourceSplitByCount) and its remainder");
        }
        Err(e) => return Err(e.into()),
    }
    check_eq(groups[0].sm_count(), 16, "the first group's SMs")?;
    check_eq(
        groups[0].sm_count() + groups[1].sm_count(),
        sms.sm_count(),
        "all SMs in the two groups",
    )?;
    let mut seen: Vec<BTreeSet<u64>> = Vec::new();
    for (i, part) in groups.iter().enumerate() {
        let ctx = green_ctx(dev, part)?;
        let module = Module::from_ptx(&ctx, ptx::KERNELS)?;
        let rec = module.function("pdl_primary")?;
        let stream = or_skip_old(green::stream(&ctx, 0))?;
        let grid = 8 * sms.sm_count();
        let stamps = record(&rec, &stream, &ctx, grid, 20_000)?.finish(&stream)?;
        check_all_ran(&stamps, "group")?;
        let set = stamps.sms();
        println!(
            "    group {i} ({} SMs): {grid} blocks on {} distinct SMs",
            part.sm_count(),
            set.len()
        );
        check(set.len() <= part.sm_count() as usize, || {
            format!(
                "group {i}: blocks ran on {} distinct SMs, more than its {}",
                set.len(),
                part.sm_count()
            )
        })?;
        seen.push(set);
    }
    let shared: Vec<&u64> = seen[0].intersection(&seen[1]).collect();
    check(shared.is_empty(), || {
        format!("SMs used by both groups: {shared:?}")
    })
}

/// The execution-context operations: green context A's kernel (busy 20 ms per block)
/// is recorded with `Context::record_event`; green context B waits for it with
/// `Context::wait_event` before its own kernel, which must start after every block of
/// A's ended (`%globaltimer`). Then the same through the primary context
/// (`cuCtxRecordEvent` / `cuCtxWaitEvent`), and the contexts' ids are distinct.
fn context_events_order_work_across_green_contexts() -> TestResult {
    let h = halves()?;
    let ctxs = [
        green_ctx(h.dev, &h.parts[0])?,
        green_ctx(h.dev, &h.parts[1])?,
    ];
    let ids = [
        or_skip_old(ctxs[0].id())?,
        or_skip_old(ctxs[1].id())?,
        h.primary.id()?,
    ];
    check(
        ids[0] != ids[1] && ids[1] != ids[2] && ids[0] != ids[2],
        || format!("context ids not distinct: {ids:?}"),
    )?;
    println!(
        "    ids: green {} and {}, primary {}",
        ids[0], ids[1], ids[2]
    );
    let modules = [
        Module::from_ptx(&ctxs[0], ptx::KERNELS)?,
        Module::from_ptx(&ctxs[1], ptx::KERNELS)?,
    ];
    let recs = [
        modules[0].function("pdl_primary")?,
        modules[1].function("pdl_primary")?,
    ];
    for r in &recs {
        r.load()?;
    }
    let streams = [
        or_skip_old(green::stream(&ctxs[0], 0))?,
        or_skip_old(green::stream(&ctxs[1], 0))?,
    ];
    let event = Event::new(&h.primary, EventFlags::DISABLE_TIMING)?;
    // Through the green contexts, then with the primary context recording A's work
    // (a green context's work is the primary context's too) and B waiting.
    for (round, via_primary) in [(0, false), (1, true)] {
        let a = Recording::alloc(&ctxs[0], h.parts[0].sm_count())?;
        let b = Recording::alloc(&ctxs[1], h.parts[1].sm_count())?;
        a.launch(&recs[0], &streams[0], 20_000_000)?;
        if via_primary {
            or_skip_old(h.primary.record_event(&event))?;
        } else {
            or_skip_old(ctxs[0].record_event(&event))?;
        }
        or_skip_old(ctxs[1].wait_event(&event))?;
        b.launch(&recs[1], &streams[1], 1_000)?;
        let (a, b) = (a.finish(&streams[0])?, b.finish(&streams[1])?);
        check_all_ran(&a, "A")?;
        check_all_ran(&b, "B")?;
        let (a_end, b_start) = (a.window().1, b.window().0);
        println!(
            "    round {round} ({}): B started {:.3} ms after A ended",
            if via_primary {
                "primary records"
            } else {
                "green records"
            },
            (b_start as f64 - a_end as f64) / 1e6
        );
        check(b_start >= a_end, || {
            format!("round {round}: B started at {b_start}, before A ended at {a_end}")
        })?;
    }
    Ok(())
}
