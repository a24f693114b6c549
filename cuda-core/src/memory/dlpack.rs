//! DLPack: tensors exchanged with other frameworks (PyTorch, CuPy, JAX, ...) through the
//! DLPack C ABI (v1.x structs, no Python dependency).
//!
//! - Import: a producer's `DLManagedTensorVersioned` (or the older `DLManagedTensor`)
//!   becomes a [`DlpackTensor`], which owns it (its deleter runs on drop) and hands out
//!   [`DeviceView`]s / [`DeviceViewMut`]s of its values after checking device, element
//!   type, contiguity, alignment and the read-only flag.
//! - Export: [`export()`] moves a [`DeviceBuffer`](crate::DeviceBuffer) into a `DLManagedTensorVersioned` whose
//!   deleter frees it (feature `alloc`), without blocking the host.
//!
//! # The stream handshake
//! DLPack orders the producer's work before the consumer's by a stream the consumer
//! names (`__dlpack__(stream=...)` in Python: `1` the legacy default stream, `2` the
//! per-thread default stream, `-1` no synchronization, other values a `cudaStream_t`):
//! the producer makes that stream wait for its pending work on the tensor, with an
//! event, before handing the tensor over. On import the consumer's stream is the one
//! given to [`DlpackTensor::from_versioned`]: the views take asynchronous work on that
//! stream only, and dropping the tensor synchronizes it before the deleter runs, so the
//! producer may reuse the memory (PyTorch's caching allocator does, in its stream's
//! order) only after this crate's work on it is done. On export, [`export()`] records an
//! event after the buffer's work on `producer` and makes the consumer's stream wait.

use core::ffi::c_void;
use core::ptr::NonNull;

use cudadrv_sys::CUdeviceptr;

use super::{DeviceView, DeviceViewMut, Release};
use crate::driver::context::Context;
use crate::driver::stream::Stream;
use crate::error::{Error, Result};

/// `DLDeviceType`: where a tensor lives.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DLDeviceType(pub i32);

impl DLDeviceType {
    /// `kDLCPU`.
    pub const CPU: Self = Self(1);
    /// `kDLCUDA`: device memory.
    pub const CUDA: Self = Self(2);
    /// `kDLCUDAHost`: page-locked host memory.
    pub const CUDA_HOST: Self = Self(3);
    /// `kDLCUDAManaged`: managed memory.
    pub const CUDA_MANAGED: Self = Self(13);
}

/// `DLDevice`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DLDevice {
    /// The kind of device.
    pub device_type: DLDeviceType,
    /// The device's ordinal (the CUDA device ordinal for CUDA memory).
    pub device_id: i32,
}

/// `DLDataType`: `lanes` values of `bits` bits of kind `code`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DLDataType {
    /// `kDLInt` 0, `kDLUInt` 1, `kDLFloat` 2, `kDLBfloat` 4, `kDLBool` 6, ...
    pub code: u8,
    /// Bits per value.
    pub bits: u8,
    /// Values per element (1 for scalars).
    pub lanes: u16,
}

/// `DLTensor`: a strided view of memory.
#[repr(C)]
#[derive(Debug)]
pub struct DLTensor {
    /// The allocation's address (device address for CUDA memory).
    pub data: *mut c_void,
    /// Where it lives.
    pub device: DLDevice,
    /// Number of dimensions.
    pub ndim: i32,
    /// Element type.
    pub dtype: DLDataType,
    /// `ndim` extents.
    pub shape: *mut i64,
    /// `ndim` strides in elements, or null for a compact row-major tensor.
    pub strides: *mut i64,
    /// Bytes from `data` to the first element.
    pub byte_offset: u64,
}

/// `DLManagedTensor` (DLPack before 1.0).
#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensor {
    /// The tensor.
    pub dl_tensor: DLTensor,
    /// The producer's state.
    pub manager_ctx: *mut c_void,
    /// Called by the consumer once it no longer needs the tensor.
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}

/// `DLPackVersion`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DLPackVersion {
    /// Major version (1).
    pub major: u32,
    /// Minor version.
    pub minor: u32,
}

/// The DLPack version these structs follow.
pub const DLPACK_VERSION: DLPackVersion = DLPackVersion { major: 1, minor: 1 };
/// `DLPACK_FLAG_BITMASK_READ_ONLY`: the consumer must not write the tensor.
pub const DLPACK_FLAG_BITMASK_READ_ONLY: u64 = 1;
/// `DLPACK_FLAG_BITMASK_IS_COPIED`: the producer copied the data for the export.
pub const DLPACK_FLAG_BITMASK_IS_COPIED: u64 = 1 << 1;

