//! Raw bindings to the CUDA driver API (`libcuda`) and runtime API (`libcudart`),
//! generated from the CUDA headers of one release: [`CUDA_VERSION`] (13050, CUDA 13.5,
//! for the published crate, whose version's build metadata says the same:
//! `+cuda-13.5`). Every driver from 12.0 on loads them; a call newer than the driver is
//! an error naming it.
//!
//! - Types, constants and enums are in the crate root, under their C names. Enums are
//!   `#[repr(transparent)]` newtypes with associated constants (`CUresult::CUDA_SUCCESS`),
//!   so a value a newer driver returns is never undefined behaviour.
//! - Functions are reached through a table, [`DriverApi`] (from [`driver()`]) and
//!   `RuntimeApi` (from `runtime()`, feature `runtime`), whose accessors carry the
//!   documented names (`cuMemAlloc` means the `cuMemAlloc_v2` ABI) and return the
//!   function pointer or a [`MissingSymbol`] naming it. A table never unloads the
//!   library it was filled from, so these pointers stay valid for the rest of the
//!   process.
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn core::error::Error>> {
//! let cu = cudadrv_sys::driver()?;
//! // SAFETY: cuInit has no preconditions.
//! let rc = unsafe { cu.cuInit()?(0) };
//! assert_eq!(rc, cudadrv_sys::CUresult::CUDA_SUCCESS, "{rc}");
//! # Ok(()) }
//! ```
//!
//! # Binding modes
//! The features are additive: each adds a way to fill the same table types, and the
//! program picks one at run time (as `ash` has `Entry::load` and `Entry::linked`).
//! - `loaded` (default): `DriverApi::load` opens `libcuda.so.1` with `dlopen`, then
//!   asks `cuGetProcAddress_v2` for every entry with the ABI version that
//!   `cudaTypedefs.h` encodes in its `PFN_<name>_v<version>` typedef, after reading the
//!   driver's version: an entry whose ABI is newer than the driver is never asked for
//!   (the driver would hand back an older ABI of another signature). An older driver
//!   still loads: what it lacks is reported by name when called. Older ABIs that a
//!   caller can fall back to are entries of their own (`cuCtxCreate_v3020` is
//!   `cuCtxCreate` at ABI 3020, `cuCtxCreate_v2`); [`DriverApi::from_get_proc_address`]
//!   fills a table the same way from any `cuGetProcAddress_v2`. Per-thread default
//!   stream variants are a [`LoadOptions`] switch. libcudart is opened with `dlopen` +
//!   `dlsym`. On Windows the same happens with `LoadLibraryExW` + `GetProcAddress`:
//!   `nvcuda.dll` from `System32`, `cudart64_13.dll` (the search orders:
//!   [`loader::open_driver`], [`loader::open_runtime`]). Loading needs a Unix or Windows
//!   target; elsewhere this feature adds nothing.
//!
//!   The process-wide tables are built in place, in their statics: the driver table
//!   (one pointer an entry, 4 KiB) never passes through the stack, and a [`LoadError`]
//!   is at most 64 bytes (what a failed search tried is kept in a
//!   [`SearchLog`] it points to).
//! - `linked`: `DriverApi::linked()`, `extern "C"` declarations with
//!   `#[link(name = "cuda")]` (and `RuntimeApi::linked()` with `#[link(name = "cudart")]`
//!   when `runtime` is on too).
//! - In every build, [`DriverApi::from_resolver`] fills a table from any resolver: a
//!   target without `dlopen` (`x86_64-unknown-none`, `aarch64-unknown-none`) reaches its
//!   driver this way, through [`install_driver`].
//! - `runtime` (default): the runtime API (`RuntimeApi`, `runtime()`). Without it nothing
//!   names libcudart, so a `linked` build needs only libcuda.
//!
//! [`driver()`] fills the process-wide table on first use: with `loaded` (on Unix or
//! Windows) it
//! loads, whether or not `linked` is on too, so a crate that uses the loaded table is not
//! changed by another crate of the build turning on `linked`; with `linked` alone it is
//! the linked table; [`install_driver`] before the first use picks any table instead.
//!
//! # Unsafe policy
//! Every driver or runtime function is `unsafe` to call, with the C function's contract.
//! Opening a library runs its initialisers, so the constructors that do (`load`) are
//! `unsafe`; [`driver()`] and `runtime()` are safe because this crate vouches for the
//! one library each opens (the CUDA driver and runtime, by their names or the paths the
//! documented variables give). The crate's own unsafe code (dlopen, the once-cell,
//! transmuting resolved addresses to typed function pointers) is explained at each
//! block.
#![no_std]
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

// The bindings are laid out for 64-bit targets (the driver exists only there): on any
// other, one clear error instead of a layout assertion per struct.
#[cfg(not(target_pointer_width = "64"))]
compile_error!(
    "cudadrv-sys needs a 64-bit target (CUDA's structs and handles are laid out for \
     64-bit pointers; the driver exists only on x86_64 and aarch64)"
);

/// The crate's items, compiled on 64-bit targets only (see the `compile_error!` above).
macro_rules! on_64_bit_targets {
    ($($item:item)*) => { $( #[cfg(target_pointer_width = "64")] $item )* };
}

on_64_bit_targets! {

#[cfg(cudadrv_headers_13)]
mod abi;
mod load;
pub mod loader;
mod once;
mod result;
mod table;
#[cfg(unix)]
mod unix;
#[cfg(windows)]
mod win32;

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

/// bindgen's layout tests (`generated/layout.rs`): the size and alignment of every type and
/// the offset of every field, as constant assertions. They cost about a second of
/// constant evaluation in every build, so they are evaluated where nobody has yet: CI
/// evaluates them for x86_64 and aarch64 Linux and x86_64 Windows (the unit tests'
/// build, and the C ABI probe compares the same layouts with the C compiler's), and
/// every build for any other target evaluates them, so a target whose C ABI lays a type
/// out otherwise fails to compile instead of running with a wrong layout.
#[cfg(any(
    test,
    not(any(
        all(target_os = "linux", any(target_arch = "x86_64", target_arch = "aarch64")),
        all(windows, target_arch = "x86_64"),
    ))
))]
#[rustfmt::skip]
#[allow(non_snake_case, non_camel_case_types, clippy::all)]
mod layout {
    #[allow(unused_imports)]
    use super::types::*;
    include!("generated/layout.rs");
}

#[rustfmt::skip]
#[allow(non_snake_case, clippy::all, missing_docs)]
mod driver_fns {
    include!("generated/driver_fns.rs");
}
pub use driver_fns::{DRIVER_ENTRIES, DriverApi};

#[cfg(feature = "runtime")]
#[rustfmt::skip]
#[allow(non_snake_case, clippy::all, missing_docs)]
mod runtime_fns {
    include!("generated/runtime_fns.rs");
}
#[cfg(feature = "runtime")]
pub use runtime_fns::{RUNTIME_ENTRIES, RuntimeApi};

/// NCCL's types and constants (`nccl.h`, generated from the headers of the pinned NCCL
/// wheel), and its function table, [`NcclApi`](nccl::NcclApi) (feature `nccl`).
#[cfg(feature = "nccl")]
#[cfg_attr(docsrs, doc(cfg(feature = "nccl")))]
pub mod nccl {
    #[rustfmt::skip]
    #[allow(
        non_camel_case_types,
        non_snake_case,
        non_upper_case_globals,
        missing_docs,
        clippy::all,
        rustdoc::all
    )]
    mod types {
        #[allow(unused_imports)]
        use crate::*;
        include!("generated/nccl_types.rs");
    }
    pub use types::*;

    #[rustfmt::skip]
    #[allow(non_snake_case, clippy::all, missing_docs)]
    mod fns {
        use super::*;
        include!("generated/nccl_fns.rs");
    }
    pub use fns::{NCCL_ENTRIES, NcclApi};
}

