//! Bulk asynchronous copies (`cp.async.bulk`, sm_90), bulk reductions, their async-groups
//! and the L2 cache policies their hint forms carry.
//!
//! Bulk copies run in the async proxy: generic-proxy writes to shared memory that a bulk
//! copy (or TMA store) reads need `fence.proxy.async.shared::cta` first. `size` is a
//! multiple of 16 and both addresses are 16-byte aligned. A load completes on an mbarrier
//! (`complete_tx::bytes`: it lowers the tx-count by `size`); a store belongs to this
//! thread's bulk async-group (`cp.async.bulk.commit_group` / `wait_group`).

/// Writes the bulk-copy instructions, all PTX 8.0 and sm_90: `fn name(args) { "template" }`
/// (pieces concatenated) is one instruction of the forms `ptx_fn!` writes; `createpolicy`'s
/// template names its const generic `PRIORITY`, which stands for the eviction priority it
/// selects.
macro_rules! bulk {
    () => {};
    (
        $(#[$meta:meta])* fn $name:ident<const $priority:ident: u32>() -> u64
        { $pre:literal $_priority:ident $post:literal } $($rest:tt)*
    ) => {
        ptx_fn! {
            [sm90_ptx80]
            $(#[$meta])*
            fn $name<const $priority: u32>() -> u64 {
                let policy: u64;
                // SAFETY: computes a value in a register; no memory access.
                unsafe {
                    match $priority {
                        1 => bulk!(@policy policy $pre "evict_first" $post),
                        2 => bulk!(@policy policy $pre "evict_last" $post),
                        3 => bulk!(@policy policy $pre "evict_unchanged" $post),
                        _ => bulk!(@policy policy $pre "evict_normal" $post),
                    }
                }
                policy
            }
        }
        bulk!($($rest)*);
    };
    (@policy $policy:ident $pre:literal $priority:literal $post:literal) => {
        asm_args!(
            [concat!($pre, $priority, $post), $policy = out(reg64) $policy,]
            ()
            [options(nostack, nomem, pure)]
        )
    };
    (
        $(#[$meta:meta])* fn $name:ident $(<const $n:ident: u32>)? ($($args:tt)*)
        { $($tpl:literal)+ } $($rest:tt)*
    ) => {
        ptx_fn! {
            [sm90_ptx80] $(#[$meta])* fn $name $(<const $n: u32>)? ($($args)*) = concat!($($tpl),+)
        }
        bulk!($($rest)*);
    };
}

bulk! {
    /// `cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [dst], [src], size, [mbar];`
    /// (PTX 8.0, sm_90): copies `size` bytes from global memory to shared memory and
    /// performs complete-tx of `size` bytes on the mbarrier at `mbar` when done.
    ///
    /// # Safety
    /// `dst` a `.shared::cluster` address (this CTA's `.shared::cta` address qualifies)
    /// and `src` a global address, both 16-byte aligned; `size` a multiple of 16 with
    /// `size` bytes readable at `src` and writable at `dst`; `mbar` a live mbarrier in
    /// the same CTA as `dst`, whose tx-count stays in range (arm it with expect-tx of
    /// `size`). Nothing else accesses `dst` until the mbarrier's phase completes, and
    /// `src` is not written until then.
    fn cp_async_bulk_global_to_shared(dst: u32, src: *const u8, size: u32, mbar: u32) {
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
        " [{dst}], [{src}], {size}, [{mbar}];"
    }

    /// `cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [dst], [src], size, [mbar], ctaMask;`
    /// (PTX 8.0, sm_90; `ptxas` advises `sm_90a` for performance): copies `size` bytes
    /// from global memory into the shared memory of every CTA of the cluster whose rank
    /// bit is set in `cta_mask`, at the same CTA-relative offset as `dst`, and performs
    /// complete-tx of `size` bytes on the mbarrier at the same offset as `mbar` in each.
    ///
    /// # Safety
    /// As [`cp_async_bulk_global_to_shared`], for every destination CTA: each has a live
    /// mbarrier at `mbar` (initialized and visible before this copy is issued) and room
    /// at `dst`; only ranks below `%cluster_nctarank` are set in `cta_mask`, and no
    /// destination CTA exits before its copy completed.
    fn cp_async_bulk_global_to_shared_multicast(
        dst: u32,
        src: *const u8,
        size: u32,
        mbar: u32,
        cta_mask: u16,
    ) {
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
        " [{dst}], [{src}], {size}, [{mbar}], {cta_mask};"
    }

    /// `cp.async.bulk.global.shared::cta.bulk_group [dst], [src], size;` (PTX 8.0,
    /// sm_90): copies `size` bytes from this CTA's shared memory to global memory, as part
    /// of this thread's current bulk async-group.
    ///
    /// # Safety
    /// `dst` a global address and `src` a `.shared::cta` address, both 16-byte aligned;
    /// `size` a multiple of 16 with `size` bytes writable at `dst` and readable at `src`.
    /// Writes to `src` by the generic proxy are made visible to the async proxy first
    /// (`fence.proxy.async.shared::cta` after them, before this); `src` is not written
    /// until `cp.async.bulk.wait_group.read` covers the copy, nor `dst` accessed until
    /// `cp.async.bulk.wait_group` does.
    fn cp_async_bulk_shared_to_global(dst: *mut u8, src: u32, size: u32) {
        "cp.async.bulk.global.shared::cta.bulk_group [{dst}], [{src}], {size};"
    }

    /// `cp.reduce.async.bulk.global.shared::cta.bulk_group.add.u32 [dst], [src], size;`
    /// (PTX 8.0, sm_90): adds `size / 4` `u32`s from this CTA's shared memory to global
    /// memory element-wise (each element atomically, relaxed at GPU scope), as part of
    /// this thread's current bulk async-group.
    ///
    /// # Safety
    /// As [`cp_async_bulk_shared_to_global`] (`dst` holds `u32`s).
    fn cp_reduce_async_bulk_add_u32(dst: *mut u32, src: u32, size: u32) {
        "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.u32 [{dst}], [{src}], {size};"
    }

    /// `cp.async.bulk.commit_group;` (PTX 8.0, sm_90): closes this thread's pending bulk
    /// stores (and tensor stores, reductions) into a bulk async-group.
    ///
    /// # Safety
    /// None; `unsafe` only because this module's functions all are.
    fn cp_async_bulk_commit_group() { "cp.async.bulk.commit_group;" }

    /// `cp.async.bulk.wait_group N;` (PTX 8.0, sm_90): waits until at most `N` of this
    /// thread's most recent bulk async-groups are pending (their writes done).
    ///
    /// # Safety
    /// None; `unsafe` only because this module's functions all are.
    fn cp_async_bulk_wait_group<const N: u32>() { "cp.async.bulk.wait_group {N};" }

    /// `cp.async.bulk.wait_group.read N;` (PTX 8.0, sm_90): waits until at most `N` of
    /// this thread's most recent bulk async-groups are still reading their source, so
    /// that source shared memory may be reused (their global writes may still be under
    /// way).
    ///
    /// # Safety
    /// None; `unsafe` only because this module's functions all are.
    fn cp_async_bulk_wait_group_read<const N: u32>() { "cp.async.bulk.wait_group.read {N};" }

    /// `createpolicy.fractional.L2::<priority>.b64 policy, 1.0;` (PTX 7.4, sm_80): a
    /// 64-bit L2 cache policy giving every access that carries it the eviction priority
    /// `PRIORITY` (0 `evict_normal`, 1 `evict_first`, 2 `evict_last`, 3
    /// `evict_unchanged`; other values give `evict_normal`).
    ///
    /// # Safety
    /// None; `unsafe` only because this module's functions all are.
    fn create_policy_fractional<const PRIORITY: u32>() -> u64 {
        "createpolicy.fractional.L2::" PRIORITY ".b64 {policy}, 1.0;"
    }

    /// [`cp_async_bulk_global_to_shared`] with `.L2::cache_hint` (PTX 8.0, sm_90): the
    /// global reads carry the L2 cache policy `policy` (from
    /// [`create_policy_fractional`]).
    ///
    /// # Safety
    /// As [`cp_async_bulk_global_to_shared`]; `policy` made by `createpolicy`.
    fn cp_async_bulk_global_to_shared_hint(
        dst: u32,
        src: *const u8,
        size: u32,
        mbar: u32,
        policy: u64,
    ) {
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
        " [{dst}], [{src}], {size}, [{mbar}], {policy};"
    }

    /// [`cp_async_bulk_shared_to_global`] with `.L2::cache_hint` (PTX 8.0, sm_90): the
    /// global writes carry the L2 cache policy `policy`.
    ///
    /// # Safety
    /// As [`cp_async_bulk_shared_to_global`]; `policy` made by `createpolicy`.
    fn cp_async_bulk_shared_to_global_hint(dst: *mut u8, src: u32, size: u32, policy: u64) {
        "cp.async.bulk.global.shared::cta.bulk_group.L2::cache_hint"
        " [{dst}], [{src}], {size}, {policy};"
    }

    /// `st.global.L2::cache_hint.v4.b32 [dst], {a, b, c, d}, policy;` (PTX 7.4, sm_80):
    /// one 16-byte store to global memory carrying the L2 cache policy `policy`.
    ///
    /// # Safety
    /// `dst` a 16-byte aligned global address valid for a 16-byte write, with no data
    /// race; `policy` made by `createpolicy`.
    fn st_global_v4_hint(dst: *mut u32, v: [u32; 4], policy: u64) {
        "st.global.L2::cache_hint.v4.b32 [{dst}], {{{v0}, {v1}, {v2}, {v3}}}, {policy};"
    }

    /// `cp.async.bulk.prefetch.L2.global [src], size;` (PTX 8.0, sm_90): hints that
    /// `size` bytes at `src` be brought into L2.
    ///
    /// # Safety
    /// `src` a 16-byte aligned global address of `size` (a multiple of 16) bytes.
    fn cp_async_bulk_prefetch_l2(src: *const u8, size: u32) {
        "cp.async.bulk.prefetch.L2.global [{src}], {size};"
    }

    /// `cp.reduce.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes.add.u32
    /// [dst], [src], size, [mbar];` (PTX 8.0, sm_90): adds `size / 4` `u32`s of this CTA's
    /// shared memory element-wise into shared memory of a CTA of the cluster; the mbarrier
    /// at `mbar` in that CTA receives a `complete_tx` of `size` bytes.
    ///
    /// # Safety
    /// `dst` and `mbar` are `.shared::cluster` addresses in one CTA, `src` a `.shared::cta`
    /// address; `dst` and `src` 16-byte aligned, `size` a non-zero multiple of 16 with
    /// that many bytes writable at `dst` and readable at `src`; generic-proxy writes to
    /// `src` fenced with `fence.proxy.async.shared::cta` first; `src` not written and this
    /// CTA not exited before the destination's phase completes; `mbar` live and expecting
    /// these bytes, its CTA not exited before the phase completes.
    fn cp_reduce_async_bulk_cluster_add_u32(dst: u32, src: u32, size: u32, mbar: u32) {
        "cp.reduce.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes.add.u32"
        " [{dst}], [{src}], {size}, [{mbar}];"
    }
}
