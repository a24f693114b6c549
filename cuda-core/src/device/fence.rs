//! Memory fences: `fence.sc`, `fence.acq_rel`, `fence.proxy.async`,
//! `fence.mbarrier_init`.

use super::ptx_asm;
use super::scope::FenceScope;
#[cfg(any(doc, all(target_feature = "sm_90", target_feature = "ptx80")))]
use super::scope::ProxySpace;

/// `fence.sc.<scope>;`: sequentially consistent fence.
#[inline(always)]
pub fn fence_sc(scope: FenceScope) {
    // SAFETY: a fence has no precondition.
    unsafe { ptx_asm::fence_sc(scope) }
}

/// `fence.acq_rel.<scope>;`: acquire-release fence (`__threadfence_block` for
/// [`FenceScope::Cta`], `__threadfence` for [`FenceScope::Gpu`], `__threadfence_system`
/// for [`FenceScope::Sys`]).
#[inline(always)]
pub fn fence_acq_rel(scope: FenceScope) {
    // SAFETY: a fence has no precondition.
    unsafe { ptx_asm::fence_acq_rel(scope) }
}

/// `fence.mbarrier_init.release.cluster;` (PTX 8.0, sm_90): releases this thread's prior
/// `mbarrier.init`s to the cluster. Follow it with a cluster barrier
/// ([`cluster_arrive_relaxed`](super::cluster::cluster_arrive_relaxed) +
/// [`cluster_wait`](super::cluster::cluster_wait)) before other CTAs use the barriers.
#[cfg(any(doc, all(target_feature = "sm_90", target_feature = "ptx80")))]
#[inline(always)]
pub fn fence_mbarrier_init() {
    // SAFETY: a fence has no precondition.
    unsafe { ptx_asm::fence_mbarrier_init_release_cluster() }
}

/// `fence.proxy.async{.space};` (PTX 8.0, sm_90): orders this thread's generic-proxy
/// accesses with async-proxy accesses (TMA, bulk copies) to `space`, or to every state
/// space for `None`.
#[cfg(any(doc, all(target_feature = "sm_90", target_feature = "ptx80")))]
#[inline(always)]
pub fn fence_proxy_async(space: Option<ProxySpace>) {
    // SAFETY: a fence has no precondition.
    unsafe { ptx_asm::fence_proxy_async(space) }
}
