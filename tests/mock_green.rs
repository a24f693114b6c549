//! The 13.1 green-context wrappers against a mock driver that reports CUDA 13.5, on the
//! CPU and under Miri: what each call hands the driver (arguments, and the structs as the
//! driver reads them), what is refused before the driver is called, and how driver
//! errors come back. The "needs 13.1" errors of a 13.0 driver are the `driver_versions`
//! suite's (mock drivers of each release's symbol set) and `hw_green`'s (the real one).
//!
//! The mock device has 132 SMs (minimum partition 8, alignment 8, locality domain 1) and
//! a workqueue configuration with a concurrency limit of 4; every entry appends a line
//! to `LOG`. One `#[test]` drives the checks in order (the driver table is process-wide).

#![cfg(not(feature = "linked"))]

mod mock_common;
use mock_common::*;

use std::ffi::{c_int, c_uint, c_ulonglong};

use cudadrv::green::{
    self, GreenContext, GroupParams, ResourceDesc, SmPartition, SmResource, Workqueue,
    WorkqueueConfig, WorkqueueScope,
};
use cudadrv::{Context, Device, Error, Event, EventFlags, Stream, StreamFlags};
use cudadrv_sys::{
    CU_DEV_SM_RESOURCE_GROUP_PARAMS, CUcontext, CUdevResource, CUdevResourceDesc,
    CUdevResourceType, CUdevSmResource, CUdevWorkqueueConfigResource, CUdevWorkqueueConfigScope,
    CUdevice, CUevent, CUgreenCtx, CUresult, CUstream,
};

const GREEN_CTX: usize = 0x6C0;
const SM: CUdevResourceType = CUdevResourceType::CU_DEV_RESOURCE_TYPE_SM;
const WQ_CONFIG: CUdevResourceType = CUdevResourceType::CU_DEV_RESOURCE_TYPE_WORKQUEUE_CONFIG;
const WQ: CUdevResourceType = CUdevResourceType::CU_DEV_RESOURCE_TYPE_WORKQUEUE;

/// A resource as the mock driver fills it.
fn resource(ty: CUdevResourceType, sms: u32) -> CUdevResource {
    let mut r = CUdevResource {
        type_: ty,
        ..Default::default()
    };
    match ty {
        SM => {
            r.__bindgen_anon_1.sm = CUdevSmResource {
                smCount: sms,
                minSmPartitionSize: 8,
                smCoscheduledAlignment: 8,
                flags: 0,
                localityDomainId: 1,
            }
        }
        WQ_CONFIG => {
            r.__bindgen_anon_1.wqConfig = CUdevWorkqueueConfigResource {
                device: 0,
                wqConcurrencyLimit: 4,
                sharingScope: CUdevWorkqueueConfigScope::CU_WORKQUEUE_SCOPE_DEVICE_CTX,
            }
        }
        WQ => {
            let mut wq = cudadrv_sys::CUdevWorkqueueResource::default();
            wq.reserved[0] = 0x77;
            r.__bindgen_anon_1.wq = wq;
        }
        _ => {}
    }
    r
}

/// One line describing a resource as the driver reads it.
fn describe(r: &CUdevResource) -> String {
    // SAFETY: the member the type names; all are plain integers.
    unsafe {
        match r.type_ {
            SM => format!("sm:{}", r.__bindgen_anon_1.sm.smCount),
            WQ_CONFIG => {
                let c = r.__bindgen_anon_1.wqConfig;
                format!(
                    "wqconfig:dev{}:limit{}:scope{}",
                    c.device, c.wqConcurrencyLimit, c.sharingScope.0
                )
            }
            WQ => format!("wq:{:#x}", r.__bindgen_anon_1.wq.reserved[0]),
            t => format!("type{}", t.0),
        }
    }
}

