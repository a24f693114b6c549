//! A data-parallel training step on every GPU of this machine, with the gradient
//! all-reduce overlapped with the backward pass: the pattern to copy for a program that
//! outgrows one GPU.
//!
//! One thread per GPU, each a rank of one NCCL communicator (`Comm::init_rank` with a
//! shared `UniqueId`). A step on each rank:
//! 1. backward, bucket by bucket, on the compute stream: `grad[b] = 2 * param[b]`
//!    (kernels; a few extra passes stand in for the real work), then an event;
//! 2. for each bucket, the communication stream waits for that bucket's event and
//!    all-reduces it (sum over ranks) while the compute stream goes on with the next
//!    bucket;
//! 3. the compute stream waits for the last all-reduce, then the update
//!    `param[b] += grad[b]` starts the next step.
//!
//! The same step is also run without overlap (every all-reduce on the compute stream),
//! and the program prints both step times and writes `data_parallel_timeline.svg`
//! (rank 0's two streams, from events: compute bars above, all-reduce bars below). The
//! parameters are checked against a host computation at the end.
//!
//! The kernels are the workspace's `vec_add` launched with `cudadrv::launch::launch`,
//! which is `unsafe`: the crate's safe launches live in a `kernel::scope`, which waits
//! for its streams when it ends, and this step needs kernels and collectives queued on
//! two streams of one context with events between them and nothing waiting on the host.
//! That pattern has no safe form in the crate yet.
//!
//! Usage: `data_parallel [--steps N] [--buckets B] [--floats F] [--svg FILE]`. Without
//! a GPU or without NCCL it says so and exits 0. `NCCL_NVLS_ENABLE=0` is set.

mod common;

use std::fmt::Write as _;
use std::time::Duration;

use common::{R, arg_value, exit_no_gpu};
use cuda_workspace::Kernels;
use cudadrv::launch::{LaunchConfig, launch};
use cudadrv::nccl::{self, Comm, Config, ReduceOp, UniqueId};
use cudadrv::{Context, Device, DeviceBuffer, Event, EventFlags, Stream};

/// Extra backward passes per bucket (compute to overlap with).
const PASSES: usize = 8;

struct Args {
    steps: usize,
    buckets: usize,
    floats: usize,
    svg: String,
}

fn main() {
    // SAFETY: the first statement of `main`, before any other thread exists.
    unsafe { std::env::set_var("NCCL_NVLS_ENABLE", "0") };
    let v: Vec<String> = std::env::args().skip(1).collect();
    let num = |flag: &str, d: usize| {
        arg_value(&v, flag)
            .and_then(|n| n.parse().ok())
            .unwrap_or(d)
    };
    let args = Args {
        steps: num("--steps", 3),
        buckets: num("--buckets", 8),
        floats: num("--floats", 8 << 20),
        svg: arg_value(&v, "--svg").unwrap_or_else(|| "data_parallel_timeline.svg".into()),
    };
    let gpus = match Device::count() {
        Ok(0) => exit_no_gpu("data_parallel", "the driver reports no device"),
        Ok(n) => n,
        Err(e) => exit_no_gpu("data_parallel", e),
    };
    if let Err(e) = nccl::version() {
        println!("data_parallel: {e}; nothing was run.");
        return;
    }
    if let Err(e) = run(gpus, &args) {
        eprintln!("data_parallel: error: {e}");
        std::process::exit(1);
    }
}

