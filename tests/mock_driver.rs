//! cuda-core's handles against a mock driver table, on the CPU.
//!
//! The mock is installed once per process (`cudadrv_sys::install_driver`), so one `#[test]`
//! drives every check in order. Each mock entry appends a line to `LOG`; the checks read
//! the log to prove drop order, exactly-once destruction, and which calls were made.
//!
//! The mock keeps what the checks need to be meaningful: the current context per thread
//! (a context stack, as the driver keeps one per thread), device memory with contents
//! (copies and memsets really move bytes), stream capture state, graphs, executable
//! graphs and user objects with reference counts. Calls that need a context fail with
//! `CUDA_ERROR_INVALID_CONTEXT` on a thread where the primary context is not current,
//! and every call on a handle fails once the primary context has been released.
//!
//! Runs under Miri too (`cargo +nightly miri test --test mock_driver`): no dlopen (the
//! table is built with `Library::none()`), no FFI, handles are integers without
//! provenance, and the threaded test runs fewer iterations there.

//! Loaded mode only: a linked build has no table to replace.
#![cfg(not(feature = "linked"))]

use std::alloc::Layout;
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::ffi::{c_char, c_int, c_uint, c_void};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use cudadrv::graph::CaptureMode;
use cudadrv::launch::{self, LaunchConfig};
use cudadrv::memory::dlpack::{
    self, DLDataType, DLDevice, DLDeviceType, DLManagedTensorVersioned,
    DLPACK_FLAG_BITMASK_READ_ONLY, DLPACK_VERSION, DLTensor, DlpackTensor,
};
use cudadrv::memory::{DeviceView, Release};
use cudadrv::{
    AsyncDeviceBuffer, Context, Device, DeviceBuffer, DropError, Error, Event, EventFlags,
    EventWaitFlags, Function, JitOptions, Linker, Module, PinnedHostBuffer, Stream, StreamFlags,
};
use cudadrv_sys::{
    CUcontext, CUdevice, CUdeviceptr, CUevent, CUfunction, CUgraph, CUgraphEdgeData, CUgraphExec,
    CUgraphNode, CUhostFn, CUjit_option, CUlaunchConfig, CUmodule, CUresult, CUstream,
    CUstreamCaptureMode, CUstreamCaptureStatus, CUuserObject,
};

static LOG: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Locks a mock table, ignoring poison (a failed check must not hide the next one).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn log(line: String) {
    lock(&LOG).push(line);
}

fn take_log() -> Vec<String> {
    std::mem::take(&mut *lock(&LOG))
}

const PRIMARY: usize = 0xC0;
static RETAINED: AtomicUsize = AtomicUsize::new(0);
static NEXT_HANDLE: AtomicUsize = AtomicUsize::new(0x1000);
static FAIL_HOST_FN: AtomicBool = AtomicBool::new(false);
static FAIL_MEM_FREE: AtomicBool = AtomicBool::new(false);
static FAIL_STREAM_DESTROY: AtomicBool = AtomicBool::new(false);
/// `cuFuncGetParamInfo` calls with an index past the kernel's last parameter.
static PAST_END: AtomicUsize = AtomicUsize::new(0);

/// A new opaque handle: an integer, never dereferenced (no provenance).
fn handle() -> usize {
    NEXT_HANDLE.fetch_add(0x10, Ordering::Relaxed)
}

fn as_handle<T>(h: usize) -> *mut T {
    std::ptr::without_provenance_mut(h)
}

const OK: CUresult = CUresult::CUDA_SUCCESS;

// ---------------------------------------------------------------------------------------
// Contexts: a per-thread context stack, as the driver keeps.

thread_local! {
    /// The calling thread's current context (0: none): the top of its stack.
    static CURRENT: Cell<usize> = const { Cell::new(0) };
    /// The contexts below the top, pushed over by `cuCtxPushCurrent`.
    static BELOW: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
}

/// The calling thread's current context in the mock (0: none).
fn current() -> usize {
    CURRENT.with(Cell::get)
}

fn set_current(ctx: usize) {
    CURRENT.with(|c| c.set(ctx));
}

/// How many contexts the calling thread has pushed and not popped.
fn pushed_depth() -> usize {
    BELOW.with(|b| b.borrow().len())
}

/// The check of every call that needs a context: the primary context must be current
/// on the calling thread and still retained.
fn bound(call: &str) -> Result<(), CUresult> {
    match current() {
        0 => {
            log(format!("{call} NO CONTEXT"));
            Err(CUresult::CUDA_ERROR_INVALID_CONTEXT)
        }
        PRIMARY => alive(call),
        other => {
            log(format!("{call} WRONG CONTEXT {other:#x}"));
            Err(CUresult::CUDA_ERROR_INVALID_CONTEXT)
        }
    }
}

/// The check of every call on a handle of the primary context: it is still retained.
fn alive(call: &str) -> Result<(), CUresult> {
    if RETAINED.load(Ordering::SeqCst) == 0 {
        log(format!("{call} AFTER RELEASE"));
        return Err(CUresult::CUDA_ERROR_CONTEXT_IS_DESTROYED);
    }
    Ok(())
}

/// Returns the error of a failed check from the mock entry.
macro_rules! check {
    ($e:expr) => {
        if let Err(code) = $e {
            return code;
        }
    };
}

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
    unsafe { *ctx = as_handle(PRIMARY) };
    OK
}
unsafe extern "C" fn cu_primary_release(_d: CUdevice) -> CUresult {
    // Decrement only from a positive count (threads may release concurrently).
    let released = RETAINED.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
    if released.is_err() {
        log("cuDevicePrimaryCtxRelease UNDERFLOW".into());
        return CUresult::CUDA_ERROR_INVALID_CONTEXT;
    }
    log("cuDevicePrimaryCtxRelease".into());
    OK
}
unsafe extern "C" fn cu_ctx_get_current(ctx: *mut CUcontext) -> CUresult {
    unsafe { *ctx = as_handle(current()) };
    OK
}
unsafe extern "C" fn cu_ctx_set_current(ctx: CUcontext) -> CUresult {
    log(format!("cuCtxSetCurrent {:#x}", ctx.addr()));
    set_current(ctx.addr());
    OK
}
unsafe extern "C" fn cu_ctx_push(ctx: CUcontext) -> CUresult {
    log(format!("cuCtxPushCurrent {:#x}", ctx.addr()));
    let below = CURRENT.with(|c| c.replace(ctx.addr()));
    BELOW.with(|b| b.borrow_mut().push(below));
    OK
}
unsafe extern "C" fn cu_ctx_pop(ctx: *mut CUcontext) -> CUresult {
    let Some(below) = BELOW.with(|b| b.borrow_mut().pop()) else {
        log("cuCtxPopCurrent UNDERFLOW".into());
        return CUresult::CUDA_ERROR_INVALID_CONTEXT;
    };
    log("cuCtxPopCurrent".into());
    let popped = CURRENT.with(|c| c.replace(below));
    if !ctx.is_null() {
        unsafe { *ctx = as_handle(popped) };
    }
    OK
}

// ---------------------------------------------------------------------------------------
// Streams, host functions, capture, graphs and user objects.

/// A host function and its argument, as the driver receives them.
#[derive(Clone, Copy)]
struct HostCall {
    f: unsafe extern "C" fn(*mut c_void),
    data: *mut c_void,
}

// SAFETY: the data pointer is cuda-core's closure box, which it promises may be used on
// any thread (the driver runs host functions on its own threads).
unsafe impl Send for HostCall {}

impl HostCall {
    /// Runs the function, as the driver would.
    ///
    /// # Safety
    /// As the contract of the `cuLaunchHostFunc` / user-object call that gave it.
    unsafe fn run(self) {
        unsafe { (self.f)(self.data) }
    }
}

/// Host functions queued by the mock cuLaunchHostFunc, by stream; run by
/// cuStreamSynchronize of that stream.
static PENDING: Mutex<Vec<(usize, HostCall)>> = Mutex::new(Vec::new());
/// The host function most recently recorded into a capture.
static LAST_CAPTURED_HOST_FN: Mutex<Option<HostCall>> = Mutex::new(None);

/// A graph or executable graph: the user objects it holds one reference each to, and
/// what it runs.
#[derive(Clone, Default)]
struct MockGraph {
    objects: Vec<usize>,
    host_fns: Vec<HostCall>,
    nodes: usize,
}

/// Capturing streams and the graph each is capturing into.
static CAPTURES: Mutex<BTreeMap<usize, usize>> = Mutex::new(BTreeMap::new());
static GRAPHS: Mutex<BTreeMap<usize, MockGraph>> = Mutex::new(BTreeMap::new());
static EXECS: Mutex<BTreeMap<usize, MockGraph>> = Mutex::new(BTreeMap::new());

struct UserObject {
    destroy: HostCall,
    refs: u32,
}
static USER_OBJECTS: Mutex<BTreeMap<usize, UserObject>> = Mutex::new(BTreeMap::new());

/// The graph `stream` is capturing into, if it is capturing.
fn capture_graph(stream: CUstream) -> Option<usize> {
    lock(&CAPTURES).get(&stream.addr()).copied()
}

/// Records a node into the capture of `stream` (logging `what` as captured), or logs
/// `what` and runs `now` when the stream is not capturing.
fn on_stream(stream: CUstream, what: String, now: impl FnOnce() -> CUresult) -> CUresult {
    if let Some(graph) = capture_graph(stream) {
        log(format!("{what} captured"));
        if let Some(g) = lock(&GRAPHS).get_mut(&graph) {
            g.nodes += 1;
        }
        return OK;
    }
    log(what);
    now()
}

/// Drops `count` references to a user object; the last one calls its destructor, once.
fn release_object(object: usize, count: u32) -> CUresult {
    let destroy = {
        let mut objects = lock(&USER_OBJECTS);
        let Some(o) = objects.get_mut(&object) else {
            log(format!("user object {object:#x} UNKNOWN"));
            return CUresult::CUDA_ERROR_INVALID_VALUE;
        };
        o.refs = o.refs.saturating_sub(count);
        if o.refs > 0 {
            return OK;
        }
        objects.remove(&object).map(|o| o.destroy)
    };
    if let Some(destroy) = destroy {
        log(format!("user object {object:#x} destroyed"));
        // SAFETY: the destructor and pointer cuUserObjectCreate was given, called once,
        // when the last reference went (outside the lock: it runs user code).
        unsafe { destroy.run() };
    }
    OK
}

