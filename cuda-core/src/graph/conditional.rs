//! Conditional nodes (CUDA 12.4+; IF with else and SWITCH 12.8+): a
//! [`ConditionalHandle`] set from device code (`cudaGraphSetConditional`) decides
//! whether, how often or which body graph runs.
//!
//! They are added to a [`Graph`] ([`Graph::add_if_node`], ...) or, during a stream
//! capture, to the graph being captured ([`Capturing::add_if_node`], ...): the capture
//! form reads the capture's graph and dependencies (`cuStreamGetCaptureInfo`), adds the
//! node after them and makes it the one later captured work depends on
//! (`cuStreamUpdateCaptureDependencies`), the recipe of the CUDA Programming Guide,
//! without raw handles on the caller's side.

use core::ptr;

use cudadrv_sys::{
    CU_GRAPH_COND_ASSIGN_DEFAULT, CUDA_CONDITIONAL_NODE_PARAMS, CUgraph, CUgraphConditionalHandle,
    CUgraphConditionalNodeType, CUgraphEdgeData, CUgraphNode, CUgraphNodeParams, CUgraphNodeType,
    CUstreamCaptureStatus,
};

use super::capture::{RawCaptureInfo, raw_capture_info};
use super::{Capturing, EdgeData, Graph, GraphNode, GraphRef};
use crate::args::DeviceRepr;
use crate::driver::api;
use crate::driver::dropping;
use crate::error::{Error, Result, drv};

/// A conditional handle (`CUgraphConditionalHandle`) of a graph: the value a
/// conditional node tests. Kernels set it with `cudaGraphSetConditional(handle, value)`
/// (device runtime, `libcudadevrt.a`); pass it to them as a kernel argument (8 bytes,
/// like the C `unsigned long long`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct ConditionalHandle(CUgraphConditionalHandle);

// SAFETY: `repr(transparent)` over `u64`: 8 bytes, 8-aligned, no padding, passed by
// value as the device's `cudaGraphConditionalHandle`.
unsafe impl DeviceRepr for ConditionalHandle {
    const DEVICE_SIZE: usize = 8;
    const DEVICE_ALIGN: usize = 8;
}

impl ConditionalHandle {
    /// The raw handle value.
    #[must_use]
    pub const fn as_raw(self) -> CUgraphConditionalHandle {
        self.0
    }

    /// Wraps a raw handle value (a handle is a plain value; a wrong one makes the
    /// driver or the device runtime report an error).
    #[must_use]
    pub const fn from_raw(raw: CUgraphConditionalHandle) -> Self {
        Self(raw)
    }
}

impl<'a> Graph<'a> {
    /// `cuGraphConditionalHandleCreate`: a handle for this graph's conditional nodes.
    /// With `default: Some(v)` (`CU_GRAPH_COND_ASSIGN_DEFAULT`) the handle is reset to
    /// `v` at the start of every launch; with `None` it keeps its value between
    /// launches (and starts undefined, so a kernel must set it before the node).
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuGraphConditionalHandleCreate")]
    pub fn create_conditional_handle(&self, default: Option<u32>) -> Result<ConditionalHandle> {
        let cu = api()?;
        let mut h: CUgraphConditionalHandle = 0;
        let (value, flags) = match default {
            Some(v) => (v, CU_GRAPH_COND_ASSIGN_DEFAULT),
            None => (0, 0),
        };
        // SAFETY: live graph and context, valid out-pointer.
        unsafe {
            drv!(
                cu,
                cuGraphConditionalHandleCreate(
                    &mut h,
                    self.as_raw(),
                    self.context().as_raw(),
                    value,
                    flags
                )
            )?;
        }
        Ok(ConditionalHandle(h))
    }

