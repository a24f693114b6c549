//! Views of device memory: [`DeviceView`] (shared, `Copy`) and [`DeviceViewMut`]
//! (exclusive) name a run of values inside memory someone else owns, for as long as
//! they borrow it. Every typed device memory kind hands them out (`view`, `view_mut`,
//! `slice`, `slice_mut`, `split_at_mut`), and views of memory this crate does not own
//! (a framework's tensor, an IPC mapping) are made from raw parts, `unsafe` to make and
//! safe to use.
//!
//! A view is usable wherever a buffer is: synchronous and asynchronous copies and
//! memsets (here, and `DeviceBuffer`'s own calls are these), batched copies
//! ([`CopyBatch::copy`](crate::memory::batch::CopyBatch::copy)), kernel arguments of a
//! safe launch ([`Lane::launch`](crate::kernel::Lane::launch), and
//! [`Lane::own`](crate::kernel::Lane::own) for a hand-over between lanes), and the
//! memory nodes of graphs and replay regions.
//!
//! # What a view carries
//! An address, a length, the owner's context and how the owner frees the memory. The
//! last decides which asynchronous work a safe call may queue through the view: memory
//! freed with `cuMemFree` (a [`DeviceBuffer`](crate::DeviceBuffer), a
//! [`ManagedBuffer`](crate::memory::ManagedBuffer), and raw parts whose maker promised as
//! much) may get work on any stream of its context, since that free waits for the
//! context's pending work; memory freed in stream order
//! ([`AsyncDeviceBuffer`](crate::memory::AsyncDeviceBuffer)) only on its own stream; memory
//! whose release does not wait ([`GrowableBuffer`](crate::memory::GrowableBuffer)'s unmap)
//! gets no asynchronous work from safe code outside a [`kernel::scope`](crate::kernel::scope),
//! which synchronizes before its borrows end.
//!
//! Two halves of a split are independent views: neither carries state the other
//! reads or writes (no shared event or stream record, the race of a split whose halves
//! share one), so handing them to different streams needs no ordering between them.

use core::ffi::c_void;
use core::marker::PhantomData;
use core::ops::{Bound, RangeBounds};

use cudadrv_sys::{CUdeviceptr, CUstream};

use super::device_memory::device_memory;
use super::{Pod, same_len};
use crate::driver::context::Context;
use crate::driver::stream::Stream;
use crate::error::{Error, Result, drv};

/// How the owner of viewed memory releases it: what asynchronous work a safe call may
/// queue through a view ([`DeviceView::release`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Release {
    /// `cuMemFree` (or the promise of a raw view's maker): the release waits for the
    /// pending work of the memory's context, so work on any stream of it is safe.
    Context,
    /// `cuMemFreeAsync` on this stream: only work on this stream is ordered before it.
    Stream(CUstream),
    /// A release that waits for nothing (an unmap): no asynchronous work from safe code.
    Unordered,
}

impl Release {
    /// The rule for work touching memory of both `self` and `other`.
    #[must_use]
    pub fn and(self, other: Self) -> Self {
        match (self, other) {
            (Self::Context, r) | (r, Self::Context) => r,
            (Self::Stream(a), Self::Stream(b)) if a == b => Self::Stream(a),
            _ => Self::Unordered,
        }
    }

    /// [`Error::InvalidArgument`] unless the memory may be named by a graph node (a
    /// capture, a replay region): its release waits for the context's work, since a
    /// forgotten executable graph may leave launches pending after its borrows end.
    #[cfg(feature = "graph")]
    pub(crate) fn for_graph(self) -> Result<()> {
        if self == Self::Context {
            Ok(())
        } else {
            Err(Error::InvalidArgument(
                "a graph node names only memory whose free waits for its context's work \
                 (DeviceBuffer, ManagedBuffer, raw parts), not stream-ordered or unmapped \
                 memory",
            ))
        }
    }

    /// [`Error::InvalidArgument`] unless asynchronous work on `stream` is ordered before
    /// the release.
    ///
    /// # Errors
    /// As said.
    pub fn allows(self, stream: &Stream) -> Result<()> {
        match self {
            Self::Context => Ok(()),
            Self::Stream(s) if s == stream.as_raw() => Ok(()),
            Self::Stream(_) => Err(Error::InvalidArgument(
                "a view of stream-ordered memory takes asynchronous work only on the stream \
                 that frees it (AsyncDeviceBuffer::stream)",
            )),
            Self::Unordered => Err(Error::InvalidArgument(
                "this memory is released without waiting for queued work: use it \
                 synchronously or in a kernel::scope",
            )),
        }
    }
}

