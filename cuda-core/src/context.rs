//! Context management (driver API sections "Primary Context Management" and "Context
//! Management"): [`Context`], a device's primary context held for as long as it lives.
//!
//! Every handle bound to a context ([`Stream`](crate::Stream), [`Event`](crate::Event),
//! [`Module`](crate::Module), [`DeviceBuffer`](crate::DeviceBuffer), ...) borrows its
//! `Context` (`Thing<'ctx>`), so none can outlive it: they are dropped (destroyed)
//! before the context releases the primary context.
//!
//! The primary context is the one the CUDA runtime (`libcudart`) uses for the device:
//! memory, streams and events made here work with runtime calls and the other way round.

use core::marker::PhantomData;
use core::ptr;

use cuda_sys::{CUcontext, DriverApi};

use crate::Device;
use crate::driver::api;
use crate::error::{Result, drv};

/// How a [`Context`] gives up its handle when dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ownership {
    /// One primary-context reference: `cuDevicePrimaryCtxRelease`.
    Primary,
    /// A context made with `cuCtxCreate`: `cuCtxDestroy`.
    Created,
    /// Not ours: nothing.
    Borrowed,
}

/// A CUDA context: by default the device's primary context (`cuDevicePrimaryCtxRetain`),
/// released on drop (`cuDevicePrimaryCtxRelease`).
///
/// Not `Send`/`Sync`-restricted by the driver: a context may be used from any thread once
/// it is current there ([`Context::bind`]).
#[derive(Debug)]
pub struct Context {
    raw: CUcontext,
    device: Device,
    ownership: Ownership,
}

// SAFETY: a CUcontext is a process-wide handle; the driver synchronizes its use from
// several threads. The type holds no thread-local state.
unsafe impl Send for Context {}
// SAFETY: as above; `&Context` methods are driver calls the driver makes thread-safe.
unsafe impl Sync for Context {}

/// A stream priority range: lower numbers are higher priority, so `greatest <= least`
/// (`0` and `-5` on Hopper).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamPriorityRange {
    /// The least (numerically largest) priority; the default.
    pub least: i32,
    /// The greatest (numerically smallest) priority.
    pub greatest: i32,
}

impl Context {
    /// `cuDevicePrimaryCtxRetain`: retains `device`'s primary context (the one the CUDA
    /// runtime uses) and makes it current on this thread (`cuCtxSetCurrent`) unless it
    /// already is (`cuCtxGetCurrent`).
    ///
    /// ```no_run
    /// # fn main() -> cuda_core::Result<()> {
    /// let ctx = cuda_core::Context::primary(cuda_core::Device::get(0)?)?;
    /// ctx.synchronize()?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// Loader or driver errors.
    #[doc(alias = "cuDevicePrimaryCtxRetain")]
    pub fn primary(device: Device) -> Result<Self> {
        let cu = api()?;
        let mut raw = ptr::null_mut();
        // SAFETY: `raw` is a valid out-pointer.
        unsafe { drv!(cu, cuDevicePrimaryCtxRetain(&mut raw, device.as_raw()))? };
        let ctx = Self {
            raw,
            device,
            ownership: Ownership::Primary,
        };
        if current_raw(cu)? != raw {
            ctx.bind()?;
        }
        Ok(ctx)
    }

    /// [`Context::primary`] of device 0.
    ///
    /// # Errors
    /// As [`Device::get`] and [`Context::primary`].
    pub fn primary_of_first_device() -> Result<Self> {
        Self::primary(Device::get(0)?)
    }

    /// Takes over one reference to `device`'s primary context that the caller retained
    /// (`cuDevicePrimaryCtxRetain`); dropping the result releases it.
    ///
    /// # Safety
    /// `raw` must be `device`'s primary context, retained once by the caller, and the
    /// caller must not release that reference itself.
    pub unsafe fn from_raw_primary(raw: CUcontext, device: Device) -> Self {
        Self {
            raw,
            device,
            ownership: Ownership::Primary,
        }
    }

    /// Takes ownership of a context made with `cuCtxCreate` on `device`; dropping the
    /// result destroys it (`cuCtxDestroy`).
    ///
    /// # Safety
    /// `raw` must be a live context of `device` that nothing else destroys.
    pub unsafe fn from_raw(raw: CUcontext, device: Device) -> Self {
        Self {
            raw,
            device,
            ownership: Ownership::Created,
        }
    }

    /// Wraps a context owned elsewhere (a library's, the runtime's); dropping the result
    /// does nothing.
    ///
    /// # Safety
    /// `raw` must be a live context of `device` and stay alive for as long as the result
    /// and every handle made from it.
    pub unsafe fn borrow_raw(raw: CUcontext, device: Device) -> Self {
        Self {
            raw,
            device,
            ownership: Ownership::Borrowed,
        }
    }

    /// The raw `CUcontext`.
    pub fn as_raw(&self) -> CUcontext {
        self.raw
    }

    /// The device.
    pub fn device(&self) -> Device {
        self.device
    }

    /// `cuCtxSetCurrent`: makes this context current on the calling thread (to use it from
    /// another thread than the one that made it).
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuCtxSetCurrent")]
    pub fn bind(&self) -> Result<()> {
        let cu = api()?;
        // SAFETY: `raw` is a live context (type invariant).
        unsafe { drv!(cu, cuCtxSetCurrent(self.raw)) }
    }

    /// `cuCtxGetCurrent`: whether this context is current on the calling thread.
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuCtxGetCurrent")]
    pub fn is_current(&self) -> Result<bool> {
        Ok(current_raw(api()?)? == self.raw)
    }

