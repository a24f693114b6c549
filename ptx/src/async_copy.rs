//! `acp_*`: asynchronous copies. `cp.async` (sm_80 forms: 4/8/16 bytes, `.ca`/`.cg`,
//! zero fill, commit/wait groups, mbarrier arrive forms), bulk copies (`cp.async.bulk`
//! loads completing on mbarriers, stores in bulk groups), tensor copies (TMA: 2-D tile
//! loads and stores, multicast across a cluster, prefetches), a multi-stage
//! producer/consumer ring, and an mbarrier armed with the wrong byte count.
//!
//! Every global pointer must be 16-byte aligned (`cuMemAlloc` gives 256). Tensor maps
//! are `CUtensorMap`s made by `cuTensorMapEncodeTiled` and copied to device memory
//! (64-byte aligned), except for [`acp_tma_2d_load_tile_param`], which takes one by
//! value.

use cudadrv::device::{
    Align16, Align128, BulkBytes, BulkLoad, Dim3, DynamicShared, L2Policy, MBarrier, ProxySpace,
    Ring, Scope, TensorMapRef, block_dim, block_idx, bulk_commit, bulk_load, bulk_prefetch_l2,
    bulk_store, bulk_store_hint, bulk_wait, bulk_wait_read, cluster_cta_count, cluster_cta_rank,
    cluster_sync, cp_async, cp_async_cg_zfill, cp_async_commit, cp_async_wait, elect_one,
    fence_mbarrier_init, fence_proxy_async, from_shared_addr, globaltimer, grid_dim,
    store_global_hint, sync_threads, sync_warp, thread_idx,
};

/// Threads per block of [`acp_cp_async`].
pub const CP_ASYNC_BLOCK: u32 = 128;
/// `u32`s one block of [`acp_cp_async`] copies (16 bytes per thread).
pub const CP_ASYNC_BLOCK_WORDS: u32 = CP_ASYNC_BLOCK * 4;
/// `u32`s [`acp_cp_async_sizes`] copies: 32 of 4 bytes, 32 of 8, 32 of 16.
pub const SIZES_WORDS: u32 = 7 * 32;
/// Side of the square tiles of the TMA kernels, in `u32` elements.
pub const TILE: u32 = 32;
/// `u32`s in one TMA tile.
pub const TILE_WORDS: u32 = TILE * TILE;
/// Bytes [`acp_expect_tx_wrong`] copies; it arms the barrier with twice as many.
pub const WRONG_BYTES: u32 = 256;
/// Slack added to dynamic shared memory so that the kernels can align its base to 128.
pub const DYN_ALIGN_SLACK: u32 = 128;

/// A 32 x 32 `u32` tile, row-major, 128-byte aligned (a TMA box).
type Tile = Align128<[[u32; TILE as usize]; TILE as usize]>;
/// Half of a [`Tile`]: 16 rows (the box each CTA of [`acp_tma_multicast`] loads).
type HalfTile = [[u32; TILE as usize]; TILE as usize / 2];
/// Four `u32`s, 16-byte aligned (one 16-byte `cp.async` / one vector access).
type Vec4 = Align16<[u32; 4]>;

/// A `CUtensorMap` passed by value as a kernel parameter: 128 opaque bytes as
/// `cuTensorMapEncodeTiled` fills them.
///
/// Aligned to 16, not 64 like `CUtensorMap`: rustc's `ptx-kernel` ABI rejects by-value
/// parameters aligned above 16 (an internal compiler error, "Align is given as power of
/// 2 no larger than 16 bytes", in `callconv/nvptx64.rs`), so the PTX declares
/// `.param .align 16 .b8 ..[128]`. Kernels take it as their first parameter, at offset
/// 0 of the parameter buffer.
#[repr(C, align(16))]
#[derive(Clone, Copy, Debug)]
pub struct TensorMapParam {
    /// The map's bytes.
    pub opaque: [u64; 16],
}

cudadrv::shared_array! {
    /// [`acp_cp_async`]'s block tile: 512 `u32`s.
    fn acp_cp_tile() -> [Align16<[u32; 4]>; 128];
}

cudadrv::shared_array! {
    /// [`acp_cp_async_sizes`]'s buffer: 224 `u32`s.
    fn acp_sizes_buf() -> [Align16<[u32; 4]>; 56];
}

cudadrv::shared_array! {
    /// One mbarrier for the single-barrier kernels.
    fn acp_bar() -> [u64; 1];
}

cudadrv::shared_array! {
    /// TMA input tile.
    fn acp_tile_in() -> [Tile; 1];
}

cudadrv::shared_array! {
    /// TMA output tile (transposed).
    fn acp_tile_out() -> [Tile; 1];
}

cudadrv::shared_array! {
    /// [`acp_expect_tx_wrong`]'s buffer.
    fn acp_wrong_buf() -> [Align16<[u32; 64]>; 1];
}

cudadrv::dynamic_shared! {
    /// Dynamic shared memory of the bulk kernels.
    fn acp_dyn();
}

/// `x * 3 + 1` (wrapping), the transform of the bulk kernels.
#[inline(always)]
#[must_use]
pub const fn transform(x: u32) -> u32 {
    x.wrapping_mul(3).wrapping_add(1)
}

/// [`transform`] on each lane of a vector.
#[inline(always)]
fn transform4(v: Vec4) -> Vec4 {
    let [a, b, c, d] = v.0;
    Align16([transform(a), transform(b), transform(c), transform(d)])
}

/// The single mbarrier in `acp_bar`.
///
/// # Safety
/// As [`MBarrier::from_shared_addr`]: initialized before use (and visible), used by its
/// protocol.
#[inline(always)]
unsafe fn single_bar() -> MBarrier {
    // SAFETY: `acp_bar` is an 8-byte aligned `u64` in shared memory used only as this
    // mbarrier; the caller upholds the rest.
    unsafe { MBarrier::from_shared_addr(acp_bar().base_addr()) }
}

/// Initializes the single barrier with `count` by thread `tid == 0` and makes the
/// initialization visible to the CTA, the async proxy included.
///
/// # Safety
/// Every thread of the CTA calls it at the same point; the barrier is not in use.
#[inline(always)]
unsafe fn init_single_bar(tid: u32, count: u32) -> MBarrier {
    // SAFETY: forwarded to the caller.
    let bar = unsafe { single_bar() };
    if tid == 0 {
        // SAFETY: one thread, before any use; `count` in range.
        unsafe { bar.init(count) };
        fence_mbarrier_init();
        fence_proxy_async(Some(ProxySpace::SharedCta));
    }
    // SAFETY: every thread of the CTA reaches it (caller).
    unsafe { sync_threads() };
    bar
}

/// Linear thread index and thread count of a block of any shape.
#[inline(always)]
fn flat_thread() -> (u32, u32) {
    let t = thread_idx();
    let d = block_dim();
    (t.x + d.x * (t.y + d.y * t.z), d.x * d.y * d.z)
}

