//! Replay regions: ordinary stream work run as a graph. [`Region::run`] calls a body
//! that issues kernels, memsets, copies (device to device, host to device, device to
//! host), host functions and event waits and records
//! through a [`Recorder`] (the same calls, with the same checks and errors, as on a
//! stream). The first execution of a structure is captured (`cuStreamBeginCapture` /
//! `cuStreamEndCapture`) and instantiated; a later execution with the same structure
//! updates the parameters that changed, node by node, and launches the cached
//! executable graph (`cuGraphLaunch`); another structure is captured again, into a
//! bounded cache of executable graphs.
//!
//! The rules (what is recorded, how executions match, what a region borrows, the
//! cache, errors) are on [`Region`].

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::any::TypeId;
use core::ffi::c_void;
use core::fmt;
use core::marker::PhantomData;
use core::ops::Range;
use core::ptr;
use core::sync::atomic::{AtomicUsize, Ordering};

use cudadrv_sys::{
    CUDA_KERNEL_NODE_PARAMS, CUDA_MEMCPY3D, CUDA_MEMSET_NODE_PARAMS, CUdeviceptr, CUgraphExec,
    CUgraphNode, CUlaunchAttribute, CUlaunchConfig, CUmemorytype,
};

use super::capture::{Capture, CaptureMode, raw_capture_info};
use super::handle::Borrows;
use super::plain_nodes::GraphClosure;
use super::{Graph, GraphExec, InstantiateFlags};
use crate::args::{ArgVisitor, DeviceRepr, KernelArgs, MAX_PARAMS, ParamSpec};
use crate::driver::api;
use crate::driver::context::Context;
use crate::driver::event::Event;
use crate::driver::function::Function;
use crate::driver::stream::{EventWaitFlags, Stream};
use crate::error::{Error, Result, drv};
use crate::launch::{DriverLaunch, LaunchConfig, launch_core};
use crate::memory::{DeviceView, PinnedHostBuffer, Pod, memset_d8, memset_d32, same_len};

/// How many executable graphs a [`Region::new`] caches.
pub const DEFAULT_REGION_CAPACITY: usize = 4;

/// The largest sizes a recording reached.
#[derive(Clone, Copy, Default)]
struct Sizes {
    ops: usize,
    words: usize,
    attrs: usize,
    hosts: usize,
}

