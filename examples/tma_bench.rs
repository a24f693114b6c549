//! Streaming bandwidth of asynchronous copies (Programming Guide 4.11), interleaved in
//! one process with a CUDA C++ reference of the same kernels (xtask/cpp/tma_ref.cu,
//! built by `nvcc -ptx` on the GPU host).
//!
//! Each variant reads a buffer and writes a second one of the same size; GB/s counts
//! both (2 x bytes / time), the fraction is of the theoretical DRAM bandwidth the
//! device reports (2 x memory clock x bus width / 8, double data rate):
//! - `memcpy`: `cuMemcpyDtoDAsync` (a plain copy);
//! - `vector`: a grid-stride kernel of 16-byte loads and stores, `dst = src * 3 + 1`;
//! - `pipeline`: the bulk-copy ring of `acp_bulk_pipeline` (one producer lane issuing
//!   `cp.async.bulk` global -> shared into an N-stage ring tracked by mbarrier
//!   transaction counts, consumer warps transforming the tile and storing it), same
//!   output as `vector`.
//!
//! Every variant is checked (sampled windows at both ends and in the middle of every
//! buffer). Speed is reported, never asserted.
//!
//! After each allocation the benchmark first runs `cuMemcpyDtoD` for a fixed
//! [`SETTLE_MS`] and prints how the rate moved: right after large buffers are freed the
//! driver is still scrubbing them (zeroing freed memory) and DRAM bandwidth left to
//! kernels is lower for a while, which otherwise shows up as a slow first round or a
//! slow start of the sweep.
//!
//! Sections: the size table (`--pipe` configuration); a tuning table at 1 GiB
//! (consumer warps, blocks per SM, register stores vs bulk stores, L2 evict-first
//! hints; `--tune-rounds 0` skips it); the sweep of ring stages against tile size.
//!
//! Usage: `tma_bench [--cpp-ptx tma_ref.ptx] [--rounds N] [--sizes 1,4,16]
//! [--pipe STAGES,TILE_KIB,CONSUMERS,FLAGS,PER_SM] [--tune-rounds N] [--sweep-rounds N]
//! [--csv FILE] [--tune-csv FILE] [--sweep-csv FILE] [--svg FILE]`. `FLAGS` as
//! `acp_bulk_pipeline`'s (1 bulk store, 2 evict-first loads, 4 evict-first stores, 8
//! contiguous tile runs per block);
//! `PER_SM` 0 for as many blocks per SM as fit.

mod common;

use std::fmt::Write as _;

use common::{R, gpu_or_exit, stats};
use cudadrv::cuda_sys::{CUdevice_attribute, CUresult};
use cudadrv::launch::{LaunchConfig, launch};
use cudadrv::{Context, DeviceBuffer, Event, EventFlags, Function, Module, Stream, StreamFlags};

const GIB: u64 = 1 << 30;
/// How long each allocation is settled with copies before it is measured.
const SETTLE_MS: f64 = 1000.0;
/// `acp_bulk_pipeline` flags.
const BULK_STORE: u32 = 1;
const LOAD_EVICT_FIRST: u32 = 2;
const STORE_EVICT_FIRST: u32 = 4;
const CONTIGUOUS: u32 = 8;
/// The default configuration of the size table.
/// (The fastest shape of the tuning table on an H100: every shape with 32 KiB tiles and
/// 8 consumer warps came within 0.3% of it.)
const TABLE_PIPE: Pipe = Pipe {
    stages: 6,
    tile: 32 << 10,
    consumers: 8,
    flags: 0,
    per_sm: 0,
    sms: 0,
};
const SWEEP_STAGES: [u32; 5] = [2, 3, 4, 6, 8];
const SWEEP_TILES: [u32; 4] = [4 << 10, 8 << 10, 16 << 10, 32 << 10];

/// One launch shape of the pipeline kernels.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Pipe {
    stages: u32,
    tile: u32,
    consumers: u32,
    flags: u32,
    /// Blocks per SM; 0: as many as fit.
    per_sm: u32,
    /// Blocks for this many SMs only; 0: every SM.
    sms: u32,
}

impl Pipe {
    fn parse(text: &str) -> Option<Pipe> {
        let v: Vec<u32> = text
            .split(',')
            .map(|x| x.trim().parse().ok())
            .collect::<Option<_>>()?;
        match v[..] {
            [stages, tile_kib, consumers, flags, per_sm] => Some(Pipe {
                stages,
                tile: tile_kib << 10,
                consumers,
                flags,
                per_sm,
                sms: 0,
            }),
            _ => None,
        }
    }

