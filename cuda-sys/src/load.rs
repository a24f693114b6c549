//! Filling the driver table through `cuGetProcAddress_v2` (every build:
//! [`DriverApi::from_get_proc_address`]) and, in loaded mode (feature `loaded`, Unix
//! and Windows targets), from `libcuda` and `libcudart` with `dlopen`,
//! `cuGetProcAddress_v2` and `dlsym` (`nvcuda.dll` and `cudart64_13.dll` with
//! `LoadLibraryExW` and `GetProcAddress` on Windows).
//!
//! Every constructor has an `_in_place` form that writes the table into a slot (the
//! process-wide statics use them), so the table never passes through the stack.
//!
//! # Which ABI an entry gets
//! `cuGetProcAddress(name, &pfn, version, ...)` hands back the newest ABI of `name`
//! that the driver has and that is not newer than `version`. Asked for an ABI newer than
//! the driver itself (`cuCtxCreate` at 12050 of a 12.4 driver), it answers with an
//! older ABI of another C signature (`cuCtxCreate_v3`), which the table would call
//! through the wrong type. So the driver's version (`cuDriverGetVersion`, the same
//! ABI since CUDA 2.2) is read first, and an entry whose ABI is newer than the driver is
//! never asked for: it stays missing, an error naming it when called. Every entry asked
//! for has an ABI the driver has, so the answer is that ABI. Older ABIs that callers
//! fall back to are entries of their own (`cuCtxCreate_v3020`), with their own
//! signature. A query counts only when it returns `CUDA_SUCCESS`, reports
//! `CU_GET_PROC_ADDRESS_SUCCESS` and gives a non-null pointer.
//!
//! # Unsafe policy
//! Opening a library runs its initialisers, so the constructors that do it
//! (`DriverApi::load`, `RuntimeApi::load`) are `unsafe`; so is filling a table from
//! caller-supplied entry points ([`DriverApi::from_get_proc_address`]). The addresses
//! they resolve are turned into typed function pointers by the tables' `from_resolver`,
//! with the signature the generated table declares for the same entry.

use core::ffi::{CStr, c_int, c_void};

#[cfg(all(feature = "loaded", any(unix, windows), feature = "runtime"))]
use crate::RuntimeApi;
use crate::loader::{Library, LoadError};
use crate::table::{Erased, erase};
use crate::{CUdriverProcAddressQueryResult, CUresult, DriverApi, Entry, LoadOptions, cuuint64_t};

/// `cuGetProcAddress_v2` (`PFN_cuGetProcAddress_v12000`), the one entry point the driver
/// loader looks up by name.
pub type GetProcAddressFn = unsafe extern "C" fn(
    symbol: *const core::ffi::c_char,
    pfn: *mut *mut c_void,
    cuda_version: c_int,
    flags: cuuint64_t,
    status: *mut CUdriverProcAddressQueryResult,
) -> CUresult;

/// `cuDriverGetVersion` (`PFN_cuDriverGetVersion_v2020`).
pub type DriverGetVersionFn = unsafe extern "C" fn(version: *mut c_int) -> CUresult;

/// The driver's CUDA version (`12040` = 12.4), or the error that names the entry point.
///
/// # Safety
/// `get_version` must be `cuDriverGetVersion` or have its contract.
unsafe fn read_driver_version(get_version: DriverGetVersionFn) -> Result<u32, LoadError> {
    let mut version: c_int = 0;
    // SAFETY: a valid out-pointer; the caller vouches for the function.
    let rc = unsafe { get_version(&mut version) };
    match u32::try_from(version) {
        Ok(v) if rc == CUresult::CUDA_SUCCESS && v > 0 => Ok(v),
        _ => Err(LoadError::MissingEntryPoint {
            library: crate::loader::DRIVER_LIBRARY,
            symbol: "cuDriverGetVersion",
        }),
    }
}

impl DriverApi {
    /// Fills a driver table through a driver's `cuGetProcAddress_v2`, after reading its
    /// version with `cuDriverGetVersion`: each entry is asked for with its ABI version
    /// (its per-thread version with [`LoadOptions::per_thread_default_stream`]), and an
    /// entry whose ABI is newer than the driver is not asked for at all (it stays
    /// missing; see the module docs for why). Entries the driver does not serve stay
    /// missing. The table keeps `library` and never closes it.
    ///
    /// This is the loader's own logic without `dlopen` (so in every build): for a
    /// platform that hands out the driver's entry points some other way, and for mock
    /// drivers.
    ///
    /// # Errors
    /// [`LoadError::MissingEntryPoint`] naming `cuDriverGetVersion` when it fails.
    ///
    /// # Safety
    /// `get_proc_address` and `get_version` must be the driver's `cuGetProcAddress_v2`
    /// and `cuDriverGetVersion` (or have their contracts): every pointer the former
    /// hands back for `(name, version)` must be the function `PFN_<name>_v<version>` of
    /// `cudaTypedefs.h` describes, valid for the rest of the process.
    pub unsafe fn from_get_proc_address(
        library: Library,
        get_proc_address: GetProcAddressFn,
        get_version: DriverGetVersionFn,
        options: LoadOptions,
    ) -> Result<Self, LoadError> {
        let mut slot = core::mem::MaybeUninit::<Self>::uninit();
        // SAFETY: the caller's promise (`# Safety`).
        unsafe {
            Self::from_get_proc_address_in_place(
                &mut slot,
                library,
                get_proc_address,
                get_version,
                options,
            )
        }?;
        // SAFETY: filled on success.
        Ok(unsafe { slot.assume_init() })
    }

