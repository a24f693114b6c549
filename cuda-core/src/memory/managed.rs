//! Unified (managed) memory (Programming Guide 2.4 and 4.1): [`ManagedBuffer`]
//! (`cuMemAllocManaged`), where a page lives ([`Location`]), prefetches, advice and range
//! attributes, stream attachment, and the device attributes that say which memory model
//! applies ([`MemoryModel`]).
//!
//! # Host access
//! Managed memory is reachable from the host and the device through the same address.
//! A Rust `&[T]` or `&mut [T]` over it must never coexist with device work that may
//! touch the same bytes (a data race, and on a device without concurrent managed access
//! a fault of the host thread). The rule here:
//! - [`ManagedBuffer::host`] and [`ManagedBuffer::host_mut`] take the buffer `&mut`, so
//!   no kernel argument ([`as_arg`](ManagedBuffer::as_arg), which borrows it shared),
//!   graph node or safe asynchronous call naming it can be made while the slice lives;
//! - and they synchronize the buffer's context first (`cuCtxSynchronize`), so work queued
//!   before, on any stream of the context, has finished. Kernels that use the buffer
//!   must be launched in its context (the `unsafe` launch contract covers launches
//!   elsewhere, like any other pointer a kernel is given).
//!
//! That rule is the guide's section 4.1.2 for devices *with* concurrent managed access
//! (the H100 and H200 report 1). On a device *without* it, the host may touch no managed
//! memory while any kernel of the device runs, including kernels that never name the
//! buffer, and no borrow of this buffer can keep those away: there the safe views are
//! refused ([`Error::InvalidArgument`]), and host access is the `unsafe`
//! [`host_unchecked`](ManagedBuffer::host_unchecked), whose caller keeps every kernel of
//! the device away. [`MemoryModel::concurrent_managed_access`] tells which model a
//! device has. The synchronization costs a context round trip: `host_unchecked` also
//! skips it for callers that know the device is done.
//!
//! Prefetches and advice are hints: they move or describe pages, never change their
//! contents, so they take the buffer shared.
//!
//! Work that borrows the buffer (a copy batch, a graph) keeps host views out while it
//! lives:
//!
//! ```compile_fail,E0499
//! # fn f(ctx: &cudadrv::Context) -> cudadrv::Result<()> {
//! use cudadrv::DeviceBuffer;
//! use cudadrv::memory::batch::CopyBatch;
//! use cudadrv::memory::managed::{Attach, ManagedBuffer};
//! let mut managed = ManagedBuffer::<u32>::new(ctx, 64, Attach::Global)?;
//! let src = DeviceBuffer::<u32>::new(ctx, 64)?;
//! let mut batch = CopyBatch::new();
//! batch.copy(&mut managed, &src)?;
//! managed.host_mut()?.fill(0); // error: the batch borrows `managed`
//! # drop(batch); Ok(()) }
//! ```

use super::device_memory::device_memory;
use core::marker::PhantomData;

use cudadrv_sys::{
    CUdeviceptr, CUmem_advise, CUmem_range_attribute, CUmemLocation, CUmemLocationType,
};

use super::{DeviceView, DeviceViewMut, Pod, Release, byte_len};
use crate::Device;
use crate::driver::context::Context;
use crate::driver::dropping;
use crate::driver::stream::Stream;
use crate::error::{Error, Result, drv};

/// Where memory lives, is prefetched to, or is advised about (`CUmemLocation`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Location {
    /// A device's memory (`CU_MEM_LOCATION_TYPE_DEVICE`).
    Device(Device),
    /// Host memory (`CU_MEM_LOCATION_TYPE_HOST`).
    Host,
    /// Host memory of a NUMA node (`CU_MEM_LOCATION_TYPE_HOST_NUMA`).
    HostNuma(i32),
    /// Host memory of the calling thread's NUMA node
    /// (`CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT`).
    HostNumaCurrent,
}