unsafe extern "C" fn cu_driver_get_version(v: *mut c_int) -> CUresult {
    unsafe { *v = 13050 };
    OK
}
unsafe extern "C" fn cu_device_get_dev_resource(
    d: CUdevice,
    out: *mut CUdevResource,
    ty: CUdevResourceType,
) -> CUresult {
    log(format!("cuDeviceGetDevResource dev{d} type{}", ty.0));
    unsafe { *out = resource(ty, 132) };
    OK
}
unsafe extern "C" fn cu_ctx_get_dev_resource(
    c: CUcontext,
    out: *mut CUdevResource,
    ty: CUdevResourceType,
) -> CUresult {
    log(format!("cuCtxGetDevResource {:#x} type{}", c.addr(), ty.0));
    unsafe { *out = resource(ty, 132) };
    OK
}
unsafe extern "C" fn cu_green_get_dev_resource(
    g: CUgreenCtx,
    out: *mut CUdevResource,
    ty: CUdevResourceType,
) -> CUresult {
    log(format!(
        "cuGreenCtxGetDevResource {:#x} type{}",
        g.addr(),
        ty.0
    ));
    unsafe { *out = resource(ty, 16) };
    OK
}
unsafe extern "C" fn cu_stream_get_dev_resource(
    s: CUstream,
    out: *mut CUdevResource,
    ty: CUdevResourceType,
) -> CUresult {
    log(format!(
        "cuStreamGetDevResource {:#x} type{}",
        s.addr(),
        ty.0
    ));
    unsafe { *out = resource(ty, 16) };
    OK
}
/// Takes each group's SM count (0: the rest) in order; a co-scheduled count above 32 is
/// the driver's `CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION`.
unsafe extern "C" fn cu_dev_sm_resource_split(
    result: *mut CUdevResource,
    n: c_uint,
    input: *const CUdevResource,
    remainder: *mut CUdevResource,
    flags: c_uint,
    params: *mut CU_DEV_SM_RESOURCE_GROUP_PARAMS,
) -> CUresult {
    let params = unsafe { std::slice::from_raw_parts(params, n as usize) };
    let input = unsafe { &*input };
    let described: Vec<String> = params
        .iter()
        .map(|p| {
            format!(
                "{}/{}/{}/f{}/d{}/r{}",
                p.smCount,
                p.coscheduledSmCount,
                p.preferredCoscheduledSmCount,
                p.flags,
                p.localityDomainId,
                p.reserved.iter().sum::<u32>()
            )
        })
        .collect();
    log(format!(
        "cuDevSmResourceSplit n{n} input {} flags{flags} remainder{} [{}]",
        describe(input),
        !remainder.is_null(),
        described.join(" ")
    ));
    if params.iter().any(|p| p.coscheduledSmCount > 32) {
        return CUresult::CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION;
    }
    let mut left = unsafe { input.__bindgen_anon_1.sm.smCount };
    for (i, p) in params.iter().enumerate() {
        let take = if p.smCount == 0 { left } else { p.smCount };
        left -= take;
        unsafe { *result.add(i) = resource(SM, take) };
    }
    if !remainder.is_null() {
        unsafe {
            *remainder = if left > 0 {
                resource(SM, left)
            } else {
                resource(CUdevResourceType::CU_DEV_RESOURCE_TYPE_INVALID, 0)
            }
        };
    }
    OK
}
unsafe extern "C" fn cu_generate_desc(
    desc: *mut CUdevResourceDesc,
    resources: *mut CUdevResource,
    n: c_uint,
) -> CUresult {
    let resources = unsafe { std::slice::from_raw_parts(resources, n as usize) };
    let described: Vec<String> = resources.iter().map(describe).collect();
    log(format!(
        "cuDevResourceGenerateDesc [{}]",
        described.join(" ")
    ));
    unsafe { *desc = next() };
    OK
}
unsafe extern "C" fn cu_green_create(
    g: *mut CUgreenCtx,
    _desc: CUdevResourceDesc,
    dev: CUdevice,
    flags: c_uint,
) -> CUresult {
    log(format!("cuGreenCtxCreate dev{dev} flags{flags}"));
    unsafe { *g = std::ptr::without_provenance_mut(GREEN_CTX) };
    OK
}
unsafe extern "C" fn cu_green_destroy(g: CUgreenCtx) -> CUresult {
    log(format!("cuGreenCtxDestroy {:#x}", g.addr()));
    OK
}
unsafe extern "C" fn cu_ctx_from_green(c: *mut CUcontext, g: CUgreenCtx) -> CUresult {
    unsafe { *c = std::ptr::without_provenance_mut(g.addr() + 1) };
    OK
}
unsafe extern "C" fn cu_green_stream_create(
    s: *mut CUstream,
    g: CUgreenCtx,
    flags: c_uint,
    priority: c_int,
) -> CUresult {
    log(format!(
        "cuGreenCtxStreamCreate {:#x} flags{flags} prio{priority}",
        g.addr()
    ));
    unsafe { *s = next() };
    OK
}
unsafe extern "C" fn cu_green_record(g: CUgreenCtx, e: CUevent) -> CUresult {
    log(format!(
        "cuGreenCtxRecordEvent {:#x} {:#x}",
        g.addr(),
        e.addr()
    ));
    OK
}
unsafe extern "C" fn cu_green_wait(g: CUgreenCtx, e: CUevent) -> CUresult {
    log(format!(
        "cuGreenCtxWaitEvent {:#x} {:#x}",
        g.addr(),
        e.addr()
    ));
    OK
}
unsafe extern "C" fn cu_green_get_id(g: CUgreenCtx, id: *mut c_ulonglong) -> CUresult {
    unsafe { *id = g.addr() as u64 * 10 };
    OK
}
unsafe extern "C" fn cu_ctx_record(c: CUcontext, e: CUevent) -> CUresult {
    log(format!("cuCtxRecordEvent {:#x} {:#x}", c.addr(), e.addr()));
    OK
}
unsafe extern "C" fn cu_ctx_wait(c: CUcontext, e: CUevent) -> CUresult {
    log(format!("cuCtxWaitEvent {:#x} {:#x}", c.addr(), e.addr()));
    OK
}
unsafe extern "C" fn cu_ctx_get_id(c: CUcontext, id: *mut c_ulonglong) -> CUresult {
    unsafe { *id = c.addr() as u64 * 100 };
    OK
}

