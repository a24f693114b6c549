//! CPU tests of the attribute encoding and of the `CUlaunchConfig` a configuration
//! builds (no GPU needed: nothing here calls the driver).

use core::mem::{offset_of, size_of};
use core::ptr;

use cudadrv_sys::{
    CUaccessPolicyWindow, CUaccessProperty, CUclusterSchedulingPolicy, CUevent, CUlaunchAttribute,
    CUlaunchAttributeID as Id, CUlaunchAttributePortableClusterMode, CUlaunchConfig,
    CUlaunchMemSyncDomain, CUsharedMemoryMode, CUsynchronizationPolicy,
};

use super::{
    Dim3, LaunchAttribute, LaunchConfig, MAX_LAUNCH_ATTRIBUTES, RawAttributes, TooManyAttributes,
};

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
    let mut buf = RawAttributes::new();
    let raw: CUlaunchConfig = cfg.as_raw(&mut buf);
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
    // SAFETY: `raw.attrs` points at `buf`'s array of `numAttrs` initialized attributes,
    // and `buf` is alive and unchanged.
    let attrs = unsafe { core::slice::from_raw_parts(raw.attrs, raw.numAttrs as usize) };
    assert_eq!(attrs.len(), buf.as_slice().len());
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
    let raw = empty.as_raw(&mut buf);
    assert!(buf.as_slice().is_empty(), "refilled from scratch");
    assert!(raw.attrs.is_null());
    assert_eq!(raw.numAttrs, 0);
}

#[test]
fn raw_stream_is_passed_through() {
    // SAFETY: never launched; the handle is only stored.
    let cfg = unsafe { LaunchConfig::new(1, 1).raw_stream(cudadrv_sys::CU_STREAM_PER_THREAD) };
    assert_eq!(
        cfg.as_raw(&mut RawAttributes::new()).hStream,
        cudadrv_sys::CU_STREAM_PER_THREAD
    );
    assert_eq!(cfg.stream_handle(), cudadrv_sys::CU_STREAM_PER_THREAD);
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
    // In ID order, not in the order they were set.
    assert_eq!(
        cfg.attribute(0).map(|a| a.id),
        Some(Id::CU_LAUNCH_ATTRIBUTE_COOPERATIVE)
    );
    assert_eq!(
        cfg.attribute(1).map(|a| a.id),
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
        cfg.attribute(2).map(|a| a.id),
        Some(Id::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION)
    );
    cfg.set(extra).unwrap();
    cfg.clear_attributes();
    assert_eq!(cfg.num_attributes(), 0);
    assert!(cfg.as_raw(&mut RawAttributes::new()).attrs.is_null());
}

#[test]
fn device_node_is_copied_back_from_the_launch_array() {
    let cfg = LaunchConfig::new(1, 1)
        .priority(1)
        .and_then(|c| c.device_updatable_kernel_node())
        .unwrap();
    assert_eq!(cfg.device_node(), None, "nothing written yet");
    let mut buf = RawAttributes::new();
    let raw = cfg.as_raw(&mut buf);
    assert_eq!(raw.numAttrs, 2);
    assert_eq!(buf.device_node(), None);
    // Write the output as the driver does during a captured launch: into the array the
    // launch built, after the priority (ID order).
    // SAFETY: `raw.attrs` points at `buf`'s two initialized attributes, which nothing
    // else borrows now.
    unsafe {
        let dun = raw.attrs.add(1);
        assert_eq!(
            (*dun).id,
            Id::CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE
        );
        (*dun).value.deviceUpdatableKernelNode.devNode = ptr::without_provenance_mut(0x40);
    }
    assert_eq!(buf.device_node(), Some(ptr::without_provenance_mut(0x40)));
    assert_eq!(cfg.device_node(), None, "not copied back yet");
    cfg.keep_output(&buf);
    assert_eq!(cfg.device_node(), Some(ptr::without_provenance_mut(0x40)));
    // The copies carry it, as the driver's array did.
    let a = cfg
        .find(Id::CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE)
        .unwrap();
    // SAFETY: the ID says `deviceUpdatableKernelNode` is the member set.
    let (updatable, node) = unsafe {
        (
            a.value.deviceUpdatableKernelNode.deviceUpdatable,
            a.value.deviceUpdatableKernelNode.devNode,
        )
    };
    assert_eq!((updatable, node.addr()), (1, 0x40));
    assert_eq!(cfg.clone().device_node(), cfg.device_node());
    // Setting the attribute again, or removing it, forgets the node.
    let mut again = cfg.clone();
    again
        .set(LaunchAttribute::device_updatable_kernel_node(true))
        .unwrap();
    assert_eq!(again.device_node(), None);
    let mut removed = cfg.clone();
    assert!(removed.remove(Id::CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE));
    assert_eq!(removed.device_node(), None);
    // A configuration without the attribute ignores an array that has one.
    let plain = LaunchConfig::new(1, 1);
    plain.keep_output(&buf);
    assert_eq!(plain.device_node(), None);
    assert_eq!(LaunchConfig::new(1, 1).device_node(), None);
}