/// NVRTC's types (`nvrtc.h`, generated from the header of the pinned NVRTC wheel), and
/// its function table, [`NvrtcApi`](nvrtc::NvrtcApi) (feature `nvrtc`).
#[cfg(feature = "nvrtc")]
#[cfg_attr(docsrs, doc(cfg(feature = "nvrtc")))]
pub mod nvrtc {
    #[rustfmt::skip]
    #[allow(
        non_camel_case_types,
        non_snake_case,
        non_upper_case_globals,
        missing_docs,
        clippy::all,
        rustdoc::all
    )]
    mod types {
        include!("generated/nvrtc_types.rs");
    }
    pub use types::*;

    #[rustfmt::skip]
    #[allow(non_snake_case, unused_imports, clippy::all, missing_docs)]
    mod fns {
        use super::*;
        include!("generated/nvrtc_fns.rs");
    }
    pub use fns::{NVRTC_ENTRIES, NvrtcApi};
}

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

pub use load::{DriverGetVersionFn, GetProcAddressFn};
pub use loader::{Library, LoadError, SearchLog};
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

/// How to load the tables (feature `loaded`; on other builds [`driver_with`] ignores it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoadOptions {
    /// Ask for the per-thread-default-stream variants (`_ptds`/`_ptsz`): the default
    /// stream handle `0` then means the calling thread's stream, as with nvcc's
    /// `--default-stream per-thread`. An entry that has such a variant is loaded only as
    /// that variant (through `cuGetProcAddress_v2` or `dlsym`): if the library lacks it,
    /// the entry is missing, never the legacy-stream function in its place.
    pub per_thread_default_stream: bool,
}

