//! [`Dim3`]: CUDA's `dim3`, shared by the host launch builders and the device code.

/// CUDA `dim3`: a grid, block or cluster extent, or a three-component index.
///
/// `#[repr(C)]`, so it passes by value to the device runtime as the C type does
/// (`.param .align 4 .b8 [12]`). Converts from `u32` (`(x, 1, 1)`), `(u32, u32)`
/// (`(x, y, 1)`), `(u32, u32, u32)` and `[u32; 3]`, so launch builders accept `256`,
/// `(16, 16)` or `(4, 4, 4)`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Dim3 {
    /// Extent or index along x.
    pub x: u32,
    /// Extent or index along y.
    pub y: u32,
    /// Extent or index along z.
    pub z: u32,
}

impl Dim3 {
    /// `(x, y, z)`.
    #[inline]
    #[must_use]
    pub const fn new(x: u32, y: u32, z: u32) -> Self {
        Self { x, y, z }
    }

    /// `(x, 1, 1)`.
    #[inline]
    #[must_use]
    pub const fn x(x: u32) -> Self {
        Self { x, y: 1, z: 1 }
    }

    /// `x * y * z` (threads in a block, blocks in a grid), saturating at `u64::MAX`.
    #[inline]
    #[must_use]
    pub const fn volume(self) -> u64 {
        (self.x as u64)
            .saturating_mul(self.y as u64)
            .saturating_mul(self.z as u64)
    }
}

impl Default for Dim3 {
    /// `(1, 1, 1)`, as in CUDA.
    fn default() -> Self {
        Self::new(1, 1, 1)
    }
}

impl From<u32> for Dim3 {
    #[inline]
    fn from(x: u32) -> Self {
        Self::x(x)
    }
}

impl From<(u32, u32)> for Dim3 {
    #[inline]
    fn from((x, y): (u32, u32)) -> Self {
        Self::new(x, y, 1)
    }
}

impl From<(u32, u32, u32)> for Dim3 {
    #[inline]
    fn from((x, y, z): (u32, u32, u32)) -> Self {
        Self::new(x, y, z)
    }
}

impl From<[u32; 3]> for Dim3 {
    #[inline]
    fn from([x, y, z]: [u32; 3]) -> Self {
        Self::new(x, y, z)
    }
}

#[cfg(test)]
mod tests {
    use super::Dim3;

    #[test]
    fn conversions() {
        assert_eq!(Dim3::from(7), Dim3::new(7, 1, 1));
        assert_eq!(Dim3::from((2, 3)), Dim3::new(2, 3, 1));
        assert_eq!(Dim3::from((2, 3, 4)), Dim3::new(2, 3, 4));
        assert_eq!(Dim3::from([5, 6, 7]).volume(), 210);
        assert_eq!(Dim3::default(), Dim3::x(1));
        assert_eq!(Dim3::new(u32::MAX, u32::MAX, u32::MAX).volume(), u64::MAX);
    }
}
