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
use crate::memory::{DeviceBuffer, PinnedHostBuffer, Pod, memset_d8, memset_d32, same_len};

/// How many executable graphs a [`Region::new`] caches.
pub const DEFAULT_REGION_CAPACITY: usize = 4;

/// What one recorded operation is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Kind {
    Kernel,
    MemsetD8,
    MemsetD32,
    CopyDtoD,
    CopyHtoD,
    CopyDtoH,
    HostFn,
}

/// The structure of one operation: what must be equal for a cached node to take the
/// operation's parameters. (Attributes other than one-bit ones are compared besides, in
/// the recording's array, and the parameter sizes, in the operations.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Key {
    kind: Kind,
    /// The kernel's `CUfunction` address (kernels only).
    func: usize,
    /// Grid x, y, z, block x, y, z, dynamic shared memory (kernels only).
    shape: [u32; 7],
    /// Bytes of a memset or copy (0: the operation makes no node).
    bytes: usize,
    nattrs: u32,
    nparams: u32,
    nwords: u32,
    /// The launch attributes as one word when they are all one-bit ones
    /// ([`LaunchConfig::one_bit_attributes`]), else [`FULL_ATTRS`]: compared one by one.
    attrs: u64,
    /// A host function's closure type.
    host: Option<TypeId>,
}

impl Key {
    const fn new(kind: Kind) -> Self {
        Self {
            kind,
            func: 0,
            shape: [0; 7],
            bytes: 0,
            nattrs: 0,
            nparams: 0,
            nwords: 0,
            attrs: 0,
            host: None,
        }
    }

    /// Whether the operation adds a node when captured.
    fn makes_node(&self) -> bool {
        match self.kind {
            Kind::Kernel | Kind::HostFn => true,
            _ => self.bytes != 0,
        }
    }

    fn hash_into(&self, h: u64) -> u64 {
        let mut h = h;
        let mut mix = |x: u64| h = (h.rotate_left(5) ^ x).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        mix(self.kind as u64);
        mix(self.func as u64);
        for s in self.shape {
            mix(u64::from(s));
        }
        mix(self.bytes as u64);
        mix(u64::from(self.nattrs) | u64::from(self.nparams) << 16 | u64::from(self.nwords) << 32);
        mix(self.attrs);
        h
    }
}

/// [`Key::attrs`] of a launch whose attributes are not all one-bit ones.
const FULL_ATTRS: u64 = 1 << 63;

/// One recorded operation: its key and its parameters.
#[derive(Clone, Copy)]
struct Op<'a> {
    key: Key,
    /// The kernel, borrowed for the region's `'a` (kernels only).
    func: Option<&'a Function>,
    /// The kernel's parameter sizes (`key.nparams` of them; each parameter takes whole
    /// argument words).
    layout: &'static [ParamSpec],
    /// Where its attributes and argument words start in the recording's arrays
    /// (`key.nattrs` and `key.nwords` of each).
    attrs: u32,
    words: u32,
    /// Destination and source (device address, or host address of a pinned buffer),
    /// memset value.
    dst: CUdeviceptr,
    src: u64,
    value: u32,
}

impl Op<'_> {
    const fn new(kind: Kind) -> Self {
        Self {
            key: Key::new(kind),
            func: None,
            layout: &[],
            attrs: 0,
            words: 0,
            dst: 0,
            src: 0,
            value: 0,
        }
    }

    fn attrs(&self) -> Range<usize> {
        self.attrs as usize..self.attrs as usize + self.key.nattrs as usize
    }

    fn words(&self) -> Range<usize> {
        self.words as usize..self.words as usize + self.key.nwords as usize
    }
}

/// The bytes of an attribute that say what it is: its ID and its 64-byte value.
fn attr_eq(a: &CUlaunchAttribute, b: &CUlaunchAttribute) -> bool {
    // SAFETY: `pad` spans the whole value union; every attribute of a `LaunchConfig` is
    // built from an all-zero value with one member written, so every byte is
    // initialized.
    a.id == b.id && {
        // SAFETY: as above; `[c_char; 64]` and `[u64; 8]` have the same size, and
        // `read_unaligned` needs no alignment.
        let (x, y) = unsafe {
            (
                ptr::from_ref(&a.value.pad)
                    .cast::<[u64; 8]>()
                    .read_unaligned(),
                ptr::from_ref(&b.value.pad)
                    .cast::<[u64; 8]>()
                    .read_unaligned(),
            )
        };
        same(&x, &y)
    }
}

