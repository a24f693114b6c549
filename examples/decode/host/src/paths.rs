//! The launch paths, each running greedy steps of the same kernels, timed with events;
//! the copy bandwidth the roofline divides by; the timeline of one run.

use cudadrv::graph::{CaptureMode, Region};
use cudadrv::{Context, DeviceBuffer, Event, EventFlags, Result, Stream};

use crate::gpu::{Kernels, Launches, Model, On, Trigger, kernels_per_step};

/// A way to issue the step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Path {
    /// Plain launches on a stream.
    Stream,
    /// The same with Programmatic Dependent Launch.
    StreamPdl,
    /// A replay region (`graph::Region`) of the step's plain launches.
    Region,
    /// A replay region of the PDL launches (programmatic edges).
    RegionPdl,
    /// A hand-captured graph of one step, launched once per step.
    Graph,
    /// The same, captured from PDL launches.
    GraphPdl,
}

impl Path {
    pub const ALL: [Path; 6] = [
        Path::Stream,
        Path::StreamPdl,
        Path::Region,
        Path::RegionPdl,
        Path::Graph,
        Path::GraphPdl,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Path::Stream => "stream",
            Path::StreamPdl => "stream+pdl",
            Path::Region => "region",
            Path::RegionPdl => "region+pdl",
            Path::Graph => "graph",
            Path::GraphPdl => "graph+pdl",
        }
    }

    pub fn pdl(self) -> bool {
        matches!(self, Path::StreamPdl | Path::RegionPdl | Path::GraphPdl)
    }
}

/// What one path did: the tokens of its last round and the milliseconds per token of
/// each timed round.
pub struct PathRun {
    pub tokens: Vec<u32>,
    pub ms_per_token: Vec<f64>,
}

/// Runs `steps` steps from (`first`, `start`) on `path`, `rounds` times after one
/// untimed round (the region's capture, the graph's upload, the caches warm), each round
/// timed with events around its launches.
#[allow(clippy::too_many_arguments)]
pub fn run_path(
    ctx: &Context,
    ks: &Kernels,
    model: &mut Model,
    stream: &mut Stream,
    path: Path,
    trigger: Trigger,
    (first, start, steps): (u32, usize, usize),
    rounds: usize,
) -> Result<PathRun> {
    let launches = Launches::new(&model.shape, ks, path.pdl(), trigger, model.ctas)?;
    let (t0, t1) = (
        Event::new(ctx, EventFlags::empty())?,
        Event::new(ctx, EventFlags::empty())?,
    );
    let mut times = Vec::with_capacity(rounds);
    let mut region = Region::new(ctx);
    // The graph of one step, for the graph paths.
    let exec = if matches!(path, Path::Graph | Path::GraphPdl) {
        let mut capture_stream = Stream::non_blocking(ctx)?;
        let cap = capture_stream.begin_capture(CaptureMode::ThreadLocal)?;
        model.step(ks, &mut On::Capture(&cap), &launches, 0)?;
        let graph = cap.end()?;
        Some(graph.instantiate(Default::default())?)
    } else {
        None
    };
    for round in 0..=rounds {
        model.reset(first, start)?;
        t0.record(stream)?;
        for _ in 0..steps {
            match path {
                Path::Stream | Path::StreamPdl => {
                    model.step(ks, &mut On::Stream(stream), &launches, 0)?;
                }
                Path::Region | Path::RegionPdl => {
                    region.run(stream, |r| model.step(ks, &mut On::Region(r), &launches, 0))?;
                }
                Path::Graph | Path::GraphPdl => {
                    if let Some(e) = &exec {
                        e.launch(stream)?;
                    }
                }
            }
        }
        t1.record(stream)?;
        t1.synchronize()?;
        if round > 0 {
            times.push(f64::from(Event::elapsed_ms(&t0, &t1)?) / steps as f64);
        }
    }
    let mut tokens = vec![0u32; model.shape.cache];
    model.tokens.copy_to_host(&mut tokens)?;
    Ok(PathRun {
        tokens: tokens[start..start + steps].to_vec(),
        ms_per_token: times,
    })
}

/// Device-to-device copy bandwidth in GB/s (bytes read plus bytes written, per second),
/// the best of 10 copies of 1 GiB (or of a quarter of the free memory, if less).
pub fn copy_bandwidth(ctx: &Context, stream: &Stream) -> Result<f64> {
    let (free, _) = ctx.mem_info()?;
    let bytes = (1usize << 30).min(free / 4) / 4 * 4;
    let src = DeviceBuffer::<u32>::zeroed(ctx, bytes / 4)?;
    let mut dst = DeviceBuffer::<u32>::zeroed(ctx, bytes / 4)?;
    let (t0, t1) = (
        Event::new(ctx, EventFlags::empty())?,
        Event::new(ctx, EventFlags::empty())?,
    );
    let mut best = f64::MAX;
    for _ in 0..11 {
        t0.record(stream)?;
        dst.copy_from_device_async(&src, stream)?;
        t1.record(stream)?;
        t1.synchronize()?;
        best = best.min(f64::from(Event::elapsed_ms(&t0, &t1)?));
    }
    Ok(2.0 * bytes as f64 / (best * 1e-3) / 1e9)
}

/// One traced run: `steps` steps on a stream (with or without PDL), and per kernel of
/// each step its `[start, wait passed, end]` in nanoseconds of the GPU's global timer.
pub fn traced(
    ctx: &Context,
    ks: &Kernels,
    model: &mut Model,
    stream: &Stream,
    pdl: bool,
    trigger: Trigger,
    (first, start, steps): (u32, usize, usize),
) -> Result<Vec<[u64; 3]>> {
    let launches = Launches::new(&model.shape, ks, pdl, trigger, model.ctas)?;
    model.reset(first, start)?;
    model.arm_trace(ctx, steps)?;
    for i in 0..steps {
        model.step(ks, &mut On::Stream(stream), &launches, i)?;
    }
    stream.synchronize()?;
    let mut raw = vec![0u64; model.trace.len()];
    model.trace.copy_to_host(&mut raw)?;
    model.arm_trace(ctx, 0)?;
    let per = kernels_per_step(&model.shape);
    debug_assert_eq!(raw.len(), steps * per * 3);
    Ok(raw.chunks_exact(3).map(|c| [c[0], c[1], c[2]]).collect())
}
