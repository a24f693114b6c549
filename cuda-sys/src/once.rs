//! A write-once cell for the global function tables, built on atomics (no `std`).

use core::cell::UnsafeCell;
use core::mem::MaybeUninit;
use core::sync::atomic::{AtomicU8, Ordering};

const EMPTY: u8 = 0;
const BUSY: u8 = 1;
const READY: u8 = 2;

/// Holds a `T` or the `E` its initialization failed with,, set once by whichever thread gets there first; others spin
/// until it is set. Nothing is ever dropped (these are process-lifetime tables).
pub(crate) struct Once<T, E> {
    state: AtomicU8,
    value: UnsafeCell<MaybeUninit<Result<T, E>>>,
}

// SAFETY: the value is written once, before `state` becomes READY with Release ordering,
// and only read after observing READY with Acquire ordering; T: Sync makes shared reads
// from several threads sound, T: Send lets the initializing thread hand it over.
unsafe impl<T: Send + Sync, E: Send + Sync> Sync for Once<T, E> {}

impl<T, E> Once<T, E> {
    pub(crate) const fn new() -> Self {
        Self {
            state: AtomicU8::new(EMPTY),
            value: UnsafeCell::new(MaybeUninit::uninit()),
        }
    }

    /// The value, initializing it with `init` if no thread did yet.
    pub(crate) fn get_or_init(&self, init: impl FnOnce() -> Result<T, E>) -> Result<&T, &E> {
        self.set_with(init);
        // After set_with the state is BUSY or READY, so get() returns Some.
        loop {
            if let Some(value) = self.get() {
                return value;
            }
            core::hint::spin_loop();
        }
    }

    /// Sets the value if it is unset; returns whether this call set it.
    pub(crate) fn set_with(&self, init: impl FnOnce() -> Result<T, E>) -> bool {
        if self
            .state
            .compare_exchange(EMPTY, BUSY, Ordering::Acquire, Ordering::Acquire)
            .is_ok()
        {
            let value = init();
            // SAFETY: BUSY gives this thread exclusive access until READY is published.
            unsafe { (*self.value.get()).write(value) };
            self.state.store(READY, Ordering::Release);
            return true;
        }
        false
    }

    /// The value once set (waits while another thread is setting it), or `None` if unset.
    pub(crate) fn get(&self) -> Option<Result<&T, &E>> {
        loop {
            match self.state.load(Ordering::Acquire) {
                EMPTY => return None,
                READY => {
                    // SAFETY: READY was published after the write (Release/Acquire);
                    // the value is never written again.
                    let value = unsafe { (*self.value.get()).assume_init_ref() };
                    return Some(value.as_ref());
                }
                _ => core::hint::spin_loop(),
            }
        }
    }
}
