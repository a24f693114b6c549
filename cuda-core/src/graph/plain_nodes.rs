//! The other explicit nodes: empty, memset, memcpy, host function, event record and
//! wait, child graph.
//!
//! Nodes that name a [`DeviceBuffer`], a [`PinnedHostBuffer`] or an [`Event`] borrow it
//! for the graph's `'a`, so it outlives the graph and every executable graph made from
//! it. The memory must belong to the graph's context ([`Error::ContextMismatch`]
//! otherwise, as for a child graph): an executable graph can be leaked
//! ([`GraphExec::into_raw`](super::GraphExec::into_raw), `mem::forget`), which ends the
//! borrow without waiting for its launches, and then only the free's own wait is left,
//! which covers work of its own context only. The forms that take a raw address ([`Memset`], `CUDA_MEMCPY3D`, a C host
//! function) are `unsafe`: the graph keeps the address, not a borrow, so the caller
//! promises it stays valid for every launch of every executable graph made from the
//! graph.
//!
//! # Host memory in copy nodes
//! Device memory is not Rust memory: the host only reaches it through copies, so graph
//! nodes may write it through shared borrows. Pinned host memory *is* Rust memory
//! (`PinnedHostBuffer` dereferences to `[T]`), so the two directions differ:
//! - [`Graph::add_copy_from_host_node`] is safe: the node only **reads** the host
//!   buffer, which the graph borrows shared for `'a`, so no Rust code can write it (no
//!   `&mut` exists) while the graph or an executable graph made from it lives. Dropping
//!   a launched executable graph waits for its context's work, but safe code may also
//!   leak one (`mem::forget`), which ends the borrow with a launch still pending: the
//!   device may then read while Rust writes again, a mix of old and new values, which
//!   is a wrong result but no undefined behaviour on the host (and `cuMemFreeHost`
//!   does not take the pages from under a pending copy: `hw_promises` checks it).
//! - [`Graph::add_copy_to_host_node`] is `unsafe`: the node **writes** the host buffer at
//!   every launch, asynchronously. A borrow cannot say when a launch has finished, so
//!   Rust code reading the buffer during a launch (through `&PinnedHostBuffer`) would be
//!   a data race. Borrowing it `&mut` for `'a` would not close that either: the borrow
//!   ends when the executable graph is gone, and a leaked executable graph is gone
//!   without waiting for its launches. So the caller promises what the types cannot: no
//!   host access to the buffer while a launch may be writing it (synchronize the
//!   launch's stream, or an event recorded after it, first). The shared borrow still
//!   keeps the buffer allocated for as long as the graph and its executable graphs
//!   live, and forbids writes.
//!
//! # Pageable host memory
//! The same holds, more strongly, for ordinary (pageable) host memory, which the driver
//! copies with its own threads through a staging buffer: a node writing a `Vec` could
//! race with Rust code after a leaked executable graph, and there is no owner whose
//! drop could wait. So there is no safe node for it; describe such a copy with the
//! `unsafe` [`Graph::add_memcpy_node`] (`CU_MEMORYTYPE_HOST`), or copy into a
//! [`PinnedHostBuffer`] node and read it after the launch, or copy synchronously after
//! the launch ([`DeviceBuffer::copy_to_host`]).

use core::ffi::c_void;
use core::ptr;

use cudadrv_sys::{
    CUDA_HOST_NODE_PARAMS, CUDA_MEMCPY3D, CUDA_MEMSET_NODE_PARAMS, CUdeviceptr, CUevent,
    CUmemorytype,
};

use super::{Graph, GraphNode, GraphRef};
use crate::driver::api;
use crate::driver::event::Event;
use crate::error::{Error, Result, drv};
#[cfg(doc)]
use crate::memory::DeviceBuffer;
use crate::memory::DeviceView;
use crate::memory::{PinnedHostBuffer, Pod, same_len};