/// The 128-byte aligned `.shared::cta` address at or above the dynamic shared base.
#[inline(always)]
fn dyn_base_128(dyn_smem: DynamicShared) -> u32 {
    (dyn_smem.base_addr() + (DYN_ALIGN_SLACK - 1)) & !(DYN_ALIGN_SLACK - 1)
}

/// `cp.async` of 16 bytes per thread (`.cg`, zero fill), `commit_group`, `wait_group 0`,
/// then a CTA barrier, and `dst[i] = src[i] + 1`.
///
/// Launch: block exactly (128, 1, 1) (other shapes return at once, writing nothing),
/// grid `ceil(n / 512)` in x (more blocks write nothing), no dynamic shared memory
/// (2 KiB static).
///
/// Block `b` copies `src[512 b .. 512 b + 512]` into shared memory, thread `t` the 16
/// bytes of elements `512 b + 4 t .. + 4` with `cp.async.cg ... 16, src_size` where
/// `src_size` is the bytes of those elements below `n` (0..=16; the rest is
/// zero-filled, and nothing is read for `src_size == 0`). After the wait and
/// `__syncthreads`, thread `t` writes elements `t, t + 128, t + 256, t + 384` of the
/// block (copied by other threads).
///
/// Output: `dst[i] == src[i].wrapping_add(1)` for every `i < n`; nothing else written.
///
/// # Safety
/// `src` readable for `n` `u32`s and 16-byte aligned; `dst` writable for `n` `u32`s.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn acp_cp_async(src: *const u32, dst: *mut u32, n: u32) {
    if block_dim() != Dim3::x(CP_ASYNC_BLOCK) {
        return;
    }
    let t = thread_idx().x;
    let base = u64::from(block_idx().x) * u64::from(CP_ASYNC_BLOCK_WORDS);
    let n = u64::from(n);
    let first = base + 4 * u64::from(t);
    let words = if first < n {
        let left = n - first;
        if left < 4 { left as u32 } else { 4 }
    } else {
        0
    };
    let tile = acp_cp_tile().as_mut_ptr();
    // SAFETY: `src + first` is readable for `words` elements (`first + words <= n`) and
    // 16-byte aligned (`src` is, `first` is a multiple of 4); with `words == 0` the
    // aligned `src` itself is passed and nothing is read. `tile + t` is the thread's
    // own 16-byte slot (t < 128) in shared memory.
    unsafe {
        let from = if words > 0 {
            src.add(first as usize)
        } else {
            src
        };
        cp_async_cg_zfill(tile.add(t as usize), from.cast::<Vec4>(), words * 4);
    }
    cp_async_commit();
    cp_async_wait::<0>();
    // SAFETY: every thread of the block reaches it (the shape check is uniform).
    unsafe { sync_threads() };
    let words_ptr = tile.cast::<u32>();
    for k in 0..4u64 {
        let w = u64::from(t) + k * u64::from(CP_ASYNC_BLOCK);
        let i = base + w;
        if i < n {
            // SAFETY: `w < 512`, inside the tile, whose copies completed (wait_group 0 in
            // every thread, then the CTA barrier); `i < n`, inside `dst`.
            unsafe {
                let v = words_ptr.add(w as usize).read();
                dst.add(i as usize).write(v.wrapping_add(1));
            }
        }
    }
}

/// `u32`s one block of [`acp_prefetch_l2`] covers (32 KiB).
pub const PREFETCH_BLOCK_WORDS: u32 = 8192;

/// `cp.async.bulk.prefetch.L2`: thread 0 of block `b` asks L2 for the block's
/// [`PREFETCH_BLOCK_WORDS`] words of `src` (the whole 16-byte pieces of them below
/// `n`), block 0 also for the largest request, [`BulkBytes::MAX`] bytes from `src`
/// when `src` holds that many; then, after `__syncthreads`, the block's threads read its
/// words (a block-stride loop) and write `dst[i] = src[i] + 1`. A
/// hint changes no value: the test checks that the requests run (no fault, the
/// instruction assembles) and that the words read afterwards are the buffer's.
///
/// Launch: any grid and 1-D block.
///
/// # Safety
/// `src` readable and `dst` writable for `n` `u32`s, `src` 16-byte aligned.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn acp_prefetch_l2(src: *const u32, dst: *mut u32, n: u32) {
    let n = u64::from(n);
    let base = u64::from(block_idx().x) * u64::from(PREFETCH_BLOCK_WORDS);
    let end = n.min(base + u64::from(PREFETCH_BLOCK_WORDS));
    if thread_idx().x == 0 && base < end {
        // Whole 16-byte pieces (4 words) of the block's part.
        let bytes = ((end - base) / 4 * 16) as u32;
        if let Some(b) = BulkBytes::new(bytes) {
            // SAFETY: `src + base` is 16-byte aligned (`src` is, `base` is a multiple of
            // 4 words) and `bytes` of it lie below `n` words, inside `src`.
            unsafe { bulk_prefetch_l2(src.add(base as usize), b) }
        }
        if block_idx().x == 0 && n * 4 >= u64::from(BulkBytes::MAX) {
            // SAFETY: `src` is 16-byte aligned and holds at least `BulkBytes::MAX` bytes.
            unsafe {
                bulk_prefetch_l2(
                    src,
                    BulkBytes::new(BulkBytes::MAX).unwrap_or(BulkBytes::of::<Vec4>()),
                )
            }
        }
    }
    // SAFETY: every thread of the block reaches it (no thread returned).
    unsafe { sync_threads() };
    let mut i = base + u64::from(thread_idx().x);
    while i < end {
        // SAFETY: `i < n`: inside `src` and `dst`.
        unsafe {
            dst.add(i as usize)
                .write(src.add(i as usize).read().wrapping_add(1))
        };
        i += u64::from(block_dim().x);
    }
}

