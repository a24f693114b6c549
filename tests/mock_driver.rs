//! cuda-core's handles against a mock driver table, on the CPU.
//!
//! The mock is installed once per process (`cuda_sys::install_driver`), so one `#[test]`
//! drives every check in order. Each mock entry appends a line to `LOG`; the checks read
//! the log to prove drop order, exactly-once destruction, and which calls were made.

//! Loaded mode only: a linked build has no table to replace.
#![cfg(not(feature = "linked"))]

use std::ffi::{c_char, c_int, c_uint, c_void};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use cuda_core::{
    AsyncDeviceBuffer, Context, Device, DeviceBuffer, Error, Event, EventFlags, JitOptions, Linker,
    Module, Stream, StreamFlags,
};
use cuda_sys::{
    CUcontext, CUdevice, CUdeviceptr, CUevent, CUfunction, CUhostFn, CUjit_option, CUmodule,
    CUresult, CUstream, DriverApi, Library,
};

static LOG: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn log(line: String) {
    LOG.lock().unwrap_or_else(|e| e.into_inner()).push(line);
}

fn take_log() -> Vec<String> {
    std::mem::take(&mut *LOG.lock().unwrap_or_else(|e| e.into_inner()))
}

const PRIMARY: usize = 0xC0;
static CURRENT: AtomicUsize = AtomicUsize::new(0);
static RETAINED: AtomicUsize = AtomicUsize::new(0);
static NEXT_HANDLE: AtomicUsize = AtomicUsize::new(0x1000);
static FAIL_HOST_FN: AtomicBool = AtomicBool::new(false);
/// Host functions queued by the mock cuLaunchHostFunc, run by cuStreamSynchronize.
static PENDING: Mutex<Vec<(usize, usize)>> = Mutex::new(Vec::new());

fn handle() -> usize {
    NEXT_HANDLE.fetch_add(0x10, Ordering::Relaxed)
}

const OK: CUresult = CUresult::CUDA_SUCCESS;

