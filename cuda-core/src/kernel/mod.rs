//! Typed kernels declared once for both sides, and safe launches.
//!
//! [`kernel!`](crate::kernel!) declares a kernel in a crate that is compiled twice: for
//! `nvptx64-nvidia-cuda` it is the entry point (the body), for the host it is an empty
//! enum implementing [`Kernel`] with the same parameter types. The host loads it as a
//! [`TypedKernel`], which checks those types against `cuFuncGetParamInfo` once; launches
//! then take arguments of exactly those types, so a host/device mismatch in count, order
//! or type does not compile.
//!
//! ```ignore
//! // kernels/src/lib.rs: built for nvptx64 (PTX) and for the host (typed handles).
//! #![no_std]
//! #![cfg_attr(target_arch = "nvptx64", feature(abi_ptx, asm_experimental_arch))]
//! use cudadrv::kernel::{DeviceSlice, DeviceSliceMut};
//!
//! cudadrv::kernel! {
//!     /// `out[i] = a * x[i] + y[i]`.
//!     pub safe fn saxpy(a: f32, x: DeviceSlice<f32>, y: DeviceSlice<f32>, out: DeviceSliceMut<f32>) {
//!         let i = cudadrv::device::global_idx_x() as usize;
//!         if let (Some(x), Some(y)) = (x.get(i), y.get(i)) {
//!             out.write(i, a * x + y); // bounds-checked: traps past the end
//!         }
//!     }
//! }
//! ```
//!
//! The `safe fn` form compiles the body under `#[forbid(unsafe_code)]` and implements
//! [`SafeKernel`]: the body reaches memory only through the bounds-checked slices and
//! the rest of the safe device API. Such a kernel, loaded from the crate's own PTX
//! ([`KernelPtx`], [`KernelModule`]), is launched without `unsafe` inside a [`scope`]:
//!
//! ```no_run
//! # use cudadrv::{Context, DeviceBuffer, LaunchConfig, Stream};
//! # use cudadrv::kernel::{self, DeviceSlice, DeviceSliceMut, KernelModule};
//! # cudadrv::kernel! { pub safe fn saxpy(a: f32, x: DeviceSlice<f32>, y: DeviceSlice<f32>, out: DeviceSliceMut<f32>) {} }
//! # fn f(ctx: &Context, module: &KernelModule) -> cudadrv::Result<()> {
//! let saxpy = module.kernel::<saxpy>()?; // cuModuleGetFunction + cuFuncGetParamInfo
//! let x = DeviceBuffer::from_slice(ctx, &[1.0f32; 4096])?;
//! let y = DeviceBuffer::from_slice(ctx, &[2.0f32; 4096])?;
//! let mut out = DeviceBuffer::<f32>::new(ctx, 4096)?;
//! let stream = Stream::non_blocking(ctx)?;
//! kernel::scope(ctx, |s| {
//!     let lane = s.lane(&stream)?;
//!     lane.launch(&saxpy, &LaunchConfig::new(16, 256), (3.0, &x, &y, &mut out))
//! })?; // waits for the stream: `out` is the host's again
//! # Ok(()) }
//! ```
//!
//! Kernels built elsewhere (C++ from `nvcc`) get a typed handle from the `extern fn`
//! form, checked the same way at load; their launches are `unsafe`
//! ([`TypedKernel::launch`]).
//!
//! # What a safe launch promises, and what it does not
//! Safe code cannot make a launch touch memory it does not own for the launch's whole
//! duration: each [`DeviceSliceMut`] argument is an exclusive borrow and each
//! [`DeviceSlice`] a shared one, both lasting until the [`scope`] has synchronized the
//! stream, and the kernel's accesses are bounds-checked. It does not promise values:
//! threads of one grid that write the same element race (one value wins), and a
//! programmatic (PDL) launch is accepted only for kernels declared `dependent`, which
//! wait for their predecessor first. An index out of range traps (the launch fails and
//! the context reports the error from then on), as a panic would.
//!
//! # Unsafe policy
//! The raw launch and synchronization calls are in the module of [`scope()`]; each `unsafe`
//! block carries a `// SAFETY:` comment. Making a slice from raw parts, trusting PTX
//! ([`KernelPtx::new`]), trusting a function ([`TypedKernel::from_function`]) and
//! implementing [`SafeKernel`] by hand are `unsafe`, with their contracts under
//! `# Safety`.

