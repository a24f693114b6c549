//! [`LaunchConfig`]: grid, block, shared memory, stream and a fixed-capacity attribute
//! list, turned into a `CUlaunchConfig` on the stack for each launch.

use core::cell::UnsafeCell;
use core::fmt;
use core::marker::PhantomData;
use core::ptr;

use cuda_sys::{
    CUaccessPolicyWindow, CUclusterSchedulingPolicy, CUgraphDeviceNode, CUlaunchAttribute,
    CUlaunchAttributeID, CUlaunchConfig, CUlaunchMemSyncDomain, CUstream,
};

use super::{Dim3, LaunchAttribute, TooManyAttributes};
use crate::event::Event;
use crate::stream::Stream;

/// How many attributes a [`LaunchConfig`] holds. Setting an attribute whose ID is
/// already present replaces it, so this bounds the number of distinct attributes.
pub const MAX_LAUNCH_ATTRIBUTES: usize = 8;

/// A kernel launch configuration for `cuLaunchKernelEx`: grid and block extents,
/// dynamic shared memory, the stream, and up to [`MAX_LAUNCH_ATTRIBUTES`] launch
/// attributes, stored inline (no allocation).
///
/// `'a` borrows the stream and the events that attributes name, so none of them can be
/// dropped while the configuration exists. Build one with [`new`](Self::new) and the
/// builder methods; attribute builders return [`TooManyAttributes`] once the list is
/// full. A configuration can be reused for any number of launches.
///
/// The launch functions build the `CUlaunchConfig` on the stack from this, pointing at
/// the attribute array inside it. The driver may write into that array (the device node
/// of [`LaunchAttribute::device_updatable_kernel_node`]), which is why the array sits in
/// an `UnsafeCell` and the type is not `Sync`.
///
/// ```no_run
/// # use cudadrv::launch::{LaunchConfig, TooManyAttributes};
/// # fn f(stream: &cudadrv::Stream) -> Result<(), TooManyAttributes> {
/// let cfg = LaunchConfig::new(132, 256)
///     .stream(stream)
///     .shared_mem(1024)
///     .programmatic_stream_serialization()?
///     .priority(-1)?;
/// assert_eq!(cfg.num_attributes(), 2);
/// # Ok(()) }
/// ```
pub struct LaunchConfig<'a> {
    /// Grid extent, in blocks.
    pub grid: Dim3,
    /// Block extent, in threads.
    pub block: Dim3,
    /// Dynamic shared memory per block, in bytes.
    pub shared_mem_bytes: u32,
    stream: CUstream,
    /// Whether a stream was named ([`stream`](Self::stream) or
    /// [`raw_stream`](Self::raw_stream)); a launch without one is refused.
    has_stream: bool,
    attrs: UnsafeCell<[CUlaunchAttribute; MAX_LAUNCH_ATTRIBUTES]>,
    len: usize,
    _borrow: PhantomData<&'a ()>,
}

impl<'a> LaunchConfig<'a> {
    /// `grid` blocks of `block` threads, no dynamic shared memory, no attributes, and no
    /// stream yet: a launch names its stream with [`stream`](Self::stream) (the legacy
    /// default stream is [`Stream::legacy`], an explicit choice like any other) and is
    /// refused without one. Graph kernel nodes ignore the stream.
    #[inline]
    #[must_use]
    pub fn new(grid: impl Into<Dim3>, block: impl Into<Dim3>) -> Self {
        Self {
            grid: grid.into(),
            block: block.into(),
            shared_mem_bytes: 0,
            stream: ptr::null_mut(),
            has_stream: false,
            attrs: UnsafeCell::new([CUlaunchAttribute::default(); MAX_LAUNCH_ATTRIBUTES]),
            len: 0,
            _borrow: PhantomData,
        }
    }

    /// Sets the dynamic shared memory per block, in bytes.
    #[inline]
    #[must_use]
    pub fn shared_mem(mut self, bytes: u32) -> Self {
        self.shared_mem_bytes = bytes;
        self
    }

    /// Launches into `stream`.
    #[inline]
    #[must_use]
    pub fn stream(mut self, stream: &'a Stream) -> Self {
        self.stream = stream.as_raw();
        self.has_stream = true;
        self
    }

