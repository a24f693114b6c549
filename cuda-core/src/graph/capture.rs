//! Stream capture: [`Capture`] (a new graph) and [`CaptureToGraph`] (into an existing
//! graph), both [`Capturing`] underneath, plus the capture queries on [`Stream`].
//!
//! # Lifetimes
//! A capture takes its stream by `&mut` for as long as it runs, so no other code can
//! queue work on it meanwhile, and is neither `Send` nor `Sync` (the driver ends a
//! capture only on the thread that began it, for the global and thread-local modes).
//! What the captured graph will name is borrowed for `'a`, the graph's lifetime
//! parameter: the [`Capturing`] methods take buffers, events and functions as `&'a`, and
//! the graph and its executable graphs cannot outlive them (like `std::thread::scope`,
//! with `'a` invariant). Safe stream calls that would make the graph name something by
//! address are refused on a capturing stream ([`Error::StreamCapturing`]); kernel
//! launches are `unsafe` and their contract covers capture.
//!
//! ```compile_fail,E0505
//! # fn f(ctx: &cudadrv::Context) -> cudadrv::Result<()> {
//! use cudadrv::{DeviceBuffer, Stream, graph::CaptureMode};
//! let mut stream = Stream::non_blocking(ctx)?;
//! let buf = DeviceBuffer::<u32>::new(ctx, 64)?;
//! let cap = stream.begin_capture(CaptureMode::Global)?;
//! cap.memset_d32(&buf, 7)?;
//! let graph = cap.end()?;
//! drop(buf); // error: the graph borrows `buf`
//! let exec = graph.instantiate(Default::default())?;
//! # drop(exec); Ok(()) }
//! ```
//!
//! ```compile_fail,E0277
//! # fn f(ctx: &cudadrv::Context) -> cudadrv::Result<()> {
//! use cudadrv::{Stream, graph::CaptureMode};
//! let mut stream = Stream::non_blocking(ctx)?;
//! let cap = stream.begin_capture(CaptureMode::Global)?;
//! std::thread::scope(|s| {
//!     s.spawn(move || cap.end()); // error: a capture stays on its thread
//! });
//! # Ok(()) }
//! ```

use core::cell::OnceCell;
use core::ffi::c_void;
use core::marker::PhantomData;
use core::ops::Deref;
use core::ptr;

use cudadrv_sys::{
    CUgraph, CUgraphEdgeData, CUgraphNode, CUstreamCaptureMode, CUstreamCaptureStatus,
    CUstreamUpdateCaptureDependencies_flags,
};

use super::handle::Borrows;
use super::{EdgeData, Graph, GraphNode};
use crate::args::KernelArgs;
use crate::driver::event::Event;
use crate::driver::function::Function;
use crate::driver::stream::{EventWaitFlags, Stream};
use crate::error::{Error, Result, drv};
use crate::launch::LaunchConfig;
use crate::memory::{DeviceView, PinnedHostBuffer, Pod, memset_d8, memset_d32, same_len};

/// How a capture treats CUDA calls that are not safe during capture
/// (`CUstreamCaptureMode`), such as `cuMemAlloc` or a synchronizing call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum CaptureMode {
    /// `CU_STREAM_CAPTURE_MODE_GLOBAL`: such calls fail on every thread while any
    /// global-mode capture is under way (the default, and the safest).
    #[default]
    Global,
    /// `CU_STREAM_CAPTURE_MODE_THREAD_LOCAL`: they fail only on the capturing thread.
    ThreadLocal,
    /// `CU_STREAM_CAPTURE_MODE_RELAXED`: they are not checked.
    Relaxed,
}

impl CaptureMode {
    /// The raw `CUstreamCaptureMode`.
    #[must_use]
    pub const fn as_raw(self) -> CUstreamCaptureMode {
        match self {
            Self::Global => CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_GLOBAL,
            Self::ThreadLocal => CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
            Self::Relaxed => CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED,
        }
    }
}

/// What `cuStreamGetCaptureInfo` reports about a stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CaptureInfo {
    /// `CU_STREAM_CAPTURE_STATUS_NONE`, `_ACTIVE` or `_INVALIDATED`.
    pub status: CUstreamCaptureStatus,
    /// The capture sequence's ID, unique in the process (meaningful while active).
    pub id: u64,
    /// The graph being captured into (null when not capturing). Owned by the capture.
    pub graph: CUgraph,
    /// How many nodes the next captured operation will depend on.
    pub num_dependencies: usize,
}

impl CaptureInfo {
    /// Whether the stream is capturing.
    #[must_use]
    pub fn is_active(&self) -> bool {
        self.status == CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_ACTIVE
    }
}

impl Stream {
    /// `cuStreamIsCapturing`: whether this stream is capturing, not, or in an
    /// invalidated capture.
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuStreamIsCapturing")]
    pub fn capture_status(&self) -> Result<CUstreamCaptureStatus> {
        let g = self.context().enter()?;
        let mut status = CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
        // SAFETY: live stream, valid out-pointer; the context is current.
        unsafe { drv!(g.cu, cuStreamIsCapturing(self.as_raw(), &mut status))? };
        Ok(status)
    }

