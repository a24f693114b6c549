//! [`PackedArgs`]: one parameter buffer for `CU_LAUNCH_PARAM_BUFFER_POINTER`.

use core::fmt;

use super::layout::place_param;
use super::write::store;
use super::{
    ArgVisitor, DeviceRepr, KernelArgs, LayoutMismatch, LayoutRule, PackError, ParamInfo,
    ParamSpec, align_up, params_size,
};

/// The classic limit on a kernel's parameter bytes, and the size of the device-side
/// parameter buffer; the default capacity of [`PackedArgs`].
pub const MAX_PARAM_BYTES: usize = 4096;

/// The most parameters a [`PackedArgs`] records by default (its second parameter, `N`).
///
/// A kernel may take more: the driver allows 32,764 bytes of parameters (CUDA 12.1+,
/// Volta and later). Name a larger record, such as `PackedArgs::<4096, 256>`, for
/// those; it stays inline, with no heap.
pub const MAX_PARAMS: usize = 64;

/// The byte buffer, aligned like the most-aligned vector type.
#[derive(Clone, Copy)]
#[repr(C, align(16))]
struct AlignedBytes<const CAP: usize>([u8; CAP]);

/// Kernel parameters packed into one buffer by device alignment, for the `extra` launch
/// argument (`CU_LAUNCH_PARAM_BUFFER_POINTER` / `CU_LAUNCH_PARAM_BUFFER_SIZE`).
///
/// Holds up to `CAP` bytes (default [`MAX_PARAM_BYTES`]; up to 32,764 for the driver)
/// and `N` parameters (default [`MAX_PARAMS`]), inline: no allocation. Bytes between
/// parameters are zero. The offset and size of each parameter are recorded, so
/// [`verify`](Self::verify) can compare them with `cuFuncGetParamInfo`.
///
/// A kernel with more than 64 parameters needs a larger `N` (and, past 4096 bytes of
/// parameters, a larger `CAP`):
///
/// ```
/// use cudadrv::args::PackedArgs;
///
/// let mut packed = PackedArgs::<4096, 128>::default();
/// for i in 0..100u32 {
///     packed.push(&i)?;
/// }
/// assert_eq!((packed.params().len(), packed.len()), (100, 400));
/// # Ok::<(), cudadrv::args::PackError>(())
/// ```
///
/// ```
/// use cudadrv::args::{Float4, PackedArgs};
///
/// let packed = PackedArgs::from_args(&(1i32, Float4::new(1.0, 2.0, 3.0, 4.0)))?;
/// assert_eq!(packed.len(), 32);
/// assert_eq!(packed.params()[1].offset, 16);
/// # Ok::<(), cudadrv::args::PackError>(())
/// ```
#[derive(Clone)]
pub struct PackedArgs<const CAP: usize = MAX_PARAM_BYTES, const N: usize = MAX_PARAMS> {
    buf: AlignedBytes<CAP>,
    len: usize,
    rule: LayoutRule,
    count: usize,
    params: [ParamInfo; N],
}

impl PackedArgs {
    /// An empty 4096-byte buffer using [`LayoutRule::Alignment`] (the driver's rule).
    #[must_use]
    pub const fn new() -> Self {
        Self::with_rule(LayoutRule::Alignment)
    }

    /// Packs `args` into a new 4096-byte buffer by [`LayoutRule::Alignment`].
    ///
    /// # Errors
    /// [`PackError`] when the parameters need more than 4096 bytes or number more than
    /// [`MAX_PARAMS`] (pack those into a `PackedArgs::<CAP, N>::default()` with
    /// [`extend`](Self::extend)).
    pub fn from_args<A: KernelArgs>(args: &A) -> Result<Self, PackError> {
        let mut packed = Self::new();
        packed.extend(args)?;
        Ok(packed)
    }
}

impl<const CAP: usize, const N: usize> Default for PackedArgs<CAP, N> {
    fn default() -> Self {
        Self::with_rule(LayoutRule::Alignment)
    }
}

