//! [`MBarrier`]: a typed handle to an asynchronous barrier (`mbarrier`) in shared memory,
//! and [`ArrivalToken`], the phase state an arrive returns.
//!
//! An mbarrier is an 8-byte aligned `.b64` in shared memory. Each phase completes when
//! its expected arrivals have all arrived and its tx-count is back to zero; then the next
//! phase starts with the same expected count. Two ways to wait for a phase:
//!
//! - with the [`ArrivalToken`] of an arrive (the waiting thread took part in the phase):
//!   [`ArrivalToken::wait`] consumes the token, so a stale token cannot be reused;
//! - by phase parity, through a [`PhaseCursor`](super::PhaseCursor) that tracks the next
//!   phase to wait for and advances after each completed wait, so the caller never
//!   passes a raw parity (a parity wait may only name the current or the immediately
//!   preceding phase).
//!
//! Storage comes from [`shared_array!`](crate::shared_array) (`[u64; N]`) or dynamic
//! shared memory.
//!
//! A producer/consumer hand-off in one block of 64 threads: warp 0 writes 32 words to
//! shared memory and arrives; warp 1 arrives and waits for the phase, after which warp
//! 0's writes are visible to it (device code, built for `nvptx64-nvidia-cuda` as in
//! `examples/kernel-template/kernels`, where this kernel runs on the GPU):
//!
//! ```ignore
//! use cudadrv::device::{MBarrier, fence_mbarrier_init, sync_threads, thread_idx};
//!
//! cudadrv::shared_array! { fn words() -> [u32; 32]; }
//! cudadrv::shared_array! { fn bar_storage() -> [u64; 1]; }
//!
//! #[unsafe(no_mangle)]
//! pub unsafe extern "ptx-kernel" fn handoff(out: *mut u32) {
//!     let tid = thread_idx().x;
//!     let lane = (tid % 32) as usize;
//!     // SAFETY: a u64 of this block's shared memory used only as this barrier; thread 0
//!     // initializes it before the sync every thread reaches; 64 threads arrive once each.
//!     let bar = unsafe { MBarrier::from_ptr(bar_storage().as_mut_ptr()) };
//!     if tid == 0 {
//!         unsafe { bar.init(64) }; // the expected count: every thread of the block
//!         fence_mbarrier_init();
//!     }
//!     unsafe { sync_threads() };
//!     let slot = words().ptr(lane).unwrap();
//!     // SAFETY (each arrive): 64 threads arrive once each in a phase expecting 64.
//!     if tid < 32 {
//!         // Producer: write, then arrive (the arrive releases the write).
//!         unsafe { slot.write_volatile(1000 + tid) };
//!         let _ = unsafe { bar.arrive() };
//!     } else {
//!         // Consumer: arrive, then wait for the phase (acquire), then read.
//!         unsafe { bar.arrive() }.wait();
//!         unsafe { *out.add(lane) = slot.read_volatile() };
//!     }
//! }
//! ```

#[cfg(any(doc, all(target_feature = "sm_80", target_feature = "ptx70")))]
use super::ptx_asm;
#[cfg(any(doc, all(target_feature = "sm_90", target_feature = "ptx80")))]
use super::scope::Scope;

/// Handle to one mbarrier in this CTA's shared memory (its `.shared::cta` address).
///
/// Copyable: every thread that uses the barrier holds its own handle. Created with the
/// `unsafe` [`from_shared_addr`](Self::from_shared_addr) or [`from_ptr`](Self::from_ptr),
/// whose contract (the storage, its initialization) makes the waits safe. Each arrival
/// and tx-count change is `unsafe` on its own: the barrier's protocol (no phase receives
/// more arrivals than it expects, tx-counts in range) is a property of each call, which
/// its caller can check where it writes it, not a promise the handle's creator could
/// make about calls written later or elsewhere.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MBarrier {
    addr: u32,
}

