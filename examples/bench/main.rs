//! Benchmarks of cuda-core against the CUDA C++ reference (xtask/cpp/bench.cu), in one
//! run on one GPU. Rows use the CSV schema written at the top of bench.cu.
//!
//! ```sh
//! cargo run --release --example bench -- [--csv PATH] [--cpp CPP.csv] [--quick]
//! ```
//!
//! Sections: `loader` (cold load of the driver table, cuInit, context, module, first
//! launch), `launch` (host cost of one enqueue, ns; and heap allocations per launch,
//! counted by a global allocator), `chain` (256 dependent kernels, us/kernel, stream /
//! stream+PDL / graph / graph+PDL), `crossover` (the same from 33K to 4M elements) and
//! `pair` (PDL pair with a prolog). With `--cpp` it prints the Rust/C++ ratio per row.
//! `--graph-probe` instead times the captured-graph chain under variations (stream kind,
//! buffer origin, runtime initialized, order in the process) to tell cuda-core's part
//! from the GPU's state. `--interleave LIB.so [--rounds N] [--csv PATH]` instead
//! alternates Rust and the C++ reference (built as a library by `cpp/build.sh`) in one
//! process, round by round, over every section (see `interleave.rs`); that is the
//! comparison to quote, since separate processes see different GPU states.
//! Speed is reported, not asserted; every chain and pair result is checked.

#[path = "../common/mod.rs"]
mod common;
mod interleave;

use std::fmt::Write as _;
use std::time::Instant;

use common::{BLOCK, ChainMode, Pair, R, chain_bench, exit_no_gpu, gpu_or_exit, stats};
use cudadrv::args::{LayoutRule, PackedArgs};
use cudadrv::launch::{LaunchConfig, launch, launch_packed, launch_plain};
use cudadrv::{Context, DeviceBuffer, DevicePtr, Event, EventFlags, Function, Module, Stream};
use interleave::{CppLaunch, Rounds, ratio_text};

/// Counts heap allocations, to show that the launch path makes none.
#[global_allocator]
static GLOBAL: common::Counting = common::Counting;

/// One timed enqueue.
type LaunchOne<'a> = Box<dyn FnMut() -> R + 'a>;

/// Elements per kernel in the crossover sweeps (33,792 = one per thread of 132x256).
const CROSSOVER_ELEMS: [u32; 7] = [
    33_792, 131_072, 262_144, 524_288, 1_048_576, 2_097_152, 4_194_304,
];

const HEADER: &str = "impl,section,case,elems,prolog,unit,median,min,max,samples";

struct Rows {
    csv: String,
}

