//! The kernels of one greedy decoding step of a Llama-shaped decoder at batch 1, and the
//! seeded weight generator both sides share.
//!
//! Per layer the step runs five kernels:
//!
//! | kernel | does | reads (the bytes that bound it) |
//! | --- | --- | --- |
//! | [`rms_qkv`] | RMSNorm of the residual, then the Q, K and V projections | `W_qkv` (3 d x d) |
//! | [`attention`] | rotary embedding of the new q and k, appends k and v to the cache, attention of q over positions `0..=pos` | the layer's cache prefix |
//! | [`o_proj`] | output projection, added to the residual | `W_o` (d x d) |
//! | [`rms_gate_up`] | RMSNorm, gate and up projections, `SiLU(gate) * up` | `W_gate`, `W_up` (2 x ffn x d) |
//! | [`down_proj`] | down projection, added to the residual | `W_down` (d x ffn) |
//!
//! and around the layers [`embed`] (the token's row of the embedding table),
//! [`rms_logits`] (final RMSNorm and the LM head, `f32` logits, and the arg-max over them
//! as one atomic maximum of [`argmax_key`]s a warp) and [`argmax`] (the next token, read
//! from that key and written where the next step's [`embed`] reads it, and the position
//! advanced), so
//! a step reads nothing from the host and the same launches (or one graph) run every step.
//!
//! Numbers: bfloat16 weights, activations and cache, `f32` accumulation, rounded to
//! bfloat16 where PyTorch's bfloat16 model rounds (each projection's output, the residual
//! sums, the normalized activations, the rotated q and k, `SiLU(gate)` and its product with
//! `up`, the attention output), so the reference in `reference/` computes the same values
//! up to the order of `f32` additions.
//!
//! # Programmatic Dependent Launch
//! Every kernel is declared `unsafe dependent(manual)`: it first loads what no earlier
//! kernel of the step writes, or what a kernel two or more launches back wrote (the
//! projections' first weight chunks into shared memory and their RMSNorm gains into
//! registers; the attention's cache prefix and rotary row; the residual at the first row
//! of [`o_proj`] and [`down_proj`]'s warps), then calls
//! [`pdl_auto`](cudadrv::device::pdl_auto) (the wait, and the trigger the host chose),
//! then reads its predecessor's output. Every CTA reaches the wait, so a
//! kernel never completes before its predecessor: a kernel that starts early therefore
//! finds every kernel two or more launches back complete, which is why the attention
//! may read the position and the cache prefix (written by earlier steps) before its wait.
//! Nothing is written before the wait except the timeline's timestamps.
//!
//! # Launch shapes
//! The projection kernels take 1-D blocks of [`BLOCK`] threads ([`WARPS`] warps, each
//! reducing whole rows, one after another) and any number of blocks (the program
//! launches as many as are resident at once); [`attention`] a `(heads, cache / SPLIT)` grid of
//! [`ATTN_THREADS`]; [`embed`] and [`argmax`] one block of [`BLOCK`] and
//! [`ARGMAX_THREADS`]. A kernel launched with another block size returns at once in every
//! thread (no wrong value is written, and nothing waits). Every access goes through the
//! bounds-checked slices, except the attention's cache loads, whose range each CTA checks
//! once against both slices before its plain 16-byte loads; the launches are `unsafe`
//! because the warp exchanges and CTA barriers need whole warps reaching them together,
//! which a `safe` kernel cannot use.
//!
//! # Target
//! sm_90 and PTX ISA 8.1 (`host/build.rs`): the attention's `st.async` needs 8.1, so a
//! driver for CUDA 12.1 or later loads the module (an older one refuses it with its JIT
//! log). The bfloat16 roundings are `cvt.rn.bf16x2.f32` (`to_bf16`, `pack_bf16x2`).
#![no_std]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx, asm_experimental_arch))]

use cudadrv::args::Bf16;
#[cfg(target_arch = "nvptx64")]
use cudadrv::kernel::unroll;
use cudadrv::kernel::{DeviceSlice, DeviceSliceMut};

#[cfg(target_arch = "nvptx64")]
use cudadrv::device::ptx_asm::ld_v4_u32;
#[cfg(target_arch = "nvptx64")]
use cudadrv::device::{BulkBytes, bulk_prefetch_l2};
#[cfg(target_arch = "nvptx64")]
use cudadrv::device::{
    MBarrier, PdlPlan, RemoteShared, Scope, block_dim, block_idx, block_sum_f32,
    cluster_arrive_relaxed, cluster_cta_count, cluster_cta_rank, cluster_wait, exp_approx,
    fence_mbarrier_init, fma, globaltimer, grid_dim, lane_id, pack_bf16x2, pdl_auto, rsqrt_approx,
    sync_threads, sync_warp, thread_idx, to_bf16, warp_group_sum_f32, warp_sum_f32, warp_xor_f32,
    warp_xor_u32,
};
#[cfg(target_arch = "nvptx64")]
use cudadrv::device::{cp_async_cg, cp_async_commit, cp_async_wait, cp_async_wait_all};

/// Threads of a projection CTA (and of [`embed`]).
pub const BLOCK: u32 = 256;
/// Threads of an [`attention`] CTA: 16 half-warps, each reading one 128-wide head row in
/// 16-byte pieces.
pub const ATTN_THREADS: u32 = 256;
/// Half-warps of an [`attention`] CTA.
#[cfg(target_arch = "nvptx64")]
const HALVES: usize = ATTN_THREADS as usize / 16;
/// Warps of an [`attention`] CTA.
#[cfg(target_arch = "nvptx64")]
const ATTN_WARPS: usize = ATTN_THREADS as usize / 32;
/// Threads of the [`argmax`] CTA.
pub const ARGMAX_THREADS: u32 = 32;
/// Elements of one attention head.
pub const HEAD_DIM: usize = 128;
/// Cache positions one [`attention`] CTA covers.
pub const SPLIT: usize = 128;
/// The most splits of the cache an [`attention`] grid may have (`cache <= SPLIT x
/// MAX_SPLITS` positions): one cluster of CTAs per head, at most the portable cluster
/// size.
pub const MAX_SPLITS: usize = 8;
/// `f32`s of an attention CTA's result: the running maximum, the sum of exponentials,
/// two unused, then the 128 weighted sums.
pub const PARTIAL: usize = HEAD_DIM + 4;
/// 16-byte pieces of the input each thread of [`down_proj`] stages (the others stage
/// 4): inputs up to `8 x 256 x 6 = 12288` values.
pub const MAX_PIECES: usize = 6;
/// RMSNorm's epsilon.
pub const RMS_EPS: f32 = 1e-5;
/// Slots of the timeline per kernel: first CTA start, first wait passed, last CTA end.
pub const TRACE_SLOTS: usize = 3;

/// The weight generator: the `index`-th value of the stream `seed`, uniform in
/// `[-scale, scale)` plus `offset`, rounded to bfloat16. A counter-based hash
/// (SplitMix64's finalizer), so the GPU fills tensors in parallel and the CPU reference
/// gets the same bits.
#[inline(always)]
#[must_use]
pub fn gen_value(seed: u64, index: u64, scale: f32, offset: f32) -> Bf16 {
    let mut z = seed
        .wrapping_add(index.wrapping_mul(0x9e37_79b9_7f4a_7c15))
        .wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    // 24 bits: exact in f32; u in [-1, 1).
    let u = (z >> 40) as f32 * (1.0 / 8_388_608.0) - 1.0;
    Bf16::from_f32(u * scale + offset)
}

