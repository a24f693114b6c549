//! [`GraphNode`]: a node of a graph, and the queries on it (type, dependencies and
//! dependents with edge data), plus the graph's node lists.

use core::marker::PhantomData;
use core::ptr;

use cudadrv_sys::{CUgraph, CUgraphEdgeData, CUgraphNode, CUgraphNodeType};

use super::{EdgeData, Graph};
use crate::driver::api;
use crate::error::{Error, Result, drv};

/// A node of a graph (`CUgraphNode`), borrowed from the graph for `'g`: cheap to copy,
/// never outlives its graph, never leaves the graph's thread. Nodes are destroyed with
/// their graph.
///
/// A node remembers the graph it belongs to, and every safe call that takes nodes
/// (dependencies, edges, node parameters, child graphs, capture dependencies,
/// executable-graph node settings) refuses a node of another graph, and the null node
/// [`GraphNode::NULL`], with [`Error::ForeignNode`] before
/// the driver is called: a node of a graph that borrows less than this one could
/// otherwise carry what it names into a graph that outlives it.
///
/// ```compile_fail,E0277
/// # fn f(graph: &cudadrv::graph::Graph<'_>) -> cudadrv::Result<()> {
/// let node = graph.add_empty_node(&[])?;
/// std::thread::scope(|s| {
///     s.spawn(move || node.node_type()); // error: `GraphNode` cannot be sent
/// });
/// # Ok(()) }
/// ```
///
/// ```compile_fail,E0505
/// # fn f(ctx: &cudadrv::Context) -> cudadrv::Result<()> {
/// let graph = cudadrv::graph::Graph::new(ctx)?;
/// let node = graph.add_empty_node(&[])?;
/// drop(graph); // error: the node borrows the graph
/// node.node_type()?;
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GraphNode<'g> {
    raw: CUgraphNode,
    /// The graph the node belongs to (alive for `'g`); only compared, never called.
    graph: CUgraph,
    /// Borrows the graph; `*const ()` keeps the node on the graph's thread (neither
    /// `Send` nor `Sync`): querying a node is a driver call on its graph, which the
    /// driver does not synchronize with edits made meanwhile on another thread.
    _graph: PhantomData<(&'g (), *const ())>,
}

impl<'g> GraphNode<'g> {
    /// A null node, as a placeholder in arrays the driver fills. Every call that takes
    /// nodes refuses it.
    pub const NULL: Self = Self {
        raw: ptr::null_mut(),
        graph: ptr::null_mut(),
        _graph: PhantomData,
    };

    /// Wraps a raw node of `graph`.
    ///
    /// # Safety
    /// `raw` must be a node of `graph`, a graph that stays alive for `'g`.
    #[inline]
    #[must_use]
    pub const unsafe fn from_raw(raw: CUgraphNode, graph: CUgraph) -> Self {
        Self {
            raw,
            graph,
            _graph: PhantomData,
        }
    }

    /// The raw `CUgraphNode`.
    #[inline]
    #[must_use]
    pub const fn as_raw(self) -> CUgraphNode {
        self.raw
    }

    /// The raw handle of the graph the node belongs to (null for [`GraphNode::NULL`]).
    #[inline]
    #[must_use]
    pub const fn graph(self) -> CUgraph {
        self.graph
    }

    /// The raw node, unless this is the null node.
    fn live(self, call: &'static str) -> Result<CUgraphNode> {
        if self.raw.is_null() {
            Err(Error::ForeignNode { call })
        } else {
            Ok(self.raw)
        }
    }

    /// `cuGraphNodeGetType`: the node's type (`CU_GRAPH_NODE_TYPE_KERNEL`, ...).
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuGraphNodeGetType")]
    pub fn node_type(self) -> Result<CUgraphNodeType> {
        let raw = self.live("cuGraphNodeGetType")?;
        let cu = api()?;
        let mut t = CUgraphNodeType(0);
        // SAFETY: live node (borrowed for `'g`), valid out-pointer.
        unsafe { drv!(cu, cuGraphNodeGetType(raw, &mut t))? };
        Ok(t)
    }