mock_entries! {
    fn mock_entry {
        "cuDriverGetVersion" => cu_driver_get_version as unsafe extern "C" fn(_) -> _,
        "cuDeviceGetDevResource" => cu_device_get_dev_resource as unsafe extern "C" fn(_, _, _) -> _,
        "cuCtxGetDevResource" => cu_ctx_get_dev_resource as unsafe extern "C" fn(_, _, _) -> _,
        "cuGreenCtxGetDevResource" => cu_green_get_dev_resource as unsafe extern "C" fn(_, _, _) -> _,
        "cuStreamGetDevResource" => cu_stream_get_dev_resource as unsafe extern "C" fn(_, _, _) -> _,
        "cuDevSmResourceSplit" =>
            cu_dev_sm_resource_split as unsafe extern "C" fn(_, _, _, _, _, _) -> _,
        "cuDevResourceGenerateDesc" => cu_generate_desc as unsafe extern "C" fn(_, _, _) -> _,
        "cuGreenCtxCreate" => cu_green_create as unsafe extern "C" fn(_, _, _, _) -> _,
        "cuGreenCtxDestroy" => cu_green_destroy as unsafe extern "C" fn(_) -> _,
        "cuCtxFromGreenCtx" => cu_ctx_from_green as unsafe extern "C" fn(_, _) -> _,
        "cuGreenCtxStreamCreate" => cu_green_stream_create as unsafe extern "C" fn(_, _, _, _) -> _,
        "cuGreenCtxRecordEvent" => cu_green_record as unsafe extern "C" fn(_, _) -> _,
        "cuGreenCtxWaitEvent" => cu_green_wait as unsafe extern "C" fn(_, _) -> _,
        "cuGreenCtxGetId" => cu_green_get_id as unsafe extern "C" fn(_, _) -> _,
        "cuCtxRecordEvent" => cu_ctx_record as unsafe extern "C" fn(_, _) -> _,
        "cuCtxWaitEvent" => cu_ctx_wait as unsafe extern "C" fn(_, _) -> _,
        "cuCtxGetId" => cu_ctx_get_id as unsafe extern "C" fn(_, _) -> _,
    }
}