    /// [`DriverApi::from_get_proc_address`], writing the table into `slot` (a static or
    /// a heap block: the table never passes through the stack). Returns the table.
    ///
    /// # Errors
    /// As for [`DriverApi::from_get_proc_address`]; `slot` is then left uninitialized.
    ///
    /// # Safety
    /// As for [`DriverApi::from_get_proc_address`].
    pub unsafe fn from_get_proc_address_in_place(
        slot: &mut core::mem::MaybeUninit<Self>,
        library: Library,
        get_proc_address: GetProcAddressFn,
        get_version: DriverGetVersionFn,
        options: LoadOptions,
    ) -> Result<&mut Self, LoadError> {
        // SAFETY: the caller vouches for `get_version`.
        let version = unsafe { read_driver_version(get_version) }?;
        let none = |_: &CStr| core::ptr::null_mut();
        // SAFETY: each address comes from `get_proc_address` for the entry of the same
        // index at that entry's ABI version, which the driver has (not newer than it),
        // so it is that ABI, whose signature the generated table declares; the caller
        // vouches that it stays valid.
        Ok(unsafe {
            DriverApi::fill_in_place(slot, library, false, |_, fns| {
                resolve_driver(fns, options, version, Some(get_proc_address), none);
            })
        })
    }

    /// Opens `libcuda` ([`loader::open_driver`](crate::loader::open_driver):
    /// `$CUDA_SYS_LIBCUDA`, then `libcuda.so.1`, then `libcuda.so`; on Windows
    /// `%CUDA_SYS_LIBCUDA%`, then `nvcuda.dll` from `System32`) and fills a driver
    /// table.
    ///
    /// The driver's version comes first (`cuDriverGetVersion`, by `dlsym`). Then each
    /// entry not newer than the driver is asked of `cuGetProcAddress_v2` with its ABI
    /// version (its per-thread version with [`LoadOptions::per_thread_default_stream`]);
    /// an entry newer than the driver stays missing (see the module docs). A driver too
    /// old to have `cuGetProcAddress_v2` (before CUDA 12.0), or an entry it does not
    /// serve, is read with `dlsym` of the versioned symbol instead (a versioned name is
    /// one ABI); with per-thread default stream, of its `_ptds`/`_ptsz` symbol
    /// ([`Entry::per_thread_symbol`]) for the entries that have one, never of the
    /// legacy-stream one. Entries the driver lacks stay missing.
    ///
    /// The table keeps `libcuda` open for the rest of the process (see [`DriverApi`]).
    /// [`driver()`](crate::driver) calls this once for the process-wide table.
    ///
    /// # Errors
    /// [`LoadError::LibraryNotFound`] naming every candidate tried,
    /// [`LoadError::BadEnvPath`] for an unusable `$CUDA_SYS_LIBCUDA`, and
    /// [`LoadError::MissingEntryPoint`] for a library without a working
    /// `cuDriverGetVersion`.
    ///
    /// # Safety
    /// Opening the library runs its initialisers (and those of the libraries it needs)
    /// in this process. The library the search finds must be the CUDA driver, or one
    /// with the same exports and C signatures (a mock built for it): whatever
    /// `$CUDA_SYS_LIBCUDA` or the loader path names is opened and trusted.
    #[cfg(all(feature = "loaded", any(unix, windows)))]
    #[cfg_attr(docsrs, doc(cfg(all(feature = "loaded", any(unix, windows)))))]
    pub unsafe fn load(options: LoadOptions) -> Result<Self, LoadError> {
        let mut slot = core::mem::MaybeUninit::<Self>::uninit();
        // SAFETY: the caller's promise (`# Safety`).
        unsafe { Self::load_in_place(&mut slot, options) }?;
        // SAFETY: filled on success.
        Ok(unsafe { slot.assume_init() })
    }

    /// `DriverApi::load`, writing the table into `slot` (a static or a heap block: the
    /// table never passes through the stack); [`driver()`](crate::driver) loads its
    /// table into its static this way. Returns the table.
    ///
    /// # Errors
    /// As for `DriverApi::load`; `slot` is then left uninitialized.
    ///
    /// # Safety
    /// As for `DriverApi::load`.
    #[cfg(all(feature = "loaded", any(unix, windows)))]
    #[cfg_attr(docsrs, doc(cfg(all(feature = "loaded", any(unix, windows)))))]
    pub unsafe fn load_in_place(
        slot: &mut core::mem::MaybeUninit<Self>,
        options: LoadOptions,
    ) -> Result<&mut Self, LoadError> {
        // SAFETY: the caller vouches for the library the search finds (`# Safety`).
        let library = unsafe { crate::loader::open_driver() }?;
        let get_version = library.symbol(c"cuDriverGetVersion");
        if get_version.is_null() {
            return Err(LoadError::MissingEntryPoint {
                library: crate::loader::DRIVER_LIBRARY,
                symbol: "cuDriverGetVersion",
            });
        }
        // SAFETY: the driver exports cuDriverGetVersion with this C signature
        // (cudaTypedefs.h: PFN_cuDriverGetVersion_v2020), unchanged since CUDA 2.2.
        let get_version =
            unsafe { core::mem::transmute::<*mut c_void, DriverGetVersionFn>(get_version) };
        // SAFETY: as above.
        let version = unsafe { read_driver_version(get_version) }?;
        let gpa = library.symbol(c"cuGetProcAddress_v2");
        let gpa: Option<GetProcAddressFn> = if gpa.is_null() {
            None
        } else {
            // SAFETY: the driver exports cuGetProcAddress_v2 with this C signature
            // (cudaTypedefs.h: PFN_cuGetProcAddress_v12000).
            Some(unsafe { core::mem::transmute::<*mut c_void, GetProcAddressFn>(gpa) })
        };
        // SAFETY: each address comes from the driver for the entry of the same index, at
        // an ABI the driver has (so that ABI), or by its versioned symbol, whose
        // signature the generated table declares (per-thread variants share it); the
        // table keeps the library open for the rest of the process, so they stay valid.
        Ok(unsafe {
            DriverApi::fill_in_place(slot, library, false, |library, fns| {
                resolve_driver(fns, options, version, gpa, |symbol| library.symbol(symbol));
            })
        })
    }
}

