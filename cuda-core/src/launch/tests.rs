//! CPU tests of the attribute encoding and of the `CUlaunchConfig` a configuration
//! builds (no GPU needed: nothing here calls the driver).

use core::mem::{offset_of, size_of};
use core::ptr;

use cuda_sys::{
    CUaccessPolicyWindow, CUaccessProperty, CUclusterSchedulingPolicy, CUevent, CUlaunchAttribute,
    CUlaunchAttributeID as Id, CUlaunchConfig, CUlaunchMemSyncDomain,
};

use super::{Dim3, LaunchAttribute, LaunchConfig, MAX_LAUNCH_ATTRIBUTES, TooManyAttributes};

/// The 64 value bytes of an attribute.
fn value_bytes(a: &CUlaunchAttribute) -> [u8; 64] {
    // SAFETY: `pad` spans the whole 64-byte union, and every constructor starts from an
    // all-zero value, so all 64 bytes are initialized.
    unsafe { a.value.pad }.map(|b| u8::from_ne_bytes(b.to_ne_bytes()))
}

/// The value bytes expected for `prefix` followed by zeros.
fn expect(prefix: &[u8]) -> [u8; 64] {
    let mut out = [0u8; 64];
    out[..prefix.len()].copy_from_slice(prefix);
    out
}

fn le32(words: &[u32]) -> [u8; 64] {
    let mut out = [0u8; 64];
    for (chunk, w) in out.chunks_mut(4).zip(words) {
        chunk.copy_from_slice(&w.to_le_bytes());
    }
    out
}

const FAKE_EVENT: CUevent = ptr::without_provenance_mut(0x1122_3344_5566_7788);

