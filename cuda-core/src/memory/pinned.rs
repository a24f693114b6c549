//! [`PinnedHostBuffer`]: page-locked host memory (`cuMemAllocHost`, or `cuMemHostAlloc`
//! with [`HostAllocFlags`]), the host side of truly asynchronous copies, and mapped
//! memory that kernels reach through [`PinnedHostBuffer::device_ptr`].

use core::ffi::c_void;
use core::marker::PhantomData;
use core::ptr::{self, NonNull};

use super::{DevicePtr, Pod, byte_len};
use crate::driver::context::Context;
use crate::driver::dropping;
use crate::error::{Error, Result, drv};

crate::flags::flags! {
    /// `CU_MEMHOSTALLOC_*` flags for [`PinnedHostBuffer::with_flags`] (`cuMemHostAlloc`).
    /// The empty set is what `cuMemAllocHost` gives.
    #[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
    pub struct HostAllocFlags: u32 {
        /// `CU_MEMHOSTALLOC_PORTABLE`: pinned for every context, not only the one it was
        /// allocated in.
        const PORTABLE = cudadrv_sys::CU_MEMHOSTALLOC_PORTABLE;
        /// `CU_MEMHOSTALLOC_DEVICEMAP`: mapped into the device's address space; kernels
        /// read and write it directly through [`PinnedHostBuffer::device_ptr`] (zero-copy).
        const DEVICEMAP = cudadrv_sys::CU_MEMHOSTALLOC_DEVICEMAP;
        /// `CU_MEMHOSTALLOC_WRITECOMBINED`: write-combined: faster for the host to write
        /// and the device to read over PCIe, very slow for the host to read.
        const WRITECOMBINED = cudadrv_sys::CU_MEMHOSTALLOC_WRITECOMBINED;
    }
}

/// `len` values of `T` in page-locked host memory of a context (`cuMemAllocHost`, or
/// `cuMemHostAlloc` with [`HostAllocFlags`]), freed on drop (`cuMemFreeHost`).
/// Dereferences to `[T]`; always initialized, and aligned for `T` whatever `T`'s
/// alignment (the driver promises 256 bytes; a `T` that needs more is placed at an
/// aligned offset inside a larger allocation).
pub struct PinnedHostBuffer<T: Copy> {
    ptr: NonNull<T>,
    len: usize,
    /// What `cuMemAllocHost` returned (`None`: nothing allocated, `ptr` is dangling for
    /// zero bytes).
    base: Option<NonNull<c_void>>,
    ctx: Context,
    _t: PhantomData<T>,
}

// SAFETY: the buffer owns its memory like a `Box<[T]>`.
unsafe impl<T: Copy + Send> Send for PinnedHostBuffer<T> {}
// SAFETY: as `[T]`.
unsafe impl<T: Copy + Sync> Sync for PinnedHostBuffer<T> {}

impl<T: Copy + core::fmt::Debug> core::fmt::Debug for PinnedHostBuffer<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// The offset from `base` to the first address aligned to `align` (a power of two).
fn align_offset(base: usize, align: usize) -> usize {
    base.wrapping_neg() & (align - 1)
}

