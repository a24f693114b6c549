//! Green contexts (driver API section "Green Contexts", Programming Guide 4.6): spatial
//! partitions of a GPU's streaming multiprocessors (SMs), each a context whose kernels
//! run only on its own SMs.
//!
//! The four steps of the driver, one type each:
//!
//! 1. [`SmResource::of_device`] (`cuDeviceGetDevResource`): the device's SMs, with the
//!    partitioning rules ([`SmResource::min_partition_size`],
//!    [`SmResource::coscheduled_alignment`]).
//! 2. [`SmResource::split_by_count`] (`cuDevSmResourceSplitByCount`): disjoint groups of
//!    at least `min_count` SMs each ([`SmPartition`]), and the SMs left over.
//! 3. [`ResourceDesc::new`] (`cuDevResourceGenerateDesc`): a descriptor of the SMs a
//!    green context gets.
//! 4. [`GreenContext::create`] (`cuGreenCtxCreate`), then [`Context::from_green`]
//!    (`cuCtxFromGreenCtx`) for a [`Context`] that every handle of this crate works in
//!    ([`Stream`], [`DeviceBuffer`](crate::DeviceBuffer), [`Module`](crate::Module), ...)
//!    and that destroys the green context (`cuGreenCtxDestroy`) when its last clone, and
//!    the last handle made in it, is dropped. [`stream`] (`cuGreenCtxStreamCreate`) makes
//!    a stream of the green context explicitly; a stream made by [`Stream::new`] in the
//!    converted context belongs to the green context as well.
//!
//! # The split rules
//!
//! Without [`SplitFlags::IGNORE_SM_COSCHEDULING`], every group has at least
//! [`SmResource::min_partition_size`] SMs and a multiple of
//! [`SmResource::coscheduled_alignment`] SMs: the driver raises `min_count` to the minimum
//! and rounds it up to the alignment ([`SmResource::partition_size`] computes the result).
//! The driver's header gives, as a guideline, a minimum of 2 SMs (multiple of 2) on
//! compute capability 6.x and 7.x, 4 SMs (multiple of 2) on 8.x, and 8 SMs (multiple of 8)
//! on 9.0 and later; the values the device reports win. A split makes as many groups of
//! that size as fit (at most the slots given) and leaves the rest in the remainder, which
//! has none of the groups' guarantees. [`SmResource::split_by_count`] checks these rules
//! before calling the driver and names the one a request breaks.
//!
//! Further limits the driver states: a split's groups cannot be split again (only the
//! resource of a green context made from one, [`SmResource::of_context`]); a descriptor
//! may combine only groups (and the remainder) of one split; partitions are disjoint but
//! kernels in them are not guaranteed to run concurrently (other resources, such as the
//! `CUDA_DEVICE_MAX_CONNECTIONS` hardware queues, are shared), and a kernel may run on
//! more SMs than its partition (never fewer) under MPS with
//! `CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`, or, on compute capability 9.x, on 2 extra shared
//! SMs once a module using dynamic parallelism is loaded.
//!
//! Green contexts need a CUDA 12.4 driver ([`stream`] 12.5); on an older one every call
//! here is [`Error::DriverTooOld`].
//!
//! # Unsafe policy
//! Raw driver calls with valid out-pointers, as in the rest of the host layer; the union
//! of a `CUdevResource` is read only as its SM member (plain integers, valid for any
//! bits). The one promise the compiler cannot check, that a green context is used by one
//! thread at a time, is the caller's, in the `# Safety` section of
//! [`Context::from_green`].

use core::ptr;

use cuda_sys::{
    CUdevResource, CUdevResourceDesc, CUdevResourceType, CUdevSmResource,
    CUdevSmResourceSplit_flags, CUgreenCtx, CUgreenCtxCreate_flags, CUstream_flags_enum,
};

use crate::context::Context;
use crate::device_host::Device;
use crate::driver::api;
use crate::error::{Error, Result, dropping, drv};
use crate::stream::Stream;

