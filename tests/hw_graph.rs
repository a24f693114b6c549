//! Hardware tests of `cudadrv::graph`: captured and explicit PDL chains with
//! programmatic edges, WHILE and SWITCH conditional nodes driven from device code, exec
//! updates (kernel node parameters, whole graph, a refused topology change), memory
//! alloc/free nodes replayed with stable pool usage, host-node closures, and the other
//! explicit nodes.
//!
//! The kernels are the Rust ones built by `cargo xtask ptx`: from
//! `ptx/generated/kernels.ptx`, `chain_step` (ptx/src/chain.rs), `fill` and `write_value`
//! (ptx/src/fill.rs); from `ptx/generated/devrt.ptx`, linked with `libcudadevrt.a`,
//! `while_cond` (ptx/devrt/src/while_cond.rs) and `set_selector`
//! (ptx/devrt/src/set_selector.rs), which set conditional handles from device code.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use cuda_workspace::{Outcome, TestResult, check, check_eq, ptx, require_gpu, require_sm};
use cudadrv::graph::{
    CaptureMode, CaptureToGraph, EdgeData, ExecUpdateError, Graph, GraphMemUsage, GraphNode,
    InstantiateFlags,
};
use cudadrv::launch::{LaunchConfig, launch};
use cudadrv::{
    Context, Device, DeviceBuffer, DevicePtr, Error, Event, EventFlags, Function, Module, Stream,
};
use cudadrv_sys::{
    CUgraphDependencyType, CUgraphExecUpdateResult, CUgraphNodeType, CUstreamCaptureStatus,
};

fn main() {
    cuda_workspace::run_suite(
        "hw_graph",
        cuda_workspace::hw_tests![
            captured_pdl_chain_has_programmatic_edges,
            explicit_chain_with_programmatic_edges,
            while_loop_runs_until_counter,
            while_loop_single_trip,
            switch_chooses_among_three_bodies,
            exec_update_kernel_params_and_whole_graph,
            invalid_update_reports_topology_change,
            mem_alloc_free_nodes_replay_stably,
            host_node_closure_runs_and_is_freed,
            other_nodes_and_capture_into_graph,
            graph_and_node_ids_match_the_driver,
        ],
    );
}

const THREADS: u32 = 256;
const BLOCKS: u32 = 132;
const N: u32 = THREADS * BLOCKS;

fn read_u32(buf: &DeviceBuffer<u32>) -> Result<Vec<u32>, Error> {
    let mut v = vec![0u32; buf.len()];
    buf.copy_to_host(&mut v)?;
    Ok(v)
}

fn all_equal(v: &[u32], want: u32, what: &str) -> TestResult {
    match v.iter().position(|&x| x != want) {
        None => Ok(()),
        Some(i) => Err(Outcome::Fail(format!(
            "{what}: element {i} is {}, expected {want}",
            v[i]
        ))),
    }
}

/// The plain kernels (`ptx/generated/kernels.ptx`).
fn kernels_module(ctx: &Context) -> Result<Module, Error> {
    Module::from_ptx(ctx, ptx::KERNELS)
}

/// The device-runtime kernels (`ptx/generated/devrt.ptx`) linked with `libcudadevrt.a`,
/// or a skip when the library is not found.
fn devrt_module(ctx: &Context) -> Result<Module, Outcome> {
    cuda_workspace::link_with_devrt(ctx, ptx::DEVRT, "devrt.ptx")
}

/// `chain_step`'s mode 1 (`CHAIN_WAIT_TRIGGER_EARLY` in ptx/src/chain.rs):
/// `griddepcontrol.wait`, then `griddepcontrol.launch_dependents`, then
/// `out[i] = in[i] + 1`.
const CHAIN_WAIT_TRIGGER_EARLY: u32 = 1;

/// The two buffers of a `chain_step` chain, zeroed: link `k` reads `bufs[k % 2]` and
/// writes `bufs[(k + 1) % 2]`, so after an even number of links `bufs[0]` has grown by
/// that number.
fn chain_buffers(ctx: &Context) -> Result<[DeviceBuffer<u32>; 2], Error> {
    Ok([
        DeviceBuffer::zeroed(ctx, N as usize)?,
        DeviceBuffer::zeroed(ctx, N as usize)?,
    ])
}

