//! Checking an argument list against the kernel's parameter layout as the driver reports
//! it (`cuFuncGetParamInfo`, CUDA 12.4+).

use cuda_sys::{CUfunction, CUresult, DriverApi};

use crate::args::{KernelArgs, LayoutMismatch, LayoutRule, PackedArgs, param_offset};
use crate::driver::api;
use crate::error::{Error, Result};
use crate::function::Function;

/// No kernel has more parameters than this (32 KiB of parameters of one byte each); the
/// probe for the end of the list stops here in any case.
const PARAM_LIMIT: usize = 32 * 1024;

/// The kernel's `(offset, size)` per parameter, in order, from `cuFuncGetParamInfo`.
///
/// Ends at the first index the driver rejects with `CUDA_ERROR_INVALID_VALUE` (past the
/// last parameter); any other failure ends it too and is kept in `error`.
struct Reported<'e> {
    cu: &'static DriverApi,
    f: CUfunction,
    index: usize,
    error: &'e mut Option<Error>,
}

impl Iterator for Reported<'_> {
    type Item = (usize, usize);

    fn next(&mut self) -> Option<(usize, usize)> {
        if self.error.is_some() || self.index >= PARAM_LIMIT {
            return None;
        }
        let entry = match self.cu.cuFuncGetParamInfo() {
            Ok(entry) => entry,
            Err(missing) => {
                *self.error = Some(Error::MissingSymbol(missing));
                return None;
            }
        };
        let (mut offset, mut size) = (0usize, 0usize);
        // SAFETY: `f` is a live function handle (borrowed by the caller) and both
        // out-pointers are valid.
        let rc = unsafe { entry(self.f, self.index, &mut offset, &mut size) };
        match rc {
            CUresult::CUDA_SUCCESS => {
                self.index += 1;
                Some((offset, size))
            }
            CUresult::CUDA_ERROR_INVALID_VALUE => None,
            code => {
                *self.error = Some(Error::driver("cuFuncGetParamInfo", code));
                None
            }
        }
    }
}

/// Runs `check` over the reported layout of `f`; a driver failure wins over a mismatch
/// it may have caused.
fn with_reported<F>(f: CUfunction, check: F) -> Result<()>
where
    F: FnOnce(&mut dyn Iterator<Item = (usize, usize)>) -> core::result::Result<(), LayoutMismatch>,
{
    let cu = api()?;
    let mut error = None;
    let outcome = check(&mut Reported {
        cu,
        f,
        index: 0,
        error: &mut error,
    });
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

impl Function<'_> {
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
        with_reported(self.as_raw(), |reported| {
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
    pub fn verify_packed<const CAP: usize>(&self, packed: &PackedArgs<CAP>) -> Result<()> {
        with_reported(self.as_raw(), |reported| packed.verify(reported))
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
