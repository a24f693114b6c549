//! Stream-ordered allocation: [`AsyncDeviceBuffer`] (`cuMemAllocAsync` /
//! `cuMemFreeAsync`) and [`MemPool`] (`cuMemPoolCreate`, attributes, default pool).

use super::device_memory::device_memory;
use core::ffi::c_void;
use core::marker::PhantomData;
use core::ptr;

use cudadrv_sys::{CUdeviceptr, CUmemPool_attribute, CUmemPoolProps, CUmemoryPool};

use super::view::{memset_d8, memset_d32};
use super::{Pod, byte_len, same_len};
use crate::driver::context::Context;
use crate::driver::dropping;
use crate::driver::stream::Stream;
use crate::error::{Error, Result, drv};

/// `len` values of `T` allocated in stream order (`cuMemAllocAsync`, or
/// `cuMemAllocFromPoolAsync` from a [`MemPool`]); freed in stream order on drop
/// (`cuMemFreeAsync` on the same stream), so work queued before the drop may still use
/// it. It borrows its stream (and pool), which therefore outlive it.
///
/// Borrowing the stream also keeps it out of captures ([`Stream::begin_capture`] takes
/// the stream by `&mut`): a stream-ordered allocation, memset or free is never recorded
/// into a graph by this type. On a stream that joined another stream's capture (through
/// [`Stream::wait_event`]) the calls are refused with [`Error::StreamCapturing`]; a drop
/// there cannot free (the free would become a graph node) and reports the leak to the
/// drop-error sink instead.
///
/// ```compile_fail,E0502
/// # fn f(ctx: &cudadrv::Context) -> cudadrv::Result<()> {
/// use cudadrv::{AsyncDeviceBuffer, Stream, graph::CaptureMode};
/// let mut stream = Stream::non_blocking(ctx)?;
/// let buf = AsyncDeviceBuffer::<u32>::new(&stream, 256)?;
/// let capture = stream.begin_capture(CaptureMode::Global)?; // error: `stream` is borrowed
/// drop(buf);
/// # drop(capture); Ok(()) }
/// ```
///
/// ```compile_fail,E0505
/// # fn f(ctx: &cudadrv::Context) -> cudadrv::Result<()> {
/// use cudadrv::{AsyncDeviceBuffer, Stream};
/// let stream = Stream::non_blocking(ctx)?;
/// let buf = AsyncDeviceBuffer::<u32>::new(&stream, 256)?;
/// drop(stream); // error: the buffer is freed on its stream, which it borrows
/// # drop(buf); Ok(()) }
/// ```
pub struct AsyncDeviceBuffer<'s, T: Copy> {
    ptr: CUdeviceptr,
    len: usize,
    stream: &'s Stream,
    _t: PhantomData<T>,
}

// SAFETY: device memory and a stream reachable from any thread.
unsafe impl<T: Copy + Send> Send for AsyncDeviceBuffer<'_, T> {}
// SAFETY: `&self` only reads through driver calls.
unsafe impl<T: Copy + Sync> Sync for AsyncDeviceBuffer<'_, T> {}

device_memory!(
    owner impl['s, T: Copy] AsyncDeviceBuffer<'s, T>,
    T, |b|
    ptr: b.ptr,
    len: b.len,
    context: b.stream.context(),
    release: crate::memory::view::Release::Stream(b.stream.as_raw()),
);

impl<T: Copy> core::fmt::Debug for AsyncDeviceBuffer<'_, T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("AsyncDeviceBuffer")
            .field("ptr", &format_args!("{:#x}", self.ptr))
            .field("len", &self.len)
            .finish()
    }
}

impl<'s, T: Copy> AsyncDeviceBuffer<'s, T> {
    /// `cuMemAllocAsync`: allocates from the device's current pool, in order on `stream`.
    /// The memory is usable by work queued on `stream` after this call (other streams
    /// must wait for it). `len == 0` allocates nothing.
    ///
    /// # Errors
    /// `CUDA_ERROR_OUT_OF_MEMORY`; `CUDA_ERROR_NOT_SUPPORTED` without memory-pool
    /// support; [`Error::InvalidArgument`] when the size overflows.
    #[doc(alias = "cuMemAllocAsync")]
    pub fn new(stream: &'s Stream, len: usize) -> Result<Self> {
        let bytes = byte_len::<T>(len)?;
        let mut ptr = 0;
        if bytes != 0 {
            let q = stream.queue(stream.context(), "cuMemAllocAsync")?;
            // SAFETY: valid out-pointer, live stream (not capturing); the context is
            // current.
            unsafe { drv!(q.cu, cuMemAllocAsync(&mut ptr, bytes, stream.as_raw()))? };
        }
        Ok(Self {
            ptr,
            len,
            stream,
            _t: PhantomData,
        })
    }

