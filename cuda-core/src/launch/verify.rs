//! Checking an argument list against the kernel's parameter layout as the driver reports
//! it (`cuFuncGetParamInfo`, CUDA 12.4+).

use crate::args::{KernelArgs, LayoutMismatch, LayoutRule, PackedArgs, param_offset};
use crate::driver::function::Function;
use crate::error::{Error, Result};

/// Runs `check` over the reported layout of `f`: `cuFuncGetParamInfo` for each index
/// below the kernel's parameter count (cached in `f`, see [`Function::param_count`]), so
/// no call past the end is made once the count is known. A driver failure wins over a
/// mismatch it may have caused.
fn with_reported<F>(f: &Function, check: F) -> Result<()>
where
    F: FnOnce(&mut dyn Iterator<Item = (usize, usize)>) -> core::result::Result<(), LayoutMismatch>,
{
    let count = f.param_count()?;
    let mut error = None;
    let outcome = check(&mut (0..count).map_while(|i| match f.param_info(i) {
        Ok(entry) => Some(entry),
        Err(e) => {
            error = Some(e);
            None
        }
    }));
    match (error, outcome) {
        (Some(e), _) => Err(e),
        (None, r) => r.map_err(Error::Layout),
    }
}

/// Compares the `expected` `(offset, size)` list with `reported`, as
/// [`PackedArgs::verify`] does: the first offset or size difference, else a count
/// difference.
pub(crate) fn compare_layout<E, R>(
    expected: E,
    reported: R,
) -> core::result::Result<(), LayoutMismatch>
where
    E: ExactSizeIterator<Item = (usize, usize)>,
    R: IntoIterator<Item = (usize, usize)>,
{
    let count = expected.len();
    let mut reported = reported.into_iter();
    for (index, (offset, size)) in expected.enumerate() {
        let Some((r_offset, r_size)) = reported.next() else {
            return Err(LayoutMismatch::Count {
                packed: count,
                reported: index,
            });
        };
        if r_offset != offset {
            return Err(LayoutMismatch::Offset {
                index,
                packed: offset,
                reported: r_offset,
            });
        }
        if r_size != size {
            return Err(LayoutMismatch::Size {
                index,
                packed: size,
                reported: r_size,
            });
        }
    }
    match reported.count() {
        0 => Ok(()),
        extra => Err(LayoutMismatch::Count {
            packed: count,
            reported: count.saturating_add(extra),
        }),
    }
}

/// The `(offset, size)` of each parameter of `A`, laid out by device alignment.
fn expected_layout<A: KernelArgs>() -> impl ExactSizeIterator<Item = (usize, usize)> {
    A::PARAMS.iter().enumerate().map(|(i, spec)| {
        // An offset that overflows cannot match any reported offset.
        let offset = param_offset(LayoutRule::Alignment, A::PARAMS, i).unwrap_or(usize::MAX);
        (offset, spec.size)
    })
}

impl Function {
    /// Checks that the argument tuple type `A` matches this kernel's parameters as
    /// `cuFuncGetParamInfo` reports them: the same count, and each parameter at the same
    /// offset (by device alignment) with the same size.
    ///
    /// Check once, then launch with the unchecked [`launch`](crate::launch::launch) in
    /// a hot loop. Sizes and offsets are compared, not meanings: a `u64` where the
    /// kernel takes a pointer passes.
    ///
    /// # Errors
    /// [`Error::Layout`] with the first mismatch; [`Error::Driver`] naming
    /// `cuFuncGetParamInfo` when the driver cannot report the layout (driver before
    /// 12.4, or a function without parameter info).
    #[doc(alias = "cuFuncGetParamInfo")]
    pub fn verify_args<A: KernelArgs>(&self) -> Result<()> {
        with_reported(self, |reported| {
            compare_layout(expected_layout::<A>(), reported)
        })
    }

    /// Checks a packed buffer against this kernel's parameters as `cuFuncGetParamInfo`
    /// reports them (what [`launch_checked`](crate::launch::launch_checked) does before
    /// every launch).
    ///
    /// # Errors
    /// As [`verify_args`](Self::verify_args).
    #[doc(alias = "cuFuncGetParamInfo")]
    pub fn verify_packed<const CAP: usize, const N: usize>(
        &self,
        packed: &PackedArgs<CAP, N>,
    ) -> Result<()> {
        with_reported(self, |reported| packed.verify(reported))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::{Float2, Float4};

    #[test]
    fn expected_layout_follows_device_alignment() {
        type Guide = (i32, Float4, i8, f32, *const u8, Float2);
        let got: [(usize, usize); 6] = {
            let mut it = expected_layout::<Guide>();
            core::array::from_fn(|_| it.next().unwrap_or_default())
        };
        assert_eq!(got, [(0, 4), (16, 16), (32, 1), (36, 4), (40, 8), (48, 8)]);
        assert_eq!(expected_layout::<()>().len(), 0);
    }

    #[test]
    fn compare_reports_each_mismatch() {
        // The kernel takes (u64, u32); the caller passes (u32, u64).
        let kernel = [(0usize, 8usize), (8, 4)];
        assert_eq!(
            compare_layout(expected_layout::<(u32, u64)>(), kernel),
            Err(LayoutMismatch::Size {
                index: 0,
                packed: 4,
                reported: 8
            })
        );
        assert_eq!(
            compare_layout(expected_layout::<(u64, u32)>(), kernel),
            Ok(())
        );
        assert_eq!(
            compare_layout(expected_layout::<(u64,)>(), kernel),
            Err(LayoutMismatch::Count {
                packed: 1,
                reported: 2
            })
        );
        assert_eq!(
            compare_layout(expected_layout::<(u64, u32, u8)>(), kernel),
            Err(LayoutMismatch::Count {
                packed: 3,
                reported: 2
            })
        );
        assert_eq!(
            compare_layout(expected_layout::<(u32, u32)>(), [(0, 4), (8, 4)]),
            Err(LayoutMismatch::Offset {
                index: 1,
                packed: 4,
                reported: 8
            })
        );
    }

    #[test]
    fn compare_agrees_with_packed_verify() {
        let args = (1u8, Float2::new(1.0, 2.0), 3u64);
        let packed = PackedArgs::from_args(&args).unwrap_or_default();
        let reported = [(0usize, 1usize), (8, 8), (16, 8)];
        assert_eq!(packed.verify(reported), Ok(()));
        assert_eq!(
            compare_layout(expected_layout::<(u8, Float2, u64)>(), reported),
            Ok(())
        );
    }
}
