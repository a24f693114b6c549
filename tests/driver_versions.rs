//! cuda-core against mock drivers of CUDA 12.0, 12.2, 12.4, 12.8, 13.0, 13.1 and 13.5:
//! which calls work on each, through the newest ABI the committed headers declare
//! ("ok"), an older ABI ("fallback"), or not at all (an error naming the call and the
//! driver it needs, "needs 12.x"; "needs 12.4 for cuX" when an earlier step of the call
//! is what the driver lacks).
//!
//! Each mock exposes exactly the symbol set of its version, `tests/driver_abi/<v>.txt`
//! (generated from that version's `cudaTypedefs.h` by `cargo xtask driver-abi`), through
//! a `cuGetProcAddress_v2` with a real driver's semantics: asked for `(name, version)`,
//! it hands back the newest ABI of `name` not newer than `version`, whatever its own
//! version. The table is filled by `DriverApi::from_get_proc_address`, the loader's own
//! logic, after `cuDriverGetVersion`. The mock also checks the loader's soundness rule:
//! every ABI it hands out is the one asked for (never an older ABI of another signature).
//!
//! A process holds one driver table, so the harness runs itself once per version
//! (`DRIVER_VERSIONS_CHILD=<version>`), collects each child's cells, prints the matrix and
//! compares it with the expected one.

//! Loaded mode only: a linked build has no table to replace.
#![cfg_attr(feature = "linked", allow(dead_code, unused_imports))]

use std::collections::BTreeMap;
use std::ffi::{CStr, c_char, c_int, c_uint, c_void};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use cudadrv::graph::{CaptureMode, CaptureToGraph, ConditionalHandle, EdgeData, Graph, GraphNode};
use cudadrv::green::{GroupParams, SmPartition, SmResource, WorkqueueConfig};
use cudadrv::{Context, ContextFlags, Device, Error, Event, EventFlags, Module, Stream};
use cudadrv_sys::{
    CU_DEV_SM_RESOURCE_GROUP_PARAMS, CUcontext, CUctxCreateParams, CUdevResource,
    CUdevResourceType, CUdevSmResource, CUdevWorkqueueConfigResource, CUdevice,
    CUdriverProcAddressQueryResult, CUevent, CUfunction, CUgraph, CUgraphConditionalHandle,
    CUgraphEdgeData, CUgraphNode, CUgraphNodeParams, CUjit_option, CUmodule, CUresult, CUstream,
    CUstreamCaptureMode, CUstreamCaptureStatus, DRIVER_ENTRIES, DriverApi, Library, LoadOptions,
    MissingSymbol, cuuint64_t,
};

const VERSIONS: [(&str, &str); 7] = [
    ("12.0", include_str!("driver_abi/12.0.txt")),
    ("12.2", include_str!("driver_abi/12.2.txt")),
    ("12.4", include_str!("driver_abi/12.4.txt")),
    ("12.8", include_str!("driver_abi/12.8.txt")),
    ("13.0", include_str!("driver_abi/13.0.txt")),
    ("13.1", include_str!("driver_abi/13.1.txt")),
    ("13.5", include_str!("driver_abi/13.5.txt")),
];

const CHILD: &str = "DRIVER_VERSIONS_CHILD";

/// Before 13.2 the parameter count is probed with `cuFuncGetParamInfo`.
const PROBED: &str = "cuFuncGetParamCount not called";

/// Workqueue resources are a resource type of a 12.4 call that 13.1 drivers know: the
/// error names the call with the type.
const WQ_TOO_OLD: &str =
    "needs 13.1 for cuDeviceGetDevResource (CU_DEV_RESOURCE_TYPE_WORKQUEUE_CONFIG)";

/// The expected cell of each call on 12.0, 12.2, 12.4, 12.8, 13.0, 13.1, 13.5.
const EXPECTED: &[(&str, [&str; 7])] = &[
    (
        "Context::create",
        ["fallback", "fallback", "fallback", "ok", "ok", "ok", "ok"],
    ),
    (
        "Context::set_flags",
        ["needs 12.1", "ok", "ok", "ok", "ok", "ok", "ok"],
    ),
    (
        "Event::elapsed_ms",
        ["fallback", "fallback", "fallback", "ok", "ok", "ok", "ok"],
    ),
    (
        "Function::param_info",
        ["needs 12.4", "needs 12.4", "ok", "ok", "ok", "ok", "ok"],
    ),
    (
        "Module::function_count",
        ["needs 12.4", "needs 12.4", "ok", "ok", "ok", "ok", "ok"],
    ),
    (
        "Graph::add_edge default",
        ["fallback", "fallback", "ok", "ok", "ok", "ok", "ok"],
    ),
    (
        "Graph::add_edge programmatic",
        ["needs 12.3", "needs 12.3", "ok", "ok", "ok", "ok", "ok"],
    ),
    (
        "Graph::remove_edge",
        ["fallback", "fallback", "ok", "ok", "ok", "ok", "ok"],
    ),
    (
        "Graph::edges",
        ["fallback", "fallback", "ok", "ok", "ok", "ok", "ok"],
    ),
    (
        "GraphNode::dependencies",
        ["fallback", "fallback", "ok", "ok", "ok", "ok", "ok"],
    ),
    (
        "GraphNode::dependents",
        ["fallback", "fallback", "ok", "ok", "ok", "ok", "ok"],
    ),
    (
        "Capturing::dependencies",
        ["fallback", "fallback", "ok", "ok", "ok", "ok", "ok"],
    ),
    (
        "Capturing::set_dependencies default",
        ["fallback", "fallback", "ok", "ok", "ok", "ok", "ok"],
    ),
    (
        "Capturing::set_dependencies programmatic",
        ["needs 12.3", "needs 12.3", "ok", "ok", "ok", "ok", "ok"],
    ),
    (
        "CaptureToGraph::begin",
        ["needs 12.3", "needs 12.3", "ok", "ok", "ok", "ok", "ok"],
    ),
    (
        "Graph::create_conditional_handle",
        ["needs 12.3", "needs 12.3", "ok", "ok", "ok", "ok", "ok"],
    ),
    (
        "Graph::add_if_node",
        ["needs 12.3", "fallback", "ok", "ok", "ok", "ok", "ok"],
    ),
    (
        "Graph::id",
        [
            "needs 13.1",
            "needs 13.1",
            "needs 13.1",
            "needs 13.1",
            "needs 13.1",
            "ok",
            "ok",
        ],
    ),
    (
        "GraphNode::local_id",
        [
            "needs 13.1",
            "needs 13.1",
            "needs 13.1",
            "needs 13.1",
            "needs 13.1",
            "ok",
            "ok",
        ],
    ),
    (
        "Function::param_count",
        [
            "needs 12.4 for cuFuncGetParamInfo",
            "needs 12.4 for cuFuncGetParamInfo",
            PROBED,
            PROBED,
            PROBED,
            PROBED,
            "ok",
        ],
    ),
    (
        "SmResource::split",
        [
            "needs 12.4 for cuDeviceGetDevResource",
            "needs 12.4 for cuDeviceGetDevResource",
            "needs 13.1",
            "needs 13.1",
            "needs 13.1",
            "ok",
            "ok",
        ],
    ),
    (
        "SmResource::of_stream",
        [
            "needs 13.1",
            "needs 13.1",
            "needs 13.1",
            "needs 13.1",
            "needs 13.1",
            "ok",
            "ok",
        ],
    ),
    (
        "WorkqueueConfig::of_device",
        [
            WQ_TOO_OLD, WQ_TOO_OLD, WQ_TOO_OLD, WQ_TOO_OLD, WQ_TOO_OLD, "ok", "ok",
        ],
    ),
    (
        "Context::record_event",
        [
            "needs 12.5",
            "needs 12.5",
            "needs 12.5",
            "ok",
            "ok",
            "ok",
            "ok",
        ],
    ),
];

