//! `cudadrv::nccl` against a mock driver and a mock NCCL, on the CPU and under Miri:
//! what is refused before NCCL is called, what each call passes, the waits of a
//! non-blocking communicator (NCCL reports its work in progress for a few polls), the
//! group's settle before it returns, the in-process agreement check, the timeout that
//! aborts, and the drop's finalize and destroy.
//!
//! One `#[test]` drives the checks in order (the driver and NCCL tables are
//! process-wide).

#![cfg(not(feature = "linked"))]

mod mock_common;
use mock_common::*;

use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use cudadrv::nccl::{self, Comm, Config, ReduceOp, UniqueId};
use cudadrv::{Context, Device, DeviceBuffer, Error, Stream};
use cudadrv_sys::nccl::{
    NcclApi, ncclComm_t, ncclConfig_t, ncclDataType_t, ncclRedOp_t, ncclResult_t, ncclUniqueId,
};
use cudadrv_sys::{CUdeviceptr, CUresult, CUstream, CUstreamCaptureStatus, Library};

/// The version `ncclGetVersion` reports.
static VERSION: AtomicI32 = AtomicI32::new(22809);
/// Polls of `ncclCommGetAsyncError` left that answer `ncclInProgress`.
static PENDING: AtomicU32 = AtomicU32::new(0);
/// Every poll answers `ncclInProgress` (a peer that never comes).
static HANG: AtomicBool = AtomicBool::new(false);
/// A communicator leaked mid-flight (never dropped).
static LEAKED: std::sync::atomic::AtomicPtr<Comm> =
    std::sync::atomic::AtomicPtr::new(std::ptr::null_mut());
/// The streams' work is done (`cuStreamQuery`).
static STREAM_DONE: AtomicBool = AtomicBool::new(true);

const IN_PROGRESS: ncclResult_t = ncclResult_t::ncclInProgress;
const SUCCESS: ncclResult_t = ncclResult_t::ncclSuccess;

// The driver: device memory as plain addresses, streams never capturing.
unsafe extern "C" fn cu_mem_alloc(p: *mut CUdeviceptr, bytes: usize) -> CUresult {
    let addr = next::<u8>() as u64;
    log(format!("cuMemAlloc {bytes}"));
    // SAFETY: valid out-pointer (the crate's call).
    unsafe { *p = addr };
    // Room for the allocation: later handles start past it.
    NEXT.fetch_add(bytes.next_multiple_of(256), Ordering::Relaxed);
    OK
}
unsafe extern "C" fn cu_mem_free(_: CUdeviceptr) -> CUresult {
    OK
}
unsafe extern "C" fn cu_stream_is_capturing(
    _: CUstream,
    s: *mut CUstreamCaptureStatus,
) -> CUresult {
    // SAFETY: valid out-pointer.
    unsafe { *s = CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE };
    OK
}
unsafe extern "C" fn cu_stream_query(_: CUstream) -> CUresult {
    if STREAM_DONE.load(Ordering::Relaxed) {
        OK
    } else {
        CUresult::CUDA_ERROR_NOT_READY
    }
}
unsafe extern "C" fn cu_device_get_count(n: *mut c_int) -> CUresult {
    // SAFETY: valid out-pointer.
    unsafe { *n = 1 };
    OK
}

mock_entries! {
    fn driver_entry {
        "cuMemAlloc" => cu_mem_alloc as unsafe extern "C" fn(_, _) -> _,
        "cuMemFree" => cu_mem_free as unsafe extern "C" fn(_) -> _,
        "cuStreamIsCapturing" => cu_stream_is_capturing as unsafe extern "C" fn(_, _) -> _,
        "cuStreamQuery" => cu_stream_query as unsafe extern "C" fn(_) -> _,
        "cuDeviceGetCount" => cu_device_get_count as unsafe extern "C" fn(_) -> _,
    }
}

