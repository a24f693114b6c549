//! Every line of inline PTX in this crate: one `asm!` block per instruction form.
//!
//! The other device modules build typed, safe-where-possible APIs on these raw
//! functions; reach for them directly only when the typed layer lacks a form. Each
//! function emits exactly the instruction named in its doc (the PTX ISA section of the
//! same name describes it), with the PTX ISA version and SM it needs. Forms that need
//! more than the crate is compiled for (`-C target-cpu`, `-C target-feature=+ptxNN`)
//! are not compiled at all, so using one fails the build rather than `ptxas` or the
//! launch.
//!
//! Conventions:
//! - `addr: u32` is an address in the `.shared::cta` window (see [`cvta_to_shared`]),
//!   `cluster_addr: u32` one in the `.shared::cluster` window (see
//!   [`mapa_shared_cluster`]; a `.shared::cta` address of the executing CTA is also a
//!   valid `.shared::cluster` address of it).
//! - `state: u64` is an mbarrier state token returned by an arrive.
//! - Wait forms return their predicate as a `bool`, moved to a register with `selp`.
//! - Instructions that order memory keep `asm!`'s implicit memory clobber (no
//!   `options(nomem)`), so the compiler moves no load or store across them.
//! - LLVM does not treat inline assembly as `convergent` and may duplicate it into
//!   divergent paths, so only barrier forms without `.aligned` appear here (those allow
//!   threads to reach them at different instructions).
//!
//! # Safety
//! All functions here are `unsafe`: each states what it needs. The mbarrier functions
//! additionally need their address to name an 8-byte aligned `.b64` in shared memory that
//! is used only as an mbarrier, initialized (by [`mbarrier_init`], made visible to the
//! caller) and not invalidated: the "live mbarrier" condition below.

// Layout: one file per instruction family (special registers, address windows, thread
// control, fences, approximate math and atomics, mbarrier, cp.async, bulk copies, tensor
// copies, remote stores and reductions, element access), each with one macro that writes the family's functions, a
// form per line under its doc comment (or with docs the macro generates, for families of
// regular forms such as the sized copies and the tensor dimensionalities). Most forms read
// `[gate] fn name(args) -> result { "template" }`: `gate` is one of `device`'s gate macros
// (none: every build; a family whose forms all share one gate applies it itself), and the
// template names each argument `{arg}`. What the families share is below: `ptx_fn!` (the
// function item behind its gate, and the common body), `asm_args!` (the arguments as
// operands) and `asm_pred!` (a predicate as a `bool`).

