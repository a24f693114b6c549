//! NCCL all-reduce bus bandwidth through `cudadrv::nccl`, steady state, as nccl-tests
//! defines it (`busbw = bytes / time * 2 (n - 1) / n`, float32 sum), from 8 MiB to
//! 1 GiB per rank; compared in the same run (by `run.sh`) with the same NCCL
//! calls from CUDA C++ (`xtask/cpp/nccl_ref.cu`) and with PyTorch's `all_reduce`
//! (`examples/nccl_torch.py`).
//!
//! - default: one process drives every GPU (`Comm::init_all`, one group per iteration),
//!   out of place, as the C++ reference does;
//! - `--procs`: one rank per process (this binary spawns the others, the unique id in an
//!   environment variable), in place, as PyTorch runs and calls it;
//! - `--graph`: one rank per thread; a step is kernel, all-reduce, kernel, issued on the
//!   stream or replayed as one captured graph, timed both ways.
//!
//! Usage: `nccl_bench [--procs | --graph] [--min-bytes B] [--max-bytes B] [--warmup W]
//! [--iters I] [--csv FILE] [--nonblocking]`. `NCCL_NVLS_ENABLE=0` is set for this process and its
//! children. Without a GPU or without NCCL it says so and exits 0.

mod common;

use std::io::Write as _;
use std::process::Command;
use std::time::Duration;

use common::{R, arg_value, exit_no_gpu};
use cuda_workspace::Kernels;
use cudadrv::graph::{CaptureMode, InstantiateFlags};
use cudadrv::launch::LaunchConfig;
use cudadrv::nccl::{self, Comm, Config, ReduceOp, UniqueId};
use cudadrv::{Context, Device, DeviceBuffer, Event, EventFlags, Stream};

const CHILD: &str = "NCCL_BENCH_CHILD";

struct Args {
    min: usize,
    max: usize,
    warmup: usize,
    iters: usize,
    csv: Option<String>,
    procs: bool,
    graph: bool,
    nonblocking: bool,
}

fn parse() -> Args {
    let v: Vec<String> = std::env::args().skip(1).collect();
    let num = |flag: &str, default: usize| {
        arg_value(&v, flag)
            .and_then(|n| n.parse().ok())
            .unwrap_or(default)
    };
    Args {
        min: num("--min-bytes", 8 << 20),
        max: num("--max-bytes", 1 << 30),
        warmup: num("--warmup", 5),
        iters: num("--iters", 20),
        csv: arg_value(&v, "--csv"),
        procs: v.iter().any(|a| a == "--procs"),
        graph: v.iter().any(|a| a == "--graph"),
        nonblocking: v.iter().any(|a| a == "--nonblocking"),
    }
}

fn main() {
    // SAFETY: the first statement of `main`, before any other thread exists.
    unsafe { std::env::set_var("NCCL_NVLS_ENABLE", "0") };
    let args = parse();
    if let Ok(spec) = std::env::var(CHILD) {
        if let Err(e) = child(&spec, &args) {
            eprintln!("nccl_bench child: {e}");
            std::process::exit(1);
        }
        return;
    }
    let gpus = match Device::count() {
        Ok(0) => exit_no_gpu("nccl_bench", "the driver reports no device"),
        Ok(n) => n,
        Err(e) => exit_no_gpu("nccl_bench", e),
    };
    let version = match nccl::version() {
        Ok(v) => v,
        Err(e @ cudadrv::Error::Load(_)) => {
            println!("nccl_bench: {e}; nothing was run.");
            return;
        }
        Err(e) => {
            eprintln!("nccl_bench: error: {e}");
            std::process::exit(1);
        }
    };
    let mode = if args.procs {
        "procs"
    } else if args.graph {
        "graph"
    } else {
        "threads"
    };
    let mode = format!(
        "{mode}{}",
        if args.nonblocking {
            ", non-blocking"
        } else {
            ""
        }
    );
    println!(
        "nccl_bench: NCCL {}.{}.{}, {gpus} GPU(s), mode {mode}",
        version / 10000,
        version / 100 % 100,
        version % 100
    );
    let r = if args.graph {
        graph_mode(gpus, &args)
    } else if args.procs {
        procs_mode(gpus, &args)
    } else {
        threads_mode(gpus, &args)
    };
    if let Err(e) = r {
        eprintln!("nccl_bench: error: {e}");
        std::process::exit(1);
    }
}

