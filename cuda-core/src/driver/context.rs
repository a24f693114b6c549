//! Context management (driver API sections "Primary Context Management" and "Context
//! Management"): [`Context`], a shared owner of a CUDA context.
//!
//! Every handle made in a context ([`Stream`](crate::Stream), [`Event`](crate::Event),
//! [`Module`](crate::Module), [`DeviceBuffer`](crate::DeviceBuffer), ...) keeps a clone of
//! its `Context`, so the context lives until the last of them is dropped, and each of
//! them can make the context current on whatever thread it is used from. Handles have no
//! lifetime parameter tied to the context: an application keeps them in a struct like
//! any other value.
//!
//! Cloning is a reference count (`Arc` with `alloc`; without it a slot of a fixed
//! static pool of [`MAX_CONTEXTS`] entries, see `refcount.rs`). The last drop releases the
//! primary context (`cuDevicePrimaryCtxRelease`) or destroys a created one
//! (`cuCtxDestroy`).
//!
//! The primary context is the one the CUDA runtime (`libcudart`) uses for the device:
//! memory, streams and events made here work with runtime calls and the other way round.

use core::marker::PhantomData;
use core::ptr;

use cudadrv_sys::{CUcontext, CUctx_flags, DriverApi};

use crate::Device;
use crate::driver::api;
use crate::driver::dropping;
use crate::driver::refcount::{Shared, pooled};
use crate::error::{Error, Result, drv};

/// Without `alloc`, how many distinct contexts (each [`Context::primary`] or
/// [`Context::create`] call, not clones) can be alive at once.
pub const MAX_CONTEXTS: usize = 32;

crate::flags::flags! {
    /// `CUctx_flags`: how a context schedules the host thread that waits for the GPU and
    /// what it enables, for [`Context::create`], [`Context::flags`] /
    /// [`Context::set_flags`] and the primary context's
    /// ([`Device::set_primary_context_flags`]).
    ///
    /// The empty set is `CU_CTX_SCHED_AUTO`: spin while the GPU has fewer active contexts
    /// than the host has logical cores, yield otherwise. At most one `SCHED_*` flag may
    /// be set. Bits the type does not name are kept as they are
    /// (`from_bits_retain`), so flags of a newer driver survive a round trip.
    #[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
    pub struct ContextFlags: u32 {
        /// `CU_CTX_SCHED_SPIN`: spin while waiting for the GPU (lowest latency, one busy
        /// core per waiting thread).
        const SCHED_SPIN = CUctx_flags::CU_CTX_SCHED_SPIN.0;
        /// `CU_CTX_SCHED_YIELD`: yield the thread while waiting.
        const SCHED_YIELD = CUctx_flags::CU_CTX_SCHED_YIELD.0;
        /// `CU_CTX_SCHED_BLOCKING_SYNC`: block the thread on a synchronization primitive
        /// while waiting.
        const SCHED_BLOCKING_SYNC = CUctx_flags::CU_CTX_SCHED_BLOCKING_SYNC.0;
        /// `CU_CTX_MAP_HOST`: support mapped pinned host memory (always on with unified
        /// addressing, which every 64-bit platform CUDA 12 supports has).
        const MAP_HOST = CUctx_flags::CU_CTX_MAP_HOST.0;
        /// `CU_CTX_LMEM_RESIZE_TO_MAX`: keep local memory at the largest size a launch
        /// needed instead of shrinking it.
        const LMEM_RESIZE_TO_MAX = CUctx_flags::CU_CTX_LMEM_RESIZE_TO_MAX.0;
        /// `CU_CTX_COREDUMP_ENABLE`: write a GPU core dump on an exception in this
        /// context.
        const COREDUMP_ENABLE = CUctx_flags::CU_CTX_COREDUMP_ENABLE.0;
        /// `CU_CTX_USER_COREDUMP_ENABLE`: allow user-triggered core dumps of this context.
        const USER_COREDUMP_ENABLE = CUctx_flags::CU_CTX_USER_COREDUMP_ENABLE.0;
        /// `CU_CTX_SYNC_MEMOPS`: synchronous memory operations on this context's memory
        /// are always synchronous (as `CU_POINTER_ATTRIBUTE_SYNC_MEMOPS` for each
        /// allocation).
        const SYNC_MEMOPS = CUctx_flags::CU_CTX_SYNC_MEMOPS.0;
    }
}