/// `cp.async.ca` of 4, 8 and 16 bytes, tracked by an mbarrier instead of groups with
/// `cp.async.mbarrier.arrive.noinc`: the 4- and 8-byte copies complete phase 0, the
/// 16-byte ones phase 1.
///
/// Launch: grid 1, block exactly (32, 1, 1) (other shapes return at once), no dynamic
/// shared memory.
///
/// The barrier expects 32 arrivals per phase: one `.noinc` async arrival per thread,
/// made when that thread's earlier copies have landed. Phase 0: thread `t` copies word
/// `t` (4 bytes) and words `32 + 2t, 33 + 2t` (8 bytes); phase 1: words `96 + 4t ..
/// 100 + 4t` (16 bytes). Every thread waits for each phase by parity, then writes words
/// `t + 32 j` (`j` in 0..7), copied by other threads.
///
/// Output: `dst[i] == src[i]` for `i` in `0..224`.
///
/// # Safety
/// `src` readable and `dst` writable for 224 `u32`s, both 16-byte aligned.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn acp_cp_async_sizes(src: *const u32, dst: *mut u32) {
    if block_dim() != Dim3::x(32) {
        return;
    }
    let t = thread_idx().x as usize;
    let buf = acp_sizes_buf().as_mut_ptr().cast::<u32>();
    // SAFETY: every thread of the block calls it; the barrier is fresh. Count 32: one
    // `.noinc` async arrival per thread and phase.
    let bar = unsafe { init_single_bar(t as u32, 32) };
    let mut cursor = bar.phase_cursor();
    // SAFETY: all offsets are below 96, inside `src` and the shared buffer; the 8-byte
    // copies start at word `32 + 2t` (8-byte aligned); no thread touches these words
    // until phase 0 completes.
    unsafe {
        cp_async(buf.add(t), src.add(t));
        cp_async(
            buf.add(32 + 2 * t).cast::<[u32; 2]>(),
            src.add(32 + 2 * t).cast::<[u32; 2]>(),
        );
    }
    // SAFETY: the barrier expects 32 arrivals per phase, this `.noinc` one per thread.
    unsafe { bar.cp_async_arrive_noinc() };
    cursor.wait();
    // SAFETY: words `96 + 4t .. 100 + 4t` (16-byte aligned) are below 224; no thread
    // touches them until phase 1 completes.
    unsafe {
        cp_async(
            buf.add(96 + 4 * t).cast::<[u32; 4]>(),
            src.add(96 + 4 * t).cast::<[u32; 4]>(),
        );
    }
    // SAFETY: the barrier expects 32 arrivals per phase, this `.noinc` one per thread.
    unsafe { bar.cp_async_arrive_noinc() };
    cursor.wait();
    for j in 0..7 {
        let w = t + 32 * j;
        // SAFETY: `w < 224`; both phases completed, so every copy is visible.
        unsafe { dst.add(w).write(buf.add(w).read()) };
    }
    // SAFETY: every thread reaches it.
    unsafe { sync_threads() };
    if t == 0 {
        // SAFETY: every thread is past its last use (barrier above).
        unsafe { bar.inval() };
    }
}

/// `cp.async.mbarrier.arrive` without `.noinc`, as the PTX manual shows it: each thread
/// issues a 16-byte `cp.async.ca`, then `cp.async.mbarrier.arrive` (which raises the
/// phase's pending count by one now and lowers it when the thread's copies land), then
/// an ordinary `mbarrier.arrive` and a wait on its token. The barrier expects 32
/// arrivals: the ordinary ones; the phase cannot complete before every copy landed.
///
/// Launch: grid 1, block exactly (32, 1, 1) (other shapes return at once), no dynamic
/// shared memory. Thread `t` copies words `4t .. 4t + 4` and writes words `t + 32 j`
/// (`j` in 0..4), copied by other threads.
///
/// Output: `dst[i] == src[i]` for `i` in `0..128`.
///
/// # Safety
/// `src` readable and `dst` writable for 128 `u32`s, both 16-byte aligned.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn acp_cp_async_arrive_inc(src: *const u32, dst: *mut u32) {
    if block_dim() != Dim3::x(32) {
        return;
    }
    let t = thread_idx().x as usize;
    let buf = acp_sizes_buf().as_mut_ptr().cast::<u32>();
    // SAFETY: every thread of the block calls it; the barrier is fresh. Count 32: one
    // ordinary arrival per thread.
    let bar = unsafe { init_single_bar(t as u32, 32) };
    // SAFETY: words `4t .. 4t + 4` (16-byte aligned) are below 128, inside `src` and the
    // 224-word shared buffer; no thread touches them until the phase completes.
    unsafe {
        cp_async(
            buf.add(4 * t).cast::<[u32; 4]>(),
            src.add(4 * t).cast::<[u32; 4]>(),
        );
    }
    bar.cp_async_arrive();
    // SAFETY: the barrier expects 32 arrivals per phase, one per thread.
    unsafe { bar.arrive() }.wait();
    for j in 0..4 {
        let w = t + 32 * j;
        // SAFETY: `w < 128`; the phase completed after every copy landed.
        unsafe { dst.add(w).write(buf.add(w).read()) };
    }
    // SAFETY: every thread reaches it.
    unsafe { sync_threads() };
    if t == 0 {
        // SAFETY: every thread is past its last use (barrier above).
        unsafe { bar.inval() };
    }
}

/// Dynamic shared memory bytes [`acp_bulk_pipeline`] needs:
/// `stages * tile_bytes + 16 * stages + 128` (buffers, `2 * stages` mbarriers, slack to
/// align the base to 128).
#[must_use]
pub const fn pipeline_smem_bytes(tile_bytes: u32, stages: u32) -> u32 {
    stages * tile_bytes + 16 * stages + DYN_ALIGN_SLACK
}

/// [`acp_bulk_pipeline`] flag: consumers transform the stage in place and each warp
/// writes its slice back with one bulk store (`cp.async.bulk.global.shared::cta`)
/// instead of 16-byte stores from registers.
pub const PIPE_BULK_STORE: u32 = 1;
/// [`acp_bulk_pipeline`] flag: the bulk loads carry an `L2::evict_first` policy.
pub const PIPE_LOAD_EVICT_FIRST: u32 = 2;
/// [`acp_bulk_pipeline`] flag: the stores carry an `L2::evict_first` policy.
pub const PIPE_STORE_EVICT_FIRST: u32 = 4;
/// [`acp_bulk_pipeline`] flag: block `b` handles one contiguous run of
/// `ceil(n_tiles / gridDim.x)` tiles instead of every `gridDim.x`-th tile.
pub const PIPE_CONTIGUOUS: u32 = 8;

