//! Workqueue resources (CUDA 13.1, Programming Guide 4.6.2): besides SMs, a green context
//! can be given a workqueue configuration (`CU_DEV_RESOURCE_TYPE_WORKQUEUE_CONFIG`: how
//! many stream-ordered workloads it expects at once, and whether it shares the device's
//! workqueues or balances onto its own) or share the workqueues of an existing context
//! (`CU_DEV_RESOURCE_TYPE_WORKQUEUE`). Either is combined with SM groups into one
//! descriptor ([`ResourceDesc::with_workqueue_config`],
//! [`ResourceDesc::with_workqueue`]).
//!
//! Drivers before 13.1 do not know these resource types: every call here is
//! [`Error::DriverTooOld`] there, found before the driver is called.

use cudadrv_sys::{CUdevResource, CUdevResourceType, CUdevWorkqueueConfigScope};

use super::{ResourceDesc, SmPartition, empty_resource};
use crate::driver::context::Context;
use crate::driver::device::Device;
use crate::driver::stream::Stream;
use crate::driver::{api, cached_version};
use crate::error::{Error, Result, drv};

/// The CUDA version that introduced workqueue resources.
const SINCE: u32 = 13010;

/// [`Error::DriverTooOld`] for `call` on a driver before 13.1 (or one whose version is
/// unknown: these resource types would be refused as invalid).
fn needs_13_1(call: &'static str) -> Result<()> {
    match cached_version() {
        Some(v) if v >= SINCE => Ok(()),
        v => Err(Error::DriverTooOld {
            call,
            needs: SINCE,
            driver: v.unwrap_or(0),
        }),
    }
}

/// `CUdevWorkqueueConfigScope`: which workqueues a green context's work goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WorkqueueScope {
    /// `CU_WORKQUEUE_SCOPE_DEVICE_CTX`: the workqueues shared by every context of the
    /// device (the driver's default).
    DeviceContext,
    /// `CU_WORKQUEUE_SCOPE_GREEN_CTX_BALANCED`: where possible, workqueues no other
    /// balanced green context uses.
    GreenContextBalanced,
}

impl WorkqueueScope {
    fn as_raw(self) -> CUdevWorkqueueConfigScope {
        match self {
            Self::DeviceContext => CUdevWorkqueueConfigScope::CU_WORKQUEUE_SCOPE_DEVICE_CTX,
            Self::GreenContextBalanced => {
                CUdevWorkqueueConfigScope::CU_WORKQUEUE_SCOPE_GREEN_CTX_BALANCED
            }
        }
    }

    fn from_raw(raw: CUdevWorkqueueConfigScope) -> Option<Self> {
        match raw {
            CUdevWorkqueueConfigScope::CU_WORKQUEUE_SCOPE_DEVICE_CTX => Some(Self::DeviceContext),
            CUdevWorkqueueConfigScope::CU_WORKQUEUE_SCOPE_GREEN_CTX_BALANCED => {
                Some(Self::GreenContextBalanced)
            }
            _ => None,
        }
    }
}

/// A workqueue configuration resource (`CU_DEV_RESOURCE_TYPE_WORKQUEUE_CONFIG`): the
/// device's, changed with [`with_concurrency_limit`](Self::with_concurrency_limit) and
/// [`with_scope`](Self::with_scope), then combined with SM groups by
/// [`ResourceDesc::with_workqueue_config`]. Plain data: nothing to release.
#[derive(Clone, Copy)]
#[repr(transparent)]
pub struct WorkqueueConfig {
    raw: CUdevResource,
}

// SAFETY: plain data; the `nextResource` pointer inside is never dereferenced by this
// crate (the driver's own link, null in every resource this crate fills).
unsafe impl Send for WorkqueueConfig {}
// SAFETY: as above; no interior mutability.
unsafe impl Sync for WorkqueueConfig {}

impl core::fmt::Debug for WorkqueueConfig {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("WorkqueueConfig")
            .field("device", &self.device())
            .field("concurrency_limit", &self.concurrency_limit())
            .field("scope", &self.scope())
            .finish()
    }
}

