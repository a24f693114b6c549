//! [`LaunchConfig`]: grid, block, shared memory, stream and the launch attributes, kept
//! in compact per-kind fields and turned into a `CUlaunchConfig` and a
//! `CUlaunchAttribute` array on the stack for each launch.

use core::cell::Cell;
use core::ffi::c_void;
use core::fmt;
use core::marker::PhantomData;
use core::mem::MaybeUninit;
use core::ptr;

use cudadrv_sys::{
    CUaccessPolicyWindow, CUaccessProperty, CUclusterSchedulingPolicy, CUevent, CUgraphDeviceNode,
    CUlaunchAttribute, CUlaunchAttributeID, CUlaunchAttributePortableClusterMode, CUlaunchConfig,
    CUlaunchMemSyncDomain, CUlaunchMemSyncDomainMap, CUsharedMemoryMode, CUstream,
    CUsynchronizationPolicy,
};

use super::{Dim3, LaunchAttribute, TooManyAttributes};
use crate::driver::event::Event;
use crate::driver::stream::Stream;

type Id = CUlaunchAttributeID;

/// How many distinct attributes a [`LaunchConfig`] holds at once. Setting an attribute
/// whose ID is already present replaces it. It is also the length of the
/// [`RawAttributes`] array a launch builds on its stack.
pub const MAX_LAUNCH_ATTRIBUTES: usize = 8;

/// The IDs a configuration stores (bit `id`): 1 to 14 and 16 to 18, every attribute of
/// `CUlaunchAttributeID` in the CUDA 13 headers. 0 (`CU_LAUNCH_ATTRIBUTE_IGNORE`) and 15
/// (no attribute) are not stored.
const STORED_IDS: u32 = 0b111_0111_1111_1111_1110;

/// The bit of `id` in [`LaunchConfig::present`], if the configuration stores that ID.
#[inline]
const fn id_bit(id: Id) -> Option<u32> {
    match 1u32.checked_shl(id.0) {
        Some(bit) if STORED_IDS & bit != 0 => Some(bit),
        _ => None,
    }
}

const fn bit(id: Id) -> u32 {
    1 << id.0
}

/// Bits of [`LaunchConfig::flags`]: whether a stream was named, and the one-bit values.
const HAS_STREAM: u8 = 1;
const COOPERATIVE: u8 = 1 << 1;
const SERIALIZATION_ALLOWED: u8 = 1 << 2;
const NVLINK_CENTRIC: u8 = 1 << 3;
const DEVICE_UPDATABLE: u8 = 1 << 4;
const TRIGGER_AT_BLOCK_START: u8 = 1 << 5;
/// `programmaticEvent.flags == 1` (`CU_EVENT_RECORD_EXTERNAL`, which the driver refuses
/// there; kept so that the value reaches the driver as given).
const PROGRAMMATIC_EVENT_FLAG: u8 = 1 << 6;
/// `launchCompletionEvent.flags == 1`.
const COMPLETION_EVENT_FLAG: u8 = 1 << 7;

