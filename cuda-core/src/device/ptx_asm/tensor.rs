//! Tensor copies (TMA): `cp.async.bulk.tensor` loads (tile, multicast, im2col), stores
//! and L2 prefetches for 1 to 5 dimensions, and `prefetch.tensormap`.
//!
//! `tensor_map: u64` is the generic address of a 64-byte aligned `CUtensorMap` (made by
//! `cuTensorMapEncodeTiled`) in global, constant or kernel-parameter memory; coordinates
//! are `i32` element indices, innermost dimension first, and may lie partly or wholly out
//! of bounds (a load fills those elements with zeros, a store skips them). The shared
//! side is the box, laid out densely (innermost dimension fastest, unless the map
//! swizzles), at a 128-byte aligned address.

/// Writes the tensor-copy instructions, all PTX 8.0 and sm_90:
/// - `tile "Nd", N: load, multicast, store, prefetch; c0, ..;` the tile-mode load,
///   multicast load, store and L2 prefetch of one dimensionality, with coordinates
///   `[i32; N]` named `c0, ..` in the template;
/// - `im2col "Nd", N, M: load; c0, ..; o0, ..;` the im2col load, with `M` 16-bit offsets;
/// - `fn name(args) { "template" }`: one instruction of the forms `ptx_fn!` writes.
///
/// Docs and `# Safety` sections of the generated forms are written here, once.
macro_rules! tensor {
    () => {};
    (
        tile $dim:literal, $n:literal: $load:ident, $mcast:ident, $store:ident, $prefetch:ident;
        $c0:ident $(, $c:ident)*; $($rest:tt)*
    ) => {
        ptx_fn! {
            [sm90_ptx80]
            #[doc = concat!(
                "`cp.async.bulk.tensor.", $dim,
                ".shared::cluster.global.tile.mbarrier::complete_tx::bytes",
                " [dst], [tensor_map, {c0, ...}], [mbar];`",
                " (PTX 8.0, sm_90): loads the box at `coords` of the tensor map into shared ",
                "memory at `dst` and performs complete-tx of the box's bytes on `mbar`. ",
                "Out-of-bounds elements are filled with zeros; the transaction is always the ",
                "whole box."
            )]
            ///
            /// # Safety
            /// `tensor_map` the generic address of a valid, 64-byte aligned `CUtensorMap` in
            /// global, constant or parameter memory, not modified while in use; `dst` a
            /// 128-byte aligned `.shared::cluster` address with room for the box; `mbar` a
            /// live mbarrier in the same CTA as `dst` armed for the box's bytes. Nothing else
            /// accesses the box until the mbarrier's phase completes.
            fn $load(dst: u32, tensor_map: u64, coords: [i32; $n], mbar: u32) {
                let [$c0 $(, $c)*] = coords;
                // SAFETY: forwarded to the caller.
                unsafe {
                    tensor!(@asm
                        [
                            "cp.async.bulk.tensor.", $dim,
                            ".shared::cluster.global.tile.mbarrier::complete_tx::bytes",
                            " [{d}], [{m}, ",
                            tensor!(@list $c0 $(, $c)*), "], [{b}];"
                        ]
                        [d = in(reg32) dst, m = in(reg64) tensor_map,]
                        [$c0 $(, $c)*]
                        [b = in(reg32) mbar,]
                    );
                }
            }
        }

        ptx_fn! {
            [sm90_ptx80]
            #[doc = concat!(
                "`cp.async.bulk.tensor.", $dim,
                ".shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster",
                " [dst], [tensor_map, {c0, ...}], [mbar], ctaMask;`",
                " (PTX 8.0, sm_90; `ptxas` advises `sm_90a` for performance): loads the box ",
                "into the shared memory of every cluster CTA whose rank bit is set in ",
                "`cta_mask`, at `dst`'s CTA-relative offset, with complete-tx of the box's ",
                "bytes on the mbarrier at `mbar`'s offset in each."
            )]
            ///
            /// # Safety
            #[doc = concat!("As [`", stringify!($load), "`], for every destination CTA")]
            /// (each has a live mbarrier at `mbar`, initialized and visible cluster-wide
            /// before this is issued); only ranks below `%cluster_nctarank` are set in
            /// `cta_mask`, and no destination CTA exits before its copy completed.
            fn $mcast(dst: u32, tensor_map: u64, coords: [i32; $n], mbar: u32, cta_mask: u16) {
                let [$c0 $(, $c)*] = coords;
                // SAFETY: forwarded to the caller.
                unsafe {
                    tensor!(@asm
                        [
                            "cp.async.bulk.tensor.", $dim,
                            ".shared::cluster.global.tile.mbarrier::complete_tx::bytes",
                            ".multicast::cluster [{d}], [{m}, ",
                            tensor!(@list $c0 $(, $c)*), "], [{b}], {k};"
                        ]
                        [d = in(reg32) dst, m = in(reg64) tensor_map,]
                        [$c0 $(, $c)*]
                        [b = in(reg32) mbar, k = in(reg16) cta_mask,]
                    );
                }
            }
        }

        ptx_fn! {
            [sm90_ptx80]
            #[doc = concat!(
                "`cp.async.bulk.tensor.", $dim,
                ".global.shared::cta.tile.bulk_group [tensor_map, {c0, ...}], [src];`",
                " (PTX 8.0, sm_90): stores the box at `src` in this CTA's shared memory to ",
                "the tensor at `coords` (out-of-bounds elements are skipped), as part of this ",
                "thread's current bulk async-group."
            )]
            ///
            /// # Safety
            /// `tensor_map` as for the load; `src` a 128-byte aligned `.shared::cta` address
            /// of the box, whose generic-proxy writes were fenced
            /// (`fence.proxy.async.shared::cta`) before this; `src` not written until
            /// `cp.async.bulk.wait_group.read` covers the store, nor the destination accessed
            /// until `cp.async.bulk.wait_group` does.
            fn $store(tensor_map: u64, coords: [i32; $n], src: u32) {
                let [$c0 $(, $c)*] = coords;
                // SAFETY: forwarded to the caller.
                unsafe {
                    tensor!(@asm
                        [
                            "cp.async.bulk.tensor.", $dim,
                            ".global.shared::cta.tile.bulk_group [{m}, ",
                            tensor!(@list $c0 $(, $c)*), "], [{s}];"
                        ]
                        [m = in(reg64) tensor_map,]
                        [$c0 $(, $c)*]
                        [s = in(reg32) src,]
                    );
                }
            }
        }

        ptx_fn! {
            [sm90_ptx80]
            #[doc = concat!(
                "`cp.async.bulk.prefetch.tensor.", $dim,
                ".L2.global.tile [tensor_map, {c0, ...}];` (PTX 8.0, sm_90): hints that ",
                "the box at `coords` be brought into L2."
            )]
            ///
            /// # Safety
            /// `tensor_map` as for the load.
            fn $prefetch(tensor_map: u64, coords: [i32; $n]) {
                let [$c0 $(, $c)*] = coords;
                // SAFETY: forwarded to the caller.
                unsafe {
                    tensor!(@asm
                        [
                            "cp.async.bulk.prefetch.tensor.", $dim, ".L2.global.tile [{m}, ",
                            tensor!(@list $c0 $(, $c)*), "];"
                        ]
                        [m = in(reg64) tensor_map,]
                        [$c0 $(, $c)*]
                        []
                    );
                }
            }
        }
        tensor!($($rest)*);
    };
    (
        im2col $dim:literal, $n:literal, $m:literal: $load:ident;
        $c0:ident $(, $c:ident)*; $o0:ident $(, $o:ident)*; $($rest:tt)*
    ) => {
        ptx_fn! {
            [sm90_ptx80]
            #[doc = concat!(
                "`cp.async.bulk.tensor.", $dim,
                ".shared::cluster.global.im2col.mbarrier::complete_tx::bytes",
                " [dst], [tensor_map, {c0, ...}], [mbar], {o0, ...};`",
                " (PTX 8.0, sm_90): loads `pixelsPerColumn` pixels of `channelsPerPixel` ",
                "channels from an im2col tensor map (`cuTensorMapEncodeIm2col`), starting at ",
                "pixel `coords` (channel, spatial..., image) inside the map's bounding box, each ",
                "pixel read at its coordinates plus the 16-bit `offsets` (one per spatial ",
                "dimension), into shared memory at `dst`, with complete-tx of the load's bytes ",
                "on `mbar`. Out-of-bounds pixels are filled."
            )]
            ///
            /// # Safety
            /// As the tile load of the same dimensionality, with an im2col map.
            fn $load(
                dst: u32,
                tensor_map: u64,
                coords: [i32; $n],
                offsets: [u16; $m],
                mbar: u32,
            ) {
                let [$c0 $(, $c)*] = coords;
                let [$o0 $(, $o)*] = offsets;
                // SAFETY: forwarded to the caller.
                unsafe {
                    tensor!(@asm
                        [
                            "cp.async.bulk.tensor.", $dim,
                            ".shared::cluster.global.im2col.mbarrier::complete_tx::bytes",
                            " [{d}], [{m}, ", tensor!(@list $c0 $(, $c)*), "], [{b}], ",
                            tensor!(@list $o0 $(, $o)*), ";"
                        ]
                        [d = in(reg32) dst, m = in(reg64) tensor_map,]
                        [$c0 $(, $c)*]
                        [$o0 = in(reg16) $o0, $($o = in(reg16) $o,)* b = in(reg32) mbar,]
                    );
                }
            }
        }
        tensor!($($rest)*);
    };
    (
        $(#[$meta:meta])* fn $name:ident $args:tt { $($tpl:literal)+ } $($rest:tt)*
    ) => {
        ptx_fn! { [sm90_ptx80] $(#[$meta])* fn $name $args = concat!($($tpl),+) }
        tensor!($($rest)*);
    };
    // `{c0, c1, ..}`: a vector operand of the named registers.
    (@list $x0:ident $(, $x:ident)*) => {
        concat!("{{", "{", stringify!($x0), "}" $(, ", {", stringify!($x), "}")*, "}}")
    };
    // The template, then the operands: those before the coordinates, the coordinates (each
    // a `reg32` input named after itself) and those after.
    (@asm [$($tpl:expr),+] [$($before:tt)*] [$($coord:ident),+] [$($after:tt)*]) => {
        ::core::arch::asm!(
            concat!($($tpl),+),
            $($before)*
            $($coord = in(reg32) $coord,)+
            $($after)*
            options(nostack),
        )
    };
}

tensor! {
    im2col "3d", 3, 1: cp_async_bulk_tensor_3d_im2col_global_to_shared; c0, c1, c2; o0;
    im2col "4d", 4, 2: cp_async_bulk_tensor_4d_im2col_global_to_shared; c0, c1, c2, c3; o0, o1;
    im2col "5d", 5, 3: cp_async_bulk_tensor_5d_im2col_global_to_shared;
        c0, c1, c2, c3, c4; o0, o1, o2;

    tile "1d", 1: cp_async_bulk_tensor_1d_global_to_shared,
        cp_async_bulk_tensor_1d_global_to_shared_multicast,
        cp_async_bulk_tensor_1d_shared_to_global, cp_async_bulk_prefetch_tensor_1d_l2;
        c0;
    tile "2d", 2: cp_async_bulk_tensor_2d_global_to_shared,
        cp_async_bulk_tensor_2d_global_to_shared_multicast,
        cp_async_bulk_tensor_2d_shared_to_global, cp_async_bulk_prefetch_tensor_2d_l2;
        c0, c1;
    tile "3d", 3: cp_async_bulk_tensor_3d_global_to_shared,
        cp_async_bulk_tensor_3d_global_to_shared_multicast,
        cp_async_bulk_tensor_3d_shared_to_global, cp_async_bulk_prefetch_tensor_3d_l2;
        c0, c1, c2;
    tile "4d", 4: cp_async_bulk_tensor_4d_global_to_shared,
        cp_async_bulk_tensor_4d_global_to_shared_multicast,
        cp_async_bulk_tensor_4d_shared_to_global, cp_async_bulk_prefetch_tensor_4d_l2;
        c0, c1, c2, c3;
    tile "5d", 5: cp_async_bulk_tensor_5d_global_to_shared,
        cp_async_bulk_tensor_5d_global_to_shared_multicast,
        cp_async_bulk_tensor_5d_shared_to_global, cp_async_bulk_prefetch_tensor_5d_l2;
        c0, c1, c2, c3, c4;

    /// `prefetch.tensormap [tensor_map];` (PTX 8.0, sm_90): brings the tensor map at the
    /// generic address `tensor_map` into the cache the tensor copies read it from.
    ///
    /// # Safety
    /// `tensor_map` the generic address of a 64-byte aligned `CUtensorMap` in global,
    /// constant or parameter memory.
    fn prefetch_tensormap(tensor_map: u64) { "prefetch.tensormap [{tensor_map}];" }
}