impl Sizes {
    fn max(self, o: Self) -> Self {
        Self {
            ops: self.ops.max(o.ops),
            words: self.words.max(o.words),
            attrs: self.attrs.max(o.attrs),
            hosts: self.hosts.max(o.hosts),
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

/// The buffers an execution records into, reused from execution to execution.
struct Scratch<'a> {
    /// The recording, once it no longer follows the executable launched last.
    rec: Recording<'a>,
    /// Host closures of the operations matched while following it (kept in case the
    /// execution diverges later and must be captured).
    spec_hosts: Vec<(u32, HostClosure)>,
    /// The current kernel's argument words.
    words: Vec<u64>,
    /// Events to record after the launch.
    records: Vec<&'a Event>,
}

impl Scratch<'_> {
    fn new() -> Self {
        Self {
            rec: Recording::new(),
            spec_hosts: Vec::new(),
            words: Vec::new(),
            records: Vec::new(),
        }
    }

    fn clear(&mut self) {
        self.rec.clear();
        self.spec_hosts.clear();
        self.records.clear();
    }
}

/// A replay region: stream work recorded by a body, run as a cached graph.
///
/// # How an execution runs
/// The body runs first, on the host, and only records: nothing it issues through the
/// recorder is queued until it returns (event waits excepted: they are queued at once,
/// ahead of the region's work). Each recorded operation has
/// - a **structure** (the key): its kind; for a kernel the function, grid, block,
///   dynamic shared memory, launch attributes and parameter sizes; for a memset or copy
///   the byte count; for a host function its type. PDL attributes are part of the
///   structure: captured, a launch with programmatic stream serialization becomes a
///   programmatic edge;
/// - **parameters**: kernel argument values (pointers, sizes, scalars), memset
///   destinations and values, copy sources and destinations.
///
/// While the body records, each operation is compared with the same operation of the
/// executable launched last (the usual case: the same code runs again). As long as the
/// structures agree, a changed parameter is set on that executable's node at once, with
/// the per-node setters (`cuGraphExecKernelNodeSetParams`,
/// `cuGraphExecMemsetNodeSetParams`, `cuGraphExecMemcpyNodeSetParams`), one call per
/// changed node and none for an unchanged one, and nothing is copied; when the body
/// returns, the graph is launched. At the first operation that differs, the recording
/// goes on into a buffer of its own (the operations matched so far copied in), and at the
/// end it is matched whole against the other cached executables (same setters) or
/// captured. Either way every launch of a cached executable runs exactly the values of
/// the execution that launches it, and a cached executable holds the values of its last
/// execution. (Setters beat a recapture plus `cuGraphExecUpdate`: that path makes one
/// capture call per operation and compares the whole graph at every execution;
/// `region_bench` measures both.)
///
/// A host function whose closure holds state (not zero-sized) cannot be swapped into a
/// graph that may still run the old one, so an execution recording one is captured and
/// instantiated anew, replacing its structure's entry. Stateless closures (zero-sized,
/// so every value of the type does the same) replay like the rest.
///
/// # Cache and eviction
/// A region keeps at most [`capacity`](Region::capacity) executable graphs (4 unless
/// [`Region::with_capacity`] says otherwise), one per structure. Capturing a new
/// structure into a full cache evicts the least recently launched one. Dropping an
/// executable graph that was launched waits for its context's work (see [`GraphExec`]),
/// so an eviction, like dropping the region, synchronizes the context.
///
/// # What a region borrows
/// `Region<'a>` carries `'a` like [`Graph<'a>`]: the recorder's methods take the
/// functions, buffers, pinned host buffers and events the graph will name as `&'a`, so
/// they outlive the region and every executable graph it caches (`'a` is invariant).
/// Kernel arguments are copied (the region keeps their bytes); what the pointers among
/// them point to is the `unsafe` launch's contract, for the one execution they are given
/// to: a cached executable is never launched again before its parameters are set to the
/// current execution's. Host closures are owned by the graphs (CUDA user objects).
///
/// The borrows alone do not make a region sound: a region can be forgotten
/// (`mem::forget`), ending them while a launched graph is pending. What a pending graph
/// may still touch is then covered by the driver's rules, probed on the GPU by
/// `hw_promises` (a device buffer's free waits for its context's work; freeing pinned
/// memory lets a pending read of it finish; a module unload lets a pending launch run),
/// and the only host memory the graphs write is owned by the region
/// ([`Region::bind_host`]), so it leaks with it.
///
/// ```compile_fail,E0505
/// # fn f(ctx: &cudadrv::Context) -> cudadrv::Result<()> {
/// use cudadrv::{DeviceBuffer, Stream, graph::Region};
/// let mut stream = Stream::non_blocking(ctx)?;
/// let mut region = Region::new(ctx);
/// let buf = DeviceBuffer::<u32>::new(ctx, 64)?;
/// region.run(&mut stream, |r| r.memset_d32(&buf, 7))?;
/// drop(buf); // error: the region's cached graph names `buf`
/// region.run(&mut stream, |_| Ok(()))?;
/// # Ok(()) }
/// ```
///
/// Pinned host memory a region's copies read cannot be written while the region lives:
///
/// ```compile_fail,E0502
/// # fn f(ctx: &cudadrv::Context) -> cudadrv::Result<()> {
/// use cudadrv::{DeviceBuffer, PinnedHostBuffer, Stream, graph::Region};
/// let mut stream = Stream::non_blocking(ctx)?;
/// let mut host = PinnedHostBuffer::<u32>::zeroed(ctx, 64)?;
/// let dev = DeviceBuffer::<u32>::new(ctx, 64)?;
/// let mut region = Region::new(ctx);
/// region.run(&mut stream, |r| r.copy_from_host(&dev, &host))?;
/// host[0] = 1; // error: the region's cached graph reads `host`
/// region.run(&mut stream, |_| Ok(()))?;
/// # Ok(()) }
/// ```
///
/// Device-to-host copies write pinned host memory that the region owns
/// ([`Region::bind_host`] takes the buffer by value): it is read through
/// [`Region::host`], which waits for the context's work first and keeps the region from
/// running while the slice lives, and handed back by [`Region::unbind_host`], which drops
/// the cached graphs that name it and waits for the context first. A forgotten region
/// (`mem::forget`) keeps the buffer forever: no borrow ends with a copy into it pending.
/// A bound buffer is the region's:
///
/// ```compile_fail,E0382
/// # fn f(ctx: &cudadrv::Context) -> cudadrv::Result<()> {
/// use cudadrv::{DeviceBuffer, PinnedHostBuffer, Stream, graph::Region};
/// let mut stream = Stream::non_blocking(ctx)?;
/// let host = PinnedHostBuffer::<u32>::zeroed(ctx, 64)?;
/// let dev = DeviceBuffer::<u32>::new(ctx, 64)?;
/// let mut region = Region::new(ctx);
/// let out = region.bind_host(host);
/// region.run(&mut stream, |r| r.copy_to_host(out, &dev))?;
/// let x = host[0]; // error: `host` moved into the region
/// # Ok(()) }
/// ```
///
/// and a slice read from it ends before the region runs again:
///
/// ```compile_fail,E0502
/// # fn f(ctx: &cudadrv::Context) -> cudadrv::Result<()> {
/// use cudadrv::{DeviceBuffer, PinnedHostBuffer, Stream, graph::Region};
/// let mut stream = Stream::non_blocking(ctx)?;
/// let host = PinnedHostBuffer::<u32>::zeroed(ctx, 64)?;
/// let dev = DeviceBuffer::<u32>::new(ctx, 64)?;
/// let mut region = Region::new(ctx);
/// let out = region.bind_host(host);
/// region.run(&mut stream, |r| r.copy_to_host(out, &dev))?;
/// let seen = region.host(out)?;
/// region.run(&mut stream, |r| r.copy_to_host(out, &dev))?; // error: `seen` borrows it
/// let x = seen[0];
/// # Ok(()) }
/// ```
///
/// The recorder lives for one execution only:
///
/// ```compile_fail,E0521
/// # fn f(ctx: &cudadrv::Context) -> cudadrv::Result<()> {
/// use cudadrv::{Stream, graph::Region};
/// let mut stream = Stream::non_blocking(ctx)?;
/// let mut region = Region::new(ctx);
/// let mut kept = None;
/// region.run(&mut stream, |r| {
///     kept = Some(r); // error: the recorder cannot escape the body
///     Ok(())
/// })?;
/// # Ok(()) }
/// ```
///
/// A region is not `Send` (its host closures and recorded work stay with the thread that
/// runs it):
///
/// ```compile_fail,E0277
/// # fn f(ctx: &cudadrv::Context) -> cudadrv::Result<()> {
/// let region = cudadrv::graph::Region::new(ctx);
/// std::thread::scope(|s| {
///     s.spawn(move || drop(region)); // error: `Region` cannot be sent
/// });
/// # Ok(()) }
/// ```
///
/// # Errors
/// A refused operation returns the error the same call returns on a stream: the checks
/// run when the recorder is called (lengths, contexts), the driver's verdicts when the
/// recording is captured (an invalid launch is [`Error::Driver`] naming
/// `cuLaunchKernelEx`). When the body or the capture fails, nothing of that execution
/// runs, the failed capture is discarded, and the region stays usable with its cache as
/// it was.
///
/// # Example
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
    scratch: Scratch<'a>,
    /// The entry launched last: the next execution follows it.
    last: Option<usize>,
    /// Largest recording seen: every recording buffer gets this much room at capture
    /// time, so replays do not allocate.
    sizes: Sizes,
    clock: u64,
    stats: RegionStats,
    /// Host buffers bound with [`Region::bind_host`]: (address, bytes); the address is
    /// [`UNBOUND`] once [`Region::unbind_host`] has handed the buffer back.
    sinks: Vec<(usize, usize)>,
    /// The bound buffers themselves (`PinnedHostBuffer<T>`), owned by the region, in the
    /// order of `sinks`. Declared after `entries`: the cached graphs (whose drop waits
    /// for the context) go first.
    held: Vec<Option<Box<dyn core::any::Any>>>,
    /// Tells this region's [`HostTarget`]s from other regions'.
    id: usize,
    _borrows: Borrows<'a>,
}