static DRIVER: once::Once<DriverApi, LoadError> = once::Once::new();
#[cfg(feature = "runtime")]
static RUNTIME: once::Once<RuntimeApi, LoadError> = once::Once::new();

/// The process-wide driver table, made on first use with default [`LoadOptions`].
///
/// Unless a table was installed first ([`install_driver`]), the first call makes it:
/// with feature `loaded` on a Unix or Windows target, `DriverApi::load` (whether or not
/// `linked` is
/// on too); otherwise with feature `linked`, `DriverApi::linked()`; otherwise there is
/// none ([`LoadError::NotInstalled`]). [`binding_mode`] names which.
///
/// A failed load is remembered: later calls return the same error. If loading panicked,
/// later calls return [`LoadError::Poisoned`] (they never wait forever).
///
/// This is safe, unlike `DriverApi::load`: the process-wide table is this crate's one
/// decision to trust the CUDA driver that `$CUDA_SYS_LIBCUDA` or the loader path names,
/// as the dynamic loader trusts `LD_LIBRARY_PATH`.
pub fn driver() -> Result<&'static DriverApi, &'static LoadError> {
    driver_with(LoadOptions::default())
}

/// The process-wide driver table; `options` apply if this call is the one that loads it.
pub fn driver_with(options: LoadOptions) -> Result<&'static DriverApi, &'static LoadError> {
    // SAFETY: `default_driver` fills the slot whenever it returns Ok.
    unsafe { DRIVER.get_or_init_in_place(|slot| default_driver(slot, options)) }
}

/// Makes the table [`driver_with`] makes when none was installed, in `slot` (the
/// static's own storage: the table never passes through the stack).
fn default_driver(
    slot: &mut core::mem::MaybeUninit<DriverApi>,
    options: LoadOptions,
) -> Result<(), LoadError> {
    #[cfg(all(feature = "loaded", any(unix, windows)))]
    {
        // SAFETY: the process-wide table trusts the CUDA driver the documented search
        // finds (see `driver()`): NVIDIA's libcuda / nvcuda.dll, built to be opened at
        // any time (the CUDA runtime itself opens it so), or the library the user named
        // for it in $CUDA_SYS_LIBCUDA.
        unsafe { DriverApi::load_in_place(slot, options) }.map(drop)
    }
    #[cfg(not(all(feature = "loaded", any(unix, windows))))]
    {
        let _ = options;
        #[cfg(feature = "linked")]
        {
            // SAFETY: the linked table fills no entry (its accessors return the linked
            // declarations).
            unsafe { DriverApi::fill_in_place(slot, Library::none(), true, |_, _| {}) };
            Ok(())
        }
        #[cfg(not(feature = "linked"))]
        {
            let _ = slot;
            Err(LoadError::NotInstalled {
                library: loader::DRIVER_LIBRARY,
            })
        }
    }
}

