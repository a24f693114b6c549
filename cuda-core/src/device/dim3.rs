//! [`Dim3`]: CUDA's `dim3`, for indices and launch shapes.

/// CUDA `dim3`: three `u32` extents or indices, `#[repr(C)]` so it passes by value to
/// the device runtime as the C type does (`.param .align 4 .b8 [12]`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Dim3 {
    /// x component.
    pub x: u32,
    /// y component.
    pub y: u32,
    /// z component.
    pub z: u32,
}

impl Dim3 {
    /// `(x, y, z)`.
    #[inline(always)]
    #[must_use]
    pub const fn new(x: u32, y: u32, z: u32) -> Self {
        Self { x, y, z }
    }

    /// `(x, 1, 1)`.
    #[inline(always)]
    #[must_use]
    pub const fn x(x: u32) -> Self {
        Self { x, y: 1, z: 1 }
    }
}

impl Default for Dim3 {
    /// `(1, 1, 1)`, as in CUDA.
    fn default() -> Self {
        Self::new(1, 1, 1)
    }
}
