//! The main job: real kernels written in Rust (ptx/), launched with Programmatic
//! Dependent Launch through cuda-core, checked, and measured.
//!
//! ```sh
//! cargo run --release --example pdl_demo [-- --stamps stamps.csv]
//! ```
//!
//! 1. A PDL pair: `pdl_primary` triggers its dependents at block entry and works for
//!    10 us; `pdl_secondary` runs a prolog, `griddepcontrol.wait`s, then reads the
//!    primary's output. Launched with and without the programmatic-stream-serialization
//!    attribute; the output is checked every time and the `%globaltimer` stamps show
//!    whether the secondary's prolog overlapped the primary.
//! 2. A chain of 256 dependent kernels, per-kernel time with and without PDL, on a
//!    stream and as a captured graph.
//! 3. Where PDL hurts: the same chain with one thread per element (several waves of
//!    blocks per kernel) by trigger placement, and a multi-wave pair whose stamps show
//!    when the secondary's blocks start and how long it runs once the primary is done.
//!
//! Without a GPU it says so and exits successfully.

mod common;

use std::io::Write as _;

use common::{
    BLOCK, ChainMode, Pair, R, STAMPS, chain_bench, chain_bench_trigger, gpu_or_exit, stats,
};
use cudadrv::{Event, EventFlags, Module, Stream, nvtx};

const PRIMARY_WORK_NS: u32 = 10_000;
const PROLOG_ITERS: u32 = 1_000;
const PAIRS: usize = 200;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let stamps_path = args
        .iter()
        .position(|a| a == "--stamps")
        .and_then(|i| args.get(i + 1))
        .cloned();
    let ctx = gpu_or_exit("pdl_demo");
    if let Err(e) = run(&ctx, stamps_path.as_deref()) {
        eprintln!("pdl_demo: error: {e}");
        std::process::exit(1);
    }
}

fn run(ctx: &cudadrv::Context, stamps_path: Option<&str>) -> R {
    let dev = ctx.device();
    let (major, minor) = dev.compute_capability()?;
    let sms = dev.multiprocessor_count()?;
    println!(
        "pdl_demo: {} (sm_{major}{minor}, {sms} SMs), driver {}, cuda-sys {} mode",
        dev.name()?,
        cudadrv::driver::driver_version()?,
        cudadrv_sys::binding_mode()
    );
    if major < 9 {
        println!("pdl_demo: PDL needs sm_90 or newer; nothing to show on this GPU.");
        return Ok(());
    }
    // The phases as NVTX ranges: a profiler's timeline (Nsight Systems) shows them by name;
    // without one attached these calls do nothing.
    nvtx::name_category(1, c"pdl_demo");
    let setup = nvtx::Event::new(c"pdl_demo: setup").category(1).range();
    let module = Module::from_ptx(ctx, cuda_workspace::ptx::KERNELS)?;
    let n = sms * BLOCK;
    let mut pair = Pair::new(ctx, &module, n, sms)?;
    // `mut`: the graph modes of section 2 and 3 capture it.
    let mut stream = Stream::non_blocking(ctx)?;
    let (e0, e1) = (
        Event::new(ctx, EventFlags::empty())?,
        Event::new(ctx, EventFlags::empty())?,
    );

    drop(setup);
    let section = nvtx::Event::new(c"pdl_demo: 1. PDL pair")
        .category(1)
        .color(0xff76_b900)
        .range();
    println!(
        "\n1. PDL pair, {sms}x{BLOCK} + {sms}x{BLOCK} threads: primary triggers at entry and works {} us, secondary prolog {PROLOG_ITERS} iterations",
        PRIMARY_WORK_NS / 1000
    );
    let mut csv = String::from("pair,kernel,block,sm,start_ns,mid_ns,end_ns\n");
    for pdl in [false, true] {
        let label = if pdl { "pdl" } else { "plain" };
        let _pass = nvtx::range(if pdl { c"PDL pairs" } else { c"plain pairs" });
        let mut pair_us = Vec::with_capacity(PAIRS);
        let mut overlap_us = Vec::with_capacity(PAIRS);
        let mut overlapped = 0;
        for _ in 0..PAIRS {
            pair.b.memset_d32(0xDEAD_BEEF)?;
            e0.record(&stream)?;
            pair.enqueue(&stream, pdl, PRIMARY_WORK_NS, PROLOG_ITERS)?;
            e1.record(&stream)?;
            e1.synchronize()?;
            pair.check()?;
            pair_us.push(1000.0 * f64::from(Event::elapsed_ms(&e0, &e1)?));
            let (p, s) = pair.stamps()?;
            let primary_end = col(&p, 2).max().unwrap_or(0);
            let secondary_start = col(&s, 0).min().unwrap_or(0);
            let gap = secondary_start as f64 - primary_end as f64;
            overlap_us.push(-gap / 1000.0);
            if gap < 0.0 {
                overlapped += 1;
            }
        }
        let (p, s) = pair.stamps()?;
        for (kernel, st) in [("primary", &p), ("secondary", &s)] {
            for (b, blk) in st.chunks(STAMPS).enumerate() {
                csv.push_str(&format!(
                    "{label},{kernel},{b},{},{},{},{}\n",
                    blk[3], blk[0], blk[1], blk[2]
                ));
            }
        }
        let (t_med, t_min, _) = stats(&mut pair_us);
        let (o_med, _, o_max) = stats(&mut overlap_us);
        println!(
            "   {:<12} {PAIRS} pairs, output correct every time; pair time median {t_med:.2} us (min {t_min:.2}); \
             secondary started before the primary ended in {overlapped}/{PAIRS}, by median {o_med:.2} us (max {o_max:.2})",
            if pdl { "with PDL:" } else { "without PDL:" }
        );
    }
    if let Some(path) = stamps_path.map(str::to_string).or_else(|| {
        std::env::var("OUT")
            .ok()
            .filter(|o| !o.is_empty())
            .map(|o| format!("{o}/stamps.csv"))
    }) {
        std::fs::File::create(&path)?.write_all(csv.as_bytes())?;
        println!(
            "   per-block %globaltimer stamps of the last pair of each kind: {path} (cargo xtask timeline --csv {path})"
        );
    }

    drop(section);
    let section = nvtx::Event::new(c"pdl_demo: 2. chain of 256 kernels")
        .category(1)
        .color(0xff00_7fff)
        .range();
    println!(
        "\n2. chain of 256 dependent kernels ({sms}x{BLOCK} threads, each reads the previous output)"
    );
    for mode in ChainMode::ALL {
        nvtx::mark(mode.name_cstr());
        let mut us = chain_bench(
            ctx,
            &mut stream,
            &module.function("chain_step")?,
            mode,
            n,
            sms,
            256,
            20,
        )?;
        let (med, min, max) = stats(&mut us);
        println!(
            "   {:<11} {med:6.3} us/kernel (min {min:.3}, max {max:.3}), result checked",
            mode.name()
        );
    }
    drop(section);
    let _section = nvtx::Event::new(c"pdl_demo: 3. multi-wave")
        .category(1)
        .color(0xffff_7f00)
        .range();
    multi_wave(ctx, &module, &mut stream)
}