/// `DLManagedTensorVersioned` (DLPack 1.0 and later).
#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensorVersioned {
    /// The DLPack version of the producer.
    pub version: DLPackVersion,
    /// The producer's state.
    pub manager_ctx: *mut c_void,
    /// Called by the consumer once it no longer needs the tensor.
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensorVersioned)>,
    /// `DLPACK_FLAG_BITMASK_*`.
    pub flags: u64,
    /// The tensor.
    pub dl_tensor: DLTensor,
}

/// An element type with a DLPack data type (sealed).
pub trait DlElement: Copy + sealed::Sealed {
    /// Its `DLDataType`.
    const DTYPE: DLDataType;
}

mod sealed {
    pub trait Sealed {}
}

macro_rules! dl_element {
    ($($t:ty => $code:literal),* $(,)?) => {$(
        impl sealed::Sealed for $t {}
        impl DlElement for $t {
            const DTYPE: DLDataType = DLDataType {
                code: $code,
                bits: (size_of::<$t>() * 8) as u8,
                lanes: 1,
            };
        }
    )*};
}
dl_element!(
    i8 => 0, i16 => 0, i32 => 0, i64 => 0,
    u8 => 1, u16 => 1, u32 => 1, u64 => 1,
    f32 => 2, f64 => 2,
);

/// The owned tensor behind a [`DlpackTensor`]: the versioned or the older struct.
#[derive(Debug)]
enum Managed {
    Versioned(NonNull<DLManagedTensorVersioned>),
    Legacy(NonNull<DLManagedTensor>),
}

/// A tensor imported from another framework through DLPack: owns the producer's
/// managed tensor (its deleter runs when this drops, after the consumer stream has
/// finished the work queued through the views), and gives views of its values.
#[derive(Debug)]
pub struct DlpackTensor<'s> {
    managed: Managed,
    ctx: Context,
    stream: &'s Stream,
    /// The first element's address.
    ptr: CUdeviceptr,
    /// Values in the tensor (the product of the shape).
    count: usize,
    read_only: bool,
}

// SAFETY: the tensor is owned (the producer handed it over); its deleter may run on any
// thread (DLPack requires it to be callable from the consumer's threads).
unsafe impl Send for DlpackTensor<'_> {}
// SAFETY: `&DlpackTensor` only reads the struct and hands out shared views.
unsafe impl Sync for DlpackTensor<'_> {}

impl<'s> DlpackTensor<'s> {
    /// Takes over a `DLManagedTensorVersioned` that a producer exported for this
    /// consumer, whose work is ordered on `stream` (the stream passed to the producer's
    /// export, see the [module docs](self)). Checks the tensor's major version, that it is
    /// CUDA memory (device or managed) of `ctx`'s device, compact (no strides, or
    /// row-major ones) and of a size that fits.
    ///
    /// # Safety
    /// `raw` must be a valid, unconsumed `DLManagedTensorVersioned` whose tensor memory
    /// stays allocated until its deleter is called, whose memory is `ctx`'s (or
    /// accessible from it), and whose producer's pending writes are ordered before
    /// `stream` (the handshake). Ownership passes to the result: nothing else may call the
    /// deleter. On an error the deleter is called (the tensor is consumed either way).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the check that failed.
    pub unsafe fn from_versioned(
        raw: *mut DLManagedTensorVersioned,
        ctx: &Context,
        stream: &'s Stream,
    ) -> Result<Self> {
        let Some(nn) = NonNull::new(raw) else {
            return Err(Error::InvalidArgument("DLPack: a null tensor"));
        };
        // SAFETY: a valid tensor (caller); read only.
        let (major, flags, tensor) = unsafe {
            let m = nn.as_ref();
            (m.version.major, m.flags, &m.dl_tensor)
        };
        let checked = if major != DLPACK_VERSION.major {
            Err(Error::InvalidArgument(
                "DLPack: a tensor of another major version",
            ))
        } else {
            // SAFETY: the tensor's shape and strides arrays are valid (caller).
            unsafe { check_tensor(tensor, ctx) }
        };
        let read_only = flags & DLPACK_FLAG_BITMASK_READ_ONLY != 0;
        // SAFETY: the caller hands the tensor over.
        unsafe { Self::adopt(Managed::Versioned(nn), checked, read_only, ctx, stream) }
    }

