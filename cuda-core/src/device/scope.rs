//! Scopes and state spaces that select among instruction forms.

/// The scope of an mbarrier operation's memory semantics (`.cta` or `.cluster`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scope {
    /// `.cta`: the threads of this CTA.
    Cta,
    /// `.cluster`: the threads of every CTA in this cluster.
    Cluster,
}

/// The scope of a `fence.sc` / `fence.acq_rel`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FenceScope {
    /// `.cta`: this CTA.
    Cta,
    /// `.cluster`: this cluster (PTX 7.8, sm_90).
    #[cfg(any(doc, all(target_feature = "sm_90", target_feature = "ptx78")))]
    #[cfg_attr(
        any(docsrs, all(doc, target_arch = "nvptx64")),
        doc(cfg(all(target_feature = "sm_90", target_feature = "ptx78")))
    )]
    Cluster,
    /// `.gpu`: every thread on this GPU.
    Gpu,
    /// `.sys`: the whole system, host and peers included.
    Sys,
}

/// The state space a `fence.proxy.async` is limited to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProxySpace {
    /// `.global`.
    Global,
    /// `.shared::cta`.
    SharedCta,
    /// `.shared::cluster`.
    SharedCluster,
}
