//! `vec_add`: the smallest useful kernel.

use crate::grid::for_each_index;

/// `c[i] = a[i] + b[i]` for `i < n` (`f32`).
///
/// Launch: any 1-D grid and block (grid-stride loop), no dynamic shared memory, e.g.
/// grid `ceil(n / 256)`, block 256.
///
/// Output: `c[i] == a[i] + b[i]` exactly (one `add.f32`) for every `i < n`; nothing
/// else is written.
///
/// # Safety
/// `a` and `b` readable and `c` writable for `n` `f32`s; `c` does not overlap `a`/`b`
/// except exactly.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn vec_add(a: *const f32, b: *const f32, c: *mut f32, n: u32) {
    for_each_index(n, |i| {
        let i = i as usize;
        // SAFETY: `i < n`, and the host passes buffers of `n` elements.
        unsafe { *c.add(i) = *a.add(i) + *b.add(i) };
    });
}
