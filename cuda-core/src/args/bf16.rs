//! [`Bf16`]: the bfloat16 number (1 sign bit, 8 exponent bits, 7 mantissa bits: the top
//! half of an `f32`), as a kernel parameter and a device-slice element, with the same
//! conversions on the host and on the device.
//!
//! The conversions are integer arithmetic, so both sides compute the same bits:
//! [`Bf16::from_f32`] rounds to nearest, ties to even (what `cvt.rn.bf16.f32` and
//! PyTorch's `tensor.to(torch.bfloat16)` do), keeps infinities and keeps NaNs NaN;
//! [`Bf16::to_f32`] is exact.

use super::DeviceRepr;

/// A bfloat16 number, stored as its 16 bits.
#[repr(transparent)]
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Bf16(u16);

impl Bf16 {
    /// Zero.
    pub const ZERO: Self = Self(0);
    /// One.
    pub const ONE: Self = Self(0x3f80);

    /// The number with these bits.
    #[inline(always)]
    #[must_use]
    pub const fn from_bits(bits: u16) -> Self {
        Self(bits)
    }

    /// Its bits.
    #[inline(always)]
    #[must_use]
    pub const fn to_bits(self) -> u16 {
        self.0
    }

    /// `v` rounded to the nearest bfloat16, ties to even; infinities stay infinite and
    /// a NaN stays a NaN (quiet).
    #[inline(always)]
    #[must_use]
    pub const fn from_f32(v: f32) -> Self {
        let bits = v.to_bits();
        if bits & 0x7fff_ffff > 0x7f80_0000 {
            // NaN: keep the sign and the top mantissa bits, force a quiet NaN.
            return Self(((bits >> 16) as u16) | 0x0040);
        }
        let round = 0x7fff + ((bits >> 16) & 1);
        Self((bits.wrapping_add(round) >> 16) as u16)
    }

    /// The exact `f32` of this number.
    #[inline(always)]
    #[must_use]
    pub const fn to_f32(self) -> f32 {
        f32::from_bits((self.0 as u32) << 16)
    }

    /// The two bfloat16 numbers packed in one 32-bit word (the lower half first, as two
    /// consecutive elements are in memory), as `f32`s.
    #[inline(always)]
    #[must_use]
    pub const fn unpack2(word: u32) -> [f32; 2] {
        [
            f32::from_bits(word << 16),
            f32::from_bits(word & 0xffff_0000),
        ]
    }

    /// The eight bfloat16 numbers of four packed words (16 bytes, as they are in memory:
    /// each word's lower half first), as `f32`s: [`unpack2`](Self::unpack2) of each.
    #[inline(always)]
    #[must_use]
    pub const fn unpack8(words: [u32; 4]) -> [f32; 8] {
        let [a, b] = Self::unpack2(words[0]);
        let [c, d] = Self::unpack2(words[1]);
        let [e, f] = Self::unpack2(words[2]);
        let [g, h] = Self::unpack2(words[3]);
        [a, b, c, d, e, f, g, h]
    }
}

impl core::fmt::Debug for Bf16 {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}bf16", self.to_f32())
    }
}

impl From<Bf16> for f32 {
    #[inline(always)]
    fn from(v: Bf16) -> Self {
        v.to_f32()
    }
}

// SAFETY: two bytes, no padding, the same encoding on host and device; device alignment
// 2 (C++ `__nv_bfloat16`).
unsafe impl DeviceRepr for Bf16 {
    const DEVICE_SIZE: usize = 2;
    const DEVICE_ALIGN: usize = 2;
    const PLAIN: bool = true;
    // Not `u16`'s fingerprint: a declaration naming the other type is refused at load.
    const SIGNATURE: u64 = super::signature_mix(u16::SIGNATURE, 0xbf16);
}

const _: () = assert!(size_of::<Bf16>() == 2 && align_of::<Bf16>() == 2);

#[cfg(test)]
mod tests {
    use super::Bf16;
    use crate::testing::{CASES, Rng};

    /// Round to nearest even through `f64` arithmetic: the reference.
    fn reference(v: f32) -> u16 {
        if v.is_nan() {
            return 0x7fc0;
        }
        let bits = v.to_bits();
        let (lo, hi) = (
            bits & 0xffff_0000,
            (bits & 0xffff_0000).wrapping_add(0x1_0000),
        );
        let (a, b) = (f32::from_bits(lo) as f64, f32::from_bits(hi) as f64);
        let x = v as f64;
        let down = (x - a).abs();
        let up = (b - x).abs();
        let pick = if down < up || (down == up && (lo >> 16) & 1 == 0) {
            lo
        } else {
            hi
        };
        (pick >> 16) as u16
    }

    #[test]
    fn from_f32_rounds_to_nearest_even() {
        let mut rng = Rng(0xbf16);
        for _ in 0..CASES {
            let v = f32::from_bits(rng.next() as u32);
            // Past the largest bfloat16's half-way point the rounding goes to infinity,
            // which the reference's next-value arithmetic does not model.
            if v.is_nan() || v.abs() >= f32::from_bits(0x7f7f_8000) {
                continue;
            }
            let got = Bf16::from_f32(v).to_bits();
            assert_eq!(got, reference(v), "{v:e} ({:#010x})", v.to_bits());
        }
        // Ties: halfway between two bfloat16 values goes to the even one.
        assert_eq!(
            Bf16::from_f32(f32::from_bits(0x3f80_8000)).to_bits(),
            0x3f80
        );
        assert_eq!(
            Bf16::from_f32(f32::from_bits(0x3f81_8000)).to_bits(),
            0x3f82
        );
        assert_eq!(Bf16::from_f32(1.0), Bf16::ONE);
        assert_eq!(Bf16::from_f32(-0.0).to_bits(), 0x8000);
    }

    #[test]
    fn specials_and_exact_round_trips() {
        assert_eq!(Bf16::from_f32(f32::INFINITY).to_f32(), f32::INFINITY);
        assert_eq!(
            Bf16::from_f32(f32::NEG_INFINITY).to_f32(),
            f32::NEG_INFINITY
        );
        assert!(Bf16::from_f32(f32::NAN).to_f32().is_nan());
        assert!(
            Bf16::from_f32(f32::from_bits(0x7f80_0001))
                .to_f32()
                .is_nan()
        );
        // The largest finite value rounds up to infinity, as the IEEE rule says.
        assert_eq!(Bf16::from_f32(f32::MAX).to_f32(), f32::INFINITY);
        for bits in [0u16, 1, 0x3f80, 0x7f7f, 0x8001, 0xc2f7] {
            let b = Bf16::from_bits(bits);
            assert_eq!(Bf16::from_f32(b.to_f32()), b, "{bits:#06x}");
        }
        assert_eq!(Bf16::unpack2(0x4000_3f80), [1.0, 2.0]);
        assert_eq!(
            Bf16::unpack8([0x4000_3f80, 0xc000_bf80, 0x0000_3f00, 0x7f80_ff80]),
            [
                1.0,
                2.0,
                -1.0,
                -2.0,
                0.5,
                0.0,
                f32::NEG_INFINITY,
                f32::INFINITY
            ]
        );
    }
}