    /// Blocks per SM of `f` for this shape: `per_sm`, capped at what fits (at least 1).
    fn blocks_per_sm(self, f: &Function) -> R<u32> {
        let block = 32 * (1 + self.consumers);
        let smem = smem_bytes(self.stages, self.tile) as usize;
        let fit = f.max_active_blocks_per_sm(block, smem)?.max(1);
        Ok(if self.per_sm == 0 {
            fit
        } else {
            self.per_sm.min(fit)
        })
    }

    fn describe(self) -> String {
        let mut f = Vec::new();
        if self.flags & BULK_STORE != 0 {
            f.push("bulk store");
        } else {
            f.push("register stores");
        }
        if self.flags & LOAD_EVICT_FIRST != 0 {
            f.push("evict-first loads");
        }
        if self.flags & STORE_EVICT_FIRST != 0 {
            f.push("evict-first stores");
        }
        if self.flags & CONTIGUOUS != 0 {
            f.push("contiguous runs");
        }
        let per_sm = if self.per_sm == 0 {
            "max blocks/SM".to_string()
        } else {
            format!("{} block(s)/SM", self.per_sm)
        };
        let on = if self.sms == 0 {
            String::new()
        } else {
            format!(", grid for {} SMs", self.sms)
        };
        format!(
            "{} stages x {} KiB, {} consumer warps, {}, {per_sm}{on}",
            self.stages,
            self.tile >> 10,
            self.consumers,
            f.join(", ")
        )
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let opt = |name: &str| common::arg_value(&args, name);
    let rounds: usize = opt("--rounds").and_then(|r| r.parse().ok()).unwrap_or(10);
    let sweep_rounds: usize = opt("--sweep-rounds")
        .and_then(|r| r.parse().ok())
        .unwrap_or(3);
    let sizes: Vec<u64> = opt("--sizes")
        .unwrap_or_else(|| "1,4,16".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let ctx = gpu_or_exit("tma_bench");
    let tune_rounds: usize = opt("--tune-rounds")
        .and_then(|r| r.parse().ok())
        .unwrap_or(3);
    let pipe = match opt("--pipe") {
        Some(text) => match Pipe::parse(&text) {
            Some(p) => p,
            None => {
                eprintln!("tma_bench: --pipe wants STAGES,TILE_KIB,CONSUMERS,FLAGS,PER_SM");
                std::process::exit(2);
            }
        },
        None => TABLE_PIPE,
    };
    let out = Outputs {
        csv: opt("--csv"),
        tune_csv: opt("--tune-csv"),
        sweep_csv: opt("--sweep-csv"),
        svg: opt("--svg"),
    };
    let plan = Plan {
        rounds,
        tune_rounds,
        sweep_rounds,
        pipe,
    };
    if let Err(e) = run(&ctx, opt("--cpp-ptx"), &plan, &sizes, &out) {
        eprintln!("tma_bench: error: {e}");
        std::process::exit(1);
    }
}

struct Outputs {
    csv: Option<String>,
    tune_csv: Option<String>,
    sweep_csv: Option<String>,
    svg: Option<String>,
}

struct Plan {
    rounds: usize,
    tune_rounds: usize,
    sweep_rounds: usize,
    pipe: Pipe,
}

/// The kernels of one implementation.
struct Impl {
    name: &'static str,
    vector: Function,
    pipeline: Function,
}

/// Source and destination of one size, and how to launch on them.
struct Bufs {
    src: DeviceBuffer<u32>,
    dst: DeviceBuffer<u32>,
}

fn run(ctx: &Context, cpp_ptx: Option<String>, plan: &Plan, sizes: &[u64], out: &Outputs) -> R {
    let (rounds, sweep_rounds, pipe) = (plan.rounds, plan.sweep_rounds, plan.pipe);
    let dev = ctx.device();
    let clock_khz = dev.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE)?;
    let bus_bits =
        dev.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH)?;
    let peak = 2.0 * f64::from(clock_khz) * 1e3 * f64::from(bus_bits) / 8.0 / 1e9;
    println!(
        "tma_bench: {} (sm_{}{}), driver {}, {} SMs; memory clock {} MHz x {}-bit bus: \
         theoretical {peak:.0} GB/s",
        dev.name()?,
        dev.compute_capability()?.0,
        dev.compute_capability()?.1,
        cudadrv::driver::driver_version()?,
        dev.multiprocessor_count()?,
        clock_khz / 1000,
        bus_bits,
    );
    let rust = Module::from_ptx(ctx, cuda_workspace::ptx::KERNELS)?;
    let fill = rust.function("fill")?;
    let mut impls = vec![Impl {
        name: "rust",
        vector: rust.function("vs_transform")?,
        pipeline: rust.function("acp_bulk_pipeline")?,
    }];
    let cpp_module;
    match cpp_ptx.as_deref().map(std::fs::read_to_string) {
        Some(Ok(text)) => {
            cpp_module = Module::from_ptx(ctx, &text)?;
            impls.push(Impl {
                name: "cpp",
                vector: cpp_module.function("ref_vec_transform")?,
                pipeline: cpp_module.function("ref_bulk_pipeline")?,
            });
        }
        Some(Err(e)) => println!("C++ reference PTX not readable ({e}): Rust only"),
        None => println!("no --cpp-ptx: Rust only"),
    }
    let max_smem =
        max_dynamic_smem(&SWEEP_STAGES, &SWEEP_TILES).max(smem_bytes(pipe.stages, pipe.tile));
    for imp in &impls {
        imp.pipeline.set_max_dynamic_shared_size_bytes(max_smem)?;
    }
    let stream = Stream::new(ctx, StreamFlags::NON_BLOCKING)?;
    let (start, end) = (
        Event::new(ctx, EventFlags::empty())?,
        Event::new(ctx, EventFlags::empty())?,
    );
    let timer = Timer {
        stream: &stream,
        start: &start,
        end: &end,
    };

