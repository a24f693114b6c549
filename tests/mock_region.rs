//! Replay regions (`graph::Region`) against a mock driver, on the CPU and under Miri:
//! the first execution is captured and instantiated, a replay with changed arguments
//! sets exactly the changed nodes and launches the cached executable, a replay with
//! nothing changed only launches, a new structure is captured again, the least recently
//! launched executable is evicted beyond the capacity, an execution the driver
//! refuses at capture leaves the region usable with its cache as it was, a per-node
//! setter the driver refuses drops that executable and captures the execution anew
//! (with its values), and device-to-host copies into a bound pinned buffer are memcpy
//! nodes whose source a replay sets, read back after a context synchronization.
//!
//! The mock keeps graphs as lists of nodes (a kernel's argument values, a memset's
//! target and value) and logs, at each `cuGraphLaunch`, the values each node of the
//! executable holds then: what the GPU would run. One `#[test]` drives the checks in
//! order (the driver table is process-wide).

#![cfg(not(feature = "linked"))]

mod mock_common;
use mock_common::*;

use std::cell::Cell;
use std::collections::BTreeMap;
use std::ffi::{CStr, c_char, c_uint, c_void};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use cudadrv::graph::Region;
use cudadrv::launch::{LaunchAttribute, LaunchConfig};
use cudadrv::{Context, Device, DeviceBuffer, Error, Module, PinnedHostBuffer, Stream};
use cudadrv_sys::{
    CUDA_KERNEL_NODE_PARAMS, CUDA_MEMCPY3D, CUDA_MEMSET_NODE_PARAMS, CUcontext, CUdeviceptr,
    CUfunction, CUgraph, CUgraphEdgeData, CUgraphExec, CUgraphNode, CUlaunchConfig, CUmemorytype,
    CUmodule, CUresult, CUstream, CUstreamCaptureMode, CUstreamCaptureStatus,
};

/// The mock's one kernel: `axpb(ptr: u64, n: u32, a: f32)`.
const AXPB: usize = 0xF1;

/// What a node does, as the mock keeps it.
#[derive(Clone, Debug, PartialEq)]
enum Node {
    Kernel { grid: u32, ptr: u64, n: u32, a: f32 },
    Memset { dst: u64, value: u32, count: usize },
    CopyDtoH { dst: usize, src: u64, bytes: usize },
}

impl Node {
    fn describe(&self) -> String {
        match self {
            Node::Kernel { grid, ptr, n, a } => format!("axpb<{grid}>({ptr:#x}, {n}, {a})"),
            Node::Memset { dst, value, count } => format!("memset32({dst:#x}, {value}, {count})"),
            Node::CopyDtoH { dst, src, bytes } => format!("dtoh({dst:#x} <- {src:#x}, {bytes})"),
        }
    }
}

static NODES: Mutex<BTreeMap<usize, Node>> = Mutex::new(BTreeMap::new());
/// Graphs: their nodes in order, and whether their capture was invalidated.
static GRAPHS: Mutex<BTreeMap<usize, (Vec<usize>, bool)>> = Mutex::new(BTreeMap::new());
/// Executable graphs: (source node, the node's values in this executable).
static EXECS: Mutex<BTreeMap<usize, Vec<(usize, Node)>>> = Mutex::new(BTreeMap::new());
static CAPTURES: Mutex<BTreeMap<usize, usize>> = Mutex::new(BTreeMap::new());
/// `cuGraphExecKernelNodeSetParams` refuses while set (as the driver does for a change
/// it cannot apply in place).
static REFUSE_KERNEL_SET: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// The capture dependency `cuStreamGetCaptureInfo` hands out (read at once).
    static DEP: Cell<CUgraphNode> = const { Cell::new(std::ptr::null_mut()) };
}

fn handle<T>() -> *mut T {
    next()
}

/// Adds `node` to the capture of `s`, if it is capturing; whether it was.
fn captured(s: CUstream, node: Node) -> bool {
    let Some(&g) = lock(&CAPTURES).get(&s.addr()) else {
        return false;
    };
    let h: *mut c_void = handle();
    lock(&NODES).insert(h.addr(), node);
    if let Some(graph) = lock(&GRAPHS).get_mut(&g) {
        graph.0.push(h.addr());
    }
    true
}

