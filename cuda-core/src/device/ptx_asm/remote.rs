//! Asynchronous stores and reductions into distributed shared memory (Programming Guide
//! 4.11.3), completing on an mbarrier of the destination CTA: `st.async` and `red.async`
//! (PTX 8.1, sm_90).

/// Writes one function per line, all PTX 8.1 and sm_90, docs generated:
/// `st_async type: name;` stores a `type` (`u32`, `u64`), `red_async "op": name;` reduces
/// into a `u32` with `op` (`add`, `min`, `max`).
macro_rules! remote {
    () => {};
    (st_async $t:ident: $name:ident; $($rest:tt)*) => {
        ptx_fn! {
            ["sm_90", "ptx81"]
            #[doc = concat!(
                "`st.async.shared::cluster.mbarrier::complete_tx::bytes.", stringify!($t),
                " [dst], v, [mbar];` (PTX 8.1, sm_90): stores `v` asynchronously at `dst` in a ",
                "CTA of the cluster; when it lands, the mbarrier at `mbar` (in the same CTA as ",
                "`dst`) receives a `complete_tx` of the value's size."
            )]
            ///
            /// # Safety
            /// `dst` and `mbar` are `.shared::cluster` addresses in one CTA of the cluster,
            /// `dst` naturally aligned and writable, `mbar` a live mbarrier whose current phase
            /// expects these bytes; the destination CTA does not exit before the phase
            /// completes.
            fn $name(dst: u32, v: $t, mbar: u32) = concat!(
                "st.async.shared::cluster.mbarrier::complete_tx::bytes.", stringify!($t),
                " [{dst}], {v}, [{mbar}];"
            )
        }
        remote!($($rest)*);
    };
    (red_async $op:literal: $name:ident; $($rest:tt)*) => {
        ptx_fn! {
            ["sm_90", "ptx81"]
            #[doc = concat!(
                "`red.async.relaxed.cluster.shared::cluster.mbarrier::complete_tx::bytes.", $op,
                ".u32 [dst], v, [mbar];` (PTX 8.1, sm_90): an asynchronous atomic `", $op,
                "` of `v` into the `u32` at `dst` in a CTA of the cluster (relaxed, cluster ",
                "scope); the mbarrier at `mbar` in that CTA receives a `complete_tx` of 4 bytes."
            )]
            ///
            /// # Safety
            /// As [`st_async_u32`].
            fn $name(dst: u32, v: u32, mbar: u32) = concat!(
                "red.async.relaxed.cluster.shared::cluster.mbarrier::complete_tx::bytes.", $op,
                ".u32 [{dst}], {v}, [{mbar}];"
            )
        }
        remote!($($rest)*);
    };
}

remote! {
    st_async u32: st_async_u32;
    st_async u64: st_async_u64;
    red_async "add": red_async_add_u32;
    red_async "min": red_async_min_u32;
    red_async "max": red_async_max_u32;
}
