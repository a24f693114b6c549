//! Batched copies (Programming Guide 3.1.5): [`CopyBatch`], many copies queued with one
//! `cuMemcpyBatchAsync` (CUDA 13.0 ABI), each with its attributes (source access order,
//! location hints, flags).
//!
//! The copies name device buffers, managed buffers and registered host ranges, all of
//! one context, the context of the stream the batch is queued on. The batch borrows
//! every source for `'a` and every destination exclusively for `'a`; once it is gone the
//! copies may still be pending, which is sound for the same reasons as the single
//! asynchronous copies: a device buffer's free waits for its own context's work, a
//! managed buffer's host view synchronizes its context first, and a registration's
//! scope ends with a synchronization too ([`HostRegistration::scope`]: a registration
//! cannot be leaked by safe code). The side types are sealed ([`BatchSide`]). Pinned buffers (`PinnedHostBuffer`), whose
//! contents Rust can reach at any time, go in through the `unsafe`
//! [`CopyBatch::copy_raw`], like their single asynchronous copies.
//!
//! Each copy is checked when it is added (equal lengths, one context, a writable
//! destination); the error says which copy ([`Error::BatchCopy`]). CUDA 13.0's
//! `cuMemcpyBatchAsync` no longer reports the index of a copy the driver refuses, so a
//! driver error names the call only.

use alloc::vec::Vec;
use core::marker::PhantomData;

use cudadrv_sys::{CUdeviceptr, CUmemLocation, CUmemcpyAttributes, CUmemcpySrcAccessOrder};

use super::managed::{Location, ManagedBuffer};
use super::registered::{HostRegisterFlags, HostRegistration, RegisteredPart};
use super::{DeviceBuffer, DeviceView, DeviceViewMut, Pod, Release};
use crate::driver::context::Context;
use crate::driver::stream::{Queued, Stream};
use crate::error::{Error, Result, drv};
#[cfg(feature = "graph")]
use crate::graph::Capturing;

/// When the source of a copy may be read (`CUmemcpySrcAccessOrder`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SrcAccessOrder {
    /// `CU_MEMCPY_SRC_ACCESS_ORDER_STREAM`: in stream order (the safe default).
    #[default]
    Stream,
    /// `CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL`: during the call (the source may be
    /// reused when it returns).
    DuringApiCall,
    /// `CU_MEMCPY_SRC_ACCESS_ORDER_ANY`: at any time, even before earlier work of the
    /// stream (only for sources nothing earlier writes).
    Any,
}

/// A copy's attributes (`CUmemcpyAttributes`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CopyAttributes {
    /// When the source may be read.
    pub src_access_order: SrcAccessOrder,
    /// Where the source is expected to be (a hint for managed memory).
    pub src_hint: Option<Location>,
    /// Where the destination is expected to be.
    pub dst_hint: Option<Location>,
    /// `CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE`: prefer a copy engine that overlaps
    /// with kernels.
    pub prefer_overlap_with_compute: bool,
}

impl CopyAttributes {
    fn as_raw(&self) -> CUmemcpyAttributes {
        let order = match self.src_access_order {
            SrcAccessOrder::Stream => CUmemcpySrcAccessOrder::CU_MEMCPY_SRC_ACCESS_ORDER_STREAM,
            SrcAccessOrder::DuringApiCall => {
                CUmemcpySrcAccessOrder::CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL
            }
            SrcAccessOrder::Any => CUmemcpySrcAccessOrder::CU_MEMCPY_SRC_ACCESS_ORDER_ANY,
        };
        let hint = |l: Option<Location>| l.unwrap_or(Location::Host).as_raw();
        CUmemcpyAttributes {
            srcAccessOrder: order,
            srcLocHint: hint(self.src_hint),
            dstLocHint: hint(self.dst_hint),
            flags: if self.prefer_overlap_with_compute {
                cudadrv_sys::CUmemcpyFlags::CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE.0
            } else {
                0
            },
        }
    }
}