    /// `cuGraphNodeGetDependencies`: fills `nodes` and `data` with up to the shorter
    /// slice's length of this node's incoming edges (`nodes[i] -> self` with `data[i]`)
    /// and returns how many there are in total.
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuGraphNodeGetDependencies")]
    pub fn dependencies(self, nodes: &mut [GraphNode<'g>], data: &mut [EdgeData]) -> Result<usize> {
        self.neighbours(nodes, data, false)
    }

    /// `cuGraphNodeGetDependentNodes`: as [`dependencies`](Self::dependencies), for the
    /// outgoing edges (`self -> nodes[i]` with `data[i]`).
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuGraphNodeGetDependentNodes")]
    pub fn dependents(self, nodes: &mut [GraphNode<'g>], data: &mut [EdgeData]) -> Result<usize> {
        self.neighbours(nodes, data, true)
    }

    fn neighbours(
        self,
        nodes: &mut [GraphNode<'g>],
        data: &mut [EdgeData],
        outgoing: bool,
    ) -> Result<usize> {
        let cu = api()?;
        // v2 (with edge data, CUDA 12.3) or, on an older driver, v1: every edge of a
        // driver without edge data is a default edge.
        let (name, v2, v1) = if outgoing {
            (
                "cuGraphNodeGetDependentNodes",
                cu.cuGraphNodeGetDependentNodes(),
                cu.cuGraphNodeGetDependentNodes_v10000(),
            )
        } else {
            (
                "cuGraphNodeGetDependencies",
                cu.cuGraphNodeGetDependencies(),
                cu.cuGraphNodeGetDependencies_v10000(),
            )
        };
        let raw = self.live(name)?;
        let query = |np: *mut CUgraphNode, dp: *mut CUgraphEdgeData, n: &mut usize| {
            let rc = match (v2, v1) {
                // SAFETY: `np` and `dp` are null (count only) or hold `*n` elements (the
                // callers below); the driver writes at most `*n`.
                (Ok(f), _) => unsafe { f(raw, np, dp, n) },
                // SAFETY: as above, without the edge data.
                (Err(_), Ok(f)) => unsafe { f(raw, np, n) },
                (Err(missing), Err(_)) => return Err(crate::Error::from(missing)),
            };
            crate::error::call(rc, name)
        };
        let mut total = 0usize;
        query(ptr::null_mut(), ptr::null_mut(), &mut total)?;
        let mut n = nodes.len().min(data.len()).min(total);
        if n == 0 {
            return Ok(total);
        }
        // `nodes` has room for `n` raw handles, `data` for `n` entries of a type
        // `repr(transparent)` over the C one. The nodes the driver writes belong to this
        // node's graph, alive for `'g`.
        query(
            raw_room(nodes),
            data.as_mut_ptr().cast::<CUgraphEdgeData>(),
            &mut n,
        )?;
        // SAFETY: the driver wrote `n` (at most the `n` it was given) handles there.
        unsafe { widen(nodes, n, self.graph) };
        if v2.is_err() {
            data.iter_mut().take(n).for_each(|d| *d = EdgeData::DEFAULT);
        }
        Ok(total)
    }
}

impl Graph<'_> {
    /// `cuGraphGetNodes`: fills `nodes` with up to its length of the graph's nodes and
    /// returns how many there are in total.
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuGraphGetNodes")]
    pub fn nodes<'g>(&'g self, nodes: &mut [GraphNode<'g>]) -> Result<usize> {
        self.list(nodes, false)
    }

    /// `cuGraphGetRootNodes`: as [`nodes`](Self::nodes), for the nodes without
    /// dependencies.
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuGraphGetRootNodes")]
    pub fn root_nodes<'g>(&'g self, nodes: &mut [GraphNode<'g>]) -> Result<usize> {
        self.list(nodes, true)
    }

    /// The number of nodes (`cuGraphGetNodes` with no array).
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuGraphGetNodes")]
    pub fn node_count(&self) -> Result<usize> {
        self.list(&mut [], false)
    }

    fn list<'g>(&'g self, nodes: &mut [GraphNode<'g>], roots: bool) -> Result<usize> {
        let cu = api()?;
        let mut total = 0usize;
        // SAFETY: a null array asks for the count only.
        unsafe {
            if roots {
                drv!(
                    cu,
                    cuGraphGetRootNodes(self.as_raw(), ptr::null_mut(), &mut total)
                )?;
            } else {
                drv!(
                    cu,
                    cuGraphGetNodes(self.as_raw(), ptr::null_mut(), &mut total)
                )?;
            }
        }
        let mut n = nodes.len().min(total);
        if n == 0 {
            return Ok(total);
        }
        let p = raw_room(nodes);
        // SAFETY: `nodes` has room for at least `n` raw handles; the driver writes at
        // most `n` nodes of this graph, which `widen` turns into typed nodes.
        unsafe {
            if roots {
                drv!(cu, cuGraphGetRootNodes(self.as_raw(), p, &mut n))?;
            } else {
                drv!(cu, cuGraphGetNodes(self.as_raw(), p, &mut n))?;
            }
            widen(nodes, n, self.as_raw());
        }
        Ok(total)
    }

    /// Wraps a node handle of this graph (from a raw API), borrowing the graph.
    ///
    /// # Safety
    /// `raw` must be a node of this graph.
    #[must_use]
    pub unsafe fn node_from_raw(&self, raw: CUgraphNode) -> GraphNode<'_> {
        // SAFETY: forwarded: a node of `self`, which the result borrows.
        unsafe { GraphNode::from_raw(raw, self.as_raw()) }
    }

    /// A node the driver just added to this graph, borrowing the graph.
    pub(crate) fn added(&self, raw: CUgraphNode) -> GraphNode<'_> {
        // SAFETY: the driver returned `raw` as a new node of `self`, which the result
        // borrows.
        unsafe { GraphNode::from_raw(raw, self.as_raw()) }
    }