/// Installs `table` as the process-wide driver table (a mock, a table from
/// [`DriverApi::from_resolver`] on a target without `dlopen`, the linked table in a build
/// that also loads, or one loaded with other options) if no table is made yet;
/// [`driver()`] then returns it. Gives the table back if one was already made (or is
/// being made).
///
/// The table is moved into the static; [`install_driver_from_resolver`] builds it there
/// instead (for small stacks).
///
/// # Errors
/// The table itself, when the process-wide table already exists.
#[allow(clippy::result_large_err)] // the table is given back, by value
pub fn install_driver(table: DriverApi) -> Result<(), DriverApi> {
    install_table(&DRIVER, table)
}

/// Moves `table` into `cell` if no table is made there yet; gives it back otherwise
/// (what [`install_driver`], `install_runtime`, `install_nccl` and `install_nvrtc` do).
#[allow(clippy::result_large_err)] // the table is given back, by value
fn install_table<T>(cell: &once::Once<T, LoadError>, table: T) -> Result<(), T> {
    let mut given = Some(table);
    let install = |slot: &mut core::mem::MaybeUninit<T>| match given.take() {
        Some(table) => {
            slot.write(table);
            Ok(())
        }
        None => Err(LoadError::AlreadyLoaded),
    };
    // SAFETY: the closure writes the slot whenever it returns Ok.
    unsafe { cell.set_in_place(install) };
    match given {
        None => Ok(()),
        Some(rejected) => Err(rejected),
    }
}

/// Builds the process-wide driver table in place with
/// [`DriverApi::from_resolver_in_place`] and installs it, as [`install_driver`] of
/// `DriverApi::from_resolver(library, resolve)` would, without the table (several KiB)
/// passing through the stack: the way for a target without `dlopen` and with a small
/// stack. `resolve` is not called if a table was already made.
///
/// # Errors
/// `library`, given back, when the process-wide table already exists.
///
/// # Safety
/// As for [`DriverApi::from_resolver`].
pub unsafe fn install_driver_from_resolver(
    library: Library,
    resolve: impl FnMut(&Entry) -> *mut core::ffi::c_void,
) -> Result<(), Library> {
    let mut given = Some((library, resolve));
    let install = |slot: &mut core::mem::MaybeUninit<DriverApi>| match given.take() {
        Some((library, resolve)) => {
            // SAFETY: the caller's promise (`# Safety`).
            unsafe { DriverApi::from_resolver_in_place(slot, library, resolve) };
            Ok(())
        }
        None => Err(LoadError::AlreadyLoaded),
    };
    // SAFETY: the closure writes the slot whenever it returns Ok.
    unsafe { DRIVER.set_in_place(install) };
    match given {
        None => Ok(()),
        Some((library, _)) => Err(library),
    }
}

/// The process-wide runtime table, made on first use with default [`LoadOptions`], as
/// [`driver()`] makes the driver's (`RuntimeApi::load` with `loaded` on Unix or Windows,
/// else
/// `RuntimeApi::linked()` with `linked`, else none unless installed).
#[cfg(feature = "runtime")]
#[cfg_attr(docsrs, doc(cfg(feature = "runtime")))]
pub fn runtime() -> Result<&'static RuntimeApi, &'static LoadError> {
    runtime_with(LoadOptions::default())
}

/// The process-wide runtime table; `options` apply if this call is the one that loads it.
#[cfg(feature = "runtime")]
#[cfg_attr(docsrs, doc(cfg(feature = "runtime")))]
pub fn runtime_with(options: LoadOptions) -> Result<&'static RuntimeApi, &'static LoadError> {
    // SAFETY: `default_runtime` fills the slot whenever it returns Ok.
    unsafe { RUNTIME.get_or_init_in_place(|slot| default_runtime(slot, options)) }
}

