//! [`DeviceBuffer`] (`cuMemAlloc`) and [`DevicePtr`], its form as a kernel argument.

use core::ffi::c_void;
use core::marker::PhantomData;

use cuda_sys::CUdeviceptr;

use super::{PinnedHostBuffer, Pod, byte_len, same_len};
use crate::args::DeviceRepr;
use crate::context::{Context, CtxMarker};
use crate::driver::api;
use crate::error::{Error, Result, drv};
use crate::stream::Stream;

/// A typed device pointer as a kernel argument: 8 bytes, 8-aligned, the `T*` of the
/// kernel's signature. Made by [`DeviceBuffer::as_arg`] and friends.
#[repr(transparent)]
pub struct DevicePtr<T> {
    raw: CUdeviceptr,
    _t: PhantomData<*mut T>,
}

impl<T> DevicePtr<T> {
    /// Wraps a raw device address.
    pub const fn from_raw(raw: CUdeviceptr) -> Self {
        Self {
            raw,
            _t: PhantomData,
        }
    }

    /// The raw device address.
    pub const fn as_raw(self) -> CUdeviceptr {
        self.raw
    }

    /// The address `count` elements further on (wrapping like a C pointer would not:
    /// `None` on overflow).
    pub fn offset(self, count: usize) -> Option<Self> {
        let bytes = count.checked_mul(core::mem::size_of::<T>())?;
        let raw = self.raw.checked_add(u64::try_from(bytes).ok()?)?;
        Some(Self::from_raw(raw))
    }
}

impl<T> Clone for DevicePtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for DevicePtr<T> {}

impl<T> core::fmt::Debug for DevicePtr<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "DevicePtr({:#x})", self.raw)
    }
}

impl<T> PartialEq for DevicePtr<T> {
    fn eq(&self, other: &Self) -> bool {
        self.raw == other.raw
    }
}
impl<T> Eq for DevicePtr<T> {}

// SAFETY: a device pointer is a 64-bit address: 8 bytes, 8-aligned, no padding, the
// same bytes on host and device (`repr(transparent)` over `u64`).
unsafe impl<T> DeviceRepr for DevicePtr<T> {
    const DEVICE_SIZE: usize = 8;
    const DEVICE_ALIGN: usize = 8;
}
static_assertions::assert_eq_size!(DevicePtr<u8>, u64);

// SAFETY: an address; dereferencing it is the device's business.
unsafe impl<T> Send for DevicePtr<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for DevicePtr<T> {}

/// `len` values of `T` in device memory of a context (`cuMemAlloc`), freed on drop
/// (`cuMemFree`).
///
/// ```no_run
/// # fn main() -> cuda_core::Result<()> {
/// use cuda_core::{Context, Device, DeviceBuffer};
/// let ctx = Context::primary(Device::get(0)?)?;
/// let buf = DeviceBuffer::from_slice(&ctx, &[1.0f32, 2.0, 3.0])?;
/// let mut back = [0.0f32; 3];
/// buf.copy_to_host(&mut back)?;
/// # Ok(()) }
/// ```
pub struct DeviceBuffer<'ctx, T: Copy> {
    ptr: CUdeviceptr,
    len: usize,
    _ctx: CtxMarker<'ctx>,
    _t: PhantomData<T>,
}

// SAFETY: device memory is reachable from any thread; `T: Send` values move with it.
unsafe impl<T: Copy + Send> Send for DeviceBuffer<'_, T> {}
// SAFETY: `&DeviceBuffer` only reads through driver calls.
unsafe impl<T: Copy + Sync> Sync for DeviceBuffer<'_, T> {}

impl<T: Copy> core::fmt::Debug for DeviceBuffer<'_, T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("DeviceBuffer")
            .field("ptr", &format_args!("{:#x}", self.ptr))
            .field("len", &self.len)
            .finish()
    }
}

impl<'ctx, T: Copy> DeviceBuffer<'ctx, T> {
    /// `cuMemAlloc`: room for `len` values, contents unspecified. `len == 0` allocates
    /// nothing (the pointer is 0).
    ///
    /// # Errors
    /// `CUDA_ERROR_OUT_OF_MEMORY` when the device has not enough memory;
    /// [`Error::InvalidArgument`] when the size in bytes overflows.
    #[doc(alias = "cuMemAlloc")]
    pub fn new(ctx: &'ctx Context, len: usize) -> Result<Self> {
        let bytes = byte_len::<T>(len)?;
        if bytes == 0 {
            return Ok(Self {
                ptr: 0,
                len,
                _ctx: CtxMarker::default(),
                _t: PhantomData,
            });
        }
        let g = ctx.enter()?;
        let mut ptr = 0;
        // SAFETY: valid out-pointer; the context is current.
        unsafe { drv!(g.cu, cuMemAlloc(&mut ptr, bytes))? };
        Ok(Self {
            ptr,
            len,
            _ctx: CtxMarker::default(),
            _t: PhantomData,
        })
    }

