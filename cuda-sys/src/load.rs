//! Loaded mode (feature `loaded`, Unix targets): filling the tables from `libcuda` and
//! `libcudart` with `dlopen`, `cuGetProcAddress_v2` and `dlsym`.
//!
//! # Unsafe policy
//! Opening a library runs its initialisers, so the constructors that do it
//! ([`DriverApi::load`], `RuntimeApi::load`) are `unsafe`; the addresses they resolve
//! are turned into typed function pointers by the tables' `from_resolver`, with the
//! signature the generated table declares for the same entry.
#![allow(clippy::result_large_err)]

use core::ffi::{CStr, c_int, c_void};

#[cfg(feature = "runtime")]
use crate::RuntimeApi;
use crate::loader::{self, LoadError};
use crate::{DriverApi, Entry, LoadOptions};

/// `cuGetProcAddress_v2`, the one entry point the driver loader looks up by name.
type GetProcAddress = unsafe extern "C" fn(
    symbol: *const core::ffi::c_char,
    pfn: *mut *mut c_void,
    cuda_version: c_int,
    flags: crate::cuuint64_t,
    status: *mut crate::CUdriverProcAddressQueryResult,
) -> crate::CUresult;

impl DriverApi {
    /// Opens `libcuda` ([`loader::open_driver`]: `$CUDA_SYS_LIBCUDA`, then
    /// `libcuda.so.1`, then `libcuda.so`) and fills a driver table.
    ///
    /// Each entry is asked of `cuGetProcAddress_v2` with its ABI version (its per-thread
    /// version with [`LoadOptions::per_thread_default_stream`]). A driver too old to have
    /// `cuGetProcAddress_v2` (before CUDA 12.0), or an entry it does not serve, is read
    /// with `dlsym` of the versioned symbol instead; with per-thread default stream, of
    /// its `_ptds`/`_ptsz` symbol ([`Entry::per_thread_symbol`]) for the entries that
    /// have one, never of the legacy-stream one. Entries the driver lacks stay missing.
    ///
    /// The table keeps `libcuda` open for the rest of the process (see [`DriverApi`]).
    /// [`driver()`](crate::driver) calls this once for the process-wide table.
    ///
    /// # Errors
    /// [`LoadError::LibraryNotFound`] naming every candidate tried,
    /// [`LoadError::BadEnvPath`] for an unusable `$CUDA_SYS_LIBCUDA`, and
    /// [`LoadError::MissingEntryPoint`] for a library with neither
    /// `cuGetProcAddress_v2` nor `cuInit`.
    ///
    /// # Safety
    /// Opening the library runs its initialisers (and those of the libraries it needs)
    /// in this process. The library the search finds must be the CUDA driver, or one
    /// with the same exports and C signatures (a mock built for it): whatever
    /// `$CUDA_SYS_LIBCUDA` or the loader path names is opened and trusted.
    #[cfg_attr(docsrs, doc(cfg(all(feature = "loaded", unix))))]
    pub unsafe fn load(options: LoadOptions) -> Result<Self, LoadError> {
        // SAFETY: the caller vouches for the library the search finds (`# Safety`).
        let library = unsafe { loader::open_driver() }?;
        let gpa = library.symbol(c"cuGetProcAddress_v2");
        let gpa: Option<GetProcAddress> = if gpa.is_null() {
            None
        } else {
            // SAFETY: the driver exports cuGetProcAddress_v2 with this C signature
            // (cudaTypedefs.h: PFN_cuGetProcAddress_v12000).
            Some(unsafe { core::mem::transmute::<*mut c_void, GetProcAddress>(gpa) })
        };
        if gpa.is_none() && library.symbol(c"cuInit").is_null() {
            return Err(LoadError::MissingEntryPoint {
                library: "libcuda",
                symbol: "cuInit",
            });
        }
        // Resolve against the library before handing it to the table that owns it.
        let addrs = resolve_driver(options, gpa, |symbol| library.symbol(symbol));
        let mut next = addrs.iter();
        // SAFETY: each address came from the driver for the entry of the same index,
        // whose signature the generated table declares (per-thread variants share it);
        // the table keeps the library open for the rest of the process, so they stay
        // valid.
        Ok(unsafe {
            DriverApi::from_resolver(library, |_| {
                next.next().copied().unwrap_or(core::ptr::null_mut())
            })
        })
    }
}

