//! `mbar_forms`: one thread walks an mbarrier through three phases using every form the
//! pipeline kernel does not (noComplete, pending_count, scoped arrives, the
//! `.shared::cluster` forms on its own CTA, every try_wait variant, false wait results),
//! runs every fence, and reads the special registers, recording results a host test
//! checks. It also makes `ptxas` see every instruction form of `cudadrv::device`.

use cudadrv::device::{
    DynamicShared, FenceScope, MBarrier, ProxySpace, Scope, clock64, cluster_cta_count,
    cluster_cta_id, cluster_cta_rank, cluster_dim, cluster_grid_dim, cluster_id, fence_acq_rel,
    fence_mbarrier_init, fence_proxy_async, fence_sc, globaltimer, lane_id, map_shared_rank, nsmid,
    smid, sync_warp, thread_idx, warpid,
};

/// Words of output.
pub const OUT_WORDS: usize = 32;
/// Dynamic shared memory bytes the launch must give.
pub const DYN_SMEM_BYTES: u32 = 64;

cudadrv::shared_array! {
    /// The barrier under test.
    fn forms_bar() -> [u64; 1];
}

cudadrv::shared_array! {
    /// A word reached through `mapa` (distributed shared memory, own rank).
    fn forms_word() -> [u32; 1];
}

cudadrv::dynamic_shared! {
    /// The launch's dynamic shared memory.
    fn forms_dyn();
}

/// Runs the script and records results.
///
/// Launch: grid 1, block 32 (one warp; thread 0 runs the script, the warp joins one
/// `__syncwarp`), **64 bytes of dynamic shared memory**, no cluster attribute.
///
/// Output `out[0..32]` (`u32`), barrier `B` initialized with count 4:
///
/// | word | what | expected |
/// |---|---|---|
/// | 0 | `pending_count` of `arrive.noComplete(1)`'s state (phase 0) | 4 (see note) |
/// | 1 | `pending_count` of `arrive.release.cta(1)`'s state | 3 (see note) |
/// | 2 | `test_wait` with the token of `arrive.release.cluster(1)` (1 arrival missing) | 0 |
/// | 3 | parity cursor `test_wait` on phase 0 (incomplete) | 0 |
/// | 4 | after a remote-form `arrive` on its own CTA: token `try_wait.acquire.cluster` (hint 1000 ns) loop | 1 |
/// | 5 | cursor `test_wait` on phase 0 (now complete) | 1 |
/// | 6 | phase 1, tx 48 pending, all 4 arrivals done: `test_wait` of `arrive(2)`'s token | 0 |
/// | 7 | cursor `try_wait.parity.acquire.cta` with hint 1 ns on phase 1 (tx pending) | 0 |
/// | 8 | after `complete_tx(48)`: cursor `wait_acquire(cluster)`, then its parity | 0 |
/// | 9 | token of `arrive.expect_tx.release.cluster`: `try_wait.acquire.cta` (hint 500 ns) loop | 1 |
/// | 10 | phase 2: `pending_count` of plain `arrive`'s state | 4 (see note) |
/// | 11 | cursor `try_wait.parity` with hint 1 ns on phase 2 (incomplete) | 0 |
/// | 12 | token `try_wait` (no hint) on phase 2 (incomplete) | 0 |
/// | 13 | after `arrive(3)` completes phase 2: cursor `wait`, then its parity | 1 |
/// | 14 | token `wait` of phase 2 returned | 1 |
/// | 15 | `%cluster_nctarank` | 1 |
/// | 16 | `%cluster_ctarank` | 0 |
/// | 17 | `%cluster_nctaid` x*y*z | 1 |
/// | 18 | `%nclusterid.x` (= gridDim.x without clusters) | 1 |
/// | 19 | `%smid < %nsmid` | 1 |
/// | 20 | `%dynamic_smem_size` | 64 |
/// | 21 | word written to dynamic shared memory and read back | `0xC0DE_0001` |
/// | 22 | word written through `mapa.u64` (own rank) and read back locally | `0xC0DE_0002` |
/// | 23 | `%globaltimer` did not go backwards across the script | 1 |
/// | 24 | `%clock64` did not go backwards across the script | 1 |
/// | 25 | `%laneid` of thread 0 | 0 |
/// | 26 | `%warpid < 64` | 1 |
/// | 27 | `%clusterid.y + .z + %cluster_ctaid.y + .z` | 0 |
/// | 28 | `%nclusterid.y * .z` | 1 |
/// | 29..32 | not written | — |
///
/// Note on words 0, 1 and 10: the PTX ISA says the state an arrive returns captures the
/// barrier *before* the arrive, which gives 4, 3 and 4. If the hardware reports 3, 2
/// and 3, the state is taken after the arrive; either way `w0 == w1 + 1` and
/// `w10 == w0`.
///
/// # Safety
/// `out` writable for 32 `u32`s; launched as described.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn mbar_forms(out: *mut u32) {
    if thread_idx().x == 0 {
        // SAFETY: thread 0 alone runs the script; `out` holds 32 words.
        unsafe { script(out) };
    }
    // SAFETY: every lane of the (single) warp reaches it with the full mask.
    unsafe { sync_warp(0xFFFF_FFFF) };
}