// The nvptx64 build has the parameter types and `kernel!` only; the host items the docs
// link to exist in host builds (where the links are checked).
#![cfg_attr(target_arch = "nvptx64", allow(rustdoc::broken_intra_doc_links))]

mod params;
pub use params::{DeviceSlice, DeviceSliceMut, Element};
mod unroll;
pub use unroll::unroll;

#[cfg(all(feature = "std", not(target_arch = "nvptx64")))]
pub mod build;
#[cfg(not(target_arch = "nvptx64"))]
mod scoped;
#[cfg(not(target_arch = "nvptx64"))]
mod typed;

#[cfg(not(target_arch = "nvptx64"))]
pub use scoped::{Arg, Args, Lane, MAX_LANES, Owned, Scope, scope};
#[cfg(not(target_arch = "nvptx64"))]
pub use typed::{
    Foreign, Kernel, KernelModule, KernelPtx, Loaded, SafeKernel, Source, TypedKernel,
};

/// The value of a safe kernel's marker global (`__cudadrv_safe_<name>`, see
/// [`kernel!`](crate::kernel!)): the parameter list's fingerprint with whether the entry
/// point waits for its predecessor (`dependent`), so a host declaration that differs in
/// either is not trusted.
#[doc(hidden)]
#[must_use]
pub const fn __safe_marker(params: u64, waits_for_dependency: bool) -> u64 {
    crate::args::signature_mix(params, waits_for_dependency as u64)
}