fn main() {
    if cfg!(feature = "linked") {
        println!("driver_versions: skipped (a linked build has no table to replace)");
        return;
    }
    match std::env::var(CHILD) {
        Ok(version) => child(&version),
        Err(_) => parent(),
    }
}

// ---------------------------------------------------------------------------------------
// The parent: one child per version, the matrix, the comparison.

fn parent() {
    let exe = std::env::current_exe().expect("the test executable's path");
    let mut cells: BTreeMap<(String, usize), String> = BTreeMap::new();
    let mut failures = Vec::new();
    for (col, (version, _)) in VERSIONS.iter().enumerate() {
        let out = std::process::Command::new(&exe)
            .env(CHILD, version)
            .output()
            .expect("the test re-runs itself");
        let stdout = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            failures.push(format!(
                "{version}: the child failed ({}):\n{stdout}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ));
            continue;
        }
        for line in stdout.lines() {
            let mut parts = line.splitn(3, '\t');
            match (parts.next(), parts.next(), parts.next()) {
                (Some("CELL"), Some(call), Some(outcome)) => {
                    cells.insert((call.to_string(), col), outcome.to_string());
                }
                (Some("UNSOUND"), Some(what), _) => {
                    failures.push(format!("{version}: {what}"));
                }
                _ => {}
            }
        }
    }

    let width = EXPECTED.iter().map(|(c, _)| c.len()).max().unwrap_or(0);
    print!("{:width$}", "call");
    for (v, _) in VERSIONS {
        print!(" | {v:<12}");
    }
    println!();
    for (call, expected) in EXPECTED {
        print!("{call:width$}");
        for (col, want) in expected.iter().enumerate() {
            let got = cells
                .get(&(call.to_string(), col))
                .map_or("(no cell)", String::as_str);
            print!(" | {got:<12}");
            if got != *want {
                failures.push(format!(
                    "{call} on {}: expected {want:?}, got {got:?}",
                    VERSIONS[col].0
                ));
            }
        }
        println!();
    }
    if failures.is_empty() {
        println!(
            "driver_versions: {} calls x {} driver versions as expected",
            EXPECTED.len(),
            VERSIONS.len()
        );
    } else {
        for f in &failures {
            eprintln!("FAILED: {f}");
        }
        std::process::exit(1);
    }
}

// ---------------------------------------------------------------------------------------
// The child: one mock driver, every call.

/// The symbol set served: name -> ABI versions; and the driver's version.
struct SymbolSet {
    driver: u32,
    abis: BTreeMap<String, Vec<u32>>,
}

static SET: Mutex<Option<SymbolSet>> = Mutex::new(None);
/// Table entries called, by entry name (`cuCtxCreate_v3020`), in order.
static CALLS: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());
/// Soundness violations the mock saw (an ABI handed out other than the one asked for).
static UNSOUND: Mutex<Vec<String>> = Mutex::new(Vec::new());
/// (function, ABI asked for) that the mock answered with an older ABI's implementation.
static OLDER_ANSWERS: Mutex<Vec<(String, u32)>> = Mutex::new(Vec::new());
static NEXT: AtomicUsize = AtomicUsize::new(0x10_000);
static EDGES: Mutex<Vec<(usize, usize)>> = Mutex::new(Vec::new());

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn parse(text: &str) -> SymbolSet {
    let mut set = SymbolSet {
        driver: 0,
        abis: BTreeMap::new(),
    };
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("# driver ") {
            set.driver = v.trim().parse().expect("a driver version");
        } else if !line.starts_with('#') {
            let mut words = line.split_whitespace();
            if let Some(name) = words.next() {
                let abis = words.map(|w| w.parse().expect("an ABI version")).collect();
                set.abis.insert(name.to_string(), abis);
            }
        }
    }
    set
}

fn child(version: &str) {
    let text = VERSIONS
        .iter()
        .find(|(v, _)| *v == version)
        .map(|(_, t)| *t)
        .expect("a known version");
    let set = parse(text);
    let driver = set.driver;
    *lock(&SET) = Some(set);
    // SAFETY: the mock entry points have the contracts of the real ones: every pointer
    // `gpa` hands out for (name, ABI) is a function of this program with the signature of
    // `PFN_<name>_v<ABI>` (checked at compile time against the table's accessor types).
    let table = unsafe {
        DriverApi::from_get_proc_address(
            Library::none(),
            gpa,
            cu_driver_get_version,
            LoadOptions::default(),
        )
    }
    .expect("the mock driver loads");
    // Nothing newer than the driver resolved, and no entry holds an older ABI's answer.
    let older = std::mem::take(&mut *lock(&OLDER_ANSWERS));
    for (e, ok) in DRIVER_ENTRIES.iter().zip(table.resolved()) {
        if ok && e.version > driver {
            lock(&UNSOUND).push(format!("{} (ABI {}) resolved", e.name, e.version));
        }
        let lookup = e.lookup.trim_end_matches('\0');
        if ok && older.iter().any(|(n, v)| n == lookup && *v == e.version) {
            lock(&UNSOUND).push(format!("{} (ABI {}) holds an older ABI", e.name, e.version));
        }
    }
    assert!(
        cudadrv_sys::install_driver(table).is_ok(),
        "a table was installed before"
    );

    run_calls();

    for what in lock(&UNSOUND).iter() {
        println!("UNSOUND\t{what}");
    }
}

