//! Device graph launch benchmark (Programming Guide 4.2.6), interleaved in one process
//! with a CUDA C++ reference of the same kernels (xtask/cpp/devgraph_ref.cu, built by
//! `nvcc -rdc=true -ptx` and linked with `libcudadevrt.a` like the Rust `devrt.ptx`).
//!
//! Per-launch latency of a one-kernel graph, from `%globaltimer` stamps:
//! - `host gap`: the same graph launched back to back from the host (instantiated
//!   without device launch): the gap from one run's end to the next run's start;
//! - `tail gap`: the graph tail-launching itself from the device (`dg_tick`);
//! - `fire-and-forget`: from the launching kernel's stamp before `cudaGraphLaunch` to
//!   the launched graph's first stamp.
//!
//! A chain of 256 dependent kernels (`data[i] += 1` over 33792 elements, grid 132 x 256),
//! us per kernel from events around the whole chain:
//! - `stream`: 256 stream launches and `graph`: one captured graph of 256 kernel nodes,
//!   of `dg_chain_plain` (a kernel that calls `cudaGraphLaunch` cannot be launched into
//!   a stream);
//! - `host graph x256`: a one-kernel graph of `dg_chain_link` launched 256 times from
//!   the host;
//! - `device relaunch`: that graph launched once, relaunching itself 255 times.
//!
//! Usage: `devgraph_bench [--cpp-ptx devgraph_ref.ptx] [--rounds N] [--csv FILE]`.
//! Results are checked (the chain's data, every relaunch code); speed is reported, not
//! asserted.

mod common;

use std::io::Write as _;

use common::{R, gpu_or_exit, stats};
use cudadrv::graph::{CaptureMode, Graph, GraphExec, InstantiateFlags};
use cudadrv::launch::{LaunchConfig, launch};
use cudadrv::{
    Context, DeviceBuffer, Event, EventFlags, Function, JitOptions, Linker, Module, Stream,
    StreamFlags,
};

const LINKS: u32 = 256;
const N: u32 = 132 * 256;
const TICKS: u32 = 64;
const W: usize = 8;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let opt = |name: &str| common::arg_value(&args, name);
    let rounds: usize = opt("--rounds").and_then(|r| r.parse().ok()).unwrap_or(20);
    let ctx = gpu_or_exit("devgraph_bench");
    if let Err(e) = run(&ctx, opt("--cpp-ptx"), rounds, opt("--csv")) {
        eprintln!("devgraph_bench: error: {e}");
        std::process::exit(1);
    }
}

/// `ptx` linked with `libcudadevrt.a`.
fn link(ctx: &Context, ptx: &str, name: &str) -> R<Module> {
    let lib =
        cuda_workspace::cudadevrt_path().ok_or("libcudadevrt.a not found (set CUDA_DEVRT_LIB)")?;
    let mut linker = Linker::new(ctx, JitOptions::default())?;
    linker.add_ptx(ptx, name)?;
    linker.add_library_file(lib.to_str().ok_or("libcudadevrt.a path is not UTF-8")?)?;
    Ok(linker.into_module()?)
}

/// The kernels of one implementation (Rust or C++).
struct Impl {
    name: &'static str,
    tick: Function,
    chain: Function,
    plain: Function,
}

