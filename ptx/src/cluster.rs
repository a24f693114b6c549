//! `cluster_mbarrier`: every CTA of a cluster writes into CTA rank 0's shared memory
//! (distributed shared memory, `mapa`) and arrives remotely on rank 0's mbarrier; rank 0
//! waits with cluster-scope acquire and reports what it received.

use cudadrv::device::{
    MBarrier, Scope, block_idx, cluster_arrive, cluster_arrive_relaxed, cluster_cta_count,
    cluster_cta_id, cluster_cta_rank, cluster_dim, cluster_grid_dim, cluster_id, cluster_wait,
    fence_mbarrier_init, map_shared_rank, smid, thread_idx,
};

/// `u32` words of output per CTA.
pub const RECORD_WORDS: usize = 16;
/// Largest cluster the kernel handles (slots in rank 0's shared memory).
pub const MAX_CLUSTER: u32 = 8;
/// Record word 7 for a CTA that ran the protocol.
pub const MARKER_OK: u32 = 1;
/// Record word 7 when the cluster was larger than [`MAX_CLUSTER`] (nothing else done).
pub const MARKER_TOO_LARGE: u32 = 0xBAD;

cudadrv::shared_array! {
    /// The barrier rank 0 waits on (expected count: the cluster size).
    fn cluster_bar() -> [u64; 1];
}

cudadrv::shared_array! {
    /// Rank 0's inbox: slot `r` written by rank `r`.
    fn cluster_slots() -> [u32; 8];
}

/// Cluster rendezvous on rank 0's mbarrier.
///
/// Launch: 1-D grid of `G * N` blocks with cluster dimension `(N, 1, 1)`, `N` in 1..=8
/// (the tests use 2 and 4; `CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION`), any block size
/// (e.g. 32), no dynamic shared memory.
///
/// Protocol: rank 0's thread 0 inits the barrier with count `N`,
/// `fence.mbarrier_init.release.cluster`; all threads `barrier.cluster.arrive.relaxed` +
/// `barrier.cluster.wait`. Each CTA's thread 0 stores `blockIdx.x + 1` into rank 0's
/// `slot[rank]` (through `mapa`), then `mbarrier.arrive.release.cluster.shared::cluster`
/// on rank 0's barrier (through `mapa.shared::cluster`). Rank 0's thread 0 waits with
/// `try_wait.parity.acquire.cluster` and copies the slots out. All threads then
/// `barrier.cluster.arrive` + `wait` so no CTA exits while its shared memory may be
/// accessed; rank 0 invalidates the barrier.
///
/// Output: `out[16 * b ..][..16]` for block `b = blockIdx.x` (cluster `c = b / N`):
/// - `[0]` `%cluster_ctarank` = `b % N`; `[1]` `%cluster_nctarank` = `N`;
/// - `[2]` `%clusterid.x` = `c`; `[3]` `%cluster_ctaid.x` = `b % N`;
/// - `[4]` `%nclusterid.x` = `G`; `[5]` `%cluster_nctaid.x` = `N`;
/// - `[6]` `%smid` (informational); `[7]` [`MARKER_OK`] (1);
/// - rank 0 only: `[8 + r]` = `c * N + r + 1` for `r` in `0..N` (what rank `r` sent);
///   words `8..16` of other ranks, and `8 + N..16` of rank 0, are not written.
///
/// For `N > 8`: only words 0..=6 and `[7]` = [`MARKER_TOO_LARGE`] are written.
///
/// # Safety
/// `out` writable for `16 * gridDim.x` `u32`s; launched with a 1-D cluster shape.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn cluster_mbarrier(out: *mut u32) {
    let tid = thread_idx().x;
    let rank = cluster_cta_rank();
    let n = cluster_cta_count();
    let block = block_idx().x;
    // SAFETY: `RECORD_WORDS * gridDim.x` words are writable (kernel contract).
    let record = unsafe { out.add(block as usize * RECORD_WORDS) };
    if tid == 0 {
        let words = [
            rank,
            n,
            cluster_id().x,
            cluster_cta_id().x,
            cluster_grid_dim().x,
            cluster_dim().x,
            smid(),
        ];
        for (i, w) in words.into_iter().enumerate() {
            // SAFETY: `i < 7 < RECORD_WORDS`.
            unsafe { record.add(i).write(w) };
        }
    }
    if n > MAX_CLUSTER {
        // Uniform across the cluster: every CTA sees the same `n`.
        if tid == 0 {
            // SAFETY: word 7 of this block's record.
            unsafe { record.add(7).write(MARKER_TOO_LARGE) };
        }
        return;
    }

    // SAFETY: `cluster_bar` is an 8-byte aligned `u64` in shared memory used only as
    // this barrier; rank 0 initializes it and the fence + cluster barrier below make the
    // init visible before any use; the protocol sends exactly `n` single arrivals.
    let bar = unsafe { MBarrier::from_shared_addr(cluster_bar().base_addr()) };
    if tid == 0 && rank == 0 {
        // SAFETY: only this thread touches the barrier before the cluster barrier.
        unsafe { bar.init(n) };
        fence_mbarrier_init();
    }
    // SAFETY: every thread of every CTA in the cluster reaches these (no early exit
    // above except the cluster-uniform one).
    unsafe {
        cluster_arrive_relaxed();
        cluster_wait();
    }

    if tid == 0 {
        // SAFETY: `rank < n <= 8` slots; rank 0 is in the cluster and stays resident
        // until the final cluster barrier; the store happens before the release arrive,
        // which is this CTA's one arrival on rank 0's barrier (it expects one per CTA).
        unsafe {
            let slot = cluster_slots().as_mut_ptr().add(rank as usize);
            map_shared_rank(slot, 0).write_volatile(block + 1);
            bar.in_cta(0).arrive();
        }
        if rank == 0 {
            let mut phase = bar.phase_cursor();
            phase.wait_acquire(Scope::Cluster);
            let slots = cluster_slots().as_mut_ptr();
            for r in 0..n as usize {
                // SAFETY: `r < n <= 8` (slots) and `8 + r < 16` (record words); the
                // slots were released by the arrivals this wait acquired.
                unsafe { record.add(8 + r).write(slots.add(r).read_volatile()) };
            }
        }
        // SAFETY: word 7 of this block's record.
        unsafe { record.add(7).write(MARKER_OK) };
    }

    // SAFETY: every thread of every CTA in the cluster reaches it.
    unsafe {
        cluster_arrive();
        cluster_wait();
    }
    if tid == 0 && rank == 0 {
        // SAFETY: all arrivals and waits are done (cluster barrier above).
        unsafe { bar.inval() };
    }
}