impl Location {
    /// The raw `CUmemLocation`.
    #[must_use]
    pub fn as_raw(self) -> CUmemLocation {
        let (type_, id) = match self {
            Self::Device(d) => (CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE, d.as_raw()),
            Self::Host => (CUmemLocationType::CU_MEM_LOCATION_TYPE_HOST, 0),
            Self::HostNuma(node) => (CUmemLocationType::CU_MEM_LOCATION_TYPE_HOST_NUMA, node),
            Self::HostNumaCurrent => (CUmemLocationType::CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT, 0),
        };
        super::raw_location(type_, id)
    }

    /// The location a raw type and id name, or `None` for "no location"
    /// (`CU_MEM_LOCATION_TYPE_INVALID`, a range without one) and types this crate does
    /// not know.
    #[must_use]
    pub fn from_raw(type_: CUmemLocationType, id: i32) -> Option<Self> {
        match type_ {
            CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE => {
                Some(Self::Device(Device::from_raw(id)))
            }
            CUmemLocationType::CU_MEM_LOCATION_TYPE_HOST => Some(Self::Host),
            CUmemLocationType::CU_MEM_LOCATION_TYPE_HOST_NUMA => Some(Self::HostNuma(id)),
            CUmemLocationType::CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT => {
                Some(Self::HostNumaCurrent)
            }
            _ => None,
        }
    }
}

/// Which streams may access a managed allocation (`CUmemAttach_flags`), for
/// [`ManagedBuffer::new`] and [`ManagedBuffer::attach`]. Attaching to one stream
/// (`CU_MEM_ATTACH_SINGLE`) is [`ManagedBuffer::attach_single`], whose guard scopes the
/// host's access to that stream; an allocation cannot be made attached to one:
///
/// ```compile_fail,E0599
/// # fn f(ctx: &cudadrv::Context) -> cudadrv::Result<()> {
/// use cudadrv::memory::managed::Attach;
/// let buf = cudadrv::ManagedBuffer::<u32>::new(ctx, 256, Attach::Single)?; // no such variant
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Attach {
    /// `CU_MEM_ATTACH_GLOBAL`: any stream of any device.
    Global,
    /// `CU_MEM_ATTACH_HOST`: the host; device access only where the device has
    /// concurrent managed access (on others the memory is not visible to kernels).
    Host,
}

impl Attach {
    fn flags(self) -> u32 {
        use cudadrv_sys::CUmemAttach_flags as F;
        match self {
            Self::Global => F::CU_MEM_ATTACH_GLOBAL.0,
            Self::Host => F::CU_MEM_ATTACH_HOST.0,
        }
    }
}

/// A usage hint for a managed range (`cuMemAdvise`, `CUmem_advise`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Advice {
    /// `CU_MEM_ADVISE_SET_READ_MOSTLY`: mostly read; readers get their own copies.
    ReadMostly,
    /// `CU_MEM_ADVISE_UNSET_READ_MOSTLY`.
    UnsetReadMostly,
    /// `CU_MEM_ADVISE_SET_PREFERRED_LOCATION`: keep the pages at this location.
    PreferredLocation(Location),
    /// `CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION`.
    UnsetPreferredLocation,
    /// `CU_MEM_ADVISE_SET_ACCESSED_BY`: keep the pages mapped for this location.
    AccessedBy(Location),
    /// `CU_MEM_ADVISE_UNSET_ACCESSED_BY`.
    UnsetAccessedBy(Location),
}

impl Advice {
    fn raw(self) -> (CUmem_advise, CUmemLocation) {
        let none = Location::Host.as_raw();
        match self {
            Self::ReadMostly => (CUmem_advise::CU_MEM_ADVISE_SET_READ_MOSTLY, none),
            Self::UnsetReadMostly => (CUmem_advise::CU_MEM_ADVISE_UNSET_READ_MOSTLY, none),
            Self::PreferredLocation(l) => (
                CUmem_advise::CU_MEM_ADVISE_SET_PREFERRED_LOCATION,
                l.as_raw(),
            ),
            Self::UnsetPreferredLocation => {
                (CUmem_advise::CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION, none)
            }
            Self::AccessedBy(l) => (CUmem_advise::CU_MEM_ADVISE_SET_ACCESSED_BY, l.as_raw()),
            Self::UnsetAccessedBy(l) => (CUmem_advise::CU_MEM_ADVISE_UNSET_ACCESSED_BY, l.as_raw()),
        }
    }
}