mod sealed {
    /// Keeps [`BatchSide`](super::BatchSide) to this crate's memory types.
    pub trait Sealed {}
}

/// One side of a batched copy: memory whose device work this crate can order against
/// its host access and its free (see the [module docs](self)).
///
/// Sealed: the sides are this crate's memory types ([`DeviceBuffer`], [`ManagedBuffer`],
/// [`HostRegistration`], [`RegisteredPart`]), whose address, length and context come
/// from their owners. Memory of other kinds goes through the `unsafe`
/// [`CopyBatch::copy_raw`]. A user type cannot become a side:
///
/// ```compile_fail,E0277
/// use cudadrv::memory::batch::BatchSide;
/// struct Anywhere;
/// impl BatchSide<u8> for Anywhere {} // error: `Sealed` is not implemented
/// ```
pub trait BatchSide<T: Copy>: sealed::Sealed {
    /// The address, the length in values, the context, and whether the device may write
    /// it.
    #[doc(hidden)]
    fn side(&self) -> (CUdeviceptr, usize, &Context, bool);

    /// How the memory is released: which streams the batch may be submitted to.
    #[doc(hidden)]
    fn release(&self) -> Release {
        Release::Context
    }
}

impl<T: Copy> sealed::Sealed for DeviceView<'_, T> {}
impl<T: Copy> BatchSide<T> for DeviceView<'_, T> {
    fn side(&self) -> (CUdeviceptr, usize, &Context, bool) {
        (self.as_raw(), self.len(), self.context(), false)
    }
    fn release(&self) -> Release {
        DeviceView::release(self)
    }
}

impl<T: Copy> sealed::Sealed for DeviceViewMut<'_, T> {}
impl<T: Copy> BatchSide<T> for DeviceViewMut<'_, T> {
    fn side(&self) -> (CUdeviceptr, usize, &Context, bool) {
        (self.as_raw(), self.len(), self.context(), true)
    }
    fn release(&self) -> Release {
        DeviceViewMut::release(self)
    }
}

impl<T: Copy> sealed::Sealed for DeviceBuffer<T> {}
impl<T: Copy> BatchSide<T> for DeviceBuffer<T> {
    fn side(&self) -> (CUdeviceptr, usize, &Context, bool) {
        (self.as_raw(), self.len(), self.context(), true)
    }
}

impl<T: Copy> sealed::Sealed for ManagedBuffer<T> {}
impl<T: Copy> BatchSide<T> for ManagedBuffer<T> {
    fn side(&self) -> (CUdeviceptr, usize, &Context, bool) {
        (self.as_raw(), self.len(), self.context(), true)
    }
}

impl<T: Copy> sealed::Sealed for HostRegistration<'_, T> {}
impl<T: Copy> BatchSide<T> for HostRegistration<'_, T> {
    fn side(&self) -> (CUdeviceptr, usize, &Context, bool) {
        let (ptr, len) = self.device_side();
        let writable = !self.flags().contains(HostRegisterFlags::READ_ONLY);
        (ptr as usize as CUdeviceptr, len, self.context(), writable)
    }
}

impl<T: Copy> sealed::Sealed for RegisteredPart<'_, '_, T> {}
impl<T: Copy> BatchSide<T> for RegisteredPart<'_, '_, T> {
    fn side(&self) -> (CUdeviceptr, usize, &Context, bool) {
        let (ptr, len) = self.device_side();
        let reg = self.registration();
        let writable = !reg.flags().contains(HostRegisterFlags::READ_ONLY);
        (ptr as usize as CUdeviceptr, len, reg.context(), writable)
    }
}