    // Table: every size, every variant, interleaved round by round.
    let mut csv = String::from("size_gib,variant,impl,median_gbps,min_gbps,max_gbps,fraction\n");
    println!("\npipeline: {}", pipe.describe());
    println!(
        "{:>5}  {:<9} {:<5} {:>9} {:>9} {:>9} {:>8}",
        "GiB", "variant", "impl", "GB/s", "min", "max", "of peak"
    );
    let mut ratios = Vec::new();
    for &gib in sizes {
        let bytes = gib * GIB;
        let mut bufs = match alloc(ctx, &stream, &fill, bytes) {
            Ok(b) => b,
            Err(e) => {
                println!("{gib:>5}  skipped: {e}");
                continue;
            }
        };
        println!("{gib:>5}  {}", settle(&timer, &mut bufs)?);
        let mut samples: Vec<(&str, &str, Vec<f64>)> = Vec::new();
        let mut push = |variant: &'static str, imp: &'static str, gbps: f64| match samples
            .iter_mut()
            .find(|s| s.0 == variant && s.1 == imp)
        {
            Some(s) => s.2.push(gbps),
            None => samples.push((variant, imp, vec![gbps])),
        };
        for round in 0..rounds {
            let ms = timer.time(|| {
                bufs.dst.copy_from_device_async(&bufs.src, &stream)?;
                Ok(())
            })?;
            if round == 0 {
                check(&bufs, false)?;
            }
            push("memcpy", "drv", 2.0 * bytes as f64 / ms / 1e6);
            for imp in &impls {
                let ms = timer.time(|| vector(ctx, &stream, &imp.vector, &bufs))?;
                if round == 0 {
                    check(&bufs, true)?;
                }
                push("vector", imp.name, 2.0 * bytes as f64 / ms / 1e6);
                let ms = timer.time(|| pipeline(ctx, &stream, &imp.pipeline, &bufs, pipe))?;
                if round == 0 {
                    check(&bufs, true)?;
                }
                push("pipeline", imp.name, 2.0 * bytes as f64 / ms / 1e6);
            }
        }
        let mut medians: Vec<(&str, &str, f64)> = Vec::new();
        for (variant, imp) in [
            ("memcpy", "drv"),
            ("vector", "rust"),
            ("vector", "cpp"),
            ("pipeline", "rust"),
            ("pipeline", "cpp"),
        ] {
            let Some(s) = samples.iter_mut().find(|s| s.0 == variant && s.1 == imp) else {
                continue;
            };
            let (m, lo, hi) = stats(&mut s.2);
            medians.push((variant, imp, m));
            println!(
                "{gib:>5}  {variant:<9} {imp:<5} {m:>9.1} {lo:>9.1} {hi:>9.1} {:>8.3}",
                m / peak
            );
            writeln!(
                csv,
                "{gib},{variant},{imp},{m:.2},{lo:.2},{hi:.2},{:.4}",
                m / peak
            )?;
        }
        let med = |variant: &str, imp: &str| {
            medians
                .iter()
                .find(|m| m.0 == variant && m.1 == imp)
                .map(|m| m.2)
        };
        if let (Some(r), Some(c), Some(d)) = (
            med("pipeline", "rust"),
            med("pipeline", "cpp"),
            med("memcpy", "drv"),
        ) {
            ratios.push(format!(
                "{gib:>2} GiB: pipeline rust/cpp {:.3}, rust pipeline / memcpy {:.3}",
                r / c,
                r / d
            ));
        }
        drop(bufs);
    }
    println!();
    for r in &ratios {
        println!("{r}");
    }
    if let Some(path) = &out.csv {
        std::fs::write(path, &csv)?;
        println!("wrote {path}");
    }

