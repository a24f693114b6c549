//! Warp-wide reductions (butterfly exchanges with `shfl.sync.bfly`): every lane gets the
//! result, in five exchanges. For kernels whose warps reduce a row together (a norm, a
//! dot product, an arg-max), with all 32 lanes taking part.

use super::ptx_asm;

/// The sum of `v` over the warp's 32 lanes, in every lane (the same order of additions in
/// every lane, so every lane gets the same bits).
///
/// # Safety
/// All 32 lanes of the warp call it together, converged (no lane has exited or is in
/// another branch).
#[inline(always)]
#[must_use]
pub unsafe fn warp_sum_f32(v: f32) -> f32 {
    // SAFETY: the caller's promise: every lane takes part (a group of 32 is the warp).
    unsafe { warp_group_sum_f32::<32>(v) }
}

/// The largest `v` over the warp's 32 lanes, in every lane (a NaN loses to any number).
///
/// # Safety
/// As [`warp_sum_f32`].
#[inline(always)]
#[must_use]
pub unsafe fn warp_max_f32(v: f32) -> f32 {
    let mut v = v;
    let mut mask = 16;
    while mask > 0 {
        // SAFETY: the caller's promise: every lane takes part.
        let other = f32::from_bits(unsafe { ptx_asm::shfl_bfly_b32(v.to_bits(), mask) });
        v = v.max(other);
        mask >>= 1;
    }
    v
}

/// The wrapping sum of `v` over the warp's 32 lanes, in every lane.
///
/// # Safety
/// As [`warp_sum_f32`].
#[inline(always)]
#[must_use]
pub unsafe fn warp_sum_u32(v: u32) -> u32 {
    let mut v = v;
    let mut mask = 16;
    while mask > 0 {
        // SAFETY: the caller's promise: every lane takes part.
        v = v.wrapping_add(unsafe { ptx_asm::shfl_bfly_b32(v, mask) });
        mask >>= 1;
    }
    v
}

/// The largest `value` over the warp's 32 lanes with its `index`, in every lane: of equal
/// values the smaller index wins (greedy decoding's arg-max over a vocabulary split across
/// lanes); a NaN loses to any number.
///
/// # Safety
/// As [`warp_sum_f32`].
#[inline(always)]
#[must_use]
pub unsafe fn warp_argmax_f32(value: f32, index: u32) -> (f32, u32) {
    let (mut v, mut i) = (value, index);
    let mut mask = 16;
    while mask > 0 {
        // SAFETY: the caller's promise: every lane takes part (both exchanges).
        let (ov, oi) = unsafe {
            (
                f32::from_bits(ptx_asm::shfl_bfly_b32(v.to_bits(), mask)),
                ptx_asm::shfl_bfly_b32(i, mask),
            )
        };
        if ov > v || (ov == v && oi < i) || (v.is_nan() && !ov.is_nan()) {
            v = ov;
            i = oi;
        }
        mask >>= 1;
    }
    (v, i)
}

/// The `v` of lane `lane_id() ^ mask` (one butterfly exchange, `shfl.sync.bfly.b32`):
/// lanes that hold two halves of one result swap them, e.g. `mask = 16` pairs lane `l`
/// with `l + 16` (the two half-warps), `mask = 8` lane `l` with `l ^ 8` within a
/// half-warp. Only `mask`'s low five bits count (PTX reads `b[4:0]`): `mask` 0 or 32
/// gives every lane its own `v`.
///
/// # Safety
/// As [`warp_sum_f32`].
#[inline(always)]
#[must_use]
pub unsafe fn warp_xor_u32(v: u32, mask: u32) -> u32 {
    // SAFETY: the caller's promise: every lane takes part; any `mask` names a lane of
    // the warp (`shfl.sync` uses its low five bits).
    unsafe { ptx_asm::shfl_bfly_b32(v, mask) }
}

/// [`warp_xor_u32`] of an `f32`'s bits.
///
/// # Safety
/// As [`warp_sum_f32`].
#[inline(always)]
#[must_use]
pub unsafe fn warp_xor_f32(v: f32, mask: u32) -> f32 {
    // SAFETY: forwarded to the caller.
    f32::from_bits(unsafe { warp_xor_u32(v.to_bits(), mask) })
}

/// The sum of `v` over each aligned group of `W` lanes (lanes `W k .. W k + W`), in every
/// lane of the group: `W` of 2, 4, 8, 16 or 32 (a half warp reduces one 16-lane row,
/// e.g. a 128-wide head of bfloat16 read in 16-byte pieces). The whole warp still takes
/// part in every exchange.
///
/// # Safety
/// As [`warp_sum_f32`].
#[inline(always)]
#[must_use]
pub unsafe fn warp_group_sum_f32<const W: u32>(v: f32) -> f32 {
    const { assert!(W.is_power_of_two() && W >= 2 && W <= 32) };
    let mut v = v;
    let mut mask = W / 2;
    while mask > 0 {
        // SAFETY: the caller's promise: every lane takes part.
        let other = f32::from_bits(unsafe { ptx_asm::shfl_bfly_b32(v.to_bits(), mask) });
        v += other;
        mask >>= 1;
    }
    v
}

/// The sum of `v` over every thread of the CTA, in every thread: warp sums, then one
/// value per warp through `scratch` between two CTA barriers (so `scratch` may be reused
/// at once, by the next call too).
///
/// # Safety
/// Every thread of the CTA calls it together with the same `scratch`, converged (as for
/// [`sync_threads`](super::sync_threads)); the CTA's size is a multiple of 32 (whole
/// warps), and nothing else uses `scratch` during the call.
#[inline(always)]
#[must_use]
pub unsafe fn block_sum_f32(v: f32, scratch: super::SharedArray<f32, 32>) -> f32 {
    // SAFETY: the caller's promise: whole warps, every lane.
    let s = unsafe { warp_sum_f32(v) };
    let d = super::block_dim();
    let warps = ((d.x * d.y * d.z) / 32) as usize;
    let t = super::thread_idx();
    let tid = t.x + d.x * (t.y + d.y * t.z);
    let base = scratch.as_mut_ptr();
    if super::lane_id() == 0 {
        // SAFETY: warp `tid / 32 < 32` (at most 1024 threads) of the 32 slots; one writer
        // per slot.
        unsafe { base.add((tid / 32) as usize).write(s) };
    }
    // SAFETY: every thread of the CTA reaches both barriers (the caller's promise).
    unsafe { super::sync_threads() };
    let mut total = 0.0f32;
    for w in 0..warps.min(32) {
        // SAFETY: slot `w < 32`, written by warp `w` before the barrier.
        total += unsafe { base.add(w).read() };
    }
    // SAFETY: as above; no thread writes `scratch` again before every thread has read.
    unsafe { super::sync_threads() };
    total
}
