//! Virtual memory management (Programming Guide 4.16; driver API "Virtual Memory
//! Management"): physical allocations, reserved address ranges, mappings, and a
//! [`GrowableBuffer`] whose pointer never moves.
//!
//! - [`PhysicalMemory`]: `cuMemCreate` of pinned device memory on the context's device,
//!   released on drop (`cuMemRelease`). Releasing the handle while the memory is mapped
//!   is allowed: the driver frees the memory after its last mapping is gone, so dropping
//!   a `PhysicalMemory` never invalidates a mapping.
//! - [`VirtualRange`]: `cuMemAddressReserve`, freed on drop (`cuMemAddressFree`).
//! - [`Mapping`]: `cuMemMap` + `cuMemSetAccess` of physical memory into a range,
//!   unmapped on drop (`cuMemUnmap`). A mapping borrows its range, so the range cannot be
//!   freed while something is mapped in it (a compile error, not a driver error).
//! - [`granularity`]: the minimum or recommended size and alignment of all of the above.
//! - [`GrowableBuffer`]: reserves a large range once and maps physical chunks on demand;
//!   growing only adds mappings after the mapped part, so the pointer stays the same and
//!   kernels running on the mapped part are unaffected.
//!
//! Sizes must be multiples of the granularity (checked before the driver call, with
//! [`Error::InvalidArgument`]). Device access is read/write for the context's device.

use super::device_memory::device_memory;
use core::marker::PhantomData;

use cudadrv_sys::{
    CUdeviceptr, CUmemAccess_flags, CUmemAccessDesc, CUmemAllocationGranularity_flags,
    CUmemAllocationHandleType, CUmemAllocationProp, CUmemAllocationType,
    CUmemGenericAllocationHandle,
};

use super::{Pod, byte_len};
use crate::driver::dropping;
use crate::error::{drv, enter_for_drop};
use crate::{Context, Error, Result};

/// The allocation properties of pinned device memory on `ctx`'s device, exportable as
/// `handle_types` (`CU_MEM_HANDLE_TYPE_NONE`: not exportable).
fn device_prop(ctx: &Context, handle_types: CUmemAllocationHandleType) -> CUmemAllocationProp {
    CUmemAllocationProp {
        type_: CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED,
        requestedHandleTypes: handle_types,
        location: super::managed::Location::Device(ctx.device()).as_raw(),
        ..CUmemAllocationProp::default()
    }
}

/// Which granularity [`granularity`] reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Granularity {
    /// `CU_MEM_ALLOC_GRANULARITY_MINIMUM`: what sizes and alignments must be multiples of.
    Minimum,
    /// `CU_MEM_ALLOC_GRANULARITY_RECOMMENDED`: what performs best.
    Recommended,
}

/// `cuMemGetAllocationGranularity` for pinned device memory on `ctx`'s device (2 MiB on
/// an H100, both kinds).
///
/// # Errors
/// Driver errors.
#[doc(alias = "cuMemGetAllocationGranularity")]
pub fn granularity(ctx: &Context, kind: Granularity) -> Result<usize> {
    let g = ctx.enter()?;
    let prop = device_prop(ctx, CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_NONE);
    let option = match kind {
        Granularity::Minimum => CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_MINIMUM,
        Granularity::Recommended => {
            CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_RECOMMENDED
        }
    };
    let mut size = 0usize;
    // SAFETY: valid pointers; the context is current.
    unsafe {
        drv!(
            g.cu,
            cuMemGetAllocationGranularity(&mut size, &prop, option)
        )?
    };
    Ok(size)
}

/// `Ok` when `bytes` is a non-zero multiple of `gran`, else the error naming `what`.
pub(crate) fn check_multiple(bytes: usize, gran: usize, what: &'static str) -> Result<()> {
    if bytes == 0 || gran == 0 || bytes % gran != 0 {
        Err(Error::InvalidArgument(what))
    } else {
        Ok(())
    }
}

/// `bytes` rounded up to a multiple of `gran` (a power of two or any non-zero size), or
/// an error on overflow.
pub(crate) fn round_up(bytes: usize, gran: usize) -> Result<usize> {
    let overflow = Error::InvalidArgument("size rounded up to the granularity overflows usize");
    if gran == 0 {
        return Err(overflow);
    }
    bytes.div_ceil(gran).checked_mul(gran).ok_or(overflow)
}