/// How a context is given up when its last [`Context`] clone is dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ownership {
    /// One primary-context reference: `cuDevicePrimaryCtxRelease`.
    Primary,
    /// A context made with `cuCtxCreate`: `cuCtxDestroy`.
    Created,
    /// Not ours: nothing.
    Borrowed,
    /// Made from this green context with `cuCtxFromGreenCtx`: `cuGreenCtxDestroy` of the
    /// green context (which also releases the primary context it retained).
    #[cfg(feature = "green")]
    Green(cudadrv_sys::CUgreenCtx),
}

/// What the clones of a [`Context`] share.
#[derive(Debug)]
pub(crate) struct CtxInner {
    raw: CUcontext,
    device: Device,
    ownership: Ownership,
}

// SAFETY: a CUcontext is a process-wide handle the driver synchronizes; the type holds
// no thread-local state.
unsafe impl Send for CtxInner {}
// SAFETY: as above.
unsafe impl Sync for CtxInner {}

impl Drop for CtxInner {
    /// Releases the primary context or destroys a created one; failures go to the
    /// drop-error sink ([`crate::error::set_drop_error_hook`]).
    fn drop(&mut self) {
        // SAFETY: the last clone is gone and every handle made in the context held one,
        // so nothing uses the context any more; the reference is ours to give up.
        unsafe {
            match self.ownership {
                Ownership::Primary => dropping!(cuDevicePrimaryCtxRelease(self.device.as_raw())),
                Ownership::Created => dropping!(cuCtxDestroy(self.raw)),
                Ownership::Borrowed => {}
                #[cfg(feature = "green")]
                Ownership::Green(green) => dropping!(cuGreenCtxDestroy(green)),
            }
        }
    }
}

pooled!(CtxInner, MAX_CONTEXTS);

/// A CUDA context: by default the device's primary context (`cuDevicePrimaryCtxRetain`).
///
/// A shared owner: [`Clone`] adds a reference, and the context is released
/// (`cuDevicePrimaryCtxRelease`) or destroyed (`cuCtxDestroy`) when the last clone, and
/// with it the last handle made in it, is dropped. `Send + Sync`: every method (and every
/// method of the handles made in it) makes the context current on the calling thread for
/// the call when it is not already.
///
/// ```no_run
/// # fn main() -> cudadrv::Result<()> {
/// use cudadrv::{Context, Device, DeviceBuffer, Stream, StreamFlags};
///
/// // GPU state kept in a struct: no lifetimes tie the fields to each other.
/// struct Gpu {
///     ctx: Context,
///     stream: Stream,
///     data: DeviceBuffer<f32>,
/// }
/// let ctx = Context::primary(Device::get(0)?)?;
/// let gpu = Gpu {
///     stream: Stream::new(&ctx, StreamFlags::NON_BLOCKING)?,
///     data: DeviceBuffer::zeroed(&ctx, 1024)?,
///     ctx,
/// };
/// std::thread::spawn(move || gpu.stream.synchronize()).join().unwrap()?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Context {
    inner: Shared<CtxInner>,
}

impl core::fmt::Debug for Context {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Context")
            .field("raw", &self.inner.raw)
            .field("device", &self.inner.device)
            .field("ownership", &self.inner.ownership)
            .finish()
    }
}

