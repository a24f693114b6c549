//! Awaitable GPU work: [`Completion`], a `core::future::Future` that resolves once the work
//! queued on a stream before it was made has completed (or an event has).
//!
//! The driver drives the waker: making the future queues a host function behind the work
//! (`cuLaunchHostFunc`), which marks the completion and wakes the task that polled last.
//! No thread polls the GPU or spins. The futures work with any executor, with or without
//! `std`: tokio, or an embedded one that polls when woken.
//!
//! # What a future owns, and what dropping it does
//! A completion owns no GPU memory and no GPU work: it only reports. Dropping it, or
//! forgetting it, cancels nothing and frees nothing the GPU may still use; the work it
//! waits for runs on. The state the host function writes is not the future's: it is a
//! reference-counted [`CompletionSlot`] the host function holds a count of
//! ([`Stream::completed`], with `alloc`), or a `&'static` slot ([`Stream::completed_in`],
//! for builds without an allocator). So the host function never writes freed memory,
//! whenever it runs, and a forgotten future leaks at most its count of the slot. (The
//! borrows of the buffers that work uses are the business of the calls that queued it:
//! a completion ends no borrow.)
//!
//! # Wakers run on the driver's thread
//! The host function runs on a thread of the driver, which forbids CUDA calls there; the
//! waker is called on it. Executors' wakers (tokio's, embassy's) only schedule the task;
//! a waker that polled the task inline and made CUDA calls would get
//! `CUDA_ERROR_NOT_PERMITTED` from them.

use core::cell::UnsafeCell;
use core::ffi::c_void;
use core::future::Future;
use core::pin::Pin;
use core::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use core::task::{Context as TaskContext, Poll, Waker};

use crate::driver::event::Event;
use crate::driver::stream::Stream;
use crate::error::{Error, Result};

/// The waker of the task that polled last, handed between the polling thread and the
/// driver's thread with two state bits instead of a lock: `REGISTERING` while a poll
/// stores its waker, `WAKING` while the host function takes it. Whoever finds the other
/// bit set leaves the waking to the other side (a registration that sees `WAKING` wakes
/// its own waker; a wake that sees `REGISTERING` leaves it to the registration, which
/// checks for it before it finishes).
struct WakerCell {
    state: AtomicU8,
    waker: UnsafeCell<Option<Waker>>,
}

const REGISTERING: u8 = 1;
const WAKING: u8 = 2;

// SAFETY: `waker` is read or written only by the side that moved `state` away from 0
// (see the methods), so at most one thread touches it at a time; `Waker` is `Send + Sync`.
// (`Send` follows from the fields.)
unsafe impl Sync for WakerCell {}

impl WakerCell {
    const fn new() -> Self {
        Self {
            state: AtomicU8::new(0),
            waker: UnsafeCell::new(None),
        }
    }

    /// Stores `waker` to be woken by [`wake`](Self::wake).
    fn register(&self, waker: &Waker) {
        match self
            .state
            .compare_exchange(0, REGISTERING, Ordering::Acquire, Ordering::Acquire)
        {
            Ok(_) => {
                // SAFETY: this thread moved the state from 0 to REGISTERING: it alone
                // touches the cell until it moves it back.
                unsafe {
                    let slot = &mut *self.waker.get();
                    if !slot.as_ref().is_some_and(|w| w.will_wake(waker)) {
                        *slot = Some(waker.clone());
                    }
                }
                if self
                    .state
                    .compare_exchange(REGISTERING, 0, Ordering::AcqRel, Ordering::Acquire)
                    .is_err()
                {
                    // A wake arrived meanwhile (REGISTERING | WAKING) and left the waking
                    // to this side.
                    // SAFETY: still this thread's (the waker side does not touch the cell
                    // once it saw REGISTERING).
                    let taken = unsafe { (*self.waker.get()).take() };
                    self.state.store(0, Ordering::Release);
                    if let Some(w) = taken {
                        w.wake();
                    }
                }
            }
            // A wake is under way: poll again.
            Err(_) => waker.wake_by_ref(),
        }
    }

    /// Wakes the stored waker, if any (from the driver's thread).
    fn wake(&self) {
        if self.state.fetch_or(WAKING, Ordering::AcqRel) == 0 {
            // SAFETY: this thread moved the state from 0 to WAKING: the cell is its own
            // until it clears the bit.
            let taken = unsafe { (*self.waker.get()).take() };
            self.state.fetch_and(!WAKING, Ordering::Release);
            if let Some(w) = taken {
                w.wake();
            }
        }
    }
}

