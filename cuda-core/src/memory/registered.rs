//! Page-locked registration of memory the program already owns (Programming Guide
//! 2.4.3): [`HostRegistration`] (`cuMemHostRegister` / `cuMemHostUnregister`).
//!
//! Registering pins the pages of a host range so the device can copy to and from it
//! asynchronously, and, with [`HostRegisterFlags::DEVICE_MAP`], reach it from kernels
//! through a device pointer (zero copy). The registration borrows the slice it pins
//! exclusively for its whole life: the memory can be neither freed, moved, nor touched
//! by Rust code while the device may use it.
//!
//! # A scope, not a guard
//! The safe form is [`HostRegistration::scope`], as `std::thread::scope`: the
//! registration lives on the scope's own stack and its closure sees only a reference, so
//! the borrow of the slice cannot end before the scope has waited for the device work
//! that used the range, whatever the closure leaks (`mem::forget` of a reference or a
//! part ends nothing early). A registration returned by value (the `unsafe`
//! [`HostRegistration::new`]) could be forgotten, ending the borrow with a copy into the
//! range still queued: its waiting drop is then the caller's promise.
//!
//! ```compile_fail,E0505
//! # fn f(ctx: &cudadrv::Context) -> cudadrv::Result<()> {
//! use cudadrv::memory::registered::{HostRegisterFlags, HostRegistration};
//! let mut data = vec![0u32; 1024];
//! HostRegistration::scope(ctx, &mut data, HostRegisterFlags::DEVICE_MAP, |reg| {
//!     drop(data); // error: `data` is borrowed by the registration
//!     Ok(())
//! })
//! # }
//! ```
//!
//! ```compile_fail,E0499
//! # fn f(ctx: &cudadrv::Context) -> cudadrv::Result<()> {
//! use cudadrv::memory::registered::{HostRegisterFlags, HostRegistration};
//! let mut data = vec![0u32; 1024];
//! HostRegistration::scope(ctx, &mut data, HostRegisterFlags::empty(), |reg| {
//!     data.push(1); // error: a registered Vec can be neither touched nor grown
//!     Ok(())
//! })
//! # }
//! ```
//!
//! The registration cannot leave its scope:
//!
//! ```compile_fail,E0521
//! # fn f(ctx: &cudadrv::Context) -> cudadrv::Result<()> {
//! use cudadrv::memory::registered::{HostRegisterFlags, HostRegistration};
//! let mut data = vec![0u32; 1024];
//! let mut kept = None;
//! HostRegistration::scope(ctx, &mut data, HostRegisterFlags::empty(), |reg| {
//!     kept = Some(reg); // error: the reference cannot escape the closure
//!     Ok(())
//! })?;
//! # Ok(()) }
//! ```
//!
//! # Pages, not bytes
//! The driver pins whole pages: a range that does not start or end on a page boundary
//! pins the rest of its first and last page too (checked on the H100: 1000 bytes at an
//! odd address register fine). For the neighbouring bytes in those pages this changes
//! nothing the program can see: they stay ordinary memory, only locked in RAM until the
//! registration ends. Another range in the same page can be registered too (the driver
//! counts the page's registrations), and it stays usable after the first one is
//! unregistered; registering bytes that are registered already is refused with
//! `CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED` (safe code cannot try: a registration
//! borrows its slice exclusively). `hw_memory` checks all three on the H100.
//!
//! # Ending a registration
//! Ending a registration that was used by device work (a copy through
//! [`HostRegistration::copy_from_device_async`] and friends, or its mapped pointer
//! taken) first synchronizes its context (`cuCtxSynchronize`), so no copy or kernel of
//! that context still reaches the pages when they are unpinned and handed back to Rust.
//! Work on the range must therefore be queued in the registration's context: the safe
//! copies check it; kernels given the mapped pointer are `unsafe` launches, whose
//! contract covers launches elsewhere.

use core::ffi::c_void;
use core::marker::PhantomData;
use core::sync::atomic::{AtomicBool, Ordering};

