//! The parameter types that both halves of a typed kernel name: [`DeviceSlice`] and
//! [`DeviceSliceMut`] (a pointer and a length), with the [`Element`] types they hold.
//!
//! These types exist on the host and on the device with one layout, so a kernel declared
//! once with [`kernel!`](crate::kernel!) has the same parameter types on both sides. The
//! host makes them only from borrowed buffers (see [`scope`](super::scope)); the device
//! reads and writes through them with bounds checks (`device` module, nvptx64 builds).

use core::marker::PhantomData;

use crate::args::DeviceRepr;

/// Element types of device slices: plain numbers whose every bit pattern is a value.
///
/// # Safety
/// An implementation promises that `Self` has no padding, that every bit pattern of its
/// size is a valid value (a kernel may read bytes any other work wrote), that its size is
/// 1, 2, 4 or 8 bytes, and that its alignment equals its size on the device and on the
/// host (so an element load is one naturally aligned access).
pub unsafe trait Element: DeviceRepr + Copy + 'static {}

/// Implements [`Element`] for padding-free numbers of size 1, 2, 4 or 8.
macro_rules! element {
    ($($t:ty),* $(,)?) => {$(
        // SAFETY: a primitive number: no padding, every bit pattern valid, size 1, 2, 4 or
        // 8, aligned to its size on nvptx64 and x86_64/aarch64 (checked below).
        unsafe impl Element for $t {}
        const _: () = assert!(
            core::mem::size_of::<$t>() == core::mem::align_of::<$t>()
                && matches!(core::mem::size_of::<$t>(), 1 | 2 | 4 | 8)
        );
    )*};
}

element!(u8, i8, u16, i16, u32, i32, u64, i64, f32, f64);

// SAFETY: `Bf16` is a `repr(transparent)` `u16`: no padding, every bit pattern a value
// (a NaN at worst), 2 bytes aligned to 2 on every target (checked in `args`).
unsafe impl Element for crate::args::Bf16 {}

/// `len` elements of device memory that a kernel reads: the device form of `&[T]`,
/// passed by value as a 16-byte parameter (`struct { const T *ptr; size_t len; }` in
/// C++, 8-aligned).
///
/// On the device, [`get`](Self::get) and friends check every index against `len`
/// (device builds; see `cudadrv::device`). On the host, a safe launch makes one from a
/// shared borrow of a [`DeviceBuffer`](crate::DeviceBuffer) held until the kernel has
/// finished; [`from_raw_parts`](Self::from_raw_parts) is the `unsafe` way.
#[repr(C)]
pub struct DeviceSlice<T: Element> {
    pub(crate) ptr: *const T,
    pub(crate) len: usize,
}

/// `len` elements of device memory that a kernel reads and writes: the device form of
/// `&mut [T]`, laid out like [`DeviceSlice`].
///
/// Every thread of a grid receives the same value, so writes are element stores that
/// other threads may race with: a race leaves one of the written values (or, for the
/// reads racing with it, the old or the new one), never undefined behaviour, because the
/// device accesses are single PTX loads and stores of [`Element`] types, which have no
/// invalid bit patterns. A safe launch makes one from an exclusive borrow of a
/// [`DeviceBuffer`](crate::DeviceBuffer), so no other argument and no host code reaches
/// that memory while the kernel runs.
#[repr(C)]
pub struct DeviceSliceMut<T: Element> {
    pub(crate) ptr: *mut T,
    pub(crate) len: usize,
    _t: PhantomData<T>,
}

impl<T: Element> DeviceSlice<T> {
    /// A slice of `len` elements at device address `ptr`.
    ///
    /// # Safety
    /// `ptr..ptr + len` must be device memory readable by every kernel the slice is
    /// passed to, for as long as those kernels run, and aligned for `T`.
    #[inline]
    #[must_use]
    pub const unsafe fn from_raw_parts(ptr: *const T, len: usize) -> Self {
        Self { ptr, len }
    }

