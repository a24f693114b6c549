//! Replay regions: ordinary stream work run as a graph. [`Region::run`] calls a body
//! that issues kernels, memsets, copies, host functions and event waits and records
//! through a [`Recorder`] (the same calls, with the same checks and errors, as on a
//! stream). The first execution of a structure is captured (`cuStreamBeginCapture` /
//! `cuStreamEndCapture`) and instantiated; a later execution with the same structure
//! updates the parameters that changed, node by node, and launches the cached
//! executable graph (`cuGraphLaunch`); another structure is captured again, into a
//! bounded cache of executable graphs.
//!
//! # How an execution runs
//! The body runs first, on the host, and only records: nothing it issues through the
//! recorder is queued until it returns (event waits excepted: they are queued at once,
//! ahead of the region's work). Then the recording is compared with the cached
//! executables:
//! - **Structure** (the key): the sequence of operations, and for each its kind; for a
//!   kernel the function, grid, block, dynamic shared memory, launch attributes and
//!   parameter sizes; for a memset or copy the byte count; for a host function its type.
//!   PDL attributes are part of the structure: captured, a launch with
//!   programmatic stream serialization becomes a programmatic edge.
//! - **Parameters**: kernel argument values (pointers, sizes, scalars), memset
//!   destinations and values, copy sources and destinations. A matching executable gets
//!   the changed ones with the per-node setters (`cuGraphExecKernelNodeSetParams`,
//!   `cuGraphExecMemsetNodeSetParams`, `cuGraphExecMemcpyNodeSetParams`), one call per
//!   changed node and none for an unchanged one, so every launch of a cached executable
//!   runs exactly the values of the execution that launches it. (Setters beat a
//!   recapture plus `cuGraphExecUpdate`: that path makes one capture call per operation
//!   and compares the whole graph at every execution; `region_bench` measures both.)
//!
//! A host function whose closure holds state (not zero-sized) cannot be swapped into a
//! graph that may still run the old one, so an execution recording one is captured and
//! instantiated anew, replacing its structure's entry. Stateless closures (zero-sized,
//! so every value of the type does the same) replay like the rest.
//!
//! # Cache and eviction
//! A region keeps at most [`capacity`](Region::capacity) executable graphs (4 unless
//! [`Region::with_capacity`] says otherwise), one per structure. Capturing a new
//! structure into a full cache evicts the least recently launched one. Dropping an
//! executable graph that was launched waits for its context's work (see [`GraphExec`]),
//! so an eviction, like dropping the region, synchronizes the context.
//!
//! # What a region borrows
//! `Region<'a>` carries `'a` like [`Graph<'a>`]: the recorder's methods take the
//! functions, buffers, pinned host buffers and events the graph will name as `&'a`, so
//! they outlive the region and every executable graph it caches (`'a` is invariant).
//! Kernel arguments are copied (the region keeps their bytes); what the pointers among
//! them point to is the `unsafe` launch's contract, for the one execution they are given
//! to: a cached executable is never launched again before its parameters are set to the
//! current execution's. Host closures are owned by the graphs (CUDA user objects).
//!
//! ```compile_fail,E0505
//! # fn f(ctx: &cudadrv::Context) -> cudadrv::Result<()> {
//! use cudadrv::{DeviceBuffer, Stream, graph::Region};
//! let mut stream = Stream::non_blocking(ctx)?;
//! let mut region = Region::new(ctx);
//! let buf = DeviceBuffer::<u32>::new(ctx, 64)?;
//! region.run(&mut stream, |r| r.memset_d32(&buf, 7))?;
//! drop(buf); // error: the region's cached graph names `buf`
//! region.run(&mut stream, |_| Ok(()))?;
//! # Ok(()) }
//! ```
//!
//! The recorder lives for one execution only:
//!
//! ```compile_fail,E0521
//! # fn f(ctx: &cudadrv::Context) -> cudadrv::Result<()> {
//! use cudadrv::{Stream, graph::Region};
//! let mut stream = Stream::non_blocking(ctx)?;
//! let mut region = Region::new(ctx);
//! let mut kept = None;
//! region.run(&mut stream, |r| {
//!     kept = Some(r); // error: the recorder cannot escape the body
//!     Ok(())
//! })?;
//! # Ok(()) }
//! ```
//!
//! A region is not `Send` (its host closures and recorded work stay with the thread that
//! runs it):
//!
//! ```compile_fail,E0277
//! # fn f(ctx: &cudadrv::Context) -> cudadrv::Result<()> {
//! let region = cudadrv::graph::Region::new(ctx);
//! std::thread::scope(|s| {
//!     s.spawn(move || drop(region)); // error: `Region` cannot be sent
//! });
//! # Ok(()) }
//! ```
//!
//! # Errors
//! A refused operation returns the error the same call returns on a stream: the checks
//! run when the recorder is called (lengths, contexts), the driver's verdicts when the
//! recording is captured (an invalid launch is [`Error::Driver`] naming
//! `cuLaunchKernelEx`). When the body or the capture fails, nothing of that execution
//! runs, the failed capture is discarded, and the region stays usable with its cache as
//! it was.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::any::TypeId;
use core::ffi::c_void;
use core::fmt;
use core::ptr;

use cuda_sys::{
    CUDA_KERNEL_NODE_PARAMS, CUDA_MEMCPY3D, CUDA_MEMSET_NODE_PARAMS, CUdeviceptr, CUgraphNode,
    CUlaunchAttribute, CUlaunchAttributeID, CUlaunchConfig, CUmemorytype,
};

