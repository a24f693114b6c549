//! Edges with edge data (CUDA 12.3+): [`EdgeData`], [`Graph::add_edge`], and the edge
//! listing [`Graph::edges`].

use core::fmt;
use core::ptr;

use cudadrv_sys::{
    CU_GRAPH_KERNEL_NODE_PORT_DEFAULT, CU_GRAPH_KERNEL_NODE_PORT_LAUNCH_ORDER,
    CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC, CUgraphDependencyType, CUgraphEdgeData, CUgraphNode,
};

use super::node::{raw_room, widen};
use super::{Graph, GraphNode};
use crate::driver::api;
use crate::error::{Error, Result};

/// The data of a graph edge (`CUgraphEdgeData`): its type and the ports it leaves and
/// enters. Same layout as the C struct, so slices pass to the driver as they are.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct EdgeData(CUgraphEdgeData);

impl EdgeData {
    /// A full dependency: the downstream node starts after the upstream node completes
    /// (all-zero edge data).
    pub const DEFAULT: Self = Self(CUgraphEdgeData {
        from_port: CU_GRAPH_KERNEL_NODE_PORT_DEFAULT as u8,
        to_port: 0,
        type_: CUgraphDependencyType::CU_GRAPH_DEPENDENCY_TYPE_DEFAULT.0 as u8,
        reserved: [0; 5],
    });

    /// A programmatic edge between two kernel nodes (`CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC`
    /// from port `CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC`): the downstream kernel may
    /// start once every block of the upstream kernel has executed
    /// `griddepcontrol.launch_dependents` (or exited), and must `griddepcontrol.wait`
    /// before reading the upstream kernel's output. What stream capture of a PDL launch
    /// produces.
    #[doc(alias = "CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC")]
    #[doc(alias = "CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC")]
    pub const PROGRAMMATIC: Self = Self(CUgraphEdgeData {
        from_port: CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC as u8,
        to_port: 0,
        type_: CUgraphDependencyType::CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC.0 as u8,
        reserved: [0; 5],
    });

    /// A launch-completion edge between two kernel nodes
    /// (`CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC` from port
    /// `CU_GRAPH_KERNEL_NODE_PORT_LAUNCH_ORDER`, the port the Programming Guide calls
    /// launch completion): the downstream kernel may start once every block of the
    /// upstream kernel has started. The graph form of
    /// [`LaunchAttribute::launch_completion_event`](crate::launch::LaunchAttribute::launch_completion_event).
    #[doc(alias = "CU_GRAPH_KERNEL_NODE_PORT_LAUNCH_ORDER")]
    pub const LAUNCH_COMPLETION: Self = Self(CUgraphEdgeData {
        from_port: CU_GRAPH_KERNEL_NODE_PORT_LAUNCH_ORDER as u8,
        to_port: 0,
        type_: CUgraphDependencyType::CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC.0 as u8,
        reserved: [0; 5],
    });

    /// Edge data from its parts, or `None` when `kind` does not fit the C struct's 8-bit
    /// `type` field (a value above 255 is rejected, never cut down to another type).
    /// A kind this crate does not name but that fits is kept as given.
    #[must_use]
    pub const fn new(kind: CUgraphDependencyType, from_port: u8, to_port: u8) -> Option<Self> {
        if kind.0 > u8::MAX as u32 {
            return None;
        }
        Some(Self(CUgraphEdgeData {
            from_port,
            to_port,
            type_: kind.0 as u8,
            reserved: [0; 5],
        }))
    }

    /// Wraps raw edge data.
    #[must_use]
    pub const fn from_raw(raw: CUgraphEdgeData) -> Self {
        Self(raw)
    }

    /// The raw `CUgraphEdgeData`.
    #[must_use]
    pub const fn as_raw(&self) -> CUgraphEdgeData {
        self.0
    }

    /// The dependency type (`CU_GRAPH_DEPENDENCY_TYPE_*`), as stored: a value this crate
    /// does not name comes back as that value (see [`EdgeData::kind_name`]).
    #[must_use]
    pub const fn kind(&self) -> CUgraphDependencyType {
        CUgraphDependencyType(self.0.type_ as _)
    }

    /// The port the edge leaves (`CU_GRAPH_KERNEL_NODE_PORT_*` for kernel nodes).
    #[must_use]
    pub const fn from_port(&self) -> u8 {
        self.0.from_port
    }