    if plan.tune_rounds == 0 && sweep_rounds == 0 {
        return Ok(());
    }
    let mut bufs = alloc(ctx, &stream, &fill, GIB)?;
    println!(
        "\n1 GiB for tuning and the sweep: {}",
        settle(&timer, &mut bufs)?
    );
    engine_probe(ctx, &rust.function("vs_spin")?, &impls[0].vector, &mut bufs)?;
    if plan.tune_rounds > 0 {
        tune(
            ctx,
            &timer,
            &impls,
            &mut bufs,
            plan.tune_rounds,
            max_smem,
            out,
        )?;
    }

    // Sweep: stages x tile size at 1 GiB, both implementations.
    if sweep_rounds > 0 {
        let mut sweep = String::from("impl,stages,tile_bytes,median_gbps\n");
        println!("\nsweep at 1 GiB (GB/s, median of {sweep_rounds}):");
        // Rust and C++ alternate within every configuration.
        let mut table: Vec<(&str, u32, u32, f64)> = Vec::new();
        for &tile in &SWEEP_TILES {
            for &stages in &SWEEP_STAGES {
                if smem_bytes(stages, tile) > max_smem {
                    continue;
                }
                let mut v: Vec<Vec<f64>> = vec![Vec::new(); impls.len()];
                for _ in 0..sweep_rounds {
                    for (i, imp) in impls.iter().enumerate() {
                        let p = Pipe {
                            stages,
                            tile,
                            ..pipe
                        };
                        let ms = timer.time(|| pipeline(ctx, &stream, &imp.pipeline, &bufs, p))?;
                        v[i].push(2.0 * GIB as f64 / ms / 1e6);
                    }
                }
                check(&bufs, true)?;
                for (i, imp) in impls.iter().enumerate() {
                    table.push((imp.name, stages, tile, stats(&mut v[i]).0));
                }
            }
        }
        for imp in &impls {
            println!(
                "{}: rows = tile KiB, columns = stages {SWEEP_STAGES:?}",
                imp.name
            );
            for &tile in &SWEEP_TILES {
                let mut line = format!("  {:>3} KiB", tile >> 10);
                for &stages in &SWEEP_STAGES {
                    match table
                        .iter()
                        .find(|p| p.0 == imp.name && p.1 == stages && p.2 == tile)
                    {
                        Some(p) => {
                            write!(line, " {:>9.1}", p.3)?;
                            writeln!(sweep, "{},{stages},{tile},{:.2}", imp.name, p.3)?;
                        }
                        None => line.push_str("         -"),
                    }
                }
                println!("{line}");
            }
        }
        let points = table;
        if let Some(path) = &out.sweep_csv {
            std::fs::write(path, &sweep)?;
            println!("wrote {path}");
        }
        if let Some(path) = &out.svg {
            std::fs::write(path, svg(&points, peak))?;
            println!("wrote {path}");
        }
    }
    Ok(())
}

/// Dynamic shared memory of the pipeline kernels: the ring, two barriers per stage and
/// 128 bytes to align the ring.
fn smem_bytes(stages: u32, tile: u32) -> u32 {
    stages * tile + 16 * stages + 128
}