/// Copies queued together with `cuMemcpyBatchAsync`. Borrows every side for `'a`.
///
/// ```no_run
/// # fn main() -> cudadrv::Result<()> {
/// use cudadrv::{Context, Device, DeviceBuffer, Stream};
/// use cudadrv::memory::batch::CopyBatch;
/// use cudadrv::memory::registered::{HostRegisterFlags, HostRegistration};
/// let ctx = Context::primary(Device::get(0)?)?;
/// let stream = Stream::non_blocking(&ctx)?;
/// let mut host = vec![1u32; 4096];
/// let mut parts: Vec<DeviceBuffer<u32>> =
///     (0..4).map(|_| DeviceBuffer::new(&ctx, 4096)).collect::<Result<_, _>>()?;
/// HostRegistration::scope(&ctx, &mut host, HostRegisterFlags::empty(), |reg| {
///     let mut batch = CopyBatch::new();
///     for part in &mut parts {
///         batch.copy(part, reg)?; // four host-to-device copies
///     }
///     batch.submit(&stream)
/// })?; // waits for the copies before unpinning
/// # Ok(()) }
/// ```
pub struct CopyBatch<'a> {
    dsts: Vec<CUdeviceptr>,
    srcs: Vec<CUdeviceptr>,
    sizes: Vec<usize>,
    attrs: Vec<CUmemcpyAttributes>,
    /// The first copy each entry of `attrs` applies to.
    attr_starts: Vec<usize>,
    pending: CopyAttributes,
    ctx: Option<Context>,
    /// How the sides' memory is released: which streams may take the batch.
    release: Release,
    _sides: PhantomData<&'a ()>,
}

impl Default for CopyBatch<'_> {
    fn default() -> Self {
        Self::new()
    }
}

impl<'a> CopyBatch<'a> {
    /// An empty batch; copies get [`CopyAttributes::default`] (stream order) until
    /// [`attributes`](Self::attributes) says otherwise.
    #[must_use]
    pub fn new() -> Self {
        Self {
            dsts: Vec::new(),
            srcs: Vec::new(),
            sizes: Vec::new(),
            attrs: Vec::new(),
            attr_starts: Vec::new(),
            pending: CopyAttributes::default(),
            ctx: None,
            release: Release::Context,
            _sides: PhantomData,
        }
    }

    /// The attributes of the copies added after this call.
    pub fn attributes(&mut self, attrs: CopyAttributes) -> &mut Self {
        self.pending = attrs;
        self
    }