/// Per-round samples of one row.
#[derive(Default)]
struct Rows(Vec<(String, String, &'static str, Vec<f64>)>);

impl Rows {
    fn push(&mut self, imp: &str, case: &str, unit: &'static str, v: f64) {
        match self.0.iter_mut().find(|r| r.0 == imp && r.1 == case) {
            Some(r) => r.3.push(v),
            None => self.0.push((imp.into(), case.into(), unit, vec![v])),
        }
    }
}

fn run(ctx: &Context, cpp_ptx: Option<String>, rounds: usize, csv: Option<String>) -> R {
    let dev = ctx.device();
    println!(
        "devgraph_bench: {} (sm_{}{}), driver {}",
        dev.name()?,
        dev.compute_capability()?.0,
        dev.compute_capability()?.1,
        cudadrv::driver::driver_version()?
    );
    let rust = link(ctx, cuda_workspace::ptx::DEVRT, "devrt.ptx")?;
    let launcher = rust.function("dg_launch")?;
    let record = rust.function("dg_record")?;
    let mut impls = vec![Impl {
        name: "rust",
        tick: rust.function("dg_tick")?,
        chain: rust.function("dg_chain_link")?,
        plain: rust.function("dg_chain_plain")?,
    }];
    let cpp_module;
    match cpp_ptx.as_deref().map(std::fs::read_to_string) {
        Some(Ok(text)) => {
            cpp_module = link(ctx, &text, "devgraph_ref.ptx")?;
            impls.push(Impl {
                name: "cpp",
                tick: cpp_module.function("cpp_dg_tick")?,
                chain: cpp_module.function("cpp_dg_chain_link")?,
                plain: cpp_module.function("cpp_dg_chain_plain")?,
            });
        }
        Some(Err(e)) => println!("C++ reference PTX not readable ({e}): Rust only"),
        None => println!("no --cpp-ptx: Rust only"),
    }
    let stream = Stream::new(ctx, StreamFlags::NON_BLOCKING)?;
    let mut rows = Rows::default();
    for round in 0..rounds {
        for imp in &impls {
            let tail = tick_gaps(ctx, &stream, &imp.tick, true)?;
            rows.push(imp.name, "tail gap", "us", tail);
            let host = tick_gaps(ctx, &stream, &imp.tick, false)?;
            rows.push(imp.name, "host gap", "us", host);
            for (case, us) in chains(ctx, &stream, &imp.chain, &imp.plain)? {
                rows.push(imp.name, case, "us/kernel", us);
            }
        }
        let ff = fire_and_forget_latency(ctx, &stream, &launcher, &record)?;
        rows.push("rust", "fire-and-forget", "us", ff);
        if round == 0 {
            println!("round 0 done (every result checked)");
        }
    }
    println!(
        "\n{:<6} {:<22} {:>10} {:>10} {:>10}  unit",
        "impl", "case", "median", "min", "max"
    );
    let mut out = String::from("impl,case,unit,median,min,max,rounds\n");
    let mut medians = Vec::new();
    for (imp, case, unit, v) in &mut rows.0 {
        let (med, lo, hi) = stats(v);
        println!("{imp:<6} {case:<22} {med:>10.3} {lo:>10.3} {hi:>10.3}  {unit}");
        out.push_str(&format!(
            "{imp},{case},{unit},{med:.4},{lo:.4},{hi:.4},{}\n",
            v.len()
        ));
        medians.push((imp.clone(), case.clone(), med));
    }
    let med = |imp: &str, case: &str| {
        medians
            .iter()
            .find(|m| m.0 == imp && m.1 == case)
            .map(|m| m.2)
    };
    println!();
    for case in ["tail gap", "host gap", "device relaunch", "host graph x256"] {
        if let (Some(r), Some(c)) = (med("rust", case), med("cpp", case)) {
            println!("ratio rust/cpp {case:<18} {:.3}", r / c);
        }
    }
    if let (Some(d), Some(h)) = (
        med("rust", "device relaunch"),
        med("rust", "host graph x256"),
    ) {
        println!("device relaunch / host graph launches (Rust): {:.3}", d / h);
    }
    if let Some(path) = csv {
        std::fs::File::create(&path)?.write_all(out.as_bytes())?;
        println!("wrote {path}");
    }
    Ok(())
}

/// A one-node graph of `f` with `args`, on a grid of `grid` x `block`.
fn one_node<'a, A: cudadrv::args::KernelArgs>(
    ctx: &Context,
    f: &'a Function,
    grid: u32,
    block: u32,
    args: &A,
) -> R<Graph<'a>> {
    let g = Graph::new(ctx)?;
    // SAFETY: the callers pass `f`'s parameter types, pointing at buffers that outlive
    // every launch of the graph (each function synchronizes before returning).
    unsafe { g.add_kernel_node(&[], f, &LaunchConfig::new(grid, block), args)? };
    Ok(g)
}

/// The median gap (us) between consecutive runs of a `tick` graph: relaunching itself
/// from the device (`device`), or launched back to back from the host without device
/// launch (then its relaunch call fails, as checked).
fn tick_gaps(ctx: &Context, stream: &Stream, tick: &Function, device: bool) -> R<f64> {
    let recs = DeviceBuffer::<u64>::zeroed(ctx, W * TICKS as usize)?;
    let count = DeviceBuffer::<u32>::zeroed(ctx, 1)?;
    let g = one_node(ctx, tick, 1, 1, &(recs.as_arg(), count.as_arg(), TICKS))?;
    if device {
        let exec = g.instantiate_for_device(stream)?;
        exec.launch(stream)?;
    } else {
        let exec = g.instantiate(InstantiateFlags::empty())?;
        exec.upload(stream)?;
        for _ in 0..TICKS {
            exec.launch(stream)?;
        }
    }
    stream.synchronize()?;
    let mut c = [0u32];
    count.copy_to_host(&mut c)?;
    if c[0] != TICKS {
        return Err(format!("tick ran {} times, expected {TICKS}", c[0]).into());
    }
    let mut r = vec![0u64; recs.len()];
    recs.copy_to_host(&mut r)?;
    let mut gaps = Vec::new();
    for k in 0..TICKS as usize {
        let w = &r[k * W..(k + 1) * W];
        let code = w[6];
        let want_ok = device && k + 1 < TICKS as usize;
        if want_ok && code != 0 {
            return Err(format!("relaunch {k} returned {code}").into());
        }
        if k > 0 {
            gaps.push((w[0] as f64 - r[(k - 1) * W + 1] as f64) / 1e3);
        }
    }
    Ok(stats(&mut gaps).0)
}