impl WorkqueueConfig {
    /// `cuDeviceGetDevResource` with `CU_DEV_RESOURCE_TYPE_WORKQUEUE_CONFIG`: the
    /// device's workqueue configuration.
    ///
    /// # Errors
    /// [`Error::DriverTooOld`] before CUDA 13.1; driver errors.
    #[doc(alias = "cuDeviceGetDevResource")]
    pub fn of_device(device: Device) -> Result<Self> {
        needs_13_1("cuDeviceGetDevResource (CU_DEV_RESOURCE_TYPE_WORKQUEUE_CONFIG)")?;
        let cu = api()?;
        let mut raw = empty_resource();
        // SAFETY: valid out-pointer to a whole `CUdevResource`.
        unsafe { drv!(cu, cuDeviceGetDevResource(device.as_raw(), &mut raw, TYPE))? };
        Self::checked(raw)
    }

    /// The workqueue configuration of `ctx`: `cuGreenCtxGetDevResource` for a context made
    /// from a green context, else `cuCtxGetDevResource`.
    ///
    /// # Errors
    /// [`Error::DriverTooOld`] before CUDA 13.1; driver errors.
    #[doc(alias = "cuCtxGetDevResource")]
    #[doc(alias = "cuGreenCtxGetDevResource")]
    pub fn of_context(ctx: &Context) -> Result<Self> {
        needs_13_1("cuCtxGetDevResource (CU_DEV_RESOURCE_TYPE_WORKQUEUE_CONFIG)")?;
        let cu = api()?;
        let mut raw = empty_resource();
        // SAFETY: `ctx` keeps its (green) context alive for the call; valid out-pointer.
        unsafe {
            match ctx.green_raw() {
                Some(green) => drv!(cu, cuGreenCtxGetDevResource(green, &mut raw, TYPE))?,
                None => drv!(cu, cuCtxGetDevResource(ctx.as_raw(), &mut raw, TYPE))?,
            }
        };
        Self::checked(raw)
    }

    /// `cuStreamGetDevResource` with `CU_DEV_RESOURCE_TYPE_WORKQUEUE_CONFIG`: the
    /// workqueue configuration the stream's work runs with.
    ///
    /// # Errors
    /// [`Error::DriverTooOld`] before CUDA 13.1; driver errors.
    #[doc(alias = "cuStreamGetDevResource")]
    pub fn of_stream(stream: &Stream) -> Result<Self> {
        let cu = api()?;
        let mut raw = empty_resource();
        // SAFETY: `stream` is live for the call; valid out-pointer.
        unsafe { drv!(cu, cuStreamGetDevResource(stream.as_raw(), &mut raw, TYPE))? };
        Self::checked(raw)
    }

    fn checked(raw: CUdevResource) -> Result<Self> {
        if raw.type_ == TYPE {
            Ok(Self { raw })
        } else {
            Err(Error::InvalidArgument(
                "the driver returned a resource that is not a workqueue configuration",
            ))
        }
    }

    fn fields(&self) -> &cudadrv_sys::CUdevWorkqueueConfigResource {
        // SAFETY: `checked` made sure the driver filled the `wqConfig` member (plain
        // integers, valid for any bits).
        unsafe { &self.raw.__bindgen_anon_1.wqConfig }
    }

    fn fields_mut(&mut self) -> &mut cudadrv_sys::CUdevWorkqueueConfigResource {
        // SAFETY: as in `fields`; writing integers keeps the member valid.
        unsafe { &mut self.raw.__bindgen_anon_1.wqConfig }
    }

    /// The device the workqueues belong to.
    pub fn device(&self) -> Device {
        Device::from_raw(self.fields().device)
    }

    /// `wqConcurrencyLimit`: the most stream-ordered workloads expected at once.
    pub fn concurrency_limit(&self) -> u32 {
        self.fields().wqConcurrencyLimit
    }

    /// `sharingScope`, or `None` for a scope this crate does not know.
    pub fn scope(&self) -> Option<WorkqueueScope> {
        WorkqueueScope::from_raw(self.fields().sharingScope)
    }

    /// The configuration with `wqConcurrencyLimit` set to `limit`.
    #[must_use]
    pub fn with_concurrency_limit(mut self, limit: u32) -> Self {
        self.fields_mut().wqConcurrencyLimit = limit;
        self
    }

