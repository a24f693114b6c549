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

use core::marker::PhantomData;

use cudadrv_sys::CUdeviceptr;

use crate::args::DeviceRepr;

use super::view::{DeviceView, DeviceViewMut};
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

    /// A shared view of all of it, borrowing it.
    fn view(&self) -> DeviceView<'_, Self::Elem>;

    /// An exclusive view of all of it, borrowing it exclusively.
    fn view_mut(&mut self) -> DeviceViewMut<'_, Self::Elem>;
}

pub(crate) mod sealed {
    /// Only this crate's memory types are [`DeviceMemory`](super::DeviceMemory).
    pub trait Sealed {}
}

/// The accessors of a typed device memory kind and its [`DeviceMemory`] impl:
/// `device_memory!(owner impl['s, T: Copy] AsyncDeviceBuffer<'s, T>, T, |b| ptr: b.ptr,
/// len: b.len, context: b.stream.context(), release: Release::Stream(..));`
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
    // An owner: the accessors below, and views of it (`view`, `view_mut`, `slice`,
    // `slice_mut`, `split_at_mut`).
    (owner impl[$($gen:tt)*] $ty:ty, $elem:ty, |$this:ident|
     ptr: $ptr:expr, len: $len:expr, context: $ctx:expr, release: $rel:expr $(,)?) => {
        $crate::memory::device_memory::device_memory!(
            impl[$($gen)*] $ty, $elem, |$this| ptr: $ptr, len: $len, context: $ctx, release: $rel
        );

        impl<$($gen)*> $ty {
            /// A shared view of all of it, borrowing it (usable wherever a buffer is).
            #[inline]
            #[must_use]
            pub fn view(&self) -> $crate::memory::DeviceView<'_, $elem> {
                <Self as $crate::memory::DeviceMemory>::view(self)
            }

            /// An exclusive view of all of it, borrowing it exclusively.
            #[inline]
            #[must_use]
            pub fn view_mut(&mut self) -> $crate::memory::DeviceViewMut<'_, $elem> {
                <Self as $crate::memory::DeviceMemory>::view_mut(self)
            }

            /// A shared view of values `range` (indices in values).
            ///
            /// # Errors
            /// [`Error::InvalidArgument`]($crate::Error::InvalidArgument) when the range
            /// is out of bounds or reversed.
            #[inline]
            pub fn slice(
                &self,
                range: impl core::ops::RangeBounds<usize>,
            ) -> $crate::Result<$crate::memory::DeviceView<'_, $elem>> {
                self.view().slice(range)
            }

            /// An exclusive view of values `range`.
            ///
            /// # Errors
            /// As [`slice`](Self::slice).
            #[inline]
            pub fn slice_mut(
                &mut self,
                range: impl core::ops::RangeBounds<usize>,
            ) -> $crate::Result<$crate::memory::DeviceViewMut<'_, $elem>> {
                self.view_mut().into_slice(range)
            }

            /// Exclusive views of the first `mid` values and of the rest, which share
            /// nothing (each may go to its own stream or kernel).
            ///
            /// # Errors
            /// [`Error::InvalidArgument`]($crate::Error::InvalidArgument) when
            /// `mid > len`.
            #[inline]
            #[allow(clippy::type_complexity)]
            pub fn split_at_mut(
                &mut self,
                mid: usize,
            ) -> $crate::Result<(
                $crate::memory::DeviceViewMut<'_, $elem>,
                $crate::memory::DeviceViewMut<'_, $elem>,
            )> {
                self.view_mut().split_at_mut(mid)
            }
        }

        impl<'v, $($gen)*> From<&'v $ty> for $crate::memory::DeviceView<'v, $elem> {
            #[inline]
            fn from(owner: &'v $ty) -> Self {
                owner.view()
            }
        }

        impl<'v, $($gen)*> From<&'v mut $ty> for $crate::memory::DeviceViewMut<'v, $elem> {
            #[inline]
            fn from(owner: &'v mut $ty) -> Self {
                owner.view_mut()
            }
        }
    };
    (impl[$($gen:tt)*] $ty:ty, $elem:ty, |$this:ident|
     ptr: $ptr:expr, len: $len:expr, context: $ctx:expr, release: $rel:expr $(,)?) => {
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

            #[inline]
            fn view(&self) -> $crate::memory::DeviceView<'_, $elem> {
                let $this = self;
                // SAFETY: the memory this type owns or borrows: `len` values at the
                // address, in the context, released as `$rel` says; borrowed for the
                // view's lifetime.
                unsafe {
                    $crate::memory::DeviceView::new(
                        <$ty>::as_raw($this),
                        <$ty>::len($this),
                        <$ty>::context($this),
                        $rel,
                    )
                }
            }

            #[inline]
            fn view_mut(&mut self) -> $crate::memory::DeviceViewMut<'_, $elem> {
                let $this = &*self;
                let (ptr, len, rel) = (<$ty>::as_raw($this), <$ty>::len($this), $rel);
                let $this = &*self;
                // SAFETY: as in `view`, borrowed exclusively for the view's lifetime.
                unsafe {
                    $crate::memory::DeviceViewMut::new(ptr, len, <$ty>::context($this), rel)
                }
            }
        }
    };
}
pub(crate) use device_memory;

/// A typed device pointer as a kernel argument: 8 bytes, 8-aligned, the `T*` of the
/// kernel's signature. Made by [`DeviceMemory::as_arg`] and the `as_arg` of every memory type.
#[repr(transparent)]
pub struct DevicePtr<T> {
    raw: CUdeviceptr,
    _t: PhantomData<*mut T>,
}

impl<T> DevicePtr<T> {
    /// Wraps a raw device address.
    pub const fn from_raw(raw: CUdeviceptr) -> Self {
        Self {
            raw,
            _t: PhantomData,
        }
    }

    /// The raw device address.
    pub const fn as_raw(self) -> CUdeviceptr {
        self.raw
    }

    /// The address `count` elements further on (wrapping like a C pointer would not:
    /// `None` on overflow).
    pub fn offset(self, count: usize) -> Option<Self> {
        let bytes = count.checked_mul(core::mem::size_of::<T>())?;
        let raw = self.raw.checked_add(u64::try_from(bytes).ok()?)?;
        Some(Self::from_raw(raw))
    }
}

impl<T> Clone for DevicePtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for DevicePtr<T> {}

impl<T> core::fmt::Debug for DevicePtr<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "DevicePtr({:#x})", self.raw)
    }
}

impl<T> PartialEq for DevicePtr<T> {
    fn eq(&self, other: &Self) -> bool {
        self.raw == other.raw
    }
}
impl<T> Eq for DevicePtr<T> {}

// SAFETY: a device pointer is a 64-bit address: 8 bytes, 8-aligned, no padding, the
// same bytes on host and device (`repr(transparent)` over `u64`).
unsafe impl<T> DeviceRepr for DevicePtr<T> {
    const DEVICE_SIZE: usize = 8;
    const DEVICE_ALIGN: usize = 8;
}
static_assertions::assert_eq_size!(DevicePtr<u8>, u64);

// SAFETY: an address; dereferencing it is the device's business.
unsafe impl<T> Send for DevicePtr<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for DevicePtr<T> {}
