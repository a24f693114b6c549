//! What the examples share: the GPU setup and the one line each prints, exiting
//! successfully, on a machine without a GPU ([`gpu_or_exit`], [`exit_no_gpu`]); for
//! `pdl_demo` and the benchmarks, the PDL pair and the dependent chain, all on the Rust
//! kernels of ptx/ through cuda-core.
#![allow(dead_code)] // each example uses a part

use std::alloc::{GlobalAlloc, Layout, System};
use std::error::Error;
use std::sync::atomic::{AtomicUsize, Ordering};

use cudadrv::graph::{CaptureMode, InstantiateFlags};
use cudadrv::launch::{LaunchConfig, launch};
use cudadrv::{Context, Device, DeviceBuffer, Event, EventFlags, Function, Module, Stream};

/// A global allocator that counts heap allocations (and reallocations), to show that a
/// launch path makes none: `#[global_allocator] static GLOBAL: Counting = Counting;`,
/// then compare [`allocations`] before and after.
pub struct Counting;
static ALLOCS: AtomicUsize = AtomicUsize::new(0);

/// Heap allocations so far (with [`Counting`] installed).
pub fn allocations() -> usize {
    ALLOCS.load(Ordering::Relaxed)
}

// SAFETY: forwards to the system allocator; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new) }
    }
}

/// Errors of the examples (cuda-core's, checks, I/O).
pub type R<T = ()> = Result<T, Box<dyn Error>>;

/// Threads per block of every kernel here.
pub const BLOCK: u32 = 256;
/// `u64` stamps per block written by the PDL pair: `[start, mid, end, smid]`.
pub const STAMPS: usize = 4;

/// The GPU, or why there is none (most callers want [`gpu_or_exit`]).
pub fn open_gpu() -> Result<Context, String> {
    let dev = Device::get(0).map_err(|e| e.to_string())?;
    Context::primary(dev).map_err(|e| e.to_string())
}

/// Device 0's primary context; on a machine without a usable GPU (no driver, no device)
/// [`exit_no_gpu`]: every example says so in the same words and exits successfully.
pub fn gpu_or_exit(example: &str) -> Context {
    open_gpu().unwrap_or_else(|why| exit_no_gpu(example, why))
}

/// Prints `<example>: no GPU, nothing was run: <why>` and exits with status 0: a machine
/// without a GPU is not an example's failure (the hardware tests count such skips).
pub fn exit_no_gpu(example: &str, why: impl std::fmt::Display) -> ! {
    println!("{example}: no GPU, nothing was run: {why}");
    std::process::exit(0)
}