/// The kernel node `f` with `params` (the pointers `kernelParams` holds) would be.
fn kernel_node(f: CUfunction, grid: u32, params: *mut *mut c_void) -> Option<Node> {
    if f.addr() != AXPB || params.is_null() {
        return None;
    }
    // SAFETY: `kernelParams` of `axpb(u64, u32, f32)`: three pointers to values.
    unsafe {
        Some(Node::Kernel {
            grid,
            ptr: (*params).cast::<u64>().read_unaligned(),
            n: (*params.add(1)).cast::<u32>().read_unaligned(),
            a: (*params.add(2)).cast::<f32>().read_unaligned(),
        })
    }
}

unsafe extern "C" fn cu_stream_sync(_: CUstream) -> CUresult {
    OK
}
unsafe extern "C" fn cu_stream_is_capturing(
    s: CUstream,
    st: *mut CUstreamCaptureStatus,
) -> CUresult {
    let capturing = lock(&CAPTURES).contains_key(&s.addr());
    unsafe {
        *st = if capturing {
            CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_ACTIVE
        } else {
            CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE
        }
    };
    OK
}
unsafe extern "C" fn cu_stream_begin_capture(s: CUstream, _: CUstreamCaptureMode) -> CUresult {
    log("cuStreamBeginCapture".into());
    let g: *mut c_void = handle();
    lock(&GRAPHS).insert(g.addr(), (Vec::new(), false));
    lock(&CAPTURES).insert(s.addr(), g.addr());
    OK
}
unsafe extern "C" fn cu_stream_end_capture(s: CUstream, graph: *mut CUgraph) -> CUresult {
    let Some(g) = lock(&CAPTURES).remove(&s.addr()) else {
        return CUresult::CUDA_ERROR_ILLEGAL_STATE;
    };
    let invalidated = lock(&GRAPHS).get(&g).is_some_and(|g| g.1);
    log(format!(
        "cuStreamEndCapture{}",
        if invalidated { " (invalidated)" } else { "" }
    ));
    if invalidated {
        lock(&GRAPHS).remove(&g);
        return CUresult::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    }
    unsafe { *graph = std::ptr::without_provenance_mut(g) };
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
    let g = lock(&CAPTURES).get(&s.addr()).copied();
    let last = g.and_then(|g| lock(&GRAPHS).get(&g).and_then(|g| g.0.last().copied()));
    unsafe {
        if !status.is_null() {
            *status = if g.is_some() {
                CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_ACTIVE
            } else {
                CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE
            };
        }
        if !id.is_null() {
            *id = g.unwrap_or(0) as u64;
        }
        if !graph.is_null() {
            *graph = std::ptr::without_provenance_mut(g.unwrap_or(0));
        }
        if !edges.is_null() {
            *edges = std::ptr::null();
        }
        if !deps.is_null() {
            *deps = match last {
                Some(node) => {
                    DEP.with(|d| d.set(std::ptr::without_provenance_mut(node)));
                    DEP.with(|d| d.as_ptr().cast_const())
                }
                None => std::ptr::null(),
            };
        }
        if !n.is_null() {
            *n = usize::from(last.is_some());
        }
    }
    OK
}
unsafe extern "C" fn cu_launch_kernel_ex(
    cfg: *const CUlaunchConfig,
    f: CUfunction,
    params: *mut *mut c_void,
    _extra: *mut *mut c_void,
) -> CUresult {
    let cfg = unsafe { &*cfg };
    let s = cfg.hStream;
    if cfg.gridDimX == 0 {
        // The driver refuses it, and a capture it was made in is invalidated.
        if let Some(&g) = lock(&CAPTURES).get(&s.addr())
            && let Some(graph) = lock(&GRAPHS).get_mut(&g)
        {
            graph.1 = true;
        }
        return CUresult::CUDA_ERROR_INVALID_VALUE;
    }
    let Some(node) = kernel_node(f, cfg.gridDimX, params) else {
        return CUresult::CUDA_ERROR_INVALID_HANDLE;
    };
    if !captured(s, node.clone()) {
        log(format!("run {}", node.describe()));
    }
    OK
}
unsafe extern "C" fn cu_memset_d32_async(
    p: CUdeviceptr,
    v: c_uint,
    n: usize,
    s: CUstream,
) -> CUresult {
    let node = Node::Memset {
        dst: p,
        value: v,
        count: n,
    };
    if !captured(s, node.clone()) {
        log(format!("run {}", node.describe()));
    }
    OK
}
unsafe extern "C" fn cu_graph_instantiate(
    e: *mut CUgraphExec,
    g: CUgraph,
    _flags: u64,
) -> CUresult {
    let Some((nodes, _)) = lock(&GRAPHS).get(&g.addr()).cloned() else {
        return CUresult::CUDA_ERROR_INVALID_VALUE;
    };
    let table = lock(&NODES);
    let copy = nodes.iter().map(|n| (*n, table[n].clone())).collect();
    let h: *mut c_void = handle();
    lock(&EXECS).insert(h.addr(), copy);
    log(format!("cuGraphInstantiate ({} nodes)", nodes.len()));
    unsafe { *e = h.cast() };
    OK
}
unsafe extern "C" fn cu_graph_destroy(g: CUgraph) -> CUresult {
    match lock(&GRAPHS).remove(&g.addr()) {
        Some(_) => OK,
        None => CUresult::CUDA_ERROR_INVALID_VALUE,
    }
}
unsafe extern "C" fn cu_graph_exec_destroy(e: CUgraphExec) -> CUresult {
    match lock(&EXECS).remove(&e.addr()) {
        Some(nodes) => {
            log(format!("cuGraphExecDestroy ({} nodes)", nodes.len()));
            OK
        }
        None => CUresult::CUDA_ERROR_INVALID_VALUE,
    }
}
unsafe extern "C" fn cu_graph_launch(e: CUgraphExec, _s: CUstream) -> CUresult {
    let execs = lock(&EXECS);
    let Some(nodes) = execs.get(&e.addr()) else {
        return CUresult::CUDA_ERROR_INVALID_VALUE;
    };
    let run: Vec<String> = nodes.iter().map(|(_, n)| n.describe()).collect();
    log(format!("cuGraphLaunch [{}]", run.join(", ")));
    OK
}
/// Sets the values of `node` (a node of the source graph) in executable `e`.
fn set_node(e: CUgraphExec, node: CUgraphNode, value: Node) -> CUresult {
    let mut execs = lock(&EXECS);
    let Some(nodes) = execs.get_mut(&e.addr()) else {
        return CUresult::CUDA_ERROR_INVALID_VALUE;
    };
    let count = nodes.len();
    let Some(slot) = nodes.iter_mut().find(|(n, _)| *n == node.addr()) else {
        return CUresult::CUDA_ERROR_INVALID_VALUE;
    };
    if std::mem::discriminant(&slot.1) != std::mem::discriminant(&value) {
        return CUresult::CUDA_ERROR_INVALID_VALUE;
    }
    log(format!(
        "set ({count} nodes) {} -> {}",
        slot.1.describe(),
        value.describe()
    ));
    slot.1 = value;
    OK
}
unsafe extern "C" fn cu_exec_kernel_set(
    e: CUgraphExec,
    node: CUgraphNode,
    p: *const CUDA_KERNEL_NODE_PARAMS,
) -> CUresult {
    let p = unsafe { &*p };
    if REFUSE_KERNEL_SET.load(Ordering::Relaxed) {
        log("cuGraphExecKernelNodeSetParams refused".into());
        return CUresult::CUDA_ERROR_NOT_SUPPORTED;
    }
    match kernel_node(p.func, p.gridDimX, p.kernelParams) {
        Some(value) => set_node(e, node, value),
        None => CUresult::CUDA_ERROR_INVALID_VALUE,
    }
}
unsafe extern "C" fn cu_exec_memset_set(
    e: CUgraphExec,
    node: CUgraphNode,
    p: *const CUDA_MEMSET_NODE_PARAMS,
    _ctx: CUcontext,
) -> CUresult {
    let p = unsafe { &*p };
    if p.elementSize != 4 {
        return CUresult::CUDA_ERROR_INVALID_VALUE;
    }
    let value = Node::Memset {
        dst: p.dst,
        value: p.value,
        count: p.width,
    };
    set_node(e, node, value)
}
unsafe extern "C" fn cu_memcpy_dtoh_async(
    dst: *mut c_void,
    src: CUdeviceptr,
    bytes: usize,
    s: CUstream,
) -> CUresult {
    let node = Node::CopyDtoH {
        dst: dst.addr(),
        src,
        bytes,
    };
    if !captured(s, node.clone()) {
        log(format!("run {}", node.describe()));
    }
    OK
}
unsafe extern "C" fn cu_exec_memcpy_set(
    e: CUgraphExec,
    node: CUgraphNode,
    p: *const CUDA_MEMCPY3D,
    _ctx: CUcontext,
) -> CUresult {
    let p = unsafe { &*p };
    if p.dstMemoryType != CUmemorytype::CU_MEMORYTYPE_HOST
        || p.srcMemoryType != CUmemorytype::CU_MEMORYTYPE_DEVICE
        || p.Height != 1
        || p.Depth != 1
    {
        return CUresult::CUDA_ERROR_INVALID_VALUE;
    }
    let value = Node::CopyDtoH {
        dst: p.dstHost.addr(),
        src: p.srcDevice,
        bytes: p.WidthInBytes,
    };
    set_node(e, node, value)
}
/// Pinned host allocations: address -> layout.
static HOST: Mutex<BTreeMap<usize, std::alloc::Layout>> = Mutex::new(BTreeMap::new());
unsafe extern "C" fn cu_mem_alloc_host(p: *mut *mut c_void, bytes: usize) -> CUresult {
    let Ok(layout) = std::alloc::Layout::from_size_align(bytes.max(1), 64) else {
        return CUresult::CUDA_ERROR_INVALID_VALUE;
    };
    // SAFETY: a non-zero size.
    let m = unsafe { std::alloc::alloc_zeroed(layout) };
    lock(&HOST).insert(m.addr(), layout);
    unsafe { *p = m.cast() };
    OK
}
unsafe extern "C" fn cu_mem_free_host(p: *mut c_void) -> CUresult {
    match lock(&HOST).remove(&p.addr()) {
        // SAFETY: allocated above with this layout.
        Some(layout) => unsafe { std::alloc::dealloc(p.cast(), layout) },
        None => return CUresult::CUDA_ERROR_INVALID_VALUE,
    }
    OK
}
unsafe extern "C" fn cu_mem_alloc(p: *mut CUdeviceptr, bytes: usize) -> CUresult {
    unsafe { *p = next::<c_void>().addr() as u64 };
    let _ = bytes;
    OK
}
unsafe extern "C" fn cu_mem_free(_: CUdeviceptr) -> CUresult {
    OK
}
unsafe extern "C" fn cu_module_get_function(
    f: *mut CUfunction,
    _m: CUmodule,
    name: *const c_char,
) -> CUresult {
    if unsafe { CStr::from_ptr(name) }.to_bytes() != b"axpb" {
        return CUresult::CUDA_ERROR_NOT_FOUND;
    }
    unsafe { *f = std::ptr::without_provenance_mut(AXPB) };
    OK
}