/// Persistent producer/consumer pipeline of bulk copies through a ring of `stages`
/// shared buffers: `dst[i] = src[i] * 3 + 1`.
///
/// Launch: any grid in x (`gridDim.y == gridDim.z == 1`); block `(32 * (1 + C), 1, 1)`
/// with `C >= 1` consumer warps; dynamic shared memory at least
/// [`pipeline_smem_bytes`]`(tile_bytes, stages)` = `stages * tile_bytes + 16 * stages +
/// 128` (above 48 KiB it needs `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`).
/// `tile_bytes` a multiple of 16 in `16..=65536` (of `16 * C` with
/// [`PIPE_BULK_STORE`]), `stages >= 1`, `flags` a combination of the `PIPE_*`
/// constants. A launch that breaks one of these returns at once, writing nothing.
///
/// Layout: the dynamic base rounded up to 128, then `stages` buffers of `tile_bytes`,
/// then `full[0..stages]`, `empty[0..stages]` (`u64` mbarriers). Block `b` handles tiles
/// `b, b + gridDim.x, b + 2 gridDim.x, ...` below `n_tiles` (with [`PIPE_CONTIGUOUS`]:
/// tiles `b * r .. min((b + 1) * r, n_tiles)`, `r = ceil(n_tiles / gridDim.x)`), the
/// `k`-th of its sequence in stage `k % stages`. Warp 0's elected lane waits for
/// `empty[s]` (skipped in the first round), issues `cp.async.bulk` of the tile's
/// `tile_bytes` and arms `full[s]` (count 1) with `arrive.expect_tx(tile_bytes)`. Consumer threads wait for
/// `full[s]` by parity, then:
/// - by default each transforms the 16-byte vectors `v = c, c + 32 C, ...` (`c` its
///   index among the consumer threads) into `dst` with vector stores;
/// - with [`PIPE_BULK_STORE`] consumer warp `w` owns the contiguous slice `w` of
///   `tile_bytes / C` bytes: its lanes transform it in place, fence it for the async
///   proxy and `__syncwarp`; lane 0 issues one bulk store of the slice, commits it and
///   waits until it has read the slice (`cp.async.bulk.wait_group.read 0`); then
///   `__syncwarp`.
///
/// Every consumer thread then arrives on `empty[s]` (count `32 C`): each thread's own
/// accesses to the stage are ordered before the producer's next copy into it by its
/// own arrival.
///
/// Output: `dst[i] == src[i].wrapping_mul(3).wrapping_add(1)` for `i` below
/// `n_tiles * tile_bytes / 4`.
///
/// # Safety
/// `src` readable and `dst` writable for `n_tiles * tile_bytes` bytes, both 16-byte
/// aligned.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn acp_bulk_pipeline(
    src: *const u32,
    dst: *mut u32,
    n_tiles: u64,
    tile_bytes: u32,
    stages: u32,
    flags: u32,
) {
    let dim = block_dim();
    let warps = dim.x / 32;
    let dyn_smem = acp_dyn();
    let need = u64::from(stages) * (u64::from(tile_bytes) + 16) + u64::from(DYN_ALIGN_SLACK);
    let Some(bytes) = BulkBytes::new(tile_bytes) else {
        return;
    };
    let bulk_store_mode = flags & PIPE_BULK_STORE != 0;
    if dim.y != 1
        || dim.z != 1
        || !dim.x.is_multiple_of(32)
        || warps < 2
        || tile_bytes > 65536
        || stages == 0
        || u64::from(dyn_smem.len()) < need
        || (bulk_store_mode && !tile_bytes.is_multiple_of(16 * (warps - 1)))
    {
        return;
    }
    let consumers = warps - 1;
    let tid = thread_idx().x;
    let bufs = dyn_base_128(dyn_smem);
    // SAFETY: `2 * stages` `u64`s at `bufs + stages * tile_bytes` (8-aligned: the base is
    // 128-aligned and `tile_bytes` a multiple of 16) lie inside the dynamic shared memory
    // (size checked above), used only as the ring's barriers; initialized below before
    // any use.
    let ring = unsafe { Ring::from_shared_addr(bufs + stages * tile_bytes, stages) };
    if tid == 0 {
        // SAFETY: one thread, before any use; counts in range (32 C < 2^20).
        unsafe { ring.init(1, 32 * consumers) };
        fence_mbarrier_init();
        fence_proxy_async(Some(ProxySpace::SharedCta));
    }
    // SAFETY: every thread reaches it (all checks above are uniform).
    unsafe { sync_threads() };

    let grid = u64::from(grid_dim().x);
    let b = u64::from(block_idx().x);
    let (first, end, step) = if flags & PIPE_CONTIGUOUS != 0 {
        let run = n_tiles.div_ceil(grid);
        (b * run, ((b + 1) * run).min(n_tiles), 1)
    } else {
        (b, n_tiles, grid)
    };
    let policy = L2Policy::evict_first();
    if tid < 32 {
        let hint = flags & PIPE_LOAD_EVICT_FIRST != 0;
        // SAFETY: all 32 lanes of warp 0 call it here.
        if unsafe { elect_one() } {
            let mut cur = ring.cursor();
            let mut tile = first;
            while tile < end {
                cur.wait_empty();
                let buf = from_shared_addr::<u8>(bufs + cur.stage() * tile_bytes);
                let mut load = BulkLoad::new(cur.full());
                // SAFETY: the stage buffer (16-aligned, `tile_bytes` long) is free (its
                // `empty` phase completed or it was never used) and nobody touches it
                // until `full` completes; `src + tile * tile_bytes` is readable for
                // `tile_bytes` and 16-aligned (kernel contract).
                unsafe {
                    let from = src
                        .cast::<u8>()
                        .add((tile * u64::from(tile_bytes)) as usize);
                    if hint {
                        load.copy_bytes_hint(buf, from, bytes, policy);
                    } else {
                        load.copy_bytes(buf, from, bytes);
                    }
                }
                // SAFETY: `full` expects one arrival per phase, this producer thread's;
                // the phase's tx is these copies' bytes.
                let _ = unsafe { load.arrive() };
                cur.advance();
                tile += step;
            }
        }
    } else {
        let store_hint = flags & PIPE_STORE_EVICT_FIRST != 0;
        let c = tid - 32;
        let lane = tid % 32;
        let mut cur = ring.cursor();
        let mut tile = first;
        while tile < end {
            cur.wait_full();
            let stage = bufs + cur.stage() * tile_bytes;
            let offset = (tile * u64::from(tile_bytes)) as usize;
            if bulk_store_mode {
                let slice = tile_bytes / consumers;
                let warp = c / 32;
                let buf = from_shared_addr::<Vec4>(stage + warp * slice);
                let mut v = lane;
                while v < slice / 16 {
                    // SAFETY: `v < slice / 16`: inside this warp's slice of the stage
                    // buffer, filled (`full` completed) and touched by no other warp.
                    unsafe {
                        let p = buf.add(v as usize);
                        p.write(transform4(p.read()));
                    }
                    v += 32;
                }
                fence_proxy_async(Some(ProxySpace::SharedCta));
                // SAFETY: all 32 lanes of this consumer warp run the same loop.
                unsafe { sync_warp(u32::MAX) };
                if lane == 0 {
                    // SAFETY: the slice holds the transformed data, fenced for the async
                    // proxy by every lane and ordered before this by `__syncwarp`; nobody
                    // writes it before the read wait below; `dst + offset + warp * slice`
                    // is writable for `slice` bytes, 16-aligned (contract; `slice` is a
                    // multiple of 16, checked above).
                    unsafe {
                        let to = dst.cast::<u8>().add(offset + (warp * slice) as usize);
                        let n = BulkBytes::new(slice).unwrap_unchecked();
                        if store_hint {
                            bulk_store_hint(to, buf.cast::<u8>(), n, policy);
                        } else {
                            bulk_store(to, buf.cast::<u8>(), n);
                        }
                    }
                    bulk_commit();
                    bulk_wait_read::<0>();
                }
                // SAFETY: as above.
                unsafe { sync_warp(u32::MAX) };
            } else {
                let buf = from_shared_addr::<Vec4>(stage);
                // SAFETY: `dst + offset` is writable for `tile_bytes` (contract).
                let out = unsafe { dst.cast::<u8>().add(offset).cast::<Vec4>() };
                let mut v = c;
                while v < tile_bytes / 16 {
                    // SAFETY: `v < tile_bytes / 16`: inside the stage buffer (filled:
                    // `full` completed) and the output tile; both 16-byte aligned.
                    unsafe {
                        let x = transform4(buf.add(v as usize).read());
                        if store_hint {
                            store_global_hint(out.add(v as usize), x, policy);
                        } else {
                            out.add(v as usize).write(x);
                        }
                    }
                    v += 32 * consumers;
                }
            }
            // SAFETY: `empty` expects `32 * consumers` arrivals per phase, one from each
            // consumer thread, once per stage round.
            let _ = unsafe { cur.empty().arrive() };
            cur.advance();
            tile += step;
        }
    }

    // SAFETY: every thread reaches it.
    unsafe { sync_threads() };
    if tid == 0 {
        // SAFETY: every thread is past its last use, and every bulk copy completed (the
        // consumers waited for every `full` phase).
        unsafe { ring.inval() };
    }
    if bulk_store_mode && tid >= 32 && tid % 32 == 0 {
        // The stores' global writes finish before the grid does anyway; waiting keeps
        // the bulk groups of this thread balanced.
        bulk_wait::<0>();
    }
}

