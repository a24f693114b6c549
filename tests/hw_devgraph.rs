//! Hardware tests of device graph launch (Programming Guide 4.2.6).
//!
//! The kernels are `ptx/devrt/src/graph_launch.rs` (in `devrt.ptx`, linked with
//! `libcudadevrt.a`): `dg_record` stamps `%globaltimer` around a busy wait and records
//! `cudaGetCurrentGraphExec()`; `dg_launch` launches up to three device graphs
//! (fire-and-forget, sibling, tail) from a kernel node of a host-launched graph;
//! `dg_tick` and `dg_chain_link` tail-launch their own graph until a device-side counter
//! runs out. Every record is `[start, end, current_graph_exec, ran, code_ff, code_sib,
//! code_tail, 0]`.
//!
//! - The up-front device-graph checks agree with the driver, node type by node type
//!   (the driver's verdict comes from a raw `cuGraphInstantiateWithFlags`).
//! - A fire-and-forget launch runs the graph; a tail launch starts only after the
//!   launching graph and its fire-and-forget work have finished (stamps); a sibling
//!   launch is not waited for by the tail launch but is by the host stream.
//! - A scheduler graph relaunches itself until its counter runs out, and a 256-link
//!   chain of self-relaunches computes the right data.

use std::ptr;

use cuda_workspace::{
    Outcome, TestResult, check, check_eq, hw_tests, link_with_devrt, ptx, require_sm, run_suite,
};
use cudadrv::graph::{DeviceGraphHandle, Graph, GraphExec, InstantiateFlags};
use cudadrv::launch::{LaunchConfig, launch};
use cudadrv::{
    Context, Device, DeviceBuffer, Error, Event, EventFlags, Function, Module, PinnedHostBuffer,
    Stream, StreamFlags,
};
use cudadrv_sys::{CUDA_MEMCPY3D, CUgraphInstantiate_flags, CUmemorytype, CUresult};

fn main() {
    run_suite(
        "hw_devgraph",
        hw_tests![
            device_launch_checks_agree_with_the_driver,
            device_handle_needs_device_launch,
            fire_and_forget_launch_runs_the_graph,
            tail_launch_waits_for_launcher_and_its_fire_and_forget_work,
            sibling_launch_is_not_waited_for_by_the_tail_launch,
            scheduler_graph_relaunches_itself_until_its_counter_runs_out,
            chain_of_256_self_relaunches,
            current_graph_exec_outside_a_device_graph_is_zero,
            device_launch_from_a_stream_kernel_is_refused,
        ],
    );
}

/// `u64`s per record (`RECORD_WORDS` in graph_launch.rs).
const W: usize = 8;
/// The launch code of a launch that was not asked for (`NOT_LAUNCHED`).
const NOT_LAUNCHED: u64 = u64::MAX;

/// One record as the kernels write it.
#[derive(Clone, Copy, Debug)]
struct Rec {
    start: u64,
    end: u64,
    current: u64,
    ran: u64,
    code_ff: u64,
    code_sib: u64,
    code_tail: u64,
}

impl Rec {
    fn from(w: &[u64]) -> Self {
        Self {
            start: w[0],
            end: w[1],
            current: w[2],
            ran: w[3],
            code_ff: w[4],
            code_sib: w[5],
            code_tail: w[6],
        }
    }
}

struct Fixture {
    ctx: Context,
    stream: Stream,
    record: Function,
    launcher: Function,
    tick: Function,
    chain: Function,
    _module: Module,
}

fn fixture() -> Result<Fixture, Outcome> {
    require_sm(9, 0)?;
    let ctx = Context::primary(Device::get(0)?)?;
    let module = link_with_devrt(&ctx, ptx::DEVRT, "devrt.ptx")?;
    Ok(Fixture {
        stream: Stream::new(&ctx, StreamFlags::NON_BLOCKING)?,
        record: module.function("dg_record")?,
        launcher: module.function("dg_launch")?,
        tick: module.function("dg_tick")?,
        chain: module.function("dg_chain_link")?,
        _module: module,
        ctx,
    })
}

fn records(buf: &DeviceBuffer<u64>) -> Result<Vec<Rec>, Error> {
    let mut v = vec![0u64; buf.len()];
    buf.copy_to_host(&mut v)?;
    Ok(v.chunks(W).map(Rec::from).collect())
}