/// Part `i` of `total` items split into `n` parts of equal size (to one item): the parts
/// `0..n` cover `0..total` in order, without overlap; empty for `i >= n`.
#[inline(always)]
#[must_use]
pub fn part_of(total: usize, i: usize, n: usize) -> core::ops::Range<usize> {
    if i >= n {
        return total..total;
    }
    // In u64: `total x (i + 1)` does not overflow for any length a slice can have.
    let at = |j: usize| (total as u64 * j as u64 / n as u64) as usize;
    at(i)..at(i + 1)
}

/// The arg-max's key of logit `v` at index `i`: larger keys win under `max`, the larger
/// value first and, between equal values, the smaller index (the first one), as
/// [`argmax_index`] reads back. NaN and minus infinity get 0, which never wins (the
/// greedy choice's "the first index of the largest value, NaNs never win", where no
/// value is above minus infinity), and `-0.0` counts as `+0.0`.
#[inline(always)]
#[must_use]
pub fn argmax_key(v: f32, i: u32) -> u64 {
    if v.is_nan() || v == f32::NEG_INFINITY {
        return 0;
    }
    let b = if v == 0.0 { 0 } else { v.to_bits() };
    // Order-preserving: negative values inverted, positive ones above them.
    let ordered = if b & 0x8000_0000 != 0 {
        !b
    } else {
        b | 0x8000_0000
    };
    (u64::from(ordered) << 32) | u64::from(u32::MAX - i)
}

/// The index a winning [`argmax_key`] names, or `u32::MAX` for the key 0 (no value won).
#[inline(always)]
#[must_use]
pub fn argmax_index(key: u64) -> u32 {
    if key == 0 {
        u32::MAX
    } else {
        u32::MAX - key as u32
    }
}

cudadrv::kernel! {
    /// `out[i] = gen_value(seed, i, scale, offset)` for every element (grid-stride).
    pub safe fn fill_uniform(out: DeviceSliceMut<Bf16>, seed: u64, scale: f32, offset: f32) {
        let stride = cudadrv::device::global_dim_x() as usize;
        let mut i = cudadrv::device::global_idx_x() as usize;
        while out.try_write(i, gen_value(seed, i as u64, scale, offset)).is_ok() {
            i += stride;
        }
    }
}

// ---------------------------------------------------------------------------------------
// Device-side building blocks.

#[cfg(target_arch = "nvptx64")]
cudadrv::shared_array! {
    /// `block_sum_f32`'s scratch (RMSNorm's sum of squares).
    fn norm_scratch() -> [f32; 32];
}

#[cfg(target_arch = "nvptx64")]
cudadrv::shared_array! {
    /// The attention CTA's per-warp results (its two half-warps merged):
    /// `[warp][max, sum, -, -, acc[128]]`.
    fn attn_warps() -> [f32; ATTN_WARPS * PARTIAL];
}

#[cfg(target_arch = "nvptx64")]
cudadrv::shared_array! {
    /// The attention cluster's results, in its first CTA (the others' copy is unused):
    /// `[rank][max, sum, -, -, acc[128]]`, written by each CTA of the cluster into the
    /// first one's shared memory.
    fn split_inbox() -> [f32; MAX_SPLITS * PARTIAL];
}

#[cfg(target_arch = "nvptx64")]
cudadrv::shared_array! {
    /// The mbarrier on which the attention cluster's first CTA waits for the cluster's
    /// results (its one phase counts their bytes).
    fn inbox_bar() -> [u64; 1];
}

/// The bytes of one attention CTA's result in the inbox: its maximum, its sum and the
/// 128 weighted sums.
#[cfg(target_arch = "nvptx64")]
const INBOX_BYTES: usize = 4 * (HEAD_DIM + 2);

/// Records a timestamp for the timeline (thread 0 of each CTA): `what` 0 = start, 1 =
/// wait passed (both the earliest over the CTAs), 2 = end (the latest). Nothing when the
/// trace slice is empty.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn mark(trace: &DeviceSliceMut<u64>, slot: u32, what: usize) {
    if !trace.is_empty() && thread_idx().x == 0 {
        let i = slot as usize * TRACE_SLOTS + what;
        let t = globaltimer();
        if what == 2 {
            let _ = trace.fetch_max(i, t);
        } else {
            let _ = trace.fetch_min(i, t);
        }
    }
}

/// Whether this CTA has the 1-D shape `threads` the kernel is written for.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn shaped(threads: u32) -> bool {
    let d = block_dim();
    d.x == threads && d.y == 1 && d.z == 1
}

/// Asks L2 for part `i` of `n` equal parts (in 16-byte pieces) of the first `len` values
/// of `m` (`cp.async.bulk.prefetch.L2`, one request of at most [`BulkBytes::MAX`]
/// bytes): a hint, which reads nothing into the program. Nothing for an empty part, or
/// for a slice that is not 16-byte aligned.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn prefetch_part(m: &DeviceSlice<Bf16>, len: usize, i: usize, n: usize) {
    let core::ops::Range {
        start: from,
        end: to,
    } = part_of(len.min(m.len()) / 8, i, n);
    let base = m.as_ptr();
    if to > from && base as usize % 16 == 0 {
        let bytes = (16 * (to - from)).min(BulkBytes::MAX as usize) as u32;
        if let Some(bytes) = BulkBytes::new(bytes) {
            // SAFETY: pieces `from..to` of the first `len.min(m.len())` values lie inside
            // `m`'s global memory, 16-byte aligned (the base is, checked above).
            unsafe { bulk_prefetch_l2(base.wrapping_add(8 * from), bytes) }
        }
    }
}

/// `acc` plus the dot product of eight bfloat16 weights (four packed words) with eight
/// `f32` inputs, in fused multiply-adds.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn dot8(acc: f32, w: [u32; 4], x: &[f32; 8]) -> f32 {
    let mut s = acc;
    unroll::<4>(|q| {
        let [a, b] = Bf16::unpack2(w[q]);
        s = fma(a, x[2 * q], s);
        s = fma(b, x[2 * q + 1], s);
    });
    s
}

/// Four bfloat16 pairs packed from eight `f32`s (rounded to nearest even).
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn pack8(v: [f32; 8]) -> [u32; 4] {
    let mut out = [0u32; 4];
    unroll::<4>(|q| {
        out[q] = pack_bf16x2(v[2 * q], v[2 * q + 1]);
    });
    out
}

/// 16-byte pieces of a row each lane of a projection loads per chunk (a warp reads
/// `32 x PIECES x 16` bytes of a row at a time, and has the next chunk's loads in flight
/// while it reduces one); [`rms_gate_up`] reads half as many of each of its two rows.
pub const PIECES: usize = 4;

/// Warps of a projection CTA.
pub const WARPS: usize = BLOCK as usize / 32;