unsafe extern "C" fn cu_init(_flags: c_uint) -> CUresult {
    log("cuInit".into());
    OK
}
unsafe extern "C" fn cu_device_get_count(n: *mut c_int) -> CUresult {
    unsafe { *n = 1 };
    OK
}
unsafe extern "C" fn cu_device_get(d: *mut CUdevice, ordinal: c_int) -> CUresult {
    if ordinal != 0 {
        return CUresult::CUDA_ERROR_INVALID_DEVICE;
    }
    unsafe { *d = 0 };
    OK
}
unsafe extern "C" fn cu_device_get_name(name: *mut c_char, len: c_int, _d: CUdevice) -> CUresult {
    let text = b"Mock GPU\0";
    if (len as usize) < text.len() {
        return CUresult::CUDA_ERROR_INVALID_VALUE;
    }
    unsafe { std::ptr::copy_nonoverlapping(text.as_ptr().cast::<c_char>(), name, text.len()) };
    OK
}
unsafe extern "C" fn cu_primary_retain(ctx: *mut CUcontext, _d: CUdevice) -> CUresult {
    RETAINED.fetch_add(1, Ordering::SeqCst);
    log("cuDevicePrimaryCtxRetain".into());
    unsafe { *ctx = PRIMARY as CUcontext };
    OK
}
unsafe extern "C" fn cu_primary_release(_d: CUdevice) -> CUresult {
    if RETAINED.load(Ordering::SeqCst) == 0 {
        log("cuDevicePrimaryCtxRelease UNDERFLOW".into());
        return CUresult::CUDA_ERROR_INVALID_CONTEXT;
    }
    RETAINED.fetch_sub(1, Ordering::SeqCst);
    log("cuDevicePrimaryCtxRelease".into());
    OK
}
unsafe extern "C" fn cu_ctx_get_current(ctx: *mut CUcontext) -> CUresult {
    unsafe { *ctx = CURRENT.load(Ordering::SeqCst) as CUcontext };
    OK
}
unsafe extern "C" fn cu_ctx_set_current(ctx: CUcontext) -> CUresult {
    log(format!("cuCtxSetCurrent {:#x}", ctx as usize));
    CURRENT.store(ctx as usize, Ordering::SeqCst);
    OK
}
static SAVED: AtomicUsize = AtomicUsize::new(0);
unsafe extern "C" fn cu_ctx_push(ctx: CUcontext) -> CUresult {
    log(format!("cuCtxPushCurrent {:#x}", ctx as usize));
    SAVED.store(
        CURRENT.swap(ctx as usize, Ordering::SeqCst),
        Ordering::SeqCst,
    );
    OK
}
unsafe extern "C" fn cu_ctx_pop(ctx: *mut CUcontext) -> CUresult {
    log("cuCtxPopCurrent".into());
    let popped = CURRENT.swap(SAVED.load(Ordering::SeqCst), Ordering::SeqCst);
    if !ctx.is_null() {
        unsafe { *ctx = popped as CUcontext };
    }
    OK
}
unsafe extern "C" fn cu_stream_create(s: *mut CUstream, flags: c_uint) -> CUresult {
    let h = handle();
    log(format!("cuStreamCreate {h:#x} flags={flags}"));
    unsafe { *s = h as CUstream };
    OK
}
unsafe extern "C" fn cu_stream_destroy(s: CUstream) -> CUresult {
    log(format!("cuStreamDestroy {:#x}", s as usize));
    OK
}
unsafe extern "C" fn cu_stream_sync(s: CUstream) -> CUresult {
    log(format!("cuStreamSynchronize {:#x}", s as usize));
    let pending = std::mem::take(&mut *PENDING.lock().unwrap_or_else(|e| e.into_inner()));
    for (f, data) in pending {
        // SAFETY: stored by cu_launch_host_func from a valid CUhostFn.
        let f: unsafe extern "C" fn(*mut c_void) = unsafe { std::mem::transmute(f) };
        unsafe { f(data as *mut c_void) };
    }
    OK
}
unsafe extern "C" fn cu_launch_host_func(s: CUstream, f: CUhostFn, data: *mut c_void) -> CUresult {
    log(format!("cuLaunchHostFunc {:#x}", s as usize));
    if FAIL_HOST_FN.load(Ordering::SeqCst) {
        return CUresult::CUDA_ERROR_INVALID_HANDLE;
    }
    let Some(f) = f else {
        return CUresult::CUDA_ERROR_INVALID_VALUE;
    };
    PENDING
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push((f as usize, data as usize));
    OK
}
unsafe extern "C" fn cu_event_create(e: *mut CUevent, flags: c_uint) -> CUresult {
    let h = handle();
    log(format!("cuEventCreate {h:#x} flags={flags}"));
    unsafe { *e = h as CUevent };
    OK
}
unsafe extern "C" fn cu_event_destroy(e: CUevent) -> CUresult {
    log(format!("cuEventDestroy {:#x}", e as usize));
    OK
}
unsafe extern "C" fn cu_mem_alloc(p: *mut CUdeviceptr, size: usize) -> CUresult {
    if size > 1 << 40 {
        log(format!("cuMemAlloc {size} OOM"));
        return CUresult::CUDA_ERROR_OUT_OF_MEMORY;
    }
    let h = handle();
    log(format!("cuMemAlloc {h:#x} {size}"));
    unsafe { *p = h as CUdeviceptr };
    OK
}
unsafe extern "C" fn cu_mem_free(p: CUdeviceptr) -> CUresult {
    log(format!("cuMemFree {p:#x}"));
    OK
}
unsafe extern "C" fn cu_mem_alloc_async(p: *mut CUdeviceptr, size: usize, s: CUstream) -> CUresult {
    let h = handle();
    log(format!(
        "cuMemAllocAsync {h:#x} {size} on {:#x}",
        s as usize
    ));
    unsafe { *p = h as CUdeviceptr };
    OK
}
unsafe extern "C" fn cu_mem_free_async(p: CUdeviceptr, s: CUstream) -> CUresult {
    log(format!("cuMemFreeAsync {p:#x} on {:#x}", s as usize));
    OK
}
unsafe extern "C" fn cu_module_load_data_ex(
    m: *mut CUmodule,
    image: *const c_void,
    n: c_uint,
    options: *mut CUjit_option,
    values: *mut *mut c_void,
) -> CUresult {
    let text = unsafe { std::ffi::CStr::from_ptr(image.cast::<c_char>()) }
        .to_string_lossy()
        .into_owned();
    let (opts, vals) = unsafe { jit_options(n, options, values) };
    let find = |o: CUjit_option| opts.iter().position(|&x| x == o).map(|i| vals[i]);
    log(format!("cuModuleLoadDataEx options={n}"));
    if text.contains("bad") {
        if let (Some(buf), Some(size)) = (
            find(CUjit_option::CU_JIT_ERROR_LOG_BUFFER),
            find(CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES),
        ) {
            let msg = b"ptxas application ptx input, line 1; error   : mock syntax error\0";
            let len = msg.len().min(size as usize);
            unsafe { std::ptr::copy_nonoverlapping(msg.as_ptr(), buf.cast::<u8>(), len) };
        }
        return CUresult::CUDA_ERROR_INVALID_PTX;
    }
    let h = handle();
    log(format!("module {h:#x} loaded"));
    unsafe { *m = h as CUmodule };
    OK
}
unsafe extern "C" fn cu_module_unload(m: CUmodule) -> CUresult {
    log(format!("cuModuleUnload {:#x}", m as usize));
    OK
}
unsafe extern "C" fn cu_module_get_function(
    f: *mut CUfunction,
    _m: CUmodule,
    name: *const c_char,
) -> CUresult {
    let name = unsafe { std::ffi::CStr::from_ptr(name) };
    if name.to_bytes() != b"vec_add" {
        return CUresult::CUDA_ERROR_NOT_FOUND;
    }
    unsafe { *f = handle() as CUfunction };
    OK
}
unsafe extern "C" fn cu_func_get_param_info(
    _f: CUfunction,
    index: usize,
    off: *mut usize,
    size: *mut usize,
) -> CUresult {
    let layout = [(0, 8), (8, 8), (16, 8), (24, 4)];
    let Some(&(o, s)) = layout.get(index) else {
        return CUresult::CUDA_ERROR_INVALID_VALUE;
    };
    unsafe {
        *off = o;
        *size = s;
    }
    OK
}

