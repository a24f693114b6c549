//! Event management (driver API section "Event Management"): [`Event`], a marker recorded
//! into a stream, to wait on, query, synchronize with, or time work between two of.

use core::ptr;

use cudadrv_sys::CUevent;

use crate::driver::context::Context;
use crate::driver::dropping;
use crate::driver::stream::{Stream, ready};
use crate::error::{Result, drv};

crate::flags::flags! {
    /// `CUevent_flags` for [`Event::new`].
    #[derive(Clone, Copy, PartialEq, Eq, Hash)]
    pub struct EventFlags: u32 {
        /// `CU_EVENT_BLOCKING_SYNC`: [`Event::synchronize`] blocks the thread instead of
        /// spinning.
        const BLOCKING_SYNC = cudadrv_sys::CUevent_flags::CU_EVENT_BLOCKING_SYNC.0;
        /// `CU_EVENT_DISABLE_TIMING`: no timestamps (cheaper; [`Event::elapsed_ms`]
        /// fails).
        const DISABLE_TIMING = cudadrv_sys::CUevent_flags::CU_EVENT_DISABLE_TIMING.0;
        /// `CU_EVENT_INTERPROCESS`: shareable with other processes (needs
        /// `DISABLE_TIMING`).
        const INTERPROCESS = cudadrv_sys::CUevent_flags::CU_EVENT_INTERPROCESS.0;
    }
}

/// A CUDA event (`CUevent`) of a context, destroyed on drop (`cuEventDestroy`). It keeps
/// its [`Context`] alive and current where a call needs it, so it can be stored and used
/// from any thread.
#[derive(Debug)]
pub struct Event {
    raw: CUevent,
    owned: bool,
    ctx: Context,
}

// SAFETY: a CUevent may be used from any thread; the driver synchronizes it.
unsafe impl Send for Event {}
// SAFETY: as above.
unsafe impl Sync for Event {}

impl Event {
    /// `cuEventCreate`: a new event with `flags` (empty: `CU_EVENT_DEFAULT`, with timing).
    ///
    /// ```no_run
    /// # fn main() -> cudadrv::Result<()> {
    /// use cudadrv::{Context, Device, Event, EventFlags, Stream, StreamFlags};
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
    pub fn new(ctx: &Context, flags: EventFlags) -> Result<Self> {
        let g = ctx.enter()?;
        let mut raw = ptr::null_mut();
        // SAFETY: valid out-pointer; the context is current.
        unsafe { drv!(g.cu, cuEventCreate(&mut raw, flags.bits()))? };
        Ok(Self {
            raw,
            owned: true,
            ctx: ctx.clone(),
        })
    }

    /// Takes ownership of an event of `ctx`; dropping the result destroys it.
    ///
    /// # Safety
    /// `raw` must be a live event of `ctx` that nothing else destroys.
    pub unsafe fn from_raw(raw: CUevent, ctx: &Context) -> Self {
        Self {
            raw,
            owned: true,
            ctx: ctx.clone(),
        }
    }

    /// Wraps an event owned elsewhere; dropping the result does nothing.
    ///
    /// # Safety
    /// `raw` must be a live event of `ctx` that stays alive as long as the result.
    pub unsafe fn borrow_raw(raw: CUevent, ctx: &Context) -> Self {
        Self {
            raw,
            owned: false,
            ctx: ctx.clone(),
        }
    }

    /// The raw `CUevent`.
    #[inline]
    pub fn as_raw(&self) -> CUevent {
        self.raw
    }

    /// The context the event belongs to.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// Gives up ownership: returns the raw handle, which the caller must destroy.
    pub fn into_raw(self) -> CUevent {
        let raw = self.raw;
        let this = core::mem::ManuallyDrop::new(self);
        // SAFETY: `this` is never used or dropped again; its context clone is dropped
        // here exactly once.
        drop(unsafe { core::ptr::read(&this.ctx) });
        raw
    }

    /// `cuEventRecord`: captures the work queued on `stream` (a stream of the event's
    /// context) so far. To order work across contexts, record on a stream of the
    /// event's context and wait for it from any stream ([`Stream::wait_event`]).
    ///
    /// # Errors
    /// [`Error::ContextMismatch`](crate::Error::ContextMismatch) for a stream of another
    /// context; driver errors.
    #[doc(alias = "cuEventRecord")]
    pub fn record(&self, stream: &Stream) -> Result<()> {
        let q = stream.queue_capturable(&self.ctx, "cuEventRecord")?;
        // SAFETY: live event and stream; the context is current. Recorded in a capture,
        // the event only marks a point of it (no graph node names it).
        unsafe { drv!(q.cu, cuEventRecord(self.raw, q.stream)) }
    }

    /// `cuEventQuery`: `true` once the captured work has completed (or if the event was
    /// never recorded), `false` while it is pending.
    ///
    /// # Errors
    /// Driver errors other than `CUDA_ERROR_NOT_READY`.
    #[doc(alias = "cuEventQuery")]
    pub fn query(&self) -> Result<bool> {
        let g = self.ctx.enter()?;
        // SAFETY: live event; the context is current.
        let rc = unsafe { g.cu.cuEventQuery()?(self.raw) };
        ready(rc, "cuEventQuery")
    }

    /// `cuEventSynchronize`: waits until the captured work has completed.
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuEventSynchronize")]
    pub fn synchronize(&self) -> Result<()> {
        let g = self.ctx.enter()?;
        // SAFETY: live event; the context is current.
        unsafe { drv!(g.cu, cuEventSynchronize(self.raw)) }
    }

    /// `cuEventElapsedTime`: milliseconds between two completed records (resolution
    /// about 0.5 us).
    ///
    /// # Errors
    /// `CUDA_ERROR_NOT_READY` if either has not completed, `CUDA_ERROR_INVALID_HANDLE` if
    /// either has `DISABLE_TIMING` or was never recorded.
    #[doc(alias = "cuEventElapsedTime")]
    pub fn elapsed_ms(start: &Event, end: &Event) -> Result<f32> {
        let g = start.ctx.enter()?;
        let mut ms = 0.0f32;
        // cuEventElapsedTime_v2 (CUDA 12.8) or, before it, the first ABI: same arguments.
        let elapsed = match (g.cu.cuEventElapsedTime(), g.cu.cuEventElapsedTime_v2000()) {
            (Ok(f), _) | (Err(_), Ok(f)) => f,
            (Err(missing), Err(_)) => return Err(missing.into()),
        };
        // SAFETY: live events, valid out-pointer; the context is current.
        let rc = unsafe { elapsed(&mut ms, start.raw, end.raw) };
        crate::error::call(rc, "cuEventElapsedTime")?;
        Ok(ms)
    }
}

impl Drop for Event {
    /// `cuEventDestroy` for owned events; a failure goes to the drop-error sink.
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        let _g = crate::error::enter_for_drop!(self.ctx);
        // SAFETY: the event is ours and nothing borrows it any more (graph nodes that
        // name it borrow it); its context is current.
        unsafe { dropping!(cuEventDestroy(self.raw)) };
    }
}