    /// The configuration with `sharingScope` set to `scope`.
    #[must_use]
    pub fn with_scope(mut self, scope: WorkqueueScope) -> Self {
        self.fields_mut().sharingScope = scope.as_raw();
        self
    }

    /// The raw resource.
    pub fn as_raw(&self) -> &CUdevResource {
        &self.raw
    }
}

const TYPE: CUdevResourceType = CUdevResourceType::CU_DEV_RESOURCE_TYPE_WORKQUEUE_CONFIG;
const WQ: CUdevResourceType = CUdevResourceType::CU_DEV_RESOURCE_TYPE_WORKQUEUE;

/// The workqueues of an existing context (`CU_DEV_RESOURCE_TYPE_WORKQUEUE`), for a green
/// context that shares them ([`ResourceDesc::with_workqueue`]). Plain data.
#[derive(Clone, Copy)]
#[repr(transparent)]
pub struct Workqueue {
    raw: CUdevResource,
}

// SAFETY: as for `WorkqueueConfig`.
unsafe impl Send for Workqueue {}
// SAFETY: as above.
unsafe impl Sync for Workqueue {}

impl core::fmt::Debug for Workqueue {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Workqueue").finish_non_exhaustive()
    }
}

impl Workqueue {
    /// The workqueues of `ctx` (`cuGreenCtxGetDevResource` or `cuCtxGetDevResource` with
    /// `CU_DEV_RESOURCE_TYPE_WORKQUEUE`).
    ///
    /// # Errors
    /// [`Error::DriverTooOld`] before CUDA 13.1; driver errors.
    #[doc(alias = "cuCtxGetDevResource")]
    #[doc(alias = "cuGreenCtxGetDevResource")]
    pub fn of_context(ctx: &Context) -> Result<Self> {
        needs_13_1("cuCtxGetDevResource (CU_DEV_RESOURCE_TYPE_WORKQUEUE)")?;
        let cu = api()?;
        let mut raw = empty_resource();
        // SAFETY: `ctx` keeps its (green) context alive for the call; valid out-pointer.
        unsafe {
            match ctx.green_raw() {
                Some(green) => drv!(cu, cuGreenCtxGetDevResource(green, &mut raw, WQ))?,
                None => drv!(cu, cuCtxGetDevResource(ctx.as_raw(), &mut raw, WQ))?,
            }
        };
        if raw.type_ != WQ {
            return Err(Error::InvalidArgument(
                "the driver returned a resource that is not a workqueue",
            ));
        }
        Ok(Self { raw })
    }

    /// The raw resource.
    pub fn as_raw(&self) -> &CUdevResource {
        &self.raw
    }
}

impl ResourceDesc {
    /// `cuDevResourceGenerateDesc` of SM groups of one split (and possibly its remainder)
    /// and a workqueue configuration: a green context with those SMs whose work goes to
    /// the workqueues `config` describes.
    ///
    /// # Errors
    /// As [`ResourceDesc::new`], and [`Error::DriverTooOld`] before CUDA 13.1.
    #[doc(alias = "cuDevResourceGenerateDesc")]
    pub fn with_workqueue_config(
        partitions: &[SmPartition],
        config: &WorkqueueConfig,
    ) -> Result<Self> {
        needs_13_1("cuDevResourceGenerateDesc (CU_DEV_RESOURCE_TYPE_WORKQUEUE_CONFIG)")?;
        Self::generate_with(partitions, &config.raw)
    }

    /// `cuDevResourceGenerateDesc` of SM groups of one split (and possibly its remainder)
    /// and the workqueues of an existing context: a green context that shares them.
    ///
    /// # Errors
    /// As [`ResourceDesc::new`], and [`Error::DriverTooOld`] before CUDA 13.1.
    #[doc(alias = "cuDevResourceGenerateDesc")]
    pub fn with_workqueue(partitions: &[SmPartition], workqueue: &Workqueue) -> Result<Self> {
        needs_13_1("cuDevResourceGenerateDesc (CU_DEV_RESOURCE_TYPE_WORKQUEUE)")?;
        Self::generate_with(partitions, &workqueue.raw)
    }
}