/// Whether two kernels' parameters take the same argument words (the same static list,
/// or the same sizes).
#[inline]
fn same_layout(a: &[ParamSpec], b: &[ParamSpec]) -> bool {
    ptr::eq(a, b) || (a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.size == y.size))
}

/// `a == b` for the short slices of a recording, inline (a call to `memcmp` for a few
/// words cost more than the comparison).
#[inline]
fn same<T: Copy + Eq + core::ops::BitXor<Output = T> + core::ops::BitOr<Output = T> + Default>(
    a: &[T],
    b: &[T],
) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .fold(T::default(), |acc, (&x, &y)| acc | (x ^ y))
            == T::default()
}

type HostClosure = Box<dyn Fn() + Send + Sync + 'static>;

/// A recording: the operations and their attributes and argument words (each kernel
/// parameter zero-padded to whole 8-byte words), and the host closures
/// of the operations that have one. Buffers are reused (cleared, never shrunk).
struct Recording<'a> {
    ops: Vec<Op<'a>>,
    words: Vec<u64>,
    attrs: Vec<CUlaunchAttribute>,
    /// (operation index, closure), for host functions not yet captured.
    hosts: Vec<(u32, HostClosure)>,
    /// Hash of the keys of `ops`.
    hash: u64,
}

const HASH_SEED: u64 = 0xcbf2_9ce4_8422_2325;

impl<'a> Recording<'a> {
    fn new() -> Self {
        Self {
            ops: Vec::new(),
            words: Vec::new(),
            attrs: Vec::new(),
            hosts: Vec::new(),
            hash: HASH_SEED,
        }
    }

    fn clear(&mut self) {
        self.ops.clear();
        self.words.clear();
        self.attrs.clear();
        self.hosts.clear();
        self.hash = HASH_SEED;
    }

    /// Appends `op`, its argument words, and `cfg`'s attributes.
    fn push(&mut self, mut op: Op<'a>, words: &[u64], cfg: Option<&LaunchConfig<'_>>) {
        op.words = self.words.len() as u32;
        op.attrs = self.attrs.len() as u32;
        self.words.extend_from_slice(words);
        if let Some(cfg) = cfg {
            self.attrs
                .extend((0..op.key.nattrs as usize).filter_map(|k| cfg.attribute(k)));
        }
        self.ops.push(op);
    }

    /// Copies the first `n` operations of `src` (with their arrays) into this empty
    /// recording.
    fn extend_prefix(&mut self, src: &Recording<'a>, n: usize) {
        let (w, a) = match src.ops.get(n) {
            Some(op) => (op.words as usize, op.attrs as usize),
            None => (src.words.len(), src.attrs.len()),
        };
        self.ops.extend_from_slice(src.ops.get(..n).unwrap_or(&[]));
        self.words
            .extend_from_slice(src.words.get(..w).unwrap_or(&[]));
        self.attrs
            .extend_from_slice(src.attrs.get(..a).unwrap_or(&[]));
    }

    /// Room for `n` (called at capture time only, so that replays find room).
    fn reserve_like(&mut self, n: &Sizes) {
        self.ops.reserve(n.ops.saturating_sub(self.ops.len()));
        self.words.reserve(n.words.saturating_sub(self.words.len()));
        self.attrs.reserve(n.attrs.saturating_sub(self.attrs.len()));
        self.hosts.reserve(n.hosts.saturating_sub(self.hosts.len()));
    }

    fn sizes(&self) -> Sizes {
        Sizes {
            ops: self.ops.len(),
            words: self.words.len(),
            attrs: self.attrs.len(),
            hosts: self
                .ops
                .iter()
                .filter(|o| o.key.kind == Kind::HostFn)
                .count(),
        }
    }