/// A shared view of `len` values of type `T` in device memory, borrowed for `'a`.
///
/// `Copy`: any number of shared views of one run may exist, and no exclusive one while
/// they do.
pub struct DeviceView<'a, T> {
    ptr: CUdeviceptr,
    len: usize,
    ctx: &'a Context,
    release: Release,
    _t: PhantomData<&'a [T]>,
}

/// An exclusive view of `len` values of type `T` in device memory, borrowed for `'a`:
/// what writes through it (copies, memsets, a kernel's `DeviceSliceMut`) nothing else
/// reads or writes meanwhile.
pub struct DeviceViewMut<'a, T> {
    ptr: CUdeviceptr,
    len: usize,
    ctx: &'a Context,
    release: Release,
    _t: PhantomData<&'a mut [T]>,
}

// SAFETY: a view is an address, a length and a borrowed context; the driver calls it
// makes are thread-safe. `T: Sync` because the values are shared (as `&[T]` would be).
unsafe impl<T: Sync> Send for DeviceView<'_, T> {}
// SAFETY: as above.
unsafe impl<T: Sync> Sync for DeviceView<'_, T> {}
// SAFETY: an exclusive view moves its exclusive access along (as `&mut [T]` does).
unsafe impl<T: Send> Send for DeviceViewMut<'_, T> {}
// SAFETY: `&DeviceViewMut` only reads (as `&&mut [T]` does).
unsafe impl<T: Sync> Sync for DeviceViewMut<'_, T> {}

impl<T> Clone for DeviceView<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for DeviceView<'_, T> {}

impl<T> core::fmt::Debug for DeviceView<'_, T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("DeviceView")
            .field("ptr", &format_args!("{:#x}", self.ptr))
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

impl<T> core::fmt::Debug for DeviceViewMut<'_, T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("DeviceViewMut")
            .field("ptr", &format_args!("{:#x}", self.ptr))
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