/// The device attributes that decide which memory model applies (Programming Guide
/// 2.4 and 4.1.1), read together by [`MemoryModel::of`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct MemoryModel {
    /// `CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY`: managed memory can be allocated.
    pub managed_memory: bool,
    /// `CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS`: host and device may access
    /// managed memory at the same time (pages migrate on demand).
    pub concurrent_managed_access: bool,
    /// `CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS`: kernels may access ordinary
    /// (system-allocated, pageable) host memory, such as a `Vec`.
    pub pageable_memory_access: bool,
    /// `CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES`: through the
    /// host's page tables (hardware coherence, as on Grace Hopper).
    pub pageable_uses_host_page_tables: bool,
    /// `CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED`: atomics between host and
    /// device are native.
    pub host_native_atomics: bool,
    /// `CU_DEVICE_ATTRIBUTE_DIRECT_MANAGED_MEM_ACCESS_FROM_HOST`: the host accesses
    /// device-resident managed memory directly, without migrating it.
    pub direct_managed_access_from_host: bool,
    /// `CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED`: `cuMemHostRegister` works.
    pub host_register: bool,
    /// `CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED`: with the read-only flag.
    pub host_register_read_only: bool,
}

impl MemoryModel {
    /// Reads the attributes of `device` (`cuDeviceGetAttribute`, one call each).
    ///
    /// # Errors
    /// Driver errors.
    pub fn of(device: Device) -> Result<Self> {
        use cudadrv_sys::CUdevice_attribute as A;
        let on = |a: A| device.attribute(a).map(|v| v != 0);
        Ok(Self {
            managed_memory: on(A::CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY)?,
            concurrent_managed_access: on(A::CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS)?,
            pageable_memory_access: on(A::CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS)?,
            pageable_uses_host_page_tables: on(
                A::CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES,
            )?,
            host_native_atomics: on(A::CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED)?,
            direct_managed_access_from_host: on(
                A::CU_DEVICE_ATTRIBUTE_DIRECT_MANAGED_MEM_ACCESS_FROM_HOST,
            )?,
            host_register: on(A::CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED)?,
            host_register_read_only: on(A::CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED)?,
        })
    }

    /// Whether kernels may read and write system-allocated memory (a `Vec`): pageable
    /// memory access. Where it is `false`, a kernel given such a pointer faults; use
    /// managed, registered or pinned memory instead.
    #[must_use]
    pub fn system_memory_usable(&self) -> bool {
        self.pageable_memory_access
    }
}

/// `len` values of `T` in managed memory (`cuMemAllocManaged`), freed on drop
/// (`cuMemFree`, which waits for the pending work of its own context). It keeps its
/// [`Context`] alive. See the [module docs](self) for the host-access rule.
///
/// ```no_run
/// # fn main() -> cudadrv::Result<()> {
/// use cudadrv::{Context, Device, Stream};
/// use cudadrv::memory::managed::{Attach, Location, ManagedBuffer};
/// let dev = Device::get(0)?;
/// let ctx = Context::primary(dev)?;
/// let stream = Stream::non_blocking(&ctx)?;
/// let mut buf = ManagedBuffer::<u32>::new(&ctx, 1 << 20, Attach::Global)?;
/// buf.host_mut()?.fill(7); // the CPU writes it
/// buf.prefetch(Location::Device(dev), &stream)?; // move it before the kernel needs it
/// // ... launch kernels with buf.as_arg() on `stream` ...
/// buf.prefetch(Location::Host, &stream)?;
/// assert!(buf.host()?.iter().all(|&v| v == 7)); // synchronizes first
/// # Ok(()) }
/// ```
pub struct ManagedBuffer<T: Copy> {
    ptr: CUdeviceptr,
    len: usize,
    ctx: Context,
    _t: PhantomData<T>,
}

