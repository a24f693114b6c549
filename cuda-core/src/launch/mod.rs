//! Kernel launches (driver API section "Execution Control"): [`LaunchConfig`] with every
//! `cuLaunchKernelEx` attribute, and the launch calls.
//!
//! - [`LaunchConfig`]: grid, block, dynamic shared memory, stream, and up to
//!   [`MAX_LAUNCH_ATTRIBUTES`] [`LaunchAttribute`]s (Programmatic Dependent Launch,
//!   programmatic and launch-completion events, cluster shape and scheduling,
//!   cooperative, priority, memory sync domains, access policy window, device-updatable
//!   graph nodes, shared-memory carveout, NVLink-centric scheduling), kept in compact
//!   fields: the whole configuration is at most 128 bytes, and each launch builds the
//!   driver's `CUlaunchAttribute` array ([`RawAttributes`]) on its stack.
//! - [`launch`]: `cuLaunchKernelEx` with the arguments as a pointer array
//!   ([`KernelArgs`](crate::args::KernelArgs), a tuple).
//! - [`launch_packed`]: `cuLaunchKernelEx` with one packed buffer
//!   ([`PackedArgs`](crate::args::PackedArgs), `CU_LAUNCH_PARAM_BUFFER_POINTER`).
//! - [`launch_checked`]: the packed launch after comparing the buffer's layout with
//!   `cuFuncGetParamInfo`; [`Function::verify_args`](crate::Function::verify_args)
//!   does the check once for a tuple type, so a hot loop can launch unchecked.
//! - [`launch_plain`]: `cuLaunchKernel`, for configurations without attributes.
//! - [`AutoPdl`] / [`LaunchConfig::auto_pdl`]: PDL chosen per launch from the grid and
//!   the function's occupancy (early trigger in tiny grids, wait only beyond), with the
//!   [`PdlPlan`] the kernel passes to `cudadrv::device::pdl_auto`.
//!
//! The launch path allocates nothing, records no event and binds no context: one driver
//! call with a `CUlaunchConfig` built on the stack.
//!
//! # Unsafe policy
//! The launch calls are `unsafe fn`: what a kernel does with its pointer arguments cannot
//! be checked, and the argument types must match the kernel's signature (the checked
//! forms verify the layout, not the meaning). Each documents its contract under
//! `# Safety`. Attribute values are built through the typed constructors of
//! [`LaunchAttribute`]; [`LaunchAttribute::from_raw`] and
//! [`LaunchConfig::raw_stream`] are `unsafe` because they take handles the type cannot
//! check. Every `unsafe` block carries a `// SAFETY:` comment.

mod attr;
mod auto_pdl;
mod call;
mod config;
mod verify;

pub use crate::dim3::Dim3;
pub use attr::{LaunchAttribute, TooManyAttributes};
pub use auto_pdl::{AutoPdl, MAX_TUNE_ROUNDS, MAX_TUNED_SHAPES, PdlPlan};
#[cfg(all(feature = "graph", feature = "alloc"))]
pub(crate) use call::launch_core;
pub(crate) use call::{DriverLaunch, launch_config};
pub use call::{launch, launch_checked, launch_packed, launch_plain};
pub use config::{LaunchConfig, MAX_LAUNCH_ATTRIBUTES, RawAttributes};

impl From<TooManyAttributes> for crate::error::Error {
    fn from(_: TooManyAttributes) -> Self {
        Self::InvalidArgument(
            "launch attribute does not fit the LaunchConfig (at most 8 distinct attributes, \
             of the known IDs and value ranges: see LaunchConfig::set)",
        )
    }
}

#[cfg(test)]
mod tests;
