//! Device management (driver API section "Device Management"): [`Device`], an ordinal
//! the driver knows, with its name, UUID, memory and attributes.
//!
//! (This file is the host-side device handle; `device/` holds the device-side helpers
//! compiled for `nvptx64`.)

use core::ffi::c_char;

use cudadrv_sys::{CUdevice, CUdevice_attribute};

use crate::driver::api;
use crate::error::{Error, Result, drv};

/// A CUDA device (`CUdevice`): an ordinal, cheap to copy. Needs no context.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Device {
    raw: CUdevice,
}

/// A device name as the driver reports it (at most 255 bytes, no heap).
#[derive(Clone, Copy)]
pub struct DeviceName {
    bytes: [u8; 256],
    len: usize,
}

impl DeviceName {
    /// The name (`"NVIDIA H100 80GB HBM3"`); invalid UTF-8 is cut at the first bad byte.
    pub fn as_str(&self) -> &str {
        let bytes = self.bytes.get(..self.len).unwrap_or(&[]);
        match core::str::from_utf8(bytes) {
            Ok(s) => s,
            Err(e) => {
                core::str::from_utf8(bytes.get(..e.valid_up_to()).unwrap_or(&[])).unwrap_or("")
            }
        }
    }
}

impl core::fmt::Debug for DeviceName {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        core::fmt::Debug::fmt(self.as_str(), f)
    }
}

impl core::fmt::Display for DeviceName {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl core::ops::Deref for DeviceName {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl Device {
    /// `cuDeviceGetCount`: the number of CUDA devices.
    ///
    /// # Errors
    /// Loader or driver errors (`CUDA_ERROR_NO_DEVICE` comes from `cuInit`).
    #[doc(alias = "cuDeviceGetCount")]
    pub fn count() -> Result<usize> {
        let cu = api()?;
        let mut n = 0;
        // SAFETY: `n` is a valid out-pointer.
        unsafe { drv!(cu, cuDeviceGetCount(&mut n))? };
        usize::try_from(n)
            .map_err(|_| Error::InvalidArgument("cuDeviceGetCount returned a negative count"))
    }

    /// `cuDeviceGet`: the device with this ordinal.
    ///
    /// # Errors
    /// `CUDA_ERROR_INVALID_DEVICE` for an ordinal past [`Device::count`].
    #[doc(alias = "cuDeviceGet")]
    pub fn get(ordinal: usize) -> Result<Self> {
        let cu = api()?;
        let ordinal = i32::try_from(ordinal)
            .map_err(|_| Error::InvalidArgument("device ordinal too large"))?;
        let mut raw = 0;
        // SAFETY: `raw` is a valid out-pointer.
        unsafe { drv!(cu, cuDeviceGet(&mut raw, ordinal))? };
        Ok(Self { raw })
    }

    /// The raw `CUdevice`.
    pub const fn as_raw(self) -> CUdevice {
        self.raw
    }

    /// Wraps a raw `CUdevice`. A device owns nothing, so this is safe; an invalid value
    /// makes later calls fail with `CUDA_ERROR_INVALID_DEVICE`.
    pub const fn from_raw(raw: CUdevice) -> Self {
        Self { raw }
    }

    /// `cuDeviceGetName`: the device's name.
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuDeviceGetName")]
    pub fn name(self) -> Result<DeviceName> {
        let cu = api()?;
        let mut bytes = [0u8; 256];
        // SAFETY: the buffer holds 256 bytes, as the length says; the driver writes a
        // NUL-terminated string into it.
        unsafe {
            drv!(
                cu,
                cuDeviceGetName(bytes.as_mut_ptr().cast::<c_char>(), 256, self.raw)
            )?
        };
        let len = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
        Ok(DeviceName { bytes, len })
    }

    /// `cuDeviceGetUuid`: the device's 16-byte UUID.
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuDeviceGetUuid")]
    pub fn uuid(self) -> Result<[u8; 16]> {
        let cu = api()?;
        let mut uuid = cudadrv_sys::CUuuid { bytes: [0; 16] };
        // SAFETY: `uuid` is a valid out-pointer.
        unsafe { drv!(cu, cuDeviceGetUuid(&mut uuid, self.raw))? };
        // `c_char` is `i8` on x86_64 and `u8` on aarch64: reinterpret the bytes either way.
        Ok(uuid.bytes.map(|b| u8::from_ne_bytes(b.to_ne_bytes())))
    }

    /// `cuDeviceTotalMem`: total device memory in bytes.
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuDeviceTotalMem")]
    pub fn total_memory(self) -> Result<usize> {
        let cu = api()?;
        let mut bytes = 0;
        // SAFETY: `bytes` is a valid out-pointer.
        unsafe { drv!(cu, cuDeviceTotalMem(&mut bytes, self.raw))? };
        Ok(bytes)
    }

    /// `cuDeviceGetAttribute`: one attribute's value.
    ///
    /// # Errors
    /// `CUDA_ERROR_INVALID_VALUE` for an attribute this driver does not know.
    #[doc(alias = "cuDeviceGetAttribute")]
    pub fn attribute(self, attr: CUdevice_attribute) -> Result<i32> {
        let cu = api()?;
        let mut v = 0;
        // SAFETY: `v` is a valid out-pointer.
        unsafe { drv!(cu, cuDeviceGetAttribute(&mut v, attr, self.raw))? };
        Ok(v)
    }

    fn attribute_u32(self, attr: CUdevice_attribute) -> Result<u32> {
        u32::try_from(self.attribute(attr)?)
            .map_err(|_| Error::InvalidArgument("cuDeviceGetAttribute returned a negative value"))
    }

    /// Compute capability `(major, minor)`: `(9, 0)` for Hopper
    /// (`cuDeviceGetAttribute` with `CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR`/`MINOR`).
    ///
    /// # Errors
    /// Driver errors.
    pub fn compute_capability(self) -> Result<(i32, i32)> {
        Ok((
            self.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            self.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        ))
    }

    /// Number of streaming multiprocessors (`CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT`).
    ///
    /// # Errors
    /// Driver errors.
    pub fn multiprocessor_count(self) -> Result<u32> {
        self.attribute_u32(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
    }

    /// Most threads in a block (`CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK`).
    ///
    /// # Errors
    /// Driver errors.
    pub fn max_threads_per_block(self) -> Result<u32> {
        self.attribute_u32(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)
    }

    /// Most shared memory a block can opt into, in bytes
    /// (`CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN`; see
    /// [`Function::set_max_dynamic_shared_size_bytes`](crate::Function::set_max_dynamic_shared_size_bytes)).
    ///
    /// # Errors
    /// Driver errors.
    pub fn max_shared_memory_per_block_optin(self) -> Result<u32> {
        self.attribute_u32(
            CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
        )
    }

    /// Whether the device launches thread block clusters (`CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH`).
    ///
    /// # Errors
    /// Driver errors.
    pub fn supports_cluster_launch(self) -> Result<bool> {
        Ok(self.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH)? != 0)
    }

    /// Whether the device supports cooperative launches
    /// (`CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH`).
    ///
    /// # Errors
    /// Driver errors.
    pub fn supports_cooperative_launch(self) -> Result<bool> {
        Ok(self.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH)? != 0)
    }

    /// Whether the device supports stream-ordered allocation and memory pools
    /// (`CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED`).
    ///
    /// # Errors
    /// Driver errors.
    pub fn supports_memory_pools(self) -> Result<bool> {
        Ok(self.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED)? != 0)
    }
}
