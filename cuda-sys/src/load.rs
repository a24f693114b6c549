//! Loaded mode: filling the tables from `libcuda` and `libcudart`.
#![allow(clippy::result_large_err)]

use core::ffi::{c_int, c_void};

use crate::loader::{self, Library, LoadError};
use crate::{DriverApi, Entry, LoadOptions, RuntimeApi};

/// `cuGetProcAddress_v2`, the one entry point the driver loader looks up by name.
type GetProcAddress = unsafe extern "C" fn(
    symbol: *const core::ffi::c_char,
    pfn: *mut *mut c_void,
    cuda_version: c_int,
    flags: crate::cuuint64_t,
    status: *mut crate::CUdriverProcAddressQueryResult,
) -> crate::CUresult;

/// Opens `libcuda` and fills a driver table.
///
/// Each entry is asked of `cuGetProcAddress_v2` with its ABI version (its per-thread
/// version with [`LoadOptions::per_thread_default_stream`]). A driver too old to have
/// `cuGetProcAddress_v2` (before CUDA 12.0) is read with `dlsym` of the versioned
/// symbols instead. Entries the driver lacks stay missing.
pub fn load_driver(options: LoadOptions) -> Result<DriverApi, LoadError> {
    let library = loader::open_driver()?;
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
    let flags = if options.per_thread_default_stream {
        crate::CUdriverProcAddress_flags::CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM.0 as u64
    } else {
        crate::CUdriverProcAddress_flags::CU_GET_PROC_ADDRESS_DEFAULT.0 as u64
    };
    let resolve = |lib: &Library, e: &Entry| -> *mut c_void {
        if let Some(gpa) = gpa {
            let version = match (
                options.per_thread_default_stream,
                e.per_thread_version,
                e.version,
            ) {
                (true, v, _) if v != 0 => v,
                (_, _, 0) => crate::CUDA_VERSION,
                (_, _, v) => v,
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
        lib.symbol(e.symbol_cstr())
    };
    // Resolve against the library before handing it to the table that owns it.
    let mut addrs = [core::ptr::null_mut::<c_void>(); crate::DRIVER_ENTRIES.len()];
    for (slot, e) in addrs.iter_mut().zip(crate::DRIVER_ENTRIES) {
        *slot = resolve(&library, e);
    }
    let mut next = addrs.iter();
    // SAFETY: each address came from the driver for the entry of the same index, whose
    // signature the generated table declares; the library lives inside the table.
    Ok(unsafe {
        DriverApi::from_resolver(library, |_| {
            next.next().copied().unwrap_or(core::ptr::null_mut())
        })
    })
}

/// Opens `libcudart` (search order: [`loader::open_runtime`]) and fills a runtime table
/// with `dlsym`; with per-thread default stream, `_ptds`/`_ptsz` symbols come first.
pub fn load_runtime(options: LoadOptions) -> Result<RuntimeApi, LoadError> {
    let library = loader::open_runtime()?;
    let mut addrs = [core::ptr::null_mut::<c_void>(); crate::RUNTIME_ENTRIES.len()];
    for (slot, e) in addrs.iter_mut().zip(crate::RUNTIME_ENTRIES) {
        let per_thread = e.lookup_cstr();
        let mut ptr = core::ptr::null_mut();
        if options.per_thread_default_stream && !per_thread.is_empty() {
            ptr = library.symbol(per_thread);
        }
        if ptr.is_null() {
            ptr = library.symbol(e.symbol_cstr());
        }
        *slot = ptr;
    }
    let mut next = addrs.iter();
    // SAFETY: addresses of the runtime's exports for the entries of the same index.
    Ok(unsafe {
        RuntimeApi::from_resolver(library, |_| {
            next.next().copied().unwrap_or(core::ptr::null_mut())
        })
    })
}

/// Installs `table` as the process-wide driver table (a mock, or one loaded with other
/// options) if no table is loaded yet; [`driver()`](crate::driver) then returns it.
/// Gives the table back if one was already loaded (or is being loaded).
pub fn install_driver(table: DriverApi) -> Result<(), DriverApi> {
    let mut slot = Some(table);
    crate::DRIVER.set_with(|| slot.take().ok_or(LoadError::AlreadyLoaded));
    match slot {
        None => Ok(()),
        Some(rejected) => Err(rejected),
    }
}