/// `chain_step(in, out, n, mode)`'s arguments for link `k` of a chain over `bufs`.
fn link_args(
    bufs: &[DeviceBuffer<u32>; 2],
    k: usize,
) -> (DevicePtr<u32>, DevicePtr<u32>, u32, u32) {
    (
        bufs[k % 2].as_arg(),
        bufs[(k + 1) % 2].as_arg(),
        N,
        CHAIN_WAIT_TRIGGER_EARLY,
    )
}

/// A link's shape, with programmatic stream serialization when `pdl`, and no stream:
/// [`Capturing::launch`](cudadrv::graph::Capturing::launch) uses the capture's.
fn pdl_shape(pdl: bool) -> Result<LaunchConfig<'static>, Error> {
    let cfg = LaunchConfig::new(BLOCKS, THREADS);
    Ok(if pdl {
        cfg.programmatic_stream_serialization()?
    } else {
        cfg
    })
}

/// [`pdl_shape`] launched into `stream`.
fn pdl_cfg(stream: &Stream, pdl: bool) -> Result<LaunchConfig<'_>, Error> {
    Ok(pdl_shape(pdl)?.stream(stream))
}

fn captured_pdl_chain_has_programmatic_edges() -> TestResult {
    require_sm(9, 0)?;
    let ctx = Context::primary(Device::get(0)?)?;
    let module = kernels_module(&ctx)?;
    let step = module.function("chain_step")?;
    let mut stream = Stream::non_blocking(&ctx)?;
    let mut bufs = chain_buffers(&ctx)?;
    const K: usize = 8;
    // The chain ends in bufs[0], where the next graph launch starts.
    const _: () = assert!(K % 2 == 0);

    // The stream version.
    for i in 0..K {
        // SAFETY: chain_step(in, out, n, mode) reads bufs[i % 2][0..N] and writes
        // bufs[(i + 1) % 2][0..N] (two distinct buffers).
        unsafe { launch(&step, &pdl_cfg(&stream, i > 0)?, &link_args(&bufs, i))? };
    }
    stream.synchronize()?;
    all_equal(&read_u32(&bufs[0])?, K as u32, "stream PDL chain")?;
    for buf in &mut bufs {
        buf.memset_d8(0)?;
    }

    // The same launches, captured.
    let capture = stream.begin_capture(CaptureMode::Global)?;
    check_eq(
        capture.stream().capture_status()?,
        CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_ACTIVE,
        "status while capturing",
    )?;
    // A safe async memset on the capturing stream would make the graph name `bufs[0]`
    // without borrowing it: refused, and the capture goes on.
    match bufs[0].memset_d8_async(0, capture.stream()) {
        Err(Error::StreamCapturing(_)) => {}
        other => {
            return Err(Outcome::Fail(format!(
                "memset_d8_async on a capturing stream: {other:?}, expected StreamCapturing"
            )));
        }
    }
    for i in 0..K {
        // SAFETY: as above; `bufs` outlives every launch of the graph below (the graph
        // borrows `step`).
        unsafe { capture.launch(&step, &pdl_shape(i > 0)?, &link_args(&bufs, i))? };
    }
    {
        let mut deps = [GraphNode::NULL; 4];
        let mut deps_data = [EdgeData::DEFAULT; 4];
        let info = capture.dependencies(&mut deps, &mut deps_data)?;
        check(info.is_active() && info.num_dependencies == 1, || {
            format!("capture info after {K} launches: {info:?}")
        })?;
        check_eq(
            deps[0].node_type()?,
            CUgraphNodeType::CU_GRAPH_NODE_TYPE_KERNEL,
            "capture dependency type",
        )?;
    }
    let graph = capture.end()?;
    check_eq(
        stream.capture_status()?,
        CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE,
        "status after capture",
    )?;

    check_eq(graph.node_count()?, K, "captured nodes")?;
    let edges = graph.edges_vec()?;
    check_eq(edges.len(), K - 1, "captured edges")?;
    for (from, to, e) in &edges {
        check(
            e.kind() == CUgraphDependencyType::CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC
                && e.from_port() == cudadrv_sys::CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC as u8
                && e.to_port() == 0,
            || format!("edge {from:?} -> {to:?} is not programmatic: {e:?}"),
        )?;
        check_eq(
            from.node_type()?,
            CUgraphNodeType::CU_GRAPH_NODE_TYPE_KERNEL,
            "edge source type",
        )?;
    }
    // The same edge data seen from a node.
    let (_, last, _) = edges[K - 2];
    let mut incoming = [GraphNode::NULL; 2];
    let mut incoming_data = [EdgeData::DEFAULT; 2];
    check_eq(
        last.dependencies(&mut incoming, &mut incoming_data)?,
        1,
        "dependencies of a node",
    )?;
    check_eq(
        incoming_data[0],
        EdgeData::PROGRAMMATIC,
        "dependency edge data",
    )?;

    let exec = graph.instantiate(InstantiateFlags::empty())?;
    exec.launch(&stream)?;
    stream.synchronize()?;
    all_equal(
        &read_u32(&bufs[0])?,
        K as u32,
        "captured PDL chain, one launch",
    )?;
    exec.launch(&stream)?;
    stream.synchronize()?;
    all_equal(
        &read_u32(&bufs[0])?,
        2 * K as u32,
        "captured PDL chain, two launches",
    )
}