#[test]
fn values_moved_by_value_stay_small() {
    // The configuration is built and moved by value through every builder call; its
    // attributes are kept compact and expanded on the launch's stack.
    #[cfg(target_pointer_width = "64")]
    assert!(
        size_of::<LaunchConfig<'_>>() <= 128,
        "LaunchConfig is {} bytes",
        size_of::<LaunchConfig<'_>>()
    );
    assert!(
        size_of::<TooManyAttributes>() <= 64,
        "TooManyAttributes is {} bytes",
        size_of::<TooManyAttributes>()
    );
    // The transient array holds the driver's form of the attributes, 72 bytes each.
    assert_eq!(
        size_of::<RawAttributes>(),
        MAX_LAUNCH_ATTRIBUTES * 72 + size_of::<usize>()
    );
}

/// One attribute of every kind with a typed constructor, non-zero values where the value
/// has room for them.
fn every_typed_attribute() -> [LaunchAttribute<'static>; 14] {
    [
        LaunchAttribute::access_policy_window(CUaccessPolicyWindow {
            base_ptr: ptr::without_provenance_mut(0x7000_0000),
            num_bytes: (1 << 33) + 5,
            hitRatio: 0.375,
            hitProp: CUaccessProperty::CU_ACCESS_PROPERTY_PERSISTING,
            missProp: CUaccessProperty::CU_ACCESS_PROPERTY_STREAMING,
        }),
        LaunchAttribute::cooperative(true),
        LaunchAttribute::cluster_dim(Dim3::new(2, 3, 4)),
        LaunchAttribute::cluster_scheduling_policy(
            CUclusterSchedulingPolicy::CU_CLUSTER_SCHEDULING_POLICY_LOAD_BALANCING,
        ),
        LaunchAttribute::programmatic_stream_serialization(true),
        // SAFETY: never launched; the handle is only stored.
        unsafe { LaunchAttribute::programmatic_event_raw(FAKE_EVENT, true) },
        LaunchAttribute::priority(i32::MIN + 7),
        LaunchAttribute::mem_sync_domain_map(3, 250),
        LaunchAttribute::mem_sync_domain(CUlaunchMemSyncDomain::CU_LAUNCH_MEM_SYNC_DOMAIN_REMOTE),
        LaunchAttribute::preferred_cluster_dim(Dim3::new(u32::MAX, 1, 65_536)),
        // SAFETY: as above.
        unsafe { LaunchAttribute::launch_completion_event_raw(FAKE_EVENT) },
        LaunchAttribute::device_updatable_kernel_node(true),
        LaunchAttribute::preferred_shared_memory_carveout(u32::MAX),
        LaunchAttribute::nvlink_util_centric_scheduling(true),
    ]
}

#[test]
fn every_attribute_comes_back_byte_for_byte() {
    let all = every_typed_attribute();
    let falses = [
        LaunchAttribute::cooperative(false),
        LaunchAttribute::programmatic_stream_serialization(false),
        // SAFETY: never launched; the handle is only stored.
        unsafe { LaunchAttribute::programmatic_event_raw(FAKE_EVENT, false) },
        LaunchAttribute::device_updatable_kernel_node(false),
        LaunchAttribute::nvlink_util_centric_scheduling(false),
    ];
    for group in all.chunks(MAX_LAUNCH_ATTRIBUTES).chain(falses.chunks(8)) {
        let mut cfg = LaunchConfig::new(1, 1);
        // Set in reverse: the array comes out in ID order whatever the order of `set`.
        for a in group.iter().rev() {
            cfg.set(*a).unwrap();
        }
        assert_eq!(cfg.num_attributes(), group.len());
        for a in group {
            let back = cfg.find(a.id()).unwrap();
            assert_eq!(back.id, a.id());
            assert_eq!(back.pad, [0; 4]);
            assert_eq!(value_bytes(&back), value_bytes(a.as_raw()), "{a:?}");
        }
        let mut buf = RawAttributes::new();
        let raw = cfg.as_raw(&mut buf);
        assert_eq!(raw.numAttrs as usize, group.len());
        for (k, (got, want)) in buf.as_slice().iter().zip(group).enumerate() {
            assert_eq!(got.id, want.id());
            assert_eq!(value_bytes(got), value_bytes(want.as_raw()), "{want:?}");
            let copy = cfg.attribute(k).unwrap();
            assert_eq!(value_bytes(&copy), value_bytes(got));
        }
    }
}