/// The largest configuration that fits the opt-in shared memory of sm_90 (227 KiB).
fn max_dynamic_smem(stages: &[u32], tiles: &[u32]) -> u32 {
    let limit = 227 << 10;
    stages
        .iter()
        .flat_map(|&s| tiles.iter().map(move |&t| smem_bytes(s, t)))
        .filter(|&b| b <= limit)
        .max()
        .unwrap_or(limit)
}

/// Times work on the stream with events.
struct Timer<'a> {
    stream: &'a Stream,
    start: &'a Event,
    end: &'a Event,
}

impl Timer<'_> {
    fn time(&self, work: impl FnOnce() -> R) -> R<f64> {
        self.start.record(self.stream)?;
        work()?;
        self.end.record(self.stream)?;
        self.end.synchronize()?;
        Ok(f64::from(Event::elapsed_ms(self.start, self.end)?))
    }
}

/// Source of `bytes` filled in 1 GiB chunks with `fill` (`3 * i + 1` of the index
/// within the chunk), destination zeroed.
fn alloc(ctx: &Context, stream: &Stream, fill: &Function, bytes: u64) -> R<Bufs> {
    let n = usize::try_from(bytes / 4)?;
    let src = DeviceBuffer::<u32>::new(ctx, n)?;
    let dst = DeviceBuffer::<u32>::zeroed(ctx, n)?;
    let chunk = (GIB / 4) as usize;
    let mut off = 0;
    while off < n {
        let len = chunk.min(n - off);
        let ptr = src.as_raw() + (off as u64) * 4;
        // SAFETY: `ptr..ptr + 4 * len` lies in `src`; `fill(out: *mut u32, n: u32)`.
        unsafe {
            launch(
                fill,
                &LaunchConfig::new(4 * ctx.device().multiprocessor_count()?, 256).stream(stream),
                &(ptr, len as u32),
            )?;
        }
        off += len;
    }
    stream.synchronize()?;
    Ok(Bufs { src, dst })
}

fn vector(ctx: &Context, stream: &Stream, f: &Function, b: &Bufs) -> R {
    let n_vec = (b.src.len() / 4) as u64;
    let grid = ctx.device().multiprocessor_count()? * f.max_active_blocks_per_sm(256, 0)?;
    // SAFETY: both buffers hold `n_vec` 16-byte vectors (cuMemAlloc aligns to 256).
    unsafe {
        launch(
            f,
            &LaunchConfig::new(grid, 256).stream(stream),
            &(b.src.as_raw(), b.dst.as_raw(), n_vec),
        )?;
    }
    Ok(())
}

fn pipeline(ctx: &Context, stream: &Stream, f: &Function, b: &Bufs, p: Pipe) -> R {
    let bytes = b.src.size_bytes() as u64;
    let n_tiles = bytes / u64::from(p.tile);
    let block = 32 * (1 + p.consumers);
    let smem = smem_bytes(p.stages, p.tile);
    let per_sm = p.blocks_per_sm(f)?;
    let sms = ctx.device().multiprocessor_count()?;
    let grid = if p.sms == 0 { sms } else { p.sms.min(sms) } * per_sm;
    // SAFETY: `n_tiles * tile` bytes of both buffers (tile divides every size used);
    // block of 1 + consumers warps; dynamic shared memory as the kernel documents.
    unsafe {
        launch(
            f,
            &LaunchConfig::new(grid, block)
                .shared_mem(smem)
                .stream(stream),
            &(
                b.src.as_raw(),
                b.dst.as_raw(),
                n_tiles,
                p.tile,
                p.stages,
                p.flags,
            ),
        )?;
    }
    Ok(())
}