    /// The port the edge enters (0: the only input port).
    #[must_use]
    pub const fn to_port(&self) -> u8 {
        self.0.to_port
    }

    /// Whether this is a programmatic edge (either port).
    #[must_use]
    pub const fn is_programmatic(&self) -> bool {
        self.0.type_ as u32 == CUgraphDependencyType::CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC.0
    }

    /// The dependency type's name (`"default"`, `"programmatic"`), or `None` for a type
    /// this crate does not know (a newer driver's, or raw data): an unknown type is
    /// reported as unknown, never as one of the known ones.
    #[must_use]
    pub const fn kind_name(&self) -> Option<&'static str> {
        match self.0.type_ as u32 {
            t if t == CUgraphDependencyType::CU_GRAPH_DEPENDENCY_TYPE_DEFAULT.0 => Some("default"),
            t if t == CUgraphDependencyType::CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC.0 => {
                Some("programmatic")
            }
            _ => None,
        }
    }
}

impl Default for EdgeData {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl fmt::Debug for EdgeData {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = self.kind_name().unwrap_or("unknown");
        f.debug_struct("EdgeData")
            .field("type", &format_args!("{kind} ({})", self.0.type_))
            .field("from_port", &self.0.from_port)
            .field("to_port", &self.0.to_port)
            .finish()
    }
}

/// Whether every edge is a default edge, which a driver without edge data (before CUDA
/// 12.3) can express.
fn all_default(data: &[EdgeData]) -> bool {
    data.iter().all(|d| *d == EdgeData::DEFAULT)
}

