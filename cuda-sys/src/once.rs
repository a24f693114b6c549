//! A write-once cell for the global function tables, built on atomics (no `std`).
//!
//! The value is written in place, inside the cell (a driver table is 4 KiB: it is never
//! built on a stack and moved in), and the error beside it.
//!
//! # Unsafe policy
//! The cell's value or error is written by exactly one thread, the one that moved
//! `state` from `EMPTY` to `BUSY`, and read only after `state` was seen `READY`,
//! `FAILED` or `POISONED` (Release/Acquire), after which it is never written again.

use core::cell::UnsafeCell;
use core::mem::MaybeUninit;
use core::sync::atomic::{AtomicU8, Ordering};

const EMPTY: u8 = 0;
const BUSY: u8 = 1;
/// The value is set.
const READY: u8 = 2;
/// The initializer failed; the error is set.
const FAILED: u8 = 3;
/// The initializer panicked; the error is the one [`Poison::poisoned`] made.
const POISONED: u8 = 4;

/// Error types that can say "the initializer panicked".
pub(crate) trait Poison {
    /// The error later callers get after the initializer panicked.
    fn poisoned() -> Self;
}

/// Holds a `T` or the `E` its initialization failed with, set once by whichever thread
/// gets there first; others wait (spinning, then yielding) until it is set. If the
/// initializer panics, the cell holds `E::poisoned()` instead, so nobody waits forever.
/// Nothing is ever dropped (these are process-lifetime tables).
pub(crate) struct Once<T, E> {
    state: AtomicU8,
    value: UnsafeCell<MaybeUninit<T>>,
    error: UnsafeCell<MaybeUninit<E>>,
}

// SAFETY: the value (or error) is written once, before `state` becomes READY, FAILED or
// POISONED with Release ordering, and only read after observing one of those with
// Acquire ordering; T: Sync (E: Sync) makes shared reads from several threads sound,
// T: Send (E: Send) lets the initializing thread hand it over.
unsafe impl<T: Send + Sync, E: Send + Sync> Sync for Once<T, E> {}

/// Sets the cell to `E::poisoned()` if dropped while the initializer runs, that is, when
/// it unwinds; forgotten once the initializer returned.
struct PoisonOnUnwind<'a, T, E: Poison> {
    once: &'a Once<T, E>,
}

impl<T, E: Poison> Drop for PoisonOnUnwind<'_, T, E> {
    fn drop(&mut self) {
        // SAFETY: this guard lives only while its thread holds BUSY (set_in_place), which
        // gives it exclusive access to the cell until a state past BUSY is published.
        unsafe { (*self.once.error.get()).write(E::poisoned()) };
        self.once.state.store(POISONED, Ordering::Release);
    }
}

impl<T, E: Poison> Once<T, E> {
    pub(crate) const fn new() -> Self {
        Self {
            state: AtomicU8::new(EMPTY),
            value: UnsafeCell::new(MaybeUninit::uninit()),
            error: UnsafeCell::new(MaybeUninit::uninit()),
        }
    }

    /// The value, initializing it with `init` if no thread did yet (waits while another
    /// thread is initializing it). If an initializer panicked, this call's or an earlier
    /// one's, `Err(E::poisoned())`.
    #[cfg(test)]
    pub(crate) fn get_or_init(&self, init: impl FnOnce() -> Result<T, E>) -> Result<&T, &E> {
        // SAFETY: the closure writes the value whenever it returns Ok.
        unsafe { self.get_or_init_in_place(|slot| init().map(|v| {
            slot.write(v);
        })) }
    }

    /// As `get_or_init`, with `init` writing the value into the cell itself.
    ///
    /// # Safety
    /// When `init` returns `Ok`, it must have initialized the slot it was given.
    pub(crate) unsafe fn get_or_init_in_place(
        &self,
        init: impl FnOnce(&mut MaybeUninit<T>) -> Result<(), E>,
    ) -> Result<&T, &E> {
        // SAFETY: the caller's promise is `set_in_place`'s.
        unsafe { self.set_in_place(init) };
        // The state only moves forward (EMPTY -> BUSY -> READY, FAILED or POISONED) and
        // set_in_place left it past EMPTY, so this ends when the initializing thread is
        // done.
        let mut backoff = Backoff::new();
        loop {
            if let Some(value) = self.done() {
                return value;
            }
            backoff.snooze();
        }
    }