#[cfg(target_arch = "nvptx64")]
cudadrv::dynamic_shared! {
    /// A projection CTA's dynamic shared memory: the staged input vector (16-byte pieces
    /// of eight bfloat16 values), then each warp's ring of weight chunks.
    fn proj_smem();
}

/// The longest input, in 16-byte pieces, a projection stages: `8 x 1536 = 12288` values
/// (the reduction length of every projection).
pub const MAX_STAGED: usize = 1536;

/// Ring slots per warp of a projection, at most: each lane copies its pieces of the
/// next [`STAGES`] - 1 chunks into shared memory with `cp.async` while it reduces the
/// current one. The host may launch a projection with one slot fewer (`slots`), the
/// chunk ahead then refilling the slot just reduced: the same chunks in flight in a
/// quarter less shared memory, which keeps three CTAs an SM at width 4096.
pub const STAGES: usize = 4;

/// Chunks a warp of each projection copies before the PDL wait (the rest of the first
/// [`STAGES`] - 1 right after the input's loads, behind them): `[rms_qkv, o_proj,
/// rms_gate_up, down_proj, rms_logits]`. A normalizing kernel's residual read queues
/// behind the copies in flight at its wait, and every kernel's early copies share the
/// memory with its predecessor's last loads and stores, so fewer than the ring holds pays
/// where the input is on the chain's critical path. Fitted on an H200 (graph + PDL, early
/// trigger, each against the previous choice in one call): `[2, 3, 3, 3, 2]` 0.638 ms,
/// down 2 0.635, gate and up 2 0.632, QKV 1 0.620; QKV 0 0.636, logits 1 0.622, output 2
/// 0.621, gate and up 1 0.648, down 1 0.639. Checked again once the rest of the ring was
/// issued behind the input's loads instead of after the staging (0.5886-0.5891 ms):
/// `[2, 3, 2, 2, 2]` 0.609, `[1, 3, 3, 3, 3]` 0.607, all 3 0.621, and one kernel changed
/// at a time, gate and up 1 0.597, down 1 0.591, logits 1 0.589-0.590, logits 3 0.590,
/// output 2 0.589 ms.
#[cfg(target_arch = "nvptx64")]
const PRE: [usize; 5] = [1, 3, 2, 2, 2];

/// Dynamic shared memory a projection CTA needs for an input of `k8` 16-byte pieces
/// (staged as `f32`, 32 bytes a piece) and `rw` matrices with rings of `slots` chunks
/// ([`STAGES`] or one fewer): the staged input, then [`WARPS`] rings of `slots` chunks of
/// `rw x PIECES` 16-byte pieces per lane (the gate and up projection: `rw = 2`, half the
/// pieces).
#[must_use]
pub const fn projection_smem(k8: usize, rw: usize, slots: usize) -> usize {
    projection_smem_for(
        k8,
        rw,
        if rw == 2 { PIECES / 2 } else { rw * PIECES },
        slots,
    )
}

/// [`projection_smem`] for `p` 16-byte pieces per lane of each of `rw` matrices.
const fn projection_smem_for(k8: usize, rw: usize, p: usize, slots: usize) -> usize {
    32 * k8 + 16 * WARPS * slots * rw * p * 32
}
/// This thread's pieces `t + BLOCK i`, `i < S`, of the RMSNorm gains `gamma` (zeros past
/// `k8` pieces): loaded before the PDL wait, since no kernel writes them.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn gains_of<const S: usize>(gamma: &DeviceSlice<Bf16>, k8: usize) -> [[u32; 4]; S] {
    let t = thread_idx().x as usize;
    let mut g = [[0u32; 4]; S];
    unroll::<S>(|i| {
        let piece = t + BLOCK as usize * i;
        if piece < k8 {
            g[i] = gamma.get_vec16(piece).unwrap_or([0; 4]);
        }
    });
    g
}

/// Loads this thread's pieces `t + BLOCK i`, `i < S`, of the input `x` (`k8` pieces)
/// into registers for [`stage_store`] (`None` past the input), through
/// [`chunks16`](DeviceSlice::chunks16) when `x` is 16-byte aligned: the loads are in
/// flight together, and nothing waits for them here.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn stage_load<const S: usize>(x: &DeviceSlice<Bf16>, k8: usize) -> [Option<[u32; 4]>; S] {
    let t = thread_idx().x as usize;
    let mut v = [None; S];
    match x.chunks16() {
        Some(c) => unroll::<S>(|i| {
            let piece = t + BLOCK as usize * i;
            if piece < k8 {
                v[i] = c.get(piece);
            }
        }),
        None => unroll::<S>(|i| {
            let piece = t + BLOCK as usize * i;
            if piece < k8 {
                v[i] = x.get_vec16(piece);
            }
        }),
    }
    v
}

/// Stages the input `v` ([`stage_load`]'s pieces, `k8` in all) in shared memory for the
/// whole CTA, RMS normalized with the gains when given (`bf16(x rsqrt(mean(x^2) + eps)
/// g)`; `gains[i]` is this thread's piece `i`, see [`gains_of`]), and waits for the
/// whole CTA.
///
/// # Safety
/// Every thread of a [`BLOCK`]-thread CTA calls it together; `k8 <= S x BLOCK`, and the
/// dynamic shared memory holds `k8` pieces.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
unsafe fn stage_store<const S: usize>(
    v: [Option<[u32; 4]>; S],
    gains: Option<&[[u32; 4]; S]>,
    k8: usize,
) {
    let t = thread_idx().x as usize;
    let base = proj_smem().as_mut_ptr().cast::<[f32; 8]>();
    let piece = |i: usize| t + BLOCK as usize * i;
    if let Some(g) = gains {
        let mut ss = 0.0f32;
        unroll::<S>(|i| {
            if let Some(w) = v[i] {
                let f = unpack8(w);
                unroll::<8>(|e| ss += f[e] * f[e]);
            }
        });
        // SAFETY: the caller's promise: the whole CTA, together.
        let total = unsafe { block_sum_f32(ss, norm_scratch()) };
        let scale = rsqrt_approx(total / (8 * k8) as f32 + RMS_EPS);
        unroll::<S>(|i| {
            if piece(i) < k8 {
                let mut f = unpack8(v[i].unwrap_or([0; 4]));
                let g = unpack8(g[i]);
                unroll::<8>(|e| f[e] = f[e] * scale * g[e]);
                // The bfloat16 value, kept as `f32`.
                // SAFETY: `piece < k8`, inside the dynamic shared memory (the caller's
                // promise).
                unsafe { base.add(piece(i)).write(unpack8(pack8(f))) };
            }
        });
    } else {
        unroll::<S>(|i| {
            if piece(i) < k8 {
                // SAFETY: as above (bfloat16 values already: no rounding).
                unsafe { base.add(piece(i)).write(unpack8(v[i].unwrap_or([0; 4]))) };
            }
        });
    }
    // SAFETY: every thread of the CTA reaches it (the caller's promise).
    unsafe { sync_threads() };
}

/// Where lane `lane` of a warp keeps piece `j` of matrix `r` in ring stage `stage`.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn ring_slot<const RW: usize, const P: usize>(
    ring: *mut [u32; 4],
    stage: usize,
    r: usize,
    j: usize,
) -> *mut [u32; 4] {
    // The caller's ring has its slots x RW x P x 32 pieces.
    ring.wrapping_add(((stage * RW + r) * P + j) * 32 + lane_id() as usize)
}

