//! `while_cond`: the body kernel of a graph WHILE conditional node, driving the loop
//! from device code with `cudaGraphSetConditional`.

use cudadrv::device::{ConditionalHandle, global_idx_x};

/// Increments `*counter` and sets the conditional `handle` to `counter < n` (1 or 0).
///
/// Launch: grid 1, block 1 (only thread 0 acts), no dynamic shared memory, as the body
/// of a WHILE conditional node whose handle is `handle` (or upstream of an IF node).
/// Module linked with `libcudadevrt.a`.
///
/// Output: with `*counter == 0` before the graph launch and the handle's default launch
/// value 1 (`CU_GRAPH_COND_ASSIGN_DEFAULT`, default 1), the body runs `max(n, 1)` times
/// and `*counter == max(n, 1)` afterwards. With default value 0 the body never runs and
/// `*counter` stays 0.
///
/// # Safety
/// `counter` readable and writable; `handle` belongs to the graph this kernel runs in.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn while_cond(counter: *mut u32, n: u32, handle: u64) {
    if global_idx_x() != 0 {
        return;
    }
    // SAFETY: `counter` is valid (kernel contract) and only this thread touches it.
    let c = unsafe {
        let c = counter.read_volatile().wrapping_add(1);
        counter.write_volatile(c);
        c
    };
    // SAFETY: one thread sets the handle, which belongs to this kernel's graph.
    unsafe { ConditionalHandle(handle).set(u32::from(c < n)) };
}