/// The ABI version an entry is asked for (`CUDA_VERSION` for one without a PFN
/// typedef: none today).
fn requested_abi(e: &Entry, per_thread: bool) -> u32 {
    match (per_thread, e.version) {
        (true, _) => e.per_thread_version,
        (false, 0) => crate::CUDA_VERSION,
        (false, v) => v,
    }
}

/// Sets each entry of `fns` (those of [`DRIVER_ENTRIES`](crate::DRIVER_ENTRIES), in
/// order; left `None`: missing) for a driver of CUDA version `driver_version`: none for
/// an entry whose ABI is newer than the driver; else from `gpa` (`cuGetProcAddress_v2`)
/// if the driver has it, else or when it does not serve the entry from `dlsym`.
fn resolve_driver(
    fns: &mut [Option<Erased>],
    options: LoadOptions,
    driver_version: u32,
    gpa: Option<GetProcAddressFn>,
    dlsym: impl Fn(&CStr) -> *mut c_void,
) {
    let flags = if options.per_thread_default_stream {
        crate::CUdriverProcAddress_flags::CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM.0 as u64
    } else {
        crate::CUdriverProcAddress_flags::CU_GET_PROC_ADDRESS_DEFAULT.0 as u64
    };
    let per_thread = |e: &Entry| options.per_thread_default_stream && e.per_thread_version != 0;
    let resolve = |e: &Entry| -> *mut c_void {
        let abi = requested_abi(e, per_thread(e));
        if abi > driver_version {
            // The driver would answer with an older ABI of another signature.
            return core::ptr::null_mut();
        }
        if let Some(gpa) = gpa {
            let mut ptr = core::ptr::null_mut();
            let mut status = CUdriverProcAddressQueryResult::CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
            // SAFETY: lookup is NUL-terminated; ptr and status are valid out-pointers.
            let rc = unsafe {
                gpa(
                    e.lookup_cstr().as_ptr(),
                    &mut ptr,
                    abi as c_int,
                    flags,
                    &mut status,
                )
            };
            if rc == CUresult::CUDA_SUCCESS
                && status == CUdriverProcAddressQueryResult::CU_GET_PROC_ADDRESS_SUCCESS
                && !ptr.is_null()
            {
                return ptr;
            }
            // The driver's own export table can still have it (e.g. entries the
            // headers declare but cuGetProcAddress does not serve).
        }
        if per_thread(e) {
            // The per-thread variant or nothing: the legacy-stream function would
            // silently give stream 0 the other meaning.
            return e
                .per_thread_symbol()
                .map_or(core::ptr::null_mut(), |symbol| dlsym(symbol.as_cstr()));
        }
        dlsym(e.symbol_cstr())
    };
    for (slot, e) in fns.iter_mut().zip(crate::DRIVER_ENTRIES) {
        *slot = erase(resolve(e));
    }
    drop_older_answers(fns, |e| requested_abi(e, per_thread(e)));
}

/// A driver whose version admits an ABI may still lack it: CUDA 13.1's first driver
/// reports 13010 but has no `cuLaunchHostFunc` of ABI 13010 (its `cudaTypedefs.h` has
/// no such typedef; 13.5's dates it 13010), and asked for that ABI it answers with its
/// newest, the 3-argument 10000 one. An entry whose address is the one an older ABI of
/// the same function got (another entry, another symbol) is such an answer: it is left
/// out, so the call is a missing-symbol error instead of a call through the wrong type.
/// (Two ABIs of one signature that a driver implements with one function are left out
/// too: an error where a call would have worked, never the other way round.)
fn drop_older_answers(fns: &mut [Option<Erased>], abi: impl Fn(&Entry) -> u32) {
    let address = |f: Option<Erased>| f.map_or(0, |f| f as usize);
    let entries = crate::DRIVER_ENTRIES;
    for (i, e) in entries.iter().enumerate() {
        let addr = fns.get(i).copied().map_or(0, address);
        if addr == 0 {
            continue;
        }
        let older_same_answer = entries.iter().zip(fns.iter()).any(|(f, &other)| {
            f.lookup == e.lookup && abi(f) < abi(e) && address(other) == addr
        });
        if older_same_answer {
            if let Some(f) = fns.get_mut(i) {
                *f = None;
            }
        }
    }
}

#[cfg(all(feature = "loaded", any(unix, windows), feature = "runtime"))]
impl RuntimeApi {
    /// Opens `libcudart` (search order: [`loader::open_runtime`](crate::loader::open_runtime)) and fills a runtime
    /// table with `dlsym`; with per-thread default stream, an entry that has a
    /// `_ptds`/`_ptsz` symbol is read from it alone (missing if the library lacks it).
    ///
    /// The table keeps `libcudart` open for the rest of the process (see
    /// [`RuntimeApi`]). [`runtime()`](crate::runtime) calls this once for the
    /// process-wide table.
    ///
    /// # Errors
    /// [`LoadError::LibraryNotFound`] naming every candidate tried, or
    /// [`LoadError::BadEnvPath`] for an unusable path variable.
    ///
    /// # Safety
    /// As for [`DriverApi::load`]: the library the search finds (through
    /// `$CUDA_SYS_LIBCUDART`, `$CUDA_PATH`, `$CUDA_HOME`, the loader path or a Python
    /// site-packages directory) is opened, its initialisers run, and it must be the
    /// CUDA runtime or have its exports and C signatures.
    #[cfg_attr(docsrs, doc(cfg(all(feature = "loaded", feature = "runtime", any(unix, windows)))))]
    pub unsafe fn load(options: LoadOptions) -> Result<Self, LoadError> {
        let mut slot = core::mem::MaybeUninit::<Self>::uninit();
        // SAFETY: the caller's promise (`# Safety`).
        unsafe { Self::load_in_place(&mut slot, options) }?;
        // SAFETY: filled on success.
        Ok(unsafe { slot.assume_init() })
    }