/// Starts copying chunk `batch` of row `row` of each matrix (`P` pieces per lane: lane
/// `l` takes pieces `32 P batch + l + 32 j`) into ring stage `stage`, then commits the
/// group (empty past the last row, so every lane counts the same groups).
///
/// # Safety
/// `ring` is this warp's ring in shared memory (its slots x `RW` x `P` x 32 pieces),
/// and nothing reads stage `stage` until the group has been waited for.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
unsafe fn issue_chunk<const RW: usize, const P: usize>(
    mats: [&DeviceSlice<Bf16>; RW],
    rows: usize,
    k8: usize,
    ring: *mut [u32; 4],
    stage: usize,
    (row, batch): (usize, usize),
) {
    let lane = lane_id() as usize;
    if row < rows {
        unroll::<RW>(|r| {
            unroll::<P>(|j| {
                let piece = 32 * P * batch + lane + 32 * j;
                let at = row * k8 + piece;
                // Inside the matrix: the whole 16 bytes.
                if piece < k8 && 8 * (at + 1) <= mats[r].len() {
                    let src = mats[r].as_ptr().wrapping_add(8 * at).cast::<[u32; 4]>();
                    // SAFETY: `src` is 16 readable, 16-byte aligned bytes of the matrix
                    // (checked above; the buffer is 16-byte aligned and rows are whole
                    // pieces); the slot is this lane's, in the caller's ring.
                    unsafe { cp_async_cg(ring_slot::<RW, P>(ring, stage, r, j), src) };
                }
            })
        });
    }
    cp_async_commit();
}

/// A projection in a grid of resident CTAs: warp `w` of the grid's `W` warps reduces rows
/// `w, w + W, w + 2W, ...` (below `rows`) of each of the `RW` matrices `mats` (the same
/// row of each; `k8` pieces a row, where the input `x` has `8 k8` values) against the
/// staged input, RMS normalized when `gamma` is given. A warp's rows are one stream of
/// chunks (`P` pieces per lane), copied by each lane into the warp's ring in shared
/// memory [`STAGES`] - 1 chunks ahead (`cp.async`; a lane reads only its own pieces, so
/// no barrier is needed), in `slots` slots ([`STAGES`], or one fewer when `slots` says
/// so); the first `PRE` chunks (at most [`STAGES`] - 1) and the
/// RMSNorm gains are loaded before the PDL wait (`plan`), and `before_wait` runs then
/// too. After the wait the input's loads go first, then the rest of the first chunks
/// (issued before the input's loads, they would delay them; issued after the staging, the
/// memory would idle while the CTA reduces and scales the input), then the input is
/// staged.
/// `store(row, sums)` runs in lane 0 for each row. Also the kernel's frame: it stamps the
/// timeline, and a CTA of another shape, an input longer than the CTA stages or a launch
/// with less dynamic shared memory than [`projection_smem`] (for its slots) only waits
/// (nothing stored).
///
/// # Safety
/// Every thread of the CTA calls it, converged (the body of a projection kernel).
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn project<const RW: usize, const P: usize, const S: usize, const PRE: usize>(
    mats: [&DeviceSlice<Bf16>; RW],
    rows: usize,
    x: &DeviceSlice<Bf16>,
    gamma: Option<&DeviceSlice<Bf16>>,
    slots: u32,
    plan: u32,
    trace: &DeviceSliceMut<u64>,
    slot: u32,
    before_wait: impl FnOnce(),
    mut store: impl FnMut(usize, [f32; RW]),
) {
    mark(trace, slot, 0);
    let k8 = x.len() / 8;
    let lane = lane_id() as usize;
    let warps = grid_dim().x as usize * WARPS;
    let warp = thread_idx().x as usize / 32;
    let smem = proj_smem();
    // Ring slots: STAGES, or one fewer when asked.
    let sl = if slots as usize == STAGES - 1 {
        STAGES - 1
    } else {
        STAGES
    };
    let ring_pieces = sl * RW * P * 32;
    if !shaped(BLOCK)
        || k8 > S * BLOCK as usize
        || (smem.len() as usize) < projection_smem_for(k8, RW, P, sl)
    {
        pdl_auto(PdlPlan::from_bits(plan));
        mark(trace, slot, 2);
        return;
    }
    let staged = smem.as_mut_ptr().cast::<[f32; 8]>();
    let ring = staged
        .wrapping_add(k8)
        .cast::<[u32; 4]>()
        .wrapping_add(warp * ring_pieces);
    let batches = k8.div_ceil(32 * P).max(1);
    let next = |(row, batch): (usize, usize)| {
        if batch + 1 < batches {
            (row, batch + 1)
        } else {
            (row + warps, 0)
        }
    };
    // Before the wait: the first PRE chunks (weights only).
    let first = block_idx().x as usize * WARPS + warp;
    let mut issued = (first, 0);
    unroll::<PRE>(|st| {
        // SAFETY: this warp's ring (sized above); nothing reads it yet.
        unsafe { issue_chunk::<RW, P>(mats, rows, k8, ring, st, issued) };
        issued = next(issued);
    });
    let gains = gamma.map(|g| gains_of::<S>(g, k8));
    before_wait();
    pdl_auto(PdlPlan::from_bits(plan));
    mark(trace, slot, 1);
    // The input's loads first, then the rest of the first STAGES - 1 chunks behind them
    // (copies issued before the input's loads would delay them), then the input staged.
    let input = stage_load::<S>(x, k8);
    unroll::<{ STAGES - 1 }>(|st| {
        if st >= PRE {
            // SAFETY: this warp's ring; nothing reads these stages yet.
            unsafe { issue_chunk::<RW, P>(mats, rows, k8, ring, st, issued) };
            issued = next(issued);
        }
    });
    // SAFETY: the whole CTA (the caller's promise); `k8` and the shared memory checked.
    unsafe { stage_store::<S>(input, gains.as_ref(), k8) };
    let (mut row, mut batch) = (first, 0);
    // This chunk's ring slot (chunk `c` is in slot `c % sl`).
    let mut st = 0usize;
    // One accumulator per piece: independent chains of fused multiply-adds.
    let mut acc = [[0.0f32; P]; RW];
    // `row` and `batch` are the same in every lane: the warp stays converged.
    while row < rows {
        cp_async_wait::<{ STAGES as u32 - 2 }>();
        unroll::<P>(|j| {
            let piece = 32 * P * batch + lane + 32 * j;
            if piece < k8 {
                // SAFETY: `piece < k8`, staged before the barrier; the slot is this
                // lane's, its copy waited for above.
                let xv = unsafe { staged.add(piece).read() };
                unroll::<RW>(|r| {
                    // SAFETY: as above.
                    let w = unsafe { ring_slot::<RW, P>(ring, st, r, j).read() };
                    acc[r][j] = dot8(acc[r][j], w, &xv);
                });
            }
        });
        // The chunk STAGES - 1 ahead goes into its slot: the one reduced last iteration,
        // or with one slot fewer this one.
        let fill = if sl == STAGES {
            (st + STAGES - 1) % STAGES
        } else {
            st
        };
        // SAFETY: this lane read that slot before (the values are used; the copy, an
        // `asm` block that may touch memory, is not moved before those reads).
        unsafe { issue_chunk::<RW, P>(mats, rows, k8, ring, fill, issued) };
        issued = next(issued);
        if batch + 1 == batches {
            let mut sums = [0.0f32; RW];
            unroll::<RW>(|r| {
                let mut t = 0.0f32;
                unroll::<P>(|j| t += acc[r][j]);
                // SAFETY: the whole warp runs this iteration (warp-uniform loop).
                sums[r] = unsafe { warp_sum_f32(t) };
            });
            if lane == 0 {
                store(row, sums);
            }
            acc = [[0.0f32; P]; RW];
        }
        (row, batch) = next((row, batch));
        st = if st + 1 == sl { 0 } else { st + 1 };
    }
    cp_async_wait_all();
    mark(trace, slot, 2);
}

