//! [`Graph`]: a CUDA graph (`CUgraph`) of a context, and [`GraphRef`], a graph owned by
//! another (a conditional node's body, a child graph node's copy).

use core::fmt;
use core::marker::PhantomData;
use core::mem::ManuallyDrop;
use core::ops::Deref;
use core::ptr;

use cudadrv_sys::CUgraph;

use crate::driver::context::Context;
use crate::driver::dropping;
use crate::error::{Result, drv};

/// The marker every graph-side type carries for `'a`, the lifetime of what its nodes
/// name: invariant (so a `Graph<'long>` cannot be treated as a `Graph<'short>` to accept
/// a shorter borrow), and not `Sync` (driver graph objects are not synchronized).
pub(crate) type Borrows<'a> = PhantomData<(*const (), fn(&'a ()) -> &'a ())>;

/// A CUDA graph (`cuGraphCreate`), destroyed on drop (`cuGraphDestroy`).
///
/// Built explicitly (the `add_*` methods) or by stream capture
/// ([`Stream::begin_capture`](crate::Stream::begin_capture)), then instantiated into a
/// [`GraphExec`](super::GraphExec). Destroying a graph does not affect executable graphs
/// instantiated from it.
///
/// `'a` is how long what the graph's nodes name must live: the buffers, events and
/// functions that node-adding and capture calls borrow for `'a`. The graph, its clones
/// and every executable graph made from it carry the same `'a`, so none of them can
/// outlive a buffer one of their nodes writes; a graph that names nothing borrowed is a
/// `Graph<'static>`, storable anywhere.
///
/// ```compile_fail,E0505
/// # fn f(ctx: &cudadrv::Context) -> cudadrv::Result<()> {
/// use cudadrv::{DeviceBuffer, graph::Graph};
/// let graph = Graph::new(ctx)?;
/// let buf = DeviceBuffer::<u32>::new(ctx, 64)?;
/// graph.add_memset_d32_node(&[], &buf, 7)?;
/// drop(buf); // error: `buf` is still borrowed by the graph
/// let exec = graph.instantiate(Default::default())?;
/// # drop(exec); Ok(()) }
/// ```
///
/// The same holds for the body graphs of conditional nodes, which cannot outlive their
/// parent:
///
/// ```compile_fail,E0505
/// # fn f(ctx: &cudadrv::Context) -> cudadrv::Result<()> {
/// use cudadrv::graph::Graph;
/// let graph = Graph::new(ctx)?;
/// let handle = graph.create_conditional_handle(Some(1))?;
/// let (_node, body) = graph.add_if_node(&[], handle)?;
/// drop(graph); // error: the body borrows its parent
/// body.add_empty_node(&[])?;
/// # Ok(()) }
/// ```
///
/// Graph objects are not synchronized by the driver, so `Graph` is `Send` but not
/// `Sync`: the methods that add nodes and edges take `&self` and run on one thread at a
/// time. Nodes ([`GraphNode`](super::GraphNode)) borrow the graph, so none outlives it,
/// and stay on its thread.
pub struct Graph<'a> {
    raw: CUgraph,
    owned: bool,
    ctx: Context,
    _borrows: Borrows<'a>,
}

// SAFETY: a graph may be used from any thread, one at a time; `Graph` is not `Sync`, so
// `&Graph` (through which nodes are added) never crosses threads. What its nodes borrow
// for `'a` is `Sync` (buffers, events, functions), so holding those borrows on another
// thread is sound.
unsafe impl Send for Graph<'_> {}

impl<'a> Graph<'a> {
    /// `cuGraphCreate`: an empty graph.
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuGraphCreate")]
    pub fn new(ctx: &Context) -> Result<Self> {
        let g = ctx.enter()?;
        let mut raw = ptr::null_mut();
        // SAFETY: valid out-pointer; flags must be 0; the context is current.
        unsafe { drv!(g.cu, cuGraphCreate(&mut raw, 0))? };
        // SAFETY: a new graph, owned by nobody else.
        Ok(unsafe { Self::from_raw(raw, ctx) })
    }

    /// Takes ownership of a graph; dropping the result destroys it.
    ///
    /// # Safety
    /// `raw` must be a live graph whose nodes belong to `ctx` (or no context), that
    /// nothing else destroys, and whatever its nodes name must stay valid for `'a`.
    pub unsafe fn from_raw(raw: CUgraph, ctx: &Context) -> Self {
        Self {
            raw,
            owned: true,
            ctx: ctx.clone(),
            _borrows: PhantomData,
        }
    }

    /// Wraps a graph owned elsewhere; dropping the result does nothing.
    ///
    /// # Safety
    /// `raw` must be a live graph of `ctx` that stays alive while the result and every
    /// node handle from it are used, and whatever its nodes name must stay valid for
    /// `'a`.
    pub unsafe fn borrow_raw(raw: CUgraph, ctx: &Context) -> Self {
        Self {
            raw,
            owned: false,
            ctx: ctx.clone(),
            _borrows: PhantomData,
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
        // SAFETY: `this` is never used or dropped again; its context clone is dropped
        // here exactly once.
        drop(unsafe { ptr::read(&this.ctx) });
        this.raw
    }

    /// The context the graph's nodes belong to.
    #[inline]
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// [`Error::ContextMismatch`](crate::Error::ContextMismatch) naming `call` unless
    /// `ctx` is the graph's context: the rule of the safe adders whose nodes name memory.
    pub(crate) fn same_context(&self, ctx: &Context, call: &'static str) -> Result<()> {
        self.ctx.ensure_same(ctx, call)
    }

    /// `cuGraphClone`: a deep copy of the graph (nodes, edges, parameters).
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuGraphClone")]
    pub fn try_clone(&self) -> Result<Graph<'a>> {
        let g = self.ctx.enter()?;
        let mut raw = ptr::null_mut();
        // SAFETY: live graph, valid out-pointer; the context is current.
        unsafe { drv!(g.cu, cuGraphClone(&mut raw, self.raw))? };
        // SAFETY: the clone is new and ours; its nodes name what `self`'s do, valid for
        // `'a`.
        Ok(unsafe { Self::from_raw(raw, &self.ctx) })
    }
}

impl Drop for Graph<'_> {
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        let _g = crate::error::enter_for_drop!(self.ctx);
        // SAFETY: we own the graph and nothing uses it after this (nodes borrow
        // `self`). Executable graphs made from it are independent of it.
        unsafe { dropping!(cuGraphDestroy(self.raw)) };
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
/// the parent destroys it. Add nodes to it through [`Deref`] to [`Graph`]; they borrow
/// for the parent's `'a`.
pub struct GraphRef<'g, 'a> {
    graph: Graph<'a>,
    _parent: PhantomData<&'g Graph<'a>>,
}

impl<'g, 'a> GraphRef<'g, 'a> {
    /// Wraps `raw`, owned by `parent`.
    ///
    /// # Safety
    /// `raw` must be a live graph owned by (a node of) `parent`.
    pub(crate) unsafe fn new(raw: CUgraph, parent: &'g Graph<'a>) -> Self {
        Self {
            // SAFETY: `parent` keeps `raw` alive for `'g`, the caller says; its nodes are
            // part of `parent`, so they borrow for `'a`.
            graph: unsafe { Graph::borrow_raw(raw, parent.context()) },
            _parent: PhantomData,
        }
    }
}

impl<'a> Deref for GraphRef<'_, 'a> {
    type Target = Graph<'a>;

    fn deref(&self) -> &Graph<'a> {
        &self.graph
    }
}

impl fmt::Debug for GraphRef<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("GraphRef").field(&self.graph.raw).finish()
    }
}
