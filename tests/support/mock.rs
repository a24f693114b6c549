//! The one mock-driver builder of the mock suites (`tests/mock_*.rs`): a suite lists
//! the driver entries it mocks with [`mock_entries!`](crate::mock_entries), layers
//! those lists ([`MockDriver::entries`], the first list that knows a name wins), and
//! installs the table process-wide ([`MockDriver::install`]) before its first call.
//! Entries no layer knows are missing, so the crate reports them as it would for an old
//! driver.

use std::ffi::c_void;
use std::vec::Vec;

use cudadrv_sys::{DriverApi, Library};

/// Defines `fn $name(name: &str) -> *mut c_void`: the listed driver entries by name
/// (`"cuInit" => cu_init as unsafe extern "C" fn(_) -> _`), null for the others.
#[macro_export]
macro_rules! mock_entries {
    ($(#[$m:meta])* fn $fname:ident { $($c:literal => $f:expr),* $(,)? }) => {
        $(#[$m])*
        fn $fname(name: &str) -> *mut std::ffi::c_void {
            match name {
                $($c => $f as *mut std::ffi::c_void,)*
                _ => std::ptr::null_mut(),
            }
        }
    };
}

/// A mock driver table being put together: layers of entry lists.
#[derive(Default)]
pub struct MockDriver {
    layers: Vec<fn(&str) -> *mut c_void>,
}

impl MockDriver {
    /// No entries yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a layer, asked after the ones added before.
    ///
    /// # Safety
    /// Every non-null pointer `entries` returns for a name must be a function with the C
    /// signature of the driver entry of that name (`cuda.h`'s, or the ABI the table
    /// names), valid for the rest of the process (a plain function of the test program
    /// is).
    pub unsafe fn entries(mut self, entries: fn(&str) -> *mut c_void) -> Self {
        self.layers.push(entries);
        self
    }

    /// Installs the table as the process-wide driver table.
    ///
    /// # Panics
    /// When a driver table was installed or loaded before (a suite installs once, before
    /// its first call into the crate).
    pub fn install(self) {
        // SAFETY: each layer's pointers are functions of the entry's signature, valid for
        // the rest of the process (the promise of `entries`).
        let table = unsafe {
            DriverApi::from_resolver(Library::none(), |e| {
                self.layers
                    .iter()
                    .map(|layer| layer(e.name))
                    .find(|f| !f.is_null())
                    .unwrap_or(std::ptr::null_mut())
            })
        };
        assert!(
            cudadrv_sys::install_driver(table).is_ok(),
            "a driver table was loaded before the mock"
        );
    }
}

/// The `n` JIT option keys and values a `cuModuleLoadDataEx` or `cuLinkCreate` caller
/// passed (the arrays may be null when `n` is 0).
///
/// # Safety
/// With `n > 0`, both arrays must hold `n` entries, alive for `'a`.
pub unsafe fn jit_options<'a>(
    n: std::ffi::c_uint,
    options: *mut cudadrv_sys::CUjit_option,
    values: *mut *mut c_void,
) -> (&'a [cudadrv_sys::CUjit_option], &'a [*mut c_void]) {
    if n == 0 {
        return (&[], &[]);
    }
    // SAFETY: forwarded from the caller.
    unsafe {
        (
            std::slice::from_raw_parts(options, n as usize),
            std::slice::from_raw_parts(values, n as usize),
        )
    }
}