/// The single-thread script behind [`mbar_forms`].
///
/// # Safety
/// Called by one thread; `out` writable for 32 words; 64 bytes of dynamic shared memory.
#[inline(always)]
unsafe fn script(out: *mut u32) {
    // SAFETY: every index below is < OUT_WORDS.
    let put = |i: usize, v: u32| unsafe { out.add(i).write(v) };
    let t_start = globaltimer();
    let c_start = clock64();

    for scope in [
        FenceScope::Cta,
        FenceScope::Cluster,
        FenceScope::Gpu,
        FenceScope::Sys,
    ] {
        fence_sc(scope);
        fence_acq_rel(scope);
    }
    for space in [
        None,
        Some(ProxySpace::Global),
        Some(ProxySpace::SharedCta),
        Some(ProxySpace::SharedCluster),
    ] {
        fence_proxy_async(space);
    }

    // SAFETY: `forms_bar` is an 8-byte aligned u64 in shared memory used only as this
    // barrier; this thread initializes it before any other use and is its only user.
    let bar = unsafe { MBarrier::from_ptr(forms_bar().as_mut_ptr()) };
    // SAFETY: sole user, count in range.
    unsafe { bar.init(4) };
    fence_mbarrier_init();
    let mut cursor = bar.phase_cursor();

    // Phase 0.
    // SAFETY: 3 more arrivals are needed after this one, so it does not complete.
    put(0, unsafe { bar.arrive_no_complete(1) }.pending_count());
    // SAFETY (every arrival and tx change below): this thread is the barrier's only
    // user and follows the counts written at each phase: 4 arrivals per phase (the
    // barrier's count), tx-counts of at most 48.
    put(1, unsafe { bar.arrive_release(Scope::Cta, 1) }.pending_count());
    let token = unsafe { bar.arrive_release(Scope::Cluster, 1) };
    put(2, u32::from(token.test_wait()));
    put(3, u32::from(cursor.test_wait()));
    unsafe { bar.as_cluster().arrive() };
    let mut token = token;
    while let Err(t) = token.try_wait_acquire(Scope::Cluster, Some(1000)) {
        token = t;
    }
    put(4, 1);
    put(5, u32::from(cursor.test_wait()));

    // Phase 1: tx 16 + 16 + 8 + 8 = 48, arrivals 1 + 2 + 1 = 4.
    unsafe {
        bar.as_cluster().expect_tx(Scope::Cta, 16);
        bar.as_cluster().expect_tx(Scope::Cluster, 16);
        bar.expect_tx(Scope::Cluster, 8);
    }
    let token = unsafe { bar.arrive_expect_tx(Scope::Cluster, 8) };
    let token2 = unsafe { bar.arrive_count(2) };
    unsafe { bar.as_cluster().arrive_count(1) };
    put(6, u32::from(token2.test_wait()));
    put(7, u32::from(cursor.try_wait_acquire(Scope::Cta, Some(1))));
    unsafe { bar.as_cluster().complete_tx(48) };
    cursor.wait_acquire(Scope::Cluster);
    put(8, cursor.parity());
    let mut token = token;
    while let Err(t) = token.try_wait_acquire(Scope::Cta, Some(500)) {
        token = t;
    }
    put(9, 1);

    // Phase 2.
    let token = unsafe { bar.arrive() };
    put(10, token.pending_count());
    put(11, u32::from(cursor.try_wait_hint(1)));
    let token = match token.try_wait() {
        Ok(()) => {
            put(12, 1);
            None
        }
        Err(t) => {
            put(12, 0);
            Some(t)
        }
    };
    let _ = unsafe { bar.arrive_count(3) };
    cursor.wait();
    put(13, cursor.parity());
    if let Some(t) = token {
        t.wait();
    }
    put(14, 1);
    // SAFETY: this thread is the barrier's only user and is done with it.
    unsafe { bar.inval() };

    put(15, cluster_cta_count());
    put(16, cluster_cta_rank());
    let cd = cluster_dim();
    put(17, cd.x * cd.y * cd.z);
    put(18, cluster_grid_dim().x);
    put(19, u32::from(smid() < nsmid()));
    let dyn_smem: DynamicShared = forms_dyn();
    put(20, dyn_smem.len());
    if dyn_smem.len() >= 4 {
        let p = dyn_smem.as_mut_ptr().cast::<u32>();
        // SAFETY: the launch has at least 4 bytes of 16-aligned dynamic shared memory.
        let v = unsafe {
            p.write_volatile(0xC0DE_0001);
            p.read_volatile()
        };
        put(21, v);
    }
    let local = forms_word().as_mut_ptr();
    // SAFETY: `local` is in this CTA's shared memory and rank 0 is this CTA (no
    // cluster launch), which is running.
    let v = unsafe {
        map_shared_rank(local, 0).write_volatile(0xC0DE_0002);
        local.read_volatile()
    };
    put(22, v);
    put(23, u32::from(globaltimer() >= t_start));
    put(24, u32::from(clock64() >= c_start));
    put(25, lane_id());
    put(26, u32::from(warpid() < 64));
    let (id, cta) = (cluster_id(), cluster_cta_id());
    put(27, id.y + id.z + cta.y + cta.z);
    let grid = cluster_grid_dim();
    put(28, grid.y * grid.z);
}