    /// `RuntimeApi::load`, writing the table into `slot` (a static or a heap block);
    /// [`runtime()`](crate::runtime) loads its table into its static this way. Returns
    /// the table.
    ///
    /// # Errors
    /// As for `RuntimeApi::load`; `slot` is then left uninitialized.
    ///
    /// # Safety
    /// As for `RuntimeApi::load`.
    #[cfg_attr(
        docsrs,
        doc(cfg(all(feature = "loaded", feature = "runtime", any(unix, windows))))
    )]
    pub unsafe fn load_in_place(
        slot: &mut core::mem::MaybeUninit<Self>,
        options: LoadOptions,
    ) -> Result<&mut Self, LoadError> {
        // SAFETY: the caller vouches for the library the search finds (`# Safety`).
        let library = unsafe { crate::loader::open_runtime() }?;
        // SAFETY: addresses of the runtime's exports for the entries of the same index;
        // the table keeps the library open for the rest of the process, so they stay
        // valid.
        Ok(unsafe {
            RuntimeApi::fill_in_place(slot, library, false, |library, fns| {
                resolve_runtime(fns, options, |symbol| library.symbol(symbol));
            })
        })
    }
}

#[cfg(all(feature = "loaded", feature = "nccl", unix))]
impl crate::nccl::NcclApi {
    /// Opens NCCL (search order: [`loader::open_nccl`](crate::loader::open_nccl)) and
    /// fills a table with `dlsym`. The table keeps the library open for the rest of the
    /// process. [`nccl()`](crate::nccl()) calls this once for the process-wide table.
    ///
    /// Any NCCL 2 loads: a function the library lacks is reported by name when asked
    /// for (`ncclGetVersion` tells which release it is).
    ///
    /// # Errors
    /// [`LoadError::LibraryNotFound`] naming every candidate tried, or
    /// [`LoadError::BadEnvPath`] for an unusable path variable.
    ///
    /// # Safety
    /// As for [`DriverApi::load`]: the library the search finds (through
    /// `$CUDA_SYS_LIBNCCL`, the loader path or a Python site-packages directory) is
    /// opened, its initialisers run, and it must be NCCL 2 or have its exports and C
    /// signatures.
    #[cfg_attr(docsrs, doc(cfg(all(feature = "loaded", feature = "nccl", unix))))]
    pub unsafe fn load() -> Result<Self, LoadError> {
        let mut slot = core::mem::MaybeUninit::<Self>::uninit();
        // SAFETY: the caller's promise (`# Safety`).
        unsafe { Self::load_in_place(&mut slot) }?;
        // SAFETY: filled on success.
        Ok(unsafe { slot.assume_init() })
    }

    /// `NcclApi::load`, writing the table into `slot`. Returns the table.
    ///
    /// # Errors
    /// As for `NcclApi::load`; `slot` is then left uninitialized.
    ///
    /// # Safety
    /// As for `NcclApi::load`.
    #[cfg_attr(docsrs, doc(cfg(all(feature = "loaded", feature = "nccl", unix))))]
    pub unsafe fn load_in_place(
        slot: &mut core::mem::MaybeUninit<Self>,
    ) -> Result<&mut Self, LoadError> {
        // SAFETY: the caller vouches for the library the search finds (`# Safety`).
        let library = unsafe { crate::loader::open_nccl() }?;
        // SAFETY: each entry is resolved by its exported name, whose C signature the
        // entry declares (generated from nccl.h); the table keeps the library open for
        // the rest of the process.
        Ok(unsafe {
            Self::fill_in_place(slot, library, false, |library, fns| {
                for (f, e) in fns.iter_mut().zip(crate::nccl::NCCL_ENTRIES) {
                    *f = erase(library.symbol(e.symbol_cstr()));
                }
            })
        })
    }
}

#[cfg(all(feature = "loaded", feature = "nvrtc", any(unix, windows)))]
impl crate::nvrtc::NvrtcApi {
    /// Opens NVRTC (search order: [`loader::open_nvrtc`](crate::loader::open_nvrtc)) and
    /// fills a table with `dlsym` (`GetProcAddress`). The table keeps the library open for
    /// the rest of the process. [`nvrtc()`](crate::nvrtc()) calls this once for the
    /// process-wide table.
    ///
    /// NVRTC 12.0 and newer load: a function the library lacks is reported by name when
    /// asked for (`nvrtcVersion` tells which release it is).
    ///
    /// # Errors
    /// [`LoadError::LibraryNotFound`] naming every candidate tried, or
    /// [`LoadError::BadEnvPath`] for an unusable path variable.
    ///
    /// # Safety
    /// As for [`DriverApi::load`]: the library the search finds is opened, its
    /// initialisers run, and it must be NVRTC or have its exports and C signatures.
    #[cfg_attr(
        docsrs,
        doc(cfg(all(feature = "loaded", feature = "nvrtc", any(unix, windows))))
    )]
    pub unsafe fn load() -> Result<Self, LoadError> {
        let mut slot = core::mem::MaybeUninit::<Self>::uninit();
        // SAFETY: the caller's promise (`# Safety`).
        unsafe { Self::load_in_place(&mut slot) }?;
        // SAFETY: filled on success.
        Ok(unsafe { slot.assume_init() })
    }

    /// `NvrtcApi::load`, writing the table into `slot`. Returns the table.
    ///
    /// # Errors
    /// As for `NvrtcApi::load`; `slot` is then left uninitialized.
    ///
    /// # Safety
    /// As for `NvrtcApi::load`.
    #[cfg_attr(
        docsrs,
        doc(cfg(all(feature = "loaded", feature = "nvrtc", any(unix, windows))))
    )]
    pub unsafe fn load_in_place(
        slot: &mut core::mem::MaybeUninit<Self>,
    ) -> Result<&mut Self, LoadError> {
        // SAFETY: the caller vouches for the library the search finds (`# Safety`).
        let library = unsafe { crate::loader::open_nvrtc() }?;
        // SAFETY: each entry is resolved by its exported name, whose C signature the
        // entry declares (generated from nvrtc.h); the table keeps the library open for
        // the rest of the process.
        Ok(unsafe {
            Self::fill_in_place(slot, library, false, |library, fns| {
                for (f, e) in fns.iter_mut().zip(crate::nvrtc::NVRTC_ENTRIES) {
                    *f = erase(library.symbol(e.symbol_cstr()));
                }
            })
        })
    }
}

