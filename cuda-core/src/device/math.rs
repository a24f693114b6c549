//! `f32` math for kernels built without `std` (where `core` has no `exp`, `sqrt` or
//! `mul_add` for nvptx): `2^x`, `e^x` and `1 / sqrt(x)` from the special-function unit,
//! each within a few units in the last place of `f32` (the PTX ISA's bounds), enough for
//! softmax, SiLU and RMS normalization in `f32` before a bfloat16 result; the fused
//! multiply-add, one instruction and one rounding for a product and a sum (dot products);
//! and the rounding to bfloat16 in one instruction for two values (sm_80), where
//! [`Bf16::from_f32`] takes about eight integer instructions for one.

use super::ptx_asm;
#[cfg(any(doc, all(target_feature = "sm_80", target_feature = "ptx70")))]
use crate::args::Bf16;

/// `2^x` (`ex2.approx.f32`): relative error at most 2^-22; `-inf` gives 0, `+inf` gives
/// `+inf`.
#[inline(always)]
#[must_use]
pub fn exp2_approx(x: f32) -> f32 {
    // SAFETY: registers only.
    unsafe { ptx_asm::ex2_approx_f32(x) }
}

/// `e^x` as `2^(x log2 e)` (one multiply and `ex2.approx.f32`; `__expf` in CUDA C++): the
/// rounding of the product adds a relative error of about `|x| 2^-24` for large `|x|`.
#[inline(always)]
#[must_use]
pub fn exp_approx(x: f32) -> f32 {
    exp2_approx(x * core::f32::consts::LOG2_E)
}

/// `1 / sqrt(x)` (`rsqrt.approx.f32`): relative error at most 2^-22.9; `+0` gives `+inf`,
/// a negative `x` NaN.
#[inline(always)]
#[must_use]
pub fn rsqrt_approx(x: f32) -> f32 {
    // SAFETY: registers only.
    unsafe { ptx_asm::rsqrt_approx_f32(x) }
}

/// `a b + c` rounded once (`fma.rn.f32`; `f32::mul_add` in `std`): one instruction
/// where `a * b + c` is two (Rust does not fuse them), and one rounding instead of two.
#[inline(always)]
#[must_use]
pub fn fma(a: f32, b: f32, c: f32) -> f32 {
    // SAFETY: registers only.
    unsafe { ptx_asm::fma_rn_f32(a, b, c) }
}

requires! {"sm_80", "ptx70";
    /// `lo` and `hi` rounded to bfloat16 (nearest, ties to even) and packed as two
    /// consecutive elements are in memory, `lo` in the lower half: one
    /// `cvt.rn.bf16x2.f32`. The bits are those of [`Bf16::from_f32`] for every number and
    /// infinity; a NaN gives a NaN (its payload not kept).
    #[inline(always)]
    #[must_use]
    pub fn pack_bf16x2(lo: f32, hi: f32) -> u32 {
        // SAFETY: registers only.
        unsafe { ptx_asm::cvt_rn_bf16x2_f32(hi, lo) }
    }

    /// `v` rounded to bfloat16 (nearest, ties to even) in one instruction: the
    /// [`Bf16::from_f32`] of the device (see [`pack_bf16x2`] for NaN).
    #[inline(always)]
    #[must_use]
    pub fn to_bf16(v: f32) -> Bf16 {
        Bf16::from_bits(pack_bf16x2(v, 0.0) as u16)
    }
}
