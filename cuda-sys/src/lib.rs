//! Raw bindings to the CUDA driver API (`libcuda`) and runtime API (`libcudart`),
//! generated from the CUDA 13.0 headers ([`CUDA_VERSION`] = 13000).
//!
//! - Types, constants and enums are in the crate root, under their C names. Enums are
//!   `#[repr(transparent)]` newtypes with associated constants (`CUresult::CUDA_SUCCESS`),
//!   so a value a newer driver returns is never undefined behaviour.
//! - Functions are reached through a table, [`DriverApi`] (from [`driver()`]) and
//!   [`RuntimeApi`] (from [`runtime()`]), whose accessors carry the documented names
//!   (`cuMemAlloc` means the `cuMemAlloc_v2` ABI) and return the function pointer or a
//!   [`MissingSymbol`] naming it. A table never unloads the library it was filled from,
//!   so these pointers stay valid for the rest of the process.
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn core::error::Error>> {
//! let cu = cuda_sys::driver()?;
//! // SAFETY: cuInit has no preconditions.
//! let rc = unsafe { cu.cuInit()?(0) };
//! assert_eq!(rc, cuda_sys::CUresult::CUDA_SUCCESS, "{rc}");
//! # Ok(()) }
//! ```
//!
//! # Binding modes
//! - `loaded` (default): `dlopen("libcuda.so.1")`, then every entry through
//!   `cuGetProcAddress_v2` with the ABI version that `cudaTypedefs.h` encodes in its
//!   `PFN_<name>_v<version>` typedef. An older driver still loads: what it lacks is
//!   reported by name when called. Per-thread default stream variants are a
//!   [`LoadOptions`] switch. libcudart is opened with `dlopen` + `dlsym`.
//! - `linked`: `extern "C"` declarations with `#[link(name = "cuda")]` and
//!   `#[link(name = "cudart")]`. If both features are on, `linked` wins.
//!
//! # Unsafe policy
//! Every driver or runtime function is `unsafe` to call, with the C function's contract.
//! The crate's own unsafe code (dlopen, the once-cell, transmuting resolved addresses to
//! typed function pointers) is explained at each block.
#![no_std]
#![warn(missing_docs)]

#[cfg(not(any(feature = "loaded", feature = "linked")))]
compile_error!("cuda-sys needs one binding mode: feature `loaded` (default) or `linked`");

mod abi;
pub mod loader;
mod once;
mod result;
mod table;

/// Generated types, constants and layout tests.
#[rustfmt::skip]
#[allow(
    non_camel_case_types,
    non_snake_case,
    non_upper_case_globals,
    missing_docs,
    unsafe_op_in_unsafe_fn,
    clippy::all,
    rustdoc::all,
    unpredictable_function_pointer_comparisons
)]
mod types {
    include!("generated/types.rs");
}
pub use types::*;

#[rustfmt::skip]
#[allow(non_snake_case, clippy::all, missing_docs)]
mod driver_fns {
    include!("generated/driver_fns.rs");
}
pub use driver_fns::{DRIVER_ENTRIES, DriverApi};

#[rustfmt::skip]
#[allow(non_snake_case, clippy::all, missing_docs)]
mod runtime_fns {
    include!("generated/runtime_fns.rs");
}
pub use runtime_fns::{RUNTIME_ENTRIES, RuntimeApi};

#[cfg(test)]
#[rustfmt::skip]
#[allow(non_snake_case)]
mod pfn_check {
    include!("generated/pfn_check.rs");
}

#[rustfmt::skip]
mod results {
    include!("generated/results.rs");
}

pub use loader::{Library, LoadError};
pub use result::MissingSymbol;

/// The CUDA header version these bindings were generated from (`13000` = CUDA 13.0).
pub const HEADER_VERSION: u32 = CUDA_VERSION;

/// `CU_LAUNCH_PARAM_END`: terminates the `extra` array of `cuLaunchKernel`.
pub const CU_LAUNCH_PARAM_END: *mut core::ffi::c_void = core::ptr::null_mut();
/// `CU_LAUNCH_PARAM_BUFFER_POINTER`: next `extra` entry points to the packed parameters.
pub const CU_LAUNCH_PARAM_BUFFER_POINTER: *mut core::ffi::c_void =
    core::ptr::without_provenance_mut(1);