#[test]
fn raw_layout_is_the_c_layout() {
    assert_eq!(size_of::<CUlaunchAttribute>(), 72);
    assert_eq!(offset_of!(CUlaunchAttribute, value), 8);
    assert_eq!(size_of::<LaunchAttribute<'_>>(), 72);
}

#[test]
fn ids_match_the_headers() {
    let cases: [(LaunchAttribute<'static>, u32); 13] = [
        (
            LaunchAttribute::access_policy_window(CUaccessPolicyWindow::default()),
            1,
        ),
        (LaunchAttribute::cooperative(true), 2),
        (LaunchAttribute::cluster_dim(Dim3::x(2)), 4),
        (
            LaunchAttribute::cluster_scheduling_policy(
                CUclusterSchedulingPolicy::CU_CLUSTER_SCHEDULING_POLICY_SPREAD,
            ),
            5,
        ),
        (LaunchAttribute::programmatic_stream_serialization(true), 6),
        // SAFETY: never launched; the handle is only stored.
        (
            unsafe { LaunchAttribute::programmatic_event_raw(FAKE_EVENT, true) },
            7,
        ),
        (LaunchAttribute::priority(-3), 8),
        (LaunchAttribute::mem_sync_domain_map(0, 1), 9),
        (
            LaunchAttribute::mem_sync_domain(
                CUlaunchMemSyncDomain::CU_LAUNCH_MEM_SYNC_DOMAIN_REMOTE,
            ),
            10,
        ),
        (LaunchAttribute::preferred_cluster_dim(Dim3::x(4)), 11),
        // SAFETY: as above.
        (
            unsafe { LaunchAttribute::launch_completion_event_raw(FAKE_EVENT) },
            12,
        ),
        (LaunchAttribute::device_updatable_kernel_node(true), 13),
        (LaunchAttribute::preferred_shared_memory_carveout(50), 14),
    ];
    for (attr, id) in cases {
        assert_eq!(attr.id().0, id, "{attr:?}");
        assert_eq!(attr.as_raw().pad, [0; 4]);
    }
    assert_eq!(
        LaunchAttribute::nvlink_util_centric_scheduling(true).id().0,
        16
    );
}

#[test]
fn union_values_land_in_place() {
    let v = |a: LaunchAttribute<'_>| value_bytes(&a.into_raw());
    assert_eq!(
        v(LaunchAttribute::programmatic_stream_serialization(true)),
        le32(&[1])
    );
    assert_eq!(
        v(LaunchAttribute::programmatic_stream_serialization(false)),
        le32(&[0])
    );
    assert_eq!(v(LaunchAttribute::cooperative(true)), le32(&[1]));
    assert_eq!(v(LaunchAttribute::priority(-3)), le32(&[(-3i32) as u32]));
    assert_eq!(
        v(LaunchAttribute::cluster_dim(Dim3::new(2, 3, 4))),
        le32(&[2, 3, 4])
    );
    assert_eq!(
        v(LaunchAttribute::preferred_cluster_dim(Dim3::new(8, 1, 1))),
        le32(&[8, 1, 1])
    );
    assert_eq!(
        v(LaunchAttribute::cluster_scheduling_policy(
            CUclusterSchedulingPolicy::CU_CLUSTER_SCHEDULING_POLICY_LOAD_BALANCING
        )),
        le32(&[2])
    );
    assert_eq!(
        v(LaunchAttribute::mem_sync_domain(
            CUlaunchMemSyncDomain::CU_LAUNCH_MEM_SYNC_DOMAIN_REMOTE
        )),
        le32(&[1])
    );
    assert_eq!(
        v(LaunchAttribute::mem_sync_domain_map(3, 7)),
        expect(&[3, 7])
    );
    assert_eq!(
        v(LaunchAttribute::preferred_shared_memory_carveout(75)),
        le32(&[75])
    );
    assert_eq!(
        v(LaunchAttribute::nvlink_util_centric_scheduling(true)),
        le32(&[1])
    );
    assert_eq!(
        v(LaunchAttribute::device_updatable_kernel_node(true)),
        le32(&[1])
    );

    // { CUevent event; int flags; int triggerAtBlockStart; }
    let ev = 0x1122_3344_5566_7788u64.to_le_bytes();
    // SAFETY: never launched; the handle is only stored.
    let pe = v(unsafe { LaunchAttribute::programmatic_event_raw(FAKE_EVENT, true) });
    assert_eq!(pe[..8], ev);
    assert_eq!(pe[8..12], 0u32.to_le_bytes());
    assert_eq!(pe[12..16], 1u32.to_le_bytes());
    assert_eq!(pe[16..], [0; 48]);
    // SAFETY: as above.
    let pe = v(unsafe { LaunchAttribute::programmatic_event_raw(FAKE_EVENT, false) });
    assert_eq!(pe[12..16], 0u32.to_le_bytes());
    // { CUevent event; int flags; }
    // SAFETY: as above.
    let lc = v(unsafe { LaunchAttribute::launch_completion_event_raw(FAKE_EVENT) });
    assert_eq!(lc[..8], ev);
    assert_eq!(lc[8..], [0; 56]);

    // { void *base_ptr; size_t num_bytes; float hitRatio; hitProp; missProp; }
    let window = CUaccessPolicyWindow {
        base_ptr: ptr::without_provenance_mut(0x7000_0000),
        num_bytes: 1 << 20,
        hitRatio: 0.5,
        hitProp: CUaccessProperty::CU_ACCESS_PROPERTY_PERSISTING,
        missProp: CUaccessProperty::CU_ACCESS_PROPERTY_STREAMING,
    };
    let w = v(LaunchAttribute::access_policy_window(window));
    assert_eq!(w[..8], 0x7000_0000u64.to_le_bytes());
    assert_eq!(w[8..16], (1u64 << 20).to_le_bytes());
    assert_eq!(w[16..20], 0.5f32.to_le_bytes());
    assert_eq!(w[20..24], 2u32.to_le_bytes());
    assert_eq!(w[24..28], 1u32.to_le_bytes());
    assert_eq!(w[28..], [0; 36]);
}

#[test]
fn config_fields_and_attribute_array() {
    let cfg = LaunchConfig::new((4, 2), 128)
        .shared_mem(4096)
        .cluster_dim(2)
        .and_then(|c| c.programmatic_stream_serialization())
        .and_then(|c| c.priority(-1))
        .unwrap();
    let raw: CUlaunchConfig = cfg.as_raw();
    assert_eq!(
        (raw.gridDimX, raw.gridDimY, raw.gridDimZ),
        (4, 2, 1),
        "grid"
    );
    assert_eq!(
        (raw.blockDimX, raw.blockDimY, raw.blockDimZ),
        (128, 1, 1),
        "block"
    );
    assert_eq!(raw.sharedMemBytes, 4096);
    assert!(raw.hStream.is_null(), "default stream");
    assert_eq!(raw.numAttrs, 3);
    assert!(!raw.attrs.is_null());
    // SAFETY: `raw.attrs` points at `cfg`'s array of `numAttrs` initialized attributes,
    // and `cfg` is alive and unchanged.
    let attrs = unsafe { core::slice::from_raw_parts(raw.attrs, raw.numAttrs as usize) };
    let ids: [u32; 3] = core::array::from_fn(|i| attrs[i].id.0);
    assert_eq!(
        ids,
        [
            Id::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION.0,
            Id::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION.0,
            Id::CU_LAUNCH_ATTRIBUTE_PRIORITY.0,
        ]
    );
    assert_eq!(value_bytes(&attrs[0]), le32(&[2, 1, 1]));
    assert_eq!(value_bytes(&attrs[1]), le32(&[1]));
    assert_eq!(value_bytes(&attrs[2]), le32(&[u32::MAX]));

    let empty = LaunchConfig::new(1, 1);
    let raw = empty.as_raw();
    assert!(raw.attrs.is_null());
    assert_eq!(raw.numAttrs, 0);
}

#[test]
fn raw_stream_is_passed_through() {
    // SAFETY: never launched; the handle is only stored.
    let cfg = unsafe { LaunchConfig::new(1, 1).raw_stream(cuda_sys::CU_STREAM_PER_THREAD) };
    assert_eq!(cfg.as_raw().hStream, cuda_sys::CU_STREAM_PER_THREAD);
    assert_eq!(cfg.stream_handle(), cuda_sys::CU_STREAM_PER_THREAD);
}

#[test]
fn same_id_replaces() {
    let cfg = LaunchConfig::new(1, 1)
        .priority(1)
        .and_then(|c| c.cooperative(true))
        .and_then(|c| c.priority(5))
        .unwrap();
    assert_eq!(cfg.num_attributes(), 2);
    let p = cfg.find(Id::CU_LAUNCH_ATTRIBUTE_PRIORITY).unwrap();
    // SAFETY: the ID says `priority` is the member set.
    assert_eq!(unsafe { p.value.priority }, 5);
    assert_eq!(
        cfg.attribute(0).map(|a| a.id),
        Some(Id::CU_LAUNCH_ATTRIBUTE_PRIORITY)
    );
    assert!(cfg.attribute(2).is_none());
}

#[test]
fn capacity_error() {
    let all: [LaunchAttribute<'static>; MAX_LAUNCH_ATTRIBUTES] = [
        LaunchAttribute::cooperative(false),
        LaunchAttribute::priority(0),
        LaunchAttribute::cluster_dim(Dim3::x(1)),
        LaunchAttribute::preferred_cluster_dim(Dim3::x(1)),
        LaunchAttribute::programmatic_stream_serialization(true),
        LaunchAttribute::mem_sync_domain_map(0, 1),
        LaunchAttribute::preferred_shared_memory_carveout(0),
        LaunchAttribute::access_policy_window(CUaccessPolicyWindow::default()),
    ];
    let mut cfg = LaunchConfig::new(1, 1);
    for a in all {
        cfg.set(a).unwrap();
    }
    assert_eq!(cfg.num_attributes(), MAX_LAUNCH_ATTRIBUTES);
    // Replacing still works when full.
    cfg.set(LaunchAttribute::priority(2)).unwrap();
    let extra =
        LaunchAttribute::mem_sync_domain(CUlaunchMemSyncDomain::CU_LAUNCH_MEM_SYNC_DOMAIN_DEFAULT);
    let e = cfg.set(extra).unwrap_err();
    assert_eq!(
        e,
        TooManyAttributes {
            id: Id::CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN,
            capacity: MAX_LAUNCH_ATTRIBUTES
        }
    );
    assert_eq!(cfg.num_attributes(), MAX_LAUNCH_ATTRIBUTES);
    assert!(cfg.clone().with(extra).is_err());
    let err: crate::error::Error = e.into();
    assert!(matches!(err, crate::error::Error::InvalidArgument(_)));

    assert!(cfg.remove(Id::CU_LAUNCH_ATTRIBUTE_PRIORITY));
    assert!(!cfg.remove(Id::CU_LAUNCH_ATTRIBUTE_PRIORITY));
    assert_eq!(cfg.num_attributes(), MAX_LAUNCH_ATTRIBUTES - 1);
    assert_eq!(
        cfg.attribute(1).map(|a| a.id),
        Some(Id::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION)
    );
    cfg.set(extra).unwrap();
    cfg.clear_attributes();
    assert_eq!(cfg.num_attributes(), 0);
    assert!(cfg.as_raw().attrs.is_null());
}

#[test]
fn device_node_reads_the_output_slot() {
    let cfg = LaunchConfig::new(1, 1)
        .device_updatable_kernel_node()
        .unwrap();
    assert_eq!(cfg.device_node(), None, "nothing written yet");
    let raw = cfg.as_raw();
    // Write the output as the driver does during a captured launch.
    // SAFETY: `raw.attrs` points into `cfg`'s `UnsafeCell` array, which nothing else
    // borrows now.
    unsafe {
        (*raw.attrs).value.deviceUpdatableKernelNode.devNode = ptr::without_provenance_mut(0x40);
    }
    assert_eq!(cfg.device_node(), Some(ptr::without_provenance_mut(0x40)));
    assert_eq!(LaunchConfig::new(1, 1).device_node(), None);
}
