//! Element loads and stores through generic addresses (`ld` / `st`), for the device slices
//! (`crate::kernel::DeviceSlice`).

/// Writes one load and store pair per line, `type as register_type in class: ld, st;`:
/// `ld.type` / `st.type` through a 64-bit generic address, with the value in a `class`
/// register of `register_type` (`u8` travels in a 16-bit register).
macro_rules! access {
    ($($t:ident as $rt:ident in $reg:ident: $ld:ident, $st:ident;)*) => {$(
        ptx_fn! {
            []
            #[doc = concat!(
                "`ld.", stringify!($t), " v, [ptr];` (generic address; any PTX ISA and SM)."
            )]
            ///
            /// # Safety
            /// `ptr` must be valid for a read of its type, naturally aligned. A write by
            /// another thread racing with it leaves the old or the new value (a single
            /// naturally aligned access), not undefined behaviour: the access is outside the
            /// Rust memory model.
            #[must_use]
            fn $ld(ptr: *const $t) -> $t {
                let v: $rt;
                // SAFETY: the caller guarantees `ptr` is readable; the asm reads one element.
                unsafe {
                    asm_args!(
                        [concat!("ld.", stringify!($t), " {v}, [{ptr}];"), v = out($reg) v,]
                        (ptr: *const $t)
                        [options(pure, readonly, nostack, preserves_flags)]
                    );
                }
                v as $t
            }
        }

        ptx_fn! {
            []
            #[doc = concat!(
                "`st.", stringify!($t), " [ptr], v;` (generic address; any PTX ISA and SM)."
            )]
            ///
            /// # Safety
            /// `ptr` must be valid for a write of its type, naturally aligned; racing accesses
            /// as for the load.
            fn $st(ptr: *mut $t, v: $t) {
                // SAFETY: the caller guarantees `ptr` is writable; the asm writes one element.
                unsafe {
                    ::core::arch::asm!(
                        concat!("st.", stringify!($t), " [{ptr}], {v};"),
                        ptr = in(reg64) ptr,
                        v = in($reg) v as $rt,
                        options(nostack, preserves_flags),
                    );
                }
            }
        }
    )*};
}

access! {
    u8 as u16 in reg16: ld_u8, st_u8;
    u16 as u16 in reg16: ld_u16, st_u16;
    u32 as u32 in reg32: ld_u32, st_u32;
    u64 as u64 in reg64: ld_u64, st_u64;
}
