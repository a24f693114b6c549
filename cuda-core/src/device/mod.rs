//! Device-side helpers, compiled only for `nvptx64-nvidia-cuda`.
//!
//! Build with the nightly toolchain, `-Zbuild-std=core`, `-C target-cpu=sm_90` and
//! `-C target-feature=+ptx80` (what `cargo xtask ptx` does for `ptx/`). Every helper is
//! `#[inline(always)]`, so it is emitted into the crate being compiled to PTX.
//!
//! The module also appears in the host documentation (`cfg(doc)`), with every helper
//! whatever SM and PTX ISA it needs; each is marked with what it needs. Rustdoc does not
//! compile function bodies, so the inline PTX is documented on any target, but only an
//! nvptx64 build can call it.
//!
//! - [`grid_dependency_wait`] / [`launch_dependents`]: Programmatic Dependent Launch;
//!   [`pdl_auto`] with the host's per-launch [`PdlPlan`].
//! - [`MBarrier`], [`ArrivalToken`], [`PhaseCursor`], [`ClusterMBarrier`]: asynchronous
//!   barriers, local and across a cluster.
//! - Asynchronous copies: [`cp_async`] (sm_80), bulk copies ([`BulkLoad`],
//!   [`bulk_store`]), tensor copies ([`BulkLoad::tile`], [`TensorMapRef::store_tile`]),
//!   multi-stage rings ([`Ring`], [`RingCursor`]) and [`elect_one`].
//! - Asynchronous stores and reductions into another CTA's shared memory
//!   ([`RemoteShared`]: `st.async`, `red.async`, `cp.reduce.async.bulk`; PTX 8.1).
//! - Device slices: [`DeviceSlice`] / [`DeviceSliceMut`] kernel parameters with
//!   bounds-checked element access, and 16-byte loads ([`DeviceSlice::get_vec16`],
//!   [`DeviceSlice::get8_f32`] for bfloat16 weights; [`DeviceSlice::chunks16`] tests the
//!   alignment once, then [`Chunks16`] reads each chunk with one load).
//! - Reductions: [`warp_sum_f32`], [`warp_max_f32`], [`warp_sum_u32`],
//!   [`warp_argmax_f32`], [`warp_group_sum_f32`] (groups of 2 to 32 lanes),
//!   [`block_sum_f32`] (the whole CTA); lane exchanges [`warp_xor_u32`],
//!   [`warp_xor_f32`]; global atomics on slice elements
//!   ([`DeviceSliceMut::fetch_add`], [`fetch_min`](DeviceSliceMut::fetch_min),
//!   [`fetch_max`](DeviceSliceMut::fetch_max)).
//! - `f32` math: [`exp2_approx`], [`exp_approx`], [`rsqrt_approx`], [`fma`]; the
//!   rounding to bfloat16 in one instruction ([`to_bf16`], [`pack_bf16x2`], sm_80).
//! - [`fence_sc`], [`fence_acq_rel`], [`fence_mbarrier_init`], [`fence_proxy_async`].
//! - Special registers: [`globaltimer`], [`smid`], [`cluster_id`], [`cluster_cta_rank`],
//!   ...; thread indices ([`thread_idx`], ...) and barriers ([`sync_threads`],
//!   [`cluster_sync`], ...).
//! - Shared memory: [`shared_array!`](crate::shared_array),
//!   [`dynamic_shared!`](crate::dynamic_shared), [`to_shared_addr`].
//! - Device-side launch: [`launch_child`] (parameters written by
//!   [`crate::args::write_params_raw`], the host packer's layout code), and
//!   [`ConditionalHandle::set`] for graph conditional nodes, and device graph launch
//!   ([`DeviceGraphExec::launch`] into a [`GraphLaunchStream`],
//!   [`DeviceGraphExec::current`]); all need `libcudadevrt.a`.
//!
//! Helpers that need an SM or PTX ISA version above the build's (`sm_90` / PTX 8.0 for
//! most of them) are not compiled, so using one fails the build instead of `ptxas` or
//! the launch.
//!
//! # Unsafe policy
//! All inline PTX lives in [`ptx_asm`], one `unsafe fn` per instruction form. The other
//! modules wrap it: functions without preconditions (special registers, fences,
//! `griddepcontrol`) are safe; barriers that every thread must reach, device-runtime
//! calls and mbarrier initialization are `unsafe fn`s with a `# Safety` section; the
//! mbarrier handles are created by `unsafe` constructors whose contract (a live barrier
//! used by its protocol) makes their methods safe. Every `unsafe` block carries a
//! `// SAFETY:` comment.