fn run(gpus: usize, a: &Args) -> R {
    let id = UniqueId::new()?;
    println!(
        "data_parallel: {gpus} GPU(s), {} buckets of {} floats, {} steps",
        a.buckets, a.floats, a.steps
    );
    let results: Vec<Result<Report, String>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..gpus)
            .map(|r| {
                let id = &id;
                s.spawn(move || rank(r, gpus, id, a).map_err(|e| e.to_string()))
            })
            .collect();
        hs.into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("rank thread panicked".into()))
            })
            .collect()
    });
    let mut reports = Vec::new();
    for r in results {
        reports.push(r?);
    }
    let worst = |f: fn(&Report) -> f64| reports.iter().map(f).fold(0.0, f64::max);
    let (overlapped, serial) = (worst(|r| r.overlapped_ms), worst(|r| r.serial_ms));
    println!(
        "step: {overlapped:.3} ms with the all-reduce overlapped, {serial:.3} ms without ({:.2}x)",
        serial / overlapped
    );
    std::fs::write(&a.svg, svg(&reports[0]))?;
    println!("timeline of rank 0: {}", a.svg);
    println!(
        "parameters checked on every rank after {} steps",
        2 * a.steps
    );
    Ok(())
}

/// What a rank measured: step times and rank 0's intervals (ms from the step's start).
struct Report {
    overlapped_ms: f64,
    serial_ms: f64,
    compute: Vec<(f64, f64)>,
    comm: Vec<(f64, f64)>,
}

fn rank(r: usize, n: usize, id: &UniqueId, a: &Args) -> Result<Report, Box<dyn std::error::Error>> {
    let ctx = Context::primary(Device::get(r)?)?;
    let comm = Comm::init_rank(
        &ctx,
        id,
        n,
        r,
        &Config::with_timeout(Duration::from_secs(120)),
    )?;
    let k = Kernels::load(&ctx)?;
    let mut compute = Stream::non_blocking(&ctx)?;
    let mut comms = Stream::non_blocking(&ctx)?;
    let len = a.floats;
    let init = |b: usize, i: usize| ((b + i) % 5 + 1) as f32;
    let params: Vec<DeviceBuffer<f32>> = (0..a.buckets)
        .map(|b| DeviceBuffer::from_slice(&ctx, &(0..len).map(|i| init(b, i)).collect::<Vec<_>>()))
        .collect::<Result<_, _>>()?;
    let mut grads: Vec<DeviceBuffer<f32>> = (0..a.buckets)
        .map(|_| DeviceBuffer::zeroed(&ctx, len))
        .collect::<Result<_, _>>()?;
    let scratch = DeviceBuffer::<f32>::zeroed(&ctx, len)?;
    let event = || Event::new(&ctx, EventFlags::empty());
    let ready: Vec<Event> = (0..a.buckets).map(|_| event()).collect::<Result<_, _>>()?;
    let reduced = event()?;
    // Timeline events: step start; per bucket compute end, all-reduce start and end.
    let t0 = event()?;
    let c_end: Vec<Event> = (0..a.buckets).map(|_| event()).collect::<Result<_, _>>()?;
    let m_start: Vec<Event> = (0..a.buckets).map(|_| event()).collect::<Result<_, _>>()?;
    let m_end: Vec<Event> = (0..a.buckets).map(|_| event()).collect::<Result<_, _>>()?;
    let t1 = event()?;
    // SAFETY: vec_add(a, b, c, n) reads a[..n], b[..n] and writes c[..n]; every buffer
    // holds `len` floats and lives until the streams are synchronized at the end of
    // `step`.
    let add = |s: &Stream,
               x: &DeviceBuffer<f32>,
               y: &DeviceBuffer<f32>,
               out: &DeviceBuffer<f32>| unsafe {
        let cfg = LaunchConfig::new((len as u32).div_ceil(256), 256).stream(s);
        launch(
            &k.vec_add,
            &cfg,
            &(x.as_arg(), y.as_arg(), out.as_arg(), len as u32),
        )
    };
    let mut step = |overlap: bool| -> Result<f64, Box<dyn std::error::Error>> {
        t0.record(&compute)?;
        for b in 0..a.buckets {
            for _ in 0..PASSES {
                add(&compute, &params[b], &params[b], &scratch)?; // stand-in backward work
            }
            add(&compute, &params[b], &params[b], &grads[b])?; // grad = 2 * param
            c_end[b].record(&compute)?;
            if overlap {
                ready[b].record(&compute)?;
                comms.wait_event(&ready[b])?;
            }
            let on = if overlap { &comms } else { &compute };
            m_start[b].record(on)?;
            comm.all_reduce_in_place(&mut grads[b], ReduceOp::Sum, on)?;
            m_end[b].record(on)?;
        }
        if overlap {
            reduced.record(&comms)?;
            compute.wait_event(&reduced)?;
        }
        for b in 0..a.buckets {
            add(&compute, &params[b], &grads[b], &params[b])?; // param += grad
        }
        t1.record(&compute)?;
        comm.synchronize(&compute)?;
        comm.synchronize(&comms)?;
        Ok(Event::elapsed_ms(&t0, &t1)? as f64)
    };
    let mut overlapped_ms = f64::MAX;
    let mut serial_ms = f64::MAX;
    let mut report = Report {
        overlapped_ms: 0.0,
        serial_ms: 0.0,
        compute: Vec::new(),
        comm: Vec::new(),
    };
    for _ in 0..a.steps {
        serial_ms = serial_ms.min(step(false)?);
    }
    for _ in 0..a.steps {
        overlapped_ms = overlapped_ms.min(step(true)?);
    }
    // The last (overlapped) step's intervals.
    let mut prev = 0.0;
    for b in 0..a.buckets {
        let end = Event::elapsed_ms(&t0, &c_end[b])? as f64;
        report.compute.push((prev, end));
        prev = end;
        report.comm.push((
            Event::elapsed_ms(&t0, &m_start[b])? as f64,
            Event::elapsed_ms(&t0, &m_end[b])? as f64,
        ));
    }
    report.overlapped_ms = overlapped_ms;
    report.serial_ms = serial_ms;
    // Every step: param <- param + n * 2 * param = (1 + 2n) param.
    let factor = (1 + 2 * n as u64).pow(2 * a.steps as u32) as f32;
    for (b, p) in params.iter().enumerate() {
        let mut host = vec![0f32; len];
        p.copy_to_host(&mut host)?;
        if let Some(i) = (0..len).find(|&i| host[i] != init(b, i) * factor) {
            return Err(format!(
                "rank {r}: param[{b}][{i}] = {}, expected {}",
                host[i],
                init(b, i) * factor
            )
            .into());
        }
    }
    Ok(report)
}