    /// An IF node (`CU_GRAPH_COND_TYPE_IF`, size 1): runs the body once when the
    /// handle is non-zero. Returns the node and its body, owned by the node; add the
    /// body's nodes through it.
    ///
    /// # Errors
    /// Driver errors naming `cuGraphAddNode`.
    #[doc(alias = "cuGraphAddNode")]
    #[doc(alias = "CU_GRAPH_COND_TYPE_IF")]
    pub fn add_if_node<'g>(
        &'g self,
        deps: &[GraphNode<'_>],
        handle: ConditionalHandle,
    ) -> Result<(GraphNode<'g>, GraphRef<'g, 'a>)> {
        let (node, [then]) = self.add_conditional::<1>(
            deps,
            handle,
            CUgraphConditionalNodeType::CU_GRAPH_COND_TYPE_IF,
        )?;
        Ok((node, then))
    }

    /// An IF node with an else body (`CU_GRAPH_COND_TYPE_IF`, size 2; CUDA 12.8+):
    /// runs the first body when the handle is non-zero, the second when it is zero.
    ///
    /// # Errors
    /// Driver errors naming `cuGraphAddNode`.
    #[doc(alias = "cuGraphAddNode")]
    #[doc(alias = "CU_GRAPH_COND_TYPE_IF")]
    pub fn add_if_else_node<'g>(
        &'g self,
        deps: &[GraphNode<'_>],
        handle: ConditionalHandle,
    ) -> Result<(GraphNode<'g>, [GraphRef<'g, 'a>; 2])> {
        self.add_conditional::<2>(
            deps,
            handle,
            CUgraphConditionalNodeType::CU_GRAPH_COND_TYPE_IF,
        )
    }

    /// A WHILE node (`CU_GRAPH_COND_TYPE_WHILE`): tests the handle before each
    /// iteration and runs the body while it is non-zero. A kernel in the body usually
    /// sets it for the next test; a default value (see
    /// [`create_conditional_handle`](Self::create_conditional_handle)) or an upstream
    /// kernel sets it for the first.
    ///
    /// # Errors
    /// Driver errors naming `cuGraphAddNode`.
    #[doc(alias = "cuGraphAddNode")]
    #[doc(alias = "CU_GRAPH_COND_TYPE_WHILE")]
    pub fn add_while_node<'g>(
        &'g self,
        deps: &[GraphNode<'_>],
        handle: ConditionalHandle,
    ) -> Result<(GraphNode<'g>, GraphRef<'g, 'a>)> {
        let (node, [body]) = self.add_conditional::<1>(
            deps,
            handle,
            CUgraphConditionalNodeType::CU_GRAPH_COND_TYPE_WHILE,
        )?;
        Ok((node, body))
    }

    /// A SWITCH node with `N` bodies (`CU_GRAPH_COND_TYPE_SWITCH`; CUDA 12.8+): runs
    /// body `i` when the handle is `i`, none when it is `N` or more.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for `N == 0`; driver errors naming `cuGraphAddNode`.
    #[doc(alias = "cuGraphAddNode")]
    #[doc(alias = "CU_GRAPH_COND_TYPE_SWITCH")]
    pub fn add_switch_node<'g, const N: usize>(
        &'g self,
        deps: &[GraphNode<'_>],
        handle: ConditionalHandle,
    ) -> Result<(GraphNode<'g>, [GraphRef<'g, 'a>; N])> {
        self.add_conditional::<N>(
            deps,
            handle,
            CUgraphConditionalNodeType::CU_GRAPH_COND_TYPE_SWITCH,
        )
    }

    /// `cuGraphAddNode` with `CU_GRAPH_NODE_TYPE_CONDITIONAL` and `N` bodies.
    fn add_conditional<'g, const N: usize>(
        &'g self,
        deps: &[GraphNode<'_>],
        handle: ConditionalHandle,
        kind: CUgraphConditionalNodeType,
    ) -> Result<(GraphNode<'g>, [GraphRef<'g, 'a>; N])> {
        self.with_nodes(deps, "cuGraphAddNode", |d, n| {
            // SAFETY: `d` holds `n` live nodes of this graph (checked); no edge data
            // (default edges).
            unsafe { self.add_conditional_raw(d, ptr::null(), n, handle, kind) }
        })
    }

