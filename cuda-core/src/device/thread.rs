//! Thread, block and grid indices, and CTA / warp barriers.

// Only nvptx64 has these intrinsics; rustdoc on a host target does not resolve the
// function bodies that call them.
#[cfg(target_arch = "nvptx64")]
use core::arch::nvptx;

use super::Dim3;
use super::ptx_asm;

/// `%tid`: this thread's index in its block (`threadIdx`).
#[inline(always)]
#[must_use]
pub fn thread_idx() -> Dim3 {
    // SAFETY: reading special registers has no side effect.
    unsafe {
        Dim3::new(
            nvptx::_thread_idx_x() as u32,
            nvptx::_thread_idx_y() as u32,
            nvptx::_thread_idx_z() as u32,
        )
    }
}

/// `%ntid`: the block's extent (`blockDim`).
#[inline(always)]
#[must_use]
pub fn block_dim() -> Dim3 {
    // SAFETY: reading special registers has no side effect.
    unsafe {
        Dim3::new(
            nvptx::_block_dim_x() as u32,
            nvptx::_block_dim_y() as u32,
            nvptx::_block_dim_z() as u32,
        )
    }
}

/// `%ctaid`: this block's index in the grid (`blockIdx`).
#[inline(always)]
#[must_use]
pub fn block_idx() -> Dim3 {
    // SAFETY: reading special registers has no side effect.
    unsafe {
        Dim3::new(
            nvptx::_block_idx_x() as u32,
            nvptx::_block_idx_y() as u32,
            nvptx::_block_idx_z() as u32,
        )
    }
}

/// `%nctaid`: the grid's extent in blocks (`gridDim`).
#[inline(always)]
#[must_use]
pub fn grid_dim() -> Dim3 {
    // SAFETY: reading special registers has no side effect.
    unsafe {
        Dim3::new(
            nvptx::_grid_dim_x() as u32,
            nvptx::_grid_dim_y() as u32,
            nvptx::_grid_dim_z() as u32,
        )
    }
}

/// `blockIdx.x * blockDim.x + threadIdx.x`, the usual 1-D global index.
#[inline(always)]
#[must_use]
pub fn global_idx_x() -> u32 {
    block_idx().x * block_dim().x + thread_idx().x
}

/// `gridDim.x * blockDim.x`: the stride of a 1-D grid-stride loop.
#[inline(always)]
#[must_use]
pub fn global_dim_x() -> u32 {
    grid_dim().x * block_dim().x
}

/// `%laneid`: this thread's lane in its warp, 0..32.
#[inline(always)]
#[must_use]
pub fn lane_id() -> u32 {
    // SAFETY: reading a special register has no side effect.
    unsafe { ptx_asm::laneid() }
}

/// `bar.sync 0` (`__syncthreads`): waits for every thread of the CTA and orders their
/// memory accesses.
///
/// # Safety
/// Every non-exited thread of the CTA must reach this same barrier (no divergent call).
#[inline(always)]
pub unsafe fn sync_threads() {
    // SAFETY: forwarded to the caller.
    unsafe { nvptx::_syncthreads() }
}

/// `bar.warp.sync mask` (`__syncwarp`): waits for the lanes in `mask` and orders their
/// memory accesses.
///
/// # Safety
/// Every lane in `mask` must call it with the same mask, and the calling lane must be in
/// `mask`.
#[inline(always)]
pub unsafe fn sync_warp(mask: u32) {
    // SAFETY: forwarded to the caller.
    unsafe { ptx_asm::bar_warp_sync(mask) }
}
