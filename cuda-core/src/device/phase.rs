//! [`PhaseCursor`]: parity waits on an [`MBarrier`] without handling a raw parity bit.

use super::MBarrier;
#[cfg(any(doc, all(target_feature = "sm_80", target_feature = "ptx71")))]
use super::ptx_asm;
#[cfg(any(doc, all(target_feature = "sm_90", target_feature = "ptx80")))]
use super::scope::Scope;

/// One thread's position in an mbarrier's sequence of phases: the phase it waits for
/// next. Each completed wait advances the cursor (flips its parity), so successive waits
/// name successive phases.
///
/// Neither `Copy` nor `Clone`: two cursors for one thread would fall out of step. A
/// thread must wait for every phase in turn (a parity wait may name only the current or
/// the immediately preceding phase; if the barrier got two phases ahead of the cursor,
/// the parity would alias). A producer that must skip the first waits on an "empty"
/// barrier simply does not wait for its first round.
#[derive(Debug)]
pub struct PhaseCursor {
    bar: MBarrier,
    parity: u32,
}

impl MBarrier {
    /// A cursor that waits for phase 0 first: make it right after the barrier's
    /// initialization, before this thread has waited on the barrier.
    #[inline(always)]
    #[must_use]
    pub const fn phase_cursor(self) -> PhaseCursor {
        PhaseCursor {
            bar: self,
            parity: 0,
        }
    }
}

impl PhaseCursor {
    /// The barrier.
    #[inline(always)]
    #[must_use]
    pub const fn barrier(&self) -> MBarrier {
        self.bar
    }

    /// Parity (0 even, 1 odd) of the phase this cursor waits for next.
    #[inline(always)]
    #[must_use]
    pub const fn parity(&self) -> u32 {
        self.parity
    }

    /// Advances to the next phase when `done`; returns `done`.
    #[cfg(any(doc, all(target_feature = "sm_80", target_feature = "ptx71")))]
    #[inline(always)]
    fn advance_if(&mut self, done: bool) -> bool {
        if done {
            self.parity ^= 1;
        }
        done
    }
}

#[cfg(any(doc, all(target_feature = "sm_80", target_feature = "ptx71")))]
#[cfg_attr(
    any(docsrs, all(doc, target_arch = "nvptx64")),
    doc(cfg(all(target_feature = "sm_80", target_feature = "ptx71")))
)]
impl PhaseCursor {
    /// `mbarrier.test_wait.parity.shared::cta.b64`: non-blocking; `true` (and the
    /// cursor advances) once the phase completed.
    #[inline(always)]
    pub fn test_wait(&mut self) -> bool {
        // SAFETY: live barrier (handle contract); the cursor names the current or the
        // immediately preceding phase (see the type's docs).
        let done =
            unsafe { ptx_asm::mbarrier_test_wait_parity(self.bar.shared_addr(), self.parity) };
        self.advance_if(done)
    }
}

#[cfg(any(doc, all(target_feature = "sm_90", target_feature = "ptx78")))]
#[cfg_attr(
    any(docsrs, all(doc, target_arch = "nvptx64")),
    doc(cfg(all(target_feature = "sm_90", target_feature = "ptx78")))
)]
impl PhaseCursor {
    /// `mbarrier.try_wait.parity.shared::cta.b64`: potentially blocking (suspends for a
    /// system-dependent time); `true` (and the cursor advances) once the phase completed.
    #[inline(always)]
    pub fn try_wait(&mut self) -> bool {
        // SAFETY: as in `test_wait`.
        let done =
            unsafe { ptx_asm::mbarrier_try_wait_parity(self.bar.shared_addr(), self.parity, None) };
        self.advance_if(done)
    }

    /// [`try_wait`](Self::try_wait) with a suspend-time hint of about `hint_ns`
    /// nanoseconds.
    #[inline(always)]
    pub fn try_wait_hint(&mut self, hint_ns: u32) -> bool {
        // SAFETY: as in `test_wait`.
        let done = unsafe {
            ptx_asm::mbarrier_try_wait_parity(self.bar.shared_addr(), self.parity, Some(hint_ns))
        };
        self.advance_if(done)
    }

    /// Waits until the phase completes (a `try_wait.parity` loop), then advances.
    #[inline(always)]
    pub fn wait(&mut self) {
        while !self.try_wait() {}
    }
}

#[cfg(any(doc, all(target_feature = "sm_90", target_feature = "ptx80")))]
#[cfg_attr(
    any(docsrs, all(doc, target_arch = "nvptx64")),
    doc(cfg(all(target_feature = "sm_90", target_feature = "ptx80")))
)]
impl PhaseCursor {
    /// `mbarrier.try_wait.parity.acquire.<scope>.shared::cta.b64 p, [addr], parity{, hint};`:
    /// [`try_wait`](Self::try_wait) with explicit acquire scope and optional hint.
    #[inline(always)]
    pub fn try_wait_acquire(&mut self, scope: Scope, hint_ns: Option<u32>) -> bool {
        // SAFETY: as in `test_wait`.
        let done = unsafe {
            ptx_asm::mbarrier_try_wait_parity_acquire(
                self.bar.shared_addr(),
                self.parity,
                scope,
                hint_ns,
            )
        };
        self.advance_if(done)
    }

    /// Waits until the phase completes, acquiring at `scope` (use [`Scope::Cluster`] to
    /// see writes released by remote arrivals), then advances.
    #[inline(always)]
    pub fn wait_acquire(&mut self, scope: Scope) {
        while !self.try_wait_acquire(scope, None) {}
    }
}