/// The address of each entry of [`DRIVER_ENTRIES`](crate::DRIVER_ENTRIES), in order
/// (null: missing), from `gpa` (`cuGetProcAddress_v2`) if the driver has it, else or
/// when it fails from `dlsym`.
fn resolve_driver(
    options: LoadOptions,
    gpa: Option<GetProcAddress>,
    dlsym: impl Fn(&CStr) -> *mut c_void,
) -> [*mut c_void; crate::DRIVER_ENTRIES.len()] {
    let flags = if options.per_thread_default_stream {
        crate::CUdriverProcAddress_flags::CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM.0 as u64
    } else {
        crate::CUdriverProcAddress_flags::CU_GET_PROC_ADDRESS_DEFAULT.0 as u64
    };
    let per_thread = |e: &Entry| options.per_thread_default_stream && e.per_thread_version != 0;
    let resolve = |e: &Entry| -> *mut c_void {
        if let Some(gpa) = gpa {
            let version = match (per_thread(e), e.version) {
                (true, _) => e.per_thread_version,
                (false, 0) => crate::CUDA_VERSION,
                (false, v) => v,
            };
            let mut ptr = core::ptr::null_mut();
            let mut status = crate::CUdriverProcAddressQueryResult(0);
            // SAFETY: lookup is NUL-terminated; ptr and status are valid out-pointers.
            let rc = unsafe {
                gpa(
                    e.lookup_cstr().as_ptr(),
                    &mut ptr,
                    version as c_int,
                    flags,
                    &mut status,
                )
            };
            if rc == crate::CUresult::CUDA_SUCCESS && !ptr.is_null() {
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
    let mut addrs = [core::ptr::null_mut::<c_void>(); crate::DRIVER_ENTRIES.len()];
    for (slot, e) in addrs.iter_mut().zip(crate::DRIVER_ENTRIES) {
        *slot = resolve(e);
    }
    addrs
}

#[cfg(feature = "runtime")]
impl RuntimeApi {
    /// Opens `libcudart` (search order: [`loader::open_runtime`]) and fills a runtime
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
    #[cfg_attr(docsrs, doc(cfg(all(feature = "loaded", feature = "runtime", unix))))]
    pub unsafe fn load(options: LoadOptions) -> Result<Self, LoadError> {
        // SAFETY: the caller vouches for the library the search finds (`# Safety`).
        let library = unsafe { loader::open_runtime() }?;
        let addrs = resolve_runtime(options, |symbol| library.symbol(symbol));
        let mut next = addrs.iter();
        // SAFETY: addresses of the runtime's exports for the entries of the same index;
        // the table keeps the library open for the rest of the process, so they stay
        // valid.
        Ok(unsafe {
            RuntimeApi::from_resolver(library, |_| {
                next.next().copied().unwrap_or(core::ptr::null_mut())
            })
        })
    }
}

/// The address of each entry of [`RUNTIME_ENTRIES`](crate::RUNTIME_ENTRIES), in order
/// (null: missing), from `dlsym`.
#[cfg(feature = "runtime")]
fn resolve_runtime(
    options: LoadOptions,
    dlsym: impl Fn(&CStr) -> *mut c_void,
) -> [*mut c_void; crate::RUNTIME_ENTRIES.len()] {
    let mut addrs = [core::ptr::null_mut::<c_void>(); crate::RUNTIME_ENTRIES.len()];
    for (slot, e) in addrs.iter_mut().zip(crate::RUNTIME_ENTRIES) {
        let per_thread = e.lookup_cstr();
        *slot = if options.per_thread_default_stream && !per_thread.is_empty() {
            // As for the driver: the per-thread variant or nothing.
            dlsym(per_thread)
        } else {
            dlsym(e.symbol_cstr())
        };
    }
    addrs
}

#[cfg(test)]
mod tests {
    extern crate std;

    use super::*;
    use crate::DRIVER_ENTRIES;
    #[cfg(feature = "runtime")]
    use crate::RUNTIME_ENTRIES;
    use std::string::String;
    use std::vec::Vec;

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
        let addrs = resolve_driver(per_thread, None, mock_dlsym(&EXPORTS, &asked));
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
        let addrs = resolve_driver(LoadOptions::default(), None, mock_dlsym(&EXPORTS, &asked));
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
        _status: *mut crate::CUdriverProcAddressQueryResult,
    ) -> crate::CUresult {
        let encoded = (version as usize) << 8 | flags as usize;
        // SAFETY: the loader passes a valid out-pointer.
        unsafe { *pfn = core::ptr::without_provenance_mut(encoded) };
        crate::CUresult::CUDA_SUCCESS
    }

    #[test]
    fn entries_cu_get_proc_address_lacks_fall_back_to_the_per_thread_symbol() {
        let asked = std::cell::RefCell::new(Vec::new());
        let per_thread = LoadOptions {
            per_thread_default_stream: true,
        };
        let addrs = resolve_driver(per_thread, Some(gpa_none), mock_dlsym(&EXPORTS, &asked));
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
        let addrs = resolve_driver(per_thread, Some(gpa_echo), none);
        let at = |name| addrs.get(driver_index(name)).map(|p| p.addr());
        assert_eq!(at("cuLaunchKernel"), Some(7000 << 8 | ptds));
        assert_eq!(at("cuMemAlloc"), Some(3020 << 8 | ptds));
        let addrs = resolve_driver(LoadOptions::default(), Some(gpa_echo), none);
        let at = |name| addrs.get(driver_index(name)).map(|p| p.addr());
        assert_eq!(at("cuLaunchKernel"), Some(4000 << 8));
    }

    #[test]
    #[cfg(feature = "runtime")]
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
        let addrs = resolve_runtime(per_thread, mock_dlsym(&exports, &asked));
        let at = |name| index(name).and_then(|i| addrs.get(i).copied());
        assert_eq!(at("cudaMemcpy"), Some(fake(1)));
        assert_eq!(at("cudaLaunchKernel"), Some(core::ptr::null_mut()));
        assert_eq!(at("cudaMalloc"), Some(fake(3)));
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
    #[cfg_attr(miri, ignore = "calls dlopen")]
    fn a_dropped_table_leaves_its_library_loaded() {
        let path = c"libz.so.1";
        let loaded = || {
            // SAFETY: RTLD_NOLOAD only looks the library up; the handle it returns (one
            // more reference) is closed at once.
            let handle = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
            if !handle.is_null() {
                // SAFETY: `handle` came from dlopen just above.
                unsafe { libc::dlclose(handle) };
            }
            !handle.is_null()
        };
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
