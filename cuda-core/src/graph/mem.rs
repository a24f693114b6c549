//! Graph memory: alloc and free nodes (`cuGraphAddMemAllocNode`,
//! `cuGraphAddMemFreeNode`) and the device's graph memory pool
//! (`cuDeviceGetGraphMemAttribute`, `cuDeviceGraphMemTrim`).

use core::ffi::c_void;
use core::ptr;

use cudadrv_sys::{
    CUDA_MEM_ALLOC_NODE_PARAMS, CUdeviceptr, CUgraphMem_attribute, CUmemAllocationHandleType,
    CUmemAllocationType, CUmemPoolProps,
};

use super::{Graph, GraphNode};
use crate::Device;
use crate::driver::api;
use crate::error::{Result, drv};
use crate::memory::managed::Location;

impl Graph<'_> {
    /// `cuGraphAddMemAllocNode`: allocates `bytes` of device memory (on this graph's
    /// device) when the node runs; returns the node and the address, fixed for the
    /// graph's lifetime. The memory is valid from the node until a free node (in this
    /// graph, a later graph, or `cuMemFreeAsync`), and comes from the device's graph
    /// memory pool, which is reused across launches.
    ///
    /// # Errors
    /// Driver errors (`CUDA_ERROR_OUT_OF_MEMORY`; `CUDA_ERROR_NOT_SUPPORTED` where graph
    /// memory nodes are not supported).
    #[doc(alias = "cuGraphAddMemAllocNode")]
    pub fn add_mem_alloc_node(
        &self,
        deps: &[GraphNode<'_>],
        bytes: usize,
    ) -> Result<(GraphNode<'_>, CUdeviceptr)> {
        let cu = api()?;
        let props = CUmemPoolProps {
            allocType: CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED,
            handleTypes: CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_NONE,
            location: Location::Device(self.context().device()).as_raw(),
            ..CUmemPoolProps::default()
        };
        let mut params = CUDA_MEM_ALLOC_NODE_PARAMS {
            poolProps: props,
            accessDescs: ptr::null(),
            accessDescCount: 0,
            bytesize: bytes,
            dptr: 0,
        };
        let node = self.add_node(deps, "cuGraphAddMemAllocNode", |node, graph, d, n| {
            // SAFETY: live graph, `d` holds `n` of its nodes, valid pointers; the driver
            // writes `params.dptr`.
            unsafe { drv!(cu, cuGraphAddMemAllocNode(node, graph, d, n, &mut params)) }
        })?;
        Ok((node, params.dptr))
    }

    /// `cuGraphAddMemFreeNode`: frees `dptr`, memory allocated by a graph alloc node,
    /// when the node runs.
    ///
    /// # Errors
    /// Driver errors (`CUDA_ERROR_INVALID_VALUE` for an address no alloc node made).
    ///
    /// # Safety
    /// No work that uses the memory may run after this node: every node of this graph
    /// that touches `dptr` must be ordered before it (through `deps`), and nothing
    /// outside the graph may use it after the launch.
    #[doc(alias = "cuGraphAddMemFreeNode")]
    pub unsafe fn add_mem_free_node(
        &self,
        deps: &[GraphNode<'_>],
        dptr: CUdeviceptr,
    ) -> Result<GraphNode<'_>> {
        let cu = api()?;
        self.add_node(deps, "cuGraphAddMemFreeNode", |node, graph, d, n| {
            // SAFETY: live graph, `d` holds `n` of its nodes; ordering the free after
            // every use is the caller's promise.
            unsafe { drv!(cu, cuGraphAddMemFreeNode(node, graph, d, n, dptr)) }
        })
    }
}

/// The graph memory pool of a device, as `cuDeviceGetGraphMemAttribute` reports it (in
/// bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GraphMemUsage {
    /// `CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT`: memory held by graph allocations now.
    pub used_current: u64,
    /// `CU_GRAPH_MEM_ATTR_USED_MEM_HIGH`: the most ever held.
    pub used_high: u64,
    /// `CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT`: memory reserved for the pool now.
    pub reserved_current: u64,
    /// `CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH`: the most ever reserved.
    pub reserved_high: u64,
}

impl GraphMemUsage {
    /// `cuDeviceGetGraphMemAttribute` for all four attributes of `device`.
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuDeviceGetGraphMemAttribute")]
    pub fn query(device: Device) -> Result<Self> {
        type A = CUgraphMem_attribute;
        Ok(Self {
            used_current: graph_mem_attribute(device, A::CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT)?,
            used_high: graph_mem_attribute(device, A::CU_GRAPH_MEM_ATTR_USED_MEM_HIGH)?,
            reserved_current: graph_mem_attribute(
                device,
                A::CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT,
            )?,
            reserved_high: graph_mem_attribute(device, A::CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH)?,
        })
    }
}

