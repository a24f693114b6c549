//! Asynchronous completion against a mock driver, on the CPU and under Miri: every copy
//! queued on a stream lands later, on another thread (a "copy engine" thread per copy,
//! which sleeps before it writes), until a synchronization joins it. Each guard or scope
//! whose safety rests on waiting for that work is then forgotten or leaked mid-flight
//! (`mem::forget`), so a route from safe code to a write into memory Rust owns again
//! shows up as a data race or a use after free under Miri, not as a lucky timing.
//!
//! What it covers (the crate's leak-safety list, see the crate docs' safety section):
//! `HostRegistration::scope` (the registration cannot be leaked: the closure sees only a
//! reference), a device buffer freed with a copy out of it pending (the free waits for
//! the context's work), and an executable graph forgotten with a launch pending (its
//! drop would wait; what it writes is freed only after the free's wait). `kernel::scope`
//! with leaked lanes and `Owned` buffers is `mock_kernels`'.
//!
//! One `#[test]` drives the checks in order (the driver table is process-wide).

#![cfg(not(feature = "linked"))]

mod mock_common;
use mock_common::*;

use std::collections::BTreeMap;
use std::ffi::{c_uint, c_void};
use std::sync::Mutex;
use std::thread::JoinHandle;
use std::time::Duration;

use cudadrv::graph::{Graph, InstantiateFlags};
use cudadrv::memory::dlpack::{
    DLDataType, DLDevice, DLDeviceType, DLManagedTensorVersioned, DLPACK_VERSION, DLTensor,
    DlpackTensor,
};
use cudadrv::memory::registered::{HostRegisterFlags, HostRegistration};
use cudadrv::{Context, Device, DeviceBuffer, Stream};
use cudadrv_sys::{
    CUDA_MEMSET_NODE_PARAMS, CUcontext, CUdeviceptr, CUgraph, CUgraphExec, CUgraphNode, CUresult,
    CUstream,
};

/// Device allocations: address -> backing memory in 8-byte words (real memory, so
/// copies move bytes; aligned as device allocations are).
static DEVICE: Mutex<BTreeMap<u64, Box<[u64]>>> = Mutex::new(BTreeMap::new());
/// Copies in flight: joined by every synchronization.
static IN_FLIGHT: Mutex<Vec<JoinHandle<()>>> = Mutex::new(Vec::new());

/// A host address a copy-engine thread writes or reads later.
struct HostPtr(*mut u8);
// SAFETY: the mock's copy engine moves the pointer to its thread, as the driver's DMA
// engine holds the address; the crate's rules are what make its later use sound.
unsafe impl Send for HostPtr {}

/// A pointer into a device allocation's backing bytes, with their provenance.
fn device_ptr(addr: CUdeviceptr, bytes: usize) -> Option<*mut u8> {
    let mut dev = lock(&DEVICE);
    let (&base, mem) = dev.range_mut(..=addr).next_back()?;
    let off = usize::try_from(addr - base).ok()?;
    if off + bytes > mem.len() * 8 {
        return None;
    }
    Some(mem.as_mut_ptr().cast::<u8>().wrapping_add(off))
}

/// Runs `copy` later on another thread (after a short sleep), until a synchronization.
fn later(copy: impl FnOnce() + Send + 'static) {
    let h = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        copy();
    });
    lock(&IN_FLIGHT).push(h);
}

/// Joins every copy in flight.
fn land_all() {
    let pending: Vec<JoinHandle<()>> = std::mem::take(&mut *lock(&IN_FLIGHT));
    log(format!("land {}", pending.len()));
    for h in pending {
        h.join().expect("a copy-engine thread panicked");
    }
}