use super::device_buffer::DeviceBuffer;
use super::device_memory::DevicePtr;
use super::{Pod, byte_len, same_len};
use crate::driver::context::Context;
use crate::driver::dropping;
use crate::driver::stream::{Queued, Stream};
use crate::error::{Error, Result, drv};

crate::flags::flags! {
    /// `CU_MEMHOSTREGISTER_*` flags for [`HostRegistration::new`].
    #[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
    pub struct HostRegisterFlags: u32 {
        /// `CU_MEMHOSTREGISTER_PORTABLE`: page-locked for every context, not only the
        /// current one.
        const PORTABLE = cudadrv_sys::CU_MEMHOSTREGISTER_PORTABLE;
        /// `CU_MEMHOSTREGISTER_DEVICEMAP`: mapped into the device's address space
        /// ([`HostRegistration::device_ptr`]).
        const DEVICE_MAP = cudadrv_sys::CU_MEMHOSTREGISTER_DEVICEMAP;
        /// `CU_MEMHOSTREGISTER_IOMEMORY`: the range is I/O memory (a device's BAR
        /// mapped into the process), not RAM.
        const IO_MEMORY = cudadrv_sys::CU_MEMHOSTREGISTER_IOMEMORY;
        /// `CU_MEMHOSTREGISTER_READ_ONLY`: the device only reads the range (needs
        /// `CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED`); copies into it are
        /// refused.
        const READ_ONLY = cudadrv_sys::CU_MEMHOSTREGISTER_READ_ONLY;
    }
}

/// A host range pinned by `cuMemHostRegister`, unpinned when its scope ends
/// (`cuMemHostUnregister`). It borrows the slice for `'a`, exclusively. See the
/// [module docs](self).
///
/// ```no_run
/// # fn main() -> cudadrv::Result<()> {
/// use cudadrv::{Context, Device, DeviceBuffer, Stream};
/// use cudadrv::memory::registered::{HostRegisterFlags, HostRegistration};
/// let ctx = Context::primary(Device::get(0)?)?;
/// let stream = Stream::non_blocking(&ctx)?;
/// let mut data: Vec<u32> = (0..1024).collect(); // memory the program already owns
/// let mut on_device = DeviceBuffer::<u32>::new(&ctx, 1024)?;
/// HostRegistration::scope(&ctx, &mut data, HostRegisterFlags::empty(), |reg| {
///     reg.copy_to_device_async(&mut on_device, &stream)?; // asynchronous, safe
///     reg.copy_from_device_async(&on_device, &stream)
/// })?; // unregistered: waits for the copies first
/// assert_eq!(data[5], 5);
/// # Ok(()) }
/// ```
pub struct HostRegistration<'a, T: Copy> {
    ptr: *mut T,
    len: usize,
    flags: HostRegisterFlags,
    ctx: Context,
    /// Whether device work may use the range (then the drop synchronizes first).
    used: AtomicBool,
    _borrow: PhantomData<&'a mut [T]>,
}

// SAFETY: the registration owns the exclusive borrow of the slice (`T: Send` values may
// move with it) and offers no host access to it.
unsafe impl<T: Copy + Send> Send for HostRegistration<'_, T> {}
// SAFETY: `&HostRegistration` offers no host access to the slice, only driver calls
// that pass its address on.
unsafe impl<T: Copy + Send> Sync for HostRegistration<'_, T> {}

impl<T: Copy> core::fmt::Debug for HostRegistration<'_, T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("HostRegistration")
            .field("ptr", &self.ptr)
            .field("len", &self.len)
            .field("flags", &self.flags)
            .finish()
    }
}

