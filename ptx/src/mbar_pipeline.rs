//! `mbar_pipeline`: a producer/consumer ring in shared memory over many mbarrier phases,
//! using every local mbarrier form: init, arrive, arrive with count,
//! arrive.expect_tx + complete_tx, expect_tx + complete_tx + arrive, token waits
//! (test_wait, try_wait with a suspend hint) and parity waits (test_wait.parity,
//! try_wait.parity), fence.mbarrier_init, inval.

use cudadrv::device::{
    ArrivalToken, Dim3, MBarrier, PhaseCursor, Scope, block_dim, block_idx, fence_mbarrier_init,
    sync_threads, thread_idx,
};

/// Slots in the ring.
pub const SLOTS: u32 = 4;
/// `u32` words per slot.
pub const SLOT_WORDS: u32 = 64;
/// Transaction count the producer expects and completes per phase (the slot's bytes).
pub const SLOT_TX: u32 = SLOT_WORDS * 4;
/// Threads per block the kernel requires: warp 0 produces, warps 1..=3 consume.
pub const BLOCK_THREADS: u32 = 128;
/// Consumer threads per block.
pub const CONSUMERS: u32 = BLOCK_THREADS - 32;

cudadrv::shared_array! {
    /// The ring: `SLOTS` slots of `SLOT_WORDS` words.
    fn pipe_ring() -> [u32; 256];
}

cudadrv::shared_array! {
    /// `full[k]` at 0..SLOTS, `empty[k]` at SLOTS..2*SLOTS.
    fn pipe_bars() -> [u64; 8];
}

/// Word `j` of the slot the producer fills in phase `p`: `1000 * p + j` (wrapping).
#[inline(always)]
#[must_use]
pub const fn produced_word(p: u32, j: u32) -> u32 {
    p.wrapping_mul(1000).wrapping_add(j)
}

/// What consumer lane `lane` writes for phase `p`: word `lane` plus word `lane + 32` of
/// the slot, `2000 * p + 2 * lane + 32` (wrapping).
#[inline(always)]
#[must_use]
pub const fn expected_output(p: u32, lane: u32) -> u32 {
    produced_word(p, lane).wrapping_add(produced_word(p, lane + 32))
}

/// The barrier at index `i` (0..2*SLOTS) of `pipe_bars`.
///
/// # Safety
/// `i < 2 * SLOTS`; the barriers are initialized (by thread 0, before the
/// `sync_threads` that follows) and used by the protocol below.
#[inline(always)]
unsafe fn bar(i: u32) -> MBarrier {
    // SAFETY: `i < 8` (caller) and the storage is a `[u64; 8]` in shared memory; the
    // caller upholds the liveness and protocol contract.
    unsafe { MBarrier::from_shared_addr(pipe_bars().addr_unchecked(i as usize)) }
}

/// Producer/consumer pipeline through a 4-slot shared-memory ring, `phases` phases.
///
/// Launch: any 1-D grid (each block runs its own independent pipeline), block exactly
/// (128, 1, 1) (other shapes return at once without writing), no dynamic shared memory
/// (1 KiB + 64 B static).
///
/// Per phase `p` (0..phases) the producer warp (warp 0) fills slot `p % 4` with words
/// `1000 * p + j` (j in 0..64) and publishes it through `full[p % 4]` (expected count
/// 64: the producer's 32 lanes plus the 32 threads of warp 3; lane 0's arrival carries
/// the transaction forms). Even phases: lane 0 does
/// `arrive.expect_tx(256)` then `complete_tx(256)`; odd phases: `expect_tx(256)`,
/// `complete_tx(256)`, then a plain `arrive`. Warps 1 and 2 wait with parity cursors
/// (warp 1 `try_wait.parity`, warp 2 a `test_wait.parity` spin); warp 3's threads
/// arrive on `full` and wait with their token (`test_wait`, then `try_wait` with a
/// suspend hint). Each consumer thread then writes one word and releases the slot on
/// `empty[p % 4]` (expected 96: each thread of warps 1 and 2 arrives through the count
/// form with count 1, each thread of warp 3 through the plain form). The producer waits on `empty` by
/// parity before refilling a slot (from phase 4 on).
///
/// Output: for block `b`, phase `p`, consumer warp `w` (1..=3), lane `l`:
/// `out[((b * phases + p) * 3 + (w - 1)) * 32 + l] == 2000 * p + 2 * l + 32` (wrapping
/// `u32`; see [`expected_output`]). `out` has `gridDim.x * phases * 96` words, all written.
///
/// # Safety
/// `out` writable for `gridDim.x * phases * 96` `u32`s.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn mbar_pipeline(out: *mut u32, phases: u32) {
    if block_dim() != Dim3::x(BLOCK_THREADS) {
        return;
    }
    let tid = thread_idx().x;
    let warp = tid / 32;
    let lane = tid % 32;
    if tid == 0 {
        for k in 0..SLOTS {
            // SAFETY: `k < SLOTS`, thread 0 is the only thread touching the barriers
            // until the `sync_threads` below; counts are in range.
            unsafe {
                bar(k).init(32 + 32);
                bar(SLOTS + k).init(CONSUMERS);
            }
        }
        fence_mbarrier_init();
    }
    // SAFETY: every thread of the block reaches it (the shape check is uniform).
    unsafe { sync_threads() };

    if warp == 0 {
        // SAFETY: the barriers are initialized and visible (sync above).
        unsafe { produce(lane, phases) };
    } else {
        let base = (block_idx().x as usize * phases as usize) * 3 + (warp as usize - 1);
        // SAFETY: as above; `out` is sized by the kernel contract.
        unsafe { consume(out, base, warp, lane, phases) };
    }

    // SAFETY: every thread of the block reaches it.
    unsafe { sync_threads() };
    if tid == 0 {
        for k in 0..2 * SLOTS {
            // SAFETY: all threads are past their last use of the barriers (sync above).
            unsafe { bar(k).inval() };
        }
    }
}

