//! Stream capture: [`Capture`] (a new graph) and [`CaptureToGraph`] (into an existing
//! graph), plus the capture queries on [`Stream`].

use core::ptr;

use cuda_sys::{
    CUgraph, CUgraphEdgeData, CUgraphNode, CUstreamCaptureMode, CUstreamCaptureStatus,
    CUstreamUpdateCaptureDependencies_flags,
};

use super::{EdgeData, Graph, GraphNode};
use crate::context::Context;
use crate::driver::api;
use crate::error::{Error, Result, drv};
use crate::stream::Stream;

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

impl Stream<'_> {
    /// `cuStreamIsCapturing`: whether this stream is capturing, not, or in an
    /// invalidated capture.
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuStreamIsCapturing")]
    pub fn capture_status(&self) -> Result<CUstreamCaptureStatus> {
        let cu = api()?;
        let mut status = CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
        // SAFETY: live stream, valid out-pointer.
        unsafe { drv!(cu, cuStreamIsCapturing(self.as_raw(), &mut status))? };
        Ok(status)
    }

    /// `cuStreamGetCaptureInfo` (v3, with edge data): the capture status, ID, graph and
    /// current dependencies. Up to `nodes.len().min(data.len())` dependencies (the
    /// nodes the next captured operation will depend on, and the edge data it will get)
    /// are copied into `nodes` and `data`; [`CaptureInfo::num_dependencies`] says how
    /// many there are.
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuStreamGetCaptureInfo")]
    pub fn capture_info(
        &self,
        nodes: &mut [CUgraphNode],
        data: &mut [EdgeData],
    ) -> Result<CaptureInfo> {
        let cu = api()?;
        let mut status = CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
        let mut id = 0u64;
        let mut graph: CUgraph = ptr::null_mut();
        let mut deps: *const CUgraphNode = ptr::null();
        let mut edges: *const CUgraphEdgeData = ptr::null();
        let mut n = 0usize;
        // SAFETY: live stream and valid out-pointers. The arrays the driver returns are
        // valid until the next call on the stream; they are copied below, before any.
        unsafe {
            drv!(
                cu,
                cuStreamGetCaptureInfo(
                    self.as_raw(),
                    &mut status,
                    &mut id,
                    &mut graph,
                    &mut deps,
                    &mut edges,
                    &mut n
                )
            )?;
        }
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

    /// `cuStreamUpdateCaptureDependencies`: replaces (`replace`) or extends the set of
    /// nodes the next captured operation depends on, with edge data (`data`: one per
    /// node, or `None` for default edges).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `data` has a different length than `nodes`;
    /// driver errors (`CUDA_ERROR_ILLEGAL_STATE` when not capturing).
    #[doc(alias = "cuStreamUpdateCaptureDependencies")]
    pub fn update_capture_dependencies(
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
        let cu = api()?;
        // SAFETY: live stream; `nodes` and `data` hold `nodes.len()` elements (the
        // driver reads only, despite the `*mut` in the C signature); `EdgeData` is
        // `repr(transparent)` over `CUgraphEdgeData`.
        unsafe {
            drv!(
                cu,
                cuStreamUpdateCaptureDependencies(
                    self.as_raw(),
                    nodes.as_ptr().cast_mut(),
                    data.map_or(ptr::null(), |d| d.as_ptr().cast::<CUgraphEdgeData>()),
                    nodes.len(),
                    flags.0
                )
            )
        }
    }
}

/// A stream capture into a new graph (`cuStreamBeginCapture`), ended by
/// [`end`](Self::end) (`cuStreamEndCapture`), which returns the graph.
///
/// Work enqueued on the stream meanwhile (launches, copies, event records, host
/// functions) is recorded, not run. Dropping the guard without `end` ends the capture
/// and destroys what was captured.
#[derive(Debug)]
#[must_use = "a capture must be ended to get its graph"]
pub struct Capture<'s, 'ctx> {
    stream: &'s Stream<'ctx>,
    ctx: &'ctx Context,
    active: bool,
}

impl<'s, 'ctx> Capture<'s, 'ctx> {
    /// `cuStreamBeginCapture`: starts capturing `stream` (of `ctx`) in `mode`.
    ///
    /// # Errors
    /// Driver errors (`CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED` on the legacy default
    /// stream, `CUDA_ERROR_ILLEGAL_STATE` when already capturing).
    #[doc(alias = "cuStreamBeginCapture")]
    pub fn begin(ctx: &'ctx Context, stream: &'s Stream<'ctx>, mode: CaptureMode) -> Result<Self> {
        let cu = api()?;
        // SAFETY: live stream; plain mode value.
        unsafe { drv!(cu, cuStreamBeginCapture(stream.as_raw(), mode.as_raw()))? };
        Ok(Self {
            stream,
            ctx,
            active: true,
        })
    }