/// The error-log buffer the mock linker was given: (address, size).
static LINK_LOG: Mutex<(usize, usize)> = Mutex::new((0, 0));
static LINK_UNRESOLVED: AtomicBool = AtomicBool::new(false);
/// A minimal ELF64 header with no sections: what the mock linker "produces".
static CUBIN: [u8; 64] = {
    let mut h = [0u8; 64];
    h[0] = 0x7f;
    h[1] = b'E';
    h[2] = b'L';
    h[3] = b'F';
    h[4] = 2;
    h[5] = 1;
    h
};

/// The `n` JIT option keys and values a caller passed (the arrays may be null when `n` is 0).
///
/// # Safety
/// With `n > 0`, both arrays must hold `n` entries, alive for `'a`.
unsafe fn jit_options<'a>(
    n: c_uint,
    options: *mut CUjit_option,
    values: *mut *mut c_void,
) -> (&'a [CUjit_option], &'a [*mut c_void]) {
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

unsafe extern "C" fn cu_link_create(
    n: c_uint,
    options: *mut CUjit_option,
    values: *mut *mut c_void,
    state: *mut cuda_sys::CUlinkState,
) -> CUresult {
    let (opts, vals) = unsafe { jit_options(n, options, values) };
    let find = |o: CUjit_option| opts.iter().position(|&x| x == o).map(|i| vals[i] as usize);
    *LINK_LOG.lock().unwrap() = (
        find(CUjit_option::CU_JIT_ERROR_LOG_BUFFER).unwrap_or(0),
        find(CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES).unwrap_or(0),
    );
    LINK_UNRESOLVED.store(false, Ordering::SeqCst);
    let h = handle();
    log(format!("cuLinkCreate {h:#x}"));
    unsafe { *state = h as cuda_sys::CUlinkState };
    OK
}
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn cu_link_add_data(
    _state: cuda_sys::CUlinkState,
    kind: cuda_sys::CUjitInputType,
    data: *mut c_void,
    size: usize,
    name: *const c_char,
    _n: c_uint,
    _o: *mut CUjit_option,
    _v: *mut *mut c_void,
) -> CUresult {
    let bytes = unsafe { std::slice::from_raw_parts(data.cast::<u8>(), size) };
    let name = unsafe { std::ffi::CStr::from_ptr(name) }
        .to_string_lossy()
        .into_owned();
    log(format!("cuLinkAddData kind={} {name}", kind.0));
    if bytes.windows(10).any(|w| w == b"unresolved") {
        LINK_UNRESOLVED.store(true, Ordering::SeqCst);
    }
    OK
}
unsafe extern "C" fn cu_link_complete(
    _state: cuda_sys::CUlinkState,
    cubin: *mut *mut c_void,
    size: *mut usize,
) -> CUresult {
    log("cuLinkComplete".into());
    if LINK_UNRESOLVED.load(Ordering::SeqCst) {
        let (buf, len) = *LINK_LOG.lock().unwrap();
        let msg = b"error   : Undefined reference to 'cudaGetParameterBufferV2'\0";
        if buf != 0 {
            unsafe {
                std::ptr::copy_nonoverlapping(msg.as_ptr(), buf as *mut u8, msg.len().min(len))
            };
        }
        return CUresult::CUDA_ERROR_INVALID_IMAGE;
    }
    unsafe {
        *cubin = CUBIN.as_ptr().cast_mut().cast();
        *size = CUBIN.len();
    }
    OK
}
unsafe extern "C" fn cu_link_destroy(state: cuda_sys::CUlinkState) -> CUresult {
    log(format!("cuLinkDestroy {:#x}", state as usize));
    OK
}

fn mock_entry(name: &str) -> *mut c_void {
    macro_rules! entries {
        ($($c:literal => $f:expr),* $(,)?) => {
            match name {
                $($c => $f as *mut c_void,)*
                _ => std::ptr::null_mut(),
            }
        };
    }
    entries! {
        "cuInit" => cu_init as unsafe extern "C" fn(_) -> _,
        "cuDeviceGetCount" => cu_device_get_count as unsafe extern "C" fn(_) -> _,
        "cuDeviceGet" => cu_device_get as unsafe extern "C" fn(_, _) -> _,
        "cuDeviceGetName" => cu_device_get_name as unsafe extern "C" fn(_, _, _) -> _,
        "cuDevicePrimaryCtxRetain" => cu_primary_retain as unsafe extern "C" fn(_, _) -> _,
        "cuDevicePrimaryCtxRelease" => cu_primary_release as unsafe extern "C" fn(_) -> _,
        "cuCtxGetCurrent" => cu_ctx_get_current as unsafe extern "C" fn(_) -> _,
        "cuCtxSetCurrent" => cu_ctx_set_current as unsafe extern "C" fn(_) -> _,
        "cuCtxPushCurrent" => cu_ctx_push as unsafe extern "C" fn(_) -> _,
        "cuCtxPopCurrent" => cu_ctx_pop as unsafe extern "C" fn(_) -> _,
        "cuStreamCreate" => cu_stream_create as unsafe extern "C" fn(_, _) -> _,
        "cuStreamDestroy" => cu_stream_destroy as unsafe extern "C" fn(_) -> _,
        "cuStreamSynchronize" => cu_stream_sync as unsafe extern "C" fn(_) -> _,
        "cuLaunchHostFunc" => cu_launch_host_func as unsafe extern "C" fn(_, _, _) -> _,
        "cuEventCreate" => cu_event_create as unsafe extern "C" fn(_, _) -> _,
        "cuEventDestroy" => cu_event_destroy as unsafe extern "C" fn(_) -> _,
        "cuMemAlloc" => cu_mem_alloc as unsafe extern "C" fn(_, _) -> _,
        "cuMemFree" => cu_mem_free as unsafe extern "C" fn(_) -> _,
        "cuMemAllocAsync" => cu_mem_alloc_async as unsafe extern "C" fn(_, _, _) -> _,
        "cuMemFreeAsync" => cu_mem_free_async as unsafe extern "C" fn(_, _) -> _,
        "cuModuleLoadDataEx" => cu_module_load_data_ex as unsafe extern "C" fn(_, _, _, _, _) -> _,
        "cuModuleUnload" => cu_module_unload as unsafe extern "C" fn(_) -> _,
        "cuModuleGetFunction" => cu_module_get_function as unsafe extern "C" fn(_, _, _) -> _,
        "cuFuncGetParamInfo" => cu_func_get_param_info as unsafe extern "C" fn(_, _, _, _) -> _,
        "cuLinkCreate" => cu_link_create as unsafe extern "C" fn(_, _, _, _) -> _,
        "cuLinkAddData" => cu_link_add_data as unsafe extern "C" fn(_, _, _, _, _, _, _, _) -> _,
        "cuLinkComplete" => cu_link_complete as unsafe extern "C" fn(_, _, _) -> _,
        "cuLinkDestroy" => cu_link_destroy as unsafe extern "C" fn(_) -> _,
    }
}

fn install() {
    // SAFETY: every non-null pointer `mock_entry` returns is a function with the C
    // signature of the entry of that name (the mocks above mirror cuda.h).
    let table = unsafe { DriverApi::from_resolver(Library::none(), |e| mock_entry(e.name)) };
    assert!(
        cuda_sys::install_driver(table).is_ok(),
        "a driver table was loaded before the mock"
    );
}

/// Serializes the subtests (one #[test] drives them, but keep them safe if split).
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn position(log: &[String], prefix: &str) -> usize {
    log.iter()
        .position(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("`{prefix}` not in the call log:\n{log:#?}"))
}

fn count(log: &[String], prefix: &str) -> usize {
    log.iter().filter(|l| l.starts_with(prefix)).count()
}

#[test]
fn handles_against_a_mock_driver() {
    let _g = serial();
    install();
    device_queries();
    context_binds_only_when_not_current();
    raii_drop_order();
    host_fn_runs_once_and_is_freed();
    oom_maps_to_an_error_naming_the_call();
    missing_entry_names_the_symbol();
    jit_error_log_is_captured();
    param_layout_is_read_from_the_driver();
    linker_logs_and_destroys_once();
    assert_eq!(
        RETAINED.load(Ordering::SeqCst),
        0,
        "every primary-context retain was released"
    );
}

fn device_queries() {
    take_log();
    assert_eq!(Device::count().unwrap(), 1);
    let dev = Device::get(0).unwrap();
    assert_eq!(dev.name().unwrap().as_str(), "Mock GPU");
    let e = Device::get(3).unwrap_err();
    assert!(e.is(CUresult::CUDA_ERROR_INVALID_DEVICE), "{e}");
    assert!(
        e.to_string()
            .starts_with("cuDeviceGet failed: CUDA_ERROR_INVALID_DEVICE"),
        "{e}"
    );
    assert_eq!(count(&take_log(), "cuInit"), 1, "cuInit runs once");
    assert_eq!(cuda_core::driver::init().map_err(|e| e.to_string()), Ok(()));
    assert_eq!(
        count(&take_log(), "cuInit"),
        0,
        "cuInit runs once per process"
    );
}

fn context_binds_only_when_not_current() {
    CURRENT.store(0, Ordering::SeqCst);
    take_log();
    let ctx = Context::primary(Device::get(0).unwrap()).unwrap();
    let log = take_log();
    assert_eq!(
        count(&log, "cuCtxSetCurrent"),
        1,
        "made current when nothing was: {log:#?}"
    );
    let again = Context::primary(Device::get(0).unwrap()).unwrap();
    let log = take_log();
    assert_eq!(
        count(&log, "cuCtxSetCurrent"),
        0,
        "not re-bound when already current: {log:#?}"
    );
    drop(again);
    // Another context current: creating a stream pushes ours and pops it afterwards.
    CURRENT.store(0xDEAD, Ordering::SeqCst);
    take_log();
    let s = Stream::new(&ctx, StreamFlags::empty()).unwrap();
    let log = take_log();
    let push = position(&log, "cuCtxPushCurrent 0xc0");
    let create = position(&log, "cuStreamCreate");
    let pop = position(&log, "cuCtxPopCurrent");
    assert!(push < create && create < pop, "{log:#?}");
    assert_eq!(
        CURRENT.load(Ordering::SeqCst),
        0xDEAD,
        "the previous context is restored"
    );
    drop(s);
    CURRENT.store(PRIMARY, Ordering::SeqCst);
    drop(ctx);
    take_log();
}

fn raii_drop_order() {
    take_log();
    {
        let ctx = Context::primary(Device::get(0).unwrap()).unwrap();
        let stream = Stream::new(&ctx, StreamFlags::NON_BLOCKING).unwrap();
        let event = Event::new(&ctx, EventFlags::DISABLE_TIMING).unwrap();
        let buf = DeviceBuffer::<f32>::new(&ctx, 16).unwrap();
        let empty = DeviceBuffer::<f32>::new(&ctx, 0).unwrap();
        let module = Module::from_ptx(&ctx, ".version 8.0 // good").unwrap();
        let _f = module.function("vec_add").unwrap();
        let async_buf = AsyncDeviceBuffer::<u32>::new(&stream, 4).unwrap();
        assert_eq!(buf.len(), 16);
        assert!(empty.is_empty());
        assert_eq!(empty.as_raw(), 0);
        let _ = (&event, &async_buf);
    }
    let log = take_log();
    let release = position(&log, "cuDevicePrimaryCtxRelease");
    for destroy in [
        "cuStreamDestroy",
        "cuEventDestroy",
        "cuMemFree ",
        "cuModuleUnload",
        "cuMemFreeAsync",
    ] {
        assert_eq!(count(&log, destroy), 1, "{destroy} exactly once: {log:#?}");
        assert!(
            position(&log, destroy) < release,
            "{destroy} before the context release: {log:#?}"
        );
    }
    assert!(
        position(&log, "cuMemFreeAsync") < position(&log, "cuStreamDestroy"),
        "the stream-ordered free is queued before its stream is destroyed: {log:#?}"
    );
    assert_eq!(
        count(&log, "cuMemAlloc "),
        1,
        "a zero-length buffer allocates nothing: {log:#?}"
    );
    assert_eq!(count(&log, "cuDevicePrimaryCtxRelease"), 1);
    assert_eq!(count(&log, "cuDevicePrimaryCtxRelease UNDERFLOW"), 0);
}

struct DropCount(Arc<AtomicUsize>);
impl Drop for DropCount {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn host_fn_runs_once_and_is_freed() {
    let ctx = Context::primary(Device::get(0).unwrap()).unwrap();
    let stream = Stream::new(&ctx, StreamFlags::NON_BLOCKING).unwrap();
    let (runs, drops) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let order = Arc::new(Mutex::new(Vec::new()));
    for i in 1..=3 {
        let (runs, guard, order) = (runs.clone(), DropCount(drops.clone()), order.clone());
        stream
            .launch_host_fn(move || {
                let _keep = &guard;
                runs.fetch_add(1, Ordering::SeqCst);
                order.lock().unwrap().push(i);
            })
            .unwrap();
    }
    assert_eq!(
        runs.load(Ordering::SeqCst),
        0,
        "not run before the stream reaches them"
    );
    assert_eq!(drops.load(Ordering::SeqCst), 0, "not freed before they run");
    stream.synchronize().unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 3, "each ran exactly once");
    assert_eq!(
        drops.load(Ordering::SeqCst),
        3,
        "each was freed exactly once"
    );
    assert_eq!(*order.lock().unwrap(), [1, 2, 3]);

    // A refused launch drops the closure without running it.
    FAIL_HOST_FN.store(true, Ordering::SeqCst);
    let (ran, dropped) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicUsize::new(0)),
    );
    let (r, guard) = (ran.clone(), DropCount(dropped.clone()));
    let e = stream
        .launch_host_fn(move || {
            let _keep = &guard;
            r.store(true, Ordering::SeqCst);
        })
        .unwrap_err();
    FAIL_HOST_FN.store(false, Ordering::SeqCst);
    assert!(
        e.to_string()
            .starts_with("cuLaunchHostFunc failed: CUDA_ERROR_INVALID_HANDLE"),
        "{e}"
    );
    assert!(!ran.load(Ordering::SeqCst));
    assert_eq!(
        dropped.load(Ordering::SeqCst),
        1,
        "freed once on the error path"
    );
    stream.synchronize().unwrap();
    assert_eq!(dropped.load(Ordering::SeqCst), 1, "not freed again");
}

