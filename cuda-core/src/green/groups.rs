//! The CUDA 13.1 split (`cuDevSmResourceSplit`, Programming Guide 4.6.3): one call that
//! makes groups of different sizes, each described by a [`GroupParams`] (SM count,
//! co-scheduled SM count, backfill, locality domain), and the SMs left over.
//!
//! On a driver before 13.1 the call is [`Error::DriverTooOld`] naming
//! `cuDevSmResourceSplit`, 13.1 and the driver's version; the 12.4 split by count
//! ([`SmResource::split_by_count`]) is what runs there.

use cudadrv_sys::{CU_DEV_SM_RESOURCE_GROUP_PARAMS, CUdevResource, CUdevSmResourceGroup_flags};

use super::{SmPartition, SmResource, Split};
use crate::driver::api;
use crate::error::{Error, Result, drv};

/// How many groups one split may make (the caller's slots live on the stack).
pub const MAX_GROUPS: usize = 64;

/// One group of a 13.1 split (`CU_DEV_SM_RESOURCE_GROUP_PARAMS`), built with `const`
/// methods; every field the builder does not set is zero, as the driver requires.
///
/// ```
/// use cudadrv::green::GroupParams;
/// // The guide's example 3: 8 SMs co-scheduled in fours, then a group with the rest
/// // (co-scheduled in pairs, filled up with whatever is left).
/// let groups = [
///     GroupParams::sms(8).coscheduled(4),
///     GroupParams::sms(0).coscheduled(2).backfill(),
/// ];
/// assert_eq!(groups[0].sm_count(), 8);
/// assert!(groups[1].is_backfill());
/// ```
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(transparent)]
pub struct GroupParams {
    raw: CU_DEV_SM_RESOURCE_GROUP_PARAMS,
}

impl core::fmt::Debug for GroupParams {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("GroupParams")
            .field("sm_count", &self.raw.smCount)
            .field("coscheduled", &self.raw.coscheduledSmCount)
            .field(
                "preferred_coscheduled",
                &self.raw.preferredCoscheduledSmCount,
            )
            .field("flags", &self.raw.flags)
            .field("locality_domain", &self.raw.localityDomainId)
            .finish()
    }
}

const BACKFILL: u32 = CUdevSmResourceGroup_flags::CU_DEV_SM_RESOURCE_GROUP_BACKFILL.0;
const DOMAIN: u32 = CUdevSmResourceGroup_flags::CU_DEV_SM_RESOURCE_GROUP_LOCALITY_DOMAIN_ID.0;
const SUPPLEMENTAL: u32 =
    CUdevSmResourceGroup_flags::CU_DEV_SM_RESOURCE_GROUP_LOCALITY_DOMAIN_SUPPLEMENTAL_SMS.0;

impl GroupParams {
    /// A group of `count` SMs (`smCount`): 0, or an even number from 2 to the input's SM
    /// count. 0 lets the driver choose: with no other group, it discovers how many SMs
    /// fit the constraints; as the last group with [`backfill`](Self::backfill), it takes
    /// what is left.
    pub const fn sms(count: u32) -> Self {
        // `CU_DEV_SM_RESOURCE_GROUP_PARAMS` is plain integers; all zero is its default.
        let mut raw = CU_DEV_SM_RESOURCE_GROUP_PARAMS {
            smCount: 0,
            coscheduledSmCount: 0,
            preferredCoscheduledSmCount: 0,
            flags: 0,
            localityDomainId: 0,
            reserved: [0; 11],
        };
        raw.smCount = count;
        Self { raw }
    }

    /// `coscheduledSmCount`: SMs kept together for clusters (0: the device's default, 8
    /// on compute capability 9.0+; at most 32 there, 2 elsewhere). Without
    /// [`backfill`](Self::backfill) the group's SM count must be a multiple of it.
    pub const fn coscheduled(mut self, count: u32) -> Self {
        self.raw.coscheduledSmCount = count;
        self
    }

    /// `preferredCoscheduledSmCount`: co-scheduled groups merged into larger ones of
    /// this size where possible (for preferred cluster dimensions, compute capability
    /// 10.0+).
    pub const fn preferred_coscheduled(mut self, count: u32) -> Self {
        self.raw.preferredCoscheduledSmCount = count;
        self
    }