    /// [`from_versioned`](Self::from_versioned) for the older `DLManagedTensor` (no
    /// version, no flags: writable).
    ///
    /// # Safety
    /// As [`from_versioned`](Self::from_versioned).
    ///
    /// # Errors
    /// As [`from_versioned`](Self::from_versioned).
    pub unsafe fn from_legacy(
        raw: *mut DLManagedTensor,
        ctx: &Context,
        stream: &'s Stream,
    ) -> Result<Self> {
        let Some(nn) = NonNull::new(raw) else {
            return Err(Error::InvalidArgument("DLPack: a null tensor"));
        };
        // SAFETY: a valid tensor (caller); read only.
        let checked = unsafe { check_tensor(&nn.as_ref().dl_tensor, ctx) };
        // SAFETY: the caller hands the tensor over.
        unsafe { Self::adopt(Managed::Legacy(nn), checked, false, ctx, stream) }
    }

    /// The imported tensor, or (after a failed check) the error, the tensor released.
    ///
    /// # Safety
    /// `managed` is owned by the caller and not used again.
    unsafe fn adopt(
        managed: Managed,
        checked: Result<(CUdeviceptr, usize)>,
        read_only: bool,
        ctx: &Context,
        stream: &'s Stream,
    ) -> Result<Self> {
        match checked {
            Ok((ptr, count)) => Ok(Self {
                managed,
                ctx: ctx.clone(),
                stream,
                ptr,
                count,
                read_only,
            }),
            Err(e) => {
                // SAFETY: the tensor is ours (caller) and not used again.
                unsafe { release(&managed) };
                Err(e)
            }
        }
    }

    /// The tensor struct (shape, strides, data type, device).
    #[must_use]
    pub fn tensor(&self) -> &DLTensor {
        // SAFETY: owned and valid until the deleter runs in `drop`.
        unsafe {
            match &self.managed {
                Managed::Versioned(m) => &m.as_ref().dl_tensor,
                Managed::Legacy(m) => &m.as_ref().dl_tensor,
            }
        }
    }

    /// The extents.
    #[must_use]
    pub fn shape(&self) -> &[i64] {
        let t = self.tensor();
        let n = usize::try_from(t.ndim).unwrap_or(0);
        if n == 0 || t.shape.is_null() {
            return &[];
        }
        // SAFETY: `ndim` extents (checked at import), owned with the tensor.
        unsafe { core::slice::from_raw_parts(t.shape, n) }
    }

    /// Number of values (the product of the shape).
    #[must_use]
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether it holds no values.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Whether the producer marked it read-only (no [`view_mut`](Self::view_mut)).
    #[must_use]
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// The stream the handshake named: the views' asynchronous work goes there.
    #[must_use]
    pub fn stream(&self) -> &Stream {
        self.stream
    }

    /// The values as a shared view of `T`, which must be the tensor's data type.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for another data type or an address not aligned
    /// for `T`.
    pub fn view<T: DlElement>(&self) -> Result<DeviceView<'_, T>> {
        self.check_type::<T>()?;
        // SAFETY: `count` values of `T` at `ptr` (checked at import and here), owned
        // until `drop`, which first synchronizes `stream`, the only stream the view
        // lets asynchronous work go to.
        Ok(unsafe {
            DeviceView::new(
                self.ptr,
                self.count,
                &self.ctx,
                Release::Stream(self.stream.as_raw()),
            )
        })
    }

    /// The values as an exclusive view of `T`.
    ///
    /// # Errors
    /// As [`view`](Self::view), and [`Error::InvalidArgument`] for a read-only tensor.
    pub fn view_mut<T: DlElement>(&mut self) -> Result<DeviceViewMut<'_, T>> {
        if self.read_only {
            return Err(Error::InvalidArgument(
                "DLPack: the producer marked the tensor read-only",
            ));
        }
        self.check_type::<T>()?;
        // SAFETY: as in `view`, borrowed exclusively.
        Ok(unsafe {
            DeviceViewMut::new(
                self.ptr,
                self.count,
                &self.ctx,
                Release::Stream(self.stream.as_raw()),
            )
        })
    }

    fn check_type<T: DlElement>(&self) -> Result<()> {
        if self.tensor().dtype != T::DTYPE {
            return Err(Error::InvalidArgument(
                "DLPack: the view's element type is not the tensor's data type",
            ));
        }
        if self.ptr % align_of::<T>() as u64 != 0 {
            return Err(Error::InvalidArgument(
                "DLPack: the tensor's data is not aligned for its element type",
            ));
        }
        Ok(())
    }
}

