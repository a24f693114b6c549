//! `cp.async` (sm_80): asynchronous copies from global to shared memory, their groups and
//! their mbarrier tracking.
//!
//! `dst: u32` is a `.shared::cta` address, `src: *const u8` a generic pointer to global
//! memory (the global window is the generic one, as CUDA's `__pipeline_memcpy_async`
//! passes it). A copy is "issued" by the instruction; it completes asynchronously, and
//! its data is visible to the issuing thread only after `cp.async.wait_group` /
//! `cp.async.wait_all`, or to the threads that wait on an mbarrier armed with
//! `cp.async.mbarrier.arrive`.

/// Writes the `cp.async` instructions, all PTX 7.0 and sm_80: `copy name, zfill_name:
/// "cache", "bytes";` is the copy of one cache mode and size with its zero-fill form (docs
/// generated), `fn name(args) { "template" }` one instruction of the forms `ptx_fn!` writes.
macro_rules! cp_async {
    () => {};
    (copy $name:ident, $zname:ident: $cache:literal, $bytes:literal; $($rest:tt)*) => {
        ptx_fn! {
            [sm80_ptx70]
            #[doc = concat!(
                "`cp.async.", $cache, ".shared.global [dst], [src], ", $bytes,
                ";` (PTX 7.0, sm_80): starts an asynchronous copy of ", $bytes,
                " bytes from global to shared memory",
                " (`.ca`: cache in L1 and L2; `.cg`: L2 only)."
            )]
            ///
            /// # Safety
            #[doc = concat!(
                "`dst` must be a `.shared::cta` address and `src` a global address, both ",
                $bytes, "-byte aligned, with ", $bytes, " bytes readable at `src` and writable ",
                "at `dst`; no other access to `dst` until the copy is waited for ",
                "(`cp.async.wait_group`/`wait_all` or an mbarrier armed with ",
                "`cp.async.mbarrier.arrive`), and `src` unchanged until then."
            )]
            fn $name(dst: u32, src: *const u8)
                = concat!("cp.async.", $cache, ".shared.global [{dst}], [{src}], ", $bytes, ";")
        }
        ptx_fn! {
            [sm80_ptx70]
            #[doc = concat!(
                "`cp.async.", $cache, ".shared.global [dst], [src], ", $bytes,
                ", src_size;` (PTX 7.0, sm_80): copies the first `src_size` bytes from `src` ",
                "and fills the rest of the ", $bytes, " bytes at `dst` with zeros ",
                "(`src_size == 0`: zeros only, nothing read)."
            )]
            ///
            /// # Safety
            #[doc = concat!(
                "As the form without `src_size`, except that only `src_size` bytes (at most ",
                $bytes, ") need be readable at `src`; `src` must still be ", $bytes,
                "-byte aligned (pass any valid aligned pointer when `src_size` is 0)."
            )]
            fn $zname(dst: u32, src: *const u8, src_size: u32) = concat!(
                "cp.async.", $cache, ".shared.global [{dst}], [{src}], ", $bytes, ", {src_size};"
            )
        }
        cp_async!($($rest)*);
    };
    (
        $(#[$meta:meta])* fn $name:ident $(<const $n:ident: u32>)? ($($args:tt)*)
        { $($tpl:literal)+ } $($rest:tt)*
    ) => {
        ptx_fn! {
            [sm80_ptx70] $(#[$meta])* fn $name $(<const $n: u32>)? ($($args)*) = concat!($($tpl),+)
        }
        cp_async!($($rest)*);
    };
}

cp_async! {
    copy cp_async_ca_4, cp_async_ca_4_zfill: "ca", "4";
    copy cp_async_ca_8, cp_async_ca_8_zfill: "ca", "8";
    copy cp_async_ca_16, cp_async_ca_16_zfill: "ca", "16";
    copy cp_async_cg_16, cp_async_cg_16_zfill: "cg", "16";

    /// `cp.async.commit_group;` (PTX 7.0, sm_80): closes this thread's pending
    /// `cp.async` copies into a new group (an empty group when there are none).
    ///
    /// # Safety
    /// None; `unsafe` only because this module's functions all are.
    fn cp_async_commit_group() { "cp.async.commit_group;" }

    /// `cp.async.wait_group N;` (PTX 7.0, sm_80): waits until at most `N` of this
    /// thread's most recent `cp.async` groups are pending; the completed copies' data is
    /// then visible to this thread. Keeps the memory clobber, so no shared-memory read is
    /// hoisted above it.
    ///
    /// # Safety
    /// None; `unsafe` only because this module's functions all are.
    fn cp_async_wait_group<const N: u32>() { "cp.async.wait_group {N};" }

    /// `cp.async.wait_all;` (PTX 7.0, sm_80): commits the pending copies and waits for
    /// all of this thread's `cp.async` copies (`commit_group` + `wait_group 0`).
    ///
    /// # Safety
    /// None; `unsafe` only because this module's functions all are.
    fn cp_async_wait_all() { "cp.async.wait_all;" }

    /// `cp.async.mbarrier.arrive.shared.b64 [addr];` (PTX 7.0, sm_80; `.shared` is
    /// `.shared::cta`, whose explicit spelling needs PTX 7.8): makes the mbarrier track
    /// this thread's prior `cp.async` copies. The pending count is raised by one now and
    /// an arrival happens when the copies complete, so the phase's expected count is
    /// unchanged: the thread still arrives itself.
    ///
    /// # Safety
    /// Live mbarrier.
    fn cp_async_mbarrier_arrive(addr: u32) { "cp.async.mbarrier.arrive.shared.b64 [{addr}];" }

    /// `cp.async.mbarrier.arrive.noinc.shared.b64 [addr];` (PTX 7.0, sm_80): as
    /// [`cp_async_mbarrier_arrive`] without raising the pending count: the arrival made
    /// when this thread's prior copies complete counts as one of the phase's expected
    /// arrivals.
    ///
    /// # Safety
    /// Live mbarrier whose current phase still expects this arrival (it must not receive
    /// more arrivals than its expected count).
    fn cp_async_mbarrier_arrive_noinc(addr: u32) {
        "cp.async.mbarrier.arrive.noinc.shared.b64 [{addr}];"
    }
}