/// Runs `op` and prints its cell: how the call whose C name is `subject` went.
fn cell(call: &str, subject: &str, op: impl FnOnce() -> Result<(), Error>) {
    lock(&CALLS).clear();
    let result = op();
    let calls = std::mem::take(&mut *lock(&CALLS));
    let outcome = match result {
        Err(e @ Error::DriverTooOld { .. }) => {
            let Error::DriverTooOld {
                call,
                needs,
                driver,
            } = e
            else {
                unreachable!()
            };
            let needs = format!("{}.{}", needs / 1000, needs % 1000 / 10);
            let want = format!(
                "{call} needs a CUDA {needs} driver (this one is {}.{})",
                driver / 1000,
                driver % 1000 / 10
            );
            if call == subject && e.to_string() == want {
                format!("needs {needs}")
            } else if call != subject && e.to_string().starts_with(call) {
                format!("needs {needs} for {call}")
            } else {
                format!("error: {e} (expected {want:?})")
            }
        }
        Err(e) => format!("error: {e}"),
        Ok(()) => {
            let lookup = |entry: &str| {
                DRIVER_ENTRIES
                    .iter()
                    .find(|e| e.name == entry)
                    .map(|e| e.lookup.trim_end_matches('\0'))
            };
            let of_subject: Vec<&str> = calls
                .iter()
                .copied()
                .filter(|c| lookup(c) == Some(subject))
                .collect();
            if of_subject.is_empty() {
                format!("{subject} not called")
            } else if of_subject.iter().all(|c| *c == subject) {
                "ok".to_string()
            } else if of_subject.iter().all(|c| *c != subject) {
                "fallback".to_string()
            } else {
                "mixed".to_string()
            }
        }
    };
    println!("CELL\t{call}\t{outcome}");
}

fn run_calls() {
    let dev = Device::get(0).expect("cuDeviceGet");
    let ctx = Context::primary(dev).expect("the primary context");

    cell("Context::create", "cuCtxCreate", || {
        Context::create(dev, ContextFlags::empty()).map(drop)
    });
    cell("Context::set_flags", "cuCtxSetFlags", || {
        ctx.set_flags(ContextFlags::empty())
    });
    cell("Event::elapsed_ms", "cuEventElapsedTime", || {
        let a = Event::new(&ctx, EventFlags::empty())?;
        let b = Event::new(&ctx, EventFlags::empty())?;
        let ms = Event::elapsed_ms(&a, &b)?;
        assert!((ms - 1.5).abs() < f32::EPSILON);
        Ok(())
    });
    let module = Module::from_ptx(&ctx, ".version 8.0\n.target sm_90\n");
    cell("Function::param_info", "cuFuncGetParamInfo", || {
        let f = module.as_ref().map_err(Clone::clone)?.function("k")?;
        assert_eq!(f.param_info(0)?, (0, 8));
        Ok(())
    });
    cell("Function::param_count", "cuFuncGetParamCount", || {
        let f = module.as_ref().map_err(Clone::clone)?.function("k")?;
        assert_eq!(f.param_count()?, 1);
        Ok(())
    });
    cell("Module::function_count", "cuModuleGetFunctionCount", || {
        assert_eq!(module.as_ref().map_err(Clone::clone)?.function_count()?, 1);
        Ok(())
    });

    let graph = Graph::new(&ctx).expect("cuGraphCreate");
    let a = graph.add_empty_node(&[]).expect("cuGraphAddEmptyNode");
    let b = graph.add_empty_node(&[]).expect("cuGraphAddEmptyNode");
    cell("Graph::add_edge default", "cuGraphAddDependencies", || {
        graph.add_edge(a, b, EdgeData::DEFAULT)
    });
    cell(
        "Graph::add_edge programmatic",
        "cuGraphAddDependencies",
        || graph.add_edge(a, b, EdgeData::PROGRAMMATIC),
    );
    cell("Graph::edges", "cuGraphGetEdges", || {
        let (mut from, mut to) = ([GraphNode::NULL; 4], [GraphNode::NULL; 4]);
        let mut data = [EdgeData::PROGRAMMATIC; 4];
        let n = graph.edges(&mut from, &mut to, &mut data)?;
        assert!(n >= 1, "{n} edges");
        assert_eq!((from[0], to[0], data[0]), (a, b, EdgeData::DEFAULT));
        Ok(())
    });
    cell(
        "GraphNode::dependencies",
        "cuGraphNodeGetDependencies",
        || {
            let mut nodes = [GraphNode::NULL; 4];
            let mut data = [EdgeData::PROGRAMMATIC; 4];
            assert!(b.dependencies(&mut nodes, &mut data)? >= 1);
            assert_eq!((nodes[0], data[0]), (a, EdgeData::DEFAULT));
            Ok(())
        },
    );
    cell(
        "GraphNode::dependents",
        "cuGraphNodeGetDependentNodes",
        || {
            let mut nodes = [GraphNode::NULL; 4];
            let mut data = [EdgeData::PROGRAMMATIC; 4];
            assert!(a.dependents(&mut nodes, &mut data)? >= 1);
            assert_eq!((nodes[0], data[0]), (b, EdgeData::DEFAULT));
            Ok(())
        },
    );
    cell("Graph::id", "cuGraphGetId", || {
        assert_eq!(graph.id()?, 7);
        Ok(())
    });
    cell("GraphNode::local_id", "cuGraphNodeGetLocalId", || {
        assert_eq!(b.local_id()?, 1);
        Ok(())
    });
    cell("Graph::remove_edge", "cuGraphRemoveDependencies", || {
        graph.remove_edge(a, b, EdgeData::DEFAULT)
    });

    let mut stream = Stream::non_blocking(&ctx).expect("cuStreamCreate");
    {
        let cap = stream
            .begin_capture(CaptureMode::Global)
            .expect("cuStreamBeginCapture");
        let mut nodes = [GraphNode::NULL; 4];
        let mut data = [EdgeData::PROGRAMMATIC; 4];
        let mut n = 0;
        cell("Capturing::dependencies", "cuStreamGetCaptureInfo", || {
            let info = cap.dependencies(&mut nodes, &mut data)?;
            n = info.num_dependencies;
            assert_eq!(n, 1);
            assert_eq!(data[0], EdgeData::DEFAULT);
            Ok(())
        });
        let deps = &nodes[..n.min(1)];
        cell(
            "Capturing::set_dependencies default",
            "cuStreamUpdateCaptureDependencies",
            || cap.set_dependencies(deps, None, true),
        );
        cell(
            "Capturing::set_dependencies programmatic",
            "cuStreamUpdateCaptureDependencies",
            || cap.set_dependencies(deps, Some(&[EdgeData::PROGRAMMATIC][..deps.len()]), true),
        );
        drop(cap.end().expect("cuStreamEndCapture"));
    }
    cell(
        "CaptureToGraph::begin",
        "cuStreamBeginCaptureToGraph",
        || CaptureToGraph::begin(&graph, &mut stream, &[a], None, CaptureMode::Global)?.end(),
    );
    cell(
        "Graph::create_conditional_handle",
        "cuGraphConditionalHandleCreate",
        || graph.create_conditional_handle(Some(1)).map(drop),
    );
    let sms = SmResource::of_device(dev);
    cell("SmResource::split", "cuDevSmResourceSplit", || {
        let sms = sms.clone()?;
        let mut groups = [SmPartition::EMPTY; 2];
        let params = [
            GroupParams::sms(16),
            GroupParams::sms(0).coscheduled(2).backfill(),
        ];
        let split = sms.split(&params, &mut groups)?;
        assert_eq!(split.count, 2);
        assert_eq!((groups[0].sm_count(), groups[1].sm_count()), (16, 116));
        Ok(())
    });
    cell("SmResource::of_stream", "cuStreamGetDevResource", || {
        assert_eq!(SmResource::of_stream(&stream)?.sm_count(), 132);
        Ok(())
    });
    cell(
        "WorkqueueConfig::of_device",
        "cuDeviceGetDevResource",
        || {
            let wq = WorkqueueConfig::of_device(dev)?;
            assert_eq!(wq.concurrency_limit(), 4);
            Ok(())
        },
    );
    cell("Context::record_event", "cuCtxRecordEvent", || {
        ctx.record_event(&Event::new(&ctx, EventFlags::empty())?)
    });
    cell("Graph::add_if_node", "cuGraphAddNode", || {
        // A handle made elsewhere (the mock does not check it): the node's fallback is
        // what is tested, whether or not this driver can make handles.
        let handle = ConditionalHandle::from_raw(7);
        graph.add_if_node(&[a], handle).map(drop)
    });
}