    /// `cuStreamGetCaptureInfo` (v3, with edge data): the capture status, ID, graph and
    /// current dependencies. Up to `nodes.len().min(data.len())` dependencies (the
    /// nodes the next captured operation will depend on, and the edge data it will get)
    /// are copied into `nodes` and `data` as raw handles; [`CaptureInfo::num_dependencies`]
    /// says how many there are. [`Capturing::dependencies`] gives them as typed nodes.
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuStreamGetCaptureInfo")]
    pub fn capture_info(
        &self,
        nodes: &mut [CUgraphNode],
        data: &mut [EdgeData],
    ) -> Result<CaptureInfo> {
        let g = self.context().enter()?;
        // SAFETY: live stream; the context is current. The arrays the driver returns
        // are valid until the next call on the stream; they are copied below, before
        // any.
        let RawCaptureInfo {
            status,
            id,
            graph,
            deps,
            edges,
            num_dependencies: n,
        } = unsafe { raw_capture_info(g.cu, self.as_raw()) }?;
        if n > 0 && !deps.is_null() {
            let count = n.min(nodes.len());
            // SAFETY: the driver returned `n` nodes at `deps`; `count <= n`.
            let src = unsafe { core::slice::from_raw_parts(deps, count) };
            nodes.iter_mut().zip(src).for_each(|(d, s)| *d = *s);
        }
        let count = n.min(data.len());
        if edges.is_null() {
            // No edge data: every dependency is a default edge.
            data.iter_mut()
                .take(count)
                .for_each(|d| *d = EdgeData::DEFAULT);
        } else if n > 0 {
            // SAFETY: the driver returned `n` edge data entries at `edges`.
            let src = unsafe { core::slice::from_raw_parts(edges, count) };
            data.iter_mut()
                .zip(src)
                .for_each(|(d, s)| *d = EdgeData::from_raw(*s));
        }
        Ok(CaptureInfo {
            status,
            id,
            graph,
            num_dependencies: n,
        })
    }

    /// `cuStreamUpdateCaptureDependencies` with raw node handles (for interop);
    /// [`Capturing::set_dependencies`] is the safe form.
    ///
    /// # Safety
    /// Every node must be a live node of the graph this stream is capturing into (a
    /// bogus or dangling handle crashes the driver).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `data` has a different length than `nodes`;
    /// driver errors (`CUDA_ERROR_ILLEGAL_STATE` when not capturing).
    #[doc(alias = "cuStreamUpdateCaptureDependencies")]
    pub unsafe fn update_capture_dependencies_raw(
        &self,
        nodes: &[CUgraphNode],
        data: Option<&[EdgeData]>,
        replace: bool,
    ) -> Result<()> {
        if data.is_some_and(|d| d.len() != nodes.len()) {
            return Err(Error::InvalidArgument(
                "update_capture_dependencies: one edge data entry per node",
            ));
        }
        let flags = if replace {
            CUstreamUpdateCaptureDependencies_flags::CU_STREAM_SET_CAPTURE_DEPENDENCIES
        } else {
            CUstreamUpdateCaptureDependencies_flags::CU_STREAM_ADD_CAPTURE_DEPENDENCIES
        };
        let g = self.context().enter()?;
        let cu = g.cu;
        // v2 (with edge data, CUDA 12.3) or, on an older driver, v1 when every edge is
        // a default edge.
        let rc = match (
            cu.cuStreamUpdateCaptureDependencies(),
            cu.cuStreamUpdateCaptureDependencies_v11030(),
        ) {
            // SAFETY: live stream; `nodes` (live nodes of the capture graph, the caller
            // says) and `data` hold `nodes.len()` elements (the driver reads only,
            // despite the `*mut` in the C signature); `EdgeData` is `repr(transparent)`
            // over `CUgraphEdgeData`; the context is current.
            (Ok(f), _) => unsafe {
                f(
                    self.as_raw(),
                    nodes.as_ptr().cast_mut(),
                    data.map_or(ptr::null(), |d| d.as_ptr().cast::<CUgraphEdgeData>()),
                    nodes.len(),
                    flags.0,
                )
            },
            // SAFETY: as above, without the edge data (all default edges).
            (Err(_), Ok(f)) if data.is_none_or(|d| d.iter().all(|e| *e == EdgeData::DEFAULT)) => unsafe {
                f(
                    self.as_raw(),
                    nodes.as_ptr().cast_mut(),
                    nodes.len(),
                    flags.0,
                )
            },
            // Before CUDA 12.3 and an edge with data: the driver cannot express it.
            (Err(missing), _) => return Err(missing.into()),
        };
        crate::error::call(rc, "cuStreamUpdateCaptureDependencies")
    }