impl<const CAP: usize, const N: usize> PackedArgs<CAP, N> {
    /// An empty buffer of `CAP` bytes for `N` parameters, placing them by `rule`.
    #[must_use]
    pub const fn with_rule(rule: LayoutRule) -> Self {
        Self {
            buf: AlignedBytes([0; CAP]),
            len: 0,
            rule,
            count: 0,
            params: [ParamInfo {
                offset: 0,
                size: 0,
                align: 0,
            }; N],
        }
    }

    /// Appends one parameter at the next offset its device alignment allows.
    ///
    /// # Errors
    /// [`PackError::TooLarge`] when it would end past `CAP` bytes,
    /// [`PackError::TooManyParams`] when `N` are already packed. On error the buffer is
    /// unchanged.
    pub fn push<T: DeviceRepr>(&mut self, value: &T) -> Result<(), PackError> {
        let index = self.count;
        let Some(slot) = self.params.get_mut(index) else {
            return Err(PackError::TooManyParams { max: N });
        };
        let info = place_param(self.rule, self.len, ParamSpec::of::<T>(), index, CAP)?;
        let end = info.offset + info.size; // `place_param` checked `end <= CAP`
        let Some(bytes) = self.buf.0.get_mut(self.len..end) else {
            return Err(PackError::TooLarge {
                index,
                needed: end,
                capacity: CAP,
            });
        };
        bytes.fill(0);
        let Some(dst) = bytes.get_mut(info.offset - self.len..) else {
            return Err(PackError::TooLarge {
                index,
                needed: end,
                capacity: CAP,
            });
        };
        // SAFETY: `dst` is exactly `info.size == T::DEVICE_SIZE` bytes of `self.buf`,
        // which `value` (a shared reference) cannot overlap.
        unsafe { store(value, dst.as_mut_ptr()) };
        *slot = info;
        self.count = index + 1;
        self.len = end;
        Ok(())
    }

    /// Appends every parameter of `args`, in order.
    ///
    /// Into an empty buffer placing by [`LayoutRule::Alignment`] (a new one, or one just
    /// [`clear`](Self::clear)ed: the hot-loop use), the layout of `A` is computed at
    /// compile time and the parameters are stored at constant offsets; otherwise each is
    /// placed as by [`push`](Self::push). Both give the same bytes and records.
    ///
    /// # Errors
    /// As [`push`](Self::push); the parameters before the failing one stay packed.
    #[inline]
    pub fn extend<A: KernelArgs>(&mut self, args: &A) -> Result<(), PackError> {
        if self.count == 0 && self.rule == LayoutRule::Alignment && self.pack_aligned(args) {
            return Ok(());
        }
        args.visit(&mut Pusher(self))
    }

    /// Packs `args` into this empty buffer at the [`LayoutRule::Alignment`] offsets known
    /// at compile time. Returns `false`, leaving the buffer empty, when they do not fit:
    /// the general path then reports which parameter failed.
    #[inline]
    fn pack_aligned<A: KernelArgs>(&mut self, args: &A) -> bool {
        let size = const {
            match params_size(LayoutRule::Alignment, A::PARAMS) {
                Some(size) => size,
                None => usize::MAX,
            }
        };
        let Some(bytes) = self.buf.0.get_mut(..size) else {
            return false;
        };
        bytes.fill(0);
        let mut writer = AlignedWriter {
            bytes,
            params: self.params.as_mut_slice(),
            end: 0,
            index: 0,
        };
        if args.visit(&mut writer).is_err() {
            return false;
        }
        self.len = size;
        self.count = writer.index;
        true
    }

    /// Removes every parameter.
    #[inline]
    pub fn clear(&mut self) {
        self.len = 0;
        self.count = 0;
    }

    /// The packed bytes: `len()` of them, from offset 0.
    #[must_use]
    pub fn as_bytes(&self) -> &[u8] {
        self.buf.0.get(..self.len).unwrap_or(&[])
    }

    /// Pointer to the buffer (16-byte aligned), for `CU_LAUNCH_PARAM_BUFFER_POINTER`.
    #[must_use]
    pub const fn as_ptr(&self) -> *const u8 {
        self.buf.0.as_ptr()
    }