/// A graph of one `dg_record(rec, busy_ns)` node.
fn record_graph<'a>(
    f: &'a Fixture,
    rec: &'a DeviceBuffer<u64>,
    busy_ns: u64,
) -> Result<Graph<'a>, Error> {
    let g = Graph::new(&f.ctx)?;
    let cfg = LaunchConfig::new(1, 1);
    // SAFETY: dg_record(rec: *mut u64, busy_ns: u64); `rec` holds a record and lives
    // as long as the graph (`'a`).
    unsafe { g.add_kernel_node(&[], &f.record, &cfg, &(rec.as_arg(), busy_ns))? };
    Ok(g)
}

/// A graph of one `dg_launch(rec, busy_ns, ff, sib, tail)` node, instantiated for the
/// host.
fn launcher_exec<'a>(
    f: &'a Fixture,
    rec: &'a DeviceBuffer<u64>,
    busy_ns: u64,
    [ff, sib, tail]: [Option<DeviceGraphHandle>; 3],
) -> Result<GraphExec<'a>, Error> {
    let g = Graph::new(&f.ctx)?;
    let cfg = LaunchConfig::new(1, 1);
    let h = |x: Option<DeviceGraphHandle>| x.map_or(0, DeviceGraphHandle::as_u64);
    // SAFETY: dg_launch(rec, busy_ns, ff, sib, tail: u64); `rec` holds a record; the
    // handles are uploaded device graphs that the callers keep alive past the
    // synchronize that ends each test.
    unsafe {
        g.add_kernel_node(
            &[],
            &f.launcher,
            &cfg,
            &(rec.as_arg(), busy_ns, h(ff), h(sib), h(tail)),
        )?
    };
    g.instantiate(InstantiateFlags::empty())
}

/// What the driver says about instantiating `g` for device launch.
fn driver_accepts(g: &Graph<'_>) -> Result<bool, Error> {
    let cu = cudadrv_sys::driver()?;
    let mut exec = ptr::null_mut();
    let flags = CUgraphInstantiate_flags::CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH.0 as u64;
    // SAFETY: a live graph whose context the caller made current; valid out-pointer.
    let r = unsafe { (cu.cuGraphInstantiate()?)(&mut exec, g.as_raw(), flags) };
    if r == CUresult::CUDA_SUCCESS {
        // SAFETY: the executable graph was just made and is not used again.
        let d = unsafe { (cu.cuGraphExecDestroy()?)(exec) };
        if d != CUresult::CUDA_SUCCESS {
            println!("      cuGraphExecDestroy: {d}");
        }
        Ok(true)
    } else {
        println!("      driver: {r}");
        Ok(false)
    }
}

