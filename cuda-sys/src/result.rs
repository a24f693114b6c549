//! `CUresult` and `cudaError_t` conveniences: names and descriptions without the driver.

use core::fmt;

use crate::{CUresult, cudaError_t};

impl CUresult {
    /// Whether this is `CUDA_SUCCESS`.
    pub const fn is_success(self) -> bool {
        self.0 == 0
    }

    /// `Ok(())` for `CUDA_SUCCESS`, else `Err(self)`.
    pub const fn result(self) -> Result<(), CUresult> {
        if self.is_success() { Ok(()) } else { Err(self) }
    }
}

impl fmt::Display for CUresult {
    /// `CUDA_ERROR_OUT_OF_MEMORY (2): The API call failed because it was unable to ...`;
    /// a code the headers do not know prints as `unknown CUresult 1234`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.name(), self.description()) {
            (Some(n), Some(d)) if !d.is_empty() => write!(f, "{n} ({}): {d}", self.0),
            (Some(n), _) => write!(f, "{n} ({})", self.0),
            _ => write!(f, "unknown CUresult {}", self.0),
        }
    }
}

impl fmt::Debug for CUresult {
    /// `CUDA_ERROR_LAUNCH_FAILED(719)`; a code the headers do not know prints as
    /// `CUresult(1234)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => write!(f, "{n}({})", self.0),
            None => write!(f, "CUresult({})", self.0),
        }
    }
}

impl core::error::Error for CUresult {}

impl cudaError_t {
    /// Whether this is `cudaSuccess`.
    pub const fn is_success(self) -> bool {
        self.0 == 0
    }

    /// `Ok(())` for `cudaSuccess`, else `Err(self)`.
    pub const fn result(self) -> Result<(), cudaError_t> {
        if self.is_success() { Ok(()) } else { Err(self) }
    }
}

impl fmt::Display for cudaError_t {
    /// Like [`CUresult`]'s: name, code and the headers' description.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.name(), self.description()) {
            (Some(n), Some(d)) if !d.is_empty() => write!(f, "{n} ({}): {d}", self.0),
            (Some(n), _) => write!(f, "{n} ({})", self.0),
            _ => write!(f, "unknown cudaError_t {}", self.0),
        }
    }
}

impl fmt::Debug for cudaError_t {
    /// `cudaErrorLaunchFailure(719)`; an unknown code prints as `cudaError_t(1234)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => write!(f, "{n}({})", self.0),
            None => write!(f, "cudaError_t({})", self.0),
        }
    }
}

impl core::error::Error for cudaError_t {}

/// A function the loaded library does not provide (an older driver, say).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MissingSymbol {
    /// The documented name of the function.
    pub name: &'static str,
    /// The ABI version the table asks the driver for (`12040` = 12.4; 0 for runtime
    /// entries and functions without a versioned typedef): with the driver's version,
    /// whether the driver is too old for it. Carried here so that an error path never
    /// searches the table's names (which would keep all of them in a small image).
    pub abi: u32,
}

impl fmt::Display for MissingSymbol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "`{}` is not provided by the loaded CUDA library (driver too old?)",
            self.name
        )
    }
}

impl core::error::Error for MissingSymbol {}

#[cfg(test)]
mod tests {
    extern crate std;
    use std::format;

    use crate::{CUresult, cudaError_t};

    #[test]
    fn debug_prints_the_name_and_code() {
        assert_eq!(
            format!("{:?}", CUresult::CUDA_ERROR_LAUNCH_FAILED),
            "CUDA_ERROR_LAUNCH_FAILED(719)"
        );
        assert_eq!(format!("{:?}", CUresult(99_999)), "CUresult(99999)");
        assert_eq!(
            format!("{:?}", cudaError_t::cudaErrorLaunchFailure),
            "cudaErrorLaunchFailure(719)"
        );
        assert_eq!(format!("{:?}", cudaError_t(99_999)), "cudaError_t(99999)");
    }
}