unsafe extern "C" fn cu_stream_create(s: *mut CUstream, flags: c_uint) -> CUresult {
    check!(bound("cuStreamCreate"));
    let h = handle();
    log(format!("cuStreamCreate {h:#x} flags={flags}"));
    unsafe { *s = as_handle(h) };
    OK
}
unsafe extern "C" fn cu_stream_destroy(s: CUstream) -> CUresult {
    check!(alive("cuStreamDestroy"));
    if FAIL_STREAM_DESTROY.swap(false, Ordering::SeqCst) {
        log(format!("cuStreamDestroy {:#x} FAILED", s.addr()));
        return CUresult::CUDA_ERROR_INVALID_HANDLE;
    }
    log(format!("cuStreamDestroy {:#x}", s.addr()));
    OK
}
unsafe extern "C" fn cu_stream_sync(s: CUstream) -> CUresult {
    check!(bound("cuStreamSynchronize"));
    log(format!("cuStreamSynchronize {:#x}", s.addr()));
    let due: Vec<HostCall> = {
        let mut pending = lock(&PENDING);
        let (due, rest) = std::mem::take(&mut *pending)
            .into_iter()
            .partition(|(stream, _)| *stream == s.addr());
        *pending = rest;
        due.into_iter().map(|(_, call)| call).collect()
    };
    for call in due {
        // SAFETY: queued by cu_launch_host_func from a valid CUhostFn and its data; run
        // once, as the driver does.
        unsafe { call.run() };
    }
    OK
}
unsafe extern "C" fn cu_launch_host_func(s: CUstream, f: CUhostFn, data: *mut c_void) -> CUresult {
    check!(bound("cuLaunchHostFunc"));
    log(format!("cuLaunchHostFunc {:#x}", s.addr()));
    if FAIL_HOST_FN.load(Ordering::SeqCst) {
        return CUresult::CUDA_ERROR_INVALID_HANDLE;
    }
    let Some(f) = f else {
        return CUresult::CUDA_ERROR_INVALID_VALUE;
    };
    let call = HostCall { f, data };
    if let Some(graph) = capture_graph(s) {
        log(format!("cuLaunchHostFunc {:#x} captured", s.addr()));
        if let Some(g) = lock(&GRAPHS).get_mut(&graph) {
            g.host_fns.push(call);
            g.nodes += 1;
        }
        *lock(&LAST_CAPTURED_HOST_FN) = Some(call);
        return OK;
    }
    lock(&PENDING).push((s.addr(), call));
    OK
}
unsafe extern "C" fn cu_stream_wait_event(s: CUstream, e: CUevent, flags: c_uint) -> CUresult {
    check!(bound("cuStreamWaitEvent"));
    log(format!(
        "cuStreamWaitEvent {:#x} {:#x} flags={flags}",
        s.addr(),
        e.addr()
    ));
    OK
}
unsafe extern "C" fn cu_stream_is_capturing(
    s: CUstream,
    status: *mut CUstreamCaptureStatus,
) -> CUresult {
    check!(bound("cuStreamIsCapturing"));
    log(format!("cuStreamIsCapturing {:#x}", s.addr()));
    let value = match capture_graph(s) {
        Some(_) => CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_ACTIVE,
        None => CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE,
    };
    unsafe { *status = value };
    OK
}
unsafe extern "C" fn cu_stream_begin_capture(s: CUstream, _mode: CUstreamCaptureMode) -> CUresult {
    check!(bound("cuStreamBeginCapture"));
    log(format!("cuStreamBeginCapture {:#x}", s.addr()));
    if s.is_null() || s == cudadrv_sys::CU_STREAM_LEGACY || s == cudadrv_sys::CU_STREAM_PER_THREAD {
        return CUresult::CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    let mut captures = lock(&CAPTURES);
    if captures.contains_key(&s.addr()) {
        return CUresult::CUDA_ERROR_ILLEGAL_STATE;
    }
    let graph = handle();
    lock(&GRAPHS).insert(graph, MockGraph::default());
    captures.insert(s.addr(), graph);
    OK
}
unsafe extern "C" fn cu_stream_end_capture(s: CUstream, graph: *mut CUgraph) -> CUresult {
    check!(bound("cuStreamEndCapture"));
    log(format!("cuStreamEndCapture {:#x}", s.addr()));
    let Some(g) = lock(&CAPTURES).remove(&s.addr()) else {
        return CUresult::CUDA_ERROR_ILLEGAL_STATE;
    };
    unsafe { *graph = as_handle(g) };
    OK
}
unsafe extern "C" fn cu_stream_get_capture_info(
    s: CUstream,
    status: *mut CUstreamCaptureStatus,
    id: *mut u64,
    graph: *mut CUgraph,
    deps: *mut *const CUgraphNode,
    edges: *mut *const CUgraphEdgeData,
    n: *mut usize,
) -> CUresult {
    check!(bound("cuStreamGetCaptureInfo"));
    log(format!("cuStreamGetCaptureInfo {:#x}", s.addr()));
    let g = capture_graph(s);
    // SAFETY: the caller's out-pointers (each may be null in the C API).
    unsafe {
        if !status.is_null() {
            *status = match g {
                Some(_) => CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_ACTIVE,
                None => CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE,
            };
        }
        if !id.is_null() {
            *id = g.unwrap_or(0) as u64;
        }
        if !graph.is_null() {
            *graph = as_handle(g.unwrap_or(0));
        }
        if !deps.is_null() {
            *deps = std::ptr::null();
        }
        if !edges.is_null() {
            *edges = std::ptr::null();
        }
        if !n.is_null() {
            *n = 0;
        }
    }
    OK
}
unsafe extern "C" fn cu_user_object_create(
    object: *mut CUuserObject,
    data: *mut c_void,
    destroy: CUhostFn,
    initial: c_uint,
    _flags: c_uint,
) -> CUresult {
    let Some(f) = destroy else {
        return CUresult::CUDA_ERROR_INVALID_VALUE;
    };
    let h = handle();
    log(format!("cuUserObjectCreate {h:#x} refs={initial}"));
    lock(&USER_OBJECTS).insert(
        h,
        UserObject {
            destroy: HostCall { f, data },
            refs: initial,
        },
    );
    unsafe { *object = as_handle(h) };
    OK
}
unsafe extern "C" fn cu_user_object_release(object: CUuserObject, count: c_uint) -> CUresult {
    log(format!("cuUserObjectRelease {:#x}", object.addr()));
    release_object(object.addr(), count)
}
unsafe extern "C" fn cu_graph_retain_user_object(
    graph: CUgraph,
    object: CUuserObject,
    count: c_uint,
    flags: c_uint,
) -> CUresult {
    log(format!(
        "cuGraphRetainUserObject {:#x} {:#x} flags={flags}",
        graph.addr(),
        object.addr()
    ));
    let mut graphs = lock(&GRAPHS);
    let Some(g) = graphs.get_mut(&graph.addr()) else {
        return CUresult::CUDA_ERROR_INVALID_VALUE;
    };
    let mut objects = lock(&USER_OBJECTS);
    let Some(o) = objects.get_mut(&object.addr()) else {
        return CUresult::CUDA_ERROR_INVALID_VALUE;
    };
    // MOVE: the caller's references become the graph's; else the graph adds its own.
    if flags & cudadrv_sys::CUuserObjectRetain_flags::CU_GRAPH_USER_OBJECT_MOVE.0 == 0 {
        o.refs += count;
    }
    g.objects
        .extend(std::iter::repeat_n(object.addr(), count as usize));
    OK
}
unsafe extern "C" fn cu_graph_release_user_object(
    graph: CUgraph,
    object: CUuserObject,
    count: c_uint,
) -> CUresult {
    log(format!(
        "cuGraphReleaseUserObject {:#x} {:#x}",
        graph.addr(),
        object.addr()
    ));
    {
        let mut graphs = lock(&GRAPHS);
        let Some(g) = graphs.get_mut(&graph.addr()) else {
            return CUresult::CUDA_ERROR_INVALID_VALUE;
        };
        for _ in 0..count {
            let Some(i) = g.objects.iter().position(|&o| o == object.addr()) else {
                return CUresult::CUDA_ERROR_INVALID_VALUE;
            };
            g.objects.remove(i);
        }
    }
    release_object(object.addr(), count)
}
unsafe extern "C" fn cu_graph_destroy(graph: CUgraph) -> CUresult {
    log(format!("cuGraphDestroy {:#x}", graph.addr()));
    let Some(g) = lock(&GRAPHS).remove(&graph.addr()) else {
        return CUresult::CUDA_ERROR_INVALID_VALUE;
    };
    for object in g.objects {
        let _ = release_object(object, 1);
    }
    OK
}
unsafe extern "C" fn cu_graph_instantiate(
    exec: *mut CUgraphExec,
    graph: CUgraph,
    _flags: u64,
) -> CUresult {
    check!(bound("cuGraphInstantiate"));
    let Some(g) = lock(&GRAPHS).get(&graph.addr()).cloned() else {
        return CUresult::CUDA_ERROR_INVALID_VALUE;
    };
    // The executable graph holds its own reference to each user object.
    for object in &g.objects {
        if let Some(o) = lock(&USER_OBJECTS).get_mut(object) {
            o.refs += 1;
        }
    }
    let h = handle();
    log(format!("cuGraphInstantiate {h:#x} of {:#x}", graph.addr()));
    lock(&EXECS).insert(h, g);
    unsafe { *exec = as_handle(h) };
    OK
}
unsafe extern "C" fn cu_graph_exec_destroy(exec: CUgraphExec) -> CUresult {
    log(format!("cuGraphExecDestroy {:#x}", exec.addr()));
    let Some(g) = lock(&EXECS).remove(&exec.addr()) else {
        return CUresult::CUDA_ERROR_INVALID_VALUE;
    };
    for object in g.objects {
        let _ = release_object(object, 1);
    }
    OK
}
unsafe extern "C" fn cu_graph_launch(exec: CUgraphExec, s: CUstream) -> CUresult {
    check!(bound("cuGraphLaunch"));
    let Some(g) = lock(&EXECS).get(&exec.addr()).cloned() else {
        return CUresult::CUDA_ERROR_INVALID_VALUE;
    };
    on_stream(
        s,
        format!("cuGraphLaunch {:#x} on {:#x}", exec.addr(), s.addr()),
        || {
            for call in g.host_fns {
                // SAFETY: a host function recorded into the graph, owned by its user
                // object, which the executable graph keeps alive.
                unsafe { call.run() };
            }
            OK
        },
    )
}

// ---------------------------------------------------------------------------------------
// Events.

unsafe extern "C" fn cu_event_create(e: *mut CUevent, flags: c_uint) -> CUresult {
    check!(bound("cuEventCreate"));
    let h = handle();
    log(format!("cuEventCreate {h:#x} flags={flags}"));
    unsafe { *e = as_handle(h) };
    OK
}
unsafe extern "C" fn cu_event_destroy(e: CUevent) -> CUresult {
    check!(alive("cuEventDestroy"));
    log(format!("cuEventDestroy {:#x}", e.addr()));
    OK
}

// ---------------------------------------------------------------------------------------
// Memory: device allocations hold bytes, so copies and memsets can be checked.

/// Device allocations by base address.
static DEVICE: Mutex<BTreeMap<u64, Vec<u8>>> = Mutex::new(BTreeMap::new());
static NEXT_DEVICE_PTR: AtomicU64 = AtomicU64::new(0x7_0000_0000);

/// A new device allocation of `size` bytes, filled with a pattern no check expects.
fn device_alloc(size: usize) -> u64 {
    let step = (size as u64).div_ceil(256) * 256 + 256;
    let p = NEXT_DEVICE_PTR.fetch_add(step, Ordering::Relaxed);
    lock(&DEVICE).insert(p, vec![0xA5; size]);
    p
}

/// Runs `f` on the `n` device bytes at `ptr`; an error when they are not inside one live
/// allocation.
fn with_device<R>(ptr: u64, n: usize, f: impl FnOnce(&mut [u8]) -> R) -> Result<R, CUresult> {
    let mut mem = lock(&DEVICE);
    let (&base, bytes) = mem
        .range_mut(..=ptr)
        .next_back()
        .ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)?;
    let start = usize::try_from(ptr - base).map_err(|_| CUresult::CUDA_ERROR_INVALID_VALUE)?;
    let end = start
        .checked_add(n)
        .ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)?;
    bytes
        .get_mut(start..end)
        .map(f)
        .ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)
}