// SAFETY: managed memory is reachable from any thread; host access goes through `&mut
// self` after a synchronization, and `T: Send` values move with it.
unsafe impl<T: Copy + Send> Send for ManagedBuffer<T> {}
// SAFETY: `&ManagedBuffer` only passes the address on (kernel arguments, hints) or reads
// attributes through driver calls.
unsafe impl<T: Copy + Sync> Sync for ManagedBuffer<T> {}

device_memory!(owner impl[T: Copy] ManagedBuffer<T>, T, |b| ptr: b.ptr, len: b.len, context: &b.ctx,
    release: crate::memory::view::Release::Context,
);

impl<T: Copy> core::fmt::Debug for ManagedBuffer<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ManagedBuffer")
            .field("ptr", &format_args!("{:#x}", self.ptr))
            .field("len", &self.len)
            .finish()
    }
}

impl<T: Copy> ManagedBuffer<T> {
    /// `cuMemAllocManaged`: room for `len` values, attached `Global` (any stream) or
    /// `Host`; contents zero (the driver hands out zeroed pages; not promised for
    /// `T` without [`Pod`], which [`host`](Self::host) needs anyway).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for `len == 0` or a size in bytes that overflows;
    /// driver errors (`CUDA_ERROR_NOT_SUPPORTED` without managed memory,
    /// `CUDA_ERROR_OUT_OF_MEMORY`).
    #[doc(alias = "cuMemAllocManaged")]
    #[doc(alias = "cudaMallocManaged")]
    pub fn new(ctx: &Context, len: usize, attach: Attach) -> Result<Self> {
        if len == 0 || core::mem::size_of::<T>() == 0 {
            return Err(Error::InvalidArgument(
                "a managed allocation needs at least one byte",
            ));
        }
        let bytes = byte_len::<T>(len)?;
        let g = ctx.enter()?;
        let mut ptr = 0;
        // SAFETY: valid out-pointer, a valid flag; the context is current.
        unsafe { drv!(g.cu, cuMemAllocManaged(&mut ptr, bytes, attach.flags()))? };
        Ok(Self {
            ptr,
            len,
            ctx: ctx.clone(),
            _t: PhantomData,
        })
    }

    /// The values, read by the host, after synchronizing the buffer's context
    /// (`cuCtxSynchronize`) so that no work queued before is still running.
    ///
    /// Only on a device with concurrent managed access
    /// ([`MemoryModel::concurrent_managed_access`]): on a device without it, the host
    /// may touch no managed memory while *any* kernel of the device runs (Programming
    /// Guide 4.1.2), and a kernel launched while the slice lives (one that never names
    /// this buffer included) would fault the host thread on a live `&[T]`. No borrow can
    /// keep unrelated launches away, so the view is refused there; such a device's host
    /// access is the `unsafe` [`host_unchecked`](Self::host_unchecked), under the
    /// guide's rule.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] on a device without concurrent managed access; driver
    /// errors of the synchronization (including earlier asynchronous work's).
    #[doc(alias = "cuCtxSynchronize")]
    pub fn host(&mut self) -> Result<&[T]>
    where
        T: Pod,
    {
        self.ensure_concurrent_access()?;
        self.ctx.synchronize()?;
        // SAFETY: the context's work has finished and `&mut self` keeps new work naming
        // the buffer from being made while the slice lives (see the module docs).
        Ok(unsafe { self.host_unchecked() })
    }

    /// The values, for the host to write, after synchronizing the buffer's context;
    /// only on a device with concurrent managed access, as [`host`](Self::host).
    ///
    /// # Errors
    /// As [`host`](Self::host).
    pub fn host_mut(&mut self) -> Result<&mut [T]>
    where
        T: Pod,
    {
        self.ensure_concurrent_access()?;
        self.ctx.synchronize()?;
        // SAFETY: as in `host`; `&mut self` makes the slice unique.
        Ok(unsafe { core::slice::from_raw_parts_mut(self.host_ptr(), self.len) })
    }

    /// Refuses host views on a device without concurrent managed access (see
    /// [`host`](Self::host)).
    fn ensure_concurrent_access(&self) -> Result<()> {
        let attr = cudadrv_sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS;
        if self.ctx.device().attribute(attr)? == 0 {
            return Err(Error::InvalidArgument(
                "ManagedBuffer::host/host_mut: the device has no concurrent managed access, \
                 so any kernel launched while a host view lives would fault it; use \
                 host_unchecked with no kernel of the device running",
            ));
        }
        Ok(())
    }