/// Median, min and max of `v` (sorted in place); zeros when empty.
pub fn stats(v: &mut [f64]) -> (f64, f64, f64) {
    if v.is_empty() {
        return (0.0, 0.0, 0.0);
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let med = if n % 2 == 1 {
        v[n / 2]
    } else {
        0.5 * (v[n / 2 - 1] + v[n / 2])
    };
    (med, v[0], v[n - 1])
}

/// Value `pdl_secondary` leaves at `i` after `pdl_primary`: `2 * (3i + 7) + 1`.
pub fn pair_value(i: u32) -> u32 {
    i.wrapping_mul(6).wrapping_add(15)
}

/// The PDL pair's kernels and buffers for `n` elements on `grid` blocks (it owns them;
/// the functions keep their module loaded).
pub struct Pair {
    pub primary: Function,
    pub secondary: Function,
    pub a: DeviceBuffer<u32>,
    pub b: DeviceBuffer<u32>,
    pub stamps_p: DeviceBuffer<u64>,
    pub stamps_s: DeviceBuffer<u64>,
    pub n: u32,
    pub grid: u32,
}

impl Pair {
    pub fn new(ctx: &Context, module: &Module, n: u32, grid: u32) -> R<Self> {
        Ok(Self {
            primary: module.function("pdl_primary")?,
            secondary: module.function("pdl_secondary")?,
            a: DeviceBuffer::zeroed(ctx, n as usize)?,
            b: DeviceBuffer::zeroed(ctx, n as usize)?,
            stamps_p: DeviceBuffer::zeroed(ctx, grid as usize * STAMPS)?,
            stamps_s: DeviceBuffer::zeroed(ctx, grid as usize * STAMPS)?,
            n,
            grid,
        })
    }

    /// Enqueues the primary (`work_ns` of work after its early trigger) and the secondary
    /// (`prolog` iterations before `griddepcontrol.wait`), the latter with the PDL
    /// attribute when `pdl`.
    pub fn enqueue(&self, stream: &Stream, pdl: bool, work_ns: u32, prolog: u32) -> R {
        let cfg = LaunchConfig::new(self.grid, BLOCK).stream(stream);
        let sec_cfg = if pdl {
            cfg.clone().programmatic_stream_serialization()?
        } else {
            cfg.clone()
        };
        let (a, b) = (self.a.as_arg(), self.b.as_arg());
        let (sp, ss) = (self.stamps_p.as_arg(), self.stamps_s.as_arg());
        // SAFETY: pdl_primary(out: *mut u32, n: u32, stamps: *mut u64, work_ns: u32) and
        // pdl_secondary(in: *const u32, out: *mut u32, n: u32, stamps: *mut u64,
        // prolog: u32): the buffers hold n words and grid * 4 stamps, live in `self`,
        // and nothing else uses them until the stream is synchronized.
        unsafe {
            launch(&self.primary, &cfg, &(a, self.n, sp, work_ns))?;
            launch(&self.secondary, &sec_cfg, &(a, b, self.n, ss, prolog))?;
        }
        Ok(())
    }

    /// Checks the secondary's output: every element `6i + 15`.
    pub fn check(&self) -> R {
        let mut out = vec![0u32; self.n as usize];
        self.b.copy_to_host(&mut out)?;
        if let Some(i) = (0..self.n).find(|&i| out[i as usize] != pair_value(i)) {
            return Err(format!(
                "pdl_secondary out[{i}] = {}, expected {} (stale data?)",
                out[i as usize],
                pair_value(i)
            )
            .into());
        }
        Ok(())
    }

    /// The stamps of the last pair: (primary, secondary), `STAMPS` per block.
    pub fn stamps(&self) -> R<(Vec<u64>, Vec<u64>)> {
        let mut p = vec![0u64; self.stamps_p.len()];
        let mut s = vec![0u64; self.stamps_s.len()];
        self.stamps_p.copy_to_host(&mut p)?;
        self.stamps_s.copy_to_host(&mut s)?;
        Ok((p, s))
    }
}

/// How a dependent chain is issued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChainMode {
    Stream,
    StreamPdl,
    Graph,
    GraphPdl,
}

impl ChainMode {
    pub const ALL: [ChainMode; 4] = [
        ChainMode::Stream,
        ChainMode::StreamPdl,
        ChainMode::Graph,
        ChainMode::GraphPdl,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ChainMode::Stream => "stream",
            ChainMode::StreamPdl => "stream_pdl",
            ChainMode::Graph => "graph",
            ChainMode::GraphPdl => "graph_pdl",
        }
    }

    /// [`name`](Self::name) as a C string (an NVTX mark).
    pub fn name_cstr(self) -> &'static std::ffi::CStr {
        match self {
            ChainMode::Stream => c"chain: stream",
            ChainMode::StreamPdl => c"chain: stream_pdl",
            ChainMode::Graph => c"chain: graph",
            ChainMode::GraphPdl => c"chain: graph_pdl",
        }
    }

    pub fn pdl(self) -> bool {
        matches!(self, ChainMode::StreamPdl | ChainMode::GraphPdl)
    }

    pub fn graph(self) -> bool {
        matches!(self, ChainMode::Graph | ChainMode::GraphPdl)
    }
}