impl<'a, T: Copy> HostRegistration<'a, T> {
    /// `cuMemHostRegister` of `data` (its whole pages, see the module docs) with `flags`,
    /// in `ctx`, for the duration of `f`; then, once `f` has returned or while a panic
    /// unwinds through it, `cuCtxSynchronize` (if device work used the range) and
    /// `cuMemHostUnregister`.
    ///
    /// Returns what `f` returned, or the first error of the synchronization and the
    /// unregistration.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an empty slice; driver errors:
    /// `CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED` for bytes registered already (through
    /// another API), `CUDA_ERROR_NOT_SUPPORTED` for
    /// [`HostRegisterFlags::READ_ONLY`] where the device does not support it,
    /// `CUDA_ERROR_INVALID_VALUE` for memory that cannot be pinned; `f`'s error; errors
    /// of the synchronization (an error of the asynchronous work) or the unregistration.
    #[doc(alias = "cuMemHostRegister")]
    #[doc(alias = "cudaHostRegister")]
    #[doc(alias = "cuMemHostUnregister")]
    pub fn scope<R>(
        ctx: &Context,
        data: &'a mut [T],
        flags: HostRegisterFlags,
        f: impl FnOnce(&HostRegistration<'a, T>) -> Result<R>,
    ) -> Result<R> {
        // SAFETY: the registration stays on this frame and is ended here, after `f`, or
        // dropped by the unwinding of a panic of `f` (both wait for the device work that
        // used it); `f` sees only a reference, which cannot leave the closure, so no code
        // can leak the registration itself.
        let reg = unsafe { Self::new(ctx, data, flags)? };
        let out = f(&reg);
        let ended = reg.end();
        match (out, ended) {
            (Err(e), _) | (Ok(_), Err(e)) => Err(e),
            (Ok(v), Ok(())) => Ok(v),
        }
    }

    /// `cuMemHostRegister`: pins `data` (its whole pages, see the module docs) with
    /// `flags`, in `ctx`, until the registration is dropped. The safe form is
    /// [`scope`](Self::scope).
    ///
    /// # Safety
    /// The registration must be dropped (or [`end`](Self::end)ed), not leaked, before the
    /// borrow of `data` ends, if any device work may use the range: its asynchronous
    /// copies are safe only because the drop waits for them, and `mem::forget` would end
    /// the borrow with a copy into the range still queued.
    ///
    /// # Errors
    /// As [`scope`](Self::scope), before `f`.
    #[doc(alias = "cuMemHostRegister")]
    #[doc(alias = "cudaHostRegister")]
    pub unsafe fn new(ctx: &Context, data: &'a mut [T], flags: HostRegisterFlags) -> Result<Self> {
        let bytes = byte_len::<T>(data.len())?;
        if bytes == 0 {
            return Err(Error::InvalidArgument(
                "cuMemHostRegister needs a non-empty range",
            ));
        }
        let ptr = data.as_mut_ptr();
        let g = ctx.enter()?;
        // SAFETY: `data` is `bytes` bytes of live host memory, borrowed exclusively for
        // the registration's life; the context is current.
        unsafe {
            drv!(
                g.cu,
                cuMemHostRegister(ptr.cast::<c_void>(), bytes, flags.bits())
            )?
        };
        Ok(Self {
            ptr,
            len: data.len(),
            flags,
            ctx: ctx.clone(),
            used: AtomicBool::new(false),
            _borrow: PhantomData,
        })
    }

    /// Number of values.
    #[must_use]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the range is empty (never: registration needs at least one byte).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Size in bytes.
    #[must_use]
    pub fn size_bytes(&self) -> usize {
        self.len * core::mem::size_of::<T>()
    }

    /// The flags it was registered with.
    #[must_use]
    pub fn flags(&self) -> HostRegisterFlags {
        self.flags
    }

    /// The host address of the range.
    #[must_use]
    pub fn as_ptr(&self) -> *const T {
        self.ptr
    }

    /// The context it was registered in.
    #[must_use]
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// `cuMemHostGetDevicePointer`: the device address of the range, for kernels (zero
    /// copy), with [`HostRegisterFlags::DEVICE_MAP`]. Dropping the registration then
    /// synchronizes its context first.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] without `DEVICE_MAP`; driver errors.
    #[doc(alias = "cuMemHostGetDevicePointer")]
    pub fn device_ptr(&self) -> Result<DevicePtr<T>> {
        if !self.flags.contains(HostRegisterFlags::DEVICE_MAP) {
            return Err(Error::InvalidArgument(
                "the range was registered without HostRegisterFlags::DEVICE_MAP",
            ));
        }
        let g = self.ctx.enter()?;
        let mut dptr = 0;
        // SAFETY: a registered, mapped range; valid out-pointer; flags must be 0.
        unsafe {
            drv!(
                g.cu,
                cuMemHostGetDevicePointer(&mut dptr, self.ptr.cast::<c_void>(), 0)
            )?
        };
        self.used.store(true, Ordering::Release);
        Ok(DevicePtr::from_raw(dptr))
    }

    /// `cuMemcpyHtoDAsync`: queues a copy of the range into `dst` (same length) on
    /// `stream`. Safe: the range stays pinned and out of Rust's reach until the
    /// registration is dropped, which waits for the copy.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`]; [`Error::ContextMismatch`] unless `dst`, `stream` and
    /// the registration share a context; [`Error::StreamCapturing`] while `stream` is
    /// being captured; driver errors.
    #[doc(alias = "cuMemcpyHtoDAsync")]
    pub fn copy_to_device_async(&self, dst: &mut DeviceBuffer<T>, stream: &Stream) -> Result<()> {
        const CALL: &str = "cuMemcpyHtoDAsync";
        same_len(dst.len(), self.len)?;
        let q = self.queue(dst.context(), stream, CALL)?;
        // SAFETY: both sides hold `size_bytes` bytes; the host side is pinned and
        // borrowed by `self`, whose drop waits for the copy (same context, checked); the
        // stream is not capturing; the context is current.
        unsafe {
            drv!(
                q.cu,
                cuMemcpyHtoDAsync(
                    dst.as_raw(),
                    self.ptr.cast::<c_void>(),
                    self.size_bytes(),
                    q.stream
                )
            )
        }
    }

    /// `cuMemcpyDtoHAsync`: queues a copy of `src` (same length) into the range on
    /// `stream`. Safe for the same reason as
    /// [`copy_to_device_async`](Self::copy_to_device_async): no Rust code can read the
    /// range until the registration is dropped, which waits for the copy.
    ///
    /// # Errors
    /// As [`copy_to_device_async`](Self::copy_to_device_async), and
    /// [`Error::InvalidArgument`] for a [`HostRegisterFlags::READ_ONLY`] range.
    #[doc(alias = "cuMemcpyDtoHAsync")]
    pub fn copy_from_device_async(&self, src: &DeviceBuffer<T>, stream: &Stream) -> Result<()>
    where
        T: Pod,
    {
        const CALL: &str = "cuMemcpyDtoHAsync";
        if self.flags.contains(HostRegisterFlags::READ_ONLY) {
            return Err(Error::InvalidArgument(
                "a read-only registration cannot be copied into",
            ));
        }
        same_len(self.len, src.len())?;
        let q = self.queue(src.context(), stream, CALL)?;
        // SAFETY: both sides hold `size_bytes` bytes; any bytes are a valid `T`; the
        // device writes the pinned range, which no Rust reference reaches until the
        // registration's drop has waited for the copy; the context is current.
        unsafe {
            drv!(
                q.cu,
                cuMemcpyDtoHAsync(
                    self.ptr.cast::<c_void>(),
                    src.as_raw(),
                    self.size_bytes(),
                    q.stream
                )
            )
        }
    }

    /// The checks before queueing device work on the range: one context for all three,
    /// a stream that is not capturing; marks the registration used.
    fn queue<'s>(
        &self,
        buf: &Context,
        stream: &'s Stream,
        call: &'static str,
    ) -> Result<Queued<'s>> {
        self.ctx.ensure_same(buf, call)?;
        let q = stream.queue(&self.ctx, call)?;
        self.used.store(true, Ordering::Release);
        Ok(q)
    }

    /// The pointer and length batched copies use: marks it used.
    #[cfg(feature = "alloc")]
    pub(crate) fn device_side(&self) -> (*mut T, usize) {
        self.used.store(true, Ordering::Release);
        (self.ptr, self.len)
    }

    /// Values `range` of the range, as one side of a batched copy (a registration
    /// covers whole pages, so parts of one registration stand in for ranges that could
    /// not be registered one by one).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a range outside the registration or empty.
    pub fn part(&self, range: core::ops::Range<usize>) -> Result<RegisteredPart<'_, 'a, T>> {
        if range.start >= range.end || range.end > self.len {
            return Err(Error::InvalidArgument(
                "a registered part must be a non-empty range inside the registration",
            ));
        }
        Ok(RegisteredPart { reg: self, range })
    }
}

