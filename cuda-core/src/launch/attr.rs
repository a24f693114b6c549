//! [`LaunchAttribute`]: one typed entry of a `cuLaunchKernelEx` attribute list.

use core::fmt;
use core::marker::PhantomData;

use cudadrv_sys::{
    CUaccessPolicyWindow, CUclusterSchedulingPolicy, CUevent, CUlaunchAttribute,
    CUlaunchAttributeID, CUlaunchMemSyncDomain, CUlaunchMemSyncDomainMap,
};

use super::Dim3;
use crate::driver::event::Event;

type Id = CUlaunchAttributeID;

/// One launch attribute (`CUlaunchAttribute`): an ID and the matching member of the
/// `CUlaunchAttributeValue` union, every other byte of the 64-byte value zero.
///
/// The constructors cover every attribute of `CUlaunchAttributeID` in CUDA 13.0 that
/// applies to a kernel launch or a kernel node. `'a` borrows the events an attribute
/// names, so a configuration cannot outlive them. The same values serve
/// [`LaunchConfig`](super::LaunchConfig) and graph kernel nodes
/// (`cuGraphKernelNodeSetAttribute` takes the same union).
#[derive(Clone, Copy)]
#[repr(transparent)]
pub struct LaunchAttribute<'a> {
    raw: CUlaunchAttribute,
    _borrow: PhantomData<&'a ()>,
}

impl<'a> LaunchAttribute<'a> {
    /// An attribute with `id` and an all-zero value.
    #[inline]
    fn zeroed(id: Id) -> Self {
        Self {
            raw: CUlaunchAttribute {
                id,
                ..CUlaunchAttribute::default()
            },
            _borrow: PhantomData,
        }
    }

    /// `CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION` (Programmatic Dependent
    /// Launch): with `allowed`, this kernel may start before the previous kernel in the
    /// stream finishes; it must execute `griddepcontrol.wait` before reading what that
    /// kernel wrote. In stream capture, it becomes a programmatic graph edge.
    #[doc(alias = "CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION")]
    #[inline]
    #[must_use]
    pub fn programmatic_stream_serialization(allowed: bool) -> Self {
        let mut a = Self::zeroed(Id::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION);
        a.raw.value.programmaticStreamSerializationAllowed = i32::from(allowed);
        a
    }

    /// `CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT`: the launch records `event`, which fires
    /// once every block of this kernel has executed `griddepcontrol.launch_dependents`
    /// (or exited); with `trigger_at_block_start`, once every block has started instead.
    /// Work waiting on the event (`cuStreamWaitEvent`) may then start early and must
    /// itself `griddepcontrol.wait` before reading this kernel's output.
    ///
    /// The driver requires an event created with `CU_EVENT_DISABLE_TIMING` that is not
    /// an interprocess event; use it as a dependency (`cuStreamWaitEvent`), not to time
    /// or to detect the kernel's completion.
    #[doc(alias = "CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT")]
    #[inline]
    #[must_use]
    pub fn programmatic_event(event: &'a Event, trigger_at_block_start: bool) -> Self {
        // SAFETY: `event` is a live event, borrowed for `'a`.
        unsafe { Self::programmatic_event_raw(event.as_raw(), trigger_at_block_start) }
    }

    /// [`programmatic_event`](Self::programmatic_event) with a raw event handle.
    ///
    /// # Safety
    /// `event` must be a valid event (created with `CU_EVENT_DISABLE_TIMING`) for every
    /// launch made with this attribute, that is for `'a`.
    #[doc(alias = "CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT")]
    #[inline]
    #[must_use]
    pub unsafe fn programmatic_event_raw(event: CUevent, trigger_at_block_start: bool) -> Self {
        let mut a = Self::zeroed(Id::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT);
        a.raw.value.programmaticEvent.event = event;
        a.raw.value.programmaticEvent.flags = 0;
        a.raw.value.programmaticEvent.triggerAtBlockStart = i32::from(trigger_at_block_start);
        a
    }

    /// `CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT`: the launch records `event`, which
    /// fires once every block of this kernel has started (launch completion), so work
    /// that waits on it may overlap this kernel. The event must be created with
    /// `CU_EVENT_DISABLE_TIMING`.
    #[doc(alias = "CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT")]
    #[inline]
    #[must_use]
    pub fn launch_completion_event(event: &'a Event) -> Self {
        // SAFETY: `event` is a live event, borrowed for `'a`.
        unsafe { Self::launch_completion_event_raw(event.as_raw()) }
    }