impl Drop for DlpackTensor<'_> {
    /// Synchronizes the handshake stream (the work queued through the views), then calls
    /// the producer's deleter. A stream that is being captured (a capture the framework
    /// began after work was queued through the views) cannot be synchronized, and a
    /// failed synchronization cannot tell whether that work is done: in both cases the
    /// tensor is leaked instead of released (the memory may still be in use), reported
    /// to the drop-error sink.
    fn drop(&mut self) {
        if let Err(e) = self
            .stream
            .ensure_not_capturing("DlpackTensor::drop")
            .and_then(|()| self.stream.synchronize())
        {
            crate::error::report_drop_error(&e);
            return;
        }
        // SAFETY: owned, not used again; the work queued through the views has finished.
        unsafe { release(&self.managed) };
    }
}

/// Calls the tensor's deleter (if it has one).
///
/// # Safety
/// The tensor is owned by the caller and not used afterwards.
unsafe fn release(managed: &Managed) {
    // SAFETY: the caller's promise; DLPack deleters take the struct they belong to.
    unsafe {
        match *managed {
            Managed::Versioned(m) => {
                if let Some(d) = m.as_ref().deleter {
                    d(m.as_ptr());
                }
            }
            Managed::Legacy(m) => {
                if let Some(d) = m.as_ref().deleter {
                    d(m.as_ptr());
                }
            }
        }
    }
}

/// Checks an imported tensor: CUDA memory of `ctx`'s device, scalar lanes, a shape that
/// fits, compact row-major layout. Returns the first element's address and the count.
///
/// # Safety
/// `t.shape` and `t.strides` (when not null) point at `t.ndim` values.
unsafe fn check_tensor(t: &DLTensor, ctx: &Context) -> Result<(CUdeviceptr, usize)> {
    let bad = |m: &'static str| Err(Error::InvalidArgument(m));
    if t.device.device_type != DLDeviceType::CUDA
        && t.device.device_type != DLDeviceType::CUDA_MANAGED
    {
        return bad("DLPack: not CUDA device or managed memory");
    }
    if t.device.device_id != ctx.device().as_raw() {
        return bad("DLPack: a tensor of another device than the context's");
    }
    if t.dtype.lanes != 1 || t.dtype.bits == 0 || t.dtype.bits % 8 != 0 {
        return bad("DLPack: only scalar, whole-byte data types");
    }
    let Ok(ndim) = usize::try_from(t.ndim) else {
        return bad("DLPack: a negative ndim");
    };
    if ndim > 0 && t.shape.is_null() {
        return bad("DLPack: a null shape");
    }
    let shape: &[i64] = if ndim == 0 {
        &[]
    } else {
        // SAFETY: the caller's promise.
        unsafe { core::slice::from_raw_parts(t.shape, ndim) }
    };
    let mut count: usize = 1;
    for &d in shape {
        let Ok(d) = usize::try_from(d) else {
            return bad("DLPack: a negative extent");
        };
        let Some(c) = count.checked_mul(d) else {
            return bad("DLPack: the tensor's size overflows");
        };
        count = c;
    }
    if !t.strides.is_null() && ndim > 0 {
        // SAFETY: the caller's promise.
        let strides = unsafe { core::slice::from_raw_parts(t.strides, ndim) };
        let mut expect: i64 = 1;
        for (&d, &s) in shape.iter().zip(strides).rev() {
            if d != 1 && s != expect {
                return bad("DLPack: a strided (not compact row-major) tensor");
            }
            expect = expect.saturating_mul(d);
        }
    }
    let elem = usize::from(t.dtype.bits / 8);
    if count.checked_mul(elem).is_none() {
        return bad("DLPack: the tensor's size overflows");
    }
    let ptr = (t.data as u64).checked_add(t.byte_offset);
    match ptr {
        Some(p) if p != 0 || count == 0 => Ok((p, count)),
        _ => bad("DLPack: a null or overflowing data address"),
    }
}

#[cfg(feature = "alloc")]
pub use export::export;

#[cfg(feature = "alloc")]
mod export {
    use alloc::boxed::Box;
    use core::ffi::c_void;
    use core::ptr;

    use cudadrv_sys::CUstream;

