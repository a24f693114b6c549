//! [`DeviceRepr`]: the device size and alignment of a kernel-parameter type.

use core::ptr::{self, NonNull};

/// A type that can be passed to a CUDA kernel by value, with its device layout.
///
/// `DEVICE_SIZE` and `DEVICE_ALIGN` are the size and alignment the type has as a kernel
/// parameter on the device (what `nvcc` gives the matching C++ type). The packers place
/// each parameter at a multiple of `DEVICE_ALIGN` (see [`LayoutRule`](super::LayoutRule))
/// and copy `DEVICE_SIZE` bytes of it with [`write_device_bytes`](Self::write_device_bytes).
///
/// Implemented for the integer and floating-point scalars, `bool` (one byte), raw and
/// [`NonNull`] pointers (8 bytes, as device pointers; 64-bit targets only), arrays of
/// `DeviceRepr` types, the CUDA [vector types](super::vector), and structs declared with
/// [`kernel_struct!`](crate::kernel_struct).
///
/// # Safety
/// An implementation promises that:
/// - `DEVICE_SIZE == size_of::<Self>()`, and the host bytes of a value, `DEVICE_SIZE` of
///   them starting at its address, are exactly the bytes the device expects for that
///   parameter (same field offsets, same encoding);
/// - `DEVICE_ALIGN` is a power of two, is the device alignment of the type, and divides
///   `DEVICE_SIZE`;
/// - [`write_device_bytes`](Self::write_device_bytes) writes only initialized bytes, only
///   inside `dst..dst + DEVICE_SIZE`. The provided implementation copies all
///   `DEVICE_SIZE` bytes, which is only sound when the type has no padding bytes; a type
///   with padding must override it and skip the padding (as
///   [`kernel_struct!`](crate::kernel_struct) does).
pub unsafe trait DeviceRepr: Copy {
    /// Size of the type as a kernel parameter on the device, in bytes.
    const DEVICE_SIZE: usize;
    /// Alignment of the type as a kernel parameter on the device, in bytes.
    const DEVICE_ALIGN: usize;
    /// Whether a value of the type may be handed to a safe launch as it is
    /// (`kernel::scope`): it holds no device address, length or
    /// handle that the device would use to reach memory or other objects. `true` for
    /// numbers, `bool`, vector types, raw pointers (a safe kernel body cannot dereference
    /// them) and arrays and [`kernel_struct!`](crate::kernel_struct) types made only of
    /// such fields; `false` for [`DeviceSlice`](crate::kernel::DeviceSlice),
    /// [`DeviceSliceMut`](crate::kernel::DeviceSliceMut), graph and conditional handles,
    /// and (the default) for hand-written implementations, which must opt in.
    const PLAIN: bool = false;
    /// A fingerprint of the type's device form, compared when a safe kernel is loaded
    /// (the device build of a `safe fn` records the fingerprint of its parameter list;
    /// see [`kernel!`](crate::kernel!)). The default mixes size, alignment and
    /// [`PLAIN`](Self::PLAIN); slices add their element size and whether they write.
    const SIGNATURE: u64 = signature_mix(
        signature_mix(
            signature_mix(SIGNATURE_SEED, Self::DEVICE_SIZE as u64),
            Self::DEVICE_ALIGN as u64,
        ),
        Self::PLAIN as u64,
    );

    /// Writes the device bytes of `self` to `dst`, leaving padding bytes untouched.
    ///
    /// # Safety
    /// `dst` must be valid for writes of `Self::DEVICE_SIZE` bytes and must not overlap
    /// `self`. No alignment is required.
    unsafe fn write_device_bytes(&self, dst: *mut u8) {
        // SAFETY: the trait contract makes `DEVICE_SIZE == size_of::<Self>()` and (for
        // types that keep this provided method) every byte of `self` initialized, so
        // reading `DEVICE_SIZE` bytes from `self` is valid; the caller guarantees `dst`
        // is valid for that many byte writes and does not overlap.
        unsafe {
            ptr::copy_nonoverlapping(ptr::from_ref(self).cast::<u8>(), dst, Self::DEVICE_SIZE);
        }
    }
}

/// The starting value of [`DeviceRepr::SIGNATURE`] fingerprints.
pub const SIGNATURE_SEED: u64 = 0xcbf2_9ce4_8422_2325;

/// One step of a [`DeviceRepr::SIGNATURE`] fingerprint: mixes `value` into `hash`.
#[must_use]
pub const fn signature_mix(hash: u64, value: u64) -> u64 {
    let x = (hash ^ value).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    x ^ (x >> 31)
}

/// Implements [`DeviceRepr`] for padding-free scalars whose device alignment equals their
/// size, and checks the host size at compile time.
macro_rules! scalar_repr {
    ($($t:ty => $size:literal),* $(,)?) => {$(
        // SAFETY: a scalar has no padding and the same encoding on host and device
        // (little-endian two's complement / IEEE 754); its size is checked below and its
        // device alignment is its size.
        unsafe impl DeviceRepr for $t {
            const DEVICE_SIZE: usize = $size;
            const DEVICE_ALIGN: usize = $size;
            const PLAIN: bool = true;
        }
        const _: () = assert!(
            core::mem::size_of::<$t>() == $size,
            concat!("host size of `", stringify!($t), "` differs from its device size"),
        );
    )*};
}