bitflags::bitflags! {
    /// `CUdevSmResourceSplit_flags` for [`SmResource::split_by_count`].
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
    pub struct SplitFlags: u32 {
        /// `CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING`: treat each SM on its own,
        /// ignoring the hardware hierarchy; lowers the minimum and the alignment (finer
        /// partitions) at the cost of features such as large clusters on 9.0+.
        const IGNORE_SM_COSCHEDULING =
            CUdevSmResourceSplit_flags::CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING.0;
        /// `CU_DEV_SM_RESOURCE_SPLIT_MAX_POTENTIAL_CLUSTER_SIZE` (compute capability 9.0+):
        /// try to make groups that allow the largest thread clusters.
        const MAX_POTENTIAL_CLUSTER_SIZE =
            CUdevSmResourceSplit_flags::CU_DEV_SM_RESOURCE_SPLIT_MAX_POTENTIAL_CLUSTER_SIZE.0;
    }
}

/// An empty (`CU_DEV_RESOURCE_TYPE_INVALID`) resource for the driver to fill.
fn empty_resource() -> CUdevResource {
    CUdevResource {
        type_: CUdevResourceType::CU_DEV_RESOURCE_TYPE_INVALID,
        _internal_padding: [0; 92],
        __bindgen_anon_1: Default::default(),
    }
}

/// The SM member of a resource.
fn sm_of(raw: &CUdevResource) -> CUdevSmResource {
    // SAFETY: the union's members are plain bytes and integers, valid for any bits; the
    // SM member is the one the driver fills for `CU_DEV_RESOURCE_TYPE_SM` (and zeros
    // otherwise, from `empty_resource`).
    unsafe { raw.__bindgen_anon_1.sm }
}

/// A set of SMs that can be split (`CUdevResource` of type `CU_DEV_RESOURCE_TYPE_SM`): a
/// device's, a context's or a green context's. Plain data: nothing to release.
#[derive(Clone, Copy)]
#[repr(transparent)]
pub struct SmResource {
    raw: CUdevResource,
}

/// A group of SMs from [`SmResource::split_by_count`] (or its remainder): what a
/// [`ResourceDesc`] is made of. It cannot be split again. Plain data: nothing to release.
#[derive(Clone, Copy)]
#[repr(transparent)]
pub struct SmPartition {
    raw: CUdevResource,
}

impl core::fmt::Debug for SmResource {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SmResource")
            .field("sm_count", &self.sm_count())
            .field("min_partition_size", &self.min_partition_size())
            .field("coscheduled_alignment", &self.coscheduled_alignment())
            .finish()
    }
}

impl core::fmt::Debug for SmPartition {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SmPartition")
            .field("sm_count", &self.sm_count())
            .finish()
    }
}

/// What [`SmResource::split_by_count`] made.
#[derive(Clone, Copy, Debug)]
pub struct Split {
    /// How many of the caller's slots hold a group (`groups[..count]`).
    pub count: usize,
    /// The SMs no group took (possibly none: [`SmPartition::sm_count`] 0); it has none
    /// of the groups' guarantees.
    pub remaining: SmPartition,
}

impl SmResource {
    /// `cuDeviceGetDevResource` with `CU_DEV_RESOURCE_TYPE_SM`: all SMs of `device`.
    ///
    /// # Errors
    /// [`Error::DriverTooOld`] before CUDA 12.4; driver errors.
    #[doc(alias = "cuDeviceGetDevResource")]
    pub fn of_device(device: Device) -> Result<Self> {
        let cu = api()?;
        let mut raw = empty_resource();
        // SAFETY: valid out-pointer to a whole `CUdevResource`.
        unsafe {
            drv!(
                cu,
                cuDeviceGetDevResource(
                    device.as_raw(),
                    &mut raw,
                    CUdevResourceType::CU_DEV_RESOURCE_TYPE_SM
                )
            )?
        };
        Self::checked(raw)
    }

    /// The SMs of `ctx`: `cuGreenCtxGetDevResource` for a context made from a green
    /// context ([`Context::from_green`]), else `cuCtxGetDevResource`. The SMs of a green
    /// context can be split further.
    ///
    /// # Errors
    /// [`Error::DriverTooOld`] before CUDA 12.4; driver errors.
    #[doc(alias = "cuCtxGetDevResource")]
    #[doc(alias = "cuGreenCtxGetDevResource")]
    pub fn of_context(ctx: &Context) -> Result<Self> {
        let cu = api()?;
        let mut raw = empty_resource();
        let ty = CUdevResourceType::CU_DEV_RESOURCE_TYPE_SM;
        // SAFETY: `ctx` keeps its (green) context alive for the call; valid out-pointer.
        unsafe {
            match ctx.green_raw() {
                Some(green) => drv!(cu, cuGreenCtxGetDevResource(green, &mut raw, ty))?,
                None => drv!(cu, cuCtxGetDevResource(ctx.as_raw(), &mut raw, ty))?,
            }
        };
        Self::checked(raw)
    }