/// Link `k` of a `chain_step` chain over `bufs`, as a kernel node without dependencies.
fn step_node<'g, 'a>(
    graph: &'g Graph<'a>,
    step: &'a Function,
    bufs: &[DeviceBuffer<u32>; 2],
    k: usize,
) -> Result<GraphNode<'g>, Error> {
    let cfg = LaunchConfig::new(BLOCKS, THREADS);
    // SAFETY: chain_step(in, out, n, mode) reads bufs[k % 2][0..N] and writes
    // bufs[(k + 1) % 2][0..N]; `bufs` outlives the graph's executable graphs in every
    // test that calls this.
    unsafe { graph.add_kernel_node(&[], step, &cfg, &link_args(bufs, k)) }
}

fn explicit_chain_with_programmatic_edges() -> TestResult {
    require_sm(9, 0)?;
    let ctx = Context::primary(Device::get(0)?)?;
    let module = kernels_module(&ctx)?;
    let step = module.function("chain_step")?;
    let stream = Stream::non_blocking(&ctx)?;
    let bufs = chain_buffers(&ctx)?;
    const K: usize = 6;
    // The chain ends in bufs[0], where the next graph launch starts.
    const _: () = assert!(K % 2 == 0);

    let graph = Graph::new(&ctx)?;
    let nodes: Vec<GraphNode<'_>> = (0..K)
        .map(|k| step_node(&graph, &step, &bufs, k))
        .collect::<Result<_, _>>()?;
    for i in 1..K {
        // The last edge waits only for launch completion; chain_step's
        // griddepcontrol.wait still orders the memory.
        let kind = if i == K - 1 {
            EdgeData::LAUNCH_COMPLETION
        } else {
            EdgeData::PROGRAMMATIC
        };
        graph.add_edge(nodes[i - 1], nodes[i], kind)?;
    }
    check_eq(graph.edge_count()?, K - 1, "edges")?;
    let mut roots = [GraphNode::NULL; 4];
    check_eq(graph.root_nodes(&mut roots)?, 1, "root nodes")?;
    check_eq(roots[0], nodes[0], "the root")?;
    let mut out = [GraphNode::NULL; 2];
    let mut out_data = [EdgeData::DEFAULT; 2];
    check_eq(
        nodes[K - 2].dependents(&mut out, &mut out_data)?,
        1,
        "dependents",
    )?;
    check_eq(
        (out[0], out_data[0]),
        (nodes[K - 1], EdgeData::LAUNCH_COMPLETION),
        "last edge",
    )?;
    let edges = graph.edges_vec()?;
    let programmatic = edges
        .iter()
        .filter(|(_, _, e)| *e == EdgeData::PROGRAMMATIC)
        .count();
    check_eq(programmatic, K - 2, "programmatic edges read back")?;

    let exec = graph.instantiate(InstantiateFlags::empty())?;
    for round in 1..=3u32 {
        exec.launch(&stream)?;
        stream.synchronize()?;
        all_equal(
            &read_u32(&bufs[0])?,
            round * K as u32,
            &format!("explicit chain, launch {round}"),
        )?;
    }
    Ok(())
}

