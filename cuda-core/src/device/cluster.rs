//! Thread block clusters (PTX 7.8 / 8.0, sm_90): cluster indices, the cluster barrier,
//! distributed shared memory (`mapa`) and [`ClusterMBarrier`], an mbarrier addressed in
//! the `.shared::cluster` window (this CTA's or another CTA's of the cluster).

#[cfg(any(doc, target_feature = "ptx80"))]
use super::scope::Scope;
use super::{Dim3, MBarrier, ptx_asm};

/// `%clusterid`: this cluster's index in the grid.
#[inline(always)]
#[must_use]
pub fn cluster_id() -> Dim3 {
    // SAFETY: reading special registers has no side effect.
    unsafe {
        Dim3::new(
            ptx_asm::clusterid_x(),
            ptx_asm::clusterid_y(),
            ptx_asm::clusterid_z(),
        )
    }
}

/// `%nclusterid`: the grid's extent in clusters.
#[inline(always)]
#[must_use]
pub fn cluster_grid_dim() -> Dim3 {
    // SAFETY: reading special registers has no side effect.
    unsafe {
        Dim3::new(
            ptx_asm::nclusterid_x(),
            ptx_asm::nclusterid_y(),
            ptx_asm::nclusterid_z(),
        )
    }
}

/// `%cluster_ctaid`: this CTA's index within its cluster.
#[inline(always)]
#[must_use]
pub fn cluster_cta_id() -> Dim3 {
    // SAFETY: reading special registers has no side effect.
    unsafe {
        Dim3::new(
            ptx_asm::cluster_ctaid_x(),
            ptx_asm::cluster_ctaid_y(),
            ptx_asm::cluster_ctaid_z(),
        )
    }
}

/// `%cluster_nctaid`: the cluster's extent in CTAs.
#[inline(always)]
#[must_use]
pub fn cluster_dim() -> Dim3 {
    // SAFETY: reading special registers has no side effect.
    unsafe {
        Dim3::new(
            ptx_asm::cluster_nctaid_x(),
            ptx_asm::cluster_nctaid_y(),
            ptx_asm::cluster_nctaid_z(),
        )
    }
}

/// `%cluster_ctarank`: this CTA's linear rank in its cluster, 0..[`cluster_cta_count`].
#[inline(always)]
#[must_use]
pub fn cluster_cta_rank() -> u32 {
    // SAFETY: reading a special register has no side effect.
    unsafe { ptx_asm::cluster_ctarank() }
}

/// `%cluster_nctarank`: the number of CTAs in this cluster (1 without a cluster launch).
#[inline(always)]
#[must_use]
pub fn cluster_cta_count() -> u32 {
    // SAFETY: reading a special register has no side effect.
    unsafe { ptx_asm::cluster_nctarank() }
}

/// `barrier.cluster.arrive;`: arrives on the cluster barrier, releasing this thread's
/// prior writes to the cluster.
///
/// # Safety
/// Every non-exited thread of every CTA in the cluster arrives once and then waits
/// ([`cluster_wait`]) before arriving again.
#[inline(always)]
pub unsafe fn cluster_arrive() {
    // SAFETY: forwarded to the caller.
    unsafe { ptx_asm::barrier_cluster_arrive() }
}

/// `barrier.cluster.arrive.relaxed;` (PTX 8.0): arrives without release semantics (e.g.
/// after [`fence_mbarrier_init`](super::fence_mbarrier_init), which releases the inits).
///
/// # Safety
/// As [`cluster_arrive`].
#[cfg(any(doc, target_feature = "ptx80"))]
#[cfg_attr(
    any(docsrs, all(doc, target_arch = "nvptx64")),
    doc(cfg(all(target_feature = "sm_90", target_feature = "ptx80")))
)]
#[inline(always)]
pub unsafe fn cluster_arrive_relaxed() {
    // SAFETY: forwarded to the caller.
    unsafe { ptx_asm::barrier_cluster_arrive_relaxed() }
}

/// `barrier.cluster.wait;`: waits until every thread of the cluster has arrived,
/// acquiring their released writes.
///
/// # Safety
/// The thread must have arrived since its previous wait.
#[inline(always)]
pub unsafe fn cluster_wait() {
    // SAFETY: forwarded to the caller.
    unsafe { ptx_asm::barrier_cluster_wait() }
}

/// [`cluster_arrive`] then [`cluster_wait`] (`cluster.sync()`).
///
/// # Safety
/// Every non-exited thread of every CTA in the cluster calls it (no divergent call).
#[inline(always)]
pub unsafe fn cluster_sync() {
    // SAFETY: forwarded to the caller.
    unsafe {
        ptx_asm::barrier_cluster_arrive();
        ptx_asm::barrier_cluster_wait();
    }
}

