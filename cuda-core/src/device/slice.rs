//! Device-side access to [`DeviceSlice`] and [`DeviceSliceMut`] kernel parameters: every
//! index checked against the slice's length, with `unsafe` unchecked forms.
//!
//! A slice parameter is a pointer and a length (16 bytes). The same value reaches every
//! thread of the grid, so element accesses are single PTX loads and stores
//! ([`ptx_asm::ld_u32`] and friends) taken by value, never Rust references: two threads
//! writing one element race to a value, not to undefined behaviour, because an
//! [`Element`] has no invalid bit patterns and the access is one naturally aligned
//! instruction outside the Rust memory model.
//!
//! - [`get`](DeviceSlice::get) / [`try_write`](DeviceSliceMut::try_write): `None` / an
//!   [`OutOfBounds`] error past the end.
//! - [`read`](DeviceSlice::read) / [`write`](DeviceSliceMut::write): trap past the end
//!   (the kernel ends with `CUDA_ERROR_LAUNCH_FAILED`), as a panic would.
//! - [`get_unchecked`](DeviceSlice::get_unchecked) /
//!   [`write_unchecked`](DeviceSliceMut::write_unchecked): `unsafe`, no check.
//!
//! # Unsafe policy
//! The checked forms are safe: the slice's constructors (a safe launch, or
//! `from_raw_parts`' contract) guarantee `ptr..ptr + len` is live device memory for the
//! kernel's run. Every `unsafe` block carries a `// SAFETY:` comment.

use core::mem::{size_of, transmute_copy};

pub use crate::kernel::{DeviceSlice, DeviceSliceMut, Element};

use super::ptx_asm;

/// An index past the end of a device slice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutOfBounds {
    /// The index given.
    pub index: usize,
    /// The slice's length.
    pub len: usize,
}

/// Loads one element.
///
/// # Safety
/// `p` must be readable for a `T` and aligned.
#[inline(always)]
unsafe fn load<T: Element>(p: *const T) -> T {
    // SAFETY (all arms): `Element` types are 1, 2, 4 or 8 bytes with every bit pattern
    // valid, so the loaded integer of the same size is a `T`; the caller guarantees `p`.
    unsafe {
        match size_of::<T>() {
            1 => transmute_copy(&ptx_asm::ld_u8(p.cast())),
            2 => transmute_copy(&ptx_asm::ld_u16(p.cast())),
            4 => transmute_copy(&ptx_asm::ld_u32(p.cast())),
            8 => transmute_copy(&ptx_asm::ld_u64(p.cast())),
            _ => ptx_asm::trap(),
        }
    }
}

/// Stores one element.
///
/// # Safety
/// `p` must be writable for a `T` and aligned.
#[inline(always)]
unsafe fn store<T: Element>(p: *mut T, v: T) {
    // SAFETY (all arms): as in `load`; the integer has the element's size and bytes.
    unsafe {
        match size_of::<T>() {
            1 => ptx_asm::st_u8(p.cast(), transmute_copy(&v)),
            2 => ptx_asm::st_u16(p.cast(), transmute_copy(&v)),
            4 => ptx_asm::st_u32(p.cast(), transmute_copy(&v)),
            8 => ptx_asm::st_u64(p.cast(), transmute_copy(&v)),
            _ => ptx_asm::trap(),
        }
    }
}

/// Ends the kernel: an index out of range. Inlined (a `trap`), so the PTX names no
/// function whose mangled name would depend on the build.
#[inline(always)]
fn out_of_bounds() -> ! {
    // SAFETY: `trap` has no precondition.
    unsafe { ptx_asm::trap() }
}

impl<T: Element> DeviceSlice<T> {
    /// Element `i`, or `None` past the end.
    #[inline(always)]
    #[must_use]
    pub fn get(&self, i: usize) -> Option<T> {
        if i < self.len {
            // SAFETY: `i < len`, and the slice names `len` live elements.
            Some(unsafe { self.get_unchecked(i) })
        } else {
            None
        }
    }

    /// Element `i`; traps past the end.
    #[inline(always)]
    #[must_use]
    pub fn read(&self, i: usize) -> T {
        match self.get(i) {
            Some(v) => v,
            None => out_of_bounds(),
        }
    }

    /// Element `i` without a check.
    ///
    /// # Safety
    /// `i < self.len()`.
    #[inline(always)]
    #[must_use]
    pub unsafe fn get_unchecked(&self, i: usize) -> T {
        // SAFETY: the caller guarantees `i < len`; the slice names `len` live, aligned
        // elements.
        unsafe { load(self.ptr.add(i)) }
    }
}

