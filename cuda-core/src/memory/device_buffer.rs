//! [`DeviceBuffer`] (`cuMemAlloc`), device memory this crate allocates and frees.

use super::device_memory::device_memory;
use core::marker::PhantomData;

use cudadrv_sys::CUdeviceptr;

use super::{PinnedHostBuffer, Pod, byte_len};
use crate::driver::context::Context;
use crate::driver::dropping;
use crate::driver::stream::Stream;
#[cfg(doc)]
use crate::error::Error;
use crate::error::{Result, drv};

/// `len` values of `T` in device memory of a context (`cuMemAlloc`), freed on drop
/// (`cuMemFree`). It keeps its [`Context`] alive and current where a call needs it, so it
/// can be stored anywhere and used from any thread.
///
/// Device memory is not Rust memory: kernels and graph nodes write it through shared
/// borrows ([`as_arg`](Self::as_arg)), and the host only ever copies it out.
///
/// ```no_run
/// # fn main() -> cudadrv::Result<()> {
/// use cudadrv::{Context, Device, DeviceBuffer};
/// let ctx = Context::primary(Device::get(0)?)?;
/// let buf = DeviceBuffer::from_slice(&ctx, &[1.0f32, 2.0, 3.0])?;
/// let mut back = [0.0f32; 3];
/// buf.copy_to_host(&mut back)?;
/// # Ok(()) }
/// ```
pub struct DeviceBuffer<T: Copy> {
    ptr: CUdeviceptr,
    len: usize,
    ctx: Context,
    _t: PhantomData<T>,
}

// SAFETY: device memory is reachable from any thread; `T: Send` values move with it.
unsafe impl<T: Copy + Send> Send for DeviceBuffer<T> {}
// SAFETY: `&DeviceBuffer` only reads through driver calls.
unsafe impl<T: Copy + Sync> Sync for DeviceBuffer<T> {}

device_memory!(owner impl[T: Copy] DeviceBuffer<T>, T, |b| ptr: b.ptr, len: b.len, context: &b.ctx,
    release: crate::memory::view::Release::Context,
);

impl<T: Copy> core::fmt::Debug for DeviceBuffer<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("DeviceBuffer")
            .field("ptr", &format_args!("{:#x}", self.ptr))
            .field("len", &self.len)
            .finish()
    }
}

impl<T: Copy> DeviceBuffer<T> {
    /// `cuMemAlloc`: room for `len` values, contents unspecified. `len == 0` allocates
    /// nothing (the pointer is 0).
    ///
    /// # Errors
    /// `CUDA_ERROR_OUT_OF_MEMORY` when the device has not enough memory;
    /// [`Error::InvalidArgument`] when the size in bytes overflows.
    #[doc(alias = "cuMemAlloc")]
    pub fn new(ctx: &Context, len: usize) -> Result<Self> {
        let bytes = byte_len::<T>(len)?;
        let mut ptr = 0;
        if bytes != 0 {
            let g = ctx.enter()?;
            // SAFETY: valid out-pointer; the context is current.
            unsafe { drv!(g.cu, cuMemAlloc(&mut ptr, bytes))? };
        }
        Ok(Self {
            ptr,
            len,
            ctx: ctx.clone(),
            _t: PhantomData,
        })
    }

    /// `cuMemAlloc` + `cuMemsetD8`: `len` zero bytes' worth of `T`.
    ///
    /// # Errors
    /// As [`DeviceBuffer::new`].
    pub fn zeroed(ctx: &Context, len: usize) -> Result<Self>
    where
        T: Pod,
    {
        let mut buf = Self::new(ctx, len)?;
        buf.memset_d8(0)?;
        Ok(buf)
    }

    /// `cuMemAlloc` + `cuMemcpyHtoD`: a copy of `src`.
    ///
    /// # Errors
    /// As [`DeviceBuffer::new`] and [`DeviceBuffer::copy_from_host`].
    pub fn from_slice(ctx: &Context, src: &[T]) -> Result<Self> {
        let mut buf = Self::new(ctx, src.len())?;
        buf.copy_from_host(src)?;
        Ok(buf)
    }