/// Part of a [`HostRegistration`] ([`HostRegistration::part`]), one side of a batched
/// copy. It borrows the registration, so the registration's drop (which waits for the
/// copies) comes after every use of it.
#[derive(Debug)]
pub struct RegisteredPart<'r, 'a, T: Copy> {
    reg: &'r HostRegistration<'a, T>,
    range: core::ops::Range<usize>,
}

impl<T: Copy> RegisteredPart<'_, '_, T> {
    /// The registration it is part of.
    #[must_use]
    pub fn registration(&self) -> &HostRegistration<'_, T> {
        self.reg
    }

    /// The values of the registration it covers.
    #[must_use]
    pub fn range(&self) -> core::ops::Range<usize> {
        self.range.clone()
    }

    /// The pointer and length batched copies use: marks the registration used.
    #[cfg(feature = "alloc")]
    pub(crate) fn device_side(&self) -> (*mut T, usize) {
        let (base, _) = self.reg.device_side();
        // In bounds: checked by `part`.
        (base.wrapping_add(self.range.start), self.range.len())
    }
}

impl<T: Copy> HostRegistration<'_, T> {
    /// Ends the registration: `cuCtxSynchronize` if device work may have used the range,
    /// then `cuMemHostUnregister`, returning the first error (the drop does the same and
    /// hands errors to the drop-error sink).
    ///
    /// # Errors
    /// Errors of the synchronization (an error of the asynchronous work) or of
    /// `cuMemHostUnregister`.
    #[doc(alias = "cuMemHostUnregister")]
    pub fn end(self) -> Result<()> {
        let mut this = core::mem::ManuallyDrop::new(self);
        let r = this.unregister();
        // SAFETY: `this` is not used again and its drop does not run: its context handle
        // is released here, once.
        unsafe { core::ptr::drop_in_place(&mut this.ctx) };
        r
    }

    /// The synchronization (if used) and `cuMemHostUnregister`; the first error.
    fn unregister(&self) -> Result<()> {
        let g = self.ctx.enter()?;
        let synced = if self.used.load(Ordering::Acquire) {
            // SAFETY: no arguments; the context is current.
            unsafe { drv!(g.cu, cuCtxSynchronize()) }
        } else {
            Ok(())
        };
        // SAFETY: registered by `new`, unregistered once (by `end` or the drop); the
        // context's work that used it has finished, or failed with an error that stops
        // the context's work.
        let unregistered = unsafe { drv!(g.cu, cuMemHostUnregister(self.ptr.cast::<c_void>())) };
        synced.and(unregistered)
    }
}

impl<T: Copy> Drop for HostRegistration<'_, T> {
    /// `cuCtxSynchronize` if device work may have used the range, then
    /// `cuMemHostUnregister`; failures go to the drop-error sink.
    fn drop(&mut self) {
        let _g = crate::error::enter_for_drop!(self.ctx);
        if self.used.load(Ordering::Acquire) {
            // SAFETY: no arguments; the context is current.
            unsafe { dropping!(cuCtxSynchronize()) };
        }
        // SAFETY: registered by `new`, unregistered once; the context's work that used
        // it has finished.
        unsafe { dropping!(cuMemHostUnregister(self.ptr.cast::<c_void>())) };
    }
}