impl MBarrier {
    /// Wraps the `.shared::cta` address of an mbarrier.
    ///
    /// # Safety
    /// For as long as the handle (or a copy, token or cursor made from it) is used:
    /// - `addr` names an 8-byte aligned `u64` in this CTA's shared memory that is used
    ///   only as this mbarrier;
    /// - one thread has called [`init`](Self::init) on it, and that initialization is
    ///   visible to this thread (for example through [`sync_threads`](super::sync_threads)
    ///   or a fence plus cluster barrier) before any method other than `init` is called;
    ///   it is not invalidated ([`inval`](Self::inval)) while in use.
    ///
    /// The protocol of arrivals and tx-counts is not part of this promise: each method
    /// that arrives or changes the tx-count states it under its own `# Safety`.
    #[inline(always)]
    #[must_use]
    pub const unsafe fn from_shared_addr(addr: u32) -> Self {
        Self { addr }
    }

    /// Wraps a generic pointer to an mbarrier in this CTA's shared memory (converted with
    /// `cvta.to.shared`).
    ///
    /// # Safety
    /// `ptr` must point into this CTA's shared memory, and the contract of
    /// [`from_shared_addr`](Self::from_shared_addr) applies to it.
    #[inline(always)]
    #[must_use]
    pub unsafe fn from_ptr(ptr: *mut u64) -> Self {
        Self {
            addr: super::to_shared_addr(ptr),
        }
    }

    /// The barrier's `.shared::cta` address.
    #[inline(always)]
    #[must_use]
    pub const fn shared_addr(self) -> u32 {
        self.addr
    }
}

#[cfg(any(doc, all(target_feature = "sm_80", target_feature = "ptx70")))]
#[cfg_attr(
    any(docsrs, all(doc, target_arch = "nvptx64")),
    doc(cfg(all(target_feature = "sm_80", target_feature = "ptx70")))
)]
impl MBarrier {
    /// `mbarrier.init.shared::cta.b64`: starts phase 0 expecting `count` arrivals per
    /// phase.
    ///
    /// # Safety
    /// Exactly one thread initializes a barrier, with `count` in `1..2^20`, while no
    /// other thread uses it; other threads may use it only once the initialization is
    /// visible to them (see [`from_shared_addr`](Self::from_shared_addr)).
    #[inline(always)]
    pub unsafe fn init(self, count: u32) {
        // SAFETY: forwarded to the caller.
        unsafe { ptx_asm::mbarrier_init(self.addr, count) }
    }

    /// `mbarrier.inval.shared::cta.b64`: ends the barrier's life so its memory can be
    /// reused.
    ///
    /// # Safety
    /// No thread uses the barrier during or after this call (until a new `init`).
    #[inline(always)]
    pub unsafe fn inval(self) {
        // SAFETY: forwarded to the caller.
        unsafe { ptx_asm::mbarrier_inval(self.addr) }
    }

    /// `mbarrier.arrive.shared::cta.b64`: one arrival (release at CTA scope); the token
    /// names the phase it arrived in.
    ///
    /// # Safety
    /// The current phase still expects at least one more arrival (an arrival past the expected count
    /// is undefined behaviour).
    #[inline(always)]
    pub unsafe fn arrive(self) -> ArrivalToken {
        // SAFETY: the handle's contract makes the barrier live; the caller keeps the
        // arrival in protocol.
        let state = unsafe { ptx_asm::mbarrier_arrive(self.addr) };
        ArrivalToken { bar: self, state }
    }

    /// `mbarrier.arrive.noComplete.shared::cta.b64`: `count` arrivals that do not
    /// complete the phase.
    ///
    /// # Safety
    /// The current phase must still need more than `count` arrivals after this one (an
    /// arrive that completes the phase with `.noComplete` is undefined behavior).
    #[inline(always)]
    pub unsafe fn arrive_no_complete(self, count: u32) -> ArrivalToken {
        // SAFETY: the handle's contract makes the barrier live; the caller guarantees
        // this does not complete the phase.
        let state = unsafe { ptx_asm::mbarrier_arrive_no_complete(self.addr, count) };
        ArrivalToken { bar: self, state }
    }
}

#[cfg(any(doc, all(target_feature = "sm_90", target_feature = "ptx78")))]
#[cfg_attr(
    any(docsrs, all(doc, target_arch = "nvptx64")),
    doc(cfg(all(target_feature = "sm_90", target_feature = "ptx78")))
)]
impl MBarrier {
    /// `mbarrier.arrive.shared::cta.b64 state, [addr], count;` (sm_90): `count`
    /// arrivals at once.
    ///
    /// # Safety
    /// The current phase still expects at least `count` more arrivals (an arrival past the expected count
    /// is undefined behaviour), and `count` is in `1..2^20`.
    #[inline(always)]
    pub unsafe fn arrive_count(self, count: u32) -> ArrivalToken {
        // SAFETY: the handle's contract makes the barrier live; the caller keeps `count`
        // in protocol.
        let state = unsafe { ptx_asm::mbarrier_arrive_count(self.addr, count) };
        ArrivalToken { bar: self, state }
    }
}

