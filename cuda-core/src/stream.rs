//! Stream management (driver API section "Stream Management"): [`Stream`], an ordered
//! queue of work bound to a [`Context`], with flags, priority, query, synchronization,
//! cross-stream waits and host functions.

use core::ffi::c_void;
use core::ptr;

use cuda_sys::{CUresult, CUstream};

use crate::context::{Context, CtxMarker};
use crate::driver::api;
use crate::error::{Error, Result, drv};
use crate::event::Event;

bitflags::bitflags! {
    /// `CUstream_flags` for [`Stream::new`].
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub struct StreamFlags: u32 {
        /// `CU_STREAM_NON_BLOCKING`: does not synchronize with the legacy default stream.
        const NON_BLOCKING = cuda_sys::CUstream_flags::CU_STREAM_NON_BLOCKING.0;
    }
}

bitflags::bitflags! {
    /// `CUevent_wait_flags` for [`Stream::wait_event_with_flags`].
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub struct EventWaitFlags: u32 {
        /// `CU_EVENT_WAIT_EXTERNAL`: the wait is captured as an external-event node.
        const EXTERNAL = cuda_sys::CUevent_wait_flags::CU_EVENT_WAIT_EXTERNAL.0;
    }
}

/// A CUDA stream (`CUstream`) of a context, destroyed on drop (`cuStreamDestroy`).
///
/// The default streams ([`Stream::legacy`], [`Stream::per_thread`]) are borrowed: their
/// drop does nothing.
#[derive(Debug)]
pub struct Stream<'ctx> {
    raw: CUstream,
    owned: bool,
    _ctx: CtxMarker<'ctx>,
}

// SAFETY: a CUstream may be used from any thread; the driver synchronizes it.
unsafe impl Send for Stream<'_> {}
// SAFETY: as above; every `&self` method is one driver call.
unsafe impl Sync for Stream<'_> {}

impl<'ctx> Stream<'ctx> {
    /// `cuStreamCreate`: a new stream with `flags`.
    ///
    /// ```no_run
    /// # fn main() -> cuda_core::Result<()> {
    /// use cuda_core::{Context, Device, Stream, StreamFlags};
    /// let ctx = Context::primary(Device::get(0)?)?;
    /// let stream = Stream::new(&ctx, StreamFlags::NON_BLOCKING)?;
    /// stream.synchronize()?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuStreamCreate")]
    pub fn new(ctx: &'ctx Context, flags: StreamFlags) -> Result<Self> {
        let g = ctx.enter()?;
        let mut raw = ptr::null_mut();
        // SAFETY: valid out-pointer; the context is current.
        unsafe { drv!(g.cu, cuStreamCreate(&mut raw, flags.bits()))? };
        Ok(Self {
            raw,
            owned: true,
            _ctx: CtxMarker::default(),
        })
    }

    /// `cuStreamCreate` with `CU_STREAM_NON_BLOCKING`.
    ///
    /// # Errors
    /// Driver errors.
    pub fn non_blocking(ctx: &'ctx Context) -> Result<Self> {
        Self::new(ctx, StreamFlags::NON_BLOCKING)
    }

    /// `cuStreamCreateWithPriority`: a new stream with `flags` and `priority` (see
    /// [`Context::stream_priority_range`]; lower is higher priority, the driver clamps
    /// values outside the range).
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuStreamCreateWithPriority")]
    pub fn with_priority(ctx: &'ctx Context, flags: StreamFlags, priority: i32) -> Result<Self> {
        let g = ctx.enter()?;
        let mut raw = ptr::null_mut();
        // SAFETY: valid out-pointer; the context is current.
        unsafe {
            drv!(
                g.cu,
                cuStreamCreateWithPriority(&mut raw, flags.bits(), priority)
            )?
        };
        Ok(Self {
            raw,
            owned: true,
            _ctx: CtxMarker::default(),
        })
    }