    /// `cuMemAllocFromPoolAsync`: allocates from `pool`, in order on `stream`.
    ///
    /// # Errors
    /// As [`AsyncDeviceBuffer::new`].
    #[doc(alias = "cuMemAllocFromPoolAsync")]
    pub fn from_pool(pool: &'s MemPool, stream: &'s Stream, len: usize) -> Result<Self> {
        let bytes = byte_len::<T>(len)?;
        let mut ptr = 0;
        if bytes != 0 {
            let q = stream.queue(stream.context(), "cuMemAllocFromPoolAsync")?;
            // SAFETY: valid out-pointer, live pool and stream (not capturing); the
            // context is current.
            unsafe {
                drv!(
                    q.cu,
                    cuMemAllocFromPoolAsync(&mut ptr, bytes, pool.as_raw(), stream.as_raw())
                )?
            };
        }
        Ok(Self {
            ptr,
            len,
            stream,
            _t: PhantomData,
        })
    }

    /// The stream the buffer is ordered on.
    pub fn stream(&self) -> &'s Stream {
        self.stream
    }

    /// `cuMemsetD8Async` on the buffer's stream.
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuMemsetD8Async")]
    pub fn memset_d8_async(&mut self, value: u8) -> Result<()> {
        let q = self
            .stream
            .queue(self.stream.context(), "cuMemsetD8Async")?;
        // SAFETY: the allocation holds `size_bytes` bytes; the stream is not capturing.
        unsafe { memset_d8(q.cu, self.ptr, self.size_bytes(), value, Some(self.stream)) }
    }

    /// `cuMemsetD32Async` on the buffer's stream.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] unless the size is a multiple of 4; driver errors.
    #[doc(alias = "cuMemsetD32Async")]
    pub fn memset_d32_async(&mut self, value: u32) -> Result<()> {
        let q = self
            .stream
            .queue(self.stream.context(), "cuMemsetD32Async")?;
        // SAFETY: the allocation holds `size_bytes` bytes; the stream is not capturing.
        unsafe { memset_d32(q.cu, self.ptr, self.size_bytes(), value, Some(self.stream)) }
    }

    /// `cuMemcpyHtoDAsync` on the buffer's stream.
    ///
    /// # Safety
    /// `src` must stay valid and unwritten until the stream has executed the copy.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] when the lengths differ; [`Error::StreamCapturing`]
    /// on a stream that joined a capture; driver errors.
    #[doc(alias = "cuMemcpyHtoDAsync")]
    pub unsafe fn copy_from_host_async(&mut self, src: &[T]) -> Result<()> {
        same_len(self.len, src.len())?;
        if self.size_bytes() == 0 {
            return Ok(());
        }
        let q = self
            .stream
            .queue(self.stream.context(), "cuMemcpyHtoDAsync")?;
        // SAFETY: sizes match; the caller keeps `src` valid until the copy runs; the
        // context is current.
        unsafe {
            drv!(
                q.cu,
                cuMemcpyHtoDAsync(
                    self.ptr,
                    src.as_ptr().cast::<c_void>(),
                    self.size_bytes(),
                    self.stream.as_raw()
                )
            )
        }
    }

    /// `cuMemcpyDtoHAsync` on the buffer's stream.
    ///
    /// # Safety
    /// `dst` must stay valid and untouched until the stream has executed the copy.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] when the lengths differ; [`Error::StreamCapturing`]
    /// on a stream that joined a capture; driver errors.
    #[doc(alias = "cuMemcpyDtoHAsync")]
    pub unsafe fn copy_to_host_async(&self, dst: &mut [T]) -> Result<()>
    where
        T: Pod,
    {
        same_len(self.len, dst.len())?;
        if self.size_bytes() == 0 {
            return Ok(());
        }
        let q = self
            .stream
            .queue(self.stream.context(), "cuMemcpyDtoHAsync")?;
        // SAFETY: sizes match; any bytes are a valid `T`; the caller keeps `dst` valid;
        // the context is current.
        unsafe {
            drv!(
                q.cu,
                cuMemcpyDtoHAsync(
                    dst.as_mut_ptr().cast::<c_void>(),
                    self.ptr,
                    self.size_bytes(),
                    self.stream.as_raw()
                )
            )
        }
    }
}

