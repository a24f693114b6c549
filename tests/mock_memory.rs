//! The memory chapter's wrappers (managed memory, registration, batched copies, stream
//! attributes) against a mock driver, on the CPU and under Miri: what each call passes
//! to the driver, what is refused before the driver is called, and the order of the
//! calls a drop makes.
//!
//! The mock keeps one context, and real host memory behind managed allocations (so the
//! host views read and write bytes, as on a GPU with unified memory); every entry appends
//! a line to `LOG`. One `#[test]` drives the checks in order (the driver table is
//! process-wide).

#![cfg(not(feature = "linked"))]

mod mock_common;
use mock_common::*;

use std::collections::BTreeMap;
use std::ffi::{c_int, c_uint, c_void};
use std::sync::Mutex;
use std::sync::atomic::Ordering;

use cudadrv::memory::batch::{CopyAttributes, CopyBatch, SrcAccessOrder, copy_with_attributes};
use cudadrv::memory::l2::AccessPolicyWindow;
use cudadrv::memory::managed::{
    Advice, Attach, Location, ManagedBuffer, MemoryKind, MemoryModel, memory_kind,
};
use cudadrv::memory::registered::{HostRegisterFlags, HostRegistration};
use cudadrv::{Context, Device, DeviceBuffer, Error, Stream, StreamFlags};
use cudadrv_sys::{
    CUdevice, CUdeviceptr, CUlaunchAttributeID, CUmem_advise, CUmem_range_attribute, CUmemLocation,
    CUmemcpyAttributes, CUpointer_attribute, CUresult, CUstream, CUstreamAttrValue,
};

/// Managed allocations: address -> backing host memory (8-byte words).
static MANAGED: Mutex<BTreeMap<u64, Vec<u64>>> = Mutex::new(BTreeMap::new());
/// Device allocations (never dereferenced): address -> size.
static DEVICE: Mutex<BTreeMap<u64, usize>> = Mutex::new(BTreeMap::new());
/// The last access-policy window set on a stream.
static WINDOW: Mutex<Option<(usize, usize, u32)>> = Mutex::new(None);

unsafe extern "C" fn cu_device_get_count(n: *mut c_int) -> CUresult {
    unsafe { *n = 1 };
    OK
}
/// Whether the device reports no concurrent managed access (as pre-Pascal GPUs and
/// Windows do); the H100 and H200 report it.
static NO_CONCURRENT_ACCESS: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

