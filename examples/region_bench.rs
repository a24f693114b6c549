//! Replay regions against hand-captured graphs, and automatic PDL against the fixed
//! choices, on one GPU in one process.
//!
//! ```sh
//! cargo run --release --example region_bench -- [--cpp region_ref.so] [--rounds N]
//!     [--csv PATH] [--sweep-csv PATH] [--samples-csv PATH] [--svg PATH] [--quick]
//!     [--no-sweep] [--sweep-rounds N] [--no-tune]
//! ```
//!
//! - `chain`: 256 dependent `chain_step` kernels (132 x 256 threads), us per kernel,
//!   GPU time between events around one execution: the chain written as plain launches
//!   in a [`Region`] (replayed, with and without PDL; replayed with every node's
//!   buffers swapped, 256 parameter updates) against the same chain captured by hand in
//!   cuda-core and in CUDA C++ (`xtask/cpp/region_ref.cu`, nvcc, with `--cpp`), rounds
//!   alternating, starting side rotating. Host time per kernel of a region's first
//!   execution (capture + instantiate + launch), of a replay, of a replay with 256
//!   updates, and of the whole-graph alternative (capture again + `cuGraphExecUpdate` +
//!   launch, Rust and C++).
//! - `allocs`: heap allocations per region replay (after the first execution of the
//!   structure), per replay with updates, and per launch with automatic PDL (counting
//!   allocator).
//! - `sweep`: `auto_step_{u32,u64,v4}` (one thread per element, 4-, 8- and 16-byte
//!   elements) as graph chains of 64 links from one block to 17 waves, with no PDL, PDL
//!   early trigger, PDL wait-only and the automatic choice, each point's four variants
//!   alternating round by round (21 rounds, medians; every sample in
//!   `auto_pdl_samples.csv`); us per kernel, and the automatic choice against the best
//!   fixed one. The automatic choice is `AutoPdl::tune`'s (7 rounds per plan, measured
//!   before the sweep's own rounds; `--no-tune`: the rule alone); the rule's choice is
//!   reported too. `--svg` draws it.
//!
//! Speed is reported, not asserted; every chain's values are checked.

#[path = "common/mod.rs"]
mod common;

use std::ffi::{CString, c_void};
use std::fmt::Write as _;
use std::time::Instant;

use common::{BLOCK, ChainMode, R, arg_value, chain_bench, gpu_or_exit, stats};
use cudadrv::graph::{CaptureMode, InstantiateFlags, Region};
use cudadrv::launch::{AutoPdl, LaunchConfig, PdlPlan, launch};
use cudadrv::{Context, DeviceBuffer, DevicePtr, Event, EventFlags, Function, Module, Stream};

/// Counts heap allocations (section `allocs`).
#[global_allocator]
static GLOBAL: common::Counting = common::Counting;

const LINKS: usize = 256;
const SWEEP_LINKS: usize = 64;

/// `region_ref_graph_us(pdl, n, grid, links, reps)`.
type RefGraph = unsafe extern "C" fn(i32, u32, u32, i32, i32) -> f64;
/// `region_ref_exec_update_us(n, grid, links, reps)`.
type RefUpdate = unsafe extern "C" fn(u32, u32, i32, i32) -> f64;

/// The C++ reference library (`xtask/cpp/region_ref.cu`).
struct CppRef {
    graph: RefGraph,
    update: RefUpdate,
    _library: cudadrv_sys::Library,
}

