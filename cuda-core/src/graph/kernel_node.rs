//! Kernel nodes: add (`cuGraphAddKernelNode`), set parameters on the graph
//! (`cuGraphKernelNodeSetParams`) and on an executable graph
//! (`cuGraphExecKernelNodeSetParams`), and per-node launch attributes.
//!
//! The arguments are the launch path's: a [`KernelArgs`] tuple (pointer array) or a
//! [`PackedArgs`] buffer, with grid, block and shared memory from a [`LaunchConfig`].
//! The driver copies the parameter values when the node is added or updated, so the
//! argument values may be dropped right after; what the pointers among them point to
//! must stay valid for every launch of the graph.

use core::ffi::c_void;
use core::ptr;

use cudadrv_sys::{
    CU_LAUNCH_PARAM_BUFFER_POINTER, CU_LAUNCH_PARAM_BUFFER_SIZE, CU_LAUNCH_PARAM_END,
    CUDA_KERNEL_NODE_PARAMS, CUlaunchAttributeID,
};

use super::{Graph, GraphExec, GraphNode};
use crate::args::{KernelArgs, PackedArgs};
use crate::driver::api;
use crate::driver::function::Function;
use crate::error::{Error, Result, drv};
use crate::launch::{LaunchAttribute, LaunchConfig};

/// The node parameters for `f` with `cfg`'s shape and the given argument encoding.
fn node_params(
    f: &Function,
    cfg: &LaunchConfig<'_>,
    kernel_params: *mut *mut c_void,
    extra: *mut *mut c_void,
) -> CUDA_KERNEL_NODE_PARAMS {
    CUDA_KERNEL_NODE_PARAMS {
        func: f.as_raw(),
        gridDimX: cfg.grid.x,
        gridDimY: cfg.grid.y,
        gridDimZ: cfg.grid.z,
        blockDimX: cfg.block.x,
        blockDimY: cfg.block.y,
        blockDimZ: cfg.block.z,
        sharedMemBytes: cfg.shared_mem_bytes,
        kernelParams: kernel_params,
        extra,
        kern: ptr::null_mut(),
        // The driver takes the context from `func` when it is set; naming it keeps the
        // node's context explicit whichever context is current when the node is added.
        ctx: f.context().as_raw(),
    }
}

/// Attributes that only apply to stream launches: in a graph, their role is played by
/// edges ([`EdgeData::PROGRAMMATIC`](super::EdgeData::PROGRAMMATIC),
/// [`EdgeData::LAUNCH_COMPLETION`](super::EdgeData::LAUNCH_COMPLETION)) and event nodes.
fn check_node_attributes(cfg: &LaunchConfig<'_>) -> Result<()> {
    type Id = CUlaunchAttributeID;
    for i in 0..cfg.num_attributes() {
        let Some(a) = cfg.attribute(i) else { continue };
        if a.id == Id::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
            || a.id == Id::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT
            || a.id == Id::CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT
        {
            return Err(Error::InvalidArgument(
                "PDL and event launch attributes do not apply to kernel nodes: add an edge \
                 with EdgeData::PROGRAMMATIC or EdgeData::LAUNCH_COMPLETION instead",
            ));
        }
    }
    Ok(())
}

impl<'a> Graph<'a> {
    /// `cuGraphAddKernelNode`: a node launching `f` with `cfg`'s grid, block and
    /// dynamic shared memory and `args` (pointer array), after `deps` (default edges;
    /// add programmatic edges with [`add_edge`](Self::add_edge)). `cfg`'s stream is
    /// ignored; its attributes are set on the node (`cuGraphKernelNodeSetAttribute`).
    ///
    /// The driver copies the argument values now; `args` may be dropped after. The graph
    /// borrows `f` for `'a`, which keeps its module loaded for as long as the graph and
    /// its executable graphs live.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if `cfg` carries a stream-only attribute
    /// (programmatic stream serialization, programmatic or launch-completion event);
    /// driver errors naming `cuGraphAddKernelNode` or `cuGraphKernelNodeSetAttribute`
    /// (the node is removed again if an attribute is refused).
    ///
    /// # Safety
    /// As [`launch`](crate::launch::launch): `A` must match the kernel's signature, and
    /// every pointer in `args` must be valid for what the kernel does **at every launch
    /// of every executable graph made from this graph** (the graph keeps the addresses,
    /// not borrows).
    #[doc(alias = "cuGraphAddKernelNode")]
    pub unsafe fn add_kernel_node<A: KernelArgs>(
        &self,
        deps: &[GraphNode<'_>],
        f: &'a Function,
        cfg: &LaunchConfig<'_>,
        args: &A,
    ) -> Result<GraphNode<'_>> {
        check_node_attributes(cfg)?;
        let mut ptrs = args.arg_ptrs();
        let params = node_params(f, cfg, ptrs.as_mut_ptr(), ptr::null_mut());
        // SAFETY: `params` points at `ptrs`, alive for the call (the driver copies the
        // values); the kernel-side contract is the caller's.
        unsafe { self.add_kernel_node_raw(deps, &params, cfg) }
    }

