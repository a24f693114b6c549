//! The SMs of a device, context, green context or stream ([`SmResource`]) and their
//! split by count (`cuDevSmResourceSplitByCount`, CUDA 12.4): groups of one size
//! ([`SmPartition`]), the path that runs on 13.0 drivers. The 13.1 split into groups of
//! different sizes is in [`groups`](super::groups).

use core::ptr;

use cudadrv_sys::{
    CUdevResource, CUdevResourceType, CUdevSmResource, CUdevSmResourceSplitByCount_flags,
};

#[cfg(doc)]
use super::ResourceDesc;
use crate::driver::api;
use crate::driver::context::Context;
use crate::driver::device::Device;
use crate::driver::stream::Stream;
use crate::error::{Error, Result, drv};

crate::flags::flags! {
    /// `CUdevSmResourceSplitByCount_flags` for [`SmResource::split_by_count`].
    #[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
    pub struct SplitFlags: u32 {
        /// `CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING`: treat each SM on its own,
        /// ignoring the hardware hierarchy; lowers the minimum and the alignment (finer
        /// partitions) at the cost of features such as large clusters on 9.0+.
        const IGNORE_SM_COSCHEDULING =
            CUdevSmResourceSplitByCount_flags::CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING.0;
        /// `CU_DEV_SM_RESOURCE_SPLIT_MAX_POTENTIAL_CLUSTER_SIZE` (compute capability 9.0+):
        /// try to make groups that allow the largest thread clusters.
        const MAX_POTENTIAL_CLUSTER_SIZE =
            CUdevSmResourceSplitByCount_flags::CU_DEV_SM_RESOURCE_SPLIT_MAX_POTENTIAL_CLUSTER_SIZE.0;
    }
}

/// An empty (`CU_DEV_RESOURCE_TYPE_INVALID`) resource for the driver to fill.
pub(super) fn empty_resource() -> CUdevResource {
    CUdevResource {
        type_: CUdevResourceType::CU_DEV_RESOURCE_TYPE_INVALID,
        _internal_padding: [0; 92],
        __bindgen_anon_1: Default::default(),
        nextResource: ptr::null_mut(),
    }
}

/// The SM member of a resource.
pub(super) fn sm_of(raw: &CUdevResource) -> CUdevSmResource {
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

// SAFETY: plain data; the `nextResource` pointer inside is never dereferenced by this
// crate (the driver's own link, null in every resource this crate fills).
unsafe impl Send for SmResource {}
// SAFETY: as above; no interior mutability.
unsafe impl Sync for SmResource {}
// SAFETY: as for `SmResource`.
unsafe impl Send for SmPartition {}
// SAFETY: as above.
unsafe impl Sync for SmPartition {}

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

    pub(super) fn checked(raw: CUdevResource) -> Result<Self> {
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

    /// `cuStreamGetDevResource` (CUDA 13.1): the SMs the stream's work runs on (its
    /// green context's, or the device's).
    ///
    /// # Errors
    /// [`Error::DriverTooOld`] before CUDA 13.1; driver errors.
    #[doc(alias = "cuStreamGetDevResource")]
    #[doc(alias = "cudaStreamGetDevResource")]
    pub fn of_stream(stream: &Stream) -> Result<Self> {
        let cu = api()?;
        let mut raw = empty_resource();
        let ty = CUdevResourceType::CU_DEV_RESOURCE_TYPE_SM;
        // SAFETY: `stream` is live for the call; valid out-pointer.
        unsafe { drv!(cu, cuStreamGetDevResource(stream.as_raw(), &mut raw, ty))? };
        Self::checked(raw)
    }

    /// `localityDomainId` (CUDA 13.1; 0 from older drivers): the locality domain the SMs
    /// belong to, for [`GroupParams::locality_domain`](super::GroupParams::locality_domain).
    pub fn locality_domain(&self) -> u32 {
        sm_of(&self.raw).localityDomainId
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
            __bindgen_anon_1: cudadrv_sys::CUdevResource_st__bindgen_ty_1 { _oversize: [0; 40] },
            nextResource: ptr::null_mut(),
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

    /// The raw resource, for the driver to fill.
    pub(super) fn as_raw_mut(&mut self) -> &mut CUdevResource {
        &mut self.raw
    }

    /// Whether this holds no SMs (an unfilled slot, or an empty remainder).
    pub fn is_empty(&self) -> bool {
        self.raw.type_ != CUdevResourceType::CU_DEV_RESOURCE_TYPE_SM
            || sm_of(&self.raw).smCount == 0
    }
}