/// A WHILE node whose body, `while_cond` (built on cuda-core's device-side
/// `ConditionalHandle::set`), adds 1 to `counter` at each run and sets the handle to
/// `counter < loops`. The memset node ahead of the loop zeroes `counter` at each graph
/// launch, so after each of `launches` launches `counter` is that launch's body runs.
fn while_loop(loops: u32, launches: u32) -> TestResult {
    require_sm(9, 0)?;
    let ctx = Context::primary(Device::get(0)?)?;
    let module = devrt_module(&ctx)?;
    let body_fn = module.function("while_cond")?;
    let stream = Stream::non_blocking(&ctx)?;
    let counter = DeviceBuffer::<u32>::zeroed(&ctx, 1)?;

    let graph = Graph::new(&ctx)?;
    // The graph borrows `counter` (one u32).
    let reset = [graph.add_memset_d32_node(&[], &counter, 0)?];
    // Reset to 1 (loop) at each launch: the body runs at least once.
    let handle = graph.create_conditional_handle(Some(1))?;
    let (node, body) = graph.add_while_node(&reset, handle)?;
    check_eq(
        node.node_type()?,
        CUgraphNodeType::CU_GRAPH_NODE_TYPE_CONDITIONAL,
        "node type",
    )?;
    // SAFETY: while_cond(counter: *mut u32, n: u32, handle: u64) touches one u32 of
    // `counter`; `handle` belongs to this graph.
    unsafe {
        body.add_kernel_node(
            &[],
            &body_fn,
            &LaunchConfig::new(1, 1),
            &(counter.as_arg(), loops, handle),
        )?;
    }
    check_eq(body.node_count()?, 1, "nodes in the body")?;

    let exec = graph.instantiate(InstantiateFlags::empty())?;
    for launch_no in 1..=launches {
        exec.launch(&stream)?;
        stream.synchronize()?;
        check_eq(
            read_u32(&counter)?,
            vec![loops],
            &format!("body runs (counter) in launch {launch_no}"),
        )?;
    }
    Ok(())
}

fn while_loop_runs_until_counter() -> TestResult {
    while_loop(10, 2)
}

/// One trip: the handle starts at 1, so the body runs once and sets it to 0.
fn while_loop_single_trip() -> TestResult {
    while_loop(1, 3)
}

fn switch_chooses_among_three_bodies() -> TestResult {
    require_sm(9, 0)?;
    let ctx = Context::primary(Device::get(0)?)?;
    let devrt = devrt_module(&ctx)?;
    let kernels = kernels_module(&ctx)?;
    let set_selector = devrt.function("set_selector")?;
    let write_value = kernels.function("write_value")?;
    let stream = Stream::non_blocking(&ctx)?;
    let mut selector = DeviceBuffer::<u32>::zeroed(&ctx, 1)?;
    let mut out = DeviceBuffer::<u32>::zeroed(&ctx, 1)?;

    let graph = Graph::new(&ctx)?;
    let handle = graph.create_conditional_handle(None)?;
    let one = LaunchConfig::new(1, 1);
    // SAFETY: set_selector(handle: u64, selector: *const u32) reads one u32 of
    // `selector`; `handle` belongs to this graph.
    let set =
        unsafe { graph.add_kernel_node(&[], &set_selector, &one, &(handle, selector.as_arg()))? };
    let (_, bodies) = graph.add_switch_node::<3>(&[set], handle)?;
    for (i, body) in bodies.iter().enumerate() {
        // SAFETY: write_value(out: *mut u32, value: u32) writes one u32 of `out`.
        unsafe { body.add_kernel_node(&[], &write_value, &one, &(out.as_arg(), 100 + i as u32))? };
    }
    let exec = graph.instantiate(InstantiateFlags::empty())?;

    for sel in 0..4u32 {
        selector.copy_from_host(&[sel])?;
        out.memset_d8(0)?;
        exec.launch(&stream)?;
        stream.synchronize()?;
        let want = if sel < 3 { 100 + sel } else { 0 };
        check_eq(
            read_u32(&out)?,
            vec![want],
            &format!("switch with selector {sel}"),
        )?;
    }
    Ok(())
}