fn device_launch_checks_agree_with_the_driver() -> TestResult {
    let f = fixture()?;
    // The raw instantiate below needs the context current on this thread.
    f.ctx.bind()?;
    let rec = DeviceBuffer::<u64>::zeroed(&f.ctx, W)?;
    let dev = DeviceBuffer::<u32>::zeroed(&f.ctx, 64)?;
    let dev2 = DeviceBuffer::<u32>::zeroed(&f.ctx, 64)?;
    let pinned = PinnedHostBuffer::<u32>::zeroed(&f.ctx, 64)?;
    let pageable = vec![0u32; 64];
    let event = Event::new(&f.ctx, EventFlags::DISABLE_TIMING)?;
    let mut disagreements = Vec::new();
    let mut judge = |what: &str, g: &Graph<'_>| -> TestResult {
        let ours = g.check_device_launchable();
        let theirs = driver_accepts(g)?;
        println!(
            "    {what}: cudadrv {}, driver {}",
            match &ours {
                Ok(()) => "accepts".to_string(),
                Err(e) => format!("refuses ({e})"),
            },
            if theirs { "accepts" } else { "refuses" }
        );
        if let Err(e) = &ours {
            check(matches!(e, Error::NotDeviceLaunchable { .. }), || {
                format!("{what}: unexpected error {e}")
            })?;
        }
        if ours.is_ok() != theirs {
            disagreements.push(what.to_string());
        }
        Ok(())
    };

    judge("kernel node", &record_graph(&f, &rec, 0)?)?;
    let g = Graph::new(&f.ctx)?;
    g.add_memset_d32_node(&[], &dev, 7)?;
    judge("memset node", &g)?;
    let g = Graph::new(&f.ctx)?;
    g.add_copy_node(&[], &dev, &dev2)?;
    judge("device-to-device memcpy node", &g)?;
    let g = Graph::new(&f.ctx)?;
    g.add_copy_from_host_node(&[], &dev, &pinned)?;
    judge("pinned-host-to-device memcpy node", &g)?;
    let g = Graph::new(&f.ctx)?;
    let copy = CUDA_MEMCPY3D {
        srcMemoryType: CUmemorytype::CU_MEMORYTYPE_HOST,
        srcHost: pageable.as_ptr().cast(),
        dstMemoryType: CUmemorytype::CU_MEMORYTYPE_DEVICE,
        dstDevice: dev.as_raw(),
        WidthInBytes: 256,
        Height: 1,
        Depth: 1,
        ..CUDA_MEMCPY3D::default()
    };
    // SAFETY: `pageable` and `dev` hold 256 bytes and outlive the graph (never launched).
    unsafe { g.add_memcpy_node(&[], &copy)? };
    judge("pageable-host-to-device memcpy node", &g)?;
    let g = Graph::new(&f.ctx)?;
    g.add_empty_node(&[])?;
    judge("empty node", &g)?;
    let child = record_graph(&f, &rec, 0)?;
    let g = Graph::new(&f.ctx)?;
    g.add_child_graph_node(&[], &child)?;
    judge("child graph of a kernel node", &g)?;
    let bad_child = Graph::new(&f.ctx)?;
    bad_child.add_host_node(&[], || {})?;
    let g = Graph::new(&f.ctx)?;
    g.add_child_graph_node(&[], &bad_child)?;
    judge("child graph of a host node", &g)?;
    let g = Graph::new(&f.ctx)?;
    g.add_host_node(&[], || {})?;
    judge("host node", &g)?;
    let g = Graph::new(&f.ctx)?;
    g.add_event_record_node(&[], &event)?;
    judge("event record node", &g)?;
    let g = Graph::new(&f.ctx)?;
    g.add_event_wait_node(&[], &event)?;
    judge("event wait node", &g)?;
    let g = Graph::new(&f.ctx)?;
    let (alloc, dptr) = g.add_mem_alloc_node(&[], 1 << 20)?;
    // SAFETY: frees the allocation the node before it made.
    unsafe { g.add_mem_free_node(&[alloc], dptr)? };
    judge("memory alloc and free nodes", &g)?;
    let g = Graph::new(&f.ctx)?;
    let handle = g.create_conditional_handle(Some(0))?;
    let (_node, body) = g.add_if_node(&[], handle)?;
    body.add_empty_node(&[])?;
    judge("conditional IF node", &g)?;

    // The checks run in instantiate too, and the flag combination is refused.
    let g = Graph::new(&f.ctx)?;
    g.add_host_node(&[], || {})?;
    match g.instantiate(InstantiateFlags::DEVICE_LAUNCH) {
        Err(Error::NotDeviceLaunchable { .. }) => {}
        other => {
            return Err(Outcome::Fail(format!(
                "host node instantiated: {:?}",
                other.err()
            )));
        }
    }
    let g = record_graph(&f, &rec, 0)?;
    match g.instantiate(InstantiateFlags::DEVICE_LAUNCH | InstantiateFlags::AUTO_FREE_ON_LAUNCH) {
        Err(Error::NotDeviceLaunchable { rule, .. }) => println!("    flags refused: {rule}"),
        other => return Err(Outcome::Fail(format!("flags accepted: {:?}", other.err()))),
    }
    check(disagreements.is_empty(), || {
        format!(
            "cudadrv and the driver disagree on: {}",
            disagreements.join(", ")
        )
    })
}