impl<T: Element> DeviceSlice<T> {
    /// Bytes `16 * chunk .. 16 * chunk + 16` of the slice (elements
    /// `chunk * (16 / size_of::<T>())` onward) as four 32-bit words, or `None` when they
    /// are not all inside it: one 16-byte load (`ld.v4.u32`) when the slice's data is
    /// 16-byte aligned (every buffer this crate allocates is), else one load per element.
    #[inline(always)]
    #[must_use]
    pub fn get_vec16(&self, chunk: usize) -> Option<[u32; 4]> {
        let per = 16 / size_of::<T>();
        let first = chunk.checked_mul(per)?;
        if first.checked_add(per)? > self.len {
            return None;
        }
        // SAFETY: `first + per <= len`: the 16 bytes are inside the slice's live memory.
        let p = unsafe { self.ptr.add(first) };
        if (p as usize) % 16 == 0 {
            // SAFETY: 16 readable bytes at a 16-byte aligned address.
            return Some(unsafe { ptx_asm::ld_v4_u32(p.cast()) });
        }
        let mut words = [0u32; 4];
        let out = words.as_mut_ptr().cast::<T>();
        for e in 0..per {
            // SAFETY: element `first + e < len` is live and aligned; `out` has room for
            // the `per` elements of `T` (16 bytes), written unaligned (the array is
            // 4-aligned, an 8-byte element may need more).
            unsafe { out.add(e).write_unaligned(load(p.add(e))) };
        }
        Some(words)
    }

    /// The slice's whole 16-byte chunks, when its data is 16-byte aligned (every buffer
    /// this crate allocates is), else `None`: the alignment tested once, where
    /// [`get_vec16`](Self::get_vec16) tests it at each load and keeps an element-wise
    /// fallback beside the 16-byte load.
    #[inline(always)]
    #[must_use]
    pub fn chunks16(&self) -> Option<Chunks16<T>> {
        if (self.ptr as usize) % 16 != 0 {
            return None;
        }
        Some(Chunks16 {
            ptr: self.ptr,
            chunks: self.len * size_of::<T>() / 16,
        })
    }
}

impl<T: Element> DeviceSliceMut<T> {
    /// [`DeviceSlice::chunks16`] of this slice's data, for reading.
    #[inline(always)]
    #[must_use]
    pub fn chunks16(&self) -> Option<Chunks16<T>> {
        DeviceSlice {
            ptr: self.ptr.cast_const(),
            len: self.len,
        }
        .chunks16()
    }
}

/// The whole 16-byte chunks of a 16-byte aligned [`DeviceSlice`] (from
/// [`chunks16`](DeviceSlice::chunks16)): each read is a bounds check and one
/// `ld.v4.u32`, so a thread's loads of several chunks are all in flight before any of
/// their values is used.
#[derive(Clone, Copy, Debug)]
pub struct Chunks16<T: Element> {
    ptr: *const T,
    chunks: usize,
}

impl<T: Element> Chunks16<T> {
    /// The number of whole chunks (a partial last chunk of the slice is not one).
    #[inline(always)]
    #[must_use]
    pub const fn len(&self) -> usize {
        self.chunks
    }

    /// Whether there is no whole chunk.
    #[inline(always)]
    #[must_use]
    pub const fn is_empty(&self) -> bool {
        self.chunks == 0
    }

    /// Chunk `chunk` (bytes `16 chunk .. 16 chunk + 16` of the slice) as four 32-bit
    /// words, or `None` past the last whole chunk.
    #[inline(always)]
    #[must_use]
    pub fn get(&self, chunk: usize) -> Option<[u32; 4]> {
        if chunk >= self.chunks {
            return None;
        }
        // SAFETY: `chunk < chunks`: the 16 bytes lie inside the slice's live memory (its
        // constructor's guarantee, as for the slice), 16-byte aligned (tested when this
        // view was made).
        Some(unsafe { ptx_asm::ld_v4_u32(self.ptr.cast::<u8>().add(16 * chunk).cast()) })
    }
}

impl Chunks16<crate::args::Bf16> {
    /// Elements `8 chunk .. 8 chunk + 8` as `f32`s (exact), or `None` past the last
    /// whole chunk.
    #[inline(always)]
    #[must_use]
    pub fn get8_f32(&self, chunk: usize) -> Option<[f32; 8]> {
        self.get(chunk).map(crate::args::Bf16::unpack8)
    }
}