fn oom_maps_to_an_error_naming_the_call() {
    let ctx = Context::primary(Device::get(0).unwrap()).unwrap();
    let e = DeviceBuffer::<u8>::new(&ctx, 1 << 50).unwrap_err();
    assert!(e.is(CUresult::CUDA_ERROR_OUT_OF_MEMORY), "{e:?}");
    assert_eq!(e.call(), Some("cuMemAlloc"));
    let text = e.to_string();
    assert!(
        text.contains("cuMemAlloc") && text.contains("CUDA_ERROR_OUT_OF_MEMORY"),
        "{text}"
    );
    // A size in bytes that overflows usize is an error too, never a panic.
    let e = DeviceBuffer::<u64>::new(&ctx, usize::MAX / 2).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    assert!(
        size_of::<Error>() <= 64,
        "Error is {} bytes",
        size_of::<Error>()
    );
}

fn missing_entry_names_the_symbol() {
    let ctx = Context::primary(Device::get(0).unwrap()).unwrap();
    let stream = Stream::new(&ctx, StreamFlags::empty()).unwrap();
    let e = stream.priority().unwrap_err();
    assert!(
        matches!(e, Error::MissingSymbol(m) if m.name == "cuStreamGetPriority"),
        "{e:?}"
    );
    assert!(e.to_string().contains("cuStreamGetPriority"), "{e}");
}