/// What a completion's host function writes: whether the work completed, and the waker
/// to wake. Lives at least as long as the host function may run: reference counted
/// ([`Stream::completed`]) or `'static` ([`Stream::completed_in`]).
pub struct CompletionSlot {
    done: AtomicBool,
    armed: AtomicBool,
    waker: WakerCell,
}

impl core::fmt::Debug for CompletionSlot {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("CompletionSlot")
            .field("done", &self.done.load(Ordering::Relaxed))
            .field("armed", &self.armed.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl Default for CompletionSlot {
    fn default() -> Self {
        Self::new()
    }
}

impl CompletionSlot {
    /// A slot with nothing pending, for a `static` (`static SLOT: CompletionSlot =
    /// CompletionSlot::new();`).
    #[must_use]
    pub const fn new() -> Self {
        Self {
            done: AtomicBool::new(false),
            armed: AtomicBool::new(false),
            waker: WakerCell::new(),
        }
    }

    /// Whether a completion queued through this slot is still pending.
    #[must_use]
    pub fn is_armed(&self) -> bool {
        self.armed.load(Ordering::Acquire)
    }

    /// Takes the slot for a new completion: refused while one is pending (its host
    /// function will still write the slot).
    fn arm(&self) -> Result<()> {
        if self.armed.swap(true, Ordering::AcqRel) {
            return Err(Error::InvalidArgument(
                "CompletionSlot: a completion queued through this slot is still pending",
            ));
        }
        self.done.store(false, Ordering::Release);
        Ok(())
    }

    /// Gives the slot back when queuing the host function failed.
    fn disarm(&self) {
        self.armed.store(false, Ordering::Release);
    }

    /// What the host function does: mark the completion, free the slot, wake the task.
    fn complete(&self) {
        self.done.store(true, Ordering::Release);
        self.armed.store(false, Ordering::Release);
        self.waker.wake();
    }
}

/// Host function of a `'static` slot.
unsafe extern "C" fn complete_static(data: *mut c_void) {
    // SAFETY: `data` is the `&'static CompletionSlot` given to `cuLaunchHostFunc`.
    let slot = unsafe { &*data.cast::<CompletionSlot>() };
    slot.complete();
}

/// Host function of a reference-counted slot: uses, then releases, the count the driver
/// was given.
#[cfg(feature = "alloc")]
unsafe extern "C" fn complete_shared(data: *mut c_void) {
    // SAFETY: `data` is `Arc::into_raw` of one count, handed to the driver, which calls
    // this once: the count is reclaimed once.
    let slot = unsafe { alloc::sync::Arc::from_raw(data.cast::<CompletionSlot>()) };
    slot.complete();
}

enum SlotRef {
    Static(&'static CompletionSlot),
    #[cfg(feature = "alloc")]
    Shared(alloc::sync::Arc<CompletionSlot>),
}

impl SlotRef {
    fn get(&self) -> &CompletionSlot {
        match self {
            SlotRef::Static(s) => s,
            #[cfg(feature = "alloc")]
            SlotRef::Shared(s) => s,
        }
    }
}

/// A future that resolves to `Ok(())` once the work it stands for has completed on the
/// GPU: see the [module docs](self). `'static`, `Send` and `Unpin`, so it can be spawned
/// or moved freely; dropping or forgetting it cancels nothing.
#[must_use = "a completion does nothing unless awaited or polled"]
pub struct Completion {
    slot: SlotRef,
}

impl core::fmt::Debug for Completion {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Completion")
            .field("slot", self.slot.get())
            .finish()
    }
}

impl Completion {
    /// Whether the work has completed (without registering a waker).
    #[must_use]
    pub fn is_complete(&self) -> bool {
        self.slot.get().done.load(Ordering::Acquire)
    }
}

impl Future for Completion {
    type Output = Result<()>;

    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Result<()>> {
        let slot = self.slot.get();
        if slot.done.load(Ordering::Acquire) {
            return Poll::Ready(Ok(()));
        }
        slot.waker.register(cx.waker());
        // The host function may have run between the check and the registration.
        if slot.done.load(Ordering::Acquire) {
            Poll::Ready(Ok(()))
        } else {
            Poll::Pending
        }
    }
}

impl Stream {
    /// A future for the work queued on this stream so far (`cuLaunchHostFunc` of a host
    /// function that completes it): work queued after this call is not waited for.
    ///
    /// # Errors
    /// [`Error::StreamCapturing`] while the stream is captured (a host function would
    /// become a graph node); driver errors of `cuLaunchHostFunc`.
    #[cfg(feature = "alloc")]
    #[doc(alias = "cuLaunchHostFunc")]
    pub fn completed(&self) -> Result<Completion> {
        self.ensure_not_capturing("cuLaunchHostFunc")?;
        let slot = alloc::sync::Arc::new(CompletionSlot::new());
        slot.arm()?;
        let data = alloc::sync::Arc::into_raw(alloc::sync::Arc::clone(&slot));
        // SAFETY: `complete_shared` takes `data` as the count just leaked; the stream is
        // not capturing, so the driver calls it exactly once (or not at all on failure,
        // handled below).
        let queued = unsafe { self.launch_host_fn_raw(complete_shared, data.cast_mut().cast()) };
        if let Err(e) = queued {
            // SAFETY: the driver did not take the count: reclaim it.
            drop(unsafe { alloc::sync::Arc::from_raw(data) });
            return Err(e);
        }
        Ok(Completion {
            slot: SlotRef::Shared(slot),
        })
    }

    /// [`completed`](Self::completed) reporting through a `'static` slot, with no
    /// allocation (builds without `alloc`). The slot serves one pending completion at a
    /// time and is free again once that completion's host function has run.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] while a completion queued through `slot` is pending; as
    /// [`completed`](Self::completed).
    #[doc(alias = "cuLaunchHostFunc")]
    pub fn completed_in(&self, slot: &'static CompletionSlot) -> Result<Completion> {
        self.ensure_not_capturing("cuLaunchHostFunc")?;
        slot.arm()?;
        let data = core::ptr::from_ref(slot).cast_mut().cast::<c_void>();
        // SAFETY: `complete_static` reads `data` as the `'static` slot, valid whenever
        // the driver calls it.
        if let Err(e) = unsafe { self.launch_host_fn_raw(complete_static, data) } {
            slot.disarm();
            return Err(e);
        }
        Ok(Completion {
            slot: SlotRef::Static(slot),
        })
    }
}

impl Event {
    /// A future for this event's completion, waited for on `on`: `on` waits for the
    /// event (`cuStreamWaitEvent`) and then runs the host function, so work queued on
    /// `on` afterwards also waits for the event.
    ///
    /// # Errors
    /// As [`Stream::wait_event`] and [`Stream::completed`].
    #[cfg(feature = "alloc")]
    #[doc(alias = "cuStreamWaitEvent")]
    pub fn completed(&self, on: &mut Stream) -> Result<Completion> {
        on.wait_event(self)?;
        on.completed()
    }
}

#[cfg(test)]
mod tests {
    extern crate std;

    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::{Wake, Waker};

    use super::{CompletionSlot, WakerCell};

    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// A registration racing the host function's wake, on two threads: the waker is
    /// woken (the registering side delivers a wake it saw arrive), and under Miri no
    /// access to the cell races.
    #[test]
    fn register_and_wake_race_without_a_data_race() {
        let rounds = if cfg!(miri) { 20 } else { 2000 };
        for _ in 0..rounds {
            let cell = Arc::new(WakerCell::new());
            let count = Arc::new(Count(AtomicUsize::new(0)));
            let waker = Waker::from(count.clone());
            let other = cell.clone();
            let t = std::thread::spawn(move || other.wake());
            cell.register(&waker);
            t.join().unwrap();
            // Either the wake found the waker (1), or it came first and found none, and
            // the waker stays registered for a later wake: deliver that one.
            let before = count.0.load(Ordering::SeqCst);
            assert!(before <= 1, "woken {before} times");
            if before == 0 {
                cell.wake();
                assert_eq!(count.0.load(Ordering::SeqCst), 1);
            }
        }
    }

    /// The host function's work: marked complete, slot free, the registered waker woken
    /// once; a second arming of a `'static`-style slot works after it.
    #[test]
    fn a_slot_completes_once_and_rearms() {
        let slot = CompletionSlot::new();
        let count = Arc::new(Count(AtomicUsize::new(0)));
        slot.arm().unwrap();
        assert!(slot.arm().is_err(), "armed twice");
        slot.waker.register(&Waker::from(count.clone()));
        slot.complete();
        assert!(slot.done.load(Ordering::SeqCst));
        assert!(!slot.is_armed());
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        slot.arm().unwrap();
        assert!(
            !slot.done.load(Ordering::SeqCst),
            "a new arming starts not done"
        );
    }
}
