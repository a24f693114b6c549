//! Stream management (driver API section "Stream Management"): [`Stream`], an ordered
//! queue of work bound to a [`Context`], with flags, priority, query, synchronization,
//! cross-stream waits and host functions.

use core::ffi::c_void;
use core::ptr;

use cudadrv_sys::{CUresult, CUstream, CUstreamCaptureStatus};

use crate::driver::context::{Context, CurrentGuard};
use crate::driver::dropping;
use crate::driver::event::Event;
use crate::error::{Error, Result, drv};

crate::flags::flags! {
    /// `CUstream_flags` for [`Stream::new`].
    #[derive(Clone, Copy, PartialEq, Eq, Hash)]
    pub struct StreamFlags: u32 {
        /// `CU_STREAM_NON_BLOCKING`: does not synchronize with the legacy default stream.
        const NON_BLOCKING = cudadrv_sys::CUstream_flags::CU_STREAM_NON_BLOCKING.0;
    }
}

crate::flags::flags! {
    /// `CUevent_wait_flags` for [`Stream::wait_event_with_flags`].
    #[derive(Clone, Copy, PartialEq, Eq, Hash)]
    pub struct EventWaitFlags: u32 {
        /// `CU_EVENT_WAIT_EXTERNAL`: the wait is captured as an external-event node.
        const EXTERNAL = cudadrv_sys::CUevent_wait_flags::CU_EVENT_WAIT_EXTERNAL.0;
    }
}

/// What dropping a [`Stream`] does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// Made here or taken over: `cuStreamDestroy`.
    Owned,
    /// The legacy (`CU_STREAM_LEGACY`) or per-thread (`CU_STREAM_PER_THREAD`) default
    /// stream: nothing to destroy, and never captured by this crate.
    Default,
    /// Owned elsewhere ([`Stream::borrow_raw`]): nothing.
    Borrowed,
}

/// A CUDA stream (`CUstream`) of a context, destroyed on drop (`cuStreamDestroy`).
///
/// It keeps its [`Context`] alive (a clone) and makes it current where a call needs it,
/// so a `Stream` can be stored anywhere and used from any thread. The default streams
/// ([`Stream::legacy`], [`Stream::per_thread`]) are named explicitly; dropping them does
/// nothing.
///
/// # Capture
/// While a stream is captured into a graph ([`Stream::begin_capture`]), calls that
/// would make the graph name memory, an event or a closure that nothing ties to the
/// graph are refused with [`Error::StreamCapturing`]: the asynchronous memsets and
/// copies of the buffers, [`launch_host_fn`](Self::launch_host_fn),
/// [`wait_event_with_flags`](Self::wait_event_with_flags) with
/// [`EventWaitFlags::EXTERNAL`], graph launches. The [`Capture`](crate::graph::Capture)
/// records them instead, borrowing what they name for as long as the graph lives. The
/// check is one `cuStreamIsCapturing` call; a stream joins another stream's capture only
/// through [`wait_event`](Self::wait_event), which takes `&mut self`, so no other thread
/// can use the stream between the check and the call.
#[derive(Debug)]
pub struct Stream {
    raw: CUstream,
    kind: Kind,
    ctx: Context,
}

// SAFETY: a CUstream may be used from any thread; the driver synchronizes it, and every
// call makes the stream's context current where it needs to.
unsafe impl Send for Stream {}
// SAFETY: as above; every `&self` method is one driver call.
unsafe impl Sync for Stream {}

impl Stream {
    /// `cuStreamCreate`: a new stream with `flags`.
    ///
    /// ```no_run
    /// # fn main() -> cudadrv::Result<()> {
    /// use cudadrv::{Context, Device, Stream, StreamFlags};
    /// let ctx = Context::primary(Device::get(0)?)?;
    /// let stream = Stream::new(&ctx, StreamFlags::NON_BLOCKING)?;
    /// stream.synchronize()?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuStreamCreate")]
    pub fn new(ctx: &Context, flags: StreamFlags) -> Result<Self> {
        let g = ctx.enter()?;
        let mut raw = ptr::null_mut();
        // SAFETY: valid out-pointer; the context is current.
        unsafe { drv!(g.cu, cuStreamCreate(&mut raw, flags.bits()))? };
        Ok(Self {
            raw,
            kind: Kind::Owned,
            ctx: ctx.clone(),
        })
    }