#[cfg(any(doc, all(target_feature = "sm_90", target_feature = "ptx80")))]
#[cfg_attr(
    any(docsrs, all(doc, target_arch = "nvptx64")),
    doc(cfg(all(target_feature = "sm_90", target_feature = "ptx80")))
)]
impl MBarrier {
    /// `mbarrier.arrive.release.<scope>.shared::cta.b64 state, [addr], count;`: `count`
    /// arrivals releasing this thread's prior writes at `scope` (use
    /// [`Scope::Cluster`] when threads of other CTAs wait on what this thread wrote).
    ///
    /// # Safety
    /// The current phase still expects at least `count` more arrivals (an arrival past the expected count
    /// is undefined behaviour), and `count` is in `1..2^20`.
    #[inline(always)]
    pub unsafe fn arrive_release(self, scope: Scope, count: u32) -> ArrivalToken {
        // SAFETY: the handle's contract makes the barrier live; the caller keeps `count`
        // in protocol.
        let state = unsafe { ptx_asm::mbarrier_arrive_release(self.addr, scope, count) };
        ArrivalToken { bar: self, state }
    }

    /// `mbarrier.arrive.expect_tx.release.<scope>.shared::cta.b64 state, [addr], tx;`:
    /// raises the phase's tx-count by `tx`, then arrives once. The phase completes only
    /// when `tx` units have been completed ([`complete_tx`](Self::complete_tx) or an
    /// async copy).
    ///
    /// # Safety
    /// The current phase still expects at least one more arrival (an arrival past the expected count
    /// is undefined behaviour), and its tx-count stays within `-(2^20 - 1)..2^20` with `tx`
    /// added.
    #[inline(always)]
    pub unsafe fn arrive_expect_tx(self, scope: Scope, tx: u32) -> ArrivalToken {
        // SAFETY: the handle's contract makes the barrier live; the caller keeps the
        // arrival and the tx-count in protocol.
        let state = unsafe { ptx_asm::mbarrier_arrive_expect_tx(self.addr, scope, tx) };
        ArrivalToken { bar: self, state }
    }

    /// `mbarrier.expect_tx.relaxed.<scope>.shared::cta.b64 [addr], tx;`: raises the
    /// current phase's tx-count by `tx` without arriving.
    ///
    /// # Safety
    /// The current phase's tx-count stays within `-(2^20 - 1)..2^20` with `tx` added.
    #[inline(always)]
    pub unsafe fn expect_tx(self, scope: Scope, tx: u32) {
        // SAFETY: the handle's contract makes the barrier live; the caller keeps the
        // tx-count in range.
        unsafe { ptx_asm::mbarrier_expect_tx(self.addr, scope, tx) }
    }

    /// `mbarrier.complete_tx.relaxed.cluster.shared::cluster.b64 [addr], tx;` on this
    /// CTA's own barrier (a `.shared::cta` address is a valid `.shared::cluster` address
    /// of the executing CTA, so this works in a cluster of one): lowers the tx-count by
    /// `tx`, as an async copy's completion would. Relaxed: it releases nothing, so
    /// publish data with a release arrive.
    ///
    /// # Safety
    /// The current phase's tx-count stays within `-(2^20 - 1)..2^20` with `tx` taken
    /// away (the phase expects these units).
    #[inline(always)]
    pub unsafe fn complete_tx(self, tx: u32) {
        // SAFETY: the handle's contract makes the barrier live; the caller keeps the
        // tx-count in range; this CTA is running, so its own barrier is reachable.
        unsafe { ptx_asm::mbarrier_complete_tx(self.addr, tx) }
    }
}

/// The state of the phase an arrive took part in, tied to its barrier. Waiting consumes
/// the token; a non-blocking [`test_wait`](Self::test_wait) does not.
///
/// Dropping a token is fine (arriving without waiting is a normal pattern).
#[derive(Debug)]
pub struct ArrivalToken {
    bar: MBarrier,
    state: u64,
}