/// Physical device memory (`cuMemCreate`), released on drop (`cuMemRelease`; the memory
/// itself lives on while mapped).
pub struct PhysicalMemory {
    handle: CUmemGenericAllocationHandle,
    bytes: usize,
    ctx: Context,
}

// SAFETY: the handle is a plain value usable from any thread; calls bind the context.
unsafe impl Send for PhysicalMemory {}
// SAFETY: `&self` methods only read the handle.
unsafe impl Sync for PhysicalMemory {}

impl PhysicalMemory {
    /// `cuMemCreate` of `bytes` bytes of pinned memory on `ctx`'s device.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] unless `bytes` is a non-zero multiple of the minimum
    /// [`granularity`]; driver errors (`CUDA_ERROR_OUT_OF_MEMORY`).
    #[doc(alias = "cuMemCreate")]
    pub fn new(ctx: &Context, bytes: usize) -> Result<Self> {
        Self::create(
            ctx,
            bytes,
            CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_NONE,
        )
    }

    /// `cuMemCreate` as [`new`](Self::new), with `requestedHandleTypes` set to
    /// `CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR`: the memory can be exported to other
    /// processes as a file descriptor
    /// ([`export_fd`](Self::export_fd), [`import_fd`](Self::import_fd); see
    /// [`crate::memory::ipc`]).
    ///
    /// # Errors
    /// As [`new`](Self::new); `CUDA_ERROR_NOT_SUPPORTED` on a device without
    /// `CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED`.
    #[doc(alias = "cuMemCreate")]
    pub fn new_exportable(ctx: &Context, bytes: usize) -> Result<Self> {
        Self::create(
            ctx,
            bytes,
            CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
        )
    }

    /// `cuMemCreate` of `bytes` (checked against the granularity) with `handle_types`.
    fn create(
        ctx: &Context,
        bytes: usize,
        handle_types: CUmemAllocationHandleType,
    ) -> Result<Self> {
        let gran = granularity(ctx, Granularity::Minimum)?;
        check_multiple(
            bytes,
            gran,
            "cuMemCreate: size must be a non-zero multiple of the allocation granularity",
        )?;
        let g = ctx.enter()?;
        let prop = device_prop(ctx, handle_types);
        let mut handle = 0;
        // SAFETY: valid pointers; the context is current.
        unsafe { drv!(g.cu, cuMemCreate(&mut handle, bytes, &prop, 0))? };
        Ok(Self {
            handle,
            bytes,
            ctx: ctx.clone(),
        })
    }

    /// `cuMemRetainAllocationHandle`: the physical memory mapped at `ptr` (any address in
    /// a mapping), as a new handle that is released on drop.
    ///
    /// # Errors
    /// Driver errors (`CUDA_ERROR_INVALID_VALUE` for an address no mapping covers).
    #[doc(alias = "cuMemRetainAllocationHandle")]
    pub fn retain(ctx: &Context, ptr: CUdeviceptr) -> Result<Self> {
        let g = ctx.enter()?;
        let mut handle = 0;
        // SAFETY: valid out-pointer; the address is only looked up.
        unsafe {
            drv!(
                g.cu,
                cuMemRetainAllocationHandle(&mut handle, ptr as *mut core::ffi::c_void)
            )?
        };
        Ok(Self {
            handle,
            bytes: 0,
            ctx: ctx.clone(),
        })
    }

    /// Takes ownership of a handle of `bytes` bytes (0 when unknown) that `ctx`'s
    /// context made current when it was obtained; released on drop.
    #[cfg(all(feature = "std", target_os = "linux"))]
    pub(crate) fn from_owned_handle(
        ctx: &Context,
        handle: CUmemGenericAllocationHandle,
        bytes: usize,
    ) -> Self {
        Self {
            handle,
            bytes,
            ctx: ctx.clone(),
        }
    }

    /// The context the handle was made in.
    #[must_use]
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// The raw `CUmemGenericAllocationHandle`.
    #[must_use]
    pub fn as_raw(&self) -> CUmemGenericAllocationHandle {
        self.handle
    }

    /// Its size in bytes (0 for a handle from [`retain`](Self::retain), whose size the
    /// driver does not report).
    #[must_use]
    pub fn size_bytes(&self) -> usize {
        self.bytes
    }
}