    use super::{DLDevice, DLDeviceType, DLManagedTensorVersioned, DLTensor};
    use super::{DLPACK_VERSION, DlElement};
    use crate::driver::context::Context;
    use crate::driver::stream::Stream;
    use crate::error::{Error, Result};
    use crate::memory::DeviceBuffer;
    use crate::{Event, EventFlags};

    /// What an exported tensor's `manager_ctx` points at: the struct handed out, its
    /// shape, and the buffer it owns.
    #[repr(C)]
    struct Exported<T: Copy> {
        tensor: DLManagedTensorVersioned,
        shape: [i64; 1],
        buf: DeviceBuffer<T>,
    }

    /// The deleter of an exported tensor: frees the buffer (`cuMemFree` waits for the
    /// context's pending work, the consumer's included).
    unsafe extern "C" fn delete<T: Copy>(t: *mut DLManagedTensorVersioned) {
        if t.is_null() {
            return;
        }
        // SAFETY: `t` is the `tensor` field at the start of a boxed `Exported<T>`
        // (`repr(C)`, first field) made by `export`, called once by the consumer.
        drop(unsafe { Box::from_raw(t.cast::<Exported<T>>()) });
    }

    /// Moves `buf` into a one-dimensional `DLManagedTensorVersioned` for another
    /// framework (`torch.from_dlpack` of a capsule holding it, CuPy, JAX): the consumer
    /// owns it and calls its deleter, which frees the buffer. Does not block the host:
    /// when the consumer names a stream (`consumer`, see the module docs for the
    /// values), an event recorded after the buffer's work on `producer` is made to
    /// precede that stream's later work; `None` is DLPack's "no synchronization".
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a buffer of another context than its device's
    /// primary one (the deleter's free waits only for its own context's work, and a
    /// framework queues its work in the primary context);
    /// [`Error::ContextMismatch`] for a producer stream
    /// of another context; driver errors of the event (the buffer is then freed).
    pub fn export<T: DlElement>(
        buf: DeviceBuffer<T>,
        producer: &Stream,
        consumer: Option<CUstream>,
    ) -> Result<*mut DLManagedTensorVersioned> {
        // The deleter's `cuMemFree` waits for the pending work of the buffer's context
        // only: the consumer's work must be queued in that context, which for a
        // framework (PyTorch, CuPy, JAX) is the device's primary context.
        let primary = Context::retain_primary(buf.context().device())?;
        if primary.as_raw() != buf.context().as_raw() {
            return Err(Error::InvalidArgument(
                "DLPack export: a buffer of the device's primary context only (the \
                 consumer's work, which the free must wait for, is queued there)",
            ));
        }
        if let Some(consumer) = consumer {
            let event = Event::new(buf.context(), EventFlags::DISABLE_TIMING)?;
            event.record(producer)?;
            // SAFETY: a stream handle the consumer named (a stream of this context, or
            // a default-stream handle), alive for the call; only this call uses it.
            let mut theirs = unsafe { Stream::borrow_raw(consumer, buf.context()) };
            theirs.wait_event(&event)?;
        }
        let ordinal = buf.context().device().as_raw();
        // A device address, not a host pointer: no provenance.
        let data = ptr::without_provenance_mut::<c_void>(buf.as_raw() as usize);
        let len = i64::try_from(buf.len()).unwrap_or(i64::MAX);
        let boxed = Box::new(Exported {
            tensor: DLManagedTensorVersioned {
                version: DLPACK_VERSION,
                manager_ctx: ptr::null_mut(),
                deleter: Some(delete::<T>),
                flags: 0,
                dl_tensor: DLTensor {
                    data,
                    device: DLDevice {
                        device_type: DLDeviceType::CUDA,
                        device_id: ordinal,
                    },
                    ndim: 1,
                    dtype: <T as DlElement>::DTYPE,
                    shape: ptr::null_mut(),
                    strides: ptr::null_mut(),
                    byte_offset: 0,
                },
            },
            shape: [len],
            buf,
        });
        let raw = Box::into_raw(boxed);
        // SAFETY: `raw` is a live box; the shape array lives as long as the tensor
        // struct it is in; `manager_ctx` names the whole allocation.
        unsafe {
            (*raw).tensor.dl_tensor.shape = (&raw mut (*raw).shape).cast::<i64>();
            (*raw).tensor.manager_ctx = raw.cast::<c_void>();
        }
        Ok(raw.cast::<DLManagedTensorVersioned>())
    }
}