scalar_repr! {
    u8 => 1, i8 => 1, u16 => 2, i16 => 2, u32 => 4, i32 => 4, u64 => 8, i64 => 8,
    f32 => 4, f64 => 8,
}

// SAFETY: `bool` is one byte holding 0 or 1, as C++ `bool` on the device; no padding.
unsafe impl DeviceRepr for bool {
    const DEVICE_SIZE: usize = 1;
    const DEVICE_ALIGN: usize = 1;
    const PLAIN: bool = true;
}

#[cfg(target_pointer_width = "64")]
scalar_repr! { usize => 8, isize => 8 }

// SAFETY (all three pointer impls): on a 64-bit target a thin pointer is 8 bytes with no
// padding, like a device pointer (`T*` in a kernel signature); its value is passed as is.
#[cfg(target_pointer_width = "64")]
unsafe impl<T> DeviceRepr for *const T {
    const DEVICE_SIZE: usize = 8;
    const DEVICE_ALIGN: usize = 8;
    const PLAIN: bool = true;
}

// SAFETY: see the `*const T` implementation above.
#[cfg(target_pointer_width = "64")]
unsafe impl<T> DeviceRepr for *mut T {
    const DEVICE_SIZE: usize = 8;
    const DEVICE_ALIGN: usize = 8;
    const PLAIN: bool = true;
}

// SAFETY: see the `*const T` implementation above; `NonNull<T>` is a thin `*const T`.
#[cfg(target_pointer_width = "64")]
unsafe impl<T> DeviceRepr for NonNull<T> {
    const DEVICE_SIZE: usize = 8;
    const DEVICE_ALIGN: usize = 8;
    const PLAIN: bool = true;
}

// SAFETY: an array has its element's alignment and `N` elements at a stride of
// `size_of::<T>() == T::DEVICE_SIZE` (the element contract), on host and device alike;
// `write_device_bytes` delegates to the element, so element padding stays untouched.
unsafe impl<T: DeviceRepr, const N: usize> DeviceRepr for [T; N] {
    const DEVICE_SIZE: usize = T::DEVICE_SIZE * N;
    const DEVICE_ALIGN: usize = T::DEVICE_ALIGN;
    const PLAIN: bool = T::PLAIN;
    const SIGNATURE: u64 = signature_mix(signature_mix(T::SIGNATURE, N as u64), 0xa77a);

    unsafe fn write_device_bytes(&self, dst: *mut u8) {
        let mut offset = 0;
        for item in self {
            // SAFETY: element `i` lies at `i * T::DEVICE_SIZE`, and its bytes end at most
            // at `N * T::DEVICE_SIZE == Self::DEVICE_SIZE`, for which the caller
            // guarantees `dst` is valid.
            unsafe { item.write_device_bytes(dst.add(offset)) };
            offset += T::DEVICE_SIZE;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes_of<T: DeviceRepr, const N: usize>(v: &T) -> [u8; N] {
        assert_eq!(T::DEVICE_SIZE, N);
        let mut out = [0u8; N];
        // SAFETY: `out` holds exactly `T::DEVICE_SIZE` bytes.
        unsafe { v.write_device_bytes(out.as_mut_ptr()) };
        out
    }

    #[test]
    fn scalar_sizes_and_aligns() {
        assert_eq!((u8::DEVICE_SIZE, u8::DEVICE_ALIGN), (1, 1));
        assert_eq!((i16::DEVICE_SIZE, i16::DEVICE_ALIGN), (2, 2));
        assert_eq!((f32::DEVICE_SIZE, f32::DEVICE_ALIGN), (4, 4));
        assert_eq!((u64::DEVICE_SIZE, u64::DEVICE_ALIGN), (8, 8));
        assert_eq!((f64::DEVICE_SIZE, f64::DEVICE_ALIGN), (8, 8));
        assert_eq!((bool::DEVICE_SIZE, bool::DEVICE_ALIGN), (1, 1));
        assert_eq!((usize::DEVICE_SIZE, isize::DEVICE_ALIGN), (8, 8));
        assert_eq!(<*const f32>::DEVICE_SIZE, 8);
        assert_eq!(<*mut u8>::DEVICE_ALIGN, 8);
        assert_eq!(<NonNull<u8>>::DEVICE_SIZE, 8);
    }

    #[test]
    fn arrays() {
        assert_eq!(<[f32; 3]>::DEVICE_SIZE, 12);
        assert_eq!(<[f32; 3]>::DEVICE_ALIGN, 4);
        assert_eq!(<[u8; 0]>::DEVICE_SIZE, 0);
        assert_eq!(
            bytes_of::<_, 8>(&[1u16, 2, 3, 0xffff]),
            [1, 0, 2, 0, 3, 0, 0xff, 0xff]
        );
    }

    #[test]
    fn scalar_bytes() {
        assert_eq!(bytes_of::<_, 4>(&1.0f32), 1.0f32.to_le_bytes());
        assert_eq!(bytes_of::<_, 1>(&true), [1]);
        assert_eq!(bytes_of::<_, 8>(&-2i64), (-2i64).to_le_bytes());
    }
}