use super::capture::{Capture, CaptureMode, raw_capture_info};
use super::handle::Borrows;
use super::nodes::GraphClosure;
use super::{Graph, GraphExec, InstantiateFlags};
use crate::args::{ArgVisitor, DeviceRepr, KernelArgs};
use crate::context::Context;
use crate::driver::api;
use crate::error::{Error, Result, drv};
use crate::event::Event;
use crate::function::Function;
use crate::launch::LaunchConfig;
use crate::memory::{DeviceBuffer, PinnedHostBuffer, memset_d8, memset_d32, same_len};
use crate::stream::{EventWaitFlags, Stream};

/// How many executable graphs a [`Region::new`] caches.
pub const DEFAULT_REGION_CAPACITY: usize = 4;

/// What one recorded operation is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Kernel,
    MemsetD8,
    MemsetD32,
    CopyDtoD,
    CopyHtoD,
    HostFn,
}

/// One recorded operation: its structure (key) and its parameters.
#[derive(Clone, Copy)]
struct Op<'a> {
    kind: Kind,
    /// Key: the kernel (kernels only).
    func: Option<&'a Function>,
    /// Key: grid x, y, z, block x, y, z, dynamic shared memory (kernels only).
    shape: [u32; 7],
    /// Key: bytes of a memset or copy (0: the operation makes no node).
    bytes: usize,
    /// Key: the attributes, a range of [`Recording::attrs`].
    attrs: (u32, u32),
    /// Key: a host function's closure type.
    host: Option<TypeId>,
    /// Parameters: a kernel's argument words, a range of [`Recording::words`], and the
    /// word offset of each parameter, a range of [`Recording::params`].
    words: (u32, u32),
    params: (u32, u32),
    /// Parameters: destination and source (device address, or host address of a
    /// pinned buffer), memset value.
    dst: CUdeviceptr,
    src: u64,
    value: u32,
}

impl Op<'_> {
    fn new(kind: Kind) -> Self {
        Self {
            kind,
            func: None,
            shape: [0; 7],
            bytes: 0,
            attrs: (0, 0),
            host: None,
            words: (0, 0),
            params: (0, 0),
            dst: 0,
            src: 0,
            value: 0,
        }
    }

    /// Whether the operation adds a node when captured.
    fn makes_node(&self) -> bool {
        match self.kind {
            Kind::Kernel | Kind::HostFn => true,
            _ => self.bytes != 0,
        }
    }
}

fn range<T>(v: &[T], r: (u32, u32)) -> &[T] {
    v.get(r.0 as usize..r.1 as usize).unwrap_or(&[])
}

/// The bytes of an attribute that say what it is: its ID and its 64-byte value.
fn attr_eq(a: &CUlaunchAttribute, b: &CUlaunchAttribute) -> bool {
    // SAFETY: `pad` spans the whole value union; every attribute of a `LaunchConfig` is
    // built from an all-zero value with one member written, so every byte is
    // initialized.
    a.id == b.id && unsafe { a.value.pad == b.value.pad }
}

/// What a body recorded: the operations, their argument bytes and attributes, the host
/// closures and the events to record after the launch. Reused from execution to
/// execution (cleared, never shrunk).
struct Recording<'a> {
    ops: Vec<Op<'a>>,
    /// Kernel arguments, each parameter zero-padded to whole 8-byte words.
    words: Vec<u64>,
    /// Word offset of each kernel parameter in `words`.
    params: Vec<u32>,
    attrs: Vec<CUlaunchAttribute>,
    hosts: Vec<Option<HostClosure>>,
    records: Vec<&'a Event>,
    /// A closure with state was recorded: capture this execution anew.
    stateful: bool,
    /// Hash of the structure (the keys of `ops`).
    hash: u64,
}

type HostClosure = Box<dyn Fn() + Send + Sync + 'static>;

impl Recording<'_> {
    fn new() -> Self {
        Self {
            ops: Vec::new(),
            words: Vec::new(),
            params: Vec::new(),
            attrs: Vec::new(),
            hosts: Vec::new(),
            records: Vec::new(),
            stateful: false,
            hash: HASH_SEED,
        }
    }

    fn clear(&mut self) {
        self.ops.clear();
        self.words.clear();
        self.params.clear();
        self.attrs.clear();
        self.hosts.clear();
        self.records.clear();
        self.stateful = false;
        self.hash = HASH_SEED;
    }

    fn mix(&mut self, x: u64) {
        self.hash = (self.hash.rotate_left(5) ^ x).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    /// Records `op`, mixing its key into the hash.
    fn push(&mut self, op: Op<'_>) {
        self.mix(op.kind as u64);
        self.mix(op.func.map_or(0, |f| f.as_raw() as u64));
        for s in op.shape {
            self.mix(u64::from(s));
        }
        self.mix(op.bytes as u64);
        self.mix(u64::from(op.attrs.1 - op.attrs.0));
        self.mix(u64::from(op.params.1 - op.params.0));
        self.mix(u64::from(op.words.1 - op.words.0));
    }

    /// The kernel parameter pointers of `op` into `words`, written to `ptrs`.
    fn arg_ptrs(&self, op: &Op<'_>, ptrs: &mut [*mut c_void; crate::args::MAX_PARAMS]) -> usize {
        let params = range(&self.params, op.params);
        for (p, &w) in ptrs.iter_mut().zip(params) {
            *p = self
                .words
                .as_ptr()
                .wrapping_add(w as usize)
                .cast_mut()
                .cast::<c_void>();
        }
        params.len()
    }

    /// Capacity for `other`'s sizes (called at capture time only, so replays find room).
    fn reserve_like(&mut self, n: &Sizes) {
        self.ops.reserve(n.ops.saturating_sub(self.ops.len()));
        self.words.reserve(n.words.saturating_sub(self.words.len()));
        self.params
            .reserve(n.params.saturating_sub(self.params.len()));
        self.attrs.reserve(n.attrs.saturating_sub(self.attrs.len()));
        self.hosts.reserve(n.hosts.saturating_sub(self.hosts.len()));
        self.records
            .reserve(n.records.saturating_sub(self.records.len()));
    }

    fn sizes(&self) -> Sizes {
        Sizes {
            ops: self.ops.len(),
            words: self.words.len(),
            params: self.params.len(),
            attrs: self.attrs.len(),
            hosts: self.hosts.len(),
            records: self.records.len(),
        }
    }
}