impl Rows {
    #[allow(clippy::too_many_arguments)]
    fn add(
        &mut self,
        imp: &str,
        section: &str,
        case: &str,
        elems: u32,
        prolog: u32,
        unit: &str,
        v: &mut [f64],
    ) {
        let (med, min, max) = stats(v);
        let line = format!(
            "{imp},{section},{case},{elems},{prolog},{unit},{med:.4},{min:.4},{max:.4},{}",
            v.len()
        );
        println!("{line}");
        let _ = writeln!(self.csv, "{line}");
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let quick = args.iter().any(|a| a == "--quick");
    let csv_path = arg("--csv").unwrap_or_else(|| match std::env::var("OUT") {
        Ok(o) if !o.is_empty() => format!("{o}/bench.csv"),
        _ => "bench.csv".into(),
    });
    // (4) loader, cold: before anything else touches CUDA.
    let t = Instant::now();
    let table = cudadrv_sys::driver();
    let load_ms = t.elapsed().as_secs_f64() * 1e3;
    if let Err(e) = table {
        exit_no_gpu("bench", e);
    }
    let t = Instant::now();
    if let Err(e) = cudadrv::driver::init() {
        exit_no_gpu("bench", e);
    }
    let init_ms = t.elapsed().as_secs_f64() * 1e3;
    let t = Instant::now();
    let ctx = gpu_or_exit("bench");
    let ctx_ms = t.elapsed().as_secs_f64() * 1e3;
    let mut rows = Rows {
        csv: format!("{HEADER}\n"),
    };
    println!("{HEADER}");
    if let Some(lib) = arg("--interleave") {
        let rounds = arg("--rounds").and_then(|r| r.parse().ok()).unwrap_or(8);
        let csv = arg("--csv").unwrap_or_else(|| match std::env::var("OUT") {
            Ok(o) if !o.is_empty() => format!("{o}/bench_interleave.csv"),
            _ => "bench_interleave.csv".into(),
        });
        if let Err(e) = interleave::interleave(&ctx, &lib, rounds, &csv) {
            eprintln!("bench: error: {e}");
            std::process::exit(1);
        }
        return;
    }
    if args.iter().any(|a| a == "--graph-probe") {
        if let Err(e) = graph_probe(&ctx) {
            eprintln!("bench: error: {e}");
            std::process::exit(1);
        }
        return;
    }
    if let Err(e) = run(&ctx, &mut rows, quick, [load_ms, init_ms, ctx_ms]) {
        eprintln!("bench: error: {e}");
        std::process::exit(1);
    }
    if let Err(e) = std::fs::write(&csv_path, &rows.csv) {
        eprintln!("bench: cannot write {csv_path}: {e}");
        std::process::exit(1);
    }
    eprintln!("# wrote {csv_path}");
    if let Some(cpp) = arg("--cpp") {
        match std::fs::read_to_string(&cpp) {
            Ok(text) => compare(&rows.csv, &text),
            Err(e) => eprintln!("bench: cannot read {cpp}: {e}"),
        }
    }
}

fn run(ctx: &Context, rows: &mut Rows, quick: bool, cold: [f64; 3]) -> R {
    let dev = ctx.device();
    let sms = dev.multiprocessor_count()?;
    eprintln!(
        "# {} (sm_{}{}, {sms} SMs), driver {}, cuda-sys {} mode",
        dev.name()?,
        dev.compute_capability()?.0,
        dev.compute_capability()?.1,
        cudadrv::driver::driver_version()?,
        cudadrv_sys::binding_mode()
    );
    let t = Instant::now();
    let module = Module::from_ptx(ctx, cuda_workspace::ptx::KERNELS)?;
    let module_ms = t.elapsed().as_secs_f64() * 1e3;
    let empty = module.function("empty_kernel")?;
    // `mut`: the graph modes of the chain capture it.
    let mut stream = Stream::non_blocking(ctx)?;
    let t = Instant::now();
    // SAFETY: empty_kernel takes no parameters.
    unsafe { launch_plain(&empty, &LaunchConfig::new(1, 1).stream(&stream), &())? };
    stream.synchronize()?;
    let first_ms = t.elapsed().as_secs_f64() * 1e3;
    for (case, ms) in [
        ("load_driver", cold[0]),
        ("cuInit", cold[1]),
        ("ctx_create", cold[2]),
        ("module_load", module_ms),
        ("first_launch", first_ms),
    ] {
        rows.add("rust", "loader", case, 0, 0, "ms", &mut [ms]);
    }
    #[cfg(feature = "loaded")]
    if !cudadrv_sys::driver()?.is_linked() {
        let mut warm = Vec::new();
        for _ in 0..20 {
            let t = Instant::now();
            // A table never closes libcuda, so this is dlopen of a loaded library plus
            // resolving every entry.
            // SAFETY: the search the process-wide table made, which opened the driver.
            let _table =
                unsafe { cudadrv_sys::DriverApi::load(cudadrv_sys::LoadOptions::default()) }?;
            warm.push(t.elapsed().as_secs_f64() * 1e3);
        }
        rows.add("rust", "loader", "load_driver_warm", 0, 0, "ms", &mut warm);
    }

    launch_costs(ctx, &module, &stream, rows, quick, None)?;
    let chain_fn = module.function("chain_step")?;

    let n = sms * BLOCK;
    for mode in ChainMode::ALL {
        let mut us = chain_bench(
            ctx,
            &mut stream,
            &chain_fn,
            mode,
            n,
            sms,
            256,
            if quick { 5 } else { 20 },
        )?;
        rows.add("rust", "chain", mode.name(), n, 0, "us/kernel", &mut us);
    }
    for elems in CROSSOVER_ELEMS {
        for mode in ChainMode::ALL {
            let mut us = chain_bench(
                ctx,
                &mut stream,
                &chain_fn,
                mode,
                elems,
                sms,
                256,
                if quick { 3 } else { 10 },
            )?;
            rows.add(
                "rust",
                "crossover",
                mode.name(),
                elems,
                0,
                "us/kernel",
                &mut us,
            );
        }
    }
    for elems in [33_792u32, 1_048_576] {
        let pair = Pair::new(ctx, &module, elems, sms)?;
        for prolog in [0u32, 1024, 16_384] {
            for pdl in [false, true] {
                let mut us =
                    pair_bench(ctx, &pair, &stream, pdl, prolog, if quick { 3 } else { 10 })?;
                rows.add(
                    "rust",
                    "pair",
                    if pdl { "pdl" } else { "plain" },
                    elems,
                    prolog,
                    "us/pair",
                    &mut us,
                );
            }
        }
    }
    Ok(())
}

/// Times `batches` batches of 1000 enqueues (after 5 warm-up batches), synchronizing
/// between batches; returns ns per launch and the heap allocations per launch.
fn time_launches(
    stream: &Stream,
    batches: usize,
    mut one: impl FnMut() -> R,
) -> R<(Vec<f64>, f64)> {
    const BATCH: usize = 1000;
    let mut ns = Vec::with_capacity(batches);
    let mut allocs = 0usize;
    for b in 0..5 + batches {
        let before = common::allocations();
        let t = Instant::now();
        for _ in 0..BATCH {
            one()?;
        }
        let dt = t.elapsed().as_secs_f64() * 1e9;
        let after = common::allocations();
        stream.synchronize()?;
        if b >= 5 {
            ns.push(dt / BATCH as f64);
            allocs += after - before;
        }
    }
    Ok((ns, allocs as f64 / (batches * BATCH) as f64))
}

/// The four launch paths timed by [`launch_costs`], on kernels `empty` (no parameters) and
/// `chain` (chain_step), in the order of the C++ library's cases: plain0, ex_pdl0, ptrs4,
/// packed4.
fn launch_cases<'a>(
    empty: &'a Function,
    chain: &'a Function,
    cfg: &'a LaunchConfig<'a>,
    pdl: &'a LaunchConfig<'a>,
    args: &'a (DevicePtr<u32>, DevicePtr<u32>, u32, u32),
    packed: &'a mut PackedArgs<64>,
) -> [(&'static str, LaunchOne<'a>); 4] {
    // SAFETY (all closures): empty_kernel takes no parameters; chain_step(in, out, n = 0,
    // mode = 0) touches no memory; the stream is synchronized between batches.
    [
        (
            "plain0",
            Box::new(|| unsafe { launch_plain(empty, cfg, &()) }.map_err(Into::into)),
        ),
        (
            "ex_pdl0",
            Box::new(|| unsafe { launch(empty, pdl, &()) }.map_err(Into::into)),
        ),
        (
            "ptrs4",
            Box::new(|| unsafe { launch_plain(chain, cfg, args) }.map_err(Into::into)),
        ),
        (
            "packed4",
            // Packs on every launch into one reused buffer (clear + extend, the hot-loop
            // use).
            Box::new(|| {
                packed.clear();
                packed.extend(args)?;
                unsafe { launch_packed(chain, cfg, packed) }.map_err(Into::into)
            }),
        ),
    ]
}