    /// The legacy default stream (`CU_STREAM_LEGACY`) of the context; not destroyed.
    pub fn legacy(_ctx: &'ctx Context) -> Self {
        Self {
            raw: cuda_sys::CU_STREAM_LEGACY,
            owned: false,
            _ctx: CtxMarker::default(),
        }
    }

    /// The calling thread's per-thread default stream (`CU_STREAM_PER_THREAD`); not
    /// destroyed.
    pub fn per_thread(_ctx: &'ctx Context) -> Self {
        Self {
            raw: cuda_sys::CU_STREAM_PER_THREAD,
            owned: false,
            _ctx: CtxMarker::default(),
        }
    }

    /// Takes ownership of a stream of `ctx`; dropping the result destroys it.
    ///
    /// # Safety
    /// `raw` must be a live stream of `ctx` that nothing else destroys.
    pub unsafe fn from_raw(raw: CUstream, _ctx: &'ctx Context) -> Self {
        Self {
            raw,
            owned: true,
            _ctx: CtxMarker::default(),
        }
    }

    /// Wraps a stream owned elsewhere (a library's); dropping the result does nothing.
    ///
    /// # Safety
    /// `raw` must be a stream of `ctx` (or a default-stream handle) that stays alive for
    /// as long as the result.
    pub unsafe fn borrow_raw(raw: CUstream, _ctx: &'ctx Context) -> Self {
        Self {
            raw,
            owned: false,
            _ctx: CtxMarker::default(),
        }
    }

    /// The raw `CUstream`.
    pub fn as_raw(&self) -> CUstream {
        self.raw
    }

    /// Gives up ownership: returns the raw handle, which the caller must destroy.
    pub fn into_raw(self) -> CUstream {
        let raw = self.raw;
        core::mem::forget(self);
        raw
    }

    /// `cuStreamGetPriority`: the stream's priority.
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuStreamGetPriority")]
    pub fn priority(&self) -> Result<i32> {
        let cu = api()?;
        let mut p = 0;
        // SAFETY: live stream, valid out-pointer.
        unsafe { drv!(cu, cuStreamGetPriority(self.raw, &mut p))? };
        Ok(p)
    }

    /// `cuStreamGetFlags`: the stream's flags.
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuStreamGetFlags")]
    pub fn flags(&self) -> Result<StreamFlags> {
        let cu = api()?;
        let mut f = 0;
        // SAFETY: live stream, valid out-pointer.
        unsafe { drv!(cu, cuStreamGetFlags(self.raw, &mut f))? };
        Ok(StreamFlags::from_bits_retain(f))
    }

    /// `cuStreamQuery`: `true` when all work queued so far has completed, `false` while
    /// some is pending (`CUDA_ERROR_NOT_READY`).
    ///
    /// # Errors
    /// Driver errors other than `CUDA_ERROR_NOT_READY`.
    #[doc(alias = "cuStreamQuery")]
    pub fn query(&self) -> Result<bool> {
        let cu = api()?;
        // SAFETY: live stream.
        let rc = unsafe { cu.cuStreamQuery()?(self.raw) };
        ready(rc, "cuStreamQuery")
    }

    /// `cuStreamSynchronize`: waits until all work queued so far has completed.
    ///
    /// # Errors
    /// Driver errors, including those of the stream's asynchronous work.
    #[doc(alias = "cuStreamSynchronize")]
    pub fn synchronize(&self) -> Result<()> {
        let cu = api()?;
        // SAFETY: live stream.
        unsafe { drv!(cu, cuStreamSynchronize(self.raw)) }
    }

    /// `cuStreamWaitEvent`: later work on this stream waits for `event`'s last record.
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuStreamWaitEvent")]
    pub fn wait_event(&self, event: &Event<'_>) -> Result<()> {
        self.wait_event_with_flags(event, EventWaitFlags::empty())
    }