/// Dynamic shared memory bytes [`acp_bulk_store`] needs: `tile_bytes + 128`.
#[must_use]
pub const fn store_smem_bytes(tile_bytes: u32) -> u32 {
    tile_bytes + DYN_ALIGN_SLACK
}

/// Bulk load, transform in shared memory, bulk store: `dst[i] = src[i] * 3 + 1`, through
/// one shared buffer.
///
/// Launch: any grid in x (`gridDim.y == gridDim.z == 1`); block `(T, 1, 1)` with any
/// `T >= 1` (128 is a good choice); dynamic shared memory at least
/// [`store_smem_bytes`]`(tile_bytes)` = `tile_bytes + 128`; `tile_bytes` a multiple of
/// 16 in `16..=65536`. A launch that breaks one of these returns at once.
///
/// Block `b` handles tiles `b, b + gridDim.x, ...` below `n_tiles`. Per tile: thread 0
/// waits `cp.async.bulk.wait_group.read 0` (the previous store has read the buffer),
/// issues `cp.async.bulk` global -> shared and `arrive.expect_tx(tile_bytes)`; all
/// threads wait by parity, transform the buffer in place (16-byte vectors), run
/// `fence.proxy.async.shared::cta` and `__syncthreads`; thread 0 issues
/// `cp.async.bulk.global.shared::cta.bulk_group` and `commit_group`. At the end thread
/// 0 waits `cp.async.bulk.wait_group 0`.
///
/// Output: `dst[i] == src[i].wrapping_mul(3).wrapping_add(1)` for `i` below
/// `n_tiles * tile_bytes / 4`.
///
/// # Safety
/// `src` readable and `dst` writable for `n_tiles * tile_bytes` bytes, both 16-byte
/// aligned.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn acp_bulk_store(
    src: *const u32,
    dst: *mut u32,
    n_tiles: u64,
    tile_bytes: u32,
) {
    let dim = block_dim();
    let dyn_smem = acp_dyn();
    let Some(bytes) = BulkBytes::new(tile_bytes) else {
        return;
    };
    if dim.y != 1
        || dim.z != 1
        || tile_bytes > 65536
        || u64::from(dyn_smem.len()) < u64::from(tile_bytes) + u64::from(DYN_ALIGN_SLACK)
    {
        return;
    }
    let tid = thread_idx().x;
    let nthreads = dim.x;
    let buf = from_shared_addr::<Vec4>(dyn_base_128(dyn_smem));
    // SAFETY: every thread calls it here; the barrier is fresh. Count 1: thread 0's
    // `arrive.expect_tx`.
    let bar = unsafe { init_single_bar(tid, 1) };
    let mut full = bar.phase_cursor();
    let vecs = tile_bytes / 16;
    let step = u64::from(grid_dim().x);
    let mut tile = u64::from(block_idx().x);
    while tile < n_tiles {
        let offset = (tile * u64::from(tile_bytes)) as usize;
        if tid == 0 {
            // The previous tile's store has finished reading the buffer.
            bulk_wait_read::<0>();
            let mut load = BulkLoad::new(bar);
            // SAFETY: the buffer (128-aligned, `tile_bytes` long, inside the dynamic
            // shared memory) is not in use: the previous store read it (wait above) and
            // every thread is past its last access (the barrier before that store);
            // `src + offset` is readable for `tile_bytes` and 16-aligned (contract).
            unsafe { load.copy_bytes(buf.cast::<u8>(), src.cast::<u8>().add(offset), bytes) };
            // SAFETY: the barrier expects one arrival per phase, this thread's; the
            // phase's tx is the copy's bytes.
            let _ = unsafe { load.arrive() };
        }
        full.wait();
        let mut v = tid;
        while v < vecs {
            // SAFETY: `v < tile_bytes / 16`, inside the buffer, whose load completed.
            unsafe {
                let p = buf.add(v as usize);
                p.write(transform4(p.read()));
            }
            v += nthreads;
        }
        fence_proxy_async(Some(ProxySpace::SharedCta));
        // SAFETY: every thread reaches it.
        unsafe { sync_threads() };
        if tid == 0 {
            // SAFETY: the buffer holds the transformed tile, fenced for the async proxy
            // and ordered before this by the barrier; nobody writes it before the
            // `wait_group.read` of the next round; `dst + offset` is writable for
            // `tile_bytes` and 16-aligned (contract).
            unsafe { bulk_store(dst.cast::<u8>().add(offset), buf.cast::<u8>(), bytes) };
            bulk_commit();
        }
        tile += step;
    }
    if tid == 0 {
        bulk_wait::<0>();
    }
    // SAFETY: every thread reaches it.
    unsafe { sync_threads() };
    if tid == 0 {
        // SAFETY: every thread is past its last use; every load completed.
        unsafe { bar.inval() };
    }
}