    fn checked(raw: CUdevResource) -> Result<Self> {
        if raw.type_ == CUdevResourceType::CU_DEV_RESOURCE_TYPE_SM {
            Ok(Self { raw })
        } else {
            Err(Error::InvalidArgument(
                "the driver returned a resource that is not of type CU_DEV_RESOURCE_TYPE_SM",
            ))
        }
    }

    /// The raw resource.
    pub fn as_raw(&self) -> &CUdevResource {
        &self.raw
    }

    /// `smCount`: how many SMs the resource has.
    pub fn sm_count(&self) -> u32 {
        sm_of(&self.raw).smCount
    }

    /// `minSmPartitionSize`: the fewest SMs a group of a split (without
    /// [`SplitFlags::IGNORE_SM_COSCHEDULING`]) can have.
    pub fn min_partition_size(&self) -> u32 {
        sm_of(&self.raw).minSmPartitionSize
    }

    /// `smCoscheduledAlignment`: the granularity of a split's group sizes (without
    /// [`SplitFlags::IGNORE_SM_COSCHEDULING`]), the number of SMs guaranteed to be
    /// co-scheduled on one GPU processing cluster.
    pub fn coscheduled_alignment(&self) -> u32 {
        sm_of(&self.raw).smCoscheduledAlignment
    }

    /// The size of each group a split with `min_count` (and no
    /// [`SplitFlags::IGNORE_SM_COSCHEDULING`]) makes: `min_count` raised to
    /// [`min_partition_size`](Self::min_partition_size) and rounded up to a multiple of
    /// [`coscheduled_alignment`](Self::coscheduled_alignment). `None` on overflow.
    ///
    /// ```no_run
    /// # fn main() -> cudadrv::Result<()> {
    /// use cudadrv::green::SmResource;
    /// let sms = SmResource::of_device(cudadrv::Device::get(0)?)?;
    /// // On an H100 (minimum 8, alignment 8): 1 -> 8, 9 -> 16, 64 -> 64.
    /// let size = sms.partition_size(9);
    /// # let _ = size; Ok(()) }
    /// ```
    pub fn partition_size(&self, min_count: u32) -> Option<u32> {
        let raised = min_count.max(self.min_partition_size());
        match self.coscheduled_alignment() {
            0 | 1 => Some(raised),
            a => raised.checked_next_multiple_of(a),
        }
    }

    /// Checks a split request against the rules (see the module docs) before the driver
    /// sees it.
    fn check_split(&self, min_count: u32, flags: SplitFlags) -> Result<()> {
        if min_count > self.sm_count() {
            return Err(Error::InvalidArgument(
                "split: min_count is larger than the resource's SM count",
            ));
        }
        if !flags.contains(SplitFlags::IGNORE_SM_COSCHEDULING) {
            match self.partition_size(min_count) {
                Some(size) if size <= self.sm_count() => {}
                _ => {
                    return Err(Error::InvalidArgument(
                        "split: min_count, raised to the minimum partition size and rounded \
                         up to the co-scheduling alignment, is larger than the resource's SM \
                         count (see SmResource::partition_size)",
                    ));
                }
            }
        }
        Ok(())
    }

    /// `cuDevSmResourceSplitByCount` without output: how many groups a split with
    /// `min_count` and `flags` would make.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a request that breaks the split rules (see
    /// [`split_by_count`](Self::split_by_count)); [`Error::DriverTooOld`] before CUDA
    /// 12.4; driver errors.
    #[doc(alias = "cuDevSmResourceSplitByCount")]
    pub fn split_count(&self, min_count: u32, flags: SplitFlags) -> Result<u32> {
        self.check_split(min_count, flags)?;
        let cu = api()?;
        let mut groups = 0u32;
        // SAFETY: null result (a query), valid count pointer, a valid SM input resource,
        // no remainder.
        unsafe {
            drv!(
                cu,
                cuDevSmResourceSplitByCount(
                    ptr::null_mut(),
                    &mut groups,
                    &self.raw,
                    ptr::null_mut(),
                    flags.bits(),
                    min_count
                )
            )?
        };
        Ok(groups)
    }