#[test]
fn green_contexts_13_1_against_a_mock_driver() {
    install(mock_entry);
    let device = Device::get(0).unwrap();
    let ctx = Context::primary(device).unwrap();
    let sms = SmResource::of_device(device).unwrap();
    assert_eq!((sms.sm_count(), sms.locality_domain()), (132, 1));
    take_log();
    split_with_groups(&sms);
    stream_resources(&ctx);
    workqueues(device, &ctx, &sms);
    execution_context(device, &ctx, &sms);
}

fn split_with_groups(sms: &SmResource) {
    // Groups of different sizes, each parameter as the driver reads it.
    let mut groups = [SmPartition::EMPTY; 3];
    let params = [
        GroupParams::sms(16).coscheduled(8),
        GroupParams::sms(8).locality_domain(1).supplemental_sms(),
        GroupParams::sms(0).coscheduled(2).backfill(),
    ];
    let split = sms.split(&params, &mut groups).unwrap();
    assert_eq!(split.count, 3);
    let sizes: Vec<u32> = groups.iter().map(SmPartition::sm_count).collect();
    assert_eq!(sizes, [16, 8, 108]);
    assert!(split.remaining.is_empty());
    assert_eq!(
        take_log(),
        ["cuDevSmResourceSplit n3 input sm:132 flags0 remaindertrue \
          [16/8/0/f0/d0/r0 8/0/0/f6/d1/r0 0/2/0/f1/d0/r0]"]
    );
    // The caller's parameters are not touched.
    assert_eq!(params[2].sm_count(), 0);
    // A remainder when the groups leave SMs.
    let split = sms.split(&[GroupParams::sms(64)], &mut groups).unwrap();
    assert_eq!((groups[0].sm_count(), split.remaining.sm_count()), (64, 68));
    take_log();

    // Refused before the driver, each with the rule it breaks.
    let refused = |params: &[GroupParams], slots: usize, rule: &str| {
        let mut groups = [SmPartition::EMPTY; 70];
        let e = sms.split(params, &mut groups[..slots]).unwrap_err();
        assert!(
            matches!(e, Error::InvalidArgument(m) if m.contains(rule)),
            "{e} should name {rule:?}"
        );
    };
    refused(&[], 1, "no groups");
    refused(&[GroupParams::sms(8); 65], 70, "more than 64");
    refused(
        &[GroupParams::sms(8), GroupParams::sms(8)],
        1,
        "fewer slots",
    );
    refused(&[GroupParams::sms(7)], 1, "even");
    refused(&[GroupParams::sms(1)], 1, "from 2");
    refused(&[GroupParams::sms(134)], 1, "from 2");
    refused(
        &[GroupParams::sms(12).coscheduled(8)],
        1,
        "multiple of its co-scheduled",
    );
    refused(
        &[GroupParams::sms(4).supplemental_sms()],
        1,
        "locality domain",
    );
    refused(
        &[GroupParams::sms(100), GroupParams::sms(40)],
        2,
        "more SMs together",
    );
    assert!(take_log().is_empty(), "a refused split reached the driver");

    // A driver refusal comes back with its code and the call.
    let e = sms
        .split(&[GroupParams::sms(64).coscheduled(64)], &mut groups)
        .unwrap_err();
    assert!(
        e.is(CUresult::CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION),
        "{e}"
    );
    assert_eq!(e.call(), Some("cuDevSmResourceSplit"));
    take_log();
}

fn stream_resources(ctx: &Context) {
    let stream = Stream::new(ctx, StreamFlags::NON_BLOCKING).unwrap();
    let sms = SmResource::of_stream(&stream).unwrap();
    assert_eq!(sms.sm_count(), 16);
    let wq = WorkqueueConfig::of_stream(&stream).unwrap();
    assert_eq!(wq.concurrency_limit(), 4);
    let s = stream.as_raw().addr();
    assert_eq!(
        take_log(),
        [
            format!("cuStreamGetDevResource {s:#x} type{}", SM.0),
            format!("cuStreamGetDevResource {s:#x} type{}", WQ_CONFIG.0),
        ]
    );
}