/// The producer warp's loop.
///
/// # Safety
/// Called by all 32 lanes of warp 0 after the barriers' initialization is visible.
#[inline(always)]
unsafe fn produce(lane: u32, phases: u32) {
    let ring = pipe_ring().as_mut_ptr();
    // SAFETY: indices < 2 * SLOTS; barriers live.
    let mut empty: [PhaseCursor; SLOTS as usize] =
        core::array::from_fn(|k| unsafe { bar(SLOTS + k as u32) }.phase_cursor());
    for p in 0..phases {
        let k = p % SLOTS;
        if p >= SLOTS {
            // The slot's previous round must have been consumed.
            empty[k as usize].wait();
        }
        for j in [lane, lane + 32] {
            // SAFETY: `k * 64 + j < 256`, inside the ring.
            unsafe {
                ring.add((k * SLOT_WORDS + j) as usize)
                    .write_volatile(produced_word(p, j))
            };
        }
        // Every lane releases its own writes by arriving itself, so each write is
        // ordered by its own thread's release (which racecheck follows), not by a warp
        // barrier plus one lane's arrive.
        // SAFETY: `k < SLOTS`; barrier live.
        let full = unsafe { bar(k) };
        // SAFETY (the arrivals and tx below): `full[k]` expects 64 arrivals per phase,
        // this warp's 32 lanes once each and warp 3's 32 threads once each; phase `p`
        // of the slot is not complete before lane 0's arrival, so its 256 tx units are
        // raised and retired inside the phase (tx-count within range).
        if lane != 0 {
            let _ = unsafe { full.arrive() };
        } else if p % 2 == 0 {
            // Arrive (release) with +256 tx pending, then complete the tx.
            let _ = unsafe { full.arrive_expect_tx(Scope::Cta, SLOT_TX) };
            unsafe { full.complete_tx(SLOT_TX) };
        } else {
            // Raise and retire the tx-count, then arrive (release) last.
            unsafe {
                full.expect_tx(Scope::Cta, SLOT_TX);
                full.complete_tx(SLOT_TX);
            }
            let _ = unsafe { full.arrive() };
        }
    }
}

/// A consumer warp's loop (warps 1..=3).
///
/// # Safety
/// Called by all 32 lanes of a consumer warp after the barriers' initialization is
/// visible; `out` writable at the indices documented on [`mbar_pipeline`].
#[inline(always)]
unsafe fn consume(out: *mut u32, base: usize, warp: u32, lane: u32, phases: u32) {
    let ring = pipe_ring().as_mut_ptr();
    // SAFETY: indices < SLOTS; barriers live.
    let mut full: [PhaseCursor; SLOTS as usize] =
        core::array::from_fn(|k| unsafe { bar(k as u32) }.phase_cursor());
    for p in 0..phases {
        let k = p % SLOTS;
        match warp {
            1 => full[k as usize].wait(),
            2 => while !full[k as usize].test_wait() {},
            _ => {
                // SAFETY: `k < SLOTS`; barrier live; warp 3's 32 arrivals, once per
                // phase, are part of `full`'s expected 64.
                let token: ArrivalToken = unsafe { bar(k).arrive() };
                if !token.test_wait() {
                    let mut token = token;
                    while let Err(t) = token.try_wait_hint(20_000) {
                        token = t;
                    }
                }
            }
        }
        // SAFETY: `k * 64 + lane + 32 < 256`, inside the ring; the phase completed, so
        // the producer's writes are visible (acquire).
        let v = unsafe {
            ring.add((k * SLOT_WORDS + lane) as usize)
                .read_volatile()
                .wrapping_add(
                    ring.add((k * SLOT_WORDS + lane + 32) as usize)
                        .read_volatile(),
                )
        };
        // SAFETY: the index is below `gridDim.x * phases * 96` (kernel contract).
        unsafe {
            out.add((base + p as usize * 3) * 32 + lane as usize)
                .write(v)
        };
        // SAFETY: `SLOTS + k < 2 * SLOTS`; barrier live.
        let empty = unsafe { bar(SLOTS + k) };
        // SAFETY: `empty[k]` expects 96 arrivals per phase, one from each consumer
        // thread; the producer waits for the phase before the slot's next round.
        if warp == 3 {
            let _ = unsafe { empty.arrive() };
        } else {
            // Warps 1 and 2 use the count form, one arrival per thread.
            let _ = unsafe { empty.arrive_count(1) };
        }
    }
}
