//! Asynchronous copies between global and shared memory: `cp.async` (sm_80), bulk copies
//! `cp.async.bulk` and tensor copies (TMA) `cp.async.bulk.tensor` (sm_90).
//!
//! The typed layer puts the rules of these instructions where the compiler or a cheap
//! check can see them:
//!
//! - sizes: a `cp.async` copies one `T` of 4, 8 or 16 bytes (checked at compile time);
//!   a bulk copy moves [`BulkBytes`], a non-zero multiple of 16 that fits an mbarrier's
//!   tx-count (checked where it is made); a tensor tile is a `T` whose size is the box's
//!   bytes.
//! - alignment: shared tiles are declared as [`Align16`] / [`Align128`] (bulk copies
//!   need 16-byte, tensor copies 128-byte aligned shared addresses); the functions check
//!   the alignment of the pointers they get with `debug_assert!`.
//! - transaction counts: [`BulkLoad`] issues copies that complete on one mbarrier and
//!   arms it with the sum of their bytes in its single
//!   [`arrive`](BulkLoad::arrive) (`mbarrier.arrive.expect_tx`), so the bytes expected
//!   always equal the bytes issued. (The copies are issued first: the tx-count may go
//!   below zero meanwhile, which the mbarrier allows, and the phase cannot complete
//!   while the arrival is pending.)
//! - multi-stage pipelines: [`Ring`] holds the `full` / `empty` barrier pairs of a ring
//!   of stages, and a [`RingCursor`] tracks the stage and phase parity of each thread's
//!   walk through it.
//! - [`elect_one`]: one lane of a warp (`elect.sync`) to issue the copies.
//!
//! Bulk and tensor copies run in the *async proxy*: shared memory written by ordinary
//! stores and then read by a bulk or tensor store needs
//! [`fence_proxy_async`](super::fence_proxy_async)`(Some(ProxySpace::SharedCta))` by
//! the writing threads before the store is issued.
//!
//! # Unsafe policy
//! The copy functions are `unsafe fn`s: their pointers must be valid for the copy, in
//! the right state space, and untouched while it runs. The waits and commits have no
//! precondition and are safe. Every `unsafe` block has a `// SAFETY:` comment.

#[cfg(any(doc, all(target_feature = "sm_80", target_feature = "ptx70")))]
use core::mem::size_of;

use super::MBarrier;
#[cfg(any(doc, all(target_feature = "sm_90", target_feature = "ptx80")))]
use super::mbarrier::ArrivalToken;
#[cfg(any(doc, all(target_feature = "sm_90", target_feature = "ptx80")))]
use super::scope::Scope;
#[cfg(any(doc, all(target_feature = "sm_80", target_feature = "ptx70")))]
use super::{ptx_asm, to_shared_addr};

/// A `T` at a 16-byte aligned address: the alignment `cp.async` of 16 bytes and bulk
/// copies (`cp.async.bulk`) need. `#[repr(C, align(16))]`.
#[repr(C, align(16))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Align16<T>(pub T);

/// A `T` at a 128-byte aligned address: the alignment tensor copies
/// (`cp.async.bulk.tensor`) need for their shared-memory box. `#[repr(C, align(128))]`.
#[repr(C, align(128))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Align128<T>(pub T);

/// Whether `ptr` is a multiple of `align` (a power of two).
#[inline(always)]
#[must_use]
#[cfg(any(doc, all(target_feature = "sm_80", target_feature = "ptx70")))]
fn aligned<T>(ptr: *const T, align: usize) -> bool {
    ptr.addr() & (align - 1) == 0
}

/// The byte count of a bulk copy or of a tx-count: a non-zero multiple of 16, at most
/// [`BulkBytes::MAX`] (the largest tx-count an mbarrier phase can expect).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BulkBytes(u32);

impl BulkBytes {
    /// The largest byte count: `2^20 - 16`, the largest multiple of 16 below the
    /// mbarrier's tx-count limit of `2^20 - 1`.
    pub const MAX: u32 = (1 << 20) - 16;

    /// `bytes` if it is a non-zero multiple of 16 and at most [`MAX`](Self::MAX).
    #[inline(always)]
    #[must_use]
    pub const fn new(bytes: u32) -> Option<Self> {
        if bytes != 0 && bytes % 16 == 0 && bytes <= Self::MAX {
            Some(Self(bytes))
        } else {
            None
        }
    }

    /// The size of `T`; a compile-time error unless it is a valid byte count.
    #[inline(always)]
    #[must_use]
    pub const fn of<T>() -> Self {
        let bytes = const {
            let s = core::mem::size_of::<T>();
            assert!(
                s != 0 && s % 16 == 0 && s <= Self::MAX as usize,
                "a bulk copy's size must be a non-zero multiple of 16 below 2^20"
            );
            s as u32
        };
        Self(bytes)
    }

    /// The byte count.
    #[inline(always)]
    #[must_use]
    pub const fn get(self) -> u32 {
        self.0
    }
}

// ---------------------------------------------------------------------------------------
// cp.async (sm_80)
// ---------------------------------------------------------------------------------------

/// The size of `T` as a `cp.async` size; a compile-time error unless it is 4, 8 or 16
/// (or 16 only, with `CG`).
#[cfg(any(doc, all(target_feature = "sm_80", target_feature = "ptx70")))]
#[inline(always)]
const fn cp_size<T, const CG: bool>() -> u32 {
    const {
        let s = size_of::<T>();
        if CG {
            assert!(s == 16, "cp.async.cg copies exactly 16 bytes");
        } else {
            assert!(
                s == 4 || s == 8 || s == 16,
                "cp.async copies 4, 8 or 16 bytes"
            );
        }
        s as u32
    }
}

