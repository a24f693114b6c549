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
    let mut v = v;
    let mut mask = 16;
    while mask > 0 {
        // SAFETY: the caller's promise: every lane takes part.
        let other = f32::from_bits(unsafe { ptx_asm::shfl_bfly_b32(v.to_bits(), mask) });
        v += other;
        mask >>= 1;
    }
    v
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