/// Blocking communicators (NCCL's own default, what the C++ reference and PyTorch use)
/// unless `--nonblocking`.
fn config(a: &Args) -> Config {
    let mut c = Config::default();
    c.blocking = !a.nonblocking;
    c
}

fn sizes(a: &Args) -> Vec<usize> {
    let mut v = Vec::new();
    let mut s = a.min.max(4);
    while s <= a.max {
        v.push(s);
        s *= 2;
    }
    v
}

fn report(a: &Args, rows: &[(usize, f64)], ranks: usize, label: &str) -> R {
    let mut csv = match &a.csv {
        Some(path) => {
            let fresh = !std::path::Path::new(path).exists();
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)?;
            if fresh {
                writeln!(f, "impl,ranks,bytes,time_us,algbw_gbs,busbw_gbs")?;
            }
            Some(f)
        }
        None => None,
    };
    for &(bytes, us) in rows {
        let algbw = bytes as f64 / (us * 1e-6) / 1e9;
        let busbw = algbw * 2.0 * (ranks as f64 - 1.0) / ranks as f64;
        println!("size={bytes} time_us={us:.2} algbw={algbw:.2} busbw={busbw:.2}");
        if let Some(f) = csv.as_mut() {
            writeln!(f, "{label},{ranks},{bytes},{us:.3},{algbw:.3},{busbw:.3}")?;
        }
    }
    Ok(())
}

/// One process, every GPU: `init_all`, a group per iteration; the time of a size is the
/// slowest GPU's (events on each stream) over `iters` iterations.
fn threads_mode(gpus: usize, a: &Args) -> R {
    let ctxs: Vec<Context> = (0..gpus)
        .map(|d| Context::primary(Device::get(d)?))
        .collect::<Result<_, _>>()?;
    let comms = Comm::init_all(&ctxs, &config(a))?;
    let streams: Vec<Stream> = ctxs
        .iter()
        .map(Stream::non_blocking)
        .collect::<Result<_, _>>()?;
    let count_max = a.max / 4;
    let sends: Vec<DeviceBuffer<f32>> = ctxs
        .iter()
        .map(|c| DeviceBuffer::from_slice(c, &vec![1.0f32; count_max]))
        .collect::<Result<_, _>>()?;
    let mut recvs: Vec<DeviceBuffer<f32>> = ctxs
        .iter()
        .map(|c| DeviceBuffer::zeroed(c, count_max))
        .collect::<Result<_, _>>()?;
    let starts: Vec<Event> = ctxs
        .iter()
        .map(|c| Event::new(c, EventFlags::empty()))
        .collect::<Result<_, _>>()?;
    let ends: Vec<Event> = ctxs
        .iter()
        .map(|c| Event::new(c, EventFlags::empty()))
        .collect::<Result<_, _>>()?;
    let mut rows = Vec::new();
    for bytes in sizes(a) {
        let n = bytes / 4;
        let step = |recvs: &mut [DeviceBuffer<f32>]| group_step(&comms, &sends, recvs, &streams, n);
        for _ in 0..a.warmup {
            step(&mut recvs)?;
        }
        for (c, s) in comms.iter().zip(&streams) {
            c.synchronize(s)?;
        }
        for (e, s) in starts.iter().zip(&streams) {
            e.record(s)?;
        }
        for _ in 0..a.iters {
            step(&mut recvs)?;
        }
        for (e, s) in ends.iter().zip(&streams) {
            e.record(s)?;
        }
        for (c, s) in comms.iter().zip(&streams) {
            c.synchronize(s)?;
        }
        let mut ms = 0f32;
        for (s, e) in starts.iter().zip(&ends) {
            ms = ms.max(Event::elapsed_ms(s, e)?);
        }
        rows.push((bytes, ms as f64 * 1e3 / a.iters as f64));
    }
    report(a, &rows, gpus, "rust")
}

/// One all-reduce of the first `n` elements on every rank, as one group.
fn group_step(
    comms: &[Comm],
    sends: &[DeviceBuffer<f32>],
    recvs: &mut [DeviceBuffer<f32>],
    streams: &[Stream],
    n: usize,
) -> cudadrv::Result<()> {
    nccl::group(|g| {
        for (r, recv) in recvs.iter_mut().enumerate() {
            g.all_reduce(
                &comms[r],
                sends[r].slice(..n)?,
                recv.slice_mut(..n)?,
                ReduceOp::Sum,
                &streams[r],
            )?;
        }
        Ok(())
    })
}