    /// The values, read by the host, without synchronizing.
    ///
    /// # Safety
    /// No device work that writes the buffer may run while the slice lives, and on a
    /// device without concurrent managed access no kernel of the device may run at all.
    #[must_use]
    pub unsafe fn host_unchecked(&self) -> &[T]
    where
        T: Pod,
    {
        // SAFETY: `len` values of `T` at `ptr`, allocated with that size and alignment
        // (managed allocations are at least 256-byte aligned); any bytes are a valid `T`
        // (`Pod`); the caller keeps device writers away.
        unsafe { core::slice::from_raw_parts(self.host_ptr().cast_const(), self.len) }
    }

    /// The address as a host pointer. Managed memory is one address space for host and
    /// device; the driver handed the address out, so it carries the provenance the
    /// driver exposed for it.
    fn host_ptr(&self) -> *mut T {
        core::ptr::with_exposed_provenance_mut(self.ptr as usize)
    }

    /// `cuMemPrefetchAsync`: migrates the pages to `to` in order on `stream`, a stream of
    /// the buffer's context.
    ///
    /// # Errors
    /// [`Error::ContextMismatch`] for a stream of another context; driver errors
    /// (`CUDA_ERROR_INVALID_DEVICE` for a device without concurrent managed access).
    #[doc(alias = "cuMemPrefetchAsync")]
    #[doc(alias = "cudaMemPrefetchAsync")]
    pub fn prefetch(&self, to: Location, stream: &Stream) -> Result<()> {
        let q = stream.queue_capturable(&self.ctx, "cuMemPrefetchAsync")?;
        // SAFETY: the range is this allocation; a prefetch moves pages, never changes
        // their contents; live stream of the buffer's context (whose `cuMemFree` waits
        // for it); the context is current.
        unsafe {
            drv!(
                q.cu,
                cuMemPrefetchAsync(self.ptr, self.size_bytes(), to.as_raw(), 0, q.stream)
            )
        }
    }

    /// `cuMemAdvise`: a usage hint for the whole buffer.
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuMemAdvise")]
    #[doc(alias = "cudaMemAdvise")]
    pub fn advise(&self, advice: Advice) -> Result<()> {
        let (raw, loc) = advice.raw();
        let g = self.ctx.enter()?;
        // SAFETY: the range is this allocation; advice changes no contents.
        unsafe { drv!(g.cu, cuMemAdvise(self.ptr, self.size_bytes(), raw, loc)) }
    }

    /// `cuStreamAttachMemAsync`: which streams may access the buffer from now on in
    /// `stream`'s order (the whole allocation).
    ///
    /// # Errors
    /// [`Error::ContextMismatch`] for a stream of another context; driver errors.
    #[doc(alias = "cuStreamAttachMemAsync")]
    #[doc(alias = "cudaStreamAttachMemAsync")]
    pub fn attach(&self, stream: &Stream, attach: Attach) -> Result<()> {
        let q = stream.queue_capturable(&self.ctx, "cuStreamAttachMemAsync")?;
        // SAFETY: live stream; the whole allocation (length 0 means all of it); changes
        // visibility, never contents.
        unsafe {
            drv!(
                q.cu,
                cuStreamAttachMemAsync(q.stream, self.ptr, 0, attach.flags())
            )
        }
    }