    /// Launches into a raw stream handle (null: the default stream of the binding
    /// mode; `cudadrv_sys::CU_STREAM_LEGACY` / `CU_STREAM_PER_THREAD` work too).
    ///
    /// # Safety
    /// `stream` must be null, a special stream handle, or a stream that stays valid for
    /// every launch made with this configuration.
    #[inline]
    #[must_use]
    pub unsafe fn raw_stream(mut self, stream: CUstream) -> Self {
        self.stream = stream;
        self.has_stream = true;
        self
    }

    /// Whether the configuration names a stream.
    #[inline]
    #[must_use]
    pub fn has_stream(&self) -> bool {
        self.has_stream
    }

    /// An error unless a stream was named (launches never default to one silently).
    #[inline]
    pub(crate) fn require_stream(&self) -> crate::error::Result<()> {
        if self.has_stream {
            Ok(())
        } else {
            Err(crate::error::Error::InvalidArgument(
                "LaunchConfig names no stream: add .stream(&stream) (Stream::legacy for the \
                 legacy default stream)",
            ))
        }
    }

    /// The stream launches go to.
    #[inline]
    #[must_use]
    pub fn stream_handle(&self) -> CUstream {
        self.stream
    }

    /// Adds `attr`, replacing an attribute with the same ID if there is one.
    ///
    /// # Errors
    /// [`TooManyAttributes`] when the ID is new and the list already holds
    /// [`MAX_LAUNCH_ATTRIBUTES`]; the configuration is unchanged.
    #[inline]
    pub fn set(&mut self, attr: LaunchAttribute<'a>) -> Result<&mut Self, TooManyAttributes> {
        let len = self.len;
        let attrs = self.attrs.get_mut();
        let existing = attrs
            .get(..len)
            .and_then(|set| set.iter().position(|a| a.id == attr.id()));
        let slot = match existing.unwrap_or(len) {
            i if i < len => attrs.get_mut(i),
            _ => {
                let slot = attrs.get_mut(len);
                if slot.is_some() {
                    self.len = len + 1;
                }
                slot
            }
        };
        match slot {
            Some(slot) => {
                *slot = attr.into_raw();
                Ok(self)
            }
            None => Err(TooManyAttributes {
                id: attr.id(),
                capacity: MAX_LAUNCH_ATTRIBUTES,
            }),
        }
    }

    /// [`set`](Self::set), by value, for builder chains.
    ///
    /// # Errors
    /// As [`set`](Self::set).
    #[inline]
    pub fn with(mut self, attr: LaunchAttribute<'a>) -> Result<Self, TooManyAttributes> {
        self.set(attr)?;
        Ok(self)
    }

    /// Removes the attribute with `id`; whether there was one.
    pub fn remove(&mut self, id: CUlaunchAttributeID) -> bool {
        let len = self.len;
        let attrs = self.attrs.get_mut();
        let Some(i) = attrs
            .get(..len)
            .and_then(|set| set.iter().position(|a| a.id == id))
        else {
            return false;
        };
        // `i < len <= MAX_LAUNCH_ATTRIBUTES`: the ranges below are in bounds.
        attrs.copy_within(i + 1..len, i);
        if let Some(last) = attrs.get_mut(len - 1) {
            *last = CUlaunchAttribute::default();
        }
        self.len = len - 1;
        true
    }

    /// Removes every attribute.
    pub fn clear_attributes(&mut self) {
        *self.attrs.get_mut() = [CUlaunchAttribute::default(); MAX_LAUNCH_ATTRIBUTES];
        self.len = 0;
    }

    /// Number of attributes set.
    #[inline]
    #[must_use]
    pub fn num_attributes(&self) -> usize {
        self.len
    }

    /// A copy of attribute `index` (in the order they were first set).
    #[must_use]
    pub fn attribute(&self, index: usize) -> Option<CUlaunchAttribute> {
        if index >= self.len {
            return None;
        }
        // SAFETY: `LaunchConfig` is not `Sync` and the driver writes into the array only
        // during a launch call on this thread, which has returned; reading one element
        // by copy creates no lasting reference.
        unsafe { (*self.attrs.get()).get(index).copied() }
    }

    /// A copy of the attribute with `id`, if set.
    #[must_use]
    pub fn find(&self, id: CUlaunchAttributeID) -> Option<CUlaunchAttribute> {
        (0..self.len)
            .filter_map(|i| self.attribute(i))
            .find(|a| a.id == id)
    }

