//! L2 cache controls and stream attributes (Programming Guide 4.13 and 4.14): the
//! persisting-L2 set-aside (`CU_LIMIT_PERSISTING_L2_CACHE_SIZE`), access-policy windows
//! on streams (`cuStreamSetAttribute`; the launch-attribute form is
//! [`LaunchAttribute::access_policy_window`](crate::launch::LaunchAttribute::access_policy_window)),
//! resetting persisting lines (`cuCtxResetPersistingL2Cache`), and the other stream
//! attributes: synchronization policy, priority, memory synchronization domain.
//!
//! An access-policy window names an address range, but only as a cache hint: the driver
//! reads no memory through it, and a window over memory that was freed has no effect on
//! correctness, so setting one is safe. Attributes that name events are launch-only and
//! not offered here (a stream would keep the event's handle past its borrow).

use cudadrv_sys::{
    CUaccessPolicyWindow, CUaccessProperty, CUlaunchAttributeID, CUlaunchMemSyncDomain,
    CUstreamAttrValue, CUsynchronizationPolicy,
};

use crate::driver::context::Context;
use crate::driver::stream::Stream;
use crate::error::{Result, drv};

/// An access-policy window (`CUaccessPolicyWindow`): of `num_bytes` bytes from `base`,
/// a `hit_ratio` share of accesses get `hit` (persisting, say), the rest `miss`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AccessPolicyWindow {
    /// The first byte (a device address).
    pub base: u64,
    /// The size of the window in bytes (at most the device's
    /// `CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE`).
    pub num_bytes: usize,
    /// The share of accesses in the window that get `hit`, 0.0..=1.0.
    pub hit_ratio: f32,
    /// The property of those accesses (`CU_ACCESS_PROPERTY_PERSISTING`, ...).
    pub hit: CUaccessProperty,
    /// The property of the others (`CU_ACCESS_PROPERTY_STREAMING`, ...).
    pub miss: CUaccessProperty,
}

impl AccessPolicyWindow {
    /// A window over `num_bytes` bytes from `base` whose accesses persist in L2 at
    /// `hit_ratio`, the others streaming.
    #[must_use]
    pub fn persisting(base: u64, num_bytes: usize, hit_ratio: f32) -> Self {
        Self {
            base,
            num_bytes,
            hit_ratio,
            hit: CUaccessProperty::CU_ACCESS_PROPERTY_PERSISTING,
            miss: CUaccessProperty::CU_ACCESS_PROPERTY_STREAMING,
        }
    }

    /// The raw `CUaccessPolicyWindow`.
    #[must_use]
    pub fn as_raw(&self) -> CUaccessPolicyWindow {
        CUaccessPolicyWindow {
            // An address for the cache, never dereferenced by anyone: no provenance.
            base_ptr: core::ptr::without_provenance_mut(self.base as usize),
            num_bytes: self.num_bytes,
            hitRatio: self.hit_ratio,
            hitProp: self.hit,
            missProp: self.miss,
        }
    }

    /// From the raw struct.
    #[must_use]
    pub fn from_raw(raw: &CUaccessPolicyWindow) -> Self {
        Self {
            base: raw.base_ptr.addr() as u64,
            num_bytes: raw.num_bytes,
            hit_ratio: raw.hitRatio,
            hit: raw.hitProp,
            miss: raw.missProp,
        }
    }
}

impl Stream {
    fn set_attr(&self, id: CUlaunchAttributeID, value: &CUstreamAttrValue) -> Result<()> {
        let g = self.context().enter()?;
        // SAFETY: live stream; `value` is valid for `id` (the typed setters below) and
        // names no handle the stream would keep; the context is current.
        unsafe { drv!(g.cu, cuStreamSetAttribute(self.as_raw(), id, value)) }
    }

    /// `cuStreamGetAttribute`: the raw value of a stream attribute.
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuStreamGetAttribute")]
    pub fn attribute(&self, id: CUlaunchAttributeID) -> Result<CUstreamAttrValue> {
        let g = self.context().enter()?;
        let mut value = CUstreamAttrValue::default();
        // SAFETY: live stream, valid out-pointer; the context is current.
        unsafe { drv!(g.cu, cuStreamGetAttribute(self.as_raw(), id, &mut value))? };
        Ok(value)
    }

