//! Memory fences: `fence.sc`, `fence.acq_rel`, `fence.mbarrier_init` and the proxy fences.

use crate::device::scope::FenceScope;
#[cfg(any(doc, all(target_feature = "sm_90", target_feature = "ptx80")))]
use crate::device::scope::ProxySpace;

/// Writes the fences, each `[gate] fn name(args) { "template" }`; a `FenceScope` or
/// `Option<ProxySpace>` argument named in the template (`"fence.sc" scope ";"`) stands for
/// the qualifier it selects (`.cta`, ...; `None`: none). A fence keeps the memory clobber.
macro_rules! fence {
    () => {};
    (
        $(#[$meta:meta])* $([$gate:ident])? fn $name:ident $args:tt { $($tpl:literal)+ }
        $($rest:tt)*
    ) => {
        ptx_fn! { [$($gate)?] $(#[$meta])* fn $name $args = concat!($($tpl),+) }
        fence!($($rest)*);
    };
    (
        $(#[$meta:meta])* $([$gate:ident])? fn $name:ident($scope:ident: FenceScope)
        { $pre:literal $_scope:ident $post:literal } $($rest:tt)*
    ) => {
        fence!(@fn [$($gate)?] $(#[$meta])* fn $name($scope: FenceScope) {
            match $scope {
                FenceScope::Cta => fence!(@asm $pre ".cta" $post),
                #[cfg(any(doc, all(target_feature = "sm_90", target_feature = "ptx78")))]
                FenceScope::Cluster => fence!(@asm $pre ".cluster" $post),
                FenceScope::Gpu => fence!(@asm $pre ".gpu" $post),
                FenceScope::Sys => fence!(@asm $pre ".sys" $post),
            }
        });
        fence!($($rest)*);
    };
    (
        $(#[$meta:meta])* $([$gate:ident])? fn $name:ident($space:ident: Option<ProxySpace>)
        { $pre:literal $_space:ident $post:literal } $($rest:tt)*
    ) => {
        fence!(@fn [$($gate)?] $(#[$meta])* fn $name($space: Option<ProxySpace>) {
            match $space {
                None => fence!(@asm $pre "" $post),
                Some(ProxySpace::Global) => fence!(@asm $pre ".global" $post),
                Some(ProxySpace::SharedCta) => fence!(@asm $pre ".shared::cta" $post),
                Some(ProxySpace::SharedCluster) => fence!(@asm $pre ".shared::cluster" $post),
            }
        });
        fence!($($rest)*);
    };
    (@asm $pre:literal $qualifier:literal $post:literal) => {
        asm_args!([concat!($pre, $qualifier, $post),] () [options(nostack)])
    };
    (@fn $gate:tt $(#[$meta:meta])* fn $name:ident $args:tt { $asm:expr }) => {
        ptx_fn! {
            $gate
            $(#[$meta])*
            fn $name $args {
                // SAFETY: a fence has no precondition.
                unsafe { $asm };
            }
        }
    };
}

fence! {
    /// `fence.sc.{cta,cluster,gpu,sys};` (PTX 6.0, sm_70; `.cluster`: PTX 7.8, sm_90).
    ///
    /// # Safety
    /// None; `unsafe` only because this module's functions all are.
    fn fence_sc(scope: FenceScope) { "fence.sc" scope ";" }

    /// `fence.acq_rel.{cta,cluster,gpu,sys};` (PTX 6.0, sm_70; `.cluster`: PTX 7.8, sm_90).
    ///
    /// # Safety
    /// None; `unsafe` only because this module's functions all are.
    fn fence_acq_rel(scope: FenceScope) { "fence.acq_rel" scope ";" }

    /// `fence.mbarrier_init.release.cluster;` (PTX 8.0, sm_90): makes prior
    /// `mbarrier.init`s visible to the cluster (pair with a cluster barrier).
    ///
    /// # Safety
    /// None; `unsafe` only because this module's functions all are.
    [sm90_ptx80] fn fence_mbarrier_init_release_cluster() { "fence.mbarrier_init.release.cluster;" }

    /// `fence.proxy.async{,.global,.shared::cta,.shared::cluster};` (PTX 8.0, sm_90):
    /// orders generic-proxy accesses with async-proxy ones (TMA, `cp.async.bulk`) for
    /// all state spaces (`None`) or one.
    ///
    /// # Safety
    /// None; `unsafe` only because this module's functions all are.
    [sm90_ptx80] fn fence_proxy_async(space: Option<ProxySpace>) { "fence.proxy.async" space ";" }

    /// `fence.proxy.tensormap::generic.acquire.gpu [tensor_map], 128;` (PTX 8.3, sm_90):
    /// orders a tensor map's modification by the generic proxy (released with
    /// `fence.proxy.tensormap::generic.release` by the writer) before this thread's
    /// later tensor copies that use it. Not needed for a map written by the host before
    /// the launch.
    ///
    /// # Safety
    /// `tensor_map` the generic address of a 128-byte `CUtensorMap` object.
    [sm90_ptx83] fn fence_proxy_tensormap_acquire_gpu(tensor_map: u64) {
        "fence.proxy.tensormap::generic.acquire.gpu [{tensor_map}], 128;"
    }
}
