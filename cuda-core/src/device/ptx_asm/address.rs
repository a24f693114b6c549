//! Address windows: conversions between generic pointers and the `.shared::cta` /
//! `.shared::cluster` windows (`cvta`, `mapa`).

/// Writes the address conversions, each `[gate] fn name(args) -> u32 { templates }` or
/// `-> *mut u8`: `#[must_use]`, `pure` and `nomem` (no memory is accessed); the templates
/// name the result `{out}`.
macro_rules! address {
    () => {};
    ($(#[$meta:meta])* $([$gate:ident])? fn $name:ident $args:tt -> u32 $tpl:tt $($rest:tt)*) => {
        address!(@fn [$($gate)?] [u32] reg32 $(#[$meta])* fn $name $args $tpl);
        address!($($rest)*);
    };
    (
        $(#[$meta:meta])* $([$gate:ident])? fn $name:ident $args:tt -> *mut u8 $tpl:tt
        $($rest:tt)*
    ) => {
        address!(@fn [$($gate)?] [*mut u8] reg64 $(#[$meta])* fn $name $args $tpl);
        address!($($rest)*);
    };
    (
        @fn $gate:tt [$ret:ty] $class:ident $(#[$meta:meta])*
        fn $name:ident $args:tt { $($tpl:literal),+ }
    ) => {
        ptx_fn! {
            $gate
            $(#[$meta])*
            #[must_use]
            fn $name $args -> $ret {
                let out: $ret;
                // SAFETY: address arithmetic only (`mapa`: translation); no memory access.
                unsafe {
                    asm_args!(
                        [$($tpl,)+ out = out($class) out,]
                        $args
                        [options(pure, nomem, nostack, preserves_flags)]
                    );
                }
                out
            }
        }
    };
}

address! {
    /// `cvta.to.shared.u64` + `cvt.u32.u64`: the `.shared::cta` window address of a generic
    /// pointer into this CTA's shared memory (`__cvta_generic_to_shared`).
    ///
    /// # Safety
    /// `ptr` must point into the executing CTA's shared memory; otherwise the result is
    /// meaningless (it is only an integer, so no access happens here).
    fn cvta_to_shared(ptr: *const u8) -> u32 {
        "{{", ".reg .b64 t;", "cvta.to.shared.u64 t, {ptr};", "cvt.u32.u64 {out}, t;", "}}"
    }

    /// `cvt.u64.u32` + `cvta.shared.u64`: the generic pointer of a `.shared::cta` window
    /// address (`__cvta_shared_to_generic`).
    ///
    /// # Safety
    /// `addr` must be an address in the executing CTA's shared window for the result to be
    /// dereferenceable (this function itself accesses nothing).
    fn cvta_shared_to_generic(addr: u32) -> *mut u8 {
        "{{", ".reg .b64 t;", "cvt.u64.u32 t, {addr};", "cvta.shared.u64 {out}, t;", "}}"
    }

    /// `mapa.shared::cluster.u32 d, addr, rank;` (PTX 7.8, sm_90): the
    /// `.shared::cluster` address of the variable at `addr` in the CTA of cluster rank
    /// `rank`.
    ///
    /// # Safety
    /// `addr` must be a `.shared::cta` address and `rank` less than `%cluster_nctarank`.
    [sm90_ptx78] fn mapa_shared_cluster(addr: u32, rank: u32) -> u32 {
        "mapa.shared::cluster.u32 {out}, {addr}, {rank};"
    }

    /// `mapa.u64 d, ptr, rank;` (PTX 7.8, sm_90): the generic pointer to the variable at
    /// generic shared pointer `ptr` in the CTA of cluster rank `rank` (distributed shared
    /// memory, as `cluster.map_shared_rank`).
    ///
    /// # Safety
    /// `ptr` must point into the executing CTA's shared memory and `rank` be less than
    /// `%cluster_nctarank`.
    [sm90_ptx78] fn mapa_generic(ptr: *mut u8, rank: u32) -> *mut u8 {
        "mapa.u64 {out}, {ptr}, {rank};"
    }
}
