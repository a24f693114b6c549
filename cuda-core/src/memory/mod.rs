//! Memory management (driver API sections "Memory Management" and "Stream Ordered
//! Memory Allocator"): device buffers, pinned host buffers, stream-ordered allocations
//! and memory pools, with synchronous and asynchronous copies and memsets.
//!
//! - [`DeviceBuffer`]: `cuMemAlloc` / `cuMemFree`, copies and memsets.
//! - [`DeviceMemory`]: what every typed device memory kind shares (address, length,
//!   context, size, kernel argument, views), for code generic over them.
//! - [`dlpack`]: tensors to and from other frameworks through the DLPack C ABI.
//! - [`pointer_info`]: what the driver knows about an address (device, context, kind,
//!   allocation range), to check memory another library hands over.
//! - [`view`]: [`DeviceView`] and [`DeviceViewMut`], borrowed views of part or all of
//!   any of them (and of memory made elsewhere, from raw parts), usable wherever a
//!   buffer is.
//! - [`PinnedHostBuffer`]: `cuMemAllocHost` / `cuMemFreeHost`, the host side of
//!   asynchronous copies; `cuMemHostAlloc` with [`HostAllocFlags`] for portable, mapped
//!   (zero-copy, [`PinnedHostBuffer::device_ptr`]) and write-combined memory.
//! - [`AsyncDeviceBuffer`]: `cuMemAllocAsync` / `cuMemFreeAsync`, ordered on a stream.
//! - [`MemPool`]: `cuMemPoolCreate`, attributes, the device's default pool.
//! - [`registered`]: page-locked registration of host memory the program owns
//!   ([`HostRegistration`](registered::HostRegistration), `cuMemHostRegister`), with
//!   safe asynchronous copies.
//! - [`batch`] (with `alloc`): many copies in one `cuMemcpyBatchAsync`.
//! - [`l2`]: the persisting-L2 set-aside, access-policy windows and other stream
//!   attributes.
//! - [`managed`]: unified memory ([`ManagedBuffer`], `cuMemAllocManaged`), prefetches,
//!   advice, range attributes, stream attachment, and the device's [`MemoryModel`].
//!
//! Sizes are checked (`len * size_of::<T>()` overflows into an error, never a panic);
//! zero-length buffers allocate nothing. Allocation failure is an
//! [`Error`] with `CUDA_ERROR_OUT_OF_MEMORY`.
//!
//! # Unsafe policy
//! Reading device bytes back into `T` needs every bit pattern to be a valid `T`: that is
//! the [`Pod`] contract. Asynchronous copies between host and device are `unsafe`: the
//! host memory must stay valid until the stream reaches the copy, which borrows cannot
//! express.

#[cfg(feature = "alloc")]
pub mod batch;
mod device_buffer;
pub(crate) mod device_memory;
pub mod dlpack;
#[cfg(all(feature = "std", target_os = "linux"))]
pub mod ipc;
pub mod l2;
pub mod managed;
pub mod peer;
mod pinned;
mod pointer;
mod pool;
pub mod registered;
pub mod view;
pub mod vmm;

pub use device_buffer::DeviceBuffer;
pub use device_memory::DeviceMemory;
pub use device_memory::DevicePtr;
pub use managed::{ManagedBuffer, MemoryKind, MemoryModel, SingleStream};
pub use pinned::{HostAllocFlags, PinnedHostBuffer};
pub use pointer::{PointerInfo, pointer_info};
pub use pool::{AsyncDeviceBuffer, MemPool};
pub use view::{DeviceView, DeviceViewMut, Release};
#[cfg(feature = "graph")]
pub(crate) use view::{memset_d8, memset_d32};
pub use vmm::GrowableBuffer;

use crate::error::{Error, Result};
use cudadrv_sys::{CUmemLocation, CUmemLocation_st__bindgen_ty_1, CUmemLocationType};

/// A `CUmemLocation` of a type and an id. Since CUDA 13.2 the id shares an anonymous
/// union with the `localized` form (a location type this crate does not build), so the
/// struct is not written with a plain `id` field any more.
pub(crate) const fn raw_location(type_: CUmemLocationType, id: i32) -> CUmemLocation {
    CUmemLocation {
        type_,
        __bindgen_anon_1: CUmemLocation_st__bindgen_ty_1 { id },
    }
}

/// The id of a raw location (the union's `id` member): the device ordinal or NUMA node.
#[must_use]
pub fn location_id(loc: &CUmemLocation) -> i32 {
    // SAFETY: every member of the union is made of C integers (`id`, and `localized`'s
    // integer fields) and the union is always initialized in full (built by
    // `raw_location`, zeroed by `Default`, or written by the driver), so its first four
    // bytes are an initialized `int` whatever member was written last.
    unsafe { loc.__bindgen_anon_1.id }
}

/// Plain data: every bit pattern of `size_of::<Self>()` bytes is a valid value, so bytes
/// copied from the device (or zeroes) can be read as `Self`.
///
/// # Safety
/// Implement only for types without invalid bit patterns, padding, references or
/// pointers with provenance requirements (integers, floats, arrays and `repr(C)`
/// structs of them without padding).
pub unsafe trait Pod: Copy + 'static {}

macro_rules! pod {
    ($($t:ty),*) => {$(
        // SAFETY: every bit pattern is a valid value of this integer/float type.
        unsafe impl Pod for $t {}
    )*};
}
pod!(
    u8, i8, u16, i16, u32, i32, u64, i64, u128, i128, usize, isize, f32, f64
);

// SAFETY: an array of Pod values has no padding and no invalid bit patterns.
unsafe impl<T: Pod, const N: usize> Pod for [T; N] {}

// SAFETY: `Bf16` is a `repr(transparent)` `u16`: every bit pattern is a value.
unsafe impl Pod for crate::args::Bf16 {}

macro_rules! pod_vector {
    ($($t:ident),*) => {$(
        // SAFETY: the CUDA vector types are `repr(C)` structs of one scalar type whose
        // size equals the sum of their components (checked in `args::vector`): no padding.
        unsafe impl Pod for crate::args::$t {}
    )*};
}
pod_vector!(
    Char2, Char4, UChar2, UChar4, Short2, Short4, UShort2, UShort4, Int2, Int3, Int4, UInt2, UInt3,
    UInt4, LongLong2, ULongLong2, Float2, Float3, Float4, Double2
);

/// `len * size_of::<T>()`, or an error on overflow.
pub(crate) fn byte_len<T>(len: usize) -> Result<usize> {
    len.checked_mul(core::mem::size_of::<T>())
        .ok_or(Error::InvalidArgument(
            "buffer size in bytes overflows usize",
        ))
}

/// [`Error::LengthMismatch`] unless the copy's lengths agree: `expected` is the length
/// of the buffer the call copies into or out of (the destination of a two-buffer copy),
/// `found` that of the other side.
pub(crate) fn same_len(expected: usize, found: usize) -> Result<()> {
    if expected == found {
        Ok(())
    } else {
        Err(Error::LengthMismatch { expected, found })
    }
}