/// A raw attribute: `id`, the value zeroed, then `write` applied to it.
fn raw_attr(id: u32, write: impl FnOnce(&mut CUlaunchAttribute)) -> LaunchAttribute<'static> {
    let mut a = CUlaunchAttribute {
        id: Id(id),
        ..CUlaunchAttribute::default()
    };
    write(&mut a);
    // SAFETY: never launched; every value is zero or a plain number.
    unsafe { LaunchAttribute::from_raw(a) }
}

#[test]
fn raw_attributes_fit_or_are_refused() {
    // Every ID of the CUDA 13 headers is stored; 0 (ignore), 15 and unknown IDs are not.
    for id in 0..40 {
        let mut cfg = LaunchConfig::new(1, 1);
        let r = cfg.set(raw_attr(id, |_| ())).map(|c| c.num_attributes());
        if (1..=14).contains(&id) || (16..=18).contains(&id) {
            assert_eq!(r, Ok(1), "ID {id}");
            assert_eq!(cfg.find(Id(id)).map(|a| value_bytes(&a)), Some([0; 64]));
        } else {
            assert_eq!(
                r,
                Err(TooManyAttributes {
                    id: Id(id),
                    capacity: MAX_LAUNCH_ATTRIBUTES
                }),
                "ID {id}"
            );
            assert_eq!(cfg.num_attributes(), 0);
            assert!(!cfg.remove(Id(id)));
            assert!(cfg.find(Id(id)).is_none());
        }
    }

    // The attributes without a typed constructor keep their enum value.
    let sync = raw_attr(Id::CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY.0, |a| {
        a.value.syncPolicy = CUsynchronizationPolicy::CU_SYNC_POLICY_BLOCKING_SYNC;
    });
    let portable = raw_attr(Id::CU_LAUNCH_ATTRIBUTE_PORTABLE_CLUSTER_SIZE_MODE.0, |a| {
        a.value.portableClusterSizeMode = CUlaunchAttributePortableClusterMode(2);
    });
    let shmem = raw_attr(Id::CU_LAUNCH_ATTRIBUTE_SHARED_MEMORY_MODE.0, |a| {
        a.value.sharedMemoryMode = CUsharedMemoryMode(4);
    });
    let mut cfg = LaunchConfig::new(1, 1);
    for a in [sync, portable, shmem] {
        cfg.set(a).unwrap();
    }
    let mut buf = RawAttributes::new();
    let _ = cfg.as_raw(&mut buf);
    let got: [[u8; 64]; 3] = core::array::from_fn(|k| value_bytes(&buf.as_slice()[k]));
    assert_eq!(got, [le32(&[4]), le32(&[2]), le32(&[4])]);

    // Flags kept as one bit: any non-zero value comes back as 1.
    let coop = raw_attr(Id::CU_LAUNCH_ATTRIBUTE_COOPERATIVE.0, |a| {
        a.value.cooperative = -7;
    });
    let pe = raw_attr(Id::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT.0, |a| {
        a.value.programmaticEvent.event = FAKE_EVENT;
        a.value.programmaticEvent.flags = 1;
        a.value.programmaticEvent.triggerAtBlockStart = 9;
    });
    let lce = raw_attr(Id::CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT.0, |a| {
        a.value.launchCompletionEvent.event = FAKE_EVENT;
        a.value.launchCompletionEvent.flags = 1;
    });
    let mut cfg = LaunchConfig::new(1, 1);
    for a in [coop, pe, lce] {
        cfg.set(a).unwrap();
    }
    let _ = cfg.as_raw(&mut buf);
    let ev = 0x1122_3344_5566_7788u64.to_le_bytes();
    let [c, p, l] = buf.as_slice() else {
        panic!("{buf:?}")
    };
    assert_eq!(value_bytes(c), le32(&[1]));
    let p = value_bytes(p);
    assert_eq!(
        (&p[..8], &p[8..16], &p[16..]),
        (&ev[..], &le32(&[1, 1])[..8], &[0; 48][..])
    );
    let l = value_bytes(l);
    assert_eq!(
        (&l[..8], &l[8..12], &l[12..]),
        (&ev[..], &1u32.to_le_bytes()[..], &[0; 52][..])
    );

    // Values the compact storage cannot hold are refused; the configuration keeps what
    // it had.
    let mut cfg = LaunchConfig::new(1, 1)
        .mem_sync_domain(CUlaunchMemSyncDomain::CU_LAUNCH_MEM_SYNC_DOMAIN_REMOTE)
        .unwrap();
    let before = value_bytes(&cfg.find(Id::CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN).unwrap());
    let refuse = |cfg: &mut LaunchConfig<'static>, a: LaunchAttribute<'static>| {
        assert_eq!(
            cfg.set(a).map(|c| c.num_attributes()),
            Err(TooManyAttributes {
                id: a.id(),
                capacity: MAX_LAUNCH_ATTRIBUTES
            }),
            "{a:?}"
        );
    };
    refuse(
        &mut cfg,
        LaunchAttribute::mem_sync_domain(CUlaunchMemSyncDomain(256)),
    );
    refuse(
        &mut cfg,
        LaunchAttribute::cluster_scheduling_policy(CUclusterSchedulingPolicy(1 << 20)),
    );
    refuse(
        &mut cfg,
        LaunchAttribute::access_policy_window(CUaccessPolicyWindow {
            missProp: CUaccessProperty(300),
            ..CUaccessPolicyWindow::default()
        }),
    );
    refuse(
        &mut cfg,
        raw_attr(Id::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT.0, |a| {
            a.value.programmaticEvent.flags = 2;
        }),
    );
    refuse(
        &mut cfg,
        raw_attr(Id::CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT.0, |a| {
            a.value.launchCompletionEvent.flags = -1;
        }),
    );
    refuse(
        &mut cfg,
        raw_attr(Id::CU_LAUNCH_ATTRIBUTE_SHARED_MEMORY_MODE.0, |a| {
            a.value.sharedMemoryMode = CUsharedMemoryMode(u32::MAX);
        }),
    );
    assert_eq!(cfg.num_attributes(), 1);
    assert_eq!(
        value_bytes(&cfg.find(Id::CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN).unwrap()),
        before
    );
    // The largest values that fit.
    cfg.set(LaunchAttribute::mem_sync_domain(CUlaunchMemSyncDomain(255)))
        .unwrap();
    assert_eq!(
        value_bytes(&cfg.find(Id::CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN).unwrap()),
        le32(&[255])
    );
}