unsafe extern "C" fn cu_mem_alloc(p: *mut CUdeviceptr, bytes: usize) -> CUresult {
    let mem = vec![0u64; bytes.div_ceil(8).max(1)].into_boxed_slice();
    let addr = mem.as_ptr().expose_provenance() as u64;
    lock(&DEVICE).insert(addr, mem);
    unsafe { *p = addr };
    OK
}
unsafe extern "C" fn cu_mem_free(p: CUdeviceptr) -> CUresult {
    // cuMemFree waits for the context's work (what the crate's frees rely on).
    land_all();
    match lock(&DEVICE).remove(&p) {
        Some(_) => OK,
        None => CUresult::CUDA_ERROR_INVALID_VALUE,
    }
}
unsafe extern "C" fn cu_memcpy_htod(dst: CUdeviceptr, src: *const c_void, n: usize) -> CUresult {
    let Some(d) = device_ptr(dst, n) else {
        return CUresult::CUDA_ERROR_INVALID_VALUE;
    };
    land_all();
    unsafe { std::ptr::copy_nonoverlapping(src.cast::<u8>(), d, n) };
    OK
}
unsafe extern "C" fn cu_memcpy_dtoh(dst: *mut c_void, src: CUdeviceptr, n: usize) -> CUresult {
    let Some(s) = device_ptr(src, n) else {
        return CUresult::CUDA_ERROR_INVALID_VALUE;
    };
    land_all();
    unsafe { std::ptr::copy_nonoverlapping(s, dst.cast::<u8>(), n) };
    OK
}
/// Queues a copy of `n` bytes from `src` to `dst` for the copy engine (see [`later`]).
fn queue_copy(what: &str, dst: *mut u8, src: *mut u8, n: usize) {
    log(format!("{what} queued {n}"));
    let (d, s) = (HostPtr(dst), HostPtr(src));
    later(move || {
        let (d, s) = (d, s);
        // SAFETY (of the mock): the device side is a live allocation (frees wait for
        // this thread); the host side is what the crate promised stays valid.
        unsafe { std::ptr::copy_nonoverlapping(s.0, d.0, n) }
    });
}
unsafe extern "C" fn cu_memcpy_dtoh_async(
    dst: *mut c_void,
    src: CUdeviceptr,
    n: usize,
    _s: CUstream,
) -> CUresult {
    let Some(s) = device_ptr(src, n) else {
        return CUresult::CUDA_ERROR_INVALID_VALUE;
    };
    queue_copy("dtoh", dst.cast(), s, n);
    OK
}
unsafe extern "C" fn cu_memcpy_htod_async(
    dst: CUdeviceptr,
    src: *const c_void,
    n: usize,
    _s: CUstream,
) -> CUresult {
    let Some(d) = device_ptr(dst, n) else {
        return CUresult::CUDA_ERROR_INVALID_VALUE;
    };
    queue_copy("htod", d, src.cast_mut().cast(), n);
    OK
}
/// A memset node: device address, word, words.
type MemsetNode = (CUdeviceptr, u32, usize);
/// Graphs and executable graphs: handle -> the memsets of their nodes.
static GRAPHS: Mutex<BTreeMap<usize, Vec<MemsetNode>>> = Mutex::new(BTreeMap::new());