device_memory!(
    impl['a, T: Copy] DeviceView<'a, T>,
    T, |v|
    ptr: v.ptr,
    len: v.len,
    context: v.ctx,
    release: v.release,
);
device_memory!(
    impl['a, T: Copy] DeviceViewMut<'a, T>,
    T, |v|
    ptr: v.ptr,
    len: v.len,
    context: v.ctx,
    release: v.release,
);

/// `range` of `0..len` as a start and an end, or the error naming it.
fn bounds(range: impl RangeBounds<usize>, len: usize) -> Result<(usize, usize)> {
    let start = match range.start_bound() {
        Bound::Included(&s) => s,
        Bound::Excluded(&s) => s.checked_add(1).ok_or(OUT_OF_RANGE)?,
        Bound::Unbounded => 0,
    };
    let end = match range.end_bound() {
        Bound::Included(&e) => e.checked_add(1).ok_or(OUT_OF_RANGE)?,
        Bound::Excluded(&e) => e,
        Bound::Unbounded => len,
    };
    if start <= end && end <= len {
        Ok((start, end))
    } else {
        Err(OUT_OF_RANGE)
    }
}

const OUT_OF_RANGE: Error = Error::InvalidArgument("view range out of bounds");

/// The address `index` values after `ptr` (in range: checked by the caller).
fn at<T>(ptr: CUdeviceptr, index: usize) -> CUdeviceptr {
    if index == 0 {
        ptr
    } else {
        ptr + (index * size_of::<T>()) as CUdeviceptr
    }
}

impl<'a, T: Copy> DeviceView<'a, T> {
    /// A view of memory the crate does not own: `len` values of `T` at `ptr`, in `ctx`
    /// (a framework's tensor, another library's allocation).
    ///
    /// # Safety
    /// For `'a` and, beyond it, until every piece of work queued through the view (or a
    /// copy of it) has completed: `ptr` is a device address of `ctx` with `len * size_of::<T>()`
    /// bytes behind it, allocated, and not written by anyone (the host, other
    /// streams, other libraries) while the view may read it. The memory must be
    /// released only in a way that waits for `ctx`'s pending work (`cuMemFree` does), or
    /// only after such work has completed (a framework that frees in the order of the
    /// stream this crate's work was queued on, after it). `len * size_of::<T>()` must
    /// not overflow.
    #[must_use]
    pub unsafe fn from_raw_parts(ptr: CUdeviceptr, len: usize, ctx: &'a Context) -> Self {
        // SAFETY: the caller's promise.
        unsafe { Self::new(ptr, len, ctx, Release::Context) }
    }

    /// A view of `len` values at `ptr`, released as `release` says.
    ///
    /// # Safety
    /// As [`from_raw_parts`](Self::from_raw_parts), with `release` telling how the memory
    /// is freed.
    pub(crate) unsafe fn new(
        ptr: CUdeviceptr,
        len: usize,
        ctx: &'a Context,
        release: Release,
    ) -> Self {
        Self {
            ptr,
            len,
            ctx,
            release,
            _t: PhantomData,
        }
    }

    /// How the memory is released (which streams may take asynchronous work on it).
    #[must_use]
    pub fn release(&self) -> Release {
        self.release
    }

    /// Values `range` of this view (indices in values).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the range is out of bounds or reversed.
    pub fn slice(self, range: impl RangeBounds<usize>) -> Result<Self> {
        let (start, end) = bounds(range, self.len)?;
        Ok(Self {
            ptr: at::<T>(self.ptr, start),
            len: end - start,
            ..self
        })
    }

    /// The first `mid` values and the rest.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `mid > len`.
    pub fn split_at(self, mid: usize) -> Result<(Self, Self)> {
        Ok((self.slice(..mid)?, self.slice(mid..)?))
    }

    /// `cuMemcpyDtoH`: copies the view into `dst` (of the same length), synchronously.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] when the lengths differ; driver errors.
    #[doc(alias = "cuMemcpyDtoH")]
    pub fn copy_to_host(&self, dst: &mut [T]) -> Result<()>
    where
        T: Pod,
    {
        same_len(self.len, dst.len())?;
        if self.size_bytes() == 0 {
            return Ok(());
        }
        let g = self.ctx.enter()?;
        // SAFETY: `dst` holds `size_bytes` writable bytes and any bytes are a valid `T`
        // (`Pod`); the view names as many in memory borrowed for `'a`; the context is
        // current.
        unsafe {
            drv!(
                g.cu,
                cuMemcpyDtoH(
                    dst.as_mut_ptr().cast::<c_void>(),
                    self.ptr,
                    self.size_bytes()
                )
            )
        }
    }

    /// `cuMemcpyDtoHAsync`: queues a copy of the view into `dst` on `stream`.
    ///
    /// # Safety
    /// `dst` must stay valid and untouched by the host until the stream has executed the
    /// copy; if `stream` is being captured, for every launch of every graph made from
    /// the capture (and the view's memory as long, too).
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] when the lengths differ; [`Error::ContextMismatch`]
    /// for a stream of another context; driver errors.
    #[doc(alias = "cuMemcpyDtoHAsync")]
    pub unsafe fn copy_to_host_async(&self, dst: &mut [T], stream: &Stream) -> Result<()>
    where
        T: Pod,
    {
        same_len(self.len, dst.len())?;
        let q = stream.queue_capturable(self.ctx, "cuMemcpyDtoHAsync")?;
        if self.size_bytes() == 0 {
            return Ok(());
        }
        // SAFETY: `dst` holds `size_bytes` writable bytes, any bytes are a valid `T`, and
        // (caller) it stays untouched until the copy runs; live stream of the view's
        // context, which is current.
        unsafe {
            drv!(
                q.cu,
                cuMemcpyDtoHAsync(
                    dst.as_mut_ptr().cast::<c_void>(),
                    self.ptr,
                    self.size_bytes(),
                    q.stream
                )
            )
        }
    }
}

impl<'a, T: Copy> DeviceViewMut<'a, T> {
    /// An exclusive view of memory the crate does not own: `len` values of `T` at `ptr`,
    /// in `ctx`.
    ///
    /// # Safety
    /// As [`DeviceView::from_raw_parts`], and nobody else reads or writes the memory
    /// while the view (or work queued through it) may write it.
    #[must_use]
    pub unsafe fn from_raw_parts(ptr: CUdeviceptr, len: usize, ctx: &'a Context) -> Self {
        // SAFETY: the caller's promise.
        unsafe { Self::new(ptr, len, ctx, Release::Context) }
    }

    /// An exclusive view of `len` values at `ptr`, released as `release` says.
    ///
    /// # Safety
    /// As [`from_raw_parts`](Self::from_raw_parts), with `release` telling how the memory
    /// is freed.
    pub(crate) unsafe fn new(
        ptr: CUdeviceptr,
        len: usize,
        ctx: &'a Context,
        release: Release,
    ) -> Self {
        Self {
            ptr,
            len,
            ctx,
            release,
            _t: PhantomData,
        }
    }

    /// How the memory is released (which streams may take asynchronous work on it).
    #[must_use]
    pub fn release(&self) -> Release {
        self.release
    }

    /// A shared view of the same values, for as long as this one is borrowed.
    #[must_use]
    pub fn as_view(&self) -> DeviceView<'_, T> {
        DeviceView {
            ptr: self.ptr,
            len: self.len,
            ctx: self.ctx,
            release: self.release,
            _t: PhantomData,
        }
    }

    /// This view again, for a shorter borrow (to pass it on and keep it).
    #[must_use]
    pub fn reborrow(&mut self) -> DeviceViewMut<'_, T> {
        DeviceViewMut {
            ptr: self.ptr,
            len: self.len,
            ctx: self.ctx,
            release: self.release,
            _t: PhantomData,
        }
    }

    /// Values `range` of this view, exclusively (consumes the view; `reborrow` first to
    /// keep it).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the range is out of bounds or reversed.
    pub fn into_slice(self, range: impl RangeBounds<usize>) -> Result<Self> {
        let (start, end) = bounds(range, self.len)?;
        Ok(Self {
            ptr: at::<T>(self.ptr, start),
            len: end - start,
            ..self
        })
    }

    /// The first `mid` values and the rest, two exclusive views that share nothing.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `mid > len`.
    pub fn split_at_mut(self, mid: usize) -> Result<(Self, Self)> {
        if mid > self.len {
            return Err(OUT_OF_RANGE);
        }
        let rest = Self {
            ptr: at::<T>(self.ptr, mid),
            len: self.len - mid,
            ctx: self.ctx,
            release: self.release,
            _t: PhantomData,
        };
        Ok((Self { len: mid, ..self }, rest))
    }

    /// `cuMemcpyHtoD`: copies `src` (of the same length) into the view; landed when this
    /// returns (it also waits for the legacy stream, where the driver may queue it).
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] when the lengths differ; driver errors.
    #[doc(alias = "cuMemcpyHtoD")]
    pub fn copy_from_host(&mut self, src: &[T]) -> Result<()> {
        same_len(self.len, src.len())?;
        if self.size_bytes() == 0 {
            return Ok(());
        }
        let g = self.ctx.enter()?;
        // SAFETY: `src` holds `size_bytes` readable bytes; the view names as many,
        // exclusively borrowed; the context is current.
        unsafe {
            drv!(
                g.cu,
                cuMemcpyHtoD(self.ptr, src.as_ptr().cast::<c_void>(), self.size_bytes())
            )?
        };
        legacy_stream_sync(g.cu)
    }

    /// `cuMemcpyDtoD`: copies `src` (of the same length) into the view; landed when this
    /// returns.
    ///
    /// `src` may be memory of another context of the process (unified addressing):
    /// the copy is synchronous, so no ordering between the contexts is needed.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] when the lengths differ; driver errors.
    #[doc(alias = "cuMemcpyDtoD")]
    pub fn copy_from(&mut self, src: DeviceView<'_, T>) -> Result<()> {
        same_len(self.len, src.len)?;
        if self.size_bytes() == 0 {
            return Ok(());
        }
        let g = self.ctx.enter()?;
        // SAFETY: both views name `size_bytes` bytes of borrowed device memory; the
        // context is current.
        unsafe { drv!(g.cu, cuMemcpyDtoD(self.ptr, src.ptr, self.size_bytes()))? };
        // Queued on the legacy stream: wait for it like the other synchronous calls.
        legacy_stream_sync(g.cu)
    }

    /// `cuMemcpyDtoDAsync`: queues a copy of `src` into the view on `stream`, a stream of
    /// both sides' context that may take work on both (see the [module docs](crate::memory::view)).
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] when the lengths differ; [`Error::ContextMismatch`]
    /// when `src` or `stream` belongs to another context; [`Error::StreamCapturing`]
    /// while `stream` is being captured; [`Error::InvalidArgument`] when a side's memory
    /// is not released in order with `stream`; driver errors.
    #[doc(alias = "cuMemcpyDtoDAsync")]
    pub fn copy_from_async(&mut self, src: DeviceView<'_, T>, stream: &Stream) -> Result<()> {
        const CALL: &str = "cuMemcpyDtoDAsync";
        same_len(self.len, src.len)?;
        self.ctx.ensure_same(src.ctx, CALL)?;
        self.release.allows(stream)?;
        src.release.allows(stream)?;
        let q = stream.queue(self.ctx, CALL)?;
        if self.size_bytes() == 0 {
            return Ok(());
        }
        // SAFETY: both sides name `size_bytes` bytes of this context's memory; the
        // stream is not capturing, so the copy runs once, and both sides' memory is
        // released only after the stream's work (checked above); the context is current.
        unsafe {
            drv!(
                q.cu,
                cuMemcpyDtoDAsync(self.ptr, src.ptr, self.size_bytes(), q.stream)
            )
        }
    }

    /// `cuMemcpyHtoDAsync`: queues a copy of `src` into the view on `stream`.
    ///
    /// # Safety
    /// `src` must stay valid and unwritten until the stream has executed the copy; if
    /// `stream` is being captured, for every launch of every graph made from the
    /// capture (and the view's memory as long, too).
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] when the lengths differ; [`Error::ContextMismatch`]
    /// for a stream of another context; driver errors.
    #[doc(alias = "cuMemcpyHtoDAsync")]
    pub unsafe fn copy_from_host_async(&mut self, src: &[T], stream: &Stream) -> Result<()> {
        same_len(self.len, src.len())?;
        let q = stream.queue_capturable(self.ctx, "cuMemcpyHtoDAsync")?;
        if self.size_bytes() == 0 {
            return Ok(());
        }
        // SAFETY: `src` holds `size_bytes` bytes and (caller) stays valid until the copy
        // runs; live stream of the view's context, which is current.
        unsafe {
            drv!(
                q.cu,
                cuMemcpyHtoDAsync(
                    self.ptr,
                    src.as_ptr().cast::<c_void>(),
                    self.size_bytes(),
                    q.stream
                )
            )
        }
    }

    /// `cuMemsetD8`: sets every byte to `value`; complete when this returns.
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuMemsetD8")]
    pub fn memset_d8(&mut self, value: u8) -> Result<()> {
        let g = self.ctx.enter()?;
        // SAFETY: the view names `size_bytes` bytes, exclusively borrowed; no stream.
        unsafe { memset_d8(g.cu, self.ptr, self.size_bytes(), value, None) }
    }

    /// `cuMemsetD32`: sets every 32-bit word to `value`; complete when this returns.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] unless the size is a multiple of 4 (and the address
    /// 4-byte aligned); driver errors.
    #[doc(alias = "cuMemsetD32")]
    pub fn memset_d32(&mut self, value: u32) -> Result<()> {
        let g = self.ctx.enter()?;
        // SAFETY: the view names `size_bytes` bytes, exclusively borrowed; no stream.
        unsafe { memset_d32(g.cu, self.ptr, self.size_bytes(), value, None) }
    }

    /// `cuMemsetD8Async`: queues setting every byte to `value` on `stream` (a stream of
    /// the view's context that may take work on it, see the [module docs](crate::memory::view)).
    ///
    /// # Errors
    /// [`Error::ContextMismatch`], [`Error::StreamCapturing`], [`Error::InvalidArgument`]
    /// as for [`copy_from_async`](Self::copy_from_async); driver errors.
    #[doc(alias = "cuMemsetD8Async")]
    pub fn memset_d8_async(&mut self, value: u8, stream: &Stream) -> Result<()> {
        self.release.allows(stream)?;
        let q = stream.queue(self.ctx, "cuMemsetD8Async")?;
        // SAFETY: the view names `size_bytes` bytes; the stream is of the memory's
        // context, not capturing, and ordered before the memory's release.
        unsafe { memset_d8(q.cu, self.ptr, self.size_bytes(), value, Some(stream)) }
    }

    /// `cuMemsetD32Async`: queues setting every 32-bit word to `value` on `stream`.
    ///
    /// # Errors
    /// As [`memset_d8_async`](Self::memset_d8_async), and [`Error::InvalidArgument`]
    /// unless the size is a multiple of 4.
    #[doc(alias = "cuMemsetD32Async")]
    pub fn memset_d32_async(&mut self, value: u32, stream: &Stream) -> Result<()> {
        self.release.allows(stream)?;
        let q = stream.queue(self.ctx, "cuMemsetD32Async")?;
        // SAFETY: as for `memset_d8_async`.
        unsafe { memset_d32(q.cu, self.ptr, self.size_bytes(), value, Some(stream)) }
    }
}

