//! Kernels that need PTX ISA 8.1, compiled to `ptx/generated/async81.ptx` by
//! `cargo xtask ptx` with `-C target-feature=+ptx81` (the other modules stay at 8.0).
//!
//! `async_store_exchange`: the asynchronous stores and reductions of
//! `cudadrv::device::RemoteShared` between the two CTAs of each cluster.
//!
//! # Unsafe policy
//! The kernel is an `unsafe extern "ptx-kernel" fn`: the host promises the launch shape
//! and buffer size its `# Safety` section states. Every `unsafe` block carries a
//! `// SAFETY:` comment.
#![no_std]
#![feature(abi_ptx, asm_experimental_arch)]

#[cfg(not(all(
    target_arch = "nvptx64",
    target_feature = "sm_90",
    target_feature = "ptx81"
)))]
compile_error!(
    "ptx-async81 builds only for nvptx64-nvidia-cuda with -C target-cpu=sm_90 \
     -C target-feature=+ptx81: run `cargo xtask ptx`"
);

use cudadrv::device::{
    Align16, BulkBytes, MBarrier, ProxySpace, RemoteShared, Scope, block_dim, block_idx,
    cluster_cta_count, cluster_cta_rank, cluster_sync, fence_mbarrier_init, fence_proxy_async,
    thread_idx,
};

/// Threads per block (one element per thread in every array).
pub const THREADS: u32 = 64;
/// `u32` words each block writes: seven arrays of 64 (inbox, inbox64 low, inbox64 high,
/// sum, min, max, bulk).
pub const WORDS_PER_BLOCK: u32 = 7 * THREADS;
/// Bytes each CTA's barrier expects from its peer: 64 `u32` stores, 64 `u64` stores, 3 x
/// 64 `u32` reductions and one 256-byte bulk reduction.
pub const TX_BYTES: u32 = THREADS * 4 + THREADS * 8 + 3 * THREADS * 4 + THREADS * 4;
/// What the min and max arrays start as.
pub const MIN_START: u32 = 1000;
/// See [`MIN_START`].
pub const MAX_START: u32 = 500;

cudadrv::shared_array! {
    /// `st.async.u32` destination.
    fn inbox() -> [u32; 64];
}
cudadrv::shared_array! {
    /// `st.async.u64` destination.
    fn inbox64() -> [u64; 64];
}
cudadrv::shared_array! {
    /// `red.async.add` destination.
    fn sums() -> [u32; 64];
}
cudadrv::shared_array! {
    /// `red.async.min` destination.
    fn mins() -> [u32; 64];
}
cudadrv::shared_array! {
    /// `red.async.max` destination.
    fn maxs() -> [u32; 64];
}
cudadrv::shared_array! {
    /// Bulk reduction destination (16-byte aligned).
    fn bulk_dst() -> [Align16<[u32; 64]>; 1];
}
cudadrv::shared_array! {
    /// Bulk reduction source (16-byte aligned).
    fn bulk_src() -> [Align16<[u32; 64]>; 1];
}
cudadrv::shared_array! {
    /// The barrier the peer's writes complete on.
    fn bar_cell() -> [u64; 1];
}

