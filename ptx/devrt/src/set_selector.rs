//! `set_selector`: sets a graph conditional handle to a value read from device memory,
//! upstream of an IF, WHILE or SWITCH node (the host chooses the branch by writing the
//! value before each graph launch).

use cudadrv::device::{ConditionalHandle, global_idx_x};

/// Sets the conditional `handle` to `*selector` with `cudaGraphSetConditional`: for a
/// SWITCH node the index of the body that runs (an index past the last body runs none),
/// for IF and WHILE zero is false and anything else true.
///
/// Launch: grid 1, block 1 (only thread 0 acts), no dynamic shared memory, as a kernel
/// node of the graph that owns `handle`, upstream of its conditional node. Module linked
/// with `libcudadevrt.a`.
///
/// Output: no memory is written; the conditional node that follows evaluates `*selector`
/// as read at this kernel's run.
///
/// # Safety
/// `selector` readable for one `u32`; `handle` belongs to the graph this kernel runs in.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn set_selector(handle: u64, selector: *const u32) {
    if global_idx_x() != 0 {
        return;
    }
    // SAFETY: `selector` is readable (kernel contract).
    let value = unsafe { selector.read() };
    // SAFETY: one thread sets the handle, which belongs to this kernel's graph.
    unsafe { ConditionalHandle(handle).set(value) };
}