/// Makes the table [`runtime_with`] makes when none was installed, in `slot`.
#[cfg(feature = "runtime")]
fn default_runtime(
    slot: &mut core::mem::MaybeUninit<RuntimeApi>,
    options: LoadOptions,
) -> Result<(), LoadError> {
    #[cfg(all(feature = "loaded", any(unix, windows)))]
    {
        // SAFETY: as in `default_driver`, for the CUDA runtime and the variables and
        // locations its search documents (`loader::open_runtime`).
        unsafe { RuntimeApi::load_in_place(slot, options) }.map(drop)
    }
    #[cfg(not(all(feature = "loaded", any(unix, windows))))]
    {
        let _ = options;
        #[cfg(feature = "linked")]
        {
            // SAFETY: the linked table fills no entry.
            unsafe { RuntimeApi::fill_in_place(slot, Library::none(), true, |_, _| {}) };
            Ok(())
        }
        #[cfg(not(feature = "linked"))]
        {
            let _ = slot;
            Err(LoadError::NotInstalled {
                library: loader::RUNTIME_LIBRARY,
            })
        }
    }
}

/// Installs `table` as the process-wide runtime table if none is made yet, as
/// [`install_driver`] does for the driver's.
///
/// # Errors
/// The table itself, when the process-wide table already exists.
#[cfg(feature = "runtime")]
#[cfg_attr(docsrs, doc(cfg(feature = "runtime")))]
#[allow(clippy::result_large_err)] // the table is given back, by value
pub fn install_runtime(table: RuntimeApi) -> Result<(), RuntimeApi> {
    install_table(&RUNTIME, table)
}

#[cfg(feature = "nccl")]
static NCCL: once::Once<nccl::NcclApi, LoadError> = once::Once::new();

/// The process-wide NCCL table, loaded on first use (feature `nccl`): with feature
/// `loaded` on a Unix target, `NcclApi::load`; otherwise only a table installed with
/// [`install_nccl`] ([`LoadError::NotInstalled`] without one). A failed load is
/// remembered, as for [`driver()`].
///
/// Safe, unlike `NcclApi::load`, for the reason [`driver()`] is: this crate trusts the
/// NCCL library that `$CUDA_SYS_LIBNCCL`, the loader path or a pip wheel provides.
#[cfg(feature = "nccl")]
#[cfg_attr(docsrs, doc(cfg(feature = "nccl")))]
pub fn nccl() -> Result<&'static nccl::NcclApi, &'static LoadError> {
    // SAFETY: `default_nccl` fills the slot whenever it returns Ok.
    unsafe { NCCL.get_or_init_in_place(default_nccl) }
}

/// Makes the table [`nccl()`] makes when none was installed, in `slot`.
#[cfg(feature = "nccl")]
fn default_nccl(slot: &mut core::mem::MaybeUninit<nccl::NcclApi>) -> Result<(), LoadError> {
    #[cfg(all(feature = "loaded", unix))]
    {
        // SAFETY: the process-wide table trusts the NCCL the documented search finds
        // (see `nccl()`); NCCL is built to be opened with dlopen (PyTorch and the other
        // frameworks load it so).
        unsafe { nccl::NcclApi::load_in_place(slot) }.map(drop)
    }
    #[cfg(not(all(feature = "loaded", unix)))]
    {
        let _ = slot;
        Err(LoadError::NotInstalled {
            library: loader::NCCL_LIBRARY,
        })
    }
}

/// Installs `table` as the process-wide NCCL table (a mock, or one filled from a
/// resolver) if none is made yet; [`nccl()`] then returns it. Gives the table back if
/// one was already made.
///
/// # Errors
/// The table itself, when the process-wide table already exists.
#[cfg(feature = "nccl")]
#[cfg_attr(docsrs, doc(cfg(feature = "nccl")))]
#[allow(clippy::result_large_err)] // the table is given back, by value
pub fn install_nccl(table: nccl::NcclApi) -> Result<(), nccl::NcclApi> {
    install_table(&NCCL, table)
}

#[cfg(feature = "nvrtc")]
static NVRTC: once::Once<nvrtc::NvrtcApi, LoadError> = once::Once::new();

