//! Shared memory: static arrays declared with [`shared_array!`](crate::shared_array), the
//! launch's dynamic shared memory ([`dynamic_shared!`](crate::dynamic_shared)), and
//! conversions between generic pointers and 32-bit shared-window addresses.
//!
//! Rust has no way to put a `static` in PTX's `.shared` state space, so the macros
//! declare the variable in module-scope PTX (`global_asm!`) and read its address with
//! `mov.u32`. Both macros must be invoked in the crate that is compiled to PTX (the
//! declaration is emitted into that crate's module).

use core::marker::PhantomData;

use super::ptx_asm;

/// The `.shared::cta` window address of a generic pointer into this CTA's shared memory
/// (`cvta.to.shared`; `__cvta_generic_to_shared`).
///
/// Only address arithmetic: safe to call with any pointer, meaningful only for one into
/// shared memory.
#[inline(always)]
#[must_use]
pub fn to_shared_addr<T>(ptr: *const T) -> u32 {
    // SAFETY: `cvta_to_shared` computes an integer and accesses no memory.
    unsafe { ptx_asm::cvta_to_shared(ptr.cast()) }
}

/// The generic pointer of a `.shared::cta` window address (`cvta.shared`).
///
/// Only address arithmetic: dereferencing the result is sound only if `addr` is a valid
/// shared address of the right type.
#[inline(always)]
#[must_use]
pub fn from_shared_addr<T>(addr: u32) -> *mut T {
    // SAFETY: `cvta_shared_to_generic` computes a pointer and accesses no memory.
    unsafe { ptx_asm::cvta_shared_to_generic(addr).cast() }
}

/// A `[T; N]` in this CTA's shared memory, declared with
/// [`shared_array!`](crate::shared_array).
///
/// A copyable handle (the address); every thread of the CTA sees the same array.
/// Contents start uninitialized in each launch.
#[derive(Debug)]
pub struct SharedArray<T, const N: usize> {
    base: u32,
    _elem: PhantomData<*mut T>,
}

impl<T, const N: usize> Clone for SharedArray<T, N> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T, const N: usize> Copy for SharedArray<T, N> {}

impl<T, const N: usize> SharedArray<T, N> {
    /// Wraps the shared-window address of a shared array.
    ///
    /// # Safety
    /// `base` must be the `.shared::cta` address of storage for `N` values of `T`,
    /// aligned to `T`, that lives for the whole kernel.
    #[inline(always)]
    #[must_use]
    pub const unsafe fn from_raw(base: u32) -> Self {
        Self {
            base,
            _elem: PhantomData,
        }
    }

    /// Number of elements.
    #[inline(always)]
    #[must_use]
    pub const fn len(self) -> usize {
        N
    }

    /// Whether the array has no elements.
    #[inline(always)]
    #[must_use]
    pub const fn is_empty(self) -> bool {
        N == 0
    }

    /// The `.shared::cta` address of element 0.
    #[inline(always)]
    #[must_use]
    pub const fn base_addr(self) -> u32 {
        self.base
    }

    /// The `.shared::cta` address of element `i`, or `None` past the end.
    #[inline(always)]
    #[must_use]
    pub const fn addr(self, i: usize) -> Option<u32> {
        if i < N {
            // `N * size_of::<T>()` fits the 32-bit shared window, so this cannot wrap.
            Some(self.base + (i * core::mem::size_of::<T>()) as u32)
        } else {
            None
        }
    }

    /// The `.shared::cta` address of element `i`, without a bounds check.
    ///
    /// # Safety
    /// `i < N`.
    #[inline(always)]
    #[must_use]
    pub const unsafe fn addr_unchecked(self, i: usize) -> u32 {
        self.base + (i * core::mem::size_of::<T>()) as u32
    }

    /// A generic pointer to element 0, for ordinary loads and stores.
    #[inline(always)]
    #[must_use]
    pub fn as_mut_ptr(self) -> *mut T {
        from_shared_addr(self.base)
    }

    /// A generic pointer to element `i`, or `None` past the end.
    #[inline(always)]
    #[must_use]
    pub fn ptr(self, i: usize) -> Option<*mut T> {
        match self.addr(i) {
            Some(a) => Some(from_shared_addr(a)),
            None => None,
        }
    }
}

/// The launch's dynamic shared memory, declared with
/// [`dynamic_shared!`](crate::dynamic_shared): 16-byte aligned,
/// [`len`](Self::len) bytes (the launch's `sharedMemBytes`).
#[derive(Clone, Copy, Debug)]
pub struct DynamicShared {
    base: u32,
}

impl DynamicShared {
    /// Wraps the base address of the dynamic shared memory.
    ///
    /// # Safety
    /// `base` must be the `.shared::cta` address of the launch's dynamic shared memory.
    #[inline(always)]
    #[must_use]
    pub const unsafe fn from_raw(base: u32) -> Self {
        Self { base }
    }

    /// The `.shared::cta` address of byte 0.
    #[inline(always)]
    #[must_use]
    pub const fn base_addr(self) -> u32 {
        self.base
    }

    /// Bytes of dynamic shared memory this launch has (`%dynamic_smem_size`).
    #[inline(always)]
    #[must_use]
    pub fn len(self) -> u32 {
        // SAFETY: reading a special register has no side effect.
        unsafe { ptx_asm::dynamic_smem_size() }
    }

    /// Whether the launch has no dynamic shared memory.
    #[inline(always)]
    #[must_use]
    pub fn is_empty(self) -> bool {
        self.len() == 0
    }

    /// A generic pointer to byte 0.
    #[inline(always)]
    #[must_use]
    pub fn as_mut_ptr(self) -> *mut u8 {
        from_shared_addr(self.base)
    }
}
