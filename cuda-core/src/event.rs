//! Event management (driver API section "Event Management"): [`Event`], a marker recorded
//! into a stream, to wait on, query, synchronize with, or time work between two of.

use core::ptr;

use cuda_sys::CUevent;

use crate::context::{Context, CtxMarker};
use crate::driver::api;
use crate::error::{Result, drv};
use crate::stream::{Stream, ready};

bitflags::bitflags! {
    /// `CUevent_flags` for [`Event::new`].
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub struct EventFlags: u32 {
        /// `CU_EVENT_BLOCKING_SYNC`: [`Event::synchronize`] blocks the thread instead of
        /// spinning.
        const BLOCKING_SYNC = cuda_sys::CUevent_flags::CU_EVENT_BLOCKING_SYNC.0;
        /// `CU_EVENT_DISABLE_TIMING`: no timestamps (cheaper; [`Event::elapsed_ms`]
        /// fails).
        const DISABLE_TIMING = cuda_sys::CUevent_flags::CU_EVENT_DISABLE_TIMING.0;
        /// `CU_EVENT_INTERPROCESS`: shareable with other processes (needs
        /// `DISABLE_TIMING`).
        const INTERPROCESS = cuda_sys::CUevent_flags::CU_EVENT_INTERPROCESS.0;
    }
}

/// A CUDA event (`CUevent`) of a context, destroyed on drop (`cuEventDestroy`).
#[derive(Debug)]
pub struct Event<'ctx> {
    raw: CUevent,
    owned: bool,
    _ctx: CtxMarker<'ctx>,
}

// SAFETY: a CUevent may be used from any thread; the driver synchronizes it.
unsafe impl Send for Event<'_> {}
// SAFETY: as above.
unsafe impl Sync for Event<'_> {}

impl<'ctx> Event<'ctx> {
    /// `cuEventCreate`: a new event with `flags` (empty: `CU_EVENT_DEFAULT`, with timing).
    ///
    /// ```no_run
    /// # fn main() -> cuda_core::Result<()> {
    /// use cuda_core::{Context, Device, Event, EventFlags, Stream, StreamFlags};
    /// let ctx = Context::primary(Device::get(0)?)?;
    /// let stream = Stream::new(&ctx, StreamFlags::NON_BLOCKING)?;
    /// let (start, end) = (Event::new(&ctx, EventFlags::empty())?, Event::new(&ctx, EventFlags::empty())?);
    /// start.record(&stream)?;
    /// // ... work ...
    /// end.record(&stream)?;
    /// end.synchronize()?;
    /// let ms = Event::elapsed_ms(&start, &end)?;
    /// # let _ = ms; Ok(()) }
    /// ```
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuEventCreate")]
    pub fn new(ctx: &'ctx Context, flags: EventFlags) -> Result<Self> {
        let g = ctx.enter()?;
        let mut raw = ptr::null_mut();
        // SAFETY: valid out-pointer; the context is current.
        unsafe { drv!(g.cu, cuEventCreate(&mut raw, flags.bits()))? };
        Ok(Self {
            raw,
            owned: true,
            _ctx: CtxMarker::default(),
        })
    }

    /// Takes ownership of an event of `ctx`; dropping the result destroys it.
    ///
    /// # Safety
    /// `raw` must be a live event of `ctx` that nothing else destroys.
    pub unsafe fn from_raw(raw: CUevent, _ctx: &'ctx Context) -> Self {
        Self {
            raw,
            owned: true,
            _ctx: CtxMarker::default(),
        }
    }

    /// Wraps an event owned elsewhere; dropping the result does nothing.
    ///
    /// # Safety
    /// `raw` must be a live event of `ctx` that stays alive as long as the result.
    pub unsafe fn borrow_raw(raw: CUevent, _ctx: &'ctx Context) -> Self {
        Self {
            raw,
            owned: false,
            _ctx: CtxMarker::default(),
        }
    }

    /// The raw `CUevent`.
    pub fn as_raw(&self) -> CUevent {
        self.raw
    }

    /// Gives up ownership: returns the raw handle, which the caller must destroy.
    pub fn into_raw(self) -> CUevent {
        let raw = self.raw;
        core::mem::forget(self);
        raw
    }

    /// `cuEventRecord`: captures the work queued on `stream` so far.
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuEventRecord")]
    pub fn record(&self, stream: &Stream<'_>) -> Result<()> {
        let cu = api()?;
        // SAFETY: live event and stream.
        unsafe { drv!(cu, cuEventRecord(self.raw, stream.as_raw())) }
    }

    /// `cuEventQuery`: `true` once the captured work has completed (or if the event was
    /// never recorded), `false` while it is pending.
    ///
    /// # Errors
    /// Driver errors other than `CUDA_ERROR_NOT_READY`.
    #[doc(alias = "cuEventQuery")]
    pub fn query(&self) -> Result<bool> {
        let cu = api()?;
        // SAFETY: live event.
        let rc = unsafe { cu.cuEventQuery()?(self.raw) };
        ready(rc, "cuEventQuery")
    }

    /// `cuEventSynchronize`: waits until the captured work has completed.
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuEventSynchronize")]
    pub fn synchronize(&self) -> Result<()> {
        let cu = api()?;
        // SAFETY: live event.
        unsafe { drv!(cu, cuEventSynchronize(self.raw)) }
    }

    /// `cuEventElapsedTime`: milliseconds between two completed records (resolution
    /// about 0.5 us).
    ///
    /// # Errors
    /// `CUDA_ERROR_NOT_READY` if either has not completed, `CUDA_ERROR_INVALID_HANDLE` if
    /// either has `DISABLE_TIMING` or was never recorded.
    #[doc(alias = "cuEventElapsedTime")]
    pub fn elapsed_ms(start: &Event<'_>, end: &Event<'_>) -> Result<f32> {
        let cu = api()?;
        let mut ms = 0.0f32;
        // SAFETY: live events, valid out-pointer.
        unsafe { drv!(cu, cuEventElapsedTime(&mut ms, start.raw, end.raw))? };
        Ok(ms)
    }
}

impl Drop for Event<'_> {
    /// `cuEventDestroy` for owned events; errors are ignored.
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        if let Ok(cu) = api() {
            if let Ok(f) = cu.cuEventDestroy() {
                // SAFETY: the event is ours and nothing borrows it any more.
                let _ = unsafe { f(self.raw) };
            }
        }
    }
}
