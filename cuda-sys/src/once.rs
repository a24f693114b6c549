//! A write-once cell for the global function tables, built on atomics (no `std`).
//!
//! # Unsafe policy
//! The cell's value is written by exactly one thread, the one that moved `state` from
//! `EMPTY` to `BUSY`, and read only after `state` was seen `READY` or `POISONED`
//! (Release/Acquire), after which it is never written again.

use core::cell::UnsafeCell;
use core::mem::MaybeUninit;
use core::sync::atomic::{AtomicU8, Ordering};

const EMPTY: u8 = 0;
const BUSY: u8 = 1;
const READY: u8 = 2;
/// The initializer panicked; the value is the error [`Poison::poisoned`] made.
const POISONED: u8 = 3;

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
    value: UnsafeCell<MaybeUninit<Result<T, E>>>,
}

// SAFETY: the value is written once, before `state` becomes READY or POISONED with
// Release ordering, and only read after observing one of those with Acquire ordering;
// T: Sync (E: Sync) makes shared reads from several threads sound, T: Send (E: Send)
// lets the initializing thread hand it over.
unsafe impl<T: Send + Sync, E: Send + Sync> Sync for Once<T, E> {}

/// Sets the cell to `Err(E::poisoned())` if dropped while the initializer runs, that is,
/// when it unwinds; forgotten once the initializer returned.
struct PoisonOnUnwind<'a, T, E: Poison> {
    once: &'a Once<T, E>,
}

impl<T, E: Poison> Drop for PoisonOnUnwind<'_, T, E> {
    fn drop(&mut self) {
        // SAFETY: this guard lives only while its thread holds BUSY (set_with), which
        // gives it exclusive access to the value until a READY/POISONED is published.
        unsafe { (*self.once.value.get()).write(Err(E::poisoned())) };
        self.once.state.store(POISONED, Ordering::Release);
    }
}

impl<T, E: Poison> Once<T, E> {
    pub(crate) const fn new() -> Self {
        Self {
            state: AtomicU8::new(EMPTY),
            value: UnsafeCell::new(MaybeUninit::uninit()),
        }
    }

    /// The value, initializing it with `init` if no thread did yet (waits while another
    /// thread is initializing it). If an initializer panicked, this call's or an earlier
    /// one's, `Err(E::poisoned())`.
    pub(crate) fn get_or_init(&self, init: impl FnOnce() -> Result<T, E>) -> Result<&T, &E> {
        self.set_with(init);
        // The state only moves forward (EMPTY -> BUSY -> READY or POISONED) and set_with
        // left it past EMPTY, so this ends when the initializing thread is done.
        let mut backoff = Backoff::new();
        loop {
            if let Some(value) = self.done() {
                return value;
            }
            backoff.snooze();
        }
    }

    /// Sets the value if it is unset; returns whether this call set it.
    pub(crate) fn set_with(&self, init: impl FnOnce() -> Result<T, E>) -> bool {
        if self
            .state
            .compare_exchange(EMPTY, BUSY, Ordering::Acquire, Ordering::Acquire)
            .is_ok()
        {
            // Dropped only if `init` unwinds: it then stores the poisoned error.
            let guard = PoisonOnUnwind { once: self };
            let value = init();
            core::mem::forget(guard);
            // SAFETY: BUSY gives this thread exclusive access until READY is published.
            unsafe { (*self.value.get()).write(value) };
            self.state.store(READY, Ordering::Release);
            return true;
        }
        false
    }

    /// The value if it is set (READY or POISONED), without waiting.
    fn done(&self) -> Option<Result<&T, &E>> {
        match self.state.load(Ordering::Acquire) {
            READY | POISONED => {
                // SAFETY: READY/POISONED was published after the write (Release/Acquire);
                // the value is never written again.
                let value = unsafe { (*self.value.get()).assume_init_ref() };
                Some(value.as_ref())
            }
            _ => None,
        }
    }
}

/// Waiting politely: `spin_loop` 1, 2, 4, .. 64 times, then yield the CPU on each round
/// (`sched_yield`; dlopen of the driver can take a while). A target without an OS has no
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
                libc::sched_yield()
            };
            #[cfg(not(unix))]
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
        assert!(!CELL.set_with(|| Ok(8)), "a poisoned cell is not set again");
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
