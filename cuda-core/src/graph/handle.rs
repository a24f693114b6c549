//! [`Graph`]: a CUDA graph (`CUgraph`) of a context, and [`GraphRef`], a graph owned by
//! another (a conditional node's body, a child graph node's copy).

use core::fmt;
use core::marker::PhantomData;
use core::mem::ManuallyDrop;
use core::ops::Deref;
use core::ptr;

use cuda_sys::CUgraph;

use crate::context::Context;
use crate::driver::api;
use crate::error::{Result, drv};

/// A CUDA graph (`cuGraphCreate`), destroyed on drop (`cuGraphDestroy`).
///
/// Built explicitly (the `add_*` methods) or by stream capture
/// ([`Capture`](super::Capture)), then instantiated into a
/// [`GraphExec`](super::GraphExec). Destroying a graph does not affect executable graphs
/// instantiated from it.
///
/// Graph objects are not synchronized by the driver, so `Graph` is `Send` but not
/// `Sync`: the methods that add nodes and edges take `&self` and run on one thread at a
/// time. Nodes ([`GraphNode`](super::GraphNode)) borrow the graph, so none outlives it.
pub struct Graph<'ctx> {
    raw: CUgraph,
    owned: bool,
    ctx: &'ctx Context,
    /// `*const ()`: not `Sync` (see above); `Send` is restored below.
    _not_sync: PhantomData<*const ()>,
}

// SAFETY: a graph may be used from any thread, one at a time; `Graph` is not `Sync`, so
// `&Graph` (through which nodes are added) never crosses threads.
unsafe impl Send for Graph<'_> {}

impl<'ctx> Graph<'ctx> {
    /// `cuGraphCreate`: an empty graph.
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuGraphCreate")]
    pub fn new(ctx: &'ctx Context) -> Result<Self> {
        let cu = api()?;
        let mut raw = ptr::null_mut();
        // SAFETY: valid out-pointer; flags must be 0.
        unsafe { drv!(cu, cuGraphCreate(&mut raw, 0))? };
        // SAFETY: a new graph, owned by nobody else.
        Ok(unsafe { Self::from_raw(raw, ctx) })
    }

    /// Takes ownership of a graph; dropping the result destroys it.
    ///
    /// # Safety
    /// `raw` must be a live graph whose nodes belong to `ctx` (or no context), that
    /// nothing else destroys.
    pub unsafe fn from_raw(raw: CUgraph, ctx: &'ctx Context) -> Self {
        Self {
            raw,
            owned: true,
            ctx,
            _not_sync: PhantomData,
        }
    }

    /// Wraps a graph owned elsewhere; dropping the result does nothing.
    ///
    /// # Safety
    /// `raw` must be a live graph of `ctx` that stays alive while the result and every
    /// node handle from it are used.
    pub unsafe fn borrow_raw(raw: CUgraph, ctx: &'ctx Context) -> Self {
        Self {
            raw,
            owned: false,
            ctx,
            _not_sync: PhantomData,
        }
    }

    /// The raw `CUgraph`.
    #[inline]
    pub fn as_raw(&self) -> CUgraph {
        self.raw
    }

    /// Gives up ownership: the caller destroys the graph.
    pub fn into_raw(self) -> CUgraph {
        let this = ManuallyDrop::new(self);
        this.raw
    }

    /// The context the graph's nodes belong to.
    #[inline]
    pub fn context(&self) -> &'ctx Context {
        self.ctx
    }

    /// `cuGraphClone`: a deep copy of the graph (nodes, edges, parameters).
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuGraphClone")]
    pub fn try_clone(&self) -> Result<Graph<'ctx>> {
        let cu = api()?;
        let mut raw = ptr::null_mut();
        // SAFETY: live graph, valid out-pointer.
        unsafe { drv!(cu, cuGraphClone(&mut raw, self.raw))? };
        // SAFETY: the clone is new and ours.
        Ok(unsafe { Self::from_raw(raw, self.ctx) })
    }
}

impl Drop for Graph<'_> {
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        if let Ok(cu) = cuda_sys::driver() {
            if let Ok(destroy) = cu.cuGraphDestroy() {
                // SAFETY: we own the graph and nothing uses it after this (nodes borrow
                // `self`). Executable graphs made from it are independent of it.
                let _ = unsafe { destroy(self.raw) };
            }
        }
    }
}

impl fmt::Debug for Graph<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Graph")
            .field("raw", &self.raw)
            .field("owned", &self.owned)
            .finish_non_exhaustive()
    }
}

/// A graph owned by another graph: the body of a conditional node, or the graph inside
/// a child graph node. It borrows its parent (`'g`) and is never destroyed by the user;
/// the parent destroys it. Add nodes to it through [`Deref`] to [`Graph`].
pub struct GraphRef<'g, 'ctx> {
    graph: ManuallyDrop<Graph<'ctx>>,
    _parent: PhantomData<&'g Graph<'ctx>>,
}

impl<'g, 'ctx> GraphRef<'g, 'ctx> {
    /// Wraps `raw`, owned by `parent`.
    ///
    /// # Safety
    /// `raw` must be a live graph owned by (a node of) `parent`.
    pub(crate) unsafe fn new(raw: CUgraph, parent: &'g Graph<'ctx>) -> Self {
        Self {
            // SAFETY: `parent` keeps `raw` alive for `'g`, the caller says.
            graph: ManuallyDrop::new(unsafe { Graph::borrow_raw(raw, parent.context()) }),
            _parent: PhantomData,
        }
    }
}

impl<'ctx> Deref for GraphRef<'_, 'ctx> {
    type Target = Graph<'ctx>;

    fn deref(&self) -> &Graph<'ctx> {
        &self.graph
    }
}

impl fmt::Debug for GraphRef<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("GraphRef").field(&self.graph.raw).finish()
    }
}