impl Drop for PhysicalMemory {
    /// `cuMemRelease`; mappings of the memory stay valid until unmapped.
    fn drop(&mut self) {
        let _g = enter_for_drop!(self.ctx);
        // SAFETY: our handle, released once; the driver keeps mapped memory alive.
        unsafe { dropping!(cuMemRelease(self.handle)) };
    }
}

/// A reserved virtual address range (`cuMemAddressReserve`), freed on drop
/// (`cuMemAddressFree`). [`Mapping`]s borrow it.
///
/// ```
/// # fn f(ctx: &cudadrv::Context) -> cudadrv::Result<()> {
/// use cudadrv::memory::vmm::{Granularity, PhysicalMemory, VirtualRange, granularity};
/// let gran = granularity(ctx, Granularity::Minimum)?;
/// let range = VirtualRange::reserve(ctx, 4 * gran)?;
/// let mem = PhysicalMemory::new(ctx, gran)?;
/// let mapping = range.map(gran, &mem)?;
/// drop(mem); // the mapping keeps the memory
/// drop(mapping); // unmapped
/// # Ok(()) }
/// ```
///
/// The range cannot be freed while something is mapped in it:
///
/// ```compile_fail,E0505
/// # fn f(ctx: &cudadrv::Context) -> cudadrv::Result<()> {
/// use cudadrv::memory::vmm::{PhysicalMemory, VirtualRange};
/// let range = VirtualRange::reserve(ctx, 2 << 20)?;
/// let mem = PhysicalMemory::new(ctx, 2 << 20)?;
/// let mapping = range.map(0, &mem)?;
/// drop(range);
/// drop(mapping);
/// # Ok(()) }
/// ```
pub struct VirtualRange {
    base: CUdeviceptr,
    bytes: usize,
    ctx: Context,
}

// SAFETY: an address range is a plain value; calls bind the context.
unsafe impl Send for VirtualRange {}
// SAFETY: `&self` methods only read it (mapping into it goes through the driver, which
// serializes).
unsafe impl Sync for VirtualRange {}

impl VirtualRange {
    /// `cuMemAddressReserve` of `bytes` bytes (a multiple of the minimum
    /// [`granularity`]), aligned to the granularity.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a size that is not a non-zero multiple of the
    /// granularity; driver errors.
    #[doc(alias = "cuMemAddressReserve")]
    pub fn reserve(ctx: &Context, bytes: usize) -> Result<Self> {
        let gran = granularity(ctx, Granularity::Minimum)?;
        check_multiple(
            bytes,
            gran,
            "cuMemAddressReserve: size must be a non-zero multiple of the allocation granularity",
        )?;
        let g = ctx.enter()?;
        let mut base = 0;
        // SAFETY: valid out-pointer; no fixed address requested.
        unsafe { drv!(g.cu, cuMemAddressReserve(&mut base, bytes, gran, 0, 0))? };
        Ok(Self {
            base,
            bytes,
            ctx: ctx.clone(),
        })
    }

    /// The first address of the range.
    #[must_use]
    pub fn base(&self) -> CUdeviceptr {
        self.base
    }

    /// Its size in bytes.
    #[must_use]
    pub fn size_bytes(&self) -> usize {
        self.bytes
    }

    /// `cuMemMap` of all of `mem` at byte `offset` of the range, then `cuMemSetAccess`
    /// read/write for the context's device; unmapped when the [`Mapping`] drops.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `offset` is not a multiple of the granularity or
    /// `mem` does not fit; driver errors (`CUDA_ERROR_INVALID_VALUE` when part of the
    /// span is mapped already).
    #[doc(alias = "cuMemMap")]
    #[doc(alias = "cuMemSetAccess")]
    pub fn map(&self, offset: usize, mem: &PhysicalMemory) -> Result<Mapping<'_>> {
        let gran = granularity(&self.ctx, Granularity::Minimum)?;
        if offset % gran != 0 {
            return Err(Error::InvalidArgument(
                "cuMemMap: offset must be a multiple of the allocation granularity",
            ));
        }
        let bytes = mem.bytes;
        if bytes == 0 || offset.checked_add(bytes).is_none_or(|end| end > self.bytes) {
            return Err(Error::InvalidArgument(
                "cuMemMap: the physical memory does not fit the range at this offset",
            ));
        }
        let g = self.ctx.enter()?;
        let ptr = self.base + offset as u64;
        // SAFETY: the span lies inside our reservation; the handle is live.
        unsafe { drv!(g.cu, cuMemMap(ptr, bytes, 0, mem.handle, 0))? };
        let mapping = Mapping {
            ptr,
            bytes,
            range: self,
        };
        set_access(&self.ctx, g.cu, ptr, bytes)?;
        Ok(mapping)
    }
}