fn status(r: Result<(), CUresult>) -> CUresult {
    r.err().unwrap_or(OK)
}

fn device_fill(ptr: u64, pattern: &[u8], count: usize) -> CUresult {
    status(with_device(ptr, pattern.len() * count, |d| {
        d.chunks_exact_mut(pattern.len())
            .for_each(|c| c.copy_from_slice(pattern));
    }))
}

fn device_copy(dst: u64, src: u64, n: usize) -> CUresult {
    let bytes = match with_device(src, n, |s| s.to_vec()) {
        Ok(b) => b,
        Err(e) => return e,
    };
    status(with_device(dst, n, |d| d.copy_from_slice(&bytes)))
}

unsafe extern "C" fn cu_mem_alloc(p: *mut CUdeviceptr, size: usize) -> CUresult {
    check!(bound("cuMemAlloc"));
    if size > 1 << 30 {
        log(format!("cuMemAlloc {size} OOM"));
        return CUresult::CUDA_ERROR_OUT_OF_MEMORY;
    }
    let h = device_alloc(size);
    log(format!("cuMemAlloc {h:#x} {size}"));
    unsafe { *p = h };
    OK
}
unsafe extern "C" fn cu_mem_free(p: CUdeviceptr) -> CUresult {
    check!(bound("cuMemFree"));
    if FAIL_MEM_FREE.swap(false, Ordering::SeqCst) {
        log(format!("cuMemFree {p:#x} FAILED"));
        return CUresult::CUDA_ERROR_INVALID_VALUE;
    }
    log(format!("cuMemFree {p:#x}"));
    if lock(&DEVICE).remove(&p).is_none() {
        log(format!("cuMemFree {p:#x} UNKNOWN"));
        return CUresult::CUDA_ERROR_INVALID_VALUE;
    }
    OK
}
unsafe extern "C" fn cu_mem_alloc_async(p: *mut CUdeviceptr, size: usize, s: CUstream) -> CUresult {
    check!(bound("cuMemAllocAsync"));
    let h = device_alloc(size);
    log(format!("cuMemAllocAsync {h:#x} {size} on {:#x}", s.addr()));
    unsafe { *p = h };
    OK
}
unsafe extern "C" fn cu_mem_free_async(p: CUdeviceptr, s: CUstream) -> CUresult {
    check!(bound("cuMemFreeAsync"));
    log(format!("cuMemFreeAsync {p:#x} on {:#x}", s.addr()));
    if lock(&DEVICE).remove(&p).is_none() {
        return CUresult::CUDA_ERROR_INVALID_VALUE;
    }
    OK
}
unsafe extern "C" fn cu_memcpy_htod(dst: CUdeviceptr, src: *const c_void, n: usize) -> CUresult {
    check!(bound("cuMemcpyHtoD"));
    log(format!("cuMemcpyHtoD {dst:#x} {n}"));
    // SAFETY: the caller's `n` readable host bytes.
    let src = unsafe { std::slice::from_raw_parts(src.cast::<u8>(), n) };
    status(with_device(dst, n, |d| d.copy_from_slice(src)))
}
unsafe extern "C" fn cu_memcpy_dtoh(dst: *mut c_void, src: CUdeviceptr, n: usize) -> CUresult {
    check!(bound("cuMemcpyDtoH"));
    log(format!("cuMemcpyDtoH {src:#x} {n}"));
    // SAFETY: the caller's `n` writable host bytes.
    let dst = unsafe { std::slice::from_raw_parts_mut(dst.cast::<u8>(), n) };
    status(with_device(src, n, |s| dst.copy_from_slice(s)))
}
unsafe extern "C" fn cu_memcpy_dtod(dst: CUdeviceptr, src: CUdeviceptr, n: usize) -> CUresult {
    check!(bound("cuMemcpyDtoD"));
    log(format!("cuMemcpyDtoD {dst:#x} {src:#x} {n}"));
    device_copy(dst, src, n)
}
unsafe extern "C" fn cu_memcpy_dtod_async(
    dst: CUdeviceptr,
    src: CUdeviceptr,
    n: usize,
    s: CUstream,
) -> CUresult {
    check!(bound("cuMemcpyDtoDAsync"));
    let what = format!("cuMemcpyDtoDAsync {dst:#x} {src:#x} {n} on {:#x}", s.addr());
    on_stream(s, what, || device_copy(dst, src, n))
}
unsafe extern "C" fn cu_memset_d8(p: CUdeviceptr, v: u8, n: usize) -> CUresult {
    check!(bound("cuMemsetD8"));
    log(format!("cuMemsetD8 {p:#x} {v} {n}"));
    device_fill(p, &[v], n)
}
unsafe extern "C" fn cu_memset_d32(p: CUdeviceptr, v: c_uint, n: usize) -> CUresult {
    check!(bound("cuMemsetD32"));
    log(format!("cuMemsetD32 {p:#x} {v} {n}"));
    device_fill(p, &v.to_ne_bytes(), n)
}
unsafe extern "C" fn cu_memset_d8_async(p: CUdeviceptr, v: u8, n: usize, s: CUstream) -> CUresult {
    check!(bound("cuMemsetD8Async"));
    let what = format!("cuMemsetD8Async {p:#x} {v} {n} on {:#x}", s.addr());
    on_stream(s, what, || device_fill(p, &[v], n))
}
unsafe extern "C" fn cu_memset_d32_async(
    p: CUdeviceptr,
    v: c_uint,
    n: usize,
    s: CUstream,
) -> CUresult {
    check!(bound("cuMemsetD32Async"));
    let what = format!("cuMemsetD32Async {p:#x} {v} {n} on {:#x}", s.addr());
    on_stream(s, what, || device_fill(p, &v.to_ne_bytes(), n))
}

/// Pinned allocations by the address handed out: the real allocation and its layout.
struct HostAlloc {
    base: *mut u8,
    layout: Layout,
}
// SAFETY: plain heap memory, freed by whichever thread calls cuMemFreeHost.
unsafe impl Send for HostAlloc {}
static HOST_ALLOCS: Mutex<BTreeMap<usize, HostAlloc>> = Mutex::new(BTreeMap::new());

/// Pinned memory as the driver promises it: 256-aligned. The mock makes it exactly that
/// and never more (256 bytes past a 4096-aligned allocation), so a type that needs more
/// alignment is misplaced unless cuda-core aligns it itself.
unsafe extern "C" fn cu_mem_alloc_host(pp: *mut *mut c_void, size: usize) -> CUresult {
    check!(bound("cuMemAllocHost"));
    let Ok(layout) = Layout::from_size_align(size + 256, 4096) else {
        return CUresult::CUDA_ERROR_OUT_OF_MEMORY;
    };
    // SAFETY: a non-zero size. Left uninitialized: cuda-core must initialize what it
    // hands out (Miri checks).
    let base = unsafe { std::alloc::alloc(layout) };
    if base.is_null() {
        return CUresult::CUDA_ERROR_OUT_OF_MEMORY;
    }
    // SAFETY: 256 < the allocation's size.
    let p = unsafe { base.add(256) };
    log(format!("cuMemAllocHost {:#x} {size}", p.addr()));
    lock(&HOST_ALLOCS).insert(p.addr(), HostAlloc { base, layout });
    unsafe { *pp = p.cast() };
    OK
}
unsafe extern "C" fn cu_mem_free_host(p: *mut c_void) -> CUresult {
    check!(bound("cuMemFreeHost"));
    let Some(a) = lock(&HOST_ALLOCS).remove(&p.addr()) else {
        log(format!("cuMemFreeHost {:#x} UNKNOWN", p.addr()));
        return CUresult::CUDA_ERROR_INVALID_VALUE;
    };
    log(format!("cuMemFreeHost {:#x}", p.addr()));
    // SAFETY: allocated by cu_mem_alloc_host with this layout, freed once (removed).
    unsafe { std::alloc::dealloc(a.base, a.layout) };
    OK
}

// ---------------------------------------------------------------------------------------
// Modules, functions, launches.

/// The kernels the mock modules have: name and parameter layout `(offset, size)`.
/// `scale(u32 *p, u32 n)` doubles `p[0..n]` when launched.
const KERNELS: [(&str, &[(usize, usize)]); 2] = [
    ("vec_add", &[(0, 8), (8, 8), (16, 8), (24, 4)]),
    ("scale", &[(0, 8), (8, 4)]),
];
/// Functions handed out, by handle: the kernel's name.
static FUNCTIONS: Mutex<BTreeMap<usize, &'static str>> = Mutex::new(BTreeMap::new());

fn kernel_of(f: CUfunction) -> Option<(&'static str, &'static [(usize, usize)])> {
    let name = *lock(&FUNCTIONS).get(&f.addr())?;
    KERNELS.iter().find(|(n, _)| *n == name).copied()
}

unsafe extern "C" fn cu_module_load_data_ex(
    m: *mut CUmodule,
    image: *const c_void,
    n: c_uint,
    options: *mut CUjit_option,
    values: *mut *mut c_void,
) -> CUresult {
    check!(bound("cuModuleLoadDataEx"));
    let text = unsafe { std::ffi::CStr::from_ptr(image.cast::<c_char>()) }
        .to_string_lossy()
        .into_owned();
    let (opts, vals) = unsafe { cuda_workspace::mock::jit_options(n, options, values) };
    let find = |o: CUjit_option| opts.iter().position(|&x| x == o).map(|i| vals[i]);
    log(format!("cuModuleLoadDataEx options={n}"));
    if text.contains("bad") {
        if let (Some(buf), Some(size)) = (
            find(CUjit_option::CU_JIT_ERROR_LOG_BUFFER),
            find(CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES),
        ) {
            let msg = b"ptxas application ptx input, line 1; error   : mock syntax error\0";
            let len = msg.len().min(size.addr());
            unsafe { std::ptr::copy_nonoverlapping(msg.as_ptr(), buf.cast::<u8>(), len) };
        }
        return CUresult::CUDA_ERROR_INVALID_PTX;
    }
    let h = handle();
    log(format!("module {h:#x} loaded"));
    unsafe { *m = as_handle(h) };
    OK
}
unsafe extern "C" fn cu_module_unload(m: CUmodule) -> CUresult {
    check!(bound("cuModuleUnload"));
    log(format!("cuModuleUnload {:#x}", m.addr()));
    OK
}
unsafe extern "C" fn cu_module_get_function(
    f: *mut CUfunction,
    _m: CUmodule,
    name: *const c_char,
) -> CUresult {
    check!(bound("cuModuleGetFunction"));
    let name = unsafe { std::ffi::CStr::from_ptr(name) };
    let Some(&(kernel, _)) = KERNELS
        .iter()
        .find(|(k, _)| k.as_bytes() == name.to_bytes())
    else {
        return CUresult::CUDA_ERROR_NOT_FOUND;
    };
    let h = handle();
    lock(&FUNCTIONS).insert(h, kernel);
    unsafe { *f = as_handle(h) };
    OK
}
unsafe extern "C" fn cu_func_get_param_info(
    f: CUfunction,
    index: usize,
    off: *mut usize,
    size: *mut usize,
) -> CUresult {
    check!(bound("cuFuncGetParamInfo"));
    let Some((name, layout)) = kernel_of(f) else {
        return CUresult::CUDA_ERROR_INVALID_HANDLE;
    };
    let Some(&(o, s)) = layout.get(index) else {
        PAST_END.fetch_add(1, Ordering::SeqCst);
        log(format!("cuFuncGetParamInfo {name} {index} PAST END"));
        return CUresult::CUDA_ERROR_INVALID_VALUE;
    };
    log(format!("cuFuncGetParamInfo {name} {index}"));
    unsafe {
        *off = o;
        *size = s;
    }
    OK
}
unsafe extern "C" fn cu_launch_kernel_ex(
    config: *const CUlaunchConfig,
    f: CUfunction,
    params: *mut *mut c_void,
    _extra: *mut *mut c_void,
) -> CUresult {
    check!(bound("cuLaunchKernelEx"));
    // SAFETY: the caller's configuration.
    let cfg = unsafe { &*config };
    let Some((name, _)) = kernel_of(f) else {
        return CUresult::CUDA_ERROR_INVALID_HANDLE;
    };
    let s = cfg.hStream;
    let what = format!(
        "cuLaunchKernelEx {name} on {:#x} grid={} block={}",
        s.addr(),
        cfg.gridDimX,
        cfg.blockDimX
    );
    on_stream(s, what, || {
        if name != "scale" || params.is_null() {
            return OK;
        }
        // SAFETY: `kernelParams` holds one pointer per parameter of `scale(u32*, u32)`,
        // each to a value of the parameter's size.
        let (p, n) = unsafe {
            (
                (*params).cast::<u64>().read_unaligned(),
                (*params.add(1)).cast::<u32>().read_unaligned(),
            )
        };
        status(with_device(p, n as usize * 4, |d| {
            for w in d.chunks_exact_mut(4) {
                let v = u32::from_ne_bytes([w[0], w[1], w[2], w[3]]);
                w.copy_from_slice(&v.wrapping_mul(2).to_ne_bytes());
            }
        }))
    })
}