    /// `cuStreamWaitEvent` with flags.
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuStreamWaitEvent")]
    pub fn wait_event_with_flags(&self, event: &Event<'_>, flags: EventWaitFlags) -> Result<()> {
        let cu = api()?;
        // SAFETY: live stream and event.
        unsafe {
            drv!(
                cu,
                cuStreamWaitEvent(self.raw, event.as_raw(), flags.bits())
            )
        }
    }

    /// `cuLaunchHostFunc`: runs `f` on a driver thread once the work queued before it has
    /// completed; later work waits for it.
    ///
    /// The closure is boxed; a trampoline runs it exactly once and frees it. If the
    /// driver refuses the call, the closure is dropped (not run) before the error returns.
    /// If the stream fails after accepting it (an earlier kernel faults and the context
    /// is lost), the driver never runs it and it leaks: it is never freed twice.
    ///
    /// `f` must not call CUDA functions (a driver rule for host functions). A panic in
    /// `f` aborts the process (it cannot unwind into the driver).
    ///
    /// # Errors
    /// Driver errors.
    #[cfg(feature = "alloc")]
    #[doc(alias = "cuLaunchHostFunc")]
    pub fn launch_host_fn<F>(&self, f: F) -> Result<()>
    where
        F: FnOnce() + Send + 'static,
    {
        unsafe extern "C" fn trampoline<F: FnOnce()>(data: *mut c_void) {
            // SAFETY: `data` is the `Box<F>` leaked below, handed to the driver once; the
            // driver calls this once, so the box is reclaimed exactly once.
            let f = unsafe { alloc::boxed::Box::from_raw(data.cast::<F>()) };
            f();
        }
        let cu = api()?;
        let launch = cu.cuLaunchHostFunc()?;
        let data = alloc::boxed::Box::into_raw(alloc::boxed::Box::new(f)).cast::<c_void>();
        // SAFETY: live stream; `trampoline::<F>` matches `data`'s type; `F: Send + 'static`
        // so running it on the driver's thread at any later time is sound.
        let rc = unsafe { launch(self.raw, Some(trampoline::<F>), data) };
        if !rc.is_success() {
            // SAFETY: the driver did not take `data`; reclaim and drop it.
            drop(unsafe { alloc::boxed::Box::from_raw(data.cast::<F>()) });
        }
        crate::error::call(rc, "cuLaunchHostFunc")
    }

    /// `cuLaunchHostFunc` with a C function and its argument (no allocation).
    ///
    /// # Safety
    /// `f(data)` must be sound to call once, on a driver thread, at any time until the
    /// stream completes; `data` must stay valid until then. `f` must not call CUDA
    /// functions and must not unwind.
    #[doc(alias = "cuLaunchHostFunc")]
    pub unsafe fn launch_host_fn_raw(
        &self,
        f: unsafe extern "C" fn(*mut c_void),
        data: *mut c_void,
    ) -> Result<()> {
        let cu = api()?;
        // SAFETY: live stream; the caller vouches for `f` and `data`.
        unsafe { drv!(cu, cuLaunchHostFunc(self.raw, Some(f), data)) }
    }
}

impl Drop for Stream<'_> {
    /// `cuStreamDestroy` for owned streams (pending work still completes); errors are
    /// ignored.
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        if let Ok(cu) = api() {
            if let Ok(f) = cu.cuStreamDestroy() {
                // SAFETY: the stream is ours and nothing borrows it any more.
                let _ = unsafe { f(self.raw) };
            }
        }
    }
}

/// Maps a query result: success is `true`, `CUDA_ERROR_NOT_READY` is `false`.
pub(crate) fn ready(rc: CUresult, what: &'static str) -> Result<bool> {
    match rc {
        CUresult::CUDA_SUCCESS => Ok(true),
        CUresult::CUDA_ERROR_NOT_READY => Ok(false),
        code => Err(Error::Driver { call: what, code }),
    }
}