cuda_workspace::mock_entries! {
    /// The mocked entries by name (null for the others: the crate reports a missing
    /// symbol).
    fn mock_entry {
        "cuStreamSynchronize" => cu_stream_sync as unsafe extern "C" fn(_) -> _,
        "cuStreamIsCapturing" => cu_stream_is_capturing as unsafe extern "C" fn(_, _) -> _,
        "cuStreamBeginCapture" => cu_stream_begin_capture as unsafe extern "C" fn(_, _) -> _,
        "cuStreamEndCapture" => cu_stream_end_capture as unsafe extern "C" fn(_, _) -> _,
        "cuStreamGetCaptureInfo" =>
            cu_stream_get_capture_info as unsafe extern "C" fn(_, _, _, _, _, _, _) -> _,
        "cuLaunchKernelEx" => cu_launch_kernel_ex as unsafe extern "C" fn(_, _, _, _) -> _,
        "cuMemsetD32Async" => cu_memset_d32_async as unsafe extern "C" fn(_, _, _, _) -> _,
        "cuGraphInstantiate" => cu_graph_instantiate as unsafe extern "C" fn(_, _, _) -> _,
        "cuGraphDestroy" => cu_graph_destroy as unsafe extern "C" fn(_) -> _,
        "cuGraphExecDestroy" => cu_graph_exec_destroy as unsafe extern "C" fn(_) -> _,
        "cuGraphLaunch" => cu_graph_launch as unsafe extern "C" fn(_, _) -> _,
        "cuGraphExecKernelNodeSetParams" => cu_exec_kernel_set as unsafe extern "C" fn(_, _, _) -> _,
        "cuGraphExecMemsetNodeSetParams" =>
            cu_exec_memset_set as unsafe extern "C" fn(_, _, _, _) -> _,
        "cuMemcpyDtoHAsync" => cu_memcpy_dtoh_async as unsafe extern "C" fn(_, _, _, _) -> _,
        "cuGraphExecMemcpyNodeSetParams" =>
            cu_exec_memcpy_set as unsafe extern "C" fn(_, _, _, _) -> _,
        "cuMemAllocHost" => cu_mem_alloc_host as unsafe extern "C" fn(_, _) -> _,
        "cuMemFreeHost" => cu_mem_free_host as unsafe extern "C" fn(_) -> _,
        "cuMemAlloc" => cu_mem_alloc as unsafe extern "C" fn(_, _) -> _,
        "cuMemFree" => cu_mem_free as unsafe extern "C" fn(_) -> _,
        "cuModuleGetFunction" => cu_module_get_function as unsafe extern "C" fn(_, _, _) -> _,
    }
}

