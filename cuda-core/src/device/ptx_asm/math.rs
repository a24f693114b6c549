//! The special-function unit's approximations (`ex2.approx`, `rsqrt.approx`), the fused
//! multiply-add (`fma.rn`) and the bfloat16 rounding (`cvt.rn.bf16x2.f32`), which `core`
//! has no nvptx lowering for without `std`; and global atomics (`atom`) on 32- and 64-bit
//! words, relaxed at GPU scope.

/// Writes the one-operand `f32` forms, `fn name(a: f32) -> f32 = "template";`: registers
/// only, so the asm is `pure` and `nomem`.
macro_rules! sfu {
    ($($(#[$meta:meta])* fn $name:ident(a: f32) -> f32 = $tpl:literal;)*) => {$(
        ptx_fn! {
            []
            $(#[$meta])*
            ///
            /// # Safety
            /// None: it reads and writes registers only (an `unsafe fn`, as every form of
            /// this module is).
            #[must_use]
            fn $name(a: f32) -> f32 {
                let d: f32;
                // SAFETY: registers only.
                unsafe {
                    ::core::arch::asm!(
                        $tpl,
                        d = out(reg32) d,
                        a = in(reg32) a,
                        options(pure, nomem, nostack, preserves_flags),
                    );
                }
                d
            }
        }
    )*};
}

sfu! {
    /// `ex2.approx.f32 d, a;` (any PTX ISA and SM): `2^a`, maximum relative error 2^-22
    /// over the whole range (subnormal results kept).
    fn ex2_approx_f32(a: f32) -> f32 = "ex2.approx.f32 {d}, {a};";

    /// `rsqrt.approx.f32 d, a;` (any PTX ISA and SM): `1 / sqrt(a)`, maximum relative
    /// error 2^-22.9 over the whole range.
    fn rsqrt_approx_f32(a: f32) -> f32 = "rsqrt.approx.f32 {d}, {a};";
}

ptx_fn! {
    []
    /// `fma.rn.f32 d, a, b, c;` (any PTX ISA and SM): `a b + c` rounded once, to nearest
    /// even.
    ///
    /// # Safety
    /// None: it reads and writes registers only.
    #[must_use]
    fn fma_rn_f32(a: f32, b: f32, c: f32) -> f32 {
        let d: f32;
        // SAFETY: registers only.
        unsafe {
            ::core::arch::asm!(
                "fma.rn.f32 {d}, {a}, {b}, {c};",
                d = out(reg32) d,
                a = in(reg32) a,
                b = in(reg32) b,
                c = in(reg32) c,
                options(pure, nomem, nostack, preserves_flags),
            );
        }
        d
    }
}

ptx_fn! {
    [sm80_ptx70]
    /// `cvt.rn.bf16x2.f32 d, hi, lo;` (PTX 7.0, sm_80): `lo` and `hi` rounded to bfloat16
    /// (nearest, ties to even) and packed, `lo` in the lower half of `d`.
    ///
    /// # Safety
    /// None: it reads and writes registers only.
    #[must_use]
    fn cvt_rn_bf16x2_f32(hi: f32, lo: f32) -> u32 {
        let d: u32;
        // SAFETY: registers only.
        unsafe {
            ::core::arch::asm!(
                "cvt.rn.bf16x2.f32 {d}, {hi}, {lo};",
                d = out(reg32) d,
                hi = in(reg32) hi,
                lo = in(reg32) lo,
                options(pure, nomem, nostack, preserves_flags),
            );
        }
        d
    }
}

/// Writes the atomic read-modify-write forms, `fn name(ptr: *mut T, v: T) -> T =
/// "template";` with `T` in the register class `class`: the old value is returned.
macro_rules! atom {
    ($($(#[$meta:meta])* fn $name:ident(ptr: *mut $t:ident, v: $t2:ident) -> $r:ident in $reg:ident = $tpl:literal;)*) => {$(
        ptx_fn! {
            []
            $(#[$meta])*
            ///
            /// # Safety
            /// `ptr` is valid for reads and writes of its type, naturally aligned, in global
            /// memory (a generic address). Plain loads and stores of other threads racing
            /// with it see the old or the new value.
            #[must_use]
            fn $name(ptr: *mut $t, v: $t2) -> $r {
                let d: $r;
                // SAFETY: the caller guarantees the word; the memory clobber keeps other
                // accesses on their side.
                unsafe {
                    ::core::arch::asm!(
                        $tpl,
                        d = out($reg) d,
                        p = in(reg64) ptr,
                        v = in($reg) v,
                        options(nostack, preserves_flags),
                    );
                }
                d
            }
        }
    )*};
}

atom! {
    /// `atom.relaxed.gpu.add.u32 d, [ptr], v;` (PTX 6.0, sm_70).
    fn atom_add_u32(ptr: *mut u32, v: u32) -> u32 in reg32
        = "atom.relaxed.gpu.add.u32 {d}, [{p}], {v};";

    /// `atom.relaxed.gpu.min.u64 d, [ptr], v;` (PTX 6.0, sm_70).
    fn atom_min_u64(ptr: *mut u64, v: u64) -> u64 in reg64
        = "atom.relaxed.gpu.min.u64 {d}, [{p}], {v};";

    /// `atom.relaxed.gpu.max.u64 d, [ptr], v;` (PTX 6.0, sm_70).
    fn atom_max_u64(ptr: *mut u64, v: u64) -> u64 in reg64
        = "atom.relaxed.gpu.max.u64 {d}, [{p}], {v};";
}
