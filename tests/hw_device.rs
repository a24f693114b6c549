//! Hardware tests of the device side (sm_90): the inline-PTX helpers of
//! `cudadrv::device`, the Rust kernels built from `ptx/` and device-side launch.
//!
//! What each test proves:
//!
//! - `pdl_overlap_and_correctness`: Programmatic Dependent Launch with the kernels of
//!   `ptx/src/pdl.rs` (`griddepcontrol.launch_dependents` in the primary,
//!   `griddepcontrol.wait` in the secondary). Each batch of launches is queued behind a
//!   host-function gate so the GPU sees them back to back (otherwise the host's launch
//!   cost, longer than these kernels, hides everything). With
//!   `CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION` on the secondary, over 1000
//!   repetitions, each with its own poisoned buffers: the secondary never reads stale
//!   data (every word `6i + 15`), and its wait never returns before the primary's last
//!   write and last block end (`%globaltimer` stamps). Without the attribute (100
//!   repetitions): same data, and no secondary block ever starts before every primary
//!   block has ended. Overlap: the primary triggers `launch_dependents` at block entry
//!   and then works for 10 us, so with the attribute a secondary block (its prolog)
//!   must start before the primary's last block ended in at least one repetition, and
//!   the secondary must start sooner after the primary in the median than without.
//! - `mbarrier_pipeline_many_phases`: the local mbarrier family (init, arrive with count,
//!   arrive.expect_tx, expect_tx + complete_tx, token and parity waits, test_wait and
//!   try_wait with a hint, fence.mbarrier_init, inval) carries a 4-slot producer/consumer
//!   ring through 64 phases in each of 132 blocks: every output word is checked.
//! - `mbarrier_all_forms`: every remaining form (noComplete, pending_count, scoped and
//!   `.shared::cluster` arrives on its own CTA, every try_wait variant, false wait
//!   results), every fence, special registers and dynamic shared memory (64 B): the
//!   script's 29 recorded results are checked and words 29..32 stay unwritten. Prints
//!   which `pending_count` convention the hardware follows (before or after the arrive).
//! - `cluster_ids_and_remote_arrive`: cluster special registers and distributed shared
//!   memory: with cluster shapes (2,1,1) and (4,1,1), 8 clusters each, every CTA reports
//!   its cluster ids, stores into rank 0's shared memory through `mapa` and arrives
//!   remotely on rank 0's mbarrier; rank 0 waits with cluster-scope acquire and reports
//!   every slot; the CTAs of a cluster ran on distinct SMs.
//! - `device_side_launch_param_layout`: `devrt.ptx` linked with `libcudadevrt.a` through
//!   the JIT linker. `cuFuncGetParamInfo` reports `dyn_echo`'s alignment layout, the
//!   host argument tuple verifies against it, and a host launch of `dyn_echo` echoes the
//!   values. `dyn_parent` launches `dyn_echo` from the device
//!   (`cudaGetParameterBufferV2` + `cudaLaunchDeviceV2`) with scalar, pointer, vector
//!   and struct parameters written by the host packer's layout code: status 0 and the
//!   exact values. `dyn_parent_size_multiple` writes the buffer by the "smallest
//!   multiple of its size" wording instead; its echo must match exactly one of the two
//!   predicted outcomes, which settles (and prints) the rule the device runtime reads by.
//!
//! Every word the host reads back is written by one thread, so the suite can run under
//! `compute-sanitizer --tool racecheck` / `synccheck`. Under a CUDA tool (detected by
//! its injection variables) kernels are serialized, so PDL's early launch is reported
//! but not required and fewer repetitions run; the pipeline runs 4 blocks; under
//! compute-sanitizer the device-side launch test is skipped (the tools do not support
//! CUDA Dynamic Parallelism and count that as an error).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use cuda_workspace::{
    Outcome, TestResult, check, check_eq, cudadevrt_path, hw_tests, ptx, require_sm, run_suite,
    skip, under_sanitizer,
};
use cudadrv::args::{Float2, Float4};
use cudadrv::launch::{LaunchConfig, launch};
use cudadrv::{Context, Device, DeviceBuffer, DevicePtr, Error, JitOptions, Linker, Module};
use cudadrv::{Function, Pod, Stream, StreamFlags};

fn main() {
    run_suite(
        "hw_device",
        hw_tests![
            pdl_overlap_and_correctness,
            mbarrier_pipeline_many_phases,
            mbarrier_all_forms,
            cluster_ids_and_remote_arrive,
            device_side_launch_param_layout,
            bf16_conversions_match_the_host,
            bf16_sixteen_byte_loads,
            warp_reductions,
            sfu_math_and_atomics,
            fused_multiply_add_rounds_once,
            group_and_block_sums,
            lane_exchanges,
            hand_placed_pdl_wait,
        ],
    );
}

fn ctx() -> Result<Context, Error> {
    Context::primary(Device::get(0)?)
}

/// Copies a whole device buffer back.
fn read_back<T: Pod + Default>(buf: &DeviceBuffer<T>) -> Result<Vec<T>, Error> {
    let mut v = vec![T::default(); buf.len()];
    buf.copy_to_host(&mut v)?;
    Ok(v)
}

/// `base + count` elements as a kernel argument.
fn at<T>(base: DevicePtr<T>, count: usize) -> Result<DevicePtr<T>, Outcome> {
    base.offset(count)
        .ok_or_else(|| Outcome::Fail(format!("device pointer offset {count} overflows")))
}

// ---------------------------------------------------------------------------------------
// 1. Programmatic Dependent Launch
// ---------------------------------------------------------------------------------------

const PDL_BLOCK: u32 = 256;
/// Busy iterations of the secondary's prolog (before `griddepcontrol.wait`).
const PDL_PROLOG_ITERS: u32 = 5_000;
/// How long each primary block works (busy-waits on %globaltimer) after its early
/// `launch_dependents` and before its writes.
const PDL_PRIMARY_WORK_NS: u32 = 10_000;
/// Repetitions per batch (each with its own buffers, poisoned once per batch).
const PDL_BATCH: usize = 100;
const PDL_REPS: usize = 1000;
const PDL_REPS_WITHOUT_ATTR: usize = 100;
/// Repetitions per mode under compute-sanitizer / Nsight (slow, serialized launches).
const TOOL_REPS: usize = 10;
/// What the buffers hold before the kernels write them; `2 * POISON + 1` and `POISON`
/// itself are far from any `3i + 7` / `6i + 15` with `i < 2^24`.
const POISON: u32 = 0xDEAD_BEEF;
/// `u64` stamps per block: `[start, mid, end, smid]`.
const STAMPS: usize = 4;
/// The repetition whose timeline is printed.
const SHOWN_REP: usize = 5;

fn primary_value(i: u32) -> u32 {
    i.wrapping_mul(3).wrapping_add(7)
}

fn secondary_value(i: u32) -> u32 {
    primary_value(i).wrapping_mul(2).wrapping_add(1)
}

/// True when a CUDA tool (compute-sanitizer, Nsight Systems / Compute) is injected into
/// this process: it serializes kernels, so their concurrency cannot be observed.
fn under_cuda_tool() -> bool {
    [
        "CUDA_INJECTION64_PATH",
        "NV_SANITIZER_INJECTION_PORT_BASE",
        "NVTX_INJECTION64_PATH",
    ]
    .iter()
    .any(|v| std::env::var_os(v).is_some_and(|v| !v.is_empty()))
}