const HASH_SEED: u64 = 0xcbf2_9ce4_8422_2325;

/// The largest sizes a recording reached.
#[derive(Clone, Copy, Default)]
struct Sizes {
    ops: usize,
    words: usize,
    params: usize,
    attrs: usize,
    hosts: usize,
    records: usize,
}

impl Sizes {
    fn max(self, o: Self) -> Self {
        Self {
            ops: self.ops.max(o.ops),
            words: self.words.max(o.words),
            params: self.params.max(o.params),
            attrs: self.attrs.max(o.attrs),
            hosts: self.hosts.max(o.hosts),
            records: self.records.max(o.records),
        }
    }
}

/// One cached executable graph: the recording it was made from (its parameters as the
/// executable holds them now), its nodes in operation order, the graph they belong to.
struct Entry<'a> {
    rec: Recording<'a>,
    nodes: Vec<CUgraphNode>,
    exec: GraphExec<'a>,
    /// Keeps the nodes alive for the per-node setters. Declared after `exec`: dropped
    /// after it.
    graph: Graph<'a>,
    last_used: u64,
}

/// What a region did so far (counts since it was made).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RegionStats {
    /// Executions that launched a graph.
    pub executions: u64,
    /// Executions captured and instantiated (a new structure, or a stateful host closure).
    pub captures: u64,
    /// Executions that launched a cached executable graph.
    pub replays: u64,
    /// Nodes whose parameters a replay set (`cuGraphExec*NodeSetParams` calls).
    pub updated_nodes: u64,
    /// Cached executable graphs dropped to make room.
    pub evictions: u64,
}

/// A replay region: stream work recorded by a body, run as a cached graph. See the
/// [module docs](self) for the rules.
///
/// ```no_run
/// # fn main() -> cudadrv::Result<()> {
/// use cudadrv::{Context, Device, DeviceBuffer, LaunchConfig, Module, Stream};
/// use cudadrv::graph::Region;
/// # const PTX: &str = "";
/// let ctx = Context::primary(Device::get(0)?)?;
/// let module = Module::from_ptx(&ctx, PTX)?;
/// let step = module.function("step")?;
/// let (a, b) = (DeviceBuffer::<u32>::new(&ctx, 1024)?, DeviceBuffer::<u32>::new(&ctx, 1024)?);
/// let mut stream = Stream::non_blocking(&ctx)?;
/// let mut region = Region::new(&ctx);
/// for i in 0..100u32 {
///     // The first execution is captured; the next 99 update `i` and launch the graph.
///     region.run(&mut stream, |r| {
///         r.memset_d32(&a, i)?;
///         let cfg = LaunchConfig::new(4, 256);
///         // SAFETY: `step(in, out, n)` reads and writes 1024 words of live buffers.
///         unsafe { r.launch(&step, &cfg, &(a.as_arg(), b.as_arg(), 1024u32)) }
///     })?;
/// }
/// stream.synchronize()?;
/// # Ok(()) }
/// ```
pub struct Region<'a> {
    ctx: Context,
    capacity: usize,
    entries: Vec<Entry<'a>>,
    rec: Recording<'a>,
    /// Largest recording seen: every recording buffer gets this much room at capture
    /// time, so replays do not allocate.
    sizes: Sizes,
    clock: u64,
    stats: RegionStats,
    _borrows: Borrows<'a>,
}