impl<T: Copy> PinnedHostBuffer<T> {
    /// Allocates room for `len` values (`cuMemAllocHost` for `None`, else
    /// `cuMemHostAlloc` with the flags); the caller initializes them.
    fn alloc(ctx: &Context, len: usize, flags: Option<HostAllocFlags>) -> Result<Self> {
        let bytes = byte_len::<T>(len)?;
        if bytes == 0 {
            return Ok(Self {
                ptr: NonNull::dangling(),
                len,
                base: None,
                ctx: ctx.clone(),
                _t: PhantomData,
            });
        }
        let align = core::mem::align_of::<T>();
        let g = ctx.enter()?;
        let alloc = |size: usize| -> Result<NonNull<c_void>> {
            let mut p: *mut c_void = ptr::null_mut();
            // SAFETY: valid out-pointer, plain size and flags; the context is current.
            unsafe {
                match flags {
                    None => drv!(g.cu, cuMemAllocHost(&mut p, size))?,
                    Some(f) => drv!(g.cu, cuMemHostAlloc(&mut p, size, f.bits()))?,
                }
            };
            NonNull::new(p).ok_or(Error::InvalidArgument(
                "the driver returned a null pinned host allocation",
            ))
        };
        let mut base = alloc(bytes)?;
        let mut offset = align_offset(base.as_ptr().addr(), align);
        if offset != 0 {
            // Over-aligned `T` (more than the driver's guarantee): allocate `align - 1`
            // bytes more and start at the first aligned address.
            // SAFETY: ours, unused.
            unsafe { dropping!(cuMemFreeHost(base.as_ptr())) };
            let padded = bytes.checked_add(align - 1).ok_or(Error::InvalidArgument(
                "buffer size in bytes overflows usize",
            ))?;
            base = alloc(padded)?;
            offset = align_offset(base.as_ptr().addr(), align);
        }
        // SAFETY: `offset < align` and the allocation holds `bytes + offset` bytes (the
        // padded one when `offset != 0`), so the result points inside it and is non-null.
        let ptr =
            unsafe { NonNull::new_unchecked(base.as_ptr().cast::<u8>().add(offset).cast::<T>()) };
        Ok(Self {
            ptr,
            len,
            base: Some(base),
            ctx: ctx.clone(),
            _t: PhantomData,
        })
    }

    /// `cuMemAllocHost`, zero-filled.
    ///
    /// # Errors
    /// `CUDA_ERROR_OUT_OF_MEMORY`; [`Error::InvalidArgument`]
    /// when the size overflows.
    #[doc(alias = "cuMemAllocHost")]
    pub fn zeroed(ctx: &Context, len: usize) -> Result<Self>
    where
        T: Pod,
    {
        Self::zeroed_with(ctx, len, None)
    }

    /// `cuMemHostAlloc` with `flags`, zero-filled: portable, mapped (see
    /// [`device_ptr`](Self::device_ptr)) or write-combined pinned memory. Aligned for `T`
    /// like every `PinnedHostBuffer`.
    ///
    /// ```no_run
    /// # fn main() -> cudadrv::Result<()> {
    /// use cudadrv::memory::HostAllocFlags;
    /// use cudadrv::{Context, Device, PinnedHostBuffer};
    /// let ctx = Context::primary(Device::get(0)?)?;
    /// let mapped = PinnedHostBuffer::<u32>::with_flags(&ctx, 1024, HostAllocFlags::DEVICEMAP)?;
    /// let on_device = mapped.device_ptr()?; // pass it to a kernel as a `u32*`
    /// # let _ = on_device; Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`PinnedHostBuffer::zeroed`]; `CUDA_ERROR_INVALID_VALUE` for flags the driver
    /// does not know.
    #[doc(alias = "cuMemHostAlloc")]
    pub fn with_flags(ctx: &Context, len: usize, flags: HostAllocFlags) -> Result<Self>
    where
        T: Pod,
    {
        Self::zeroed_with(ctx, len, Some(flags))
    }

    fn zeroed_with(ctx: &Context, len: usize, flags: Option<HostAllocFlags>) -> Result<Self>
    where
        T: Pod,
    {
        let buf = Self::alloc(ctx, len, flags)?;
        if buf.base.is_some() {
            // SAFETY: the allocation holds `len` values (`byte_len` bytes); zero bytes
            // are a valid `T` (`Pod`).
            unsafe { ptr::write_bytes(buf.ptr.as_ptr(), 0, len) };
        }
        Ok(buf)
    }

    /// `cuMemAllocHost`, filled with a copy of `src`.
    ///
    /// # Errors
    /// As [`PinnedHostBuffer::zeroed`].
    #[doc(alias = "cuMemAllocHost")]
    pub fn from_slice(ctx: &Context, src: &[T]) -> Result<Self> {
        let buf = Self::alloc(ctx, src.len(), None)?;
        if buf.base.is_some() {
            // SAFETY: the allocation holds `src.len()` values and does not overlap `src`.
            unsafe { ptr::copy_nonoverlapping(src.as_ptr(), buf.ptr.as_ptr(), src.len()) };
        }
        Ok(buf)
    }

    /// The host address.
    pub fn as_ptr(&self) -> *const T {
        self.ptr.as_ptr()
    }