/// With `cpp`: the C++ library's launch cases, the rounds to run, and the nvcc-built
/// `empty_kernel` and `chain_step` for cuda-core to launch too.
type CppLaunchSide<'a> = (CppLaunch, usize, [&'a Function; 2]);

/// The host cost of each launch path (rows `launch`); with `cpp`, instead alternates each
/// case between cuda-core on the Rust kernels, cuda-core on the nvcc kernels and the C++
/// library (nvcc kernels) for the given number of rounds, prints the comparison and
/// returns the rounds (sides in that order).
fn launch_costs(
    ctx: &Context,
    module: &Module,
    stream: &Stream,
    rows: &mut Rows,
    quick: bool,
    cpp: Option<CppLaunchSide<'_>>,
) -> R<Vec<(&'static str, Rounds<3>)>> {
    let batches = if quick { 10 } else { 50 };
    let empty = module.function("empty_kernel")?;
    let chain = module.function("chain_step")?;
    let input = DeviceBuffer::<u32>::zeroed(ctx, 4)?;
    let out = DeviceBuffer::<u32>::zeroed(ctx, 4)?;
    let args = (input.as_arg(), out.as_arg(), 0u32, 0u32);
    let cfg = LaunchConfig::new(1, 1).stream(stream);
    let pdl = cfg.clone().programmatic_stream_serialization()?;
    chain.verify_args::<(DevicePtr<u32>, DevicePtr<u32>, u32, u32)>()?;

    let mut packed = PackedArgs::<64>::with_rule(LayoutRule::Alignment);
    let cases = launch_cases(&empty, &chain, &cfg, &pdl, &args, &mut packed);
    if let Some((cpp, rounds, [nvcc_empty, nvcc_chain])) = cpp {
        nvcc_chain.verify_args::<(DevicePtr<u32>, DevicePtr<u32>, u32, u32)>()?;
        let mut packed_nvcc = PackedArgs::<64>::with_rule(LayoutRule::Alignment);
        let nvcc_cases = launch_cases(nvcc_empty, nvcc_chain, &cfg, &pdl, &args, &mut packed_nvcc);
        println!("interleaved, {rounds} rounds of 10 batches of 1000 launches: ns/launch (host)");
        println!(
            "  cuda-core on the Rust kernels (rs/rs) and on the nvcc ones (rs/nvcc), C++ on nvcc's"
        );
        println!(
            "{:<9} {:>8} {:>8} {:>8}  {:<18} {:<18}",
            "case", "rs/rs", "rs/nvcc", "c++", "rs/rs / c++", "rs/nvcc / c++"
        );
        let mut out = Vec::with_capacity(cases.len());
        for (k, ((case, mut f), (_, mut g))) in cases.into_iter().zip(nvcc_cases).enumerate() {
            let r = Rounds::run(
                rounds,
                [
                    &mut || Ok(stats(&mut time_launches(stream, 10, &mut f)?.0).0),
                    &mut || Ok(stats(&mut time_launches(stream, 10, &mut g)?.0).0),
                    // SAFETY: a plain value; the library checks its own calls.
                    &mut || Ok(unsafe { cpp(k as i32) }),
                ],
            )?;
            println!(
                "{case:<9} {:>8.1} {:>8.1} {:>8.1}  {:<18} {:<18}",
                r.median(0),
                r.median(1),
                r.median(2),
                ratio_text(r.ratio(0, 2)),
                ratio_text(r.ratio(1, 2))
            );
            out.push((case, r));
        }
        return Ok(out);
    }
    for (case, mut f) in cases {
        let (mut ns, allocs) = time_launches(stream, batches, &mut f)?;
        rows.add("rust", "launch", case, 0, 0, "ns/launch", &mut ns);
        rows.add("rust", "launch", case, 0, 0, "allocs/launch", &mut [allocs]);
    }

    // The same calls through cuda-sys function pointers: what the safe layer costs.
    let cu = cudadrv_sys::driver()?;
    let (lk, lkex) = (cu.cuLaunchKernel()?, cu.cuLaunchKernelEx()?);
    let mut raw_attrs = cudadrv::launch::RawAttributes::new();
    let raw_cfg = pdl.as_raw(&mut raw_attrs);
    let s = stream.as_raw();
    let (f_empty, f_chain) = (empty.as_raw(), chain.as_raw());
    let (mut a_in, mut a_out, mut a_n, mut a_mode) = (input.as_raw(), out.as_raw(), 0u32, 0u32);
    let null = core::ptr::null_mut();
    let check = |rc: cudadrv_sys::CUresult| -> R { rc.result().map_err(|e| e.to_string().into()) };
    let (mut ns, _) = time_launches(stream, batches, || {
        // SAFETY: as above, with the raw handles of live objects.
        check(unsafe { lk(f_empty, 1, 1, 1, 1, 1, 1, 0, s, null, null) })
    })?;
    rows.add("rust-raw", "launch", "plain0", 0, 0, "ns/launch", &mut ns);
    let (mut ns, _) = time_launches(stream, batches, || {
        // SAFETY: `raw_cfg` points at `raw_attrs`, `pdl`'s attributes, alive here.
        check(unsafe { lkex(&raw_cfg, f_empty, null, null) })
    })?;
    rows.add("rust-raw", "launch", "ex_pdl0", 0, 0, "ns/launch", &mut ns);
    let (mut ns, _) = time_launches(stream, batches, || {
        let mut ptrs: [*mut core::ffi::c_void; 4] = [
            (&raw mut a_in).cast(),
            (&raw mut a_out).cast(),
            (&raw mut a_n).cast(),
            (&raw mut a_mode).cast(),
        ];
        // SAFETY: four pointers to live locals of the kernel's parameter types.
        check(unsafe { lk(f_chain, 1, 1, 1, 1, 1, 1, 0, s, ptrs.as_mut_ptr(), null) })
    })?;
    rows.add("rust-raw", "launch", "ptrs4", 0, 0, "ns/launch", &mut ns);
    Ok(Vec::new())
}