    /// `cuStreamSetAttribute(CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW)`: kernels launched
    /// on the stream from now on get `window` (unless their launch sets its own).
    ///
    /// # Errors
    /// Driver errors (`CUDA_ERROR_INVALID_VALUE` for a window larger than the device's
    /// maximum or a hit ratio outside 0..=1).
    #[doc(alias = "cuStreamSetAttribute")]
    #[doc(alias = "cudaStreamAttributeAccessPolicyWindow")]
    pub fn set_access_policy_window(&self, window: &AccessPolicyWindow) -> Result<()> {
        let value = CUstreamAttrValue {
            accessPolicyWindow: window.as_raw(),
        };
        self.set_attr(
            CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW,
            &value,
        )
    }

    /// The stream's access-policy window (`cuStreamGetAttribute`).
    ///
    /// # Errors
    /// Driver errors.
    pub fn access_policy_window(&self) -> Result<AccessPolicyWindow> {
        let v = self.attribute(CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW)?;
        // SAFETY: the driver wrote the access-policy member for this attribute.
        Ok(AccessPolicyWindow::from_raw(unsafe {
            &v.accessPolicyWindow
        }))
    }

    /// `cuStreamSetAttribute(CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY)`: how a host
    /// thread waits for the stream (spin, yield, block).
    ///
    /// # Errors
    /// Driver errors.
    pub fn set_sync_policy(&self, policy: CUsynchronizationPolicy) -> Result<()> {
        let value = CUstreamAttrValue { syncPolicy: policy };
        self.set_attr(
            CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY,
            &value,
        )
    }

    /// The stream's synchronization policy.
    ///
    /// # Errors
    /// Driver errors.
    pub fn sync_policy(&self) -> Result<CUsynchronizationPolicy> {
        let v = self.attribute(CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY)?;
        // SAFETY: the driver wrote the policy member for this attribute.
        Ok(unsafe { v.syncPolicy })
    }

    /// `cuStreamSetAttribute(CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN)`: the memory
    /// synchronization domain of the stream's kernels (Programming Guide 4.14).
    ///
    /// # Errors
    /// Driver errors.
    pub fn set_mem_sync_domain(&self, domain: CUlaunchMemSyncDomain) -> Result<()> {
        let value = CUstreamAttrValue {
            memSyncDomain: domain,
        };
        self.set_attr(
            CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN,
            &value,
        )
    }

    /// The stream's memory synchronization domain.
    ///
    /// # Errors
    /// Driver errors.
    pub fn mem_sync_domain(&self) -> Result<CUlaunchMemSyncDomain> {
        let v = self.attribute(CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN)?;
        // SAFETY: the driver wrote the domain member for this attribute.
        Ok(unsafe { v.memSyncDomain })
    }

    /// `cuStreamSetAttribute(CU_LAUNCH_ATTRIBUTE_PRIORITY)`: the priority of kernels
    /// launched on the stream from now on.
    ///
    /// # Errors
    /// Driver errors.
    pub fn set_priority(&self, priority: i32) -> Result<()> {
        let value = CUstreamAttrValue { priority };
        self.set_attr(CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PRIORITY, &value)
    }
}

impl Context {
    /// `cuCtxGetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE)`: the bytes of L2 set aside for
    /// persisting accesses.
    ///
    /// # Errors
    /// Driver errors.
    pub fn persisting_l2_size(&self) -> Result<usize> {
        self.limit(cudadrv_sys::CUlimit::CU_LIMIT_PERSISTING_L2_CACHE_SIZE)
    }

    /// `cuCtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE)`: sets aside `bytes` of L2 for
    /// persisting accesses (rounded by the driver, at most
    /// `CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE`).
    ///
    /// # Errors
    /// Driver errors.
    pub fn set_persisting_l2_size(&self, bytes: usize) -> Result<()> {
        self.set_limit(
            cudadrv_sys::CUlimit::CU_LIMIT_PERSISTING_L2_CACHE_SIZE,
            bytes,
        )
    }

    /// `cuCtxResetPersistingL2Cache`: turns every persisting L2 line back to normal.
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuCtxResetPersistingL2Cache")]
    pub fn reset_persisting_l2(&self) -> Result<()> {
        let g = self.enter()?;
        // SAFETY: no arguments; the context is current.
        unsafe { drv!(g.cu, cuCtxResetPersistingL2Cache()) }
    }
}
