//! What the driver knows about an address (`cuPointerGetAttributes`): for checking a
//! pointer handed over by another library (a framework's tensor, a DLPack capsule)
//! before making a view of it: which device and context it belongs to, what kind of
//! memory it is, and the allocation it lies in.

use core::ffi::c_void;
use core::ptr;

use cudadrv_sys::{CUcontext, CUdeviceptr, CUmemorytype, CUpointer_attribute as P};

use super::managed::MemoryKind;
use crate::driver::api;
use crate::error::{Result, drv};

/// The driver's answer about one address ([`pointer_info`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PointerInfo {
    /// The kind of memory ([`MemoryKind::Unknown`] for an address the driver does not
    /// know: ordinary host memory, or nothing).
    pub kind: MemoryKind,
    /// The context the memory was allocated in (null for memory of no context, such as
    /// memory from a pool or VMM, and for unknown addresses).
    pub context: CUcontext,
    /// The ordinal of the device the memory belongs to (`-1` when unknown).
    pub device_ordinal: i32,
    /// The first address of the allocation the address lies in (0 when unknown).
    pub range_start: CUdeviceptr,
    /// The allocation's size in bytes (0 when unknown).
    pub range_bytes: usize,
}

impl PointerInfo {
    /// Whether `bytes` bytes from `ptr` lie inside the allocation described.
    #[must_use]
    pub fn contains(&self, ptr: CUdeviceptr, bytes: usize) -> bool {
        let Some(end) = self.range_start.checked_add(self.range_bytes as u64) else {
            return false;
        };
        self.range_bytes != 0
            && ptr >= self.range_start
            && ptr
                .checked_add(bytes as u64)
                .is_some_and(|last| last <= end)
    }
}

/// `cuPointerGetAttributes`: what the driver knows about `ptr` (any address: an unknown
/// one is answered, not refused). Needs no current context.
///
/// # Errors
/// Loader or driver errors.
#[doc(alias = "cuPointerGetAttributes")]
#[doc(alias = "cuMemGetAddressRange")]
pub fn pointer_info(ptr: CUdeviceptr) -> Result<PointerInfo> {
    let cu = api()?;
    let mut context: CUcontext = ptr::null_mut();
    let mut ordinal: i32 = -1;
    let mut memory_type: u32 = 0;
    let mut managed: u32 = 0;
    let mut start: CUdeviceptr = 0;
    let mut bytes: usize = 0;
    let mut attrs = [
        P::CU_POINTER_ATTRIBUTE_CONTEXT,
        P::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
        P::CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
        P::CU_POINTER_ATTRIBUTE_IS_MANAGED,
        P::CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
        P::CU_POINTER_ATTRIBUTE_RANGE_SIZE,
    ];
    let mut data: [*mut c_void; 6] = [
        ptr::from_mut(&mut context).cast(),
        ptr::from_mut(&mut ordinal).cast(),
        ptr::from_mut(&mut memory_type).cast(),
        ptr::from_mut(&mut managed).cast(),
        ptr::from_mut(&mut start).cast(),
        ptr::from_mut(&mut bytes).cast(),
    ];
    // SAFETY: six attributes, six out-pointers of their types (a CUcontext, an int, an
    // unsigned int, a bool as unsigned int, a CUdeviceptr, a size_t); the address is only
    // looked up.
    unsafe {
        drv!(
            cu,
            cuPointerGetAttributes(
                attrs.len() as u32,
                attrs.as_mut_ptr(),
                data.as_mut_ptr(),
                ptr
            )
        )?
    };
    let kind = if managed != 0 {
        MemoryKind::Managed
    } else if memory_type == CUmemorytype::CU_MEMORYTYPE_DEVICE.0 {
        MemoryKind::Device
    } else if memory_type == CUmemorytype::CU_MEMORYTYPE_HOST.0 {
        MemoryKind::Host
    } else {
        MemoryKind::Unknown
    };
    Ok(PointerInfo {
        kind,
        context,
        device_ordinal: if kind == MemoryKind::Unknown {
            -1
        } else {
            ordinal
        },
        range_start: start,
        range_bytes: bytes,
    })
}