/// The error-log buffer the mock linker was given: (address, size).
struct LinkLog(*mut c_void, usize);
// SAFETY: the linker's log buffer, written only while the linker that owns it runs.
unsafe impl Send for LinkLog {}
static LINK_LOG: Mutex<LinkLog> = Mutex::new(LinkLog(std::ptr::null_mut(), 0));
static LINK_UNRESOLVED: AtomicBool = AtomicBool::new(false);
/// A minimal ELF64 cubin, what the mock linker "produces": the header and one null
/// section (`e_shoff` 64, `e_shentsize` 64, `e_shnum` 1), the least `Module::from_image`
/// accepts.
static CUBIN: [u8; 128] = {
    let mut h = [0u8; 128];
    h[0] = 0x7f;
    h[1] = b'E';
    h[2] = b'L';
    h[3] = b'F';
    h[4] = 2;
    h[5] = 1;
    h[0x28] = 64; // e_shoff
    h[0x3a] = 64; // e_shentsize
    h[0x3c] = 1; // e_shnum
    h
};

unsafe extern "C" fn cu_link_create(
    n: c_uint,
    options: *mut CUjit_option,
    values: *mut *mut c_void,
    state: *mut cudadrv_sys::CUlinkState,
) -> CUresult {
    let (opts, vals) = unsafe { cuda_workspace::mock::jit_options(n, options, values) };
    let find = |o: CUjit_option| opts.iter().position(|&x| x == o).map(|i| vals[i]);
    *lock(&LINK_LOG) = LinkLog(
        find(CUjit_option::CU_JIT_ERROR_LOG_BUFFER).unwrap_or(std::ptr::null_mut()),
        find(CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES).map_or(0, <*mut c_void>::addr),
    );
    LINK_UNRESOLVED.store(false, Ordering::SeqCst);
    let h = handle();
    log(format!("cuLinkCreate {h:#x}"));
    unsafe { *state = as_handle(h) };
    OK
}
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn cu_link_add_data(
    _state: cudadrv_sys::CUlinkState,
    kind: cudadrv_sys::CUjitInputType,
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
    _state: cudadrv_sys::CUlinkState,
    cubin: *mut *mut c_void,
    size: *mut usize,
) -> CUresult {
    log("cuLinkComplete".into());
    if LINK_UNRESOLVED.load(Ordering::SeqCst) {
        let LinkLog(buf, len) = *lock(&LINK_LOG);
        let msg = b"error   : Undefined reference to 'cudaGetParameterBufferV2'\0";
        if !buf.is_null() {
            unsafe {
                std::ptr::copy_nonoverlapping(msg.as_ptr(), buf.cast::<u8>(), msg.len().min(len))
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
unsafe extern "C" fn cu_link_destroy(state: cudadrv_sys::CUlinkState) -> CUresult {
    log(format!("cuLinkDestroy {:#x}", state.addr()));
    OK
}

cuda_workspace::mock_entries! {
    /// The mocked entries by name (null for the others: the crate reports a missing
    /// symbol).
    fn mock_entry {
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
        "cuStreamWaitEvent" => cu_stream_wait_event as unsafe extern "C" fn(_, _, _) -> _,
        "cuStreamIsCapturing" => cu_stream_is_capturing as unsafe extern "C" fn(_, _) -> _,
        "cuStreamBeginCapture" => cu_stream_begin_capture as unsafe extern "C" fn(_, _) -> _,
        "cuStreamEndCapture" => cu_stream_end_capture as unsafe extern "C" fn(_, _) -> _,
        "cuStreamGetCaptureInfo" =>
            cu_stream_get_capture_info as unsafe extern "C" fn(_, _, _, _, _, _, _) -> _,
        "cuLaunchHostFunc" => cu_launch_host_func as unsafe extern "C" fn(_, _, _) -> _,
        "cuUserObjectCreate" => cu_user_object_create as unsafe extern "C" fn(_, _, _, _, _) -> _,
        "cuUserObjectRelease" => cu_user_object_release as unsafe extern "C" fn(_, _) -> _,
        "cuGraphRetainUserObject" =>
            cu_graph_retain_user_object as unsafe extern "C" fn(_, _, _, _) -> _,
        "cuGraphReleaseUserObject" =>
            cu_graph_release_user_object as unsafe extern "C" fn(_, _, _) -> _,
        "cuGraphDestroy" => cu_graph_destroy as unsafe extern "C" fn(_) -> _,
        "cuGraphInstantiate" => cu_graph_instantiate as unsafe extern "C" fn(_, _, _) -> _,
        "cuGraphExecDestroy" => cu_graph_exec_destroy as unsafe extern "C" fn(_) -> _,
        "cuGraphLaunch" => cu_graph_launch as unsafe extern "C" fn(_, _) -> _,
        "cuEventCreate" => cu_event_create as unsafe extern "C" fn(_, _) -> _,
        "cuEventDestroy" => cu_event_destroy as unsafe extern "C" fn(_) -> _,
        "cuMemAlloc" => cu_mem_alloc as unsafe extern "C" fn(_, _) -> _,
        "cuMemFree" => cu_mem_free as unsafe extern "C" fn(_) -> _,
        "cuMemAllocAsync" => cu_mem_alloc_async as unsafe extern "C" fn(_, _, _) -> _,
        "cuMemFreeAsync" => cu_mem_free_async as unsafe extern "C" fn(_, _) -> _,
        "cuMemAllocHost" => cu_mem_alloc_host as unsafe extern "C" fn(_, _) -> _,
        "cuMemFreeHost" => cu_mem_free_host as unsafe extern "C" fn(_) -> _,
        "cuMemcpyHtoD" => cu_memcpy_htod as unsafe extern "C" fn(_, _, _) -> _,
        "cuMemcpyDtoH" => cu_memcpy_dtoh as unsafe extern "C" fn(_, _, _) -> _,
        "cuMemcpyDtoD" => cu_memcpy_dtod as unsafe extern "C" fn(_, _, _) -> _,
        "cuMemcpyDtoDAsync" => cu_memcpy_dtod_async as unsafe extern "C" fn(_, _, _, _) -> _,
        "cuMemsetD8" => cu_memset_d8 as unsafe extern "C" fn(_, _, _) -> _,
        "cuMemsetD32" => cu_memset_d32 as unsafe extern "C" fn(_, _, _) -> _,
        "cuMemsetD8Async" => cu_memset_d8_async as unsafe extern "C" fn(_, _, _, _) -> _,
        "cuMemsetD32Async" => cu_memset_d32_async as unsafe extern "C" fn(_, _, _, _) -> _,
        "cuModuleLoadDataEx" => cu_module_load_data_ex as unsafe extern "C" fn(_, _, _, _, _) -> _,
        "cuModuleUnload" => cu_module_unload as unsafe extern "C" fn(_) -> _,
        "cuModuleGetFunction" => cu_module_get_function as unsafe extern "C" fn(_, _, _) -> _,
        "cuFuncGetParamInfo" => cu_func_get_param_info as unsafe extern "C" fn(_, _, _, _) -> _,
        "cuLaunchKernelEx" => cu_launch_kernel_ex as unsafe extern "C" fn(_, _, _, _) -> _,
        "cuLinkCreate" => cu_link_create as unsafe extern "C" fn(_, _, _, _) -> _,
        "cuLinkAddData" => cu_link_add_data as unsafe extern "C" fn(_, _, _, _, _, _, _, _) -> _,
        "cuLinkComplete" => cu_link_complete as unsafe extern "C" fn(_, _, _) -> _,
        "cuLinkDestroy" => cu_link_destroy as unsafe extern "C" fn(_) -> _,
    }
}

fn install() {
    // SAFETY: every non-null pointer `mock_entry` returns is a function of this program
    // with the C signature of the entry of that name (the mocks mirror cuda.h).
    unsafe { cuda_workspace::mock::MockDriver::new().entries(mock_entry) }.install();
}

/// Serializes the subtests (one #[test] drives them, but keep them safe if split).
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    lock(&SERIAL)
}

fn position(log: &[String], prefix: &str) -> usize {
    log.iter()
        .position(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("`{prefix}` not in the call log:\n{log:#?}"))
}

/// The position of the last line starting with `prefix`.
fn last_position(log: &[String], prefix: &str) -> usize {
    log.iter()
        .rposition(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("`{prefix}` not in the call log:\n{log:#?}"))
}

fn count(log: &[String], prefix: &str) -> usize {
    log.iter().filter(|l| l.starts_with(prefix)).count()
}

/// Lines anywhere in the log that report a call made without its context (on a thread
/// where it is not current, or after it was released) or a pop without a push.
fn context_faults(log: &[String]) -> Vec<&String> {
    log.iter()
        .filter(|l| {
            l.ends_with("NO CONTEXT")
                || l.contains("WRONG CONTEXT")
                || l.ends_with("AFTER RELEASE")
                || l.ends_with("UNDERFLOW")
        })
        .collect()
}

fn primary() -> Context {
    Context::primary(Device::get(0).unwrap()).unwrap()
}

fn scale_function(ctx: &Context) -> Function {
    Module::from_ptx(ctx, ".version 8.0 // good")
        .unwrap()
        .function("scale")
        .unwrap()
}

#[test]
fn handles_against_a_mock_driver() {
    let _g = serial();
    install();
    device_queries();
    context_binds_only_when_not_current();
    raii_drop_order();
    host_fn_runs_once_and_is_freed();
    completions_are_woken_by_the_driver();
    forgotten_completions_leave_the_slot_alive();
    static_slots_serve_one_completion_at_a_time();
    oom_maps_to_an_error_naming_the_call();
    missing_entry_names_the_symbol();
    jit_error_log_is_captured();
    param_layout_is_read_from_the_driver();
    linker_logs_and_destroys_once();
    // Regressions of the handle-model redesign.
    handles_outlive_their_context();
    functions_outlive_their_module();
    every_call_binds_the_context_on_a_fresh_thread();
    capture_refuses_unsound_calls();
    captured_host_fn_is_owned_by_the_graph();
    drop_errors_are_reported();
    pinned_buffers_are_aligned_for_their_type();
    param_count_is_learned_once();
    launch_without_a_stream_is_refused();
    views_slice_split_and_copy();
    dlpack_import_and_export();
    threads_share_one_context();
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
    assert_eq!(cudadrv::driver::init().map_err(|e| e.to_string()), Ok(()));
    assert_eq!(
        count(&take_log(), "cuInit"),
        0,
        "cuInit runs once per process"
    );
}

fn context_binds_only_when_not_current() {
    set_current(0);
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
    set_current(0xDEAD);
    take_log();
    let s = Stream::new(&ctx, StreamFlags::empty()).unwrap();
    let log = take_log();
    let push = position(&log, "cuCtxPushCurrent 0xc0");
    let create = position(&log, "cuStreamCreate");
    let pop = position(&log, "cuCtxPopCurrent");
    assert!(push < create && create < pop, "{log:#?}");
    assert_eq!(current(), 0xDEAD, "the previous context is restored");
    assert_eq!(pushed_depth(), 0, "the push was popped");
    drop(s);
    set_current(PRIMARY);
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
    // A copy of the wrong length names both lengths.
    let mut four = DeviceBuffer::<u32>::new(&ctx, 4).unwrap();
    let e = four.copy_from_host(&[1, 2, 3]).unwrap_err();
    assert!(
        matches!(
            e,
            Error::LengthMismatch {
                expected: 4,
                found: 3
            }
        ),
        "{e:?}"
    );
    assert!(
        e.to_string().contains("4 elements expected, 3 given"),
        "{e}"
    );
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
    // Once the count is known, an index past it is refused without asking the driver.
    let past = PAST_END.load(Ordering::SeqCst);
    let e = f.param_info(4).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    assert_eq!(PAST_END.load(Ordering::SeqCst), past);
    // Before (a fresh Function), the driver's own refusal comes back, naming the call.
    let fresh = module.function("vec_add").unwrap();
    let e = fresh.param_info(4).unwrap_err();
    assert_eq!(e.call(), Some("cuFuncGetParamInfo"));
    assert!(e.is(CUresult::CUDA_ERROR_INVALID_VALUE), "{e}");
    let buf = DeviceBuffer::<f32>::new(&ctx, 4).unwrap();
    let packed = cudadrv::args::PackedArgs::<4096>::from_args(&(
        buf.as_arg(),
        buf.as_arg(),
        buf.as_arg(),
        4u32,
    ))
    .unwrap();
    f.verify_params(&packed).unwrap();
    let wrong = cudadrv::args::PackedArgs::<4096>::from_args(&(buf.as_arg(), 4u32)).unwrap();
    let e = f.verify_params(&wrong).unwrap_err();
    assert!(matches!(e, Error::Layout(_)), "{e}");
    let e = module.function("nope").unwrap_err();
    assert!(e.is(CUresult::CUDA_ERROR_NOT_FOUND), "{e:?}");
    assert!(
        matches!(&e, Error::NotFound { call: "cuModuleGetFunction", name } if name.as_str() == "nope"),
        "{e:?}"
    );
    assert!(e.to_string().contains("\"nope\""), "{e}");
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
        cudadrv_sys::CUjitInputType::CU_JIT_INPUT_LIBRARY.0
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
    let handle = format!("cuLinkDestroy {:#x}", raw.addr());
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

// ---------------------------------------------------------------------------------------
// Regressions of the handle-model redesign: each failed, or could not be written as a
// safe call, before it.

/// Handles keep their context: dropping the `Context` value first releases nothing; the
/// primary context is released once, after the last handle's destroy call, even when
/// that handle goes on another thread.
fn handles_outlive_their_context() {
    take_log();
    let ctx = primary();
    let stream = Stream::new(&ctx, StreamFlags::NON_BLOCKING).unwrap();
    let buf = DeviceBuffer::from_slice(&ctx, &[1u32, 2, 3, 4]).unwrap();
    let event = Event::new(&ctx, EventFlags::DISABLE_TIMING).unwrap();
    let module = Module::from_ptx(&ctx, ".version 8.0 // good").unwrap();
    let f = module.function("scale").unwrap();
    drop(ctx);
    let log = take_log();
    assert_eq!(count(&log, "cuDevicePrimaryCtxRelease"), 0, "{log:#?}");

    // Still usable without the Context value.
    let mut back = [0u32; 4];
    buf.copy_to_host(&mut back).unwrap();
    assert_eq!(back, [1, 2, 3, 4]);
    stream.synchronize().unwrap();
    assert_eq!(f.param_count().unwrap(), 2);

    drop(stream);
    drop(buf);
    drop(event);
    drop(module);
    let log = take_log();
    for destroy in ["cuStreamDestroy", "cuMemFree ", "cuEventDestroy"] {
        assert_eq!(count(&log, destroy), 1, "{destroy} exactly once: {log:#?}");
    }
    assert_eq!(
        count(&log, "cuModuleUnload"),
        0,
        "the function keeps its module: {log:#?}"
    );
    assert_eq!(count(&log, "cuDevicePrimaryCtxRelease"), 0, "{log:#?}");

    // The last handle goes on a thread where no context is current.
    std::thread::spawn(move || {
        drop(f);
        assert_eq!(current(), 0, "nothing left current");
        assert_eq!(pushed_depth(), 0);
    })
    .join()
    .unwrap();
    let log = take_log();
    assert_eq!(count(&log, "cuModuleUnload"), 1, "{log:#?}");
    assert_eq!(count(&log, "cuDevicePrimaryCtxRelease"), 1, "{log:#?}");
    assert!(
        position(&log, "cuModuleUnload") < position(&log, "cuDevicePrimaryCtxRelease"),
        "{log:#?}"
    );
    assert!(context_faults(&log).is_empty(), "{log:#?}");
}

/// A `Function` keeps its module loaded: the module is unloaded once, when the last
/// clone of the last function goes, not when the `Module` value does.
fn functions_outlive_their_module() {
    let ctx = primary();
    let module = Module::from_ptx(&ctx, ".version 8.0 // good").unwrap();
    let f = module.function("vec_add").unwrap();
    let g = f.clone();
    let module_clone = module.clone();
    take_log();
    drop(module);
    drop(module_clone);
    drop(ctx);
    assert_eq!(f.param_count().unwrap(), 4, "still usable");
    drop(f);
    let log = take_log();
    assert_eq!(count(&log, "cuModuleUnload"), 0, "{log:#?}");
    assert_eq!(count(&log, "cuDevicePrimaryCtxRelease"), 0, "{log:#?}");
    assert_eq!(g.module().context().device().as_raw(), 0);
    drop(g);
    let log = take_log();
    assert_eq!(count(&log, "cuModuleUnload"), 1, "exactly once: {log:#?}");
    assert_eq!(count(&log, "cuDevicePrimaryCtxRelease"), 1, "{log:#?}");
    assert!(
        position(&log, "cuModuleUnload") < position(&log, "cuDevicePrimaryCtxRelease"),
        "{log:#?}"
    );
}

/// Every call makes the handle's context current where it is not: on a fresh thread
/// (nothing current), copies, memsets, synchronization and a launch all succeed, and each
/// pops what it pushed.
fn every_call_binds_the_context_on_a_fresh_thread() {
    let ctx = primary();
    let mut buf = DeviceBuffer::<u32>::new(&ctx, 4).unwrap();
    let mut other = DeviceBuffer::<u32>::new(&ctx, 4).unwrap();
    let stream = Stream::new(&ctx, StreamFlags::NON_BLOCKING).unwrap();
    let f = scale_function(&ctx);
    take_log();
    std::thread::spawn(move || {
        let clean = |what: &str| {
            assert_eq!(current(), 0, "{what} left a context current");
            assert_eq!(pushed_depth(), 0, "{what} left a push behind");
        };
        clean("nothing");
        // The mock's check is live: a call without binding is refused here.
        // SAFETY: the mock's own entry, on a live stream.
        let unbound = unsafe { cu_stream_sync(stream.as_raw()) };
        assert_eq!(unbound, CUresult::CUDA_ERROR_INVALID_CONTEXT);
        buf.copy_from_host(&[1, 2, 3, 4]).unwrap();
        clean("copy_from_host");
        other.copy_from_device(&buf).unwrap();
        clean("copy_from_device");
        let mut back = [0u32; 4];
        other.copy_to_host(&mut back).unwrap();
        clean("copy_to_host");
        assert_eq!(back, [1, 2, 3, 4]);
        let args = (buf.as_arg(), 4u32);
        let cfg = LaunchConfig::new(1u32, 4u32).stream(&stream);
        // SAFETY: `scale(u32*, u32)` takes a device pointer and a count; the buffer holds
        // 4 values and outlives the launch (synchronized below).
        unsafe { launch::launch(&f, &cfg, &args) }.unwrap();
        clean("launch");
        stream.synchronize().unwrap();
        clean("synchronize");
        buf.copy_to_host(&mut back).unwrap();
        assert_eq!(back, [2, 4, 6, 8], "the mock kernel doubled the buffer");
        other.memset_d8(0x01).unwrap();
        clean("memset_d8");
        other.copy_to_host(&mut back).unwrap();
        assert_eq!(back, [0x0101_0101; 4]);
        other.memset_d32(7).unwrap();
        clean("memset_d32");
        other.copy_to_host(&mut back).unwrap();
        assert_eq!(back, [7; 4]);
        // Handles made and dropped here too.
        let s = Stream::new(stream.context(), StreamFlags::empty()).unwrap();
        s.synchronize().unwrap();
        drop((s, buf, other, stream, f));
        clean("the drops");
    })
    .join()
    .unwrap();
    let mut log = take_log();
    let probe = "cuStreamSynchronize NO CONTEXT".to_string();
    assert_eq!(count(&log, &probe), 1, "{log:#?}");
    log.retain(|l| *l != probe);
    assert!(context_faults(&log).is_empty(), "{log:#?}");
    assert_eq!(
        count(&log, "cuCtxPushCurrent"),
        count(&log, "cuCtxPopCurrent"),
        "{log:#?}"
    );
    for call in [
        "cuMemcpyHtoD",
        "cuMemcpyDtoD",
        "cuMemcpyDtoH",
        "cuMemsetD8 ",
        "cuMemsetD32 ",
        "cuStreamSynchronize",
        "cuLaunchKernelEx",
        "cuStreamCreate",
        "cuMemFree",
        "cuModuleUnload",
    ] {
        let at = position(&log, call);
        assert!(
            log[..at]
                .iter()
                .rposition(|l| l.starts_with("cuCtxPushCurrent"))
                > log[..at]
                    .iter()
                    .rposition(|l| l.starts_with("cuCtxPopCurrent")),
            "`{call}` inside a push: {log:#?}"
        );
    }
    drop(ctx);
}

/// A stream being captured refuses the safe calls that would make the graph name
/// something by address, without calling the driver for them and without leaking the
/// closure; recording through the capture does reach the driver.
fn capture_refuses_unsound_calls() {
    let ctx = primary();
    let mut stream = Stream::non_blocking(&ctx).unwrap();
    let mut other = Stream::non_blocking(&ctx).unwrap();
    let recorded = DeviceBuffer::<u32>::new(&ctx, 16).unwrap();
    let mut dst = DeviceBuffer::<u32>::new(&ctx, 16).unwrap();
    let src = DeviceBuffer::<u32>::new(&ctx, 16).unwrap();
    let event = Event::new(&ctx, EventFlags::DISABLE_TIMING).unwrap();
    let (ran, dropped) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicUsize::new(0)),
    );
    take_log();
    let exec = {
        let cap = stream.begin_capture(CaptureMode::Global).unwrap();
        let (r, guard) = (ran.clone(), DropCount(dropped.clone()));
        let e = cap
            .stream()
            .launch_host_fn(move || {
                let _keep = &guard;
                r.store(true, Ordering::SeqCst);
            })
            .unwrap_err();
        assert!(
            matches!(e, Error::StreamCapturing("cuLaunchHostFunc")),
            "{e:?}"
        );
        assert_eq!(dropped.load(Ordering::SeqCst), 1, "the closure was dropped");
        assert!(!ran.load(Ordering::SeqCst));

        let e = dst.memset_d8_async(0, cap.stream()).unwrap_err();
        assert!(
            matches!(e, Error::StreamCapturing("cuMemsetD8Async")),
            "{e:?}"
        );
        let e = dst.memset_d32_async(0, cap.stream()).unwrap_err();
        assert!(
            matches!(e, Error::StreamCapturing("cuMemsetD32Async")),
            "{e:?}"
        );
        let e = dst.copy_from_device_async(&src, cap.stream()).unwrap_err();
        assert!(
            matches!(e, Error::StreamCapturing("cuMemcpyDtoDAsync")),
            "{e:?}"
        );
        let log = take_log();
        for call in ["cuLaunchHostFunc", "cuMemset", "cuMemcpy"] {
            assert_eq!(count(&log, call), 0, "no {call}: {log:#?}");
        }

        cap.memset_d32(&recorded, 1).unwrap();
        let log = take_log();
        let line = format!(
            "cuMemsetD32Async {:#x} 1 16 on {:#x} captured",
            recorded.as_raw(),
            cap.stream().as_raw().addr()
        );
        assert_eq!(count(&log, &line), 1, "{log:#?}");
        let graph = cap.end().unwrap();
        graph.instantiate(Default::default()).unwrap()
    };
    assert_eq!(
        dropped.load(Ordering::SeqCst),
        1,
        "freed once, never leaked"
    );
    assert!(!ran.load(Ordering::SeqCst));

    // A graph launch onto a capturing stream is refused.
    {
        let cap = other.begin_capture(CaptureMode::Global).unwrap();
        take_log();
        let e = exec.launch(cap.stream()).unwrap_err();
        assert!(
            matches!(e, Error::StreamCapturing("cuGraphLaunch")),
            "{e:?}"
        );
        assert_eq!(count(&take_log(), "cuGraphLaunch"), 0);
    }
    take_log();
    exec.launch(&other).unwrap();
    assert_eq!(count(&take_log(), "cuGraphLaunch"), 1);

    // An external event wait on a stream that is capturing (marked so in the mock, as
    // another library could have done) is refused; a plain wait (joining) is not.
    let mut graph = std::ptr::null_mut();
    // SAFETY: the mock's own entries, on a live stream, with a valid out-pointer.
    unsafe {
        assert_eq!(
            cu_stream_begin_capture(
                other.as_raw(),
                CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_GLOBAL
            ),
            OK
        );
    }
    take_log();
    let e = other
        .wait_event_with_flags(&event, EventWaitFlags::EXTERNAL)
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::StreamCapturing("cuStreamWaitEvent(CU_EVENT_WAIT_EXTERNAL)")
        ),
        "{e:?}"
    );
    assert_eq!(count(&take_log(), "cuStreamWaitEvent"), 0);
    other.wait_event(&event).unwrap();
    assert_eq!(count(&take_log(), "cuStreamWaitEvent"), 1);
    // SAFETY: as above; the graph the mock made is destroyed once.
    unsafe {
        assert_eq!(cu_stream_end_capture(other.as_raw(), &mut graph), OK);
        assert_eq!(cu_graph_destroy(graph), OK);
    }
    take_log();
    other
        .wait_event_with_flags(&event, EventWaitFlags::EXTERNAL)
        .unwrap();
    let wait = format!(
        "cuStreamWaitEvent {:#x} {:#x} flags=1",
        other.as_raw().addr(),
        event.as_raw().addr()
    );
    assert_eq!(count(&take_log(), &wait), 1, "allowed when not capturing");

    // The per-thread default stream is never captured.
    let mut per_thread = Stream::per_thread(&ctx);
    let e = per_thread.begin_capture(CaptureMode::Global).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
    assert_eq!(count(&take_log(), "cuStreamBeginCapture"), 0);
    // The legacy one is refused by the driver.
    let mut legacy = Stream::legacy(&ctx);
    let e = legacy.begin_capture(CaptureMode::Global).unwrap_err();
    assert!(
        e.is(CUresult::CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED),
        "{e:?}"
    );
    drop(exec);
    assert!(lock(&CAPTURES).is_empty(), "every capture ended");
}