/// A memset node's target: `height` rows of `width` elements of `element_size`
/// (1, 2 or 4) bytes, rows `pitch` bytes apart, all set to `value`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Memset {
    /// Device address of the first element.
    pub dst: CUdeviceptr,
    /// Bytes between rows (ignored when `height == 1`).
    pub pitch: usize,
    /// The value (its low `element_size` bytes).
    pub value: u32,
    /// 1, 2 or 4.
    pub element_size: u32,
    /// Elements per row.
    pub width: usize,
    /// Rows.
    pub height: usize,
}

impl Memset {
    /// `count` 32-bit words at `dst` set to `value`.
    #[must_use]
    pub const fn d32(dst: CUdeviceptr, value: u32, count: usize) -> Self {
        Self {
            dst,
            pitch: 0,
            value,
            element_size: 4,
            width: count,
            height: 1,
        }
    }

    /// `count` bytes at `dst` set to `value`.
    #[must_use]
    pub const fn d8(dst: CUdeviceptr, value: u8, count: usize) -> Self {
        Self {
            dst,
            pitch: 0,
            value: value as u32,
            element_size: 1,
            width: count,
            height: 1,
        }
    }
}

impl<'a> Graph<'a> {
    /// `cuGraphAddEmptyNode`: a node that does nothing, to join or fan out
    /// dependencies.
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuGraphAddEmptyNode")]
    pub fn add_empty_node(&self, deps: &[GraphNode<'_>]) -> Result<GraphNode<'_>> {
        let cu = api()?;
        self.add_node(deps, "cuGraphAddEmptyNode", |node, graph, d, n| {
            // SAFETY: live graph; `deps` holds `deps.len()` nodes.
            unsafe { drv!(cu, cuGraphAddEmptyNode(node, graph, d, n)) }
        })
    }

    /// `cuGraphAddMemsetNode`: a memset of device memory.
    ///
    /// # Errors
    /// Driver errors.
    ///
    /// # Safety
    /// The memory `m` describes must be device memory of this graph's context, valid
    /// for writes at every launch of every executable graph made from this graph, and
    /// not used concurrently by other work meanwhile.
    #[doc(alias = "cuGraphAddMemsetNode")]
    pub unsafe fn add_memset_node(
        &self,
        deps: &[GraphNode<'_>],
        m: &Memset,
    ) -> Result<GraphNode<'_>> {
        let cu = api()?;
        let params = CUDA_MEMSET_NODE_PARAMS {
            dst: m.dst,
            pitch: m.pitch,
            value: m.value,
            elementSize: m.element_size,
            width: m.width,
            height: m.height,
        };
        self.add_node(deps, "cuGraphAddMemsetNode", |node, graph, d, n| {
            // SAFETY: live graph and context; valid pointers; the target's validity is the
            // caller's promise.
            unsafe {
                drv!(
                    cu,
                    cuGraphAddMemsetNode(node, graph, d, n, &params, self.context().as_raw())
                )
            }
        })
    }

    /// `cuGraphAddMemsetNode` setting every byte of `buf` to `value`. The graph borrows
    /// `buf` for `'a`.
    ///
    /// # Errors
    /// [`Error::ContextMismatch`] for a buffer of another context than the graph's;
    /// Driver errors.
    #[doc(alias = "cuGraphAddMemsetNode")]
    pub fn add_memset_d8_node<T: Copy + 'a>(
        &self,
        deps: &[GraphNode<'_>],
        buf: impl Into<DeviceView<'a, T>>,
        value: u8,
    ) -> Result<GraphNode<'_>> {
        let buf = buf.into();
        buf.release().for_graph()?;
        self.same_context(buf.context(), "cuGraphAddMemsetNode")?;
        // SAFETY: `buf` holds `size_bytes` bytes of this context (checked above) and is
        // borrowed for `'a`, as long as the graph and its executable graphs live.
        unsafe { self.add_memset_node(deps, &Memset::d8(buf.as_raw(), value, buf.size_bytes())) }
    }

    /// `cuGraphAddMemsetNode` setting every 32-bit word of `buf` to `value`. The graph
    /// borrows `buf` for `'a`.
    ///
    /// # Errors
    /// [`Error::ContextMismatch`] for a buffer of another context than the graph's;
    /// [`Error::InvalidArgument`] unless the size is a multiple of 4; driver errors.
    #[doc(alias = "cuGraphAddMemsetNode")]
    pub fn add_memset_d32_node<T: Copy + 'a>(
        &self,
        deps: &[GraphNode<'_>],
        buf: impl Into<DeviceView<'a, T>>,
        value: u32,
    ) -> Result<GraphNode<'_>> {
        let buf = buf.into();
        buf.release().for_graph()?;
        self.same_context(buf.context(), "cuGraphAddMemsetNode")?;
        let bytes = buf.size_bytes();
        if bytes % 4 != 0 {
            return Err(Error::InvalidArgument(
                "memset_d32 needs a size that is a multiple of 4 bytes",
            ));
        }
        // SAFETY: as in `add_memset_d8_node`.
        unsafe { self.add_memset_node(deps, &Memset::d32(buf.as_raw(), value, bytes / 4)) }
    }