    /// `cuStreamAttachMemAsync(CU_MEM_ATTACH_SINGLE)`: the buffer belongs to `stream`
    /// until the guard drops (which attaches it `Global` again, in `stream`'s order), and
    /// the host may touch it whenever `stream` has finished its work
    /// ([`SingleStream::host`] synchronizes that stream only, Programming Guide 4.1.2.3):
    /// the guide's pattern of one stream per host thread, each reading its own results
    /// while other streams keep running.
    ///
    /// Work queued before the call, on any stream, is waited for once here
    /// (`cuCtxSynchronize`); while the guard lives the buffer is reached only through it
    /// (its views take asynchronous work on `stream` alone).
    ///
    /// # Errors
    /// [`Error::ContextMismatch`] for a stream of another context;
    /// [`Error::StreamCapturing`] while `stream` is being captured; driver errors.
    #[doc(alias = "cuStreamAttachMemAsync")]
    #[doc(alias = "cudaStreamAttachMemAsync")]
    pub fn attach_single<'b, 's>(
        &'b mut self,
        stream: &'s Stream,
    ) -> Result<SingleStream<'b, 's, T>> {
        const CALL: &str = "cuStreamAttachMemAsync";
        self.ctx.ensure_same(stream.context(), CALL)?;
        self.ctx.synchronize()?;
        let q = stream.queue(&self.ctx, CALL)?;
        // SAFETY: live stream of the buffer's context; the whole allocation (length 0);
        // changes visibility, never contents.
        unsafe {
            drv!(
                q.cu,
                cuStreamAttachMemAsync(
                    q.stream,
                    self.ptr,
                    0,
                    cudadrv_sys::CUmemAttach_flags::CU_MEM_ATTACH_SINGLE.0
                )
            )?
        };
        Ok(SingleStream { buf: self, stream })
    }

    /// `cuMemRangeGetAttribute(CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY)`.
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuMemRangeGetAttribute")]
    pub fn is_read_mostly(&self) -> Result<bool> {
        Ok(self.range_i32(CUmem_range_attribute::CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY)? != 0)
    }

    /// The preferred location (`CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE` and
    /// `_ID`), `None` when there is none (or the pages disagree).
    ///
    /// # Errors
    /// Driver errors.
    pub fn preferred_location(&self) -> Result<Option<Location>> {
        use CUmem_range_attribute as R;
        self.location(
            R::CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE,
            R::CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID,
        )
    }

    /// Where the pages were last prefetched to
    /// (`CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE` and `_ID`), `None` when
    /// never (or the pages disagree).
    ///
    /// # Errors
    /// Driver errors.
    pub fn last_prefetch_location(&self) -> Result<Option<Location>> {
        use CUmem_range_attribute as R;
        self.location(
            R::CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE,
            R::CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_ID,
        )
    }

    /// The devices advised [`Advice::AccessedBy`] (`CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY`):
    /// fills `devices` with up to its length of them and returns how many there are
    /// (at most `devices.len()`: the driver reports no total).
    ///
    /// # Errors
    /// Driver errors.
    pub fn accessed_by(&self, devices: &mut [Device]) -> Result<usize> {
        const MAX: usize = 32;
        let mut raw = [-2i32; MAX];
        let n = devices.len().min(MAX);
        if n == 0 {
            return Ok(0);
        }
        let g = self.ctx.enter()?;
        // SAFETY: `raw` holds `n` 4-byte entries; the range is this allocation.
        unsafe {
            drv!(
                g.cu,
                cuMemRangeGetAttribute(
                    raw.as_mut_ptr().cast(),
                    n * 4,
                    CUmem_range_attribute::CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY,
                    self.ptr,
                    self.size_bytes()
                )
            )?
        };
        // Unused entries are CU_DEVICE_INVALID (-2); the host is CU_DEVICE_CPU (-1).
        let mut count = 0;
        for &d in raw[..n].iter().filter(|&&d| d >= 0) {
            devices[count] = Device::from_raw(d);
            count += 1;
        }
        Ok(count)
    }

    fn range_i32(&self, attr: CUmem_range_attribute) -> Result<i32> {
        let mut v = 0i32;
        let g = self.ctx.enter()?;
        // SAFETY: a 4-byte out value for a 4-byte attribute; the range is this allocation.
        unsafe {
            drv!(
                g.cu,
                cuMemRangeGetAttribute((&raw mut v).cast(), 4, attr, self.ptr, self.size_bytes())
            )?
        };
        Ok(v)
    }

    fn location(
        &self,
        kind: CUmem_range_attribute,
        id: CUmem_range_attribute,
    ) -> Result<Option<Location>> {
        let t = self.range_i32(kind)?;
        let id = self.range_i32(id)?;
        Ok(Location::from_raw(CUmemLocationType(t as u32), id))
    }
}