/// `name` with its NUL (for [`kernel!`](crate::kernel!)'s `Kernel::NAME`).
#[doc(hidden)]
#[must_use]
pub const fn __cstr(with_nul: &'static str) -> &'static core::ffi::CStr {
    match core::ffi::CStr::from_bytes_with_nul(with_nul.as_bytes()) {
        Ok(c) => c,
        Err(_) => panic!("a kernel name must not contain a NUL byte"),
    }
}

/// Declares a kernel once for both sides: on `nvptx64` the entry point, on the host a
/// typed handle (an empty enum of the kernel's name implementing
/// [`Kernel`]) with the same parameter types.
///
/// Forms:
/// - `pub safe fn name(params) { body }`: the body is compiled under
///   `#[forbid(unsafe_code)]`, and the device build emits the marker global
///   `__cudadrv_safe_<name>` (the parameter list's fingerprint and whether the kernel is
///   `dependent`); the host half implements
///   [`SafeKernel`], so launches in a [`kernel::scope`](scope()) are safe once
///   [`TypedKernel::new`] has found the marker in the loaded module.
/// - `pub safe dependent fn name(params) { body }`: as `safe fn`, and the entry point
///   runs `griddepcontrol.wait` before the body, so the kernel may be launched with
///   Programmatic Dependent Launch attributes.
/// - `pub unsafe fn name(params) { body }`: any body (raw pointers, inline PTX); its
///   launches are `unsafe`.
/// - `pub unsafe dependent fn name(params) { body }`: as `unsafe fn`, with
///   `griddepcontrol.wait` before the body, so typed launches may use PDL.
/// - `pub unsafe dependent(manual) fn name(params) { body }`: as `unsafe dependent fn`,
///   but the entry runs no wait: the body itself calls
///   [`grid_dependency_wait`](crate::device::grid_dependency_wait) (or `pdl_auto`) in
///   every CTA before it reads anything a predecessor wrote, so it can first load what
///   no predecessor writes (weights) while the predecessor finishes. Where the wait
///   stands is part of the kernel's safety contract.
/// - `pub extern fn name(params);`: a host handle only, for a kernel built elsewhere
///   (C++ from `nvcc`: declare the C++ parameter types, e.g. `*mut f32` for `float*`).
/// - `pub extern dependent fn name(params);`: as `extern fn`, for a kernel whose code
///   waits with `griddepcontrol.wait` (`cudaGridDependencySynchronize()` in CUDA C++)
///   before it reads its predecessor's output: its typed launches
///   ([`TypedKernel::launch`]) may carry Programmatic Dependent Launch attributes, which
///   are refused for kernels not declared `dependent`.
///
/// Parameter types must implement [`DeviceRepr`](crate::args::DeviceRepr) on both
/// targets: numbers, raw pointers, [`DeviceSlice`],
/// [`DeviceSliceMut`], vector types and
/// [`kernel_struct!`](crate::kernel_struct) types. The device crate needs
/// `#![feature(abi_ptx)]` (nightly, as every Rust kernel does).
///
/// A body that uses `unsafe` does not compile in the `safe` form (the device build
/// reports `usage of an \`unsafe\` block` under the `forbid`).
///
/// On the host, the arguments of a launch must match the declaration:
///
/// ```compile_fail
/// # use cudadrv::{Context, DeviceBuffer, LaunchConfig, Stream};
/// # use cudadrv::kernel::{self, DeviceSlice, DeviceSliceMut, TypedKernel};
/// cudadrv::kernel! { pub safe fn scale(data: DeviceSliceMut<f32>, factor: f32) {} }
/// # fn f(ctx: &Context, k: &TypedKernel<scale>, stream: &Stream) -> cudadrv::Result<()> {
/// let mut data = DeviceBuffer::<f32>::new(ctx, 256)?;
/// kernel::scope(ctx, |s| {
///     // error: the parameters are (data, factor), not (factor, data)
///     s.lane(stream)?.launch(k, &LaunchConfig::new(1, 256), (2.0f32, &mut data))
/// })
/// # }
/// ```
///
/// ```compile_fail
/// # use cudadrv::{Context, DeviceBuffer, LaunchConfig, Stream};
/// # use cudadrv::kernel::{self, DeviceSlice, DeviceSliceMut, TypedKernel};
/// cudadrv::kernel! { pub safe fn scale(data: DeviceSliceMut<f32>, factor: f32) {} }
/// # fn f(ctx: &Context, k: &TypedKernel<scale>, stream: &Stream) -> cudadrv::Result<()> {
/// let data = DeviceBuffer::<f32>::new(ctx, 256)?;
/// kernel::scope(ctx, |s| {
///     // error: a written parameter takes `&mut DeviceBuffer`, not `&DeviceBuffer`
///     s.lane(stream)?.launch(k, &LaunchConfig::new(1, 256), (&data, 2.0f32))
/// })
/// # }
/// ```
#[macro_export]
macro_rules! kernel {
    (
        $(#[$meta:meta])*
        $vis:vis safe fn $name:ident ( $($p:ident : $t:ty),* $(,)? ) $body:block
    ) => {
        $crate::kernel!(@device_safe [$(#[$meta])*] $vis $name ($($p: $t),*) false {} $body);
        $crate::kernel!(@host [$(#[$meta])*] $vis $name ($($t),*) false);
        #[cfg(not(target_arch = "nvptx64"))]
        // SAFETY: the host half of a `safe` declaration; its device half (compiled under
        // `#[forbid(unsafe_code)]`) emits the marker that `TypedKernel::new` checks, so a
        // host-only declaration is never launched safely.
        unsafe impl $crate::kernel::SafeKernel for $name {}
    };
    (
        $(#[$meta:meta])*
        $vis:vis safe dependent fn $name:ident ( $($p:ident : $t:ty),* $(,)? ) $body:block
    ) => {
        $crate::kernel!(
            @device_safe [$(#[$meta])*] $vis $name ($($p: $t),*) true
            { $crate::device::grid_dependency_wait(); } $body
        );
        $crate::kernel!(@host [$(#[$meta])*] $vis $name ($($t),*) true);
        #[cfg(not(target_arch = "nvptx64"))]
        // SAFETY: as for `safe fn`.
        unsafe impl $crate::kernel::SafeKernel for $name {}
    };
    (
        $(#[$meta:meta])*
        $vis:vis unsafe fn $name:ident ( $($p:ident : $t:ty),* $(,)? ) $body:block
    ) => {
        #[cfg(target_arch = "nvptx64")]
        $(#[$meta])*
        #[unsafe(no_mangle)]
        $vis unsafe extern "ptx-kernel" fn $name($($p: $t),*) $body
        $crate::kernel!(@host [$(#[$meta])*] $vis $name ($($t),*) false);
    };
    (
        $(#[$meta:meta])*
        $vis:vis unsafe dependent fn $name:ident ( $($p:ident : $t:ty),* $(,)? ) $body:block
    ) => {
        #[cfg(target_arch = "nvptx64")]
        $(#[$meta])*
        #[unsafe(no_mangle)]
        $vis unsafe extern "ptx-kernel" fn $name($($p: $t),*) {
            $crate::device::grid_dependency_wait();
            $body
        }
        $crate::kernel!(@host [$(#[$meta])*] $vis $name ($($t),*) true);
    };
    (
        $(#[$meta:meta])*
        $vis:vis unsafe dependent(manual) fn $name:ident ( $($p:ident : $t:ty),* $(,)? ) $body:block
    ) => {
        #[cfg(target_arch = "nvptx64")]
        $(#[$meta])*
        #[unsafe(no_mangle)]
        $vis unsafe extern "ptx-kernel" fn $name($($p: $t),*) $body
        $crate::kernel!(@host [$(#[$meta])*] $vis $name ($($t),*) true);
    };
    (
        $(#[$meta:meta])*
        $vis:vis extern fn $name:ident ( $($p:ident : $t:ty),* $(,)? );
    ) => {
        $crate::kernel!(@host [$(#[$meta])*] $vis $name ($($t),*) false);
    };
    (
        $(#[$meta:meta])*
        $vis:vis extern dependent fn $name:ident ( $($p:ident : $t:ty),* $(,)? );
    ) => {
        $crate::kernel!(@host [$(#[$meta])*] $vis $name ($($t),*) true);
    };
    (@device_safe [$(#[$meta:meta])*] $vis:vis $name:ident ($($p:ident : $t:ty),*)
        $waits:literal { $($prologue:tt)* } $body:block) => {
        #[cfg(target_arch = "nvptx64")]
        $(#[$meta])*
        #[unsafe(no_mangle)]
        $vis unsafe extern "ptx-kernel" fn $name($($p: $t),*) {
            #[forbid(unsafe_code)]
            #[inline(always)]
            fn body($($p: $t),*) $body
            $($prologue)*
            body($($p),*)
        }

        // The safe-body marker: only this device build of a `safe` declaration emits it,
        // with the fingerprint of the parameter list and the `dependent` flag;
        // `TypedKernel::new` looks it up.
        #[cfg(target_arch = "nvptx64")]
        const _: () = {
            #[unsafe(export_name = ::core::concat!("__cudadrv_safe_", ::core::stringify!($name)))]
            #[used]
            static SAFE_BODY: u64 = $crate::kernel::__safe_marker(
                <($($t,)*) as $crate::args::KernelArgs>::SIGNATURE,
                $waits,
            );
        };
    };
    (@host [$(#[$meta:meta])*] $vis:vis $name:ident ($($t:ty),*) $waits:literal) => {
        #[cfg(not(target_arch = "nvptx64"))]
        $(#[$meta])*
        // An empty enum: a type without a value, so `let name = module.kernel::<name>()?`
        // binds a variable (a unit struct would make `name` a pattern).
        #[allow(non_camel_case_types)]
        #[derive(Clone, Copy, Debug)]
        $vis enum $name {}

        #[cfg(not(target_arch = "nvptx64"))]
        impl $crate::kernel::Kernel for $name {
            const NAME: &'static ::core::ffi::CStr =
                $crate::kernel::__cstr(::core::concat!(::core::stringify!($name), "\0"));
            type Params = ($($t,)*);
            const WAITS_FOR_DEPENDENCY: bool = $waits;
        }
    };
}