/// Compiles each item only when the build targets SM `$sm` and PTX ISA `$ptx`
/// (`-C target-cpu`, `-C target-feature=+ptxNN`), so that using it in a weaker build
/// fails to compile instead of failing in `ptxas` or at launch; rustdoc always sees it,
/// marked with what it needs.
macro_rules! requires {
    ($sm:literal, $ptx:literal; $($item:item)*) => {$(
        #[cfg(any(doc, all(target_feature = $sm, target_feature = $ptx)))]
        #[cfg_attr(
            any(docsrs, all(doc, target_arch = "nvptx64")),
            doc(cfg(all(target_feature = $sm, target_feature = $ptx)))
        )]
        $item
    )*};
}

/// Items that need PTX ISA 7.0 and sm_80.
macro_rules! sm80_ptx70 {
    ($($item:item)*) => { requires!("sm_80", "ptx70"; $($item)*); };
}

/// Items that need PTX ISA 7.1 and sm_80.
macro_rules! sm80_ptx71 {
    ($($item:item)*) => { requires!("sm_80", "ptx71"; $($item)*); };
}

/// Items that need PTX ISA 7.8 and sm_90.
macro_rules! sm90_ptx78 {
    ($($item:item)*) => { requires!("sm_90", "ptx78"; $($item)*); };
}

/// Items that need PTX ISA 8.0 and sm_90.
macro_rules! sm90_ptx80 {
    ($($item:item)*) => { requires!("sm_90", "ptx80"; $($item)*); };
}

/// Items that need PTX ISA 8.3 and sm_90.
macro_rules! sm90_ptx83 {
    ($($item:item)*) => { requires!("sm_90", "ptx83"; $($item)*); };
}

mod async_copy;
mod fence;
mod math;
mod phase;
pub mod ptx_asm;
mod scope;
mod shared;
mod slice;
requires! {"sm_90", "ptx81";
    mod async_store;
    pub use async_store::RemoteShared;
}
mod sreg;
mod thread;
mod warp;

sm90_ptx78! {
    mod cluster;
}
mod devrt_ffi;
mod graph;
sm90_ptx78! {
    mod grid_dep;
}
mod launch;
mod mbarrier;

pub use crate::dim3::Dim3;
pub use async_copy::{
    Align16, Align128, BulkBytes, Im2colCoords, Ring, RingCursor, TensorCoords, TensorMapRef,
};
sm80_ptx70! {
    pub use async_copy::{
        cp_async, cp_async_cg, cp_async_cg_zfill, cp_async_commit, cp_async_wait,
        cp_async_wait_all, cp_async_zfill,
    };
}
sm90_ptx80! {
    pub use async_copy::{
        BulkLoad, L2Policy, bulk_commit, bulk_load, bulk_load_hint, bulk_prefetch_l2,
        bulk_reduce_add_u32, bulk_store, bulk_store_hint, bulk_wait, bulk_wait_read, elect_one,
        store_global_hint,
    };
}
sm90_ptx80! {
    pub use cluster::cluster_arrive_relaxed;
    pub use fence::{fence_mbarrier_init, fence_proxy_async};
}
sm90_ptx78! {
    pub use cluster::{
        ClusterMBarrier, cluster_arrive, cluster_cta_count, cluster_cta_id, cluster_cta_rank,
        cluster_dim, cluster_grid_dim, cluster_id, cluster_sync, cluster_wait, map_shared_rank,
    };
    pub use grid_dep::{PdlPlan, grid_dependency_wait, launch_dependents, pdl_auto};
}
pub use devrt_ffi::{
    cudaGetParameterBufferV2, cudaGraphLaunch, cudaGraphSetConditional, cudaLaunchDeviceV2,
};
pub use fence::{fence_acq_rel, fence_sc};
pub use graph::{ConditionalHandle, DeviceGraphExec, GraphLaunchStream};
pub use launch::{
    DevRtError, DeviceKernel, DeviceStream, LaunchError, launch_child, launch_child_with_rule,
};
pub use math::{exp_approx, exp2_approx, fma, rsqrt_approx};
sm80_ptx70! {
    pub use math::{pack_bf16x2, to_bf16};
}
pub use mbarrier::{ArrivalToken, MBarrier};
pub use phase::PhaseCursor;
pub use scope::{FenceScope, ProxySpace, Scope};
pub use shared::{DynamicShared, SharedArray, from_shared_addr, to_shared_addr};
pub use slice::{Chunks16, DeviceSlice, DeviceSliceMut, Element, OutOfBounds};
pub use sreg::{clock64, globaltimer, nsmid, smid, warpid};
pub use thread::{
    block_dim, block_idx, global_dim_x, global_idx_x, grid_dim, lane_id, sync_threads, sync_warp,
    thread_idx,
};
pub use warp::{
    block_sum_f32, warp_argmax_f32, warp_group_sum_f32, warp_max_f32, warp_sum_f32, warp_sum_u32,
    warp_xor_f32, warp_xor_u32,
};