unsafe extern "C" fn cu_graph_create(g: *mut CUgraph, _flags: c_uint) -> CUresult {
    let h = next::<c_void>();
    lock(&GRAPHS).insert(h.addr(), Vec::new());
    unsafe { *g = h.cast() };
    OK
}
unsafe extern "C" fn cu_graph_destroy(g: CUgraph) -> CUresult {
    lock(&GRAPHS).remove(&g.addr());
    OK
}
unsafe extern "C" fn cu_graph_add_memset_node(
    node: *mut CUgraphNode,
    g: CUgraph,
    _deps: *const CUgraphNode,
    _n: usize,
    params: *const CUDA_MEMSET_NODE_PARAMS,
    _ctx: CUcontext,
) -> CUresult {
    let p = unsafe { &*params };
    if p.elementSize != 4 || p.height != 1 {
        return CUresult::CUDA_ERROR_NOT_SUPPORTED;
    }
    match lock(&GRAPHS).get_mut(&g.addr()) {
        Some(nodes) => nodes.push((p.dst, p.value, p.width)),
        None => return CUresult::CUDA_ERROR_INVALID_HANDLE,
    }
    unsafe { *node = next() };
    OK
}
/// An executable graph is a copy of its graph's nodes, under a handle of its own.
unsafe extern "C" fn cu_graph_instantiate(e: *mut CUgraphExec, g: CUgraph, _f: u64) -> CUresult {
    let mut graphs = lock(&GRAPHS);
    let Some(nodes) = graphs.get(&g.addr()).cloned() else {
        return CUresult::CUDA_ERROR_INVALID_HANDLE;
    };
    let h = next::<c_void>();
    graphs.insert(h.addr(), nodes);
    unsafe { *e = h.cast() };
    OK
}
unsafe extern "C" fn cu_graph_exec_destroy(e: CUgraphExec) -> CUresult {
    lock(&GRAPHS).remove(&e.addr());
    OK
}
/// Each memset node lands later, on the copy engine.
unsafe extern "C" fn cu_graph_launch(e: CUgraphExec, _s: CUstream) -> CUresult {
    let Some(nodes) = lock(&GRAPHS).get(&e.addr()).cloned() else {
        return CUresult::CUDA_ERROR_INVALID_HANDLE;
    };
    log(format!("graph launched ({} nodes)", nodes.len()));
    for (dst, value, words) in nodes {
        let Some(d) = device_ptr(dst, words * 4) else {
            return CUresult::CUDA_ERROR_INVALID_VALUE;
        };
        let d = HostPtr(d);
        later(move || {
            let d = d;
            // SAFETY (of the mock): a live device allocation (frees wait for this
            // thread), `words` words long.
            unsafe { std::slice::from_raw_parts_mut(d.0.cast::<u32>(), words).fill(value) }
        });
    }
    OK
}
unsafe extern "C" fn cu_stream_sync(_: CUstream) -> CUresult {
    land_all();
    OK
}
unsafe extern "C" fn cu_ctx_sync() -> CUresult {
    log("cuCtxSynchronize".into());
    land_all();
    OK
}
unsafe extern "C" fn cu_stream_is_capturing(
    _: CUstream,
    status: *mut cudadrv_sys::CUstreamCaptureStatus,
) -> CUresult {
    unsafe { *status = cudadrv_sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE };
    OK
}
unsafe extern "C" fn cu_host_register(_p: *mut c_void, bytes: usize, _f: c_uint) -> CUresult {
    log(format!("cuMemHostRegister {bytes}"));
    OK
}
unsafe extern "C" fn cu_host_unregister(_p: *mut c_void) -> CUresult {
    log("cuMemHostUnregister".into());
    OK
}

mock_entries! {
    fn mock_entry {
        "cuMemAlloc" => cu_mem_alloc as unsafe extern "C" fn(_, _) -> _,
        "cuMemFree" => cu_mem_free as unsafe extern "C" fn(_) -> _,
        "cuMemcpyHtoD" => cu_memcpy_htod as unsafe extern "C" fn(_, _, _) -> _,
        "cuMemcpyDtoH" => cu_memcpy_dtoh as unsafe extern "C" fn(_, _, _) -> _,
        "cuMemcpyDtoHAsync" => cu_memcpy_dtoh_async as unsafe extern "C" fn(_, _, _, _) -> _,
        "cuMemcpyHtoDAsync" => cu_memcpy_htod_async as unsafe extern "C" fn(_, _, _, _) -> _,
        "cuStreamSynchronize" => cu_stream_sync as unsafe extern "C" fn(_) -> _,
        "cuCtxSynchronize" => cu_ctx_sync as unsafe extern "C" fn() -> _,
        "cuStreamIsCapturing" => cu_stream_is_capturing as unsafe extern "C" fn(_, _) -> _,
        "cuMemHostRegister" => cu_host_register as unsafe extern "C" fn(_, _, _) -> _,
        "cuMemHostUnregister" => cu_host_unregister as unsafe extern "C" fn(_) -> _,
        "cuGraphCreate" => cu_graph_create as unsafe extern "C" fn(_, _) -> _,
        "cuGraphDestroy" => cu_graph_destroy as unsafe extern "C" fn(_) -> _,
        "cuGraphAddMemsetNode" => cu_graph_add_memset_node as unsafe extern "C" fn(_, _, _, _, _, _) -> _,
        "cuGraphInstantiate" => cu_graph_instantiate as unsafe extern "C" fn(_, _, _) -> _,
        "cuGraphExecDestroy" => cu_graph_exec_destroy as unsafe extern "C" fn(_) -> _,
        "cuGraphLaunch" => cu_graph_launch as unsafe extern "C" fn(_, _) -> _,
    }
}