cudadrv::kernel! {
    /// RMSNorm of the residual `x` (gains `gamma`), then `out = W_qkv x` (bfloat16 out):
    /// `out.len()` rows of `W_qkv` (row-major, `x.len()` columns, a multiple of 8 up to
    /// 8192), one row per warp at a time, [`WARPS`] warps per [`BLOCK`]-thread CTA.
    ///
    /// # Safety
    /// None beyond the module's: see the crate docs.
    pub unsafe dependent(manual) fn rms_qkv(
        x: DeviceSlice<Bf16>,
        gamma: DeviceSlice<Bf16>,
        w: DeviceSlice<Bf16>,
        out: DeviceSliceMut<Bf16>,
        slots: u32,
        plan: u32,
        trace: DeviceSliceMut<u64>,
        slot: u32,
    ) {
        // SAFETY: every thread of the CTA runs the kernel's one statement.
        unsafe {
            project::<1, PIECES, 4, { PRE[0] }>([&w], out.len(), &x, Some(&gamma), slots, plan, &trace, slot, || {}, |row, [v]| {
                let _ = out.try_write(row, to_bf16(v));
            });
        }
    }
}

cudadrv::kernel! {
    /// The final RMSNorm of `x` (gains `gamma`), then `logits = W_lm x` in `f32`
    /// (`logits.len()` rows), one row per warp at a time.
    ///
    /// # Safety
    /// None beyond the module's: see the crate docs.
    pub unsafe dependent(manual) fn rms_logits(
        x: DeviceSlice<Bf16>,
        gamma: DeviceSlice<Bf16>,
        w: DeviceSlice<Bf16>,
        logits: DeviceSliceMut<f32>,
        best: DeviceSliceMut<u64>,
        slots: u32,
        plan: u32,
        trace: DeviceSliceMut<u64>,
        slot: u32,
    ) {
        // The largest key of this warp's rows (lane 0 stores them).
        let mut key = 0u64;
        // SAFETY: every thread of the CTA runs the kernel's one CTA-wide call.
        unsafe {
            project::<1, PIECES, 4, { PRE[4] }>([&w], logits.len(), &x, Some(&gamma), slots, plan, &trace, slot, || {}, |row, [v]| {
                if logits.try_write(row, v).is_ok() {
                    key = key.max(argmax_key(v, row as u32));
                }
            });
        }
        // One atomic maximum a warp into `best[0]`.
        if lane_id() == 0 && key != 0 {
            let _ = best.fetch_max(0, key);
        }
    }
}

/// `x[row] = bf16(x[row] + bf16(v))`: a residual projection's store; `known` is
/// `x[row]` when already read.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn add_residual(x: &DeviceSliceMut<Bf16>, row: usize, v: f32, known: Option<Bf16>) {
    if let Some(old) = known.or_else(|| x.get(row)) {
        let y = to_bf16(v).to_f32();
        let _ = x.try_write(row, to_bf16(old.to_f32() + y));
    }
}

/// The residual's value at this warp's first row of a residual projection (see
/// [`project`]), read before the PDL wait: the residual was last written two or more
/// launches back ([`down_proj`] for [`o_proj`], [`o_proj`] for [`down_proj`]).
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn early_residual(x: &DeviceSliceMut<Bf16>) -> (usize, Option<Bf16>) {
    let first = block_idx().x as usize * WARPS + thread_idx().x as usize / 32;
    (first, x.get(first))
}

cudadrv::kernel! {
    /// The attention's output projection added to the residual:
    /// `x = bf16(x + bf16(W_o attn))` (`x.len()` rows of `attn.len()` columns, up to
    /// 8192), one row per warp.
    ///
    /// Before its wait it also asks L2 for the first `hint` values of each of the next
    /// kernel's matrices `gate` and `up` (the grid's warps splitting them): this kernel
    /// starts while the attention runs, which leaves the memory idle for a while, and
    /// [`rms_gate_up`] then finds those rows in L2.
    ///
    /// # Safety
    /// None beyond the module's: see the crate docs.
    pub unsafe dependent(manual) fn o_proj(
        attn: DeviceSlice<Bf16>,
        w: DeviceSlice<Bf16>,
        x: DeviceSliceMut<Bf16>,
        gate: DeviceSlice<Bf16>,
        up: DeviceSlice<Bf16>,
        hint: u32,
        slots: u32,
        plan: u32,
        trace: DeviceSliceMut<u64>,
        slot: u32,
    ) {
        let (first, early) = early_residual(&x);
        let prefetch = || {
            if lane_id() == 0 {
                let warps = grid_dim().x as usize * WARPS;
                let warp = block_idx().x as usize * WARPS + thread_idx().x as usize / 32;
                prefetch_part(&gate, hint as usize, warp, warps);
                prefetch_part(&up, hint as usize, warp, warps);
            }
        };
        // SAFETY: every thread of the CTA runs this call.
        unsafe {
            project::<1, PIECES, 4, { PRE[1] }>([&w], x.len(), &attn, None, slots, plan, &trace, slot, prefetch, |row, [v]| {
                add_residual(&x, row, v, if row == first { early } else { None })
            });
        }
    }
}

cudadrv::kernel! {
    /// The feed-forward's down projection added to the residual:
    /// `x = bf16(x + bf16(W_down h))` (`h.len()` columns, up to [`MAX_STAGED`] x 8), one
    /// row per warp.
    ///
    /// # Safety
    /// None beyond the module's: see the crate docs.
    pub unsafe dependent(manual) fn down_proj(
        h: DeviceSlice<Bf16>,
        w: DeviceSlice<Bf16>,
        x: DeviceSliceMut<Bf16>,
        slots: u32,
        plan: u32,
        trace: DeviceSliceMut<u64>,
        slot: u32,
    ) {
        let (first, early) = early_residual(&x);
        // SAFETY: every thread of the CTA runs this call.
        unsafe {
            project::<1, PIECES, MAX_PIECES, { PRE[3] }>([&w], x.len(), &h, None, slots, plan, &trace, slot, || {}, |row, [v]| {
                add_residual(&x, row, v, if row == first { early } else { None })
            });
        }
    }
}