    /// `cuStreamBeginCapture`: starts capturing this stream in `mode`; the returned
    /// [`Capture`] ends it. What the captured graph names is borrowed for `'a` through
    /// the capture's methods.
    ///
    /// ```no_run
    /// # fn main() -> cudadrv::Result<()> {
    /// use cudadrv::{Context, Device, DeviceBuffer, Stream, graph::CaptureMode};
    /// let ctx = Context::primary(Device::get(0)?)?;
    /// let mut stream = Stream::non_blocking(&ctx)?;
    /// let buf = DeviceBuffer::<u32>::new(&ctx, 1024)?;
    /// let cap = stream.begin_capture(CaptureMode::Global)?;
    /// cap.memset_d32(&buf, 7)?; // the graph borrows `buf`
    /// let graph = cap.end()?;
    /// let exec = graph.instantiate(Default::default())?;
    /// exec.launch(&stream)?;
    /// stream.synchronize()?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for the per-thread default stream (the synchronous
    /// calls of a per-thread-default-stream build run on it and would be captured);
    /// driver errors (`CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED` on the legacy default
    /// stream, `CUDA_ERROR_ILLEGAL_STATE` when already capturing).
    #[doc(alias = "cuStreamBeginCapture")]
    pub fn begin_capture<'a>(&mut self, mode: CaptureMode) -> Result<Capture<'_, 'a>> {
        Capture::begin(self, mode)
    }
}

/// The refusal for default streams.
fn check_capturable(stream: &Stream) -> Result<()> {
    if stream.as_raw() == cudadrv_sys::CU_STREAM_PER_THREAD {
        return Err(Error::InvalidArgument(
            "the per-thread default stream is not captured by this crate (its synchronous \
             calls would be captured too): capture a stream of your own",
        ));
    }
    Ok(())
}

/// A stream being captured: what [`Capture`] and [`CaptureToGraph`] share. Its methods
/// record work into the graph and borrow what that work names for `'a`.
///
/// Holds the stream exclusively (`&'s mut`); neither `Send` nor `Sync`, so its `&self`
/// methods run on the capturing thread one at a time. They take `&self` so that nodes
/// from [`dependencies`](Self::dependencies), which borrow the capture, stay usable
/// while more work is recorded; [`Capture::end`] takes the capture by value, so no node
/// handle outlives it.
#[derive(Debug)]
pub struct Capturing<'s, 'a> {
    stream: &'s mut Stream,
    /// The graph being captured into, as a non-owning handle, once a method needed it
    /// (conditional nodes, whose bodies borrow it).
    graph: OnceCell<Graph<'a>>,
    _borrows: Borrows<'a>,
}

impl<'s, 'a> Capturing<'s, 'a> {
    /// The stream being captured. Unsafe launches on it are recorded (their contract
    /// covers every launch of the graph); safe calls that would make the graph name
    /// something by address are refused on it ([`Error::StreamCapturing`]).
    #[must_use]
    pub fn stream(&self) -> &Stream {
        self.stream
    }

