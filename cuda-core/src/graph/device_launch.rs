//! Device graph launch, host side (Programming Guide 4.2.6): instantiate a graph for
//! launch from the device, with the guide's requirements checked before the driver
//! call, and hand kernels a [`DeviceGraphHandle`].
//!
//! A device graph is instantiated with [`InstantiateFlags::DEVICE_LAUNCH`] and uploaded
//! before a kernel launches it ([`Graph::instantiate_for_device`] does both). Device
//! code launches it with `cudadrv::device::DeviceGraphExec::launch` into one of the
//! three named graph streams (tail launch, fire-and-forget, fire-and-forget as a
//! sibling), from a kernel that itself runs in a graph; a device graph may also
//! tail-launch itself (`DeviceGraphExec::relaunch_current`).
//!
//! # Requirements checked up front
//! [`Graph::check_device_launchable`] walks the graph, child graphs included, and
//! refuses with [`Error::NotDeviceLaunchable`] naming the rule:
//! - only kernel, memcpy, memset and child-graph nodes (no empty, host, event, external
//!   semaphore, memory alloc/free, batch memory-operation or conditional nodes: driver
//!   580 refuses each of them, empty nodes included);
//! - memcpy nodes copy device memory or page-locked host memory, not CUDA arrays or
//!   pageable host memory;
//! - the device supports unified addressing;
//! - not together with [`InstantiateFlags::AUTO_FREE_ON_LAUNCH`].
//!
//! The rest is left to the driver, which refuses with `CUDA_ERROR_INVALID_VALUE`: nodes
//! on several devices, kernels that use dynamic parallelism themselves.
//!
//! A kernel that calls `cudaGraphLaunch` can only run as a graph node: launched into a
//! stream it is refused by the driver at launch (`CUDA_ERROR_NOT_SUPPORTED` from
//! `cuLaunchKernelEx` on driver 580). Without the
//! `alloc` feature, graphs of more than [`CHECK_CAPACITY`] nodes per level are not
//! walked (the driver still checks them).
//!
//! # Lifetimes
//! A [`DeviceGraphHandle`] is a plain value a kernel receives: device code that launches
//! it after its [`GraphExec`] was destroyed is undefined behaviour, which is why
//! passing it to a kernel goes through the `unsafe` launch calls. Taking the handle
//! marks the executable graph as launched, so dropping it first waits for the context's
//! work, the device launches included.

use core::ptr;

use cudadrv_sys::{
    CUDA_MEMCPY3D, CUdevice_attribute, CUgraph, CUgraphNode, CUgraphNodeType, CUmemorytype,
    CUpointer_attribute,
};

use super::{Graph, GraphExec, InstantiateFlags};
use crate::args::DeviceRepr;
use cudadrv_sys::DriverApi as Api;

use crate::error::drv;
use crate::{Error, Result, Stream};

/// Nodes per graph level that [`Graph::check_device_launchable`] can walk without the
/// `alloc` feature.
pub const CHECK_CAPACITY: usize = 128;

/// Child-graph nesting the check follows; deeper levels are left to the driver.
const MAX_DEPTH: u32 = 16;

/// The handle of an executable graph instantiated for device launch: a kernel parameter
/// (8 bytes, the device's `cudaGraphExec_t`) that device code turns into a
/// `cudadrv::device::DeviceGraphExec` of the same layout. Made by
/// [`GraphExec::device_handle`].
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DeviceGraphHandle(u64);

impl DeviceGraphHandle {
    /// The `cudaGraphExec_t` value.
    #[must_use]
    pub const fn as_u64(self) -> u64 {
        self.0
    }
}

// SAFETY: a transparent `u64`: 8 bytes, no padding, the device's encoding of a handle.
unsafe impl DeviceRepr for DeviceGraphHandle {
    const DEVICE_SIZE: usize = 8;
    const DEVICE_ALIGN: usize = 8;
}