impl fmt::Debug for Region<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Region")
            .field("capacity", &self.capacity)
            .field("cached", &self.entries.len())
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl<'a> Region<'a> {
    /// A region of `ctx` caching up to [`DEFAULT_REGION_CAPACITY`] executable graphs.
    #[must_use]
    pub fn new(ctx: &Context) -> Self {
        Self {
            ctx: ctx.clone(),
            capacity: DEFAULT_REGION_CAPACITY,
            entries: Vec::new(),
            rec: Recording::new(),
            sizes: Sizes::default(),
            clock: 0,
            stats: RegionStats::default(),
            _borrows: Borrows::default(),
        }
    }

    /// A region caching up to `capacity` executable graphs.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a capacity of 0.
    pub fn with_capacity(ctx: &Context, capacity: usize) -> Result<Self> {
        if capacity == 0 {
            return Err(Error::InvalidArgument(
                "Region::with_capacity: a region caches at least one executable graph",
            ));
        }
        Ok(Self {
            capacity,
            ..Self::new(ctx)
        })
    }

    /// How many executable graphs it caches at most.
    #[must_use]
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// How many it caches now.
    #[must_use]
    pub fn cached(&self) -> usize {
        self.entries.len()
    }

    /// What it did so far.
    #[must_use]
    pub fn stats(&self) -> RegionStats {
        self.stats
    }

    /// Drops every cached executable graph (waiting for the context's work if one was
    /// launched, as dropping a [`GraphExec`] does).
    pub fn clear(&mut self) {
        self.entries.clear();
    }

    /// The region's context.
    #[must_use]
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// The graph of the executable launched last (for inspection: its nodes and edges
    /// as captured; parameters set on the executable since are not in it).
    #[must_use]
    pub fn last_graph(&self) -> Option<&Graph<'a>> {
        self.entries
            .iter()
            .max_by_key(|e| e.last_used)
            .map(|e| &e.graph)
    }

    /// Runs `body` as one execution of the region on `stream`: records what it issues
    /// through the [`Recorder`], then launches the cached executable graph of that
    /// structure with this execution's parameters (`cuGraphExec*NodeSetParams` for the
    /// nodes that changed, then `cuGraphLaunch`), or captures and instantiates a new one
    /// (`cuStreamBeginCapture`, the recorded calls, `cuStreamEndCapture`,
    /// `cuGraphInstantiate`). Events the body records are recorded after the launch.
    ///
    /// After the first execution of a structure, an execution allocates nothing, except
    /// for what the body itself allocates (a host closure with state is boxed).
    ///
    /// # Errors
    /// The body's error (nothing of this execution runs); the error the recorded call
    /// returns on a stream when the driver refuses it at capture; [`Error::ContextMismatch`]
    /// for a stream of another context; [`Error::StreamCapturing`] when `stream` is being
    /// captured; driver errors of the capture, instantiation and launch.
    #[doc(alias = "cuGraphLaunch")]
    #[doc(alias = "cuStreamBeginCapture")]
    #[doc(alias = "cuGraphExecKernelNodeSetParams")]
    pub fn run<F>(&mut self, stream: &mut Stream, body: F) -> Result<()>
    where
        F: FnOnce(&mut Recorder<'_, 'a>) -> Result<()>,
    {
        self.ctx.ensure_same(stream.context(), "cuGraphLaunch")?;
        self.rec.clear();
        let recorded = body(&mut Recorder {
            rec: &mut self.rec,
            stream,
            ctx: &self.ctx,
        });
        if let Err(e) = recorded {
            self.rec.clear();
            return Err(e);
        }
        self.clock += 1;
        let found = if self.rec.stateful { None } else { self.find() };
        let index = match found {
            Some(i) => match self.update(i) {
                Ok(()) => {
                    self.stats.replays += 1;
                    i
                }
                // A setter refused: the executable holds a mix of values; drop it and
                // capture this execution instead.
                Err(_) => {
                    self.entries.swap_remove(i);
                    self.capture(stream)?
                }
            },
            None => self.capture(stream)?,
        };
        self.stats.executions += 1;
        let entry = &mut self.entries[index];
        entry.last_used = self.clock;
        entry.exec.launch(stream)?;
        // The recording now lives in the entry (swapped or moved there).
        for event in &entry.rec.records {
            event.record(stream)?;
        }
        Ok(())
    }

    /// The cached executable whose structure matches the recording.
    fn find(&self) -> Option<usize> {
        let rec = &self.rec;
        self.entries.iter().position(|e| {
            e.rec.hash == rec.hash
                && e.rec.ops.len() == rec.ops.len()
                && e.rec.records.len() == rec.records.len()
                && e.rec.ops.iter().zip(&rec.ops).all(|(a, b)| {
                    a.kind == b.kind
                        && a.func.map(Function::as_raw) == b.func.map(Function::as_raw)
                        && a.shape == b.shape
                        && a.bytes == b.bytes
                        && a.host == b.host
                        && range(&e.rec.params, a.params) == range(&rec.params, b.params)
                        && a.words.1 - a.words.0 == b.words.1 - b.words.0
                        && range(&e.rec.attrs, a.attrs)
                            .iter()
                            .zip(range(&rec.attrs, b.attrs))
                            .all(|(x, y)| attr_eq(x, y))
                        && a.attrs.1 - a.attrs.0 == b.attrs.1 - b.attrs.0
                })
        })
    }

    /// Sets the parameters of entry `i` that differ from the recording's, then makes the
    /// recording the entry's (swapping buffers: no allocation).
    fn update(&mut self, i: usize) -> Result<()> {
        let entry = &mut self.entries[i];
        let rec = &self.rec;
        let cu = api()?;
        let mut ptrs = [ptr::null_mut(); crate::args::MAX_PARAMS];
        for ((old, new), &node) in entry.rec.ops.iter().zip(&rec.ops).zip(&entry.nodes) {
            match new.kind {
                Kind::Kernel => {
                    if range(&entry.rec.words, old.words) == range(&rec.words, new.words) {
                        continue;
                    }
                    let Some(f) = new.func else { continue };
                    rec.arg_ptrs(new, &mut ptrs);
                    let params = kernel_params(f, &new.shape, ptrs.as_mut_ptr());
                    // SAFETY: live executable graph and a kernel node of the graph it was
                    // instantiated from; `ptrs` point into `rec.words`, alive for the
                    // call (the driver copies the values); the launch contract for the
                    // values is the recorder's caller's.
                    unsafe {
                        drv!(
                            cu,
                            cuGraphExecKernelNodeSetParams(entry.exec.as_raw(), node, &params)
                        )?;
                    }
                }
                Kind::MemsetD8 | Kind::MemsetD32 => {
                    if new.bytes == 0 || (old.dst == new.dst && old.value == new.value) {
                        continue;
                    }
                    let p = memset_params(new);
                    // SAFETY: a memset node of the source graph; the target is a buffer
                    // of this context borrowed for `'a` with `bytes` bytes.
                    unsafe {
                        drv!(
                            cu,
                            cuGraphExecMemsetNodeSetParams(
                                entry.exec.as_raw(),
                                node,
                                &p,
                                self.ctx.as_raw()
                            )
                        )?;
                    }
                }
                Kind::CopyDtoD | Kind::CopyHtoD => {
                    if new.bytes == 0 || (old.dst == new.dst && old.src == new.src) {
                        continue;
                    }
                    let c = copy_params(new);
                    // SAFETY: a memcpy node of the source graph; both sides hold `bytes`
                    // bytes, borrowed for `'a` (the host side pinned and only read).
                    unsafe {
                        drv!(
                            cu,
                            cuGraphExecMemcpyNodeSetParams(
                                entry.exec.as_raw(),
                                node,
                                &c,
                                self.ctx.as_raw()
                            )
                        )?;
                    }
                }
                // Stateless: the captured closure does what this one would.
                Kind::HostFn => continue,
            }
            self.stats.updated_nodes += 1;
        }
        let rec = &mut self.rec;
        core::mem::swap(&mut entry.rec.ops, &mut rec.ops);
        core::mem::swap(&mut entry.rec.words, &mut rec.words);
        core::mem::swap(&mut entry.rec.params, &mut rec.params);
        core::mem::swap(&mut entry.rec.attrs, &mut rec.attrs);
        core::mem::swap(&mut entry.rec.records, &mut rec.records);
        Ok(())
    }

    /// Captures the recording on `stream`, instantiates it and caches it (evicting the
    /// least recently used executable when full); returns its index.
    fn capture(&mut self, stream: &mut Stream) -> Result<usize> {
        let captured = capture_recording(&mut self.rec, stream);
        let (graph, nodes) = match captured {
            Ok(x) => x,
            Err(e) => {
                self.rec.clear();
                return Err(e);
            }
        };
        let exec = graph.instantiate(InstantiateFlags::empty())?;
        self.stats.captures += 1;
        // One entry per structure: a stateful execution replaces its structure's entry.
        let same = self
            .entries
            .iter()
            .position(|e| e.rec.hash == self.rec.hash && e.rec.ops.len() == self.rec.ops.len());
        if let Some(i) = same {
            self.entries.swap_remove(i);
        } else if self.entries.len() >= self.capacity {
            if let Some(lru) = (0..self.entries.len()).min_by_key(|&i| self.entries[i].last_used) {
                self.entries.swap_remove(lru);
                self.stats.evictions += 1;
            }
        }
        self.sizes = self.sizes.max(self.rec.sizes());
        let mut rec = core::mem::replace(&mut self.rec, Recording::new());
        // The closures went into the graph; the entry keeps none.
        rec.hosts.clear();
        self.rec.reserve_like(&self.sizes);
        for e in &mut self.entries {
            e.rec.reserve_like(&self.sizes);
        }
        rec.reserve_like(&self.sizes);
        self.entries.push(Entry {
            rec,
            nodes,
            exec,
            graph,
            last_used: self.clock,
        });
        Ok(self.entries.len() - 1)
    }
}