    /// `cuMemsetD8Async`, captured: a memset node setting every byte of `buf` to `value`
    /// at each launch of the graph, which borrows `buf` for `'a`.
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuMemsetD8Async")]
    pub fn memset_d8<T: Copy + 'a>(
        &self,
        buf: impl Into<DeviceView<'a, T>>,
        value: u8,
    ) -> Result<()> {
        let buf = buf.into();
        buf.release().for_graph()?;
        self.same_context(buf.context(), "cuMemsetD8Async")?;
        let g = buf.context().enter()?;
        // SAFETY: `buf` holds `size_bytes` bytes and outlives the graph (`'a`); the
        // context is current.
        unsafe {
            memset_d8(
                g.cu,
                buf.as_raw(),
                buf.size_bytes(),
                value,
                Some(self.stream),
            )
        }
    }

    /// `cuMemsetD32Async`, captured: every 32-bit word of `buf` set to `value` at each
    /// launch of the graph, which borrows `buf` for `'a`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] unless the size is a multiple of 4; driver errors.
    #[doc(alias = "cuMemsetD32Async")]
    pub fn memset_d32<T: Copy + 'a>(
        &self,
        buf: impl Into<DeviceView<'a, T>>,
        value: u32,
    ) -> Result<()> {
        let buf = buf.into();
        buf.release().for_graph()?;
        self.same_context(buf.context(), "cuMemsetD32Async")?;
        let g = buf.context().enter()?;
        // SAFETY: as in `memset_d8`.
        unsafe {
            memset_d32(
                g.cu,
                buf.as_raw(),
                buf.size_bytes(),
                value,
                Some(self.stream),
            )
        }
    }

    /// `cuMemcpyDtoDAsync`, captured: a copy of `src` into `dst` (same length) at each
    /// launch of the graph, which borrows both for `'a`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the lengths differ; driver errors.
    #[doc(alias = "cuMemcpyDtoDAsync")]
    pub fn copy<T: Copy + 'a>(
        &self,
        dst: impl Into<DeviceView<'a, T>>,
        src: impl Into<DeviceView<'a, T>>,
    ) -> Result<()> {
        let dst = dst.into();
        dst.release().for_graph()?;
        let src = src.into();
        src.release().for_graph()?;
        same_len(dst.len(), src.len())?;
        self.same_context(dst.context(), "cuMemcpyDtoDAsync")?;
        self.same_context(src.context(), "cuMemcpyDtoDAsync")?;
        if src.size_bytes() == 0 {
            return Ok(());
        }
        let g = src.context().enter()?;
        // SAFETY: `dst` holds as many bytes as `src`; both outlive the graph (`'a`) and
        // are released only after their context's work; live stream; the context is
        // current.
        unsafe {
            drv!(
                g.cu,
                cuMemcpyDtoDAsync(
                    dst.as_raw(),
                    src.as_raw(),
                    src.size_bytes(),
                    self.stream.as_raw()
                )
            )
        }
    }

    /// `cuMemcpyHtoDAsync`, captured: a copy of pinned host memory `src` into `dst`
    /// (same length) at each launch of the graph, which borrows both for `'a`; `src`
    /// shared, so no Rust code can write it while the graph or an executable graph made
    /// from it lives. Safe because the copy only reads host memory, as
    /// [`Graph::add_copy_from_host_node`] explains.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] when the lengths differ; driver errors.
    #[doc(alias = "cuMemcpyHtoDAsync")]
    pub fn copy_from_host<T: Copy + 'a>(
        &self,
        dst: impl Into<DeviceView<'a, T>>,
        src: &'a PinnedHostBuffer<T>,
    ) -> Result<()> {
        let dst = dst.into();
        dst.release().for_graph()?;
        same_len(dst.len(), src.len())?;
        self.same_context(dst.context(), "cuMemcpyHtoDAsync")?;
        if dst.size_bytes() == 0 {
            return Ok(());
        }
        let g = dst.context().enter()?;
        // SAFETY: both hold `size_bytes` bytes and outlive the graph (`'a`); the host
        // side is pinned, only read, and cannot be written while borrowed; live stream;
        // the context is current.
        unsafe {
            drv!(
                g.cu,
                cuMemcpyHtoDAsync(
                    dst.as_raw(),
                    src.as_ptr().cast::<c_void>(),
                    dst.size_bytes(),
                    self.stream.as_raw()
                )
            )
        }
    }

    /// `cuMemcpyDtoHAsync`, captured: a copy of `src` into pinned host memory `dst`
    /// (same length) at each launch of the graph, which borrows both for `'a`.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] when the lengths differ; driver errors.
    ///
    /// # Safety
    /// As [`Graph::add_copy_to_host_node`]: from each launch of an executable graph made
    /// from the capture until it has completed, no host code may read `dst`, and `dst`
    /// must not be dropped before the last launch has completed.
    #[doc(alias = "cuMemcpyDtoHAsync")]
    pub unsafe fn copy_to_host<T: Pod + 'a>(
        &self,
        dst: &'a PinnedHostBuffer<T>,
        src: impl Into<DeviceView<'a, T>>,
    ) -> Result<()> {
        let src = src.into();
        src.release().for_graph()?;
        same_len(dst.len(), src.len())?;
        self.same_context(src.context(), "cuMemcpyDtoHAsync")?;
        if src.size_bytes() == 0 {
            return Ok(());
        }
        let g = src.context().enter()?;
        // SAFETY: both hold `size_bytes` bytes and outlive the graph (`'a`); any bytes
        // are a valid `T`; the driver writes `dst` through its allocation pointer (no
        // Rust reference is formed); host access during launches is the caller's
        // promise; live stream; the context is current.
        unsafe {
            drv!(
                g.cu,
                cuMemcpyDtoHAsync(
                    dst.as_ptr().cast_mut().cast::<c_void>(),
                    src.as_raw(),
                    src.size_bytes(),
                    self.stream.as_raw()
                )
            )
        }
    }

    /// [`Error::ContextMismatch`] naming `call` unless `ctx` is the capturing stream's
    /// context (the graph's).
    fn same_context(&self, ctx: &crate::Context, call: &'static str) -> Result<()> {
        self.stream.context().ensure_same(ctx, call)
    }

    /// The graph being captured into (`cuStreamGetCaptureInfo` the first time), as a
    /// non-owning handle that lives as long as `self`.
    pub(super) fn capture_graph(&self) -> Result<&Graph<'a>> {
        if let Some(graph) = self.graph.get() {
            return Ok(graph);
        }
        let info = self.stream.capture_info(&mut [], &mut [])?;
        if !info.is_active() || info.graph.is_null() {
            return Err(Error::InvalidArgument(
                "the stream's capture is not active (invalidated)",
            ));
        }
        // SAFETY: the capture graph lives until the capture ends, which consumes `self`
        // (`Capture::end`, `CaptureToGraph::end`) or drops it, and the handle is a field
        // of `self`, never destroyed by it (non-owning); the graph is of the stream's
        // context; what its nodes name is borrowed for `'a` by the recording methods.
        let graph = unsafe { Graph::borrow_raw(info.graph, self.stream.context()) };
        Ok(self.graph.get_or_init(|| graph))
    }

    /// `cuStreamWaitEvent` on the capturing stream: later captured work depends on the
    /// work captured before `event`'s record (an edge, for example joining a stream that
    /// was forked from this capture back into it). The event must have been recorded in
    /// the same capture; the graph does not name it, so nothing is borrowed.
    ///
    /// # Errors
    /// Driver errors (`CUDA_ERROR_STREAM_CAPTURE_ISOLATION` for an event recorded outside
    /// the capture).
    #[doc(alias = "cuStreamWaitEvent")]
    pub fn wait_event(&self, event: &Event) -> Result<()> {
        // SAFETY: not an external wait: the capture records an edge, not a node naming
        // the event.
        unsafe {
            self.stream
                .wait_event_unchecked(event, EventWaitFlags::empty())
        }
    }

    /// Forks the capture onto `branch`, the fork of the CUDA samples' fork/join
    /// pattern: records `fork` on the capturing stream and makes `branch` wait for it
    /// (`cuEventRecord` + `cuStreamWaitEvent`), so `branch` joins the capture. The
    /// returned [`Capturing`] records into the same graph, after everything captured so
    /// far, and borrows what its work names for the same `'a`; its memsets, copies,
    /// host functions and launches are the same safe (or `unsafe`) calls as on this
    /// capture. Join it back with [`join`](Self::join) before the capture ends (else
    /// the end fails with `CUDA_ERROR_STREAM_CAPTURE_UNJOINED`).
    ///
    /// `branch` is borrowed exclusively for as long as the returned capture lives, and
    /// that capture borrows this one, so it cannot outlive the capture it records into.
    ///
    /// ```no_run
    /// # fn main() -> cudadrv::Result<()> {
    /// use cudadrv::{Context, Device, DeviceBuffer, Event, EventFlags, Stream};
    /// use cudadrv::graph::CaptureMode;
    /// let ctx = Context::primary(Device::get(0)?)?;
    /// let (mut main, mut side) = (Stream::non_blocking(&ctx)?, Stream::non_blocking(&ctx)?);
    /// let (fork, join) = (Event::new(&ctx, EventFlags::DISABLE_TIMING)?,
    ///                     Event::new(&ctx, EventFlags::DISABLE_TIMING)?);
    /// let (a, b) = (DeviceBuffer::<u32>::new(&ctx, 256)?, DeviceBuffer::<u32>::new(&ctx, 256)?);
    /// let cap = main.begin_capture(CaptureMode::Global)?;
    /// let branch = cap.fork(&mut side, &fork)?;
    /// cap.memset_d32(&a, 1)?; // these two memsets run concurrently
    /// branch.memset_d32(&b, 2)?;
    /// cap.join(&branch, &join)?;
    /// drop(branch);
    /// let graph = cap.end()?;
    /// # drop(graph); Ok(()) }
    /// ```
    ///
    /// The branch cannot outlive the capture it records into, and its stream stays
    /// borrowed while it lives:
    ///
    /// ```compile_fail,E0505
    /// # fn f(ctx: &cudadrv::Context) -> cudadrv::Result<()> {
    /// use cudadrv::{DeviceBuffer, Event, EventFlags, Stream, graph::CaptureMode};
    /// let (mut main, mut side) = (Stream::non_blocking(ctx)?, Stream::non_blocking(ctx)?);
    /// let fork = Event::new(ctx, EventFlags::DISABLE_TIMING)?;
    /// let buf = DeviceBuffer::<u32>::new(ctx, 64)?;
    /// let cap = main.begin_capture(CaptureMode::Global)?;
    /// let branch = cap.fork(&mut side, &fork)?;
    /// let graph = cap.end()?; // error: `branch` borrows the capture
    /// branch.memset_d32(&buf, 1)?;
    /// # drop(graph); Ok(()) }
    /// ```
    ///
    /// ```compile_fail,E0499
    /// # fn f(ctx: &cudadrv::Context) -> cudadrv::Result<()> {
    /// use cudadrv::{Event, EventFlags, Stream, graph::CaptureMode};
    /// let (mut main, mut side) = (Stream::non_blocking(ctx)?, Stream::non_blocking(ctx)?);
    /// let fork = Event::new(ctx, EventFlags::DISABLE_TIMING)?;
    /// let cap = main.begin_capture(CaptureMode::Global)?;
    /// let branch = cap.fork(&mut side, &fork)?;
    /// let again = side.begin_capture(CaptureMode::Global)?; // error: `side` is borrowed
    /// # drop((branch, again)); Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::ContextMismatch`] when `branch` belongs to another context;
    /// [`Error::InvalidArgument`] for the per-thread default stream; driver errors
    /// (`CUDA_ERROR_ILLEGAL_STATE` when `branch` is capturing already).
    #[doc(alias = "cuStreamWaitEvent")]
    pub fn fork<'c>(&'c self, branch: &'c mut Stream, fork: &Event) -> Result<Capturing<'c, 'a>> {
        self.same_context(branch.context(), "cuStreamWaitEvent")?;
        check_capturable(branch)?;
        branch.ensure_not_capturing("cuStreamWaitEvent")?;
        fork.record(self.stream)?;
        branch.wait_event(fork)?;
        Ok(Capturing {
            stream: branch,
            graph: OnceCell::new(),
            _borrows: PhantomData,
        })
    }

    /// Joins `branch` (from [`fork`](Self::fork)) back: records `join` on it and makes
    /// later work captured on this stream wait for everything recorded on `branch` so
    /// far (`cuEventRecord` + `cuStreamWaitEvent`). Work may still be recorded on
    /// `branch` afterwards; join again before the capture ends.
    ///
    /// # Errors
    /// Driver errors (`CUDA_ERROR_STREAM_CAPTURE_ISOLATION` when `branch` is not part
    /// of this capture).
    #[doc(alias = "cuStreamWaitEvent")]
    pub fn join(&self, branch: &Capturing<'_, 'a>, join: &Event) -> Result<()> {
        join.record(branch.stream)?;
        self.wait_event(join)
    }

    /// `cuStreamWaitEvent` with `CU_EVENT_WAIT_EXTERNAL`, captured: an event-wait node
    /// naming `event`, which the graph borrows for `'a`.
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuStreamWaitEvent")]
    pub fn wait_event_external(&self, event: &'a Event) -> Result<()> {
        // SAFETY: the event outlives the graph (`'a`).
        unsafe {
            self.stream
                .wait_event_unchecked(event, EventWaitFlags::EXTERNAL)
        }
    }

    /// `cuLaunchHostFunc`, captured: a host node running `f` at every launch of the
    /// graph. The closure is owned by the graph through a CUDA user object (as
    /// [`Graph::add_host_node`] does), so cloning or instantiating the graph any number
    /// of times runs it safely, and it is freed once the graph and its executable graphs
    /// are gone, launched or not. `f` must not call CUDA functions; a panic aborts.
    ///
    /// # Errors
    /// Driver errors; on error the closure (and what it captured) is dropped before
    /// this returns.
    #[cfg(feature = "alloc")]
    #[doc(alias = "cuLaunchHostFunc")]
    #[doc(alias = "cuGraphRetainUserObject")]
    pub fn host_fn<F>(&self, f: F) -> Result<()>
    where
        F: Fn() + Send + Sync + 'static,
    {
        let info = self.stream.capture_info(&mut [], &mut [])?;
        if !info.is_active() || info.graph.is_null() {
            return Err(Error::InvalidArgument(
                "host_fn: the stream's capture is not active (invalidated)",
            ));
        }
        super::plain_nodes::GraphClosure::new(info.graph, f)?.attach(|c| {
            // SAFETY: the capture graph owns the closure for as long as any graph or
            // executable graph made from it can run it; `run` matches `data`'s type;
            // the closure is `Send + Sync` and reentrant (`Fn`).
            unsafe { self.stream.launch_host_fn_raw(c.run, c.data) }
        })
    }

    /// `cuLaunchKernelEx`, captured, on this capture's stream (whatever stream `cfg`
    /// names): a kernel node running `f` at every launch of the graph, which borrows `f`
    /// for `'a` (keeping its module loaded). With
    /// [`device_updatable_kernel_node`](LaunchConfig::device_updatable_kernel_node), the
    /// node's device handle is then in [`cfg.device_node()`](LaunchConfig::device_node).
    ///
    /// # Errors
    /// As [`launch`](crate::launch::launch).
    ///
    /// # Safety
    /// As [`launch`](crate::launch::launch), for every launch of every graph made from
    /// the capture: `A` matches the kernel, and the pointers in `args` stay valid for
    /// what the kernel does at each of them.
    #[doc(alias = "cuLaunchKernelEx")]
    pub unsafe fn launch<A: KernelArgs>(
        &self,
        f: &'a Function,
        cfg: &LaunchConfig<'_>,
        args: &A,
    ) -> Result<()> {
        // SAFETY: the capture's stream is alive for the call.
        let on_capture = unsafe { cfg.clone().raw_stream(self.stream.as_raw()) };
        // SAFETY: forwarded to the caller; `f` outlives the graph (`'a`).
        let r = unsafe { crate::launch::launch(f, &on_capture, args) };
        // The device node of a device-updatable launch, for `cfg.device_node()`.
        cfg.keep_output_of(&on_capture);
        r
    }

    /// The capture's status and current dependencies (`cuStreamGetCaptureInfo`), the
    /// dependencies as nodes of the capture graph borrowed from `self`: up to
    /// `nodes.len().min(data.len())` are written.
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuStreamGetCaptureInfo")]
    pub fn dependencies<'c>(
        &'c self,
        nodes: &mut [GraphNode<'c>],
        data: &mut [EdgeData],
    ) -> Result<CaptureInfo> {
        let mut raw = [ptr::null_mut(); 16];
        let info = self.stream.capture_info(&mut raw, data)?;
        let n = info.num_dependencies.min(raw.len()).min(nodes.len());
        if info.num_dependencies > raw.len() && nodes.len() > raw.len() {
            return Err(Error::InvalidArgument(
                "dependencies: more than 16 capture dependencies; read them with \
                 Stream::capture_info",
            ));
        }
        for (dst, &src) in nodes.iter_mut().zip(raw.iter()).take(n) {
            // SAFETY: a node of the capture graph, which lives at least as long as the
            // capture (`'c` borrows it).
            *dst = unsafe { GraphNode::from_raw(src, info.graph) };
        }
        Ok(info)
    }

    /// `cuStreamUpdateCaptureDependencies`: replaces (`replace`) or extends the set of
    /// nodes the next captured operation depends on, with edge data (`data`: one per
    /// node, or `None` for default edges). The nodes must belong to the capture graph
    /// (from [`dependencies`](Self::dependencies), or the target graph of a
    /// [`CaptureToGraph`]).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `data` has a different length than `nodes`;
    /// [`Error::ForeignNode`] for a node of another graph or the null node; driver
    /// errors.
    #[doc(alias = "cuStreamUpdateCaptureDependencies")]
    pub fn set_dependencies(
        &self,
        nodes: &[GraphNode<'_>],
        data: Option<&[EdgeData]>,
        replace: bool,
    ) -> Result<()> {
        let graph = self.capture_graph()?;
        graph.with_nodes(nodes, "cuStreamUpdateCaptureDependencies", |p, n| {
            let raw = if n == 0 {
                &[][..]
            } else {
                // SAFETY: `p` holds `n` nodes, alive for the closure.
                unsafe { core::slice::from_raw_parts(p, n) }
            };
            // SAFETY: live nodes of the graph this stream captures into (checked).
            unsafe {
                self.stream
                    .update_capture_dependencies_raw(raw, data, replace)
            }
        })
    }
}