fn exec_update_kernel_params_and_whole_graph() -> TestResult {
    require_gpu()?;
    let ctx = Context::primary(Device::get(0)?)?;
    let module = kernels_module(&ctx)?;
    let write_value = module.function("write_value")?;
    let stream = Stream::non_blocking(&ctx)?;
    let mut out = DeviceBuffer::<u32>::zeroed(&ctx, 1)?;
    let one = LaunchConfig::new(1, 1);

    let graph = Graph::new(&ctx)?;
    // SAFETY: `write_value` writes one u32 of `out`, which outlives `exec`.
    let node = unsafe { graph.add_kernel_node(&[], &write_value, &one, &(out.as_arg(), 7u32))? };
    let exec = graph.instantiate(InstantiateFlags::empty())?;
    exec.launch(&stream)?;
    stream.synchronize()?;
    check_eq(read_u32(&out)?, vec![7], "first launch")?;

    // SAFETY: as above.
    unsafe { exec.set_kernel_node_params(node, &write_value, &one, &(out.as_arg(), 9u32))? };
    exec.launch(&stream)?;
    stream.synchronize()?;
    check_eq(
        read_u32(&out)?,
        vec![9],
        "after cuGraphExecKernelNodeSetParams",
    )?;

    exec.set_node_enabled(node, false)?;
    check_eq(exec.node_enabled(node)?, false, "node disabled")?;
    out.memset_d8(0)?;
    exec.launch(&stream)?;
    stream.synchronize()?;
    check_eq(read_u32(&out)?, vec![0], "launch with the node disabled")?;
    exec.set_node_enabled(node, true)?;

    let same_shape = Graph::new(&ctx)?;
    // SAFETY: as above.
    unsafe { same_shape.add_kernel_node(&[], &write_value, &one, &(out.as_arg(), 13u32))? };
    exec.update(&same_shape)?;
    exec.launch(&stream)?;
    stream.synchronize()?;
    check_eq(read_u32(&out)?, vec![13], "after cuGraphExecUpdate")
}

fn invalid_update_reports_topology_change() -> TestResult {
    require_gpu()?;
    let ctx = Context::primary(Device::get(0)?)?;
    let module = kernels_module(&ctx)?;
    let write_value = module.function("write_value")?;
    let stream = Stream::non_blocking(&ctx)?;
    let out = DeviceBuffer::<u32>::zeroed(&ctx, 1)?;
    let one = LaunchConfig::new(1, 1);

    let graph = Graph::new(&ctx)?;
    // SAFETY: `write_value` writes one u32 of `out`, which outlives `exec`.
    unsafe { graph.add_kernel_node(&[], &write_value, &one, &(out.as_arg(), 1u32))? };
    let exec = graph.instantiate(InstantiateFlags::empty())?;

    let two_nodes = Graph::new(&ctx)?;
    // SAFETY: as above.
    unsafe {
        let a = two_nodes.add_kernel_node(&[], &write_value, &one, &(out.as_arg(), 2u32))?;
        two_nodes.add_kernel_node(&[a], &write_value, &one, &(out.as_arg(), 3u32))?;
    }
    let e: ExecUpdateError = match exec.update(&two_nodes) {
        Ok(()) => {
            return Err(Outcome::Fail(
                "an update to a different topology was accepted".into(),
            ));
        }
        Err(e) => e,
    };
    check_eq(
        e.result,
        CUgraphExecUpdateResult::CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED,
        "update result",
    )?;
    check_eq(
        e.code,
        cudadrv_sys::CUresult::CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE,
        "driver code",
    )?;
    let text = e.to_string();
    check(
        text.contains("CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED"),
        || format!("message does not name the result: {text}"),
    )?;
    let as_error: Error = e.into();
    check_eq(
        as_error.call(),
        Some("cuGraphExecUpdate"),
        "converted error",
    )?;

    // The executable graph still runs with its old parameters.
    exec.launch(&stream)?;
    stream.synchronize()?;
    check_eq(read_u32(&out)?, vec![1], "launch after the refused update")
}