    /// `CU_DEV_SM_RESOURCE_GROUP_BACKFILL`: the constraints are a hint; the group is
    /// filled up to its SM count with other SMs where needed.
    pub const fn backfill(mut self) -> Self {
        self.raw.flags |= BACKFILL;
        self
    }

    /// `CU_DEV_SM_RESOURCE_GROUP_LOCALITY_DOMAIN_ID`: the group's SMs come from locality
    /// domain `id` (`localityDomainId`; see [`SmResource::locality_domain`]).
    pub const fn locality_domain(mut self, id: u32) -> Self {
        self.raw.flags |= DOMAIN;
        self.raw.localityDomainId = id;
        self
    }

    /// `CU_DEV_SM_RESOURCE_GROUP_LOCALITY_DOMAIN_ID` with
    /// `CU_DEV_SM_RESOURCE_GROUP_LOCALITY_DOMAIN_ID_ANY`: SMs from any locality domain of
    /// the input, none from outside one.
    pub const fn any_locality_domain(self) -> Self {
        self.locality_domain(cudadrv_sys::CU_DEV_SM_RESOURCE_GROUP_LOCALITY_DOMAIN_ID_ANY as u32)
    }

    /// `CU_DEV_SM_RESOURCE_GROUP_LOCALITY_DOMAIN_SUPPLEMENTAL_SMS`: with a locality
    /// domain, SMs beyond the domain's may be added.
    pub const fn supplemental_sms(mut self) -> Self {
        self.raw.flags |= SUPPLEMENTAL;
        self
    }

    /// The group's requested SM count.
    pub const fn sm_count(&self) -> u32 {
        self.raw.smCount
    }

    /// The co-scheduled SM count asked for (0: the device's default).
    pub const fn coscheduled_count(&self) -> u32 {
        self.raw.coscheduledSmCount
    }

    /// Whether [`backfill`](Self::backfill) is set.
    pub const fn is_backfill(&self) -> bool {
        self.raw.flags & BACKFILL != 0
    }

    /// The raw parameters.
    pub const fn as_raw(&self) -> &CU_DEV_SM_RESOURCE_GROUP_PARAMS {
        &self.raw
    }

    /// The first rule of the driver's this group breaks for an input of `available`
    /// SMs, if any (checked before the driver is called).
    fn rule_broken(&self, available: u32) -> Option<&'static str> {
        let n = self.raw.smCount;
        let co = self.raw.coscheduledSmCount;
        if n == 0 {
            return None;
        }
        if n < 2 || n > available {
            return Some("split: a group's SM count must be 0 or from 2 to the input's SM count");
        }
        if n % 2 != 0 {
            return Some("split: a group's SM count must be even");
        }
        if co != 0 && n % co != 0 && !self.is_backfill() {
            return Some(
                "split: a group's SM count must be a multiple of its co-scheduled SM count \
                 (or the group must backfill)",
            );
        }
        if self.raw.flags & SUPPLEMENTAL != 0 && self.raw.flags & DOMAIN == 0 {
            return Some("split: supplemental SMs need a locality domain");
        }
        None
    }
}

