//! The one offset computation shared by the host packer, the device parameter-buffer
//! writer and [`kernel_struct!`](crate::kernel_struct).

use super::{DeviceRepr, PackError};

/// Rounds `off` up to the next multiple of `align`, or `None` on overflow.
///
/// `align` need not be a power of two (the [`LayoutRule::SizeMultiple`] rule rounds to
/// sizes such as 12); an `align` of 0 is treated as 1.
#[must_use]
#[inline]
pub const fn checked_align_up(off: usize, align: usize) -> Option<usize> {
    let align = if align == 0 { 1 } else { align };
    match off % align {
        0 => Some(off),
        rem => off.checked_add(align - rem),
    }
}

/// Rounds `off` up to the next multiple of `align`, saturating at `usize::MAX`.
///
/// Same as [`checked_align_up`] for every input that does not overflow; a saturated
/// result exceeds every parameter-buffer limit, so callers that compare against a limit
/// need no separate overflow check.
#[must_use]
#[inline]
pub const fn align_up(off: usize, align: usize) -> usize {
    match checked_align_up(off, align) {
        Some(v) => v,
        None => usize::MAX,
    }
}

/// Where each kernel parameter goes in a parameter buffer.
///
/// Parameters always keep their order and follow the previous one; the rules differ in
/// what the start offset must be a multiple of. They give the same offsets for scalars,
/// pointers and the power-of-two vector types, and differ for structs, arrays and
/// three-component vectors (a `{float; float4}` struct, size 32 and alignment 16, after an
/// `int`: offset 16 by alignment, 32 by size).
///
/// Settled on hardware (H100, driver 580, CUDA 13.0; `hw_device`'s
/// `device_side_launch_param_layout`): the device runtime reads a
/// `cudaGetParameterBufferV2` buffer at the kernel's own parameter offsets, which are the
/// [`Alignment`](Self::Alignment) offsets (the ones `cuFuncGetParamInfo` reports). A
/// buffer written by [`SizeMultiple`](Self::SizeMultiple) for a kernel taking a struct
/// after an `int` and a `float2` after that struct hands the child shifted bytes. The
/// guide's "multiple of its size" wording holds only where size and alignment agree.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum LayoutRule {
    /// Each parameter at the smallest multiple of its device **alignment** at or past the
    /// end of the previous one. This is the driver's rule for
    /// `CU_LAUNCH_PARAM_BUFFER_POINTER` and the C++ rule for a struct of the parameters.
    #[default]
    Alignment,
    /// Each parameter at the smallest multiple of its **size** at or past the end of the
    /// previous one: the CUDA Programming Guide's wording for the device-side parameter
    /// buffer (`cudaGetParameterBufferV2`). Kept so a hardware test can settle which rule
    /// the device runtime follows.
    SizeMultiple,
}

impl LayoutRule {
    /// The offset of a parameter of `size` bytes aligned to `align`, placed after a
    /// previous parameter ending at `end`; `None` on overflow.
    #[must_use]
    #[inline]
    pub const fn place(self, end: usize, size: usize, align: usize) -> Option<usize> {
        match self {
            Self::Alignment => checked_align_up(end, align),
            Self::SizeMultiple => checked_align_up(end, size),
        }
    }
}

/// The device size and alignment of one parameter or field type.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ParamSpec {
    /// Device size in bytes ([`DeviceRepr::DEVICE_SIZE`]).
    pub size: usize,
    /// Device alignment in bytes ([`DeviceRepr::DEVICE_ALIGN`]).
    pub align: usize,
}

impl ParamSpec {
    /// The device size and alignment of `T`.
    #[must_use]
    pub const fn of<T: DeviceRepr>() -> Self {
        Self {
            size: T::DEVICE_SIZE,
            align: T::DEVICE_ALIGN,
        }
    }
}

/// One parameter placed in a parameter buffer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ParamInfo {
    /// Offset from the start of the buffer, in bytes.
    pub offset: usize,
    /// Device size in bytes.
    pub size: usize,
    /// Device alignment in bytes.
    pub align: usize,
}

/// Places parameter `index` (with `spec`) after a previous parameter ending at `end`,
/// within a buffer of `capacity` bytes: the step both packers share.
#[inline]
pub(crate) const fn place_param(
    rule: LayoutRule,
    end: usize,
    spec: ParamSpec,
    index: usize,
    capacity: usize,
) -> Result<ParamInfo, PackError> {
    let offset = match rule.place(end, spec.size, spec.align) {
        Some(offset) => offset,
        None => usize::MAX,
    };
    let needed = offset.saturating_add(spec.size);
    if needed > capacity {
        return Err(PackError::TooLarge {
            index,
            needed,
            capacity,
        });
    }
    Ok(ParamInfo {
        offset,
        size: spec.size,
        align: spec.align,
    })
}

/// The offset of parameter `index` of the list `params` under `rule`; `None` if `index`
/// is out of range or an offset overflows.
///
/// Usable in constants, e.g. with [`KernelArgs::PARAMS`](super::KernelArgs::PARAMS).
#[must_use]
pub const fn param_offset(rule: LayoutRule, params: &[ParamSpec], index: usize) -> Option<usize> {
    let mut end = 0usize;
    let mut i = 0;
    while i < params.len() {
        let spec = params[i];
        let Some(offset) = rule.place(end, spec.size, spec.align) else {
            return None;
        };
        if i == index {
            return Some(offset);
        }
        let Some(next) = offset.checked_add(spec.size) else {
            return None;
        };
        end = next;
        i += 1;
    }
    None
}