/// 2-D transpose through TMA: each block loads the 32 x 32 tile at `(32 bx, 32 by)`
/// (column, row) of the input with `cp.async.bulk.tensor.2d`, transposes it in shared
/// memory and stores it at `(32 by, 32 bx)` of the output with the tensor store.
///
/// Maps: `tmap_in` describes the input, `H` rows by `W` columns of `u32`
/// (`CU_TENSOR_MAP_DATA_TYPE_UINT32`, dims `{W, H}`), box `{32, 32}`, element strides
/// `{1, 1}`, no interleave, no swizzle, OOB fill none (zeros); `tmap_out` the output, `W`
/// rows by `H` columns (dims `{H, W}`), box `{32, 32}`. A map's row pitch
/// (`globalStrides[0]`) must be a multiple of 16 bytes, so an input with `W` not a
/// multiple of 4 (an output with `H` not a multiple of 4) is stored with a padded pitch.
/// `W` and `H` need not be multiples of 32: out-of-bounds elements of a load read as zero
/// and a store skips them.
///
/// Launch: grid `(ceil(W / 32), ceil(H / 32), 1)`, any block shape (256 threads, e.g.
/// `(32, 8, 1)`, is a good choice), no dynamic shared memory (8 KiB static). Thread 0
/// prefetches both maps (`prefetch.tensormap`).
///
/// Output: `out[c][r] == in[r][c]` for every `r < H`, `c < W` (the output row stride is
/// that of `tmap_out`); nothing else written.
///
/// # Safety
/// `tmap_in` and `tmap_out` point to valid `CUtensorMap`s in device global memory
/// (64-byte aligned) as described, whose tensors are readable / writable.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn acp_tma_2d_transpose(tmap_in: *const u8, tmap_out: *const u8) {
    let (tid, nthreads) = flat_thread();
    // SAFETY: valid maps in global memory (kernel contract).
    let (map_in, map_out) = unsafe {
        (
            TensorMapRef::from_ptr(tmap_in),
            TensorMapRef::from_ptr(tmap_out),
        )
    };
    if tid == 0 {
        map_in.prefetch();
        map_out.prefetch();
    }
    // SAFETY: every thread calls it here; the barrier is fresh; count 1.
    let bar = unsafe { init_single_bar(tid, 1) };
    let b = block_idx();
    let x0 = (b.x * TILE) as i32;
    let y0 = (b.y * TILE) as i32;
    let tile_in = acp_tile_in().as_mut_ptr();
    let tile_out = acp_tile_out().as_mut_ptr();
    if tid == 0 {
        let mut load = BulkLoad::new(bar);
        // SAFETY: `tile_in` is a 128-aligned 4 KiB shared tile, the size of the map's
        // box; nobody touches it until the barrier completes.
        unsafe { load.tile(tile_in, map_in, [x0, y0]) };
        // SAFETY: the barrier expects one arrival per phase, this thread's; the phase's
        // tx is the tile's bytes.
        let _ = unsafe { load.arrive() };
    }
    bar.phase_cursor().wait();
    let src = tile_in.cast::<u32>();
    let dst = tile_out.cast::<u32>();
    let mut e = tid;
    while e < TILE_WORDS {
        let (r, c) = (e / TILE, e % TILE);
        // SAFETY: `r, c < 32`: inside both tiles; the load completed.
        unsafe {
            dst.add(e as usize)
                .write(src.add((c * TILE + r) as usize).read())
        };
        e += nthreads;
    }
    fence_proxy_async(Some(ProxySpace::SharedCta));
    // SAFETY: every thread reaches it.
    unsafe { sync_threads() };
    if tid == 0 {
        // SAFETY: `tile_out` (128-aligned, the box's size) holds the transposed tile,
        // fenced for the async proxy and ordered by the barrier; it is not written again,
        // and this thread waits for the store before exiting.
        unsafe { map_out.store_tile([y0, x0], tile_out) };
        bulk_commit();
        bulk_wait::<0>();
        // SAFETY: the only wait on the barrier is done by every thread (before the
        // barrier above); its load completed.
        unsafe { bar.inval() };
    }
}

/// Sentinel [`acp_tma_2d_load_tile`] writes into the shared tile before the load, so an
/// element the load did not write would show.
pub const SENTINEL: u32 = 0xDEAD_BEEF;

/// The body of the single-tile loads.
///
/// # Safety
/// As [`acp_tma_2d_load_tile`], `map` wrapping the tensor map.
#[inline(always)]
unsafe fn load_tile(map: TensorMapRef, x: i32, y: i32, out: *mut u32) {
    let (tid, nthreads) = flat_thread();
    let tile = acp_tile_in().as_mut_ptr();
    let words = tile.cast::<u32>();
    let mut e = tid;
    while e < TILE_WORDS {
        // SAFETY: `e < 1024`, inside the tile; no copy is in flight.
        unsafe { words.add(e as usize).write(SENTINEL) };
        e += nthreads;
    }
    fence_proxy_async(Some(ProxySpace::SharedCta));
    // SAFETY: every thread calls it here (caller); the barrier is fresh.
    let bar = unsafe { init_single_bar(tid, 1) };
    if tid == 0 {
        map.prefetch();
        map.prefetch_tile_l2([x, y]);
        let mut load = BulkLoad::new(bar);
        // SAFETY: the tile is 128-aligned, the box's size; the sentinel stores were
        // fenced for the async proxy and ordered before this by the barrier in
        // `init_single_bar`; nobody touches the tile until the barrier completes.
        unsafe { load.tile(tile, map, [x, y]) };
        // SAFETY: the barrier expects one arrival per phase, this thread's; the phase's
        // tx is the tile's bytes.
        let _ = unsafe { load.arrive() };
    }
    bar.phase_cursor().wait();
    let mut e = tid;
    while e < TILE_WORDS {
        // SAFETY: `e < 1024`: inside the tile (loaded) and `out` (contract).
        unsafe { out.add(e as usize).write(words.add(e as usize).read()) };
        e += nthreads;
    }
    // SAFETY: every thread reaches it.
    unsafe { sync_threads() };
    if tid == 0 {
        // SAFETY: every thread is past its wait; the load completed.
        unsafe { bar.inval() };
    }
}

/// Pixels of one [`acp_tma_im2col_1d`] column.
pub const IM2COL_PIXELS: u32 = 16;
/// Channels per pixel of [`acp_tma_im2col_1d`].
pub const IM2COL_CHANNELS: u32 = 4;
/// The most kernel taps [`acp_tma_im2col_1d`] loads.
pub const IM2COL_MAX_TAPS: u32 = 8;

/// One im2col column: [`IM2COL_PIXELS`] pixels of [`IM2COL_CHANNELS`] `u32`s.
type Im2colColumn = Align128<[[u32; IM2COL_CHANNELS as usize]; IM2COL_PIXELS as usize]>;

cudadrv::shared_array! {
    /// [`acp_tma_im2col_1d`]'s column buffer.
    fn acp_im2col_buf() -> [Im2colColumn; 1];
}

