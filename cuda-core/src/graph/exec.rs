//! [`GraphExec`]: an executable graph: instantiate, upload, launch, update, node enable.

use core::fmt;
use core::marker::PhantomData;
use core::mem::ManuallyDrop;
use core::ptr;

use cudadrv_sys::{
    CUDA_GRAPH_INSTANTIATE_PARAMS, CUgraphExec, CUgraphExecUpdateResult,
    CUgraphExecUpdateResultInfo, CUgraphInstantiate_flags, CUgraphInstantiateResult, CUgraphNode,
    CUresult,
};

use super::handle::Borrows;
use super::{Graph, GraphNode};
use crate::driver::api;
use crate::driver::context::Context;
use crate::driver::dropping;
use crate::driver::stream::Stream;
use crate::error::{Error, Result, drv};

crate::flags::flags! {
    /// `CUgraphInstantiate_flags` for [`Graph::instantiate`].
    #[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
    pub struct InstantiateFlags: u64 {
        /// `CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH`: memory allocated by the
        /// graph's alloc nodes and not freed by it is freed when it is launched again.
        const AUTO_FREE_ON_LAUNCH =
            CUgraphInstantiate_flags::CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH.0 as u64;
        /// `CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD`: upload the graph as part of
        /// instantiation ([`Graph::instantiate_with_upload`] only).
        const UPLOAD = CUgraphInstantiate_flags::CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD.0 as u64;
        /// `CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH`: the graph may be launched from
        /// the device.
        const DEVICE_LAUNCH =
            CUgraphInstantiate_flags::CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH.0 as u64;
        /// `CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY`: kernel nodes run with their
        /// priority attribute instead of the launch stream's priority.
        const USE_NODE_PRIORITY =
            CUgraphInstantiate_flags::CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY.0 as u64;
    }
}

/// An executable graph (`cuGraphInstantiate`), destroyed on drop (`cuGraphExecDestroy`,
/// after waiting for the context's work if it was ever launched: see its `Drop`).
///
/// Independent of the graph it was made from: that graph may be dropped or changed
/// (changes reach the executable graph only through [`update`](Self::update) or the
/// per-node setters). Each launch is ordered after the previous launches of the same
/// executable graph. Memory that its nodes reference by address must stay valid for as
/// long as it may be launched: it carries the graph's `'a` (see [`Graph`]), so it cannot
/// outlive what its nodes borrow. It keeps its context alive.
pub struct GraphExec<'a> {
    raw: CUgraphExec,
    ctx: Context,
    /// The graph it was instantiated from (null when unknown, [`GraphExec::from_raw`]):
    /// node methods accept only that graph's nodes. The graph may be gone; the handle is
    /// only compared, never used.
    source: cudadrv_sys::CUgraph,
    /// Whether it was ever launched (then dropping it waits for the context's work).
    launched: core::cell::Cell<bool>,
    /// Updates and launches on one thread at a time (not `Sync`); `'a` invariant.
    _borrows: Borrows<'a>,
}

// SAFETY: an executable graph may be used from any thread, one at a time; what it
// borrows for `'a` is `Sync`.
unsafe impl Send for GraphExec<'_> {}