impl CppRef {
    fn open(path: &str) -> R<Self> {
        let c_path = CString::new(path)?;
        // SAFETY: the bench's own reference library, named on the command line for this;
        // its constructors are nvcc's kernel registration and the CUDA runtime's, which
        // touch nothing of this program; it stays loaded beside the pointers read from it.
        let library = unsafe { cudadrv_sys::Library::open(&c_path) }
            .map_err(|e| format!("{path}: {}", e.0))?;
        let sym = |name: &std::ffi::CStr| {
            let p = library.symbol(name);
            if p.is_null() {
                Err(format!("{path} has no {}", name.to_string_lossy()))
            } else {
                Ok(p)
            }
        };
        // SAFETY: the `extern "C"` functions of region_ref.cu, whose signatures the type
        // aliases spell out.
        unsafe {
            Ok(Self {
                graph: core::mem::transmute::<*mut c_void, RefGraph>(sym(c"region_ref_graph_us")?),
                update: core::mem::transmute::<*mut c_void, RefUpdate>(sym(
                    c"region_ref_exec_update_us",
                )?),
                _library: library,
            })
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |f: &str| args.iter().any(|a| a == f);
    let out = std::env::var("OUT").ok().filter(|o| !o.is_empty());
    let default = |name: &str| {
        out.as_ref()
            .map_or(name.to_string(), |o| format!("{o}/{name}"))
    };
    let opts = Opts {
        rounds: arg_value(&args, "--rounds")
            .and_then(|r| r.parse().ok())
            .unwrap_or(if flag("--quick") { 3 } else { 10 }),
        csv: arg_value(&args, "--csv").unwrap_or_else(|| default("region_bench.csv")),
        sweep_csv: arg_value(&args, "--sweep-csv").unwrap_or_else(|| default("auto_pdl_sweep.csv")),
        samples_csv: arg_value(&args, "--samples-csv")
            .unwrap_or_else(|| default("auto_pdl_samples.csv")),
        sweep_rounds: arg_value(&args, "--sweep-rounds")
            .and_then(|r| r.parse().ok())
            .unwrap_or(if flag("--quick") { 3 } else { 21 }),
        svg: arg_value(&args, "--svg"),
        cpp: arg_value(&args, "--cpp"),
        quick: flag("--quick"),
        sweep: !flag("--no-sweep"),
        tune: !flag("--no-tune"),
    };
    let ctx = gpu_or_exit("region_bench");
    if let Err(e) = run(&ctx, &opts) {
        eprintln!("region_bench: error: {e}");
        std::process::exit(1);
    }
}

struct Opts {
    rounds: usize,
    csv: String,
    sweep_csv: String,
    samples_csv: String,
    sweep_rounds: usize,
    svg: Option<String>,
    cpp: Option<String>,
    quick: bool,
    sweep: bool,
    /// `AutoPdl::tune` at each sweep point (else the rule alone).
    tune: bool,
}

fn run(ctx: &Context, o: &Opts) -> R {
    let dev = ctx.device();
    let sms = dev.multiprocessor_count()?;
    println!(
        "# {} ({sms} SMs), driver {}",
        dev.name()?,
        cudadrv::driver::driver_version()?
    );
    let module = Module::from_ptx(ctx, cuda_workspace::ptx::KERNELS)?;
    let cpp = match &o.cpp {
        Some(p) => Some(CppRef::open(p)?),
        None => None,
    };
    let mut csv = String::from("section,case,unit,median,min,max,samples\n");
    chain(ctx, &module, sms, o, cpp.as_ref(), &mut csv)?;
    allocs(ctx, &module, sms, &mut csv)?;
    std::fs::write(&o.csv, &csv)?;
    println!("# wrote {}", o.csv);
    if o.sweep {
        sweep(ctx, &module, o)?;
    }
    Ok(())
}

fn row(csv: &mut String, section: &str, case: &str, unit: &str, v: &mut [f64]) -> f64 {
    let (med, min, max) = stats(v);
    let _ = writeln!(
        csv,
        "{section},{case},{unit},{med:.4},{min:.4},{max:.4},{}",
        v.len()
    );
    med
}

/// The 256-link chain on `bufs` as a region body: plain launches, PDL on every link after
/// the first when `pdl` (kernel mode 1: wait, trigger at once).
fn chain_body<'a>(
    r: &mut cudadrv::graph::Recorder<'_, 'a>,
    f: &'a Function,
    bufs: &[DeviceBuffer<u32>; 2],
    n: u32,
    grid: u32,
    pdl: bool,
) -> cudadrv::Result<()> {
    let plain = LaunchConfig::new(grid, BLOCK);
    let with_pdl = plain.clone().programmatic_stream_serialization()?;
    for k in 0..LINKS {
        let cfg = if pdl && k > 0 { &with_pdl } else { &plain };
        // SAFETY: chain_step(in, out, n, mode) between two distinct buffers of n words,
        // which outlive the region's executions (the caller synchronizes before reading).
        unsafe {
            r.launch(
                f,
                cfg,
                &(
                    bufs[k & 1].as_arg(),
                    bufs[(k + 1) & 1].as_arg(),
                    n,
                    u32::from(pdl),
                ),
            )?
        };
    }
    Ok(())
}

/// x0 for the chains.
fn x0(n: u32) -> Vec<u32> {
    (0..n)
        .map(|i| i.wrapping_mul(2_654_435_761) ^ 0x9e37_79b9)
        .collect()
}

fn check_chain(buf: &DeviceBuffer<u32>, x0: &[u32], add: u32, what: &str) -> R {
    let mut host = vec![0u32; buf.len()];
    buf.copy_to_host(&mut host)?;
    if let Some(i) = (0..host.len()).find(|&i| host[i] != x0[i].wrapping_add(add)) {
        return Err(format!(
            "{what}: element {i} is {}, expected {}",
            host[i],
            x0[i].wrapping_add(add)
        )
        .into());
    }
    Ok(())
}

/// Microseconds of GPU time per kernel of one `go()` between two events.
fn gpu_us(stream: &mut Stream, e: &[Event; 2], go: impl FnOnce(&mut Stream) -> R) -> R<f64> {
    e[0].record(stream)?;
    go(stream)?;
    e[1].record(stream)?;
    e[1].synchronize()?;
    Ok(1000.0 * f64::from(Event::elapsed_ms(&e[0], &e[1])?) / LINKS as f64)
}

#[allow(clippy::too_many_lines)]
fn chain(
    ctx: &Context,
    module: &Module,
    sms: u32,
    o: &Opts,
    cpp: Option<&CppRef>,
    csv: &mut String,
) -> R {
    let f = module.function("chain_step")?;
    let n = sms * BLOCK;
    let x = x0(n);
    let mut stream = Stream::non_blocking(ctx)?;
    let e = [
        Event::new(ctx, EventFlags::empty())?,
        Event::new(ctx, EventFlags::empty())?,
    ];
    // Region buffers: `a` for the replays, `b` the swapped pair of the updated replays.
    let a = [
        DeviceBuffer::from_slice(ctx, &x)?,
        DeviceBuffer::from_slice(ctx, &x)?,
    ];
    let b = [
        DeviceBuffer::from_slice(ctx, &x)?,
        DeviceBuffer::from_slice(ctx, &x)?,
    ];
    let mut adds = [0u32; 2]; // chains run on a[0] / b[0] (even links: back in [0])
    let mut region = Region::new(ctx);
    let mut region_pdl = Region::new(ctx);
    let mut region_swap = Region::new(ctx);
    // First executions (not timed here: see "first" below), then warm-up.
    for _ in 0..2 {
        region.run(&mut stream, |r| chain_body(r, &f, &a, n, sms, false))?;
        region_pdl.run(&mut stream, |r| chain_body(r, &f, &a, n, sms, true))?;
        adds[0] += 2 * LINKS as u32;
    }
    let mut swap = false;
    for _ in 0..2 {
        let bufs = if swap { &b } else { &a };
        region_swap.run(&mut stream, |r| chain_body(r, &f, bufs, n, sms, false))?;
        adds[usize::from(swap)] += LINKS as u32;
        swap = !swap;
    }
    stream.synchronize()?;

    // Back-to-back sides: hand-captured graphs on their own buffers `c`, launched
    // BATCH times between the events, against BATCH region executions.
    let c = [
        DeviceBuffer::from_slice(ctx, &x)?,
        DeviceBuffer::from_slice(ctx, &x)?,
    ];
    let mut add_c = 0u32;
    let mut hand = Vec::new();
    for pdl in [None, Some(1)] {
        let cap = stream.begin_capture(CaptureMode::Global)?;
        common::enqueue_chain(&f, cap.stream(), &c, n, sms, LINKS, pdl)?;
        let graph = cap.end()?;
        let exec = graph.instantiate(InstantiateFlags::empty())?;
        exec.upload(&stream)?;
        hand.push(exec);
    }
    const BATCH: usize = 10;
    const SIDES: usize = 13;
    let names: [&str; SIDES] = [
        "rust_graph",
        "rust_graph_pdl",
        "cpp_graph",
        "cpp_graph_pdl",
        "region",
        "region_pdl",
        "region_updated",
        "rust_graph_retimed",
        "cpp_graph_retimed",
        "rust_graph_x10",
        "rust_graph_pdl_x10",
        "region_x10",
        "region_pdl_x10",
    ];
    let mut gpu: Vec<Vec<f64>> = vec![Vec::new(); SIDES];
    let mut host_replay = Vec::new();
    let mut host_updated = Vec::new();
    let reps = if o.quick { 3 } else { 5 };
    for round in 0..o.rounds {
        for s in 0..SIDES {
            let side = (s + round) % SIDES;
            let v: Option<f64> = match side {
                0 | 7 => Some(
                    stats(&mut chain_bench(
                        ctx,
                        &mut stream,
                        &f,
                        ChainMode::Graph,
                        n,
                        sms,
                        LINKS,
                        reps,
                    )?)
                    .0,
                ),
                1 => Some(
                    stats(&mut chain_bench(
                        ctx,
                        &mut stream,
                        &f,
                        ChainMode::GraphPdl,
                        n,
                        sms,
                        LINKS,
                        reps,
                    )?)
                    .0,
                ),
                // SAFETY (both): plain values; the library checks its own calls.
                2 | 8 => cpp.map(|c| unsafe { (c.graph)(0, n, sms, LINKS as i32, reps as i32) }),
                3 => cpp.map(|c| unsafe { (c.graph)(1, n, sms, LINKS as i32, reps as i32) }),
                4 | 5 => {
                    let pdl = side == 5;
                    let reg = if pdl { &mut region_pdl } else { &mut region };
                    let mut v = Vec::new();
                    for _ in 0..reps {
                        let mut host = 0.0;
                        v.push(gpu_us(&mut stream, &e, |s| {
                            let t = Instant::now();
                            reg.run(s, |r| chain_body(r, &f, &a, n, sms, pdl))?;
                            host = t.elapsed().as_secs_f64() * 1e6 / LINKS as f64;
                            Ok(())
                        })?);
                        if !pdl {
                            host_replay.push(host);
                        }
                        adds[0] += LINKS as u32;
                    }
                    Some(stats(&mut v).0)
                }
                6 => {
                    let mut v = Vec::new();
                    for _ in 0..reps {
                        let bufs = if swap { &b } else { &a };
                        let mut host = 0.0;
                        v.push(gpu_us(&mut stream, &e, |s| {
                            let t = Instant::now();
                            region_swap.run(s, |r| chain_body(r, &f, bufs, n, sms, false))?;
                            host = t.elapsed().as_secs_f64() * 1e6 / LINKS as f64;
                            Ok(())
                        })?);
                        host_updated.push(host);
                        adds[usize::from(swap)] += LINKS as u32;
                        swap = !swap;
                    }
                    Some(stats(&mut v).0)
                }
                9 | 10 => {
                    let exec = &hand[side - 9];
                    let mut v = Vec::new();
                    for _ in 0..reps {
                        v.push(
                            gpu_us(&mut stream, &e, |s| {
                                for _ in 0..BATCH {
                                    exec.launch(s)?;
                                }
                                Ok(())
                            })? / BATCH as f64,
                        );
                        add_c += (BATCH * LINKS) as u32;
                    }
                    Some(stats(&mut v).0)
                }
                11 | 12 => {
                    let pdl = side == 12;
                    let reg = if pdl { &mut region_pdl } else { &mut region };
                    let mut v = Vec::new();
                    for _ in 0..reps {
                        v.push(
                            gpu_us(&mut stream, &e, |s| {
                                for _ in 0..BATCH {
                                    reg.run(s, |r| chain_body(r, &f, &a, n, sms, pdl))?;
                                }
                                Ok(())
                            })? / BATCH as f64,
                        );
                        adds[0] += (BATCH * LINKS) as u32;
                    }
                    Some(stats(&mut v).0)
                }
                _ => None,
            };
            if let Some(v) = v {
                gpu[side].push(v);
            }
        }
    }
    check_chain(&a[0], &x, adds[0], "region chains on a")?;
    check_chain(
        &c[0],
        &x,
        add_c,
        "hand-captured graphs launched back to back",
    )?;
    check_chain(&b[0], &x, adds[1], "region chains on b")?;
    let stats_swap = region_swap.stats();
    if stats_swap.captures != 1 || stats_swap.updated_nodes < LINKS as u64 {
        return Err(format!("swapped replays were not updates: {stats_swap:?}").into());
    }

    // The host time of cuGraphLaunch alone (the hand-captured graph), which a replay's
    // host time includes.
    let mut graph_launch = Vec::new();
    for _ in 0..reps {
        let t = Instant::now();
        hand[0].launch(&stream)?;
        graph_launch.push(t.elapsed().as_secs_f64() * 1e6 / LINKS as f64);
        stream.synchronize()?;
        add_c += LINKS as u32;
    }
    check_chain(&c[0], &x, add_c, "hand-captured graph, host-timed launches")?;
    // First executions: a new region each time (capture, instantiate, upload, launch).
    let mut first = Vec::new();
    for _ in 0..reps {
        let mut fresh = Region::new(ctx);
        let t = Instant::now();
        fresh.run(&mut stream, |r| chain_body(r, &f, &a, n, sms, false))?;
        first.push(t.elapsed().as_secs_f64() * 1e6 / LINKS as f64);
        stream.synchronize()?;
        adds[0] += LINKS as u32;
    }
    // The whole-graph alternative: capture again with swapped buffers, cuGraphExecUpdate,
    // launch; host time.
    let mut exec_update = Vec::new();
    {
        let cap = stream.begin_capture(CaptureMode::Global)?;
        common::enqueue_chain(&f, cap.stream(), &a, n, sms, LINKS, None)?;
        let graph = cap.end()?;
        let exec = graph.instantiate(InstantiateFlags::empty())?;
        for r in 0..reps + 1 {
            let bufs = if r % 2 == 0 { &b } else { &a };
            let t = Instant::now();
            let cap = stream.begin_capture(CaptureMode::Global)?;
            common::enqueue_chain(&f, cap.stream(), bufs, n, sms, LINKS, None)?;
            let g = cap.end()?;
            exec.update(&g)?;
            exec.launch(&stream)?;
            let dt = t.elapsed().as_secs_f64() * 1e6 / LINKS as f64;
            stream.synchronize()?;
            adds[r % 2] += LINKS as u32;
            if r > 0 {
                exec_update.push(dt);
            }
        }
    }
    stream.synchronize()?;
    check_chain(&a[0], &x, adds[0], "after first executions and updates (a)")?;
    check_chain(&b[0], &x, adds[1], "after updates (b)")?;
    // SAFETY: plain values; the library checks its own calls.
    let cpp_update = cpp.map(|c| unsafe { (c.update)(n, sms, LINKS as i32, reps as i32 + 1) });

    println!(
        "\nchain: {LINKS} dependent chain_step kernels, {sms} x {BLOCK} threads, {} rounds (sides alternating)",
        o.rounds
    );
    println!("{:<22} {:>10}", "GPU time", "us/kernel");
    let mut med = [f64::NAN; SIDES];
    for (i, name) in names.iter().enumerate() {
        if gpu[i].is_empty() {
            continue;
        }
        med[i] = row(csv, "chain", name, "us/kernel", &mut gpu[i].clone());
        println!("{name:<22} {:>10.4}", med[i]);
    }
    let graph = 0.5 * (med[0] + med[7]);
    let cpp_graph = 0.5 * (med[2] + med[8]);
    println!("ratios (region / hand-captured graph):");
    println!("  region / rust graph            {:.3}", med[4] / graph);
    println!("  region_pdl / rust graph_pdl    {:.3}", med[5] / med[1]);
    println!("  region_updated / rust graph    {:.3}", med[6] / graph);
    println!(
        "  back to back ({BATCH} executions): region / graph {:.3}, region_pdl / graph_pdl {:.3}",
        med[11] / med[9],
        med[12] / med[10]
    );
    if cpp.is_some() {
        println!("  region / C++ graph             {:.3}", med[4] / cpp_graph);
        println!("  region_pdl / C++ graph_pdl     {:.3}", med[5] / med[3]);
        println!("  region_updated / C++ graph     {:.3}", med[6] / cpp_graph);
        println!("  rust graph / C++ graph         {:.3}", graph / cpp_graph);
    }
    println!("{:<40} {:>10}", "host time", "us/kernel");
    let host_rows: [(&str, &mut Vec<f64>); 5] = [
        (
            "cuGraphLaunch of the hand-captured graph",
            &mut graph_launch,
        ),
        ("first execution (capture+instantiate+launch)", &mut first),
        ("replay unchanged", &mut host_replay),
        ("replay with 256 nodes updated", &mut host_updated),
        (
            "capture + cuGraphExecUpdate + launch (Rust)",
            &mut exec_update,
        ),
    ];
    for (name, v) in host_rows {
        let m = row(csv, "chain_host", name, "us/kernel", v);
        println!("{name:<46} {m:>10.4}");
    }
    if let Some(u) = cpp_update {
        let _ = writeln!(
            csv,
            "chain_host,capture + cudaGraphExecUpdate + launch (C++),us/kernel,{u:.4},{u:.4},{u:.4},1"
        );
        println!(
            "{:<46} {u:>10.4}",
            "capture + cudaGraphExecUpdate + launch (C++)"
        );
    }
    Ok(())
}

/// Heap allocations per region replay and per launch with automatic PDL.
fn allocs(ctx: &Context, module: &Module, sms: u32, csv: &mut String) -> R {
    let f = module.function("chain_step")?;
    let step = module.function("auto_step_u32")?;
    let n = sms * BLOCK;
    let x = x0(n);
    let a = [
        DeviceBuffer::from_slice(ctx, &x)?,
        DeviceBuffer::from_slice(ctx, &x)?,
    ];
    let b = [
        DeviceBuffer::from_slice(ctx, &x)?,
        DeviceBuffer::from_slice(ctx, &x)?,
    ];
    let mut stream = Stream::non_blocking(ctx)?;
    let mut region = Region::new(ctx);
    const RUNS: usize = 100;
    // First executions of the structure: allocations expected here, not counted.
    region.run(&mut stream, |r| chain_body(r, &f, &a, n, sms, true))?;
    region.run(&mut stream, |r| chain_body(r, &f, &b, n, sms, true))?;
    let before = common::allocations();
    for _ in 0..RUNS {
        region.run(&mut stream, |r| chain_body(r, &f, &a, n, sms, true))?;
    }
    let replay = common::allocations() - before;
    let before = common::allocations();
    for i in 0..RUNS {
        let bufs = if i % 2 == 0 { &b } else { &a };
        region.run(&mut stream, |r| chain_body(r, &f, bufs, n, sms, true))?;
    }
    let updated = common::allocations() - before;
    stream.synchronize()?;
    let auto = AutoPdl::new(&step)?;
    let cfg0 = LaunchConfig::new(sms, BLOCK).stream(&stream);
    // First launch of the shape fills the occupancy cache.
    let _ = cfg0.clone().auto_pdl(&auto)?;
    let before = common::allocations();
    const LAUNCHES: usize = 1000;
    for k in 0..LAUNCHES {
        let (cfg, plan) = cfg0.clone().auto_pdl(&auto)?;
        // SAFETY: auto_step_u32(in, out, n, plan) between two buffers of n words, alive
        // until the synchronization below.
        unsafe {
            launch(
                &step,
                &cfg,
                &(a[k & 1].as_arg(), a[(k + 1) & 1].as_arg(), n, plan),
            )?
        };
    }
    let auto_allocs = common::allocations() - before;
    stream.synchronize()?;
    println!("\nallocs: heap allocations");
    for (case, count, per) in [
        ("per region replay (256 kernels, PDL)", replay, RUNS),
        ("per region replay with 256 updates", updated, RUNS),
        (
            "per launch with LaunchConfig::auto_pdl",
            auto_allocs,
            LAUNCHES,
        ),
    ] {
        let v = count as f64 / per as f64;
        let _ = writeln!(csv, "allocs,{case},allocs,{v},{v},{v},{per}");
        println!("  {case:<42} {v}");
    }
    Ok(())
}

/// The sweep's kernel for an element size, and the element size in u32 words.
const SWEEP_KERNELS: [(&str, u32, usize); 3] = [
    ("auto_step_u32", 4, 1),
    ("auto_step_u64", 8, 2),
    ("auto_step_v4", 16, 4),
];

/// Variants of a sweep point, in CSV order.
const VARIANTS: [&str; 4] = ["none", "wait_only", "early", "auto"];

/// One sweep point's medians (us/kernel) per variant, and the plan `auto` chose.
struct Point {
    bytes: u32,
    blocks: u32,
    waves: f64,
    us: [f64; 4],
    plan: PdlPlan,
    /// What the rule alone picks (`AutoPdl::rule_plan`).
    rule: PdlPlan,
}

/// The fixed variants' plans, in `VARIANTS` order.
const VARIANT_PLANS: [PdlPlan; 3] = [PdlPlan::NONE, PdlPlan::WAIT_ONLY, PdlPlan::EARLY_TRIGGER];

/// Rounds per plan of `AutoPdl::tune` at each sweep point.
const TUNE_ROUNDS: usize = 7;

fn sweep(ctx: &Context, module: &Module, o: &Opts) -> R {
    let mut stream = Stream::non_blocking(ctx)?;
    let e = [
        Event::new(ctx, EventFlags::empty())?,
        Event::new(ctx, EventFlags::empty())?,
    ];
    let mut points = Vec::new();
    let mut samples = String::from("elem_bytes,blocks,variant,round,us\n");
    for (name, bytes, words) in SWEEP_KERNELS {
        let f = module.function(name)?;
        let auto = AutoPdl::new(&f)?;
        let wave = auto.capacity(BLOCK, 0)? as u32;
        println!(
            "# {name}: {} registers per thread, {wave} resident blocks of {BLOCK} threads",
            f.num_regs()?
        );
        let mut grids: Vec<u32> = vec![1, 2, 4, 8, 16, 32, 66, 132, 264, 528];
        for w in [
            0.375f64, 0.625, 0.75, 0.875, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 17.0,
        ] {
            grids.push((f64::from(wave) * w).round() as u32);
        }
        grids.push(wave + 1);
        grids.sort_unstable();
        grids.dedup();
        if o.quick {
            grids.retain(|g| {
                [1, 132].contains(g)
                    || *g == wave
                    || *g == wave + 1
                    || *g == 4 * wave
                    || *g == 16 * wave
            });
        }
        let max_n = grids.iter().max().copied().unwrap_or(1) * BLOCK;
        let mut bufs = [
            DeviceBuffer::<u32>::zeroed(ctx, max_n as usize * words)?,
            DeviceBuffer::<u32>::zeroed(ctx, max_n as usize * words)?,
        ];
        for &grid in &grids {
            let n = grid * BLOCK;
            let shape = LaunchConfig::new(grid, BLOCK);
            let rule_plan = auto.rule_plan(&shape)?;
            let ptrs = [bufs[0].as_raw(), bufs[1].as_raw()];
            let mut regions = [
                Region::new(ctx),
                Region::new(ctx),
                Region::new(ctx),
                Region::new(ctx),
            ];
            let mut runs = 0u32;
            // The fixed variants' first executions, then `AutoPdl::tune` on them (the plan
            // it keeps is what `auto_pdl` returns for this shape from then on), then the
            // automatic variant's first executions.
            for v in [0, 1, 2, 3] {
                if v == 3 && o.tune {
                    auto.tune(&mut stream, &shape, TUNE_ROUNDS, |st, plan| {
                        let v = VARIANT_PLANS.iter().position(|&p| p == plan).unwrap_or(1);
                        runs += 1;
                        regions[v].run(st, |r| sweep_body(r, &f, &auto, &shape, ptrs, n, v))
                    })?;
                }
                for _ in 0..2 {
                    regions[v].run(&mut stream, |r| {
                        sweep_body(r, &f, &auto, &shape, ptrs, n, v)
                    })?;
                    runs += 1;
                }
            }
            let (_, auto_plan) = shape.clone().auto_pdl(&auto)?;
            let mut us: [Vec<f64>; 4] = Default::default();
            let rounds = o.sweep_rounds;
            for round in 0..rounds {
                for s in 0..4 {
                    let v = (s + round) % 4;
                    let reg = &mut regions[v];
                    let t = gpu_us(&mut stream, &e, |st| {
                        reg.run(st, |r| sweep_body(r, &f, &auto, &shape, ptrs, n, v))?;
                        Ok(())
                    })? * LINKS as f64
                        / SWEEP_LINKS as f64;
                    us[v].push(t);
                    let _ = writeln!(samples, "{bytes},{grid},{},{round},{t:.4}", VARIANTS[v]);
                    runs += 1;
                }
            }
            stream.synchronize()?;
            drop(regions);
            // Every element below n went up by SWEEP_LINKS per run (even links: back in
            // bufs[0]); check the first and last element's words, then reset.
            let mut host = vec![0u32; bufs[0].len()];
            bufs[0].copy_to_host(&mut host)?;
            let want = runs * SWEEP_LINKS as u32;
            let lanes = if bytes == 8 { 1 } else { words };
            for idx in [0usize, n as usize - 1] {
                for l in 0..lanes {
                    let got = host[idx * words + l];
                    if got != want {
                        return Err(format!(
                            "{name} grid {grid}: element {idx} lane {l} is {got}, expected {want}"
                        )
                        .into());
                    }
                }
            }
            if host[n as usize * words..].iter().any(|&w| w != 0) {
                return Err(format!("{name} grid {grid}: wrote past n").into());
            }
            bufs[0].memset_d32(0)?;
            let med = [0, 1, 2, 3].map(|v| stats(&mut us[v]).0);
            points.push(Point {
                bytes,
                blocks: grid,
                waves: f64::from(grid) / f64::from(wave),
                us: med,
                plan: auto_plan,
                rule: rule_plan,
            });
        }
    }
    let mut csv = String::from(
        "elem_bytes,blocks,waves,none_us,wait_only_us,early_us,auto_us,auto_plan,best,auto_over_best,rule_plan,rule_over_best\n",
    );
    println!(
        "\nsweep: graph chains of {SWEEP_LINKS} one-thread-per-element kernels, us/kernel (medians of {} rounds)",
        o.sweep_rounds
    );
    println!(
        "{:>5} {:>7} {:>6} {:>9} {:>9} {:>9} {:>9} {:>10} {:>9} {:>10} {:>9}",
        "bytes",
        "blocks",
        "waves",
        "none",
        "wait",
        "early",
        "auto",
        "auto plan",
        "auto/best",
        "rule plan",
        "rule/best"
    );
    let (mut worst, mut worst_rule) = (0f64, 0f64);
    let (mut within, mut within_rule) = (0, 0);
    for p in &points {
        let best = p.us[..3].iter().copied().fold(f64::INFINITY, f64::min);
        let best_name = VARIANTS[p.us[..3].iter().position(|&x| x == best).unwrap_or(0)];
        let ratio = p.us[3] / best;
        // The rule's plan is one of the fixed variants: its time is that variant's.
        let rule_v = VARIANT_PLANS.iter().position(|&x| x == p.rule).unwrap_or(0);
        let rule_ratio = p.us[rule_v] / best;
        worst = worst.max(ratio);
        worst_rule = worst_rule.max(rule_ratio);
        within += usize::from(ratio <= 1.02);
        within_rule += usize::from(rule_ratio <= 1.02);
        let (plan, rule) = (plan_name(p.plan), plan_name(p.rule));
        let _ = writeln!(
            csv,
            "{},{},{:.4},{:.4},{:.4},{:.4},{:.4},{plan},{best_name},{ratio:.4},{rule},{rule_ratio:.4}",
            p.bytes, p.blocks, p.waves, p.us[0], p.us[1], p.us[2], p.us[3]
        );
        println!(
            "{:>5} {:>7} {:>6.2} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {plan:>10} {ratio:>9.3} {rule:>10} {rule_ratio:>9.3}",
            p.bytes, p.blocks, p.waves, p.us[0], p.us[1], p.us[2], p.us[3]
        );
    }
    println!(
        "auto ({}) within 2% of the best fixed choice at {within} of {} points; worst auto/best {worst:.3}",
        if o.tune { "tuned" } else { "rule" },
        points.len()
    );
    println!(
        "the rule alone (AutoPdl::rule_plan) within 2% at {within_rule} of {} points; worst {worst_rule:.3}",
        points.len()
    );
    std::fs::write(&o.sweep_csv, &csv)?;
    println!("# wrote {}", o.sweep_csv);
    std::fs::write(&o.samples_csv, &samples)?;
    println!("# wrote {}", o.samples_csv);
    if let Some(path) = &o.svg {
        std::fs::write(path, svg(&points, &ctx.device().name()?.to_string()))?;
        println!("# wrote {path}");
    }
    Ok(())
}

/// One sweep chain of `SWEEP_LINKS` kernels in variant `v` (`VARIANTS`).
fn sweep_body<'a>(
    r: &mut cudadrv::graph::Recorder<'_, 'a>,
    f: &'a Function,
    auto: &AutoPdl<'_>,
    shape: &LaunchConfig<'_>,
    bufs: [u64; 2],
    n: u32,
    v: usize,
) -> cudadrv::Result<()> {
    for k in 0..SWEEP_LINKS {
        // Every variant makes the automatic choice (the same host work in each), the
        // fixed ones then override it.
        let (auto_cfg, auto_plan) = shape.clone().auto_pdl(auto)?;
        let (mut cfg, plan) = match v {
            0 => (auto_cfg, PdlPlan::NONE),
            1 => (auto_cfg, PdlPlan::WAIT_ONLY),
            2 => (auto_cfg, PdlPlan::EARLY_TRIGGER),
            _ => (auto_cfg, auto_plan),
        };
        plan.apply(&mut cfg)?;
        let (i, out) = (
            DevicePtr::<u32>::from_raw(bufs[k & 1]),
            DevicePtr::<u32>::from_raw(bufs[(k + 1) & 1]),
        );
        // SAFETY: auto_step_*(in, out, n, plan) between two distinct buffers of at least
        // n elements of the kernel's size, alive until the caller's synchronization (the
        // regions are dropped before the buffers).
        unsafe { r.launch(f, &cfg, &(i, out, n, plan))? };
    }
    Ok(())
}