/// `CU_LAUNCH_PARAM_BUFFER_SIZE`: next `extra` entry points to a `size_t` with their size.
pub const CU_LAUNCH_PARAM_BUFFER_SIZE: *mut core::ffi::c_void =
    core::ptr::without_provenance_mut(2);
/// `CU_STREAM_LEGACY`: the legacy default stream handle.
pub const CU_STREAM_LEGACY: CUstream = core::ptr::without_provenance_mut(1);
/// `CU_STREAM_PER_THREAD`: the per-thread default stream handle.
pub const CU_STREAM_PER_THREAD: CUstream = core::ptr::without_provenance_mut(2);
/// `CU_DEVICE_CPU`: the host as a device ordinal (memory advice, prefetch).
pub const CU_DEVICE_CPU: CUdevice = -1;
/// `CU_DEVICE_INVALID`.
pub const CU_DEVICE_INVALID: CUdevice = -2;

/// One C function of a table: what the loader asks for.
#[derive(Clone, Copy, Debug)]
pub struct Entry {
    /// The documented name (`cuMemAlloc`).
    pub name: &'static str,
    /// The exported, versioned symbol with a NUL (`cuMemAlloc_v2\0`).
    pub symbol: &'static str,
    /// Driver: the name for `cuGetProcAddress` with a NUL. Runtime: the per-thread
    /// default stream symbol with a NUL, or just the NUL.
    pub lookup: &'static str,
    /// Driver: the ABI version from `PFN_<name>_v<version>` (0: none in the headers).
    pub version: u32,
    /// Driver: the per-thread-default-stream ABI version (0: no such variant).
    pub per_thread_version: u32,
}

impl Entry {
    /// `symbol` as a C string.
    pub fn symbol_cstr(&self) -> &core::ffi::CStr {
        core::ffi::CStr::from_bytes_with_nul(self.symbol.as_bytes()).unwrap_or(c"")
    }

    /// `lookup` as a C string.
    pub fn lookup_cstr(&self) -> &core::ffi::CStr {
        core::ffi::CStr::from_bytes_with_nul(self.lookup.as_bytes()).unwrap_or(c"")
    }

    /// Driver: the exported per-thread-default-stream symbol (`cuMemcpyHtoD_v2_ptds`,
    /// `cuLaunchKernel_ptsz`), or `None` when the entry has none (`per_thread_version`
    /// 0, which includes every runtime entry: theirs is in `lookup`).
    ///
    /// It is `symbol` with the suffix cuda.h's `__CUDA_API_PTDS` / `__CUDA_API_PTSZ`
    /// macros append: `_ptds` for the synchronous copies and sets (`cuMemcpy*`,
    /// `cuMemset*` without `Async`), `_ptsz` for every other function that takes a stream.
    pub fn per_thread_symbol(&self) -> Option<loader::FixedStr<64>> {
        if self.per_thread_version == 0 {
            return None;
        }
        let base = self.symbol.trim_end_matches('\0');
        let synchronous_copy = (base.starts_with("cuMemcpy") || base.starts_with("cuMemset"))
            && !base.contains("Async");
        let mut name = loader::FixedStr::new();
        let fits = name.push(base) && name.push(if synchronous_copy { "_ptds" } else { "_ptsz" });
        fits.then_some(name)
    }
}

/// How to load the tables (loaded mode).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoadOptions {
    /// Ask for the per-thread-default-stream variants (`_ptds`/`_ptsz`): the default
    /// stream handle `0` then means the calling thread's stream, as with nvcc's
    /// `--default-stream per-thread`. An entry that has such a variant is loaded only as
    /// that variant (through `cuGetProcAddress_v2` or `dlsym`): if the library lacks it,
    /// the entry is missing, never the legacy-stream function in its place.
    pub per_thread_default_stream: bool,
}

#[cfg(not(feature = "linked"))]
mod load;
#[cfg(not(feature = "linked"))]
pub use load::{install_driver, load_driver, load_runtime};

static DRIVER: once::Once<DriverApi, LoadError> = once::Once::new();
static RUNTIME: once::Once<RuntimeApi, LoadError> = once::Once::new();