    /// [`launch_completion_event`](Self::launch_completion_event) with a raw event.
    ///
    /// # Safety
    /// `event` must be a valid event (created with `CU_EVENT_DISABLE_TIMING`) for every
    /// launch made with this attribute, that is for `'a`.
    #[doc(alias = "CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT")]
    #[inline]
    #[must_use]
    pub unsafe fn launch_completion_event_raw(event: CUevent) -> Self {
        let mut a = Self::zeroed(Id::CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT);
        a.raw.value.launchCompletionEvent.event = event;
        a.raw.value.launchCompletionEvent.flags = 0;
        a
    }

    /// `CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION`: thread block clusters of `dim` blocks
    /// (sm_90+); the grid must be a multiple of `dim` in each dimension.
    #[doc(alias = "CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION")]
    #[inline]
    #[must_use]
    pub fn cluster_dim(dim: Dim3) -> Self {
        let mut a = Self::zeroed(Id::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION);
        a.raw.value.clusterDim.x = dim.x;
        a.raw.value.clusterDim.y = dim.y;
        a.raw.value.clusterDim.z = dim.z;
        a
    }

    /// `CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION` (CUDA 12.8+): a preferred,
    /// larger cluster shape the driver uses where it fits; it must be a multiple of the
    /// [`cluster_dim`](Self::cluster_dim), which is then the fallback shape.
    #[doc(alias = "CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION")]
    #[inline]
    #[must_use]
    pub fn preferred_cluster_dim(dim: Dim3) -> Self {
        let mut a = Self::zeroed(Id::CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION);
        a.raw.value.preferredClusterDim.x = dim.x;
        a.raw.value.preferredClusterDim.y = dim.y;
        a.raw.value.preferredClusterDim.z = dim.z;
        a
    }

    /// `CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE`: spread or
    /// load-balance the clusters over the GPU.
    #[doc(alias = "CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE")]
    #[inline]
    #[must_use]
    pub fn cluster_scheduling_policy(policy: CUclusterSchedulingPolicy) -> Self {
        let mut a = Self::zeroed(Id::CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE);
        a.raw.value.clusterSchedulingPolicyPreference = policy;
        a
    }

    /// `CU_LAUNCH_ATTRIBUTE_COOPERATIVE`: a cooperative launch (all blocks resident at
    /// once, grid-wide synchronization allowed), as `cuLaunchCooperativeKernel`.
    #[doc(alias = "CU_LAUNCH_ATTRIBUTE_COOPERATIVE")]
    #[inline]
    #[must_use]
    pub fn cooperative(enabled: bool) -> Self {
        let mut a = Self::zeroed(Id::CU_LAUNCH_ATTRIBUTE_COOPERATIVE);
        a.raw.value.cooperative = i32::from(enabled);
        a
    }

    /// `CU_LAUNCH_ATTRIBUTE_PRIORITY`: the kernel's scheduling priority, in the range
    /// `cuCtxGetStreamPriorityRange` reports (lower numbers are higher priority).
    #[doc(alias = "CU_LAUNCH_ATTRIBUTE_PRIORITY")]
    #[inline]
    #[must_use]
    pub fn priority(priority: i32) -> Self {
        let mut a = Self::zeroed(Id::CU_LAUNCH_ATTRIBUTE_PRIORITY);
        a.raw.value.priority = priority;
        a
    }

    /// `CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN`: the memory synchronization domain the
    /// kernel's fences apply to.
    #[doc(alias = "CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN")]
    #[inline]
    #[must_use]
    pub fn mem_sync_domain(domain: CUlaunchMemSyncDomain) -> Self {
        let mut a = Self::zeroed(Id::CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN);
        a.raw.value.memSyncDomain = domain;
        a
    }

    /// `CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP`: maps the logical domains (default,
    /// remote) to hardware domain IDs.
    #[doc(alias = "CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP")]
    #[inline]
    #[must_use]
    pub fn mem_sync_domain_map(default: u8, remote: u8) -> Self {
        let mut a = Self::zeroed(Id::CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP);
        a.raw.value.memSyncDomainMap = CUlaunchMemSyncDomainMap {
            default_: default,
            remote,
        };
        a
    }