    /// `cuStreamCreate` with `CU_STREAM_NON_BLOCKING`.
    ///
    /// # Errors
    /// Driver errors.
    pub fn non_blocking(ctx: &Context) -> Result<Self> {
        Self::new(ctx, StreamFlags::NON_BLOCKING)
    }

    /// `cuStreamCreateWithPriority`: a new stream with `flags` and `priority` (see
    /// [`Context::stream_priority_range`]; lower is higher priority, the driver clamps
    /// values outside the range).
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuStreamCreateWithPriority")]
    pub fn with_priority(ctx: &Context, flags: StreamFlags, priority: i32) -> Result<Self> {
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
            kind: Kind::Owned,
            ctx: ctx.clone(),
        })
    }

    /// The legacy default stream (`CU_STREAM_LEGACY`) of the context, which synchronizes
    /// with every blocking stream of the context; not destroyed. It cannot be captured.
    pub fn legacy(ctx: &Context) -> Self {
        Self {
            raw: cudadrv_sys::CU_STREAM_LEGACY,
            kind: Kind::Default,
            ctx: ctx.clone(),
        }
    }

    /// The per-thread default stream (`CU_STREAM_PER_THREAD`) of whichever thread uses
    /// the handle; not destroyed. This crate refuses to capture it (the synchronous calls
    /// of a per-thread-default-stream build run on it, and would be captured too).
    pub fn per_thread(ctx: &Context) -> Self {
        Self {
            raw: cudadrv_sys::CU_STREAM_PER_THREAD,
            kind: Kind::Default,
            ctx: ctx.clone(),
        }
    }

    /// Takes ownership of a stream of `ctx`; dropping the result destroys it.
    ///
    /// # Safety
    /// `raw` must be a live stream of `ctx` that nothing else destroys.
    pub unsafe fn from_raw(raw: CUstream, ctx: &Context) -> Self {
        Self {
            raw,
            kind: Kind::Owned,
            ctx: ctx.clone(),
        }
    }

    /// Wraps a stream owned elsewhere (a library's, a framework's such as
    /// `torch.cuda.current_stream()`); dropping the result does nothing.
    ///
    /// The stream may be in a capture another library began (`torch.cuda.graph`): the
    /// safe calls that queue work naming borrowed memory check the capture status and
    /// refuse ([`Error::StreamCapturing`]), so nothing borrowed ends up in a graph this
    /// crate does not own; `unsafe` launches and copies are recorded into that graph,
    /// their contract then covering every replay of it.
    ///
    /// # Safety
    /// `raw` must be a stream of `ctx` (or a default-stream handle) that stays alive for
    /// as long as the result. No capture may begin or end on it outside this crate
    /// *during* a call of this crate that uses it (between the crate's capture check
    /// and its enqueue): a framework that begins and ends its captures on the same
    /// thread, between such calls, meets this.
    pub unsafe fn borrow_raw(raw: CUstream, ctx: &Context) -> Self {
        Self {
            raw,
            kind: Kind::Borrowed,
            ctx: ctx.clone(),
        }
    }

    /// The raw `CUstream`.
    #[inline]
    pub fn as_raw(&self) -> CUstream {
        self.raw
    }

    /// The context the stream belongs to.
    #[inline]
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// Whether this is the legacy or a per-thread default stream.
    pub fn is_default(&self) -> bool {
        self.kind == Kind::Default
    }

    /// Gives up ownership: returns the raw handle, which the caller must destroy (for an
    /// owned stream).
    pub fn into_raw(self) -> CUstream {
        let raw = self.raw;
        let this = core::mem::ManuallyDrop::new(self);
        // SAFETY: `this` is never used or dropped again; its context clone is dropped
        // here exactly once.
        drop(unsafe { ptr::read(&this.ctx) });
        raw
    }

    /// The one guard for work a safe call queues on this stream naming `owner`'s
    /// objects (memory, an executable graph, a kernel): [`Error::ContextMismatch`]
    /// naming `call` unless the stream is of `owner`'s context, then that context made
    /// current for the guard's life, then [`Error::StreamCapturing`] unless the stream
    /// is not capturing (captured work would become a graph node that runs after the
    /// borrow that made it safe has ended).
    #[inline]
    pub(crate) fn queue(&self, owner: &Context, call: &'static str) -> Result<Queued<'_>> {
        let q = self.queue_capturable(owner, call)?;
        self.ensure_not_capturing_current(q.cu, call)?;
        Ok(q)
    }

    /// [`queue`](Self::queue) without the capture check: for calls whose work may
    /// become a graph node (their contract, or a borrow as long as the graph's, covers
    /// every replay).
    #[inline]
    pub(crate) fn queue_capturable(
        &self,
        owner: &Context,
        call: &'static str,
    ) -> Result<Queued<'_>> {
        owner.ensure_same(&self.ctx, call)?;
        let g = self.ctx.enter()?;
        Ok(Queued {
            cu: g.cu,
            stream: self.raw,
            _current: g,
        })
    }

    /// `cuStreamIsCapturing` as a guard: [`Error::StreamCapturing`] naming `call` unless
    /// the stream is not capturing; a failure of the check itself is reported as
    /// `call`'s, with the driver's code.
    pub(crate) fn ensure_not_capturing(&self, call: &'static str) -> Result<()> {
        let g = self.ctx.enter()?;
        self.ensure_not_capturing_current(g.cu, call)
    }

    /// [`ensure_not_capturing`](Self::ensure_not_capturing) where the caller has made a
    /// context current already (the stream's, or one the driver resolves it from).
    #[inline]
    pub(crate) fn ensure_not_capturing_current(
        &self,
        cu: &cudadrv_sys::DriverApi,
        call: &'static str,
    ) -> Result<()> {
        let mut status = CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
        // SAFETY: live stream, valid out-pointer; a context is current (caller).
        let rc = unsafe { cu.cuStreamIsCapturing()?(self.raw, &mut status) };
        // The check is this crate's, not the user's call: a failure (a sticky error of
        // the context after a kernel fault, say) is reported as the failure of `call`,
        // which the driver would have returned the same code for.
        crate::error::call(rc, call)?;
        if status == CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE {
            Ok(())
        } else {
            Err(Error::StreamCapturing(call))
        }
    }

    /// `cuStreamGetPriority`: the stream's priority.
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuStreamGetPriority")]
    pub fn priority(&self) -> Result<i32> {
        let g = self.ctx.enter()?;
        let mut p = 0;
        // SAFETY: live stream, valid out-pointer; the context is current.
        unsafe { drv!(g.cu, cuStreamGetPriority(self.raw, &mut p))? };
        Ok(p)
    }

    /// `cuStreamGetFlags`: the stream's flags.
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuStreamGetFlags")]
    pub fn flags(&self) -> Result<StreamFlags> {
        let g = self.ctx.enter()?;
        let mut f = 0;
        // SAFETY: live stream, valid out-pointer; the context is current.
        unsafe { drv!(g.cu, cuStreamGetFlags(self.raw, &mut f))? };
        Ok(StreamFlags::from_bits_retain(f))
    }

    /// `cuStreamQuery`: `true` when all work queued so far has completed, `false` while
    /// some is pending (`CUDA_ERROR_NOT_READY`).
    ///
    /// # Errors
    /// Driver errors other than `CUDA_ERROR_NOT_READY`.
    #[doc(alias = "cuStreamQuery")]
    pub fn query(&self) -> Result<bool> {
        let g = self.ctx.enter()?;
        // SAFETY: live stream; the context is current.
        let rc = unsafe { g.cu.cuStreamQuery()?(self.raw) };
        ready(rc, "cuStreamQuery")
    }

    /// `cuStreamSynchronize`: waits until all work queued so far has completed.
    ///
    /// # Errors
    /// Driver errors, including those of the stream's asynchronous work.
    #[doc(alias = "cuStreamSynchronize")]
    pub fn synchronize(&self) -> Result<()> {
        let g = self.ctx.enter()?;
        // SAFETY: live stream; the context is current.
        unsafe { drv!(g.cu, cuStreamSynchronize(self.raw)) }
    }

    /// `cuStreamWaitEvent`: later work on this stream waits for `event`'s last record.
    ///
    /// If the event was recorded in a stream capture, this stream joins that capture
    /// (its later work is recorded into the same graph, not run). That is why this takes
    /// `&mut self`: no other thread can be between its capture check and its call on
    /// this stream while it joins.
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuStreamWaitEvent")]
    pub fn wait_event(&mut self, event: &Event) -> Result<()> {
        self.wait_event_with_flags(event, EventWaitFlags::empty())
    }

    /// `cuStreamWaitEvent` with flags.
    ///
    /// # Errors
    /// [`Error::StreamCapturing`] for [`EventWaitFlags::EXTERNAL`] while the stream is
    /// capturing (the graph would name the event by address; use
    /// [`Capturing::wait_event_external`](crate::graph::Capturing::wait_event_external));
    /// driver errors.
    #[doc(alias = "cuStreamWaitEvent")]
    pub fn wait_event_with_flags(&mut self, event: &Event, flags: EventWaitFlags) -> Result<()> {
        if flags.contains(EventWaitFlags::EXTERNAL) {
            self.ensure_not_capturing("cuStreamWaitEvent(CU_EVENT_WAIT_EXTERNAL)")?;
        }
        // SAFETY: live stream and event; an external wait is not being captured
        // (checked above, and `&mut self` keeps the stream from joining a capture
        // meanwhile).
        unsafe { self.wait_event_unchecked(event, flags) }
    }

    /// `cuStreamWaitEvent` without the capture check.
    ///
    /// # Safety
    /// If the stream is capturing and `flags` has `EXTERNAL`, `event` must outlive every
    /// graph made from the capture.
    pub(crate) unsafe fn wait_event_unchecked(
        &self,
        event: &Event,
        flags: EventWaitFlags,
    ) -> Result<()> {
        let g = self.ctx.enter()?;
        // SAFETY: live stream and event; the context is current; the event's lifetime in
        // a capture is the caller's promise.
        unsafe {
            drv!(
                g.cu,
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
    /// [`Error::StreamCapturing`] while the stream is capturing: a captured host function
    /// runs at every launch of the graph, so a run-once closure cannot be one (use
    /// [`Capturing::host_fn`](crate::graph::Capturing::host_fn), which the graph owns);
    /// driver errors.
    #[cfg(feature = "alloc")]
    #[doc(alias = "cuLaunchHostFunc")]
    pub fn launch_host_fn<F>(&self, f: F) -> Result<()>
    where
        F: FnOnce() + Send + 'static,
    {
        self.ensure_not_capturing("cuLaunchHostFunc")?;
        unsafe extern "C" fn trampoline<F: FnOnce()>(data: *mut c_void) {
            // SAFETY: `data` is the `Box<F>` leaked below, handed to the driver once; the
            // driver calls this once, so the box is reclaimed exactly once.
            let f = unsafe { alloc::boxed::Box::from_raw(data.cast::<F>()) };
            f();
        }
        let g = self.ctx.enter()?;
        let launch = g.cu.cuLaunchHostFunc()?;
        let data = alloc::boxed::Box::into_raw(alloc::boxed::Box::new(f)).cast::<c_void>();
        // SAFETY: live stream, not capturing (checked above; joining a capture needs
        // `&mut self`), so the driver calls the trampoline at most once; it matches
        // `data`'s type; `F: Send + 'static` so running it on the driver's thread at any
        // later time is sound.
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
    /// stream completes; `data` must stay valid until then. If the stream is capturing,
    /// `f(data)` runs at every launch of every graph made from the capture instead, and
    /// must be sound for that. `f` must not call CUDA functions and must not unwind.
    #[doc(alias = "cuLaunchHostFunc")]
    pub unsafe fn launch_host_fn_raw(
        &self,
        f: unsafe extern "C" fn(*mut c_void),
        data: *mut c_void,
    ) -> Result<()> {
        let g = self.ctx.enter()?;
        // SAFETY: live stream; the context is current; the caller vouches for `f` and
        // `data`.
        unsafe { drv!(g.cu, cuLaunchHostFunc(self.raw, Some(f), data)) }
    }
}

impl Drop for Stream {
    /// `cuStreamDestroy` for owned streams (pending work still completes); a failure goes
    /// to the drop-error sink.
    fn drop(&mut self) {
        if self.kind != Kind::Owned {
            return;
        }
        let _g = crate::error::enter_for_drop!(self.ctx);
        // SAFETY: the stream is ours and nothing borrows it any more; its context is
        // current.
        unsafe { dropping!(cuStreamDestroy(self.raw)) };
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

/// Work about to be queued on a stream ([`Stream::queue`]): the driver table, the raw
/// stream, and its context current until the guard drops.
pub(crate) struct Queued<'s> {
    pub(crate) cu: &'static cudadrv_sys::DriverApi,
    pub(crate) stream: CUstream,
    _current: CurrentGuard<'s>,
}