cudadrv::kernel! {
    /// RMSNorm of `x` (gains `gamma`), then for each of `h.len()` rows:
    /// `g = bf16(W_gate[row] xn)`, `u = bf16(W_up[row] xn)`,
    /// `h[row] = bf16(bf16(g sigmoid(g)) u)`; one row of each matrix per warp.
    ///
    /// # Safety
    /// None beyond the module's: see the crate docs.
    pub unsafe dependent(manual) fn rms_gate_up(
        x: DeviceSlice<Bf16>,
        gamma: DeviceSlice<Bf16>,
        w_gate: DeviceSlice<Bf16>,
        w_up: DeviceSlice<Bf16>,
        h: DeviceSliceMut<Bf16>,
        slots: u32,
        plan: u32,
        trace: DeviceSliceMut<u64>,
        slot: u32,
    ) {
        // SAFETY: every thread of the CTA runs the kernel's one statement.
        unsafe {
            project::<2, { PIECES / 2 }, 4, { PRE[2] }>([&w_gate, &w_up], h.len(), &x, Some(&gamma), slots, plan, &trace, slot, || {}, |row, [g, u]| {
                let gate = to_bf16(g).to_f32();
                let up = to_bf16(u).to_f32();
                let silu = to_bf16(gate / (1.0 + exp_approx(-gate))).to_f32();
                let _ = h.try_write(row, to_bf16(silu * up));
            });
        }
    }
}

cudadrv::kernel! {
    /// `x = embedding[token[0]]` (row `token[0]` of the `vocab x d` table, `d = x.len()`,
    /// a multiple of 8): one CTA of [`BLOCK`] threads, 16 bytes per thread at a time.
    ///
    /// # Safety
    /// None beyond the module's: see the crate docs.
    pub unsafe dependent(manual) fn embed(
        table: DeviceSlice<Bf16>,
        token: DeviceSlice<u32>,
        x: DeviceSliceMut<Bf16>,
        plan: u32,
        trace: DeviceSliceMut<u64>,
        slot: u32,
    ) {
        mark(&trace, slot, 0);
        pdl_auto(PdlPlan::from_bits(plan));
        mark(&trace, slot, 1);
        if shaped(BLOCK) {
            let d8 = x.len() / 8;
            let row = token.get(0).unwrap_or(0) as usize;
            let mut piece = thread_idx().x as usize;
            while piece < d8 {
                if let Some(w) = table.get_vec16(row * d8 + piece) {
                    unroll::<4>(|q| {
                        let _ = x.try_write(8 * piece + 2 * q, Bf16::from_bits(w[q] as u16));
                        let _ = x.try_write(8 * piece + 2 * q + 1, Bf16::from_bits((w[q] >> 16) as u16));
                    });
                }
                piece += BLOCK as usize;
            }
        }
        mark(&trace, slot, 2);
    }
}

/// The `cos` and `sin` of rotary position `pos` for this lane's 8 elements `8 l .. 8 l +
/// 8` of a 128-wide head (rotate-half pairing: element `i < 64` with `i + 64`, both
/// turned by the angle of `i % 64`); `rope` holds `cos` then `sin`, `[pos][64]` each.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn rope_at(rope: &DeviceSlice<f32>, l: usize, pos: usize) -> [[f32; 2]; 8] {
    const HALF: usize = HEAD_DIM / 2;
    let table = rope.len() / 2;
    let mut cs = [[1.0f32, 0.0]; 8];
    unroll::<8>(|e| {
        let j = (8 * l + e) % HALF;
        cs[e] = [
            rope.get(pos * HALF + j).unwrap_or(1.0),
            rope.get(table + pos * HALF + j).unwrap_or(0.0),
        ];
    });
    cs
}

/// Rotary embedding of this lane's 8 elements `8 l .. 8 l + 8` of a head row: `own` are
/// they, `other` the 8 they pair with, `cs` their [`rope_at`]. Rounded to bfloat16.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn rotate(own: [f32; 8], other: [f32; 8], l: usize, cs: &[[f32; 2]; 8]) -> [f32; 8] {
    let first_half = 8 * l < HEAD_DIM / 2;
    let mut out = [0.0f32; 8];
    unroll::<8>(|e| {
        let [c, s] = cs[e];
        let v = if first_half {
            own[e] * c - other[e] * s
        } else {
            own[e] * c + other[e] * s
        };
        out[e] = to_bf16(v).to_f32();
    });
    out
}

/// Two softmax partials `(max, sum, weighted sums)` merged (a partial with a zero
/// sum saw no position and counts for nothing).
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn merge<const N: usize>(a: (f32, f32, [f32; N]), b: (f32, f32, [f32; N])) -> (f32, f32, [f32; N]) {
    let (ok_a, ok_b) = (a.1 > 0.0, b.1 > 0.0);
    let big = if !ok_a || (ok_b && b.0 > a.0) {
        b.0
    } else {
        a.0
    };
    // Both exponentials always, then selects (no branch; a NaN from an empty side's
    // `-inf - -inf` is not selected).
    let (ea, eb) = (exp_approx(a.0 - big), exp_approx(b.0 - big));
    let fa = if ok_a { ea } else { 0.0 };
    let fb = if ok_b { eb } else { 0.0 };
    let mut acc = [0.0f32; N];
    unroll::<N>(|e| acc[e] = fma(b.2[e], fb, a.2[e] * fa));
    (big, fma(b.1, fb, a.1 * fa), acc)
}

/// Eight bfloat16s (four packed words) as `f32`s: the values of
/// [`Bf16::unpack8`](cudadrv::args::Bf16::unpack8), kept here because the kernels built
/// with it get another instruction order and the step measured 0.1 to 0.2% slower (H200,
/// twice, each in one call against this build: 0.6385 / 0.6387 against 0.6379 / 0.6376
/// ms, and 0.6208 to 0.6229 against 0.6202 to 0.6210 ms).
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn unpack8(w: [u32; 4]) -> [f32; 8] {
    let mut out = [0.0f32; 8];
    unroll::<4>(|q| {
        let [a, b] = Bf16::unpack2(w[q]);
        out[2 * q] = a;
        out[2 * q + 1] = b;
    });
    out
}