    /// `cuCtxGetCurrent`: the calling thread's current context (null if none); this is
    /// also the context the CUDA runtime uses on this thread once it is initialized.
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuCtxGetCurrent")]
    pub fn current_raw() -> Result<CUcontext> {
        current_raw(api()?)
    }

    /// Whether this is `device`'s primary context, the context the CUDA runtime uses
    /// (checked by retaining the primary context, comparing and releasing it again).
    ///
    /// # Errors
    /// Driver errors.
    pub fn is_primary(&self) -> Result<bool> {
        let cu = api()?;
        let mut raw = ptr::null_mut();
        // SAFETY: valid out-pointer; the reference taken here is released below.
        unsafe {
            drv!(cu, cuDevicePrimaryCtxRetain(&mut raw, self.device.as_raw()))?;
            drv!(cu, cuDevicePrimaryCtxRelease(self.device.as_raw()))?;
        }
        Ok(raw == self.raw)
    }

    /// Makes this context current for the guard's lifetime if it is not already
    /// (`cuCtxPushCurrent` / `cuCtxPopCurrent`).
    pub(crate) fn enter(&self) -> Result<CurrentGuard<'_>> {
        let cu = api()?;
        if current_raw(cu)? == self.raw {
            return Ok(CurrentGuard {
                cu,
                pushed: false,
                _ctx: PhantomData,
            });
        }
        // SAFETY: `raw` is a live context (type invariant).
        unsafe { drv!(cu, cuCtxPushCurrent(self.raw))? };
        Ok(CurrentGuard {
            cu,
            pushed: true,
            _ctx: PhantomData,
        })
    }

    /// `cuCtxSynchronize`: waits for all work in the context.
    ///
    /// # Errors
    /// Driver errors, including those of earlier asynchronous work.
    #[doc(alias = "cuCtxSynchronize")]
    pub fn synchronize(&self) -> Result<()> {
        let g = self.enter()?;
        // SAFETY: no arguments; the context is current.
        unsafe { drv!(g.cu, cuCtxSynchronize()) }
    }

    /// `cuCtxGetFlags`: the context's flags (`CU_CTX_SCHED_*`, ...).
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuCtxGetFlags")]
    pub fn flags(&self) -> Result<u32> {
        let g = self.enter()?;
        let mut flags = 0;
        // SAFETY: valid out-pointer; the context is current.
        unsafe { drv!(g.cu, cuCtxGetFlags(&mut flags))? };
        Ok(flags)
    }

    /// `cuCtxSetFlags`: sets the context's flags.
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuCtxSetFlags")]
    pub fn set_flags(&self, flags: u32) -> Result<()> {
        let g = self.enter()?;
        // SAFETY: plain value; the context is current.
        unsafe { drv!(g.cu, cuCtxSetFlags(flags)) }
    }

    /// `cuCtxGetStreamPriorityRange`: the priorities streams of this context can have.
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuCtxGetStreamPriorityRange")]
    pub fn stream_priority_range(&self) -> Result<StreamPriorityRange> {
        let g = self.enter()?;
        let (mut least, mut greatest) = (0, 0);
        // SAFETY: valid out-pointers; the context is current.
        unsafe { drv!(g.cu, cuCtxGetStreamPriorityRange(&mut least, &mut greatest))? };
        Ok(StreamPriorityRange { least, greatest })
    }

    /// `cuCtxGetApiVersion`: the API version the context was made with.
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuCtxGetApiVersion")]
    pub fn api_version(&self) -> Result<u32> {
        let cu = api()?;
        let mut v = 0;
        // SAFETY: live context, valid out-pointer.
        unsafe { drv!(cu, cuCtxGetApiVersion(self.raw, &mut v))? };
        Ok(v)
    }
}

impl Drop for Context {
    /// Releases the primary context (`cuDevicePrimaryCtxRelease`) or destroys a created
    /// one (`cuCtxDestroy`); errors are ignored.
    fn drop(&mut self) {
        let Ok(cu) = api() else { return };
        // SAFETY: the handle is ours to give up (type invariant) and nothing borrows the
        // context any more (every bound handle borrows it).
        unsafe {
            match self.ownership {
                Ownership::Primary => {
                    if let Ok(f) = cu.cuDevicePrimaryCtxRelease() {
                        let _ = f(self.device.as_raw());
                    }
                }
                Ownership::Created => {
                    if let Ok(f) = cu.cuCtxDestroy() {
                        let _ = f(self.raw);
                    }
                }
                Ownership::Borrowed => {}
            }
        }
    }
}

fn current_raw(cu: &DriverApi) -> Result<CUcontext> {
    let mut cur = ptr::null_mut();
    // SAFETY: `cur` is a valid out-pointer.
    unsafe { drv!(cu, cuCtxGetCurrent(&mut cur))? };
    Ok(cur)
}

/// Keeps a context current until dropped; pops it if it pushed it.
pub(crate) struct CurrentGuard<'a> {
    pub(crate) cu: &'static DriverApi,
    pushed: bool,
    /// Borrows the context; `*const` keeps the guard on the thread that pushed.
    _ctx: PhantomData<(&'a Context, *const ())>,
}

impl Drop for CurrentGuard<'_> {
    fn drop(&mut self) {
        if self.pushed {
            let mut popped = ptr::null_mut();
            // SAFETY: this guard pushed a context on this thread; popping restores the
            // previous one.
            if let Ok(f) = self.cu.cuCtxPopCurrent() {
                let _ = unsafe { f(&mut popped) };
            }
        }
    }
}

/// A `PhantomData` marking a handle as bound to a context for `'ctx`.
pub(crate) type CtxMarker<'ctx> = PhantomData<&'ctx Context>;