unsafe extern "C" fn cu_device_get_attribute(
    v: *mut c_int,
    attr: cudadrv_sys::CUdevice_attribute,
    _: CUdevice,
) -> CUresult {
    use cudadrv_sys::CUdevice_attribute as A;
    // A coherent system (as on Grace Hopper): pageable memory access through the host's
    // page tables, native host atomics; no read-only registration.
    let on = match attr {
        A::CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS => {
            i32::from(!NO_CONCURRENT_ACCESS.load(std::sync::atomic::Ordering::Relaxed))
        }
        A::CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY
        | A::CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS
        | A::CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES
        | A::CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED
        | A::CU_DEVICE_ATTRIBUTE_DIRECT_MANAGED_MEM_ACCESS_FROM_HOST
        | A::CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED => 1,
        A::CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED => 0,
        _ => return CUresult::CUDA_ERROR_INVALID_VALUE,
    };
    unsafe { *v = on };
    OK
}
unsafe extern "C" fn cu_stream_sync(_: CUstream) -> CUresult {
    OK
}
unsafe extern "C" fn cu_stream_is_capturing(
    _: CUstream,
    status: *mut cudadrv_sys::CUstreamCaptureStatus,
) -> CUresult {
    unsafe { *status = cudadrv_sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE };
    OK
}
unsafe extern "C" fn cu_mem_alloc(p: *mut CUdeviceptr, bytes: usize) -> CUresult {
    let addr = NEXT.fetch_add(bytes.next_multiple_of(256).max(256), Ordering::Relaxed) as u64;
    lock(&DEVICE).insert(addr, bytes);
    unsafe { *p = addr };
    OK
}
unsafe extern "C" fn cu_mem_free(p: CUdeviceptr) -> CUresult {
    if lock(&MANAGED).remove(&p).is_some() {
        log("cuMemFree managed".into());
        return OK;
    }
    match lock(&DEVICE).remove(&p) {
        Some(_) => OK,
        None => CUresult::CUDA_ERROR_INVALID_VALUE,
    }
}
unsafe extern "C" fn cu_mem_alloc_managed(
    p: *mut CUdeviceptr,
    bytes: usize,
    flags: c_uint,
) -> CUresult {
    log(format!("cuMemAllocManaged {bytes} flags {flags}"));
    let mut backing = vec![0u64; bytes.div_ceil(8)];
    // The address handed out is the backing memory's, exposed as the driver would map
    // it for the host.
    let addr = backing.as_mut_ptr().expose_provenance() as u64;
    lock(&MANAGED).insert(addr, backing);
    unsafe { *p = addr };
    OK
}
unsafe extern "C" fn cu_mem_prefetch(
    p: CUdeviceptr,
    bytes: usize,
    loc: CUmemLocation,
    flags: c_uint,
    s: CUstream,
) -> CUresult {
    log(format!(
        "cuMemPrefetchAsync {p:#x} {bytes} loc {}:{} flags {flags} stream {:#x}",
        loc.type_.0,
        cudadrv::memory::location_id(&loc),
        s.addr()
    ));
    OK
}
unsafe extern "C" fn cu_mem_advise(
    p: CUdeviceptr,
    bytes: usize,
    advice: CUmem_advise,
    loc: CUmemLocation,
) -> CUresult {
    log(format!(
        "cuMemAdvise {p:#x} {bytes} advice {} loc {}:{}",
        advice.0,
        loc.type_.0,
        cudadrv::memory::location_id(&loc)
    ));
    OK
}
unsafe extern "C" fn cu_mem_range_get_attribute(
    data: *mut c_void,
    size: usize,
    attr: CUmem_range_attribute,
    _p: CUdeviceptr,
    _bytes: usize,
) -> CUresult {
    use CUmem_range_attribute as R;
    let ints = data.cast::<i32>();
    match attr {
        R::CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY => unsafe { *ints = 1 },
        // Preferred: device 0; last prefetch: host.
        R::CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE => unsafe { *ints = 1 },
        R::CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID => unsafe { *ints = 0 },
        R::CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE => unsafe { *ints = 2 },
        R::CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_ID => unsafe { *ints = 0 },
        R::CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY => {
            for i in 0..size / 4 {
                unsafe { *ints.add(i) = if i == 0 { 0 } else { -2 } };
            }
        }
        _ => return CUresult::CUDA_ERROR_INVALID_VALUE,
    }
    log(format!("cuMemRangeGetAttribute {} size {size}", attr.0));
    OK
}
unsafe extern "C" fn cu_stream_attach(
    s: CUstream,
    p: CUdeviceptr,
    len: usize,
    flags: c_uint,
) -> CUresult {
    log(format!(
        "cuStreamAttachMemAsync {:#x} {p:#x} {len} flags {flags}",
        s.addr()
    ));
    OK
}
unsafe extern "C" fn cu_host_register(p: *mut c_void, bytes: usize, flags: c_uint) -> CUresult {
    log(format!("cuMemHostRegister {bytes} flags {flags}"));
    let _ = p;
    OK
}
unsafe extern "C" fn cu_host_unregister(_: *mut c_void) -> CUresult {
    log("cuMemHostUnregister".into());
    OK
}
unsafe extern "C" fn cu_host_get_device_pointer(
    d: *mut CUdeviceptr,
    p: *mut c_void,
    flags: c_uint,
) -> CUresult {
    log(format!("cuMemHostGetDevicePointer flags {flags}"));
    unsafe { *d = p.addr() as u64 };
    OK
}
unsafe extern "C" fn cu_memcpy_batch(
    dsts: *mut CUdeviceptr,
    srcs: *mut CUdeviceptr,
    sizes: *mut usize,
    count: usize,
    attrs: *mut CUmemcpyAttributes,
    idxs: *mut usize,
    num_attrs: usize,
    s: CUstream,
) -> CUresult {
    let sizes = unsafe { std::slice::from_raw_parts(sizes, count) };
    let idxs = unsafe { std::slice::from_raw_parts(idxs, num_attrs) };
    let attrs = unsafe { std::slice::from_raw_parts(attrs, num_attrs) };
    let _ = (dsts, srcs);
    let orders: Vec<u32> = attrs.iter().map(|a| a.srcAccessOrder.0).collect();
    log(format!(
        "cuMemcpyBatchAsync {count} sizes {sizes:?} attrs at {idxs:?} orders {orders:?} stream {:#x}",
        s.addr()
    ));
    OK
}
unsafe extern "C" fn cu_memcpy_with_attributes(
    dst: CUdeviceptr,
    src: CUdeviceptr,
    size: usize,
    attr: *mut CUmemcpyAttributes,
    s: CUstream,
) -> CUresult {
    let a = unsafe { *attr };
    log(format!(
        "cuMemcpyWithAttributesAsync {dst:#x} <- {src:#x} {size} order {} dst hint {}:{} flags {} stream {:#x}",
        a.srcAccessOrder.0,
        a.dstLocHint.type_.0,
        cudadrv::memory::location_id(&a.dstLocHint),
        a.flags,
        s.addr()
    ));
    OK
}
unsafe extern "C" fn cu_stream_set_attribute(
    _s: CUstream,
    id: CUlaunchAttributeID,
    v: *const CUstreamAttrValue,
) -> CUresult {
    if id == CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW {
        let w = unsafe { (*v).accessPolicyWindow };
        *lock(&WINDOW) = Some((w.base_ptr.addr(), w.num_bytes, w.hitProp.0));
    }
    log(format!("cuStreamSetAttribute {}", id.0));
    OK
}
unsafe extern "C" fn cu_stream_get_attribute(
    _s: CUstream,
    id: CUlaunchAttributeID,
    v: *mut CUstreamAttrValue,
) -> CUresult {
    if id == CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW {
        let Some((base, bytes, hit)) = *lock(&WINDOW) else {
            return CUresult::CUDA_ERROR_INVALID_VALUE;
        };
        unsafe {
            (*v).accessPolicyWindow = cudadrv_sys::CUaccessPolicyWindow {
                base_ptr: std::ptr::without_provenance_mut(base),
                num_bytes: bytes,
                hitRatio: 0.5,
                hitProp: cudadrv_sys::CUaccessProperty(hit),
                missProp: cudadrv_sys::CUaccessProperty::CU_ACCESS_PROPERTY_STREAMING,
            }
        };
    }
    OK
}
unsafe extern "C" fn cu_reset_l2() -> CUresult {
    log("cuCtxResetPersistingL2Cache".into());
    OK
}
unsafe extern "C" fn cu_pointer_get_attribute(
    data: *mut c_void,
    attr: CUpointer_attribute,
    p: CUdeviceptr,
) -> CUresult {
    let managed = lock(&MANAGED).contains_key(&p);
    let device = lock(&DEVICE).contains_key(&p);
    if !managed && !device {
        return CUresult::CUDA_ERROR_INVALID_VALUE;
    }
    let v = match attr {
        CUpointer_attribute::CU_POINTER_ATTRIBUTE_IS_MANAGED => u32::from(managed),
        CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE => 2, // CU_MEMORYTYPE_DEVICE
        _ => return CUresult::CUDA_ERROR_INVALID_VALUE,
    };
    unsafe { *data.cast::<u32>() = v };
    OK
}