    /// [`add_kernel_node`](Self::add_kernel_node) with the arguments in one packed
    /// buffer (`CU_LAUNCH_PARAM_BUFFER_POINTER`).
    ///
    /// # Errors
    /// As [`add_kernel_node`](Self::add_kernel_node).
    ///
    /// # Safety
    /// As [`add_kernel_node`](Self::add_kernel_node), with `packed` laid out as the
    /// kernel's parameters ([`Function::verify_packed`] checks that).
    #[doc(alias = "cuGraphAddKernelNode")]
    pub unsafe fn add_kernel_node_packed<const CAP: usize, const N: usize>(
        &self,
        deps: &[GraphNode<'_>],
        f: &'a Function,
        cfg: &LaunchConfig<'_>,
        packed: &PackedArgs<CAP, N>,
    ) -> Result<GraphNode<'_>> {
        check_node_attributes(cfg)?;
        let mut size: usize = packed.len();
        let mut extra: [*mut c_void; 5] = [
            CU_LAUNCH_PARAM_BUFFER_POINTER,
            packed.as_ptr().cast_mut().cast::<c_void>(),
            CU_LAUNCH_PARAM_BUFFER_SIZE,
            ptr::from_mut(&mut size).cast::<c_void>(),
            CU_LAUNCH_PARAM_END,
        ];
        let params = node_params(f, cfg, ptr::null_mut(), extra.as_mut_ptr());
        // SAFETY: `extra` is END-terminated and points at `packed` and `size`, alive for
        // the call (the driver copies the buffer); the rest is the caller's.
        unsafe { self.add_kernel_node_raw(deps, &params, cfg) }
    }

    /// Adds the node, then `cfg`'s attributes; removes the node if one is refused.
    ///
    /// # Safety
    /// `params` must be valid for `cuGraphAddKernelNode` and describe a launch the
    /// caller vouches for.
    unsafe fn add_kernel_node_raw(
        &self,
        deps: &[GraphNode<'_>],
        params: &CUDA_KERNEL_NODE_PARAMS,
        cfg: &LaunchConfig<'_>,
    ) -> Result<GraphNode<'_>> {
        let cu = api()?;
        let node = self.add_node(deps, "cuGraphAddKernelNode", |node, graph, d, n| {
            // SAFETY: live graph; `d` holds `n` nodes of it; `params` is valid per the
            // caller.
            unsafe { drv!(cu, cuGraphAddKernelNode(node, graph, d, n, params)) }
        })?;
        for i in 0..cfg.num_attributes() {
            let Some(raw) = cfg.attribute(i) else {
                continue;
            };
            // SAFETY: `raw` came from a `LaunchConfig`, whose attributes were built by
            // the typed constructors (or `from_raw`, whose contract covers this use).
            let attr = unsafe { LaunchAttribute::from_raw(raw) };
            if let Err(e) = self.set_kernel_node_attribute(node, &attr) {
                // The attribute's error is the one returned; a failure to remove the node
                // again goes to the drop-error sink (the node stays in the graph).
                // SAFETY: the node is ours and nothing refers to it yet.
                unsafe { crate::driver::dropping!(cuGraphDestroyNode(node.as_raw())) };
                return Err(e);
            }
        }
        Ok(node)
    }