impl PartialEq for Context {
    /// The same driver context (`CUcontext`), whichever clone or wrapper.
    fn eq(&self, other: &Self) -> bool {
        self.inner.raw == other.inner.raw
    }
}
impl Eq for Context {}

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
    /// # fn main() -> cudadrv::Result<()> {
    /// let ctx = cudadrv::Context::primary(cudadrv::Device::get(0)?)?;
    /// ctx.synchronize()?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// Loader or driver errors.
    #[doc(alias = "cuDevicePrimaryCtxRetain")]
    pub fn primary(device: Device) -> Result<Self> {
        let ctx = Self::retain_primary(device)?;
        let cu = api()?;
        if current_raw(cu)? != ctx.as_raw() {
            ctx.bind()?;
        }
        Ok(ctx)
    }

    /// `cuDevicePrimaryCtxRetain` alone: `device`'s primary context, retained (released
    /// when the last clone drops), with no other effect: the calling thread's current
    /// context stays what it was. For a library embedded in a framework that manages
    /// the current context itself (every call of this crate makes its context current
    /// for the call and restores the previous one).
    ///
    /// # Errors
    /// Loader or driver errors.
    #[doc(alias = "cuDevicePrimaryCtxRetain")]
    pub fn retain_primary(device: Device) -> Result<Self> {
        let cu = api()?;
        let mut raw = ptr::null_mut();
        // SAFETY: `raw` is a valid out-pointer.
        unsafe { drv!(cu, cuDevicePrimaryCtxRetain(&mut raw, device.as_raw()))? };
        Self::share(CtxInner {
            raw,
            device,
            ownership: Ownership::Primary,
        })
    }

    /// The calling thread's current context, without changing it: `None` when none is
    /// current; the primary context of its device, retained, when that is the current
    /// one (what the CUDA runtime, PyTorch and CuPy make current).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the current context is not a primary context (a
    /// context another library created, whose lifetime this crate cannot hold:
    /// [`Context::borrow_raw`] is the `unsafe` form for it); driver errors.
    #[doc(alias = "cuCtxGetCurrent")]
    pub fn current() -> Result<Option<Self>> {
        let cu = api()?;
        let raw = current_raw(cu)?;
        if raw.is_null() {
            return Ok(None);
        }
        let device = Device::current()?;
        let primary = Self::retain_primary(device)?;
        if primary.as_raw() == raw {
            Ok(Some(primary))
        } else {
            Err(Error::InvalidArgument(
                "the current context is not its device's primary context (wrap it with the \
                 unsafe Context::borrow_raw)",
            ))
        }
    }

    /// `cuCtxCreate`: a new (non-primary) context on `device` with `flags`, made current on
    /// the calling thread as the driver does; destroyed (`cuCtxDestroy`) when the last
    /// clone and the last handle made in it are dropped.
    ///
    /// Prefer [`Context::primary`] unless you need a context of your own: the CUDA
    /// runtime and most libraries use the primary one, and memory of one context is not
    /// usable in kernels of another. Like every [`Context`], the result is `Send + Sync`
    /// and each handle made in it makes it current where it is used, so it works from
    /// any thread.
    ///
    /// ```no_run
    /// # fn main() -> cudadrv::Result<()> {
    /// use cudadrv::{Context, ContextFlags, Device};
    /// let ctx = Context::create(Device::get(0)?, ContextFlags::SCHED_BLOCKING_SYNC)?;
    /// assert!(ctx.flags()?.contains(ContextFlags::SCHED_BLOCKING_SYNC));
    /// std::thread::spawn(move || ctx.synchronize()).join().unwrap()?;
    /// # Ok(()) }
    /// ```
    ///
    /// Uses `cuCtxCreate_v4` where the driver has it (CUDA 12.5+), else `cuCtxCreate_v2`.
    ///
    /// # Errors
    /// Driver errors (`CUDA_ERROR_INVALID_VALUE` for more than one `SCHED_*` flag).
    #[doc(alias = "cuCtxCreate")]
    #[doc(alias = "cuCtxCreate_v4")]
    pub fn create(device: Device, flags: ContextFlags) -> Result<Self> {
        let cu = api()?;
        let mut raw = ptr::null_mut();
        // cuCtxCreate_v4 (CUDA 12.5) or, on an older driver, cuCtxCreate_v2: the same
        // call without creation parameters, which this one passes none of.
        let rc = match (cu.cuCtxCreate(), cu.cuCtxCreate_v3020()) {
            // SAFETY: valid out-pointer; no creation parameters (null), plain flags.
            (Ok(f), _) => unsafe { f(&mut raw, ptr::null_mut(), flags.bits(), device.as_raw()) },
            // SAFETY: valid out-pointer, plain flags.
            (Err(_), Ok(f)) => unsafe { f(&mut raw, flags.bits(), device.as_raw()) },
            (Err(missing), Err(_)) => return Err(missing.into()),
        };
        crate::error::call(rc, "cuCtxCreate")?;
        Self::share(CtxInner {
            raw,
            device,
            ownership: Ownership::Created,
        })
    }

    /// Puts `inner` behind the reference count; without `alloc` and a free pool slot,
    /// gives the context up again (dropping `inner`) and fails.
    fn share(inner: CtxInner) -> Result<Self> {
        Shared::new(inner)
            .map(|inner| Self { inner })
            .map_err(|inner| {
                drop(inner);
                Error::InvalidArgument("too many live contexts (MAX_CONTEXTS without `alloc`)")
            })
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
    ///
    /// # Errors
    /// Without `alloc`, when [`MAX_CONTEXTS`] contexts are alive (the reference is
    /// released again).
    pub unsafe fn from_raw_primary(raw: CUcontext, device: Device) -> Result<Self> {
        Self::share(CtxInner {
            raw,
            device,
            ownership: Ownership::Primary,
        })
    }

    /// Takes ownership of a context made with `cuCtxCreate` on `device`; dropping the
    /// result destroys it (`cuCtxDestroy`).
    ///
    /// # Safety
    /// `raw` must be a live context of `device` that nothing else destroys.
    ///
    /// # Errors
    /// Without `alloc`, when [`MAX_CONTEXTS`] contexts are alive (the context is
    /// destroyed again).
    pub unsafe fn from_raw(raw: CUcontext, device: Device) -> Result<Self> {
        Self::share(CtxInner {
            raw,
            device,
            ownership: Ownership::Created,
        })
    }

    /// Wraps a context owned elsewhere (a library's, the runtime's); dropping the result
    /// does nothing.
    ///
    /// # Safety
    /// `raw` must be a live context of `device` and stay alive for as long as the result,
    /// its clones and every handle made from them.
    ///
    /// # Errors
    /// Without `alloc`, when [`MAX_CONTEXTS`] contexts are alive.
    pub unsafe fn borrow_raw(raw: CUcontext, device: Device) -> Result<Self> {
        Self::share(CtxInner {
            raw,
            device,
            ownership: Ownership::Borrowed,
        })
    }

    /// A context made from a green context with `cuCtxFromGreenCtx`, owning it
    /// (`cuGreenCtxDestroy` when the last clone drops); see
    /// `Context::from_green` in the green-context module.
    #[cfg(feature = "green")]
    pub(crate) fn adopt_green(
        raw: CUcontext,
        device: Device,
        green: cudadrv_sys::CUgreenCtx,
    ) -> Result<Self> {
        Self::share(CtxInner {
            raw,
            device,
            ownership: Ownership::Green(green),
        })
    }

    /// The green context this context was made from (`Context::from_green`), if any.
    #[cfg(feature = "green")]
    pub fn green_raw(&self) -> Option<cudadrv_sys::CUgreenCtx> {
        match self.inner.ownership {
            Ownership::Green(green) => Some(green),
            _ => None,
        }
    }

    /// The raw `CUcontext`.
    #[inline]
    pub fn as_raw(&self) -> CUcontext {
        self.inner.raw
    }

    /// The device.
    pub fn device(&self) -> Device {
        self.inner.device
    }

    /// [`Error::ContextMismatch`] naming `call` unless `other` is the same driver
    /// context: the rule of every safe call that queues work naming memory or an
    /// executable graph on a stream (one comparison).
    #[inline]
    pub(crate) fn ensure_same(&self, other: &Context, call: &'static str) -> Result<()> {
        if self.inner.raw == other.inner.raw {
            Ok(())
        } else {
            Err(crate::error::Error::ContextMismatch { call })
        }
    }

    /// Whether `a` and `b` are clones of one [`Context`] value (the same reference
    /// count), not merely the same driver context.
    pub fn ptr_eq(a: &Self, b: &Self) -> bool {
        Shared::ptr_eq(&a.inner, &b.inner)
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
        unsafe { drv!(cu, cuCtxSetCurrent(self.inner.raw)) }
    }

    /// `cuCtxGetCurrent`: whether this context is current on the calling thread.
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuCtxGetCurrent")]
    pub fn is_current(&self) -> Result<bool> {
        Ok(current_raw(api()?)? == self.inner.raw)
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
            drv!(
                cu,
                cuDevicePrimaryCtxRetain(&mut raw, self.inner.device.as_raw())
            )?;
            drv!(cu, cuDevicePrimaryCtxRelease(self.inner.device.as_raw()))?;
        }
        Ok(raw == self.inner.raw)
    }

    /// Makes this context current for the guard's lifetime if it is not already
    /// (`cuCtxPushCurrent` / `cuCtxPopCurrent`).
    #[inline]
    pub(crate) fn enter(&self) -> Result<CurrentGuard<'_>> {
        // SAFETY: `self` keeps the context alive for the guard's lifetime.
        unsafe { enter_raw(self.inner.raw) }
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

    /// `cuCtxGetFlags`: the context's flags (bits the type does not name are kept).
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuCtxGetFlags")]
    pub fn flags(&self) -> Result<ContextFlags> {
        let g = self.enter()?;
        let mut flags = 0;
        // SAFETY: valid out-pointer; the context is current.
        unsafe { drv!(g.cu, cuCtxGetFlags(&mut flags))? };
        Ok(ContextFlags::from_bits_retain(flags))
    }

    /// `cuCtxSetFlags`: sets the context's flags.
    ///
    /// # Errors
    /// [`Error::DriverTooOld`] before CUDA 12.1; driver
    /// errors.
    #[doc(alias = "cuCtxSetFlags")]
    pub fn set_flags(&self, flags: ContextFlags) -> Result<()> {
        let g = self.enter()?;
        // SAFETY: plain value; the context is current.
        unsafe { drv!(g.cu, cuCtxSetFlags(flags.bits())) }
    }

    /// `cuMemGetInfo`: `(free, total)` device memory in bytes, as the driver sees it
    /// from this context (made current for the call). `free` counts memory every
    /// process and context on the device has not allocated, so it may change between
    /// two calls without this process doing anything.
    ///
    /// ```no_run
    /// # fn main() -> cudadrv::Result<()> {
    /// let ctx = cudadrv::Context::primary(cudadrv::Device::get(0)?)?;
    /// let (free, total) = ctx.mem_info()?;
    /// assert!(free <= total);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuMemGetInfo")]
    #[doc(alias = "cuMemGetInfo_v2")]
    pub fn mem_info(&self) -> Result<(usize, usize)> {
        let g = self.enter()?;
        let (mut free, mut total) = (0usize, 0usize);
        // SAFETY: valid out-pointers; the context is current.
        unsafe { drv!(g.cu, cuMemGetInfo(&mut free, &mut total))? };
        Ok((free, total))
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
        unsafe { drv!(cu, cuCtxGetApiVersion(self.inner.raw, &mut v))? };
        Ok(v)
    }
}