/// What `cuStreamGetCaptureInfo` reports, raw.
pub(crate) struct RawCaptureInfo {
    pub(crate) status: CUstreamCaptureStatus,
    pub(crate) id: u64,
    pub(crate) graph: CUgraph,
    /// `num_dependencies` nodes (valid until the next call on the stream), or null.
    pub(crate) deps: *const CUgraphNode,
    /// Their edge data, or null: all default edges (always null before CUDA 12.3).
    pub(crate) edges: *const CUgraphEdgeData,
    pub(crate) num_dependencies: usize,
}

/// `cuStreamGetCaptureInfo`: v3 (with edge data, CUDA 12.3) or, on an older driver, v2,
/// whose dependencies are all default edges (`edges` null).
///
/// # Safety
/// `stream` is a live stream of the current context.
pub(crate) unsafe fn raw_capture_info(
    cu: &cudadrv_sys::DriverApi,
    stream: cudadrv_sys::CUstream,
) -> Result<RawCaptureInfo> {
    let mut info = RawCaptureInfo {
        status: CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE,
        id: 0,
        graph: ptr::null_mut(),
        deps: ptr::null(),
        edges: ptr::null(),
        num_dependencies: 0,
    };
    let rc = match (
        cu.cuStreamGetCaptureInfo(),
        cu.cuStreamGetCaptureInfo_v11030(),
    ) {
        // SAFETY: live stream (the caller says) and valid out-pointers.
        (Ok(f), _) => unsafe {
            f(
                stream,
                &mut info.status,
                &mut info.id,
                &mut info.graph,
                &mut info.deps,
                &mut info.edges,
                &mut info.num_dependencies,
            )
        },
        // SAFETY: as above, without the edge data.
        (Err(_), Ok(f)) => unsafe {
            f(
                stream,
                &mut info.status,
                &mut info.id,
                &mut info.graph,
                &mut info.deps,
                &mut info.num_dependencies,
            )
        },
        (Err(missing), Err(_)) => return Err(missing.into()),
    };
    crate::error::call(rc, "cuStreamGetCaptureInfo")?;
    Ok(info)
}