    /// `cuGraphAddNode` with `CU_GRAPH_NODE_TYPE_CONDITIONAL`, `N` bodies, and raw
    /// dependencies.
    ///
    /// # Safety
    /// `deps` must be null with `num_deps == 0` or point to `num_deps` live nodes of this
    /// graph; `edges` must be null (default edges) or point to `num_deps` edge data.
    unsafe fn add_conditional_raw<'g, const N: usize>(
        &'g self,
        deps: *const CUgraphNode,
        edges: *const CUgraphEdgeData,
        num_deps: usize,
        handle: ConditionalHandle,
        kind: CUgraphConditionalNodeType,
    ) -> Result<(GraphNode<'g>, [GraphRef<'g, 'a>; N])> {
        let size = u32::try_from(N)
            .ok()
            .filter(|&n| n > 0)
            .ok_or(Error::InvalidArgument(
                "a conditional node needs 1 to u32::MAX bodies",
            ))?;
        let cu = api()?;
        let mut params = CUgraphNodeParams {
            type_: CUgraphNodeType::CU_GRAPH_NODE_TYPE_CONDITIONAL,
            ..CUgraphNodeParams::default()
        };
        params.__bindgen_anon_1.conditional = CUDA_CONDITIONAL_NODE_PARAMS {
            handle: handle.0,
            type_: kind,
            size,
            phGraph_out: ptr::null_mut(),
            ctx: self.context().as_raw(),
        };
        let mut node: CUgraphNode = ptr::null_mut();
        // cuGraphAddNode_v2 (with edge data, CUDA 12.3) or, on a 12.2 driver, v1 when
        // every dependency is a default edge.
        let default_edges = edges.is_null()
            || num_deps == 0
            // SAFETY: `edges` points to `num_deps` edge data (the caller promises).
            || unsafe { core::slice::from_raw_parts(edges, num_deps) }
                .iter()
                .all(|e| EdgeData::from_raw(*e) == EdgeData::DEFAULT);
        let rc = match (cu.cuGraphAddNode(), cu.cuGraphAddNode_v12020()) {
            // SAFETY: live graph and context; `deps` and `edges` as the caller promises;
            // the driver writes `phGraph_out`, pointing at an array of `size` body
            // graphs that it owns for the node's lifetime.
            (Ok(f), _) => unsafe {
                f(&mut node, self.as_raw(), deps, edges, num_deps, &mut params)
            },
            // SAFETY: as above, without the edge data (all default edges).
            (Err(_), Ok(f)) if default_edges => unsafe {
                f(&mut node, self.as_raw(), deps, num_deps, &mut params)
            },
            (Err(missing), _) => return Err(missing.into()),
        };
        crate::error::call(rc, "cuGraphAddNode")?;
        // SAFETY: the conditional member is the one written above and by the driver.
        let bodies_ptr: *mut CUgraph = unsafe { params.__bindgen_anon_1.conditional.phGraph_out };
        if bodies_ptr.is_null() {
            return Err(Error::InvalidArgument(
                "cuGraphAddNode returned no body graphs for the conditional node",
            ));
        }
        // SAFETY: the driver's array holds `size == N` graphs, alive with the node.
        let bodies = unsafe { core::slice::from_raw_parts(bodies_ptr, N) };
        let bodies = core::array::from_fn(|i| {
            let raw = bodies.get(i).copied().unwrap_or(ptr::null_mut());
            // SAFETY: body `i` is owned by the new node, part of `self`.
            unsafe { GraphRef::new(raw, self) }
        });
        Ok((self.added(node), bodies))
    }
}

