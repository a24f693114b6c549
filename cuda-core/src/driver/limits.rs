//! Context limits (`cuCtxGetLimit` / `cuCtxSetLimit`): stack size, `printf` FIFO, device
//! `malloc` heap, and the device runtime's synchronization depth and pending-launch
//! count (dynamic parallelism).

use cudadrv_sys::CUlimit;

use crate::driver::context::Context;
use crate::error::{Result, drv};

/// A context limit (`CUlimit`); the constants are `CU_LIMIT_*`.
pub type Limit = CUlimit;

impl Context {
    /// `cuCtxGetLimit`: the current value of `limit`.
    ///
    /// # Errors
    /// `CUDA_ERROR_UNSUPPORTED_LIMIT` for a limit the device does not have.
    #[doc(alias = "cuCtxGetLimit")]
    pub fn limit(&self, limit: Limit) -> Result<usize> {
        let g = self.enter()?;
        let mut v = 0;
        // SAFETY: valid out-pointer; the context is current.
        unsafe { drv!(g.cu, cuCtxGetLimit(&mut v, limit))? };
        Ok(v)
    }

    /// `cuCtxSetLimit`: sets `limit` (the driver may round the value; read it back with
    /// [`Context::limit`]).
    ///
    /// # Errors
    /// `CUDA_ERROR_UNSUPPORTED_LIMIT`, `CUDA_ERROR_INVALID_VALUE`,
    /// `CUDA_ERROR_OUT_OF_MEMORY`.
    #[doc(alias = "cuCtxSetLimit")]
    pub fn set_limit(&self, limit: Limit, value: usize) -> Result<()> {
        let g = self.enter()?;
        // SAFETY: plain values; the context is current.
        unsafe { drv!(g.cu, cuCtxSetLimit(limit, value)) }
    }

    /// `CU_LIMIT_STACK_SIZE`: stack bytes per GPU thread.
    ///
    /// # Errors
    /// As [`Context::limit`].
    pub fn stack_size(&self) -> Result<usize> {
        self.limit(CUlimit::CU_LIMIT_STACK_SIZE)
    }

    /// Sets `CU_LIMIT_STACK_SIZE`.
    ///
    /// # Errors
    /// As [`Context::set_limit`].
    pub fn set_stack_size(&self, bytes: usize) -> Result<()> {
        self.set_limit(CUlimit::CU_LIMIT_STACK_SIZE, bytes)
    }

    /// `CU_LIMIT_PRINTF_FIFO_SIZE`: bytes of the device `printf` FIFO.
    ///
    /// # Errors
    /// As [`Context::limit`].
    pub fn printf_fifo_size(&self) -> Result<usize> {
        self.limit(CUlimit::CU_LIMIT_PRINTF_FIFO_SIZE)
    }

    /// Sets `CU_LIMIT_PRINTF_FIFO_SIZE`.
    ///
    /// # Errors
    /// As [`Context::set_limit`].
    pub fn set_printf_fifo_size(&self, bytes: usize) -> Result<()> {
        self.set_limit(CUlimit::CU_LIMIT_PRINTF_FIFO_SIZE, bytes)
    }

    /// `CU_LIMIT_MALLOC_HEAP_SIZE`: bytes of the device `malloc` heap.
    ///
    /// # Errors
    /// As [`Context::limit`].
    pub fn malloc_heap_size(&self) -> Result<usize> {
        self.limit(CUlimit::CU_LIMIT_MALLOC_HEAP_SIZE)
    }

    /// Sets `CU_LIMIT_MALLOC_HEAP_SIZE` (before the first kernel that uses `malloc`).
    ///
    /// # Errors
    /// As [`Context::set_limit`].
    pub fn set_malloc_heap_size(&self, bytes: usize) -> Result<()> {
        self.set_limit(CUlimit::CU_LIMIT_MALLOC_HEAP_SIZE, bytes)
    }

    /// `CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH`: deepest nesting at which device code may
    /// synchronize on child grids (legacy dynamic parallelism).
    ///
    /// # Errors
    /// As [`Context::limit`]. Devices of compute capability 9.0 and later have no
    /// device-side `cudaDeviceSynchronize`, and report `CUDA_ERROR_UNSUPPORTED_LIMIT`
    /// (checked on H100, driver 580).
    pub fn dev_runtime_sync_depth(&self) -> Result<usize> {
        self.limit(CUlimit::CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH)
    }

    /// Sets `CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH`.
    ///
    /// # Errors
    /// As [`Context::set_limit`]; `CUDA_ERROR_UNSUPPORTED_LIMIT` on compute capability
    /// 9.0 and later (see [`Context::dev_runtime_sync_depth`]).
    pub fn set_dev_runtime_sync_depth(&self, depth: usize) -> Result<()> {
        self.set_limit(CUlimit::CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH, depth)
    }

    /// `CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT`: most device-side launches that may be
    /// pending at once (2048 by default).
    ///
    /// # Errors
    /// As [`Context::limit`].
    pub fn dev_runtime_pending_launch_count(&self) -> Result<usize> {
        self.limit(CUlimit::CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT)
    }

    /// Sets `CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT`.
    ///
    /// # Errors
    /// As [`Context::set_limit`].
    pub fn set_dev_runtime_pending_launch_count(&self, count: usize) -> Result<()> {
        self.set_limit(CUlimit::CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT, count)
    }
}