    /// The stream being captured.
    #[must_use]
    pub fn stream(&self) -> &'s Stream<'ctx> {
        self.stream
    }

    /// `cuStreamEndCapture`: ends the capture and returns the captured graph.
    ///
    /// # Errors
    /// Driver errors: `CUDA_ERROR_STREAM_CAPTURE_INVALIDATED` when an operation during
    /// the capture invalidated it, `CUDA_ERROR_STREAM_CAPTURE_UNJOINED` when another
    /// stream forked from this one was not joined back.
    #[doc(alias = "cuStreamEndCapture")]
    pub fn end(mut self) -> Result<Graph<'ctx>> {
        self.active = false;
        let raw = end_capture(self.stream)?;
        // SAFETY: `cuStreamEndCapture` hands the caller a new graph.
        Ok(unsafe { Graph::from_raw(raw, self.ctx) })
    }
}

impl Drop for Capture<'_, '_> {
    fn drop(&mut self) {
        if self.active {
            if let Ok(raw) = end_capture(self.stream) {
                // SAFETY: the graph is ours and unused; dropping destroys it.
                drop(unsafe { Graph::from_raw(raw, self.ctx) });
            }
        }
    }
}

/// A stream capture into an existing graph (`cuStreamBeginCaptureToGraph`, CUDA
/// 12.3+): captured work is added to `graph` after the given dependencies. Ended by
/// [`end`](Self::end); dropping the guard ends it too (what was captured stays in the
/// graph).
#[derive(Debug)]
#[must_use = "a capture must be ended"]
pub struct CaptureToGraph<'s, 'g, 'ctx> {
    stream: &'s Stream<'ctx>,
    graph: &'g Graph<'ctx>,
    active: bool,
}

impl<'s, 'g, 'ctx> CaptureToGraph<'s, 'g, 'ctx> {
    /// `cuStreamBeginCaptureToGraph`: starts capturing `stream` into `graph`; the first
    /// captured operations depend on `deps` (with `data`: one entry per node, or `None`
    /// for default edges).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `data` has a different length than `deps`; driver
    /// errors as [`Capture::begin`].
    #[doc(alias = "cuStreamBeginCaptureToGraph")]
    pub fn begin(
        graph: &'g Graph<'ctx>,
        stream: &'s Stream<'ctx>,
        deps: &[GraphNode<'g>],
        data: Option<&[EdgeData]>,
        mode: CaptureMode,
    ) -> Result<Self> {
        if data.is_some_and(|d| d.len() != deps.len()) {
            return Err(Error::InvalidArgument(
                "CaptureToGraph::begin: one edge data entry per dependency",
            ));
        }
        let cu = api()?;
        // SAFETY: live stream and graph; `deps` and `data` hold `deps.len()` elements of
        // `repr(transparent)` types over the C ones.
        unsafe {
            drv!(
                cu,
                cuStreamBeginCaptureToGraph(
                    stream.as_raw(),
                    graph.as_raw(),
                    if deps.is_empty() {
                        ptr::null()
                    } else {
                        deps.as_ptr().cast::<CUgraphNode>()
                    },
                    data.map_or(ptr::null(), |d| d.as_ptr().cast::<CUgraphEdgeData>()),
                    deps.len(),
                    mode.as_raw()
                )
            )?;
        }
        Ok(Self {
            stream,
            graph,
            active: true,
        })
    }

    /// The graph being captured into.
    #[must_use]
    pub fn graph(&self) -> &'g Graph<'ctx> {
        self.graph
    }

    /// `cuStreamEndCapture`: ends the capture; the captured nodes are in the graph.
    ///
    /// # Errors
    /// As [`Capture::end`].
    #[doc(alias = "cuStreamEndCapture")]
    pub fn end(mut self) -> Result<()> {
        self.active = false;
        end_capture(self.stream).map(|_| ())
    }
}

impl Drop for CaptureToGraph<'_, '_, '_> {
    fn drop(&mut self) {
        if self.active {
            // The returned handle is the user's graph: nothing to destroy.
            let _ = end_capture(self.stream);
        }
    }
}

fn end_capture(stream: &Stream<'_>) -> Result<CUgraph> {
    let cu = api()?;
    let mut raw: CUgraph = ptr::null_mut();
    // SAFETY: live stream, valid out-pointer.
    unsafe { drv!(cu, cuStreamEndCapture(stream.as_raw(), &mut raw))? };
    Ok(raw)
}
