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

// Layout: one file per instruction family, each with one macro that writes the family's
// functions from one line per form (its doc comment above it). The forms read
// `[gate] fn name(args) -> result { "template" }`: `gate` is one of `device`'s
// `smNN_ptxNN!` gates (none: every build), the template names each argument `{arg}`
// (`asm_args!`), and the family macro adds what its forms share (`#[inline(always)]`,
// options, the `unsafe` block with its `// SAFETY:` comment, generated docs).

/// One function of this module: `#[inline(always)] pub unsafe fn` with the attributes
/// given (docs with their `# Safety` section, `#[must_use]`), compiled behind `[gate]`, one
/// of `device`'s gate macros (`[sm90_ptx80]`: `sm90_ptx80!`, so PTX ISA 8.0 and sm_90), or
/// in every build with `[]`. The family macros write `$body`, or give the template of an
/// instruction without result (`= "template"`, `{N}` for a const generic `N`) for the
/// common body: the arguments as inputs, `nostack`, the memory clobber kept.
macro_rules! ptx_fn {
    (@gate [] $item:item) => {
        $item
    };
    (@gate [$gate:ident] $item:item) => {
        $gate! { $item }
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
    (
        [$($gate:ident)?] $(#[$meta:meta])*
        fn $name:ident $(<const $n:ident: u32>)? ($($args:tt)*) $(-> $ret:ty)? $body:block
    ) => {
        ptx_fn! { @gate [$($gate)?]
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

mod address;
mod bulk;
mod control;
mod cp_async;
mod fence;
mod mbarrier;
mod sreg;
mod tensor;

pub use self::address::*;
pub use self::bulk::*;
pub use self::control::*;
pub use self::cp_async::*;
pub use self::fence::*;
pub use self::mbarrier::*;
pub use self::sreg::*;
pub use self::tensor::*;

use core::arch::asm;

// ---------------------------------------------------------------------------------------
// Element loads and stores of device slices (`crate::kernel::DeviceSlice`), and `trap`
// ---------------------------------------------------------------------------------------

/// Implements one generic-address load and store pair for an element width: `ld.$ty` /
/// `st.$ty` through a 64-bit generic address, with the value in a `$reg` register.
macro_rules! elem_access {
    ($(#[$meta:meta])* $ld:ident, $st:ident, $t:ty, $rt:ty, $reg:ident, $ty:literal) => {
        $(#[$meta])*
        #[doc = concat!("`ld.", $ty, " v, [ptr];` (generic address; any PTX ISA and SM).")]
        ///
        /// # Safety
        /// `ptr` must be valid for a read of its type, naturally aligned. A write by
        /// another thread racing with it leaves the old or the new value (a single
        /// naturally aligned access), not undefined behaviour: the access is outside the
        /// Rust memory model.
        #[inline(always)]
        #[must_use]
        pub unsafe fn $ld(ptr: *const $t) -> $t {
            let v: $rt;
            // SAFETY: the caller guarantees `ptr` is readable; the asm reads one element.
            unsafe {
                asm!(
                    concat!("ld.", $ty, " {v}, [{p}];"),
                    v = out($reg) v,
                    p = in(reg64) ptr,
                    options(pure, readonly, nostack, preserves_flags),
                );
            }
            v as $t
        }

        #[doc = concat!("`st.", $ty, " [ptr], v;` (generic address; any PTX ISA and SM).")]
        ///
        /// # Safety
        /// `ptr` must be valid for a write of its type, naturally aligned; racing accesses
        /// as for the load.
        #[inline(always)]
        pub unsafe fn $st(ptr: *mut $t, v: $t) {
            // SAFETY: the caller guarantees `ptr` is writable; the asm writes one element.
            unsafe {
                asm!(
                    concat!("st.", $ty, " [{p}], {v};"),
                    p = in(reg64) ptr,
                    v = in($reg) v as $rt,
                    options(nostack, preserves_flags),
                );
            }
        }
    };
}

elem_access!(ld_u8, st_u8, u8, u16, reg16, "u8");
elem_access!(ld_u16, st_u16, u16, u16, reg16, "u16");
elem_access!(ld_u32, st_u32, u32, u32, reg32, "u32");
elem_access!(ld_u64, st_u64, u64, u64, reg64, "u64");

// ---------------------------------------------------------------------------------------
// Asynchronous stores and reductions into distributed shared memory (Programming Guide
// 4.11.3), completing on an mbarrier of the destination CTA
// ---------------------------------------------------------------------------------------

/// `st.async` of one width: `st.async.shared::cluster.mbarrier::complete_tx::bytes.$ty`.
// Used only where PTX 8.1 is enabled.
#[cfg_attr(not(any(doc, target_feature = "ptx81")), allow(unused_macros))]
macro_rules! st_async {
    ($(#[$meta:meta])* $name:ident, $t:ty, $reg:ident, $ty:literal) => {
        $(#[$meta])*
        #[doc = concat!(
            "`st.async.shared::cluster.mbarrier::complete_tx::bytes.", $ty,
            " [dst], v, [mbar];` (PTX 8.1, sm_90): stores `v` asynchronously at `dst` in a ",
            "CTA of the cluster; when it lands, the mbarrier at `mbar` (in the same CTA as ",
            "`dst`) receives a `complete_tx` of the value's size."
        )]
        ///
        /// # Safety
        /// `dst` and `mbar` are `.shared::cluster` addresses in one CTA of the cluster,
        /// `dst` naturally aligned and writable, `mbar` a live mbarrier whose current phase
        /// expects these bytes; the destination CTA does not exit before the phase
        /// completes.
        #[inline(always)]
        pub unsafe fn $name(dst: u32, v: $t, mbar: u32) {
            // SAFETY: forwarded to the caller.
            unsafe {
                asm!(
                    concat!(
                        "st.async.shared::cluster.mbarrier::complete_tx::bytes.", $ty,
                        " [{d}], {v}, [{m}];"
                    ),
                    d = in(reg32) dst,
                    v = in($reg) v,
                    m = in(reg32) mbar,
                    options(nostack),
                );
            }
        }
    };
}

/// `red.async` of one operation on `u32`:
/// `red.async.relaxed.cluster.shared::cluster.mbarrier::complete_tx::bytes.$op.u32`.
// Used only where PTX 8.1 is enabled.
#[cfg_attr(not(any(doc, target_feature = "ptx81")), allow(unused_macros))]
macro_rules! red_async_u32 {
    ($name:ident, $op:literal) => {
        #[doc = concat!(
            "`red.async.relaxed.cluster.shared::cluster.mbarrier::complete_tx::bytes.", $op,
            ".u32 [dst], v, [mbar];` (PTX 8.1, sm_90): an asynchronous atomic `", $op,
            "` of `v` into the `u32` at `dst` in a CTA of the cluster (relaxed, cluster ",
            "scope); the mbarrier at `mbar` in that CTA receives a `complete_tx` of 4 bytes."
        )]
        ///
        /// # Safety
        /// As [`st_async_u32`].
        #[inline(always)]
        pub unsafe fn $name(dst: u32, v: u32, mbar: u32) {
            // SAFETY: forwarded to the caller.
            unsafe {
                asm!(
                    concat!(
                        "red.async.relaxed.cluster.shared::cluster.mbarrier::complete_tx::bytes.",
                        $op, ".u32 [{d}], {v}, [{m}];"
                    ),
                    d = in(reg32) dst,
                    v = in(reg32) v,
                    m = in(reg32) mbar,
                    options(nostack),
                );
            }
        }
    };
}

requires! {"sm_90", "ptx81";
    st_async!(st_async_u32, u32, reg32, "u32");
    st_async!(st_async_u64, u64, reg64, "u64");
    red_async_u32!(red_async_add_u32, "add");
    red_async_u32!(red_async_min_u32, "min");
    red_async_u32!(red_async_max_u32, "max");
}