mock_entries! {
    fn mock_entry {
        "cuDeviceGetCount" => cu_device_get_count as unsafe extern "C" fn(_) -> _,
        "cuDeviceGetAttribute" => cu_device_get_attribute as unsafe extern "C" fn(_, _, _) -> _,
        "cuStreamSynchronize" => cu_stream_sync as unsafe extern "C" fn(_) -> _,
        "cuStreamIsCapturing" => cu_stream_is_capturing as unsafe extern "C" fn(_, _) -> _,
        "cuMemAlloc" => cu_mem_alloc as unsafe extern "C" fn(_, _) -> _,
        "cuMemFree" => cu_mem_free as unsafe extern "C" fn(_) -> _,
        "cuMemAllocManaged" => cu_mem_alloc_managed as unsafe extern "C" fn(_, _, _) -> _,
        "cuMemPrefetchAsync" => cu_mem_prefetch as unsafe extern "C" fn(_, _, _, _, _) -> _,
        "cuMemAdvise" => cu_mem_advise as unsafe extern "C" fn(_, _, _, _) -> _,
        "cuMemRangeGetAttribute" =>
            cu_mem_range_get_attribute as unsafe extern "C" fn(_, _, _, _, _) -> _,
        "cuStreamAttachMemAsync" => cu_stream_attach as unsafe extern "C" fn(_, _, _, _) -> _,
        "cuMemHostRegister" => cu_host_register as unsafe extern "C" fn(_, _, _) -> _,
        "cuMemHostUnregister" => cu_host_unregister as unsafe extern "C" fn(_) -> _,
        "cuMemHostGetDevicePointer" =>
            cu_host_get_device_pointer as unsafe extern "C" fn(_, _, _) -> _,
        "cuMemcpyBatchAsync" =>
            cu_memcpy_batch as unsafe extern "C" fn(_, _, _, _, _, _, _, _) -> _,
        "cuMemcpyWithAttributesAsync" =>
            cu_memcpy_with_attributes as unsafe extern "C" fn(_, _, _, _, _) -> _,
        "cuStreamSetAttribute" => cu_stream_set_attribute as unsafe extern "C" fn(_, _, _) -> _,
        "cuStreamGetAttribute" => cu_stream_get_attribute as unsafe extern "C" fn(_, _, _) -> _,
        "cuCtxResetPersistingL2Cache" => cu_reset_l2 as unsafe extern "C" fn() -> _,
        "cuPointerGetAttribute" => cu_pointer_get_attribute as unsafe extern "C" fn(_, _, _) -> _,
    }
}