sm80_ptx70! {
    /// `cp.async.ca.shared.global [dst], [src], size_of::<T>();`: starts copying one `T`
    /// (4, 8 or 16 bytes, checked at compile time) from global to shared memory, cached
    /// in L1 and L2. Wait for it with [`cp_async_commit`] + [`cp_async_wait`],
    /// [`cp_async_wait_all`], or an mbarrier ([`MBarrier::cp_async_arrive`]).
    ///
    /// # Safety
    /// `dst` points into this CTA's shared memory and `src` to global memory, both
    /// aligned to `size_of::<T>()`; nothing else accesses `*dst` and nothing writes
    /// `*src` until the copy has been waited for.
    #[inline(always)]
    pub unsafe fn cp_async<T>(dst: *mut T, src: *const T) {
        let size = cp_size::<T, false>();
        debug_assert!(aligned(dst, size as usize) && aligned(src, size as usize));
        let d = to_shared_addr(dst);
        let s = src.cast::<u8>();
        // SAFETY: forwarded to the caller; `size` selects the matching form.
        unsafe {
            match size {
                4 => ptx_asm::cp_async_ca_4(d, s),
                8 => ptx_asm::cp_async_ca_8(d, s),
                _ => ptx_asm::cp_async_ca_16(d, s),
            }
        }
    }

    /// `cp.async.ca.shared.global [dst], [src], size_of::<T>(), src_bytes;`: as
    /// [`cp_async`], but reads only the first `src_bytes` bytes (clamped to the size of
    /// `T`) and fills the rest of `*dst` with zeros; `src_bytes == 0` reads nothing.
    ///
    /// # Safety
    /// As [`cp_async`], except that only `src_bytes` bytes at `src` need be readable
    /// (`src` must still be an aligned global address: pass any valid one when
    /// `src_bytes` is 0).
    #[inline(always)]
    pub unsafe fn cp_async_zfill<T>(dst: *mut T, src: *const T, src_bytes: u32) {
        let size = cp_size::<T, false>();
        debug_assert!(aligned(dst, size as usize) && aligned(src, size as usize));
        let d = to_shared_addr(dst);
        let s = src.cast::<u8>();
        let n = if src_bytes < size { src_bytes } else { size };
        // SAFETY: forwarded to the caller; `size` selects the matching form and
        // `n <= size`.
        unsafe {
            match size {
                4 => ptx_asm::cp_async_ca_4_zfill(d, s, n),
                8 => ptx_asm::cp_async_ca_8_zfill(d, s, n),
                _ => ptx_asm::cp_async_ca_16_zfill(d, s, n),
            }
        }
    }

    /// `cp.async.cg.shared.global [dst], [src], 16;`: as [`cp_async`] for a 16-byte `T`
    /// (checked at compile time), cached in L2 only.
    ///
    /// # Safety
    /// As [`cp_async`].
    #[inline(always)]
    pub unsafe fn cp_async_cg<T>(dst: *mut T, src: *const T) {
        let size = cp_size::<T, true>();
        debug_assert!(aligned(dst, size as usize) && aligned(src, size as usize));
        // SAFETY: forwarded to the caller; `T` is 16 bytes.
        unsafe { ptx_asm::cp_async_cg_16(to_shared_addr(dst), src.cast()) }
    }

    /// `cp.async.cg.shared.global [dst], [src], 16, src_bytes;`: as [`cp_async_zfill`]
    /// for a 16-byte `T`, cached in L2 only.
    ///
    /// # Safety
    /// As [`cp_async_zfill`].
    #[inline(always)]
    pub unsafe fn cp_async_cg_zfill<T>(dst: *mut T, src: *const T, src_bytes: u32) {
        let size = cp_size::<T, true>();
        debug_assert!(aligned(dst, size as usize) && aligned(src, size as usize));
        let n = if src_bytes < size { src_bytes } else { size };
        // SAFETY: forwarded to the caller; `T` is 16 bytes and `n <= 16`.
        unsafe { ptx_asm::cp_async_cg_16_zfill(to_shared_addr(dst), src.cast(), n) }
    }

    /// `cp.async.commit_group;`: closes this thread's pending `cp.async` copies into a
    /// group.
    #[inline(always)]
    pub fn cp_async_commit() {
        // SAFETY: no precondition.
        unsafe { ptx_asm::cp_async_commit_group() }
    }

    /// `cp.async.wait_group N;`: waits until at most `N` of this thread's committed
    /// groups are pending. The data of the completed copies is visible to this thread;
    /// other threads see it after a barrier (e.g. [`sync_threads`](super::sync_threads)).
    #[inline(always)]
    pub fn cp_async_wait<const N: u32>() {
        // SAFETY: no precondition.
        unsafe { ptx_asm::cp_async_wait_group::<N>() }
    }

    /// `cp.async.wait_all;`: commits and waits for all of this thread's `cp.async`
    /// copies.
    #[inline(always)]
    pub fn cp_async_wait_all() {
        // SAFETY: no precondition.
        unsafe { ptx_asm::cp_async_wait_all() }
    }

    impl MBarrier {
        /// `cp.async.mbarrier.arrive.shared.b64 [addr];`: the barrier tracks this thread's
        /// prior `cp.async` copies. The current phase's pending count rises by one now and
        /// falls by one when the copies complete, so this thread still arrives itself
        /// ([`arrive`](Self::arrive)); waiters then see the copied data.
        #[inline(always)]
        pub fn cp_async_arrive(self) {
            // SAFETY: the handle's contract makes the barrier live; the pending count
            // rises before the async arrival lowers it, so the protocol is unchanged.
            unsafe { ptx_asm::cp_async_mbarrier_arrive(self.shared_addr()) }
        }

        /// `cp.async.mbarrier.arrive.noinc.shared.b64 [addr];`: when this thread's prior
        /// `cp.async` copies complete, the barrier receives one arrival that counts
        /// toward the phase's expected count (initialize the barrier counting these
        /// arrivals; the thread does not arrive again for them).
        ///
        /// # Safety
        /// The current phase still expects one more arrival when the copies complete
        /// (an arrival past the expected count is undefined behaviour).
        #[inline(always)]
        pub unsafe fn cp_async_arrive_noinc(self) {
            // SAFETY: the handle's contract makes the barrier live; the caller keeps the
            // phase's arrivals within its expected count.
            unsafe { ptx_asm::cp_async_mbarrier_arrive_noinc(self.shared_addr()) }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Bulk copies (sm_90)
// ---------------------------------------------------------------------------------------

sm90_ptx80! {
    /// `cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes`: starts
    /// copying `bytes` from global memory to this CTA's shared memory, completing
    /// `bytes` of tx-count on `bar`. Arms nothing: prefer [`BulkLoad`], which does.
    ///
    /// # Safety
    /// `dst` points into this CTA's shared memory and `src` to global memory, both
    /// 16-byte aligned, with `bytes` writable / readable; `bar`'s current phase expects
    /// these bytes (expect-tx), and nothing accesses `dst` or writes `src` until it
    /// completes.
    #[inline(always)]
    pub unsafe fn bulk_load<T>(dst: *mut T, src: *const T, bytes: BulkBytes, bar: MBarrier) {
        debug_assert!(aligned(dst, 16) && aligned(src, 16));
        // SAFETY: forwarded to the caller; `bytes` is a multiple of 16.
        unsafe {
            ptx_asm::cp_async_bulk_global_to_shared(
                to_shared_addr(dst),
                src.cast(),
                bytes.get(),
                bar.shared_addr(),
            )
        }
    }

    /// `cp.async.bulk.global.shared::cta.bulk_group [dst], [src], bytes;`: starts copying
    /// `bytes` from this CTA's shared memory to global memory, in this thread's current
    /// bulk group (close it with [`bulk_commit`], wait with [`bulk_wait_read`] before
    /// writing `src` again and [`bulk_wait`] before reading `dst`).
    ///
    /// # Safety
    /// `dst` points to global and `src` into this CTA's shared memory, both 16-byte
    /// aligned, with `bytes` writable / readable; ordinary stores to `src` were followed
    /// by `fence.proxy.async.shared::cta` in the threads that made them (and a barrier to
    /// this thread); `src` not written and `dst` not accessed until waited for as above.
    #[inline(always)]
    pub unsafe fn bulk_store<T>(dst: *mut T, src: *const T, bytes: BulkBytes) {
        debug_assert!(aligned(dst, 16) && aligned(src, 16));
        // SAFETY: forwarded to the caller; `bytes` is a multiple of 16.
        unsafe {
            ptx_asm::cp_async_bulk_shared_to_global(dst.cast(), to_shared_addr(src), bytes.get())
        }
    }

    /// `cp.reduce.async.bulk.global.shared::cta.bulk_group.add.u32`: adds `bytes / 4`
    /// `u32`s of this CTA's shared memory to global memory element-wise (each a relaxed
    /// atomic add), in this thread's current bulk group.
    ///
    /// # Safety
    /// As [`bulk_store`].
    #[inline(always)]
    pub unsafe fn bulk_reduce_add_u32(dst: *mut u32, src: *const u32, bytes: BulkBytes) {
        debug_assert!(aligned(dst, 16) && aligned(src, 16));
        // SAFETY: forwarded to the caller.
        unsafe { ptx_asm::cp_reduce_async_bulk_add_u32(dst, to_shared_addr(src), bytes.get()) }
    }

    /// `cp.async.bulk.prefetch.L2.global [src], bytes;`: hints that `bytes` at `src` be
    /// brought into L2.
    ///
    /// # Safety
    /// `src` points to global memory, 16-byte aligned, with `bytes` allocated.
    #[inline(always)]
    pub unsafe fn bulk_prefetch_l2<T>(src: *const T, bytes: BulkBytes) {
        debug_assert!(aligned(src, 16));
        // SAFETY: forwarded to the caller.
        unsafe { ptx_asm::cp_async_bulk_prefetch_l2(src.cast(), bytes.get()) }
    }

    /// [`bulk_load`] whose global reads carry the L2 cache policy `policy`
    /// (`.L2::cache_hint`), e.g. [`L2Policy::evict_first`] for data read once.
    ///
    /// # Safety
    /// As [`bulk_load`].
    #[inline(always)]
    pub unsafe fn bulk_load_hint<T>(
        dst: *mut T,
        src: *const T,
        bytes: BulkBytes,
        bar: MBarrier,
        policy: L2Policy,
    ) {
        debug_assert!(aligned(dst, 16) && aligned(src, 16));
        // SAFETY: forwarded to the caller; `bytes` is a multiple of 16 and `policy` came
        // from `createpolicy`.
        unsafe {
            ptx_asm::cp_async_bulk_global_to_shared_hint(
                to_shared_addr(dst),
                src.cast(),
                bytes.get(),
                bar.shared_addr(),
                policy.0,
            )
        }
    }

    /// [`bulk_store`] whose global writes carry the L2 cache policy `policy`
    /// (`.L2::cache_hint`).
    ///
    /// # Safety
    /// As [`bulk_store`].
    #[inline(always)]
    pub unsafe fn bulk_store_hint<T>(
        dst: *mut T,
        src: *const T,
        bytes: BulkBytes,
        policy: L2Policy,
    ) {
        debug_assert!(aligned(dst, 16) && aligned(src, 16));
        // SAFETY: forwarded to the caller; `policy` came from `createpolicy`.
        unsafe {
            ptx_asm::cp_async_bulk_shared_to_global_hint(
                dst.cast(),
                to_shared_addr(src),
                bytes.get(),
                policy.0,
            )
        }
    }

    /// An L2 cache policy (`createpolicy.fractional.L2::<priority>.b64`, fraction 1.0):
    /// the eviction priority that accesses carrying it give their lines in L2. Data
    /// streamed through once is best [`evict_first`](Self::evict_first): it then
    /// displaces less of what other work keeps in L2.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct L2Policy(u64);

    impl L2Policy {
        /// `L2::evict_first`: these lines are the first to go.
        #[inline(always)]
        #[must_use]
        pub fn evict_first() -> Self {
            // SAFETY: no precondition.
            Self(unsafe { ptx_asm::create_policy_fractional::<1>() })
        }

        /// `L2::evict_last`: these lines are kept longest.
        #[inline(always)]
        #[must_use]
        pub fn evict_last() -> Self {
            // SAFETY: no precondition.
            Self(unsafe { ptx_asm::create_policy_fractional::<2>() })
        }

        /// `L2::evict_normal`: the default priority.
        #[inline(always)]
        #[must_use]
        pub fn evict_normal() -> Self {
            // SAFETY: no precondition.
            Self(unsafe { ptx_asm::create_policy_fractional::<0>() })
        }

        /// `L2::evict_unchanged`: lines keep the priority they have.
        #[inline(always)]
        #[must_use]
        pub fn evict_unchanged() -> Self {
            // SAFETY: no precondition.
            Self(unsafe { ptx_asm::create_policy_fractional::<3>() })
        }

        /// The 64-bit policy operand.
        #[inline(always)]
        #[must_use]
        pub const fn bits(self) -> u64 {
            self.0
        }
    }

    /// One 16-byte store of `v` to global `dst` carrying the L2 cache policy `policy`
    /// (`st.global.L2::cache_hint.v4.b32`).
    ///
    /// # Safety
    /// `dst` points to global memory, 16-byte aligned, valid for the write, with no
    /// concurrent access to it.
    #[inline(always)]
    pub unsafe fn store_global_hint(
        dst: *mut Align16<[u32; 4]>,
        v: Align16<[u32; 4]>,
        policy: L2Policy,
    ) {
        debug_assert!(aligned(dst, 16));
        // SAFETY: forwarded to the caller; `policy` came from `createpolicy`.
        unsafe { ptx_asm::st_global_v4_hint(dst.cast(), v.0, policy.0) }
    }

    /// `cp.async.bulk.commit_group;`: closes this thread's pending bulk and tensor stores
    /// into a bulk group.
    #[inline(always)]
    pub fn bulk_commit() {
        // SAFETY: no precondition.
        unsafe { ptx_asm::cp_async_bulk_commit_group() }
    }

    /// `cp.async.bulk.wait_group N;`: waits until at most `N` of this thread's bulk
    /// groups are pending (their writes complete).
    #[inline(always)]
    pub fn bulk_wait<const N: u32>() {
        // SAFETY: no precondition.
        unsafe { ptx_asm::cp_async_bulk_wait_group::<N>() }
    }

    /// `cp.async.bulk.wait_group.read N;`: waits until at most `N` of this thread's bulk
    /// groups are still reading their shared-memory source, which may then be
    /// rewritten.
    #[inline(always)]
    pub fn bulk_wait_read<const N: u32>() {
        // SAFETY: no precondition.
        unsafe { ptx_asm::cp_async_bulk_wait_group_read::<N>() }
    }

    /// `elect.sync _|p, 0xffffffff;`: `true` in exactly one lane of the warp (the same
    /// lane for all), e.g. to issue a warp's bulk copies once.
    ///
    /// # Safety
    /// Every lane of the warp calls it at the same point (no exited lanes, no call in
    /// divergent code).
    #[inline(always)]
    #[must_use]
    pub unsafe fn elect_one() -> bool {
        // SAFETY: forwarded to the caller (the full mask names the whole warp).
        unsafe { ptx_asm::elect_sync(u32::MAX) }
    }
}

// ---------------------------------------------------------------------------------------
// Tensor copies (sm_90)
// ---------------------------------------------------------------------------------------

/// Keeps [`TensorCoords`] implemented only for `[i32; 1..=5]`.
mod sealed {
    pub trait Sealed {}
}

/// Tensor coordinates `[i32; D]` for `D` in 1..=5, innermost dimension first: selects
/// the `cp.async.bulk.tensor.<D>d` forms.
pub trait TensorCoords: Copy + sealed::Sealed {
    /// The dimensionality `D`.
    const DIMS: u32;

    /// `cp.async.bulk.tensor.<D>d.shared::cluster.global.tile.mbarrier::complete_tx::bytes`.
    ///
    /// # Safety
    /// As `ptx_asm::cp_async_bulk_tensor_2d_global_to_shared`.
    #[doc(hidden)]
    unsafe fn load(self, dst: u32, tensor_map: u64, mbar: u32);

    /// The `.multicast::cluster` form of [`load`](Self::load).
    ///
    /// # Safety
    /// As `ptx_asm::cp_async_bulk_tensor_2d_global_to_shared_multicast`.
    #[doc(hidden)]
    unsafe fn load_multicast(self, dst: u32, tensor_map: u64, mbar: u32, cta_mask: u16);

    /// `cp.async.bulk.tensor.<D>d.global.shared::cta.tile.bulk_group`.
    ///
    /// # Safety
    /// As `ptx_asm::cp_async_bulk_tensor_2d_shared_to_global`.
    #[doc(hidden)]
    unsafe fn store(self, tensor_map: u64, src: u32);

    /// `cp.async.bulk.prefetch.tensor.<D>d.L2.global.tile`.
    ///
    /// # Safety
    /// As `ptx_asm::cp_async_bulk_prefetch_tensor_2d_l2`.
    #[doc(hidden)]
    unsafe fn prefetch_l2(self, tensor_map: u64);
}

/// The position of an im2col load (see `cudadrv::tensor_map::Im2colDesc` on the host):
/// the starting pixel `([channel, spatial.., image], [offset per spatial dimension])`,
/// implemented for `([i32; 3], [u16; 1])`, `([i32; 4], [u16; 2])` and
/// `([i32; 5], [u16; 3])` (NWC, NHWC, NDHWC).
pub trait Im2colCoords: Copy + sealed::Sealed {
    /// `cp.async.bulk.tensor.<D>d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes`.
    ///
    /// # Safety
    /// As `ptx_asm::cp_async_bulk_tensor_3d_im2col_global_to_shared`.
    #[doc(hidden)]
    unsafe fn load(self, dst: u32, tensor_map: u64, mbar: u32);
}

/// Implements [`Im2colCoords`] for `([i32; $n], [u16; $m])`.
#[cfg(any(doc, all(target_feature = "sm_90", target_feature = "ptx80")))]
macro_rules! im2col_coords {
    ($($n:literal, $m:literal => $load:ident;)*) => {$(
        impl sealed::Sealed for ([i32; $n], [u16; $m]) {}

        impl Im2colCoords for ([i32; $n], [u16; $m]) {
            #[inline(always)]
            unsafe fn load(self, dst: u32, tensor_map: u64, mbar: u32) {
                // SAFETY: forwarded to the caller.
                unsafe { ptx_asm::$load(dst, tensor_map, self.0, self.1, mbar) }
            }
        }
    )*};
}

#[cfg(any(doc, all(target_feature = "sm_90", target_feature = "ptx80")))]
im2col_coords! {
    3, 1 => cp_async_bulk_tensor_3d_im2col_global_to_shared;
    4, 2 => cp_async_bulk_tensor_4d_im2col_global_to_shared;
    5, 3 => cp_async_bulk_tensor_5d_im2col_global_to_shared;
}

/// Implements [`TensorCoords`] for `[i32; $n]` with the `ptx_asm` functions of that
/// dimensionality.
#[cfg(any(doc, all(target_feature = "sm_90", target_feature = "ptx80")))]
macro_rules! tensor_coords {
    ($($n:literal => $load:ident, $mcast:ident, $store:ident, $prefetch:ident;)*) => {$(
        impl sealed::Sealed for [i32; $n] {}

        impl TensorCoords for [i32; $n] {
            const DIMS: u32 = $n;

            #[inline(always)]
            unsafe fn load(self, dst: u32, tensor_map: u64, mbar: u32) {
                // SAFETY: forwarded to the caller.
                unsafe { super::ptx_asm::$load(dst, tensor_map, self, mbar) }
            }

            #[inline(always)]
            unsafe fn load_multicast(self, dst: u32, tensor_map: u64, mbar: u32, cta_mask: u16) {
                // SAFETY: forwarded to the caller.
                unsafe { super::ptx_asm::$mcast(dst, tensor_map, self, mbar, cta_mask) }
            }

            #[inline(always)]
            unsafe fn store(self, tensor_map: u64, src: u32) {
                // SAFETY: forwarded to the caller.
                unsafe { super::ptx_asm::$store(tensor_map, self, src) }
            }

            #[inline(always)]
            unsafe fn prefetch_l2(self, tensor_map: u64) {
                // SAFETY: forwarded to the caller.
                unsafe { super::ptx_asm::$prefetch(tensor_map, self) }
            }
        }
    )*};
}

sm90_ptx80! {
    tensor_coords! {
        1 => cp_async_bulk_tensor_1d_global_to_shared,
            cp_async_bulk_tensor_1d_global_to_shared_multicast,
            cp_async_bulk_tensor_1d_shared_to_global, cp_async_bulk_prefetch_tensor_1d_l2;
        2 => cp_async_bulk_tensor_2d_global_to_shared,
            cp_async_bulk_tensor_2d_global_to_shared_multicast,
            cp_async_bulk_tensor_2d_shared_to_global, cp_async_bulk_prefetch_tensor_2d_l2;
        3 => cp_async_bulk_tensor_3d_global_to_shared,
            cp_async_bulk_tensor_3d_global_to_shared_multicast,
            cp_async_bulk_tensor_3d_shared_to_global, cp_async_bulk_prefetch_tensor_3d_l2;
        4 => cp_async_bulk_tensor_4d_global_to_shared,
            cp_async_bulk_tensor_4d_global_to_shared_multicast,
            cp_async_bulk_tensor_4d_shared_to_global, cp_async_bulk_prefetch_tensor_4d_l2;
        5 => cp_async_bulk_tensor_5d_global_to_shared,
            cp_async_bulk_tensor_5d_global_to_shared_multicast,
            cp_async_bulk_tensor_5d_shared_to_global, cp_async_bulk_prefetch_tensor_5d_l2;
    }
}

/// A `CUtensorMap` (`cuTensorMapEncodeTiled`) as tensor copies name it: its generic
/// address in global, constant or kernel-parameter memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TensorMapRef {
    addr: u64,
}

impl TensorMapRef {
    /// Wraps a pointer to a tensor map.
    ///
    /// # Safety
    /// For as long as the handle is used, `ptr` points to a valid 128-byte `CUtensorMap`,
    /// 64-byte aligned, in global, constant or kernel-parameter memory (not a copy in
    /// local memory), and nothing modifies it (a map modified on the device needs
    /// `fence.proxy.tensormap::generic` between the write and its use).
    #[inline(always)]
    #[must_use]
    pub unsafe fn from_ptr<T>(ptr: *const T) -> Self {
        debug_assert!(ptr.addr() & 63 == 0);
        Self {
            addr: ptr.addr() as u64,
        }
    }

    /// The map's generic address.
    #[inline(always)]
    #[must_use]
    pub const fn addr(self) -> u64 {
        self.addr
    }
}

sm90_ptx80! {
    impl TensorMapRef {
        /// `prefetch.tensormap [addr];`: brings the map into the cache tensor copies
        /// read it from (e.g. at kernel start, before the first copy).
        #[inline(always)]
        pub fn prefetch(self) {
            // SAFETY: the handle's contract makes `addr` a valid tensor map.
            unsafe { ptx_asm::prefetch_tensormap(self.addr) }
        }

        /// `cp.async.bulk.prefetch.tensor.<D>d.L2.global.tile`: hints that the box at
        /// `coords` be brought into L2.
        #[inline(always)]
        pub fn prefetch_tile_l2<C: TensorCoords>(self, coords: C) {
            // SAFETY: the handle's contract makes `addr` a valid tensor map; a prefetch
            // accesses nothing observable.
            unsafe { coords.prefetch_l2(self.addr) }
        }

        /// `cp.async.bulk.tensor.<D>d.global.shared::cta.tile.bulk_group`: starts storing
        /// the box at `src` (a `T` the size of the map's box) to the tensor at `coords`
        /// (out-of-bounds elements are skipped), in this thread's current bulk group
        /// ([`bulk_commit`], then [`bulk_wait_read`] before writing `src` again).
        ///
        /// # Safety
        /// `src` points into this CTA's shared memory, 128-byte aligned, and holds the box
        /// (`size_of::<T>()` bytes, the map's box size); ordinary stores to it were
        /// followed by `fence.proxy.async.shared::cta` in the threads that made them (and
        /// a barrier to this thread); `src` not written until [`bulk_wait_read`], nor the
        /// destination accessed until [`bulk_wait`], covers the store.
        #[inline(always)]
        pub unsafe fn store_tile<C: TensorCoords, T>(self, coords: C, src: *const T) {
            debug_assert!(aligned(src, 128));
            // SAFETY: forwarded to the caller.
            unsafe { coords.store(self.addr, to_shared_addr(src)) }
        }
    }

    /// Issues bulk and tensor loads that complete on one mbarrier, summing their bytes,
    /// then arms the barrier with exactly that sum in [`arrive`](Self::arrive)
    /// (`mbarrier.arrive.expect_tx`). Issued by one thread (e.g. [`elect_one`]); the
    /// barrier counts that thread's arrival among its expected arrivals.
    #[must_use = "call `arrive` to arm the barrier with the bytes of the issued copies"]
    #[derive(Debug)]
    pub struct BulkLoad {
        bar: MBarrier,
        tx: u32,
    }

    impl BulkLoad {
        /// Starts a set of loads completing on `bar`.
        #[inline(always)]
        pub const fn new(bar: MBarrier) -> Self {
            Self { bar, tx: 0 }
        }

        /// Bytes issued so far (what [`arrive`](Self::arrive) will expect).
        #[inline(always)]
        #[must_use]
        pub const fn bytes(&self) -> u32 {
            self.tx
        }

        /// Counts `bytes` (with a debug check that the sum stays within the tx-count).
        #[inline(always)]
        fn add(&mut self, bytes: u32) {
            self.tx = self.tx.wrapping_add(bytes);
            debug_assert!(self.tx <= BulkBytes::MAX);
        }

        /// Loads one `T` (a non-zero multiple of 16 bytes, checked at compile time) from
        /// global `src` to shared `dst` (`cp.async.bulk`).
        ///
        /// # Safety
        /// As [`bulk_load`] with `size_of::<T>()` bytes, the expect-tx being this
        /// builder's [`arrive`](Self::arrive).
        #[inline(always)]
        pub unsafe fn copy<T>(&mut self, dst: *mut T, src: *const T) {
            let bytes = BulkBytes::of::<T>();
            // SAFETY: forwarded to the caller; `arrive` expects these bytes.
            unsafe { bulk_load(dst, src, bytes, self.bar) };
            self.add(bytes.get());
        }

        /// Loads `bytes` from global `src` to shared `dst` (`cp.async.bulk`).
        ///
        /// # Safety
        /// As [`bulk_load`], the expect-tx being this builder's [`arrive`](Self::arrive).
        #[inline(always)]
        pub unsafe fn copy_bytes<T>(&mut self, dst: *mut T, src: *const T, bytes: BulkBytes) {
            // SAFETY: forwarded to the caller; `arrive` expects these bytes.
            unsafe { bulk_load(dst, src, bytes, self.bar) };
            self.add(bytes.get());
        }

        /// [`copy_bytes`](Self::copy_bytes) whose global reads carry the L2 cache policy
        /// `policy`.
        ///
        /// # Safety
        /// As [`copy_bytes`](Self::copy_bytes).
        #[inline(always)]
        pub unsafe fn copy_bytes_hint<T>(
            &mut self,
            dst: *mut T,
            src: *const T,
            bytes: BulkBytes,
            policy: L2Policy,
        ) {
            // SAFETY: forwarded to the caller; `arrive` expects these bytes.
            unsafe { bulk_load_hint(dst, src, bytes, self.bar, policy) };
            self.add(bytes.get());
        }

        /// Loads the box at `coords` of `map` into shared `dst`, a `T` whose size is the
        /// box's bytes (`cp.async.bulk.tensor.<D>d`); out-of-bounds elements read as zero.
        ///
        /// # Safety
        /// `dst` points into this CTA's shared memory, 128-byte aligned, with room for a
        /// `T`; `size_of::<T>()` equals the map's box size in bytes (element size times
        /// the box dimensions), a non-zero multiple of 16 (checked at compile time);
        /// nothing accesses `*dst` until the barrier's phase completes.
        #[inline(always)]
        pub unsafe fn tile<C: TensorCoords, T>(&mut self, dst: *mut T, map: TensorMapRef, coords: C) {
            let bytes = BulkBytes::of::<T>();
            debug_assert!(aligned(dst, 128));
            // SAFETY: forwarded to the caller; `arrive` expects these bytes.
            unsafe { coords.load(to_shared_addr(dst), map.addr(), self.bar.shared_addr()) };
            self.add(bytes.get());
        }

        /// Loads one im2col column of `map` (an im2col tensor map) at `coords` into shared
        /// `dst`, a `T` whose size is the load's bytes (`pixelsPerColumn *
        /// channelsPerPixel * element size`): pixel `p` of the column at
        /// `dst + p * channelsPerPixel` elements. Out-of-bounds pixels are filled.
        ///
        /// # Safety
        /// As [`tile`](Self::tile), with an im2col map and that size.
        #[inline(always)]
        pub unsafe fn im2col<C: Im2colCoords, T>(
            &mut self,
            dst: *mut T,
            map: TensorMapRef,
            coords: C,
        ) {
            let bytes = BulkBytes::of::<T>();
            debug_assert!(aligned(dst, 128));
            // SAFETY: forwarded to the caller; `arrive` expects these bytes.
            unsafe { coords.load(to_shared_addr(dst), map.addr(), self.bar.shared_addr()) };
            self.add(bytes.get());
        }

        /// [`tile`](Self::tile) with `.multicast::cluster`: the box lands at `dst`'s
        /// offset in every cluster CTA whose rank bit is set in `cta_mask`, completing on
        /// the barrier at this barrier's offset in each.
        ///
        /// Counts `size_of::<T>()` times the number of CTAs in `cta_mask`: the bytes that
        /// land in this CTA when every CTA of `cta_mask` (this one included) issues one
        /// such copy of the same size and mask, each to its own part of the tile (the
        /// usual split of a tile between the CTAs that share it).
        ///
        /// # Safety
        /// As [`tile`](Self::tile), in every CTA of `cta_mask`, plus the pattern above;
        /// each destination's barrier was initialized and made visible to the cluster
        /// (`fence.mbarrier_init` and a cluster barrier) before the copy is issued, only
        /// ranks of this cluster are set, and no destination CTA exits before its copy
        /// completed.
        #[inline(always)]
        pub unsafe fn tile_multicast<C: TensorCoords, T>(
            &mut self,
            dst: *mut T,
            map: TensorMapRef,
            coords: C,
            cta_mask: u16,
        ) {
            let bytes = BulkBytes::of::<T>();
            debug_assert!(aligned(dst, 128));
            // SAFETY: forwarded to the caller; `arrive` expects these bytes.
            unsafe {
                coords.load_multicast(
                    to_shared_addr(dst),
                    map.addr(),
                    self.bar.shared_addr(),
                    cta_mask,
                )
            };
            self.add(bytes.get().wrapping_mul(cta_mask.count_ones()));
        }

        /// `mbarrier.arrive.expect_tx.release.cta`: arms the barrier with the bytes of
        /// every copy issued through this builder and arrives once.
        ///
        /// # Safety
        /// As [`MBarrier::arrive_expect_tx`]: the phase still expects this arrival, and
        /// its tx-count stays in range with these bytes added.
        #[inline(always)]
        pub unsafe fn arrive(self) -> ArrivalToken {
            // SAFETY: forwarded to the caller.
            unsafe { self.bar.arrive_expect_tx(Scope::Cta, self.tx) }
        }

        /// [`arrive`](Self::arrive) releasing at `scope`.
        ///
        /// # Safety
        /// As [`arrive`](Self::arrive).
        #[inline(always)]
        pub unsafe fn arrive_scoped(self, scope: Scope) -> ArrivalToken {
            // SAFETY: forwarded to the caller.
            unsafe { self.bar.arrive_expect_tx(scope, self.tx) }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Multi-stage rings (sm_90)
// ---------------------------------------------------------------------------------------

/// The barriers of a ring of `stages` buffers in shared memory: `full[s]` (the producer
/// filled stage `s`) and `empty[s]` (the consumers are done with it), stored as
/// `2 * stages` `u64`s: `full[0..stages]` then `empty[0..stages]`.
///
/// Each thread walks the ring with its own [`RingCursor`]: the producer waits for
/// `empty`, fills, and arms `full`; each consumer waits for `full`, reads, and arrives on
/// `empty`. The buffers are the caller's (stage `s` at `base + s * stage_bytes`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ring {
    bars: u32,
    stages: u32,
}

impl Ring {
    /// Wraps `2 * stages` mbarriers at the `.shared::cta` address `bars`.
    ///
    /// # Safety
    /// `stages >= 1`; `bars` is 8-byte aligned with `2 * stages` `u64`s in this CTA's
    /// shared memory used only as this ring's barriers; they are initialized by
    /// [`init`](Self::init) and the contract of [`MBarrier::from_shared_addr`] holds for
    /// each of them.
    #[inline(always)]
    #[must_use]
    pub const unsafe fn from_shared_addr(bars: u32, stages: u32) -> Self {
        Self { bars, stages }
    }

    /// Number of stages.
    #[inline(always)]
    #[must_use]
    pub const fn stages(self) -> u32 {
        self.stages
    }

    /// `full[stage]`, `stage` reduced to the ring (it is always below
    /// [`stages`](Self::stages) when it comes from a [`RingCursor`]).
    #[inline(always)]
    #[must_use]
    pub fn full(self, stage: u32) -> MBarrier {
        let s = if stage < self.stages { stage } else { 0 };
        // SAFETY: `s < stages`, so the address is one of the ring's barriers, whose
        // contract the caller of `from_shared_addr` upholds.
        unsafe { MBarrier::from_shared_addr(self.bars + 8 * s) }
    }

    /// `empty[stage]`, as [`full`](Self::full).
    #[inline(always)]
    #[must_use]
    pub fn empty(self, stage: u32) -> MBarrier {
        let s = if stage < self.stages { stage } else { 0 };
        // SAFETY: as in `full`.
        unsafe { MBarrier::from_shared_addr(self.bars + 8 * (self.stages + s)) }
    }

    /// A cursor at stage 0, first round.
    #[inline(always)]
    #[must_use]
    pub const fn cursor(self) -> RingCursor {
        RingCursor {
            ring: self,
            stage: 0,
            phase: 0,
            lapped: false,
        }
    }
}

sm80_ptx70! {
    impl Ring {
        /// Initializes every `full` barrier with `full_count` expected arrivals (1 for a
        /// producer using [`BulkLoad`]) and every `empty` barrier with `empty_count`.
        ///
        /// # Safety
        /// As [`MBarrier::init`] for each barrier: one thread, counts in `1..2^20`, and
        /// the initialization made visible (e.g. `fence_mbarrier_init` +
        /// [`sync_threads`](super::sync_threads)) before any use.
        #[inline(always)]
        pub unsafe fn init(self, full_count: u32, empty_count: u32) {
            let mut s = 0;
            while s < self.stages {
                // SAFETY: forwarded to the caller; `s < stages`.
                unsafe {
                    self.full(s).init(full_count);
                    self.empty(s).init(empty_count);
                }
                s += 1;
            }
        }

        /// Invalidates every barrier of the ring.
        ///
        /// # Safety
        /// As [`MBarrier::inval`]: no thread uses the ring afterwards, and every async
        /// copy that completes on it has completed.
        #[inline(always)]
        pub unsafe fn inval(self) {
            let mut s = 0;
            while s < self.stages {
                // SAFETY: forwarded to the caller; `s < stages`.
                unsafe {
                    self.full(s).inval();
                    self.empty(s).inval();
                }
                s += 1;
            }
        }
    }
}

/// One thread's position in a [`Ring`]: the stage it is at and the phase parity of the
/// round it is in. Neither `Copy` nor `Clone` (two cursors would fall out of step).
///
/// In round `k` (`k`-th pass over the stages, from 0) a consumer waits for phase `k` of
/// `full[s]`, and the producer for phase `k - 1` of `empty[s]` (nothing in round 0,
/// when every stage is free). A parity names a phase correctly because neither barrier
/// can run two phases ahead of the cursor: `full[s]` needs the producer, which waits
/// for `empty[s]`, which needs every consumer.
#[derive(Debug)]
pub struct RingCursor {
    ring: Ring,
    stage: u32,
    phase: u32,
    lapped: bool,
}

impl RingCursor {
    /// The current stage, `0..stages`.
    #[inline(always)]
    #[must_use]
    pub const fn stage(&self) -> u32 {
        self.stage
    }

    /// Parity of the current round (0 even, 1 odd).
    #[inline(always)]
    #[must_use]
    pub const fn phase(&self) -> u32 {
        self.phase
    }

    /// `full[stage]`.
    #[inline(always)]
    #[must_use]
    pub fn full(&self) -> MBarrier {
        self.ring.full(self.stage)
    }

    /// `empty[stage]`.
    #[inline(always)]
    #[must_use]
    pub fn empty(&self) -> MBarrier {
        self.ring.empty(self.stage)
    }

    /// Moves to the next stage, wrapping to stage 0 and the next round.
    #[inline(always)]
    pub fn advance(&mut self) {
        self.stage += 1;
        if self.stage >= self.ring.stages {
            self.stage = 0;
            self.phase ^= 1;
            self.lapped = true;
        }
    }
}

sm90_ptx78! {
    impl RingCursor {
        /// Consumer: waits until the current stage is full (`try_wait.parity` on
        /// `full[stage]` for this round's phase); the producer's data is then visible.
        #[inline(always)]
        pub fn wait_full(&self) {
            let addr = self.full().shared_addr();
            // SAFETY: live barrier (ring contract); the parity names the current or the
            // preceding phase (see the type's docs).
            while !unsafe { ptx_asm::mbarrier_try_wait_parity(addr, self.phase, None) } {}
        }

        /// Producer: waits until the consumers released the current stage's previous
        /// round (`try_wait.parity` on `empty[stage]`); returns at once in round 0.
        #[inline(always)]
        pub fn wait_empty(&self) {
            if !self.lapped {
                return;
            }
            let addr = self.empty().shared_addr();
            let parity = self.phase ^ 1;
            // SAFETY: as in `wait_full`.
            while !unsafe { ptx_asm::mbarrier_try_wait_parity(addr, parity, None) } {}
        }
    }
}