fn workqueues(device: Device, ctx: &Context, sms: &SmResource) {
    let config = WorkqueueConfig::of_device(device).unwrap();
    assert_eq!(config.device(), device);
    assert_eq!(config.concurrency_limit(), 4);
    assert_eq!(config.scope(), Some(WorkqueueScope::DeviceContext));
    let config = config
        .with_concurrency_limit(2)
        .with_scope(WorkqueueScope::GreenContextBalanced);
    assert_eq!(
        (config.concurrency_limit(), config.scope()),
        (2, Some(WorkqueueScope::GreenContextBalanced))
    );
    let mut groups = [SmPartition::EMPTY; 2];
    sms.split(&[GroupParams::sms(16), GroupParams::sms(16)], &mut groups)
        .unwrap();
    take_log();
    // The workqueue configuration after the SM groups, as the driver reads it.
    ResourceDesc::with_workqueue_config(&groups, &config).unwrap();
    let shared = Workqueue::of_context(ctx).unwrap();
    ResourceDesc::with_workqueue(&groups[..1], &shared).unwrap();
    assert_eq!(
        take_log(),
        [
            format!(
                "cuDevResourceGenerateDesc [sm:16 sm:16 wqconfig:dev0:limit2:scope{}]",
                CUdevWorkqueueConfigScope::CU_WORKQUEUE_SCOPE_GREEN_CTX_BALANCED.0
            ),
            format!("cuCtxGetDevResource {CTX:#x} type{}", WQ.0),
            "cuDevResourceGenerateDesc [sm:16 wq:0x77]".to_string(),
        ]
    );
    // The descriptor's own rules hold with a workqueue too.
    assert!(matches!(
        ResourceDesc::with_workqueue_config(&[], &config),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        ResourceDesc::with_workqueue_config(&[SmPartition::EMPTY], &config),
        Err(Error::InvalidArgument(_))
    ));
    assert!(take_log().is_empty());
}

fn execution_context(device: Device, ctx: &Context, sms: &SmResource) {
    let mut groups = [SmPartition::EMPTY; 1];
    sms.split(&[GroupParams::sms(16)], &mut groups).unwrap();
    let desc = ResourceDesc::new(&groups).unwrap();
    let green = GreenContext::create(device, &desc).unwrap();
    // SAFETY: this thread alone uses the green context.
    let gctx = unsafe { Context::from_green(green) }.unwrap();
    let event = Event::new(ctx, EventFlags::DISABLE_TIMING).unwrap();
    let e = event.as_raw().addr();
    take_log();
    gctx.record_event(&event).unwrap();
    gctx.wait_event(&event).unwrap();
    ctx.record_event(&event).unwrap();
    ctx.wait_event(&event).unwrap();
    assert_eq!(gctx.id().unwrap(), GREEN_CTX as u64 * 10);
    assert_eq!(ctx.id().unwrap(), CTX as u64 * 100);
    let stream = green::stream(&gctx, -1).unwrap();
    assert_eq!(SmResource::of_context(&gctx).unwrap().sm_count(), 16);
    assert_eq!(
        WorkqueueConfig::of_context(&gctx)
            .unwrap()
            .concurrency_limit(),
        4
    );
    assert_eq!(
        take_log(),
        [
            format!("cuGreenCtxRecordEvent {GREEN_CTX:#x} {e:#x}"),
            format!("cuGreenCtxWaitEvent {GREEN_CTX:#x} {e:#x}"),
            format!("cuCtxRecordEvent {CTX:#x} {e:#x}"),
            format!("cuCtxWaitEvent {CTX:#x} {e:#x}"),
            format!("cuGreenCtxStreamCreate {GREEN_CTX:#x} flags1 prio-1"),
            format!("cuGreenCtxGetDevResource {GREEN_CTX:#x} type{}", SM.0),
            format!(
                "cuGreenCtxGetDevResource {GREEN_CTX:#x} type{}",
                WQ_CONFIG.0
            ),
        ]
    );
    drop(stream);
    drop(gctx);
    assert_eq!(take_log(), [format!("cuGreenCtxDestroy {GREEN_CTX:#x}")]);
}