impl<T: Copy> Drop for AsyncDeviceBuffer<'_, T> {
    /// `cuMemFreeAsync` on the buffer's stream; a failure goes to the drop-error sink.
    /// On a stream that joined a capture the memory is not freed (the free would become
    /// a node of the graph): that leak is reported to the sink as
    /// `CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED` naming `cuMemFreeAsync`.
    fn drop(&mut self) {
        if self.ptr == 0 {
            return;
        }
        match self.stream.ensure_not_capturing("cuMemFreeAsync") {
            Ok(()) => {}
            Err(e) => {
                let code = match e {
                    Error::StreamCapturing(_) => {
                        cudadrv_sys::CUresult::CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
                    }
                    other => other
                        .code()
                        .unwrap_or(cudadrv_sys::CUresult::CUDA_ERROR_NOT_INITIALIZED),
                };
                crate::error::report_drop("cuMemFreeAsync", code);
                return;
            }
        }
        let _g = crate::error::enter_for_drop!(self.stream.context());
        // SAFETY: the allocation is ours; the stream is alive (borrowed) and not
        // capturing; the context is current.
        unsafe { dropping!(cuMemFreeAsync(self.ptr, self.stream.as_raw())) };
    }
}

/// A memory pool (`CUmemoryPool`) for stream-ordered allocation: made with
/// `cuMemPoolCreate` (destroyed on drop) or the device's default pool (borrowed). It
/// keeps its [`Context`] alive.
#[derive(Debug)]
pub struct MemPool {
    raw: CUmemoryPool,
    owned: bool,
    ctx: Context,
}

// SAFETY: a pool may be used from any thread.
unsafe impl Send for MemPool {}
// SAFETY: as above.
unsafe impl Sync for MemPool {}

impl MemPool {
    /// `cuMemPoolCreate` of pinned device memory on the context's device, without
    /// shareable handles.
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuMemPoolCreate")]
    pub fn new(ctx: &Context) -> Result<Self> {
        let props = CUmemPoolProps {
            allocType: cudadrv_sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED,
            handleTypes: cudadrv_sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_NONE,
            location: super::managed::Location::Device(ctx.device()).as_raw(),
            ..CUmemPoolProps::default()
        };
        Self::with_props(ctx, &props)
    }

    /// `cuMemPoolCreate` with explicit properties.
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuMemPoolCreate")]
    pub fn with_props(ctx: &Context, props: &CUmemPoolProps) -> Result<Self> {
        let g = ctx.enter()?;
        let mut raw = ptr::null_mut();
        // SAFETY: valid out-pointer and properties; `win32SecurityAttributes` is read
        // only for Win32 handle types.
        unsafe { drv!(g.cu, cuMemPoolCreate(&mut raw, props))? };
        Ok(Self {
            raw,
            owned: true,
            ctx: ctx.clone(),
        })
    }

    /// `cuDeviceGetDefaultMemPool`: the pool `cuMemAllocAsync` uses by default; borrowed
    /// (not destroyed on drop).
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuDeviceGetDefaultMemPool")]
    pub fn default_for(ctx: &Context) -> Result<Self> {
        let g = ctx.enter()?;
        let mut raw = ptr::null_mut();
        // SAFETY: valid out-pointer; the context is current.
        unsafe {
            drv!(
                g.cu,
                cuDeviceGetDefaultMemPool(&mut raw, ctx.device().as_raw())
            )?
        };
        Ok(Self {
            raw,
            owned: false,
            ctx: ctx.clone(),
        })
    }

    /// Takes ownership of a pool; dropping the result destroys it.
    ///
    /// # Safety
    /// `raw` must be a live pool made with `cuMemPoolCreate` that nothing else destroys.
    pub unsafe fn from_raw(raw: CUmemoryPool, ctx: &Context) -> Self {
        Self {
            raw,
            owned: true,
            ctx: ctx.clone(),
        }
    }

    /// The raw `CUmemoryPool`.
    pub fn as_raw(&self) -> CUmemoryPool {
        self.raw
    }