/// Each CTA of a 2-CTA cluster writes into its peer's shared memory with every
/// asynchronous form, counted on the peer's mbarrier, then reads what its peer wrote.
///
/// Launch: cluster dimension (2, 1, 1), any even 1-D grid, block (64, 1, 1); other shapes
/// return at once without writing.
///
/// CTA of cluster rank `r` (peer `p = r ^ 1`), thread `i`, before the exchange:
/// `sums[i] = 1000 r + i`, `mins[i] = 1000`, `maxs[i] = 500`, `bulk_dst[i] = 7 i`,
/// `bulk_src[i] = 3 i + r`. Into its peer it then issues `st.async.u32 inbox[i] =
/// 100000 r + i`, `st.async.u64 inbox64[i] = r << 40 | i`, `red.async.add sums[i] +=
/// (r + 1) i + 5`, `red.async.min mins[i] = min(., 20 i + r)`, `red.async.max maxs[i] =
/// max(., 20 i + r)`, and thread 0 one `cp.reduce.async.bulk` adding `bulk_src` into the
/// peer's `bulk_dst`. It waits for its own barrier (armed with [`TX_BYTES`]) at cluster
/// scope and writes, at `out[block * 448 + k * 64 + i]` for `k` = 0..7: `inbox[i]`,
/// the low and high words of `inbox64[i]`, `sums[i]`, `mins[i]`, `maxs[i]`, `bulk_dst[i]`
/// (so every value comes from the peer `p`).
///
/// # Safety
/// `out` writable for `gridDim.x * 448` `u32`s.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn async_store_exchange(out: *mut u32) {
    if block_dim().x != THREADS || block_dim().y != 1 || cluster_cta_count() != 2 {
        return;
    }
    let i = thread_idx().x;
    let r = cluster_cta_rank();
    let p = r ^ 1;
    let iu = i as usize;
    // SAFETY: `bar_cell` is a `u64` in this CTA's shared memory, used only as this
    // barrier; thread 0 initializes it before the cluster barrier below, which every
    // thread of both CTAs reaches; its one phase expects one arrival (thread 0's) and
    // `TX_BYTES`, exactly what the peer sends.
    let bar = unsafe { MBarrier::from_ptr(bar_cell().as_mut_ptr()) };
    // SAFETY: `i < 64`: each thread writes its own element of its CTA's arrays before
    // the cluster barrier; nothing else touches them yet.
    unsafe {
        *sums().as_mut_ptr().add(iu) = 1000 * r + i;
        *mins().as_mut_ptr().add(iu) = MIN_START;
        *maxs().as_mut_ptr().add(iu) = MAX_START;
        *bulk_dst().as_mut_ptr().cast::<u32>().add(iu) = 7 * i;
        *bulk_src().as_mut_ptr().cast::<u32>().add(iu) = 3 * i + r;
    }
    if i == 0 {
        // SAFETY: only thread 0, before any other use of the barrier.
        unsafe { bar.init(1) };
        fence_mbarrier_init();
    }
    // The bulk reduction reads `bulk_src` through the async proxy.
    fence_proxy_async(Some(ProxySpace::SharedCta));
    // SAFETY: every thread of both CTAs reaches it (the shape check is uniform).
    unsafe { cluster_sync() };

    if i == 0 {
        // SAFETY: the barrier expects one arrival (count 1), this thread's; its one
        // phase's tx is TX_BYTES, which the peer's writes below complete.
        let _ = unsafe { bar.arrive_expect_tx(Scope::Cluster, TX_BYTES) };
    }
    // SAFETY (all maps): static shared arrays at the same addresses in both CTAs, the
    // peer's barrier initialized and made visible by the cluster barrier above.
    let (to_inbox, to_inbox64, to_sums, to_mins, to_maxs, to_bulk) = unsafe {
        (
            RemoteShared::map(inbox().as_mut_ptr(), THREADS, bar, p),
            RemoteShared::map(inbox64().as_mut_ptr(), THREADS, bar, p),
            RemoteShared::map(sums().as_mut_ptr(), THREADS, bar, p),
            RemoteShared::map(mins().as_mut_ptr(), THREADS, bar, p),
            RemoteShared::map(maxs().as_mut_ptr(), THREADS, bar, p),
            RemoteShared::map(bulk_dst().as_mut_ptr().cast::<u32>(), THREADS, bar, p),
        )
    };
    // SAFETY (the writes): the peer's one phase expects exactly these bytes (TX_BYTES:
    // every thread's five writes and the bulk reduction below); nothing else touches the
    // arrays there until that phase completes; no CTA exits before the final cluster
    // barrier, which follows each CTA's wait for its own phase.
    unsafe {
        let _ = to_inbox.store(i, 100_000 * r + i);
        let _ = to_inbox64.store(i, (u64::from(r) << 40) | u64::from(i));
        let _ = to_sums.reduce_add(i, (r + 1) * i + 5);
        let _ = to_mins.reduce_min(i, 20 * i + r);
        let _ = to_maxs.reduce_max(i, 20 * i + r);
    }
    if i == 0 {
        if let Some(bytes) = BulkBytes::new(THREADS * 4) {
            // SAFETY: `bulk_src` is this CTA's, 16-byte aligned, 256 bytes, written
            // before the proxy fence and cluster barrier above and not written again;
            // this CTA does not exit before the final cluster barrier, after which the
            // peer's phase (which counts these bytes) has completed.
            let _ =
                unsafe { to_bulk.bulk_reduce_add(0, bulk_src().as_mut_ptr().cast::<u32>(), bytes) };
        }
    }

    bar.phase_cursor().wait_acquire(Scope::Cluster);
    let base = (block_idx().x * WORDS_PER_BLOCK) as usize;
    // SAFETY: the phase completed, so every asynchronous write from the peer has landed
    // and is visible (acquire at cluster scope); `out` holds `gridDim.x * 448` words.
    unsafe {
        let v64 = *inbox64().as_mut_ptr().add(iu);
        let vals = [
            *inbox().as_mut_ptr().add(iu),
            v64 as u32,
            (v64 >> 32) as u32,
            *sums().as_mut_ptr().add(iu),
            *mins().as_mut_ptr().add(iu),
            *maxs().as_mut_ptr().add(iu),
            *bulk_dst().as_mut_ptr().cast::<u32>().add(iu),
        ];
        for (k, v) in vals.into_iter().enumerate() {
            *out.add(base + k * THREADS as usize + iu) = v;
        }
    }
    // No CTA exits while its peer may still read its source or write its arrays.
    // SAFETY: every thread of both CTAs reaches it.
    unsafe { cluster_sync() };
}