/// One execution: `memset32(a, fill)`, then `axpb` on `a` with each of `coeffs`.
fn execute<'a>(
    region: &mut Region<'a>,
    stream: &mut Stream,
    f: &'a cudadrv::Function,
    a: &'a DeviceBuffer<u32>,
    fill: u32,
    coeffs: &[f32],
    grid: u32,
) -> cudadrv::Result<()> {
    region.run(stream, |r| {
        r.memset_d32(a, fill)?;
        for &k in coeffs {
            let cfg = LaunchConfig::new(grid, 128);
            // SAFETY: the mock runs nothing; `a` is a live buffer of 1024 words.
            unsafe { r.launch(f, &cfg, &(a.as_raw(), 1024u32, k))? };
        }
        Ok(())
    })
}

#[test]
fn regions_against_a_mock_driver() {
    install(mock_entry);
    let ctx = Context::primary(Device::get(0).unwrap()).unwrap();
    let module = Module::from_ptx(&ctx, ".version 8.0\n.target sm_90\n").unwrap();
    let f = module.function("axpb").unwrap();
    let a = DeviceBuffer::<u32>::new(&ctx, 1024).unwrap();
    let pa = a.as_raw();
    let mut stream = Stream::non_blocking(&ctx).unwrap();
    let mut region = Region::with_capacity(&ctx, 2).unwrap();
    let k = |a: f32| format!("axpb<4>({pa:#x}, 1024, {a})");
    let m = |v: u32| format!("memset32({pa:#x}, {v}, 1024)");
    take_log();

    // The first execution: captured, instantiated, launched.
    execute(&mut region, &mut stream, &f, &a, 7, &[1.0, 2.0], 4).unwrap();
    assert_eq!(
        take_log(),
        [
            "cuStreamBeginCapture".to_string(),
            "cuStreamEndCapture".to_string(),
            "cuGraphInstantiate (3 nodes)".to_string(),
            format!("cuGraphLaunch [{}, {}, {}]", m(7), k(1.0), k(2.0)),
        ]
    );

    // One argument changed: exactly that node is set, then the cached graph launched.
    execute(&mut region, &mut stream, &f, &a, 7, &[1.0, 3.0], 4).unwrap();
    assert_eq!(
        take_log(),
        [
            format!("set (3 nodes) {} -> {}", k(2.0), k(3.0)),
            format!("cuGraphLaunch [{}, {}, {}]", m(7), k(1.0), k(3.0)),
        ]
    );
    // The memset's value changed: its node is set.
    execute(&mut region, &mut stream, &f, &a, 9, &[1.0, 3.0], 4).unwrap();
    assert_eq!(
        take_log(),
        [
            format!("set (3 nodes) {} -> {}", m(7), m(9)),
            format!("cuGraphLaunch [{}, {}, {}]", m(9), k(1.0), k(3.0)),
        ]
    );
    // Nothing changed: a launch and nothing else.
    execute(&mut region, &mut stream, &f, &a, 9, &[1.0, 3.0], 4).unwrap();
    assert_eq!(
        take_log(),
        [format!("cuGraphLaunch [{}, {}, {}]", m(9), k(1.0), k(3.0))]
    );

    // A new structure (three kernels): captured; the cache holds both.
    execute(&mut region, &mut stream, &f, &a, 9, &[1.0, 3.0, 5.0], 4).unwrap();
    let log = take_log();
    assert_eq!(log[0], "cuStreamBeginCapture");
    assert_eq!(log[2], "cuGraphInstantiate (4 nodes)");
    assert_eq!(region.cached(), 2);
    // Back to the two-kernel structure. The recording follows the graph launched last
    // (three kernels) and sets its changed node as it goes; at the end it has one
    // operation fewer, so the two-kernel graph is found in the cache, its changed node
    // set, and it is launched.
    execute(&mut region, &mut stream, &f, &a, 9, &[4.0, 3.0], 4).unwrap();
    assert_eq!(
        take_log(),
        [
            format!("set (4 nodes) {} -> {}", k(1.0), k(4.0)),
            format!("set (3 nodes) {} -> {}", k(1.0), k(4.0)),
            format!("cuGraphLaunch [{}, {}, {}]", m(9), k(4.0), k(3.0)),
        ]
    );

    // A third structure beyond the capacity of 2: the least recently launched (the
    // three-kernel graph) is evicted, after waiting for the context's work.
    execute(&mut region, &mut stream, &f, &a, 9, &[1.0], 4).unwrap();
    let log = take_log();
    // Followed the two-kernel graph (its first kernel set speculatively), diverged,
    // captured, and made room by evicting the three-kernel graph.
    assert_eq!(log[0], format!("set (3 nodes) {} -> {}", k(4.0), k(1.0)));
    assert_eq!(log[1], "cuStreamBeginCapture");
    let synced = log.iter().position(|l| l == "cuCtxSynchronize");
    let destroyed = log.iter().position(|l| l == "cuGraphExecDestroy (4 nodes)");
    assert!(
        synced.is_some() && destroyed.is_some() && synced < destroyed,
        "the evicted graph is destroyed after the context's work: {log:?}"
    );
    assert_eq!(
        log.last(),
        Some(&format!("cuGraphLaunch [{}, {}]", m(9), k(1.0)))
    );
    assert_eq!(region.cached(), 2);
    let stats = region.stats();
    assert_eq!(
        (
            stats.executions,
            stats.captures,
            stats.replays,
            stats.evictions
        ),
        (7, 3, 4, 1)
    );
    assert_eq!(stats.updated_nodes, 5);

    // An execution the driver refuses at capture (a grid of 0 blocks): the driver's
    // error, naming the call; nothing of it runs, and the region goes on as before.
    let e = execute(&mut region, &mut stream, &f, &a, 9, &[1.0, 2.0, 3.0], 0).unwrap_err();
    assert!(
        matches!(e, Error::Driver { code, call: "cuLaunchKernelEx", .. }
            if code == CUresult::CUDA_ERROR_INVALID_VALUE),
        "{e:?}"
    );
    let log = take_log();
    assert!(
        !log.iter().any(|l| l.starts_with("cuGraphLaunch")),
        "{log:?}"
    );
    assert!(!lock(&CAPTURES).contains_key(&stream.as_raw().addr()));
    assert_eq!(region.cached(), 2);
    execute(&mut region, &mut stream, &f, &a, 9, &[1.0], 4).unwrap();
    assert_eq!(
        take_log(),
        [format!("cuGraphLaunch [{}, {}]", m(9), k(1.0))]
    );

    // A per-node setter the driver refuses: the executable that refused is dropped (it
    // may hold a mix of old and new values) and the execution captured anew, with this
    // execution's values; the next execution sets nodes on the new graph again.
    REFUSE_KERNEL_SET.store(true, Ordering::Relaxed);
    execute(&mut region, &mut stream, &f, &a, 9, &[2.0], 4).unwrap();
    REFUSE_KERNEL_SET.store(false, Ordering::Relaxed);
    assert_eq!(
        take_log(),
        [
            "cuGraphExecKernelNodeSetParams refused".to_string(),
            // Dropped after the context's work, then this execution captured.
            "cuCtxSynchronize".to_string(),
            "cuGraphExecDestroy (2 nodes)".to_string(),
            "cuStreamBeginCapture".to_string(),
            "cuStreamEndCapture".to_string(),
            "cuGraphInstantiate (2 nodes)".to_string(),
            format!("cuGraphLaunch [{}, {}]", m(9), k(2.0)),
        ]
    );
    assert_eq!(region.cached(), 2);
    let before = region.stats();
    execute(&mut region, &mut stream, &f, &a, 9, &[5.0], 4).unwrap();
    assert_eq!(
        take_log(),
        [
            format!("set (2 nodes) {} -> {}", k(2.0), k(5.0)),
            format!("cuGraphLaunch [{}, {}]", m(9), k(5.0)),
        ]
    );
    let after = region.stats();
    assert_eq!(
        (
            after.captures - before.captures,
            after.replays - before.replays
        ),
        (0, 1)
    );
    // A refusal while matching a cached graph at the end (not the one launched last):
    // the same. Back to two kernels (cached); its setter refuses.
    execute(&mut region, &mut stream, &f, &a, 9, &[1.0, 3.0, 5.0], 4).unwrap();
    take_log();
    REFUSE_KERNEL_SET.store(true, Ordering::Relaxed);
    let r = execute(&mut region, &mut stream, &f, &a, 9, &[6.0], 4);
    REFUSE_KERNEL_SET.store(false, Ordering::Relaxed);
    r.unwrap();
    let log = take_log();
    assert!(log.contains(&"cuStreamBeginCapture".to_string()), "{log:?}");
    assert_eq!(
        log.last(),
        Some(&format!("cuGraphLaunch [{}, {}]", m(9), k(6.0)))
    );

    // Device-to-host copies into a bound pinned buffer: captured as a memcpy node, a
    // changed source sets it, `host` waits for the context before handing out the
    // slice, and a target of another region is refused.
    let b = DeviceBuffer::<u32>::new(&ctx, 1024).unwrap();
    let pb = b.as_raw();
    let host = PinnedHostBuffer::<u32>::zeroed(&ctx, 1024).unwrap();
    let haddr = host.as_ptr().addr();
    let short = PinnedHostBuffer::<u32>::zeroed(&ctx, 8).unwrap();
    let mut dtoh = Region::new(&ctx);
    let out = dtoh.bind_host(host);
    let short = dtoh.bind_host(short);
    let c = |src: u64| format!("dtoh({haddr:#x} <- {src:#x}, 4096)");
    for (src, want) in [
        (
            &a,
            vec![
                "cuStreamBeginCapture".to_string(),
                "cuStreamEndCapture".to_string(),
                "cuGraphInstantiate (2 nodes)".to_string(),
                format!("cuGraphLaunch [{}, {}]", m(3), c(pa)),
            ],
        ),
        (
            &b,
            vec![
                format!("set (2 nodes) {} -> {}", c(pa), c(pb)),
                format!("cuGraphLaunch [{}, {}]", m(3), c(pb)),
            ],
        ),
        (&b, vec![format!("cuGraphLaunch [{}, {}]", m(3), c(pb))]),
    ] {
        dtoh.run(&mut stream, |r| {
            r.memset_d32(&a, 3)?;
            r.copy_to_host(out, src)
        })
        .unwrap();
        assert_eq!(take_log(), want);
    }
    assert_eq!(dtoh.host(out).unwrap().len(), 1024);
    assert_eq!(take_log(), ["cuCtxSynchronize"]);
    let e = dtoh
        .run(&mut stream, |r| r.copy_to_host(short, &a))
        .unwrap_err();
    assert!(matches!(e, Error::LengthMismatch { .. }), "{e:?}");
    let other = Region::new(&ctx);
    assert!(matches!(other.host(out), Err(Error::InvalidArgument(_))));
    let mut other = other;
    let e = other
        .run(&mut stream, |r| r.copy_to_host(out, &a))
        .unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
    assert!(take_log().is_empty());
    // Handed back: after a synchronization, with the cached graphs dropped; the target
    // is refused from then on.
    let back = dtoh.unbind_host(out).unwrap();
    assert_eq!(back.as_ptr().addr(), haddr);
    let log = take_log();
    assert_eq!(
        log.first().map(String::as_str),
        Some("cuCtxSynchronize"),
        "{log:?}"
    );
    assert!(matches!(dtoh.host(out), Err(Error::InvalidArgument(_))));
    let e = dtoh
        .run(&mut stream, |r| r.copy_to_host(out, &b))
        .unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
    assert!(matches!(
        dtoh.unbind_host(out),
        Err(Error::InvalidArgument(_))
    ));
    drop(dtoh);
    take_log();

    // Launch attributes are part of the structure. One-bit ones (programmatic
    // serialization on or off) and others (a priority, compared value by value): the same
    // attributes again replay the cached graph, a changed value is another structure
    // (captured), and a structure seen before is found in the cache.
    let plain = LaunchConfig::new(4, 128);
    let on = plain.clone().programmatic_stream_serialization().unwrap();
    let off = plain
        .clone()
        .with(LaunchAttribute::programmatic_stream_serialization(false))
        .unwrap();
    let p1 = plain.clone().priority(1).unwrap();
    let p2 = plain.clone().priority(2).unwrap();
    let mut attrs = Region::with_capacity(&ctx, 8).unwrap();
    let mut run = |cfg: &LaunchConfig<'_>, coeff: f32| {
        attrs
            .run(&mut stream, |r| {
                r.memset_d32(&a, 1)?;
                // SAFETY: the mock runs nothing; `a` is a live buffer of 1024 words.
                unsafe { r.launch(&f, cfg, &(a.as_raw(), 1024u32, coeff)) }
            })
            .unwrap();
        let log = take_log();
        let captured = log.iter().any(|l| l == "cuStreamBeginCapture");
        let set = log.iter().any(|l| l.starts_with("set "));
        assert_eq!(
            log.last(),
            Some(&format!("cuGraphLaunch [{}, {}]", m(1), k(coeff))),
            "{log:?}"
        );
        (captured, set)
    };
    for (cfg, coeff, want) in [
        (&on, 1.0, (true, false)),
        (&on, 1.0, (false, false)),
        (&on, 2.0, (false, true)),
        (&off, 2.0, (true, false)),
        (&plain, 2.0, (true, false)),
        (&on, 2.0, (false, false)),
        (&off, 3.0, (false, true)),
        (&p1, 3.0, (true, false)),
        (&p1, 3.0, (false, false)),
        (&p2, 3.0, (true, false)),
        (&p1, 4.0, (false, true)),
    ] {
        assert_eq!(run(cfg, coeff), want, "{cfg:?} with {coeff}");
    }
    // An attribute the driver writes back is refused when recorded (one mask test on the
    // configuration), and nothing of that execution runs.
    let node = plain.clone().device_updatable_kernel_node().unwrap();
    let e = attrs
        .run(&mut stream, |r| {
            // SAFETY: the mock runs nothing; `a` is a live buffer of 1024 words.
            unsafe { r.launch(&f, &node, &(a.as_raw(), 1024u32, 1.0f32)) }
        })
        .unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
    assert!(take_log().is_empty());
}