/// `cuDeviceGetGraphMemAttribute`: one attribute of `device`'s graph memory pool.
///
/// # Errors
/// Driver errors.
#[doc(alias = "cuDeviceGetGraphMemAttribute")]
pub fn graph_mem_attribute(device: Device, attr: CUgraphMem_attribute) -> Result<u64> {
    let cu = api()?;
    let mut v = 0u64;
    // SAFETY: every graph memory attribute is a `cuuint64_t`; `v` is a valid out-pointer.
    unsafe {
        drv!(
            cu,
            cuDeviceGetGraphMemAttribute(
                device.as_raw(),
                attr,
                ptr::from_mut(&mut v).cast::<c_void>()
            )
        )?;
    }
    Ok(v)
}

/// `cuDeviceGraphMemTrim`: returns unused graph pool memory of `device` to the OS.
///
/// # Errors
/// Driver errors.
#[doc(alias = "cuDeviceGraphMemTrim")]
pub fn graph_mem_trim(device: Device) -> Result<()> {
    let cu = api()?;
    // SAFETY: plain device ordinal.
    unsafe { drv!(cu, cuDeviceGraphMemTrim(device.as_raw())) }
}

// ---------------------------------------------------------------------------------------
// Graph allocations reachable from other devices (Programming Guide 4.2.5.6, "Peer
// Access"): added for multi-GPU use, see `crate::memory::peer`.
// ---------------------------------------------------------------------------------------

impl Graph<'_> {
    /// `cuGraphAddMemAllocNode` with access descriptors: as
    /// [`add_mem_alloc_node`](Self::add_mem_alloc_node), and the allocation is also
    /// mapped read-write on each device of `peers` (the driver's `accessDescs`), so that
    /// kernels there, in this graph or ordered after its launch, may dereference it. The
    /// graph's own device always has access: listing it (or a device twice) changes
    /// nothing. At most [`MAX_ALLOC_PEERS`](crate::memory::peer::MAX_ALLOC_PEERS) peers.
    ///
    /// ```no_run
    /// # fn main() -> cudadrv::Result<()> {
    /// use cudadrv::{Context, Device, Graph};
    /// let (d0, d1) = (Device::get(0)?, Device::get(1)?);
    /// let graph = Graph::new(&Context::primary(d0)?)?;
    /// // 1 MiB on device 0, read-write from device 1 too.
    /// let (alloc, dptr) = graph.add_mem_alloc_node_with_peers(&[], 1 << 20, &[d1])?;
    /// # let _ = (alloc, dptr); Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for more than
    /// `MAX_ALLOC_PEERS` peers; driver errors (`CUDA_ERROR_INVALID_VALUE` or
    /// `CUDA_ERROR_INVALID_DEVICE` for a device that cannot reach the graph's, as
    /// [`Device::can_access_peer`] tells).
    #[doc(alias = "cuGraphAddMemAllocNode")]
    pub fn add_mem_alloc_node_with_peers(
        &self,
        deps: &[GraphNode<'_>],
        bytes: usize,
        peers: &[Device],
    ) -> Result<(GraphNode<'_>, CUdeviceptr)> {
        let own = self.context().device();
        let mut descs =
            [crate::memory::peer::MemAccess::None.desc(own); crate::memory::peer::MAX_ALLOC_PEERS];
        let count = crate::memory::peer::peer_descs(own, peers, &mut descs)?;
        let cu = api()?;
        let mut params = CUDA_MEM_ALLOC_NODE_PARAMS {
            poolProps: CUmemPoolProps {
                allocType: CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED,
                handleTypes: CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_NONE,
                location: Location::Device(own).as_raw(),
                ..CUmemPoolProps::default()
            },
            accessDescs: if count == 0 {
                ptr::null()
            } else {
                descs.as_ptr()
            },
            accessDescCount: count,
            bytesize: bytes,
            dptr: 0,
        };
        let node = self.add_node(deps, "cuGraphAddMemAllocNode", |node, graph, d, n| {
            // SAFETY: live graph, `d` holds `n` of its nodes, valid pointers;
            // `accessDescs` holds `count` descriptors (alive for the call; the driver
            // copies them); the driver writes `params.dptr`.
            unsafe { drv!(cu, cuGraphAddMemAllocNode(node, graph, d, n, &mut params)) }
        })?;
        Ok((node, params.dptr))
    }
}