    /// `cuDevSmResourceSplitByCount`: splits the SMs into up to `groups.len()` disjoint
    /// groups of at least `min_count` SMs each (see the split rules in the module docs),
    /// written to `groups[..count]`; the SMs left over are the [`Split::remaining`].
    ///
    /// The driver makes as many groups as fit, all of the same size
    /// ([`partition_size`](Self::partition_size)`(min_count)` without
    /// [`SplitFlags::IGNORE_SM_COSCHEDULING`]); it may make fewer than asked when the SMs
    /// run out, never more.
    ///
    /// ```no_run
    /// # fn main() -> cudadrv::Result<()> {
    /// use cudadrv::green::{SmPartition, SmResource, SplitFlags};
    /// let sms = SmResource::of_device(cudadrv::Device::get(0)?)?;
    /// // Two equal halves, each a multiple of the alignment.
    /// let align = sms.coscheduled_alignment().max(1);
    /// let half = (sms.sm_count() / 2 / align * align).max(sms.min_partition_size());
    /// let mut groups = [SmPartition::EMPTY; 2];
    /// let split = sms.split_by_count(&mut groups, half, SplitFlags::empty())?;
    /// assert_eq!(split.count, 2);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] up front for no slots, more than `u32::MAX` slots, a
    /// `min_count` above the SM count, or (without `IGNORE_SM_COSCHEDULING`) a
    /// `min_count` whose rounded [`partition_size`](Self::partition_size) is above the SM
    /// count; [`Error::DriverTooOld`] before CUDA 12.4; driver errors
    /// (`CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION`, ...).
    #[doc(alias = "cuDevSmResourceSplitByCount")]
    pub fn split_by_count(
        &self,
        groups: &mut [SmPartition],
        min_count: u32,
        flags: SplitFlags,
    ) -> Result<Split> {
        if groups.is_empty() {
            return Err(Error::InvalidArgument("split: no slots for the groups"));
        }
        let mut n = u32::try_from(groups.len())
            .map_err(|_| Error::InvalidArgument("split: more than u32::MAX group slots"))?;
        self.check_split(min_count, flags)?;
        let cu = api()?;
        let mut remaining = SmPartition::EMPTY;
        // SAFETY: `groups` is `n` `CUdevResource`s (`SmPartition` is transparent), which
        // the driver writes; `n` points at their count and receives how many it made;
        // `self.raw` is a valid SM resource; `remaining` is a valid out-pointer.
        unsafe {
            drv!(
                cu,
                cuDevSmResourceSplitByCount(
                    groups.as_mut_ptr().cast::<CUdevResource>(),
                    &mut n,
                    &self.raw,
                    &mut remaining.raw,
                    flags.bits(),
                    min_count
                )
            )?
        };
        let count = usize::try_from(n).unwrap_or(usize::MAX).min(groups.len());
        Ok(Split { count, remaining })
    }
}

impl SmPartition {
    /// A slot for [`SmResource::split_by_count`] to fill (no SMs).
    pub const EMPTY: Self = Self {
        raw: CUdevResource {
            type_: CUdevResourceType::CU_DEV_RESOURCE_TYPE_INVALID,
            _internal_padding: [0; 92],
            __bindgen_anon_1: cuda_sys::CUdevResource_st__bindgen_ty_1 { _oversize: [0; 48] },
        },
    };

    /// The raw resource.
    pub fn as_raw(&self) -> &CUdevResource {
        &self.raw
    }

    /// `smCount`: how many SMs the group has (0 for an empty slot or remainder).
    pub fn sm_count(&self) -> u32 {
        if self.is_empty() {
            0
        } else {
            sm_of(&self.raw).smCount
        }
    }