/// The node parameters of a recorded kernel.
fn kernel_params(f: &Function, s: &[u32; 7], ptrs: *mut *mut c_void) -> CUDA_KERNEL_NODE_PARAMS {
    CUDA_KERNEL_NODE_PARAMS {
        func: f.as_raw(),
        gridDimX: s[0],
        gridDimY: s[1],
        gridDimZ: s[2],
        blockDimX: s[3],
        blockDimY: s[4],
        blockDimZ: s[5],
        sharedMemBytes: s[6],
        kernelParams: ptrs,
        extra: ptr::null_mut(),
        kern: ptr::null_mut(),
        ctx: f.context().as_raw(),
    }
}

fn memset_params(op: &Op<'_>) -> CUDA_MEMSET_NODE_PARAMS {
    let (size, width) = if op.kind == Kind::MemsetD32 {
        (4, op.bytes / 4)
    } else {
        (1, op.bytes)
    };
    CUDA_MEMSET_NODE_PARAMS {
        dst: op.dst,
        pitch: 0,
        value: op.value,
        elementSize: size,
        width,
        height: 1,
    }
}

fn copy_params(op: &Op<'_>) -> CUDA_MEMCPY3D {
    let mut c = CUDA_MEMCPY3D {
        dstMemoryType: CUmemorytype::CU_MEMORYTYPE_DEVICE,
        dstDevice: op.dst,
        WidthInBytes: op.bytes,
        Height: 1,
        Depth: 1,
        ..CUDA_MEMCPY3D::default()
    };
    if op.kind == Kind::CopyHtoD {
        c.srcMemoryType = CUmemorytype::CU_MEMORYTYPE_HOST;
        c.srcHost = op.src as usize as *const c_void;
    } else {
        c.srcMemoryType = CUmemorytype::CU_MEMORYTYPE_DEVICE;
        c.srcDevice = op.src;
    }
    c
}

/// Issues the recording on a capture of `stream` and returns the graph and, per
/// operation, the node it added (null for none). On error the capture is discarded.
fn capture_recording<'a>(
    rec: &mut Recording<'a>,
    stream: &mut Stream,
) -> Result<(Graph<'a>, Vec<CUgraphNode>)> {
    let mut nodes = Vec::with_capacity(rec.ops.len());
    let cap = Capture::begin(stream, CaptureMode::ThreadLocal)?;
    for i in 0..rec.ops.len() {
        let op = rec.ops[i];
        let issued = issue(rec, i, &op, cap.stream()).and_then(|()| {
            if op.makes_node() {
                last_node(cap.stream())
            } else {
                Ok(ptr::null_mut())
            }
        });
        match issued {
            Ok(node) => nodes.push(node),
            Err(e) => {
                // The capture may be invalidated; ending it reports that, not `e`.
                drop(cap.end());
                return Err(e);
            }
        }
    }
    let graph = cap.end()?;
    Ok((graph, nodes))
}