/// Enqueues `links` chain_step kernels ping-ponging between `buf[0]` and `buf[1]`;
/// with PDL, the attribute on every link after the first (as the C++ reference does) and
/// kernel mode `trigger` (1: wait, then trigger early; 2: wait, work, trigger; 3: wait
/// only), else mode 0. `stream` may be one being captured (`cap.stream()`): the launches
/// then become the graph's kernel nodes.
pub fn enqueue_chain(
    f: &Function,
    stream: &Stream,
    buf: &[DeviceBuffer<u32>; 2],
    n: u32,
    grid: u32,
    links: usize,
    pdl: Option<u32>,
) -> R {
    let plain = LaunchConfig::new(grid, BLOCK).stream(stream);
    let with_pdl = plain.clone().programmatic_stream_serialization()?;
    for k in 0..links {
        let (input, out) = (buf[k & 1].as_arg(), buf[(k + 1) & 1].as_arg());
        let cfg = if pdl.is_some() && k > 0 {
            &with_pdl
        } else {
            &plain
        };
        let mode = pdl.unwrap_or(0);
        // SAFETY: chain_step(in: *const u32, out: *mut u32, n: u32, mode: u32): both
        // buffers hold n words and outlive the stream's work (the caller synchronizes);
        // when the stream is being captured, the caller keeps `f` and both buffers alive
        // for as long as the graph made from the capture can run.
        unsafe { launch(f, cfg, &(input, out, n, mode))? };
    }
    Ok(())
}

/// Microseconds per kernel for `reps` timed chains of `links` launches of `f` (chain_step,
/// from ptx/ or the nvcc-built one) on `n` elements (after 2 warm-up chains), on
/// `stream` (callers reuse one, as the C++ reference does; graph modes capture it, hence
/// `&mut`), timed with events; checks the result at the end.
#[allow(clippy::too_many_arguments)]
pub fn chain_bench(
    ctx: &Context,
    stream: &mut Stream,
    f: &Function,
    mode: ChainMode,
    n: u32,
    grid: u32,
    links: usize,
    reps: usize,
) -> R<Vec<f64>> {
    let pdl = mode.pdl().then_some(1);
    chain_bench_trigger(ctx, stream, f, mode, pdl, n, grid, links, reps)
}

/// [`chain_bench`] with the PDL kernel mode chosen: `pdl` as for [`enqueue_chain`] (the
/// graph or stream choice is taken from `mode`, PDL or not from `pdl`).
#[allow(clippy::too_many_arguments)]
pub fn chain_bench_trigger(
    ctx: &Context,
    stream: &mut Stream,
    f: &Function,
    mode: ChainMode,
    pdl: Option<u32>,
    n: u32,
    grid: u32,
    links: usize,
    reps: usize,
) -> R<Vec<f64>> {
    let x0: Vec<u32> = (0..n)
        .map(|i| i.wrapping_mul(2_654_435_761) ^ 0x9e37_79b9)
        .collect();
    let mut buf = [
        DeviceBuffer::from_slice(ctx, &x0)?,
        DeviceBuffer::new(ctx, n as usize)?,
    ];
    buf[1].memset_d32(0xffff_ffff)?;
    let exec = if mode.graph() {
        let cap = stream.begin_capture(CaptureMode::Global)?;
        // `f` and `buf` outlive `exec` (declared before it in this function).
        enqueue_chain(f, cap.stream(), &buf, n, grid, links, pdl)?;
        let graph = cap.end()?;
        let exec = graph.instantiate(InstantiateFlags::empty())?;
        exec.upload(stream)?;
        Some(exec)
    } else {
        None
    };
    let (e0, e1) = (
        Event::new(ctx, EventFlags::empty())?,
        Event::new(ctx, EventFlags::empty())?,
    );
    let warm = 2;
    let mut us = Vec::with_capacity(reps);
    for r in 0..warm + reps {
        e0.record(stream)?;
        match &exec {
            Some(exec) => exec.launch(stream)?,
            None => enqueue_chain(f, stream, &buf, n, grid, links, pdl)?,
        }
        e1.record(stream)?;
        e1.synchronize()?;
        if r >= warm {
            us.push(1000.0 * f64::from(Event::elapsed_ms(&e0, &e1)?) / links as f64);
        }
    }
    let mut host = vec![0u32; n as usize];
    buf[0].copy_to_host(&mut host)?;
    let total = (links * (warm + reps)) as u32;
    if let Some(i) = (0..n as usize).find(|&i| host[i] != x0[i].wrapping_add(total)) {
        return Err(format!(
            "chain {} n={n}: element {i} is {}, expected {}",
            mode.name(),
            host[i],
            x0[i].wrapping_add(total)
        )
        .into());
    }
    Ok(us)
}

/// The value after `name` on the command line (`--rounds 10`), if any.
pub fn arg_value(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
}