/// The CUDA name of a graph node type (`"kernel"`, `"host"`, `"conditional"`, ...), for
/// messages.
#[must_use]
pub fn node_type_name(t: CUgraphNodeType) -> Option<&'static str> {
    use CUgraphNodeType as T;
    Some(match t {
        T::CU_GRAPH_NODE_TYPE_KERNEL => "kernel",
        T::CU_GRAPH_NODE_TYPE_MEMCPY => "memcpy",
        T::CU_GRAPH_NODE_TYPE_MEMSET => "memset",
        T::CU_GRAPH_NODE_TYPE_HOST => "host",
        T::CU_GRAPH_NODE_TYPE_GRAPH => "child graph",
        T::CU_GRAPH_NODE_TYPE_EMPTY => "empty",
        T::CU_GRAPH_NODE_TYPE_WAIT_EVENT => "event wait",
        T::CU_GRAPH_NODE_TYPE_EVENT_RECORD => "event record",
        T::CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL => "external semaphore signal",
        T::CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT => "external semaphore wait",
        T::CU_GRAPH_NODE_TYPE_MEM_ALLOC => "memory alloc",
        T::CU_GRAPH_NODE_TYPE_MEM_FREE => "memory free",
        T::CU_GRAPH_NODE_TYPE_BATCH_MEM_OP => "batch memory operation",
        T::CU_GRAPH_NODE_TYPE_CONDITIONAL => "conditional",
        _ => return None,
    })
}

/// Whether a node of type `t` may be in a device graph (the first rule), as a message
/// when it may not.
pub(crate) fn node_type_rule(t: CUgraphNodeType) -> Option<&'static str> {
    use CUgraphNodeType as T;
    match t {
        T::CU_GRAPH_NODE_TYPE_KERNEL
        | T::CU_GRAPH_NODE_TYPE_MEMCPY
        | T::CU_GRAPH_NODE_TYPE_MEMSET
        | T::CU_GRAPH_NODE_TYPE_GRAPH => None,
        _ => Some("only kernel, memcpy, memset and child-graph nodes are allowed"),
    }
}

/// The rule a memcpy endpoint of memory type `kind` breaks, if any; `pinned` says
/// whether a host pointer is page-locked (known to CUDA).
pub(crate) fn memcpy_rule(kind: CUmemorytype, pinned: bool) -> Option<&'static str> {
    match kind {
        CUmemorytype::CU_MEMORYTYPE_ARRAY => Some("memcpy nodes may not copy CUDA arrays"),
        CUmemorytype::CU_MEMORYTYPE_HOST if !pinned => {
            Some("memcpy nodes may copy page-locked host memory only, not pageable memory")
        }
        _ => None,
    }
}

/// The rule the instantiate flags break, if any.
pub(crate) fn flags_rule(flags: InstantiateFlags) -> Option<&'static str> {
    flags
        .contains(InstantiateFlags::DEVICE_LAUNCH | InstantiateFlags::AUTO_FREE_ON_LAUNCH)
        .then_some("DEVICE_LAUNCH cannot be combined with AUTO_FREE_ON_LAUNCH")
}

fn refuse(rule: &'static str, node_type: Option<CUgraphNodeType>) -> Error {
    Error::NotDeviceLaunchable { rule, node_type }
}

/// Whether `host` (a host pointer a memcpy node names) is page-locked memory CUDA knows:
/// `cuPointerGetAttributes`, which (unlike `cuPointerGetAttribute`) answers with a
/// memory type of 0 for a pointer CUDA does not know instead of an error.
fn is_pinned(cu: &Api, host: *const core::ffi::c_void) -> bool {
    let Ok(get) = cu.cuPointerGetAttributes() else {
        return false;
    };
    let mut kind = 0u32;
    let mut attr = CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE;
    let mut data = [ptr::from_mut(&mut kind).cast::<core::ffi::c_void>()];
    // SAFETY: one attribute, one out-pointer of its type (an unsigned int); the pointer
    // is only looked up, never dereferenced.
    let r = unsafe { get(1, &mut attr, data.as_mut_ptr(), host as u64) };
    r == cudadrv_sys::CUresult::CUDA_SUCCESS && kind == CUmemorytype::CU_MEMORYTYPE_HOST.0
}