/// Microseconds per pair over `reps` timed runs of 64 pairs (after 2 warm-up runs).
fn pair_bench(
    ctx: &Context,
    pair: &Pair,
    stream: &Stream,
    pdl: bool,
    prolog: u32,
    reps: usize,
) -> R<Vec<f64>> {
    const PAIRS: usize = 64;
    let (e0, e1) = (
        Event::new(ctx, EventFlags::empty())?,
        Event::new(ctx, EventFlags::empty())?,
    );
    let mut us = Vec::with_capacity(reps);
    for r in 0..2 + reps {
        e0.record(stream)?;
        for _ in 0..PAIRS {
            pair.enqueue(stream, pdl, 0, prolog)?;
        }
        e1.record(stream)?;
        e1.synchronize()?;
        if r >= 2 {
            us.push(1000.0 * f64::from(Event::elapsed_ms(&e0, &e1)?) / PAIRS as f64);
        }
    }
    pair.check()?;
    Ok(us)
}

/// Prints each Rust row next to the matching C++ row (driver-API rows for `launch`,
/// runtime-API rows otherwise) with the ratio Rust / C++.
fn compare(rust: &str, cpp: &str) {
    let parse = |text: &str| -> Vec<Vec<String>> {
        text.lines()
            .filter(|l| !l.starts_with("impl,") && !l.starts_with('#') && !l.is_empty())
            .map(|l| l.split(',').map(str::to_string).collect::<Vec<_>>())
            .filter(|f| f.len() == 10)
            .collect()
    };
    let (r, c) = (parse(rust), parse(cpp));
    println!(
        "\n{:<10} {:<11} {:>8} {:>6} {:<14} {:>10} {:>10} {:>8}",
        "section", "case", "elems", "prolog", "unit", "rust", "c++", "rust/c++"
    );
    for row in r.iter().filter(|f| f[0] == "rust") {
        let want = if row[1] == "launch" {
            "cpp-drv"
        } else {
            "cpp-rt"
        };
        let other = c.iter().find(|f| f[0] == want && f[1..6] == row[1..6]);
        let (rv, cv) = (
            row[6].parse::<f64>().unwrap_or(f64::NAN),
            other.and_then(|f| f[6].parse::<f64>().ok()),
        );
        let ratio = cv
            .filter(|c| *c > 0.0)
            .map_or_else(|| "-".to_string(), |c| format!("{:.3}", rv / c));
        let cs = cv.map_or_else(|| "-".to_string(), |c| format!("{c:.3}"));
        println!(
            "{:<10} {:<11} {:>8} {:>6} {:<14} {:>10.3} {:>10} {:>8}",
            row[1], row[2], row[3], row[4], row[5], rv, cs, ratio
        );
    }
    let ptx_rows: Vec<&Vec<String>> = c.iter().filter(|f| f[0] == "cpp-rt-rustptx").collect();
    if !ptx_rows.is_empty() {
        println!(
            "\nthe C++ host code running the Rust-built chain_step (kernel code vs launch path):"
        );
        for row in ptx_rows {
            let nvcc = c.iter().find(|f| f[0] == "cpp-rt" && f[1..6] == row[1..6]);
            let rust = r.iter().find(|f| f[0] == "rust" && f[1..6] == row[1..6]);
            let get = |f: Option<&Vec<String>>| f.map_or_else(|| "-".to_string(), |f| f[6].clone());
            println!(
                "{:<10} {:<11} c++ host + nvcc kernel {:>8}  c++ host + Rust kernel {:>8}  cuda-core + Rust kernel {:>8} us/kernel",
                row[1],
                row[2],
                get(nvcc),
                row[6],
                get(rust)
            );
        }
    }
}

