//! Special registers: one `mov` from a `%` register each.

/// Writes the special-register reads, one a line: `[gate] name: u32 = "%reg";` or
/// `[gate] name: u64 = "%reg";`. All are `#[must_use]` and access no memory; a `u32`
/// register is `pure` (the same value on every read within a thread), a `u64` one (the
/// timers) is read anew at each call.
macro_rules! sreg {
    ($($(#[$meta:meta])* $([$gate:ident])? $name:ident: $ty:ident = $reg:literal;)*) => {$(
        sreg!(@ $ty [$($gate)?] $(#[$meta])* $name $reg);
    )*};
    (@ u32 $gate:tt $(#[$meta:meta])* $name:ident $reg:literal) => {
        sreg!(
            @read u32 reg32 "mov.u32 " [pure, nomem, nostack, preserves_flags] $gate
            $(#[$meta])*
            ///
            /// # Safety
            /// None beyond running on a GPU that has the register; `unsafe` only because this
            /// module's functions all are.
            $name $reg
        );
    };
    (@ u64 $gate:tt $(#[$meta:meta])* $name:ident $reg:literal) => {
        sreg!(
            @read u64 reg64 "mov.u64 " [nomem, nostack, preserves_flags] $gate
            $(#[$meta])*
            ///
            /// # Safety
            /// None; `unsafe` only because this module's functions all are.
            $name $reg
        );
    };
    (
        @read $ty:ident $class:ident $mov:literal [$($opt:ident),+] $gate:tt
        $(#[$meta:meta])* $name:ident $reg:literal
    ) => {
        ptx_fn! {
            $gate
            $(#[$meta])*
            #[must_use]
            fn $name() -> $ty {
                let v: $ty;
                // SAFETY: reading a special register has no side effect.
                unsafe {
                    asm_args!(
                        [concat!($mov, "{v}, ", $reg, ";"), v = out($class) v,]
                        ()
                        [options($($opt),+)]
                    );
                }
                v
            }
        }
    };
}

sreg! {
    /// `mov.u64 d, %globaltimer;`: nanoseconds of the GPU's global timer (PTX 3.1, all SMs).
    /// Read anew at each call (not `pure`).
    globaltimer: u64 = "%globaltimer";

    /// `mov.u64 d, %current_graph_exec;`: the `cudaGraphExec_t` of the device graph the
    /// calling kernel runs in, 0 outside a device-launchable graph (PTX 8.0, all SMs).
    #[cfg(any(doc, target_feature = "ptx80"))]
    #[cfg_attr(
        any(docsrs, all(doc, target_arch = "nvptx64")),
        doc(cfg(target_feature = "ptx80"))
    )]
    current_graph_exec: u64 = "%current_graph_exec";

    /// `mov.u64 d, %clock64;`: the SM's 64-bit cycle counter. Read anew at each call.
    clock64: u64 = "%clock64";

    /// `mov.u32 d, %smid;`: the SM this thread runs on.
    smid: u32 = "%smid";

    /// `mov.u32 d, %nsmid;`: an upper bound on `%smid` + 1 (SM ids need not be contiguous).
    nsmid: u32 = "%nsmid";

    /// `mov.u32 d, %laneid;`: lane within the warp, 0..32.
    laneid: u32 = "%laneid";

    /// `mov.u32 d, %warpid;`: the warp's slot on its SM (may change over time; not the
    /// warp index within the CTA).
    warpid: u32 = "%warpid";

    /// `mov.u32 d, %dynamic_smem_size;`: this launch's dynamic shared memory bytes (PTX 4.1).
    dynamic_smem_size: u32 = "%dynamic_smem_size";

    /// `mov.u32 d, %clusterid.x;` (PTX 7.8, sm_90): the cluster's index in the grid, x.
    [sm90_ptx78] clusterid_x: u32 = "%clusterid.x";

    /// `mov.u32 d, %clusterid.y;` (PTX 7.8, sm_90).
    [sm90_ptx78] clusterid_y: u32 = "%clusterid.y";

    /// `mov.u32 d, %clusterid.z;` (PTX 7.8, sm_90).
    [sm90_ptx78] clusterid_z: u32 = "%clusterid.z";

    /// `mov.u32 d, %nclusterid.x;` (PTX 7.8, sm_90): clusters in the grid, x.
    [sm90_ptx78] nclusterid_x: u32 = "%nclusterid.x";

    /// `mov.u32 d, %nclusterid.y;` (PTX 7.8, sm_90).
    [sm90_ptx78] nclusterid_y: u32 = "%nclusterid.y";

    /// `mov.u32 d, %nclusterid.z;` (PTX 7.8, sm_90).
    [sm90_ptx78] nclusterid_z: u32 = "%nclusterid.z";

    /// `mov.u32 d, %cluster_ctaid.x;` (PTX 7.8, sm_90): this CTA's index in its cluster, x.
    [sm90_ptx78] cluster_ctaid_x: u32 = "%cluster_ctaid.x";

    /// `mov.u32 d, %cluster_ctaid.y;` (PTX 7.8, sm_90).
    [sm90_ptx78] cluster_ctaid_y: u32 = "%cluster_ctaid.y";

    /// `mov.u32 d, %cluster_ctaid.z;` (PTX 7.8, sm_90).
    [sm90_ptx78] cluster_ctaid_z: u32 = "%cluster_ctaid.z";

    /// `mov.u32 d, %cluster_nctaid.x;` (PTX 7.8, sm_90): the cluster's size in CTAs, x.
    [sm90_ptx78] cluster_nctaid_x: u32 = "%cluster_nctaid.x";

    /// `mov.u32 d, %cluster_nctaid.y;` (PTX 7.8, sm_90).
    [sm90_ptx78] cluster_nctaid_y: u32 = "%cluster_nctaid.y";

    /// `mov.u32 d, %cluster_nctaid.z;` (PTX 7.8, sm_90).
    [sm90_ptx78] cluster_nctaid_z: u32 = "%cluster_nctaid.z";

    /// `mov.u32 d, %cluster_ctarank;` (PTX 7.8, sm_90): this CTA's linear rank in its
    /// cluster.
    [sm90_ptx78] cluster_ctarank: u32 = "%cluster_ctarank";

    /// `mov.u32 d, %cluster_nctarank;` (PTX 7.8, sm_90): CTAs in the cluster.
    [sm90_ptx78] cluster_nctarank: u32 = "%cluster_nctarank";
}