impl SmResource {
    /// `cuDevSmResourceSplit` (CUDA 13.1): splits the SMs into `params.len()` groups, one
    /// per [`GroupParams`], written to `groups[..params.len()]`, and the SMs left over
    /// ([`Split::remaining`], possibly empty). Unlike
    /// [`split_by_count`](Self::split_by_count), the groups may differ in size, and
    /// every group the call returns is valid (the driver fails rather than make an empty
    /// one): [`Split::count`] is `params.len()`.
    ///
    /// ```no_run
    /// # fn main() -> cudadrv::Result<()> {
    /// use cudadrv::green::{GroupParams, SmPartition, SmResource};
    /// let sms = SmResource::of_device(cudadrv::Device::get(0)?)?;
    /// // 16 SMs for latency-critical work, everything else (in pairs) for the rest.
    /// let params = [GroupParams::sms(16), GroupParams::sms(0).coscheduled(2).backfill()];
    /// let mut groups = [SmPartition::EMPTY; 2];
    /// let split = sms.split(&params, &mut groups)?;
    /// assert_eq!(groups[0].sm_count(), 16);
    /// # let _ = split; Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] up front for no groups, more than [`MAX_GROUPS`],
    /// fewer slots than groups, a group that breaks the driver's rules (SM count 0 or
    /// even and from 2 to the input's, a multiple of its co-scheduled count unless it
    /// backfills, supplemental SMs only with a locality domain) or groups asking for
    /// more SMs together than the input has; [`Error::DriverTooOld`] before CUDA 13.1;
    /// driver errors (`CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION` when the SMs do not
    /// fit the constraints).
    #[doc(alias = "cuDevSmResourceSplit")]
    pub fn split(&self, params: &[GroupParams], groups: &mut [SmPartition]) -> Result<Split> {
        if params.is_empty() {
            return Err(Error::InvalidArgument("split: no groups"));
        }
        if params.len() > MAX_GROUPS {
            return Err(Error::InvalidArgument("split: more than 64 groups"));
        }
        let slots = groups
            .get_mut(..params.len())
            .ok_or(Error::InvalidArgument("split: fewer slots than groups"))?;
        let available = self.sm_count();
        if let Some(rule) = params.iter().find_map(|p| p.rule_broken(available)) {
            return Err(Error::InvalidArgument(rule));
        }
        let asked: u64 = params.iter().map(|p| u64::from(p.sm_count())).sum();
        if asked > u64::from(available) {
            return Err(Error::InvalidArgument(
                "split: the groups ask for more SMs together than the input has",
            ));
        }
        // The driver takes the parameters as a mutable array (it keeps them as given);
        // a copy on the stack leaves the caller's untouched.
        let mut copy = [GroupParams::sms(0); MAX_GROUPS];
        let copy = &mut copy[..params.len()];
        copy.copy_from_slice(params);
        let mut remaining = SmPartition::EMPTY;
        let cu = api()?;
        // At most 64.
        let n = params.len() as u32;
        // SAFETY: `slots` is `n` `CUdevResource`s (`SmPartition` is transparent) for the
        // driver to write; `self.raw` is a valid SM resource; `remaining` is a valid
        // out-pointer; `copy` is `n` zero-initialized-but-set parameter structs
        // (`GroupParams` is transparent); flags must be 0.
        unsafe {
            drv!(
                cu,
                cuDevSmResourceSplit(
                    slots.as_mut_ptr().cast::<CUdevResource>(),
                    n,
                    self.as_raw(),
                    remaining.as_raw_mut(),
                    0,
                    copy.as_mut_ptr().cast::<CU_DEV_SM_RESOURCE_GROUP_PARAMS>()
                )
            )?
        };
        Ok(Split {
            count: params.len(),
            remaining,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builder_sets_only_what_it_names() {
        let p = GroupParams::sms(16)
            .coscheduled(8)
            .preferred_coscheduled(16)
            .backfill()
            .locality_domain(3)
            .supplemental_sms();
        let raw = p.as_raw();
        assert_eq!(
            (
                raw.smCount,
                raw.coscheduledSmCount,
                raw.preferredCoscheduledSmCount
            ),
            (16, 8, 16)
        );
        assert_eq!(raw.flags, BACKFILL | DOMAIN | SUPPLEMENTAL);
        assert_eq!(raw.localityDomainId, 3);
        assert_eq!(raw.reserved, [0; 11]);
        assert_eq!(GroupParams::sms(0).as_raw().flags, 0);
        assert_eq!(
            GroupParams::sms(2)
                .any_locality_domain()
                .as_raw()
                .localityDomainId,
            u32::MAX
        );
    }

    #[test]
    fn rules_are_the_drivers() {
        let ok = |p: GroupParams| p.rule_broken(132).is_none();
        assert!(ok(GroupParams::sms(0)));
        assert!(ok(GroupParams::sms(2)));
        assert!(ok(GroupParams::sms(16).coscheduled(8)));
        assert!(ok(GroupParams::sms(132)));
        assert!(!ok(GroupParams::sms(1)));
        assert!(!ok(GroupParams::sms(7)));
        assert!(!ok(GroupParams::sms(134)));
        assert!(!ok(GroupParams::sms(12).coscheduled(8)));
        assert!(ok(GroupParams::sms(12).coscheduled(8).backfill()));
        assert!(!ok(GroupParams::sms(4).supplemental_sms()));
        assert!(ok(GroupParams::sms(4)
            .locality_domain(0)
            .supplemental_sms()));
    }
}