    /// The device node handle the driver wrote for
    /// [`device_updatable_kernel_node`](Self::device_updatable_kernel_node) during a
    /// captured launch; `None` if that attribute is not set or nothing was written.
    #[must_use]
    pub fn device_node(&self) -> Option<CUgraphDeviceNode> {
        let a = self.find(CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE)?;
        // SAFETY: the attribute's ID says `deviceUpdatableKernelNode` is the member set
        // (and the rest of the value was zeroed), so reading it reads initialized bytes.
        let node = unsafe { a.value.deviceUpdatableKernelNode.devNode };
        (!node.is_null()).then_some(node)
    }

    /// The `CUlaunchConfig` for `cuLaunchKernelEx`, pointing at the attribute array
    /// inside `self`.
    ///
    /// The pointer is valid while `self` is neither moved nor dropped nor changed; the
    /// driver may write into the array through it (only the device node output).
    #[inline]
    #[must_use]
    pub fn as_raw(&self) -> CUlaunchConfig {
        CUlaunchConfig {
            gridDimX: self.grid.x,
            gridDimY: self.grid.y,
            gridDimZ: self.grid.z,
            blockDimX: self.block.x,
            blockDimY: self.block.y,
            blockDimZ: self.block.z,
            sharedMemBytes: self.shared_mem_bytes,
            hStream: self.stream,
            attrs: if self.len == 0 {
                ptr::null_mut()
            } else {
                self.attrs.get().cast::<CUlaunchAttribute>()
            },
            // `len <= MAX_LAUNCH_ATTRIBUTES`, which fits in `u32`.
            numAttrs: self.len as u32,
        }
    }
}

/// Builders for each attribute: `cfg.cluster_dim(2)?.cooperative(true)?`.
impl<'a> LaunchConfig<'a> {
    /// Sets [`LaunchAttribute::programmatic_stream_serialization`]`(true)`: Programmatic
    /// Dependent Launch after the previous kernel in the stream.
    ///
    /// # Errors
    /// [`TooManyAttributes`] when the list is full.
    #[doc(alias = "CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION")]
    #[inline]
    pub fn programmatic_stream_serialization(self) -> Result<Self, TooManyAttributes> {
        self.with(LaunchAttribute::programmatic_stream_serialization(true))
    }

    /// Sets [`LaunchAttribute::programmatic_event`].
    ///
    /// # Errors
    /// [`TooManyAttributes`] when the list is full.
    #[doc(alias = "CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT")]
    #[inline]
    pub fn programmatic_event(
        self,
        event: &'a Event,
        trigger_at_block_start: bool,
    ) -> Result<Self, TooManyAttributes> {
        self.with(LaunchAttribute::programmatic_event(
            event,
            trigger_at_block_start,
        ))
    }

    /// Sets [`LaunchAttribute::launch_completion_event`].
    ///
    /// # Errors
    /// [`TooManyAttributes`] when the list is full.
    #[doc(alias = "CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT")]
    #[inline]
    pub fn launch_completion_event(self, event: &'a Event) -> Result<Self, TooManyAttributes> {
        self.with(LaunchAttribute::launch_completion_event(event))
    }

    /// Sets [`LaunchAttribute::cluster_dim`].
    ///
    /// # Errors
    /// [`TooManyAttributes`] when the list is full.
    #[doc(alias = "CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION")]
    #[inline]
    pub fn cluster_dim(self, dim: impl Into<Dim3>) -> Result<Self, TooManyAttributes> {
        self.with(LaunchAttribute::cluster_dim(dim.into()))
    }

    /// Sets [`LaunchAttribute::preferred_cluster_dim`].
    ///
    /// # Errors
    /// [`TooManyAttributes`] when the list is full.
    #[doc(alias = "CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION")]
    #[inline]
    pub fn preferred_cluster_dim(self, dim: impl Into<Dim3>) -> Result<Self, TooManyAttributes> {
        self.with(LaunchAttribute::preferred_cluster_dim(dim.into()))
    }

    /// Sets [`LaunchAttribute::cluster_scheduling_policy`].
    ///
    /// # Errors
    /// [`TooManyAttributes`] when the list is full.
    #[doc(alias = "CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE")]
    #[inline]
    pub fn cluster_scheduling_policy(
        self,
        policy: CUclusterSchedulingPolicy,
    ) -> Result<Self, TooManyAttributes> {
        self.with(LaunchAttribute::cluster_scheduling_policy(policy))
    }

    /// Sets [`LaunchAttribute::cooperative`].
    ///
    /// # Errors
    /// [`TooManyAttributes`] when the list is full.
    #[doc(alias = "CU_LAUNCH_ATTRIBUTE_COOPERATIVE")]
    #[inline]
    pub fn cooperative(self, enabled: bool) -> Result<Self, TooManyAttributes> {
        self.with(LaunchAttribute::cooperative(enabled))
    }