impl<'a> Graph<'a> {
    /// `cuGraphInstantiateWithFlags`: an executable graph of this graph.
    ///
    /// # Errors
    /// [`Error::NotDeviceLaunchable`] when `flags` has [`InstantiateFlags::DEVICE_LAUNCH`]
    /// and the graph breaks a device-graph rule (see
    /// [`check_device_launchable`](Self::check_device_launchable)); driver errors
    /// (`CUDA_ERROR_INVALID_VALUE` for [`InstantiateFlags::UPLOAD`], which needs
    /// [`instantiate_with_upload`](Self::instantiate_with_upload)).
    #[doc(alias = "cuGraphInstantiate")]
    #[doc(alias = "cuGraphInstantiateWithFlags")]
    pub fn instantiate(&self, flags: InstantiateFlags) -> Result<GraphExec<'a>> {
        self.check_instantiate_flags(flags)?;
        let g = self.context().enter()?;
        let mut raw = ptr::null_mut();
        // SAFETY: live graph, valid out-pointer; the graph's context is current.
        unsafe {
            drv!(
                g.cu,
                cuGraphInstantiate(&mut raw, self.as_raw(), flags.bits())
            )?
        };
        // SAFETY: a new executable graph of the graph's context, ours; its nodes name
        // what the graph's do, valid for `'a`.
        Ok(unsafe { GraphExec::instantiated(raw, self) })
    }

    /// `cuGraphInstantiateWithParams`: instantiates with `flags` and, when `upload` is
    /// given, uploads on that stream as part of instantiation
    /// ([`InstantiateFlags::UPLOAD`] is added).
    ///
    /// # Errors
    /// [`Error::NotDeviceLaunchable`] as for [`instantiate`](Self::instantiate);
    /// [`Error::Driver`] naming `cuGraphInstantiateWithParams` (the instantiate result,
    /// `CUDA_GRAPH_INSTANTIATE_*`, is that call's detail: see
    /// [`instantiate_result_name`]).
    #[doc(alias = "cuGraphInstantiateWithParams")]
    pub fn instantiate_with_upload(
        &self,
        flags: InstantiateFlags,
        upload: Option<&Stream>,
    ) -> Result<GraphExec<'a>> {
        self.check_instantiate_flags(flags)?;
        if let Some(stream) = upload {
            // The upload is work on the stream naming this graph's memory.
            self.context()
                .ensure_same(stream.context(), "cuGraphInstantiateWithParams")?;
        }
        let g = self.context().enter()?;
        let mut params = CUDA_GRAPH_INSTANTIATE_PARAMS {
            flags: match upload {
                Some(_) => (flags | InstantiateFlags::UPLOAD).bits(),
                None => flags.bits(),
            },
            hUploadStream: upload.map_or(ptr::null_mut(), Stream::as_raw),
            ..CUDA_GRAPH_INSTANTIATE_PARAMS::default()
        };
        let mut raw = ptr::null_mut();
        // SAFETY: live graph and stream, valid pointers; the context is current.
        unsafe {
            drv!(
                g.cu,
                cuGraphInstantiateWithParams(&mut raw, self.as_raw(), &mut params)
            )?;
        }
        // SAFETY: a new executable graph of the graph's context, ours; its nodes name
        // what the graph's do, valid for `'a`.
        Ok(unsafe { GraphExec::instantiated(raw, self) })
    }
}

/// The name of a `CUgraphInstantiateResult` (`CUDA_GRAPH_INSTANTIATE_INVALID_STRUCTURE`,
/// ...), or `None` for a value the headers do not know.
#[must_use]
pub fn instantiate_result_name(r: CUgraphInstantiateResult) -> Option<&'static str> {
    Some(match r {
        CUgraphInstantiateResult::CUDA_GRAPH_INSTANTIATE_SUCCESS => {
            "CUDA_GRAPH_INSTANTIATE_SUCCESS"
        }
        CUgraphInstantiateResult::CUDA_GRAPH_INSTANTIATE_ERROR => "CUDA_GRAPH_INSTANTIATE_ERROR",
        CUgraphInstantiateResult::CUDA_GRAPH_INSTANTIATE_INVALID_STRUCTURE => {
            "CUDA_GRAPH_INSTANTIATE_INVALID_STRUCTURE"
        }
        CUgraphInstantiateResult::CUDA_GRAPH_INSTANTIATE_NODE_OPERATION_NOT_SUPPORTED => {
            "CUDA_GRAPH_INSTANTIATE_NODE_OPERATION_NOT_SUPPORTED"
        }
        CUgraphInstantiateResult::CUDA_GRAPH_INSTANTIATE_MULTIPLE_CTXS_NOT_SUPPORTED => {
            "CUDA_GRAPH_INSTANTIATE_MULTIPLE_CTXS_NOT_SUPPORTED"
        }
        CUgraphInstantiateResult::CUDA_GRAPH_INSTANTIATE_CONDITIONAL_HANDLE_UNUSED => {
            "CUDA_GRAPH_INSTANTIATE_CONDITIONAL_HANDLE_UNUSED"
        }
        _ => return None,
    })
}

impl<'a> GraphExec<'a> {
    /// Takes ownership of an executable graph of `ctx`; dropping the result destroys it.
    ///
    /// # Safety
    /// `raw` must be a live executable graph of `ctx` that nothing else destroys, and
    /// whatever its nodes name must stay valid for `'a`.
    ///
    /// Its source graph is not known, so the node methods
    /// ([`set_node_enabled`](Self::set_node_enabled), ...) can refuse only the null node
    /// here; the driver refuses nodes of other graphs.
    #[must_use]
    pub unsafe fn from_raw(raw: CUgraphExec, ctx: &Context) -> Self {
        Self {
            raw,
            ctx: ctx.clone(),
            source: ptr::null_mut(),
            launched: core::cell::Cell::new(false),
            _borrows: PhantomData,
        }
    }