/// Section 3: PDL on kernels of several waves of blocks.
fn multi_wave(ctx: &cudadrv::Context, module: &Module, stream: &mut Stream) -> R {
    const N: u32 = 1 << 20;
    let grid = N / BLOCK;
    println!(
        "\n3. one thread per element: {N} elements, {grid}x{BLOCK} threads per kernel (several waves)"
    );
    let chain = module.function("chain_step")?;
    for (label, pdl) in [
        ("no PDL", None),
        ("PDL, trigger at entry", Some(1)),
        ("PDL, trigger at the end", Some(2)),
        ("PDL, no trigger (wait only)", Some(3)),
    ] {
        let mut us =
            chain_bench_trigger(ctx, stream, &chain, ChainMode::Graph, pdl, N, grid, 256, 20)?;
        let (med, min, _) = stats(&mut us);
        println!("   graph chain, {label:<28} {med:6.3} us/kernel (min {min:.3}), result checked");
    }
    // The pair with a multi-wave primary that triggers at entry, from the stamps: when
    // the secondary's blocks started, and how long the secondary took once the primary
    // was done.
    let pair = Pair::new(ctx, module, N, grid)?;
    for (pdl, work_ns) in [(false, 0), (true, 0), (false, 2000), (true, 2000)] {
        let (mut early, mut waiting, mut after, mut primary) = (vec![], vec![], vec![], vec![]);
        let mut per_sm = (vec![], vec![]);
        for _ in 0..20 {
            pair.enqueue(stream, pdl, work_ns, 0)?;
            stream.synchronize()?;
            pair.check()?;
            let (p, s) = pair.stamps()?;
            let p_first = col(&p, 0).min().unwrap_or(0);
            let p_last_start = col(&p, 0).max().unwrap_or(0);
            let p_end = col(&p, 2).max().unwrap_or(0);
            let s_end = col(&s, 2).max().unwrap_or(0);
            let s_first = col(&s, 0).min().unwrap_or(0);
            early.push(col(&s, 0).filter(|&t| t < p_last_start).count() as f64);
            waiting.push(col(&s, 0).filter(|&t| t < p_end).count() as f64);
            primary.push(p_end.saturating_sub(p_first) as f64 / 1000.0);
            // The secondary's own time: from the primary's end (or its first block, if it
            // started later) to its last block's end.
            after.push(s_end.saturating_sub(p_end.max(s_first)) as f64 / 1000.0);
            // How evenly the secondary's blocks spread over the SMs.
            let mut count = std::collections::BTreeMap::<u64, u32>::new();
            for sm in col(&s, 3) {
                *count.entry(sm).or_default() += 1;
            }
            per_sm
                .0
                .push(f64::from(count.values().copied().min().unwrap_or(0)));
            per_sm
                .1
                .push(f64::from(count.values().copied().max().unwrap_or(0)));
        }
        let med = |v: &mut Vec<f64>| stats(v).0;
        println!(
            "   pair, primary blocks work {:>4} ns, {:<11} primary {:5.2} us; secondary blocks \
             started before the primary's last block: {:.0}, before its end: {:.0} of {grid}; \
             secondary after the primary: {:5.2} us, its blocks per SM {:.0}..{:.0} (medians of 20)",
            work_ns,
            if pdl { "with PDL:" } else { "without:" },
            med(&mut primary),
            med(&mut early),
            med(&mut waiting),
            med(&mut after),
            med(&mut per_sm.0),
            med(&mut per_sm.1)
        );
    }
    Ok(())
}

/// Column `k` of per-block stamps (`STAMPS` per block).
fn col(v: &[u64], k: usize) -> impl Iterator<Item = u64> + '_ {
    v.chunks(STAMPS).map(move |b| b[k])
}