impl<'s, 'a> Capturing<'s, 'a> {
    /// `cuGraphConditionalHandleCreate` on the graph being captured: a handle for the
    /// conditional nodes added with [`add_if_node`](Self::add_if_node) and its siblings,
    /// as [`Graph::create_conditional_handle`] (with `default: Some(v)` it is reset to
    /// `v` at the start of every launch).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the capture was invalidated; driver errors.
    #[doc(alias = "cuGraphConditionalHandleCreate")]
    pub fn create_conditional_handle(&self, default: Option<u32>) -> Result<ConditionalHandle> {
        self.capture_graph()?.create_conditional_handle(default)
    }

    /// An IF node in the graph being captured, after the capture's current dependencies
    /// (with their edge data); work captured next depends on it. Returns the node and
    /// its body, owned by the node: add the body's nodes through it (they borrow for the
    /// capture's `'a`, like everything the capture records). The body runs once per
    /// launch when the handle is non-zero.
    ///
    /// ```no_run
    /// # fn main() -> cudadrv::Result<()> {
    /// use cudadrv::{Context, Device, DeviceBuffer, Stream, graph::CaptureMode};
    /// let ctx = Context::primary(Device::get(0)?)?;
    /// let mut stream = Stream::non_blocking(&ctx)?;
    /// let buf = DeviceBuffer::<u32>::new(&ctx, 256)?;
    /// let cap = stream.begin_capture(CaptureMode::Global)?;
    /// cap.memset_d32(&buf, 0)?;
    /// let handle = cap.create_conditional_handle(Some(1))?; // taken at every launch
    /// let (_node, body) = cap.add_if_node(handle)?;
    /// body.add_memset_d32_node(&[], &buf, 7)?; // after the memset, when the handle is set
    /// drop(body);
    /// let graph = cap.end()?;
    /// # drop(graph); Ok(()) }
    /// ```
    ///
    /// The body cannot outlive the capture:
    ///
    /// ```compile_fail,E0505
    /// # fn f(ctx: &cudadrv::Context) -> cudadrv::Result<()> {
    /// use cudadrv::{Stream, graph::CaptureMode};
    /// let mut stream = Stream::non_blocking(ctx)?;
    /// let cap = stream.begin_capture(CaptureMode::Global)?;
    /// let handle = cap.create_conditional_handle(Some(1))?;
    /// let (_node, body) = cap.add_if_node(handle)?;
    /// let graph = cap.end()?; // error: the body borrows the capture
    /// body.add_empty_node(&[])?;
    /// # drop(graph); Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the capture was invalidated; driver errors naming
    /// `cuGraphAddNode` (conditional nodes need CUDA 12.4) or
    /// `cuStreamUpdateCaptureDependencies` (the node is removed again).
    #[doc(alias = "cuGraphAddNode")]
    #[doc(alias = "cuStreamGetCaptureInfo")]
    #[doc(alias = "cuStreamUpdateCaptureDependencies")]
    #[doc(alias = "CU_GRAPH_COND_TYPE_IF")]
    pub fn add_if_node<'c>(
        &'c self,
        handle: ConditionalHandle,
    ) -> Result<(GraphNode<'c>, GraphRef<'c, 'a>)> {
        let (node, [then]) =
            self.add_conditional::<1>(handle, CUgraphConditionalNodeType::CU_GRAPH_COND_TYPE_IF)?;
        Ok((node, then))
    }

    /// An IF node with an else body in the graph being captured (CUDA 12.8+), as
    /// [`add_if_node`](Self::add_if_node) and [`Graph::add_if_else_node`].
    ///
    /// # Errors
    /// As [`add_if_node`](Self::add_if_node).
    #[doc(alias = "cuGraphAddNode")]
    #[doc(alias = "CU_GRAPH_COND_TYPE_IF")]
    pub fn add_if_else_node<'c>(
        &'c self,
        handle: ConditionalHandle,
    ) -> Result<(GraphNode<'c>, [GraphRef<'c, 'a>; 2])> {
        self.add_conditional::<2>(handle, CUgraphConditionalNodeType::CU_GRAPH_COND_TYPE_IF)
    }

    /// A WHILE node in the graph being captured, as [`add_if_node`](Self::add_if_node)
    /// and [`Graph::add_while_node`].
    ///
    /// # Errors
    /// As [`add_if_node`](Self::add_if_node).
    #[doc(alias = "cuGraphAddNode")]
    #[doc(alias = "CU_GRAPH_COND_TYPE_WHILE")]
    pub fn add_while_node<'c>(
        &'c self,
        handle: ConditionalHandle,
    ) -> Result<(GraphNode<'c>, GraphRef<'c, 'a>)> {
        let (node, [body]) = self
            .add_conditional::<1>(handle, CUgraphConditionalNodeType::CU_GRAPH_COND_TYPE_WHILE)?;
        Ok((node, body))
    }

    /// A SWITCH node with `N` bodies in the graph being captured (CUDA 12.8+), as
    /// [`add_if_node`](Self::add_if_node) and [`Graph::add_switch_node`].
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for `N == 0`; as [`add_if_node`](Self::add_if_node).
    #[doc(alias = "cuGraphAddNode")]
    #[doc(alias = "CU_GRAPH_COND_TYPE_SWITCH")]
    pub fn add_switch_node<'c, const N: usize>(
        &'c self,
        handle: ConditionalHandle,
    ) -> Result<(GraphNode<'c>, [GraphRef<'c, 'a>; N])> {
        self.add_conditional::<N>(
            handle,
            CUgraphConditionalNodeType::CU_GRAPH_COND_TYPE_SWITCH,
        )
    }

    /// Adds the conditional node after the capture's dependencies
    /// (`cuStreamGetCaptureInfo`) and makes it the only one
    /// (`cuStreamUpdateCaptureDependencies` with `CU_STREAM_SET_CAPTURE_DEPENDENCIES`).
    fn add_conditional<'c, const N: usize>(
        &'c self,
        handle: ConditionalHandle,
        kind: CUgraphConditionalNodeType,
    ) -> Result<(GraphNode<'c>, [GraphRef<'c, 'a>; N])> {
        let graph = self.capture_graph()?;
        let stream = self.stream();
        let g = stream.context().enter()?;
        // SAFETY: live stream; the context is current. The arrays the driver returns
        // stay valid until the next call on the stream; the only calls before they are
        // used below are on the graph.
        let RawCaptureInfo {
            status,
            graph: raw_graph,
            mut deps,
            mut edges,
            num_dependencies: num_deps,
            ..
        } = unsafe { raw_capture_info(g.cu, stream.as_raw()) }?;
        if status != CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_ACTIVE {
            return Err(Error::InvalidArgument(
                "conditional node: the stream's capture is not active (invalidated)",
            ));
        }
        if raw_graph != graph.as_raw() {
            return Err(Error::InvalidArgument(
                "conditional node: the stream captures into another graph than it began with",
            ));
        }
        if num_deps == 0 {
            deps = ptr::null();
            edges = ptr::null();
        }
        // SAFETY: `deps` and `edges` are the capture's `num_deps` dependencies (nodes of
        // the capture graph, `graph`) and their edge data (or null), still valid.
        let (node, bodies) =
            unsafe { graph.add_conditional_raw::<N>(deps, edges, num_deps, handle, kind)? };
        // SAFETY: `node` is a live node of the graph this stream captures into.
        let joined =
            unsafe { stream.update_capture_dependencies_raw(&[node.as_raw()], None, true) };
        if let Err(e) = joined {
            // Leave no node that later work does not follow; the bodies are not returned.
            // SAFETY: the node was just added and nothing refers to it.
            unsafe { dropping!(cuGraphDestroyNode(node.as_raw())) };
            return Err(e);
        }
        Ok((node, bodies))
    }
}