fn mem_alloc_free_nodes_replay_stably() -> TestResult {
    require_gpu()?;
    let ctx = Context::primary(Device::get(0)?)?;
    let module = kernels_module(&ctx)?;
    let fill = module.function("fill")?;
    let stream = Stream::non_blocking(&ctx)?;
    let device = ctx.device();
    const ELEMS: u32 = 1 << 18; // 1 MiB of u32
    let keep = DeviceBuffer::<u32>::zeroed(&ctx, 16)?;

    let graph = Graph::new(&ctx)?;
    let (alloc, dptr) = graph.add_mem_alloc_node(&[], ELEMS as usize * 4)?;
    check(dptr != 0, || {
        "the alloc node returned a null address".into()
    })?;
    let cfg = LaunchConfig::new(ELEMS / 256, 256);
    // SAFETY: `fill` writes ELEMS u32 into the graph allocation, live between the alloc
    // and the free node; the copy reads 64 bytes of it into `keep`, which outlives
    // `exec`; the free node comes after both.
    let free = unsafe {
        let k = graph.add_kernel_node(
            &[alloc],
            &fill,
            &cfg,
            &(DevicePtr::<u32>::from_raw(dptr), ELEMS),
        )?;
        let c = graph.add_memcpy_dtod_node(&[k], keep.as_raw(), dptr, 64)?;
        graph.add_mem_free_node(&[c], dptr)?
    };
    check_eq(
        free.node_type()?,
        CUgraphNodeType::CU_GRAPH_NODE_TYPE_MEM_FREE,
        "free node type",
    )?;
    check_eq(
        alloc.node_type()?,
        CUgraphNodeType::CU_GRAPH_NODE_TYPE_MEM_ALLOC,
        "alloc node type",
    )?;
    let exec = graph.instantiate(InstantiateFlags::empty())?;
    exec.upload(&stream)?;

    for _ in 0..10 {
        exec.launch(&stream)?;
    }
    stream.synchronize()?;
    let warm = GraphMemUsage::query(device)?;
    check(warm.reserved_current >= ELEMS as u64 * 4, || {
        format!("pool reserves less than one allocation after 10 replays: {warm:?}")
    })?;
    for _ in 10..1000 {
        exec.launch(&stream)?;
    }
    stream.synchronize()?;
    let after = GraphMemUsage::query(device)?;
    check_eq(
        after.used_current,
        warm.used_current,
        "used graph memory after 1000 replays",
    )?;
    check_eq(
        after.reserved_current,
        warm.reserved_current,
        "reserved graph memory after 1000 replays",
    )?;
    check_eq(after.used_high, warm.used_high, "used high watermark")?;
    check_eq(
        after.reserved_high,
        warm.reserved_high,
        "reserved high watermark",
    )?;
    let got = read_u32(&keep)?;
    check(
        got.iter().enumerate().all(|(i, &v)| v == 3 * i as u32 + 1),
        || format!("copied-out values: {got:?}"),
    )?;
    drop(exec);
    drop(graph);
    cudadrv::graph::graph_mem_trim(device)?;
    Ok(())
}

fn host_node_closure_runs_and_is_freed() -> TestResult {
    require_gpu()?;
    let ctx = Context::primary(Device::get(0)?)?;
    let stream = Stream::non_blocking(&ctx)?;
    let count = Arc::new(AtomicU32::new(0));
    let graph = Graph::new(&ctx)?;
    let c = Arc::clone(&count);
    let node = graph.add_host_node(&[], move || {
        c.fetch_add(1, Ordering::SeqCst);
    })?;
    check_eq(
        node.node_type()?,
        CUgraphNodeType::CU_GRAPH_NODE_TYPE_HOST,
        "node type",
    )?;
    let exec = graph.instantiate(InstantiateFlags::empty())?;
    for _ in 0..3 {
        exec.launch(&stream)?;
    }
    stream.synchronize()?;
    check_eq(count.load(Ordering::SeqCst), 3, "host node runs")?;
    check_eq(
        Arc::strong_count(&count),
        2,
        "closure alive while the graph lives",
    )?;
    drop(exec);
    drop(graph);
    // The driver drops the closure (a user object) asynchronously.
    let start = Instant::now();
    while Arc::strong_count(&count) != 1 && start.elapsed() < Duration::from_secs(5) {
        ctx.synchronize()?;
        std::thread::sleep(Duration::from_millis(10));
    }
    check_eq(
        Arc::strong_count(&count),
        1,
        "closure freed after graph and exec are dropped",
    )
}

