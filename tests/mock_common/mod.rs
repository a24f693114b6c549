//! What the single-context mock drivers of `mock_memory`, `mock_green` and `mock_kernels`
//! share: one device (ordinal 0) and its primary context (`CTX`), the calling thread's
//! current context, streams, events and modules as fresh handles, `cuCtxSynchronize` logged,
//! a log of driver calls, and the
//! installation of a table that serves a suite's own entries first and these after.
//!
//! Each suite compiles its own copy (`mod mock_common;`), so the statics are per suite.

#![allow(dead_code)]

use std::ffi::{c_int, c_uint, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

use cuda_workspace::mock::MockDriver;
use cudadrv_sys::{CUcontext, CUdevice, CUevent, CUjit_option, CUmodule, CUresult, CUstream};

pub use cuda_workspace::mock_entries;

/// `CUDA_SUCCESS`.
pub const OK: CUresult = CUresult::CUDA_SUCCESS;
/// The primary context's handle.
pub const CTX: usize = 0xC0;

/// The driver calls a suite logs, in order.
pub static LOG: Mutex<Vec<String>> = Mutex::new(Vec::new());
/// The next handle or address handed out.
pub static NEXT: AtomicUsize = AtomicUsize::new(0x5000_0000);

thread_local! {
    static CURRENT: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Locks `m`, also after a panic of another holder (the suites check what they logged).
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Appends a line to [`LOG`].
pub fn log(line: String) {
    lock(&LOG).push(line);
}

/// Takes [`LOG`]'s lines.
pub fn take_log() -> Vec<String> {
    std::mem::take(&mut *lock(&LOG))
}

/// A fresh handle (16 bytes after the last one).
pub fn next<T>() -> *mut T {
    std::ptr::without_provenance_mut(NEXT.fetch_add(0x10, Ordering::Relaxed))
}

pub unsafe extern "C" fn cu_init(_: c_uint) -> CUresult {
    OK
}
pub unsafe extern "C" fn cu_device_get(d: *mut CUdevice, ordinal: c_int) -> CUresult {
    if ordinal != 0 {
        return CUresult::CUDA_ERROR_INVALID_DEVICE;
    }
    unsafe { *d = 0 };
    OK
}
pub unsafe extern "C" fn cu_primary_retain(ctx: *mut CUcontext, _: CUdevice) -> CUresult {
    unsafe { *ctx = std::ptr::without_provenance_mut(CTX) };
    OK
}
pub unsafe extern "C" fn cu_primary_release(_: CUdevice) -> CUresult {
    OK
}
pub unsafe extern "C" fn cu_ctx_get_current(ctx: *mut CUcontext) -> CUresult {
    unsafe { *ctx = std::ptr::without_provenance_mut(CURRENT.with(|c| c.get())) };
    OK
}
pub unsafe extern "C" fn cu_ctx_set_current(ctx: CUcontext) -> CUresult {
    CURRENT.with(|c| c.set(ctx.addr()));
    OK
}
pub unsafe extern "C" fn cu_ctx_push(ctx: CUcontext) -> CUresult {
    CURRENT.with(|c| c.set(ctx.addr()));
    OK
}
pub unsafe extern "C" fn cu_ctx_pop(ctx: *mut CUcontext) -> CUresult {
    if !ctx.is_null() {
        unsafe { *ctx = std::ptr::without_provenance_mut(CURRENT.with(|c| c.get())) };
    }
    CURRENT.with(|c| c.set(0));
    OK
}
pub unsafe extern "C" fn cu_stream_create(s: *mut CUstream, _flags: c_uint) -> CUresult {
    unsafe { *s = next() };
    OK
}
pub unsafe extern "C" fn cu_stream_destroy(_: CUstream) -> CUresult {
    OK
}
pub unsafe extern "C" fn cu_event_create(e: *mut CUevent, _flags: c_uint) -> CUresult {
    unsafe { *e = next() };
    OK
}
pub unsafe extern "C" fn cu_event_destroy(_: CUevent) -> CUresult {
    OK
}

/// Logs `cuCtxSynchronize` (a free or a scope waiting for the context shows in the log).
pub unsafe extern "C" fn cu_ctx_synchronize() -> CUresult {
    log("cuCtxSynchronize".into());
    OK
}
/// A module of any image: a fresh handle (the suites serve their own functions).
pub unsafe extern "C" fn cu_module_load_data_ex(
    m: *mut CUmodule,
    _image: *const c_void,
    _n: c_uint,
    _options: *mut CUjit_option,
    _values: *mut *mut c_void,
) -> CUresult {
    unsafe { *m = next() };
    OK
}
pub unsafe extern "C" fn cu_module_unload(_: CUmodule) -> CUresult {
    OK
}

mock_entries! {
    /// The shared entries by name (null for the others).
    fn common_entry {
        "cuInit" => cu_init as unsafe extern "C" fn(_) -> _,
        "cuDeviceGet" => cu_device_get as unsafe extern "C" fn(_, _) -> _,
        "cuDevicePrimaryCtxRetain" => cu_primary_retain as unsafe extern "C" fn(_, _) -> _,
        "cuDevicePrimaryCtxRelease" => cu_primary_release as unsafe extern "C" fn(_) -> _,
        "cuCtxGetCurrent" => cu_ctx_get_current as unsafe extern "C" fn(_) -> _,
        "cuCtxSetCurrent" => cu_ctx_set_current as unsafe extern "C" fn(_) -> _,
        "cuCtxPushCurrent" => cu_ctx_push as unsafe extern "C" fn(_) -> _,
        "cuCtxPopCurrent" => cu_ctx_pop as unsafe extern "C" fn(_) -> _,
        "cuStreamCreate" => cu_stream_create as unsafe extern "C" fn(_, _) -> _,
        "cuStreamDestroy" => cu_stream_destroy as unsafe extern "C" fn(_) -> _,
        "cuEventCreate" => cu_event_create as unsafe extern "C" fn(_, _) -> _,
        "cuEventDestroy" => cu_event_destroy as unsafe extern "C" fn(_) -> _,
        "cuCtxSynchronize" => cu_ctx_synchronize as unsafe extern "C" fn() -> _,
        "cuModuleLoadDataEx" => cu_module_load_data_ex as unsafe extern "C" fn(_, _, _, _, _) -> _,
        "cuModuleUnload" => cu_module_unload as unsafe extern "C" fn(_) -> _,
    }
}

/// Installs the process-wide driver table: each entry from `own` (the suite's mocks),
/// else from the shared ones above, else missing.
pub fn install(own: fn(&str) -> *mut c_void) {
    // SAFETY: every non-null pointer `own` and `common_entry` return is a function with
    // the C signature of the entry of that name (the mocks mirror cuda.h), a plain
    // function of this program.
    unsafe { MockDriver::new().entries(own).entries(common_entry) }.install();
}