    /// Sets [`LaunchAttribute::priority`].
    ///
    /// # Errors
    /// [`TooManyAttributes`] when the list is full.
    #[doc(alias = "CU_LAUNCH_ATTRIBUTE_PRIORITY")]
    #[inline]
    pub fn priority(self, priority: i32) -> Result<Self, TooManyAttributes> {
        self.with(LaunchAttribute::priority(priority))
    }

    /// Sets [`LaunchAttribute::mem_sync_domain`].
    ///
    /// # Errors
    /// [`TooManyAttributes`] when the list is full.
    #[doc(alias = "CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN")]
    #[inline]
    pub fn mem_sync_domain(self, domain: CUlaunchMemSyncDomain) -> Result<Self, TooManyAttributes> {
        self.with(LaunchAttribute::mem_sync_domain(domain))
    }

    /// Sets [`LaunchAttribute::mem_sync_domain_map`].
    ///
    /// # Errors
    /// [`TooManyAttributes`] when the list is full.
    #[doc(alias = "CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP")]
    #[inline]
    pub fn mem_sync_domain_map(self, default: u8, remote: u8) -> Result<Self, TooManyAttributes> {
        self.with(LaunchAttribute::mem_sync_domain_map(default, remote))
    }

    /// Sets [`LaunchAttribute::access_policy_window`].
    ///
    /// # Errors
    /// [`TooManyAttributes`] when the list is full.
    #[doc(alias = "CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW")]
    #[inline]
    pub fn access_policy_window(
        self,
        window: CUaccessPolicyWindow,
    ) -> Result<Self, TooManyAttributes> {
        self.with(LaunchAttribute::access_policy_window(window))
    }

    /// Sets [`LaunchAttribute::device_updatable_kernel_node`]`(true)` (graph capture
    /// only); read the node back with [`device_node`](Self::device_node).
    ///
    /// # Errors
    /// [`TooManyAttributes`] when the list is full.
    #[doc(alias = "CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE")]
    #[inline]
    pub fn device_updatable_kernel_node(self) -> Result<Self, TooManyAttributes> {
        self.with(LaunchAttribute::device_updatable_kernel_node(true))
    }

    /// Sets [`LaunchAttribute::preferred_shared_memory_carveout`].
    ///
    /// # Errors
    /// [`TooManyAttributes`] when the list is full.
    #[doc(alias = "CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT")]
    #[inline]
    pub fn preferred_shared_memory_carveout(self, percent: u32) -> Result<Self, TooManyAttributes> {
        self.with(LaunchAttribute::preferred_shared_memory_carveout(percent))
    }

    /// Sets [`LaunchAttribute::nvlink_util_centric_scheduling`].
    ///
    /// # Errors
    /// [`TooManyAttributes`] when the list is full.
    #[doc(alias = "CU_LAUNCH_ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING")]
    #[inline]
    pub fn nvlink_util_centric_scheduling(self, enabled: bool) -> Result<Self, TooManyAttributes> {
        self.with(LaunchAttribute::nvlink_util_centric_scheduling(enabled))
    }
}

impl Clone for LaunchConfig<'_> {
    fn clone(&self) -> Self {
        // SAFETY: as in `attribute`: no launch is running on this configuration (it is
        // not `Sync` and launches return before this runs), so copying the array out is
        // a plain read.
        let attrs = unsafe { *self.attrs.get() };
        Self {
            grid: self.grid,
            block: self.block,
            shared_mem_bytes: self.shared_mem_bytes,
            stream: self.stream,
            has_stream: self.has_stream,
            attrs: UnsafeCell::new(attrs),
            len: self.len,
            _borrow: PhantomData,
        }
    }
}

impl fmt::Debug for LaunchConfig<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut ids = [CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_IGNORE; MAX_LAUNCH_ATTRIBUTES];
        for (i, id) in ids.iter_mut().enumerate().take(self.len) {
            if let Some(a) = self.attribute(i) {
                *id = a.id;
            }
        }
        f.debug_struct("LaunchConfig")
            .field("grid", &self.grid)
            .field("block", &self.block)
            .field("shared_mem_bytes", &self.shared_mem_bytes)
            .field("stream", &self.stream)
            .field("attributes", &ids.get(..self.len).unwrap_or(&[]))
            .finish()
    }
}
