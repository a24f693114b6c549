//! [`GraphNode`]: a node of a graph, and the queries on it (type, dependencies and
//! dependents with edge data), plus the graph's node lists.

use core::marker::PhantomData;
use core::ptr;

use cuda_sys::{CUgraphEdgeData, CUgraphNode, CUgraphNodeType};

use super::{EdgeData, Graph};
use crate::driver::api;
use crate::error::{Result, drv};

/// A node of a graph (`CUgraphNode`), borrowed from the graph for `'g`: cheap to copy,
/// never outlives its graph, never leaves the graph's thread. Nodes are destroyed with
/// their graph.
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
#[repr(transparent)]
pub struct GraphNode<'g> {
    raw: CUgraphNode,
    /// Borrows the graph; `*const ()` keeps the node on the graph's thread (neither
    /// `Send` nor `Sync`): querying a node is a driver call on its graph, which the
    /// driver does not synchronize with edits made meanwhile on another thread.
    _graph: PhantomData<(&'g (), *const ())>,
}

impl<'g> GraphNode<'g> {
    /// A null node, as a placeholder in arrays the driver fills.
    pub const NULL: Self = Self {
        raw: ptr::null_mut(),
        _graph: PhantomData,
    };

    /// Wraps a raw node.
    ///
    /// # Safety
    /// `raw` must be a node of a graph that stays alive for `'g`.
    #[inline]
    #[must_use]
    pub const unsafe fn from_raw(raw: CUgraphNode) -> Self {
        Self {
            raw,
            _graph: PhantomData,
        }
    }

    /// The raw `CUgraphNode`.
    #[inline]
    #[must_use]
    pub const fn as_raw(self) -> CUgraphNode {
        self.raw
    }

    /// `cuGraphNodeGetType`: the node's type (`CU_GRAPH_NODE_TYPE_KERNEL`, ...).
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuGraphNodeGetType")]
    pub fn node_type(self) -> Result<CUgraphNodeType> {
        let cu = api()?;
        let mut t = CUgraphNodeType(0);
        // SAFETY: live node (borrowed for `'g`), valid out-pointer.
        unsafe { drv!(cu, cuGraphNodeGetType(self.raw, &mut t))? };
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
        let query = |np: *mut CUgraphNode, dp: *mut CUgraphEdgeData, n: &mut usize| {
            let rc = match (v2, v1) {
                // SAFETY: `np` and `dp` are null (count only) or hold `*n` elements (the
                // callers below); the driver writes at most `*n`.
                (Ok(f), _) => unsafe { f(self.raw, np, dp, n) },
                // SAFETY: as above, without the edge data.
                (Err(_), Ok(f)) => unsafe { f(self.raw, np, n) },
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
        // Both arrays hold at least `n` elements of types `repr(transparent)` over the C
        // types. The nodes the driver writes belong to the same graph, alive for `'g`.
        query(
            nodes.as_mut_ptr().cast::<CUgraphNode>(),
            data.as_mut_ptr().cast::<CUgraphEdgeData>(),
            &mut n,
        )?;
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
        let p = nodes.as_mut_ptr().cast::<CUgraphNode>();
        // SAFETY: `nodes` holds at least `n` elements, `repr(transparent)` over
        // `CUgraphNode`; the driver writes at most `n` nodes of this graph.
        unsafe {
            if roots {
                drv!(cu, cuGraphGetRootNodes(self.as_raw(), p, &mut n))?;
            } else {
                drv!(cu, cuGraphGetNodes(self.as_raw(), p, &mut n))?;
            }
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
        unsafe { GraphNode::from_raw(raw) }
    }
}