/// `cuMemSetAccess`: read/write for `ctx`'s device on `[ptr, ptr + bytes)`.
fn set_access(
    ctx: &Context,
    cu: &cudadrv_sys::DriverApi,
    ptr: CUdeviceptr,
    bytes: usize,
) -> Result<()> {
    let desc = CUmemAccessDesc {
        location: super::managed::Location::Device(ctx.device()).as_raw(),
        flags: CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
    };
    // SAFETY: a mapped span; one valid descriptor.
    unsafe { drv!(cu, cuMemSetAccess(ptr, bytes, &desc, 1)) }
}

impl Drop for VirtualRange {
    /// `cuMemAddressFree` (no mapping is left: each borrows the range).
    fn drop(&mut self) {
        let _g = enter_for_drop!(self.ctx);
        // SAFETY: our reservation, freed once, with nothing mapped in it.
        unsafe { dropping!(cuMemAddressFree(self.base, self.bytes)) };
    }
}

/// Physical memory mapped into a [`VirtualRange`] with device access; unmapped on drop
/// (`cuMemUnmap`). Borrows its range, so the range outlives it.
pub struct Mapping<'r> {
    ptr: CUdeviceptr,
    bytes: usize,
    range: &'r VirtualRange,
}

device_memory!(bytes impl['r] Mapping<'r>, |m| ptr: m.ptr, bytes: m.bytes);

impl Drop for Mapping<'_> {
    /// `cuMemUnmap`.
    fn drop(&mut self) {
        let _g = enter_for_drop!(self.range.ctx);
        // SAFETY: exactly the span we mapped, unmapped once.
        unsafe { dropping!(cuMemUnmap(self.ptr, self.bytes)) };
    }
}

/// A device buffer that grows in place: one address range reserved for `max_len`
/// elements, physical chunks mapped on demand. The pointer never changes, and growing
/// only maps memory after the part already mapped, so kernels running on the mapped part
/// are not affected by a grow.
///
/// Each chunk is a separate `cuMemCreate` of `chunk_bytes` (a multiple of the
/// granularity); its handle is released right after mapping (the mapping keeps the
/// memory). Dropping the buffer unmaps every chunk and frees the range; like
/// [`DeviceBuffer`](super::DeviceBuffer), work still using it must have completed.
pub struct GrowableBuffer<T> {
    range: VirtualRange,
    chunk_bytes: usize,
    mapped_chunks: usize,
    _t: PhantomData<T>,
}

device_memory!(
    owner impl[T: Pod] GrowableBuffer<T>,
    T, |b|
    ptr: b.range.base,
    len: b.mapped_chunks * b.chunk_bytes / size_of::<T>().max(1),
    context: &b.range.ctx,
    release: crate::memory::view::Release::Unordered,
);

impl<T: Pod> GrowableBuffer<T> {
    /// Reserves room for `max_len` elements, mapping nothing yet. `chunk_bytes` is the
    /// unit of growth, rounded up to the recommended granularity (`0` means one
    /// granule).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for `max_len == 0` or a size overflow; driver errors.
    pub fn new(ctx: &Context, max_len: usize, chunk_bytes: usize) -> Result<Self> {
        let gran = granularity(ctx, Granularity::Recommended)?;
        let chunk = round_up(chunk_bytes.max(1), gran)?;
        let bytes = byte_len::<T>(max_len)?;
        if bytes == 0 {
            return Err(Error::InvalidArgument(
                "GrowableBuffer: max_len must not be 0",
            ));
        }
        let reserved = round_up(bytes, chunk)?;
        Ok(Self {
            range: VirtualRange::reserve(ctx, reserved)?,
            chunk_bytes: chunk,
            mapped_chunks: 0,
            _t: PhantomData,
        })
    }