/// The node the last captured operation added: the capture's one dependency.
fn last_node(stream: &Stream) -> Result<CUgraphNode> {
    let g = stream.context().enter()?;
    // SAFETY: live stream of the current context; the array is read at once.
    let info = unsafe { raw_capture_info(g.cu, stream.as_raw()) }?;
    if info.num_dependencies != 1 || info.deps.is_null() {
        return Err(Error::InvalidArgument(
            "Region: a recorded operation did not leave one capture dependency",
        ));
    }
    // SAFETY: the driver returned one node at `deps`.
    Ok(unsafe { *info.deps })
}

/// Issues operation `i` of `rec` on the capturing `stream`.
fn issue(rec: &mut Recording<'_>, i: usize, op: &Op<'_>, stream: &Stream) -> Result<()> {
    match op.kind {
        Kind::Kernel => {
            let Some(f) = op.func else { return Ok(()) };
            let mut ptrs = [ptr::null_mut(); crate::args::MAX_PARAMS];
            let n = rec.arg_ptrs(op, &mut ptrs);
            let attrs = range(&rec.attrs, op.attrs);
            let s = op.shape;
            let cfg = CUlaunchConfig {
                gridDimX: s[0],
                gridDimY: s[1],
                gridDimZ: s[2],
                blockDimX: s[3],
                blockDimY: s[4],
                blockDimZ: s[5],
                sharedMemBytes: s[6],
                hStream: stream.as_raw(),
                attrs: if attrs.is_empty() {
                    ptr::null_mut()
                } else {
                    attrs.as_ptr().cast_mut()
                },
                numAttrs: attrs.len() as u32,
            };
            let g = f.enter()?;
            // SAFETY: `cfg` points at attributes built by `LaunchConfig` (none writes
            // back: those are refused when recorded); `ptrs` holds `n` pointers into
            // `rec.words`, alive for the call; live stream of `f`'s context (checked when
            // recorded); `f` is borrowed for `'a`. The kernel-side contract is the
            // recorder's caller's.
            unsafe {
                drv!(
                    g.cu,
                    cuLaunchKernelEx(
                        &cfg,
                        f.as_raw(),
                        if n == 0 {
                            ptr::null_mut()
                        } else {
                            ptrs.as_mut_ptr()
                        },
                        ptr::null_mut()
                    )
                )
            }
        }
        Kind::MemsetD8 | Kind::MemsetD32 => {
            let g = stream.context().enter()?;
            // SAFETY: the target is a buffer of this context with `bytes` bytes,
            // borrowed for `'a`; live stream; the context is current.
            unsafe {
                if op.kind == Kind::MemsetD8 {
                    memset_d8(g.cu, op.dst, op.bytes, op.value as u8, Some(stream))
                } else {
                    memset_d32(g.cu, op.dst, op.bytes, op.value, Some(stream))
                }
            }
        }
        Kind::CopyDtoD | Kind::CopyHtoD => {
            if op.bytes == 0 {
                return Ok(());
            }
            let g = stream.context().enter()?;
            // SAFETY: both sides hold `bytes` bytes and are borrowed for `'a` (the host
            // side pinned, only read, and not writable while borrowed); live stream; the
            // context is current.
            unsafe {
                if op.kind == Kind::CopyDtoD {
                    drv!(
                        g.cu,
                        cuMemcpyDtoDAsync(op.dst, op.src, op.bytes, stream.as_raw())
                    )
                } else {
                    drv!(
                        g.cu,
                        cuMemcpyHtoDAsync(
                            op.dst,
                            op.src as usize as *const c_void,
                            op.bytes,
                            stream.as_raw()
                        )
                    )
                }
            }
        }
        Kind::HostFn => {
            let Some(f) = rec.hosts.get_mut(i).and_then(Option::take) else {
                return Err(Error::InvalidArgument("Region: host closure missing"));
            };
            let info = stream.capture_info(&mut [], &mut [])?;
            if !info.is_active() || info.graph.is_null() {
                return Err(Error::InvalidArgument(
                    "host_fn: the stream's capture is not active (invalidated)",
                ));
            }
            GraphClosure::new(info.graph, f)?.attach(|c| {
                // SAFETY: the capture graph owns the closure for as long as any graph or
                // executable graph made from it can run it; `run` matches `data`'s
                // type; the closure is `Send + Sync` and reentrant (`Fn`).
                unsafe { stream.launch_host_fn_raw(c.run, c.data) }
            })
        }
    }
}

/// Records what a [`Region`] execution issues: the stream calls of this crate, with
/// their checks, recorded instead of queued (see the [module docs](super::region)).
/// Lives for one execution; what the graph will name is borrowed for the region's `'a`.
pub struct Recorder<'r, 'a> {
    rec: &'r mut Recording<'a>,
    stream: &'r Stream,
    ctx: &'r Context,
}

impl fmt::Debug for Recorder<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Recorder")
            .field("operations", &self.rec.ops.len())
            .finish_non_exhaustive()
    }
}

/// Writes each kernel argument into whole 8-byte words.
struct WordWriter<'v> {
    words: &'v mut Vec<u64>,
    params: &'v mut Vec<u32>,
}