    /// Whether this holds no SMs (an unfilled slot, or an empty remainder).
    pub fn is_empty(&self) -> bool {
        self.raw.type_ != CUdevResourceType::CU_DEV_RESOURCE_TYPE_SM
            || sm_of(&self.raw).smCount == 0
    }
}

/// A resource descriptor (`CUdevResourceDesc`): the SMs a [`GreenContext`] is made with.
/// The driver has no call to free one: it is plain data to this crate.
#[derive(Clone, Copy, Debug)]
pub struct ResourceDesc {
    raw: CUdevResourceDesc,
}

// SAFETY: an opaque, immutable driver object, usable from any thread.
unsafe impl Send for ResourceDesc {}
// SAFETY: as above.
unsafe impl Sync for ResourceDesc {}

/// Most resources one descriptor combines (groups of one split and its remainder).
const MAX_DESC_RESOURCES: usize = 64;

impl ResourceDesc {
    /// `cuDevResourceGenerateDesc` of one or more groups of the same split (and possibly
    /// its remainder).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for no partitions, an empty one, or more than 64;
    /// [`Error::DriverTooOld`] before CUDA 12.4; driver errors
    /// (`CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION` for groups of different splits).
    #[doc(alias = "cuDevResourceGenerateDesc")]
    pub fn new(partitions: &[SmPartition]) -> Result<Self> {
        if partitions.is_empty() {
            return Err(Error::InvalidArgument("descriptor: no partitions"));
        }
        if partitions.len() > MAX_DESC_RESOURCES {
            return Err(Error::InvalidArgument(
                "descriptor: more than 64 partitions",
            ));
        }
        if partitions.iter().any(SmPartition::is_empty) {
            return Err(Error::InvalidArgument(
                "descriptor: a partition holds no SMs (an unfilled slot or empty remainder)",
            ));
        }
        let mut copy = [SmPartition::EMPTY; MAX_DESC_RESOURCES];
        let copy = copy
            .get_mut(..partitions.len())
            .ok_or(Error::InvalidArgument(
                "descriptor: more than 64 partitions",
            ))?;
        copy.copy_from_slice(partitions);
        // At most 64.
        let n = partitions.len() as u32;
        // SAFETY: a mutable copy of the partitions (the C parameter is not const), `n`
        // valid SM resources; valid out-pointer.
        unsafe { Self::generate(copy.as_mut_ptr().cast::<CUdevResource>(), n) }
    }

    /// `cuDevResourceGenerateDesc` of a whole resource, unsplit (a green context with
    /// every SM of the device or context).
    ///
    /// # Errors
    /// [`Error::DriverTooOld`] before CUDA 12.4; driver errors.
    #[doc(alias = "cuDevResourceGenerateDesc")]
    pub fn whole(resource: &SmResource) -> Result<Self> {
        let mut copy = resource.raw;
        // SAFETY: one valid SM resource (a copy, the C parameter is not const).
        unsafe { Self::generate(&mut copy, 1) }
    }

    /// # Safety
    /// `resources` points at `n` valid resources.
    unsafe fn generate(resources: *mut CUdevResource, n: u32) -> Result<Self> {
        let cu = api()?;
        let mut raw = ptr::null_mut();
        // SAFETY: the caller's promise; valid out-pointer.
        unsafe { drv!(cu, cuDevResourceGenerateDesc(&mut raw, resources, n))? };
        Ok(Self { raw })
    }

    /// The raw descriptor.
    pub fn as_raw(&self) -> CUdevResourceDesc {
        self.raw
    }
}

/// A green context (`CUgreenCtx`): a context limited to the SMs of a [`ResourceDesc`],
/// destroyed (`cuGreenCtxDestroy`) on drop unless handed to [`Context::from_green`],
/// which then owns it.
///
/// `Send` but not `Sync`: the driver does not synchronize a green context between
/// threads.
#[derive(Debug)]
pub struct GreenContext {
    raw: CUgreenCtx,
    device: Device,
}

// SAFETY: the handle may move between threads; only concurrent use is unsupported, and
// the type is not `Sync`.
unsafe impl Send for GreenContext {}