/// The address of a sink whose buffer [`Region::unbind_host`] handed back.
const UNBOUND: usize = usize::MAX;

/// Region ids (for [`HostTarget`]).
static REGION_IDS: AtomicUsize = AtomicUsize::new(1);

/// A pinned host buffer bound to one [`Region`] with [`Region::bind_host`]: the target of
/// [`Recorder::copy_to_host`], read back with [`Region::host`]. A copyable index; the
/// region owns the buffer.
pub struct HostTarget<T> {
    region: usize,
    index: usize,
    _t: PhantomData<fn() -> T>,
}

impl<T> Clone for HostTarget<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for HostTarget<T> {}

impl<T> fmt::Debug for HostTarget<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostTarget")
            .field("index", &self.index)
            .finish_non_exhaustive()
    }
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
            scratch: Scratch::new(),
            last: None,
            sizes: Sizes::default(),
            clock: 0,
            stats: RegionStats::default(),
            sinks: Vec::new(),
            held: Vec::new(),
            id: REGION_IDS.fetch_add(1, Ordering::Relaxed),
            _borrows: Borrows::default(),
        }
    }

    /// Binds pinned host memory as the target of device-to-host copies in this region's
    /// executions ([`Recorder::copy_to_host`]): the region takes `buf` and owns it, so
    /// no Rust code reads or writes it except through [`host`](Self::host), which waits
    /// for the region's work first, until [`unbind_host`](Self::unbind_host) hands it
    /// back. (Owned, not borrowed: a borrow would end if the region were forgotten,
    /// with a copy into the buffer still pending.)
    pub fn bind_host<T: Pod>(&mut self, mut buf: PinnedHostBuffer<T>) -> HostTarget<T> {
        let bytes = core::mem::size_of_val::<[T]>(&buf);
        self.sinks.push((buf.as_mut_ptr() as usize, bytes));
        self.held.push(Some(Box::new(buf)));
        HostTarget {
            region: self.id,
            index: self.sinks.len() - 1,
            _t: PhantomData,
        }
    }

    /// The contents of a host buffer bound with [`bind_host`](Self::bind_host), after
    /// `cuCtxSynchronize` (so every graph this region launched, on any stream, has
    /// finished writing it). While the slice lives, the region cannot run.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a target of another region or one handed back
    /// already; driver errors of the synchronization.
    #[doc(alias = "cuCtxSynchronize")]
    pub fn host<T: Pod>(&self, target: HostTarget<T>) -> Result<&[T]> {
        self.sink(target)?;
        self.ctx.synchronize()?;
        // The slot holds this target's `PinnedHostBuffer<T>` (`sink` checked it is
        // bound); every graph of this region has finished with it, and none can start
        // while `&self` is borrowed (`run` takes `&mut self`).
        self.held
            .get(target.index)
            .and_then(|b| b.as_ref())
            .and_then(|b| b.downcast_ref::<PinnedHostBuffer<T>>())
            .map(|b| &**b)
            .ok_or(Error::InvalidArgument("Region: unknown HostTarget"))
    }

    /// Hands a bound buffer back: drops every cached executable graph (no graph of the
    /// region names the buffer any more) after `cuCtxSynchronize`, so no copy into it is
    /// pending. Later recordings of `copy_to_host` with `target` are refused.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a target of another region or one handed back
    /// already; driver errors of the synchronization (the buffer then stays bound).
    #[doc(alias = "cuCtxSynchronize")]
    pub fn unbind_host<T: Pod>(&mut self, target: HostTarget<T>) -> Result<PinnedHostBuffer<T>> {
        self.sink(target)?;
        self.ctx.synchronize()?;
        self.clear();
        let slot = self
            .held
            .get_mut(target.index)
            .ok_or(Error::InvalidArgument("Region: unknown HostTarget"))?;
        let buf = slot
            .take()
            .ok_or(Error::InvalidArgument("Region: unknown HostTarget"))?
            .downcast::<PinnedHostBuffer<T>>()
            .map_err(|_| Error::InvalidArgument("Region: unknown HostTarget"))?;
        if let Some(sink) = self.sinks.get_mut(target.index) {
            sink.0 = UNBOUND;
        }
        Ok(*buf)
    }

    fn sink<T>(&self, target: HostTarget<T>) -> Result<(usize, usize)> {
        if target.region != self.id {
            return Err(Error::InvalidArgument(
                "Region: a HostTarget bound to another region",
            ));
        }
        match self.sinks.get(target.index) {
            Some(&(addr, _)) if addr == UNBOUND => Err(Error::InvalidArgument(
                "Region: a HostTarget whose buffer was handed back (unbind_host)",
            )),
            Some(&sink) => Ok(sink),
            None => Err(Error::InvalidArgument("Region: unknown HostTarget")),
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
        self.last = None;
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
        self.last
            .and_then(|i| self.entries.get(i))
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
        self.scratch.clear();
        let spec = self.last.filter(|&i| i < self.entries.len());
        let mut r = Recorder {
            entries: &mut self.entries,
            s: &mut self.scratch,
            spec,
            pos: 0,
            hash: HASH_SEED,
            stateful: false,
            failed: None,
            updated: 0,
            stream,
            ctx: &self.ctx,
            sinks: &self.sinks,
            id: self.id,
        };
        let recorded = body(&mut r);
        // Setters applied while following the last executable count whatever happens:
        // that executable now holds those values (and the recording they came from).
        let Recorder {
            spec,
            pos,
            hash,
            stateful,
            failed,
            updated,
            ..
        } = r;
        self.stats.updated_nodes += updated;
        if let Err(e) = recorded {
            self.scratch.clear();
            if let Some(i) = failed {
                self.remove(i);
            }
            return Err(e);
        }
        self.clock += 1;
        let index = match spec {
            Some(i) if !stateful && failed.is_none() && pos == self.entries[i].rec.ops.len() => {
                self.stats.replays += 1;
                i
            }
            _ => {
                let mut hash = hash;
                if let Some(i) = spec {
                    // Diverged at the end (fewer operations): the matched prefix is
                    // the recording.
                    let (entries, s) = (&self.entries, &mut self.scratch);
                    hash = diverge(entries, s, i, pos);
                }
                if let Some(i) = failed {
                    self.remove(i);
                }
                self.scratch.rec.hash = hash;
                let found = if stateful { None } else { self.find() };
                match found {
                    Some(i) => match self.update(i) {
                        Ok(()) => {
                            self.stats.replays += 1;
                            i
                        }
                        // A setter refused: the executable holds a mix of values; drop
                        // it and capture this execution instead.
                        Err(_) => {
                            self.remove(i);
                            self.capture(stream, stateful)?
                        }
                    },
                    None => self.capture(stream, stateful)?,
                }
            }
        };
        self.stats.executions += 1;
        self.last = Some(index);
        let entry = &mut self.entries[index];
        entry.last_used = self.clock;
        entry.exec.launch(stream)?;
        for event in &self.scratch.records {
            event.record(stream)?;
        }
        self.scratch.records.clear();
        Ok(())
    }

    /// Drops entry `i`.
    fn remove(&mut self, i: usize) {
        if i < self.entries.len() {
            self.entries.swap_remove(i);
        }
        self.last = None;
    }

    /// The cached executable whose structure matches the recording.
    fn find(&self) -> Option<usize> {
        let rec = &self.scratch.rec;
        self.entries.iter().position(|e| e.rec.same_structure(rec))
    }

    /// Sets the parameters of entry `i` that differ from the recording's, then makes the
    /// recording the entry's (swapping buffers: no allocation).
    fn update(&mut self, i: usize) -> Result<()> {
        let entry = &mut self.entries[i];
        let rec = &self.scratch.rec;
        let mut ptrs = [ptr::null_mut(); MAX_PARAMS];
        for ((old, new), &node) in entry.rec.ops.iter().zip(&rec.ops).zip(&entry.nodes) {
            let changed = match new.key.kind {
                Kind::Kernel => {
                    let new_words = rec.words.get(new.words()).unwrap_or(&[]);
                    if entry.rec.words.get(old.words()) == Some(new_words) {
                        false
                    } else {
                        let Some(f) = new.func else { continue };
                        set_kernel(
                            entry.exec.as_raw(),
                            node,
                            f,
                            &new.key.shape,
                            new_words,
                            new.layout,
                            &mut ptrs,
                        )?;
                        true
                    }
                }
                Kind::HostFn | Kind::Nccl => false,
                _ => set_memory(entry.exec.as_raw(), node, old, new, &self.ctx)?,
            };
            if changed {
                self.stats.updated_nodes += 1;
            }
        }
        let rec = &mut self.scratch.rec;
        core::mem::swap(&mut entry.rec.ops, &mut rec.ops);
        core::mem::swap(&mut entry.rec.words, &mut rec.words);
        core::mem::swap(&mut entry.rec.attrs, &mut rec.attrs);
        Ok(())
    }

    /// Captures the recording on `stream`, instantiates it and caches it (evicting the
    /// least recently used executable when full; replacing its structure's entry when
    /// `stateful`); returns its index.
    fn capture(&mut self, stream: &mut Stream, stateful: bool) -> Result<usize> {
        let captured = capture_recording(&mut self.scratch.rec, stream);
        let (graph, nodes) = match captured {
            Ok(x) => x,
            Err(e) => {
                self.scratch.rec.clear();
                return Err(e);
            }
        };
        let exec = graph.instantiate(InstantiateFlags::empty())?;
        self.stats.captures += 1;
        let rec = &self.scratch.rec;
        let same = if stateful {
            self.entries
                .iter()
                .position(|e| e.rec.hash == rec.hash && e.rec.ops.len() == rec.ops.len())
        } else {
            None
        };
        if let Some(i) = same {
            self.remove(i);
        } else if self.entries.len() >= self.capacity {
            if let Some(lru) = (0..self.entries.len()).min_by_key(|&i| self.entries[i].last_used) {
                self.remove(lru);
                self.stats.evictions += 1;
            }
        }
        self.sizes = self.sizes.max(self.scratch.rec.sizes());
        let mut rec = core::mem::replace(&mut self.scratch.rec, Recording::new());
        // The closures went into the graph; the entry keeps none.
        rec.hosts.clear();
        self.scratch.rec.reserve_like(&self.sizes);
        for e in &mut self.entries {
            e.rec.reserve_like(&self.sizes);
        }
        rec.reserve_like(&self.sizes);
        self.scratch.spec_hosts.reserve(self.sizes.hosts);
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

mod recorder;
mod recording;
mod replay;
#[allow(clippy::wildcard_imports)]
pub use recorder::Recorder;
#[allow(clippy::wildcard_imports)]
use recording::*;
#[allow(clippy::wildcard_imports)]
use replay::*;

#[cfg(test)]
mod tests;