/// The process-wide NVRTC table, loaded on first use (feature `nvrtc`): with feature
/// `loaded` on a Unix or Windows target, `NvrtcApi::load`; otherwise only a table
/// installed with [`install_nvrtc`] ([`LoadError::NotInstalled`] without one). A failed
/// load is remembered, as for [`driver()`].
///
/// Safe, unlike `NvrtcApi::load`, for the reason [`driver()`] is: this crate trusts the
/// NVRTC that `$CUDA_SYS_LIBNVRTC`, a CUDA installation, the loader path or a pip wheel
/// provides.
#[cfg(feature = "nvrtc")]
#[cfg_attr(docsrs, doc(cfg(feature = "nvrtc")))]
pub fn nvrtc() -> Result<&'static nvrtc::NvrtcApi, &'static LoadError> {
    // SAFETY: `default_nvrtc` fills the slot whenever it returns Ok.
    unsafe { NVRTC.get_or_init_in_place(default_nvrtc) }
}

/// Makes the table [`nvrtc()`] makes when none was installed, in `slot`.
#[cfg(feature = "nvrtc")]
fn default_nvrtc(slot: &mut core::mem::MaybeUninit<nvrtc::NvrtcApi>) -> Result<(), LoadError> {
    #[cfg(all(feature = "loaded", any(unix, windows)))]
    {
        // SAFETY: the process-wide table trusts the NVRTC the documented search finds
        // (see `nvrtc()`); NVRTC is a library made to be opened at run time.
        unsafe { nvrtc::NvrtcApi::load_in_place(slot) }.map(drop)
    }
    #[cfg(not(all(feature = "loaded", any(unix, windows))))]
    {
        let _ = slot;
        Err(LoadError::NotInstalled {
            library: loader::NVRTC_LIBRARY,
        })
    }
}

/// Installs `table` as the process-wide NVRTC table (a mock, or one filled from a
/// resolver) if none is made yet; [`nvrtc()`] then returns it. Gives the table back if
/// one was already made.
///
/// # Errors
/// The table itself, when the process-wide table already exists.
#[cfg(feature = "nvrtc")]
#[cfg_attr(docsrs, doc(cfg(feature = "nvrtc")))]
#[allow(clippy::result_large_err)] // the table is given back, by value
pub fn install_nvrtc(table: nvrtc::NvrtcApi) -> Result<(), nvrtc::NvrtcApi> {
    install_table(&NVRTC, table)
}

/// How [`driver()`] makes the process-wide table when none was installed: `"loaded"`
/// (feature `loaded` on a Unix or Windows target, with or without `linked`), `"linked"`
/// (feature
/// `linked` alone, or on a target without `dlopen`), or `"none"` (only an installed
/// table). [`DriverApi::is_linked`] tells what a given table is.
pub const fn binding_mode() -> &'static str {
    if cfg!(all(feature = "loaded", any(unix, windows))) {
        "loaded"
    } else if cfg!(feature = "linked") {
        "linked"
    } else {
        "none"
    }
}

#[cfg(test)]
mod tests {
    extern crate std;

    use super::*;

    /// Without a binding mode the only tables are the ones a resolver fills: installing
    /// one is what `driver()` returns, and an entry the resolver lacks is a missing
    /// symbol naming it.
    #[cfg(not(any(feature = "loaded", feature = "linked")))]
    #[test]
    fn without_a_binding_mode_driver_is_the_installed_table() {
        assert_eq!(binding_mode(), "none");
        // SAFETY: the resolver returns no functions, so the table holds none to call.
        let table = unsafe { DriverApi::from_resolver(Library::none(), |_| core::ptr::null_mut()) };
        assert!(install_driver(table).is_ok());
        let cu = driver().expect("the installed table");
        let missing = cu.cuInit().map(drop).unwrap_err();
        assert_eq!(missing.name, "cuInit");
    }

    /// The tables are big (one pointer an entry) and are built in place: in the
    /// process-wide static by `driver()` and `install_driver_from_resolver`, never
    /// passing through the stack.
    #[test]
    fn table_sizes() {
        let driver = core::mem::size_of::<DriverApi>();
        std::println!("DriverApi {driver} B ({} entries)", DRIVER_ENTRIES.len());
        assert_eq!(driver, 8 * DRIVER_ENTRIES.len() + 16);
        #[cfg(feature = "runtime")]
        assert_eq!(
            core::mem::size_of::<RuntimeApi>(),
            8 * RUNTIME_ENTRIES.len() + 16
        );
    }

