//! Graph conditional nodes driven from device code: `cudaGraphSetConditional`.

use super::devrt_ffi;

/// A `cudaGraphConditionalHandle` (a `u64` created on the host with
/// `cudaGraphConditionalHandleCreate` / `cuGraphConditionalHandleCreate`), passed to the
/// kernel as a parameter.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ConditionalHandle(pub u64);

impl ConditionalHandle {
    /// `cudaGraphSetConditional(handle, value)`: sets the condition the node evaluates
    /// next (IF/WHILE: zero is false; SWITCH: the branch index).
    ///
    /// # Safety
    /// The kernel runs inside the graph that owns the handle (in the conditional node's
    /// body or upstream of it), the PTX module is linked with `libcudadevrt.a`, and no
    /// other thread sets the same handle concurrently (racing calls are undefined).
    #[doc(alias = "cudaGraphSetConditional")]
    #[inline(always)]
    pub unsafe fn set(self, value: u32) {
        // SAFETY: forwarded to the caller.
        unsafe { devrt_ffi::cudaGraphSetConditional(self.0, value) }
    }
}