    /// The host address, for writing.
    pub fn as_mut_ptr(&mut self) -> *mut T {
        self.ptr.as_ptr()
    }

    /// The context the memory was allocated in.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// `cuMemHostGetDevicePointer`: the address kernels use for this mapped memory (a
    /// `T*` kernel argument), for a buffer allocated with [`HostAllocFlags::DEVICEMAP`]
    /// (with unified addressing, which every platform CUDA 12 runs on has, pinned memory
    /// is mapped anyway and the address is usually the host address). An empty buffer
    /// gives a null pointer.
    ///
    /// Getting the address is safe; using it is a kernel launch, which is `unsafe`:
    /// a kernel writing through it writes this buffer, so no host code may read or
    /// write the buffer until the kernel has finished (synchronize first), and the
    /// buffer must outlive the kernel.
    ///
    /// # Errors
    /// Driver errors (`CUDA_ERROR_INVALID_VALUE` when the memory is not mapped).
    #[doc(alias = "cuMemHostGetDevicePointer")]
    pub fn device_ptr(&self) -> Result<DevicePtr<T>> {
        let Some(base) = self.base else {
            return Ok(DevicePtr::from_raw(0));
        };
        let g = self.ctx.enter()?;
        let mut dptr = 0;
        // SAFETY: `base` is our live allocation from the driver, valid out-pointer, flags
        // 0 (the only value); the context is current.
        unsafe { drv!(g.cu, cuMemHostGetDevicePointer(&mut dptr, base.as_ptr(), 0))? };
        // `ptr` is `base` plus the alignment offset, inside the allocation; the device
        // mapping is linear, so the same offset applies.
        self.ptr
            .as_ptr()
            .addr()
            .checked_sub(base.as_ptr().addr())
            .and_then(|o| u64::try_from(o).ok())
            .and_then(|o| dptr.checked_add(o))
            .map(DevicePtr::from_raw)
            .ok_or(Error::InvalidArgument(
                "cuMemHostGetDevicePointer returned an address that overflows",
            ))
    }

    /// `cuMemHostGetFlags`: the flags the memory was allocated with (empty for an empty
    /// buffer; `cuMemAllocHost` memory reports what the driver gave it, usually
    /// [`HostAllocFlags::DEVICEMAP`] with unified addressing).
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuMemHostGetFlags")]
    pub fn flags(&self) -> Result<HostAllocFlags> {
        let Some(base) = self.base else {
            return Ok(HostAllocFlags::empty());
        };
        let g = self.ctx.enter()?;
        let mut flags = 0;
        // SAFETY: `base` is our live allocation from the driver, valid out-pointer; the
        // context is current.
        unsafe { drv!(g.cu, cuMemHostGetFlags(&mut flags, base.as_ptr()))? };
        Ok(HostAllocFlags::from_bits_retain(flags))
    }
}

impl<T: Copy> core::ops::Deref for PinnedHostBuffer<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: `ptr` holds `len` initialized values (or is dangling with zero bytes),
        // owned by `self`.
        unsafe { core::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Copy> core::ops::DerefMut for PinnedHostBuffer<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in `deref`, and `&mut self` is unique.
        unsafe { core::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Copy> Drop for PinnedHostBuffer<T> {
    /// `cuMemFreeHost`; a failure goes to the drop-error sink.
    fn drop(&mut self) {
        let Some(base) = self.base else { return };
        let _g = crate::error::enter_for_drop!(self.ctx);
        // SAFETY: the allocation is ours and nothing borrows it any more; the context is
        // current.
        unsafe { dropping!(cuMemFreeHost(base.as_ptr())) };
    }
}

#[cfg(test)]
mod tests {
    use super::align_offset;

    #[test]
    fn offsets_reach_the_next_aligned_address() {
        assert_eq!(align_offset(0x1000, 4096), 0);
        assert_eq!(align_offset(0x1200, 4096), 0xE00);
        assert_eq!(align_offset(0x1200, 512), 0);
        assert_eq!(align_offset(0x1100, 1024), 0x300);
        assert_eq!(align_offset(0x1100, 1), 0);
    }
}