/// Copies for [`SETTLE_MS`] and describes how the rate moved: the first and last 100 ms
/// and when it first reached 97% of the best copy.
fn settle(timer: &Timer, b: &mut Bufs) -> R<String> {
    let bytes = b.src.size_bytes();
    let started = std::time::Instant::now();
    let mut samples: Vec<(f64, f64)> = Vec::new();
    while started.elapsed().as_secs_f64() * 1e3 < SETTLE_MS {
        let at = started.elapsed().as_secs_f64() * 1e3;
        let ms = timer.time(|| {
            b.dst.copy_from_device_async(&b.src, timer.stream)?;
            Ok(())
        })?;
        samples.push((at, 2.0 * bytes as f64 / ms / 1e6));
    }
    let best = samples.iter().map(|s| s.1).fold(0.0, f64::max);
    let mean = |lo: f64, hi: f64| {
        let v: Vec<f64> = samples
            .iter()
            .filter(|s| s.0 >= lo && s.0 < hi)
            .map(|s| s.1)
            .collect();
        v.iter().sum::<f64>() / v.len().max(1) as f64
    };
    let reached = samples
        .iter()
        .find(|s| s.1 >= 0.97 * best)
        .map_or(f64::NAN, |s| s.0);
    Ok(format!(
        "settled with {} copies over {SETTLE_MS:.0} ms: first 100 ms {:.0} GB/s, last 100 ms \
         {:.0} GB/s, 97% of the best ({best:.0}) first at {reached:.0} ms",
        samples.len(),
        mean(0.0, 100.0),
        mean(SETTLE_MS - 100.0, SETTLE_MS + 1e9),
    ))
}

/// Whether a copy needs the SMs: every SM is filled with spinning threads for 50 ms on
/// one stream while the copy (then, as a control, the vector kernel) runs on another.
/// Work that needs an SM can only finish after the spin; a copy engine's can finish
/// during it.
fn engine_probe(ctx: &Context, spin: &Function, vector_fn: &Function, bufs: &mut Bufs) -> R {
    const SPIN_NS: u64 = 50_000_000;
    let a = Stream::new(ctx, StreamFlags::NON_BLOCKING)?;
    let b = Stream::new(ctx, StreamFlags::NON_BLOCKING)?;
    let flag = DeviceBuffer::<u32>::zeroed(ctx, 1)?;
    let per_sm = spin.max_active_blocks_per_sm(1024, 0)?.max(1);
    let grid = ctx.device().multiprocessor_count()? * per_sm;
    let ev = || Event::new(ctx, EventFlags::empty());
    let (a0, a1, b1) = (ev()?, ev()?, ev()?);
    println!(
        "\nwho runs the copy: {grid} blocks of 1024 threads ({per_sm} per SM) spin for \
         {} ms on one stream, the work runs on another",
        SPIN_NS / 1_000_000
    );
    for what in ["cuMemcpyDtoD", "vector kernel"] {
        a0.record(&a)?;
        // SAFETY: vs_spin(ns, out): `flag` holds one u32.
        unsafe {
            launch(
                spin,
                &LaunchConfig::new(grid, 1024).stream(&a),
                &(SPIN_NS, flag.as_raw()),
            )?;
        }
        a1.record(&a)?;
        if what == "cuMemcpyDtoD" {
            bufs.dst.copy_from_device_async(&bufs.src, &b)?;
        } else {
            vector(ctx, &b, vector_fn, bufs)?;
        }
        b1.record(&b)?;
        b1.synchronize()?;
        a1.synchronize()?;
        let spin_end = Event::elapsed_ms(&a0, &a1)?;
        let work_end = Event::elapsed_ms(&a0, &b1)?;
        println!(
            "  {what:<13} ended {work_end:7.2} ms after the spin started; the spin ended at \
             {spin_end:.2} ms: {}",
            if work_end < spin_end {
                "it ran beside the spinning SMs (no SM needed)"
            } else {
                "it waited for the SMs"
            }
        );
    }
    check(bufs, true)?;
    Ok(())
}