    /// Sets the value if it is unset, `init` writing it into the cell (or returning the
    /// error to keep instead); returns whether this call set it.
    ///
    /// # Safety
    /// When `init` returns `Ok`, it must have initialized the slot it was given.
    pub(crate) unsafe fn set_in_place(
        &self,
        init: impl FnOnce(&mut MaybeUninit<T>) -> Result<(), E>,
    ) -> bool {
        if self
            .state
            .compare_exchange(EMPTY, BUSY, Ordering::Acquire, Ordering::Acquire)
            .is_ok()
        {
            // Dropped only if `init` unwinds: it then stores the poisoned error.
            let guard = PoisonOnUnwind { once: self };
            // SAFETY: BUSY gives this thread exclusive access to the cell until a later
            // state is published.
            let result = init(unsafe { &mut *self.value.get() });
            core::mem::forget(guard);
            let state = match result {
                // The caller vouches that `init` wrote the value.
                Ok(()) => READY,
                Err(e) => {
                    // SAFETY: as above (BUSY).
                    unsafe { (*self.error.get()).write(e) };
                    FAILED
                }
            };
            self.state.store(state, Ordering::Release);
            return true;
        }
        false
    }

    /// The value or error if one is set, without waiting.
    fn done(&self) -> Option<Result<&T, &E>> {
        match self.state.load(Ordering::Acquire) {
            // SAFETY: READY was published after the value was written (Release/Acquire);
            // it is never written again.
            READY => Some(Ok(unsafe { (*self.value.get()).assume_init_ref() })),
            // SAFETY: as above, for the error of FAILED and POISONED.
            FAILED | POISONED => Some(Err(unsafe { (*self.error.get()).assume_init_ref() })),
            _ => None,
        }
    }
}

/// Waiting politely: `spin_loop` 1, 2, 4, .. 64 times, then yield the CPU on each round
/// (`sched_yield`, `SwitchToThread`; dlopen of the driver can take a while). A target without an OS has no
/// one to yield to: it goes on spinning 64 times a round.
struct Backoff {
    step: u32,
}

impl Backoff {
    const SPIN_LIMIT: u32 = 6;

    const fn new() -> Self {
        Self { step: 0 }
    }

    fn snooze(&mut self) {
        if self.step <= Self::SPIN_LIMIT {
            for _ in 0..1u32 << self.step {
                core::hint::spin_loop();
            }
            self.step += 1;
        } else {
            #[cfg(unix)]
            // SAFETY: sched_yield takes no arguments and has no preconditions.
            unsafe {
                crate::unix::sched_yield()
            };
            #[cfg(windows)]
            // SAFETY: SwitchToThread takes no arguments and has no preconditions.
            unsafe {
                crate::win32::SwitchToThread()
            };
            #[cfg(not(any(unix, windows)))]
            for _ in 0..1u32 << Self::SPIN_LIMIT {
                core::hint::spin_loop();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;

    use super::*;
    use std::time::{Duration, Instant};

    #[derive(Debug, PartialEq, Eq)]
    enum TestError {
        Failed,
        Poisoned,
    }

    impl Poison for TestError {
        fn poisoned() -> Self {
            Self::Poisoned
        }
    }

    #[test]
    fn a_panicking_initializer_poisons_the_cell() {
        static CELL: Once<u32, TestError> = Once::new();
        let caught = std::panic::catch_unwind(|| {
            CELL.get_or_init(|| panic!("initializer fails"))
                .copied()
                .map_err(|_| ())
        });
        assert!(caught.is_err(), "the panic reaches the initializing thread");
        let start = Instant::now();
        assert_eq!(CELL.get_or_init(|| Ok(7)), Err(&TestError::Poisoned));
        // Another thread gets the same answer, and does not wait for it.
        let other = std::thread::spawn(|| {
            CELL.get_or_init(|| Ok(9))
                .map_err(|e| e == &TestError::Poisoned)
                .copied()
        });
        assert_eq!(other.join().ok(), Some(Err(true)));
        assert!(start.elapsed() < Duration::from_secs(10));
        // SAFETY: the closure writes the value when it returns Ok.
        let set = unsafe { CELL.set_in_place(|slot| {
            slot.write(8);
            Ok(())
        }) };
        assert!(!set, "a poisoned cell is not set again");
    }

    #[test]
    fn waiters_see_the_value_a_slow_initializer_sets() {
        static CELL: Once<u32, TestError> = Once::new();
        let started = std::sync::Arc::new(std::sync::Barrier::new(2));
        let init_started = started.clone();
        let initializer = std::thread::spawn(move || {
            *CELL
                .get_or_init(|| {
                    init_started.wait();
                    std::thread::sleep(Duration::from_millis(50));
                    Ok(42)
                })
                .unwrap_or(&0)
        });
        started.wait();
        // The cell is BUSY now: this call waits (spinning, then yielding) for the value.
        assert_eq!(CELL.get_or_init(|| Err(TestError::Failed)), Ok(&42));
        assert_eq!(initializer.join().ok(), Some(42));
    }

    #[test]
    fn a_failed_initialization_is_remembered() {
        static CELL: Once<u32, TestError> = Once::new();
        assert_eq!(
            CELL.get_or_init(|| Err(TestError::Failed)),
            Err(&TestError::Failed)
        );
        assert_eq!(CELL.get_or_init(|| Ok(1)), Err(&TestError::Failed));
    }
}
