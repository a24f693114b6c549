//! `extern "C"` declarations of the device-runtime functions (`libcudadevrt.a`) that
//! the device-side launch and graph helpers call.
//!
//! PTX that references them has unresolved externals: assemble it with
//! `ptxas --compile-only` and link it with the driver's JIT linker, adding
//! `libcudadevrt.a` (`cuLinkAddFile`, `CU_JIT_INPUT_LIBRARY`).

use core::ffi::c_void;

use super::Dim3;

unsafe extern "C" {
    /// `void *cudaGetParameterBufferV2(void *func, dim3 grid, dim3 block, unsigned shmem)`:
    /// a 64-byte aligned, 4 KB parameter buffer for one launch of `func`, or null when
    /// none is available.
    pub fn cudaGetParameterBufferV2(
        func: *const c_void,
        grid: Dim3,
        block: Dim3,
        shmem: u32,
    ) -> *mut u8;

    /// `cudaError_t cudaLaunchDeviceV2(void *parameterBuffer, cudaStream_t stream)`:
    /// launches the kernel the buffer was obtained for.
    pub fn cudaLaunchDeviceV2(buffer: *mut u8, stream: *mut c_void) -> u32;

    /// `void cudaGraphSetConditional(cudaGraphConditionalHandle handle, unsigned value)`:
    /// sets a graph conditional node's value from device code.
    pub fn cudaGraphSetConditional(handle: u64, value: u32);

    /// `cudaError_t cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream)`:
    /// launches a device-launchable executable graph from device code into one of the
    /// named graph streams (`cudaStreamGraphTailLaunch`, ...).
    pub fn cudaGraphLaunch(exec: u64, stream: *mut c_void) -> u32;
}