/// `--graph-probe`: the captured-graph chain (no PDL, 33792 elements) under variations
/// of how its pieces are made, to find where cuda-core's graph chain differs from the
/// C++ reference's.
fn graph_probe(ctx: &Context) -> R {
    use common::enqueue_chain;
    use cudadrv::StreamFlags;
    use cudadrv::graph::{CaptureMode, InstantiateFlags};
    let module = Module::from_ptx(ctx, cuda_workspace::ptx::KERNELS)?;
    let f = module.function("chain_step")?;
    let sms = ctx.device().multiprocessor_count()?;
    let n = sms * BLOCK;
    let links = 256;
    let run =
        |label: &str, stream: &mut Stream, bufs: &[DeviceBuffer<u32>; 2], drop_graph: bool| -> R {
            let cap = stream.begin_capture(CaptureMode::Global)?;
            // `f` and `bufs` outlive `exec`, a local of this closure.
            enqueue_chain(&f, cap.stream(), bufs, n, sms, links, None)?;
            let graph = cap.end()?;
            let exec = graph.instantiate(InstantiateFlags::empty())?;
            if drop_graph {
                drop(graph);
            }
            exec.upload(stream)?;
            let (e0, e1) = (
                Event::new(ctx, EventFlags::empty())?,
                Event::new(ctx, EventFlags::empty())?,
            );
            let mut us = Vec::new();
            for r in 0..22 {
                e0.record(stream)?;
                exec.launch(stream)?;
                e1.record(stream)?;
                e1.synchronize()?;
                if r >= 2 {
                    us.push(1000.0 * f64::from(Event::elapsed_ms(&e0, &e1)?) / links as f64);
                }
            }
            let (med, min, max) = stats(&mut us);
            println!("graph-probe {label:<40} {med:.4} us/kernel (min {min:.4}, max {max:.4})");
            Ok(())
        };
    let new_bufs = || -> R<[DeviceBuffer<u32>; 2]> {
        Ok([
            DeviceBuffer::zeroed(ctx, n as usize)?,
            DeviceBuffer::zeroed(ctx, n as usize)?,
        ])
    };
    let mut stream = Stream::non_blocking(ctx)?;
    for mode in [
        ChainMode::Graph,
        ChainMode::Stream,
        ChainMode::StreamPdl,
        ChainMode::Graph,
        ChainMode::GraphPdl,
        ChainMode::Graph,
    ] {
        let mut us = chain_bench(ctx, &mut stream, &f, mode, n, sms, links, 20)?;
        let (med, _, _) = stats(&mut us);
        println!(
            "graph-probe chain_bench {:<28} {med:.4} us/kernel",
            mode.name()
        );
    }
    let mut nb = Stream::non_blocking(ctx)?;
    let bufs = new_bufs()?;
    run("baseline (non-blocking stream)", &mut nb, &bufs, false)?;
    run("graph dropped after instantiate", &mut nb, &bufs, true)?;
    let mut blocking = Stream::new(ctx, StreamFlags::empty())?;
    run("blocking stream", &mut blocking, &bufs, false)?;
    run("baseline again", &mut nb, &bufs, false)?;
    // Buffers from the runtime (cudaMalloc), after the runtime initialized.
    let rt = cudadrv_sys::runtime()?;
    let mut raw = [core::ptr::null_mut(); 2];
    for p in &mut raw {
        // SAFETY: valid out-pointer; freed below.
        unsafe { rt.cudaMalloc()?(p, n as usize * 4) }.result()?;
    }
    // SAFETY: the runtime allocations hold n u32s; into_raw below keeps them from being
    // freed by cuMemFree (they are released with cudaFree).
    let rt_bufs = unsafe {
        [
            DeviceBuffer::<u32>::from_raw(raw[0] as u64, n as usize, ctx),
            DeviceBuffer::<u32>::from_raw(raw[1] as u64, n as usize, ctx),
        ]
    };
    run(
        "runtime initialized, cudaMalloc buffers",
        &mut nb,
        &rt_bufs,
        false,
    )?;
    run(
        "runtime initialized, cuda-core buffers",
        &mut nb,
        &bufs,
        false,
    )?;
    let mut rt_stream = core::ptr::null_mut();
    // SAFETY: valid out-pointer; the stream is borrowed below and destroyed at the end.
    unsafe { rt.cudaStreamCreateWithFlags()?(&mut rt_stream, 1) }.result()?;
    // SAFETY: a live stream of this context, not destroyed by the borrow.
    let mut borrowed = unsafe { Stream::borrow_raw(rt_stream.cast(), ctx) };
    run(
        "runtime stream (cudaStreamCreateWithFlags)",
        &mut borrowed,
        &bufs,
        false,
    )?;
    for b in rt_bufs {
        let (p, _) = b.into_raw();
        // SAFETY: allocated by cudaMalloc above.
        unsafe { rt.cudaFree()?(p as *mut core::ffi::c_void) }.result()?;
    }
    Ok(())
}
