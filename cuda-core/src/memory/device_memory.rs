//! [`DeviceMemory`]: the shape every typed kind of device memory shares (a run of `len`
//! values of one type at one device address, in one context), and `device_memory!`,
//! the one definition of the accessors that shape gives each type.
//!
//! [`DeviceBuffer`](super::DeviceBuffer), [`ManagedBuffer`](super::ManagedBuffer),
//! [`AsyncDeviceBuffer`](super::AsyncDeviceBuffer) and
//! [`GrowableBuffer`](super::GrowableBuffer) get their `as_raw`, `len`, `is_empty`,
//! `size_bytes`, `as_arg` and `context` from the macro (as inherent methods, so no
//! import is needed), and implement the trait with them, so generic code can take any
//! of them. The untyped byte ranges (IPC and VMM mappings, imported pool allocations)
//! get `as_raw`, `size_bytes` and `as_arg::<T>` from its `bytes` form.

use cudadrv_sys::CUdeviceptr;

use super::DevicePtr;
use crate::driver::context::Context;

/// Device memory of values of one type: `len` values at one device address, in one
/// context. Implemented by every typed device memory kind of this crate (sealed: a
/// foreign type implementing it could claim memory it does not own).
pub trait DeviceMemory: sealed::Sealed {
    /// The value type.
    type Elem: Copy;

    /// The first value's device address (0 when nothing is allocated).
    fn as_raw(&self) -> CUdeviceptr;

    /// Number of values.
    fn len(&self) -> usize;

    /// The context the memory belongs to.
    fn context(&self) -> &Context;

    /// Whether it holds no values.
    #[inline]
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Size in bytes (cannot overflow: checked when the memory was made).
    #[inline]
    fn size_bytes(&self) -> usize {
        self.len().saturating_mul(size_of::<Self::Elem>())
    }

    /// The memory as a kernel argument (`T*` on the device).
    #[inline]
    fn as_arg(&self) -> DevicePtr<Self::Elem> {
        DevicePtr::from_raw(self.as_raw())
    }
}

pub(crate) mod sealed {
    /// Only this crate's memory types are [`DeviceMemory`](super::DeviceMemory).
    pub trait Sealed {}
}

/// The accessors of a typed device memory kind and its [`DeviceMemory`] impl:
/// `device_memory!(impl['s, T: Copy] AsyncDeviceBuffer<'s, T>, T, |b| ptr: b.ptr,
/// len: b.len, context: b.stream.context());`
macro_rules! device_memory {
    // An untyped byte range (an IPC mapping, a VMM mapping, an imported pool
    // allocation): address, size, and a kernel argument of any element type.
    (bytes impl[$($gen:tt)*] $ty:ty, |$this:ident| ptr: $ptr:expr, bytes: $bytes:expr $(,)?) => {
        impl<$($gen)*> $ty {
            /// The device address in this process.
            #[inline]
            #[must_use]
            pub fn as_raw(&self) -> cudadrv_sys::CUdeviceptr {
                let $this = self;
                $ptr
            }

            /// Size in bytes.
            #[inline]
            #[must_use]
            pub fn size_bytes(&self) -> usize {
                let $this = self;
                $bytes
            }

            /// The address as a kernel argument of element type `T`.
            #[inline]
            #[must_use]
            pub fn as_arg<T>(&self) -> $crate::memory::DevicePtr<T> {
                $crate::memory::DevicePtr::from_raw(self.as_raw())
            }
        }
    };
    (impl[$($gen:tt)*] $ty:ty, $elem:ty, |$this:ident|
     ptr: $ptr:expr, len: $len:expr, context: $ctx:expr $(,)?) => {
        impl<$($gen)*> $ty {
            /// The first value's device address (`CUdeviceptr`; 0 when nothing is
            /// allocated).
            #[inline]
            #[must_use]
            pub fn as_raw(&self) -> cudadrv_sys::CUdeviceptr {
                let $this = self;
                $ptr
            }

            /// Number of values.
            #[inline]
            #[must_use]
            pub fn len(&self) -> usize {
                let $this = self;
                $len
            }

            /// Whether it holds no values.
            #[inline]
            #[must_use]
            pub fn is_empty(&self) -> bool {
                self.len() == 0
            }

            /// Size in bytes (cannot overflow: checked when the memory was made).
            #[inline]
            #[must_use]
            pub fn size_bytes(&self) -> usize {
                self.len().saturating_mul(size_of::<$elem>())
            }

            /// The memory as a kernel argument (`T*` on the device).
            #[inline]
            #[must_use]
            pub fn as_arg(&self) -> $crate::memory::DevicePtr<$elem> {
                $crate::memory::DevicePtr::from_raw(self.as_raw())
            }

            /// The context the memory belongs to.
            #[inline]
            #[must_use]
            pub fn context(&self) -> &$crate::Context {
                let $this = self;
                $ctx
            }
        }

        impl<$($gen)*> $crate::memory::device_memory::sealed::Sealed for $ty {}

        impl<$($gen)*> $crate::memory::DeviceMemory for $ty {
            type Elem = $elem;

            #[inline]
            fn as_raw(&self) -> cudadrv_sys::CUdeviceptr {
                <$ty>::as_raw(self)
            }

            #[inline]
            fn len(&self) -> usize {
                <$ty>::len(self)
            }

            #[inline]
            fn context(&self) -> &$crate::Context {
                <$ty>::context(self)
            }
        }
    };
}
pub(crate) use device_memory;