fn jit_error_log_is_captured() {
    let ctx = Context::primary(Device::get(0).unwrap()).unwrap();
    take_log();
    let e = Module::from_ptx(&ctx, ".version 8.0 bad").unwrap_err();
    assert!(matches!(e, Error::Jit { .. }), "{e:?}");
    assert!(e.is(CUresult::CUDA_ERROR_INVALID_PTX), "{e:?}");
    let log = e.jit_log().unwrap_or_default();
    assert!(log.contains("mock syntax error"), "JIT log: {log:?}");
    let text = e.to_string();
    assert!(
        text.starts_with("cuModuleLoadDataEx failed: CUDA_ERROR_INVALID_PTX"),
        "{text}"
    );
    assert!(text.contains("mock syntax error"), "{text}");
    assert_eq!(
        count(&take_log(), "cuModuleUnload"),
        0,
        "nothing to unload after a failed load"
    );

    // Into the caller's buffer too (the no_std path).
    let mut buf = [0xFFu8; 32];
    let opts = JitOptions {
        error_log: Some(&mut buf),
        optimization_level: Some(3),
        ..JitOptions::default()
    };
    let e = Module::from_ptx_with(&ctx, "bad\0", opts).unwrap_err();
    assert!(e.is(CUresult::CUDA_ERROR_INVALID_PTX));
    assert!(
        buf.starts_with(b"ptxas application"),
        "{:?}",
        String::from_utf8_lossy(&buf)
    );
    assert!(
        e.jit_log()
            .unwrap_or_default()
            .starts_with("ptxas application"),
        "{e}"
    );
}