    /// `cuMemAlloc` + `cuMemsetD8`: `len` zero bytes' worth of `T`.
    ///
    /// # Errors
    /// As [`DeviceBuffer::new`].
    pub fn zeroed(ctx: &'ctx Context, len: usize) -> Result<Self>
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
    pub fn from_slice(ctx: &'ctx Context, src: &[T]) -> Result<Self> {
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
    pub unsafe fn from_raw(ptr: CUdeviceptr, len: usize, _ctx: &'ctx Context) -> Self {
        Self {
            ptr,
            len,
            _ctx: CtxMarker::default(),
            _t: PhantomData,
        }
    }

    /// Gives up ownership: returns the address and length; the caller must free it.
    pub fn into_raw(self) -> (CUdeviceptr, usize) {
        let parts = (self.ptr, self.len);
        core::mem::forget(self);
        parts
    }

    /// The device address (`CUdeviceptr`; 0 for an empty buffer).
    pub fn as_raw(&self) -> CUdeviceptr {
        self.ptr
    }

    /// The buffer as a kernel argument (`T*` on the device).
    pub fn as_arg(&self) -> DevicePtr<T> {
        DevicePtr::from_raw(self.ptr)
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer holds no values.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Size in bytes.
    pub fn size_bytes(&self) -> usize {
        // Cannot overflow: checked when the buffer was made.
        self.len.saturating_mul(core::mem::size_of::<T>())
    }

    /// `cuMemcpyHtoD`: copies `src` (of the same length) into the buffer; the copy has
    /// landed when this returns (for pageable memory the driver may return once `src` is
    /// staged, so this also waits for the legacy stream).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the lengths differ; driver errors.
    #[doc(alias = "cuMemcpyHtoD")]
    pub fn copy_from_host(&mut self, src: &[T]) -> Result<()> {
        same_len(self.len, src.len())?;
        if self.size_bytes() == 0 {
            return Ok(());
        }
        let cu = api()?;
        // SAFETY: `src` holds `size_bytes` readable bytes; the buffer holds as many.
        unsafe {
            drv!(
                cu,
                cuMemcpyHtoD(self.ptr, src.as_ptr().cast::<c_void>(), self.size_bytes())
            )?
        };
        legacy_stream_sync(cu)
    }

    /// `cuMemcpyDtoH`: copies the buffer into `dst` (of the same length), synchronously.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the lengths differ; driver errors.
    #[doc(alias = "cuMemcpyDtoH")]
    pub fn copy_to_host(&self, dst: &mut [T]) -> Result<()>
    where
        T: Pod,
    {
        same_len(self.len, dst.len())?;
        if self.size_bytes() == 0 {
            return Ok(());
        }
        let cu = api()?;
        // SAFETY: `dst` holds `size_bytes` writable bytes and any bytes are a valid `T`
        // (`Pod`); the buffer holds as many.
        unsafe {
            drv!(
                cu,
                cuMemcpyDtoH(
                    dst.as_mut_ptr().cast::<c_void>(),
                    self.ptr,
                    self.size_bytes()
                )
            )
        }
    }

    /// `cuMemcpyDtoD`: copies `src` (of the same length) into this buffer.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the lengths differ; driver errors.
    #[doc(alias = "cuMemcpyDtoD")]
    pub fn copy_from_device(&mut self, src: &DeviceBuffer<'_, T>) -> Result<()> {
        same_len(self.len, src.len)?;
        if self.size_bytes() == 0 {
            return Ok(());
        }
        let cu = api()?;
        // SAFETY: both buffers hold `size_bytes` bytes.
        unsafe { drv!(cu, cuMemcpyDtoD(self.ptr, src.ptr, self.size_bytes())) }
    }

    /// `cuMemcpyDtoDAsync`: queues a copy of `src` into this buffer on `stream`.
    ///
    /// Freeing device memory (`cuMemFree`, on drop) waits for work using it, so the
    /// borrows need not outlive the copy.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the lengths differ; driver errors.
    #[doc(alias = "cuMemcpyDtoDAsync")]
    pub fn copy_from_device_async(
        &mut self,
        src: &DeviceBuffer<'_, T>,
        stream: &Stream<'_>,
    ) -> Result<()> {
        same_len(self.len, src.len)?;
        if self.size_bytes() == 0 {
            return Ok(());
        }
        let cu = api()?;
        // SAFETY: both buffers hold `size_bytes` bytes; live stream.
        unsafe {
            drv!(
                cu,
                cuMemcpyDtoDAsync(self.ptr, src.ptr, self.size_bytes(), stream.as_raw())
            )
        }
    }

    /// `cuMemcpyHtoDAsync`: queues a copy of pinned `src` into the buffer on `stream`.
    ///
    /// # Safety
    /// `src` must not be dropped or written until the stream has executed the copy
    /// (synchronize the stream or an event recorded after it).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the lengths differ; driver errors.
    #[doc(alias = "cuMemcpyHtoDAsync")]
    pub unsafe fn copy_from_host_async(
        &mut self,
        src: &PinnedHostBuffer<'_, T>,
        stream: &Stream<'_>,
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
    /// [`Error::InvalidArgument`] when the lengths differ; driver errors.
    #[doc(alias = "cuMemcpyHtoDAsync")]
    pub unsafe fn copy_from_host_slice_async(
        &mut self,
        src: &[T],
        stream: &Stream<'_>,
    ) -> Result<()> {
        same_len(self.len, src.len())?;
        if self.size_bytes() == 0 {
            return Ok(());
        }
        let cu = api()?;
        // SAFETY: `src` holds `size_bytes` bytes and (caller) stays valid until the copy
        // runs; live stream.
        unsafe {
            drv!(
                cu,
                cuMemcpyHtoDAsync(
                    self.ptr,
                    src.as_ptr().cast::<c_void>(),
                    self.size_bytes(),
                    stream.as_raw()
                )
            )
        }
    }

    /// `cuMemcpyDtoHAsync`: queues a copy of the buffer into pinned `dst` on `stream`.
    ///
    /// # Safety
    /// `dst` must not be read, written or dropped until the stream has executed the copy.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the lengths differ; driver errors.
    #[doc(alias = "cuMemcpyDtoHAsync")]
    pub unsafe fn copy_to_host_async(
        &self,
        dst: &mut PinnedHostBuffer<'_, T>,
        stream: &Stream<'_>,
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
    /// [`Error::InvalidArgument`] when the lengths differ; driver errors.
    #[doc(alias = "cuMemcpyDtoHAsync")]
    pub unsafe fn copy_to_host_slice_async(&self, dst: &mut [T], stream: &Stream<'_>) -> Result<()>
    where
        T: Pod,
    {
        same_len(self.len, dst.len())?;
        if self.size_bytes() == 0 {
            return Ok(());
        }
        let cu = api()?;
        // SAFETY: `dst` holds `size_bytes` writable bytes, any bytes are a valid `T`, and
        // (caller) it stays untouched until the copy runs; live stream.
        unsafe {
            drv!(
                cu,
                cuMemcpyDtoHAsync(
                    dst.as_mut_ptr().cast::<c_void>(),
                    self.ptr,
                    self.size_bytes(),
                    stream.as_raw()
                )
            )
        }
    }

    /// `cuMemsetD8`: sets every byte to `value`; complete when this returns (it waits for
    /// the legacy stream, where the driver queues it).
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuMemsetD8")]
    pub fn memset_d8(&mut self, value: u8) -> Result<()> {
        memset_d8(self.ptr, self.size_bytes(), value, None)
    }

    /// `cuMemsetD8Async`: queues setting every byte to `value` on `stream`.
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuMemsetD8Async")]
    pub fn memset_d8_async(&mut self, value: u8, stream: &Stream<'_>) -> Result<()> {
        memset_d8(self.ptr, self.size_bytes(), value, Some(stream))
    }

    /// `cuMemsetD32`: sets every 32-bit word to `value`; complete when this returns (it
    /// waits for the legacy stream, where the driver queues it).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] unless the size is a multiple of 4; driver errors.
    #[doc(alias = "cuMemsetD32")]
    pub fn memset_d32(&mut self, value: u32) -> Result<()> {
        memset_d32(self.ptr, self.size_bytes(), value, None)
    }

    /// `cuMemsetD32Async`: queues setting every 32-bit word to `value` on `stream`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] unless the size is a multiple of 4; driver errors.
    #[doc(alias = "cuMemsetD32Async")]
    pub fn memset_d32_async(&mut self, value: u32, stream: &Stream<'_>) -> Result<()> {
        memset_d32(self.ptr, self.size_bytes(), value, Some(stream))
    }
}

impl<T: Copy> Drop for DeviceBuffer<'_, T> {
    /// `cuMemFree` (nothing for an empty buffer); errors are ignored.
    fn drop(&mut self) {
        if self.ptr == 0 {
            return;
        }
        if let Ok(cu) = api() {
            if let Ok(f) = cu.cuMemFree() {
                // SAFETY: the allocation is ours and nothing borrows it any more.
                let _ = unsafe { f(self.ptr) };
            }
        }
    }
}

/// `cuMemsetD8[Async]` of `bytes` bytes at `ptr`.
pub(crate) fn memset_d8(
    ptr: CUdeviceptr,
    bytes: usize,
    value: u8,
    stream: Option<&Stream<'_>>,
) -> Result<()> {
    if bytes == 0 {
        return Ok(());
    }
    let cu = api()?;
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
pub(crate) fn memset_d32(
    ptr: CUdeviceptr,
    bytes: usize,
    value: u32,
    stream: Option<&Stream<'_>>,
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
    let cu = api()?;
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
fn legacy_stream_sync(cu: &cuda_sys::DriverApi) -> Result<()> {
    // SAFETY: the legacy stream handle is always valid in a context.
    unsafe { drv!(cu, cuStreamSynchronize(cuda_sys::CU_STREAM_LEGACY)) }
}
