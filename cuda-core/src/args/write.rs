//! Writing a parameter list into a caller's buffer: the device-side parameter buffer of
//! `cudaGetParameterBufferV2` (64-byte aligned, 4 KB), or any byte slice.

use super::layout::place_param;
use super::{ArgVisitor, DeviceRepr, KernelArgs, LayoutRule, PackError, ParamSpec};

/// Writes `value`'s device bytes to `dst`.
///
/// # Safety
/// `dst` must be valid for writes of `T::DEVICE_SIZE` bytes and must not overlap `value`.
pub(crate) unsafe fn store<T: DeviceRepr>(value: &T, dst: *mut u8) {
    const {
        assert!(
            T::DEVICE_SIZE == core::mem::size_of::<T>(),
            "DeviceRepr::DEVICE_SIZE differs from the host size"
        );
    }
    // SAFETY: forwarded from the caller.
    unsafe { value.write_device_bytes(dst) }
}

/// Writes `args` into `dst` placed by `rule`, and returns the number of bytes used (the
/// end of the last parameter).
///
/// Bytes between parameters are left as they were. The offsets are the ones
/// [`PackedArgs`](super::PackedArgs) computes for the same rule.
///
/// # Errors
/// [`PackError::TooLarge`] when a parameter would end past `dst.len()`; the parameters
/// before it are already written.
pub fn write_params<A: KernelArgs>(
    rule: LayoutRule,
    dst: &mut [u8],
    args: &A,
) -> Result<usize, PackError> {
    // SAFETY: a mutable slice is valid for writes of its length and, being borrowed
    // mutably, does not overlap `args`.
    unsafe { write_params_raw(rule, dst.as_mut_ptr(), dst.len(), args) }
}

/// Writes `args` into the `capacity` bytes at `dst` placed by `rule`, and returns the
/// number of bytes used. For buffers that may be uninitialized, such as the device
/// runtime's parameter buffer (`cudaGetParameterBufferV2`, 64-byte aligned, 4096 bytes).
///
/// Only parameter bytes are written; padding between parameters is left as it was.
///
/// # Safety
/// `dst` must be valid for writes of `capacity` bytes and must not overlap `args`.
///
/// # Errors
/// [`PackError::TooLarge`] when a parameter would end past `capacity`; the parameters
/// before it are already written.
pub unsafe fn write_params_raw<A: KernelArgs>(
    rule: LayoutRule,
    dst: *mut u8,
    capacity: usize,
    args: &A,
) -> Result<usize, PackError> {
    let mut writer = Writer {
        rule,
        dst,
        capacity,
        end: 0,
        index: 0,
    };
    args.visit(&mut writer)?;
    Ok(writer.end)
}

/// Places and writes each visited parameter; holds the caller's `write_params_raw`
/// contract for `dst` and `capacity`.
struct Writer {
    rule: LayoutRule,
    dst: *mut u8,
    capacity: usize,
    end: usize,
    index: usize,
}

impl ArgVisitor for Writer {
    type Error = PackError;

    fn visit<T: DeviceRepr>(&mut self, value: &T) -> Result<(), PackError> {
        let info = place_param(
            self.rule,
            self.end,
            ParamSpec::of::<T>(),
            self.index,
            self.capacity,
        )?;
        // SAFETY: `place_param` checked `info.offset + T::DEVICE_SIZE <= capacity`, and
        // the `write_params_raw` caller guarantees `dst` is valid for `capacity` byte
        // writes and does not overlap `args` (which `value` is part of).
        unsafe { store(value, self.dst.add(info.offset)) };
        self.end = info.offset + info.size;
        self.index += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::{Float2, Float3, Float4, PackedArgs};

    #[repr(C, align(64))]
    struct DeviceBuffer([u8; 4096]);

    #[test]
    fn same_bytes_as_packed_args() {
        let args = (
            5i32,
            Float4::new(1.0, 2.0, 3.0, 4.0),
            1i8,
            2.0f32,
            core::ptr::null::<u8>(),
            Float2::new(3.0, 4.0),
        );
        let mut buf = DeviceBuffer([0; 4096]);
        let n = write_params(LayoutRule::Alignment, &mut buf.0, &args).unwrap();
        let packed = PackedArgs::from_args(&args).unwrap();
        assert_eq!(n, 56);
        assert_eq!(&buf.0[..n], packed.as_bytes());
    }

    #[test]
    fn size_multiple_rule_and_limit() {
        let mut buf = [0xeeu8; 24];
        let n = write_params(
            LayoutRule::SizeMultiple,
            &mut buf,
            &(9u8, Float3::new(1.0, 2.0, 3.0)),
        )
        .unwrap();
        assert_eq!(n, 24);
        assert_eq!(buf[0], 9);
        assert_eq!(buf[1..12], [0xee; 11], "padding is left untouched");
        assert_eq!(buf[12..16], 1.0f32.to_le_bytes());

        let e = write_params(LayoutRule::Alignment, &mut buf, &(0u64, [0u8; 17])).unwrap_err();
        assert_eq!(
            e,
            PackError::TooLarge {
                index: 1,
                needed: 25,
                capacity: 24
            }
        );
        assert_eq!(write_params(LayoutRule::Alignment, &mut [], &()), Ok(0));
    }
}