fn param_layout_is_read_from_the_driver() {
    let ctx = Context::primary(Device::get(0).unwrap()).unwrap();
    let module = Module::from_ptx(&ctx, "good").unwrap();
    let f = module.function("vec_add").unwrap();
    assert_eq!(f.param_count().unwrap(), 4);
    let infos: Vec<_> = (0..4).map(|i| f.param_info(i).unwrap()).collect();
    assert_eq!(infos, [(0, 8), (8, 8), (16, 8), (24, 4)]);
    let e = f.param_info(4).unwrap_err();
    assert_eq!(e.call(), Some("cuFuncGetParamInfo"));
    let buf = DeviceBuffer::<f32>::new(&ctx, 4).unwrap();
    let packed = cuda_core::args::PackedArgs::<4096>::from_args(&(
        buf.as_arg(),
        buf.as_arg(),
        buf.as_arg(),
        4u32,
    ))
    .unwrap();
    f.verify_params(&packed).unwrap();
    let wrong = cuda_core::args::PackedArgs::<4096>::from_args(&(buf.as_arg(), 4u32)).unwrap();
    let e = f.verify_params(&wrong).unwrap_err();
    assert!(matches!(e, Error::Layout(_)), "{e}");
    assert!(
        module
            .function("nope")
            .unwrap_err()
            .is(CUresult::CUDA_ERROR_NOT_FOUND)
    );
}