#[cfg(feature = "graph")]
impl<'a> crate::graph::Capturing<'_, 'a> {
    /// `cuMemPrefetchAsync`, captured: a prefetch of `buf` to `to` at every launch of
    /// the graph, which borrows `buf` for `'a`.
    ///
    /// Driver 580 (CUDA 13.0) does not capture prefetches: it returns
    /// `CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED` and invalidates the capture (checked on
    /// the H100 by `hw_memory`); the call is here for drivers that do.
    ///
    /// # Errors
    /// [`Error::ContextMismatch`] for a buffer of another context than the capture's
    /// stream; driver errors (`CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED` where the driver
    /// cannot capture prefetches).
    #[doc(alias = "cuMemPrefetchAsync")]
    pub fn prefetch<T: Copy>(&self, buf: &'a ManagedBuffer<T>, to: Location) -> Result<()> {
        let stream = self.stream();
        let q = stream.queue_capturable(&buf.ctx, "cuMemPrefetchAsync")?;
        // SAFETY: the range is `buf`'s allocation, borrowed for `'a` (as long as the
        // graph); a prefetch moves pages, never changes their contents; the context is
        // current.
        unsafe {
            drv!(
                q.cu,
                cuMemPrefetchAsync(buf.ptr, buf.size_bytes(), to.as_raw(), 0, q.stream)
            )
        }
    }
}

/// A [`ManagedBuffer`] attached to one stream ([`ManagedBuffer::attach_single`]): the
/// host reads and writes it once that stream is idle, without waiting for the rest of
/// the context. Dropping it attaches the buffer `Global` again (in the stream's order);
/// forgetting it leaves the buffer attached to the stream, whose next host view then
/// synchronizes the whole context as usual.
pub struct SingleStream<'b, 's, T: Copy> {
    buf: &'b mut ManagedBuffer<T>,
    stream: &'s Stream,
}

impl<T: Copy> core::fmt::Debug for SingleStream<'_, '_, T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SingleStream")
            .field("buf", &self.buf)
            .field("stream", &self.stream.as_raw())
            .finish()
    }
}

impl<T: Copy> SingleStream<'_, '_, T> {
    /// The stream the buffer is attached to.
    #[must_use]
    pub fn stream(&self) -> &Stream {
        self.stream
    }

    /// A shared view of the buffer: asynchronous work through it goes on the attached
    /// stream only (the others may not touch the memory).
    #[must_use]
    pub fn view(&self) -> DeviceView<'_, T> {
        // SAFETY: the buffer's allocation, borrowed through the guard; work through the
        // view is ordered on the attached stream, which `host` synchronizes.
        unsafe {
            DeviceView::new(
                self.buf.ptr,
                self.buf.len,
                &self.buf.ctx,
                Release::Stream(self.stream.as_raw()),
            )
        }
    }

    /// An exclusive view of the buffer, its asynchronous work on the attached stream.
    #[must_use]
    pub fn view_mut(&mut self) -> DeviceViewMut<'_, T> {
        // SAFETY: as in `view`, borrowed exclusively.
        unsafe {
            DeviceViewMut::new(
                self.buf.ptr,
                self.buf.len,
                &self.buf.ctx,
                Release::Stream(self.stream.as_raw()),
            )
        }
    }

    /// The values, read by the host, after `cuStreamSynchronize` of the attached stream.
    ///
    /// # Errors
    /// Driver errors of the synchronization (including the stream's earlier work's).
    #[doc(alias = "cuStreamSynchronize")]
    pub fn host(&mut self) -> Result<&[T]>
    where
        T: Pod,
    {
        self.stream.synchronize()?;
        // SAFETY: only the attached stream's work may touch the buffer (other streams'
        // work was waited for when it was attached, and every view since orders its work
        // on this stream), and that stream has finished; `&mut self` keeps new work away
        // while the slice lives. Host access to memory attached to an idle stream is
        // allowed with or without concurrent managed access.
        Ok(unsafe { self.buf.host_unchecked() })
    }

    /// The values, for the host to write, after synchronizing the attached stream.
    ///
    /// # Errors
    /// As [`host`](Self::host).
    pub fn host_mut(&mut self) -> Result<&mut [T]>
    where
        T: Pod,
    {
        self.stream.synchronize()?;
        // SAFETY: as in `host`; `&mut self` makes the slice unique.
        Ok(unsafe { core::slice::from_raw_parts_mut(self.buf.host_ptr(), self.buf.len) })
    }
}