    /// The context the pool was created or imported in.
    #[must_use]
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// `cuMemAllocFromPoolAsync`: see [`AsyncDeviceBuffer::from_pool`].
    ///
    /// # Errors
    /// As [`AsyncDeviceBuffer::from_pool`].
    #[doc(alias = "cuMemAllocFromPoolAsync")]
    pub fn alloc_async<'s, T: Copy>(
        &'s self,
        stream: &'s Stream,
        len: usize,
    ) -> Result<AsyncDeviceBuffer<'s, T>> {
        AsyncDeviceBuffer::from_pool(self, stream, len)
    }

    /// `cuMemPoolGetAttribute` of a 64-bit attribute (thresholds and memory counters).
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuMemPoolGetAttribute")]
    pub fn attribute_u64(&self, attr: CUmemPool_attribute) -> Result<u64> {
        if !is_u64_attribute(attr) {
            return Err(Error::InvalidArgument("not a 64-bit memory pool attribute"));
        }
        let g = self.ctx.enter()?;
        let mut v = 0u64;
        // SAFETY: live pool; the attribute is a `cuuint64_t` one, so 8 bytes are written.
        unsafe {
            drv!(
                g.cu,
                cuMemPoolGetAttribute(self.raw, attr, ptr::from_mut(&mut v).cast::<c_void>())
            )?
        };
        Ok(v)
    }

    /// `cuMemPoolSetAttribute` of a 64-bit attribute.
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuMemPoolSetAttribute")]
    pub fn set_attribute_u64(&self, attr: CUmemPool_attribute, value: u64) -> Result<()> {
        if !is_u64_attribute(attr) {
            return Err(Error::InvalidArgument("not a 64-bit memory pool attribute"));
        }
        let g = self.ctx.enter()?;
        let mut v = value;
        // SAFETY: live pool; the attribute is a `cuuint64_t` one, so 8 bytes are read.
        unsafe {
            drv!(
                g.cu,
                cuMemPoolSetAttribute(self.raw, attr, ptr::from_mut(&mut v).cast::<c_void>())
            )
        }
    }

    /// `CU_MEMPOOL_ATTR_RELEASE_THRESHOLD`: bytes the pool keeps reserved across
    /// synchronizations.
    ///
    /// # Errors
    /// Driver errors.
    pub fn release_threshold(&self) -> Result<u64> {
        self.attribute_u64(CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD)
    }

    /// Sets `CU_MEMPOOL_ATTR_RELEASE_THRESHOLD` (`u64::MAX`: never release).
    ///
    /// # Errors
    /// Driver errors.
    pub fn set_release_threshold(&self, bytes: u64) -> Result<()> {
        self.set_attribute_u64(
            CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
            bytes,
        )
    }

    /// `CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT`: bytes of backing memory reserved now.
    ///
    /// # Errors
    /// Driver errors.
    pub fn reserved_mem_current(&self) -> Result<u64> {
        self.attribute_u64(CUmemPool_attribute::CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT)
    }

    /// `CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH`: high-water mark of reserved bytes.
    ///
    /// # Errors
    /// Driver errors.
    pub fn reserved_mem_high(&self) -> Result<u64> {
        self.attribute_u64(CUmemPool_attribute::CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH)
    }

    /// `CU_MEMPOOL_ATTR_USED_MEM_CURRENT`: bytes allocated from the pool now.
    ///
    /// # Errors
    /// Driver errors.
    pub fn used_mem_current(&self) -> Result<u64> {
        self.attribute_u64(CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_CURRENT)
    }

    /// `CU_MEMPOOL_ATTR_USED_MEM_HIGH`: high-water mark of allocated bytes.
    ///
    /// # Errors
    /// Driver errors.
    pub fn used_mem_high(&self) -> Result<u64> {
        self.attribute_u64(CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_HIGH)
    }

    /// `cuMemPoolTrimTo`: releases reserved memory down to `min_bytes_to_keep`.
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuMemPoolTrimTo")]
    pub fn trim_to(&self, min_bytes_to_keep: usize) -> Result<()> {
        let g = self.ctx.enter()?;
        // SAFETY: live pool; the context is current.
        unsafe { drv!(g.cu, cuMemPoolTrimTo(self.raw, min_bytes_to_keep)) }
    }
}