impl<'a, T: Copy> From<DeviceViewMut<'a, T>> for DeviceView<'a, T> {
    fn from(v: DeviceViewMut<'a, T>) -> Self {
        Self {
            ptr: v.ptr,
            len: v.len,
            ctx: v.ctx,
            release: v.release,
            _t: PhantomData,
        }
    }
}

/// `cuMemsetD8[Async]` of `bytes` bytes at `ptr`.
///
/// # Safety
/// The allocation holds `bytes` bytes, and its context is current; if `stream` is
/// capturing, the allocation outlives every graph made from the capture.
pub(crate) unsafe fn memset_d8(
    cu: &cudadrv_sys::DriverApi,
    ptr: CUdeviceptr,
    bytes: usize,
    value: u8,
    stream: Option<&Stream>,
) -> Result<()> {
    if bytes == 0 {
        return Ok(());
    }
    // SAFETY: the caller's allocation holds `bytes` bytes; live stream.
    unsafe {
        match stream {
            Some(s) => drv!(cu, cuMemsetD8Async(ptr, value, bytes, s.as_raw())),
            None => {
                drv!(cu, cuMemsetD8(ptr, value, bytes))?;
                legacy_stream_sync(cu)
            }
        }
    }
}

/// `cuMemsetD32[Async]` of `bytes` bytes (a multiple of 4) at `ptr`.
///
/// # Safety
/// As [`memset_d8`].
pub(crate) unsafe fn memset_d32(
    cu: &cudadrv_sys::DriverApi,
    ptr: CUdeviceptr,
    bytes: usize,
    value: u32,
    stream: Option<&Stream>,
) -> Result<()> {
    if bytes % 4 != 0 {
        return Err(Error::InvalidArgument(
            "memset_d32 needs a size that is a multiple of 4 bytes",
        ));
    }
    let words = bytes / 4;
    if words == 0 {
        return Ok(());
    }
    // SAFETY: the caller's allocation holds `words` 32-bit words; live stream.
    unsafe {
        match stream {
            Some(s) => drv!(cu, cuMemsetD32Async(ptr, value, words, s.as_raw())),
            None => {
                drv!(cu, cuMemsetD32(ptr, value, words))?;
                legacy_stream_sync(cu)
            }
        }
    }
}

