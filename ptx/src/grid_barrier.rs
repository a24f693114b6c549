//! `grid_barrier`: a hand-made grid-wide barrier on a global counter. It only completes
//! when every block of the grid is resident at once, which a cooperative launch
//! guarantees (and checks).

use core::sync::atomic::{AtomicU32, Ordering};

use cudadrv::device::{FenceScope, block_idx, fence_acq_rel, grid_dim, sync_threads, thread_idx};

/// Thread 0 of each block adds 1 to `*counter` (after `fence.acq_rel.gpu`, so a release),
/// then spins (acquire loads) until the counter reaches `gridDim.x`, and writes the count
/// it last read to `out[blockIdx.x]`; then every thread of the block meets at
/// `__syncthreads`.
///
/// Launch: 1-D grid of at most as many blocks as can be resident together (e.g. one per
/// SM), any block size (the test uses 64), no dynamic shared memory, with
/// `CU_LAUNCH_ATTRIBUTE_COOPERATIVE = 1` so the driver refuses a grid that cannot be
/// co-resident. Zero `*counter` first. A grid whose blocks are not all resident spins
/// forever.
///
/// Output: `*counter == gridDim.x` and `out[b] == gridDim.x` for every block `b` (no
/// block passes the barrier before every block arrived, and nobody adds after that).
///
/// # Safety
/// `counter` valid for one `u32`, 4-byte aligned, zero at launch and touched by nothing
/// else while the kernel runs; `out` writable for `gridDim.x` `u32`s.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn grid_barrier(counter: *mut u32, out: *mut u32) {
    if thread_idx().x == 0 {
        let blocks = grid_dim().x;
        // SAFETY: `counter` is a valid, aligned `u32` that only this kernel's atomic
        // accesses touch while it runs (kernel contract).
        let arrived = unsafe { AtomicU32::from_ptr(counter) };
        // The fence makes the add a release. `fetch_add(.., Ordering::Release)` would not:
        // the NVPTX backend (LLVM 22) emits a plain relaxed `atom.global.add.u32` for an
        // atomic read-modify-write whatever its ordering, while acquire loads do become
        // `ld.acquire`.
        fence_acq_rel(FenceScope::Gpu);
        arrived.fetch_add(1, Ordering::Relaxed);
        let mut seen = arrived.load(Ordering::Acquire);
        while seen < blocks {
            seen = arrived.load(Ordering::Acquire);
        }
        // SAFETY: `blockIdx.x < gridDim.x` and `out` holds `gridDim.x` elements.
        unsafe { out.add(block_idx().x as usize).write(seen) };
    }
    // SAFETY: every thread of the block reaches this barrier (thread 0 rejoins after its
    // spin).
    unsafe { sync_threads() };
}