impl Drop for MemPool {
    /// `cuMemPoolDestroy` for created pools (the driver defers it while allocations are
    /// outstanding); a failure goes to the drop-error sink.
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        let _g = crate::error::enter_for_drop!(self.ctx);
        // SAFETY: the pool is ours; no AsyncDeviceBuffer borrows it any more.
        unsafe { dropping!(cuMemPoolDestroy(self.raw)) };
    }
}

/// The pool attributes whose value is a `cuuint64_t`.
fn is_u64_attribute(attr: CUmemPool_attribute) -> bool {
    matches!(
        attr,
        CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD
            | CUmemPool_attribute::CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT
            | CUmemPool_attribute::CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH
            | CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_CURRENT
            | CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_HIGH
    )
}

// ---------------------------------------------------------------------------------------
// Access from other devices (Programming Guide 4.3.3.3): added for multi-GPU use, see
// `crate::memory::peer`.
// ---------------------------------------------------------------------------------------

impl MemPool {
    /// `cuMemPoolSetAccess`: gives `device` `access` to every allocation of the pool,
    /// present and future (a pool is reachable only from its own device until then).
    /// Kernels on `device` may then dereference the pool's
    /// [`AsyncDeviceBuffer`]s; peer access between contexts
    /// ([`Context::enable_peer_access`]) is not needed for pool memory.
    ///
    /// Taking access away ([`MemAccess::None`]) while a kernel of `device` uses the
    /// memory faults that kernel (a device error), which is why this is safe: it is no
    /// host memory hazard.
    ///
    /// ```no_run
    /// # fn main() -> cudadrv::Result<()> {
    /// use cudadrv::memory::peer::MemAccess;
    /// use cudadrv::{Context, Device, MemPool, Stream};
    /// let (d0, d1) = (Device::get(0)?, Device::get(1)?);
    /// let c0 = Context::primary(d0)?;
    /// let pool = MemPool::new(&c0)?;
    /// pool.set_access(d1, MemAccess::ReadWrite)?;
    /// assert_eq!(pool.access(d1)?, MemAccess::ReadWrite);
    /// let stream = Stream::non_blocking(&c0)?;
    /// let buf = pool.alloc_async::<f32>(&stream, 1024)?; // readable by kernels on d1 too
    /// # drop(buf); Ok(()) }
    /// ```
    ///
    /// # Errors
    /// Driver errors: `CUDA_ERROR_INVALID_DEVICE` for a device that cannot reach the
    /// pool's (see [`Device::can_access_peer`](crate::Device::can_access_peer)) or that is
    /// no device; `CUDA_ERROR_INVALID_VALUE` for taking the pool's own device's access
    /// away.
    ///
    /// [`Context::enable_peer_access`]: crate::Context::enable_peer_access
    /// [`MemAccess::None`]: crate::memory::peer::MemAccess::None
    #[doc(alias = "cuMemPoolSetAccess")]
    #[doc(alias = "cudaMemPoolSetAccess")]
    pub fn set_access(
        &self,
        device: crate::Device,
        access: crate::memory::peer::MemAccess,
    ) -> Result<()> {
        let desc = access.desc(device);
        let g = self.ctx.enter()?;
        // SAFETY: live pool; one descriptor, as the count says; the context is current.
        unsafe { drv!(g.cu, cuMemPoolSetAccess(self.raw, &desc, 1)) }
    }

    /// `cuMemPoolGetAccess`: the access `device` has to the pool's memory
    /// ([`MemAccess::ReadWrite`](crate::memory::peer::MemAccess::ReadWrite) for the pool's own
    /// device).
    ///
    /// # Errors
    /// Driver errors; [`Error::InvalidArgument`] for an access value this crate does not
    /// know (a newer driver's).
    #[doc(alias = "cuMemPoolGetAccess")]
    #[doc(alias = "cudaMemPoolGetAccess")]
    pub fn access(&self, device: crate::Device) -> Result<crate::memory::peer::MemAccess> {
        let mut location = crate::memory::peer::MemAccess::None.desc(device).location;
        let mut flags = cudadrv_sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_NONE;
        let g = self.ctx.enter()?;
        // SAFETY: live pool; valid pointers (the driver reads `location`, writes
        // `flags`); the context is current.
        unsafe {
            drv!(
                g.cu,
                cuMemPoolGetAccess(&mut flags, self.raw, &mut location)
            )?
        };
        crate::memory::peer::MemAccess::from_raw(flags).ok_or(Error::InvalidArgument(
            "cuMemPoolGetAccess returned an access value this crate does not know",
        ))
    }
}
