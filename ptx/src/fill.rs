//! `fill` and `write_value`: the smallest kernels with a known output, for the launch
//! and graph tests (launch paths, refused launches, attributes, graph nodes).

use cudadrv::device::global_idx_x;

use crate::grid::for_each_index;

/// Value `fill` writes at index `i`: `3 * i + 1` (wrapping `u32`).
#[inline(always)]
#[must_use]
pub const fn fill_value(i: u32) -> u32 {
    i.wrapping_mul(3).wrapping_add(1)
}

/// `out[i] = 3 * i + 1` for `i < n` (see [`fill_value`]).
///
/// Launch: any 1-D grid and block (grid-stride loop), no dynamic shared memory, e.g.
/// grid `ceil(n / 256)`, block 256.
///
/// Output: `out[i] == 3 * i + 1` for every `i < n`; nothing else is written, so `n == 0`
/// writes nothing and never dereferences `out`.
///
/// # Safety
/// `out` writable for `n` `u32`s.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn fill(out: *mut u32, n: u32) {
    for_each_index(n, |i| {
        // SAFETY: `i < n` and `out` holds `n` elements.
        unsafe { out.add(i as usize).write(fill_value(i)) };
    });
}

/// `out[0] = value`, written by the grid's first thread only.
///
/// Launch: grid 1, block 1 (any shape works: only `blockIdx.x * blockDim.x +
/// threadIdx.x == 0` writes), no dynamic shared memory.
///
/// Output: `out[0] == value`; nothing else is written.
///
/// # Safety
/// `out` writable for one `u32`.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn write_value(out: *mut u32, value: u32) {
    if global_idx_x() == 0 {
        // SAFETY: `out` holds one `u32` (kernel contract); one thread writes it.
        unsafe { out.write(value) };
    }
}
