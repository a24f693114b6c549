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

/// The per-launch PDL choice that the host's automatic PDL option
/// (`cudadrv::launch::AutoPdl`, `LaunchConfig::auto_pdl`) makes and passes to the kernel
/// as one `u32` parameter: whether the launch may depend programmatically on its
/// predecessor (the kernel must then wait before reading its output) and whether this
/// kernel triggers its dependents at once. The bits are the host type's
/// (`cudadrv::launch::PdlPlan`), which has the same layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(transparent)]
pub struct PdlPlan(u32);

impl PdlPlan {
    /// Bit set when the launch carries programmatic stream serialization.
    pub const WAIT: u32 = 1;
    /// Bit set when the kernel should trigger its dependents right after the wait.
    pub const TRIGGER_EARLY: u32 = 2;

    /// A plan from its bits (as the host wrote them).
    #[inline(always)]
    #[must_use]
    pub const fn from_bits(bits: u32) -> Self {
        Self(bits)
    }

    /// The bits.
    #[inline(always)]
    #[must_use]
    pub const fn bits(self) -> u32 {
        self.0
    }
}

/// The kernel side of automatic PDL, one call at the top of the kernel (before it reads
/// anything an earlier kernel wrote): `griddepcontrol.wait` when the launch may have
/// started early, then `griddepcontrol.launch_dependents` when the host chose an early
/// trigger (a grid of a few blocks). Otherwise the trigger is the grid's exit.
/// Like [`grid_dependency_wait`], a compiler memory barrier.
#[inline(always)]
pub fn pdl_auto(plan: PdlPlan) {
    if plan.0 & PdlPlan::WAIT != 0 {
        grid_dependency_wait();
    }
    if plan.0 & PdlPlan::TRIGGER_EARLY != 0 {
        launch_dependents();
    }
}