    /// Whether `self` (a cached recording) and `new` have the same structure.
    fn same_structure(&self, new: &Recording<'_>) -> bool {
        self.hash == new.hash
            && self.ops.len() == new.ops.len()
            && self.ops.iter().zip(&new.ops).all(|(a, b)| {
                a.key == b.key
                    && same_layout(a.layout, b.layout)
                    && match (self.attrs.get(a.attrs()), new.attrs.get(b.attrs())) {
                        (Some(x), Some(y)) => x.iter().zip(y).all(|(p, q)| attr_eq(p, q)),
                        _ => false,
                    }
            })
    }
}

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
                Kind::HostFn => false,
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

/// Moves the recording from following entry `i` (its first `pos` operations matched,
/// their parameters set on it) to the scratch recording; returns the hash of those
/// operations' keys (not computed while following).
fn diverge<'a>(entries: &[Entry<'a>], s: &mut Scratch<'a>, i: usize, pos: usize) -> u64 {
    if let Some(e) = entries.get(i) {
        s.rec.extend_prefix(&e.rec, pos);
    }
    s.rec.hosts.append(&mut s.spec_hosts);
    s.rec
        .ops
        .iter()
        .fold(HASH_SEED, |h, op| op.key.hash_into(h))
}

/// `cuGraphExecKernelNodeSetParams` with the argument words and parameter sizes of a
/// recorded kernel.
fn set_kernel(
    exec: CUgraphExec,
    node: CUgraphNode,
    f: &Function,
    shape: &[u32; 7],
    words: &[u64],
    layout: &[ParamSpec],
    ptrs: &mut [*mut c_void; MAX_PARAMS],
) -> Result<()> {
    let n = arg_ptrs(words, layout, ptrs);
    let p = kernel_params(
        f,
        shape,
        if n == 0 {
            ptr::null_mut()
        } else {
            ptrs.as_mut_ptr()
        },
    );
    let cu = api()?;
    // SAFETY: live executable graph and a kernel node of the graph it was instantiated
    // from; `ptrs` point into `words`, alive for the call (the driver copies the values);
    // the launch contract for the values is the recorder's caller's.
    unsafe { drv!(cu, cuGraphExecKernelNodeSetParams(exec, node, &p)) }
}

/// The memset or copy setter when `new`'s parameters differ from `old`'s; whether it set.
fn set_memory(
    exec: CUgraphExec,
    node: CUgraphNode,
    old: &Op<'_>,
    new: &Op<'_>,
    ctx: &Context,
) -> Result<bool> {
    if new.key.bytes == 0 || (old.dst == new.dst && old.src == new.src && old.value == new.value) {
        return Ok(false);
    }
    let cu = api()?;
    if matches!(new.key.kind, Kind::MemsetD8 | Kind::MemsetD32) {
        let p = memset_params(new);
        // SAFETY: a memset node of the source graph; the target is a buffer of this
        // context borrowed for `'a` with `bytes` bytes.
        unsafe {
            drv!(
                cu,
                cuGraphExecMemsetNodeSetParams(exec, node, &p, ctx.as_raw())
            )?
        };
    } else {
        let c = copy_params(new);
        // SAFETY: a memcpy node of the source graph; both sides hold `bytes` bytes,
        // borrowed for `'a` (the host side pinned and only read).
        unsafe {
            drv!(
                cu,
                cuGraphExecMemcpyNodeSetParams(exec, node, &c, ctx.as_raw())
            )?
        };
    }
    Ok(true)
}