fn device_handle_needs_device_launch() -> TestResult {
    let f = fixture()?;
    let rec = DeviceBuffer::<u64>::zeroed(&f.ctx, W)?;
    let g = record_graph(&f, &rec, 0)?;
    let plain = g.instantiate(InstantiateFlags::empty())?;
    check(
        matches!(plain.device_handle(), Err(Error::InvalidArgument(_))),
        || "device_handle of a host-only graph".into(),
    )?;
    let dev = g.instantiate_for_device(&f.stream)?;
    check_eq(
        dev.flags()?.contains(InstantiateFlags::DEVICE_LAUNCH),
        true,
        "DEVICE_LAUNCH flag",
    )?;
    let h = dev.device_handle()?;
    check_eq(h.as_u64(), dev.as_raw() as u64, "handle value")?;
    // A device graph launches from the host too.
    dev.launch(&f.stream)?;
    f.stream.synchronize()?;
    let r = records(&rec)?[0];
    check_eq(r.ran, 1, "ran")?;
    check_eq(
        r.current,
        h.as_u64(),
        "cudaGetCurrentGraphExec in a host-launched device graph",
    )
}

fn fire_and_forget_launch_runs_the_graph() -> TestResult {
    let f = fixture()?;
    let recs = DeviceBuffer::<u64>::zeroed(&f.ctx, 2 * W)?;
    let child_rec = DeviceBuffer::<u64>::zeroed(&f.ctx, W)?;
    let child = record_graph(&f, &child_rec, 0)?;
    let child = child.instantiate_for_device(&f.stream)?;
    let launcher_rec = &recs;
    let exec = launcher_exec(
        &f,
        launcher_rec,
        0,
        [Some(child.device_handle()?), None, None],
    )?;
    exec.launch(&f.stream)?;
    f.stream.synchronize()?;
    let l = records(&recs)?[0];
    let c = records(&child_rec)?[0];
    println!(
        "    launcher current_graph_exec {:#x}; child started {} ns after the launcher",
        l.current,
        c.start as i64 - l.start as i64
    );
    check_eq(l.ran, 1, "launcher ran")?;
    check_eq(l.code_ff, 0, "cudaGraphLaunch(fire-and-forget) code")?;
    check_eq(
        (l.code_sib, l.code_tail),
        (NOT_LAUNCHED, NOT_LAUNCHED),
        "other codes",
    )?;
    check_eq(c.ran, 1, "fire-and-forget graph ran")?;
    check_eq(
        c.current,
        child.as_raw() as u64,
        "child's cudaGetCurrentGraphExec",
    )?;
    check(c.start >= l.start, || {
        "child started before its launcher".into()
    })
}

fn tail_launch_waits_for_launcher_and_its_fire_and_forget_work() -> TestResult {
    let f = fixture()?;
    let (l_rec, ff_rec, t_rec) = (
        DeviceBuffer::<u64>::zeroed(&f.ctx, W)?,
        DeviceBuffer::<u64>::zeroed(&f.ctx, W)?,
        DeviceBuffer::<u64>::zeroed(&f.ctx, W)?,
    );
    // The fire-and-forget graph runs 1 ms, longer than the launcher's 300 us, so the
    // tail launch has to wait for it, not just for the launcher.
    let ff = record_graph(&f, &ff_rec, 1_000_000)?.instantiate_for_device(&f.stream)?;
    let tail = record_graph(&f, &t_rec, 0)?.instantiate_for_device(&f.stream)?;
    let exec = launcher_exec(
        &f,
        &l_rec,
        300_000,
        [Some(ff.device_handle()?), None, Some(tail.device_handle()?)],
    )?;
    exec.launch(&f.stream)?;
    f.stream.synchronize()?;
    let (l, a, t) = (
        records(&l_rec)?[0],
        records(&ff_rec)?[0],
        records(&t_rec)?[0],
    );
    let rel = |x: u64| (x as i64 - l.start as i64) as f64 / 1e3;
    println!(
        "    us from the launcher's start: launcher ends {:.1}; fire-and-forget {:.1}..{:.1}; \
         tail starts {:.1}",
        rel(l.end),
        rel(a.start),
        rel(a.end),
        rel(t.start)
    );
    check_eq((l.code_ff, l.code_tail), (0, 0), "launch codes")?;
    check_eq((a.ran, t.ran), (1, 1), "both graphs ran")?;
    check(a.start < l.end, || {
        "the fire-and-forget graph did not start while its launcher ran".into()
    })?;
    check(t.start >= l.end, || {
        "tail launch started before the launcher ended".into()
    })?;
    check(t.start >= a.end, || {
        "tail launch started before the launcher's fire-and-forget work ended".into()
    })
}