    /// Number of packed bytes (the end of the last parameter), for
    /// `CU_LAUNCH_PARAM_BUFFER_SIZE`.
    #[must_use]
    pub const fn len(&self) -> usize {
        self.len
    }

    /// Whether no parameter bytes are packed.
    #[must_use]
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The rule parameters are placed by.
    #[must_use]
    pub const fn rule(&self) -> LayoutRule {
        self.rule
    }

    /// Offset, size and alignment of each packed parameter, in order.
    #[must_use]
    pub fn params(&self) -> &[ParamInfo] {
        self.params.get(..self.count).unwrap_or(&[])
    }

    /// Compares the packed layout with the kernel's, as `cuFuncGetParamInfo` reports it:
    /// `reported` yields `(offset, size)` for parameter 0, 1, ... in order.
    ///
    /// # Errors
    /// The first difference: [`LayoutMismatch::Offset`] or [`LayoutMismatch::Size`] for
    /// the lowest parameter index that differs, else [`LayoutMismatch::Count`] when the
    /// kernel takes fewer or more parameters than were packed.
    pub fn verify<I>(&self, reported: I) -> Result<(), LayoutMismatch>
    where
        I: IntoIterator<Item = (usize, usize)>,
    {
        let params = self.params();
        let mut reported = reported.into_iter();
        for (index, packed) in params.iter().enumerate() {
            let Some((offset, size)) = reported.next() else {
                return Err(LayoutMismatch::Count {
                    packed: params.len(),
                    reported: index,
                });
            };
            if offset != packed.offset {
                return Err(LayoutMismatch::Offset {
                    index,
                    packed: packed.offset,
                    reported: offset,
                });
            }
            if size != packed.size {
                return Err(LayoutMismatch::Size {
                    index,
                    packed: packed.size,
                    reported: size,
                });
            }
        }
        match reported.count() {
            0 => Ok(()),
            extra => Err(LayoutMismatch::Count {
                packed: params.len(),
                reported: params.len().saturating_add(extra),
            }),
        }
    }
}

impl<const CAP: usize, const N: usize> fmt::Debug for PackedArgs<CAP, N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PackedArgs")
            .field("rule", &self.rule)
            .field("len", &self.len)
            .field("params", &self.params())
            .finish_non_exhaustive()
    }
}

/// Stores each visited parameter at the next alignment offset of a zeroed byte slice that
/// holds the whole list, and records it. Once inlined, the offsets are constants.
struct AlignedWriter<'a> {
    bytes: &'a mut [u8],
    params: &'a mut [ParamInfo],
    end: usize,
    index: usize,
}

impl ArgVisitor for AlignedWriter<'_> {
    /// The list does not fit: more parameters than records, or past the slice.
    type Error = ();

    #[inline]
    fn visit<T: DeviceRepr>(&mut self, value: &T) -> Result<(), ()> {
        let offset = align_up(self.end, T::DEVICE_ALIGN);
        let end = offset.saturating_add(T::DEVICE_SIZE);
        let (Some(dst), Some(slot)) = (
            self.bytes.get_mut(offset..end),
            self.params.get_mut(self.index),
        ) else {
            return Err(());
        };
        // SAFETY: `dst` is exactly `T::DEVICE_SIZE` bytes of the buffer, which `value` (a
        // shared reference) cannot overlap.
        unsafe { store(value, dst.as_mut_ptr()) };
        *slot = ParamInfo {
            offset,
            size: T::DEVICE_SIZE,
            align: T::DEVICE_ALIGN,
        };
        self.end = end;
        self.index += 1;
        Ok(())
    }
}

/// Pushes each visited parameter into a [`PackedArgs`].
struct Pusher<'a, const CAP: usize, const N: usize>(&'a mut PackedArgs<CAP, N>);

