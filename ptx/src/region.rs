//! Kernels for replay regions (`hw_region`) and automatic PDL (`hw_region`,
//! `region_bench`).

use cudadrv::device::{PdlPlan, pdl_auto};

use crate::grid::for_each_index;

/// `out[i] = in[i] * a + b` for `i < n` (wrapping `u32`).
///
/// Launch: any 1-D grid and block (grid-stride loop), no dynamic shared memory.
///
/// # Safety
/// `input` readable and `out` writable for `n` `u32`s (they may be the same buffer).
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn region_axpb(
    input: *const u32,
    out: *mut u32,
    n: u32,
    a: u32,
    b: u32,
) {
    for_each_index(n, |i| {
        let i = i as usize;
        // SAFETY: `i < n`; both buffers hold `n` elements; each thread reads then writes
        // its own element.
        unsafe {
            out.add(i)
                .write(input.add(i).read().wrapping_mul(a).wrapping_add(b))
        };
    });
}

/// `out[i] = in[i] + 1` for `i < n` (wrapping), after `pdl_auto(plan)`: the one-line
/// kernel side of automatic PDL.
///
/// Launch: any 1-D grid and block (grid-stride loop; the benchmark uses one thread per
/// element), no dynamic shared memory, with the plan `LaunchConfig::auto_pdl` returned
/// (or a fixed one: 0 no PDL, 1 wait only, 3 early trigger, with the attribute set for
/// 1 and 3). Ping-pong two buffers: after `L` links from `x0`, the last holds `x0 + L`.
///
/// # Safety
/// `input` readable and `out` writable for `n` `u32`s, not overlapping.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn auto_step_u32(
    input: *const u32,
    out: *mut u32,
    n: u32,
    plan: PdlPlan,
) {
    pdl_auto(plan);
    for_each_index(n, |i| {
        let i = i as usize;
        // SAFETY: `i < n`; both buffers hold `n` elements.
        unsafe { out.add(i).write(input.add(i).read().wrapping_add(1)) };
    });
}

/// [`auto_step_u32`] on 8-byte elements.
///
/// # Safety
/// As [`auto_step_u32`], for `n` `u64`s.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn auto_step_u64(
    input: *const u64,
    out: *mut u64,
    n: u32,
    plan: PdlPlan,
) {
    pdl_auto(plan);
    for_each_index(n, |i| {
        let i = i as usize;
        // SAFETY: `i < n`; both buffers hold `n` elements.
        unsafe { out.add(i).write(input.add(i).read().wrapping_add(1)) };
    });
}

/// Four `u32` lanes, 16-byte aligned (one vector load and store).
#[derive(Clone, Copy)]
#[repr(C, align(16))]
pub struct U32x4(pub [u32; 4]);

/// [`auto_step_u32`] on 16-byte elements: every lane `+ 1`.
///
/// # Safety
/// As [`auto_step_u32`], for `n` 16-byte-aligned elements of four `u32`s.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn auto_step_v4(
    input: *const U32x4,
    out: *mut U32x4,
    n: u32,
    plan: PdlPlan,
) {
    pdl_auto(plan);
    for_each_index(n, |i| {
        let i = i as usize;
        // SAFETY: `i < n`; both buffers hold `n` aligned elements.
        unsafe {
            let v = input.add(i).read().0;
            out.add(i).write(U32x4([
                v[0].wrapping_add(1),
                v[1].wrapping_add(1),
                v[2].wrapping_add(1),
                v[3].wrapping_add(1),
            ]));
        }
    });
}