/// `cuStreamSynchronize(CU_STREAM_LEGACY)`: waits for the "synchronous" memsets and
/// host-to-device copies, which the driver queues on the legacy default stream and may
/// still be running when they return. Without this, work on a non-blocking stream (which
/// does not wait for the legacy stream) could run before or under them.
pub(crate) fn legacy_stream_sync(cu: &cudadrv_sys::DriverApi) -> Result<()> {
    // SAFETY: the legacy stream handle is always valid in a context.
    unsafe { drv!(cu, cuStreamSynchronize(cudadrv_sys::CU_STREAM_LEGACY)) }
}

impl<T: crate::kernel::Element> DeviceView<'_, T> {
    /// The value of a kernel's [`DeviceSlice`](crate::kernel::DeviceSlice) parameter
    /// naming this memory, for the launches that are `unsafe` anyway (a typed launch, a
    /// capture's or a replay region's, a graph node) and whose caller promises the memory
    /// outlives the kernel's run. A safe launch takes the view itself, which it borrows.
    #[must_use]
    pub fn kernel_slice(&self) -> crate::kernel::DeviceSlice<T> {
        crate::kernel::DeviceSlice {
            ptr: self.as_raw() as *const T,
            len: self.len(),
        }
    }
}

impl<T: crate::kernel::Element> DeviceViewMut<'_, T> {
    /// The value of a kernel's [`DeviceSliceMut`](crate::kernel::DeviceSliceMut)
    /// parameter naming this memory, as [`DeviceView::kernel_slice`]: only an `unsafe`
    /// launch takes it, whose caller promises the memory outlives the kernel's run and
    /// that nothing else writes it meanwhile.
    #[must_use]
    pub fn kernel_slice_mut(&mut self) -> crate::kernel::DeviceSliceMut<T> {
        // SAFETY: a parameter value only: reaching the memory through it takes an
        // `unsafe` launch, whose caller vouches for the memory.
        unsafe {
            crate::kernel::DeviceSliceMut::from_raw_parts(self.as_raw() as *mut T, self.len())
        }
    }
}