/// The number of bytes the parameter list `params` takes under `rule` (the end of the
/// last parameter, without trailing padding); `None` on overflow.
#[must_use]
pub const fn params_size(rule: LayoutRule, params: &[ParamSpec]) -> Option<usize> {
    let mut end = 0usize;
    let mut i = 0;
    while i < params.len() {
        let spec = params[i];
        let Some(offset) = rule.place(end, spec.size, spec.align) else {
            return None;
        };
        let Some(next) = offset.checked_add(spec.size) else {
            return None;
        };
        end = next;
        i += 1;
    }
    Some(end)
}

/// The device layout of a C struct with fields `fields` in order: each field at the next
/// multiple of its alignment, the struct aligned to its most-aligned field and its size
/// rounded up to that alignment. `None` on overflow.
///
/// This is the layout [`kernel_struct!`](crate::kernel_struct) checks the host layout
/// against. An empty field list gives size 0 and alignment 1 (C++ would give size 1).
#[must_use]
pub const fn struct_layout(fields: &[ParamSpec]) -> Option<ParamSpec> {
    let mut align = 1usize;
    let mut i = 0;
    while i < fields.len() {
        if fields[i].align > align {
            align = fields[i].align;
        }
        i += 1;
    }
    let Some(end) = params_size(LayoutRule::Alignment, fields) else {
        return None;
    };
    match checked_align_up(end, align) {
        Some(size) => Some(ParamSpec { size, align }),
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::{Float2, Float3, Float4};

    const fn spec<T: DeviceRepr>() -> ParamSpec {
        ParamSpec::of::<T>()
    }

    /// The Programming Guide's example: int, float4, char, float, pointer, float2.
    const GUIDE: [ParamSpec; 6] = [
        spec::<i32>(),
        spec::<Float4>(),
        spec::<i8>(),
        spec::<f32>(),
        spec::<*const u8>(),
        spec::<Float2>(),
    ];

    #[test]
    fn align_up_rounds() {
        assert_eq!(align_up(0, 16), 0);
        assert_eq!(align_up(1, 16), 16);
        assert_eq!(align_up(16, 16), 16);
        assert_eq!(align_up(13, 12), 24);
        assert_eq!(align_up(5, 0), 5);
        assert_eq!(checked_align_up(usize::MAX, 2), None);
        assert_eq!(align_up(usize::MAX - 1, 4), usize::MAX);
    }

    #[test]
    fn guide_example_offsets() {
        let offsets: [Option<usize>; 6] =
            core::array::from_fn(|i| param_offset(LayoutRule::Alignment, &GUIDE, i));
        assert_eq!(
            offsets,
            [Some(0), Some(16), Some(32), Some(36), Some(40), Some(48)]
        );
        assert_eq!(params_size(LayoutRule::Alignment, &GUIDE), Some(56));
        assert_eq!(param_offset(LayoutRule::Alignment, &GUIDE, 6), None);
        // The size rule agrees here: every parameter's size is its alignment.
        assert_eq!(params_size(LayoutRule::SizeMultiple, &GUIDE), Some(56));
    }

    #[test]
    fn rules_differ_for_three_component_vectors() {
        let list = [spec::<u8>(), spec::<Float3>()];
        assert_eq!(param_offset(LayoutRule::Alignment, &list, 1), Some(4));
        assert_eq!(param_offset(LayoutRule::SizeMultiple, &list, 1), Some(12));
        assert_eq!(params_size(LayoutRule::SizeMultiple, &list), Some(24));
    }

    #[test]
    fn rules_differ_for_structs() {
        let pair = ParamSpec {
            size: 32,
            align: 16,
        };
        let list = [spec::<i32>(), pair];
        assert_eq!(param_offset(LayoutRule::Alignment, &list, 1), Some(16));
        assert_eq!(param_offset(LayoutRule::SizeMultiple, &list, 1), Some(32));
    }

    #[test]
    fn struct_layout_pads_to_float4() {
        let l = struct_layout(&[spec::<f32>(), spec::<Float4>()]);
        assert_eq!(
            l,
            Some(ParamSpec {
                size: 32,
                align: 16
            })
        );
        assert_eq!(
            param_offset(LayoutRule::Alignment, &[spec::<f32>(), spec::<Float4>()], 1),
            Some(16)
        );
        assert_eq!(struct_layout(&[]), Some(ParamSpec { size: 0, align: 1 }));
        let huge = ParamSpec {
            size: usize::MAX,
            align: 1,
        };
        assert_eq!(struct_layout(&[spec::<u8>(), huge]), None);
    }

    #[test]
    fn place_param_reports_the_limit() {
        let big = ParamSpec {
            size: 4000,
            align: 8,
        };
        assert_eq!(
            place_param(LayoutRule::Alignment, 100, big, 3, 4096),
            Err(PackError::TooLarge {
                index: 3,
                needed: 4104,
                capacity: 4096
            })
        );
        assert_eq!(
            place_param(LayoutRule::Alignment, 90, big, 0, 4096),
            Ok(ParamInfo {
                offset: 96,
                size: 4000,
                align: 8
            })
        );
    }
}
