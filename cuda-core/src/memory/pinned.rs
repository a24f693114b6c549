//! [`PinnedHostBuffer`]: page-locked host memory (`cuMemAllocHost`), the host side of
//! truly asynchronous copies.

use core::ffi::c_void;
use core::marker::PhantomData;
use core::ptr::{self, NonNull};

use super::{Pod, byte_len};
use crate::context::{Context, CtxMarker};
use crate::driver::api;
use crate::error::{Result, drv};

/// `len` values of `T` in page-locked host memory of a context (`cuMemAllocHost`),
/// freed on drop (`cuMemFreeHost`). Dereferences to `[T]`; always initialized.
pub struct PinnedHostBuffer<'ctx, T: Copy> {
    ptr: NonNull<T>,
    len: usize,
    /// Whether `ptr` came from the driver (false: a dangling pointer for zero bytes).
    allocated: bool,
    _ctx: CtxMarker<'ctx>,
    _t: PhantomData<T>,
}

// SAFETY: the buffer owns its memory like a `Box<[T]>`.
unsafe impl<T: Copy + Send> Send for PinnedHostBuffer<'_, T> {}
// SAFETY: as `[T]`.
unsafe impl<T: Copy + Sync> Sync for PinnedHostBuffer<'_, T> {}

impl<T: Copy + core::fmt::Debug> core::fmt::Debug for PinnedHostBuffer<'_, T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<'ctx, T: Copy> PinnedHostBuffer<'ctx, T> {
    /// Allocates room for `len` values; the caller initializes them.
    fn alloc(ctx: &'ctx Context, len: usize) -> Result<Self> {
        let bytes = byte_len::<T>(len)?;
        if bytes == 0 {
            return Ok(Self {
                ptr: NonNull::dangling(),
                len,
                allocated: false,
                _ctx: CtxMarker::default(),
                _t: PhantomData,
            });
        }
        let g = ctx.enter()?;
        let mut p: *mut c_void = ptr::null_mut();
        // SAFETY: valid out-pointer; the context is current.
        unsafe { drv!(g.cu, cuMemAllocHost(&mut p, bytes))? };
        let Some(ptr) = NonNull::new(p.cast::<T>()) else {
            return Err(crate::Error::InvalidArgument(
                "cuMemAllocHost returned a null pointer",
            ));
        };
        Ok(Self {
            ptr,
            len,
            allocated: true,
            _ctx: CtxMarker::default(),
            _t: PhantomData,
        })
    }

    /// `cuMemAllocHost`, zero-filled.
    ///
    /// # Errors
    /// `CUDA_ERROR_OUT_OF_MEMORY`; [`Error::InvalidArgument`](crate::Error::InvalidArgument)
    /// when the size overflows.
    #[doc(alias = "cuMemAllocHost")]
    pub fn zeroed(ctx: &'ctx Context, len: usize) -> Result<Self>
    where
        T: Pod,
    {
        let buf = Self::alloc(ctx, len)?;
        if buf.allocated {
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
    pub fn from_slice(ctx: &'ctx Context, src: &[T]) -> Result<Self> {
        let buf = Self::alloc(ctx, src.len())?;
        if buf.allocated {
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
}

impl<T: Copy> core::ops::Deref for PinnedHostBuffer<'_, T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: `ptr` holds `len` initialized values (or is dangling with zero bytes),
        // owned by `self`.
        unsafe { core::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Copy> core::ops::DerefMut for PinnedHostBuffer<'_, T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in `deref`, and `&mut self` is unique.
        unsafe { core::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Copy> Drop for PinnedHostBuffer<'_, T> {
    /// `cuMemFreeHost`; errors are ignored.
    fn drop(&mut self) {
        if !self.allocated {
            return;
        }
        if let Ok(cu) = api() {
            if let Ok(f) = cu.cuMemFreeHost() {
                // SAFETY: the allocation is ours and nothing borrows it any more.
                let _ = unsafe { f(self.ptr.as_ptr().cast::<c_void>()) };
            }
        }
    }
}
