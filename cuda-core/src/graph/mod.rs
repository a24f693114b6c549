//! CUDA graphs (driver API section "Graph Management"): build a graph by stream capture
//! or node by node, instantiate it, launch it, update it in place.
//!
//! - [`Graph`] / [`GraphExec`]: RAII handles (`cuGraphCreate` / `cuGraphDestroy`,
//!   `cuGraphInstantiate` / `cuGraphExecDestroy`), with [`InstantiateFlags`], upload,
//!   launch, whole-graph update ([`GraphExec::update`], whose error carries the
//!   driver's `CUgraphExecUpdateResultInfo`), kernel-node parameter update and node
//!   enable/disable.
//! - Stream capture: [`Capture`] (into a new graph) and [`CaptureToGraph`] (into an
//!   existing one), in any [`CaptureMode`]; capture status and info on
//!   [`Stream`](crate::Stream).
//! - Nodes ([`GraphNode`], borrowed from their graph): kernel (same arguments as the
//!   launch path), memset, memcpy, host function (closure or C function), event record
//!   and wait, child graph, empty, memory alloc and free; conditional IF / IF-else /
//!   WHILE / SWITCH nodes whose [`ConditionalHandle`] is set from device code, with
//!   their body graphs as [`GraphRef`]s.
//! - Edges with [`EdgeData`]: default, programmatic ([`EdgeData::PROGRAMMATIC`]) and
//!   launch-completion ([`EdgeData::LAUNCH_COMPLETION`]) edges between kernel nodes;
//!   node dependencies and graph edges listed with their edge data.
//! - Device graph launch (Programming Guide 4.2.6): [`Graph::instantiate_for_device`]
//!   checks the device-graph requirements up front ([`Graph::check_device_launchable`])
//!   and uploads; [`GraphExec::device_handle`] is the kernel parameter device code
//!   launches with (`cudadrv::device::DeviceGraphExec`).
//! - The device's graph memory pool: [`GraphMemUsage`], [`graph_mem_trim`].
//! - Replay regions ([`Region`], feature `alloc`): ordinary stream work recorded by a
//!   closure, captured on its first execution and replayed as a cached executable graph
//!   with its parameters updated in place.
//!
//! # Lifetimes and memory
//! A graph and an executable graph keep their [`Context`](crate::Context) alive (a
//! shared owner). `Graph<'a>` / `GraphExec<'a>` carry `'a`, the lifetime of what their
//! nodes borrow: the safe node adders (memset, copy, event record/wait, kernel nodes'
//! functions) borrow buffers, events and functions for `'a`, so none of them can be
//! dropped while a graph that names it lives. Nodes and body graphs borrow their graph.
//! Kernel parameters and node descriptions are copied by the driver when a node is added
//! or updated. Memory that the `unsafe` adders name **by address** is not borrowed:
//! their contract is that it stays valid for every launch of every executable graph made
//! from the graph. Host-node closures are owned by the graph (a CUDA user object) and
//! freed after the graph and every executable graph made from it are gone.
//!
//! # Unsafe policy
//! Adding a node that launches a kernel, touches memory by address, runs a C function
//! or names an event is `unsafe fn` with a `# Safety` section; structural operations
//! (empty and child-graph nodes, edges, queries, instantiate, launch, update) are safe.
//! Every `unsafe` block carries a `// SAFETY:` comment.

mod capture;
mod conditional;
mod device_launch;
mod edge;
mod exec;
mod handle;
mod ids;
mod kernel_node;
mod mem;
mod node;
mod plain_nodes;
#[cfg(feature = "alloc")]
mod region;

pub use capture::{Capture, CaptureInfo, CaptureMode, CaptureToGraph, Capturing};
pub use conditional::ConditionalHandle;
pub use device_launch::{CHECK_CAPACITY, DeviceGraphHandle, node_type_name};
pub use edge::EdgeData;
pub use exec::{ExecUpdateError, GraphExec, InstantiateFlags, instantiate_result_name};
pub use handle::{Graph, GraphRef};
pub use mem::{GraphMemUsage, graph_mem_attribute, graph_mem_trim};
pub use node::GraphNode;
pub use plain_nodes::Memset;
#[cfg(feature = "alloc")]
pub use region::{DEFAULT_REGION_CAPACITY, HostTarget, Recorder, Region, RegionStats};
