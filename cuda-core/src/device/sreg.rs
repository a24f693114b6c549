//! Timers and SM identity: `%globaltimer`, `%clock64`, `%smid`, `%nsmid`, `%warpid`.
//! Cluster registers are in [`cluster`](super::cluster).

use super::ptx_asm;

/// `%globaltimer`: the GPU's global nanosecond timer, comparable across SMs (its update
/// granularity is coarser than a nanosecond on some GPUs). Read anew at each call.
#[inline(always)]
#[must_use]
pub fn globaltimer() -> u64 {
    // SAFETY: reading a special register has no side effect.
    unsafe { ptx_asm::globaltimer() }
}

/// `%clock64`: this SM's cycle counter (not comparable across SMs). Read anew at each
/// call.
#[inline(always)]
#[must_use]
pub fn clock64() -> u64 {
    // SAFETY: reading a special register has no side effect.
    unsafe { ptx_asm::clock64() }
}

/// `%smid`: the SM this thread runs on (0..[`nsmid`]).
#[inline(always)]
#[must_use]
pub fn smid() -> u32 {
    // SAFETY: reading a special register has no side effect.
    unsafe { ptx_asm::smid() }
}

/// `%nsmid`: one past the largest SM id (ids need not be contiguous).
#[inline(always)]
#[must_use]
pub fn nsmid() -> u32 {
    // SAFETY: reading a special register has no side effect.
    unsafe { ptx_asm::nsmid() }
}

/// `%warpid`: the warp's slot on its SM (not the warp index within the block; it may
/// change when the warp is rescheduled).
#[inline(always)]
#[must_use]
pub fn warpid() -> u32 {
    // SAFETY: reading a special register has no side effect.
    unsafe { ptx_asm::warpid() }
}