    /// `CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW`: an L2 persistence hint for a range of
    /// device memory. The range is only a hint: it is never dereferenced on the host.
    #[doc(alias = "CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW")]
    #[inline]
    #[must_use]
    pub fn access_policy_window(window: CUaccessPolicyWindow) -> Self {
        let mut a = Self::zeroed(Id::CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW);
        // Field by field: assigning the whole struct would copy its 4 trailing padding
        // bytes, uninitialized, into the union, whose 64 bytes are read as a whole when
        // the attribute is copied or compared.
        // SAFETY: plain writes into the zeroed union's `accessPolicyWindow` member, a
        // `Copy` struct of plain fields; no byte is read.
        unsafe {
            let w = &raw mut a.raw.value.accessPolicyWindow;
            (&raw mut (*w).base_ptr).write(window.base_ptr);
            (&raw mut (*w).num_bytes).write(window.num_bytes);
            (&raw mut (*w).hitRatio).write(window.hitRatio);
            (&raw mut (*w).hitProp).write(window.hitProp);
            (&raw mut (*w).missProp).write(window.missProp);
        }
        a
    }

    /// `CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE`: graphs only (a captured
    /// launch, or a kernel node). The node becomes updatable from device code; the
    /// driver writes the device node handle into the attribute
    /// ([`LaunchConfig::device_node`](super::LaunchConfig::device_node)). A launch into a
    /// stream that is not capturing rejects it.
    #[doc(alias = "CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE")]
    #[inline]
    #[must_use]
    pub fn device_updatable_kernel_node(enabled: bool) -> Self {
        let mut a = Self::zeroed(Id::CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE);
        a.raw.value.deviceUpdatableKernelNode.deviceUpdatable = i32::from(enabled);
        a
    }

    /// `CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT`: preferred shared-memory
    /// share of the L1/shared split, in percent (0..=100), for this launch.
    #[doc(alias = "CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT")]
    #[inline]
    #[must_use]
    pub fn preferred_shared_memory_carveout(percent: u32) -> Self {
        let mut a = Self::zeroed(Id::CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT);
        a.raw.value.sharedMemCarveout = percent;
        a
    }

    /// `CU_LAUNCH_ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING` (CUDA 13.0): schedule the
    /// kernel for NVLink utilization where the device supports it.
    #[doc(alias = "CU_LAUNCH_ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING")]
    #[inline]
    #[must_use]
    pub fn nvlink_util_centric_scheduling(enabled: bool) -> Self {
        let mut a = Self::zeroed(Id::CU_LAUNCH_ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING);
        a.raw.value.nvlinkUtilCentricScheduling = u32::from(enabled);
        a
    }

    /// Wraps a raw attribute, for IDs this type has no constructor for.
    ///
    /// # Safety
    /// `raw.value` must be valid for `raw.id` as `cuLaunchKernelEx` reads it, and any
    /// handle or pointer in it (an event, say) must stay valid for `'a`.
    #[inline]
    #[must_use]
    pub const unsafe fn from_raw(raw: CUlaunchAttribute) -> Self {
        Self {
            raw,
            _borrow: PhantomData,
        }
    }

    /// The attribute's ID.
    #[inline]
    #[must_use]
    pub const fn id(&self) -> CUlaunchAttributeID {
        self.raw.id
    }

    /// The raw `CUlaunchAttribute`.
    #[inline]
    #[must_use]
    pub const fn as_raw(&self) -> &CUlaunchAttribute {
        &self.raw
    }

    /// The raw `CUlaunchAttribute`, by value.
    #[inline]
    #[must_use]
    pub const fn into_raw(self) -> CUlaunchAttribute {
        self.raw
    }
}

impl fmt::Debug for LaunchAttribute<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LaunchAttribute")
            .field("id", &self.raw.id)
            .finish_non_exhaustive()
    }
}

/// An attribute a [`LaunchConfig`](super::LaunchConfig) has no room for: the
/// configuration already holds as many distinct attributes as it can, or (only for
/// [`LaunchAttribute::from_raw`] and out-of-range enum values) the ID or the value does
/// not fit its compact storage ([`LaunchConfig::set`](super::LaunchConfig::set)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TooManyAttributes {
    /// The attribute that did not fit.
    pub id: CUlaunchAttributeID,
    /// How many attributes a configuration holds
    /// ([`MAX_LAUNCH_ATTRIBUTES`](super::MAX_LAUNCH_ATTRIBUTES)).
    pub capacity: usize,
}

impl fmt::Display for TooManyAttributes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "launch attribute {} does not fit: a launch configuration holds at most {} \
             distinct attributes, of the IDs and value ranges LaunchConfig::set lists",
            self.id.0, self.capacity
        )
    }
}

impl core::error::Error for TooManyAttributes {}