    /// An executable graph just instantiated from `graph`.
    ///
    /// # Safety
    /// `raw` is a live executable graph instantiated from `graph`, owned by nobody else.
    pub(crate) unsafe fn instantiated(raw: CUgraphExec, graph: &Graph<'a>) -> Self {
        Self {
            raw,
            ctx: graph.context().clone(),
            source: graph.as_raw(),
            launched: core::cell::Cell::new(false),
            _borrows: PhantomData,
        }
    }

    /// The raw node of `node` if it is a node of the graph this was instantiated from
    /// (as far as known: see [`from_raw`](Self::from_raw)), else
    /// [`Error::ForeignNode`] naming `call`.
    pub(crate) fn own_node(&self, node: GraphNode<'_>, call: &'static str) -> Result<CUgraphNode> {
        if node.as_raw().is_null() || (!self.source.is_null() && node.graph() != self.source) {
            return Err(Error::ForeignNode { call });
        }
        Ok(node.as_raw())
    }

    /// Records that the graph may have been launched (dropping it then waits for the
    /// context's work).
    pub(crate) fn mark_launched(&self) {
        self.launched.set(true);
    }

    /// The context the executable graph belongs to.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// The raw `CUgraphExec`.
    #[inline]
    #[must_use]
    pub fn as_raw(&self) -> CUgraphExec {
        self.raw
    }

    /// Gives up ownership: the caller destroys the executable graph.
    #[must_use]
    pub fn into_raw(self) -> CUgraphExec {
        let this = ManuallyDrop::new(self);
        // SAFETY: `this` is never used or dropped again; its context clone is dropped
        // here exactly once.
        drop(unsafe { ptr::read(&this.ctx) });
        this.raw
    }

    /// `cuGraphLaunch`: runs the graph on `stream`, a stream of the graph's context. No
    /// allocation; one `cuStreamIsCapturing` and one `cuCtxGetCurrent` before the launch.
    ///
    /// # Errors
    /// [`Error::ContextMismatch`] for a stream of another context (dropping the
    /// executable graph waits for its own context's work only, so a launch there could
    /// outlive what the nodes borrow); [`Error::StreamCapturing`] while `stream` is being
    /// captured (the launch would become a child-graph node naming this graph's borrowed
    /// memory in a graph that does not borrow it); driver errors.
    #[doc(alias = "cuGraphLaunch")]
    #[inline]
    pub fn launch(&self, stream: &Stream) -> Result<()> {
        let q = stream.queue(&self.ctx, "cuGraphLaunch")?;
        self.launched.set(true);
        // SAFETY: live executable graph and stream (not capturing); the context is
        // current. What the nodes name is borrowed for `'a`, which `self` cannot outlive,
        // and dropping `self` waits for the launches (see `Drop`).
        unsafe { drv!(q.cu, cuGraphLaunch(self.raw, q.stream)) }
    }

    /// `cuGraphUpload`: uploads the graph's work to the device on `stream` ahead of the
    /// first launch, so that launch is cheaper.
    ///
    /// # Errors
    /// [`Error::ContextMismatch`] for a stream of another context; driver errors.
    #[doc(alias = "cuGraphUpload")]
    pub fn upload(&self, stream: &Stream) -> Result<()> {
        let q = stream.queue_capturable(&self.ctx, "cuGraphUpload")?;
        // SAFETY: live executable graph and stream; the context is current.
        unsafe { drv!(q.cu, cuGraphUpload(self.raw, q.stream)) }
    }

    /// `cuGraphExecGetFlags`: the flags it was instantiated with.
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuGraphExecGetFlags")]
    pub fn flags(&self) -> Result<InstantiateFlags> {
        let cu = api()?;
        let mut flags = 0u64;
        // SAFETY: live executable graph, valid out-pointer.
        unsafe { drv!(cu, cuGraphExecGetFlags(self.raw, &mut flags))? };
        Ok(InstantiateFlags::from_bits_retain(flags))
    }