fn sibling_launch_is_not_waited_for_by_the_tail_launch() -> TestResult {
    let f = fixture()?;
    let (l_rec, s_rec, t_rec) = (
        DeviceBuffer::<u64>::zeroed(&f.ctx, W)?,
        DeviceBuffer::<u64>::zeroed(&f.ctx, W)?,
        DeviceBuffer::<u64>::zeroed(&f.ctx, W)?,
    );
    let sib = record_graph(&f, &s_rec, 2_000_000)?.instantiate_for_device(&f.stream)?;
    let tail = record_graph(&f, &t_rec, 0)?.instantiate_for_device(&f.stream)?;
    let exec = launcher_exec(
        &f,
        &l_rec,
        0,
        [
            None,
            Some(sib.device_handle()?),
            Some(tail.device_handle()?),
        ],
    )?;
    exec.launch(&f.stream)?;
    f.stream.synchronize()?;
    // The host stream's work includes the sibling: it has run by now.
    let (l, s, t) = (
        records(&l_rec)?[0],
        records(&s_rec)?[0],
        records(&t_rec)?[0],
    );
    let rel = |x: u64| (x as i64 - l.start as i64) as f64 / 1e3;
    println!(
        "    us from the launcher's start: sibling {:.1}..{:.1}; tail starts {:.1}",
        rel(s.start),
        rel(s.end),
        rel(t.start)
    );
    check_eq((l.code_sib, l.code_tail), (0, 0), "launch codes")?;
    check_eq(s.ran, 1, "sibling ran before the stream completed")?;
    check_eq(t.ran, 1, "tail ran")?;
    check(t.start < s.end, || {
        "the tail launch waited for the sibling graph (it should not)".into()
    })
}

fn scheduler_graph_relaunches_itself_until_its_counter_runs_out() -> TestResult {
    const LIMIT: u32 = 10;
    let f = fixture()?;
    let recs = DeviceBuffer::<u64>::zeroed(&f.ctx, W * LIMIT as usize)?;
    let count = DeviceBuffer::<u32>::zeroed(&f.ctx, 1)?;
    let g = Graph::new(&f.ctx)?;
    // SAFETY: dg_tick(recs, count, limit); `recs` holds LIMIT records, `count` one word;
    // both outlive the graph's runs (synchronized below).
    unsafe {
        g.add_kernel_node(
            &[],
            &f.tick,
            &LaunchConfig::new(1, 1),
            &(recs.as_arg(), count.as_arg(), LIMIT),
        )?
    };
    let exec = g.instantiate_for_device(&f.stream)?;
    exec.launch(&f.stream)?;
    f.stream.synchronize()?;
    let mut c = [0u32];
    count.copy_to_host(&mut c)?;
    check_eq(c[0], LIMIT, "runs")?;
    let r = records(&recs)?;
    let me = exec.as_raw() as u64;
    for (k, x) in r.iter().enumerate() {
        check_eq(x.ran, 1, &format!("run {k} ran"))?;
        check_eq(x.current, me, &format!("run {k}: cudaGetCurrentGraphExec"))?;
        let want = if k + 1 < LIMIT as usize {
            0
        } else {
            NOT_LAUNCHED
        };
        check_eq(x.code_tail, want, &format!("run {k}: relaunch code"))?;
        if k > 0 {
            check(x.start >= r[k - 1].end, || {
                format!("run {k} overlaps run {}", k - 1)
            })?;
        }
    }
    let mut gaps: Vec<u64> = r.windows(2).map(|w| w[1].start - w[0].end).collect();
    gaps.sort_unstable();
    println!(
        "    {LIMIT} runs from one host launch; gap between runs: median {:.2} us",
        gaps[gaps.len() / 2] as f64 / 1e3
    );
    Ok(())
}