    /// Adds a copy of `src` into `dst` (same length). Empty copies are left out. `T` is
    /// [`Pod`]: a destination the host can read afterwards (a registered range, a
    /// managed buffer) receives whatever bytes the source held.
    ///
    /// The destination is borrowed exclusively (`&mut`) for `'a`, as every write of this
    /// crate is: nothing else reads it (a host view, a kernel argument) while the batch
    /// may write it.
    ///
    /// ```compile_fail,E0502
    /// # fn f(ctx: &cudadrv::Context) -> cudadrv::Result<()> {
    /// use cudadrv::DeviceBuffer;
    /// use cudadrv::memory::batch::CopyBatch;
    /// let mut a = DeviceBuffer::<u32>::new(ctx, 64)?;
    /// let (b, mut c) = (DeviceBuffer::<u32>::new(ctx, 64)?, DeviceBuffer::<u32>::new(ctx, 64)?);
    /// let mut batch = CopyBatch::new();
    /// batch.copy(&mut a, &b)?;
    /// batch.copy(&mut c, &a)?; // error: the batch writes `a`
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::BatchCopy`] naming this copy's index when the lengths differ, a side
    /// belongs to another context than the batch's first copy, or `dst` is a read-only
    /// registration.
    pub fn copy<T: Pod>(
        &mut self,
        dst: &'a mut (impl BatchSide<T> + ?Sized),
        src: &'a (impl BatchSide<T> + ?Sized),
    ) -> Result<&mut Self> {
        let index = self.dsts.len();
        let (d, s, bytes, dctx) = check_pair(dst, src, self.ctx.as_ref())
            .map_err(|rule| Error::BatchCopy { index, rule })?;
        if bytes == 0 {
            return Ok(self);
        }
        if self.ctx.is_none() {
            self.ctx = Some(dctx.clone());
        }
        self.release = self.release.and(dst.release()).and(src.release());
        self.push(d, s, bytes);
        Ok(self)
    }

    /// Adds a copy of `bytes` bytes from `src` to `dst` by address: memory the batch
    /// cannot borrow safely, such as a [`PinnedHostBuffer`](super::PinnedHostBuffer)
    /// (whose contents Rust can reach at any time) or ordinary host memory.
    ///
    /// # Safety
    /// Both ranges must be valid for the copy (of `ctx`, or host memory) until it has
    /// run on the stream the batch is submitted to (and for every launch of every graph
    /// made from a capture that records the batch), no host code may read `dst` or write
    /// either range meanwhile, and any bytes must be valid for what `dst` holds.
    ///
    /// # Errors
    /// [`Error::BatchCopy`] when `ctx` is not the batch's context.
    pub unsafe fn copy_raw(
        &mut self,
        ctx: &Context,
        dst: CUdeviceptr,
        src: CUdeviceptr,
        bytes: usize,
    ) -> Result<&mut Self> {
        let index = self.dsts.len();
        if self.ctx.as_ref().is_some_and(|c| c != ctx) {
            return Err(Error::BatchCopy {
                index,
                rule: "a side belongs to another context than the batch",
            });
        }
        if bytes == 0 {
            return Ok(self);
        }
        if self.ctx.is_none() {
            self.ctx = Some(ctx.clone());
        }
        self.push(dst, src, bytes);
        Ok(self)
    }

    fn push(&mut self, dst: CUdeviceptr, src: CUdeviceptr, bytes: usize) {
        let index = self.dsts.len();
        let attrs = self.pending.as_raw();
        let same = self.attrs.last().is_some_and(|a| raw_eq(a, &attrs));
        if !same {
            self.attrs.push(attrs);
            self.attr_starts.push(index);
        }
        self.dsts.push(dst);
        self.srcs.push(src);
        self.sizes.push(bytes);
    }

    /// Number of copies.
    #[must_use]
    pub fn len(&self) -> usize {
        self.dsts.len()
    }

    /// Whether the batch holds no copy.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.dsts.is_empty()
    }

    /// `cuMemcpyBatchAsync`: queues every copy on `stream`, a stream of the copies'
    /// context. May be called again to queue the same copies again.
    ///
    /// # Errors
    /// [`Error::ContextMismatch`] for a stream of another context;
    /// [`Error::StreamCapturing`] while `stream` is being captured (record the batch
    /// with [`Capturing::copy_batch`], which ties the sides to the graph);
    /// [`Error::DriverTooOld`] before CUDA 13.0; driver errors naming
    /// `cuMemcpyBatchAsync`.
    #[doc(alias = "cuMemcpyBatchAsync")]
    #[doc(alias = "cudaMemcpyBatchAsync")]
    pub fn submit(&self, stream: &Stream) -> Result<()> {
        const CALL: &str = "cuMemcpyBatchAsync";
        let Some(ctx) = &self.ctx else {
            return Ok(());
        };
        self.release.allows(stream)?;
        let q = stream.queue(ctx, CALL)?;
        // SAFETY: not capturing: the copies run once, and every side belongs to the
        // stream's context and is released after the stream's work (see the module docs
        // for why pending copies are sound).
        unsafe { self.enqueue(&q) }
    }

    /// The driver call.
    ///
    /// # Safety
    /// `q` guards a stream of the copies' context; if it is capturing, every side
    /// outlives every graph made from the capture.
    unsafe fn enqueue(&self, q: &Queued<'_>) -> Result<()> {
        // SAFETY: `dsts`, `srcs` and `sizes` hold `len` entries, `attrs` and
        // `attr_starts` as many as each other (at least one, the first starting at copy
        // 0); the driver only reads them (the C signature's `*mut` notwithstanding). The
        // sides' lifetimes are the caller's promise; the context is current.
        unsafe {
            drv!(
                q.cu,
                cuMemcpyBatchAsync(
                    self.dsts.as_ptr().cast_mut(),
                    self.srcs.as_ptr().cast_mut(),
                    self.sizes.as_ptr().cast_mut(),
                    self.dsts.len(),
                    self.attrs.as_ptr().cast_mut(),
                    self.attr_starts.as_ptr().cast_mut(),
                    self.attrs.len(),
                    q.stream
                )
            )
        }
    }
}

#[cfg(feature = "graph")]
impl<'a> Capturing<'_, 'a> {
    /// `cuMemcpyBatchAsync`, captured: the batch's copies at every launch of the graph,
    /// which borrows every side for `'a` (the batch's lifetime is the graph's).
    ///
    /// The graph borrows the batch's sides for as long as it lives:
    ///
    /// ```compile_fail,E0505
    /// # fn f(ctx: &cudadrv::Context) -> cudadrv::Result<()> {
    /// use cudadrv::{DeviceBuffer, Stream, graph::CaptureMode, memory::batch::CopyBatch};
    /// let mut stream = Stream::non_blocking(ctx)?;
    /// let (mut a, b) = (DeviceBuffer::<u32>::new(ctx, 64)?, DeviceBuffer::<u32>::new(ctx, 64)?);
    /// let mut batch = CopyBatch::new();
    /// batch.copy(&mut a, &b)?;
    /// let cap = stream.begin_capture(CaptureMode::Global)?;
    /// cap.copy_batch(&batch)?;
    /// let graph = cap.end()?;
    /// drop(b); // error: the graph borrows the batch's source
    /// # drop(graph); Ok(()) }
    /// ```
    ///
    /// Driver 580 (CUDA 13.0) does not capture batches: it returns
    /// `CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED` (checked on the H100 by `hw_memory`); the
    /// call is here for drivers that do. Record the copies one by one
    /// ([`Capturing::copy`]) meanwhile.
    ///
    /// # Errors
    /// [`Error::ContextMismatch`] when the copies belong to another context than the
    /// capture's stream; driver errors (`CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED` where
    /// the driver cannot capture batches).
    #[doc(alias = "cuMemcpyBatchAsync")]
    pub fn copy_batch(&self, batch: &CopyBatch<'a>) -> Result<()> {
        let Some(ctx) = &batch.ctx else {
            return Ok(());
        };
        let q = self.stream().queue_capturable(ctx, "cuMemcpyBatchAsync")?;
        // SAFETY: the capture's stream, of the copies' context; every side is borrowed
        // for `'a`, as long as the graph and its executable graphs.
        unsafe { batch.enqueue(&q) }
    }
}