fn plan_name(p: PdlPlan) -> &'static str {
    if p == PdlPlan::EARLY_TRIGGER {
        "early"
    } else if p == PdlPlan::WAIT_ONLY {
        "wait_only"
    } else {
        "none"
    }
}

/// Three panels (4-, 8-, 16-byte elements): time per kernel relative to no PDL against
/// waves (log scale), for the early trigger, wait-only and the automatic choice.
fn svg(points: &[Point], device: &str) -> String {
    let (pw, ph, ml, mt, mb, gap) = (300.0, 300.0, 60.0, 50.0, 60.0, 30.0);
    let w = ml + 3.0 * pw + 2.0 * gap + 20.0;
    let h = mt + ph + mb + 30.0;
    let (ymin, ymax) = (0.5f64, 2.0f64);
    let (lx0, lx1) = ((1.0f64 / 1100.0).log10(), 20.0f64.log10());
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" \
         font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" \
         fill=\"white\"/>\n<text x=\"{ml}\" y=\"22\" font-size=\"14\">Graph chains of \
         one-thread-per-element kernels: time per kernel / time without PDL, by grid size \
         in waves ({device})</text>\n"
    );
    let series = [
        ("early trigger", 2usize, "#d62728"),
        ("wait only", 1, "#1f77b4"),
        ("automatic", 3, "#000000"),
    ];
    for (panel, bytes) in [4u32, 8, 16].into_iter().enumerate() {
        let x0 = ml + panel as f64 * (pw + gap);
        let x = |waves: f64| x0 + (waves.log10() - lx0) / (lx1 - lx0) * pw;
        let y = |r: f64| mt + ph - (r.clamp(ymin, ymax) - ymin) / (ymax - ymin) * ph;
        let _ = writeln!(
            s,
            "<rect x=\"{x0}\" y=\"{mt}\" width=\"{pw}\" height=\"{ph}\" fill=\"none\" stroke=\"black\"/>\
             <text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{bytes}-byte elements</text>",
            x0 + pw / 2.0,
            mt - 8.0
        );
        for r in [0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0] {
            let color = if r == 1.0 { "#888" } else { "#e5e5e5" };
            let _ = writeln!(
                s,
                "<line x1=\"{x0}\" y1=\"{0}\" x2=\"{1}\" y2=\"{0}\" stroke=\"{color}\"/>",
                y(r),
                x0 + pw
            );
            if panel == 0 {
                let _ = writeln!(
                    s,
                    "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{r:.2}</text>",
                    x0 - 5.0,
                    y(r) + 4.0
                );
            }
        }
        for wv in [0.001, 0.01, 0.1, 1.0, 10.0] {
            let _ = writeln!(
                s,
                "<line x1=\"{0}\" y1=\"{mt}\" x2=\"{0}\" y2=\"{1}\" stroke=\"{2}\"/>\
                 <text x=\"{0}\" y=\"{3}\" text-anchor=\"middle\">{wv}</text>",
                x(wv),
                mt + ph,
                if wv == 1.0 { "#888" } else { "#e5e5e5" },
                mt + ph + 16.0
            );
        }
        let _ = writeln!(
            s,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">waves (blocks / resident blocks)</text>",
            x0 + pw / 2.0,
            mt + ph + 34.0
        );
        let pts: Vec<&Point> = points.iter().filter(|p| p.bytes == bytes).collect();
        for (_, v, color) in series {
            let path: Vec<String> = pts
                .iter()
                .map(|p| format!("{:.1},{:.1}", x(p.waves), y(p.us[v] / p.us[0])))
                .collect();
            let dash = if v == 3 {
                " stroke-dasharray=\"4 3\""
            } else {
                ""
            };
            let _ = writeln!(
                s,
                "<polyline points=\"{}\" fill=\"none\" stroke=\"{color}\" stroke-width=\"1.5\"{dash}/>",
                path.join(" ")
            );
            if v == 3 {
                for p in &pts {
                    let _ = writeln!(
                        s,
                        "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"2.5\" fill=\"{color}\"/>",
                        x(p.waves),
                        y(p.us[v] / p.us[0])
                    );
                }
            }
        }
    }
    let ly = h - 12.0;
    for (i, (label, _, color)) in series.iter().enumerate() {
        let lx = ml + i as f64 * 170.0;
        let _ = writeln!(
            s,
            "<line x1=\"{lx}\" y1=\"{0}\" x2=\"{1}\" y2=\"{0}\" stroke=\"{color}\" stroke-width=\"2\"/>\
             <text x=\"{2}\" y=\"{3}\">{label}</text>",
            ly - 4.0,
            lx + 24.0,
            lx + 30.0,
            ly
        );
    }
    let _ = writeln!(
        s,
        "<text x=\"{}\" y=\"{ly}\">(no PDL = 1.0)</text>",
        ml + 3.0 * 170.0
    );
    s.push_str("</svg>\n");
    s
}