impl<const CAP: usize, const N: usize> ArgVisitor for Pusher<'_, CAP, N> {
    type Error = PackError;

    fn visit<T: DeviceRepr>(&mut self, value: &T) -> Result<(), PackError> {
        self.0.push(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::{Float2, Float3, Float4};

    /// `core::fmt::Write` into a fixed buffer, to test `Display` without `alloc`.
    struct Text {
        buf: [u8; 256],
        len: usize,
    }

    impl fmt::Write for Text {
        fn write_str(&mut self, s: &str) -> fmt::Result {
            let end = self.len + s.len();
            self.buf
                .get_mut(self.len..end)
                .ok_or(fmt::Error)?
                .copy_from_slice(s.as_bytes());
            self.len = end;
            Ok(())
        }
    }

    fn display_contains(e: &dyn core::error::Error, needle: &str) -> bool {
        let mut t = Text {
            buf: [0; 256],
            len: 0,
        };
        fmt::write(&mut t, format_args!("{e}")).unwrap();
        core::str::from_utf8(&t.buf[..t.len])
            .unwrap()
            .contains(needle)
    }

    fn guide_args() -> (i32, Float4, i8, f32, *const u8, Float2) {
        (
            -3,
            Float4::new(1.0, 2.0, 3.0, 4.0),
            7,
            0.5,
            0x1122_3344_5566_7788usize as *const u8,
            Float2::new(-1.0, 8.0),
        )
    }

    const GUIDE_LAYOUT: [(usize, usize); 6] =
        [(0, 4), (16, 16), (32, 1), (36, 4), (40, 8), (48, 8)];

    #[test]
    fn guide_example_is_packed_by_alignment() {
        let packed = PackedArgs::from_args(&guide_args()).unwrap();
        assert_eq!(packed.len(), 56);
        let offsets: [(usize, usize); 6] =
            core::array::from_fn(|i| (packed.params()[i].offset, packed.params()[i].size));
        assert_eq!(offsets, GUIDE_LAYOUT);
        let b = packed.as_bytes();
        assert_eq!(b[0..4], (-3i32).to_le_bytes());
        assert_eq!(b[4..16], [0; 12]);
        assert_eq!(b[16..20], 1.0f32.to_le_bytes());
        assert_eq!(b[28..32], 4.0f32.to_le_bytes());
        assert_eq!(b[32], 7);
        assert_eq!(b[33..36], [0; 3]);
        assert_eq!(b[36..40], 0.5f32.to_le_bytes());
        assert_eq!(b[40..48], 0x1122_3344_5566_7788u64.to_le_bytes());
        assert_eq!(b[48..52], (-1.0f32).to_le_bytes());
        assert_eq!(b[52..56], 8.0f32.to_le_bytes());
        assert_eq!(packed.as_ptr() as usize % 16, 0);
        assert_eq!(packed.verify(GUIDE_LAYOUT), Ok(()));
    }

    #[test]
    fn verify_rejects_each_mismatch() {
        let packed = PackedArgs::from_args(&guide_args()).unwrap();
        let mut wrong_offset = GUIDE_LAYOUT;
        wrong_offset[3] = (33, 4);
        let e = packed.verify(wrong_offset).unwrap_err();
        assert_eq!(
            e,
            LayoutMismatch::Offset {
                index: 3,
                packed: 36,
                reported: 33
            }
        );
        assert!(display_contains(&e, "parameter 3 packed at offset 36"));

        let mut wrong_size = GUIDE_LAYOUT;
        wrong_size[1] = (16, 12);
        let e = packed.verify(wrong_size).unwrap_err();
        assert_eq!(
            e,
            LayoutMismatch::Size {
                index: 1,
                packed: 16,
                reported: 12
            }
        );
        assert!(display_contains(&e, "expects 12 bytes"));

        let e = packed.verify(GUIDE_LAYOUT.into_iter().take(4)).unwrap_err();
        assert_eq!(
            e,
            LayoutMismatch::Count {
                packed: 6,
                reported: 4
            }
        );
        assert!(display_contains(&e, "kernel takes 4"));

        let more = GUIDE_LAYOUT.into_iter().chain([(56, 4), (60, 4)]);
        assert_eq!(
            packed.verify(more),
            Err(LayoutMismatch::Count {
                packed: 6,
                reported: 8
            })
        );
        assert_eq!(
            PackedArgs::new().verify([(0, 4)]),
            Err(LayoutMismatch::Count {
                packed: 0,
                reported: 1
            })
        );
        assert_eq!(PackedArgs::new().verify([]), Ok(()));
    }

    #[test]
    fn four_kib_limit() {
        let mut packed = PackedArgs::new();
        packed.push(&[0u8; 4090]).unwrap();
        packed.push(&1u16).unwrap(); // 4090..4092
        let e = packed.push(&1u64).unwrap_err(); // would be 4096..4104
        assert_eq!(
            e,
            PackError::TooLarge {
                index: 2,
                needed: 4104,
                capacity: 4096
            }
        );
        assert!(display_contains(&e, "4104 bytes"));
        assert_eq!(packed.len(), 4092);
        assert_eq!(packed.params().len(), 2);
        packed.push(&1u32).unwrap(); // exactly fills 4092..4096
        assert_eq!(packed.len(), 4096);
        assert!(PackedArgs::from_args(&([0u8; 4096], 1u8)).is_err());
    }

    #[test]
    fn too_many_params() {
        let mut packed = PackedArgs::new();
        for i in 0..MAX_PARAMS {
            packed.push(&(i as u8)).unwrap();
        }
        let e = packed.push(&0u8).unwrap_err();
        assert_eq!(e, PackError::TooManyParams { max: 64 });
        assert!(display_contains(&e, "more than 64"));
        assert_eq!(packed.params().len(), 64);
        assert_eq!(packed.as_bytes()[63], 63);
    }

    /// 25 `u32` parameters, `first` to `first + 24`.
    fn quarter(first: u32) -> [u32; 25] {
        core::array::from_fn(|i| first + i as u32)
    }

    #[test]
    fn more_than_64_params_with_a_larger_record() {
        // 100 u32 parameters: pushed one by one, and extended as four 25-tuples.
        let mut pushed = PackedArgs::<4096, 128>::default();
        for i in 0..100u32 {
            pushed.push(&i).unwrap();
        }
        assert_eq!((pushed.params().len(), pushed.len()), (100, 400));
        let mut extended = PackedArgs::<4096, 128>::default();
        for q in 0..4 {
            let v = quarter(q * 25);
            let t = (
                v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11], v[12],
                v[13], v[14], v[15], v[16], v[17], v[18], v[19], v[20], v[21], v[22], v[23], v[24],
            );
            extended.extend(&t).unwrap();
        }
        assert_eq!(extended.as_bytes(), pushed.as_bytes());
        assert_eq!(extended.params(), pushed.params());
        assert_eq!(pushed.as_bytes()[396..400], 99u32.to_le_bytes());
        assert_eq!(pushed.params()[99].offset, 396);

        // The layout check reads every reported entry, past 64.
        let layout = |i: usize| (4 * i, 4);
        assert_eq!(pushed.verify((0..100).map(layout)), Ok(()));
        assert_eq!(
            pushed.verify((0..100).map(|i| if i == 77 { (309, 4) } else { layout(i) })),
            Err(LayoutMismatch::Offset {
                index: 77,
                packed: 308,
                reported: 309
            })
        );
        assert_eq!(
            pushed.verify((0..101).map(layout)),
            Err(LayoutMismatch::Count {
                packed: 100,
                reported: 101
            })
        );
        assert_eq!(
            pushed.verify((0..70).map(layout)),
            Err(LayoutMismatch::Count {
                packed: 100,
                reported: 70
            })
        );

        // The record's own limit is reported with its size.
        for i in 100..128u32 {
            pushed.push(&i).unwrap();
        }
        assert_eq!(
            pushed.push(&0u32),
            Err(PackError::TooManyParams { max: 128 })
        );
        assert_eq!(pushed.params().len(), 128);
    }

    #[test]
    fn compile_time_path_falls_back_when_the_record_is_short() {
        let args = (
            0u8, 1u8, 2u8, 3u8, 4u8, 5u8, 6u8, 7u8, 8u8, 9u8, 10u8, 11u8, 12u8, 13u8, 14u8, 15u8,
            16u8, 17u8, 18u8, 19u8,
        );
        let mut short = PackedArgs::<64, 16>::default();
        assert_eq!(
            short.extend(&args),
            Err(PackError::TooManyParams { max: 16 })
        );
        assert_eq!(short.params().len(), 16);
        assert_eq!(
            short.as_bytes(),
            &core::array::from_fn::<u8, 16, _>(|i| i as u8)
        );
        let mut enough = PackedArgs::<64, 20>::default();
        enough.extend(&args).unwrap();
        assert_eq!(enough.len(), 20);
    }

    #[test]
    fn driver_limit_of_32764_bytes() {
        // 4095 pointers and one u32: exactly the driver's 32,764 bytes.
        let mut packed = PackedArgs::<32764, 4096>::default();
        for i in 0..4095u64 {
            packed.push(&i).unwrap();
        }
        packed.push(&7u32).unwrap();
        assert_eq!((packed.len(), packed.params().len()), (32764, 4096));
        assert_eq!(packed.params()[4095].offset, 32760);
        assert_eq!(packed.as_bytes()[32752..32760], 4094u64.to_le_bytes());
        assert_eq!(
            packed.verify((0..4096).map(|i| (8 * i, if i == 4095 { 4 } else { 8 }))),
            Ok(())
        );
        let e = packed.push(&1u8).unwrap_err();
        assert_eq!(
            e,
            PackError::TooManyParams { max: 4096 },
            "the record is full before the bytes"
        );
    }

    #[test]
    fn size_multiple_rule_differs() {
        let mut by_align = PackedArgs::new();
        let mut by_size = PackedArgs::<4096>::with_rule(LayoutRule::SizeMultiple);
        for p in [&mut by_align, &mut by_size] {
            p.extend(&(1u8, Float3::new(1.0, 2.0, 3.0), [0u32; 3]))
                .unwrap();
        }
        let offsets = |p: &PackedArgs| [p.params()[1].offset, p.params()[2].offset];
        assert_eq!(offsets(&by_align), [4, 16]);
        assert_eq!(offsets(&by_size), [12, 24]);
        assert_eq!(by_size.rule(), LayoutRule::SizeMultiple);
    }

    #[test]
    fn compile_time_path_matches_push() {
        let args = guide_args();
        let mut fast = PackedArgs::new();
        fast.push(&[u64::MAX; 8]).unwrap();
        fast.clear(); // stale bytes under the padding must be zeroed again
        fast.extend(&args).unwrap();
        let mut slow = PackedArgs::new();
        args.visit(&mut Pusher(&mut slow)).unwrap(); // the general path, one push each
        assert_eq!(fast.as_bytes(), slow.as_bytes());
        assert_eq!(fast.params(), slow.params());
        assert_eq!(fast.len(), 56);

        // Appending to a non-empty buffer takes the general path, and the result is the
        // same as packing the concatenation.
        let mut two = PackedArgs::from_args(&(1u8,)).unwrap();
        two.extend(&(2u64, Float4::new(1.0, 2.0, 3.0, 4.0)))
            .unwrap();
        let one = PackedArgs::from_args(&(1u8, 2u64, Float4::new(1.0, 2.0, 3.0, 4.0))).unwrap();
        assert_eq!(two.as_bytes(), one.as_bytes());
        assert_eq!(two.params(), one.params());

        // A list that does not fit falls back and names the failing parameter.
        let e = PackedArgs::from_args(&([0u8; 4090], 1u64)).unwrap_err();
        assert_eq!(
            e,
            PackError::TooLarge {
                index: 1,
                needed: 4104,
                capacity: 4096
            }
        );
        let mut small = PackedArgs::<16>::default();
        assert!(small.extend(&(1u64, 2u32, 3u64)).is_err());
        assert_eq!(
            small.len(),
            12,
            "the parameters before the failing one stay packed"
        );
    }

    #[test]
    fn clear_rezeroes_padding() {
        let mut packed = PackedArgs::<64>::default();
        packed.push(&u64::MAX).unwrap();
        packed.clear();
        assert!(packed.is_empty());
        packed.push(&1u8).unwrap();
        packed.push(&2u64).unwrap();
        assert_eq!(packed.as_bytes()[..8], [1, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(packed.len(), 16);
    }
}