// ---------------------------------------------------------------------------------------
// The mock driver.

const OK: CUresult = CUresult::CUDA_SUCCESS;
const PRIMARY: usize = 0xC0;

std::thread_local! {
    static CURRENT: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    static BELOW: std::cell::RefCell<Vec<usize>> = const { std::cell::RefCell::new(Vec::new()) };
}

fn handle<T>() -> *mut T {
    std::ptr::without_provenance_mut(NEXT.fetch_add(0x10, Ordering::Relaxed))
}

fn called(entry: &'static str) {
    lock(&CALLS).push(entry);
}

/// Writes `value` through the out-pointer `p`.
///
/// # Safety
/// `p` is null or valid for a write.
unsafe fn put<T>(p: *mut T, value: T) {
    if !p.is_null() {
        // SAFETY: the caller's promise.
        unsafe { p.write(value) };
    }
}

/// The version this mock driver reports.
unsafe extern "C" fn cu_driver_get_version(v: *mut c_int) -> CUresult {
    let driver = lock(&SET).as_ref().map_or(0, |s| s.driver);
    // SAFETY: a valid out-pointer.
    unsafe { put(v, driver as c_int) };
    OK
}

/// `cuGetProcAddress_v2` with a real driver's semantics over the version's symbol set.
unsafe extern "C" fn gpa(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    version: c_int,
    _flags: cuuint64_t,
    status: *mut CUdriverProcAddressQueryResult,
) -> CUresult {
    // SAFETY: the loader passes a NUL-terminated name and valid out-pointers.
    let name = unsafe { CStr::from_ptr(symbol) }.to_str().unwrap_or("");
    let set = lock(&SET);
    let Some(abis) = set.as_ref().and_then(|s| s.abis.get(name)) else {
        // SAFETY: valid out-pointers.
        unsafe {
            put(pfn, std::ptr::null_mut());
            put(
                status,
                CUdriverProcAddressQueryResult::CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND,
            );
        }
        return CUresult::CUDA_ERROR_NOT_FOUND;
    };
    let Some(abi) = abis
        .iter()
        .copied()
        .filter(|&a| a as c_int <= version)
        .max()
    else {
        // SAFETY: valid out-pointers.
        unsafe {
            put(pfn, std::ptr::null_mut());
            put(
                status,
                CUdriverProcAddressQueryResult::CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT,
            );
        }
        return CUresult::CUDA_ERROR_NOT_FOUND;
    };
    let f = implementation(name, abi);
    if abi as c_int != version && !f.is_null() {
        // A real driver answers so when it lacks the ABI asked for (CUDA 13.1's first
        // driver and `cuLaunchHostFunc` 13010): the loader must not keep the answer.
        lock(&OLDER_ANSWERS).push((name.to_string(), version as u32));
    }
    // SAFETY: valid out-pointers.
    unsafe {
        put(pfn, f);
        put(
            status,
            if f.is_null() {
                CUdriverProcAddressQueryResult::CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND
            } else {
                CUdriverProcAddressQueryResult::CU_GET_PROC_ADDRESS_SUCCESS
            },
        );
    }
    if f.is_null() {
        CUresult::CUDA_ERROR_NOT_FOUND
    } else {
        OK
    }
}

/// `f`, typed as the table's accessor `accessor` returns it (so the mock has the
/// signature of the entry it is served for), as an address.
fn typed<F: Copy>(_accessor: fn(&DriverApi) -> Result<F, MissingSymbol>, f: F) -> F {
    f
}