/// A stream capture into a new graph (`cuStreamBeginCapture`), ended by
/// [`end`](Self::end) (`cuStreamEndCapture`), which returns the graph. Record work
/// through [`Capturing`] (by `Deref`).
///
/// Dropping the guard without `end` ends the capture and destroys what was captured.
#[derive(Debug)]
#[must_use = "a capture must be ended to get its graph"]
pub struct Capture<'s, 'a> {
    inner: Capturing<'s, 'a>,
    active: bool,
}

impl<'s, 'a> Capture<'s, 'a> {
    /// `cuStreamBeginCapture`: starts capturing `stream` in `mode` (see
    /// [`Stream::begin_capture`]).
    ///
    /// # Errors
    /// As [`Stream::begin_capture`].
    #[doc(alias = "cuStreamBeginCapture")]
    pub fn begin(stream: &'s mut Stream, mode: CaptureMode) -> Result<Self> {
        check_capturable(stream)?;
        let g = stream.context().enter()?;
        // SAFETY: live stream; plain mode value; the context is current.
        unsafe { drv!(g.cu, cuStreamBeginCapture(stream.as_raw(), mode.as_raw()))? };
        drop(g);
        Ok(Self {
            inner: Capturing {
                stream,
                graph: OnceCell::new(),
                _borrows: PhantomData,
            },
            active: true,
        })
    }