/// One rank of `--procs`: `rank,n,id`.
fn child(spec: &str, a: &Args) -> R {
    let mut p = spec.splitn(3, ',');
    let (Some(rank), Some(n), Some(id)) = (p.next(), p.next(), p.next()) else {
        return Err("bad child spec".into());
    };
    let (rank, n): (usize, usize) = (rank.parse()?, n.parse()?);
    rank_sweep(rank, n, &UniqueId::from_hex(id)?, a).map(drop)
}

/// One rank process per GPU: rank 0 here, the others spawned.
fn procs_mode(gpus: usize, a: &Args) -> R {
    if gpus < 2 {
        println!("nccl_bench: --procs needs 2 GPUs (found {gpus}); nothing was run.");
        return Ok(());
    }
    let id = UniqueId::new()?;
    let exe = std::env::current_exe()?;
    let mut children = Vec::new();
    for r in 1..gpus {
        children.push(
            Command::new(&exe)
                .args(std::env::args().skip(1).filter(|x| x != "--csv"))
                .env(CHILD, format!("{r},{gpus},{}", id.to_hex()))
                .env("NCCL_NVLS_ENABLE", "0")
                .spawn()?,
        );
    }
    let rows = rank_sweep(0, gpus, &id, a);
    for mut c in children {
        let st = c.wait()?;
        if !st.success() {
            return Err(format!("a rank process exited with {st}").into());
        }
    }
    report(a, &rows?, gpus, "rust-procs")
}

/// One rank's sweep of in-place all-reduces (what PyTorch's `all_reduce` does, which
/// `--procs` is compared with); each size's time is the slowest rank's (an all-reduce of
/// the times with `Max`).
fn rank_sweep(
    rank: usize,
    n: usize,
    id: &UniqueId,
    a: &Args,
) -> Result<Vec<(usize, f64)>, Box<dyn std::error::Error>> {
    let ctx = Context::primary(Device::get(rank)?)?;
    let comm = Comm::init_rank(&ctx, id, n, rank, &config(a))?;
    let stream = Stream::non_blocking(&ctx)?;
    let count_max = a.max / 4;
    // In place, as PyTorch's `all_reduce` (the values double per call and reach
    // infinity over the sweep; they do not change the timing).
    let mut recv = DeviceBuffer::from_slice(&ctx, &vec![1.0f32; count_max])?;
    let (start, end) = (
        Event::new(&ctx, EventFlags::empty())?,
        Event::new(&ctx, EventFlags::empty())?,
    );
    let mut time = DeviceBuffer::<f64>::zeroed(&ctx, 1)?;
    let mut rows = Vec::new();
    for bytes in sizes(a) {
        let n = bytes / 4;
        for _ in 0..a.warmup {
            comm.all_reduce_in_place(recv.slice_mut(..n)?, ReduceOp::Sum, &stream)?;
        }
        comm.synchronize(&stream)?;
        // One more all-reduce before the start event: it ends on every GPU at about the
        // same moment, however late each process arrived here, so the timed window
        // starts together on all ranks and holds no wait for a late peer.
        comm.all_reduce_in_place(recv.slice_mut(..n)?, ReduceOp::Sum, &stream)?;
        start.record(&stream)?;
        for _ in 0..a.iters {
            comm.all_reduce_in_place(recv.slice_mut(..n)?, ReduceOp::Sum, &stream)?;
        }
        end.record(&stream)?;
        comm.synchronize(&stream)?;
        let us = Event::elapsed_ms(&start, &end)? as f64 * 1e3 / a.iters as f64;
        time.copy_from_host(&[us])?;
        comm.all_reduce_in_place(&mut time, ReduceOp::Max, &stream)?;
        comm.synchronize(&stream)?;
        let mut slowest = [0f64];
        time.copy_to_host(&mut slowest)?;
        rows.push((bytes, slowest[0]));
    }
    Ok(rows)
}