impl DeviceSlice<crate::args::Bf16> {
    /// Elements `8 * chunk .. 8 * chunk + 8` as `f32`s (exact), or `None` when they are
    /// not all inside the slice: bfloat16 weights in one 16-byte load (see
    /// [`get_vec16`](Self::get_vec16)).
    #[inline(always)]
    #[must_use]
    pub fn get8_f32(&self, chunk: usize) -> Option<[f32; 8]> {
        self.get_vec16(chunk).map(crate::args::Bf16::unpack8)
    }
}

impl<T: Element> DeviceSliceMut<T> {
    /// Element `i`, or `None` past the end.
    #[inline(always)]
    #[must_use]
    pub fn get(&self, i: usize) -> Option<T> {
        self.as_read().get(i)
    }

    /// Element `i`; traps past the end.
    #[inline(always)]
    #[must_use]
    pub fn read(&self, i: usize) -> T {
        self.as_read().read(i)
    }

    /// Element `i` without a check.
    ///
    /// # Safety
    /// `i < self.len()`.
    #[inline(always)]
    #[must_use]
    pub unsafe fn get_unchecked(&self, i: usize) -> T {
        // SAFETY: forwarded.
        unsafe { self.as_read().get_unchecked(i) }
    }

    /// Writes `v` at `i`, or returns [`OutOfBounds`] past the end (nothing written).
    ///
    /// # Errors
    /// [`OutOfBounds`] when `i >= self.len()`.
    #[inline(always)]
    pub fn try_write(&self, i: usize, v: T) -> Result<(), OutOfBounds> {
        if i < self.len {
            // SAFETY: `i < len`, and the slice names `len` live, writable elements.
            unsafe { self.write_unchecked(i, v) };
            Ok(())
        } else {
            Err(OutOfBounds {
                index: i,
                len: self.len,
            })
        }
    }

    /// Writes `v` at `i`; traps past the end.
    #[inline(always)]
    pub fn write(&self, i: usize, v: T) {
        if self.try_write(i, v).is_err() {
            out_of_bounds();
        }
    }

    /// Writes `v` at `i` without a check.
    ///
    /// # Safety
    /// `i < self.len()`.
    #[inline(always)]
    pub unsafe fn write_unchecked(&self, i: usize, v: T) {
        // SAFETY: the caller guarantees `i < len`; the slice names `len` live, writable,
        // aligned elements.
        unsafe { store(self.ptr.add(i), v) }
    }
}

impl DeviceSliceMut<u32> {
    /// Adds `v` to element `i` atomically (wrapping; `atom.relaxed.gpu.add.u32`) and
    /// returns the value it had, or `None` past the end (nothing changed). Relaxed at GPU
    /// scope: it orders nothing else; pair it with [`fence_acq_rel`](super::fence_acq_rel)
    /// to hand data between CTAs (the last CTA to count sees the others' writes).
    #[inline(always)]
    pub fn fetch_add(&self, i: usize, v: u32) -> Option<u32> {
        if i < self.len {
            // SAFETY: `i < len`: a live, aligned, writable word of global memory.
            Some(unsafe { ptx_asm::atom_add_u32(self.ptr.add(i), v) })
        } else {
            None
        }
    }
}

impl DeviceSliceMut<u64> {
    /// Sets element `i` to the smaller of it and `v` atomically
    /// (`atom.relaxed.gpu.min.u64`) and returns the value it had, or `None` past the end.
    #[inline(always)]
    pub fn fetch_min(&self, i: usize, v: u64) -> Option<u64> {
        if i < self.len {
            // SAFETY: `i < len`: a live, aligned, writable word of global memory.
            Some(unsafe { ptx_asm::atom_min_u64(self.ptr.add(i), v) })
        } else {
            None
        }
    }

    /// Sets element `i` to the larger of it and `v` atomically
    /// (`atom.relaxed.gpu.max.u64`) and returns the value it had, or `None` past the end.
    #[inline(always)]
    pub fn fetch_max(&self, i: usize, v: u64) -> Option<u64> {
        if i < self.len {
            // SAFETY: `i < len`: a live, aligned, writable word of global memory.
            Some(unsafe { ptx_asm::atom_max_u64(self.ptr.add(i), v) })
        } else {
            None
        }
    }
}