fn linker_logs_and_destroys_once() {
    let ctx = Context::primary(Device::get(0).unwrap()).unwrap();
    take_log();
    {
        let mut linker = Linker::new(&ctx, JitOptions::default()).unwrap();
        linker.add_ptx("call unresolved", "parent.ptx").unwrap();
        let e = linker.complete().unwrap_err();
        assert!(e.is(CUresult::CUDA_ERROR_INVALID_IMAGE), "{e}");
        assert_eq!(e.call(), Some("cuLinkComplete"));
        let text = e.to_string();
        assert!(
            text.contains("Undefined reference to 'cudaGetParameterBufferV2'"),
            "{text}"
        );
    }
    let log = take_log();
    assert_eq!(count(&log, "cuLinkDestroy"), 1, "{log:#?}");

    let mut linker = Linker::new(&ctx, JitOptions::default()).unwrap();
    linker.add_ptx("ok", "child.ptx").unwrap();
    linker.add_library(b"!<arch>\n", "libcudadevrt.a").unwrap();
    let module = linker.into_module().unwrap();
    drop(module);
    let log = take_log();
    let lib = format!(
        "cuLinkAddData kind={} libcudadevrt.a",
        cuda_sys::CUjitInputType::CU_JIT_INPUT_LIBRARY.0
    );
    position(&log, &lib);
    let complete = position(&log, "cuLinkComplete");
    let load = position(&log, "cuModuleLoadDataEx");
    let destroy = position(&log, "cuLinkDestroy");
    let unload = position(&log, "cuModuleUnload");
    assert!(
        complete < load && load < destroy && destroy < unload,
        "{log:#?}"
    );
    assert_eq!(count(&log, "cuLinkDestroy"), 1, "{log:#?}");

    // A link state made outside cuda-core: adopted, used, destroyed once on drop.
    let mut raw = std::ptr::null_mut();
    // SAFETY: no options; a valid out-pointer.
    let rc = unsafe { cu_link_create(0, std::ptr::null_mut(), std::ptr::null_mut(), &mut raw) };
    assert_eq!(rc, OK);
    let handle = format!("cuLinkDestroy {:#x}", raw as usize);
    take_log();
    {
        // SAFETY: a live link state of the mock's one context, owned by nobody else.
        let mut adopted = unsafe { Linker::from_raw(raw, &ctx) };
        assert_eq!(adopted.as_raw(), raw);
        adopted.add_ptx("ok", "adopted.ptx").unwrap();
        assert!(adopted.error_log().is_empty());
        assert!(adopted.info_log_bytes().is_empty());
    }
    let log = take_log();
    position(&log, "cuLinkAddData");
    assert_eq!(count(&log, &handle), 1, "{log:#?}");
    assert_eq!(count(&log, "cuLinkDestroy"), 1, "{log:#?}");
}