fn has(log: &[String], line: &str) -> bool {
    log.iter().any(|l| l == line)
}

#[test]
fn memory_chapter_against_a_mock_driver() {
    install(mock_entry);
    let ctx = Context::primary(Device::get(0).unwrap()).unwrap();
    let stream = Stream::new(&ctx, StreamFlags::NON_BLOCKING).unwrap();
    let s = stream.as_raw().addr();
    model(&ctx);
    managed(&ctx, &stream, s);
    registered(&ctx, &stream);
    batch(&ctx, &stream, s);
    stream_attributes(&ctx, &stream);
}

fn model(ctx: &Context) {
    let m = MemoryModel::of(ctx.device()).unwrap();
    assert!(m.managed_memory && m.concurrent_managed_access);
    assert!(m.pageable_memory_access && m.pageable_uses_host_page_tables);
    assert!(m.host_native_atomics && m.direct_managed_access_from_host);
    assert!(m.host_register && !m.host_register_read_only);
    assert!(m.system_memory_usable());
}

fn managed(ctx: &Context, stream: &Stream, s: usize) {
    take_log();
    // Refused before the driver: empty, an overflowing size (a per-stream attachment at
    // allocation does not compile: `Attach` has no such variant).
    assert!(matches!(
        ManagedBuffer::<u32>::new(ctx, 0, Attach::Global),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        ManagedBuffer::<u64>::new(ctx, usize::MAX / 4, Attach::Global),
        Err(Error::InvalidArgument(_))
    ));
    assert!(take_log().is_empty(), "no driver call for refused sizes");

    let mut buf = ManagedBuffer::<u32>::new(ctx, 1000, Attach::Host).unwrap();
    let p = buf.as_raw();
    let log = take_log();
    assert!(has(&log, "cuMemAllocManaged 4000 flags 2"), "{log:?}");
    // Host views synchronize the context first, then see real bytes.
    buf.host_mut()
        .unwrap()
        .iter_mut()
        .enumerate()
        .for_each(|(i, v)| *v = i as u32);
    assert_eq!(buf.host().unwrap()[999], 999);
    assert_eq!(take_log(), ["cuCtxSynchronize", "cuCtxSynchronize"]);
    // Without concurrent managed access, any kernel launched while a view lives would
    // fault the host: the safe views are refused, before any synchronization.
    NO_CONCURRENT_ACCESS.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(matches!(buf.host(), Err(Error::InvalidArgument(m)) if m.contains("concurrent")));
    assert!(matches!(buf.host_mut(), Err(Error::InvalidArgument(_))));
    NO_CONCURRENT_ACCESS.store(false, std::sync::atomic::Ordering::Relaxed);
    assert!(take_log().is_empty());

    buf.prefetch(Location::Device(Device::from_raw(0)), stream)
        .unwrap();
    buf.prefetch(Location::HostNuma(3), stream).unwrap();
    buf.advise(Advice::ReadMostly).unwrap();
    buf.advise(Advice::PreferredLocation(Location::Device(
        Device::from_raw(0),
    )))
    .unwrap();
    buf.advise(Advice::UnsetAccessedBy(Location::Host)).unwrap();
    buf.attach(stream, Attach::Host).unwrap();
    let log = take_log();
    let expect = [
        format!("cuMemPrefetchAsync {p:#x} 4000 loc 1:0 flags 0 stream {s:#x}"),
        format!("cuMemPrefetchAsync {p:#x} 4000 loc 3:3 flags 0 stream {s:#x}"),
        format!("cuMemAdvise {p:#x} 4000 advice 1 loc 2:0"),
        format!("cuMemAdvise {p:#x} 4000 advice 3 loc 1:0"),
        format!("cuMemAdvise {p:#x} 4000 advice 6 loc 2:0"),
        format!("cuStreamAttachMemAsync {s:#x} {p:#x} 0 flags 2"),
    ];
    assert_eq!(log, expect);

    // One stream's buffer (Programming Guide 4.1.2.3): attached SINGLE after one
    // context synchronization; host views then wait for that stream only; the guard
    // attaches it GLOBAL again when dropped.
    let other = Stream::non_blocking(ctx).unwrap();
    {
        let mut single = buf.attach_single(stream).unwrap();
        assert_eq!(
            take_log(),
            [
                "cuCtxSynchronize".to_string(),
                format!("cuStreamAttachMemAsync {s:#x} {p:#x} 0 flags 4")
            ]
        );
        single.host_mut().unwrap()[0] = 5;
        assert_eq!(single.host().unwrap()[..2], [5, 1]);
        assert!(
            take_log().is_empty(),
            "a stream-scoped host view syncs no context"
        );
        // Its views take asynchronous work on the attached stream only.
        let refused = single.view_mut().memset_d8_async(0, &other);
        assert!(matches!(refused, Err(Error::InvalidArgument(m)) if m.contains("stream-ordered")));
        assert!(take_log().is_empty());
    }
    assert_eq!(
        take_log(),
        [format!("cuStreamAttachMemAsync {s:#x} {p:#x} 0 flags 1")]
    );
    // Forgotten mid-flight: the buffer stays attached to the stream, and the next host
    // view synchronizes the whole context as usual.
    let single = buf.attach_single(stream).unwrap();
    std::mem::forget(single);
    take_log();
    assert_eq!(buf.host().unwrap()[0], 5);
    assert_eq!(take_log(), ["cuCtxSynchronize"]);
    drop(other);
    take_log();

    assert!(buf.is_read_mostly().unwrap());
    assert_eq!(
        buf.preferred_location().unwrap(),
        Some(Location::Device(Device::from_raw(0)))
    );
    assert_eq!(buf.last_prefetch_location().unwrap(), Some(Location::Host));
    let mut devs = [Device::from_raw(-9); 3];
    assert_eq!(buf.accessed_by(&mut devs).unwrap(), 1);
    assert_eq!(devs[0], Device::from_raw(0));
    assert_eq!(memory_kind(p).unwrap(), MemoryKind::Managed);
    let plain = DeviceBuffer::<u32>::new(ctx, 4).unwrap();
    assert_eq!(memory_kind(plain.as_raw()).unwrap(), MemoryKind::Device);
    assert_eq!(memory_kind(0x10).unwrap(), MemoryKind::Unknown);
    take_log();
    drop(buf);
    assert_eq!(take_log(), ["cuMemFree managed"]);
}