/// One function of this module: `#[inline(always)] pub unsafe fn` with the attributes
/// given (docs with their `# Safety` section, `#[must_use]`), compiled behind `[gate]`: one
/// of `device`'s gate macros (`[sm90_ptx80]`: `sm90_ptx80!`, so PTX ISA 8.0 and sm_90),
/// `["sm_90", "ptx81"]` (`requires!` of those features), or `[]` for every build.
///
/// The family macros write `$body`, or give the template of an instruction (`= "template"`,
/// `{N}` for a const generic `N`) for the common body: the arguments as inputs, `nostack`,
/// the memory clobber kept, and no result or (`-> bool`) the predicate `p` it sets.
macro_rules! ptx_fn {
    (@gate [] $item:item) => {
        $item
    };
    (@gate [$gate:ident] $item:item) => {
        $gate! { $item }
    };
    (@gate [$sm:literal, $ptx:literal] $item:item) => {
        requires!($sm, $ptx; $item);
    };
    (
        $gate:tt $(#[$meta:meta])*
        fn $name:ident $(<const $n:ident: u32>)? ($($args:tt)*) = $tpl:expr
    ) => {
        ptx_fn! {
            $gate
            $(#[$meta])*
            fn $name $(<const $n: u32>)? ($($args)*) {
                // SAFETY: forwarded to the caller (the `# Safety` section above; nothing where
                // it says None); the memory clobber keeps loads and stores on their side.
                unsafe { asm_args!([$tpl, $($n = const $n,)?] ($($args)*) [options(nostack)]) };
            }
        }
    };
    ($gate:tt $(#[$meta:meta])* fn $name:ident ($($args:tt)*) -> bool = $tpl:expr) => {
        ptx_fn! {
            $gate
            $(#[$meta])*
            fn $name($($args)*) -> bool {
                // SAFETY: forwarded to the caller.
                unsafe { asm_pred!([$tpl] ($($args)*) [options(nostack)]) }
            }
        }
    };
    (
        $gate:tt $(#[$meta:meta])*
        fn $name:ident $(<const $n:ident: u32>)? ($($args:tt)*) $(-> $ret:ty)? $body:block
    ) => {
        ptx_fn! { @gate $gate
            $(#[$meta])*
            #[inline(always)]
            pub unsafe fn $name $(<const $n: u32>)? ($($args)*) $(-> $ret)? $body
        }
    };
}

/// `asm!(before.. inputs.. after..)` whose inputs are the arguments `(args)` of the
/// function it is in, in order, each named after itself (`{addr}` in the template) in the
/// register class of its type: `u16` `reg16`, `u32` `reg32`, `u64` and pointers `reg64`;
/// a `[u32; 4]` vector is four `reg32` inputs `{v0}` .. `{v3}`.
/// Arguments that choose the template instead (`Scope`, `FenceScope`, `Option<_>`) are
/// not operands.
macro_rules! asm_args {
    ([$($before:tt)*] ($($args:tt)*) [$($after:tt)*]) => {
        asm_args!(@ [$($before)*] [$($after)*] $($args)*,)
    };
    (@ [$($before:tt)*] [$($after:tt)*] $(,)?) => {
        ::core::arch::asm!($($before)* $($after)*)
    };
    (@ [$($b:tt)*] $after:tt $a:ident: u16, $($rest:tt)*) => {
        asm_args!(@ [$($b)* $a = in(reg16) $a,] $after $($rest)*)
    };
    (@ [$($b:tt)*] $after:tt $a:ident: u32, $($rest:tt)*) => {
        asm_args!(@ [$($b)* $a = in(reg32) $a,] $after $($rest)*)
    };
    (@ [$($b:tt)*] $after:tt $a:ident: u64, $($rest:tt)*) => {
        asm_args!(@ [$($b)* $a = in(reg64) $a,] $after $($rest)*)
    };
    (@ [$($b:tt)*] $after:tt $a:ident: *const $t:ty, $($rest:tt)*) => {
        asm_args!(@ [$($b)* $a = in(reg64) $a,] $after $($rest)*)
    };
    (@ [$($b:tt)*] $after:tt $a:ident: *mut $t:ty, $($rest:tt)*) => {
        asm_args!(@ [$($b)* $a = in(reg64) $a,] $after $($rest)*)
    };
    (@ [$($b:tt)*] $after:tt $a:ident: [u32; 4], $($rest:tt)*) => {
        asm_args!(
            @ [$($b)* v0 = in(reg32) $a[0], v1 = in(reg32) $a[1], v2 = in(reg32) $a[2],
            v3 = in(reg32) $a[3],] $after $($rest)*
        )
    };
    (@ $before:tt $after:tt $a:ident: Scope, $($rest:tt)*) => {
        asm_args!(@ $before $after $($rest)*)
    };
    (@ $before:tt $after:tt $a:ident: FenceScope, $($rest:tt)*) => {
        asm_args!(@ $before $after $($rest)*)
    };
    (@ $before:tt $after:tt $a:ident: Option<$t:ident>, $($rest:tt)*) => {
        asm_args!(@ $before $after $($rest)*)
    };
}

/// `asm_args!` for an instruction that sets a predicate `p`: declares `p`, moves it to a
/// register with `selp` and evaluates to it as a `bool`.
// Its users (the waits, `elect.sync`) need sm_80 and PTX 7.0 at least.
#[cfg_attr(
    not(any(doc, all(target_feature = "sm_80", target_feature = "ptx70"))),
    allow(unused_macros)
)]
macro_rules! asm_pred {
    ([$($tpl:expr),+ $(,)?] $args:tt [$($after:tt)*]) => {{
        let done: u32;
        asm_args!(
            [
                "{{", ".reg .pred p;", $($tpl,)+ "selp.u32 {done}, 1, 0, p;", "}}",
                done = out(reg32) done,
            ]
            $args
            [$($after)*]
        );
        done != 0
    }};
}

mod access;
mod address;
mod bulk;
mod control;
mod cp_async;
mod fence;
mod math;
mod mbarrier;
mod remote;
mod sreg;
mod symbols;
mod tensor;
mod warp;

pub use self::access::*;
pub use self::address::*;
pub use self::control::*;
pub use self::fence::*;
pub use self::math::*;
pub use self::sreg::*;
pub use self::warp::*;

// A family whose forms all need more than the build's SM or PTX ISA is empty there, and
// so would be its re-export (a plain `cfg`: a `doc(cfg)` here would join every item's).
#[cfg(any(doc, all(target_feature = "sm_90", target_feature = "ptx80")))]
pub use self::bulk::*;
#[cfg(any(doc, all(target_feature = "sm_80", target_feature = "ptx70")))]
pub use self::cp_async::*;
#[cfg(any(doc, all(target_feature = "sm_80", target_feature = "ptx70")))]
pub use self::mbarrier::*;
#[cfg(any(doc, all(target_feature = "sm_90", target_feature = "ptx81")))]
pub use self::remote::*;
#[cfg(any(doc, all(target_feature = "sm_90", target_feature = "ptx80")))]
pub use self::tensor::*;