    /// `cuGraphExecUpdate`: updates the node parameters of this executable graph from
    /// `graph`, which must have the same topology as the graph it was instantiated from
    /// (same nodes, same types, same edges, in the same creation order), without
    /// instantiating again.
    ///
    /// # Errors
    /// [`ExecUpdateError`] carrying the driver's `CUgraphExecUpdateResultInfo`: the
    /// result (`CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED`, ...) and the nodes at
    /// fault. After a failed update the executable graph keeps its previous parameters
    /// where the update did not apply.
    #[doc(alias = "cuGraphExecUpdate")]
    pub fn update<'b: 'a>(&self, graph: &Graph<'b>) -> core::result::Result<(), ExecUpdateError> {
        let cu = api().map_err(ExecUpdateError::from)?;
        let update = cu
            .cuGraphExecUpdate()
            .map_err(|e| ExecUpdateError::from(Error::from(e)))?;
        let mut info = CUgraphExecUpdateResultInfo {
            result: CUgraphExecUpdateResult::CU_GRAPH_EXEC_UPDATE_SUCCESS,
            errorNode: ptr::null_mut(),
            errorFromNode: ptr::null_mut(),
        };
        // SAFETY: live executable graph and graph, valid out-pointer.
        let rc = unsafe { update(self.raw, graph.as_raw(), &mut info) };
        if rc.is_success() {
            return Ok(());
        }
        Err(ExecUpdateError {
            code: rc,
            result: info.result,
            error_node: info.errorNode,
            error_from_node: info.errorFromNode,
        })
    }

    /// `cuGraphNodeSetEnabled`: enables or disables a kernel, memcpy or memset node
    /// (`node` of the graph this was instantiated from) for later launches. A disabled
    /// node acts as an empty node.
    ///
    /// # Errors
    /// [`Error::ForeignNode`] for a node of another graph or the null node; driver
    /// errors (`CUDA_ERROR_INVALID_VALUE` for other node types).
    #[doc(alias = "cuGraphNodeSetEnabled")]
    pub fn set_node_enabled(&self, node: GraphNode<'_>, enabled: bool) -> Result<()> {
        let node = self.own_node(node, "cuGraphNodeSetEnabled")?;
        let cu = api()?;
        // SAFETY: live executable graph and node.
        unsafe {
            drv!(
                cu,
                cuGraphNodeSetEnabled(self.raw, node, u32::from(enabled))
            )
        }
    }

    /// `cuGraphNodeGetEnabled`: whether `node` is enabled in this executable graph.
    ///
    /// # Errors
    /// [`Error::ForeignNode`] for a node of another graph or the null node; driver
    /// errors.
    #[doc(alias = "cuGraphNodeGetEnabled")]
    pub fn node_enabled(&self, node: GraphNode<'_>) -> Result<bool> {
        let node = self.own_node(node, "cuGraphNodeGetEnabled")?;
        let cu = api()?;
        let mut on = 0u32;
        // SAFETY: live executable graph and node, valid out-pointer.
        unsafe { drv!(cu, cuGraphNodeGetEnabled(self.raw, node, &mut on))? };
        Ok(on != 0)
    }
}

impl Drop for GraphExec<'_> {
    /// `cuGraphExecDestroy`. An executable graph that was launched first waits for its
    /// context's work (`cuCtxSynchronize`), so its launches are done when the borrows of
    /// `'a` end. No safety argument rests on this wait: a forgotten executable graph ends
    /// those borrows with launches pending, and what they may still touch is covered by
    /// the driver's rules (frees wait for their context's work, a pinned buffer's free
    /// lets a pending read finish, a module unload lets a pending launch run:
    /// `hw_promises`; `mock_async` forgets one mid-flight under Miri), while the graph
    /// forms that write host memory are `unsafe`. Failures go to the drop-error sink.
    fn drop(&mut self) {
        let _g = crate::error::enter_for_drop!(self.ctx);
        if self.launched.get() {
            // SAFETY: no arguments; the context is current.
            unsafe { dropping!(cuCtxSynchronize()) };
        }
        // SAFETY: we own it; nothing it names is freed before its launches finished.
        unsafe { dropping!(cuGraphExecDestroy(self.raw)) };
    }
}

impl fmt::Debug for GraphExec<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("GraphExec").field(&self.raw).finish()
    }
}

/// A failed [`GraphExec::update`]: the driver's code and its
/// `CUgraphExecUpdateResultInfo`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExecUpdateError {
    /// What `cuGraphExecUpdate` returned (`CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE`, or a
    /// loader / missing-symbol stand-in: see [`error`](Self::error)).
    pub code: CUresult,
    /// Why (`CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED`, ...).
    pub result: CUgraphExecUpdateResult,
    /// The node of the new graph at fault, if the driver named one.
    pub error_node: CUgraphNode,
    /// For an edge error, the node at the other end of it.
    pub error_from_node: CUgraphNode,
}