/// The kernel parameter pointers into `words` (each parameter of `layout` starting a
/// whole word), written to `ptrs`; how many.
fn arg_ptrs(words: &[u64], layout: &[ParamSpec], ptrs: &mut [*mut c_void; MAX_PARAMS]) -> usize {
    let mut at = 0;
    for (p, spec) in ptrs.iter_mut().zip(layout) {
        *p = words.as_ptr().wrapping_add(at).cast_mut().cast::<c_void>();
        at += spec.size.div_ceil(8);
    }
    layout.len().min(MAX_PARAMS)
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
    let (size, width) = if op.key.kind == Kind::MemsetD32 {
        (4, op.key.bytes / 4)
    } else {
        (1, op.key.bytes)
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
        WidthInBytes: op.key.bytes,
        Height: 1,
        Depth: 1,
        ..CUDA_MEMCPY3D::default()
    };
    if op.key.kind == Kind::CopyHtoD {
        c.srcMemoryType = CUmemorytype::CU_MEMORYTYPE_HOST;
        c.srcHost = op.src as usize as *const c_void;
    } else if op.key.kind == Kind::CopyDtoH {
        c.dstMemoryType = CUmemorytype::CU_MEMORYTYPE_HOST;
        c.dstDevice = 0;
        c.dstHost = op.dst as usize as *mut c_void;
        c.srcMemoryType = CUmemorytype::CU_MEMORYTYPE_DEVICE;
        c.srcDevice = op.src;
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
            if op.key.makes_node() {
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
    match op.key.kind {
        Kind::Kernel => {
            let Some(f) = op.func else { return Ok(()) };
            let mut ptrs = [ptr::null_mut(); MAX_PARAMS];
            let words = rec.words.get(op.words()).unwrap_or(&[]);
            let n = arg_ptrs(words, op.layout, &mut ptrs);
            let attrs = rec.attrs.get(op.attrs()).unwrap_or(&[]);
            let s = op.key.shape;
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
            let params = if n == 0 {
                ptr::null_mut()
            } else {
                ptrs.as_mut_ptr()
            };
            // SAFETY: `cfg` points at attributes built by `LaunchConfig` (none writes
            // back: those are refused when recorded); `ptrs` holds `n` pointers into
            // `rec.words`, alive for the call; live stream of `f`'s context (checked when
            // recorded), which is current; `f` is borrowed for `'a`. The kernel-side
            // contract is the recorder's caller's.
            unsafe {
                launch_core(
                    g.cu,
                    f.as_raw(),
                    &cfg,
                    params,
                    ptr::null_mut(),
                    DriverLaunch::Ex,
                )
            }
        }
        Kind::MemsetD8 | Kind::MemsetD32 => {
            let g = stream.context().enter()?;
            // SAFETY: the target is a buffer of this context with `bytes` bytes,
            // borrowed for `'a`; live stream; the context is current.
            unsafe {
                if op.key.kind == Kind::MemsetD8 {
                    memset_d8(g.cu, op.dst, op.key.bytes, op.value as u8, Some(stream))
                } else {
                    memset_d32(g.cu, op.dst, op.key.bytes, op.value, Some(stream))
                }
            }
        }
        Kind::CopyDtoD | Kind::CopyHtoD | Kind::CopyDtoH => {
            if op.key.bytes == 0 {
                return Ok(());
            }
            let g = stream.context().enter()?;
            // SAFETY: both sides hold `bytes` bytes and are borrowed for `'a` (the host
            // side pinned, only read, and not writable while borrowed); live stream; the
            // context is current.
            unsafe {
                if op.key.kind == Kind::CopyDtoD {
                    drv!(
                        g.cu,
                        cuMemcpyDtoDAsync(op.dst, op.src, op.key.bytes, stream.as_raw())
                    )
                } else if op.key.kind == Kind::CopyDtoH {
                    // The host side is a region's bound buffer, borrowed mutably for
                    // `'a` (no Rust access but `Region::host` after a synchronization).
                    drv!(
                        g.cu,
                        cuMemcpyDtoHAsync(
                            op.dst as usize as *mut c_void,
                            op.src,
                            op.key.bytes,
                            stream.as_raw()
                        )
                    )
                } else {
                    drv!(
                        g.cu,
                        cuMemcpyHtoDAsync(
                            op.dst,
                            op.src as usize as *const c_void,
                            op.key.bytes,
                            stream.as_raw()
                        )
                    )
                }
            }
        }
        Kind::HostFn => {
            let at = rec.hosts.iter().position(|(k, _)| *k as usize == i);
            let Some((_, f)) = at.map(|k| rec.hosts.swap_remove(k)) else {
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
/// their checks, recorded instead of queued (see [`Region`]).
/// Lives for one execution; what the graph will name is borrowed for the region's `'a`.
pub struct Recorder<'r, 'a> {
    entries: &'r mut Vec<Entry<'a>>,
    s: &'r mut Scratch<'a>,
    /// The entry being followed, while every operation so far matched it.
    spec: Option<usize>,
    /// Operations recorded so far.
    pos: usize,
    hash: u64,
    /// A host closure with state was recorded: capture this execution.
    stateful: bool,
    /// The entry whose setter failed (to drop).
    failed: Option<usize>,
    /// Setters applied while following.
    updated: u64,
    stream: &'r Stream,
    ctx: &'r Context,
    /// The region's bound host buffers and id.
    sinks: &'r [(usize, usize)],
    id: usize,
}

impl fmt::Debug for Recorder<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Recorder")
            .field("operations", &self.pos)
            .finish_non_exhaustive()
    }
}

/// Writes each kernel argument into whole 8-byte words of a zeroed buffer sized for the
/// tuple.
struct WordWriter<'v> {
    words: &'v mut [u64],
    at: usize,
}

impl ArgVisitor for WordWriter<'_> {
    type Error = Error;

    #[inline]
    fn visit<T: DeviceRepr>(&mut self, value: &T) -> Result<()> {
        let n = T::DEVICE_SIZE.div_ceil(8);
        let Some(dst) = self.words.get_mut(self.at..self.at + n) else {
            return Err(Error::InvalidArgument(
                "Region: argument words out of range",
            ));
        };
        // SAFETY: `dst` holds `n` zeroed words, at least `DEVICE_SIZE` bytes, not
        // overlapping `value`.
        unsafe { value.write_device_bytes(dst.as_mut_ptr().cast::<u8>()) };
        self.at += n;
        Ok(())
    }
}

/// Words a kernel argument tuple takes (each parameter padded to whole words).
const fn tuple_words(params: &[crate::args::ParamSpec]) -> usize {
    let mut total = 0;
    let mut i = 0;
    while i < params.len() {
        total += params[i].size.div_ceil(8);
        i += 1;
    }
    total
}

impl<'a> Recorder<'_, 'a> {
    fn same_context(&self, ctx: &Context, call: &'static str) -> Result<()> {
        self.ctx.ensure_same(ctx, call)
    }

    /// The current operation's argument words (the first `nwords` of the scratch
    /// buffer).
    #[inline]
    fn words(&self, op: &Op<'_>) -> &[u64] {
        self.s.words.get(..op.key.nwords as usize).unwrap_or(&[])
    }

    /// Records `op` (its argument words in the scratch buffer, its attributes in `cfg`):
    /// sets the changed parameters on the entry being followed while it matches, else
    /// appends to the scratch recording.
    #[inline]
    fn record(&mut self, op: Op<'a>, cfg: Option<&LaunchConfig<'_>>, host: Option<HostClosure>) {
        if let Some(i) = self.spec {
            if self
                .follow_kernel(i, &op, cfg)
                .unwrap_or_else(|| self.follow(i, &op))
            {
                if let Some(h) = host {
                    self.s.spec_hosts.push((self.pos as u32, h));
                }
                self.pos += 1;
                return;
            }
            self.hash = diverge(self.entries, self.s, i, self.pos);
            self.spec = None;
        }
        self.hash = op.key.hash_into(self.hash);
        if let Some(h) = host {
            self.s.rec.hosts.push((self.pos as u32, h));
        }
        let s = &mut *self.s;
        s.rec.push(
            op,
            s.words.get(..op.key.nwords as usize).unwrap_or(&[]),
            cfg,
        );
        self.pos += 1;
    }

    /// Whether kernel `op` matches operation `pos` of entry `i` (then its words are set
    /// on the node if they changed); `None` for an operation that is not a kernel, which
    /// [`follow`](Self::follow) decides. The common operation of a replay, checked
    /// inline: attributes other than one-bit ones are compared out of line.
    #[inline]
    fn follow_kernel(
        &mut self,
        i: usize,
        op: &Op<'a>,
        cfg: Option<&LaunchConfig<'_>>,
    ) -> Option<bool> {
        if op.key.kind != Kind::Kernel {
            return None;
        }
        let Some(old) = self.entries.get(i).and_then(|e| e.rec.ops.get(self.pos)) else {
            return Some(false);
        };
        if self.stateful
            || old.key != op.key
            || !same_layout(old.layout, op.layout)
            || (op.key.attrs == FULL_ATTRS && !self.same_attributes(i, old, cfg))
        {
            return Some(false);
        }
        let stored = self.entries[i].rec.words.get(old.words());
        if stored.is_some_and(|w| same(w, self.words(op))) {
            return Some(true);
        }
        let set = self.set_words(i, op);
        Some(self.settle(i, set))
    }

    /// Whether `cfg` sets the attributes `old` (of entry `i`, with an equal key: the
    /// same number, each ID once) was recorded with: each stored one found with the
    /// same value.
    #[inline(never)]
    fn same_attributes(&self, i: usize, old: &Op<'_>, cfg: Option<&LaunchConfig<'_>>) -> bool {
        let stored = self
            .entries
            .get(i)
            .and_then(|e| e.rec.attrs.get(old.attrs()));
        match (cfg, stored) {
            (Some(cfg), Some(attrs)) => attrs.iter().all(|a| cfg.sets_same(a, attr_eq)),
            _ => false,
        }
    }

    /// Whether memory or host-function operation `op` matches operation `pos` of entry
    /// `i`; if so, its changed parameters are set on the entry's executable and stored
    /// in the entry.
    #[inline(never)]
    fn follow(&mut self, i: usize, op: &Op<'a>) -> bool {
        if self.stateful {
            return false;
        }
        let Some(e) = self.entries.get_mut(i) else {
            return false;
        };
        let (Some(old), Some(&node)) = (e.rec.ops.get(self.pos), e.nodes.get(self.pos)) else {
            return false;
        };
        if old.key != op.key {
            return false;
        }
        let set = match op.key.kind {
            // (Kernels are followed by `follow_kernel`.)
            Kind::Kernel => return false,
            Kind::HostFn => return true,
            _ => {
                let r = set_memory(e.exec.as_raw(), node, old, op, self.ctx);
                if let (Ok(true), Some(o)) = (&r, e.rec.ops.get_mut(self.pos)) {
                    o.dst = op.dst;
                    o.src = op.src;
                    o.value = op.value;
                }
                r
            }
        };
        self.settle(i, set)
    }

    /// Sets kernel `op`'s argument words on node `pos` of entry `i` (whose structure it
    /// matches) and stores them in the entry.
    #[inline(never)]
    fn set_words(&mut self, i: usize, op: &Op<'a>) -> Result<bool> {
        // (Callers matched the structure, so none of these is missing; if one were, the
        // entry is dropped and the execution captured, never launched with old words.)
        const MISSING: Error = Error::InvalidArgument("Region: recorded node missing");
        let new = self.s.words.get(..op.key.nwords as usize).unwrap_or(&[]);
        let e = self.entries.get_mut(i).ok_or(MISSING)?;
        let (Some(old), Some(&node), Some(f)) =
            (e.rec.ops.get(self.pos), e.nodes.get(self.pos), op.func)
        else {
            return Err(MISSING);
        };
        let stored = e
            .rec
            .words
            .get_mut(old.words())
            .filter(|w| w.len() == new.len())
            .ok_or(MISSING)?;
        let mut ptrs = [ptr::null_mut(); MAX_PARAMS];
        set_kernel(
            e.exec.as_raw(),
            node,
            f,
            &op.key.shape,
            new,
            op.layout,
            &mut ptrs,
        )?;
        stored.copy_from_slice(new);
        Ok(true)
    }

    /// Counts a setter's result: whether the operation is followed. A refused setter
    /// marks entry `i` to be dropped (the executable cannot take this execution's
    /// values: it is dropped at the end, and this execution captured).
    fn settle(&mut self, i: usize, set: Result<bool>) -> bool {
        match set {
            Ok(changed) => {
                self.updated += u64::from(changed);
                true
            }
            Err(_) => {
                self.failed = Some(i);
                false
            }
        }
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
    /// writes back (programmatic and launch-completion events, device-updatable node), or
    /// more than [`MAX_PARAMS`] parameters; at capture, what
    /// [`launch`](crate::launch::launch) returns.
    ///
    /// # Safety
    /// As [`launch`](crate::launch::launch), for the execution this call belongs to: `A`
    /// matches the kernel, and the pointers in `args` are valid for what the kernel does
    /// when this execution's graph runs.
    #[doc(alias = "cuLaunchKernelEx")]
    #[inline]
    pub unsafe fn launch<A: KernelArgs>(
        &mut self,
        f: &'a Function,
        cfg: &LaunchConfig<'_>,
        args: &A,
    ) -> Result<()> {
        self.same_context(f.context(), "cuLaunchKernelEx")?;
        if cfg.names_event_or_node() {
            return Err(Error::InvalidArgument(
                "Region: event and device-node launch attributes are not recorded (use \
                 programmatic stream serialization; events with Recorder::record_event)",
            ));
        }
        if A::COUNT > MAX_PARAMS {
            return Err(Error::InvalidArgument("Region: too many kernel parameters"));
        }
        let total = const { tuple_words(A::PARAMS) };
        // The scratch buffer keeps its largest length: only the first `total` words
        // are this launch's.
        if self.s.words.len() < total {
            self.s.words.resize(total, 0);
        }
        let Some(words) = self.s.words.get_mut(..total) else {
            return Err(Error::InvalidArgument(
                "Region: argument words out of range",
            ));
        };
        words.fill(0);
        args.visit(&mut WordWriter { words, at: 0 })?;
        let op = Op {
            key: Key {
                func: f.as_raw() as usize,
                shape: [
                    cfg.grid.x,
                    cfg.grid.y,
                    cfg.grid.z,
                    cfg.block.x,
                    cfg.block.y,
                    cfg.block.z,
                    cfg.shared_mem_bytes,
                ],
                nattrs: cfg.num_attributes() as u32,
                nparams: A::PARAMS.len() as u32,
                nwords: total as u32,
                attrs: cfg.one_bit_attributes().unwrap_or(FULL_ATTRS),
                ..Key::new(Kind::Kernel)
            },
            func: Some(f),
            layout: A::PARAMS,
            ..Op::new(Kind::Kernel)
        };
        self.record(op, Some(cfg), None);
        Ok(())
    }

    /// A memory operation (no argument words).
    fn record_memory(&mut self, op: Op<'a>) {
        self.record(op, None, None);
    }

    /// `cuMemsetD8Async`, recorded: every byte of `buf` set to `value`; the region
    /// borrows `buf` for `'a`.
    ///
    /// # Errors
    /// [`Error::ContextMismatch`] for a buffer of another context.
    #[doc(alias = "cuMemsetD8Async")]
    pub fn memset_d8<T: Copy>(&mut self, buf: &'a DeviceBuffer<T>, value: u8) -> Result<()> {
        self.same_context(buf.context(), "cuMemsetD8Async")?;
        self.record_memory(Op {
            key: Key {
                bytes: buf.size_bytes(),
                ..Key::new(Kind::MemsetD8)
            },
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
        self.record_memory(Op {
            key: Key {
                bytes: buf.size_bytes(),
                ..Key::new(Kind::MemsetD32)
            },
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
        self.record_memory(Op {
            key: Key {
                bytes: src.size_bytes(),
                ..Key::new(Kind::CopyDtoD)
            },
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
        self.record_memory(Op {
            key: Key {
                bytes: dst.size_bytes(),
                ..Key::new(Kind::CopyHtoD)
            },
            dst: dst.as_raw(),
            src: src.as_ptr() as usize as u64,
            ..Op::new(Kind::CopyHtoD)
        });
        Ok(())
    }

    /// `cuMemcpyDtoHAsync`, recorded: `src` copied into the pinned host buffer bound as
    /// `dst` ([`Region::bind_host`]; same length). The region borrows `src` for `'a`;
    /// it owns `dst`'s buffer already. Read the result with [`Region::host`].
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a target of another region or one handed back;
    /// [`Error::LengthMismatch`] when the lengths differ; [`Error::ContextMismatch`] for
    /// a device buffer of another context.
    #[doc(alias = "cuMemcpyDtoHAsync")]
    pub fn copy_to_host<T: Pod>(
        &mut self,
        dst: HostTarget<T>,
        src: &'a DeviceBuffer<T>,
    ) -> Result<()> {
        if dst.region != self.id {
            return Err(Error::InvalidArgument(
                "Region: a HostTarget bound to another region",
            ));
        }
        let &(addr, bytes) = self
            .sinks
            .get(dst.index)
            .ok_or(Error::InvalidArgument("Region: unknown HostTarget"))?;
        if addr == UNBOUND {
            return Err(Error::InvalidArgument(
                "Region: a HostTarget whose buffer was handed back (unbind_host)",
            ));
        }
        same_len(bytes / core::mem::size_of::<T>().max(1), src.len())?;
        self.same_context(src.context(), "cuMemcpyDtoHAsync")?;
        self.record_memory(Op {
            key: Key {
                bytes: src.size_bytes(),
                ..Key::new(Kind::CopyDtoH)
            },
            dst: addr as u64,
            src: src.as_raw(),
            ..Op::new(Kind::CopyDtoH)
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
            self.stateful = true;
        }
        // A box of a zero-sized closure allocates nothing.
        let boxed: HostClosure = Box::new(f);
        let op = Op {
            key: Key {
                host: Some(TypeId::of::<F>()),
                ..Key::new(Kind::HostFn)
            },
            ..Op::new(Kind::HostFn)
        };
        self.record(op, None, Some(boxed));
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
        // SAFETY: a plain wait on a stream that is not capturing (the region's stream is
        // borrowed exclusively by the run, and a capture would hold it too), so it is
        // an ordinary wait, not a node naming the event.
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
        self.s.records.push(event);
        Ok(())
    }

    /// How many operations this execution recorded so far.
    #[must_use]
    pub fn len(&self) -> usize {
        self.pos
    }

    /// Whether it recorded none.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.pos == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn memset(bytes: usize, dst: u64, value: u32) -> Op<'static> {
        Op {
            key: Key {
                bytes,
                ..Key::new(Kind::MemsetD32)
            },
            dst,
            value,
            ..Op::new(Kind::MemsetD32)
        }
    }

    #[test]
    fn keys_hash_by_structure_not_parameters() {
        let (x, y, z) = (memset(64, 1, 2), memset(64, 99, 7), memset(128, 1, 2));
        assert_eq!(x.key, y.key);
        assert_eq!(x.key.hash_into(HASH_SEED), y.key.hash_into(HASH_SEED));
        assert_ne!(x.key.hash_into(HASH_SEED), z.key.hash_into(HASH_SEED));
    }

    #[test]
    fn prefixes_copy_their_arrays() {
        let mut src = Recording::new();
        let kernel = Op {
            key: Key {
                nparams: 2,
                nwords: 3,
                ..Key::new(Kind::Kernel)
            },
            ..Op::new(Kind::Kernel)
        };
        src.push(kernel, &[1, 2, 3], None);
        src.push(memset(64, 5, 6), &[], None);
        src.push(kernel, &[4, 5, 6], None);
        let mut dst = Recording::new();
        dst.extend_prefix(&src, 2);
        assert_eq!((dst.ops.len(), dst.words.len()), (2, 3));
        let mut all = Recording::new();
        all.extend_prefix(&src, 3);
        assert_eq!(all.words, [1, 2, 3, 4, 5, 6]);
        assert_eq!(all.ops[2].words(), 3..6);
        src.hash = 1;
        all.hash = 1;
        assert!(src.same_structure(&all));
        assert!(!src.same_structure(&dst));
    }

    #[test]
    fn memset_and_copy_params() {
        let p = memset_params(&memset(64, 0x1000, 5));
        assert_eq!((p.elementSize, p.width, p.height), (4, 16, 1));
        let c = copy_params(&Op {
            src: 0x2000,
            ..Op::new(Kind::CopyDtoD)
        });
        assert_eq!(c.srcDevice, 0x2000);
        assert_eq!(c.srcMemoryType, CUmemorytype::CU_MEMORYTYPE_DEVICE);
    }
}