/// Checks one memcpy node's endpoints.
fn check_memcpy(cu: &Api, node: CUgraphNode) -> Result<()> {
    let mut p = CUDA_MEMCPY3D::default();
    // SAFETY: a live memcpy node, valid out-pointer.
    unsafe { drv!(cu, cuGraphMemcpyNodeGetParams(node, &mut p))? };
    let ends = [
        (p.srcMemoryType, p.srcHost),
        (p.dstMemoryType, p.dstHost.cast_const()),
    ];
    for (kind, host) in ends {
        let pinned = kind == CUmemorytype::CU_MEMORYTYPE_HOST && is_pinned(cu, host);
        if let Some(rule) = memcpy_rule(kind, pinned) {
            return Err(refuse(
                rule,
                Some(CUgraphNodeType::CU_GRAPH_NODE_TYPE_MEMCPY),
            ));
        }
    }
    Ok(())
}

/// Checks the nodes of `graph`, following child graphs.
fn check_graph(cu: &Api, graph: CUgraph, depth: u32) -> Result<()> {
    if depth > MAX_DEPTH {
        return Ok(());
    }
    let mut count = 0usize;
    // SAFETY: live graph; a null array asks for the count.
    unsafe { drv!(cu, cuGraphGetNodes(graph, ptr::null_mut(), &mut count))? };
    #[cfg(feature = "alloc")]
    let mut nodes = alloc::vec![ptr::null_mut(); count];
    #[cfg(not(feature = "alloc"))]
    let mut nodes = [ptr::null_mut(); CHECK_CAPACITY];
    if count > nodes.len() {
        return Ok(());
    }
    // SAFETY: live graph; `nodes` holds `count` entries.
    unsafe { drv!(cu, cuGraphGetNodes(graph, nodes.as_mut_ptr(), &mut count))? };
    for &node in &nodes[..count.min(nodes.len())] {
        let mut t = CUgraphNodeType(0);
        // SAFETY: a live node of the graph, valid out-pointer.
        unsafe { drv!(cu, cuGraphNodeGetType(node, &mut t))? };
        if let Some(rule) = node_type_rule(t) {
            return Err(refuse(rule, Some(t)));
        }
        match t {
            CUgraphNodeType::CU_GRAPH_NODE_TYPE_MEMCPY => check_memcpy(cu, node)?,
            CUgraphNodeType::CU_GRAPH_NODE_TYPE_GRAPH => {
                let mut child = ptr::null_mut();
                // SAFETY: a live child-graph node, valid out-pointer; the child graph
                // is owned by the node, only read here.
                unsafe { drv!(cu, cuGraphChildGraphNodeGetGraph(node, &mut child))? };
                check_graph(cu, child, depth + 1)?;
            }
            _ => {}
        }
    }
    Ok(())
}

impl<'a> Graph<'a> {
    /// Checks the device-graph requirements the driver would otherwise report only as
    /// `CUDA_ERROR_INVALID_VALUE`, child graphs included: only kernel, memcpy, memset and
    /// child-graph nodes; memcpy nodes on device or page-locked host memory only; a device
    /// with unified addressing.
    ///
    /// # Errors
    /// [`Error::NotDeviceLaunchable`] naming the rule and the node type; driver errors
    /// of the queries.
    pub fn check_device_launchable(&self) -> Result<()> {
        let g = self.context().enter()?;
        let device = self.context().device();
        let unified =
            device.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING)?;
        if unified == 0 {
            return Err(refuse(
                "the device does not support unified addressing",
                None,
            ));
        }
        check_graph(g.cu, self.as_raw(), 0)
    }

    /// Checks the device-graph requirements ([`check_device_launchable`]), instantiates
    /// with [`InstantiateFlags::DEVICE_LAUNCH`] and uploads the graph on `stream`, which
    /// a device launch needs before the first one.
    ///
    /// [`check_device_launchable`]: Self::check_device_launchable
    ///
    /// # Errors
    /// [`Error::NotDeviceLaunchable`]; driver errors of `cuGraphInstantiateWithParams`.
    #[doc(alias = "cudaGraphInstantiateFlagDeviceLaunch")]
    pub fn instantiate_for_device(&self, stream: &Stream) -> Result<GraphExec<'a>> {
        self.instantiate_with_upload(InstantiateFlags::DEVICE_LAUNCH, Some(stream))
    }

    /// The device-launch checks [`instantiate`](Self::instantiate) and
    /// [`instantiate_with_upload`](Self::instantiate_with_upload) run when `flags` has
    /// [`InstantiateFlags::DEVICE_LAUNCH`].
    pub(crate) fn check_instantiate_flags(&self, flags: InstantiateFlags) -> Result<()> {
        if !flags.contains(InstantiateFlags::DEVICE_LAUNCH) {
            return Ok(());
        }
        if let Some(rule) = flags_rule(flags) {
            return Err(refuse(rule, None));
        }
        self.check_device_launchable()
    }
}