/// A kernel launch configuration for `cuLaunchKernelEx`: grid and block extents,
/// dynamic shared memory, the stream, and up to [`MAX_LAUNCH_ATTRIBUTES`] launch
/// attributes, stored inline (no allocation) in at most 128 bytes.
///
/// `'a` borrows the stream and the events that attributes name, so none of them can be
/// dropped while the configuration exists. Build one with [`new`](Self::new) and the
/// builder methods; attribute builders return [`TooManyAttributes`] once the list is
/// full (or for a value the compact storage cannot hold, see [`set`](Self::set)). A
/// configuration can be reused for any number of launches.
///
/// # Storage
/// The driver's form of an attribute, `CUlaunchAttribute`, takes 72 bytes (an ID and a
/// 64-byte union), so eight of them inline made a 624-byte value that every builder call
/// moved. A configuration keeps instead one compact field per attribute kind and a bit
/// per ID saying which are set; the launch functions build the `CUlaunchAttribute` array
/// on their own stack ([`RawAttributes`], transient) and point the `CUlaunchConfig` at
/// it. Each attribute comes back out byte for byte as its typed constructor builds it
/// (the value union zeroed, the member written), in ID order;
/// [`attribute`](Self::attribute) and [`find`](Self::find) build the same copies.
/// Values are kept exactly, except:
///
/// - the `int` / `unsigned` flags (cooperative, programmatic stream serialization,
///   NVLink-centric scheduling, device-updatable, trigger at block start) are kept as
///   one bit: any non-zero value comes back as 1, which the driver reads the same way;
/// - the enum values with a handful of constants (cluster scheduling policy, memory
///   sync domain, synchronization policy, portable cluster size mode, shared memory
///   mode, the access policy window's hit and miss properties) are kept in a byte, and
///   the event attributes' `flags` in one bit (0 or `CU_EVENT_RECORD_EXTERNAL`): a
///   value outside that range is refused by [`set`](Self::set) with
///   [`TooManyAttributes`] instead of being changed. The typed constructors' documented
///   values all fit.
///
/// The access policy window, rare and the largest value, is kept whole (pointer,
/// length, hit ratio) with its two properties in a byte each: 22 bytes of the 128.
/// Each launch costs the copy-out of the attributes set (one for a PDL launch, none
/// without attributes) into an array that is not zeroed beforehand.
///
/// The driver writes one output into the array: the device node of
/// [`LaunchAttribute::device_updatable_kernel_node`] during a captured launch. The launch
/// functions copy it back into the configuration after the call
/// ([`device_node`](Self::device_node)), which is why it sits in a `Cell` and the type is
/// not `Sync`.
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
// The fields are flat (no nested struct of attribute values) so that the compiler packs
// the one-byte fields into the tail: 126 bytes of fields, 128 with alignment on 64-bit
// targets (checked below and in the unit tests).
#[derive(Clone)]
pub struct LaunchConfig<'a> {
    /// Grid extent, in blocks.
    pub grid: Dim3,
    /// Block extent, in threads.
    pub block: Dim3,
    /// Dynamic shared memory per block, in bytes.
    pub shared_mem_bytes: u32,
    stream: CUstream,
    /// [`HAS_STREAM`] (a launch without a stream is refused) and the one-bit values.
    flags: u8,
    /// Bit `id` set: the attribute with that ID is present.
    present: u32,
    priority: i32,
    carveout: u32,
    cluster_dim: Dim3,
    preferred_cluster_dim: Dim3,
    programmatic_event: CUevent,
    completion_event: CUevent,
    window_base: *mut c_void,
    window_bytes: usize,
    window_hit_ratio: f32,
    window_hit_prop: u8,
    window_miss_prop: u8,
    domain_map: CUlaunchMemSyncDomainMap,
    scheduling_policy: u8,
    sync_domain: u8,
    sync_policy: u8,
    portable_cluster_mode: u8,
    shared_memory_mode: u8,
    /// The device node the driver wrote for the device-updatable attribute (copied back
    /// from the launch's array; null until then).
    device_node: Cell<CUgraphDeviceNode>,
    _borrow: PhantomData<&'a ()>,
}