fn current_raw(cu: &DriverApi) -> Result<CUcontext> {
    let mut cur = ptr::null_mut();
    // SAFETY: `cur` is a valid out-pointer.
    unsafe { drv!(cu, cuCtxGetCurrent(&mut cur))? };
    Ok(cur)
}

/// Makes `raw` current on this thread for the guard's lifetime if it is not already
/// (`cuCtxGetCurrent`, then `cuCtxPushCurrent` / `cuCtxPopCurrent` only when needed).
///
/// # Safety
/// `raw` must be a live context for the guard's lifetime `'a`.
#[inline]
pub(crate) unsafe fn enter_raw<'a>(raw: CUcontext) -> Result<CurrentGuard<'a>> {
    let cu = api()?;
    if current_raw(cu)? == raw {
        return Ok(CurrentGuard {
            cu,
            pushed: false,
            _ctx: PhantomData,
        });
    }
    // SAFETY: `raw` is a live context (the caller's promise).
    unsafe { drv!(cu, cuCtxPushCurrent(raw))? };
    Ok(CurrentGuard {
        cu,
        pushed: true,
        _ctx: PhantomData,
    })
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
            // (A failure is reported, not returned: there is nothing to return it to.)
            match self.cu.cuCtxPopCurrent() {
                Ok(f) => crate::error::report_drop("cuCtxPopCurrent", unsafe { f(&mut popped) }),
                Err(_) => crate::error::report_drop(
                    "cuCtxPopCurrent",
                    cudadrv_sys::CUresult::CUDA_ERROR_NOT_INITIALIZED,
                ),
            }
        }
    }
}