/// `Capturing::host_fn`: the graph owns the closure through a user object. Running the
/// captured host function any number of times runs the closure without freeing it; it
/// is freed exactly once, when the last graph or executable graph holding it goes.
fn captured_host_fn_is_owned_by_the_graph() {
    let ctx = primary();
    let mut stream = Stream::non_blocking(&ctx).unwrap();
    for with_exec in [false, true] {
        let (runs, drops) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        take_log();
        *lock(&LAST_CAPTURED_HOST_FN) = None;
        let cap = stream.begin_capture(CaptureMode::Global).unwrap();
        let (r, guard) = (runs.clone(), DropCount(drops.clone()));
        cap.host_fn(move || {
            let _keep = &guard;
            r.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
        let graph = cap.end().unwrap();
        let log = take_log();
        let info = position(&log, "cuStreamGetCaptureInfo");
        let create = position(&log, "cuUserObjectCreate");
        let retain = position(&log, "cuGraphRetainUserObject");
        let launch = position(&log, "cuLaunchHostFunc");
        assert!(
            info < create && create < retain && retain < launch,
            "{log:#?}"
        );
        assert_eq!(count(&log, "cuUserObjectCreate"), 1, "{log:#?}");
        assert_eq!(count(&log, "cuGraphRetainUserObject"), 1, "{log:#?}");
        assert_eq!(runs.load(Ordering::SeqCst), 0);

        let call = lock(&LAST_CAPTURED_HOST_FN)
            .take()
            .expect("cuLaunchHostFunc was captured");
        // SAFETY: the function and data the mock received from cuLaunchHostFunc; the
        // graph (alive) owns the data; a captured host function may run any number of
        // times.
        unsafe {
            call.run();
            call.run();
        }
        assert_eq!(runs.load(Ordering::SeqCst), 2, "ran twice");
        assert_eq!(drops.load(Ordering::SeqCst), 0, "not freed by running");

        if with_exec {
            let exec = graph.instantiate(Default::default()).unwrap();
            drop(graph);
            assert_eq!(
                drops.load(Ordering::SeqCst),
                0,
                "the executable graph still holds it"
            );
            exec.launch(&stream).unwrap();
            assert_eq!(runs.load(Ordering::SeqCst), 3);
            drop(exec);
        } else {
            drop(graph);
        }
        let log = take_log();
        assert_eq!(drops.load(Ordering::SeqCst), 1, "freed exactly once");
        assert_eq!(
            count(&log, "user object"),
            1,
            "one destructor call: {log:#?}"
        );
        assert!(lock(&USER_OBJECTS).is_empty());
        assert_eq!(runs.load(Ordering::SeqCst), 2 + usize::from(with_exec));
    }

    // A host function the driver refuses in the capture: its closure (and what it
    // captured) is dropped before `host_fn` returns, not when the graph goes.
    let drops = Arc::new(AtomicUsize::new(0));
    let cap = stream.begin_capture(CaptureMode::Global).unwrap();
    let guard = DropCount(drops.clone());
    FAIL_HOST_FN.store(true, Ordering::SeqCst);
    let refused = cap.host_fn(move || {
        let _keep = &guard;
    });
    FAIL_HOST_FN.store(false, Ordering::SeqCst);
    assert!(refused.is_err());
    assert_eq!(drops.load(Ordering::SeqCst), 1, "dropped at the refusal");
    assert!(lock(&USER_OBJECTS).is_empty(), "no user object left");
    drop(cap.end());
}

static HOOKED: Mutex<Vec<DropError>> = Mutex::new(Vec::new());

fn record_drop_error(e: &DropError) {
    lock(&HOOKED).push(*e);
}

/// A driver failure inside `Drop` is counted and handed to the hook, never swallowed.
fn drop_errors_are_reported() {
    let ctx = primary();
    lock(&HOOKED).clear();
    cudadrv::set_drop_error_hook(Some(record_drop_error));

    let before = cudadrv::drop_error_count();
    let buf = DeviceBuffer::<u8>::new(&ctx, 8).unwrap();
    FAIL_MEM_FREE.store(true, Ordering::SeqCst);
    drop(buf);
    assert_eq!(cudadrv::drop_error_count(), before + 1);
    assert_eq!(
        *lock(&HOOKED),
        [DropError {
            call: "cuMemFree",
            code: CUresult::CUDA_ERROR_INVALID_VALUE
        }]
    );

    let stream = Stream::new(&ctx, StreamFlags::empty()).unwrap();
    FAIL_STREAM_DESTROY.store(true, Ordering::SeqCst);
    drop(stream);
    assert_eq!(cudadrv::drop_error_count(), before + 2);
    assert_eq!(
        lock(&HOOKED).last(),
        Some(&DropError {
            call: "cuStreamDestroy",
            code: CUresult::CUDA_ERROR_INVALID_HANDLE
        })
    );

    // Without the hook, still counted.
    cudadrv::set_drop_error_hook(None);
    let buf = DeviceBuffer::<u8>::new(&ctx, 8).unwrap();
    FAIL_MEM_FREE.store(true, Ordering::SeqCst);
    drop(buf);
    assert_eq!(cudadrv::drop_error_count(), before + 3);
    assert_eq!(lock(&HOOKED).len(), 2, "the removed hook is not called");
    // A successful drop is not an error.
    drop(DeviceBuffer::<u8>::new(&ctx, 8).unwrap());
    assert_eq!(cudadrv::drop_error_count(), before + 3);
}

/// A page, as a pinned element type that needs more than the driver's 256-byte alignment.
#[repr(C, align(4096))]
#[derive(Clone, Copy)]
struct Aligned4096([u8; 4096]);

// SAFETY: 4096 bytes of `u8` at alignment 4096: no padding, every bit pattern valid.
unsafe impl cudadrv::memory::Pod for Aligned4096 {}

/// The addresses in the lines starting with `prefix` (`"cuMemAllocHost 0x... n"`).
fn addresses(log: &[String], prefix: &str) -> Vec<usize> {
    log.iter()
        .filter(|l| l.starts_with(prefix))
        .filter_map(|l| l.split_whitespace().nth(1))
        .filter_map(|a| usize::from_str_radix(a.trim_start_matches("0x"), 16).ok())
        .collect()
}

/// `PinnedHostBuffer` aligns an over-aligned `T` itself, and frees what the driver gave.
fn pinned_buffers_are_aligned_for_their_type() {
    let ctx = primary();
    take_log();
    let mut pages = PinnedHostBuffer::<Aligned4096>::zeroed(&ctx, 3).unwrap();
    assert_eq!(pages.len(), 3);
    assert_eq!(pages.as_ptr().addr() % 4096, 0, "aligned for the type");
    assert!(pages.iter().all(|p| p.0.iter().all(|&b| b == 0)), "zeroed");
    pages[2].0[4095] = 7;
    pages[0].0[0] = 1;
    assert_eq!(pages[2].0[4095] + pages[0].0[0], 8);
    let log = take_log();
    let allocs = addresses(&log, "cuMemAllocHost");
    assert!(!allocs.is_empty(), "{log:#?}");
    assert!(
        allocs.iter().all(|a| a % 256 == 0 && a % 4096 != 0),
        "the mock hands out 256-aligned, never 4096-aligned: {log:#?}"
    );
    let kept = *allocs.last().unwrap_or(&0);
    // Any earlier (misaligned) allocation was given back at once.
    assert_eq!(
        addresses(&log, "cuMemFreeHost"),
        allocs[..allocs.len() - 1],
        "{log:#?}"
    );
    drop(pages);
    let log = take_log();
    assert_eq!(
        addresses(&log, "cuMemFreeHost"),
        [kept],
        "the pointer the driver returned: {log:#?}"
    );
    assert!(lock(&HOST_ALLOCS).is_empty(), "nothing leaked");

    // A type the driver's alignment covers uses the allocation as it comes.
    let small = PinnedHostBuffer::from_slice(&ctx, &[1u32, 2, 3]).unwrap();
    assert_eq!(&*small, [1, 2, 3]);
    let log = take_log();
    assert_eq!(addresses(&log, "cuMemAllocHost"), [small.as_ptr().addr()]);
    drop(small);
    assert_eq!(count(&take_log(), "cuMemFreeHost"), 1);
    assert!(lock(&HOST_ALLOCS).is_empty());
}

/// The parameter count is learned once per `Function`: repeated layout checks make one
/// call past the last parameter in all, not one each.
fn param_count_is_learned_once() {
    let ctx = primary();
    let f = scale_function(&ctx);
    PAST_END.store(0, Ordering::SeqCst);
    f.verify_args::<(u64, u32)>().unwrap();
    f.verify_args::<(u64, u32)>().unwrap();
    assert_eq!(PAST_END.load(Ordering::SeqCst), 1, "{:#?}", take_log());
    // Clones carry the count; mismatches are still found without a past-the-end call.
    f.clone().verify_args::<(u64, u32)>().unwrap();
    let e = f.verify_args::<(u32, u64)>().unwrap_err();
    assert!(matches!(e, Error::Layout(_)), "{e}");
    let e = f.verify_args::<(u64,)>().unwrap_err();
    assert!(matches!(e, Error::Layout(_)), "{e}");
    assert_eq!(PAST_END.load(Ordering::SeqCst), 1, "{:#?}", take_log());
    take_log();
}

/// A launch configuration without a stream is refused before the driver is called.
fn launch_without_a_stream_is_refused() {
    let ctx = primary();
    let f = scale_function(&ctx);
    let buf = DeviceBuffer::from_slice(&ctx, &[1u32, 2, 3, 4]).unwrap();
    let args = (buf.as_arg(), 4u32);
    let packed = cudadrv::args::PackedArgs::<4096>::from_args(&args).unwrap();
    let cfg = LaunchConfig::new(1u32, 4u32);
    assert!(!cfg.has_stream());
    take_log();
    // SAFETY (all launches below): `scale(u32*, u32)` gets a device pointer to 4 values
    // and the count; the buffer outlives the launches (synchronized at the end).
    let refusals = [
        unsafe { launch::launch(&f, &cfg, &args) },
        unsafe { cfg.launch(&f, &args) },
        unsafe { launch::launch_packed(&f, &cfg, &packed) },
        unsafe { launch::launch_plain(&f, &cfg, &args) },
    ];
    for e in refusals {
        let e = e.unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    }
    assert_eq!(count(&take_log(), "cuLaunchKernel"), 0);

    let legacy = Stream::legacy(&ctx);
    let cfg = LaunchConfig::new(1u32, 4u32).stream(&legacy);
    unsafe { launch::launch(&f, &cfg, &args) }.unwrap();
    legacy.synchronize().unwrap();
    let log = take_log();
    let line = format!(
        "cuLaunchKernelEx scale on {:#x}",
        cudadrv_sys::CU_STREAM_LEGACY.addr()
    );
    assert_eq!(count(&log, "cuLaunchKernelEx"), 1, "{log:#?}");
    assert_eq!(count(&log, &line), 1, "{log:#?}");
    let mut back = [0u32; 4];
    buf.copy_to_host(&mut back).unwrap();
    assert_eq!(back, [2, 4, 6, 8]);
}

/// 16 threads share one context (a clone each), each making streams and buffers,
/// copying, launching and synchronizing in a loop; every result is checked, and the
/// primary context is released once per retain.
fn threads_share_one_context() {
    const THREADS: u32 = 16;
    // Miri runs the same code, far slower: fewer rounds.
    let rounds: u32 = if cfg!(miri) { 2 } else { 300 };
    take_log();
    let ctx = primary();
    let f = scale_function(&ctx);
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let (ctx, f) = (ctx.clone(), f.clone());
            std::thread::spawn(move || {
                for round in 0..rounds {
                    let stream = Stream::new(&ctx, StreamFlags::NON_BLOCKING).unwrap();
                    let src: Vec<u32> = (0..64).map(|k| t * 1_000_000 + round * 100 + k).collect();
                    let a = DeviceBuffer::from_slice(&ctx, &src).unwrap();
                    let mut b = DeviceBuffer::<u32>::new(&ctx, 64).unwrap();
                    b.copy_from_device_async(&a, &stream).unwrap();
                    stream.synchronize().unwrap();
                    let mut back = vec![0u32; 64];
                    b.copy_to_host(&mut back).unwrap();
                    assert_eq!(back, src, "thread {t} round {round}");

                    let cfg = LaunchConfig::new(1u32, 64u32).stream(&stream);
                    // SAFETY: `scale(u32*, u32)` with `b`'s 64 values, synchronized below.
                    unsafe { launch::launch(&f, &cfg, &(b.as_arg(), 64u32)) }.unwrap();
                    stream.synchronize().unwrap();
                    b.copy_to_host(&mut back).unwrap();
                    let doubled: Vec<u32> = src.iter().map(|v| v * 2).collect();
                    assert_eq!(back, doubled, "thread {t} round {round}");

                    b.memset_d32_async(t, &stream).unwrap();
                    stream.synchronize().unwrap();
                    b.copy_to_host(&mut back).unwrap();
                    assert!(back.iter().all(|&v| v == t), "thread {t} round {round}");
                }
                assert_eq!(current(), 0, "nothing left current on thread {t}");
                assert_eq!(pushed_depth(), 0);
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    drop(f);
    drop(ctx);
    let log = take_log();
    assert!(
        context_faults(&log).is_empty(),
        "{:#?}",
        context_faults(&log)
    );
    let retains = count(&log, "cuDevicePrimaryCtxRetain");
    assert_eq!(retains, 1, "one retain, shared by every clone");
    assert_eq!(count(&log, "cuDevicePrimaryCtxRelease"), retains);
    assert!(
        last_position(&log, "cuModuleUnload") < position(&log, "cuDevicePrimaryCtxRelease"),
        "released after the last handle"
    );
    let made = (THREADS * rounds) as usize;
    assert_eq!(count(&log, "cuStreamCreate"), made);
    assert_eq!(count(&log, "cuStreamDestroy"), made);
    assert_eq!(count(&log, "cuMemAlloc "), 2 * made);
    assert_eq!(count(&log, "cuMemFree "), 2 * made);
    assert_eq!(RETAINED.load(Ordering::SeqCst), 0);
}

/// Views: slices and splits name the right bytes (the mock's device memory has
/// contents), bounds and lengths are checked, views of raw parts read what is there, and
/// stream-ordered memory takes asynchronous work through a view on its own stream only.
fn views_slice_split_and_copy() {
    // Runs inside the suite, which holds `serial()`.
    let ctx = Context::primary(Device::get(0).unwrap()).unwrap();
    let stream = Stream::new(&ctx, StreamFlags::NON_BLOCKING).unwrap();
    let other_stream = Stream::new(&ctx, StreamFlags::NON_BLOCKING).unwrap();
    let mut buf = DeviceBuffer::<u32>::zeroed(&ctx, 16).unwrap();
    buf.slice_mut(4..8)
        .unwrap()
        .copy_from_host(&[1, 2, 3, 4])
        .unwrap();
    {
        let (mut lo, mut hi) = buf.split_at_mut(8).unwrap();
        assert_eq!((lo.len(), hi.len()), (8, 8));
        assert_eq!(lo.as_raw() + 32, hi.as_raw());
        lo.reborrow()
            .into_slice(..2)
            .unwrap()
            .memset_d32(7)
            .unwrap();
        hi.memset_d8_async(0xff, &stream).unwrap();
    }
    stream.synchronize().unwrap();
    let mut host = [0u32; 16];
    buf.copy_to_host(&mut host).unwrap();
    let mut want = [u32::MAX; 16];
    want[..8].copy_from_slice(&[7, 7, 0, 0, 1, 2, 3, 4]);
    assert_eq!(host, want);

    let mut four = DeviceBuffer::<u32>::zeroed(&ctx, 4).unwrap();
    four.view_mut()
        .copy_from_async(buf.slice(4..8).unwrap(), &stream)
        .unwrap();
    stream.synchronize().unwrap();
    let mut got = [0u32; 4];
    four.view().copy_to_host(&mut got).unwrap();
    assert_eq!(got, [1, 2, 3, 4]);

    // Bounds and lengths, refused before the driver.
    take_log();
    assert!(matches!(buf.slice(10..20), Err(Error::InvalidArgument(_))));
    #[allow(clippy::reversed_empty_ranges)]
    let reversed = buf.slice(5..3);
    assert!(matches!(reversed, Err(Error::InvalidArgument(_))));
    assert!(matches!(
        buf.split_at_mut(17),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        buf.slice(..).unwrap().copy_to_host(&mut [0u32; 3]),
        Err(Error::LengthMismatch {
            expected: 16,
            found: 3
        })
    ));
    assert!(take_log().is_empty());

    // Raw parts: memory made elsewhere, read through a view.
    // SAFETY: four values inside `buf`, which outlives the view and is not written
    // meanwhile.
    let raw = unsafe { DeviceView::<u32>::from_raw_parts(buf.as_raw() + 16, 4, &ctx) };
    assert_eq!(raw.release(), Release::Context);
    raw.copy_to_host(&mut got).unwrap();
    assert_eq!(got, [1, 2, 3, 4]);

    // Stream-ordered memory: asynchronous work through a view only on its stream.
    let mut pooled = AsyncDeviceBuffer::<u32>::new(&stream, 8).unwrap();
    let refused = pooled.view_mut().memset_d8_async(0, &other_stream);
    assert!(matches!(refused, Err(Error::InvalidArgument(m)) if m.contains("stream-ordered")));
    pooled.view_mut().memset_d8_async(0, &stream).unwrap();
    drop(pooled);
    stream.synchronize().unwrap();
}

/// The deleter calls of the hand-made tensors below.
static DELETED: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn count_delete(_: *mut DLManagedTensorVersioned) {
    DELETED.fetch_add(1, Ordering::SeqCst);
}

/// DLPack: a tensor that fails a check is refused and still deleted (it was handed
/// over); a good one gives views of its values; an exported buffer comes back through
/// import with its values, and its deleter frees it.
fn dlpack_import_and_export() {
    // Runs inside the suite, which holds `serial()`.
    let ctx = Context::primary(Device::get(0).unwrap()).unwrap();
    let stream = Stream::new(&ctx, StreamFlags::NON_BLOCKING).unwrap();
    let buf = DeviceBuffer::from_slice(&ctx, &[10u32, 11, 12, 13, 14, 15]).unwrap();
    let mut shape = [2i64, 3];
    let mut strides = [3i64, 1];
    let mut column = [1i64, 2];
    // One raw pointer each, taken once (a second `as_mut_ptr` would invalidate the first
    // under Stacked Borrows).
    let (shape, strides, column) = (
        shape.as_mut_ptr(),
        strides.as_mut_ptr(),
        column.as_mut_ptr(),
    );
    let tensor = |data: u64,
                  device: i32,
                  dtype: DLDataType,
                  strides: *mut i64,
                  flags: u64,
                  shape: *mut i64| {
        DLManagedTensorVersioned {
            version: DLPACK_VERSION,
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(count_delete),
            flags,
            dl_tensor: DLTensor {
                data: std::ptr::without_provenance_mut(data as usize),
                device: DLDevice {
                    device_type: DLDeviceType::CUDA,
                    device_id: device,
                },
                ndim: 2,
                dtype,
                shape,
                strides,
                byte_offset: 0,
            },
        }
    };
    let u32_type = DLDataType {
        code: 1,
        bits: 32,
        lanes: 1,
    };
    let before = DELETED.load(Ordering::SeqCst);
    let bad = [
        tensor(buf.as_raw(), 1, u32_type, strides, 0, shape),
        tensor(buf.as_raw(), 0, u32_type, column, 0, shape),
        tensor(
            buf.as_raw(),
            0,
            DLDataType {
                lanes: 4,
                ..u32_type
            },
            std::ptr::null_mut(),
            0,
            shape,
        ),
    ];
    for mut t in bad {
        // SAFETY: a well-formed tensor over `buf`, which outlives the call.
        let r = unsafe { DlpackTensor::from_versioned(&mut t, &ctx, &stream) };
        assert!(matches!(r, Err(Error::InvalidArgument(_))), "{r:?}");
    }
    assert_eq!(
        DELETED.load(Ordering::SeqCst) - before,
        3,
        "refused tensors are deleted"
    );

    let mut ro = tensor(
        buf.as_raw(),
        0,
        u32_type,
        strides,
        DLPACK_FLAG_BITMASK_READ_ONLY,
        shape,
    );
    // SAFETY: as above.
    let mut t = unsafe { DlpackTensor::from_versioned(&mut ro, &ctx, &stream) }.unwrap();
    assert_eq!(
        (t.shape(), t.len(), t.is_read_only()),
        (&[2i64, 3][..], 6, true)
    );
    assert!(matches!(t.view::<f32>(), Err(Error::InvalidArgument(_))));
    assert!(matches!(
        t.view_mut::<u32>(),
        Err(Error::InvalidArgument(_))
    ));
    let mut got = [0u32; 6];
    t.view::<u32>().unwrap().copy_to_host(&mut got).unwrap();
    assert_eq!(got, [10, 11, 12, 13, 14, 15]);
    assert_eq!(
        t.view::<u32>().unwrap().release(),
        Release::Stream(stream.as_raw())
    );
    drop(t);
    assert_eq!(DELETED.load(Ordering::SeqCst) - before, 4);

    // Export, then import the same tensor: the values, and the free at the deleter.
    let exported = DeviceBuffer::from_slice(&ctx, &[1.5f32, 2.5, 3.5]).unwrap();
    let addr = exported.as_raw();
    let raw = dlpack::export(exported, &stream, None).unwrap();
    // SAFETY: just exported for this consumer, whose work goes on `stream`.
    let mut back = unsafe { DlpackTensor::from_versioned(raw, &ctx, &stream) }.unwrap();
    assert_eq!(back.shape(), &[3]);
    let mut view = back.view_mut::<f32>().unwrap();
    assert_eq!(view.as_raw(), addr);
    view.memset_d32_async(0, &stream).unwrap();
    stream.synchronize().unwrap();
    let mut host = [9f32; 3];
    back.view::<f32>().unwrap().copy_to_host(&mut host).unwrap();
    assert_eq!(host, [0.0; 3]);
    take_log();
    drop(back);
    let log = take_log();
    assert!(
        log.iter()
            .any(|l| l.starts_with(&format!("cuMemFree {addr:#x}"))),
        "the deleter frees the exported buffer: {log:?}"
    );
}

/// A waker for a minimal executor written with `core` only (what an embedded executor
/// does): it counts its wakes; the executor polls again after one.
fn counting_waker(wakes: &'static AtomicUsize) -> core::task::Waker {
    use core::task::{RawWaker, RawWakerVTable};
    fn clone(p: *const ()) -> RawWaker {
        RawWaker::new(p, &VTABLE)
    }
    fn wake(p: *const ()) {
        // SAFETY: `p` is the `&'static AtomicUsize` the waker was made from.
        unsafe { &*p.cast::<AtomicUsize>() }.fetch_add(1, Ordering::SeqCst);
    }
    fn drop_waker(_: *const ()) {}
    static VTABLE: RawWakerVTable = RawWakerVTable::new(clone, wake, wake, drop_waker);
    // SAFETY: the vtable's functions treat the pointer as the `'static` counter, which is
    // `Sync`; clone and drop need no ownership.
    unsafe {
        core::task::Waker::from_raw(RawWaker::new(core::ptr::from_ref(wakes).cast(), &VTABLE))
    }
}

/// `Stream::completed`: pending until the driver runs its host function (the mock runs
/// them when the stream synchronizes), which wakes the task once; then ready. A minimal
/// executor (poll, wait for a wake, poll) drives it.
fn completions_are_woken_by_the_driver() {
    use core::future::Future;
    use core::task::{Context as TaskContext, Poll};
    static WAKES: AtomicUsize = AtomicUsize::new(0);
    let ctx = Context::primary(Device::get(0).unwrap()).unwrap();
    let stream = Stream::new(&ctx, StreamFlags::NON_BLOCKING).unwrap();
    WAKES.store(0, Ordering::SeqCst);
    let waker = counting_waker(&WAKES);
    let mut cx = TaskContext::from_waker(&waker);
    let mut done = stream.completed().unwrap();
    assert!(matches!(
        core::pin::Pin::new(&mut done).poll(&mut cx),
        Poll::Pending
    ));
    assert!(matches!(
        core::pin::Pin::new(&mut done).poll(&mut cx),
        Poll::Pending
    ));
    assert_eq!(
        WAKES.load(Ordering::SeqCst),
        0,
        "no wake before the work completes"
    );
    stream.synchronize().unwrap(); // the mock runs the host function here
    assert_eq!(
        WAKES.load(Ordering::SeqCst),
        1,
        "woken once, by the host function"
    );
    assert!(done.is_complete());
    assert!(matches!(
        core::pin::Pin::new(&mut done).poll(&mut cx),
        Poll::Ready(Ok(()))
    ));
    // A completion made after the work completed is ready once its own host function
    // ran; one never polled is never woken, and its host function is harmless.
    let idle = stream.completed().unwrap();
    stream.synchronize().unwrap();
    assert!(idle.is_complete());
    assert_eq!(WAKES.load(Ordering::SeqCst), 1);
    // A refused `cuLaunchHostFunc` is the error.
    FAIL_HOST_FN.store(true, Ordering::SeqCst);
    let e = stream.completed().unwrap_err();
    FAIL_HOST_FN.store(false, Ordering::SeqCst);
    assert!(e.to_string().starts_with("cuLaunchHostFunc failed"), "{e}");
}

/// Dropping or forgetting a completion before its host function runs leaves the slot
/// the host function writes alive (the driver holds a count): under Miri, a write to a
/// freed slot would be reported here.
fn forgotten_completions_leave_the_slot_alive() {
    let ctx = Context::primary(Device::get(0).unwrap()).unwrap();
    let stream = Stream::new(&ctx, StreamFlags::NON_BLOCKING).unwrap();
    let dropped = stream.completed().unwrap();
    drop(dropped);
    let forgotten = stream.completed().unwrap();
    // Leaked values stay reachable from a static (Miri's leak check).
    static KEEP: Mutex<Vec<cudadrv::driver::future::Completion>> = Mutex::new(Vec::new());
    let mut keep = lock(&KEEP);
    keep.push(forgotten);
    if let Some(f) = keep.pop() {
        core::mem::forget(f);
    }
    drop(keep);
    stream.synchronize().unwrap(); // both host functions write their slots now
}

/// `Stream::completed_in` with a `'static` slot (no allocation): one pending completion
/// at a time; the slot is free again once its host function has run.
fn static_slots_serve_one_completion_at_a_time() {
    use cudadrv::driver::future::CompletionSlot;
    static SLOT: CompletionSlot = CompletionSlot::new();
    let ctx = Context::primary(Device::get(0).unwrap()).unwrap();
    let stream = Stream::new(&ctx, StreamFlags::NON_BLOCKING).unwrap();
    let first = stream.completed_in(&SLOT).unwrap();
    assert!(SLOT.is_armed());
    let e = stream.completed_in(&SLOT).unwrap_err();
    assert!(matches!(e, cudadrv::Error::InvalidArgument(_)), "{e}");
    core::mem::forget(first); // forgetting it cancels nothing: the slot is 'static
    stream.synchronize().unwrap();
    assert!(!SLOT.is_armed());
    let second = stream.completed_in(&SLOT).unwrap();
    assert!(!second.is_complete());
    stream.synchronize().unwrap();
    assert!(second.is_complete());
    // A refused host function gives the slot back.
    FAIL_HOST_FN.store(true, Ordering::SeqCst);
    assert!(stream.completed_in(&SLOT).is_err());
    FAIL_HOST_FN.store(false, Ordering::SeqCst);
    assert!(!SLOT.is_armed());
}