    /// Maps chunks until at least `len` elements are backed. Never unmaps, never moves.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] beyond the reservation; driver errors
    /// (`CUDA_ERROR_OUT_OF_MEMORY`), after which the chunks mapped so far stay mapped.
    pub fn grow_to(&mut self, len: usize) -> Result<()> {
        let bytes = byte_len::<T>(len)?;
        if bytes > self.range.bytes {
            return Err(Error::InvalidArgument(
                "GrowableBuffer::grow_to: beyond the reserved range",
            ));
        }
        let want = bytes.div_ceil(self.chunk_bytes);
        while self.mapped_chunks < want {
            let mem = PhysicalMemory::new(&self.range.ctx, self.chunk_bytes)?;
            let mapping = self
                .range
                .map(self.mapped_chunks * self.chunk_bytes, &mem)?;
            // Kept mapped until `Drop` unmaps it by its offset.
            core::mem::forget(mapping);
            self.mapped_chunks += 1;
        }
        Ok(())
    }

    /// Elements the reservation can hold.
    #[must_use]
    pub fn max_len(&self) -> usize {
        self.range.bytes / core::mem::size_of::<T>().max(1)
    }

    /// The bytes of one chunk.
    #[must_use]
    pub fn chunk_bytes(&self) -> usize {
        self.chunk_bytes
    }

    /// `cuMemcpyHtoD` of `src` to elements `offset..offset + src.len()`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] outside the mapped part; driver errors.
    pub fn copy_from_host(&mut self, offset: usize, src: &[T]) -> Result<()> {
        let (dst, bytes) = self.span(offset, src.len())?;
        let g = self.range.ctx.enter()?;
        // SAFETY: the span is mapped (checked) and `src` holds `bytes` bytes.
        unsafe { drv!(g.cu, cuMemcpyHtoD(dst, src.as_ptr().cast(), bytes)) }
    }

    /// `cuMemcpyDtoH` of elements `offset..offset + dst.len()` into `dst`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] outside the mapped part; driver errors.
    pub fn copy_to_host(&self, offset: usize, dst: &mut [T]) -> Result<()> {
        let (src, bytes) = self.span(offset, dst.len())?;
        let g = self.range.ctx.enter()?;
        // SAFETY: the span is mapped (checked); `dst` holds `bytes` bytes and `T: Pod`
        // takes any bytes.
        unsafe { drv!(g.cu, cuMemcpyDtoH(dst.as_mut_ptr().cast(), src, bytes)) }
    }

    /// The address and byte size of elements `offset..offset + len`, if mapped.
    fn span(&self, offset: usize, len: usize) -> Result<(CUdeviceptr, usize)> {
        let end = offset.checked_add(len);
        if end.is_none_or(|e| e > self.len()) {
            return Err(Error::InvalidArgument(
                "GrowableBuffer copy: outside the mapped part",
            ));
        }
        Ok((
            self.range.base + byte_len::<T>(offset)? as u64,
            byte_len::<T>(len)?,
        ))
    }
}

impl<T> Drop for GrowableBuffer<T> {
    /// `cuMemUnmap` of every chunk (the range is freed after, by its own drop).
    fn drop(&mut self) {
        let _g = enter_for_drop!(self.range.ctx);
        for i in 0..self.mapped_chunks {
            let ptr = self.range.base + (i * self.chunk_bytes) as u64;
            // SAFETY: chunk `i` was mapped by `grow_to` at exactly this span and is
            // unmapped once.
            unsafe { dropping!(cuMemUnmap(ptr, self.chunk_bytes)) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_must_be_granule_multiples() {
        const MIB2: usize = 2 << 20;
        assert!(check_multiple(MIB2, MIB2, "x").is_ok());
        assert!(check_multiple(3 * MIB2, MIB2, "x").is_ok());
        assert!(check_multiple(0, MIB2, "x").is_err());
        assert!(check_multiple(MIB2 + 1, MIB2, "x").is_err());
        assert!(check_multiple(MIB2, 0, "x").is_err());
    }

    #[test]
    fn rounding_up() {
        assert_eq!(round_up(1, 4096).unwrap(), 4096);
        assert_eq!(round_up(4096, 4096).unwrap(), 4096);
        assert_eq!(round_up(4097, 4096).unwrap(), 8192);
        assert!(round_up(usize::MAX, 4096).is_err());
        assert!(round_up(1, 0).is_err());
    }
}