impl ArrivalToken {
    /// The raw 64-bit state.
    #[inline(always)]
    #[must_use]
    pub const fn raw(&self) -> u64 {
        self.state
    }

    /// The barrier this token belongs to.
    #[inline(always)]
    #[must_use]
    pub const fn barrier(&self) -> MBarrier {
        self.bar
    }
}

#[cfg(any(doc, all(target_feature = "sm_80", target_feature = "ptx70")))]
#[cfg_attr(
    any(docsrs, all(doc, target_arch = "nvptx64")),
    doc(cfg(all(target_feature = "sm_80", target_feature = "ptx70")))
)]
impl ArrivalToken {
    /// `mbarrier.pending_count.b64`: arrivals that were still pending in the token's
    /// phase right after the arrive that produced it.
    #[inline(always)]
    #[must_use]
    pub fn pending_count(&self) -> u32 {
        // SAFETY: the token came from an arrive on a live barrier.
        unsafe { ptx_asm::mbarrier_pending_count(self.state) }
    }

    /// `mbarrier.test_wait.shared::cta.b64`: non-blocking; whether the token's phase has
    /// completed.
    #[inline(always)]
    #[must_use]
    pub fn test_wait(&self) -> bool {
        // SAFETY: live barrier (handle contract); the token's phase is the current or the
        // preceding one because the thread arrived in it and has not waited past it.
        unsafe { ptx_asm::mbarrier_test_wait(self.bar.addr, self.state) }
    }
}

#[cfg(any(doc, all(target_feature = "sm_90", target_feature = "ptx78")))]
#[cfg_attr(
    any(docsrs, all(doc, target_arch = "nvptx64")),
    doc(cfg(all(target_feature = "sm_90", target_feature = "ptx78")))
)]
impl ArrivalToken {
    /// `mbarrier.try_wait.shared::cta.b64`: potentially blocking (suspends for a
    /// system-dependent time); `Ok` once the phase completed, else the token back.
    #[inline(always)]
    pub fn try_wait(self) -> Result<(), Self> {
        // SAFETY: as in `test_wait`.
        if unsafe { ptx_asm::mbarrier_try_wait(self.bar.addr, self.state, None) } {
            Ok(())
        } else {
            Err(self)
        }
    }

    /// [`try_wait`](Self::try_wait) with a suspend-time hint of about `hint_ns`
    /// nanoseconds.
    #[inline(always)]
    pub fn try_wait_hint(self, hint_ns: u32) -> Result<(), Self> {
        // SAFETY: as in `test_wait`.
        if unsafe { ptx_asm::mbarrier_try_wait(self.bar.addr, self.state, Some(hint_ns)) } {
            Ok(())
        } else {
            Err(self)
        }
    }

    /// Waits until the token's phase completes (a `try_wait` loop).
    #[inline(always)]
    pub fn wait(self) {
        let mut token = self;
        while let Err(t) = token.try_wait() {
            token = t;
        }
    }
}

#[cfg(any(doc, all(target_feature = "sm_90", target_feature = "ptx80")))]
#[cfg_attr(
    any(docsrs, all(doc, target_arch = "nvptx64")),
    doc(cfg(all(target_feature = "sm_90", target_feature = "ptx80")))
)]
impl ArrivalToken {
    /// `mbarrier.try_wait.acquire.<scope>.shared::cta.b64 p, [addr], state{, hint};`:
    /// [`try_wait`](Self::try_wait) with explicit acquire scope and optional hint.
    #[inline(always)]
    pub fn try_wait_acquire(self, scope: Scope, hint_ns: Option<u32>) -> Result<(), Self> {
        // SAFETY: as in `test_wait`.
        let done = unsafe {
            ptx_asm::mbarrier_try_wait_acquire(self.bar.addr, self.state, scope, hint_ns)
        };
        if done { Ok(()) } else { Err(self) }
    }

    /// Waits until the token's phase completes, acquiring at `scope`.
    #[inline(always)]
    pub fn wait_acquire(self, scope: Scope) {
        let mut token = self;
        while let Err(t) = token.try_wait_acquire(scope, None) {
            token = t;
        }
    }
}