/// `mapa.u64`: the generic pointer to the same shared variable as `ptr` in the CTA of
/// cluster rank `rank` (distributed shared memory, `cluster.map_shared_rank`). Ordinary
/// loads and stores through the result reach the other CTA's shared memory.
///
/// # Safety
/// `ptr` must point into this CTA's shared memory and `rank` be less than
/// [`cluster_cta_count`]. Accesses through the result are sound only while the target
/// CTA runs (synchronize with a cluster barrier before any CTA exits).
#[inline(always)]
#[must_use]
pub unsafe fn map_shared_rank<T>(ptr: *mut T, rank: u32) -> *mut T {
    // SAFETY: forwarded to the caller; address translation only.
    unsafe { ptx_asm::mapa_generic(ptr.cast(), rank).cast() }
}

/// An mbarrier addressed in the `.shared::cluster` window: this CTA's own
/// ([`MBarrier::as_cluster`]) or another CTA's of the cluster ([`MBarrier::in_cta`]).
/// Only the remote-capable operations: arrive (no token), expect_tx, complete_tx.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClusterMBarrier {
    addr: u32,
}

impl MBarrier {
    /// This CTA's barrier in the `.shared::cluster` window (same address).
    #[inline(always)]
    #[must_use]
    pub const fn as_cluster(self) -> ClusterMBarrier {
        ClusterMBarrier {
            addr: self.shared_addr(),
        }
    }

    /// `mapa.shared::cluster.u32`: the barrier at the same shared address in the CTA of
    /// cluster rank `rank`.
    ///
    /// # Safety
    /// `rank` is less than [`cluster_cta_count`]; that CTA has initialized an mbarrier at
    /// this address, the initialization is visible to this thread
    /// ([`fence_mbarrier_init`](super::fence_mbarrier_init) and a cluster barrier), and
    /// the storage part of the contract of [`MBarrier::from_shared_addr`] holds for it.
    /// That CTA still running, and the protocol, are the promises of each operation.
    #[inline(always)]
    #[must_use]
    pub unsafe fn in_cta(self, rank: u32) -> ClusterMBarrier {
        ClusterMBarrier {
            // SAFETY: forwarded to the caller; address translation only.
            addr: unsafe { ptx_asm::mapa_shared_cluster(self.shared_addr(), rank) },
        }
    }
}

impl ClusterMBarrier {
    /// The `.shared::cluster` address.
    #[inline(always)]
    #[must_use]
    pub const fn cluster_addr(self) -> u32 {
        self.addr
    }
}

#[cfg(any(doc, target_feature = "ptx80"))]
#[cfg_attr(
    any(docsrs, all(doc, target_arch = "nvptx64")),
    doc(cfg(all(target_feature = "sm_90", target_feature = "ptx80")))
)]
impl ClusterMBarrier {
    /// `mbarrier.arrive.release.cluster.shared::cluster.b64 _, [addr], 1;`: one arrival,
    /// releasing this thread's prior writes (distributed shared memory included) to the
    /// cluster. Waiters should acquire at [`Scope::Cluster`].
    ///
    /// # Safety
    /// The barrier's CTA has not exited (for another CTA's barrier: no CTA exits before a
    /// cluster barrier after the last remote operation), and the current phase still expects one more arrival.
    #[inline(always)]
    pub unsafe fn arrive(self) {
        // SAFETY: the handle's contract (from `as_cluster`/`in_cta`) makes the barrier
        // an initialized one; the caller keeps its CTA running and the arrival in
        // protocol.
        unsafe { ptx_asm::mbarrier_arrive_remote(self.addr, 1) }
    }

    /// `mbarrier.arrive.release.cluster.shared::cluster.b64 _, [addr], count;`.
    ///
    /// # Safety
    /// The barrier's CTA has not exited (for another CTA's barrier: no CTA exits before a
    /// cluster barrier after the last remote operation), and the current phase still expects `count` more arrivals (`count` in
    /// `1..2^20`).
    #[inline(always)]
    pub unsafe fn arrive_count(self, count: u32) {
        // SAFETY: as in `arrive`.
        unsafe { ptx_asm::mbarrier_arrive_remote(self.addr, count) }
    }

    /// `mbarrier.expect_tx.relaxed.<scope>.shared::cluster.b64 [addr], tx;`.
    ///
    /// # Safety
    /// The barrier's CTA has not exited (for another CTA's barrier: no CTA exits before a
    /// cluster barrier after the last remote operation), and the current phase's tx-count stays within `-(2^20 - 1)..2^20` with `tx`
    /// added.
    #[inline(always)]
    pub unsafe fn expect_tx(self, scope: Scope, tx: u32) {
        // SAFETY: as in `arrive`.
        unsafe { ptx_asm::mbarrier_expect_tx_cluster_space(self.addr, scope, tx) }
    }

    /// `mbarrier.complete_tx.relaxed.cluster.shared::cluster.b64 [addr], tx;`.
    ///
    /// # Safety
    /// The barrier's CTA has not exited (for another CTA's barrier: no CTA exits before a
    /// cluster barrier after the last remote operation), and the current phase's tx-count stays within `-(2^20 - 1)..2^20` with `tx`
    /// taken away.
    #[inline(always)]
    pub unsafe fn complete_tx(self, tx: u32) {
        // SAFETY: as in `arrive`.
        unsafe { ptx_asm::mbarrier_complete_tx(self.addr, tx) }
    }
}