// NCCL.
unsafe extern "C" fn get_version(v: *mut c_int) -> ncclResult_t {
    // SAFETY: valid out-pointer.
    unsafe { *v = VERSION.load(Ordering::Relaxed) };
    SUCCESS
}
unsafe extern "C" fn get_unique_id(id: *mut ncclUniqueId) -> ncclResult_t {
    // SAFETY: valid out-pointer.
    unsafe { (*id).internal = [7 as c_char; 128] };
    SUCCESS
}
unsafe extern "C" fn init_rank_config(
    comm: *mut ncclComm_t,
    n: c_int,
    _id: ncclUniqueId,
    rank: c_int,
    cfg: *mut ncclConfig_t,
) -> ncclResult_t {
    // SAFETY: valid pointers (the crate's call).
    let blocking = unsafe { (*cfg).blocking };
    log(format!("init {rank}/{n} blocking {blocking}"));
    // SAFETY: valid out-pointer.
    unsafe { *comm = next() };
    PENDING.store(3, Ordering::Relaxed);
    IN_PROGRESS
}
unsafe extern "C" fn get_async_error(_: ncclComm_t, state: *mut ncclResult_t) -> ncclResult_t {
    let waiting = HANG.load(Ordering::Relaxed)
        || PENDING
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |p| p.checked_sub(1))
            .is_ok();
    let s = if waiting { IN_PROGRESS } else { SUCCESS };
    // SAFETY: valid out-pointer.
    unsafe { *state = s };
    SUCCESS
}
unsafe extern "C" fn all_reduce(
    s: *const c_void,
    r: *mut c_void,
    n: usize,
    t: ncclDataType_t,
    op: ncclRedOp_t,
    _: ncclComm_t,
    _: CUstream,
) -> ncclResult_t {
    log(format!(
        "allreduce {} {} {n} type {} op {}",
        std::ptr::eq(s, r.cast_const()),
        n,
        t.0,
        op.0
    ));
    PENDING.store(2, Ordering::Relaxed);
    IN_PROGRESS
}
unsafe extern "C" fn all_gather(
    _: *const c_void,
    _: *mut c_void,
    n: usize,
    _: ncclDataType_t,
    _: ncclComm_t,
    _: CUstream,
) -> ncclResult_t {
    log(format!("allgather {n}"));
    SUCCESS
}
unsafe extern "C" fn group_start() -> ncclResult_t {
    log("groupstart".into());
    SUCCESS
}
unsafe extern "C" fn group_end() -> ncclResult_t {
    log("groupend".into());
    PENDING.store(4, Ordering::Relaxed);
    IN_PROGRESS
}
unsafe extern "C" fn comm_abort(_: ncclComm_t) -> ncclResult_t {
    log("abort".into());
    SUCCESS
}
unsafe extern "C" fn comm_finalize(_: ncclComm_t) -> ncclResult_t {
    log("finalize".into());
    PENDING.store(1, Ordering::Relaxed);
    IN_PROGRESS
}
unsafe extern "C" fn comm_destroy(_: ncclComm_t) -> ncclResult_t {
    log("destroy".into());
    SUCCESS
}

fn nccl_entry(name: &str) -> *mut c_void {
    match name {
        "ncclGetVersion" => get_version as unsafe extern "C" fn(_) -> _ as *mut c_void,
        "ncclGetUniqueId" => get_unique_id as unsafe extern "C" fn(_) -> _ as *mut c_void,
        "ncclCommInitRankConfig" => {
            init_rank_config as unsafe extern "C" fn(_, _, _, _, _) -> _ as *mut c_void
        }
        "ncclCommGetAsyncError" => {
            get_async_error as unsafe extern "C" fn(_, _) -> _ as *mut c_void
        }
        "ncclAllReduce" => {
            all_reduce as unsafe extern "C" fn(_, _, _, _, _, _, _) -> _ as *mut c_void
        }
        "ncclAllGather" => all_gather as unsafe extern "C" fn(_, _, _, _, _, _) -> _ as *mut c_void,
        "ncclGroupStart" => group_start as unsafe extern "C" fn() -> _ as *mut c_void,
        "ncclGroupEnd" => group_end as unsafe extern "C" fn() -> _ as *mut c_void,
        "ncclCommAbort" => comm_abort as unsafe extern "C" fn(_) -> _ as *mut c_void,
        "ncclCommFinalize" => comm_finalize as unsafe extern "C" fn(_) -> _ as *mut c_void,
        "ncclCommDestroy" => comm_destroy as unsafe extern "C" fn(_) -> _ as *mut c_void,
        _ => std::ptr::null_mut(),
    }
}