    /// Takes ownership of `len` values at `ptr`, allocated with `cuMemAlloc` in `ctx`;
    /// dropping the result frees them.
    ///
    /// # Safety
    /// `ptr` must come from `cuMemAlloc` (or be 0 with `len * size_of::<T>() == 0`), hold
    /// at least `len` values, and be freed by nothing else.
    pub unsafe fn from_raw(ptr: CUdeviceptr, len: usize, ctx: &Context) -> Self {
        Self {
            ptr,
            len,
            ctx: ctx.clone(),
            _t: PhantomData,
        }
    }

    /// Gives up ownership: returns the address and length; the caller must free it.
    pub fn into_raw(self) -> (CUdeviceptr, usize) {
        let parts = (self.ptr, self.len);
        let this = core::mem::ManuallyDrop::new(self);
        // SAFETY: `this` is never used or dropped again; its context clone is dropped
        // here exactly once.
        drop(unsafe { core::ptr::read(&this.ctx) });
        parts
    }

    /// `cuMemcpyHtoD`: copies `src` (of the same length) into the buffer; the copy has
    /// landed when this returns (for pageable memory the driver may return once `src` is
    /// staged, so this also waits for the legacy stream).
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] when the lengths differ; driver errors.
    #[doc(alias = "cuMemcpyHtoD")]
    pub fn copy_from_host(&mut self, src: &[T]) -> Result<()> {
        self.view_mut().copy_from_host(src)
    }

    /// `cuMemcpyDtoH`: copies the buffer into `dst` (of the same length), synchronously.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] when the lengths differ; driver errors.
    #[doc(alias = "cuMemcpyDtoH")]
    pub fn copy_to_host(&self, dst: &mut [T]) -> Result<()>
    where
        T: Pod,
    {
        self.view().copy_to_host(dst)
    }

    /// `cuMemcpyDtoD`: copies `src` (of the same length) into this buffer.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] when the lengths differ; driver errors.
    #[doc(alias = "cuMemcpyDtoD")]
    pub fn copy_from_device(&mut self, src: &DeviceBuffer<T>) -> Result<()> {
        self.view_mut().copy_from(src.view())
    }

    /// `cuMemcpyDtoDAsync`: queues a copy of `src` into this buffer on `stream`.
    ///
    /// Both buffers and the stream must belong to one context: freeing device memory
    /// (`cuMemFree`, on drop) waits for the pending work of its own context only, so
    /// the borrows need not outlive a copy queued there, but a copy queued on another
    /// context's stream could still write after the free (checked on the H100 by
    /// `hw_soundness`). To copy between contexts, order a stream of the destination's
    /// context after the other context's work ([`Stream::wait_event`]) and copy there.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] when the lengths differ; [`Error::ContextMismatch`]
    /// when `src` or `stream` belongs to another context than this buffer;
    /// [`Error::StreamCapturing`] while `stream` is being captured (record the copy with
    /// [`Capturing::copy`](crate::graph::Capturing::copy), which keeps both buffers
    /// borrowed by the graph); driver errors.
    #[doc(alias = "cuMemcpyDtoDAsync")]
    pub fn copy_from_device_async(&mut self, src: &DeviceBuffer<T>, stream: &Stream) -> Result<()> {
        self.view_mut().copy_from_async(src.view(), stream)
    }

    /// `cuMemcpyHtoDAsync`: queues a copy of pinned `src` into the buffer on `stream`.
    ///
    /// # Safety
    /// `src` must not be dropped or written until the stream has executed the copy
    /// (synchronize the stream or an event recorded after it). If `stream` is being
    /// captured, the copy runs at every launch of every graph made from the capture, and
    /// `src` must stay valid and unwritten for all of them.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] when the lengths differ; driver errors.
    #[doc(alias = "cuMemcpyHtoDAsync")]
    pub unsafe fn copy_from_host_async(
        &mut self,
        src: &PinnedHostBuffer<T>,
        stream: &Stream,
    ) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe { self.copy_from_host_slice_async(src, stream) }
    }

    /// `cuMemcpyHtoDAsync` from any host slice (pageable memory makes the copy
    /// synchronous with respect to the host).
    ///
    /// # Safety
    /// As [`DeviceBuffer::copy_from_host_async`].
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] when the lengths differ; [`Error::ContextMismatch`]
    /// when `stream` belongs to another context than the buffer; driver errors.
    #[doc(alias = "cuMemcpyHtoDAsync")]
    pub unsafe fn copy_from_host_slice_async(&mut self, src: &[T], stream: &Stream) -> Result<()> {
        // SAFETY: forwarded to the caller.
        unsafe { self.view_mut().copy_from_host_async(src, stream) }
    }

    /// `cuMemcpyDtoHAsync`: queues a copy of the buffer into pinned `dst` on `stream`.
    ///
    /// # Safety
    /// `dst` must not be read, written or dropped until the stream has executed the copy.
    /// If `stream` is being captured, the copy runs at every launch of every graph made
    /// from the capture, and this holds for all of them.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] when the lengths differ; driver errors.
    #[doc(alias = "cuMemcpyDtoHAsync")]
    pub unsafe fn copy_to_host_async(
        &self,
        dst: &mut PinnedHostBuffer<T>,
        stream: &Stream,
    ) -> Result<()>
    where
        T: Pod,
    {
        // SAFETY: forwarded contract.
        unsafe { self.copy_to_host_slice_async(dst, stream) }
    }

    /// `cuMemcpyDtoHAsync` into any host slice.
    ///
    /// # Safety
    /// As [`DeviceBuffer::copy_to_host_async`].
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] when the lengths differ; [`Error::ContextMismatch`]
    /// when `stream` belongs to another context than the buffer; driver errors.
    #[doc(alias = "cuMemcpyDtoHAsync")]
    pub unsafe fn copy_to_host_slice_async(&self, dst: &mut [T], stream: &Stream) -> Result<()>
    where
        T: Pod,
    {
        // SAFETY: forwarded to the caller.
        unsafe { self.view().copy_to_host_async(dst, stream) }
    }

    /// `cuMemsetD8`: sets every byte to `value`; complete when this returns (it waits for
    /// the legacy stream, where the driver queues it).
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuMemsetD8")]
    pub fn memset_d8(&mut self, value: u8) -> Result<()> {
        self.view_mut().memset_d8(value)
    }

    /// `cuMemsetD8Async`: queues setting every byte to `value` on `stream`, a stream of
    /// the buffer's context (see [`copy_from_device_async`](Self::copy_from_device_async)
    /// for why).
    ///
    /// # Errors
    /// [`Error::ContextMismatch`] when `stream` belongs to another context;
    /// [`Error::StreamCapturing`] while `stream` is being captured (use
    /// [`Capturing::memset_d8`](crate::graph::Capturing::memset_d8)); driver errors.
    #[doc(alias = "cuMemsetD8Async")]
    pub fn memset_d8_async(&mut self, value: u8, stream: &Stream) -> Result<()> {
        self.view_mut().memset_d8_async(value, stream)
    }

    /// `cuMemsetD32`: sets every 32-bit word to `value`; complete when this returns (it
    /// waits for the legacy stream, where the driver queues it).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] unless the size is a multiple of 4; driver errors.
    #[doc(alias = "cuMemsetD32")]
    pub fn memset_d32(&mut self, value: u32) -> Result<()> {
        self.view_mut().memset_d32(value)
    }

    /// `cuMemsetD32Async`: queues setting every 32-bit word to `value` on `stream`, a
    /// stream of the buffer's context.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] unless the size is a multiple of 4;
    /// [`Error::ContextMismatch`] when `stream` belongs to another context;
    /// [`Error::StreamCapturing`] while `stream` is being captured (use
    /// [`Capturing::memset_d32`](crate::graph::Capturing::memset_d32)); driver errors.
    #[doc(alias = "cuMemsetD32Async")]
    pub fn memset_d32_async(&mut self, value: u32, stream: &Stream) -> Result<()> {
        self.view_mut().memset_d32_async(value, stream)
    }
}

impl<T: Copy> Drop for DeviceBuffer<T> {
    /// `cuMemFree` (nothing for an empty buffer); a failure goes to the drop-error sink.
    fn drop(&mut self) {
        if self.ptr == 0 {
            return;
        }
        let _g = crate::error::enter_for_drop!(self.ctx);
        // SAFETY: the allocation is ours and nothing borrows it any more (graphs whose
        // nodes name it borrow it, and executable graphs wait for their launches when
        // dropped); safe calls queue work on it only on streams of its own context, and
        // `cuMemFree` waits for the pending work of its own context (not for other
        // contexts' work); the context is current.
        unsafe { dropping!(cuMemFree(self.ptr)) };
    }
}