/// Pipeline shapes around the default, both implementations alternating, at 1 GiB:
/// prints every shape sorted by the Rust median, best first.
fn tune(
    ctx: &Context,
    timer: &Timer,
    impls: &[Impl],
    bufs: &mut Bufs,
    rounds: usize,
    max_smem: u32,
    out: &Outputs,
) -> R {
    let mut shapes = Vec::new();
    for (stages, tile) in [(4, 16 << 10), (8, 16 << 10), (4, 32 << 10), (6, 32 << 10)] {
        for consumers in [2, 4, 8] {
            for flags in [
                0,
                BULK_STORE,
                CONTIGUOUS,
                BULK_STORE | CONTIGUOUS,
                LOAD_EVICT_FIRST | STORE_EVICT_FIRST | CONTIGUOUS,
            ] {
                for per_sm in [0, 1] {
                    let p = Pipe {
                        stages,
                        tile,
                        consumers,
                        flags,
                        per_sm,
                        sms: 0,
                    };
                    if smem_bytes(stages, tile) <= max_smem {
                        shapes.push(p);
                    }
                }
            }
        }
    }
    // Fewer blocks than SMs: fewer streams at once in DRAM.
    for sms in [33, 66, 99, 116, 124] {
        shapes.push(Pipe {
            sms,
            per_sm: 1,
            ..TABLE_PIPE
        });
    }
    println!(
        "\ntuning at 1 GiB: {} shapes, median of {rounds}, Rust and C++ alternating",
        shapes.len()
    );
    let mut rows: Vec<(Pipe, u32, Vec<f64>)> = Vec::new();
    let mut copy = Vec::new();
    for p in shapes {
        let per_sm = p.blocks_per_sm(&impls[0].pipeline)?;
        let mut v: Vec<Vec<f64>> = vec![Vec::new(); impls.len()];
        for _ in 0..rounds {
            for (i, imp) in impls.iter().enumerate() {
                let ms = timer.time(|| pipeline(ctx, timer.stream, &imp.pipeline, bufs, p))?;
                v[i].push(2.0 * GIB as f64 / ms / 1e6);
            }
        }
        check(bufs, true)?;
        let ms = timer.time(|| {
            bufs.dst.copy_from_device_async(&bufs.src, timer.stream)?;
            Ok(())
        })?;
        copy.push(2.0 * GIB as f64 / ms / 1e6);
        let meds: Vec<f64> = v.iter_mut().map(|x| stats(x).0).collect();
        rows.push((p, per_sm, meds));
    }
    rows.sort_by(|a, b| b.2[0].total_cmp(&a.2[0]));
    let (copy_med, copy_lo, copy_hi) = stats(&mut copy);
    println!(
        "  cuMemcpyDtoD between the shapes: median {copy_med:.1}, min {copy_lo:.1}, max \
         {copy_hi:.1} GB/s"
    );
    println!(
        "  {:>9} {:>9} {:>6}  {:>3}  shape",
        "rust", "cpp", "r/c", "bps"
    );
    let mut csv =
        String::from("stages,tile_bytes,consumers,flags,blocks_per_sm,sms,rust_gbps,cpp_gbps\n");
    for (p, per_sm, meds) in &rows {
        let rust = meds[0];
        let cpp = meds.get(1).copied().unwrap_or(f64::NAN);
        println!(
            "  {rust:>9.1} {cpp:>9.1} {:>6.3}  {per_sm:>3}  {}",
            rust / cpp,
            p.describe()
        );
        writeln!(
            csv,
            "{},{},{},{},{per_sm},{},{rust:.2},{cpp:.2}",
            p.stages, p.tile, p.consumers, p.flags, p.sms
        )?;
    }
    if let Some(path) = &out.tune_csv {
        std::fs::write(path, &csv)?;
        println!("wrote {path}");
    }
    Ok(())
}

/// Checks 64 KiB windows at the start, middle and end of the buffers: `dst == src`
/// (`transformed == false`) or `dst == src * 3 + 1`, with `src` the chunked fill
/// pattern. Clears the windows of `dst` afterwards so the next variant is checked
/// afresh.
fn check(b: &Bufs, transformed: bool) -> R {
    let n = b.src.len();
    let w = 16 << 10;
    let chunk = (GIB / 4) as usize;
    for start in [0, n / 2 - w / 2, n - w] {
        let mut got = vec![0u32; w];
        let bytes = (w * 4) as u64;
        let ptr = b.dst.as_raw() + (start as u64) * 4;
        let cu = cudadrv::cuda_sys::driver()?;
        b.dst.context().bind()?;
        // SAFETY: the window lies in `dst`; the host slice holds `w` u32s; the buffer's
        // context is current.
        let rc = unsafe { (cu.cuMemcpyDtoH()?)(got.as_mut_ptr().cast(), ptr, bytes as usize) };
        if rc != CUresult::CUDA_SUCCESS {
            return Err(format!("cuMemcpyDtoH: {rc}").into());
        }
        for (k, &g) in got.iter().enumerate() {
            let i = start + k;
            let s = 3u32.wrapping_mul((i % chunk) as u32).wrapping_add(1);
            let want = if transformed {
                s.wrapping_mul(3).wrapping_add(1)
            } else {
                s
            };
            if g != want {
                return Err(format!(
                    "dst[{i}] = {g}, expected {want} ({})",
                    if transformed { "src * 3 + 1" } else { "copy" }
                )
                .into());
            }
        }
        // SAFETY: the window lies in `dst`.
        let rc = unsafe { (cu.cuMemsetD8()?)(ptr, 0, bytes as usize) };
        if rc != CUresult::CUDA_SUCCESS {
            return Err(format!("cuMemsetD8: {rc}").into());
        }
    }
    Ok(())
}