/// Primary context management (driver API section "Primary Context Management"): the
/// device's primary context, its flags, and its reset.
impl Device {
    /// `cuDevicePrimaryCtxGetState`: the primary context's flags and whether it is
    /// active (retained by someone, a [`Context::primary`](crate::Context::primary) or
    /// the CUDA runtime, and not reset since).
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuDevicePrimaryCtxGetState")]
    pub fn primary_context_state(self) -> Result<(ContextFlags, bool)> {
        let cu = api()?;
        let (mut flags, mut active) = (0u32, 0i32);
        // SAFETY: valid out-pointers.
        unsafe {
            drv!(
                cu,
                cuDevicePrimaryCtxGetState(self.as_raw(), &mut flags, &mut active)
            )?
        };
        Ok((ContextFlags::from_bits_retain(flags), active != 0))
    }

    /// `cuDevicePrimaryCtxSetFlags`: the flags the primary context gets when it is next
    /// created, or now if it is active (then only the `SCHED_*` flags can change).
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuDevicePrimaryCtxSetFlags")]
    pub fn set_primary_context_flags(self, flags: ContextFlags) -> Result<()> {
        let cu = api()?;
        // SAFETY: plain value arguments.
        unsafe { drv!(cu, cuDevicePrimaryCtxSetFlags(self.as_raw(), flags.bits())) }
    }

