//! Warp data exchange (`shfl.sync`) and 16-byte loads (`ld.v4`): the two forms
//! the warp reductions and vectorized loads of `device` build on.

/// Writes the warp-exchange forms, each `fn name(args) -> result { body }` with the
/// function's docs; every form is for any SM this crate builds for (sm_70 and later).
macro_rules! warp {
    ($($(#[$meta:meta])* fn $name:ident ($($a:ident: $t:ty),*) -> $ret:ty $body:block)*) => {$(
        ptx_fn! { [] $(#[$meta])* #[must_use] fn $name($($a: $t),*) -> $ret $body }
    )*};
}

warp! {
    /// `shfl.sync.bfly.b32 d, a, lane_mask, 0x1f, 0xffffffff;` (PTX 6.0, sm_30): the value
    /// `a` of the lane whose index is this lane's XOR `lane_mask`, over the full warp.
    ///
    /// # Safety
    /// All 32 lanes of the warp execute this instruction together (none has exited or
    /// branched away): the full member mask names them all, which PTX requires of every
    /// lane in it.
    fn shfl_bfly_b32(a: u32, lane_mask: u32) -> u32 {
        let d: u32;
        // SAFETY: the caller's promise (every lane of the mask takes part); registers
        // only, the memory clobber kept (a convergent exchange stays in program order).
        unsafe {
            ::core::arch::asm!(
                "shfl.sync.bfly.b32 {d}, {a}, {m}, 0x1f, 0xffffffff;",
                d = out(reg32) d,
                a = in(reg32) a,
                m = in(reg32) lane_mask,
                options(nostack, preserves_flags),
            );
        }
        d
    }

    /// `ld.v4.u32 {a, b, c, d}, [ptr];` (generic address; any PTX ISA and SM): 16 bytes in
    /// one load.
    ///
    /// # Safety
    /// `ptr` is 16-byte aligned and readable for 16 bytes. Racing writes leave old or new
    /// words, as for the element loads.
    fn ld_v4_u32(ptr: *const u32) -> [u32; 4] {
        let (a, b, c, d): (u32, u32, u32, u32);
        // SAFETY: the caller guarantees the 16 readable, aligned bytes.
        unsafe {
            ::core::arch::asm!(
                "ld.v4.u32 {{{a}, {b}, {c}, {d}}}, [{p}];",
                a = out(reg32) a,
                b = out(reg32) b,
                c = out(reg32) c,
                d = out(reg32) d,
                p = in(reg64) ptr,
                options(readonly, nostack, preserves_flags),
            );
        }
        [a, b, c, d]
    }
}