/// im2col through TMA for a 1-D convolution: `taps` loads of one column each from a
/// 3-D (NWC) im2col tensor map, the column of tap `k` written to `out[k * 64 ..]`.
///
/// Map: `u32` elements, dims `{C, W, N}` (C = [`IM2COL_CHANNELS`] is the whole channel
/// extent or a part of it), `channelsPerPixel` = [`IM2COL_CHANNELS`], `pixelsPerColumn`
/// = [`IM2COL_PIXELS`], any bounding box. Load `k` starts at pixel `(0, start_w,
/// start_n)` with im2col offset `k`; before it the column buffer is filled with
/// [`SENTINEL`], so pixels the load does not write show up.
///
/// Launch: grid 1, any block shape, no dynamic shared memory. `taps <= 8` (more writes
/// nothing).
///
/// Output: `out[k * 64 + p * 4 + c]` is channel `c` of pixel `p` of tap `k`'s column.
///
/// # Safety
/// `tmap` points to a valid im2col `CUtensorMap` in device global memory as described,
/// whose tensor is readable; `out` writable for `taps * 64` `u32`s.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn acp_tma_im2col_1d(
    tmap: *const u8,
    start_w: i32,
    start_n: i32,
    taps: u32,
    out: *mut u32,
) {
    if taps > IM2COL_MAX_TAPS {
        return;
    }
    let (tid, nthreads) = flat_thread();
    // SAFETY: a valid map in global memory (kernel contract).
    let map = unsafe { TensorMapRef::from_ptr(tmap) };
    let column = acp_im2col_buf().as_mut_ptr();
    let words = column.cast::<u32>();
    let n_words = IM2COL_PIXELS * IM2COL_CHANNELS;
    // SAFETY: every thread calls it here; the barrier is fresh. Count 1: thread 0's
    // `arrive.expect_tx` per load.
    let bar = unsafe { init_single_bar(tid, 1) };
    let mut cursor = bar.phase_cursor();
    for k in 0..taps {
        let mut e = tid;
        while e < n_words {
            // SAFETY: `e < 64`, inside the column; no copy is in flight (the previous
            // load completed and every thread is past the barrier below).
            unsafe { words.add(e as usize).write(SENTINEL) };
            e += nthreads;
        }
        fence_proxy_async(Some(ProxySpace::SharedCta));
        // SAFETY: every thread reaches it.
        unsafe { sync_threads() };
        if tid == 0 {
            let mut load = BulkLoad::new(bar);
            // SAFETY: the column is 128-aligned and exactly the load's bytes (16 pixels x
            // 4 `u32`s); the sentinel stores were fenced for the async proxy and ordered
            // before this by the barrier; nobody touches the column until the phase
            // completes.
            unsafe { load.im2col(column, map, ([0, start_w, start_n], [k as u16])) };
            // SAFETY: the barrier expects one arrival per phase, this thread's; the
            // phase's tx is the column's bytes.
            let _ = unsafe { load.arrive() };
        }
        cursor.wait();
        let mut e = tid;
        while e < n_words {
            // SAFETY: `e < 64`: inside the column (loaded) and `out` (`k < taps`).
            unsafe {
                out.add((k * n_words + e) as usize)
                    .write(words.add(e as usize).read())
            };
            e += nthreads;
        }
        // SAFETY: every thread reaches it: all reads of the column are done before the
        // next round's sentinel stores.
        unsafe { sync_threads() };
    }
    if tid == 0 {
        // SAFETY: every thread is past its last wait; every load completed.
        unsafe { bar.inval() };
    }
}

/// Loads ONE 32 x 32 tile at column `x`, row `y` (any coordinates, negative or out of
/// bounds included) with `cp.async.bulk.tensor.2d` and writes the shared tile verbatim.
///
/// Map: `u32` elements, 2-D (dims `{W, H}`), box `{32, 32}`, no interleave, no swizzle,
/// OOB fill none. Before the load, the shared tile is filled with [`SENTINEL`]; thread 0
/// also runs `prefetch.tensormap` and `cp.async.bulk.prefetch.tensor.2d.L2`.
///
/// Launch: grid 1 (every block would write the same `out`), any block shape, no dynamic
/// shared memory.
///
/// Output: `out[32 r + c]` (`r, c < 32`) == `in[y + r][x + c]` when `0 <= y + r < H` and
/// `0 <= x + c < W`, else 0.
///
/// # Safety
/// `tmap` points to a valid `CUtensorMap` in device global memory (64-byte aligned) as
/// described; `out` writable for 1024 `u32`s.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn acp_tma_2d_load_tile(
    tmap: *const u8,
    x: i32,
    y: i32,
    out: *mut u32,
) {
    // SAFETY: a valid map in global memory (kernel contract).
    let map = unsafe { TensorMapRef::from_ptr(tmap) };
    // SAFETY: forwarded (kernel contract); every thread calls it.
    unsafe { load_tile(map, x, y, out) }
}

/// [`acp_tma_2d_load_tile`] with the tensor map passed by value (a 128-byte,
/// 64-byte aligned kernel parameter, like CUDA's `const __grid_constant__ CUtensorMap`);
/// the tensor copy names the parameter's address.
///
/// The current compiler copies a by-value parameter whose address is taken into local
/// memory (`st.local` of the 128 bytes, then `cvta.local`), so the copy names a map in
/// local memory, which tensor copies do not accept: expect this kernel to fail (an
/// illegal-address or illegal-instruction error) unless a hardware test shows otherwise.
/// [`acp_tma_2d_load_tile_param_sym`] names the parameter itself.
///
/// Launch and output: as [`acp_tma_2d_load_tile`]. The map parameter is
/// [`TensorMapParam`] (128 bytes, `.align 16`, at offset 0).
///
/// # Safety
/// As [`acp_tma_2d_load_tile`], `tmap` holding the map's bytes.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn acp_tma_2d_load_tile_param(
    tmap: TensorMapParam,
    x: i32,
    y: i32,
    out: *mut u32,
) {
    // SAFETY: `tmap` holds a valid map for the whole kernel (whether the copy the
    // compiler makes is a valid map location is what this kernel tests).
    let map = unsafe { TensorMapRef::from_ptr(&raw const tmap) };
    // SAFETY: forwarded (kernel contract); every thread calls it.
    unsafe { load_tile(map, x, y, out) }
}

/// [`acp_tma_2d_load_tile`] with the tensor map passed by value, named in the kernel
/// parameter space: its address comes from
/// [`kernel_param_ptr!`](cudadrv::kernel_param_ptr) (`mov.b64` of the parameter's
/// symbol + `cvta.param.u64`), as CUDA does for a `const __grid_constant__ CUtensorMap`
/// parameter.
///
/// Launch and output: as [`acp_tma_2d_load_tile`]. The map parameter is
/// [`TensorMapParam`] (128 bytes, `.align 16`, at offset 0; whether the driver places
/// the parameter buffer 64-byte aligned, as a tensor map needs, is for a hardware test).
///
/// # Safety
/// As [`acp_tma_2d_load_tile`], `tmap` holding the map's bytes.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn acp_tma_2d_load_tile_param_sym(
    tmap: TensorMapParam,
    x: i32,
    y: i32,
    out: *mut u32,
) {
    let _ = tmap;
    let ptr = cudadrv::kernel_param_ptr!(acp_tma_2d_load_tile_param_sym, 0);
    // SAFETY: `ptr` is the generic address of the parameter `tmap`, which holds a valid
    // map for the whole kernel, in parameter space.
    let map = unsafe { TensorMapRef::from_ptr(ptr) };
    // SAFETY: forwarded (kernel contract); every thread calls it.
    unsafe { load_tile(map, x, y, out) }
}