    /// `cuGraphKernelNodeSetAttribute`: sets one launch attribute on a kernel node
    /// (cluster shape, priority, cooperative, memory sync domain, access policy window,
    /// device-updatable, ...).
    ///
    /// # Errors
    /// [`Error::ForeignNode`] for a node of another graph;
    /// driver errors (`CUDA_ERROR_INVALID_VALUE` for an attribute kernel nodes do not
    /// take).
    #[doc(alias = "cuGraphKernelNodeSetAttribute")]
    pub fn set_kernel_node_attribute(
        &self,
        node: GraphNode<'_>,
        attr: &LaunchAttribute<'_>,
    ) -> Result<()> {
        let node = self.own(node, "cuGraphKernelNodeSetAttribute")?;
        let cu = api()?;
        let raw = attr.as_raw();
        // SAFETY: a live node of this graph; the value is valid for its ID (typed
        // constructors); any event it names is borrowed by the attribute for the call.
        unsafe { drv!(cu, cuGraphKernelNodeSetAttribute(node, raw.id, &raw.value)) }
    }

    /// `cuGraphKernelNodeSetParams`: replaces a kernel node's function, shape and
    /// arguments in this graph (executable graphs made before are not affected).
    ///
    /// # Errors
    /// Driver errors.
    ///
    /// # Safety
    /// As [`add_kernel_node`](Self::add_kernel_node).
    #[doc(alias = "cuGraphKernelNodeSetParams")]
    pub unsafe fn set_kernel_node_params<A: KernelArgs>(
        &self,
        node: GraphNode<'_>,
        f: &'a Function,
        cfg: &LaunchConfig<'_>,
        args: &A,
    ) -> Result<()> {
        let node = self.own(node, "cuGraphKernelNodeSetParams")?;
        let cu = api()?;
        let mut ptrs = args.arg_ptrs();
        let params = node_params(f, cfg, ptrs.as_mut_ptr(), ptr::null_mut());
        // SAFETY: a live node of this graph; `params` points at `ptrs`, alive for the
        // call; the rest is the caller's.
        unsafe { drv!(cu, cuGraphKernelNodeSetParams(node, &params)) }
    }
}

impl<'a> GraphExec<'a> {
    /// `cuGraphExecKernelNodeSetParams`: changes a kernel node's arguments (and shape)
    /// in this executable graph without instantiating again; `node` is the node of the
    /// graph this was instantiated from. The driver refuses changes it cannot apply
    /// in place (a function of another context, a node that is not a kernel).
    ///
    /// The driver copies the argument values now; later launches use them.
    ///
    /// # Errors
    /// Driver errors naming `cuGraphExecKernelNodeSetParams`.
    ///
    /// # Safety
    /// As [`Graph::add_kernel_node`]: the arguments must match the kernel and their
    /// pointers stay valid for every later launch.
    #[doc(alias = "cuGraphExecKernelNodeSetParams")]
    pub unsafe fn set_kernel_node_params<A: KernelArgs>(
        &self,
        node: GraphNode<'_>,
        f: &'a Function,
        cfg: &LaunchConfig<'_>,
        args: &A,
    ) -> Result<()> {
        let node = self.own_node(node, "cuGraphExecKernelNodeSetParams")?;
        let cu = api()?;
        let mut ptrs = args.arg_ptrs();
        let params = node_params(f, cfg, ptrs.as_mut_ptr(), ptr::null_mut());
        // SAFETY: live executable graph and node; `params` points at `ptrs`, alive for
        // the call; the rest is the caller's.
        unsafe {
            drv!(
                cu,
                cuGraphExecKernelNodeSetParams(self.as_raw(), node, &params)
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_only_attributes_are_refused() {
        let cfg = LaunchConfig::new(1, 1)
            .programmatic_stream_serialization()
            .unwrap();
        assert!(matches!(
            check_node_attributes(&cfg),
            Err(Error::InvalidArgument(_))
        ));
        let cfg = LaunchConfig::new(1, 1)
            .priority(0)
            .and_then(|c| c.cluster_dim(2))
            .unwrap();
        assert!(check_node_attributes(&cfg).is_ok());
    }
}
