//! Asynchronous stores and reductions into distributed shared memory (CUDA Programming
//! Guide 4.11.3): `st.async`, `red.async` (PTX 8.1, sm_90) and the cluster form of
//! `cp.reduce.async.bulk` (PTX 8.0), each completing on an mbarrier of the destination
//! CTA with `complete_tx` of the bytes it wrote.
//!
//! [`RemoteShared`] names an array in the shared memory of one CTA of the cluster (often
//! another one) together with that CTA's mbarrier: every write through it is counted in
//! bytes on that barrier, so the receiving CTA arms its barrier with the bytes it expects
//! (`arrive_expect_tx`) and waits for the phase at cluster scope
//! ([`ArrivalToken::wait_acquire`](super::ArrivalToken::wait_acquire) with
//! [`Scope::Cluster`](super::Scope::Cluster)); once it completes, the data is there.
//! Indices are checked against the array's length ([`OutOfBounds`] past the end).
//!
//! ```ignore
//! // Each CTA of a 2-CTA cluster writes 64 words into its peer's `inbox`.
//! let peer = cluster_cta_rank() ^ 1;
//! let dst = unsafe { RemoteShared::map(inbox().as_mut_ptr(), 64, bar, peer) };
//! // SAFETY: the peer armed `bar` with these 4 bytes per lane and waits for the phase
//! // before it reads `inbox` or exits.
//! let _ = unsafe { dst.store(lane, value) }; // st.async, 4 bytes counted on the peer's `bar`
//! ```
//!
//! # Unsafe policy
//! [`RemoteShared::map`] is `unsafe`: its contract is what its caller sees at the call
//! (the array's storage, the rank, an initialized destination barrier). Each store and
//! reduction is `unsafe` too, with what only its own call site can check: the
//! destination phase expects its bytes, nothing else touches the element until that
//! phase completes, and the destination CTA is still running. The bulk reduction also
//! reads this CTA's shared memory through the async proxy. Every `unsafe` block carries a
//! `// SAFETY:` comment.

use core::marker::PhantomData;

use super::slice::OutOfBounds;
use super::{BulkBytes, ClusterMBarrier, MBarrier, ptx_asm, to_shared_addr};

/// `len` elements of `T` in the shared memory of one CTA of the cluster, with the
/// mbarrier of that CTA on which asynchronous writes into them complete.
#[derive(Debug)]
pub struct RemoteShared<T> {
    addr: u32,
    len: u32,
    bar: ClusterMBarrier,
    _t: PhantomData<*mut T>,
}

impl<T> Clone for RemoteShared<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for RemoteShared<T> {}

impl<T> RemoteShared<T> {
    /// `mapa.shared::cluster`: the array of `len` elements at `local` and the barrier
    /// `bar`, both at the same shared addresses as here, in the CTA of cluster rank `rank`.
    ///
    /// # Safety
    /// - `local` points at `len` elements of `T` in this CTA's shared memory (a static
    ///   `shared_array!`, which every CTA of the kernel has at the same address),
    ///   naturally aligned; `rank` is less than the cluster's CTA count.
    /// - In the CTA of rank `rank`, `bar` is an initialized mbarrier, visible to this
    ///   thread (the contract of [`MBarrier::in_cta`]).
    ///
    /// What each write needs (its bytes expected, the element left alone, the CTA still
    /// running) is the `# Safety` of [`store`](RemoteShared::store) and the reductions.
    #[inline(always)]
    #[must_use]
    pub unsafe fn map(local: *mut T, len: u32, bar: MBarrier, rank: u32) -> Self {
        Self {
            // SAFETY: forwarded to the caller; address translation only.
            addr: unsafe { ptx_asm::mapa_shared_cluster(to_shared_addr(local), rank) },
            len,
            // SAFETY: forwarded to the caller.
            bar: unsafe { bar.in_cta(rank) },
            _t: PhantomData,
        }
    }

    /// The number of elements.
    #[inline(always)]
    #[must_use]
    pub const fn len(&self) -> u32 {
        self.len
    }

    /// Whether there are no elements.
    #[inline(always)]
    #[must_use]
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The barrier the writes complete on.
    #[inline(always)]
    #[must_use]
    pub const fn barrier(&self) -> ClusterMBarrier {
        self.bar
    }

    /// The `.shared::cluster` address of element `i`, or [`OutOfBounds`].
    #[inline(always)]
    fn element(&self, i: u32) -> Result<u32, OutOfBounds> {
        if i < self.len {
            // `len` elements fit in the 32-bit shared window, so this cannot overflow.
            Ok(self.addr + i * core::mem::size_of::<T>() as u32)
        } else {
            Err(OutOfBounds {
                index: i as usize,
                len: self.len as usize,
            })
        }
    }
}

impl RemoteShared<u32> {
    /// `st.async...u32`: stores `v` at element `i`; 4 bytes complete on the barrier.
    ///
    /// # Errors
    /// [`OutOfBounds`] when `i >= len` (nothing stored, nothing counted).
    ///
    /// # Safety
    /// The destination barrier's current phase expects these 4 bytes (`expect_tx` in
    /// that CTA), nothing reads or writes element `i` there by other means until the
    /// phase completes, and that CTA does not exit before it completes.
    #[inline(always)]
    pub unsafe fn store(&self, i: u32, v: u32) -> Result<(), OutOfBounds> {
        let dst = self.element(i)?;
        // SAFETY: `dst` is element `i < len` of the mapped array (`map`'s contract: the
        // storage and an initialized barrier); the caller's contract makes the bytes
        // expected, the element untouched and the CTA running.
        unsafe { ptx_asm::st_async_u32(dst, v, self.bar.cluster_addr()) };
        Ok(())
    }