impl ExecUpdateError {
    /// The failure as the crate's [`Error`] (`Error::Driver` naming `cuGraphExecUpdate`).
    #[must_use]
    pub fn error(&self) -> Error {
        Error::driver("cuGraphExecUpdate", self.code)
    }

    /// The name of [`result`](Self::result), or `None` for a value the headers do not
    /// know.
    #[must_use]
    pub fn result_name(&self) -> Option<&'static str> {
        type R = CUgraphExecUpdateResult;
        Some(match self.result {
            R::CU_GRAPH_EXEC_UPDATE_SUCCESS => "CU_GRAPH_EXEC_UPDATE_SUCCESS",
            R::CU_GRAPH_EXEC_UPDATE_ERROR => "CU_GRAPH_EXEC_UPDATE_ERROR",
            R::CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED => {
                "CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED"
            }
            R::CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED => {
                "CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED"
            }
            R::CU_GRAPH_EXEC_UPDATE_ERROR_FUNCTION_CHANGED => {
                "CU_GRAPH_EXEC_UPDATE_ERROR_FUNCTION_CHANGED"
            }
            R::CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED => {
                "CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED"
            }
            R::CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED => {
                "CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED"
            }
            R::CU_GRAPH_EXEC_UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE => {
                "CU_GRAPH_EXEC_UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE"
            }
            R::CU_GRAPH_EXEC_UPDATE_ERROR_ATTRIBUTES_CHANGED => {
                "CU_GRAPH_EXEC_UPDATE_ERROR_ATTRIBUTES_CHANGED"
            }
            _ => return None,
        })
    }
}

impl From<Error> for ExecUpdateError {
    /// A failure before the update ran (the driver could not be loaded, the symbol is
    /// missing): `code` is the driver error if there is one, else
    /// `CUDA_ERROR_NOT_INITIALIZED`; `result` is `CU_GRAPH_EXEC_UPDATE_ERROR`.
    fn from(e: Error) -> Self {
        Self {
            code: e.code().unwrap_or(CUresult::CUDA_ERROR_NOT_INITIALIZED),
            result: CUgraphExecUpdateResult::CU_GRAPH_EXEC_UPDATE_ERROR,
            error_node: ptr::null_mut(),
            error_from_node: ptr::null_mut(),
        }
    }
}

impl From<ExecUpdateError> for Error {
    fn from(e: ExecUpdateError) -> Self {
        e.error()
    }
}

impl fmt::Display for ExecUpdateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cuGraphExecUpdate failed: {}; update result ", self.code)?;
        match self.result_name() {
            Some(name) => write!(f, "{name} ({})", self.result.0)?,
            None => write!(f, "{}", self.result.0)?,
        }
        if !self.error_node.is_null() {
            write!(f, ", at node {:p}", self.error_node)?;
        }
        if !self.error_from_node.is_null() {
            write!(f, " (edge from node {:p})", self.error_from_node)?;
        }
        Ok(())
    }
}

impl core::error::Error for ExecUpdateError {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        Some(&self.code)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_match_the_headers() {
        assert_eq!(InstantiateFlags::AUTO_FREE_ON_LAUNCH.bits(), 1);
        assert_eq!(InstantiateFlags::UPLOAD.bits(), 2);
        assert_eq!(InstantiateFlags::DEVICE_LAUNCH.bits(), 4);
        assert_eq!(InstantiateFlags::USE_NODE_PRIORITY.bits(), 8);
    }

    #[test]
    fn update_error_names_the_result() {
        let e = ExecUpdateError {
            code: CUresult::CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE,
            result: CUgraphExecUpdateResult::CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED,
            error_node: ptr::null_mut(),
            error_from_node: ptr::null_mut(),
        };
        assert_eq!(
            e.result_name(),
            Some("CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED")
        );
        assert_eq!(e.error().call(), Some("cuGraphExecUpdate"));
        let unknown = ExecUpdateError {
            result: CUgraphExecUpdateResult(99),
            ..e
        };
        assert_eq!(unknown.result_name(), None);
        assert_eq!(
            instantiate_result_name(CUgraphInstantiateResult::CUDA_GRAPH_INSTANTIATE_ERROR),
            Some("CUDA_GRAPH_INSTANTIATE_ERROR")
        );
    }
}