/// The rules every copy between two sides follows: equal lengths, a writable
/// destination, both sides (and the batch, if it has one yet) of one context. Gives the
/// addresses, the size in bytes and the context, or the rule broken.
fn check_pair<'s, T: Pod>(
    dst: &'s (impl BatchSide<T> + ?Sized),
    src: &'s (impl BatchSide<T> + ?Sized),
    batch: Option<&Context>,
) -> core::result::Result<(CUdeviceptr, CUdeviceptr, usize, &'s Context), &'static str> {
    let (d, dlen, dctx, writable) = dst.side();
    let (s, slen, sctx, _) = src.side();
    if dlen != slen {
        return Err("source and destination lengths differ");
    }
    if !writable {
        return Err("the destination is read-only (a read-only registration or a shared view)");
    }
    if dctx != sctx || batch.is_some_and(|c| c != dctx) {
        return Err("a side belongs to another context than the batch");
    }
    Ok((d, s, dlen * core::mem::size_of::<T>(), dctx))
}

/// `cuMemcpyWithAttributesAsync` (CUDA 13.2): one copy from `src` to `dst` with
/// `attrs`, queued on `stream` (a stream of the sides' context), under the same rules as
/// a [`CopyBatch`] copy. On a driver before 13.2 the same copy goes as a batch of one
/// (`cuMemcpyBatchAsync`, 13.0), which takes the same attributes.
///
/// ```no_run
/// # fn main() -> cudadrv::Result<()> {
/// use cudadrv::{Context, Device, DeviceBuffer, Stream};
/// use cudadrv::memory::batch::{CopyAttributes, copy_with_attributes};
/// let ctx = Context::primary(Device::get(0)?)?;
/// let stream = Stream::non_blocking(&ctx)?;
/// let (a, mut b) = (DeviceBuffer::<u32>::zeroed(&ctx, 1024)?, DeviceBuffer::<u32>::new(&ctx, 1024)?);
/// let attrs = CopyAttributes { prefer_overlap_with_compute: true, ..Default::default() };
/// copy_with_attributes(&stream, &mut b, &a, &attrs)?;
/// stream.synchronize()?;
/// # Ok(()) }
/// ```
///
/// # Errors
/// [`Error::BatchCopy`] (index 0) when the lengths differ, the sides belong to different
/// contexts or `dst` is a read-only registration; [`Error::ContextMismatch`] for a
/// stream of another context; [`Error::StreamCapturing`] while `stream` is being
/// captured; [`Error::DriverTooOld`] before CUDA 13.0; driver errors.
#[doc(alias = "cuMemcpyWithAttributesAsync")]
#[doc(alias = "cudaMemcpyWithAttributesAsync")]
pub fn copy_with_attributes<T: Pod>(
    stream: &Stream,
    dst: &mut (impl BatchSide<T> + ?Sized),
    src: &(impl BatchSide<T> + ?Sized),
    attrs: &CopyAttributes,
) -> Result<()> {
    const CALL: &str = "cuMemcpyWithAttributesAsync";
    let (d, s, bytes, ctx) =
        check_pair(dst, src, None).map_err(|rule| Error::BatchCopy { index: 0, rule })?;
    dst.release().and(src.release()).allows(stream)?;
    let q = stream.queue(ctx, CALL)?;
    if bytes == 0 {
        return Ok(());
    }
    let mut raw = attrs.as_raw();
    // SAFETY: not capturing, so the copy runs once; both sides belong to the stream's
    // context (checked above) and are alive for the call. Once they are gone the copy
    // may be pending, which is sound as for a batch (module docs): a device buffer's
    // free waits for its own context's work, which is the stream's context; a managed
    // host view and a registration's drop synchronize that context first. `raw` and the
    // one-entry arrays are read during the call only. The context is current.
    unsafe {
        if q.cu.cuMemcpyWithAttributesAsync().is_ok() {
            drv!(
                q.cu,
                cuMemcpyWithAttributesAsync(d, s, bytes, &mut raw, stream.as_raw())
            )
        } else {
            let (mut d, mut s, mut n, mut start) = (d, s, bytes, 0usize);
            drv!(
                q.cu,
                cuMemcpyBatchAsync(
                    &mut d,
                    &mut s,
                    &mut n,
                    1,
                    &mut raw,
                    &mut start,
                    1,
                    stream.as_raw()
                )
            )
        }
    }
}

fn raw_eq(a: &CUmemcpyAttributes, b: &CUmemcpyAttributes) -> bool {
    a.srcAccessOrder == b.srcAccessOrder
        && a.flags == b.flags
        && same_location(&a.srcLocHint, &b.srcLocHint)
        && same_location(&a.dstLocHint, &b.dstLocHint)
}

fn same_location(a: &CUmemLocation, b: &CUmemLocation) -> bool {
    (a.type_, super::location_id(a)) == (b.type_, super::location_id(b))
}