    /// `cuGraphAddMemcpyNode` copying `src` into `dst` (same length). The graph borrows
    /// both for `'a`.
    ///
    /// # Errors
    /// [`Error::ContextMismatch`] for a buffer of another context than the graph's;
    /// [`Error::InvalidArgument`] when the lengths differ; driver errors.
    #[doc(alias = "cuGraphAddMemcpyNode")]
    pub fn add_copy_node<T: Copy + 'a>(
        &self,
        deps: &[GraphNode<'_>],
        dst: impl Into<DeviceView<'a, T>>,
        src: impl Into<DeviceView<'a, T>>,
    ) -> Result<GraphNode<'_>> {
        let dst = dst.into();
        dst.release().for_graph()?;
        let src = src.into();
        src.release().for_graph()?;
        same_len(dst.len(), src.len())?;
        self.same_context(dst.context(), "cuGraphAddMemcpyNode")?;
        self.same_context(src.context(), "cuGraphAddMemcpyNode")?;
        // SAFETY: both hold `size_bytes` bytes of this context and are borrowed for `'a`.
        unsafe { self.add_memcpy_dtod_node(deps, dst.as_raw(), src.as_raw(), src.size_bytes()) }
    }

    /// `cuGraphAddMemcpyNode` copying pinned host memory `src` into `dst` (same length)
    /// at each launch. The graph borrows both for `'a`; `src` shared, so no Rust code
    /// can write it while the graph or an executable graph made from it lives. An empty
    /// copy is an empty node.
    ///
    /// Safe because the node only **reads** host memory. A launch still running after
    /// the last executable graph was dropped (`cuGraphExecDestroy` does not wait) may
    /// read `src` while Rust writes it again: the device then copies a mix of old and new
    /// values, a wrong result but no undefined behaviour on the host. The other
    /// direction writes host memory and is `unsafe`: see
    /// [`add_copy_to_host_node`](Self::add_copy_to_host_node).
    ///
    /// The host buffer cannot be written while the graph lives. To feed new host data
    /// to each launch, copy it into the device buffer between launches
    /// ([`DeviceBuffer::copy_from_host`]), or describe the copy with the unsafe
    /// [`add_memcpy_node`](Self::add_memcpy_node):
    ///
    /// ```compile_fail,E0502
    /// # fn f(ctx: &cudadrv::Context) -> cudadrv::Result<()> {
    /// use cudadrv::{DeviceBuffer, PinnedHostBuffer, graph::Graph};
    /// let mut input = PinnedHostBuffer::from_slice(ctx, &[1u32, 2])?;
    /// let on_device = DeviceBuffer::<u32>::new(ctx, 2)?;
    /// let graph = Graph::new(ctx)?;
    /// graph.add_copy_from_host_node(&[], &on_device, &input)?;
    /// input[0] = 3; // error: the graph borrows `input`
    /// let exec = graph.instantiate(Default::default())?;
    /// # drop(exec); Ok(()) }
    /// ```
    ///
    /// ```no_run
    /// # fn main() -> cudadrv::Result<()> {
    /// use cudadrv::{Context, Device, DeviceBuffer, PinnedHostBuffer, Stream, graph::Graph};
    /// let ctx = Context::primary(Device::get(0)?)?;
    /// let input = PinnedHostBuffer::from_slice(&ctx, &[1u32, 2, 3])?;
    /// let on_device = DeviceBuffer::<u32>::new(&ctx, 3)?;
    /// let graph = Graph::new(&ctx)?;
    /// graph.add_copy_from_host_node(&[], &on_device, &input)?;
    /// let exec = graph.instantiate(Default::default())?;
    /// let stream = Stream::non_blocking(&ctx)?;
    /// exec.launch(&stream)?;
    /// stream.synchronize()?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::ContextMismatch`] for a buffer of another context than the graph's;
    /// [`Error::LengthMismatch`] when the lengths differ; driver errors.
    #[doc(alias = "cuGraphAddMemcpyNode")]
    #[doc(alias = "cudaMemcpyHostToDevice")]
    pub fn add_copy_from_host_node<T: Copy + 'a>(
        &self,
        deps: &[GraphNode<'_>],
        dst: impl Into<DeviceView<'a, T>>,
        src: &'a PinnedHostBuffer<T>,
    ) -> Result<GraphNode<'_>> {
        let dst = dst.into();
        dst.release().for_graph()?;
        same_len(dst.len(), src.len())?;
        self.same_context(dst.context(), "cuGraphAddMemcpyNode")?;
        self.same_context(src.context(), "cuGraphAddMemcpyNode")?;
        if dst.size_bytes() == 0 {
            return self.add_empty_node(deps);
        }
        let copy = CUDA_MEMCPY3D {
            srcMemoryType: CUmemorytype::CU_MEMORYTYPE_HOST,
            srcHost: src.as_ptr().cast::<c_void>(),
            dstMemoryType: CUmemorytype::CU_MEMORYTYPE_DEVICE,
            dstDevice: dst.as_raw(),
            WidthInBytes: dst.size_bytes(),
            Height: 1,
            Depth: 1,
            ..CUDA_MEMCPY3D::default()
        };
        // SAFETY: both buffers hold `size_bytes` bytes and are borrowed for `'a`, as
        // long as the graph and its executable graphs live; the host side is pinned and
        // only read, and the shared borrow keeps Rust from writing it meanwhile.
        unsafe { self.add_memcpy_node(deps, &copy) }
    }

    /// `cuGraphAddMemcpyNode` copying `src` into pinned host memory `dst` (same length)
    /// at each launch. The graph borrows both for `'a`. An empty copy is an empty node.
    ///
    /// Device memory is not Rust memory, so nodes may write it through shared borrows;
    /// pinned host memory is (`PinnedHostBuffer` dereferences to `[T]`). This node
    /// writes it asynchronously at every launch, and a borrow cannot say when a launch
    /// has finished: Rust code reading `dst` during one would be a data race. Borrowing
    /// `dst` mutably for `'a` would not close that, because the borrow ends when the
    /// last executable graph is dropped, and dropping one does not wait for its
    /// launches. So the caller promises what the types cannot (below); the shared borrow
    /// still keeps `dst` allocated while the graph and its executable graphs live,
    /// forbids writes to it, and lets the host read it between launches once they are
    /// synchronized.
    ///
    /// ```no_run
    /// # fn main() -> cudadrv::Result<()> {
    /// use cudadrv::{Context, Device, DeviceBuffer, PinnedHostBuffer, Stream, graph::Graph};
    /// let ctx = Context::primary(Device::get(0)?)?;
    /// let on_device = DeviceBuffer::from_slice(&ctx, &[1u32, 2, 3])?;
    /// let output = PinnedHostBuffer::<u32>::zeroed(&ctx, 3)?;
    /// let graph = Graph::new(&ctx)?;
    /// // SAFETY: `output` is only read after the stream that launched the graph has
    /// // been synchronized.
    /// unsafe { graph.add_copy_to_host_node(&[], &output, &on_device)? };
    /// let exec = graph.instantiate(Default::default())?;
    /// let stream = Stream::non_blocking(&ctx)?;
    /// exec.launch(&stream)?;
    /// stream.synchronize()?;
    /// assert_eq!(&output[..], &[1, 2, 3]);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::ContextMismatch`] for a buffer of another context than the graph's;
    /// [`Error::LengthMismatch`] when the lengths differ; driver errors.
    ///
    /// # Safety
    /// The node writes `dst` asynchronously at every launch of every executable graph
    /// made from this graph. From each such launch until it has completed (its stream,
    /// or an event recorded after it, synchronized), no host code may read `dst`, and
    /// `dst` must not be dropped before the last launch has completed (dropping the
    /// executable graphs does not wait for their launches).
    #[doc(alias = "cuGraphAddMemcpyNode")]
    #[doc(alias = "cudaMemcpyDeviceToHost")]
    pub unsafe fn add_copy_to_host_node<T: Pod + 'a>(
        &self,
        deps: &[GraphNode<'_>],
        dst: &'a PinnedHostBuffer<T>,
        src: impl Into<DeviceView<'a, T>>,
    ) -> Result<GraphNode<'_>> {
        let src = src.into();
        src.release().for_graph()?;
        same_len(dst.len(), src.len())?;
        self.same_context(dst.context(), "cuGraphAddMemcpyNode")?;
        self.same_context(src.context(), "cuGraphAddMemcpyNode")?;
        if src.size_bytes() == 0 {
            return self.add_empty_node(deps);
        }
        let copy = CUDA_MEMCPY3D {
            srcMemoryType: CUmemorytype::CU_MEMORYTYPE_DEVICE,
            srcDevice: src.as_raw(),
            dstMemoryType: CUmemorytype::CU_MEMORYTYPE_HOST,
            // The driver writes through it; no `&mut` is formed on the Rust side (the
            // caller's contract keeps host code away during launches).
            dstHost: dst.as_ptr().cast_mut().cast::<c_void>(),
            WidthInBytes: src.size_bytes(),
            Height: 1,
            Depth: 1,
            ..CUDA_MEMCPY3D::default()
        };
        // SAFETY: both buffers hold `size_bytes` bytes and are borrowed for `'a`; any
        // bytes are a valid `T` (`Pod`); host access during launches and the tail after
        // the executable graphs are dropped are the caller's promise.
        unsafe { self.add_memcpy_node(deps, &copy) }
    }

    /// `cuGraphAddMemcpyNode` with a full `CUDA_MEMCPY3D` description.
    ///
    /// # Errors
    /// Driver errors.
    ///
    /// # Safety
    /// Source and destination (device, host or array memory) must be valid for the
    /// copy at every launch of every executable graph made from this graph; host memory
    /// must be pinned or registered for the copy to be asynchronous.
    #[doc(alias = "cuGraphAddMemcpyNode")]
    pub unsafe fn add_memcpy_node(
        &self,
        deps: &[GraphNode<'_>],
        copy: &CUDA_MEMCPY3D,
    ) -> Result<GraphNode<'_>> {
        let cu = api()?;
        self.add_node(deps, "cuGraphAddMemcpyNode", |node, graph, d, n| {
            // SAFETY: live graph and context; valid pointers; the copy's memory is the
            // caller's promise.
            unsafe {
                drv!(
                    cu,
                    cuGraphAddMemcpyNode(node, graph, d, n, copy, self.context().as_raw())
                )
            }
        })
    }

    /// `cuGraphAddMemcpyNode` for `bytes` bytes from device address `src` to device
    /// address `dst`.
    ///
    /// # Errors
    /// Driver errors.
    ///
    /// # Safety
    /// As [`add_memcpy_node`](Self::add_memcpy_node).
    #[doc(alias = "cuGraphAddMemcpyNode")]
    pub unsafe fn add_memcpy_dtod_node(
        &self,
        deps: &[GraphNode<'_>],
        dst: CUdeviceptr,
        src: CUdeviceptr,
        bytes: usize,
    ) -> Result<GraphNode<'_>> {
        let copy = CUDA_MEMCPY3D {
            srcMemoryType: CUmemorytype::CU_MEMORYTYPE_DEVICE,
            srcDevice: src,
            dstMemoryType: CUmemorytype::CU_MEMORYTYPE_DEVICE,
            dstDevice: dst,
            WidthInBytes: bytes,
            Height: 1,
            Depth: 1,
            ..CUDA_MEMCPY3D::default()
        };
        // SAFETY: forwarded to the caller.
        unsafe { self.add_memcpy_node(deps, &copy) }
    }

    /// `cuGraphAddHostNode` with a C function and its argument (no allocation).
    ///
    /// # Errors
    /// Driver errors.
    ///
    /// # Safety
    /// `f(data)` must be sound to call on a driver thread at every launch of every
    /// executable graph made from this graph (possibly concurrently, if several are
    /// launched at once), with `data` valid for all of them; `f` must not call CUDA
    /// functions and must not unwind.
    #[doc(alias = "cuGraphAddHostNode")]
    pub unsafe fn add_host_node_raw(
        &self,
        deps: &[GraphNode<'_>],
        f: unsafe extern "C" fn(*mut c_void),
        data: *mut c_void,
    ) -> Result<GraphNode<'_>> {
        let cu = api()?;
        let params = CUDA_HOST_NODE_PARAMS {
            fn_: Some(f),
            userData: data,
        };
        self.add_node(deps, "cuGraphAddHostNode", |node, graph, d, n| {
            // SAFETY: live graph, valid pointers; `f`/`data` are the caller's promise.
            unsafe { drv!(cu, cuGraphAddHostNode(node, graph, d, n, &params)) }
        })
    }

    /// `cuGraphAddHostNode` running the closure `f` on a driver thread at each launch.
    ///
    /// The closure is boxed and owned by the graph through a CUDA user object
    /// (`cuUserObjectCreate` + `cuGraphRetainUserObject`): executable graphs made from
    /// the graph hold it too, and it is dropped (on a driver thread) once the graph and
    /// all of them are destroyed and their launches have finished. So `f` must be
    /// `Send + Sync + 'static`: it may run from several executable graphs at once.
    ///
    /// `f` must not call CUDA functions (a driver rule for host functions); a panic in
    /// `f` aborts the process.
    ///
    /// # Errors
    /// [`Error::ForeignNode`] for a dependency of another graph; driver errors. On
    /// error the closure (and what it captured) is dropped before this returns, and no
    /// node is left behind.
    #[cfg(feature = "alloc")]
    #[doc(alias = "cuGraphAddHostNode")]
    #[doc(alias = "cuUserObjectCreate")]
    pub fn add_host_node<F>(&self, deps: &[GraphNode<'_>], f: F) -> Result<GraphNode<'_>>
    where
        F: Fn() + Send + Sync + 'static,
    {
        self.with_nodes(deps, "cuGraphAddHostNode", |_, _| Ok(()))?;
        GraphClosure::new(self.as_raw(), f)?.attach(|c| {
            // SAFETY: the graph owns the closure for as long as any executable graph
            // can run it; `run` matches `data`'s type; `F: Send + Sync` so driver
            // threads may call it, concurrently too.
            unsafe { self.add_host_node_raw(deps, c.run, c.data) }
        })
    }

    /// `cuGraphAddEventRecordNode`: records `event` when the node runs.
    ///
    /// The graph borrows `event` for `'a`, so it outlives every launch of every
    /// executable graph made from this graph.
    #[doc(alias = "cuGraphAddEventRecordNode")]
    pub fn add_event_record_node(
        &self,
        deps: &[GraphNode<'_>],
        event: &'a Event,
    ) -> Result<GraphNode<'_>> {
        let event: CUevent = event.as_raw();
        let cu = api()?;
        self.add_node(deps, "cuGraphAddEventRecordNode", |node, graph, d, n| {
            // SAFETY: live graph; the event is borrowed for `'a`.
            unsafe { drv!(cu, cuGraphAddEventRecordNode(node, graph, d, n, event)) }
        })
    }

    /// `cuGraphAddEventWaitNode`: waits for `event` (its latest record) when the node
    /// runs.
    ///
    /// # Errors
    /// Driver errors.
    ///
    /// The graph borrows `event` for `'a`.
    #[doc(alias = "cuGraphAddEventWaitNode")]
    pub fn add_event_wait_node(
        &self,
        deps: &[GraphNode<'_>],
        event: &'a Event,
    ) -> Result<GraphNode<'_>> {
        let event: CUevent = event.as_raw();
        let cu = api()?;
        self.add_node(deps, "cuGraphAddEventWaitNode", |node, graph, d, n| {
            // SAFETY: live graph; the event is borrowed for `'a`.
            unsafe { drv!(cu, cuGraphAddEventWaitNode(node, graph, d, n, event)) }
        })
    }

    /// `cuGraphAddChildGraphNode`: a node running a copy of `child` (the driver clones
    /// it now; later changes to `child` do not reach the node).
    ///
    /// # Errors
    /// [`Error::ContextMismatch`] for a child graph of another context (its nodes name
    /// that context's memory); driver errors (child graphs may not contain alloc/free or
    /// conditional nodes on older drivers).
    #[doc(alias = "cuGraphAddChildGraphNode")]
    pub fn add_child_graph_node<'b: 'a>(
        &self,
        deps: &[GraphNode<'_>],
        child: &Graph<'b>,
    ) -> Result<GraphNode<'_>> {
        self.same_context(child.context(), "cuGraphAddChildGraphNode")?;
        let cu = api()?;
        self.add_node(deps, "cuGraphAddChildGraphNode", |node, graph, d, n| {
            // SAFETY: live graphs; the driver clones `child`.
            unsafe {
                drv!(
                    cu,
                    cuGraphAddChildGraphNode(node, graph, d, n, child.as_raw())
                )
            }
        })
    }

    /// `cuGraphChildGraphNodeGetGraph`: the graph inside a child graph node, owned by
    /// the node.
    ///
    /// # Errors
    /// [`Error::ForeignNode`] for a node of another graph (its body would borrow for
    /// this graph's `'a` what that graph's nodes name only for theirs) or the null node;
    /// driver errors (`CUDA_ERROR_INVALID_VALUE` for another node type).
    #[doc(alias = "cuGraphChildGraphNodeGetGraph")]
    pub fn child_graph<'g>(&'g self, node: GraphNode<'g>) -> Result<GraphRef<'g, 'a>> {
        let node = self.own(node, "cuGraphChildGraphNodeGetGraph")?;
        let cu = api()?;
        let mut raw = ptr::null_mut();
        // SAFETY: a live node of this graph, valid out-pointer.
        unsafe { drv!(cu, cuGraphChildGraphNodeGetGraph(node, &mut raw))? };
        // SAFETY: the child graph is owned by `node`, part of `self`.
        Ok(unsafe { GraphRef::new(raw, self) })
    }
}