/// The process-wide driver table, loaded on first use with default [`LoadOptions`].
///
/// A failed load is remembered: later calls return the same error. If loading panicked,
/// later calls return [`LoadError::Poisoned`] (they never wait forever).
pub fn driver() -> Result<&'static DriverApi, &'static LoadError> {
    driver_with(LoadOptions::default())
}

/// The process-wide driver table; `options` apply if this call is the one that loads it.
#[allow(clippy::result_large_err)] // the error is stored once, in the static, by value
pub fn driver_with(options: LoadOptions) -> Result<&'static DriverApi, &'static LoadError> {
    #[cfg(feature = "linked")]
    let _ = options;
    #[cfg(feature = "linked")]
    return DRIVER.get_or_init(|| Ok(DriverApi::linked()));
    #[cfg(not(feature = "linked"))]
    DRIVER.get_or_init(|| load::load_driver(options))
}

/// The process-wide runtime table, loaded on first use with default [`LoadOptions`].
pub fn runtime() -> Result<&'static RuntimeApi, &'static LoadError> {
    runtime_with(LoadOptions::default())
}

/// The process-wide runtime table; `options` apply if this call is the one that loads it.
#[allow(clippy::result_large_err)] // the error is stored once, in the static, by value
pub fn runtime_with(options: LoadOptions) -> Result<&'static RuntimeApi, &'static LoadError> {
    #[cfg(feature = "linked")]
    let _ = options;
    #[cfg(feature = "linked")]
    return RUNTIME.get_or_init(|| Ok(RuntimeApi::linked()));
    #[cfg(not(feature = "linked"))]
    RUNTIME.get_or_init(|| load::load_runtime(options))
}

/// The binding mode this build uses: `"loaded"` or `"linked"`.
pub const fn binding_mode() -> &'static str {
    if cfg!(feature = "linked") {
        "linked"
    } else {
        "loaded"
    }
}

#[cfg(test)]
mod tests {
    extern crate std;

    use super::*;

    fn per_thread(name: &str) -> Option<std::string::String> {
        let e = DRIVER_ENTRIES.iter().find(|e| e.name == name)?;
        e.per_thread_symbol().map(|s| s.as_str().into())
    }

    /// The names cuda.h's `__CUDA_API_PTDS` / `__CUDA_API_PTSZ` give.
    #[test]
    fn per_thread_symbols_match_cuda_h() {
        for (name, symbol) in [
            ("cuMemcpyHtoD", "cuMemcpyHtoD_v2_ptds"),
            ("cuMemcpyHtoDAsync", "cuMemcpyHtoDAsync_v2_ptsz"),
            ("cuMemcpy", "cuMemcpy_ptds"),
            ("cuMemcpyPeerAsync", "cuMemcpyPeerAsync_ptsz"),
            ("cuMemsetD2D8", "cuMemsetD2D8_v2_ptds"),
            ("cuMemsetD8Async", "cuMemsetD8Async_ptsz"),
            ("cuLaunchKernel", "cuLaunchKernel_ptsz"),
            ("cuStreamGetCaptureInfo", "cuStreamGetCaptureInfo_v3_ptsz"),
            ("cuMemPrefetchAsync", "cuMemPrefetchAsync_v2_ptsz"),
            ("cuStreamGetCtx_v2", "cuStreamGetCtx_v2_ptsz"),
            ("cuMemcpyBatchAsync", "cuMemcpyBatchAsync_v2_ptsz"),
        ] {
            assert_eq!(per_thread(name).as_deref(), Some(symbol), "{name}");
        }
        assert_eq!(per_thread("cuInit"), None);
        assert_eq!(per_thread("cuMemAlloc"), None);
        let with_variant = DRIVER_ENTRIES.iter().filter(|e| e.per_thread_version != 0);
        let names: std::vec::Vec<_> = with_variant.filter_map(Entry::per_thread_symbol).collect();
        // cuda.h (13.0) has 85 such macros, 20 of them `__CUDA_API_PTDS`.
        assert_eq!(names.len(), 85);
        assert_eq!(
            names
                .iter()
                .filter(|n| n.as_str().ends_with("_ptds"))
                .count(),
            20
        );
        assert!(
            RUNTIME_ENTRIES
                .iter()
                .all(|e| e.per_thread_symbol().is_none())
        );
    }
}