impl Graph<'_> {
    /// `cuGraphAddDependencies` (v2, with edge data) or, on a driver before CUDA 12.3,
    /// v1 when every edge is a default edge.
    ///
    /// Errors with [`Error::DriverTooOld`] for an edge with data on a driver without
    /// edge data.
    ///
    /// # Safety
    /// `from` and `to` point to `data.len()` nodes each, alive for the call.
    unsafe fn add_or_remove(
        &self,
        remove: bool,
        from: *const CUgraphNode,
        to: *const CUgraphNode,
        data: &[EdgeData],
    ) -> Result<()> {
        let cu = api()?;
        let n = data.len();
        let (name, v2, v1) = if remove {
            (
                "cuGraphRemoveDependencies",
                cu.cuGraphRemoveDependencies(),
                cu.cuGraphRemoveDependencies_v10000(),
            )
        } else {
            (
                "cuGraphAddDependencies",
                cu.cuGraphAddDependencies(),
                cu.cuGraphAddDependencies_v10000(),
            )
        };
        let rc = match (v2, v1) {
            // SAFETY: the caller's arrays of `n` elements; `EdgeData` is
            // `repr(transparent)` over `CUgraphEdgeData`.
            (Ok(f), _) => unsafe {
                f(
                    self.as_raw(),
                    from,
                    to,
                    data.as_ptr().cast::<CUgraphEdgeData>(),
                    n,
                )
            },
            // SAFETY: as above, without the edge data (all default edges).
            (Err(_), Ok(f)) if all_default(data) => unsafe { f(self.as_raw(), from, to, n) },
            // Before CUDA 12.3 and an edge with data: the driver cannot express it.
            (Err(missing), _) => return Err(missing.into()),
        };
        crate::error::call(rc, name)
    }

    /// `cuGraphAddDependencies`: an edge `from -> to` with `data`.
    ///
    /// # Errors
    /// [`Error::ForeignNode`] for a node of another graph or the null node; driver
    /// errors: `CUDA_ERROR_INVALID_VALUE` for a duplicate edge or a programmatic edge
    /// between nodes that are not both kernels.
    #[doc(alias = "cuGraphAddDependencies")]
    pub fn add_edge(&self, from: GraphNode<'_>, to: GraphNode<'_>, data: EdgeData) -> Result<()> {
        const CALL: &str = "cuGraphAddDependencies";
        let (from, to) = (self.own(from, CALL)?, self.own(to, CALL)?);
        // SAFETY: one element per array, all alive for the call.
        unsafe { self.add_or_remove(false, &from, &to, &[data]) }
    }

    /// `cuGraphAddDependencies` for several edges: `from[i] -> to[i]` with `data[i]`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the slices differ in length;
    /// [`Error::ForeignNode`] for a node of another graph or the null node; driver
    /// errors.
    #[doc(alias = "cuGraphAddDependencies")]
    pub fn add_edges(
        &self,
        from: &[GraphNode<'_>],
        to: &[GraphNode<'_>],
        data: &[EdgeData],
    ) -> Result<()> {
        const CALL: &str = "cuGraphAddDependencies";
        if from.len() != to.len() || from.len() != data.len() {
            return Err(Error::InvalidArgument(
                "add_edges: from, to and data must have the same length",
            ));
        }
        self.with_nodes(from, CALL, |from, _| {
            self.with_nodes(to, CALL, |to, _| {
                // SAFETY: each array holds `data.len()` checked nodes of this graph,
                // alive for the call.
                unsafe { self.add_or_remove(false, from, to, data) }
            })
        })
    }

    /// `cuGraphRemoveDependencies`: removes the edge `from -> to` with `data`.
    ///
    /// # Errors
    /// [`Error::ForeignNode`] for a node of another graph or the null node; driver
    /// errors (`CUDA_ERROR_INVALID_VALUE` when there is no such edge).
    #[doc(alias = "cuGraphRemoveDependencies")]
    pub fn remove_edge(
        &self,
        from: GraphNode<'_>,
        to: GraphNode<'_>,
        data: EdgeData,
    ) -> Result<()> {
        const CALL: &str = "cuGraphRemoveDependencies";
        let (from, to) = (self.own(from, CALL)?, self.own(to, CALL)?);
        // SAFETY: one element per array, all alive for the call.
        unsafe { self.add_or_remove(true, &from, &to, &[data]) }
    }

    /// `cuGraphGetEdges`: the number of edges.
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuGraphGetEdges")]
    pub fn edge_count(&self) -> Result<usize> {
        let mut n = 0usize;
        // SAFETY: null arrays ask for the count only.
        unsafe {
            self.get_edges(ptr::null_mut(), ptr::null_mut(), ptr::null_mut(), &mut n)?;
        }
        Ok(n)
    }

    /// `cuGraphGetEdges` (v2, with edge data) or, on a driver before CUDA 12.3, v1,
    /// whose edges are all default edges: `data` (if not null) gets
    /// [`EdgeData::DEFAULT`] for each edge written.
    ///
    /// # Safety
    /// `from`, `to` and `data` are null (count only) or hold `*n` elements.
    unsafe fn get_edges(
        &self,
        from: *mut CUgraphNode,
        to: *mut CUgraphNode,
        data: *mut EdgeData,
        n: &mut usize,
    ) -> Result<()> {
        let cu = api()?;
        match (cu.cuGraphGetEdges(), cu.cuGraphGetEdges_v10000()) {
            // SAFETY: the caller's arrays; `EdgeData` is `repr(transparent)`.
            (Ok(f), _) => crate::error::call(
                unsafe { f(self.as_raw(), from, to, data.cast::<CUgraphEdgeData>(), n) },
                "cuGraphGetEdges",
            ),
            (Err(_), Ok(f)) => {
                // SAFETY: the caller's arrays.
                let rc = unsafe { f(self.as_raw(), from, to, n) };
                crate::error::call(rc, "cuGraphGetEdges")?;
                if !data.is_null() && !from.is_null() {
                    for i in 0..*n {
                        // SAFETY: `data` holds at least the `*n` elements the driver
                        // wrote to `from` (it writes at most what it was given).
                        unsafe { data.add(i).write(EdgeData::DEFAULT) };
                    }
                }
                Ok(())
            }
            (Err(missing), Err(_)) => Err(missing.into()),
        }
    }

    /// `cuGraphGetEdges`: fills `from`, `to` and `data` (edge `i` is
    /// `from[i] -> to[i]` with `data[i]`) with up to the shortest slice's length of
    /// edges, and returns the total number of edges (which may be more).
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuGraphGetEdges")]
    pub fn edges<'g>(
        &'g self,
        from: &mut [GraphNode<'g>],
        to: &mut [GraphNode<'g>],
        data: &mut [EdgeData],
    ) -> Result<usize> {
        let total = self.edge_count()?;
        let mut n = from.len().min(to.len()).min(data.len()).min(total);
        if n == 0 {
            return Ok(total);
        }
        // SAFETY: `from` and `to` have room for at least `n` raw handles, `data` holds
        // at least `n` elements; the driver writes at most `n` (its in/out count). Node
        // handles it writes are nodes of this graph, valid for `'g`, which `widen` turns
        // into typed nodes.
        unsafe {
            self.get_edges(raw_room(from), raw_room(to), data.as_mut_ptr(), &mut n)?;
            widen(from, n, self.as_raw());
            widen(to, n, self.as_raw());
        }
        Ok(total)
    }

    /// `cuGraphGetEdges` into a `Vec` of `(from, to, data)`.
    ///
    /// # Errors
    /// Driver errors.
    #[cfg(feature = "alloc")]
    #[doc(alias = "cuGraphGetEdges")]
    pub fn edges_vec(&self) -> Result<alloc::vec::Vec<(GraphNode<'_>, GraphNode<'_>, EdgeData)>> {
        let total = self.edge_count()?;
        let mut from = alloc::vec![GraphNode::NULL; total];
        let mut to = alloc::vec![GraphNode::NULL; total];
        let mut data = alloc::vec![EdgeData::DEFAULT; total];
        let again = self.edges(&mut from, &mut to, &mut data)?;
        let n = total.min(again);
        Ok(from
            .into_iter()
            .zip(to)
            .zip(data)
            .take(n)
            .map(|((f, t), d)| (f, t, d))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    extern crate std;

    use super::*;
    use core::mem::{align_of, size_of};

    #[test]
    fn edge_data_encoding() {
        assert_eq!(size_of::<EdgeData>(), 8);
        assert_eq!(align_of::<EdgeData>(), 1);
        let p = EdgeData::PROGRAMMATIC.as_raw();
        assert_eq!(
            (p.from_port, p.to_port, p.type_, p.reserved),
            (1, 0, 1, [0; 5])
        );
        let l = EdgeData::LAUNCH_COMPLETION.as_raw();
        assert_eq!((l.from_port, l.to_port, l.type_), (2, 0, 1));
        let d = EdgeData::default().as_raw();
        assert_eq!((d.from_port, d.to_port, d.type_), (0, 0, 0));
        assert!(EdgeData::PROGRAMMATIC.is_programmatic());
        assert!(EdgeData::LAUNCH_COMPLETION.is_programmatic());
        assert!(!EdgeData::DEFAULT.is_programmatic());
        assert_eq!(
            EdgeData::LAUNCH_COMPLETION.kind(),
            CUgraphDependencyType::CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC
        );
        assert_eq!(
            EdgeData::new(
                CUgraphDependencyType::CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC,
                1,
                0
            ),
            Some(EdgeData::PROGRAMMATIC)
        );
        assert_eq!(EdgeData::from_raw(p), EdgeData::PROGRAMMATIC);
    }

    #[test]
    fn unknown_dependency_types_are_not_reinterpreted() {
        // 257 does not fit the 8-bit field: as `257 as u8` it would read as programmatic.
        assert_eq!(EdgeData::new(CUgraphDependencyType(257), 1, 0), None);
        assert_eq!(EdgeData::new(CUgraphDependencyType(256), 0, 0), None);
        // A type this crate does not name, but that fits, is kept as given and reported
        // as unknown.
        let two = EdgeData::new(CUgraphDependencyType(2), 0, 0).expect("fits in 8 bits");
        assert_eq!(two.kind(), CUgraphDependencyType(2));
        assert_eq!(two.as_raw().type_, 2);
        assert_eq!(two.kind_name(), None);
        assert!(!two.is_programmatic());
        let debug = std::format!("{two:?}");
        assert!(debug.contains("unknown (2)"), "{debug}");
        let raw = CUgraphEdgeData {
            from_port: 1,
            to_port: 0,
            type_: 255,
            reserved: [0; 5],
        };
        let from_driver = EdgeData::from_raw(raw);
        assert_eq!(from_driver.kind(), CUgraphDependencyType(255));
        assert_eq!(from_driver.kind_name(), None);
        assert!(!from_driver.is_programmatic());
        assert_eq!(EdgeData::PROGRAMMATIC.kind_name(), Some("programmatic"));
        assert_eq!(EdgeData::DEFAULT.kind_name(), Some("default"));
    }
}