fn registered(ctx: &Context, stream: &Stream) {
    take_log();
    let mut data = vec![7u32; 256];
    assert!(matches!(
        HostRegistration::<u32>::scope(ctx, &mut [], HostRegisterFlags::empty(), |_| Ok(())),
        Err(Error::InvalidArgument(_))
    ));
    HostRegistration::scope(ctx, &mut data, HostRegisterFlags::PORTABLE, |reg| {
        assert!(matches!(reg.device_ptr(), Err(Error::InvalidArgument(_))));
        assert!(matches!(reg.part(10..10), Err(Error::InvalidArgument(_))));
        assert!(matches!(reg.part(200..300), Err(Error::InvalidArgument(_))));
        let mut short = DeviceBuffer::<u32>::new(ctx, 8).unwrap();
        assert!(matches!(
            reg.copy_to_device_async(&mut short, stream),
            Err(Error::LengthMismatch {
                expected: 8,
                found: 256
            })
        ));
        Ok(())
    })
    .unwrap();
    // Never used by the device: unregistered without a synchronization.
    assert_eq!(
        take_log(),
        ["cuMemHostRegister 1024 flags 1", "cuMemHostUnregister"]
    );
    HostRegistration::scope(ctx, &mut data, HostRegisterFlags::DEVICE_MAP, |reg| {
        let mapped = reg.device_ptr()?;
        assert_eq!(mapped.as_raw(), reg.as_ptr().addr() as u64);
        Ok(())
    })
    .unwrap();
    // Mapped: the scope's end waits for the context's work before unpinning.
    assert_eq!(
        take_log(),
        [
            "cuMemHostRegister 1024 flags 2",
            "cuMemHostGetDevicePointer flags 0",
            "cuCtxSynchronize",
            "cuMemHostUnregister"
        ]
    );
    // The unsafe form, dropped as a guard.
    {
        // SAFETY: dropped at the end of this block, before `data` is used again.
        let reg =
            unsafe { HostRegistration::new(ctx, &mut data, HostRegisterFlags::READ_ONLY) }.unwrap();
        let src = DeviceBuffer::<u32>::new(ctx, 256).unwrap();
        assert!(matches!(
            reg.copy_from_device_async(&src, stream),
            Err(Error::InvalidArgument(_))
        ));
    }
    assert_eq!(data[100], 7);
}