/// The four 256-link chains: `plain` (no relaunch code: a kernel that calls
/// `cudaGraphLaunch` cannot be launched into a stream) for the stream and captured-graph
/// chains, `chain` for the host-launched and self-relaunching one-kernel graphs;
/// (case, us per kernel), each result checked.
fn chains(
    ctx: &Context,
    stream: &Stream,
    chain: &Function,
    plain: &Function,
) -> R<Vec<(&'static str, f64)>> {
    let init: Vec<u32> = (0..N).collect();
    let data = DeviceBuffer::from_slice(ctx, &init)?;
    let zero = DeviceBuffer::<u32>::zeroed(ctx, 1)?;
    let mut remaining = DeviceBuffer::<u32>::zeroed(ctx, 1)?;
    let (t0, t1) = (
        Event::new(ctx, EventFlags::empty())?,
        Event::new(ctx, EventFlags::empty())?,
    );
    let time = |body: &dyn Fn() -> R| -> R<f64> {
        t0.record(stream)?;
        body()?;
        t1.record(stream)?;
        stream.synchronize()?;
        Ok(f64::from(Event::elapsed_ms(&t0, &t1)?) * 1e3 / f64::from(LINKS))
    };
    let cfg = LaunchConfig::new(132, 256).stream(stream);
    let mut out = Vec::new();
    let mut expect = 0u32;

    // 256 stream launches (remaining = 0: no relaunch).
    out.push((
        "stream",
        time(&|| {
            for _ in 0..LINKS {
                // SAFETY: plain(data, n); `data` outlives the synchronize.
                unsafe { launch(plain, &cfg, &(data.as_arg(), N))? };
            }
            Ok(())
        })?,
    ));
    expect += LINKS;

    // One captured graph of 256 kernel nodes.
    let mut cap_stream = Stream::new(ctx, StreamFlags::NON_BLOCKING)?;
    let graph = {
        let cap = cap_stream.begin_capture(CaptureMode::ThreadLocal)?;
        let ccfg = LaunchConfig::new(132, 256);
        for _ in 0..LINKS {
            // SAFETY: as above; the graph is launched before the buffers are dropped.
            unsafe { cap.launch(plain, &ccfg, &(data.as_arg(), N))? };
        }
        cap.end()?
    };
    let exec: GraphExec<'_> = graph.instantiate(InstantiateFlags::empty())?;
    exec.upload(stream)?;
    out.push(("graph", time(&|| Ok(exec.launch(stream)?))?));
    expect += LINKS;

    // A one-kernel graph launched 256 times from the host.
    let small = one_node(ctx, chain, 132, 256, &(data.as_arg(), N, zero.as_arg()))?;
    let small_exec = small.instantiate(InstantiateFlags::empty())?;
    small_exec.upload(stream)?;
    out.push((
        "host graph x256",
        time(&|| {
            for _ in 0..LINKS {
                small_exec.launch(stream)?;
            }
            Ok(())
        })?,
    ));
    expect += LINKS;

    // The same graph, device-launchable, launched once and relaunching itself.
    let relaunch = one_node(
        ctx,
        chain,
        132,
        256,
        &(data.as_arg(), N, remaining.as_arg()),
    )?;
    let relaunch_exec = relaunch.instantiate_for_device(stream)?;
    remaining.copy_from_host(&[LINKS])?;
    out.push((
        "device relaunch",
        time(&|| Ok(relaunch_exec.launch(stream)?))?,
    ));
    expect += LINKS;

    let mut rem = [0u32];
    remaining.copy_to_host(&mut rem)?;
    if rem[0] != 0 {
        return Err(format!("device relaunch chain left remaining = {:#x}", rem[0]).into());
    }
    let mut got = vec![0u32; N as usize];
    data.copy_to_host(&mut got)?;
    if let Some(i) = (0..N as usize).find(|&i| got[i] != i as u32 + expect) {
        return Err(format!(
            "chain data[{i}] = {}, expected {}",
            got[i],
            i as u32 + expect
        )
        .into());
    }
    Ok(out)
}

/// Latency (us) from the launching kernel's stamp before `cudaGraphLaunch` to the first
/// stamp of the fire-and-forget graph it launches.
fn fire_and_forget_latency(
    ctx: &Context,
    stream: &Stream,
    launcher: &Function,
    record: &Function,
) -> R<f64> {
    let l_rec = DeviceBuffer::<u64>::zeroed(ctx, W)?;
    let c_rec = DeviceBuffer::<u64>::zeroed(ctx, W)?;
    let child = one_node(ctx, record, 1, 1, &(c_rec.as_arg(), 0u64))?;
    let child = child.instantiate_for_device(stream)?;
    let h = child.device_handle()?.as_u64();
    let g = one_node(ctx, launcher, 1, 1, &(l_rec.as_arg(), 0u64, h, 0u64, 0u64))?;
    let exec = g.instantiate(InstantiateFlags::empty())?;
    exec.launch(stream)?;
    stream.synchronize()?;
    let (mut l, mut c) = ([0u64; W], [0u64; W]);
    l_rec.copy_to_host(&mut l)?;
    c_rec.copy_to_host(&mut c)?;
    if l[4] != 0 || c[3] != 1 {
        return Err(format!("fire-and-forget launch: code {}, child ran {}", l[4], c[3]).into());
    }
    Ok((c[0] as f64 - l[0] as f64) / 1e3)
}
