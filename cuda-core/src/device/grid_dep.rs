//! Programmatic Dependent Launch from the device side: `griddepcontrol` (PTX 7.8, sm_90).
//!
//! A kernel launched with the programmatic-stream-serialization attribute (or behind a
//! programmatic graph edge) may start before its predecessor grid finishes. It must call
//! [`grid_dependency_wait`] before reading anything the predecessor wrote. The
//! predecessor may call [`launch_dependents`] to let the dependent be scheduled early;
//! without it the trigger happens at grid exit.

use super::ptx_asm;

/// `griddepcontrol.wait;` (`cudaGridDependencySynchronize`): blocks until every
/// prerequisite grid has completed and its memory is visible to this thread. Returns at
/// once when the launch has no programmatic dependency. Acts as a compiler memory
/// barrier: no load or store moves across it.
#[inline(always)]
pub fn grid_dependency_wait() {
    // SAFETY: the wait has no precondition.
    unsafe { ptx_asm::griddepcontrol_wait() }
}

/// `griddepcontrol.launch_dependents;` (`cudaTriggerProgrammaticLaunchCompletion`):
/// dependents may be scheduled once every CTA of this grid has issued it or exited.
/// Affects timing only: dependents still see this grid's writes only after their
/// [`grid_dependency_wait`].
#[inline(always)]
pub fn launch_dependents() {
    // SAFETY: a scheduling hint has no precondition.
    unsafe { ptx_asm::griddepcontrol_launch_dependents() }
}