cudadrv::kernel! {
    /// Attention of the new token at position `p = pos[0]` for one layer: rotates q and
    /// k of `qkv` (`[q | k | v]`, `3 d` values; `d = heads x 128`), writes k and v to
    /// the caches at `p` (`[position][d]` each), and attends q over positions `0..=p`
    /// (`softmax(q k / sqrt(128)) v`, in `f32`), writing `out` (`d` values, bfloat16).
    ///
    /// Grid `(cache / SPLIT, heads)` in clusters of `cache / SPLIT` CTAs (one cluster per
    /// head, at most [`MAX_SPLITS`]), [`ATTN_THREADS`] threads: CTA `(s, h)` covers
    /// positions `s SPLIT .. (s + 1) SPLIT` of head `h`, each half-warp `SPLIT / 16` of
    /// them (all their scores, then one softmax over them); it writes its maximum, sum
    /// and weighted sums into the shared memory of the cluster's first CTA with
    /// `st.async` (distributed shared memory, counted in bytes on that CTA's mbarrier, so
    /// no fence and no cluster barrier after them), and the first CTA combines them once
    /// its barrier's phase completes.
    ///
    /// # Safety
    /// None beyond the module's: see the crate docs.
    pub unsafe dependent(manual) fn attention(
        qkv: DeviceSlice<Bf16>,
        k_cache: DeviceSliceMut<Bf16>,
        v_cache: DeviceSliceMut<Bf16>,
        rope: DeviceSlice<f32>,
        pos: DeviceSlice<u32>,
        out: DeviceSliceMut<Bf16>,
        plan: u32,
        trace: DeviceSliceMut<u64>,
        slot: u32,
    ) {
        const PER_HALF: usize = SPLIT / HALVES;
        mark(&trace, slot, 0);
        // The cluster must be the head's splits: the barrier below then spans exactly the
        // CTAs that combine (a launch without that cluster shape writes nothing).
        if !shaped(ATTN_THREADS) || grid_dim().x as usize > MAX_SPLITS || cluster_cta_count() != grid_dim().x {
            pdl_auto(PdlPlan::from_bits(plan));
            mark(&trace, slot, 2);
            return;
        }
        let d = out.len();
        let d8 = d / 8;
        let split = block_idx().x as usize;
        let h = block_idx().y as usize;
        let splits = grid_dim().x as usize;
        let tid = thread_idx().x as usize;
        let half = tid / 16;
        let l = tid % 16;
        // Written by the previous step's `argmax`, many launches back (see the crate docs).
        let p = pos.get(0).unwrap_or(0) as usize;
        let first = split * SPLIT;
        let rank = cluster_cta_rank() as usize;
        // SAFETY: `inbox_bar` is a `u64` of this CTA's shared memory used only as this
        // mbarrier; the first CTA's thread 0 initializes it before the cluster barrier
        // below, which every thread of every CTA arrives at here and waits on before any
        // other use of the barrier.
        let bar = unsafe { MBarrier::from_ptr(inbox_bar().as_mut_ptr()) };
        if rank == 0 && tid < 32 {
            // SAFETY: thread 0, before any other use; then (after the first warp's
            // barrier, which orders the two for the whole warp: the compiler may issue
            // the initialization once for the warp) the phase's one expected arrival,
            // with the bytes of every CTA's result (`INBOX_BYTES` each, written below),
            // which no CTA writes before the cluster barrier. The warp is whole and
            // converged here.
            unsafe {
                if tid == 0 {
                    bar.init(1);
                    fence_mbarrier_init();
                }
                sync_warp(u32::MAX);
                if tid == 0 {
                    let _ = bar.arrive_expect_tx(Scope::Cluster, (splits * INBOX_BYTES) as u32);
                }
            }
        }
        // SAFETY: every thread of every CTA of the cluster arrives here once (the shape
        // was checked for the whole grid), then waits below before arriving again.
        unsafe { cluster_arrive_relaxed() };
        // Before the wait: this half-warp's positions of the cache (all of the split's, so
        // the loads need not wait for `p`; those past `p` are not used).
        let mut kv = [[[0u32; 4]; 2]; PER_HALF];
        // One bounds and alignment check for the split's rows, then plain 16-byte loads
        // (the kernel is bound by its instructions' latency; a check per load adds some).
        let rows_end = (first + SPLIT) * d;
        let (kp, vp) = (k_cache.as_ptr().cast_const(), v_cache.as_ptr().cast_const());
        if rows_end <= k_cache.len()
            && rows_end <= v_cache.len()
            && h * HEAD_DIM + HEAD_DIM <= d
            && kp as usize % 16 == 0
            && vp as usize % 16 == 0
            && d % 8 == 0
        {
            unroll::<PER_HALF>(|j| {
                let piece = (first + half + HALVES * j) * d8 + h * (HEAD_DIM / 8) + l;
                // SAFETY: `piece < (first + SPLIT) d / 8` (position below `first + SPLIT`,
                // column below `d`), so its 16 bytes lie inside both caches (checked
                // above), 16-byte aligned (the bases are, and a piece is 8 elements).
                unsafe {
                    kv[j][0] = ld_v4_u32(kp.add(8 * piece).cast());
                    kv[j][1] = ld_v4_u32(vp.add(8 * piece).cast());
                }
            });
        }
        // The rotary table's row for `p` (written at setup, never by a kernel).
        let cs = rope_at(&rope, l, p);
        // SAFETY: every thread arrived above (all CTAs of a cluster start together, so
        // this wait is short); the first CTA's barrier is now initialized and armed
        // for every thread of the cluster.
        unsafe { cluster_wait() };
        pdl_auto(PdlPlan::from_bits(plan));
        mark(&trace, slot, 1);

        // q, k and v of this head (16 bytes a lane of each), all loads in flight at once
        // (every half-warp loads k and v; the one that owns position `p` uses them).
        let at = |base: usize| base / 8 + h * 16 + l;
        let (qw, kw, vw) = match qkv.chunks16() {
            Some(c) => (c.get(at(0)), c.get(at(d)), c.get(at(2 * d))),
            None => (qkv.get_vec16(at(0)), qkv.get_vec16(at(d)), qkv.get_vec16(at(2 * d))),
        };
        let z = [0u32; 4];
        let (qw, kw, vw) = (qw.unwrap_or(z), kw.unwrap_or(z), vw.unwrap_or(z));
        // The 8 elements each lane's pair with: lane `l ^ 8` of the half-warp holds them.
        let partner = |w: [u32; 4]| {
            let mut o = [0u32; 4];
            // SAFETY: every lane of every warp runs these exchanges (straight-line code).
            unroll::<4>(|i| o[i] = unsafe { warp_xor_u32(w[i], 8) });
            o
        };
        let (qp, kp) = (partner(qw), partner(kw));
        // q rotated (bfloat16), then scaled for the scores.
        let mut q = rotate(unpack8(qw), unpack8(qp), l, &cs);
        let scale = 0.088_388_35_f32; // 1 / sqrt(128)
        unroll::<8>(|e| q[e] *= scale);
        // The new k (rotated) and v go to the cache from the half-warp that owns `p`.
        let owns_p = p >= first && p < first + SPLIT && (p - first) % HALVES == half;
        let k_new = rotate(unpack8(kw), unpack8(kp), l, &cs);
        let v_new = unpack8(vw);

        // Every lane of the warp takes part in each score's exchanges, whether its
        // position counts or not.
        let score = |kk: [f32; 8]| {
            let mut part = 0.0f32;
            unroll::<8>(|e| part = fma(q[e], kk[e], part));
            // SAFETY: the CTA's threads all run these the same number of times.
            unsafe { warp_group_sum_f32::<16>(part) }
        };
        // This half-warp's scores first, its positions before `p` (their cache rows) and
        // then `p` itself (the new k, counted by the half-warp that owns it): the sums
        // are independent, so their exchanges overlap. Then one softmax over them: the
        // largest counted score, and each counted position's weight against it (no
        // running maximum, so no rescaling chain from one position to the next).
        let mut s = [0.0f32; PER_HALF + 1];
        unroll::<PER_HALF>(|j| s[j] = score(unpack8(kv[j][0])));
        s[PER_HALF] = score(k_new);
        let counts = |j: usize| {
            if j < PER_HALF {
                first + half + HALVES * j < p
            } else {
                owns_p
            }
        };
        let mut m = f32::NEG_INFINITY;
        unroll::<{ PER_HALF + 1 }>(|j| {
            if counts(j) && s[j] > m {
                m = s[j];
            }
        });
        let mut sum = 0.0f32;
        let mut acc = [0.0f32; 8];
        unroll::<{ PER_HALF + 1 }>(|j| {
            // Selects, no branch (an uncounted position's exponential, even of
            // `s - -inf`, is not used).
            let w = exp_approx(s[j] - m);
            let w = if counts(j) { w } else { 0.0 };
            let vv = if j < PER_HALF { unpack8(kv[j][1]) } else { v_new };
            sum += w;
            unroll::<8>(|e| acc[e] = fma(w, vv[e], acc[e]));
        });

        // The warp's two half-warps merged through exchanges (lane `l` and `l + 16` hold
        // the same elements), then the CTA's warps through shared memory.
        // SAFETY: every lane of every warp runs these exchanges (straight-line code).
        let other = unsafe {
            let x = |v: f32| warp_xor_f32(v, 16);
            let mut o = [0.0f32; 8];
            unroll::<8>(|e| o[e] = x(acc[e]));
            (x(m), x(sum), o)
        };
        let (m, sum, acc) = merge((m, sum, acc), other);
        let warps = attn_warps().as_mut_ptr();
        // SAFETY: `tid / 32 < ATTN_WARPS`, `l < 16`: inside the ATTN_WARPS x PARTIAL
        // array; the first half-warp writes (one writer per slot).
        unsafe {
            if half % 2 == 0 {
                let row = warps.add((tid / 32) * PARTIAL);
                if l == 0 {
                    row.write(m);
                    row.add(1).write(sum);
                }
                unroll::<8>(|e| row.add(4 + 8 * l + e).write(acc[e]));
            }
            sync_threads();
        }
        // Thread `tid < 128` combines element `tid` over the warps (the other warps
        // skip it: their issue slots go to the warps that do it).
        let mut part = (f32::NEG_INFINITY, 0.0f32, [0.0f32; 1]);
        if tid < HEAD_DIM {
            unroll::<ATTN_WARPS>(|w| {
                // SAFETY: `w < ATTN_WARPS`, `4 + tid < PARTIAL`: written before the barrier.
                let theirs = unsafe {
                    let row = warps.add(w * PARTIAL);
                    (row.read(), row.add(1).read(), [row.add(4 + tid).read()])
                };
                part = merge(part, theirs);
            });
        }
        let (big, total, [weighted]) = part;
        // This CTA's result goes into the first CTA's inbox, `[max, sum, -, -, acc[128]]`
        // at `rank`, by asynchronous stores that complete on its barrier (no fence: the
        // barrier counts their bytes).
        if tid < HEAD_DIM {
            // SAFETY: `split_inbox` is a static shared array (the same address in every
            // CTA) of MAX_SPLITS x PARTIAL words, rank 0 is in the cluster, and its
            // barrier was initialized and made visible before the cluster barrier
            // passed above.
            let inbox = unsafe {
                RemoteShared::map(split_inbox().as_mut_ptr().cast::<u32>(), (MAX_SPLITS * PARTIAL) as u32, bar, 0)
            };
            let at = (rank * PARTIAL) as u32;
            // SAFETY: the first CTA's one phase expects exactly these bytes (each CTA's
            // INBOX_BYTES: 128 weighted sums and thread 0's maximum and sum); each slot
            // has one writer and nothing else touches it in the phase; the first CTA
            // does not exit before the phase completes (it waits for it below).
            unsafe {
                if tid == 0 {
                    let _ = inbox.store(at, big.to_bits());
                    let _ = inbox.store(at + 1, total.to_bits());
                }
                let _ = inbox.store(at + 4 + tid as u32, weighted.to_bits());
            }
        }
        // The new k and v go to the caches last.
        if owns_p {
            let base = p * d + h * HEAD_DIM + 8 * l;
            unroll::<8>(|e| {
                let _ = k_cache.try_write(base + e, to_bf16(k_new[e]));
                let _ = v_cache.try_write(base + e, to_bf16(v_new[e]));
            });
        }
        if rank == 0 && tid < HEAD_DIM {
            // Every CTA's result is in (the phase completes with the last of their bytes;
            // acquired at cluster scope), read from this CTA's own shared memory.
            bar.phase_cursor().wait_acquire(Scope::Cluster);
            let inbox = split_inbox().as_mut_ptr();
            let mut m = [f32::NEG_INFINITY; MAX_SPLITS];
            let mut l = [0.0f32; MAX_SPLITS];
            let mut a = [0.0f32; MAX_SPLITS];
            unroll::<MAX_SPLITS>(|r| {
                if r < splits {
                    // SAFETY: `r < splits <= MAX_SPLITS`, `4 + tid < PARTIAL`: inside the
                    // inbox, written before the phase completed.
                    unsafe {
                        let theirs = inbox.add(r * PARTIAL);
                        m[r] = theirs.read();
                        l[r] = theirs.add(1).read();
                        a[r] = theirs.add(4 + tid).read();
                    }
                }
            });
            let mut big = f32::NEG_INFINITY;
            unroll::<MAX_SPLITS>(|r| {
                if l[r] > 0.0 && m[r] > big {
                    big = m[r];
                }
            });
            let (mut total, mut weighted) = (0.0f32, 0.0f32);
            unroll::<MAX_SPLITS>(|r| {
                let e = exp_approx(m[r] - big);
                let f = if l[r] > 0.0 { e } else { 0.0 };
                total = fma(l[r], f, total);
                weighted = fma(a[r], f, weighted);
            });
            let y = if total > 0.0 { weighted / total } else { 0.0 };
            let _ = out.try_write(h * HEAD_DIM + tid, to_bf16(y));
        }
        mark(&trace, slot, 2);
    }
}