/// The mock of ABI `abi` of `name`: found by the table entry of that lookup name and
/// ABI version; null for what this mock does not implement.
fn implementation(name: &str, abi: u32) -> *mut c_void {
    let Some(entry) = DRIVER_ENTRIES
        .iter()
        .find(|e| e.lookup.trim_end_matches('\0') == name && e.version == abi)
    else {
        return std::ptr::null_mut();
    };
    macro_rules! impls {
        ($($entry:ident => $f:expr),* $(,)?) => {
            match entry.name {
                $(stringify!($entry) => typed(DriverApi::$entry, $f) as *mut c_void,)*
                _ => std::ptr::null_mut(),
            }
        };
    }
    impls! {
        cuInit => cu_init,
        cuDriverGetVersion => cu_driver_get_version,
        cuDeviceGet => cu_device_get,
        cuDevicePrimaryCtxRetain => cu_primary_retain,
        cuDevicePrimaryCtxRelease => cu_primary_release,
        cuCtxGetCurrent => cu_ctx_get_current,
        cuCtxSetCurrent => cu_ctx_set_current,
        cuCtxPushCurrent => cu_ctx_push,
        cuCtxPopCurrent => cu_ctx_pop,
        cuCtxCreate => cu_ctx_create_v4,
        cuCtxCreate_v3020 => cu_ctx_create_v2,
        cuCtxDestroy => cu_ctx_destroy,
        cuCtxSetFlags => cu_ctx_set_flags,
        cuEventCreate => cu_event_create,
        cuEventDestroy => cu_event_destroy,
        cuEventElapsedTime => cu_event_elapsed_v2,
        cuEventElapsedTime_v2000 => cu_event_elapsed_v1,
        cuModuleLoadDataEx => cu_module_load_data_ex,
        cuModuleUnload => cu_module_unload,
        cuModuleGetFunction => cu_module_get_function,
        cuModuleGetFunctionCount => cu_module_get_function_count,
        cuFuncGetParamInfo => cu_func_get_param_info,
        cuFuncGetParamCount => cu_func_get_param_count,
        cuGraphGetId => cu_graph_get_id,
        cuGraphNodeGetLocalId => cu_graph_node_get_local_id,
        cuStreamCreate => cu_stream_create,
        cuStreamDestroy => cu_stream_destroy,
        cuStreamIsCapturing => cu_stream_is_capturing,
        cuStreamBeginCapture => cu_stream_begin_capture,
        cuStreamBeginCaptureToGraph => cu_stream_begin_capture_to_graph,
        cuStreamEndCapture => cu_stream_end_capture,
        cuStreamGetCaptureInfo => cu_capture_info_v3,
        cuStreamGetCaptureInfo_v11030 => cu_capture_info_v2,
        cuStreamUpdateCaptureDependencies => cu_update_deps_v2,
        cuStreamUpdateCaptureDependencies_v11030 => cu_update_deps_v1,
        cuGraphCreate => cu_graph_create,
        cuGraphDestroy => cu_graph_destroy,
        cuGraphAddEmptyNode => cu_graph_add_empty_node,
        cuGraphAddDependencies => cu_add_deps_v2,
        cuGraphAddDependencies_v10000 => cu_add_deps_v1,
        cuGraphRemoveDependencies => cu_remove_deps_v2,
        cuGraphRemoveDependencies_v10000 => cu_remove_deps_v1,
        cuGraphGetEdges => cu_get_edges_v2,
        cuGraphGetEdges_v10000 => cu_get_edges_v1,
        cuGraphNodeGetDependencies => cu_node_deps_v2,
        cuGraphNodeGetDependencies_v10000 => cu_node_deps_v1,
        cuGraphNodeGetDependentNodes => cu_node_dependents_v2,
        cuGraphNodeGetDependentNodes_v10000 => cu_node_dependents_v1,
        cuGraphConditionalHandleCreate => cu_conditional_handle_create,
        cuGraphAddNode => cu_graph_add_node_v2,
        cuGraphAddNode_v12020 => cu_graph_add_node_v1,
        cuDeviceGetDevResource => cu_device_get_dev_resource,
        cuDevSmResourceSplit => cu_dev_sm_resource_split,
        cuStreamGetDevResource => cu_stream_get_dev_resource,
        cuCtxRecordEvent => cu_ctx_record_event,
    }
}