/// `--graph`: one rank per thread; a step is `x2 = x + x`, all-reduce `x2 -> sum`,
/// `y = sum + sum`, on the stream or as one captured graph.
fn graph_mode(gpus: usize, a: &Args) -> R {
    let id = UniqueId::new()?;
    let bytes = a.max.min(64 << 20);
    let results: Vec<Result<(f64, f64), String>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..gpus)
            .map(|r| {
                let id = &id;
                s.spawn(move || graph_rank(r, gpus, id, bytes / 4, a).map_err(|e| e.to_string()))
            })
            .collect();
        hs.into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("rank thread panicked".into()))
            })
            .collect()
    });
    let mut worst = (0f64, 0f64);
    for r in results {
        let (stream_us, graph_us) = r?;
        worst = (worst.0.max(stream_us), worst.1.max(graph_us));
    }
    println!(
        "step (kernel, all-reduce of {bytes} bytes, kernel): stream {:.2} us, graph {:.2} us, graph/stream {:.3}",
        worst.0,
        worst.1,
        worst.1 / worst.0
    );
    if let Some(path) = &a.csv {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        writeln!(f, "graph-step-stream,{gpus},{bytes},{:.3},,", worst.0)?;
        writeln!(f, "graph-step-graph,{gpus},{bytes},{:.3},,", worst.1)?;
    }
    Ok(())
}

fn graph_rank(
    rank: usize,
    n: usize,
    id: &UniqueId,
    len: usize,
    a: &Args,
) -> Result<(f64, f64), Box<dyn std::error::Error>> {
    let ctx = Context::primary(Device::get(rank)?)?;
    let comm = Comm::init_rank(
        &ctx,
        id,
        n,
        rank,
        &Config::with_timeout(Duration::from_secs(120)),
    )?;
    let k = Kernels::load(&ctx)?;
    let x = DeviceBuffer::from_slice(&ctx, &vec![1.0f32; len])?;
    let x2 = DeviceBuffer::<f32>::zeroed(&ctx, len)?;
    let mut sum = DeviceBuffer::<f32>::zeroed(&ctx, len)?;
    let y = DeviceBuffer::<f32>::zeroed(&ctx, len)?;
    let mut stream = Stream::non_blocking(&ctx)?;
    let cfg = LaunchConfig::new((len as u32).div_ceil(256), 256);
    let (xa, x2a, suma, ya) = (x.as_arg(), x2.as_arg(), sum.as_arg(), y.as_arg());
    let (start, end) = (
        Event::new(&ctx, EventFlags::empty())?,
        Event::new(&ctx, EventFlags::empty())?,
    );
    let stream_us = {
        let scfg = LaunchConfig::new((len as u32).div_ceil(256), 256).stream(&stream);
        // SAFETY (the launches on the stream here and in the graph below): vec_add(a, b,
        // c, n) reads a[..n], b[..n] and writes c[..n]; every buffer holds `len` floats
        // and outlives the stream's work (synchronized below) and the graph.
        let add =
            |a, c| unsafe { cudadrv::launch::launch(&k.vec_add, &scfg, &(a, a, c, len as u32)) };
        let mut on_stream = |iters: usize| -> cudadrv::Result<()> {
            for _ in 0..iters {
                add(xa, x2a)?;
                comm.all_reduce(&x2, &mut sum, ReduceOp::Sum, &stream)?;
                add(suma, ya)?;
            }
            Ok(())
        };
        on_stream(a.warmup)?;
        comm.synchronize(&stream)?;
        start.record(&stream)?;
        on_stream(a.iters)?;
        end.record(&stream)?;
        comm.synchronize(&stream)?;
        Event::elapsed_ms(&start, &end)? as f64 * 1e3 / a.iters as f64
    };
    let cap = stream.begin_capture(CaptureMode::ThreadLocal)?;
    // SAFETY: as for `add`, for every launch of the graph.
    unsafe { cap.launch(&k.vec_add, &cfg, &(xa, xa, x2a, len as u32))? };
    comm.all_reduce(&x2, &sum, ReduceOp::Sum, &*cap)?;
    // SAFETY: as above.
    unsafe { cap.launch(&k.vec_add, &cfg, &(suma, suma, ya, len as u32))? };
    let graph = cap.end()?;
    let exec = graph.instantiate(InstantiateFlags::empty())?;
    for _ in 0..a.warmup {
        exec.launch(&stream)?;
    }
    comm.synchronize(&stream)?;
    start.record(&stream)?;
    for _ in 0..a.iters {
        exec.launch(&stream)?;
    }
    end.record(&stream)?;
    comm.synchronize(&stream)?;
    let graph_us = Event::elapsed_ms(&start, &end)? as f64 * 1e3 / a.iters as f64;
    Ok((stream_us, graph_us))
}