    /// `cuStreamEndCapture`: ends the capture and returns the captured graph, which
    /// borrows for `'a` what the capture's methods named.
    ///
    /// # Errors
    /// Driver errors: `CUDA_ERROR_STREAM_CAPTURE_INVALIDATED` when an operation during
    /// the capture invalidated it, `CUDA_ERROR_STREAM_CAPTURE_UNJOINED` when another
    /// stream forked from this one was not joined back.
    #[doc(alias = "cuStreamEndCapture")]
    pub fn end(mut self) -> Result<Graph<'a>> {
        self.active = false;
        let raw = end_capture(self.inner.stream)?;
        // SAFETY: `cuStreamEndCapture` hands the caller a new graph of the stream's
        // context; what its nodes name was borrowed for `'a` by the recording methods
        // (or promised by unsafe launches).
        Ok(unsafe { Graph::from_raw(raw, self.inner.stream.context()) })
    }
}

impl<'s, 'a> Deref for Capture<'s, 'a> {
    type Target = Capturing<'s, 'a>;
    fn deref(&self) -> &Capturing<'s, 'a> {
        &self.inner
    }
}

impl Drop for Capture<'_, '_> {
    /// Ends the capture and destroys what was captured; a failure goes to the
    /// drop-error sink.
    fn drop(&mut self) {
        if self.active {
            match end_capture(self.inner.stream) {
                // SAFETY: the graph is ours and unused; dropping destroys it.
                Ok(raw) => {
                    drop(unsafe { Graph::<'static>::from_raw(raw, self.inner.stream.context()) })
                }
                Err(e) => crate::error::report_drop_error(&e),
            }
        }
    }
}

/// A stream capture into an existing graph (`cuStreamBeginCaptureToGraph`, CUDA
/// 12.3+): captured work is added to `graph` after the given dependencies. Ended by
/// [`end`](Self::end); dropping the guard ends it too (what was captured stays in the
/// graph). Record work through [`Capturing`] (by `Deref`): it borrows for the target
/// graph's `'a`.
#[derive(Debug)]
#[must_use = "a capture must be ended"]
pub struct CaptureToGraph<'s, 'g, 'a> {
    inner: Capturing<'s, 'a>,
    graph: &'g Graph<'a>,
    active: bool,
}

impl<'s, 'g, 'a> CaptureToGraph<'s, 'g, 'a> {
    /// `cuStreamBeginCaptureToGraph`: starts capturing `stream` into `graph`; the first
    /// captured operations depend on `deps` (with `data`: one entry per node, or `None`
    /// for default edges).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `data` has a different length than `deps`;
    /// [`Error::ForeignNode`] for a dependency of another graph or the null node;
    /// [`Error::ContextMismatch`] for a stream of another context than the graph's;
    /// driver errors as [`Stream::begin_capture`].
    #[doc(alias = "cuStreamBeginCaptureToGraph")]
    pub fn begin(
        graph: &'g Graph<'a>,
        stream: &'s mut Stream,
        deps: &[GraphNode<'g>],
        data: Option<&[EdgeData]>,
        mode: CaptureMode,
    ) -> Result<Self> {
        if data.is_some_and(|d| d.len() != deps.len()) {
            return Err(Error::InvalidArgument(
                "CaptureToGraph::begin: one edge data entry per dependency",
            ));
        }
        check_capturable(stream)?;
        graph
            .context()
            .ensure_same(stream.context(), "cuStreamBeginCaptureToGraph")?;
        graph.with_nodes(deps, "cuStreamBeginCaptureToGraph", |d, n| {
            let g = stream.context().enter()?;
            // SAFETY: live stream and graph; `d` holds `n` checked nodes of the graph and
            // `data` as many entries of a type `repr(transparent)` over the C one; the
            // context is current.
            unsafe {
                drv!(
                    g.cu,
                    cuStreamBeginCaptureToGraph(
                        stream.as_raw(),
                        graph.as_raw(),
                        d,
                        data.map_or(ptr::null(), |d| d.as_ptr().cast::<CUgraphEdgeData>()),
                        n,
                        mode.as_raw()
                    )
                )
            }
        })?;
        Ok(Self {
            inner: Capturing {
                stream,
                graph: OnceCell::new(),
                _borrows: PhantomData,
            },
            graph,
            active: true,
        })
    }

    /// The graph being captured into.
    #[must_use]
    pub fn graph(&self) -> &'g Graph<'a> {
        self.graph
    }

    /// `cuStreamEndCapture`: ends the capture; the captured nodes are in the graph.
    ///
    /// # Errors
    /// As [`Capture::end`].
    #[doc(alias = "cuStreamEndCapture")]
    pub fn end(mut self) -> Result<()> {
        self.active = false;
        end_capture(self.inner.stream).map(|_| ())
    }
}

impl<'s, 'a> Deref for CaptureToGraph<'s, '_, 'a> {
    type Target = Capturing<'s, 'a>;
    fn deref(&self) -> &Capturing<'s, 'a> {
        &self.inner
    }
}

impl Drop for CaptureToGraph<'_, '_, '_> {
    fn drop(&mut self) {
        if self.active {
            // The returned handle is the user's graph: nothing to destroy. A failure goes
            // to the drop-error sink.
            if let Err(e) = end_capture(self.inner.stream) {
                crate::error::report_drop_error(&e);
            }
        }
    }
}

fn end_capture(stream: &Stream) -> Result<CUgraph> {
    let g = stream.context().enter()?;
    let mut raw: CUgraph = ptr::null_mut();
    // SAFETY: live stream, valid out-pointer; the context is current.
    unsafe { drv!(g.cu, cuStreamEndCapture(stream.as_raw(), &mut raw))? };
    Ok(raw)
}