/// A resource as the driver fills it: an H100's 132 SMs (minimum 8, alignment 8), or a
/// workqueue configuration with a concurrency limit of 4.
fn fill_resource(out: *mut CUdevResource, ty: CUdevResourceType, sms: u32) -> CUresult {
    let mut r = CUdevResource {
        type_: ty,
        ..Default::default()
    };
    if ty == CUdevResourceType::CU_DEV_RESOURCE_TYPE_SM {
        r.__bindgen_anon_1.sm = CUdevSmResource {
            smCount: sms,
            minSmPartitionSize: 8,
            smCoscheduledAlignment: 8,
            ..Default::default()
        };
    } else if ty == CUdevResourceType::CU_DEV_RESOURCE_TYPE_WORKQUEUE_CONFIG {
        r.__bindgen_anon_1.wqConfig = CUdevWorkqueueConfigResource {
            device: 0,
            wqConcurrencyLimit: 4,
            ..Default::default()
        };
    } else {
        return CUresult::CUDA_ERROR_INVALID_RESOURCE_TYPE;
    }
    // SAFETY: the caller's out-pointer.
    unsafe { put(out, r) };
    OK
}
unsafe extern "C" fn cu_device_get_dev_resource(
    _d: CUdevice,
    out: *mut CUdevResource,
    ty: CUdevResourceType,
) -> CUresult {
    called("cuDeviceGetDevResource");
    fill_resource(out, ty, 132)
}
unsafe extern "C" fn cu_stream_get_dev_resource(
    _s: CUstream,
    out: *mut CUdevResource,
    ty: CUdevResourceType,
) -> CUresult {
    called("cuStreamGetDevResource");
    fill_resource(out, ty, 132)
}
unsafe extern "C" fn cu_dev_sm_resource_split(
    result: *mut CUdevResource,
    n: c_uint,
    input: *const CUdevResource,
    remainder: *mut CUdevResource,
    flags: c_uint,
    params: *mut CU_DEV_SM_RESOURCE_GROUP_PARAMS,
) -> CUresult {
    called("cuDevSmResourceSplit");
    if flags != 0 || input.is_null() || params.is_null() {
        return CUresult::CUDA_ERROR_INVALID_VALUE;
    }
    // SAFETY: the caller passes `n` parameter structs and a valid input.
    let (params, input) = unsafe { (std::slice::from_raw_parts(params, n as usize), &*input) };
    // SAFETY: an SM resource's member.
    let mut left = unsafe { input.__bindgen_anon_1.sm.smCount };
    for (i, p) in params.iter().enumerate() {
        let take = if p.smCount == 0 {
            left
        } else {
            p.smCount.min(left)
        };
        left -= take;
        // SAFETY: `n` result slots.
        let slot = unsafe { result.add(i) };
        let rc = fill_resource(slot, CUdevResourceType::CU_DEV_RESOURCE_TYPE_SM, take);
        if rc != OK {
            return rc;
        }
    }
    if !remainder.is_null() && left > 0 {
        return fill_resource(remainder, CUdevResourceType::CU_DEV_RESOURCE_TYPE_SM, left);
    }
    OK
}
unsafe extern "C" fn cu_ctx_record_event(_c: CUcontext, _e: CUevent) -> CUresult {
    called("cuCtxRecordEvent");
    OK
}
unsafe extern "C" fn cu_init(_flags: c_uint) -> CUresult {
    OK
}
unsafe extern "C" fn cu_device_get(d: *mut CUdevice, ordinal: c_int) -> CUresult {
    if ordinal != 0 {
        return CUresult::CUDA_ERROR_INVALID_DEVICE;
    }
    // SAFETY: valid out-pointer.
    unsafe { put(d, 0) };
    OK
}
unsafe extern "C" fn cu_primary_retain(ctx: *mut CUcontext, _d: CUdevice) -> CUresult {
    // SAFETY: valid out-pointer.
    unsafe { put(ctx, std::ptr::without_provenance_mut(PRIMARY)) };
    OK
}
unsafe extern "C" fn cu_primary_release(_d: CUdevice) -> CUresult {
    OK
}
unsafe extern "C" fn cu_ctx_get_current(ctx: *mut CUcontext) -> CUresult {
    // SAFETY: valid out-pointer.
    unsafe {
        put(
            ctx,
            std::ptr::without_provenance_mut(CURRENT.with(|c| c.get())),
        )
    };
    OK
}
unsafe extern "C" fn cu_ctx_set_current(ctx: CUcontext) -> CUresult {
    CURRENT.with(|c| c.set(ctx.addr()));
    OK
}
unsafe extern "C" fn cu_ctx_push(ctx: CUcontext) -> CUresult {
    let below = CURRENT.with(|c| c.replace(ctx.addr()));
    BELOW.with(|b| b.borrow_mut().push(below));
    OK
}
unsafe extern "C" fn cu_ctx_pop(ctx: *mut CUcontext) -> CUresult {
    let Some(below) = BELOW.with(|b| b.borrow_mut().pop()) else {
        return CUresult::CUDA_ERROR_INVALID_CONTEXT;
    };
    let popped = CURRENT.with(|c| c.replace(below));
    // SAFETY: null or a valid out-pointer.
    unsafe { put(ctx, std::ptr::without_provenance_mut(popped)) };
    OK
}
/// A new context, pushed on the thread's stack as the driver does.
fn create_context(ctx: *mut CUcontext) -> CUresult {
    let new = handle::<c_void>();
    let below = CURRENT.with(|c| c.replace(new.addr()));
    BELOW.with(|b| b.borrow_mut().push(below));
    // SAFETY: valid out-pointer.
    unsafe { put(ctx, new.cast()) };
    OK
}
unsafe extern "C" fn cu_ctx_create_v4(
    ctx: *mut CUcontext,
    _params: *mut CUctxCreateParams,
    _flags: c_uint,
    _d: CUdevice,
) -> CUresult {
    called("cuCtxCreate");
    create_context(ctx)
}
unsafe extern "C" fn cu_ctx_create_v2(
    ctx: *mut CUcontext,
    _flags: c_uint,
    _d: CUdevice,
) -> CUresult {
    called("cuCtxCreate_v3020");
    create_context(ctx)
}
unsafe extern "C" fn cu_ctx_destroy(ctx: CUcontext) -> CUresult {
    if CURRENT.with(|c| c.get()) == ctx.addr() {
        let below = BELOW.with(|b| b.borrow_mut().pop()).unwrap_or(0);
        CURRENT.with(|c| c.set(below));
    }
    OK
}
unsafe extern "C" fn cu_ctx_set_flags(_flags: c_uint) -> CUresult {
    called("cuCtxSetFlags");
    OK
}
unsafe extern "C" fn cu_event_create(e: *mut CUevent, _flags: c_uint) -> CUresult {
    // SAFETY: valid out-pointer.
    unsafe { put(e, handle()) };
    OK
}
unsafe extern "C" fn cu_event_destroy(_e: CUevent) -> CUresult {
    OK
}
unsafe extern "C" fn cu_event_elapsed_v2(ms: *mut f32, _a: CUevent, _b: CUevent) -> CUresult {
    called("cuEventElapsedTime");
    // SAFETY: valid out-pointer.
    unsafe { put(ms, 1.5) };
    OK
}
unsafe extern "C" fn cu_event_elapsed_v1(ms: *mut f32, _a: CUevent, _b: CUevent) -> CUresult {
    called("cuEventElapsedTime_v2000");
    // SAFETY: valid out-pointer.
    unsafe { put(ms, 1.5) };
    OK
}
unsafe extern "C" fn cu_module_load_data_ex(
    m: *mut CUmodule,
    _image: *const c_void,
    _n: c_uint,
    _options: *mut CUjit_option,
    _values: *mut *mut c_void,
) -> CUresult {
    // SAFETY: valid out-pointer.
    unsafe { put(m, handle()) };
    OK
}
unsafe extern "C" fn cu_module_unload(_m: CUmodule) -> CUresult {
    OK
}
unsafe extern "C" fn cu_module_get_function(
    f: *mut CUfunction,
    _m: CUmodule,
    _name: *const c_char,
) -> CUresult {
    // SAFETY: valid out-pointer.
    unsafe { put(f, handle()) };
    OK
}
unsafe extern "C" fn cu_module_get_function_count(n: *mut c_uint, _m: CUmodule) -> CUresult {
    called("cuModuleGetFunctionCount");
    // SAFETY: valid out-pointer.
    unsafe { put(n, 1) };
    OK
}
unsafe extern "C" fn cu_graph_get_id(_g: CUgraph, id: *mut c_uint) -> CUresult {
    called("cuGraphGetId");
    // SAFETY: valid out-pointer.
    unsafe { put(id, 7) };
    OK
}
unsafe extern "C" fn cu_graph_node_get_local_id(_n: CUgraphNode, id: *mut c_uint) -> CUresult {
    called("cuGraphNodeGetLocalId");
    // SAFETY: valid out-pointer.
    unsafe { put(id, 1) };
    OK
}
unsafe extern "C" fn cu_func_get_param_count(_f: CUfunction, n: *mut usize) -> CUresult {
    called("cuFuncGetParamCount");
    // SAFETY: valid out-pointer.
    unsafe { put(n, 1) };
    OK
}
unsafe extern "C" fn cu_func_get_param_info(
    _f: CUfunction,
    index: usize,
    offset: *mut usize,
    size: *mut usize,
) -> CUresult {
    called("cuFuncGetParamInfo");
    if index > 0 {
        return CUresult::CUDA_ERROR_INVALID_VALUE;
    }
    // SAFETY: valid out-pointers.
    unsafe {
        put(offset, 0);
        put(size, 8);
    }
    OK
}
unsafe extern "C" fn cu_stream_create(s: *mut CUstream, _flags: c_uint) -> CUresult {
    // SAFETY: valid out-pointer.
    unsafe { put(s, handle()) };
    OK
}
unsafe extern "C" fn cu_stream_destroy(_s: CUstream) -> CUresult {
    OK
}
static CAPTURING: Mutex<bool> = Mutex::new(false);
static CAPTURE_GRAPH: AtomicUsize = AtomicUsize::new(0);
unsafe extern "C" fn cu_stream_is_capturing(
    _s: CUstream,
    status: *mut CUstreamCaptureStatus,
) -> CUresult {
    let active = *lock(&CAPTURING);
    // SAFETY: valid out-pointer.
    unsafe {
        put(
            status,
            if active {
                CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_ACTIVE
            } else {
                CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE
            },
        );
    }
    OK
}
unsafe extern "C" fn cu_stream_begin_capture(_s: CUstream, _mode: CUstreamCaptureMode) -> CUresult {
    *lock(&CAPTURING) = true;
    CAPTURE_GRAPH.store(handle::<c_void>().addr(), Ordering::Relaxed);
    OK
}
unsafe extern "C" fn cu_stream_begin_capture_to_graph(
    _s: CUstream,
    g: CUgraph,
    _deps: *const CUgraphNode,
    _data: *const CUgraphEdgeData,
    _n: usize,
    _mode: CUstreamCaptureMode,
) -> CUresult {
    called("cuStreamBeginCaptureToGraph");
    *lock(&CAPTURING) = true;
    CAPTURE_GRAPH.store(g.addr(), Ordering::Relaxed);
    OK
}
unsafe extern "C" fn cu_stream_end_capture(_s: CUstream, g: *mut CUgraph) -> CUresult {
    *lock(&CAPTURING) = false;
    // SAFETY: valid out-pointer.
    unsafe {
        put(
            g,
            std::ptr::without_provenance_mut(CAPTURE_GRAPH.load(Ordering::Relaxed)),
        );
    }
    OK
}
/// The one dependency a capture reports (a node handle; the mock never dereferences it).
static CAPTURE_DEP: Mutex<[usize; 1]> = Mutex::new([0xD0]);
/// Writes the capture's state; the dependency array lives in a static.
///
/// # Safety
/// Valid out-pointers.
unsafe fn capture_info(
    status: *mut CUstreamCaptureStatus,
    id: *mut cuuint64_t,
    graph: *mut CUgraph,
    deps: *mut *const CUgraphNode,
    n: *mut usize,
) {
    let dep: *const CUgraphNode = lock(&CAPTURE_DEP).as_ptr().cast();
    // SAFETY: the caller's promise.
    unsafe {
        put(
            status,
            CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_ACTIVE,
        );
        put(id, 1);
        put(
            graph,
            std::ptr::without_provenance_mut(CAPTURE_GRAPH.load(Ordering::Relaxed)),
        );
        put(deps, dep);
        put(n, 1);
    }
}
unsafe extern "C" fn cu_capture_info_v3(
    _s: CUstream,
    status: *mut CUstreamCaptureStatus,
    id: *mut cuuint64_t,
    graph: *mut CUgraph,
    deps: *mut *const CUgraphNode,
    edges: *mut *const CUgraphEdgeData,
    n: *mut usize,
) -> CUresult {
    called("cuStreamGetCaptureInfo");
    // SAFETY: valid out-pointers; null edge data means default edges.
    unsafe {
        capture_info(status, id, graph, deps, n);
        put(edges, std::ptr::null());
    }
    OK
}
unsafe extern "C" fn cu_capture_info_v2(
    _s: CUstream,
    status: *mut CUstreamCaptureStatus,
    id: *mut cuuint64_t,
    graph: *mut CUgraph,
    deps: *mut *const CUgraphNode,
    n: *mut usize,
) -> CUresult {
    called("cuStreamGetCaptureInfo_v11030");
    // SAFETY: valid out-pointers.
    unsafe { capture_info(status, id, graph, deps, n) };
    OK
}
unsafe extern "C" fn cu_update_deps_v2(
    _s: CUstream,
    _deps: *mut CUgraphNode,
    _data: *const CUgraphEdgeData,
    _n: usize,
    _flags: c_uint,
) -> CUresult {
    called("cuStreamUpdateCaptureDependencies");
    OK
}
unsafe extern "C" fn cu_update_deps_v1(
    _s: CUstream,
    _deps: *mut CUgraphNode,
    _n: usize,
    _flags: c_uint,
) -> CUresult {
    called("cuStreamUpdateCaptureDependencies_v11030");
    OK
}
unsafe extern "C" fn cu_graph_create(g: *mut CUgraph, _flags: c_uint) -> CUresult {
    // SAFETY: valid out-pointer.
    unsafe { put(g, handle()) };
    OK
}
unsafe extern "C" fn cu_graph_destroy(_g: CUgraph) -> CUresult {
    OK
}
unsafe extern "C" fn cu_graph_add_empty_node(
    node: *mut CUgraphNode,
    _g: CUgraph,
    _deps: *const CUgraphNode,
    _n: usize,
) -> CUresult {
    // SAFETY: valid out-pointer.
    unsafe { put(node, handle()) };
    OK
}
/// Adds or removes the `n` edges `from[i] -> to[i]`.
///
/// # Safety
/// `from` and `to` hold `n` nodes.
unsafe fn edit_edges(from: *const CUgraphNode, to: *const CUgraphNode, n: usize, add: bool) {
    // SAFETY: the caller's promise.
    let (from, to) = unsafe {
        (
            std::slice::from_raw_parts(from, n),
            std::slice::from_raw_parts(to, n),
        )
    };
    let mut edges = lock(&EDGES);
    for (f, t) in from.iter().zip(to) {
        let edge = (f.addr(), t.addr());
        if add {
            edges.push(edge);
        } else {
            edges.retain(|e| *e != edge);
        }
    }
}
unsafe extern "C" fn cu_add_deps_v2(
    _g: CUgraph,
    from: *const CUgraphNode,
    to: *const CUgraphNode,
    _data: *const CUgraphEdgeData,
    n: usize,
) -> CUresult {
    called("cuGraphAddDependencies");
    // SAFETY: `n` nodes each.
    unsafe { edit_edges(from, to, n, true) };
    OK
}
unsafe extern "C" fn cu_add_deps_v1(
    _g: CUgraph,
    from: *const CUgraphNode,
    to: *const CUgraphNode,
    n: usize,
) -> CUresult {
    called("cuGraphAddDependencies_v10000");
    // SAFETY: `n` nodes each.
    unsafe { edit_edges(from, to, n, true) };
    OK
}
unsafe extern "C" fn cu_remove_deps_v2(
    _g: CUgraph,
    from: *const CUgraphNode,
    to: *const CUgraphNode,
    _data: *const CUgraphEdgeData,
    n: usize,
) -> CUresult {
    called("cuGraphRemoveDependencies");
    // SAFETY: `n` nodes each.
    unsafe { edit_edges(from, to, n, false) };
    OK
}
unsafe extern "C" fn cu_remove_deps_v1(
    _g: CUgraph,
    from: *const CUgraphNode,
    to: *const CUgraphNode,
    n: usize,
) -> CUresult {
    called("cuGraphRemoveDependencies_v10000");
    // SAFETY: `n` nodes each.
    unsafe { edit_edges(from, to, n, false) };
    OK
}
/// Writes up to `*n` of `edges` (pairs of nodes) into the arrays (when not null), default
/// edge data into `data` (when not null), and the count into `*n`.
///
/// # Safety
/// Null arrays or arrays of `*n` elements; `n` valid.
unsafe fn list(
    edges: &[(usize, usize)],
    a: *mut CUgraphNode,
    b: *mut CUgraphNode,
    data: *mut CUgraphEdgeData,
    n: *mut usize,
) {
    // SAFETY: the caller's promise.
    unsafe {
        if a.is_null() {
            *n = edges.len();
            return;
        }
        let count = (*n).min(edges.len());
        for (i, (x, y)) in edges.iter().take(count).enumerate() {
            put(a.add(i), std::ptr::without_provenance_mut(*x));
            if !b.is_null() {
                put(b.add(i), std::ptr::without_provenance_mut(*y));
            }
            if !data.is_null() {
                put(data.add(i), CUgraphEdgeData::default());
            }
        }
        *n = count;
    }
}
unsafe extern "C" fn cu_get_edges_v2(
    _g: CUgraph,
    from: *mut CUgraphNode,
    to: *mut CUgraphNode,
    data: *mut CUgraphEdgeData,
    n: *mut usize,
) -> CUresult {
    called("cuGraphGetEdges");
    let edges = lock(&EDGES).clone();
    // SAFETY: as the driver's contract.
    unsafe { list(&edges, from, to, data, n) };
    OK
}
unsafe extern "C" fn cu_get_edges_v1(
    _g: CUgraph,
    from: *mut CUgraphNode,
    to: *mut CUgraphNode,
    n: *mut usize,
) -> CUresult {
    called("cuGraphGetEdges_v10000");
    let edges = lock(&EDGES).clone();
    // SAFETY: as the driver's contract.
    unsafe { list(&edges, from, to, std::ptr::null_mut(), n) };
    OK
}
/// The nodes on the other side of `node`'s incoming (`incoming`) or outgoing edges.
fn neighbours(node: CUgraphNode, incoming: bool) -> Vec<(usize, usize)> {
    lock(&EDGES)
        .iter()
        .filter_map(|&(f, t)| match incoming {
            true if t == node.addr() => Some((f, 0)),
            false if f == node.addr() => Some((t, 0)),
            _ => None,
        })
        .collect()
}
unsafe extern "C" fn cu_node_deps_v2(
    node: CUgraphNode,
    deps: *mut CUgraphNode,
    data: *mut CUgraphEdgeData,
    n: *mut usize,
) -> CUresult {
    called("cuGraphNodeGetDependencies");
    // SAFETY: as the driver's contract.
    unsafe { list(&neighbours(node, true), deps, std::ptr::null_mut(), data, n) };
    OK
}
unsafe extern "C" fn cu_node_deps_v1(
    node: CUgraphNode,
    deps: *mut CUgraphNode,
    n: *mut usize,
) -> CUresult {
    called("cuGraphNodeGetDependencies_v10000");
    // SAFETY: as the driver's contract.
    unsafe {
        list(
            &neighbours(node, true),
            deps,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            n,
        );
    }
    OK
}
unsafe extern "C" fn cu_node_dependents_v2(
    node: CUgraphNode,
    deps: *mut CUgraphNode,
    data: *mut CUgraphEdgeData,
    n: *mut usize,
) -> CUresult {
    called("cuGraphNodeGetDependentNodes");
    // SAFETY: as the driver's contract.
    unsafe {
        list(
            &neighbours(node, false),
            deps,
            std::ptr::null_mut(),
            data,
            n,
        )
    };
    OK
}
unsafe extern "C" fn cu_node_dependents_v1(
    node: CUgraphNode,
    deps: *mut CUgraphNode,
    n: *mut usize,
) -> CUresult {
    called("cuGraphNodeGetDependentNodes_v10000");
    // SAFETY: as the driver's contract.
    unsafe {
        list(
            &neighbours(node, false),
            deps,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            n,
        );
    }
    OK
}
unsafe extern "C" fn cu_conditional_handle_create(
    h: *mut CUgraphConditionalHandle,
    _g: CUgraph,
    _ctx: CUcontext,
    _value: c_uint,
    _flags: c_uint,
) -> CUresult {
    called("cuGraphConditionalHandleCreate");
    // SAFETY: valid out-pointer.
    unsafe { put(h, 7) };
    OK
}
/// A conditional node: a new node and its one body graph (an array that lives for the
/// rest of the process, as the driver keeps it for the node's lifetime).
///
/// # Safety
/// Valid out-pointers; `params` is a conditional node's.
unsafe fn add_node(node: *mut CUgraphNode, params: *mut CUgraphNodeParams) -> CUresult {
    let bodies: &'static mut [CUgraph] = Box::leak(vec![handle(); 4].into_boxed_slice());
    // SAFETY: the caller's promise.
    unsafe {
        put(node, handle());
        (*params).__bindgen_anon_1.conditional.phGraph_out = bodies.as_mut_ptr();
    }
    OK
}
unsafe extern "C" fn cu_graph_add_node_v2(
    node: *mut CUgraphNode,
    _g: CUgraph,
    _deps: *const CUgraphNode,
    _data: *const CUgraphEdgeData,
    _n: usize,
    params: *mut CUgraphNodeParams,
) -> CUresult {
    called("cuGraphAddNode");
    // SAFETY: the driver's contract.
    unsafe { add_node(node, params) }
}
unsafe extern "C" fn cu_graph_add_node_v1(
    node: *mut CUgraphNode,
    _g: CUgraph,
    _deps: *const CUgraphNode,
    _n: usize,
    params: *mut CUgraphNodeParams,
) -> CUresult {
    called("cuGraphAddNode_v12020");
    // SAFETY: the driver's contract.
    unsafe { add_node(node, params) }
}