impl GraphExec<'_> {
    /// The handle a kernel needs to launch this graph from the device. Marks the graph
    /// as launched: dropping it then first waits for its context's work.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when it was not instantiated with
    /// [`InstantiateFlags::DEVICE_LAUNCH`]; driver errors of `cuGraphExecGetFlags`.
    pub fn device_handle(&self) -> Result<DeviceGraphHandle> {
        if !self.flags()?.contains(InstantiateFlags::DEVICE_LAUNCH) {
            return Err(Error::InvalidArgument(
                "device_handle: the graph was not instantiated with DEVICE_LAUNCH",
            ));
        }
        self.mark_launched();
        Ok(DeviceGraphHandle(self.as_raw() as u64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allowed_node_types_follow_the_guide() {
        use CUgraphNodeType as T;
        for t in [
            T::CU_GRAPH_NODE_TYPE_KERNEL,
            T::CU_GRAPH_NODE_TYPE_MEMCPY,
            T::CU_GRAPH_NODE_TYPE_MEMSET,
            T::CU_GRAPH_NODE_TYPE_GRAPH,
        ] {
            assert_eq!(node_type_rule(t), None, "{:?}", node_type_name(t));
        }
        for t in [
            T::CU_GRAPH_NODE_TYPE_EMPTY,
            T::CU_GRAPH_NODE_TYPE_HOST,
            T::CU_GRAPH_NODE_TYPE_WAIT_EVENT,
            T::CU_GRAPH_NODE_TYPE_EVENT_RECORD,
            T::CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL,
            T::CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT,
            T::CU_GRAPH_NODE_TYPE_MEM_ALLOC,
            T::CU_GRAPH_NODE_TYPE_MEM_FREE,
            T::CU_GRAPH_NODE_TYPE_BATCH_MEM_OP,
            T::CU_GRAPH_NODE_TYPE_CONDITIONAL,
        ] {
            assert!(node_type_rule(t).is_some(), "{:?}", node_type_name(t));
            assert!(node_type_name(t).is_some());
        }
    }

    #[test]
    fn memcpy_endpoints() {
        use CUmemorytype as M;
        assert_eq!(memcpy_rule(M::CU_MEMORYTYPE_DEVICE, false), None);
        assert_eq!(memcpy_rule(M::CU_MEMORYTYPE_UNIFIED, false), None);
        assert_eq!(memcpy_rule(M::CU_MEMORYTYPE_HOST, true), None);
        assert!(memcpy_rule(M::CU_MEMORYTYPE_HOST, false).is_some());
        assert!(memcpy_rule(M::CU_MEMORYTYPE_ARRAY, true).is_some());
    }

    #[test]
    fn flags() {
        assert_eq!(flags_rule(InstantiateFlags::DEVICE_LAUNCH), None);
        assert!(
            flags_rule(InstantiateFlags::DEVICE_LAUNCH | InstantiateFlags::AUTO_FREE_ON_LAUNCH)
                .is_some()
        );
        let e = refuse("x", Some(CUgraphNodeType::CU_GRAPH_NODE_TYPE_HOST));
        assert_eq!(
            e.code(),
            Some(cudadrv_sys::CUresult::CUDA_ERROR_INVALID_VALUE)
        );
        #[cfg(feature = "std")]
        assert_eq!(
            std::format!("{e}"),
            "graph cannot be instantiated for device launch: x (node type: host)"
        );
    }

    #[test]
    fn handle_is_a_u64_parameter() {
        assert_eq!(DeviceGraphHandle::DEVICE_SIZE, 8);
        assert_eq!(DeviceGraphHandle::DEVICE_ALIGN, 8);
        assert_eq!(DeviceGraphHandle(7).as_u64(), 7);
    }
}