#[test]
fn work_lands_later_and_leaks_end_nothing_early() {
    install(mock_entry);
    let ctx = Context::primary(Device::get(0).unwrap()).unwrap();
    let stream = Stream::non_blocking(&ctx).unwrap();
    registration_scope_waits_whatever_the_closure_forgets(&ctx, &stream);
    freed_source_waits_for_the_pending_copy(&ctx, &stream);
    forgotten_graph_exec_mid_flight(&ctx, &stream);
    forgotten_dlpack_import_mid_flight(&ctx, &stream);
}

/// Where a forgotten DLPack import stays reachable (see below).
static LEAKED_IMPORT: std::sync::atomic::AtomicPtr<c_void> =
    std::sync::atomic::AtomicPtr::new(std::ptr::null_mut());

/// The source of the copy queued through the forgotten import (`'static`: it outlives
/// the copy whatever happens to the import).
static ONES: [u32; 64] = [1; 64];

/// Deleter calls of the tensor below.
static DELETED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

unsafe extern "C" fn count_delete(_: *mut DLManagedTensorVersioned) {
    DELETED.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
}

/// A DLPack import forgotten with a copy into it in flight: its drop (which would
/// synchronize the stream, then call the producer's deleter) never runs, so the producer
/// never gets the memory back while the copy may still land: the tensor is leaked, and
/// the copy lands in memory that is still the producer's.
fn forgotten_dlpack_import_mid_flight(ctx: &Context, stream: &Stream) {
    const N: usize = 64;
    let target = DeviceBuffer::from_slice(ctx, &[0u32; N]).unwrap();
    let mut shape = [N as i64];
    let mut tensor = DLManagedTensorVersioned {
        version: DLPACK_VERSION,
        manager_ctx: std::ptr::null_mut(),
        deleter: Some(count_delete),
        flags: 0,
        dl_tensor: DLTensor {
            data: std::ptr::without_provenance_mut(target.as_raw() as usize),
            device: DLDevice {
                device_type: DLDeviceType::CUDA,
                device_id: 0,
            },
            ndim: 1,
            dtype: DLDataType {
                code: 1,
                bits: 32,
                lanes: 1,
            },
            shape: shape.as_mut_ptr(),
            strides: std::ptr::null_mut(),
            byte_offset: 0,
        },
    };
    // SAFETY: a well-formed tensor over `target`, which outlives every use of it (the
    // forgotten import is never used again); its deleter only counts.
    let mut import = unsafe { DlpackTensor::from_versioned(&mut tensor, ctx, stream) }.unwrap();
    take_log();
    // SAFETY: `ONES` is `'static` and never written.
    unsafe {
        import
            .view_mut::<u32>()
            .unwrap()
            .copy_from_host_async(&ONES, stream)
            .unwrap()
    };
    // Leaked as `mem::forget` would, but reachable from a static (Miri's leak check).
    LEAKED_IMPORT.store(
        Box::into_raw(Box::new(import)).cast(),
        std::sync::atomic::Ordering::Relaxed,
    );
    assert_eq!(DELETED.load(std::sync::atomic::Ordering::SeqCst), 0);
    assert_eq!(take_log(), [format!("htod queued {}", N * 4)]);
    stream.synchronize().unwrap();
    let mut got = [0u32; N];
    target.copy_to_host(&mut got).unwrap();
    assert_eq!(
        got, ONES,
        "the copy landed in memory the producer still owns"
    );
    assert_eq!(DELETED.load(std::sync::atomic::Ordering::SeqCst), 0);
    take_log();
}

/// Where a leaked executable graph stays reachable (see below).
static LEAKED: std::sync::atomic::AtomicPtr<c_void> =
    std::sync::atomic::AtomicPtr::new(std::ptr::null_mut());