cudadrv::kernel! {
    /// Greedy choice: the index of the largest logit (the smallest such index on a tie),
    /// read from the key [`rms_logits`] left in `best[0]` ([`argmax_index`]), goes to
    /// `token[0]` and to `tokens[p]` (`p = pos[0]`, the position this step decoded), and
    /// `pos[0]` becomes `p + 1`; `best[0]` goes back to 0 for the next step. One CTA of
    /// [`ARGMAX_THREADS`] threads.
    ///
    /// # Safety
    /// None beyond the module's: see the crate docs.
    pub unsafe dependent(manual) fn argmax(
        best: DeviceSliceMut<u64>,
        token: DeviceSliceMut<u32>,
        pos: DeviceSliceMut<u32>,
        tokens: DeviceSliceMut<u32>,
        plan: u32,
        trace: DeviceSliceMut<u64>,
        slot: u32,
    ) {
        mark(&trace, slot, 0);
        pdl_auto(PdlPlan::from_bits(plan));
        mark(&trace, slot, 1);
        if shaped(ARGMAX_THREADS) && thread_idx().x == 0 {
            let a = argmax_index(best.get(0).unwrap_or(0));
            let p = pos.get(0).unwrap_or(0);
            let _ = token.try_write(0, a);
            let _ = tokens.try_write(p as usize, a);
            let _ = pos.try_write(0, p + 1);
            let _ = best.try_write(0, 0);
        }
        mark(&trace, slot, 2);
    }
}
