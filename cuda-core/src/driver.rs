//! How the host layer reaches the driver: the process-wide table of
//! [`cuda_sys::driver()`], initialized with `cuInit(0)` once.
//!
//! Everything in this crate goes through one internal accessor; a test can install a mock table with
//! [`cuda_sys::install_driver`] before the first call.

use core::sync::atomic::{AtomicBool, Ordering};

use cuda_sys::DriverApi;

use crate::error::{Result, drv};

/// Whether `cuInit(0)` succeeded in this process.
static INITIALIZED: AtomicBool = AtomicBool::new(false);

/// The driver table, with `cuInit(0)` done.
///
/// `cuInit` is called until it succeeds once; concurrent first calls may both call it,
/// which the driver allows.
pub(crate) fn api() -> Result<&'static DriverApi> {
    let cu = cuda_sys::driver()?;
    if !INITIALIZED.load(Ordering::Acquire) {
        // SAFETY: cuInit has no preconditions; 0 is the only valid flag value.
        unsafe { drv!(cu, cuInit(0))? };
        INITIALIZED.store(true, Ordering::Release);
    }
    Ok(cu)
}

/// `cuInit(0)`: loads the driver (if not yet loaded) and initializes it.
///
/// Every other function of this crate does this on first use; calling it first only
/// moves the cost (and the error) to a place of the caller's choosing.
///
/// # Errors
/// The loader's error when `libcuda` cannot be loaded; `cuInit`'s result (e.g.
/// `CUDA_ERROR_NO_DEVICE`).
#[doc(alias = "cuInit")]
pub fn init() -> Result<()> {
    api().map(|_| ())
}

/// `cuDriverGetVersion`: the CUDA version the driver supports (`13000` = 13.0).
///
/// # Errors
/// As [`init`], or the call's own error.
#[doc(alias = "cuDriverGetVersion")]
pub fn driver_version() -> Result<i32> {
    let cu = api()?;
    let mut v = 0;
    // SAFETY: `v` is a valid out-pointer.
    unsafe { drv!(cu, cuDriverGetVersion(&mut v))? };
    Ok(v)
}

/// The driver table for a `Drop`: a handle exists only if the driver was loaded, so this
/// is `None` only when a mock table was never installed in a test.
pub(crate) fn api_for_drop() -> Option<&'static DriverApi> {
    cuda_sys::driver().ok()
}
