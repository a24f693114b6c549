//! Conditional nodes (CUDA 12.4+; IF with else and SWITCH 12.8+): a
//! [`ConditionalHandle`] set from device code (`cudaGraphSetConditional`) decides
//! whether, how often or which body graph runs.

use core::ptr;

use cuda_sys::{
    CU_GRAPH_COND_ASSIGN_DEFAULT, CUDA_CONDITIONAL_NODE_PARAMS, CUgraph, CUgraphConditionalHandle,
    CUgraphConditionalNodeType, CUgraphNode, CUgraphNodeParams, CUgraphNodeType,
};

use super::kernel_node::deps_ptr;
use super::{Graph, GraphNode, GraphRef};
use crate::args::DeviceRepr;
use crate::driver::api;
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
        // SAFETY: live graph and context; `deps` holds `deps.len()` nodes and no edge
        // data (default edges); the driver writes `phGraph_out`, pointing at an array
        // of `size` body graphs that it owns for the node's lifetime.
        unsafe {
            drv!(
                cu,
                cuGraphAddNode(
                    &mut node,
                    self.as_raw(),
                    deps_ptr(deps),
                    ptr::null(),
                    deps.len(),
                    &mut params
                )
            )?;
        }
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
        // SAFETY: a node of `self`, which the result borrows.
        Ok((unsafe { GraphNode::from_raw(node) }, bodies))
    }
}