fn other_nodes_and_capture_into_graph() -> TestResult {
    require_gpu()?;
    let ctx = Context::primary(Device::get(0)?)?;
    let module = kernels_module(&ctx)?;
    let write_value = module.function("write_value")?;
    let fill = module.function("fill")?;
    let mut stream = Stream::non_blocking(&ctx)?;
    let a = DeviceBuffer::<u32>::zeroed(&ctx, 1)?;
    let b = DeviceBuffer::<u32>::zeroed(&ctx, 1024)?;
    let event = Event::new(&ctx, EventFlags::DISABLE_TIMING)?;
    let one = LaunchConfig::new(1, 1);

    let child = Graph::new(&ctx)?;
    // SAFETY: `write_value` writes one u32 of `a`, which outlives `exec`.
    unsafe { child.add_kernel_node(&[], &write_value, &one, &(a.as_arg(), 42u32))? };
    let graph = Graph::new(&ctx)?;
    let start = graph.add_empty_node(&[])?;
    let child_node = graph.add_child_graph_node(&[start], &child)?;
    drop(child); // the node holds a copy
    check_eq(
        graph.child_graph(child_node)?.node_count()?,
        1,
        "nodes in the child copy",
    )?;
    // The graph borrows `event`.
    let record = graph.add_event_record_node(&[child_node], &event)?;
    let types = [
        (start, CUgraphNodeType::CU_GRAPH_NODE_TYPE_EMPTY),
        (child_node, CUgraphNodeType::CU_GRAPH_NODE_TYPE_GRAPH),
        (record, CUgraphNodeType::CU_GRAPH_NODE_TYPE_EVENT_RECORD),
    ];
    for (node, want) in types {
        check_eq(node.node_type()?, want, "node type")?;
    }

    // Capture a launch into this graph, after the event record node.
    let capture = CaptureToGraph::begin(
        &graph,
        &mut stream,
        &[record],
        None,
        CaptureMode::ThreadLocal,
    )?;
    // On the capture's stream; the graph borrows `fill`.
    let cfg = LaunchConfig::new(4, 256);
    // SAFETY: `fill` writes b[0..1024]; `b` outlives `exec`.
    unsafe { capture.launch(&fill, &cfg, &(b.as_arg(), 1024u32))? };
    capture.end()?;
    check_eq(
        graph.node_count()?,
        4,
        "nodes after capturing into the graph",
    )?;

    let exec = graph.instantiate_with_upload(InstantiateFlags::empty(), Some(&stream))?;
    exec.launch(&stream)?;
    stream.synchronize()?;
    event.synchronize()?;
    check_eq(read_u32(&a)?, vec![42], "child graph kernel")?;
    let got = read_u32(&b)?;
    check(
        got.iter().enumerate().all(|(i, &v)| v == 3 * i as u32 + 1),
        || "captured fill computed wrong values".into(),
    )
}

/// The 13.1 graph and node ids: before 13.1 each call is `DriverTooOld` naming it; from
/// 13.1 on, two nodes of a graph have distinct local ids, two graphs distinct ids, and
/// a node is in its own graph and not in another.
fn graph_and_node_ids_match_the_driver() -> TestResult {
    require_gpu()?;
    let ctx = Context::primary(Device::get(0)?)?;
    let version = u32::try_from(cudadrv::driver::driver_version()?).unwrap_or(0);
    let (g1, g2) = (Graph::new(&ctx)?, Graph::new(&ctx)?);
    let a = g1.add_empty_node(&[])?;
    let b = g1.add_empty_node(&[a])?;
    let exec = g1.instantiate(InstantiateFlags::empty())?;
    if version < 13010 {
        println!("    driver {version}: the 13.1 id calls must be DriverTooOld");
        let too_old = |e: Option<Error>, call: &str| -> TestResult {
            match e {
                Some(Error::DriverTooOld {
                    call: c,
                    needs: 13010,
                    driver: d,
                }) if c == call && d == version => Ok(()),
                other => Err(format!("{call}: expected DriverTooOld, got {other:?}").into()),
            }
        };
        too_old(g1.id().err(), "cuGraphGetId")?;
        too_old(exec.id().err(), "cuGraphExecGetId")?;
        too_old(a.local_id().err(), "cuGraphNodeGetLocalId")?;
        too_old(a.tools_id().err(), "cuGraphNodeGetToolsId")?;
        return too_old(a.is_in(&g1).err(), "cuGraphNodeGetContainingGraph");
    }
    let (ia, ib) = (a.local_id()?, b.local_id()?);
    check(ia != ib, || format!("two nodes share local id {ia}"))?;
    check(g1.id()? != g2.id()?, || {
        "two graphs share an id".to_string()
    })?;
    exec.id()?;
    check(a.tools_id()? != b.tools_id()?, || {
        "two nodes share a tools id".to_string()
    })?;
    check(a.is_in(&g1)?, || "a node is not in its graph".to_string())?;
    check(!a.is_in(&g2)?, || "a node is in another graph".to_string())
}
