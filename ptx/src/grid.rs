//! Grid-stride iteration shared by the kernels.

use cudadrv::device::{global_dim_x, global_idx_x};

/// Calls `f(i)` for each `i` in `0..n` that this thread owns in a 1-D grid-stride loop
/// (`i = blockIdx.x * blockDim.x + threadIdx.x`, step `gridDim.x * blockDim.x`).
#[inline(always)]
pub fn for_each_index(n: u32, mut f: impl FnMut(u32)) {
    let stride = global_dim_x();
    let mut i = global_idx_x();
    while i < n {
        f(i);
        i = match i.checked_add(stride) {
            Some(next) => next,
            None => break,
        };
    }
}