impl<T: Copy> Drop for SingleStream<'_, '_, T> {
    /// `cuStreamAttachMemAsync(CU_MEM_ATTACH_GLOBAL)` on the attached stream; a failure
    /// goes to the drop-error sink.
    fn drop(&mut self) {
        let _g = crate::error::enter_for_drop!(self.buf.ctx);
        // SAFETY: live stream of the buffer's context; the whole allocation; changes
        // visibility, never contents.
        unsafe {
            dropping!(cuStreamAttachMemAsync(
                self.stream.as_raw(),
                self.buf.ptr,
                0,
                cudadrv_sys::CUmemAttach_flags::CU_MEM_ATTACH_GLOBAL.0
            ))
        };
    }
}

impl<T: Copy> Drop for ManagedBuffer<T> {
    /// `cuMemFree`; a failure goes to the drop-error sink.
    fn drop(&mut self) {
        let _g = crate::error::enter_for_drop!(self.ctx);
        // SAFETY: the allocation is ours and nothing borrows it any more; safe calls
        // queue work on it only on streams of its own context, and `cuMemFree` waits for
        // the pending work of its own context; the context is current.
        unsafe { dropping!(cuMemFree(self.ptr)) };
    }
}

/// What kind of memory an address is (`cuPointerGetAttribute`: `IS_MANAGED` and
/// `MEMORY_TYPE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MemoryKind {
    /// Managed memory (`cuMemAllocManaged`).
    Managed,
    /// Device memory (`cuMemAlloc`, pools, VMM).
    Device,
    /// Page-locked host memory (`cuMemAllocHost`, `cuMemHostAlloc`, registered ranges).
    Host,
    /// An address the driver does not know (ordinary host memory, or none).
    Unknown,
}

/// `cuPointerGetAttribute`: the kind of memory at `ptr`.
///
/// # Errors
/// Driver errors other than `CUDA_ERROR_INVALID_VALUE` (an address the driver does not
/// know is [`MemoryKind::Unknown`]).
#[doc(alias = "cuPointerGetAttribute")]
pub fn memory_kind(ptr: CUdeviceptr) -> Result<MemoryKind> {
    use cudadrv_sys::{CUmemorytype, CUpointer_attribute as P, CUresult};
    let cu = crate::driver::api()?;
    let get = cu.cuPointerGetAttribute()?;
    let mut managed = 0u32;
    // SAFETY: a 4-byte out value for IS_MANAGED (a bool as unsigned int); any address.
    let rc = unsafe {
        get(
            (&raw mut managed).cast(),
            P::CU_POINTER_ATTRIBUTE_IS_MANAGED,
            ptr,
        )
    };
    match rc {
        CUresult::CUDA_SUCCESS => {}
        CUresult::CUDA_ERROR_INVALID_VALUE => return Ok(MemoryKind::Unknown),
        code => return Err(Error::driver("cuPointerGetAttribute", code)),
    }
    if managed != 0 {
        return Ok(MemoryKind::Managed);
    }
    let mut t = 0u32;
    // SAFETY: a 4-byte out value for MEMORY_TYPE (a CUmemorytype).
    let rc = unsafe {
        get(
            (&raw mut t).cast(),
            P::CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
            ptr,
        )
    };
    crate::error::call(rc, "cuPointerGetAttribute")?;
    Ok(match CUmemorytype(t) {
        CUmemorytype::CU_MEMORYTYPE_DEVICE => MemoryKind::Device,
        CUmemorytype::CU_MEMORYTYPE_HOST => MemoryKind::Host,
        _ => MemoryKind::Unknown,
    })
}