/// An executable graph launched and forgotten (leaked) with its memset pending:
/// the graph's borrow of the buffer ends, and the buffer is freed. The free waits for the
/// context's work, so the copy engine never writes freed memory; the forgotten exec's
/// drop (which would wait too) never runs.
fn forgotten_graph_exec_mid_flight(ctx: &Context, stream: &Stream) {
    const N: usize = 64;
    let buf = DeviceBuffer::from_slice(ctx, &[0u32; N]).unwrap();
    let graph = Graph::new(ctx).unwrap();
    graph.add_memset_d32_node(&[], &buf, 7).unwrap();
    let exec = graph.instantiate(InstantiateFlags::empty()).unwrap();
    take_log();
    exec.launch(stream).unwrap();
    // Leaked as `mem::forget` would (its drop never runs), but kept reachable from a
    // static so that Miri's leak check, a check of this test's own hygiene, holds.
    LEAKED.store(
        Box::into_raw(Box::new(exec)).cast(),
        std::sync::atomic::Ordering::Relaxed,
    );
    drop(graph);
    drop(buf); // cuMemFree with the memset in flight
    assert_eq!(take_log(), ["graph launched (1 nodes)", "land 1"]);
    // The memory the allocator hands out next is the program's alone.
    let fresh = vec![0u32; N];
    assert!(fresh.iter().all(|&v| v == 0));
}

/// A device-to-host copy into a registered `Vec`, queued and still in flight when the
/// closure forgets what it can (a part, its reference) and returns: the scope waits
/// before the `Vec` is the host's again, so the reads below never race the copy engine.
/// (The audit's route, `mem::forget` of a registration returned by value with this copy
/// pending, needs the `unsafe` `HostRegistration::new` now.)
fn registration_scope_waits_whatever_the_closure_forgets(ctx: &Context, stream: &Stream) {
    const N: usize = 64;
    let src = DeviceBuffer::from_slice(ctx, &[0xA5A5_0000u32 + 7; N]).unwrap();
    let mut data = vec![0u32; N];
    take_log();
    HostRegistration::scope(ctx, &mut data, HostRegisterFlags::empty(), |reg| {
        reg.copy_from_device_async(&src, stream)?;
        #[allow(clippy::forget_non_drop)]
        std::mem::forget(reg.part(0..N)?);
        #[allow(forgetting_references)]
        std::mem::forget(reg);
        Ok(())
    })
    .unwrap();
    assert_eq!(
        take_log(),
        [
            format!("cuMemHostRegister {}", N * 4),
            format!("dtoh queued {}", N * 4),
            "cuCtxSynchronize".to_string(),
            "land 1".to_string(),
            "cuMemHostUnregister".to_string(),
        ]
    );
    // The host owns the Vec again: it reads the copied values and reuses the memory.
    assert!(data.iter().all(|&v| v == 0xA5A5_0007));
    data.fill(1);
    drop(data);
    let reused = vec![2u32; N];
    assert!(reused.iter().all(|&v| v == 2));
}

/// A copy out of a device buffer queued, then the buffer dropped while it is in flight:
/// the free waits for the context's work (the driver's rule the crate relies on, which
/// `hw_promises` checks on the GPU), so the copy engine never reads freed memory.
fn freed_source_waits_for_the_pending_copy(ctx: &Context, stream: &Stream) {
    const N: usize = 32;
    let src = DeviceBuffer::from_slice(ctx, &[9u32; N]).unwrap();
    let mut data = vec![0u32; N];
    HostRegistration::scope(ctx, &mut data, HostRegisterFlags::empty(), |reg| {
        reg.copy_from_device_async(&src, stream)?;
        drop(src); // cuMemFree with the copy in flight
        Ok(())
    })
    .unwrap();
    assert!(data.iter().all(|&v| v == 9));
    let staged = vec![4u32; N];
    let mut dst = DeviceBuffer::from_slice(ctx, &[0u32; N]).unwrap();
    let mut pinned = staged.clone();
    HostRegistration::scope(ctx, &mut pinned, HostRegisterFlags::empty(), |reg| {
        reg.copy_to_device_async(&mut dst, stream)
    })
    .unwrap();
    let mut back = vec![0u32; N];
    dst.copy_to_host(&mut back).unwrap();
    assert_eq!(back, staged);
}