    /// `red.async...add.u32`: atomically adds `v` to element `i` (wrapping); 4 bytes
    /// complete on the barrier.
    ///
    /// # Errors
    /// [`OutOfBounds`] when `i >= len`.
    ///
    /// # Safety
    /// The destination barrier's current phase expects these 4 bytes (`expect_tx` in
    /// that CTA), nothing reads or writes element `i` there by other means until the
    /// phase completes, and that CTA does not exit before it completes.
    #[inline(always)]
    pub unsafe fn reduce_add(&self, i: u32, v: u32) -> Result<(), OutOfBounds> {
        let dst = self.element(i)?;
        // SAFETY: as in `store`.
        unsafe { ptx_asm::red_async_add_u32(dst, v, self.bar.cluster_addr()) };
        Ok(())
    }

    /// `red.async...min.u32`: element `i` becomes `min(element, v)`; 4 bytes counted.
    ///
    /// # Errors
    /// [`OutOfBounds`] when `i >= len`.
    ///
    /// # Safety
    /// The destination barrier's current phase expects these 4 bytes (`expect_tx` in
    /// that CTA), nothing reads or writes element `i` there by other means until the
    /// phase completes, and that CTA does not exit before it completes.
    #[inline(always)]
    pub unsafe fn reduce_min(&self, i: u32, v: u32) -> Result<(), OutOfBounds> {
        let dst = self.element(i)?;
        // SAFETY: as in `store`.
        unsafe { ptx_asm::red_async_min_u32(dst, v, self.bar.cluster_addr()) };
        Ok(())
    }

    /// `red.async...max.u32`: element `i` becomes `max(element, v)`; 4 bytes counted.
    ///
    /// # Errors
    /// [`OutOfBounds`] when `i >= len`.
    ///
    /// # Safety
    /// The destination barrier's current phase expects these 4 bytes (`expect_tx` in
    /// that CTA), nothing reads or writes element `i` there by other means until the
    /// phase completes, and that CTA does not exit before it completes.
    #[inline(always)]
    pub unsafe fn reduce_max(&self, i: u32, v: u32) -> Result<(), OutOfBounds> {
        let dst = self.element(i)?;
        // SAFETY: as in `store`.
        unsafe { ptx_asm::red_async_max_u32(dst, v, self.bar.cluster_addr()) };
        Ok(())
    }

    /// `cp.reduce.async.bulk.shared::cluster.shared::cta...add.u32`: adds the `bytes / 4`
    /// words at `src` (this CTA's shared memory) element-wise into elements
    /// `first..first + bytes / 4`; `bytes` complete on the barrier.
    ///
    /// # Errors
    /// [`OutOfBounds`] (the end index) when the range does not fit.
    ///
    /// # Safety
    /// As [`store`](RemoteShared::store) for the `bytes` written; and `src` points into
    /// this CTA's shared memory, 16-byte aligned, with `bytes` readable; element `first` is 16-byte aligned; the threads that wrote `src` issued
    /// [`fence_proxy_async`](super::fence_proxy_async)`(Some(ProxySpace::SharedCta))`
    /// after their writes and a barrier orders them before this call; `src` is not
    /// written, and this CTA does not exit, before the destination's phase completes.
    #[inline(always)]
    pub unsafe fn bulk_reduce_add(
        &self,
        first: u32,
        src: *const u32,
        bytes: BulkBytes,
    ) -> Result<(), OutOfBounds> {
        let words = bytes.get() / 4;
        let end = first.checked_add(words).unwrap_or(u32::MAX);
        if end > self.len {
            return Err(OutOfBounds {
                index: end as usize,
                len: self.len as usize,
            });
        }
        let dst = self.element(first)?;
        // SAFETY: the range `first..end` lies inside the mapped array (checked); the
        // source contract is the caller's; `bytes` is a non-zero multiple of 16.
        unsafe {
            ptx_asm::cp_reduce_async_bulk_cluster_add_u32(
                dst,
                to_shared_addr(src),
                bytes.get(),
                self.bar.cluster_addr(),
            );
        }
        Ok(())
    }
}

impl RemoteShared<u64> {
    /// `st.async...u64`: stores `v` at element `i`; 8 bytes complete on the barrier.
    ///
    /// # Errors
    /// [`OutOfBounds`] when `i >= len`.
    ///
    /// # Safety
    /// The destination barrier's current phase expects these 8 bytes (`expect_tx` in
    /// that CTA), nothing reads or writes element `i` there by other means until the
    /// phase completes, and that CTA does not exit before it completes.
    #[inline(always)]
    pub unsafe fn store(&self, i: u32, v: u64) -> Result<(), OutOfBounds> {
        let dst = self.element(i)?;
        // SAFETY: as for the `u32` store; the element is 8-byte aligned (`map`).
        unsafe { ptx_asm::st_async_u64(dst, v, self.bar.cluster_addr()) };
        Ok(())
    }
}