    /// The raw handle of `node`, or [`Error::ForeignNode`] naming `call` when it is not
    /// a node of this graph (or is the null node).
    pub(crate) fn own(&self, node: GraphNode<'_>, call: &'static str) -> Result<CUgraphNode> {
        if node.graph != self.as_raw() {
            return Err(Error::ForeignNode { call });
        }
        node.live(call)
    }

    /// The one path of every explicit node adder: checks that `deps` are nodes of this
    /// graph ([`with_nodes`](Self::with_nodes)), calls `add(&mut node, graph, deps,
    /// count)` (the driver call, its result mapped) and wraps the new node.
    pub(crate) fn add_node(
        &self,
        deps: &[GraphNode<'_>],
        call: &'static str,
        add: impl FnOnce(&mut CUgraphNode, CUgraph, *const CUgraphNode, usize) -> Result<()>,
    ) -> Result<GraphNode<'_>> {
        let node = self.with_nodes(deps, call, |d, n| {
            let mut node = ptr::null_mut();
            add(&mut node, self.as_raw(), d, n)?;
            Ok(node)
        })?;
        Ok(self.added(node))
    }

    /// Checks that every node of `deps` belongs to this graph and calls `f` with them as
    /// the driver's array (`const CUgraphNode *`, null when empty) and its length. Up to
    /// [`STACK_NODES`] nodes are copied on the stack; more take a heap array (with
    /// `alloc`) or are refused (without it).
    ///
    /// Only the call of `f` is generic: the checks and copies are one function
    /// ([`raw_nodes`](Self::raw_nodes)) for all of the crate's node adders.
    #[inline]
    pub(crate) fn with_nodes<R>(
        &self,
        deps: &[GraphNode<'_>],
        call: &'static str,
        f: impl FnOnce(*const CUgraphNode, usize) -> Result<R>,
    ) -> Result<R> {
        let raw = self.raw_nodes(deps, call)?;
        f(raw.as_ptr(), raw.len())
    }

    /// `deps` checked and copied into the driver's form (see [`with_nodes`](Self::with_nodes)).
    fn raw_nodes(&self, deps: &[GraphNode<'_>], call: &'static str) -> Result<RawNodes> {
        if deps.len() <= STACK_NODES {
            let mut raw = [ptr::null_mut(); STACK_NODES];
            for (r, d) in raw.iter_mut().zip(deps) {
                *r = self.own(*d, call)?;
            }
            return Ok(RawNodes {
                stack: raw,
                len: deps.len(),
                #[cfg(feature = "alloc")]
                heap: alloc::vec::Vec::new(),
            });
        }
        #[cfg(feature = "alloc")]
        {
            let mut raw = alloc::vec::Vec::with_capacity(deps.len());
            for d in deps {
                raw.push(self.own(*d, call)?);
            }
            Ok(RawNodes {
                stack: [ptr::null_mut(); STACK_NODES],
                len: 0,
                heap: raw,
            })
        }
        #[cfg(not(feature = "alloc"))]
        Err(Error::InvalidArgument(
            "more than 32 graph nodes in one call need the alloc feature (add further \
             dependencies with add_edges)",
        ))
    }
}

/// Node handles in the driver's form, for one call: the first `len` of `stack`, or,
/// beyond [`STACK_NODES`], all of `heap`.
struct RawNodes {
    stack: [CUgraphNode; STACK_NODES],
    len: usize,
    #[cfg(feature = "alloc")]
    heap: alloc::vec::Vec<CUgraphNode>,
}

impl RawNodes {
    fn nodes(&self) -> &[CUgraphNode] {
        #[cfg(feature = "alloc")]
        if !self.heap.is_empty() {
            return &self.heap;
        }
        self.stack.get(..self.len).unwrap_or_default()
    }

    /// The driver's `const CUgraphNode *` (null when empty).
    fn as_ptr(&self) -> *const CUgraphNode {
        deps_ptr(self.nodes())
    }

    fn len(&self) -> usize {
        self.nodes().len()
    }
}

/// How many nodes [`Graph::with_nodes`] passes without a heap array.
pub(crate) const STACK_NODES: usize = 32;

/// `raw` as the driver's `const CUgraphNode *` (null when empty).
fn deps_ptr(raw: &[CUgraphNode]) -> *const CUgraphNode {
    if raw.is_empty() {
        ptr::null()
    } else {
        raw.as_ptr()
    }
}

// A node is two handles wide, so the memory of `n` nodes has room for `2n` raw handles,
// which lets the driver write raw handles into a node slice (`raw_room`) that `widen`
// then turns into nodes in place.
static_assertions::const_assert_eq!(
    core::mem::size_of::<GraphNode<'static>>(),
    2 * core::mem::size_of::<CUgraphNode>()
);
static_assertions::const_assert!(
    core::mem::align_of::<GraphNode<'static>>() >= core::mem::align_of::<CUgraphNode>()
);

/// The memory of `nodes` as room for raw handles for the driver to write (room for
/// `2 * nodes.len()`; the callers ask for at most `nodes.len()`).
pub(crate) fn raw_room(nodes: &mut [GraphNode<'_>]) -> *mut CUgraphNode {
    nodes.as_mut_ptr().cast::<CUgraphNode>()
}

/// Turns the first `count` raw handles written at [`raw_room`]`(nodes)` into nodes of
/// `graph`, in place.
///
/// # Safety
/// `count <= nodes.len()`, and the first `count` handles at `raw_room(nodes)` were
/// written by the driver as nodes of `graph`, which lives for `'g`.
pub(crate) unsafe fn widen<'g>(nodes: &mut [GraphNode<'g>], count: usize, graph: CUgraph) {
    debug_assert!(count <= nodes.len());
    let base = nodes.as_mut_ptr();
    let raw = base.cast::<CUgraphNode>();
    // Back to front: node `i` covers bytes `16i..16i + 16`, handle `j` bytes
    // `8j..8j + 8`; writing node `i` overwrites only handles `>= i`, already read.
    for i in (0..count.min(nodes.len())).rev() {
        // SAFETY: handle `i` is in bounds (`i < count <= nodes.len()`, room for twice
        // as many) and not yet overwritten (see above); node `i` is in bounds.
        unsafe {
            let h = raw.add(i).read();
            base.add(i).write(GraphNode::from_raw(h, graph));
        }
    }
}