/// GB/s against stage count, one line per tile size and implementation (solid Rust,
/// dashed C++), as a standalone SVG.
fn svg(points: &[(&str, u32, u32, f64)], peak: f64) -> String {
    let (w, h, ml, mr, mt, mb) = (720.0, 420.0, 70.0, 170.0, 40.0, 50.0);
    let xmax = f64::from(*SWEEP_STAGES.iter().max().unwrap_or(&8));
    let ymax = (peak / 500.0).ceil() * 500.0;
    let x = |s: f64| ml + (s - 1.0) / (xmax - 1.0) * (w - ml - mr);
    let y = |g: f64| h - mb - g / ymax * (h - mt - mb);
    let colors = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd"];
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" \
         font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" \
         fill=\"white\"/>\n<text x=\"{ml}\" y=\"24\" font-size=\"14\">Bulk-copy pipeline, 1 GiB \
         read + 1 GiB written: GB/s by ring stages and tile size</text>\n"
    );
    let _ = writeln!(
        s,
        "<line x1=\"{ml}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>",
        h - mb,
        w - mr,
        h - mb
    );
    let _ = writeln!(
        s,
        "<line x1=\"{ml}\" y1=\"{mt}\" x2=\"{ml}\" y2=\"{}\" stroke=\"black\"/>",
        h - mb
    );
    let mut g = 0.0;
    while g <= ymax {
        let _ = writeln!(
            s,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{g:.0}</text><line x1=\"{ml}\" \
             y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#ddd\"/>",
            ml - 6.0,
            y(g) + 4.0,
            y(g),
            w - mr,
            y(g)
        );
        g += 500.0;
    }
    let _ = writeln!(
        s,
        "<line x1=\"{ml}\" y1=\"{0}\" x2=\"{1}\" y2=\"{0}\" stroke=\"gray\" \
         stroke-dasharray=\"2,3\"/><text x=\"{2}\" y=\"{3}\" fill=\"gray\">theoretical \
         {peak:.0}</text>",
        y(peak),
        w - mr,
        w - mr + 4.0,
        y(peak) + 4.0
    );
    for &st in &SWEEP_STAGES {
        let _ = writeln!(
            s,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{st}</text>",
            x(f64::from(st)),
            h - mb + 16.0
        );
    }
    let _ = writeln!(
        s,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">stages</text>",
        (ml + w - mr) / 2.0,
        h - 10.0
    );
    let _ = writeln!(
        s,
        "<text x=\"16\" y=\"{}\" transform=\"rotate(-90 16 {})\" \
         text-anchor=\"middle\">GB/s</text>",
        (mt + h - mb) / 2.0,
        (mt + h - mb) / 2.0
    );
    let mut legend = 0.0;
    for (ti, &tile) in SWEEP_TILES.iter().enumerate() {
        let color = colors[ti % colors.len()];
        for imp in ["rust", "cpp"] {
            let pts: Vec<String> = points
                .iter()
                .filter(|p| p.0 == imp && p.2 == tile)
                .map(|p| format!("{:.1},{:.1}", x(f64::from(p.1)), y(p.3)))
                .collect();
            if pts.is_empty() {
                continue;
            }
            let dash = if imp == "cpp" {
                " stroke-dasharray=\"6,4\""
            } else {
                ""
            };
            let _ = writeln!(
                s,
                "<polyline points=\"{}\" fill=\"none\" stroke=\"{color}\" \
                 stroke-width=\"2\"{dash}/>",
                pts.join(" ")
            );
            let ly = mt + 10.0 + legend * 18.0;
            let _ = writeln!(
                s,
                "<line x1=\"{0}\" y1=\"{ly}\" x2=\"{1}\" y2=\"{ly}\" stroke=\"{color}\" \
                 stroke-width=\"2\"{dash}/><text x=\"{2}\" y=\"{3}\">{4} KiB, {imp}</text>",
                w - mr + 10.0,
                w - mr + 34.0,
                w - mr + 40.0,
                ly + 4.0,
                tile >> 10
            );
            legend += 1.0;
        }
    }
    s.push_str("</svg>\n");
    s
}