    /// `install_driver_from_resolver` builds the process-wide table where it lives; a
    /// second install gives the library back without calling its resolver.
    #[cfg(any(feature = "loaded", feature = "linked"))]
    #[test]
    fn the_process_wide_table_is_built_in_place() {
        // SAFETY: the resolver returns no functions, so the table holds none to call.
        let first = unsafe {
            install_driver_from_resolver(Library::none(), |e| {
                if e.name == "cuInit" {
                    core::ptr::without_provenance_mut(0x1000)
                } else {
                    core::ptr::null_mut()
                }
            })
        };
        assert!(first.is_ok());
        let cu = driver().expect("the installed table");
        assert!(!cu.is_linked());
        assert_eq!(cu.resolved().iter().filter(|r| **r).count(), 1);
        assert_eq!(cu.cuInit().map(|f| f as usize).ok(), Some(0x1000));
        assert_eq!(cu.cuMemAlloc().map(drop).unwrap_err().name, "cuMemAlloc");
        // SAFETY: the resolver is never called.
        let second = unsafe {
            install_driver_from_resolver(Library::none(), |_| panic!("not called"))
        };
        assert!(second.is_err());
        // SAFETY: as above.
        let table = unsafe { DriverApi::from_resolver(Library::none(), |_| core::ptr::null_mut()) };
        assert!(install_driver(table).is_err());
    }

    fn per_thread(name: &str) -> Option<std::string::String> {
        let e = DRIVER_ENTRIES.iter().find(|e| e.name == name)?;
        e.per_thread_symbol().map(|s| s.as_str().into())
    }

    /// The names cuda.h's `__CUDA_API_PTDS` / `__CUDA_API_PTSZ` give (each from the
    /// release whose headers introduced that symbol, so that a cudadrv-sys regenerated
    /// from older headers passes too).
    #[test]
    fn per_thread_symbols_match_cuda_h() {
        for (name, symbol, since) in [
            ("cuMemcpyHtoD", "cuMemcpyHtoD_v2_ptds", 0),
            ("cuMemcpyHtoDAsync", "cuMemcpyHtoDAsync_v2_ptsz", 0),
            ("cuMemcpy", "cuMemcpy_ptds", 0),
            ("cuMemcpyPeerAsync", "cuMemcpyPeerAsync_ptsz", 0),
            ("cuMemsetD2D8", "cuMemsetD2D8_v2_ptds", 0),
            ("cuMemsetD8Async", "cuMemsetD8Async_ptsz", 0),
            ("cuLaunchKernel", "cuLaunchKernel_ptsz", 0),
            (
                "cuStreamGetCaptureInfo",
                "cuStreamGetCaptureInfo_v3_ptsz",
                13000,
            ),
            ("cuMemPrefetchAsync", "cuMemPrefetchAsync_v2_ptsz", 13000),
            ("cuStreamGetCtx_v2", "cuStreamGetCtx_v2_ptsz", 12050),
            ("cuMemcpyBatchAsync", "cuMemcpyBatchAsync_v2_ptsz", 13000),
            (
                "cuStreamGetDevResource",
                "cuStreamGetDevResource_ptsz",
                13010,
            ),
        ] {
            if CUDA_VERSION >= since {
                assert_eq!(per_thread(name).as_deref(), Some(symbol), "{name}");
            }
        }
        assert_eq!(per_thread("cuInit"), None);
        assert_eq!(per_thread("cuMemAlloc"), None);
        let with_variant = DRIVER_ENTRIES.iter().filter(|e| e.per_thread_version != 0);
        let names: std::vec::Vec<_> = with_variant.filter_map(Entry::per_thread_symbol).collect();
        // cuda.h of 13.5 has 95 such macros, 20 of them `__CUDA_API_PTDS` (13.0: 87).
        if CUDA_VERSION == 13050 {
            assert_eq!(names.len(), 95);
            assert_eq!(
                names
                    .iter()
                    .filter(|n| n.as_str().ends_with("_ptds"))
                    .count(),
                20
            );
        }
        #[cfg(feature = "runtime")]
        assert!(
            RUNTIME_ENTRIES
                .iter()
                .all(|e| e.per_thread_symbol().is_none())
        );
    }
}
}