impl GreenContext {
    /// `cuGreenCtxCreate` with `CU_GREEN_CTX_DEFAULT_STREAM` (which the driver requires):
    /// a green context on `device` with the SMs of `desc`. It retains `device`'s primary
    /// context until destroyed; retaining the primary context first
    /// ([`Context::primary`]) saves initializing it more than once.
    ///
    /// The green context is not made current; [`Context::from_green`] turns it into a
    /// [`Context`] that the handles of this crate use.
    ///
    /// # Errors
    /// [`Error::DriverTooOld`] before CUDA 12.4; driver errors.
    #[doc(alias = "cuGreenCtxCreate")]
    pub fn create(device: Device, desc: &ResourceDesc) -> Result<Self> {
        let cu = api()?;
        let mut raw = ptr::null_mut();
        // SAFETY: valid out-pointer; `desc` is a descriptor from cuDevResourceGenerateDesc.
        unsafe {
            drv!(
                cu,
                cuGreenCtxCreate(
                    &mut raw,
                    desc.raw,
                    device.as_raw(),
                    CUgreenCtxCreate_flags::CU_GREEN_CTX_DEFAULT_STREAM.0
                )
            )?
        };
        Ok(Self { raw, device })
    }

    /// The raw `CUgreenCtx`.
    pub fn as_raw(&self) -> CUgreenCtx {
        self.raw
    }

    /// The device.
    pub fn device(&self) -> Device {
        self.device
    }

    /// `cuGreenCtxGetDevResource`: the green context's SMs.
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuGreenCtxGetDevResource")]
    pub fn sm_resource(&self) -> Result<SmResource> {
        let cu = api()?;
        let mut raw = empty_resource();
        // SAFETY: live green context, valid out-pointer.
        unsafe {
            drv!(
                cu,
                cuGreenCtxGetDevResource(
                    self.raw,
                    &mut raw,
                    CUdevResourceType::CU_DEV_RESOURCE_TYPE_SM
                )
            )?
        };
        SmResource::checked(raw)
    }

    /// Gives up ownership: the caller destroys the green context (`cuGreenCtxDestroy`).
    pub fn into_raw(self) -> CUgreenCtx {
        let raw = self.raw;
        core::mem::forget(self);
        raw
    }

    /// Takes ownership of a green context of `device`; dropping the result destroys it.
    ///
    /// # Safety
    /// `raw` must be a live green context of `device` that nothing else destroys.
    pub unsafe fn from_raw(raw: CUgreenCtx, device: Device) -> Self {
        Self { raw, device }
    }
}

impl Drop for GreenContext {
    /// `cuGreenCtxDestroy`; a failure goes to the drop-error sink.
    fn drop(&mut self) {
        // SAFETY: the green context is ours and no Context was made from it (that would
        // have taken it with `into_raw`).
        unsafe { dropping!(cuGreenCtxDestroy(self.raw)) };
    }
}

/// `cuGreenCtxStreamCreate`: a stream of the green context `ctx` was made from
/// ([`Context::from_green`]), with `priority` (see [`Context::stream_priority_range`]).
/// Always `CU_STREAM_NON_BLOCKING`, as the driver requires. The stream keeps `ctx`, and
/// so the green context, alive.
///
/// [`Stream::new`] and the other stream constructors, given the same `ctx`, make streams
/// of the green context too; this call names the green context explicitly and does not
/// depend on the current context.
///
/// # Errors
/// [`Error::InvalidArgument`] when `ctx` was not made from a green context;
/// [`Error::DriverTooOld`] before CUDA 12.5; driver errors.
#[doc(alias = "cuGreenCtxStreamCreate")]
pub fn stream(ctx: &Context, priority: i32) -> Result<Stream> {
    let green = ctx.green_raw().ok_or(Error::InvalidArgument(
        "cuGreenCtxStreamCreate: the context was not made from a green context",
    ))?;
    let cu = api()?;
    let mut raw = ptr::null_mut();
    // SAFETY: `ctx` keeps the green context alive; valid out-pointer; the required flag.
    unsafe {
        drv!(
            cu,
            cuGreenCtxStreamCreate(
                &mut raw,
                green,
                CUstream_flags_enum::CU_STREAM_NON_BLOCKING.0,
                priority
            )
        )?
    };
    // SAFETY: a stream just made in `ctx`'s green context, ours to destroy.
    Ok(unsafe { Stream::from_raw(raw, ctx) })
}