/// Sets each entry of `fns` (those of [`RUNTIME_ENTRIES`](crate::RUNTIME_ENTRIES), in
/// order; left `None`: missing) from `dlsym` (`GetProcAddress` on Windows).
#[cfg(all(feature = "loaded", any(unix, windows), feature = "runtime"))]
fn resolve_runtime(
    fns: &mut [Option<Erased>],
    options: LoadOptions,
    dlsym: impl Fn(&CStr) -> *mut c_void,
) {
    for (slot, e) in fns.iter_mut().zip(crate::RUNTIME_ENTRIES) {
        let per_thread = e.lookup_cstr();
        *slot = erase(if options.per_thread_default_stream && !per_thread.is_empty() {
            // As for the driver: the per-thread variant or nothing.
            dlsym(per_thread)
        } else {
            dlsym(e.symbol_cstr())
        });
    }
}

#[cfg(test)]
mod tests {
    extern crate std;

    use super::*;
    use crate::DRIVER_ENTRIES;
    #[cfg(all(feature = "loaded", any(unix, windows), feature = "runtime"))]
    use crate::RUNTIME_ENTRIES;
    #[cfg(feature = "runtime")]
    use crate::RuntimeApi;
    use std::string::String;
    use std::vec::Vec;

    /// `resolve_driver`'s answer as addresses (null: missing).
    fn resolve_addrs(
        options: LoadOptions,
        driver_version: u32,
        gpa: Option<GetProcAddressFn>,
        dlsym: impl Fn(&CStr) -> *mut c_void,
    ) -> Vec<*mut c_void> {
        let mut fns = std::vec![None; DRIVER_ENTRIES.len()];
        resolve_driver(&mut fns, options, driver_version, gpa, dlsym);
        fns.iter().map(|f| f.map_or(core::ptr::null_mut(), |f| f as *mut c_void)).collect()
    }

    /// `resolve_runtime`'s answer as addresses (null: missing).
    #[cfg(all(feature = "loaded", any(unix, windows), feature = "runtime"))]
    fn runtime_addrs(
        options: LoadOptions,
        dlsym: impl Fn(&CStr) -> *mut c_void,
    ) -> Vec<*mut c_void> {
        let mut fns = std::vec![None; RUNTIME_ENTRIES.len()];
        resolve_runtime(&mut fns, options, dlsym);
        fns.iter().map(|f| f.map_or(core::ptr::null_mut(), |f| f as *mut c_void)).collect()
    }

    /// A driver as new as the headers.
    const V13: u32 = crate::CUDA_VERSION;

    /// A fake address for symbol `index` of `names` (never called, only compared).
    fn fake(index: usize) -> *mut c_void {
        core::ptr::without_provenance_mut(0x1000 + 16 * index)
    }

