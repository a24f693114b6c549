//! `chain_step`: one link of a kernel chain for the launch-overhead benchmarks
//! (stream vs stream + PDL vs graph vs graph + PDL).

use cudadrv::device::{grid_dependency_wait, launch_dependents};

use crate::grid::for_each_index;

/// No PDL instruction (plain stream or graph ordering).
pub const CHAIN_NO_PDL: u32 = 0;
/// `griddepcontrol.wait`, then `launch_dependents` at once, then the work (early
/// trigger: the next link may be scheduled while this one runs).
pub const CHAIN_WAIT_TRIGGER_EARLY: u32 = 1;
/// `griddepcontrol.wait`, the work, then `launch_dependents` (late trigger).
pub const CHAIN_WAIT_TRIGGER_LATE: u32 = 2;
/// `griddepcontrol.wait` only (trigger implied at grid exit).
pub const CHAIN_WAIT_ONLY: u32 = 3;

/// `out[i] = in[i] + 1` for `i < n` (wrapping `u32`), with the PDL instructions chosen by
/// `use_pdl_wait`: [`CHAIN_NO_PDL`] (0), [`CHAIN_WAIT_TRIGGER_EARLY`] (1),
/// [`CHAIN_WAIT_TRIGGER_LATE`] (2), [`CHAIN_WAIT_ONLY`] (3); any other value acts as 0.
///
/// Launch: any 1-D grid and block (grid-stride loop), no dynamic shared memory; the
/// benchmark shape is grid 132, block 256. Ping-pong two buffers: link `k` reads the
/// buffer link `k - 1` wrote. With modes 1..=3, launch every link after the first with
/// `CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 1` (or programmatic graph
/// edges).
///
/// Output: after `L` links starting from `x0[i]`, the last buffer holds `x0[i] + L`.
///
/// # Safety
/// `input` readable and `out` writable for `n` `u32`s, not overlapping.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn chain_step(
    input: *const u32,
    out: *mut u32,
    n: u32,
    use_pdl_wait: u32,
) {
    let mode = if use_pdl_wait <= CHAIN_WAIT_ONLY {
        use_pdl_wait
    } else {
        CHAIN_NO_PDL
    };
    if mode != CHAIN_NO_PDL {
        grid_dependency_wait();
    }
    if mode == CHAIN_WAIT_TRIGGER_EARLY {
        launch_dependents();
    }
    for_each_index(n, |i| {
        let i = i as usize;
        // SAFETY: `i < n`; `input` and `out` hold `n` elements.
        unsafe { out.add(i).write(input.add(i).read().wrapping_add(1)) };
    });
    if mode == CHAIN_WAIT_TRIGGER_LATE {
        launch_dependents();
    }
}

/// A kernel that does nothing: launch-overhead benchmarks time the enqueue of this.
///
/// Launch: any shape, no parameters.
#[unsafe(no_mangle)]
pub extern "ptx-kernel" fn empty_kernel() {}