impl ArgVisitor for WordWriter<'_> {
    type Error = Error;

    fn visit<T: DeviceRepr>(&mut self, value: &T) -> Result<()> {
        let at = self.words.len();
        let offset = u32::try_from(at)
            .map_err(|_| Error::InvalidArgument("Region: too many kernel argument bytes"))?;
        self.words.resize(at + T::DEVICE_SIZE.div_ceil(8), 0);
        // SAFETY: the words just added hold at least `DEVICE_SIZE` bytes, zeroed, not
        // overlapping `value`.
        unsafe { value.write_device_bytes(self.words.as_mut_ptr().add(at).cast::<u8>()) };
        self.params.push(offset);
        Ok(())
    }
}

fn index(n: usize) -> Result<u32> {
    u32::try_from(n).map_err(|_| Error::InvalidArgument("Region: recording too large"))
}

impl<'a> Recorder<'_, 'a> {
    fn same_context(&self, ctx: &Context, call: &'static str) -> Result<()> {
        self.ctx.ensure_same(ctx, call)
    }

    /// `cuLaunchKernelEx`, recorded: a kernel node launching `f` with `cfg`'s grid,
    /// block, dynamic shared memory and attributes (its stream is ignored: the region's
    /// stream runs it) and `args`, whose values are copied now. The region borrows `f`
    /// for `'a`. A launch with [`programmatic_stream_serialization`](LaunchConfig::programmatic_stream_serialization)
    /// becomes a programmatic edge from the operation before it.
    ///
    /// # Errors
    /// [`Error::ContextMismatch`] for a function of another context;
    /// [`Error::InvalidArgument`] for an attribute that names an event or that the driver
    /// writes back (programmatic and launch-completion events, device-updatable node);
    /// at capture, what [`launch`](crate::launch::launch) returns.
    ///
    /// # Safety
    /// As [`launch`](crate::launch::launch), for the execution this call belongs to: `A`
    /// matches the kernel, and the pointers in `args` are valid for what the kernel does
    /// when this execution's graph runs.
    #[doc(alias = "cuLaunchKernelEx")]
    pub unsafe fn launch<A: KernelArgs>(
        &mut self,
        f: &'a Function,
        cfg: &LaunchConfig<'_>,
        args: &A,
    ) -> Result<()> {
        type Id = CUlaunchAttributeID;
        self.same_context(f.context(), "cuLaunchKernelEx")?;
        let rec = &mut *self.rec;
        let a0 = index(rec.attrs.len())?;
        for i in 0..cfg.num_attributes() {
            let Some(a) = cfg.attribute(i) else { continue };
            if a.id == Id::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT
                || a.id == Id::CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT
                || a.id == Id::CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE
            {
                rec.attrs.truncate(a0 as usize);
                return Err(Error::InvalidArgument(
                    "Region: event and device-node launch attributes are not recorded (use \
                     programmatic stream serialization; events with Recorder::record_event)",
                ));
            }
            rec.attrs.push(a);
        }
        let w0 = index(rec.words.len())?;
        let p0 = index(rec.params.len())?;
        args.visit(&mut WordWriter {
            words: &mut rec.words,
            params: &mut rec.params,
        })?;
        let op = Op {
            func: Some(f),
            shape: [
                cfg.grid.x,
                cfg.grid.y,
                cfg.grid.z,
                cfg.block.x,
                cfg.block.y,
                cfg.block.z,
                cfg.shared_mem_bytes,
            ],
            attrs: (a0, index(rec.attrs.len())?),
            words: (w0, index(rec.words.len())?),
            params: (p0, index(rec.params.len())?),
            ..Op::new(Kind::Kernel)
        };
        rec.push(op);
        rec.hosts.push(None);
        rec.ops.push(op);
        Ok(())
    }

    fn push(&mut self, op: Op<'a>) {
        self.rec.push(op);
        self.rec.hosts.push(None);
        self.rec.ops.push(op);
    }

    /// `cuMemsetD8Async`, recorded: every byte of `buf` set to `value`; the region
    /// borrows `buf` for `'a`.
    ///
    /// # Errors
    /// [`Error::ContextMismatch`] for a buffer of another context.
    #[doc(alias = "cuMemsetD8Async")]
    pub fn memset_d8<T: Copy>(&mut self, buf: &'a DeviceBuffer<T>, value: u8) -> Result<()> {
        self.same_context(buf.context(), "cuMemsetD8Async")?;
        self.push(Op {
            bytes: buf.size_bytes(),
            dst: buf.as_raw(),
            value: u32::from(value),
            ..Op::new(Kind::MemsetD8)
        });
        Ok(())
    }

    /// `cuMemsetD32Async`, recorded: every 32-bit word of `buf` set to `value`; the
    /// region borrows `buf` for `'a`.
    ///
    /// # Errors
    /// [`Error::ContextMismatch`] for a buffer of another context;
    /// [`Error::InvalidArgument`] unless the size is a multiple of 4.
    #[doc(alias = "cuMemsetD32Async")]
    pub fn memset_d32<T: Copy>(&mut self, buf: &'a DeviceBuffer<T>, value: u32) -> Result<()> {
        self.same_context(buf.context(), "cuMemsetD32Async")?;
        if buf.size_bytes() % 4 != 0 {
            return Err(Error::InvalidArgument(
                "memset_d32 needs a size that is a multiple of 4 bytes",
            ));
        }
        self.push(Op {
            bytes: buf.size_bytes(),
            dst: buf.as_raw(),
            value,
            ..Op::new(Kind::MemsetD32)
        });
        Ok(())
    }

    /// `cuMemcpyDtoDAsync`, recorded: `src` copied into `dst` (same length); the region
    /// borrows both for `'a`.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] when the lengths differ; [`Error::ContextMismatch`] for
    /// a buffer of another context.
    #[doc(alias = "cuMemcpyDtoDAsync")]
    pub fn copy<T: Copy>(
        &mut self,
        dst: &'a DeviceBuffer<T>,
        src: &'a DeviceBuffer<T>,
    ) -> Result<()> {
        same_len(dst.len(), src.len())?;
        self.same_context(dst.context(), "cuMemcpyDtoDAsync")?;
        self.same_context(src.context(), "cuMemcpyDtoDAsync")?;
        self.push(Op {
            bytes: src.size_bytes(),
            dst: dst.as_raw(),
            src: src.as_raw(),
            ..Op::new(Kind::CopyDtoD)
        });
        Ok(())
    }

    /// `cuMemcpyHtoDAsync`, recorded: pinned host memory `src` copied into `dst` (same
    /// length); the region borrows both for `'a`, `src` shared, so no Rust code writes it
    /// while the region lives (as [`Capturing::copy_from_host`](super::Capturing::copy_from_host)).
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] when the lengths differ; [`Error::ContextMismatch`] for
    /// a device buffer of another context.
    #[doc(alias = "cuMemcpyHtoDAsync")]
    pub fn copy_from_host<T: Copy>(
        &mut self,
        dst: &'a DeviceBuffer<T>,
        src: &'a PinnedHostBuffer<T>,
    ) -> Result<()> {
        same_len(dst.len(), src.len())?;
        self.same_context(dst.context(), "cuMemcpyHtoDAsync")?;
        self.push(Op {
            bytes: dst.size_bytes(),
            dst: dst.as_raw(),
            src: src.as_ptr() as usize as u64,
            ..Op::new(Kind::CopyHtoD)
        });
        Ok(())
    }

    /// `cuLaunchHostFunc`, recorded: a host node running `f`, owned by the graph (a CUDA
    /// user object, as [`Capturing::host_fn`](super::Capturing::host_fn)). A zero-sized
    /// closure (no captured state) replays with the graph; one with state makes this
    /// execution a capture. `f` must not call CUDA functions; a panic aborts.
    ///
    /// # Errors
    /// At capture, driver errors.
    #[doc(alias = "cuLaunchHostFunc")]
    pub fn host_fn<F>(&mut self, f: F) -> Result<()>
    where
        F: Fn() + Send + Sync + 'static,
    {
        if core::mem::size_of::<F>() != 0 {
            self.rec.stateful = true;
        }
        // A box of a zero-sized closure allocates nothing.
        let boxed: HostClosure = Box::new(f);
        let op = Op {
            host: Some(TypeId::of::<F>()),
            ..Op::new(Kind::HostFn)
        };
        self.rec.push(op);
        self.rec.hosts.push(Some(boxed));
        self.rec.ops.push(op);
        Ok(())
    }

    /// `cuStreamWaitEvent`: the region's work waits for `event`'s latest record (queued
    /// at once on the region's stream, so it orders the whole execution, also what was
    /// recorded before it).
    ///
    /// # Errors
    /// [`Error::ContextMismatch`] for an event of another context; driver errors.
    #[doc(alias = "cuStreamWaitEvent")]
    pub fn wait_event(&mut self, event: &Event) -> Result<()> {
        self.same_context(event.context(), "cuStreamWaitEvent")?;
        // SAFETY: a plain wait on a stream that is not capturing (the region checks
        // before launching; a capturing stream would make this an edge, not a node
        // naming the event).
        unsafe {
            self.stream
                .wait_event_unchecked(event, EventWaitFlags::empty())
        }
    }

    /// `cuEventRecord`, recorded: `event` is recorded on the region's stream after the
    /// execution's graph (so it completes after all of the execution's work, also what
    /// was recorded after it). The region borrows `event` for `'a`.
    ///
    /// # Errors
    /// [`Error::ContextMismatch`] for an event of another context.
    #[doc(alias = "cuEventRecord")]
    pub fn record_event(&mut self, event: &'a Event) -> Result<()> {
        self.same_context(event.context(), "cuEventRecord")?;
        self.rec.records.push(event);
        Ok(())
    }

    /// How many operations this execution recorded so far.
    #[must_use]
    pub fn len(&self) -> usize {
        self.rec.ops.len()
    }

    /// Whether it recorded none.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.rec.ops.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_hash_by_structure_not_parameters() {
        let mut a = Recording::new();
        let mut b = Recording::new();
        let x = Op {
            bytes: 64,
            dst: 1,
            value: 2,
            ..Op::new(Kind::MemsetD32)
        };
        let y = Op {
            dst: 99,
            value: 7,
            ..x
        };
        a.push(x);
        b.push(y);
        assert_eq!(a.hash, b.hash);
        let z = Op { bytes: 128, ..x };
        let mut c = Recording::new();
        c.push(z);
        assert_ne!(a.hash, c.hash);
    }

    #[test]
    fn memset_and_copy_params() {
        let op = Op {
            bytes: 64,
            dst: 0x1000,
            value: 5,
            ..Op::new(Kind::MemsetD32)
        };
        let p = memset_params(&op);
        assert_eq!((p.elementSize, p.width, p.height), (4, 16, 1));
        let c = copy_params(&Op {
            src: 0x2000,
            ..Op::new(Kind::CopyDtoD)
        });
        assert_eq!(c.srcDevice, 0x2000);
        assert_eq!(c.srcMemoryType, CUmemorytype::CU_MEMORYTYPE_DEVICE);
    }
}
