//! `vs_transform`: the plain vectorized streaming kernel the asynchronous-copy
//! benchmark compares the bulk-copy pipeline with (same transform, same output), and
//! `vs_spin`, which holds SMs busy for a while (to see what else can run meanwhile).

use cudadrv::device::{block_dim, block_idx, globaltimer, grid_dim, thread_idx};

/// Four `u32`s moved as one 16-byte vector (`ld.global.v4.u32` / `st.global.v4.u32`).
#[derive(Clone, Copy)]
#[repr(C, align(16))]
pub struct U32x4([u32; 4]);

/// `dst[i] = src[i] * 3 + 1` (wrapping `u32`) over `n_vec` 16-byte vectors, one vector
/// per thread per grid-stride step.
///
/// Launch: any 1-D grid and block, no dynamic shared memory (the benchmark uses
/// `SMs * blocks-per-SM` blocks of 256).
///
/// Output: every `u32` of `dst[..4 * n_vec]` is `src * 3 + 1` of the same index;
/// nothing else is written.
///
/// # Safety
/// `src` readable and `dst` writable for `n_vec` 16-byte aligned vectors, not
/// overlapping.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn vs_transform(src: *const U32x4, dst: *mut U32x4, n_vec: u64) {
    let stride = u64::from(grid_dim().x) * u64::from(block_dim().x);
    let mut i = u64::from(block_idx().x) * u64::from(block_dim().x) + u64::from(thread_idx().x);
    while i < n_vec {
        // SAFETY: `i < n_vec`; the host passes buffers of `n_vec` vectors.
        let v = unsafe { *src.add(i as usize) };
        let w = U32x4([
            v.0[0].wrapping_mul(3).wrapping_add(1),
            v.0[1].wrapping_mul(3).wrapping_add(1),
            v.0[2].wrapping_mul(3).wrapping_add(1),
            v.0[3].wrapping_mul(3).wrapping_add(1),
        ]);
        // SAFETY: as above, for `dst`.
        unsafe { *dst.add(i as usize) = w };
        i += stride;
    }
}

/// Every thread spins until `%globaltimer` has advanced `ns` nanoseconds since it
/// started, then block 0's thread 0 writes 1 to `out[0]`.
///
/// Launch: any grid and block (as many threads as fit on every SM, to keep other work
/// off them), no dynamic shared memory.
///
/// # Safety
/// `out` writable for one `u32`.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn vs_spin(ns: u64, out: *mut u32) {
    let start = globaltimer();
    while globaltimer().wrapping_sub(start) < ns {}
    if block_idx().x == 0 && thread_idx().x == 0 {
        // SAFETY: `out` writable for one `u32` (contract); one writer.
        unsafe { out.write(1) };
    }
}
