//! `mbarrier`: init, inval, arrive (local, remote, with tx-count), expect-tx, complete-tx,
//! pending count and the test / try waits.

#[cfg(any(doc, all(target_feature = "sm_90", target_feature = "ptx80")))]
use crate::device::scope::Scope;

/// Writes the mbarrier instructions, each `[gate] fn name(args) -> result { template }`:
/// no result, `-> u64` (the phase's state token, `{state}` in the template), `-> bool`
/// (a wait's predicate `p`) or `-> u32` (`pending_count`, which only decodes a token:
/// `pure`, no memory access; the others keep the memory clobber). The template is string
/// pieces and selectors: `scope` stands for `.cta` / `.cluster`, `hint_ns` for
/// `, {hint_ns}` when a suspend-time hint is given and for nothing otherwise.
macro_rules! mbarrier {
    () => {};
    (
        $(#[$meta:meta])* $([$gate:ident])? fn $name:ident $args:tt $(-> $ret:ident)?
        { $($tpl:tt)+ } $($rest:tt)*
    ) => {
        ptx_fn! {
            [$($gate)?]
            $(#[$meta])*
            fn $name $args $(-> $ret)? {
                // SAFETY: forwarded to the caller.
                unsafe { mbarrier!(@asm [$($ret)?] [] $args [] $($tpl)+) }
            }
        }
        mbarrier!($($rest)*);
    };
    // The instruction, once the template is complete: `@asm [result] [inputs after the
    // arguments..] (args) [template pieces]`.
    (@asm [] [$($after:tt)*] $args:tt [$($piece:expr),*]) => {
        asm_args!([concat!($($piece),*),] $args [$($after)* options(nostack)])
    };
    (@asm [u64] [$($after:tt)*] $args:tt [$($piece:expr),*]) => {{
        let state: u64;
        asm_args!(
            [concat!($($piece),*), state = out(reg64) state,]
            $args
            [$($after)* options(nostack)]
        );
        state
    }};
    (@asm [bool] [$($after:tt)*] $args:tt [$($piece:expr),*]) => {
        asm_pred!([concat!($($piece),*)] $args [$($after)* options(nostack)])
    };
    (@asm [u32] [] $args:tt [$($piece:expr),*]) => {{
        let count: u32;
        asm_args!(
            [concat!($($piece),*), count = out(reg32) count,]
            $args
            [options(pure, nomem, nostack, preserves_flags)]
        );
        count
    }};
    // The template, concatenated piece by piece: `@asm [result] [inputs after the
    // arguments..] (args) [pieces so far] rest of the template`.
    (@asm $out:tt $after:tt $args:tt [$($piece:expr),*] $next:literal $($rest:tt)*) => {
        mbarrier!(@asm $out $after $args [$($piece,)* $next] $($rest)*)
    };
    (@asm $out:tt $after:tt $args:tt $pieces:tt $selector:ident $($rest:tt)*) => {
        mbarrier!(@select $selector $selector $out $after $args $pieces $($rest)*)
    };
    (@select scope $scope:ident $out:tt $after:tt $args:tt [$($piece:expr),*] $($rest:tt)*) => {
        match $scope {
            Scope::Cta => mbarrier!(@asm $out $after $args [$($piece,)* ".cta"] $($rest)*),
            Scope::Cluster => {
                mbarrier!(@asm $out $after $args [$($piece,)* ".cluster"] $($rest)*)
            }
        }
    };
    (
        @select hint_ns $hint:ident $out:tt [$($after:tt)*] $args:tt [$($piece:expr),*]
        $($rest:tt)*
    ) => {
        match $hint {
            None => mbarrier!(@asm $out [$($after)*] $args [$($piece),*] $($rest)*),
            Some($hint) => mbarrier!(
                @asm $out [$($after)* $hint = in(reg32) $hint,] $args
                [$($piece,)* ", {hint_ns}"] $($rest)*
            ),
        }
    };
}

mbarrier! {
    /// `mbarrier.init.shared::cta.b64 [addr], count;` (PTX 7.0, sm_80): phase 0, `count`
    /// expected arrivals, tx-count 0.
    ///
    /// # Safety
    /// `addr` must name an 8-byte aligned `.b64` in this CTA's shared memory that no
    /// other thread accesses concurrently; `count` must be in `1..2^20`.
    [sm80_ptx70] fn mbarrier_init(addr: u32, count: u32) {
        "mbarrier.init.shared::cta.b64 [{addr}], {count};"
    }

    /// `mbarrier.inval.shared::cta.b64 [addr];` (PTX 7.0, sm_80): ends the object's life as
    /// an mbarrier so its memory can be reused.
    ///
    /// # Safety
    /// Live mbarrier that no thread uses after (or during) this call.
    [sm80_ptx70] fn mbarrier_inval(addr: u32) { "mbarrier.inval.shared::cta.b64 [{addr}];" }

    /// `mbarrier.arrive.shared::cta.b64 state, [addr];` (PTX 7.0, sm_80): one arrival with
    /// the default `.release.cta` semantics; returns the phase's state token.
    ///
    /// # Safety
    /// Live mbarrier.
    [sm80_ptx70] fn mbarrier_arrive(addr: u32) -> u64 {
        "mbarrier.arrive.shared::cta.b64 {state}, [{addr}];"
    }

    /// `mbarrier.arrive.noComplete.shared::cta.b64 state, [addr], count;` (PTX 7.0,
    /// sm_80): `count` arrivals that must not complete the phase.
    ///
    /// # Safety
    /// Live mbarrier, and the phase must still need more than `count` arrivals (it is
    /// undefined behavior for this arrive to complete the phase).
    [sm80_ptx70] fn mbarrier_arrive_no_complete(addr: u32, count: u32) -> u64 {
        "mbarrier.arrive.noComplete.shared::cta.b64 {state}, [{addr}], {count};"
    }

    /// `mbarrier.pending_count.b64 count, state;` (PTX 7.0, sm_80): arrivals still pending
    /// in the phase `state` was taken in, as of that arrive.
    ///
    /// # Safety
    /// `state` must come from an arrive on a live mbarrier.
    #[must_use]
    [sm80_ptx70] fn mbarrier_pending_count(state: u64) -> u32 {
        "mbarrier.pending_count.b64 {count}, {state};"
    }

    /// `mbarrier.test_wait.shared::cta.b64 p, [addr], state;` (PTX 7.0, sm_80):
    /// non-blocking; whether the phase of `state` has completed.
    ///
    /// # Safety
    /// Live mbarrier; `state` from an arrive on it in its current or preceding phase.
    #[must_use]
    [sm80_ptx70] fn mbarrier_test_wait(addr: u32, state: u64) -> bool {
        "mbarrier.test_wait.shared::cta.b64 p, [{addr}], {state};"
    }

    /// `mbarrier.test_wait.parity.shared::cta.b64 p, [addr], parity;` (PTX 7.1, sm_80):
    /// non-blocking; whether the phase with parity `parity` (0 even, 1 odd) has completed.
    ///
    /// # Safety
    /// Live mbarrier; `parity` must be that of its current or immediately preceding phase.
    #[must_use]
    [sm80_ptx71] fn mbarrier_test_wait_parity(addr: u32, parity: u32) -> bool {
        "mbarrier.test_wait.parity.shared::cta.b64 p, [{addr}], {parity};"
    }

    /// `mbarrier.arrive.shared::cta.b64 state, [addr], count;` (PTX 7.8, sm_90): `count`
    /// arrivals at once.
    ///
    /// # Safety
    /// Live mbarrier; `count` in `1..2^20`.
    [sm90_ptx78] fn mbarrier_arrive_count(addr: u32, count: u32) -> u64 {
        "mbarrier.arrive.shared::cta.b64 {state}, [{addr}], {count};"
    }

    /// `mbarrier.try_wait.shared::cta.b64 p, [addr], state{, hint};` (PTX 7.8, sm_90):
    /// potentially blocking (the thread may be suspended up to a system limit, or about
    /// `hint_ns` nanoseconds); whether the phase of `state` has completed. Default
    /// `.acquire.cta` semantics.
    ///
    /// # Safety
    /// Live mbarrier; `state` from an arrive on it in its current or preceding phase.
    #[must_use]
    [sm90_ptx78] fn mbarrier_try_wait(addr: u32, state: u64, hint_ns: Option<u32>) -> bool {
        "mbarrier.try_wait.shared::cta.b64 p, [{addr}], {state}" hint_ns ";"
    }

    /// `mbarrier.try_wait.parity.shared::cta.b64 p, [addr], parity{, hint};` (PTX 7.8,
    /// sm_90): potentially blocking; whether the phase with parity `parity` (0 even,
    /// 1 odd) has completed. Default `.acquire.cta` semantics.
    ///
    /// # Safety
    /// Live mbarrier; `parity` that of its current or immediately preceding phase.
    #[must_use]
    [sm90_ptx78] fn mbarrier_try_wait_parity(addr: u32, parity: u32, hint_ns: Option<u32>) -> bool {
        "mbarrier.try_wait.parity.shared::cta.b64 p, [{addr}], {parity}" hint_ns ";"
    }

    /// `mbarrier.try_wait.acquire.{cta,cluster}.shared::cta.b64 p, [addr], state{, hint};`
    /// (PTX 8.0, sm_90): [`mbarrier_try_wait`] with an explicit acquire scope;
    /// `.cluster` makes arrivals released at cluster scope (remote arrivals) visible.
    ///
    /// # Safety
    /// As [`mbarrier_try_wait`].
    #[must_use]
    [sm90_ptx80] fn mbarrier_try_wait_acquire(
        addr: u32,
        state: u64,
        scope: Scope,
        hint_ns: Option<u32>,
    ) -> bool {
        "mbarrier.try_wait.acquire" scope ".shared::cta.b64 p, [{addr}], {state}" hint_ns ";"
    }

    /// `mbarrier.try_wait.parity.acquire.{cta,cluster}.shared::cta.b64 p, [addr], parity{, hint};`
    /// (PTX 8.0, sm_90): [`mbarrier_try_wait_parity`] with an explicit acquire scope.
    ///
    /// # Safety
    /// As [`mbarrier_try_wait_parity`].
    #[must_use]
    [sm90_ptx80] fn mbarrier_try_wait_parity_acquire(
        addr: u32,
        parity: u32,
        scope: Scope,
        hint_ns: Option<u32>,
    ) -> bool {
        "mbarrier.try_wait.parity.acquire" scope ".shared::cta.b64 p, [{addr}], {parity}"
        hint_ns ";"
    }

    /// `mbarrier.arrive.release.{cta,cluster}.shared::cta.b64 state, [addr], count;`
    /// (PTX 8.0, sm_90): `count` arrivals with release semantics at `scope`.
    ///
    /// # Safety
    /// Live mbarrier; `count` in `1..2^20`.
    [sm90_ptx80] fn mbarrier_arrive_release(addr: u32, scope: Scope, count: u32) -> u64 {
        "mbarrier.arrive.release" scope ".shared::cta.b64 {state}, [{addr}], {count};"
    }

    /// `mbarrier.arrive.release.cluster.shared::cluster.b64 _, [cluster_addr], count;`
    /// (PTX 8.0, sm_90): `count` arrivals on an mbarrier of any CTA in the cluster
    /// (address from [`mapa_shared_cluster`](super::mapa_shared_cluster)); no state is returned.
    ///
    /// # Safety
    /// `cluster_addr` must name a live mbarrier of a CTA of this cluster that has not
    /// exited; `count` in `1..2^20`.
    [sm90_ptx80] fn mbarrier_arrive_remote(cluster_addr: u32, count: u32) {
        "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [{cluster_addr}], {count};"
    }

    /// `mbarrier.arrive.expect_tx.release.{cta,cluster}.shared::cta.b64 state, [addr], tx;`
    /// (PTX 8.0, sm_90): raises the tx-count by `tx`, then one arrival.
    ///
    /// # Safety
    /// Live mbarrier; the tx-count must stay within `-(2^20-1)..2^20`.
    [sm90_ptx80] fn mbarrier_arrive_expect_tx(addr: u32, scope: Scope, tx: u32) -> u64 {
        "mbarrier.arrive.expect_tx.release" scope ".shared::cta.b64 {state}, [{addr}], {tx};"
    }

    /// `mbarrier.expect_tx.relaxed.{cta,cluster}.shared::cta.b64 [addr], tx;` (PTX 8.0,
    /// sm_90): raises the tx-count of this CTA's mbarrier by `tx` (no arrival).
    ///
    /// # Safety
    /// Live mbarrier; the tx-count must stay within `-(2^20-1)..2^20`.
    [sm90_ptx80] fn mbarrier_expect_tx(addr: u32, scope: Scope, tx: u32) {
        "mbarrier.expect_tx.relaxed" scope ".shared::cta.b64 [{addr}], {tx};"
    }

    /// `mbarrier.expect_tx.relaxed.{cta,cluster}.shared::cluster.b64 [cluster_addr], tx;`
    /// (PTX 8.0, sm_90): raises the tx-count of an mbarrier of any CTA in the cluster.
    ///
    /// # Safety
    /// `cluster_addr` must name a live mbarrier of a CTA of this cluster that has not
    /// exited; the tx-count must stay within `-(2^20-1)..2^20`.
    [sm90_ptx80] fn mbarrier_expect_tx_cluster_space(cluster_addr: u32, scope: Scope, tx: u32) {
        "mbarrier.expect_tx.relaxed" scope ".shared::cluster.b64 [{cluster_addr}], {tx};"
    }

    /// `mbarrier.complete_tx.relaxed.cluster.shared::cluster.b64 [cluster_addr], tx;`
    /// (PTX 8.0, sm_90): lowers the tx-count by `tx`, as an async copy's completion would;
    /// may complete the phase.
    ///
    /// # Safety
    /// `cluster_addr` must name a live mbarrier of a CTA of this cluster (this CTA's own
    /// `.shared::cta` address qualifies) that has not exited; the tx-count must stay
    /// within `-(2^20-1)..2^20`.
    [sm90_ptx80] fn mbarrier_complete_tx(cluster_addr: u32, tx: u32) {
        "mbarrier.complete_tx.relaxed.cluster.shared::cluster.b64 [{cluster_addr}], {tx};"
    }
}