#[cfg(feature = "std")]
#[test]
fn debug_lists_the_ids() {
    let cfg = LaunchConfig::new(1, 1)
        .priority(1)
        .and_then(|c| c.cooperative(true))
        .unwrap();
    let s = std::format!("{cfg:?}");
    assert!(
        s.contains("CUlaunchAttributeID_enum(2), CUlaunchAttributeID_enum(8)"),
        "{s}"
    );
}

/// `sets_same` (what a replay region compares): the programmatic-serialization flag by
/// its member, every other attribute through the comparison it is given, and an
/// attribute the configuration does not set never matches.
#[cfg(all(feature = "alloc", feature = "graph"))]
#[test]
fn sets_same_compares_the_attribute_value() {
    let pss = Id::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    let on = LaunchConfig::new(1, 1)
        .programmatic_stream_serialization()
        .unwrap();
    let stored = on.find(pss).unwrap();
    let never = |_: &CUlaunchAttribute, _: &CUlaunchAttribute| -> bool {
        panic!("the flag is compared without building the attribute")
    };
    assert!(on.sets_same(&stored, never));
    assert!(!LaunchConfig::new(1, 1).sets_same(&stored, never));
    let mut off = LaunchConfig::new(1, 1);
    off.set(LaunchAttribute::programmatic_stream_serialization(false))
        .unwrap();
    assert!(!off.sets_same(&stored, never));
    assert!(off.sets_same(&off.find(pss).unwrap(), never));

    let bytes_eq = |a: &CUlaunchAttribute, b: &CUlaunchAttribute| {
        a.id == b.id && value_bytes(a) == value_bytes(b)
    };
    let three = LaunchConfig::new(1, 1).priority(3).unwrap();
    let stored = three.find(Id::CU_LAUNCH_ATTRIBUTE_PRIORITY).unwrap();
    assert!(three.sets_same(&stored, bytes_eq));
    assert!(
        !LaunchConfig::new(1, 1)
            .priority(4)
            .unwrap()
            .sets_same(&stored, bytes_eq)
    );
    assert!(!on.sets_same(&stored, bytes_eq));
}