/// TMA multicast in a cluster of 2: CTA rank `r` loads rows `16 r .. 16 r + 16` of the
/// 32 x 32 tile at (0, 0) with `cp.async.bulk.tensor.2d ... .multicast::cluster`
/// (ctaMask `0b11`), so both CTAs receive the whole tile; each CTA's barrier expects the
/// full 4096 bytes (2048 issued by each CTA).
///
/// Map: `u32` elements, 2-D, box `{32, 16}` (32 columns, 16 rows), no swizzle, OOB fill
/// none.
///
/// Launch: grid `(2, 1, 1)` with cluster dimension `(2, 1, 1)`
/// (`CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION`), any block shape, no dynamic shared memory.
/// A cluster of another size returns at once, writing nothing.
///
/// Output: `out[1024 b + 32 r + c] == in[r][c]` for block `b` (= cluster rank) in 0..2,
/// `r, c < 32` (zero where out of bounds).
///
/// # Safety
/// `tmap` points to a valid `CUtensorMap` in device global memory as described; `out`
/// writable for `1024 * gridDim.x` `u32`s.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn acp_tma_multicast(tmap: *const u8, out: *mut u32) {
    if cluster_cta_count() != 2 {
        return;
    }
    let (tid, nthreads) = flat_thread();
    let rank = cluster_cta_rank();
    // SAFETY: a valid map in global memory (kernel contract).
    let map = unsafe { TensorMapRef::from_ptr(tmap) };
    // SAFETY: fresh barrier, used only as this mbarrier.
    let bar = unsafe { single_bar() };
    if tid == 0 {
        // SAFETY: one thread, before any use; count 1 (this CTA's expect_tx arrival).
        unsafe { bar.init(1) };
        fence_mbarrier_init();
    }
    // Both CTAs' barriers are initialized and visible cluster-wide before any copy.
    // SAFETY: every thread of both CTAs reaches it (the size check is cluster-uniform).
    unsafe { cluster_sync() };
    let tile = acp_tile_in().as_mut_ptr();
    if tid == 0 {
        // SAFETY: offset `2048 r` of the 128-aligned 4 KiB tile: 128-aligned, 2 KiB.
        let half = unsafe {
            tile.cast::<u8>()
                .add(rank as usize * 2048)
                .cast::<HalfTile>()
        };
        let mut load = BulkLoad::new(bar);
        // SAFETY: both CTAs issue one 2 KiB multicast to `0b11`, each to its own half of
        // the tile in both CTAs; both barriers are live and visible (cluster barrier
        // above); neither CTA exits before both copies completed (cluster barrier
        // below, after each CTA's wait).
        unsafe { load.tile_multicast(half, map, [0, (rank * 16) as i32], 0b11) };
        // SAFETY: each CTA's barrier expects one arrival, its thread 0's; its tx is the
        // bytes both halves land in it.
        let _ = unsafe { load.arrive() };
    }
    bar.phase_cursor().wait_acquire(Scope::Cluster);
    let words = tile.cast::<u32>();
    // SAFETY: `1024 * gridDim.x` words writable (contract).
    let dst = unsafe { out.add(block_idx().x as usize * TILE_WORDS as usize) };
    let mut e = tid;
    while e < TILE_WORDS {
        // SAFETY: `e < 1024`: inside the tile (both halves landed) and `dst`.
        unsafe { dst.add(e as usize).write(words.add(e as usize).read()) };
        e += nthreads;
    }
    // SAFETY: every thread of both CTAs reaches it.
    unsafe { cluster_sync() };
    if tid == 0 {
        // SAFETY: every thread of this CTA is past its wait; both copies completed.
        unsafe { bar.inval() };
    }
}

/// An mbarrier armed with twice the bytes actually copied: the phase cannot complete.
/// Thread 0 copies [`WRONG_BYTES`] (256) with `cp.async.bulk`, arms
/// `arrive.expect_tx(512)`, and polls `try_wait.parity` until `%globaltimer` has
/// advanced `timeout_ns`. On timeout it completes the missing 256 bytes itself
/// (`complete_tx`) and waits for the phase (which also waits for the real copy), so the
/// kernel always returns.
///
/// Launch: grid 1, any block (only thread 0 works), no dynamic shared memory.
///
/// Output: `status[0] == 1` if the wait timed out (expected), 0 if the phase completed;
/// `dst[0..64] == src[0..64]` in both cases.
///
/// # Safety
/// `src` readable and `dst` writable for 64 `u32`s, 16-byte aligned; `status` writable
/// for one `u32`.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn acp_expect_tx_wrong(
    src: *const u32,
    dst: *mut u32,
    timeout_ns: u64,
    status: *mut u32,
) {
    if flat_thread().0 != 0 {
        return;
    }
    // SAFETY: fresh barrier, used only by this thread as an mbarrier.
    let bar = unsafe { single_bar() };
    // SAFETY: one thread, before any use; count 1.
    unsafe { bar.init(1) };
    fence_mbarrier_init();
    fence_proxy_async(Some(ProxySpace::SharedCta));
    let buf = acp_wrong_buf().as_mut_ptr();
    const COPIED: BulkBytes = BulkBytes::of::<Align16<[u32; 64]>>();
    // SAFETY: `buf` is a 16-aligned 256-byte shared buffer, `src` 256 readable aligned
    // bytes; the barrier's phase expects these bytes (and 256 more, completed below on
    // timeout) and nothing touches `buf` before it completes.
    unsafe { bulk_load(buf, src.cast(), COPIED, bar) };
    // SAFETY: the barrier expects one arrival, this (only) thread's; the tx of 512 is
    // half completed by the copy and half below.
    let _ = unsafe { bar.arrive_expect_tx(Scope::Cta, 2 * COPIED.get()) };
    let mut cursor = bar.phase_cursor();
    let start = globaltimer();
    let mut timed_out = false;
    while !cursor.try_wait() {
        if globaltimer().wrapping_sub(start) >= timeout_ns {
            timed_out = true;
            break;
        }
    }
    if timed_out {
        // SAFETY: the phase still expects these 256 of its 512 tx units.
        unsafe { bar.complete_tx(COPIED.get()) };
        cursor.wait();
    }
    // SAFETY: `status` writable for one word (contract).
    unsafe { status.write(u32::from(timed_out)) };
    let words = buf.cast::<u32>();
    for i in 0..64 {
        // SAFETY: `i < 64`: inside `buf` (the phase completed, so the copy did) and `dst`.
        unsafe { dst.add(i).write(words.add(i).read()) };
    }
    // SAFETY: no further use; the copy completed.
    unsafe { bar.inval() };
}