fn chain_of_256_self_relaunches() -> TestResult {
    const LINKS: u32 = 256;
    const N: u32 = 132 * 256;
    let f = fixture()?;
    let data = DeviceBuffer::<u32>::from_slice(&f.ctx, &(0..N).collect::<Vec<_>>())?;
    let remaining = DeviceBuffer::<u32>::from_slice(&f.ctx, &[LINKS])?;
    let g = Graph::new(&f.ctx)?;
    // SAFETY: dg_chain_link(data, n, remaining); `data` holds N words, `remaining` one;
    // both outlive the chain (synchronized below).
    unsafe {
        g.add_kernel_node(
            &[],
            &f.chain,
            &LaunchConfig::new(132, 256),
            &(data.as_arg(), N, remaining.as_arg()),
        )?
    };
    let exec = g.instantiate_for_device(&f.stream)?;
    let (t0, t1) = (
        Event::new(&f.ctx, EventFlags::empty())?,
        Event::new(&f.ctx, EventFlags::empty())?,
    );
    t0.record(&f.stream)?;
    exec.launch(&f.stream)?;
    t1.record(&f.stream)?;
    f.stream.synchronize()?;
    let mut rem = [0u32];
    remaining.copy_to_host(&mut rem)?;
    check_eq(rem[0], 0, "remaining (high bit set: a relaunch failed)")?;
    let mut got = vec![0u32; N as usize];
    data.copy_to_host(&mut got)?;
    if let Some(i) = (0..N as usize).find(|&i| got[i] != i as u32 + LINKS) {
        return Err(Outcome::Fail(format!(
            "data[{i}] = {}, expected {}",
            got[i],
            i as u32 + LINKS
        )));
    }
    let ms = f64::from(Event::elapsed_ms(&t0, &t1)?);
    println!(
        "    {LINKS} links in {:.3} ms ({:.2} us/link, one host launch)",
        ms,
        ms * 1e3 / f64::from(LINKS)
    );
    Ok(())
}

fn current_graph_exec_outside_a_device_graph_is_zero() -> TestResult {
    let f = fixture()?;
    let rec = DeviceBuffer::<u64>::zeroed(&f.ctx, W)?;
    let cfg = LaunchConfig::new(1, 1).stream(&f.stream);
    // SAFETY: dg_record(rec, busy_ns); `rec` holds a record; synchronized below.
    unsafe { launch(&f.record, &cfg, &(rec.as_arg(), 0u64))? };
    f.stream.synchronize()?;
    let r = records(&rec)?[0];
    check_eq(
        (r.ran, r.current),
        (1, 0),
        "(ran, current) in a stream launch",
    )?;
    let exec = record_graph(&f, &rec, 0)?.instantiate(InstantiateFlags::empty())?;
    exec.launch(&f.stream)?;
    f.stream.synchronize()?;
    let r = records(&rec)?[0];
    println!(
        "    in a host-only graph: cudaGetCurrentGraphExec = {:#x}",
        r.current
    );
    check_eq(r.ran, 1, "ran in a host-only graph")
}

/// Last: a kernel that calls `cudaGraphLaunch`, launched into a stream instead of as a
/// graph node, is refused at launch (driver 580: `CUDA_ERROR_NOT_SUPPORTED`), and the
/// context stays usable.
fn device_launch_from_a_stream_kernel_is_refused() -> TestResult {
    let f = fixture()?;
    let rec = DeviceBuffer::<u64>::zeroed(&f.ctx, W)?;
    let child_rec = DeviceBuffer::<u64>::zeroed(&f.ctx, W)?;
    let child = record_graph(&f, &child_rec, 0)?.instantiate_for_device(&f.stream)?;
    let h = child.device_handle()?.as_u64();
    let cfg = LaunchConfig::new(1, 1).stream(&f.stream);
    // SAFETY: dg_launch(rec, busy_ns, ff, sib, tail); `rec` holds a record; the child
    // outlives the synchronize.
    let r = unsafe { launch(&f.launcher, &cfg, &(rec.as_arg(), 0u64, h, 0u64, 0u64)) };
    println!("    stream launch of a kernel that calls cudaGraphLaunch: {r:?}");
    check(r.is_err(), || "the stream launch was accepted".into())?;
    f.stream.synchronize()?;
    check_eq(records(&rec)?[0].ran, 0, "refused launcher ran")?;
    // The context still works.
    let g = record_graph(&f, &child_rec, 0)?.instantiate(InstantiateFlags::empty())?;
    g.launch(&f.stream)?;
    f.stream.synchronize()?;
    check_eq(records(&child_rec)?[0].ran, 1, "a later graph ran")
}