fn has(log: &[String], line: &str) -> bool {
    log.iter().any(|l| l == line)
}

#[test]
fn nccl_against_a_mock() {
    install(driver_entry);
    // SAFETY: every non-null pointer is a function with the signature nccl.h gives the
    // entry of that name, a plain function of this program.
    let table = unsafe { NcclApi::from_resolver(Library::none(), |e| nccl_entry(e.name)) };
    assert!(cudadrv_sys::install_nccl(table).is_ok());

    // A too-old library is refused with both versions.
    VERSION.store(21703, Ordering::Relaxed);
    let e = nccl::version().unwrap_err();
    assert!(
        matches!(
            e,
            Error::NcclTooOld {
                found: 21703,
                needs: 21800
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("NCCL 2.17.3 is too old"), "{e}");
    VERSION.store(22809, Ordering::Relaxed);
    assert_eq!(nccl::version().unwrap(), 22809);

    let ctx = Context::primary(Device::get(0).unwrap()).unwrap();
    let stream = Stream::non_blocking(&ctx).unwrap();
    let id = UniqueId::new().unwrap();
    take_log();

    // Non-blocking initialisation, waited for: three polls in progress, then ready.
    let comm = Comm::init_rank(&ctx, &id, 1, 0, &Config::default()).unwrap();
    assert_eq!(
        PENDING.load(Ordering::Relaxed),
        0,
        "the wait polled until ready"
    );
    assert!(has(&take_log(), "init 0/1 blocking 0"));
    assert_eq!((comm.rank(), comm.size()), (0, 1));

    // Lengths are checked before NCCL is called.
    let a = DeviceBuffer::<f32>::new(&ctx, 100).unwrap();
    let mut b = DeviceBuffer::<f32>::new(&ctx, 99).unwrap();
    take_log();
    let e = comm
        .all_reduce(&a, &mut b, ReduceOp::Sum, &stream)
        .unwrap_err();
    assert!(matches!(e, Error::LengthMismatch { .. }), "{e:?}");
    let e = comm.all_gather(&a, &mut b, &stream).unwrap_err();
    assert!(matches!(e, Error::LengthMismatch { .. }), "{e:?}");
    assert!(comm.send(&a, 1, &stream).is_err(), "peer 1 of 1 rank");
    assert_eq!(take_log(), Vec::<String>::new(), "nothing reached NCCL");

    // A call NCCL reports in progress is waited for before it returns.
    let mut c = DeviceBuffer::<f32>::new(&ctx, 100).unwrap();
    take_log();
    comm.all_reduce(&a, &mut c, ReduceOp::Max, &stream).unwrap();
    assert_eq!(PENDING.load(Ordering::Relaxed), 0);
    comm.all_reduce_in_place(&mut c, ReduceOp::Sum, &stream)
        .unwrap();
    assert_eq!(
        take_log(),
        [
            "allreduce false 100 100 type 7 op 2",
            "allreduce true 100 100 type 7 op 0"
        ]
    );

    // Two ranks of one id in this process (one thread; the mock's initialisation needs
    // no peer): they check each other.
    let id2 = UniqueId::from_bytes(&[9; 128]).unwrap();
    let r0 = Comm::init_rank(&ctx, &id2, 2, 0, &Config::default()).unwrap();
    let r1 = Comm::init_rank(&ctx, &id2, 2, 1, &Config::default()).unwrap();
    let (x0, x1) = (
        DeviceBuffer::<f32>::new(&ctx, 64).unwrap(),
        DeviceBuffer::<f32>::new(&ctx, 64).unwrap(),
    );
    let (mut y0, mut y1) = (
        DeviceBuffer::<f32>::new(&ctx, 128).unwrap(),
        DeviceBuffer::<f32>::new(&ctx, 128).unwrap(),
    );
    take_log();
    // A group: settled (every communicator polled ready) before it returns.
    let (y0r, y1r) = (&mut y0, &mut y1);
    nccl::group(|g| {
        g.all_gather(&r0, &x0, y0r, &stream)?;
        g.all_gather(&r1, &x1, y1r, &stream)
    })
    .unwrap();
    assert_eq!(
        PENDING.load(Ordering::Relaxed),
        0,
        "the group's end was waited for"
    );
    assert_eq!(
        take_log(),
        ["groupstart", "allgather 64", "allgather 64", "groupend"]
    );
    // A direct call inside a group is refused (its borrow would end before NCCL runs it).
    let inside = nccl::group(|_| r0.all_gather(&x0, &mut y0, &stream));
    assert!(
        matches!(inside, Err(Error::InvalidArgument(_))),
        "{inside:?}"
    );
    take_log();
    // A mismatch: rank 1 gathers 32 where rank 0 gathered 64; refused before NCCL, and
    // rank 0, whose part was queued, is aborted with the group.
    let short = DeviceBuffer::<f32>::new(&ctx, 32).unwrap();
    let mut y1s = DeviceBuffer::<f32>::new(&ctx, 64).unwrap();
    take_log();
    let (y0r, y1r) = (&mut y0, &mut y1s);
    let r = nccl::group(|g| {
        g.all_gather(&r0, &x0, y0r, &stream)?;
        g.all_gather(&r1, &short, y1r, &stream)
    });
    assert!(
        matches!(
            r,
            Err(Error::NcclMismatch {
                rank: 1,
                what: "the element count",
                ..
            })
        ),
        "{r:?}"
    );
    assert_eq!(
        take_log(),
        ["groupstart", "allgather 64", "groupend", "abort"]
    );
    assert!(r0.all_gather(&x0, &mut y0, &stream).is_err(), "aborted");
    drop(r0); // aborted: nothing more
    assert_eq!(take_log(), Vec::<String>::new());

    // A wait that outlasts the timeout aborts and says so, within about the timeout.
    let quick = Comm::init_rank(
        &ctx,
        &UniqueId::from_bytes(&[3; 128]).unwrap(),
        1,
        0,
        &Config::with_timeout(Duration::from_millis(50)),
    )
    .unwrap();
    take_log();
    STREAM_DONE.store(false, Ordering::Relaxed);
    HANG.store(true, Ordering::Relaxed);
    let start = Instant::now();
    let e = quick.synchronize(&stream).unwrap_err();
    assert!(matches!(e, Error::Timeout { after_ms: 50, .. }), "{e:?}");
    assert!(start.elapsed() < Duration::from_secs(5));
    assert_eq!(take_log(), ["abort"]);
    HANG.store(false, Ordering::Relaxed);
    STREAM_DONE.store(true, Ordering::Relaxed);
    drop(quick);

    // The drop finalizes (waited for), then destroys.
    drop(r1);
    drop(comm);
    assert_eq!(take_log(), ["finalize", "destroy", "finalize", "destroy"]);
    assert_eq!(PENDING.load(Ordering::Relaxed), 0);

    // Forgotten with a call in flight: the communicator leaks (no finalize, no destroy,
    // no abort), and the buffers the call names are still freed after it (cuMemFree
    // waits for the context's work; the mock's frees return at once).
    let leaked = Comm::init_rank(
        &ctx,
        &UniqueId::from_bytes(&[5; 128]).unwrap(),
        1,
        0,
        &Config::default(),
    )
    .unwrap();
    let mut buf = DeviceBuffer::<f32>::new(&ctx, 100).unwrap();
    take_log();
    leaked
        .all_reduce_in_place(&mut buf, ReduceOp::Sum, &stream)
        .unwrap();
    // Leaked as `mem::forget` would (its drop never runs), but reachable from a static
    // (Miri's leak check).
    LEAKED.store(Box::into_raw(Box::new(leaked)), Ordering::Relaxed);
    drop(buf);
    assert_eq!(take_log(), ["allreduce true 100 100 type 7 op 0"]);
}