#[cfg(target_pointer_width = "64")]
static_assertions::const_assert!(core::mem::size_of::<LaunchConfig<'static>>() <= 128);

/// The attributes of a [`LaunchConfig`] in the driver's form, up to
/// [`MAX_LAUNCH_ATTRIBUTES`] `CUlaunchAttribute`s (72 bytes each), filled by
/// [`LaunchConfig::as_raw`] on the caller's stack for one `cuLaunchKernelEx` call.
///
/// The launch functions make one and drop it when the call returns; it is only needed by
/// code that calls `cuLaunchKernelEx` itself.
pub struct RawAttributes {
    attrs: [MaybeUninit<CUlaunchAttribute>; MAX_LAUNCH_ATTRIBUTES],
    len: usize,
}

impl RawAttributes {
    /// An empty array (nothing written: filling it costs only the attributes set).
    #[inline]
    #[must_use]
    pub const fn new() -> Self {
        Self {
            attrs: [const { MaybeUninit::uninit() }; MAX_LAUNCH_ATTRIBUTES],
            len: 0,
        }
    }

    /// The attributes written, in ID order.
    #[inline]
    #[must_use]
    pub fn as_slice(&self) -> &[CUlaunchAttribute] {
        let len = self.len.min(MAX_LAUNCH_ATTRIBUTES);
        // SAFETY: the first `len` elements were written by `push` (and `len` never
        // exceeds the array); `MaybeUninit<T>` has `T`'s layout.
        unsafe { core::slice::from_raw_parts(self.attrs.as_ptr().cast(), len) }
    }

    /// The device node the driver wrote into the device-updatable attribute during a
    /// captured launch, if that attribute is here and the node is not null.
    #[must_use]
    pub fn device_node(&self) -> Option<CUgraphDeviceNode> {
        let a = self
            .as_slice()
            .iter()
            .find(|a| a.id == Id::CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE)?;
        // SAFETY: the ID says `deviceUpdatableKernelNode` is the member set, written
        // whole from a zeroed value (and only rewritten by the driver, with a handle).
        let node = unsafe { a.value.deviceUpdatableKernelNode.devNode };
        (!node.is_null()).then_some(node)
    }

    #[inline]
    fn push(&mut self, a: CUlaunchAttribute) {
        if let Some(slot) = self.attrs.get_mut(self.len) {
            slot.write(a);
            self.len += 1;
        }
    }
}

impl Default for RawAttributes {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for RawAttributes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.as_slice().iter().map(|a| a.id))
            .finish()
    }
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
            flags: 0,
            present: 0,
            priority: 0,
            carveout: 0,
            cluster_dim: Dim3::new(0, 0, 0),
            preferred_cluster_dim: Dim3::new(0, 0, 0),
            programmatic_event: ptr::null_mut(),
            completion_event: ptr::null_mut(),
            window_base: ptr::null_mut(),
            window_bytes: 0,
            window_hit_ratio: 0.0,
            window_hit_prop: 0,
            window_miss_prop: 0,
            domain_map: CUlaunchMemSyncDomainMap {
                default_: 0,
                remote: 0,
            },
            scheduling_policy: 0,
            sync_domain: 0,
            sync_policy: 0,
            portable_cluster_mode: 0,
            shared_memory_mode: 0,
            device_node: Cell::new(ptr::null_mut()),
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
        self.flags |= HAS_STREAM;
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
        self.flags |= HAS_STREAM;
        self
    }

    /// Whether the configuration names a stream.
    #[inline]
    #[must_use]
    pub fn has_stream(&self) -> bool {
        self.flags & HAS_STREAM != 0
    }

    /// An error unless a stream was named (launches never default to one silently).
    #[inline]
    pub(crate) fn require_stream(&self) -> crate::error::Result<()> {
        if self.has_stream() {
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
    /// Every typed constructor of [`LaunchAttribute`] fits. An attribute from
    /// [`LaunchAttribute::from_raw`] fits when its ID is one of `CUlaunchAttributeID`'s
    /// (1 to 14, 16 to 18) and its value is in the range the compact storage keeps (see
    /// [`LaunchConfig`]'s "Storage"); only the member the ID names is read.
    ///
    /// # Errors
    /// [`TooManyAttributes`] when the ID is new and the configuration already holds
    /// [`MAX_LAUNCH_ATTRIBUTES`], or when the ID or the value does not fit the storage;
    /// the configuration is unchanged.
    #[inline]
    pub fn set(&mut self, attr: LaunchAttribute<'a>) -> Result<&mut Self, TooManyAttributes> {
        let id = attr.id();
        let refused = TooManyAttributes {
            id,
            capacity: MAX_LAUNCH_ATTRIBUTES,
        };
        let Some(bit) = id_bit(id) else {
            return Err(refused);
        };
        if self.present & bit == 0 && self.num_attributes() >= MAX_LAUNCH_ATTRIBUTES {
            return Err(refused);
        }
        if !self.store(attr.as_raw()) {
            return Err(refused);
        }
        self.present |= bit;
        Ok(self)
    }

    /// Copies the value of `a` (an attribute of a stored ID) into its field; `false`,
    /// changing nothing, when the value does not fit.
    fn store(&mut self, a: &CUlaunchAttribute) -> bool {
        let byte = |v: u32| u8::try_from(v).ok();
        let flag = |set: bool, mask: u8| if set { mask } else { 0 };
        let v = &a.value;
        // SAFETY: `a` comes from a `LaunchAttribute`, whose constructors write the member
        // of the union that the ID names (and `from_raw`'s contract requires that member
        // to be valid): each arm reads only fields of that member, by copy.
        unsafe {
            match a.id {
                Id::CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW => {
                    let w = &v.accessPolicyWindow;
                    let (Some(hit), Some(miss)) = (byte(w.hitProp.0), byte(w.missProp.0)) else {
                        return false;
                    };
                    self.window_base = w.base_ptr;
                    self.window_bytes = w.num_bytes;
                    self.window_hit_ratio = w.hitRatio;
                    self.window_hit_prop = hit;
                    self.window_miss_prop = miss;
                }
                Id::CU_LAUNCH_ATTRIBUTE_COOPERATIVE => {
                    self.flags = self.flags & !COOPERATIVE | flag(v.cooperative != 0, COOPERATIVE);
                }
                Id::CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY => match byte(v.syncPolicy.0) {
                    Some(p) => self.sync_policy = p,
                    None => return false,
                },
                Id::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION => {
                    let d = v.clusterDim;
                    self.cluster_dim = Dim3::new(d.x, d.y, d.z);
                }
                Id::CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE => {
                    match byte(v.clusterSchedulingPolicyPreference.0) {
                        Some(p) => self.scheduling_policy = p,
                        None => return false,
                    }
                }
                Id::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION => {
                    self.flags = self.flags & !SERIALIZATION_ALLOWED
                        | flag(
                            v.programmaticStreamSerializationAllowed != 0,
                            SERIALIZATION_ALLOWED,
                        );
                }
                Id::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT => {
                    let e = v.programmaticEvent;
                    if !matches!(e.flags, 0 | 1) {
                        return false;
                    }
                    self.programmatic_event = e.event;
                    self.flags = self.flags & !(TRIGGER_AT_BLOCK_START | PROGRAMMATIC_EVENT_FLAG)
                        | flag(e.triggerAtBlockStart != 0, TRIGGER_AT_BLOCK_START)
                        | flag(e.flags == 1, PROGRAMMATIC_EVENT_FLAG);
                }
                Id::CU_LAUNCH_ATTRIBUTE_PRIORITY => self.priority = v.priority,
                Id::CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP => self.domain_map = v.memSyncDomainMap,
                Id::CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN => match byte(v.memSyncDomain.0) {
                    Some(d) => self.sync_domain = d,
                    None => return false,
                },
                Id::CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION => {
                    let d = v.preferredClusterDim;
                    self.preferred_cluster_dim = Dim3::new(d.x, d.y, d.z);
                }
                Id::CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT => {
                    let (event, flags) =
                        (v.launchCompletionEvent.event, v.launchCompletionEvent.flags);
                    if !matches!(flags, 0 | 1) {
                        return false;
                    }
                    self.completion_event = event;
                    self.flags = self.flags & !COMPLETION_EVENT_FLAG
                        | flag(flags == 1, COMPLETION_EVENT_FLAG);
                }
                Id::CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE => {
                    // Only the input: `devNode` is the driver's output, not read here.
                    let updatable = v.deviceUpdatableKernelNode.deviceUpdatable;
                    self.flags =
                        self.flags & !DEVICE_UPDATABLE | flag(updatable != 0, DEVICE_UPDATABLE);
                    self.device_node.set(ptr::null_mut());
                }
                Id::CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT => {
                    self.carveout = v.sharedMemCarveout;
                }
                Id::CU_LAUNCH_ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING => {
                    self.flags = self.flags & !NVLINK_CENTRIC
                        | flag(v.nvlinkUtilCentricScheduling != 0, NVLINK_CENTRIC);
                }
                Id::CU_LAUNCH_ATTRIBUTE_PORTABLE_CLUSTER_SIZE_MODE => {
                    match byte(v.portableClusterSizeMode.0) {
                        Some(m) => self.portable_cluster_mode = m,
                        None => return false,
                    }
                }
                Id::CU_LAUNCH_ATTRIBUTE_SHARED_MEMORY_MODE => match byte(v.sharedMemoryMode.0) {
                    Some(m) => self.shared_memory_mode = m,
                    None => return false,
                },
                _ => return false,
            }
        }
        true
    }

    /// The attribute with `id` in the driver's form, built as its typed constructor
    /// builds it from the stored value (the union zeroed, the member written). `id` must
    /// be present.
    fn raw_attribute(&self, id: Id) -> CUlaunchAttribute {
        let on = |mask: u8| self.flags & mask != 0;
        let typed = |a: LaunchAttribute<'_>| a.into_raw();
        match id {
            Id::CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW => typed(
                LaunchAttribute::access_policy_window(CUaccessPolicyWindow {
                    base_ptr: self.window_base,
                    num_bytes: self.window_bytes,
                    hitRatio: self.window_hit_ratio,
                    hitProp: CUaccessProperty(self.window_hit_prop.into()),
                    missProp: CUaccessProperty(self.window_miss_prop.into()),
                }),
            ),
            Id::CU_LAUNCH_ATTRIBUTE_COOPERATIVE => {
                typed(LaunchAttribute::cooperative(on(COOPERATIVE)))
            }
            Id::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION => {
                typed(LaunchAttribute::cluster_dim(self.cluster_dim))
            }
            Id::CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE => {
                typed(LaunchAttribute::cluster_scheduling_policy(
                    CUclusterSchedulingPolicy(self.scheduling_policy.into()),
                ))
            }
            Id::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION => typed(
                LaunchAttribute::programmatic_stream_serialization(on(SERIALIZATION_ALLOWED)),
            ),
            Id::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT => {
                // SAFETY: the handle came from an attribute set on this configuration for
                // `'a`, under that constructor's contract; this copy is only handed to
                // the driver (or to the caller) under the same one.
                let mut a = unsafe {
                    LaunchAttribute::programmatic_event_raw(
                        self.programmatic_event,
                        on(TRIGGER_AT_BLOCK_START),
                    )
                }
                .into_raw();
                a.value.programmaticEvent.flags = i32::from(on(PROGRAMMATIC_EVENT_FLAG));
                a
            }
            Id::CU_LAUNCH_ATTRIBUTE_PRIORITY => typed(LaunchAttribute::priority(self.priority)),
            Id::CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP => {
                typed(LaunchAttribute::mem_sync_domain_map(
                    self.domain_map.default_,
                    self.domain_map.remote,
                ))
            }
            Id::CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN => typed(LaunchAttribute::mem_sync_domain(
                CUlaunchMemSyncDomain(self.sync_domain.into()),
            )),
            Id::CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION => typed(
                LaunchAttribute::preferred_cluster_dim(self.preferred_cluster_dim),
            ),
            Id::CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT => {
                // SAFETY: as for the programmatic event.
                let mut a =
                    unsafe { LaunchAttribute::launch_completion_event_raw(self.completion_event) }
                        .into_raw();
                a.value.launchCompletionEvent.flags = i32::from(on(COMPLETION_EVENT_FLAG));
                a
            }
            Id::CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE => {
                let mut a = typed(LaunchAttribute::device_updatable_kernel_node(on(
                    DEVICE_UPDATABLE,
                )));
                a.value.deviceUpdatableKernelNode.devNode = self.device_node.get();
                a
            }
            Id::CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT => typed(
                LaunchAttribute::preferred_shared_memory_carveout(self.carveout),
            ),
            Id::CU_LAUNCH_ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING => typed(
                LaunchAttribute::nvlink_util_centric_scheduling(on(NVLINK_CENTRIC)),
            ),
            _ => {
                // The attributes without a typed constructor: one 4-byte enum member.
                let mut a = CUlaunchAttribute {
                    id,
                    ..CUlaunchAttribute::default()
                };
                match id {
                    Id::CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY => {
                        a.value.syncPolicy = CUsynchronizationPolicy(self.sync_policy.into());
                    }
                    Id::CU_LAUNCH_ATTRIBUTE_PORTABLE_CLUSTER_SIZE_MODE => {
                        a.value.portableClusterSizeMode =
                            CUlaunchAttributePortableClusterMode(self.portable_cluster_mode.into());
                    }
                    Id::CU_LAUNCH_ATTRIBUTE_SHARED_MEMORY_MODE => {
                        a.value.sharedMemoryMode =
                            CUsharedMemoryMode(self.shared_memory_mode.into());
                    }
                    // Not a stored ID (callers pass present IDs only): the zero value.
                    _ => {}
                }
                a
            }
        }
    }

    /// The IDs present, in increasing order.
    #[inline]
    fn ids(&self) -> impl Iterator<Item = Id> + use<> {
        let mut bits = self.present;
        core::iter::from_fn(move || {
            if bits == 0 {
                return None;
            }
            let id = bits.trailing_zeros();
            bits &= bits - 1;
            Some(CUlaunchAttributeID(id))
        })
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
        let Some(bit) = id_bit(id) else {
            return false;
        };
        let was = self.present & bit != 0;
        self.present &= !bit;
        if id == Id::CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE {
            self.device_node.set(ptr::null_mut());
        }
        was
    }

    /// Removes every attribute.
    pub fn clear_attributes(&mut self) {
        self.present = 0;
        self.flags &= HAS_STREAM;
        self.device_node.set(ptr::null_mut());
    }

    /// Number of attributes set.
    #[inline]
    #[must_use]
    pub fn num_attributes(&self) -> usize {
        self.present.count_ones() as usize
    }

    /// A copy of attribute `index`, in increasing ID order (the order of the array a
    /// launch passes to the driver), as its typed constructor builds it.
    #[must_use]
    pub fn attribute(&self, index: usize) -> Option<CUlaunchAttribute> {
        let id = self.ids().nth(index)?;
        Some(self.raw_attribute(id))
    }

    /// A copy of the attribute with `id`, if set.
    #[must_use]
    pub fn find(&self, id: CUlaunchAttributeID) -> Option<CUlaunchAttribute> {
        let bit = id_bit(id)?;
        (self.present & bit != 0).then(|| self.raw_attribute(id))
    }

    /// Whether this configuration sets `stored`'s attribute with the same value, for an
    /// attribute this type built ([`attribute`](Self::attribute) or [`find`](Self::find):
    /// the value union zeroed, one member written), so that the member decides. The
    /// programmatic-serialization flag, on every PDL launch, is compared as that member
    /// without building the attribute; for the others `eq` compares the attribute built
    /// here with `stored`.
    #[cfg(all(feature = "alloc", feature = "graph"))]
    #[inline]
    pub(crate) fn sets_same(
        &self,
        stored: &CUlaunchAttribute,
        eq: impl FnOnce(&CUlaunchAttribute, &CUlaunchAttribute) -> bool,
    ) -> bool {
        let pss = Id::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        if stored.id == pss {
            // SAFETY: an attribute with this ID built by this type has this member
            // written (an `int`, over zeroed bytes).
            let allowed = unsafe { stored.value.programmaticStreamSerializationAllowed };
            return self.present & bit(pss) != 0
                && allowed == i32::from(self.flags & SERIALIZATION_ALLOWED != 0);
        }
        self.find(stored.id).is_some_and(|built| eq(stored, &built))
    }

    /// For replay regions: whether an attribute that names an event or that the driver
    /// writes back is set (programmatic event, launch-completion event, device-updatable
    /// kernel node), one mask test.
    #[cfg(all(feature = "alloc", feature = "graph"))]
    #[inline]
    pub(crate) fn names_event_or_node(&self) -> bool {
        const MASK: u32 = bit(Id::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT)
            | bit(Id::CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT)
            | bit(Id::CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE);
        self.present & MASK != 0
    }

    /// For replay regions: a word equal for two configurations exactly when they set the
    /// same attributes with the same values, when every attribute set is a one-bit one
    /// (cooperative, programmatic stream serialization, NVLink-centric scheduling: their
    /// values live in `flags`); `None` when another attribute is set (its value must be
    /// compared as an attribute).
    #[cfg(all(feature = "alloc", feature = "graph"))]
    #[inline]
    pub(crate) fn one_bit_attributes(&self) -> Option<u64> {
        const IDS: u32 = bit(Id::CU_LAUNCH_ATTRIBUTE_COOPERATIVE)
            | bit(Id::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION)
            | bit(Id::CU_LAUNCH_ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING);
        const VALUES: u8 = COOPERATIVE | SERIALIZATION_ALLOWED | NVLINK_CENTRIC;
        (self.present & !IDS == 0)
            .then(|| u64::from(self.present) | u64::from(self.flags & VALUES) << 32)
    }

    /// The device node handle the driver wrote for
    /// [`device_updatable_kernel_node`](Self::device_updatable_kernel_node) during a
    /// captured launch; `None` if that attribute is not set or nothing was written.
    #[must_use]
    pub fn device_node(&self) -> Option<CUgraphDeviceNode> {
        if self.present & bit(Id::CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE) == 0 {
            return None;
        }
        let node = self.device_node.get();
        (!node.is_null()).then_some(node)
    }

    /// The `CUlaunchConfig` for `cuLaunchKernelEx`, its attributes written into `attrs`
    /// (in ID order) and pointed at.
    ///
    /// The pointer is valid while `attrs` is neither moved nor dropped nor changed. The
    /// driver may write into the array through it (only the device node output, which
    /// [`RawAttributes::device_node`] reads; the launch functions of this module copy it
    /// back into the configuration).
    #[inline]
    #[must_use]
    pub fn as_raw(&self, attrs: &mut RawAttributes) -> CUlaunchConfig {
        attrs.len = 0;
        for id in self.ids() {
            attrs.push(self.raw_attribute(id));
        }
        CUlaunchConfig {
            gridDimX: self.grid.x,
            gridDimY: self.grid.y,
            gridDimZ: self.grid.z,
            blockDimX: self.block.x,
            blockDimY: self.block.y,
            blockDimZ: self.block.z,
            sharedMemBytes: self.shared_mem_bytes,
            hStream: self.stream,
            attrs: if attrs.len == 0 {
                ptr::null_mut()
            } else {
                attrs.attrs.as_mut_ptr().cast::<CUlaunchAttribute>()
            },
            // `len <= MAX_LAUNCH_ATTRIBUTES`, which fits in `u32`.
            numAttrs: attrs.len as u32,
        }
    }
    /// Whether the configuration carries a programmatic-dependent-launch attribute
    /// (programmatic stream serialization allowed, or a programmatic event).
    pub(crate) fn is_programmatic(&self) -> bool {
        self.find(Id::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION)
            .is_some_and(|a| {
                // SAFETY: the ID says `programmaticStreamSerializationAllowed` is the
                // member set (the rest of the value zeroed).
                unsafe { a.value.programmaticStreamSerializationAllowed != 0 }
            })
            || self
                .find(Id::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT)
                .is_some()
    }

    /// Runs `call` with this configuration in the driver's form (attributes on this
    /// stack frame), then keeps the device node the driver may have written.
    #[inline]
    pub(crate) fn with_raw<R>(&self, call: impl FnOnce(&mut CUlaunchConfig) -> R) -> R {
        let mut attrs = RawAttributes::new();
        let mut raw = self.as_raw(&mut attrs);
        let r = call(&mut raw);
        self.keep_output(&attrs);
        r
    }

    /// Takes the device node that a launch with `copy` (a clone of this configuration,
    /// on another stream) got from the driver.
    #[inline]
    #[cfg(feature = "graph")]
    pub(crate) fn keep_output_of(&self, copy: &LaunchConfig<'_>) {
        let dun = bit(Id::CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE);
        if let (Some(node), true) = (copy.device_node(), self.present & dun != 0) {
            self.device_node.set(node);
        }
    }

    /// Copies the device node the driver wrote into `attrs` (filled by
    /// [`as_raw`](Self::as_raw) from this configuration) back into the configuration.
    #[inline]
    pub(crate) fn keep_output(&self, attrs: &RawAttributes) {
        if self.present & bit(Id::CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE) != 0 {
            if let Some(node) = attrs.device_node() {
                self.device_node.set(node);
            }
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

impl fmt::Debug for LaunchConfig<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut ids = [Id::CU_LAUNCH_ATTRIBUTE_IGNORE; MAX_LAUNCH_ATTRIBUTES];
        for (slot, id) in ids.iter_mut().zip(self.ids()) {
            *slot = id;
        }
        f.debug_struct("LaunchConfig")
            .field("grid", &self.grid)
            .field("block", &self.block)
            .field("shared_mem_bytes", &self.shared_mem_bytes)
            .field("stream", &self.stream)
            .field(
                "attributes",
                &ids.get(..self.num_attributes()).unwrap_or(&[]),
            )
            .finish()
    }
}
