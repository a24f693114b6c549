//! Identifiers of graphs, executable graphs and nodes (CUDA 13.1): what profilers and
//! tools name them by. On an older driver each call is
//! [`Error::DriverTooOld`](crate::Error::DriverTooOld).

use super::{Graph, GraphExec, GraphNode};
use crate::driver::api;
use crate::error::{Result, drv};

impl Graph<'_> {
    /// `cuGraphGetId` (CUDA 13.1): the graph's id, unique among the process's graphs.
    ///
    /// # Errors
    /// [`Error::DriverTooOld`](crate::Error::DriverTooOld) before 13.1; driver errors.
    #[doc(alias = "cuGraphGetId")]
    #[doc(alias = "cudaGraphGetId")]
    pub fn id(&self) -> Result<u32> {
        let cu = api()?;
        let mut id = 0;
        // SAFETY: a live graph; valid out-pointer.
        unsafe { drv!(cu, cuGraphGetId(self.as_raw(), &mut id))? };
        Ok(id)
    }
}

impl GraphExec<'_> {
    /// `cuGraphExecGetId` (CUDA 13.1): the executable graph's id.
    ///
    /// # Errors
    /// [`Error::DriverTooOld`](crate::Error::DriverTooOld) before 13.1; driver errors.
    #[doc(alias = "cuGraphExecGetId")]
    #[doc(alias = "cudaGraphExecGetId")]
    pub fn id(&self) -> Result<u32> {
        let cu = api()?;
        let mut id = 0;
        // SAFETY: a live executable graph; valid out-pointer.
        unsafe { drv!(cu, cuGraphExecGetId(self.as_raw(), &mut id))? };
        Ok(id)
    }
}

impl GraphNode<'_> {
    /// `cuGraphNodeGetLocalId` (CUDA 13.1): the node's id within its graph (the order
    /// nodes were added in, from 0).
    ///
    /// # Errors
    /// [`Error::DriverTooOld`](crate::Error::DriverTooOld) before 13.1; driver errors
    /// (the null node).
    #[doc(alias = "cuGraphNodeGetLocalId")]
    pub fn local_id(&self) -> Result<u32> {
        let cu = api()?;
        let mut id = 0;
        // SAFETY: a node of a graph alive for the node's lifetime; valid out-pointer.
        unsafe { drv!(cu, cuGraphNodeGetLocalId(self.as_raw(), &mut id))? };
        Ok(id)
    }

    /// `cuGraphNodeGetToolsId` (CUDA 13.1): the id tools (CUPTI, Nsight) report the
    /// node by.
    ///
    /// # Errors
    /// [`Error::DriverTooOld`](crate::Error::DriverTooOld) before 13.1; driver errors.
    #[doc(alias = "cuGraphNodeGetToolsId")]
    pub fn tools_id(&self) -> Result<u64> {
        let cu = api()?;
        let mut id = 0;
        // SAFETY: as in `local_id`.
        unsafe { drv!(cu, cuGraphNodeGetToolsId(self.as_raw(), &mut id))? };
        Ok(id)
    }

    /// `cuGraphNodeGetContainingGraph` (CUDA 13.1): whether the driver places the node
    /// in `graph` (a node of a child graph is in the child, not in the parent).
    ///
    /// # Errors
    /// [`Error::DriverTooOld`](crate::Error::DriverTooOld) before 13.1; driver errors.
    #[doc(alias = "cuGraphNodeGetContainingGraph")]
    pub fn is_in(&self, graph: &Graph<'_>) -> Result<bool> {
        let cu = api()?;
        let mut raw = core::ptr::null_mut();
        // SAFETY: as in `local_id`.
        unsafe { drv!(cu, cuGraphNodeGetContainingGraph(self.as_raw(), &mut raw))? };
        Ok(raw == graph.as_raw())
    }
}
