//! The driver's host objects, one file per driver API section: initialization and
//! version (here), [`Device`](crate::Device) (`device.rs`, "Device Management"),
//! [`Context`](crate::Context) and its limits (`context.rs`, `limits.rs`, "Context
//! Management"), [`Module`](crate::Module), [`Function`](crate::Function) and
//! [`Linker`](crate::Linker) (`module.rs`, `function.rs`, `linker.rs`, "Module
//! Management" and "Execution Control"), [`Stream`](crate::Stream) (`stream.rs`) and
//! [`Event`](crate::Event) (`event.rs`), and their completions as futures
//! ([`future`]); `refcount.rs` is the reference count the handles that others keep alive
//! share. The handles are re-exported at the crate root.
//!
//! How the host layer reaches the driver: the process-wide table of
//! [`cudadrv_sys::driver()`], initialized with `cuInit(0)` once. Everything in this
//! crate goes through one internal accessor; a test can install a mock table with
//! [`cudadrv_sys::install_driver`] before the first call.

use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use cudadrv_sys::{DriverApi, MissingSymbol};

use crate::error::{Error, Result, drv};

pub(crate) mod context;
pub(crate) mod device;
pub(crate) mod event;
pub(crate) mod function;
pub mod future;
pub(crate) mod limits;
pub(crate) mod linker;
pub(crate) mod module;
pub(crate) mod refcount;
pub(crate) mod stream;

/// Whether `cuInit(0)` succeeded in this process.
static INITIALIZED: AtomicBool = AtomicBool::new(false);

/// The driver table, with `cuInit(0)` done.
///
/// `cuInit` is called until it succeeds once; concurrent first calls may both call it,
/// which the driver allows.
pub(crate) fn api() -> Result<&'static DriverApi> {
    let cu = cudadrv_sys::driver()?;
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
    cudadrv_sys::driver().ok()
}

/// The driver's CUDA version once read (0: not yet).
static VERSION: AtomicU32 = AtomicU32::new(0);

/// The driver's CUDA version (`12040` = 12.4), read once with `cuDriverGetVersion` and
/// cached; `None` when the table cannot tell (no `cuDriverGetVersion`, or it failed).
///
/// Only error paths ask: a call picks its ABI by which table entries resolved (the
/// loader leaves out every entry newer than the driver), never by the version.
pub(crate) fn cached_version() -> Option<u32> {
    let known = VERSION.load(Ordering::Relaxed);
    if known != 0 {
        return Some(known);
    }
    let cu = cudadrv_sys::driver().ok()?;
    let get = cu.cuDriverGetVersion().ok()?;
    let mut v = 0;
    // SAFETY: `v` is a valid out-pointer; cuDriverGetVersion has no other precondition.
    let rc = unsafe { get(&mut v) };
    let v = u32::try_from(v)
        .ok()
        .filter(|&v| rc.is_success() && v > 0)?;
    VERSION.store(v, Ordering::Relaxed);
    Some(v)
}

/// The error for a driver function the table lacks: [`Error::DriverTooOld`] when its
/// ABI is newer than the driver (the call and the version it needs), else
/// [`Error::MissingSymbol`].
fn missing(m: MissingSymbol) -> Error {
    match cached_version() {
        Some(driver) if m.abi > driver => Error::DriverTooOld {
            call: m.name,
            needs: m.abi,
            driver,
        },
        _ => Error::MissingSymbol(m),
    }
}

impl From<MissingSymbol> for Error {
    /// [`Error::DriverTooOld`] when the function's ABI is newer than the driver (the
    /// loader leaves such entries out), else [`Error::MissingSymbol`].
    fn from(e: MissingSymbol) -> Self {
        missing(e)
    }
}

/// Runs a driver call inside `Drop`: `dropping!(cuMemFree(ptr))` reports a failure (and a
/// driver that cannot be reached) through [`report_drop`](crate::error::report_drop).
/// Must be used inside an `unsafe` block; the call carries the C function's contract.
macro_rules! dropping {
    ($name:ident ( $($arg:expr),* $(,)? )) => {
        match $crate::driver::api_for_drop() {
            Some(cu) => match cu.$name() {
                Ok(f) => $crate::error::report_drop(stringify!($name), f($($arg),*)),
                Err(_) => $crate::error::report_drop(
                    stringify!($name),
                    cudadrv_sys::CUresult::CUDA_ERROR_NOT_INITIALIZED,
                ),
            },
            None => $crate::error::report_drop(
                stringify!($name),
                cudadrv_sys::CUresult::CUDA_ERROR_NOT_INITIALIZED,
            ),
        }
    };
}
pub(crate) use dropping;