    /// The number of elements.
    #[inline]
    #[must_use]
    pub const fn len(&self) -> usize {
        self.len
    }

    /// Whether the slice has no elements.
    #[inline]
    #[must_use]
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The device address of the first element.
    #[inline]
    #[must_use]
    pub const fn as_ptr(&self) -> *const T {
        self.ptr
    }
}

impl<T: Element> DeviceSliceMut<T> {
    /// A slice of `len` writable elements at device address `ptr`.
    ///
    /// # Safety
    /// `ptr..ptr + len` must be device memory readable and writable by every kernel the
    /// slice is passed to, for as long as those kernels run, aligned for `T`, and reached
    /// by nothing else meanwhile but through this slice.
    #[inline]
    #[must_use]
    pub const unsafe fn from_raw_parts(ptr: *mut T, len: usize) -> Self {
        Self {
            ptr,
            len,
            _t: PhantomData,
        }
    }

    /// The number of elements.
    #[inline]
    #[must_use]
    pub const fn len(&self) -> usize {
        self.len
    }

    /// Whether the slice has no elements.
    #[inline]
    #[must_use]
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The device address of the first element.
    #[inline]
    #[must_use]
    pub const fn as_ptr(&self) -> *mut T {
        self.ptr
    }

    /// The same memory, read-only.
    #[inline]
    #[must_use]
    pub const fn as_read(&self) -> DeviceSlice<T> {
        DeviceSlice {
            ptr: self.ptr,
            len: self.len,
        }
    }
}

impl<T: Element> Clone for DeviceSlice<T> {
    #[inline]
    fn clone(&self) -> Self {
        *self
    }
}
impl<T: Element> Copy for DeviceSlice<T> {}

impl<T: Element> Clone for DeviceSliceMut<T> {
    #[inline]
    fn clone(&self) -> Self {
        *self
    }
}
impl<T: Element> Copy for DeviceSliceMut<T> {}

impl<T: Element> core::fmt::Debug for DeviceSlice<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "DeviceSlice({:p}, {})", self.ptr, self.len)
    }
}

impl<T: Element> core::fmt::Debug for DeviceSliceMut<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "DeviceSliceMut({:p}, {})", self.ptr, self.len)
    }
}

// SAFETY: `repr(C)` of an 8-byte pointer and an 8-byte `usize` (64-bit targets only, see
// below): 16 bytes, 8-aligned, no padding, the same bytes on host and device.
unsafe impl<T: Element> DeviceRepr for DeviceSlice<T> {
    const DEVICE_SIZE: usize = 16;
    const DEVICE_ALIGN: usize = 8;
    // A borrowed address: safe launches make slices only from borrows they hold.
    const PLAIN: bool = false;
    const SIGNATURE: u64 = slice_signature(1, T::SIGNATURE);
}

// SAFETY: as for `DeviceSlice`.
unsafe impl<T: Element> DeviceRepr for DeviceSliceMut<T> {
    const DEVICE_SIZE: usize = 16;
    const DEVICE_ALIGN: usize = 8;
    const PLAIN: bool = false;
    const SIGNATURE: u64 = slice_signature(2, T::SIGNATURE);
}

/// The fingerprint of a slice parameter: its kind (1 read, 2 written) and element.
const fn slice_signature(kind: u64, element: u64) -> u64 {
    crate::args::signature_mix(
        crate::args::signature_mix(crate::args::SIGNATURE_SEED, 0x511c_e000 | kind),
        element,
    )
}

const _: () = {
    assert!(core::mem::size_of::<DeviceSlice<u8>>() == 16);
    assert!(core::mem::align_of::<DeviceSlice<u8>>() == 8);
    assert!(core::mem::size_of::<DeviceSliceMut<f64>>() == 16);
    assert!(core::mem::align_of::<DeviceSliceMut<f64>>() == 8);
};