fn batch(ctx: &Context, stream: &Stream, s: usize) {
    let mut a = DeviceBuffer::<u32>::new(ctx, 16).unwrap();
    let mut a2 = DeviceBuffer::<u32>::new(ctx, 16).unwrap();
    let b = DeviceBuffer::<u32>::new(ctx, 16).unwrap();
    let mut c = DeviceBuffer::<u32>::new(ctx, 8).unwrap();
    let mut empty = DeviceBuffer::<u32>::new(ctx, 0).unwrap();
    let empty2 = DeviceBuffer::<u32>::new(ctx, 0).unwrap();
    let m = ManagedBuffer::<u32>::new(ctx, 8, Attach::Global).unwrap();
    let mut host = vec![0u32; 64];
    // SAFETY: dropped below (the log checks it) before `host` is used again.
    let reg = unsafe { HostRegistration::new(ctx, &mut host, HostRegisterFlags::empty()) }.unwrap();
    let mut part = reg.part(8..16).unwrap();
    let c_src = DeviceBuffer::<u32>::new(ctx, 8).unwrap();
    take_log();
    {
        let mut batch = CopyBatch::new();
        batch.copy(&mut a, &b).unwrap();
        batch.copy(&mut empty, &empty2).unwrap(); // left out
        let err = batch.copy(&mut a2, &c_src).map(|_| ()).unwrap_err();
        assert!(matches!(err, Error::BatchCopy { index: 1, .. }), "{err:?}");
        batch.attributes(CopyAttributes {
            src_access_order: SrcAccessOrder::Any,
            ..CopyAttributes::default()
        });
        batch.copy(&mut c, &m).unwrap();
        batch.copy(&mut part, &c_src).unwrap();
        assert_eq!(batch.len(), 3);
        batch.submit(stream).unwrap();
    }
    let log = take_log();
    assert_eq!(
        log,
        [format!(
            "cuMemcpyBatchAsync 3 sizes [64, 32, 32] attrs at [0, 1] orders [1, 3] stream {s:#x}"
        )],
    );
    drop(reg); // used by the batch: synchronizes, then unpins
    assert_eq!(take_log(), ["cuCtxSynchronize", "cuMemHostUnregister"]);
    assert!(CopyBatch::new().submit(stream).is_ok());
    assert!(take_log().is_empty(), "an empty batch makes no call");

    // One copy with attributes (the 13.2 call, which this mock has): the same rules as
    // a batch copy, checked before the driver.
    let attrs = CopyAttributes {
        src_access_order: SrcAccessOrder::DuringApiCall,
        dst_hint: Some(Location::Device(ctx.device())),
        prefer_overlap_with_compute: true,
        ..CopyAttributes::default()
    };
    copy_with_attributes(stream, &mut a, &b, &attrs).unwrap();
    let err = copy_with_attributes(stream, &mut a2, &c, &attrs).unwrap_err();
    assert!(matches!(err, Error::BatchCopy { index: 0, .. }), "{err:?}");
    copy_with_attributes(stream, &mut empty, &empty2, &attrs).unwrap();
    assert_eq!(
        take_log(),
        [format!(
            "cuMemcpyWithAttributesAsync {:#x} <- {:#x} 64 order 2 dst hint 1:0 flags 1 stream {s:#x}",
            a.as_raw(),
            b.as_raw()
        )]
    );
}

fn stream_attributes(ctx: &Context, stream: &Stream) {
    take_log();
    let w = AccessPolicyWindow::persisting(0x7000_0000, 1 << 20, 0.5);
    stream.set_access_policy_window(&w).unwrap();
    assert_eq!(stream.access_policy_window().unwrap(), w);
    ctx.reset_persisting_l2().unwrap();
    let log = take_log();
    assert_eq!(
        log,
        ["cuStreamSetAttribute 1", "cuCtxResetPersistingL2Cache"]
    );
}
