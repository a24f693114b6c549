//! Errors of the parameter packers and of the layout check.

use core::fmt;

/// A parameter list that does not fit its parameter buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PackError {
    /// Parameter `index` would end at byte `needed`, past the buffer's `capacity`
    /// (4096 bytes for the classic CUDA limit and the device-side parameter buffer).
    /// `needed` is `usize::MAX` when the offset computation overflowed.
    TooLarge {
        /// Index of the parameter that did not fit.
        index: usize,
        /// End offset the parameter would need.
        needed: usize,
        /// Size of the buffer.
        capacity: usize,
    },
    /// More parameters than the packer records (see [`MAX_PARAMS`](super::MAX_PARAMS)).
    TooManyParams {
        /// The most parameters the packer records.
        max: usize,
    },
}

impl fmt::Display for PackError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::TooLarge {
                index,
                needed,
                capacity,
            } => write!(
                f,
                "kernel parameter {index} needs the parameter buffer to hold {needed} bytes, \
                 more than its {capacity}"
            ),
            Self::TooManyParams { max } => {
                write!(f, "more than {max} kernel parameters to pack")
            }
        }
    }
}

impl core::error::Error for PackError {}

/// A packed parameter layout that differs from the layout the driver reports for the
/// kernel (`cuFuncGetParamInfo`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LayoutMismatch {
    /// The kernel takes a different number of parameters than were packed.
    Count {
        /// Parameters packed.
        packed: usize,
        /// Parameters the driver reports.
        reported: usize,
    },
    /// Parameter `index` was packed at a different offset than the kernel expects.
    Offset {
        /// Index of the parameter.
        index: usize,
        /// Offset it was packed at.
        packed: usize,
        /// Offset the driver reports.
        reported: usize,
    },
    /// Parameter `index` has a different size than the kernel expects.
    Size {
        /// Index of the parameter.
        index: usize,
        /// Size it was packed with.
        packed: usize,
        /// Size the driver reports.
        reported: usize,
    },
}

impl fmt::Display for LayoutMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::Count { packed, reported } => write!(
                f,
                "{packed} kernel parameters packed, but the kernel takes {reported}"
            ),
            Self::Offset {
                index,
                packed,
                reported,
            } => write!(
                f,
                "kernel parameter {index} packed at offset {packed}, but the kernel expects \
                 it at offset {reported}"
            ),
            Self::Size {
                index,
                packed,
                reported,
            } => write!(
                f,
                "kernel parameter {index} packed as {packed} bytes, but the kernel expects \
                 {reported} bytes"
            ),
        }
    }
}

impl core::error::Error for LayoutMismatch {}