    /// A `dlsym` that knows `names`, recording every name it is asked for.
    fn mock_dlsym<'a>(
        names: &'a [&'a str],
        asked: &'a std::cell::RefCell<Vec<String>>,
    ) -> impl Fn(&CStr) -> *mut c_void + 'a {
        move |symbol| {
            let symbol = symbol.to_str().unwrap_or("");
            asked.borrow_mut().push(symbol.into());
            names
                .iter()
                .position(|n| *n == symbol)
                .map_or(core::ptr::null_mut(), fake)
        }
    }

    fn driver_index(name: &str) -> usize {
        DRIVER_ENTRIES
            .iter()
            .position(|e| e.name == name)
            .unwrap_or(usize::MAX)
    }

    const EXPORTS: [&str; 6] = [
        "cuInit",
        "cuMemcpyHtoD_v2",
        "cuMemcpyHtoD_v2_ptds",
        "cuLaunchKernel",
        "cuLaunchKernel_ptsz",
        "cuStreamSynchronize",
    ];

    /// A driver without `cuGetProcAddress_v2`: with per-thread default stream, entries
    /// that have a per-thread variant come from their `_ptds`/`_ptsz` symbol.
    #[test]
    fn dlsym_fallback_honours_per_thread_default_stream() {
        let asked = std::cell::RefCell::new(Vec::new());
        let per_thread = LoadOptions {
            per_thread_default_stream: true,
        };
        let addrs = resolve_addrs(per_thread, V13, None, mock_dlsym(&EXPORTS, &asked));
        let at = |name| addrs.get(driver_index(name)).copied();
        assert_eq!(at("cuInit"), Some(fake(0)), "no variant: the plain symbol");
        assert_eq!(at("cuMemcpyHtoD"), Some(fake(2)));
        assert_eq!(at("cuLaunchKernel"), Some(fake(4)));
        // The mock has only the legacy cuStreamSynchronize: the entry stays missing
        // rather than silently meaning the legacy stream.
        assert_eq!(at("cuStreamSynchronize"), Some(core::ptr::null_mut()));
        let asked = asked.borrow();
        assert!(asked.iter().any(|s| s == "cuStreamSynchronize_ptsz"));
        assert!(!asked.iter().any(|s| s == "cuStreamSynchronize"));

        let asked = std::cell::RefCell::new(Vec::new());
        let addrs = resolve_addrs(
            LoadOptions::default(),
            V13,
            None,
            mock_dlsym(&EXPORTS, &asked),
        );
        let at = |name| addrs.get(driver_index(name)).copied();
        assert_eq!(at("cuMemcpyHtoD"), Some(fake(1)));
        assert_eq!(at("cuLaunchKernel"), Some(fake(3)));
        assert_eq!(at("cuStreamSynchronize"), Some(fake(5)));
        assert!(
            !asked
                .borrow()
                .iter()
                .any(|s| s.ends_with("_ptds") || s.ends_with("_ptsz"))
        );
    }

    /// A `cuGetProcAddress_v2` that serves nothing.
    unsafe extern "C" fn gpa_none(
        _symbol: *const core::ffi::c_char,
        _pfn: *mut *mut c_void,
        _version: c_int,
        _flags: crate::cuuint64_t,
        _status: *mut crate::CUdriverProcAddressQueryResult,
    ) -> crate::CUresult {
        crate::CUresult::CUDA_ERROR_NOT_FOUND
    }

    /// A `cuGetProcAddress_v2` that serves everything, at an address that encodes the
    /// ABI version and flags it was asked with.
    unsafe extern "C" fn gpa_echo(
        _symbol: *const core::ffi::c_char,
        pfn: *mut *mut c_void,
        version: c_int,
        flags: crate::cuuint64_t,
        status: *mut crate::CUdriverProcAddressQueryResult,
    ) -> crate::CUresult {
        let encoded = (version as usize) << 8 | flags as usize;
        // SAFETY: the loader passes valid out-pointers.
        unsafe {
            *pfn = core::ptr::without_provenance_mut(encoded);
            *status = CUdriverProcAddressQueryResult::CU_GET_PROC_ADDRESS_SUCCESS;
        }
        crate::CUresult::CUDA_SUCCESS
    }

    #[test]
    fn entries_cu_get_proc_address_lacks_fall_back_to_the_per_thread_symbol() {
        let asked = std::cell::RefCell::new(Vec::new());
        let per_thread = LoadOptions {
            per_thread_default_stream: true,
        };
        let addrs = resolve_addrs(
            per_thread,
            V13,
            Some(gpa_none),
            mock_dlsym(&EXPORTS, &asked),
        );
        let at = |name| addrs.get(driver_index(name)).copied();
        assert_eq!(at("cuMemcpyHtoD"), Some(fake(2)));
        assert_eq!(at("cuLaunchKernel"), Some(fake(4)));
        assert_eq!(at("cuInit"), Some(fake(0)));
    }

    #[test]
    fn cu_get_proc_address_is_asked_for_the_per_thread_abi() {
        let none = |_: &CStr| core::ptr::null_mut();
        let ptds = crate::CUdriverProcAddress_flags::CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM.0
            as usize;
        let per_thread = LoadOptions {
            per_thread_default_stream: true,
        };
        let addrs = resolve_addrs(per_thread, V13, Some(gpa_echo), none);
        let at = |name| addrs.get(driver_index(name)).map(|p| p.addr());
        assert_eq!(at("cuLaunchKernel"), Some(7000 << 8 | ptds));
        assert_eq!(at("cuMemAlloc"), Some(3020 << 8 | ptds));
        let addrs = resolve_addrs(LoadOptions::default(), V13, Some(gpa_echo), none);
        let at = |name| addrs.get(driver_index(name)).map(|p| p.addr());
        assert_eq!(at("cuLaunchKernel"), Some(4000 << 8));
    }

    #[test]
    #[cfg(all(feature = "loaded", any(unix, windows), feature = "runtime"))]
    fn runtime_per_thread_entries_do_not_fall_back_to_the_legacy_symbol() {
        let exports = [
            "cudaMemcpy",
            "cudaMemcpy_ptds",
            "cudaLaunchKernel",
            "cudaMalloc",
        ];
        let index = |name: &str| RUNTIME_ENTRIES.iter().position(|e| e.name == name);
        let asked = std::cell::RefCell::new(Vec::new());
        let per_thread = LoadOptions {
            per_thread_default_stream: true,
        };
        let addrs = runtime_addrs(per_thread, mock_dlsym(&exports, &asked));
        let at = |name| index(name).and_then(|i| addrs.get(i).copied());
        assert_eq!(at("cudaMemcpy"), Some(fake(1)));
        assert_eq!(at("cudaLaunchKernel"), Some(core::ptr::null_mut()));
        assert_eq!(at("cudaMalloc"), Some(fake(3)));
    }

    /// A CUDA 12.2 driver's symbol set, as its `cudaTypedefs.h` declares it, for the
    /// entries these tests look at (abridged from `tests/driver_abi/12.2.txt`).
    const DRIVER_12_2: &[(&str, &[u32])] = &[
        ("cuCtxCreate", &[2000, 3020, 11040]),
        ("cuCtxSetFlags", &[12010]),
        ("cuDriverGetVersion", &[2020]),
        ("cuEventElapsedTime", &[2000]),
        ("cuFuncGetParamInfo", &[]),
        ("cuGraphAddNode", &[12020]),
        ("cuInit", &[2000]),
        ("cuStreamGetCaptureInfo", &[10010, 11030]),
        ("cuLaunchKernel", &[4000]),
        ("cuLaunchHostFunc", &[10000]),
    ];

    std::thread_local! {
        /// Every ABI version the mock `cuGetProcAddress` was asked for, on this thread.
        static ASKED: std::cell::RefCell<Vec<(String, i32)>> =
            const { std::cell::RefCell::new(Vec::new()) };
    }

    /// The address the mock hands out for ABI `abi` of function `index`.
    fn abi_address(index: usize, abi: u32) -> *mut c_void {
        core::ptr::without_provenance_mut((index + 1) << 20 | abi as usize)
    }

    /// `cuGetProcAddress_v2` with a real driver's semantics over [`DRIVER_12_2`]: the
    /// newest ABI of the symbol that is not newer than the version asked for, whatever
    /// the driver's own version (so asked for 12050, it answers with 11040).
    unsafe extern "C" fn gpa_12_2(
        symbol: *const core::ffi::c_char,
        pfn: *mut *mut c_void,
        version: c_int,
        _flags: crate::cuuint64_t,
        status: *mut CUdriverProcAddressQueryResult,
    ) -> CUresult {
        // SAFETY: the loader passes a NUL-terminated name and valid out-pointers.
        let (name, pfn, status) = unsafe { (CStr::from_ptr(symbol), &mut *pfn, &mut *status) };
        let name = name.to_str().unwrap_or("");
        ASKED.with(|a| a.borrow_mut().push((name.into(), version)));
        *pfn = core::ptr::null_mut();
        let Some((index, (_, abis))) = DRIVER_12_2
            .iter()
            .enumerate()
            .find(|(_, (n, _))| *n == name)
        else {
            *status = CUdriverProcAddressQueryResult::CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
            return CUresult::CUDA_ERROR_NOT_FOUND;
        };
        match abis
            .iter()
            .copied()
            .filter(|&a| a as c_int <= version)
            .max()
        {
            Some(abi) => {
                *pfn = abi_address(index, abi);
                *status = CUdriverProcAddressQueryResult::CU_GET_PROC_ADDRESS_SUCCESS;
                CUresult::CUDA_SUCCESS
            }
            None => {
                *status =
                    CUdriverProcAddressQueryResult::CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
                CUresult::CUDA_ERROR_NOT_FOUND
            }
        }
    }

    unsafe extern "C" fn version_12_2(v: *mut c_int) -> CUresult {
        // SAFETY: a valid out-pointer.
        unsafe { *v = 12020 };
        CUresult::CUDA_SUCCESS
    }

    unsafe extern "C" fn version_fails(_v: *mut c_int) -> CUresult {
        CUresult::CUDA_ERROR_NOT_INITIALIZED
    }

    /// The soundness rule: on a 12.2 driver, the entries whose ABI is newer than 12.2
    /// are never asked for and stay missing (a real driver would hand out its older,
    /// differently typed ABI), and every address the table holds is of exactly the ABI
    /// its entry declares.
    #[test]
    fn entries_newer_than_the_driver_are_missing_never_an_older_abi() {
        ASKED.with(|a| a.borrow_mut().clear());
        let none = |_: &CStr| core::ptr::null_mut();
        let addrs = resolve_addrs(LoadOptions::default(), 12020, Some(gpa_12_2), none);
        let at = |name| addrs.get(driver_index(name)).copied();
        let index = |name| {
            DRIVER_12_2
                .iter()
                .position(|(n, _)| *n == name)
                .unwrap_or(99)
        };
        // Examples from the committed headers (13.0 and later), where these functions'
        // newest ABIs are newer than 12.2; a cudadrv-sys regenerated from older headers
        // runs the general checks below only.
        if crate::CUDA_VERSION >= 13000 {
            // 13.0 ABIs the driver lacks: missing.
            assert_eq!(
                at("cuCtxCreate"),
                Some(core::ptr::null_mut()),
                "12050 > 12020"
            );
            assert_eq!(at("cuEventElapsedTime"), Some(core::ptr::null_mut()));
            assert_eq!(at("cuGraphAddNode"), Some(core::ptr::null_mut()));
            assert_eq!(at("cuStreamGetCaptureInfo"), Some(core::ptr::null_mut()));
            // Their older ABIs: exactly those.
            let cc = index("cuCtxCreate");
            assert_eq!(at("cuCtxCreate_v3020"), Some(abi_address(cc, 3020)));
            let ev = index("cuEventElapsedTime");
            assert_eq!(at("cuEventElapsedTime_v2000"), Some(abi_address(ev, 2000)));
            let an = index("cuGraphAddNode");
            assert_eq!(at("cuGraphAddNode_v12020"), Some(abi_address(an, 12020)));
            let ci = index("cuStreamGetCaptureInfo");
            assert_eq!(
                at("cuStreamGetCaptureInfo_v11030"),
                Some(abi_address(ci, 11030))
            );
            // Present at their own ABI; absent from the driver.
            assert_eq!(
                at("cuCtxSetFlags"),
                Some(abi_address(index("cuCtxSetFlags"), 12010))
            );
            assert_eq!(at("cuFuncGetParamInfo"), Some(core::ptr::null_mut()));
        }
        // Never asked for an ABI newer than the driver.
        ASKED.with(|a| {
            let asked = a.borrow();
            assert!(!asked.is_empty());
            assert!(asked.iter().all(|(_, v)| *v <= 12020), "{asked:?}");
            assert!(
                !asked.iter().any(|(n, _)| n == "cuFuncGetParamInfo"),
                "12040"
            );
        });
        // Whatever resolved is the ABI its entry declares.
        for (e, addr) in DRIVER_ENTRIES.iter().zip(addrs) {
            if !addr.is_null() {
                assert_eq!((addr.addr() & 0xF_FFFF) as u32, e.version, "{}", e.name);
            }
        }
    }

    /// A query that reports anything but `CU_GET_PROC_ADDRESS_SUCCESS` does not count,
    /// even with `CUDA_SUCCESS` and a pointer.
    #[test]
    fn the_query_status_is_checked() {
        unsafe extern "C" fn gpa_lies(
            _symbol: *const core::ffi::c_char,
            pfn: *mut *mut c_void,
            _version: c_int,
            _flags: crate::cuuint64_t,
            status: *mut CUdriverProcAddressQueryResult,
        ) -> CUresult {
            // SAFETY: the loader passes valid out-pointers.
            unsafe {
                *pfn = core::ptr::without_provenance_mut(0x1234);
                *status =
                    CUdriverProcAddressQueryResult::CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
            }
            CUresult::CUDA_SUCCESS
        }
        let none = |_: &CStr| core::ptr::null_mut();
        let addrs = resolve_addrs(LoadOptions::default(), V13, Some(gpa_lies), none);
        assert!(addrs.iter().all(|p| p.is_null()));
    }

    /// A driver that reports 13.1 but lacks an ABI of 13.1 (answers with the older
    /// one): the newer entry is left out, the older one kept.
    #[test]
    fn an_older_answer_to_a_newer_abi_is_left_out() {
        if crate::CUDA_VERSION < 13010 {
            return; // headers without cuLaunchHostFunc_v2
        }
        let none = |_: &CStr| core::ptr::null_mut();
        let addrs = resolve_addrs(LoadOptions::default(), 13010, Some(gpa_12_2), none);
        let at = |name| addrs.get(driver_index(name)).copied();
        let index = DRIVER_12_2
            .iter()
            .position(|(n, _)| *n == "cuLaunchHostFunc")
            .unwrap_or(99);
        assert_eq!(at("cuLaunchHostFunc"), Some(abi_address(index, 10000)));
        assert_eq!(at("cuLaunchHostFunc_v2"), Some(core::ptr::null_mut()));
    }

    /// Through the public constructor: the version is read first, and a driver whose
    /// `cuDriverGetVersion` fails gives no table.
    #[test]
    fn from_get_proc_address_reads_the_version_first() {
        // SAFETY: mock entry points with the contracts of the real ones (the addresses
        // they hand out are never called).
        let api = unsafe {
            DriverApi::from_get_proc_address(
                Library::none(),
                gpa_12_2,
                version_12_2,
                LoadOptions::default(),
            )
        };
        let api = api.unwrap_or_else(|e| panic!("{e}"));
        assert!(api.cuCtxCreate_v3020().is_ok());
        // With the committed headers (13.0 and later) the newest ABIs are 12.5 and 12.8.
        if crate::CUDA_VERSION >= 13000 {
            assert!(api.cuCtxCreate().is_err());
            assert_eq!(
                api.cuEventElapsedTime().err().map(|m| m.name),
                Some("cuEventElapsedTime")
            );
        }
        // SAFETY: as above.
        let failed = unsafe {
            DriverApi::from_get_proc_address(
                Library::none(),
                gpa_12_2,
                version_fails,
                LoadOptions::default(),
            )
        };
        assert!(matches!(
            failed,
            Err(LoadError::MissingEntryPoint {
                symbol: "cuDriverGetVersion",
                ..
            })
        ));
    }

    /// An older driver without `cuGetProcAddress_v2` (dlsym only) gets the same rule:
    /// nothing newer than the driver, even if an export of that name exists.
    #[test]
    fn dlsym_path_honours_the_driver_version() {
        let asked = std::cell::RefCell::new(Vec::new());
        let exports = ["cuInit", "cuCtxCreate_v2", "cuCtxCreate_v4"];
        let addrs = resolve_addrs(
            LoadOptions::default(),
            11080,
            None,
            mock_dlsym(&exports, &asked),
        );
        let at = |name| addrs.get(driver_index(name)).copied();
        assert_eq!(at("cuCtxCreate_v3020"), Some(fake(1)));
        assert!(!asked.borrow().iter().any(|s| s == "cuCtxCreate_v4"));
        // With the committed headers (13.0 and later) `cuCtxCreate` is `cuCtxCreate_v4`.
        if crate::CUDA_VERSION >= 13000 {
            assert_eq!(at("cuCtxCreate"), Some(core::ptr::null_mut()));
        }
    }

    /// The tables have no drop glue: dropping one never closes its library, so the
    /// function pointers it handed out stay valid.
    #[test]
    fn tables_never_close_their_library() {
        assert!(!core::mem::needs_drop::<DriverApi>());
        #[cfg(feature = "runtime")]
        assert!(!core::mem::needs_drop::<RuntimeApi>());
    }

    /// The same on a real library: after the table is dropped, `libz` is still loaded
    /// (while dropping a plain `Library` unloads it).
    #[test]
    #[cfg(all(feature = "loaded", unix))]
    #[cfg_attr(miri, ignore = "calls dlopen")]
    fn a_dropped_table_leaves_its_library_loaded() {
        let path = c"libz.so.1";
        let loaded = || {
            // SAFETY: RTLD_NOLOAD only looks the library up; the handle it returns (one
            // more reference) is closed at once.
            let handle = unsafe { crate::unix::dlopen(path.as_ptr(), crate::unix::RTLD_NOW | crate::unix::RTLD_NOLOAD) };
            if !handle.is_null() {
                // SAFETY: `handle` came from dlopen just above.
                unsafe { crate::unix::dlclose(handle) };
            }
            !handle.is_null()
        };
        #[allow(clippy::result_large_err)] // the loader's own error text
        // SAFETY: zlib has no initialisers or finalisers that affect this program.
        let open = || unsafe { crate::Library::open(path) };
        let Ok(library) = open() else {
            std::println!("skipped: libz.so.1 is not installed");
            return;
        };
        drop(library);
        if loaded() {
            std::println!("skipped: libz.so.1 stays loaded in this process anyway");
            return;
        }
        let Ok(library) = open() else {
            panic!("libz.so.1 opened once but not twice");
        };
        // SAFETY: no entry is resolved (all null).
        let table = unsafe { DriverApi::from_resolver(library, |_| core::ptr::null_mut()) };
        #[allow(clippy::drop_non_drop)] // that it has no drop glue is what is tested
        drop(table);
        assert!(loaded(), "dropping the table closed libz");
    }
}
