//! Thread control: warp and cluster barriers, `elect.sync`, Programmatic Dependent Launch
//! (`griddepcontrol`) and `trap`.

/// Writes the thread-control instructions, each `[gate] fn name(args) { "template" }`
/// (`-> bool`: the template sets the predicate `p`; `-> !`: it does not return). All keep
/// the memory clobber, so no load or store moves across them.
macro_rules! control {
    () => {};
    (
        $(#[$meta:meta])* $([$gate:ident])? fn $name:ident $args:tt $(-> $ret:ident)?
        { $($tpl:literal)+ } $($rest:tt)*
    ) => {
        ptx_fn! { [$($gate)?] $(#[$meta])* fn $name $args $(-> $ret)? = concat!($($tpl),+) }
        control!($($rest)*);
    };
    ($(#[$meta:meta])* $([$gate:ident])? fn $name:ident () -> ! { $tpl:literal } $($rest:tt)*) => {
        ptx_fn! {
            [$($gate)?]
            $(#[$meta])*
            fn $name() -> ! {
                // SAFETY: the instruction stops the thread's kernel; it never returns.
                unsafe { asm_args!([$tpl,] () [options(noreturn, nostack)]) }
            }
        }
        control!($($rest)*);
    };
}

control! {
    /// `bar.warp.sync mask;` (PTX 6.0, sm_30): waits for the lanes in `mask` and orders their
    /// memory accesses (`__syncwarp`).
    ///
    /// # Safety
    /// Every lane in `mask` must execute a `bar.warp.sync` with the same mask, and the
    /// executing lane must be in `mask`.
    fn bar_warp_sync(mask: u32) { "bar.warp.sync {mask};" }

    /// `barrier.cluster.arrive;` (PTX 7.8, sm_90): arrives on the cluster barrier with
    /// the default `.release` semantics.
    ///
    /// # Safety
    /// Every non-exited thread of every CTA in the cluster must arrive once, then wait
    /// ([`barrier_cluster_wait`]), before arriving again.
    [sm90_ptx78] fn barrier_cluster_arrive() { "barrier.cluster.arrive;" }

    /// `barrier.cluster.wait;` (PTX 7.8, sm_90): waits for the cluster barrier's current
    /// phase, with the default `.acquire` semantics.
    ///
    /// # Safety
    /// The thread must have arrived ([`barrier_cluster_arrive`] or
    /// [`barrier_cluster_arrive_relaxed`]) since its previous wait.
    [sm90_ptx78] fn barrier_cluster_wait() { "barrier.cluster.wait;" }

    /// `barrier.cluster.arrive.relaxed;` (PTX 8.0, sm_90): arrives without release
    /// semantics (pair with a fence, e.g. after `fence.mbarrier_init`).
    ///
    /// # Safety
    /// As [`barrier_cluster_arrive`].
    [sm90_ptx80] fn barrier_cluster_arrive_relaxed() { "barrier.cluster.arrive.relaxed;" }

    /// `elect.sync _|p, membermask;` (PTX 8.0, sm_90): elects one leader among the
    /// active threads of `membermask`; `true` in the leader only (the same thread for
    /// every caller). Waits for every thread of `membermask`, like `bar.warp.sync`.
    ///
    /// # Safety
    /// Every thread in `membermask` executes an `elect.sync` with the same mask, and the
    /// executing thread is in `membermask`.
    #[must_use]
    [sm90_ptx80] fn elect_sync(membermask: u32) -> bool { "elect.sync _|p, {membermask};" }

    /// `griddepcontrol.wait;` (PTX 7.8, sm_90): waits until every prerequisite grid has
    /// completed and its memory is visible. Keeps the memory clobber: no load may be
    /// hoisted above it.
    ///
    /// # Safety
    /// None; `unsafe` only because this module's functions all are.
    [sm90_ptx78] fn griddepcontrol_wait() { "griddepcontrol.wait;" }

    /// `griddepcontrol.launch_dependents;` (PTX 7.8, sm_90): lets the dependent grid be
    /// scheduled once every CTA of this grid has issued it or exited. Timing only.
    ///
    /// # Safety
    /// None; `unsafe` only because this module's functions all are.
    [sm90_ptx78] fn griddepcontrol_launch_dependents() { "griddepcontrol.launch_dependents;" }

    /// `trap;`: ends the kernel with an error (the launch reports
    /// `CUDA_ERROR_LAUNCH_FAILED`, and the context keeps reporting it).
    ///
    /// # Safety
    /// None; `unsafe` only because this module's functions all are.
    fn trap() -> ! { "trap;" }
}