fn median(v: &[i64]) -> i64 {
    let mut v = v.to_vec();
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

fn us(ns: i64) -> f64 {
    ns as f64 / 1e3
}

/// What one primary + secondary repetition showed (`%globaltimer`, ns).
struct PdlRep {
    /// `min(secondary start) - max(primary end)`: how long after the primary's last
    /// block was done the secondary's first block started (< 0: during the primary).
    start_gap_ns: i64,
    /// `min(secondary mid) - max(primary end)`: the wait returned this long after the
    /// primary's last block was done (>= 0, checked).
    wait_gap_ns: i64,
    /// Median over secondary blocks of `mid - start` (prolog + wait).
    prolog_wait_ns: i64,
}

/// Opens on drop (also when a launch fails half-way through a batch).
struct Gate {
    flag: Arc<AtomicBool>,
}

impl Gate {
    /// Queues a host function on `stream` that holds the stream until the gate drops
    /// (at most 10 s).
    fn hold(stream: &Stream) -> Result<Self, Error> {
        let flag = Arc::new(AtomicBool::new(false));
        let held = flag.clone();
        stream.launch_host_fn(move || {
            let t = Instant::now();
            while !held.load(Ordering::Acquire) && t.elapsed() < Duration::from_secs(10) {
                std::thread::sleep(Duration::from_micros(20));
            }
        })?;
        Ok(Self { flag })
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        self.flag.store(true, Ordering::Release);
    }
}

struct PdlKernels {
    primary: Function,
    secondary: Function,
}

/// Runs `reps` repetitions of primary + secondary in batches and checks each one's data
/// and ordering.
fn run_pdl(
    ctx: &Context,
    k: &PdlKernels,
    grid: u32,
    sms: u32,
    reps: usize,
    with_attr: bool,
) -> Result<Vec<PdlRep>, Outcome> {
    let n = grid * PDL_BLOCK;
    let nw = n as usize;
    let blocks = grid as usize;
    let stream = Stream::new(ctx, StreamFlags::NON_BLOCKING)?;
    let mut prim = DeviceBuffer::<u32>::new(ctx, PDL_BATCH * nw)?;
    let mut sec = DeviceBuffer::<u32>::new(ctx, PDL_BATCH * nw)?;
    let mut pst = DeviceBuffer::<u64>::new(ctx, PDL_BATCH * blocks * STAMPS)?;
    let mut sst = DeviceBuffer::<u64>::new(ctx, PDL_BATCH * blocks * STAMPS)?;
    let prim_cfg = LaunchConfig::new(grid, PDL_BLOCK).stream(&stream);
    let mut sec_cfg = LaunchConfig::new(grid, PDL_BLOCK).stream(&stream);
    if with_attr {
        sec_cfg = sec_cfg.programmatic_stream_serialization()?;
    }
    let mode = if with_attr { "with PDL" } else { "without PDL" };
    let mut out = Vec::with_capacity(reps);
    let mut done = 0;
    while done < reps {
        let batch = PDL_BATCH.min(reps - done);
        // Poison on the same stream: ordered after the previous batch.
        prim.memset_d32_async(POISON, &stream)?;
        sec.memset_d32_async(POISON, &stream)?;
        pst.memset_d8_async(0, &stream)?;
        sst.memset_d8_async(0, &stream)?;
        // Hold the stream until the whole batch is queued: a launch costs the host a few
        // microseconds, longer than these kernels run, so without the gate every
        // secondary would reach the GPU after its primary had finished, and the two
        // would run back to back whatever the attribute.
        let gate = Gate::hold(&stream)?;
        for r in 0..batch {
            let p = at(prim.as_arg(), r * nw)?;
            let s = at(sec.as_arg(), r * nw)?;
            let ps = at(pst.as_arg(), r * blocks * STAMPS)?;
            let ss = at(sst.as_arg(), r * blocks * STAMPS)?;
            // SAFETY: pdl_primary(out: *mut u32, n: u32, stamps: *mut u64, work_ns: u32):
            // `p` holds n
            // words and `ps` 4 * grid u64s of this repetition's slice; nothing else
            // touches them until the stream synchronizes.
            unsafe { launch(&k.primary, &prim_cfg, &(p, n, ps, PDL_PRIMARY_WORK_NS))? };
            // SAFETY: pdl_secondary(input: *const u32, out: *mut u32, n: u32,
            // stamps: *mut u64, prolog_iters: u32): `p` (read) and `s` (written) hold n
            // words each and do not overlap; `ss` holds 4 * grid u64s.
            unsafe { launch(&k.secondary, &sec_cfg, &(p, s, n, ss, PDL_PROLOG_ITERS))? };
        }
        drop(gate);
        stream.synchronize()?;
        let prim_h = read_back(&prim)?;
        let sec_h = read_back(&sec)?;
        let pst_h = read_back(&pst)?;
        let sst_h = read_back(&sst)?;
        for r in 0..batch {
            let rep = done + r;
            let pw = &prim_h[r * nw..(r + 1) * nw];
            let sw = &sec_h[r * nw..(r + 1) * nw];
            if let Some(i) = (0..n).find(|&i| pw[i as usize] != primary_value(i)) {
                return Err(Outcome::Fail(format!(
                    "{mode}, repetition {rep}: primary out[{i}] = {:#x}, expected {:#x}",
                    pw[i as usize],
                    primary_value(i)
                )));
            }
            if let Some(i) = (0..n).find(|&i| sw[i as usize] != secondary_value(i)) {
                let bad = (0..n)
                    .filter(|&i| sw[i as usize] != secondary_value(i))
                    .count();
                return Err(Outcome::Fail(format!(
                    "{mode}, repetition {rep}: stale or missing secondary data: out[{i}] = \
                     {:#x}, expected {:#x} ({bad} of {n} words wrong)",
                    sw[i as usize],
                    secondary_value(i)
                )));
            }
            let ps = &pst_h[r * blocks * STAMPS..(r + 1) * blocks * STAMPS];
            let ss = &sst_h[r * blocks * STAMPS..(r + 1) * blocks * STAMPS];
            for (who, st) in [("primary", ps), ("secondary", ss)] {
                for (b, s) in st.chunks_exact(STAMPS).enumerate() {
                    check(
                        s[0] != 0 && s[1] != 0 && s[2] != 0 && s[0] <= s[1] && s[1] <= s[2],
                        || {
                            format!(
                                "{mode}, repetition {rep}: {who} block {b} stamps not written \
                                 in order: {s:?}"
                            )
                        },
                    )?;
                    check(s[3] < u64::from(sms), || {
                        format!("{mode}, repetition {rep}: {who} block {b} smid {}", s[3])
                    })?;
                }
            }
            let field = |st: &[u64], f: usize| -> Vec<u64> {
                st.chunks_exact(STAMPS).map(|s| s[f]).collect()
            };
            let max = |v: Vec<u64>| v.into_iter().max().unwrap_or(0);
            let min = |v: Vec<u64>| v.into_iter().min().unwrap_or(0);
            let (p_mid, p_end) = (max(field(ps, 1)), max(field(ps, 2)));
            let (s_start, s_mid) = (min(field(ss, 0)), min(field(ss, 1)));
            // The wait returns only after the primary grid completed: after every
            // primary block's last write (stamp 1) and its end stamp (stamp 2).
            check(s_mid >= p_mid && s_mid >= p_end, || {
                format!(
                    "{mode}, repetition {rep}: griddepcontrol.wait returned at {s_mid} ns, \
                     before the primary was done (last write {p_mid} ns, last end {p_end} ns)"
                )
            })?;
            if !with_attr {
                // Stream order: the secondary starts only after the primary grid
                // completed, so after every primary block's end stamp.
                check(s_start >= p_end, || {
                    format!(
                        "without PDL, repetition {rep}: a secondary block started at \
                         {s_start} ns, before the primary's last block ended at {p_end} ns"
                    )
                })?;
            }
            if rep == SHOWN_REP {
                let t0 = min(field(ps, 0));
                let span = |st: &[u64], f: usize| {
                    let v = field(st, f);
                    format!(
                        "{}..{}",
                        v.iter().min().unwrap_or(&t0) - t0,
                        v.iter().max().unwrap_or(&t0) - t0
                    )
                };
                println!(
                    "    {mode}, repetition {rep} (ns from the first primary start): primary \
                     start {} write-done {} end {} | secondary start {} wait-done {} end {}",
                    span(ps, 0),
                    span(ps, 1),
                    span(ps, 2),
                    span(ss, 0),
                    span(ss, 1),
                    span(ss, 2)
                );
            }
            let prolog_wait: Vec<i64> = ss
                .chunks_exact(STAMPS)
                .map(|s| s[1] as i64 - s[0] as i64)
                .collect();
            out.push(PdlRep {
                start_gap_ns: s_start as i64 - p_end as i64,
                wait_gap_ns: s_mid as i64 - p_end as i64,
                prolog_wait_ns: median(&prolog_wait),
            });
        }
        done += batch;
    }
    Ok(out)
}

fn pdl_overlap_and_correctness() -> TestResult {
    require_sm(9, 0)?;
    let ctx = ctx()?;
    let sms = ctx.device().multiprocessor_count()?;
    let module = Module::from_ptx(&ctx, ptx::KERNELS)?;
    let k = PdlKernels {
        primary: module.function("pdl_primary")?,
        secondary: module.function("pdl_secondary")?,
    };
    let grid = sms;
    let tool = under_cuda_tool();
    // Under a tool each launch is slow and serialized: fewer repetitions, same checks.
    let (reps, reps_without) = if tool {
        (TOOL_REPS, TOOL_REPS)
    } else {
        (PDL_REPS, PDL_REPS_WITHOUT_ATTR)
    };

    // Stream order first: the baseline the PDL launches are compared with.
    let without = run_pdl(&ctx, &k, grid, sms, reps_without, false)?;
    let gaps_without: Vec<i64> = without.iter().map(|r| r.start_gap_ns).collect();
    let min_without = gaps_without.iter().copied().min().unwrap_or(0);
    println!(
        "    without PDL: {} reps of {grid}x{PDL_BLOCK} + {grid}x{PDL_BLOCK}, data correct; \
         secondary first start - primary last end: median {:.3} us, min {:.3} us (never < 0)",
        without.len(),
        us(median(&gaps_without)),
        us(min_without)
    );

    let with = run_pdl(&ctx, &k, grid, sms, reps, true)?;
    let gaps_with: Vec<i64> = with.iter().map(|r| r.start_gap_ns).collect();
    let waits: Vec<i64> = with.iter().map(|r| r.wait_gap_ns).collect();
    let prolog: Vec<i64> = with.iter().map(|r| r.prolog_wait_ns).collect();
    // Overlap in the strict sense: a secondary block started before the primary's last
    // block was done. Early launch: a secondary block started earlier after the primary
    // than stream order ever allowed (below the minimum gap without the attribute), so
    // while the primary grid was still completing.
    let strict = gaps_with.iter().filter(|&&g| g < 0).count();
    let early: Vec<i64> = gaps_with
        .iter()
        .copied()
        .filter(|&g| g < min_without)
        .collect();
    let saved: Vec<i64> = early.iter().map(|g| median(&gaps_without) - g).collect();
    println!(
        "    with PDL: {} reps, data never stale, wait always after the primary's last write \
         and end stamp (median {:.3} us after the last end)",
        with.len(),
        us(median(&waits))
    );
    println!(
        "    with PDL: secondary first start - primary last end: median {:.3} us, min {:.3} us; \
         started earlier than stream order allows in {}/{} ({:.1}%), median {:.3} us earlier \
         than the stream-order median; started before the primary's last block ended in {}/{}",
        us(median(&gaps_with)),
        us(gaps_with.iter().copied().min().unwrap_or(0)),
        early.len(),
        with.len(),
        100.0 * early.len() as f64 / with.len().max(1) as f64,
        us(median(&saved)),
        strict,
        with.len()
    );
    println!(
        "    secondary prolog ({PDL_PROLOG_ITERS} iters) + wait per block: median {:.3} us{}",
        us(median(&prolog)),
        if median(&prolog) < 1000 {
            " (suspiciously short: was the prolog optimized away?)"
        } else {
            ""
        }
    );

    if tool {
        println!("    (CUDA tool injected: kernels serialized, early launch not required)");
        return Ok(());
    }
    // The primary triggers at block entry and then works for PDL_PRIMARY_WORK_NS: with
    // the attribute the secondary's prolog must start while the primary still runs.
    check(strict > 0, || {
        format!(
            "with PDL no secondary block of {} repetitions started before the primary's last \
             block ended (min gap {:.3} us with PDL, {:.3} us without)",
            with.len(),
            us(gaps_with.iter().copied().min().unwrap_or(0)),
            us(min_without)
        )
    })?;
    check(median(&gaps_with) < median(&gaps_without), || {
        format!(
            "with PDL the secondary did not start earlier in the median: {:.3} us vs {:.3} us \
             without the attribute",
            us(median(&gaps_with)),
            us(median(&gaps_without))
        )
    })
}

// ---------------------------------------------------------------------------------------
// 2. mbarrier pipeline
// ---------------------------------------------------------------------------------------

const PIPE_BLOCK: u32 = 128;
const PIPE_PHASES: u32 = 64;

fn mbarrier_pipeline_many_phases() -> TestResult {
    require_sm(9, 0)?;
    let ctx = ctx()?;
    // Under compute-sanitizer a few blocks keep the run short; each block runs the same
    // independent pipeline.
    let grid = if under_cuda_tool() {
        4
    } else {
        ctx.device().multiprocessor_count()?
    };
    let module = Module::from_ptx(&ctx, ptx::KERNELS)?;
    let f = module.function("mbar_pipeline")?;
    let static_smem = f.static_shared_size_bytes()?;
    check(static_smem >= 1088, || {
        format!("mbar_pipeline has {static_smem} B of static shared memory, expected >= 1088")
    })?;
    let words = grid as usize * PIPE_PHASES as usize * 96;
    let out = DeviceBuffer::from_slice(&ctx, &vec![POISON; words])?;
    // The legacy default stream, which `ctx.synchronize()` below waits for.
    let stream = Stream::legacy(&ctx);
    let cfg = LaunchConfig::new(grid, PIPE_BLOCK).stream(&stream);
    // SAFETY: mbar_pipeline(out: *mut u32, phases: u32): `out` holds
    // grid * phases * 96 words; block (128, 1, 1) as required.
    unsafe { launch(&f, &cfg, &(out.as_arg(), PIPE_PHASES))? };
    ctx.synchronize()?;
    let h = read_back(&out)?;
    let mut idx = 0;
    for b in 0..grid {
        for p in 0..PIPE_PHASES {
            for w in 1..=3u32 {
                for l in 0..32u32 {
                    let want = p.wrapping_mul(2000).wrapping_add(2 * l + 32);
                    check(h[idx] == want, || {
                        format!(
                            "block {b}, phase {p}, warp {w}, lane {l}: out[{idx}] = {:#x}, \
                             expected {want}",
                            h[idx]
                        )
                    })?;
                    idx += 1;
                }
            }
        }
    }
    check_eq(idx, words, "words checked")?;
    println!(
        "    {grid} blocks x {PIPE_PHASES} phases: all {words} words correct \
         ({static_smem} B static smem)"
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------
// 3. mbarrier forms
// ---------------------------------------------------------------------------------------

/// `mbar_forms` words 2..=28 (words 0, 1 and 10 are `pending_count` results, checked
/// separately).
const FORMS_EXPECTED: [(usize, u32); 26] = [
    (2, 0),
    (3, 0),
    (4, 1),
    (5, 1),
    (6, 0),
    (7, 0),
    (8, 0),
    (9, 1),
    (11, 0),
    (12, 0),
    (13, 1),
    (14, 1),
    (15, 1),
    (16, 0),
    (17, 1),
    (18, 1),
    (19, 1),
    (20, 64),
    (21, 0xC0DE_0001),
    (22, 0xC0DE_0002),
    (23, 1),
    (24, 1),
    (25, 0),
    (26, 1),
    (27, 0),
    (28, 1),
];

fn mbarrier_all_forms() -> TestResult {
    require_sm(9, 0)?;
    let ctx = ctx()?;
    let module = Module::from_ptx(&ctx, ptx::KERNELS)?;
    let f = module.function("mbar_forms")?;
    let out = DeviceBuffer::from_slice(&ctx, &[POISON; 32])?;
    let stream = Stream::legacy(&ctx);
    let cfg = LaunchConfig::new(1, 32).shared_mem(64).stream(&stream);
    // SAFETY: mbar_forms(out: *mut u32): `out` holds 32 words; grid 1, block 32, 64 B of
    // dynamic shared memory as required.
    unsafe { launch(&f, &cfg, &(out.as_arg(),))? };
    ctx.synchronize()?;
    let w = read_back(&out)?;
    println!("    words 0..29: {:?}", &w[..29]);
    for (i, want) in FORMS_EXPECTED {
        check(w[i] == want, || {
            format!(
                "mbar_forms word {i} = {:#x}, expected {want:#x} (all: {w:?})",
                w[i]
            )
        })?;
    }
    for (i, &v) in w.iter().enumerate().skip(29) {
        check_eq(
            v,
            POISON,
            &format!("mbar_forms word {i} (must stay unwritten)"),
        )?;
    }
    // pending_count: the PTX ISA reads as "before the arrive" (4, 3, 4); the other
    // possible convention is "after the arrive" (3, 2, 3).
    let pending = (w[0], w[1], w[10]);
    check(w[0] == w[1] + 1 && w[10] == w[0], || {
        format!("pending_count words (0, 1, 10) = {pending:?}: expected w0 == w1 + 1 == w10")
    })?;
    match pending {
        (4, 3, 4) => println!(
            "    mbarrier.pending_count: counts BEFORE the arrive (4, 3, 4): matches the PTX ISA"
        ),
        (3, 2, 3) => println!(
            "    mbarrier.pending_count: counts AFTER the arrive (3, 2, 3): the arrive's state \
             is taken after it"
        ),
        other => {
            return Err(Outcome::Fail(format!(
                "pending_count words (0, 1, 10) = {other:?}: neither (4, 3, 4) nor (3, 2, 3)"
            )));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// 4. Clusters: special registers, distributed shared memory, remote arrive
// ---------------------------------------------------------------------------------------

const CLUSTER_GRID_CLUSTERS: u32 = 8;
const CLUSTER_BLOCK: u32 = 64;
const RECORD_WORDS: usize = 16;

fn cluster_ids_and_remote_arrive() -> TestResult {
    require_sm(9, 0)?;
    let ctx = ctx()?;
    let sms = ctx.device().multiprocessor_count()?;
    let module = Module::from_ptx(&ctx, ptx::KERNELS)?;
    let f = module.function("cluster_mbarrier")?;
    let g = CLUSTER_GRID_CLUSTERS;
    let stream = Stream::legacy(&ctx);
    for n in [2u32, 4] {
        let blocks = g * n;
        let out = DeviceBuffer::from_slice(&ctx, &vec![POISON; blocks as usize * RECORD_WORDS])?;
        let cfg = LaunchConfig::new(blocks, CLUSTER_BLOCK)
            .stream(&stream)
            .cluster_dim((n, 1, 1))?;
        // SAFETY: cluster_mbarrier(out: *mut u32): `out` holds 16 words per block; 1-D
        // grid of g * n blocks in clusters of (n, 1, 1), n <= 8.
        unsafe { launch(&f, &cfg, &(out.as_arg(),))? };
        ctx.synchronize()?;
        let h = read_back(&out)?;
        let mut sm_sets: Vec<Vec<u32>> = vec![Vec::new(); g as usize];
        for b in 0..blocks {
            let rec = &h[b as usize * RECORD_WORDS..(b as usize + 1) * RECORD_WORDS];
            let (c, r) = (b / n, b % n);
            let want = [r, n, c, r, g, n];
            check(rec[..6] == want, || {
                format!(
                    "cluster {n}: block {b} ids [rank, nctarank, clusterid.x, cluster_ctaid.x, \
                     nclusterid.x, cluster_nctaid.x] = {:?}, expected {want:?}",
                    &rec[..6]
                )
            })?;
            check(rec[6] < sms, || {
                format!("cluster {n}: block {b} smid {} >= {sms}", rec[6])
            })?;
            sm_sets[c as usize].push(rec[6]);
            check_eq(
                rec[7],
                1,
                &format!("cluster {n}: block {b} marker (word 7)"),
            )?;
            for (j, &v) in rec.iter().enumerate().skip(8) {
                let want = if r == 0 && j - 8 < n as usize {
                    c * n + (j as u32 - 8) + 1
                } else {
                    POISON
                };
                check(v == want, || {
                    format!(
                        "cluster {n}: block {b} (cluster {c}, rank {r}) word {j} = {v:#x}, \
                         expected {want:#x}"
                    )
                })?;
            }
        }
        // The CTAs of one cluster run concurrently, so on distinct SMs.
        for (c, sm) in sm_sets.iter_mut().enumerate() {
            sm.sort_unstable();
            let len = sm.len();
            sm.dedup();
            check_eq(
                sm.len(),
                len,
                &format!("cluster {n}: distinct SMs in cluster {c}"),
            )?;
        }
        println!(
            "    cluster ({n},1,1) x {g}: ids, DSMEM slots and remote arrivals correct; \
             cluster 0 on SMs {:?}",
            sm_sets[0]
        );
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// 5. Device-side launch and its parameter layout
// ---------------------------------------------------------------------------------------

cudadrv::kernel_struct! {
    /// `struct Pair { float a; float4 b; }` (size 32, alignment 16), as in ptx/src/echo.rs.
    struct Pair {
        a: f32,
        b: Float4,
    }
}

const ECHO_LEN: usize = 128;
const ECHO_SENTINEL: u8 = 0x5A;
const STATUS_SENTINEL: u32 = 0x7777_7777;

const DYN_A: i32 = -123_456_789;
const DYN_B: [f32; 4] = [1.5, -2.25, 3.0, 4.75];
const DYN_C: u8 = 0xAB;
const DYN_D: f32 = 6.5;
const DYN_E: u64 = 0x1122_3344_5566_7788;
const DYN_F: [f32; 2] = [7.25, -8.5];
const DYN_G_A: f32 = 9.75;
const DYN_G_B: [f32; 4] = [10.0, 11.0, 12.0, 13.0];

/// The 128-byte echo `dyn_echo` writes for the given values over a sentinel-filled buffer
/// (offsets: a 0, b 16, c 32, d 48, e 64, f 80, g.a 96, g.b 112).
fn echo_bytes(f: [f32; 2], g_a: f32, g_b: [f32; 4]) -> [u8; ECHO_LEN] {
    let mut o = [ECHO_SENTINEL; ECHO_LEN];
    let mut put = |at: usize, bytes: &[u8]| o[at..at + bytes.len()].copy_from_slice(bytes);
    put(0, &DYN_A.to_le_bytes());
    for (i, x) in DYN_B.iter().enumerate() {
        put(16 + 4 * i, &x.to_le_bytes());
    }
    put(32, &[DYN_C]);
    put(48, &DYN_D.to_le_bytes());
    put(64, &DYN_E.to_le_bytes());
    for (i, x) in f.iter().enumerate() {
        put(80 + 4 * i, &x.to_le_bytes());
    }
    put(96, &g_a.to_le_bytes());
    for (i, x) in g_b.iter().enumerate() {
        put(112 + 4 * i, &x.to_le_bytes());
    }
    o
}

/// Launches a 1x1 devrt parent `(out, status)` and returns (status, echo bytes).
fn run_parent(ctx: &Context, f: &Function) -> Result<(u32, Vec<u8>), Outcome> {
    let out = DeviceBuffer::from_slice(ctx, &[ECHO_SENTINEL; ECHO_LEN])?;
    let status = DeviceBuffer::from_slice(ctx, &[STATUS_SENTINEL])?;
    check(out.as_raw() % 16 == 0, || {
        "echo buffer not 16-byte aligned".into()
    })?;
    let stream = Stream::legacy(ctx);
    let cfg = LaunchConfig::new(1, 1).stream(&stream);
    // SAFETY: dyn_parent*(out: *mut u8, status: *mut u32): `out` is 128 writable,
    // 16-byte aligned bytes and `status` one word; the child the parent launches
    // completes before the parent grid does, so before the synchronize below.
    unsafe { launch(f, &cfg, &(out.as_arg(), status.as_arg()))? };
    ctx.synchronize()?;
    Ok((read_back(&status)?[0], read_back(&out)?))
}

fn hex_diff(got: &[u8], want: &[u8]) -> String {
    got.iter()
        .zip(want)
        .enumerate()
        .filter(|(_, (g, w))| g != w)
        .map(|(i, (g, w))| format!("[{i}] {g:#04x}!={w:#04x}"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn device_side_launch_param_layout() -> TestResult {
    require_sm(9, 0)?;
    if under_sanitizer() {
        return skip(
            "compute-sanitizer does not support CUDA Dynamic Parallelism (reports it as an \
             error); run without the tool",
        );
    }
    let Some(devrt) = cudadevrt_path() else {
        return skip(
            "libcudadevrt.a not found ($CUDA_DEVRT_LIB, $CUDA_PATH/lib64, $CUDA_HOME/lib64, \
             /usr/local/cuda/lib64)",
        );
    };
    let ctx = ctx()?;
    let mut linker = Linker::new(&ctx, JitOptions::default())?;
    linker.add_ptx(ptx::DEVRT, "devrt.ptx")?;
    linker.add_library_file(devrt.to_str().ok_or("libcudadevrt.a path is not UTF-8")?)?;
    let module = linker.into_module()?;
    println!("    linked devrt.ptx with {}", devrt.display());

    // The child's real parameter layout, as the driver reports it.
    let echo = module.function("dyn_echo")?;
    let want_layout = [
        (0, 8),
        (8, 4),
        (16, 16),
        (32, 1),
        (36, 4),
        (40, 8),
        (48, 32),
        (80, 8),
    ];
    let have_param_info = match (0..want_layout.len())
        .map(|i| echo.param_info(i))
        .collect::<Result<Vec<_>, _>>()
    {
        Ok(layout) => {
            check_eq(
                layout.as_slice(),
                want_layout.as_slice(),
                "dyn_echo (offset, size) per parameter from cuFuncGetParamInfo",
            )?;
            check_eq(
                echo.param_count()?,
                want_layout.len(),
                "dyn_echo parameter count",
            )?;
            true
        }
        Err(e) => {
            println!("    cuFuncGetParamInfo unavailable ({e}); layout not cross-checked");
            false
        }
    };

    let expected = echo_bytes(DYN_F, DYN_G_A, DYN_G_B);

    // Host launch of the child with the host's argument path: the reference echo.
    {
        let out = DeviceBuffer::from_slice(&ctx, &[ECHO_SENTINEL; ECHO_LEN])?;
        let args: EchoArgs = (
            out.as_arg(),
            DYN_A,
            Float4::new(DYN_B[0], DYN_B[1], DYN_B[2], DYN_B[3]),
            DYN_C,
            DYN_D,
            DYN_E as *const u8,
            Pair {
                a: DYN_G_A,
                b: Float4::new(DYN_G_B[0], DYN_G_B[1], DYN_G_B[2], DYN_G_B[3]),
            },
            Float2::new(DYN_F[0], DYN_F[1]),
        );
        if have_param_info {
            // The host argument tuple's device layout equals the kernel's.
            echo.verify_args::<EchoArgs>()?;
        }
        let stream = Stream::legacy(&ctx);
        let cfg = LaunchConfig::new(1, 1).stream(&stream);
        // SAFETY: dyn_echo(out: *mut u8, a: i32, b: float4, c: u8, d: f32, e: *const u8,
        // g: Pair, f: float2): the tuple has those types in that order; `out` is 128
        // writable 16-byte aligned bytes; `e` is never dereferenced.
        unsafe { launch(&echo, &cfg, &args)? };
        ctx.synchronize()?;
        let got = read_back(&out)?;
        check(got == expected, || {
            format!(
                "dyn_echo launched from the host: echo differs: {}",
                hex_diff(&got, &expected)
            )
        })?;
    }

    // Device-side launch with the host packer's (alignment) rule.
    let (status, got) = run_parent(&ctx, &module.function("dyn_parent")?)?;
    check_eq(
        status,
        0,
        "dyn_parent status (cudaError_t of the device-side launch)",
    )?;
    check(got == expected, || {
        format!(
            "dyn_parent: child echo differs from the values passed: {}",
            hex_diff(&got, &expected)
        )
    })?;
    println!("    dyn_parent: device-side launch echoed all 8 parameters (alignment layout)");

    // The size-multiple wording: which layout does the device runtime read?
    let (status, got) = run_parent(&ctx, &module.function("dyn_parent_size_multiple")?)?;
    check_eq(status, 0, "dyn_parent_size_multiple status")?;
    // Read at the kernel's real offsets: g at 48 (zeros, then 9.75 + zero padding at 64),
    // f at 80 (the writer's g.b.x, g.b.y).
    let alignment_read = echo_bytes([10.0, 11.0], 0.0, [DYN_G_A, 0.0, 0.0, 0.0]);
    if got == alignment_read {
        println!(
            "    device runtime parameter layout: alignment rule confirmed (a buffer written \
             by the size-multiple rule is read at the kernel's alignment offsets)"
        );
    } else if got == expected {
        println!(
            "    device runtime parameter layout: SIZE-MULTIPLE rule (the device runtime \
             honoured the size-multiple offsets)"
        );
    } else {
        return Err(Outcome::Fail(format!(
            "dyn_parent_size_multiple: echo matches neither prediction; vs alignment read: {}; \
             vs size-multiple read: {}",
            hex_diff(&got, &alignment_read),
            hex_diff(&got, &expected)
        )));
    }
    Ok(())
}

/// dyn_echo's argument tuple type.
type EchoArgs = (DevicePtr<u8>, i32, Float4, u8, f32, *const u8, Pair, Float2);

/// The helpers' kernels (ptx/src/helpers.rs), from the trusted module.
fn helpers() -> Result<(Context, cudadrv::kernel::KernelModule), Outcome> {
    require_sm(9, 0)?;
    let ctx = ctx()?;
    let module = cudadrv::kernel::KernelModule::load(&ctx, &ptx::TRUSTED)?;
    Ok((ctx, module))
}

/// 1 Mi `f32` values (random bits, plus ties, infinities, NaNs, subnormals) converted to
/// bfloat16 on the device give the host's `Bf16::from_f32` bits, and back the exact `f32`;
/// so do the one-instruction `to_bf16` and `pack_bf16x2` (a pair per word, the first value
/// in the lower half), NaN giving NaN.
fn bf16_conversions_match_the_host() -> TestResult {
    use cuda_workspace::helpers::bf16_round_trip;
    use cudadrv::args::Bf16;
    let (ctx, module) = helpers()?;
    let k = module.kernel::<bf16_round_trip>()?;
    let mut state = 0x1234_5678_9abc_def0u64;
    let mut x: Vec<f32> = (0..1 << 20)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            f32::from_bits((state >> 32) as u32)
        })
        .collect();
    let specials = [
        f32::from_bits(0x3f80_8000),
        f32::from_bits(0x3f81_8000),
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        f32::MAX,
        f32::from_bits(1),
        -0.0,
    ];
    x[..specials.len()].copy_from_slice(&specials);
    let xd = DeviceBuffer::from_slice(&ctx, &x)?;
    let mut out = DeviceBuffer::<Bf16>::zeroed(&ctx, x.len())?;
    let mut back = DeviceBuffer::<f32>::zeroed(&ctx, x.len())?;
    let mut fast = DeviceBuffer::<Bf16>::zeroed(&ctx, x.len())?;
    let mut pairs = DeviceBuffer::<u32>::zeroed(&ctx, x.len() / 2)?;
    let stream = Stream::new(&ctx, StreamFlags::NON_BLOCKING)?;
    cudadrv::kernel::scope(&ctx, |s| {
        s.lane(&stream)?.launch(
            &k,
            &LaunchConfig::new(264, 256),
            (&xd, &mut out, &mut back, &mut fast, &mut pairs),
        )
    })?;
    let mut got = vec![Bf16::ZERO; x.len()];
    out.copy_to_host(&mut got)?;
    let mut got_back = vec![0f32; x.len()];
    back.copy_to_host(&mut got_back)?;
    let mut got_fast = vec![Bf16::ZERO; x.len()];
    fast.copy_to_host(&mut got_fast)?;
    let got_pairs = read_back(&pairs)?;
    let mut nans = 0;
    for (i, &v) in x.iter().enumerate() {
        let want = Bf16::from_f32(v);
        let same_nan = v.is_nan() && got[i].to_f32().is_nan();
        nans += usize::from(v.is_nan());
        let pair = (got_pairs[i / 2] >> (16 * (i % 2))) as u16;
        for (what, bits) in [("to_bf16", got_fast[i].to_bits()), ("pack_bf16x2", pair)] {
            let nan = v.is_nan() && Bf16::from_bits(bits).to_f32().is_nan();
            check(bits == want.to_bits() || nan, || {
                format!(
                    "{what}(x[{i}] = {v:e}): device {bits:#06x}, host {:#06x}",
                    want.to_bits()
                )
            })?;
        }
        check(got[i] == want || same_nan, || {
            format!(
                "x[{i}] = {v:e}: device {:#06x}, host {:#06x}",
                got[i].to_bits(),
                want.to_bits()
            )
        })?;
        check(
            got_back[i].to_bits() == want.to_f32().to_bits() || same_nan,
            || format!("back[{i}]"),
        )?;
    }
    // The random bits hold NaNs too (about 1 in 256), so both NaN paths ran.
    check(nans > 1000, || format!("only {nans} NaN inputs"))
}

/// `get8_f32` over a 16-byte aligned bfloat16 buffer and over a view starting one value
/// in (2-byte aligned: the element-wise path): every value, and nothing past the last
/// whole chunk; `chunks16` gives the same values over the aligned buffer and `None` for
/// the view one value in.
fn bf16_sixteen_byte_loads() -> TestResult {
    use cuda_workspace::helpers::bf16_load8;
    use cudadrv::args::Bf16;
    let (ctx, module) = helpers()?;
    let k = module.kernel::<bf16_load8>()?;
    const N: usize = (1 << 16) + 8;
    let w: Vec<Bf16> = (0..N)
        .map(|i| Bf16::from_f32(i as f32 * 0.5 - 7.0))
        .collect();
    let wd = DeviceBuffer::from_slice(&ctx, &w)?;
    let stream = Stream::new(&ctx, StreamFlags::NON_BLOCKING)?;
    for offset in [0usize, 1] {
        let mut out = DeviceBuffer::<f32>::zeroed(&ctx, N)?;
        let mut out16 = DeviceBuffer::<f32>::zeroed(&ctx, N)?;
        let mut aligned = DeviceBuffer::from_slice(&ctx, &[7u32])?;
        cudadrv::kernel::scope(&ctx, |s| {
            s.lane(&stream)?.launch(
                &k,
                &LaunchConfig::new(64, 128),
                (wd.slice(offset..)?, &mut out, &mut out16, &mut aligned),
            )
        })?;
        let got = read_back(&out)?;
        let got16 = read_back(&out16)?;
        // The buffer is 16-byte aligned; one value in, it is not.
        check_eq(
            read_back(&aligned)?[0],
            u32::from(offset == 0),
            "chunks16().is_some()",
        )?;
        let whole = (N - offset) / 8 * 8;
        for (i, (&g, &g16)) in got.iter().zip(&got16).enumerate() {
            let want = if i < whole {
                w[offset + i].to_f32()
            } else {
                0.0
            };
            check(g == want, || {
                format!("offset {offset}, value {i}: {g} != {want}")
            })?;
            let want16 = if offset == 0 { want } else { 0.0 };
            check(g16 == want16, || {
                format!("chunks16, offset {offset}, value {i}: {g16} != {want16}")
            })?;
        }
    }
    Ok(())
}

/// Warp sums, maxima, arg-maxima (first of equal values) and integer sums over 4096
/// warps of random values with planted duplicates, against the host.
fn warp_reductions() -> TestResult {
    use cuda_workspace::helpers::warp_reduce;
    let (ctx, module) = helpers()?;
    let k = module.kernel::<warp_reduce>()?;
    const WARPS: usize = 4096;
    const N: usize = WARPS * 32 - 5; // the last warp has 5 lanes past the end
    let mut state = 42u32;
    let mut x: Vec<f32> = (0..N)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            (state % 2001) as f32 - 1000.0
        })
        .collect();
    // Equal maxima in warp 7 at lanes 3 and 20: the smaller index wins.
    x[7 * 32 + 3] = 5000.0;
    x[7 * 32 + 20] = 5000.0;
    let xd = DeviceBuffer::from_slice(&ctx, &x)?;
    let sums = DeviceBuffer::<f32>::zeroed(&ctx, WARPS)?;
    let maxes = DeviceBuffer::<f32>::zeroed(&ctx, WARPS)?;
    let arg = DeviceBuffer::<u32>::zeroed(&ctx, WARPS)?;
    let idx = DeviceBuffer::<u32>::zeroed(&ctx, WARPS)?;
    let stream = Stream::new(&ctx, StreamFlags::NON_BLOCKING)?;
    let cfg = LaunchConfig::new((WARPS * 32 / 256) as u32, 256).stream(&stream);
    // SAFETY: 256-thread blocks (whole warps); one output per warp of the grid; the
    // buffers outlive the launch (synchronized below).
    unsafe {
        k.launch(
            &cfg,
            &(
                cudadrv::kernel::DeviceSlice::from_raw_parts(xd.as_raw() as *const f32, N),
                cudadrv::kernel::DeviceSliceMut::from_raw_parts(sums.as_raw() as *mut f32, WARPS),
                cudadrv::kernel::DeviceSliceMut::from_raw_parts(maxes.as_raw() as *mut f32, WARPS),
                cudadrv::kernel::DeviceSliceMut::from_raw_parts(arg.as_raw() as *mut u32, WARPS),
                cudadrv::kernel::DeviceSliceMut::from_raw_parts(idx.as_raw() as *mut u32, WARPS),
            ),
        )?;
    }
    stream.synchronize()?;
    let (mut s, mut m, mut a, mut u) = (
        vec![0f32; WARPS],
        vec![0f32; WARPS],
        vec![0u32; WARPS],
        vec![0u32; WARPS],
    );
    sums.copy_to_host(&mut s)?;
    maxes.copy_to_host(&mut m)?;
    arg.copy_to_host(&mut a)?;
    idx.copy_to_host(&mut u)?;
    for w in 0..WARPS {
        let lanes: Vec<f32> = (0..32)
            .map(|l| x.get(w * 32 + l).copied().unwrap_or(0.0))
            .collect();
        // Integer-valued inputs: every order of additions gives the exact sum.
        let want_sum: f32 = lanes.iter().sum();
        let want_max = lanes.iter().copied().fold(f32::MIN, f32::max);
        let want_arg = (w * 32 + lanes.iter().position(|&v| v == want_max).unwrap_or(0)) as u32;
        let want_idx: u32 = (0..32).map(|l| (w * 32 + l) as u32).sum();
        check_eq(
            (s[w], m[w], a[w], u[w]),
            (want_sum, want_max, want_arg, want_idx),
            &format!("warp {w}: sum, max, arg-max, index sum"),
        )?;
    }
    Ok(())
}

/// `exp2_approx`, `exp_approx` and `rsqrt_approx` within their documented error of the
/// host's `f64` results; `fetch_add` hands out every ticket once; `fetch_min` /
/// `fetch_max` find the extreme keys.
fn sfu_math_and_atomics() -> TestResult {
    use cuda_workspace::helpers::sfu_atomics;
    let (ctx, module) = helpers()?;
    let k = module.kernel::<sfu_atomics>()?;
    const N: usize = 1 << 16;
    // -30 .. 30 in steps that hit integers, halves and irrational-looking values.
    let x: Vec<f32> = (0..N)
        .map(|i| (i as f32 - (N / 2) as f32) * (60.0 / N as f32))
        .collect();
    let xd = DeviceBuffer::from_slice(&ctx, &x)?;
    let mut e2 = DeviceBuffer::<f32>::zeroed(&ctx, N)?;
    let mut ex = DeviceBuffer::<f32>::zeroed(&ctx, N)?;
    let mut rs = DeviceBuffer::<f32>::zeroed(&ctx, N)?;
    let mut counter = DeviceBuffer::<u32>::zeroed(&ctx, 1)?;
    let mut tickets = DeviceBuffer::<u32>::zeroed(&ctx, N)?;
    let mut minmax = DeviceBuffer::from_slice(&ctx, &[u64::MAX, 0u64])?;
    let stream = Stream::new(&ctx, StreamFlags::NON_BLOCKING)?;
    cudadrv::kernel::scope(&ctx, |s| {
        s.lane(&stream)?.launch(
            &k,
            &LaunchConfig::new(64, 256),
            (
                &xd,
                &mut e2,
                &mut ex,
                &mut rs,
                &mut counter,
                &mut tickets,
                &mut minmax,
            ),
        )
    })?;
    let (e2, ex, rs) = (read_back(&e2)?, read_back(&ex)?, read_back(&rs)?);
    for i in 0..N {
        let v = f64::from(x[i]);
        let rel = |got: f32, want: f64| ((f64::from(got) - want) / want).abs();
        check(rel(e2[i], v.exp2()) < 2e-6, || {
            format!("exp2_approx({}) = {}, want {}", x[i], e2[i], v.exp2())
        })?;
        // The product x log2(e) is rounded to f32 first: up to |x| 2^-24 more.
        check(rel(ex[i], v.exp()) < 2e-6 + v.abs() * 1.2e-7, || {
            format!("exp_approx({}) = {}, want {}", x[i], ex[i], v.exp())
        })?;
        if x[i] != 0.0 {
            let want = 1.0 / v.abs().sqrt();
            check(rel(rs[i], want) < 2e-6, || {
                format!("rsqrt_approx({}) = {}, want {want}", x[i].abs(), rs[i])
            })?;
        } else {
            check_eq(rs[i], f32::INFINITY, "rsqrt_approx(0)")?;
        }
    }
    let mut t = read_back(&tickets)?;
    t.sort_unstable();
    check(t.iter().enumerate().all(|(i, &v)| v as usize == i), || {
        "fetch_add: the tickets are not 0..N, each once".into()
    })?;
    check_eq(
        read_back(&counter)?,
        vec![N as u32],
        "fetch_add: the final count",
    )?;
    let keys = (0..N as u32).map(|i| u64::from(i.wrapping_mul(2_654_435_761)) + (1 << 32));
    let want = [keys.clone().min().unwrap_or(0), keys.max().unwrap_or(0)];
    check_eq(read_back(&minmax)?, want.to_vec(), "fetch_min / fetch_max")
}

/// `warp_group_sum_f32::<16>` / `::<4>` and `block_sum_f32` over integer-valued inputs
/// (exact in any order of additions) match the host's sums, with a partial last block.
fn group_and_block_sums() -> TestResult {
    use cuda_workspace::helpers::group_reduce;
    let (ctx, module) = helpers()?;
    let k = module.kernel::<group_reduce>()?;
    const BLOCK: usize = 256;
    const BLOCKS: usize = 300;
    const N: usize = BLOCK * BLOCKS - 37;
    let x: Vec<f32> = (0..N)
        .map(|i| ((i * 7919) % 2001) as f32 - 1000.0)
        .collect();
    let xd = DeviceBuffer::from_slice(&ctx, &x)?;
    let mut g16 = DeviceBuffer::<f32>::zeroed(&ctx, N)?;
    let mut g4 = DeviceBuffer::<f32>::zeroed(&ctx, N)?;
    let mut blocks = DeviceBuffer::<f32>::zeroed(&ctx, BLOCKS)?;
    let stream = Stream::new(&ctx, StreamFlags::NON_BLOCKING)?;
    let cfg = LaunchConfig::new(BLOCKS as u32, BLOCK as u32).stream(&stream);
    // SAFETY: 256-thread blocks (whole warps, at most 1024), one `blocks` element per
    // CTA; the buffers outlive the launch (synchronized below).
    unsafe {
        k.launch(
            &cfg,
            &(
                xd.view().kernel_slice(),
                g16.view_mut().kernel_slice_mut(),
                g4.view_mut().kernel_slice_mut(),
                blocks.view_mut().kernel_slice_mut(),
            ),
        )?;
    }
    stream.synchronize()?;
    let at = |i: usize| x.get(i).copied().unwrap_or(0.0);
    let group = |i: usize, w: usize| (i / w * w..i / w * w + w).map(at).sum::<f32>();
    let (g16, g4, b) = (read_back(&g16)?, read_back(&g4)?, read_back(&blocks)?);
    for i in 0..N {
        check_eq(
            (g16[i], g4[i]),
            (group(i, 16), group(i, 4)),
            &format!("groups of thread {i}"),
        )?;
    }
    for (j, got) in b.iter().enumerate() {
        check_eq(*got, group(j * BLOCK, BLOCK), &format!("block {j}'s sum"))?;
    }
    Ok(())
}

/// `warp_xor_u32` / `warp_xor_f32` hand each lane the value of lane `lane ^ mask` (only
/// the mask's low five bits count), with a partial last warp reading zeros, and the
/// `f32` form keeps every bit (NaN payloads and negative zero included).
fn lane_exchanges() -> TestResult {
    use cuda_workspace::helpers::lane_xor;
    let (ctx, module) = helpers()?;
    let k = module.kernel::<lane_xor>()?;
    const BLOCK: usize = 128;
    const BLOCKS: usize = 3;
    const N: usize = BLOCK * BLOCKS - 5;
    let mut x: Vec<u32> = (0..N as u32)
        .map(|i| i.wrapping_mul(2_654_435_761))
        .collect();
    x[3] = 0x7fc0_1234; // a NaN with a payload
    x[4] = 0x8000_0000; // -0.0
    let xd = DeviceBuffer::from_slice(&ctx, &x)?;
    let stream = Stream::new(&ctx, StreamFlags::NON_BLOCKING)?;
    let cfg = LaunchConfig::new(BLOCKS as u32, BLOCK as u32).stream(&stream);
    for mask in [1u32, 8, 16, 31, 32, 40] {
        let mut ints = DeviceBuffer::<u32>::zeroed(&ctx, BLOCK * BLOCKS)?;
        let mut floats = DeviceBuffer::<f32>::zeroed(&ctx, BLOCK * BLOCKS)?;
        // SAFETY: 128-thread blocks (whole warps); the buffers outlive the launch
        // (synchronized below).
        unsafe {
            k.launch(
                &cfg,
                &(
                    xd.view().kernel_slice(),
                    mask,
                    ints.view_mut().kernel_slice_mut(),
                    floats.view_mut().kernel_slice_mut(),
                ),
            )?;
        }
        stream.synchronize()?;
        let (ints, floats) = (read_back(&ints)?, read_back(&floats)?);
        for t in 0..BLOCK * BLOCKS {
            let from = t / 32 * 32 + ((t % 32) ^ (mask as usize & 31));
            let want = x.get(from).copied().unwrap_or(0);
            check_eq(
                (ints[t], floats[t].to_bits()),
                (want, want),
                &format!("mask {mask}, thread {t}"),
            )?;
        }
    }
    Ok(())
}

/// A kernel declared `unsafe dependent(manual)` (it reads its weights before its own
/// `grid_dependency_wait`) takes a PDL launch after a producer and sees the producer's
/// output, over rounds that first zero the producer's buffer: `out = weight + 3i + 1`.
fn hand_placed_pdl_wait() -> TestResult {
    use cuda_workspace::helpers::prefetch_then_wait;
    let (ctx, module) = helpers()?;
    let k = module.kernel::<prefetch_then_wait>()?;
    let fill = cuda_workspace::Kernels::load(&ctx)?.fill;
    const N: usize = 1 << 20;
    let weight: Vec<u32> = (0..N as u32).map(|i| i.wrapping_mul(31)).collect();
    let wd = DeviceBuffer::from_slice(&ctx, &weight)?;
    let mut input = DeviceBuffer::<u32>::zeroed(&ctx, N)?;
    let mut out = DeviceBuffer::<u32>::zeroed(&ctx, N)?;
    let stream = Stream::new(&ctx, StreamFlags::NON_BLOCKING)?;
    let producer = LaunchConfig::new((N / 256) as u32, 256).stream(&stream);
    let dependent = LaunchConfig::new(264, 256)
        .stream(&stream)
        .programmatic_stream_serialization()?;
    for round in 1..=8u32 {
        input.memset_d32_async(0, &stream)?;
        // SAFETY: `fill(ptr, n)` writes `n` words of `input`; the dependent
        // reads `weight` and `input` and writes `out` (all `N` long), every CTA waiting
        // before it reads `input`; the buffers outlive the work (synchronized below).
        unsafe {
            launch(&fill, &producer, &(input.as_arg(), N as u32))?;
            k.launch(
                &dependent,
                &(
                    wd.view().kernel_slice(),
                    input.view().kernel_slice(),
                    out.view_mut().kernel_slice_mut(),
                ),
            )?;
        }
        stream.synchronize()?;
        let got = read_back(&out)?;
        let want = |i: usize| weight[i].wrapping_add((i as u32).wrapping_mul(3) + 1);
        if let Some(i) = (0..N).find(|&i| got[i] != want(i)) {
            return Err(Outcome::Fail(format!(
                "round {round}: out[{i}] = {}, want {}",
                got[i],
                want(i)
            )));
        }
    }
    Ok(())
}

/// `device::fma` gives the host's `f32::mul_add` bits (one rounding), where a separate
/// multiply and add would round twice.
fn fused_multiply_add_rounds_once() -> TestResult {
    use cuda_workspace::helpers::fused_multiply_add;
    let (ctx, module) = helpers()?;
    let k = module.kernel::<fused_multiply_add>()?;
    const N: usize = 1 << 16;
    let mut state = 0x1234_5678u32;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        f32::from_bits((state & 0x807f_ffff) | 0x3f00_0000) // +-[0.5, 1)
    };
    let a: Vec<f32> = (0..N).map(|_| next()).collect();
    let b: Vec<f32> = (0..N).map(|_| next()).collect();
    let c: Vec<f32> = (0..N).map(|_| next()).collect();
    let (ad, bd, cd) = (
        DeviceBuffer::from_slice(&ctx, &a)?,
        DeviceBuffer::from_slice(&ctx, &b)?,
        DeviceBuffer::from_slice(&ctx, &c)?,
    );
    let mut out = DeviceBuffer::<f32>::zeroed(&ctx, N)?;
    let stream = Stream::new(&ctx, StreamFlags::NON_BLOCKING)?;
    cudadrv::kernel::scope(&ctx, |s| {
        s.lane(&stream)?
            .launch(&k, &LaunchConfig::new(64, 256), (&ad, &bd, &cd, &mut out))
    })?;
    let got = read_back(&out)?;
    let mut fused_differs = 0;
    for i in 0..N {
        let want = a[i].mul_add(b[i], c[i]);
        check_eq(
            got[i].to_bits(),
            want.to_bits(),
            &format!("fma({}, {}, {})", a[i], b[i], c[i]),
        )?;
        fused_differs += usize::from(want != a[i] * b[i] + c[i]);
    }
    // The inputs are such that one rounding and two differ often: the test tells them
    // apart.
    check(fused_differs > N / 100, || {
        format!("only {fused_differs} of {N} inputs tell one rounding from two")
    })
}