fn svg(r: &Report) -> String {
    let end = r
        .compute
        .iter()
        .chain(&r.comm)
        .map(|x| x.1)
        .fold(0.0, f64::max)
        .max(1e-3);
    let (w, x0) = (900.0, 110.0);
    let x = |t: f64| x0 + t / end * (w - x0 - 10.0);
    let mut s = String::new();
    let _ = write!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"130\" font-family=\"sans-serif\" font-size=\"12\">"
    );
    let _ = write!(
        s,
        "<text x=\"5\" y=\"38\">compute</text><text x=\"5\" y=\"78\">all-reduce</text>"
    );
    for (i, &(a, b)) in r.compute.iter().enumerate() {
        let _ = write!(
            s,
            "<rect x=\"{:.1}\" y=\"25\" width=\"{:.1}\" height=\"20\" fill=\"{}\"/>",
            x(a),
            (x(b) - x(a)).max(0.5),
            if i % 2 == 0 { "#4a7fb5" } else { "#7fa8d1" }
        );
    }
    for (i, &(a, b)) in r.comm.iter().enumerate() {
        let _ = write!(
            s,
            "<rect x=\"{:.1}\" y=\"65\" width=\"{:.1}\" height=\"20\" fill=\"{}\"/>",
            x(a),
            (x(b) - x(a)).max(0.5),
            if i % 2 == 0 { "#c0504d" } else { "#d99694" }
        );
    }
    let _ = write!(
        s,
        "<text x=\"{x0}\" y=\"110\">0 ms</text><text x=\"{:.0}\" y=\"110\" text-anchor=\"end\">{end:.2} ms (one overlapped step, rank 0)</text></svg>",
        w - 10.0
    );
    s
}