    /// `cuDevicePrimaryCtxReset`: destroys every allocation and resets all state of the
    /// device's primary context in this process (the runtime's `cudaDeviceReset`). The
    /// next [`Context::primary`](crate::Context::primary) (or runtime call) starts a fresh
    /// one. Outstanding retains are not released: `Context` values of the old context
    /// stay counted and release their reference when dropped, which the driver allows
    /// after a reset.
    ///
    /// ```no_run
    /// # fn main() -> cudadrv::Result<()> {
    /// use cudadrv::{Context, Device, DeviceBuffer};
    /// let dev = Device::get(0)?;
    /// {
    ///     let ctx = Context::primary(dev)?;
    ///     let buf = DeviceBuffer::<u32>::zeroed(&ctx, 1 << 20)?;
    ///     drop(buf); // every handle made in the context is gone...
    /// } // ...and so is every `Context` value of it
    /// // SAFETY: no handle of the primary context exists, and no library uses it.
    /// unsafe { dev.primary_context_reset()? };
    /// let fresh = Context::primary(dev)?;
    /// # drop(fresh); Ok(()) }
    /// ```
    ///
    /// # Safety
    /// The reset frees everything made in the primary context, behind the back of the
    /// handles that own it, and a later allocation may reuse the same addresses. So:
    /// - every handle made in this device's primary context before the call (buffers,
    ///   pinned host buffers, streams, events, modules, functions, graphs, executable
    ///   graphs, memory pools) must be dropped before it, or leaked (`mem::forget`,
    ///   [`DeviceBuffer::into_raw`](crate::DeviceBuffer::into_raw)) and never used:
    ///   dropping one afterwards frees an address that may belong to someone else by
    ///   then, and using one touches freed memory (pinned host memory is host memory);
    /// - a [`Context`] of the old primary context that is still alive
    ///   may only be dropped afterwards; retain a new one with
    ///   [`Context::primary`](crate::Context::primary);
    /// - nothing else in the process (the CUDA runtime, other libraries, other threads)
    ///   may be using the primary context or its memory.
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuDevicePrimaryCtxReset")]
    #[doc(alias = "cudaDeviceReset")]
    pub unsafe fn primary_context_reset(self) -> Result<()> {
        let cu = api()?;
        // SAFETY: plain value argument; that nothing uses the context's resources any
        // more is the caller's promise.
        unsafe { drv!(cu, cuDevicePrimaryCtxReset(self.as_raw())) }
    }
}

impl Device {
    /// `cuCtxGetDevice`: the device of the calling thread's current context, without
    /// changing anything.
    ///
    /// # Errors
    /// `CUDA_ERROR_INVALID_CONTEXT` when no context is current; driver errors.
    #[doc(alias = "cuCtxGetDevice")]
    pub fn current() -> Result<Self> {
        let cu = api()?;
        let mut raw = 0;
        // SAFETY: valid out-pointer; reads the current context only.
        unsafe { drv!(cu, cuCtxGetDevice(&mut raw))? };
        Ok(Self::from_raw(raw))
    }
}