/// A boxed closure held by a CUDA user object that a graph retains: the host-node
/// closures of [`Graph::add_host_node`] and [`Capturing::host_fn`](super::Capturing::host_fn).
///
/// [`new`](Self::new) boxes `f` into a user object (`cuUserObjectCreate`, one reference,
/// ours) and has `graph` retain it too (`cuGraphRetainUserObject`); executable graphs
/// made from the graph then hold it as well, and the box is dropped (on a driver thread)
/// once the graph and all of them are destroyed and their launches have finished. The
/// node that calls it is added next: [`keep`](Self::keep) then gives up our reference,
/// and [`abandon`](Self::abandon), for a refused node, releases the graph's reference
/// and ours, so the closure and what it captured are dropped at once, not when the
/// graph goes.
#[cfg(feature = "alloc")]
pub(crate) struct GraphClosure {
    /// The function to call the closure with (the host node's function).
    pub(crate) run: unsafe extern "C" fn(*mut c_void),
    /// The box, `run`'s argument.
    pub(crate) data: *mut c_void,
    object: cudadrv_sys::CUuserObject,
    graph: cudadrv_sys::CUgraph,
}

#[cfg(feature = "alloc")]
impl GraphClosure {
    pub(crate) fn new<F>(graph: cudadrv_sys::CUgraph, f: F) -> Result<Self>
    where
        F: Fn() + Send + Sync + 'static,
    {
        use alloc::boxed::Box;

        unsafe extern "C" fn run<F: Fn()>(data: *mut c_void) {
            // SAFETY: `data` is the `Box<F>` below, alive while any holder of the user
            // object (graph, executable graphs) lives; shared access only.
            let f = unsafe { &*data.cast_const().cast::<F>() };
            f();
        }
        unsafe extern "C" fn free<F>(data: *mut c_void) {
            // SAFETY: called once by the driver when the user object's last reference
            // goes; the box is reclaimed exactly once.
            drop(unsafe { Box::from_raw(data.cast::<F>()) });
        }

        let cu = api()?;
        let create = cu.cuUserObjectCreate()?;
        let data = Box::into_raw(Box::new(f)).cast::<c_void>();
        let mut object = ptr::null_mut();
        // SAFETY: `data` is a live box; `free::<F>` matches its type. With one initial
        // reference the object owns the box from here on.
        let rc = unsafe {
            create(
                &mut object,
                data,
                Some(free::<F>),
                1,
                cudadrv_sys::CUuserObject_flags::CU_USER_OBJECT_NO_DESTRUCTOR_SYNC.0,
            )
        };
        if !rc.is_success() {
            // SAFETY: the driver did not take `data`; reclaim and drop it.
            drop(unsafe { Box::from_raw(data.cast::<F>()) });
            return Err(Error::driver("cuUserObjectCreate", rc));
        }
        // SAFETY: live graph and object; the graph takes a reference of its own.
        let retained = unsafe { drv!(cu, cuGraphRetainUserObject(graph, object, 1, 0)) };
        if let Err(e) = retained {
            // SAFETY: our one reference; releasing it frees the box.
            unsafe { crate::driver::dropping!(cuUserObjectRelease(object, 1)) };
            return Err(e);
        }
        Ok(Self {
            run: run::<F>,
            data,
            object,
            graph,
        })
    }

    /// The node that calls the closure was added: the graph's reference is the only one.
    pub(crate) fn keep(self) {
        // SAFETY: our reference, released once; the graph still holds one.
        unsafe { crate::driver::dropping!(cuUserObjectRelease(self.object, 1)) };
    }

    /// The node was refused: drops the graph's reference and ours, which frees the
    /// closure (nothing can call it: no node names it).
    pub(crate) fn abandon(self) {
        // SAFETY: the graph's reference taken in `new`, and ours, each released once.
        unsafe {
            crate::driver::dropping!(cuGraphReleaseUserObject(self.graph, self.object, 1));
            crate::driver::dropping!(cuUserObjectRelease(self.object, 1));
        }
    }

    /// Adds the node with `add` and keeps the closure, or abandons it when `add` fails.
    pub(crate) fn attach<R>(self, add: impl FnOnce(&Self) -> Result<R>) -> Result<R> {
        match add(&self) {
            Ok(r) => {
                self.keep();
                Ok(r)
            }
            Err(e) => {
                self.abandon();
                Err(e)
            }
        }
    }
}
