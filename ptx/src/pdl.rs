//! The Programmatic Dependent Launch pair: `pdl_primary` then `pdl_secondary`, launched
//! back to back on one stream with the programmatic-stream-serialization attribute on
//! the secondary (or joined by a programmatic graph edge).
//!
//! Both record per-block timestamps (`%globaltimer`, ns) into `stamps`: 4 `u64`s per block
//! at `stamps[4 * blockIdx.x ..]`: `[start, mid, end, smid]`, written by thread 0.
//! Overlap shows as `secondary.start < max(primary.end)`, while correctness shows as
//! `secondary.mid >= max(primary.end)` (the wait returned after the primary completed)
//! and in the data.

use cudadrv::device::{
    block_idx, clock64, globaltimer, grid_dependency_wait, launch_dependents, smid, sync_threads,
    thread_idx,
};

use crate::grid::for_each_index;

/// Value `pdl_primary` writes at index `i`: `3 * i + 7` (wrapping `u32`).
#[inline(always)]
#[must_use]
pub const fn primary_value(i: u32) -> u32 {
    i.wrapping_mul(3).wrapping_add(7)
}

/// Value `pdl_secondary` writes for input `x`: `2 * x + 1` (wrapping `u32`); after the
/// primary, `6 * i + 15`.
#[inline(always)]
#[must_use]
pub const fn secondary_value(x: u32) -> u32 {
    x.wrapping_mul(2).wrapping_add(1)
}

/// Writes this block's stamp `slot` (0..4) if the calling thread is thread 0.
///
/// # Safety
/// `stamps` writable for `4 * gridDim.x` `u64`s.
#[inline(always)]
unsafe fn stamp(stamps: *mut u64, slot: usize, value: u64) {
    if thread_idx().x == 0 {
        let b = block_idx().x as usize;
        // SAFETY: `b < gridDim.x` and `slot < 4`; the caller sized `stamps`.
        unsafe { stamps.add(4 * b + slot).write_volatile(value) };
    }
}

/// Primary of the PDL pair: `griddepcontrol.launch_dependents` at block entry (the
/// earliest trigger: the secondary may be scheduled at once), then `work_ns` of busy
/// waiting on `%globaltimer` (standing in for real work), then `out[i] = 3 * i + 7` for
/// `i < n`.
///
/// Launch: 1-D grid and block of any size (grid-stride loop), no dynamic shared memory,
/// e.g. grid 132, block 256. Normal launch (no attribute needed).
///
/// Per block, thread 0 writes `stamps[4b..4b+4] = [start, mid, end, smid]`: `start` at
/// block entry (after the trigger), `mid` after the busy wait, `end` after the block's
/// writes (after a `__syncthreads`), `smid` the SM the block ran on. Because the trigger
/// comes first, a dependent launched with PDL can start while this grid still runs
/// (`secondary.start < max(primary.end)`); its `griddepcontrol.wait` still returns only
/// after this grid completed and its writes are visible.
///
/// # Safety
/// `out` writable for `n` `u32`s, `stamps` for `4 * gridDim.x` `u64`s.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn pdl_primary(
    out: *mut u32,
    n: u32,
    stamps: *mut u64,
    work_ns: u32,
) {
    launch_dependents();
    let start = globaltimer();
    // SAFETY: the host sized `stamps` (this kernel's contract).
    unsafe { stamp(stamps, 0, start) };
    while globaltimer().wrapping_sub(start) < u64::from(work_ns) {}
    // SAFETY: as above.
    unsafe { stamp(stamps, 1, globaltimer()) };
    for_each_index(n, |i| {
        // SAFETY: `i < n` and `out` holds `n` elements.
        unsafe { out.add(i as usize).write(primary_value(i)) };
    });
    // SAFETY: reached by every thread of the block (no divergence above).
    unsafe { sync_threads() };
    // SAFETY: as above.
    unsafe {
        stamp(stamps, 2, globaltimer());
        stamp(stamps, 3, u64::from(smid()));
    }
}

/// Secondary of the PDL pair: a prolog of `prolog_iters` busy iterations (each reads
/// `%clock64`; nothing the primary writes), then `griddepcontrol.wait`, then
/// `out[i] = 2 * in[i] + 1` for `i < n` (so `out[i] == 6 * i + 15` after `pdl_primary`).
///
/// Launch: right after `pdl_primary` on the same stream, with
/// `CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 1`; any 1-D grid and block,
/// no dynamic shared memory (e.g. grid 132, block 256). `in` is the primary's `out`.
///
/// Per block, thread 0 writes `stamps[4b..4b+4] = [start, mid, end, smid]`: `start` at
/// block entry (before the prolog), `mid` right after `griddepcontrol.wait` returned,
/// `end` after the block's writes, `smid` the SM. Without the attribute the kernel still
/// gives the same data (the wait returns at once, the stream already serialized).
///
/// # Safety
/// `input` readable and `out` writable for `n` `u32`s (not overlapping), `stamps`
/// writable for `4 * gridDim.x` `u64`s.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn pdl_secondary(
    input: *const u32,
    out: *mut u32,
    n: u32,
    stamps: *mut u64,
    prolog_iters: u32,
) {
    // SAFETY: the host sized `stamps` (this kernel's contract).
    unsafe { stamp(stamps, 0, globaltimer()) };
    // Prolog: independent work that may overlap the primary. The clock reads are summed
    // and the sum is used below, so the loop survives optimization (the JIT removes
    // unused `%clock64` reads).
    let mut acc = 0u64;
    for _ in 0..prolog_iters {
        acc = acc.wrapping_add(clock64());
    }
    grid_dependency_wait();
    // SAFETY: as above.
    unsafe { stamp(stamps, 1, globaltimer()) };
    for_each_index(n, |i| {
        let i = i as usize;
        // SAFETY: `i < n`; `input` and `out` hold `n` elements.
        unsafe { out.add(i).write(secondary_value(input.add(i).read())) };
    });
    // SAFETY: reached by every thread of the block.
    unsafe { sync_threads() };
    // SAFETY: as above.
    unsafe {
        stamp(stamps, 2, globaltimer());
        // `acc` is never u64::MAX in practice; the comparison keeps the prolog alive.
        stamp(
            stamps,
            3,
            if acc == u64::MAX {
                acc
            } else {
                u64::from(smid())
            },
        );
    }
}
