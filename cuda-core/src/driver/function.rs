//! Execution control (driver API sections "Execution Control" and "Occupancy"):
//! [`Function`], a kernel of a loaded [`Module`], with its attributes,
//! its parameter layout (`cuFuncGetParamInfo`) and occupancy queries, clusters included.

use core::ffi::c_int;
use core::sync::atomic::{AtomicU32, Ordering};

use cudadrv_sys::{
    CUcontext, CUfunction, CUfunction_attribute, CUlaunchAttribute, CUlaunchAttributeValue,
    CUlaunchConfig, CUoccupancy_flags, CUoccupancyB2DSize, CUresult,
};

use crate::driver::context::{Context, CurrentGuard, enter_raw};
use crate::driver::module::Module;
use crate::error::{Error, Result, drv};

/// A kernel (`CUfunction`) of a [`Module`]. It keeps the module loaded (a clone of it),
/// so a `Function` can be stored on its own and outlive the `Module` value it came from;
/// the module is unloaded when the last of them is dropped. Functions need no
/// destruction of their own.
///
/// The context is cached in the function, so the launch path makes it current (when it
/// is not already) without touching the module.
#[derive(Debug)]
pub struct Function {
    raw: CUfunction,
    ctx: CUcontext,
    /// The parameter count once learned from `cuFuncGetParamInfo` (`u32::MAX`: not yet).
    params: AtomicU32,
    module: Module,
}

impl Clone for Function {
    fn clone(&self) -> Self {
        Self {
            raw: self.raw,
            ctx: self.ctx,
            params: AtomicU32::new(self.params.load(Ordering::Relaxed)),
            module: self.module.clone(),
        }
    }
}

// SAFETY: a CUfunction may be used from any thread; calls make its context current.
unsafe impl Send for Function {}
// SAFETY: as above; the cached count is atomic.
unsafe impl Sync for Function {}

/// Grid, block and cluster shape for the occupancy queries on clusters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClusterConfig {
    /// Grid dimensions in blocks (a multiple of `cluster` in each dimension).
    pub grid: [u32; 3],
    /// Block dimensions in threads.
    pub block: [u32; 3],
    /// Cluster dimensions in blocks (`[0, 0, 0]`: the kernel's compile-time cluster
    /// size, or none, for [`Function::max_potential_cluster_size`]).
    pub cluster: [u32; 3],
    /// Dynamic shared memory per block, in bytes.
    pub shared_mem_bytes: u32,
}

impl Function {
    /// Wraps a raw function of `module`; the result keeps `module` loaded.
    ///
    /// # Safety
    /// `raw` must be a function of `module`.
    pub unsafe fn from_raw(raw: CUfunction, module: &Module) -> Self {
        Self {
            raw,
            ctx: module.context().as_raw(),
            params: AtomicU32::new(u32::MAX),
            module: module.clone(),
        }
    }

    /// The raw `CUfunction`.
    #[inline]
    pub fn as_raw(&self) -> CUfunction {
        self.raw
    }

    /// The module the function belongs to (kept loaded by the function).
    pub fn module(&self) -> &Module {
        &self.module
    }

    /// The context the function's module is loaded in.
    pub fn context(&self) -> &Context {
        self.module.context()
    }

    /// Makes the function's context current for the guard's lifetime (when it is not).
    #[inline]
    pub(crate) fn enter(&self) -> Result<CurrentGuard<'_>> {
        // SAFETY: `self.module` keeps its context (whose raw handle `ctx` is) alive for
        // the guard's lifetime.
        unsafe { enter_raw(self.ctx) }
    }

    /// `cuFuncGetAttribute`: one attribute's value.
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuFuncGetAttribute")]
    pub fn attribute(&self, attr: CUfunction_attribute) -> Result<i32> {
        let g = self.enter()?;
        let mut v = 0;
        // SAFETY: live function, valid out-pointer; the context is current.
        unsafe { drv!(g.cu, cuFuncGetAttribute(&mut v, attr, self.raw))? };
        Ok(v)
    }

    /// `cuFuncSetAttribute`: sets one attribute.
    ///
    /// # Errors
    /// Driver errors (`CUDA_ERROR_INVALID_VALUE` for a value out of range).
    #[doc(alias = "cuFuncSetAttribute")]
    pub fn set_attribute(&self, attr: CUfunction_attribute, value: i32) -> Result<()> {
        let g = self.enter()?;
        // SAFETY: live function, plain values; the context is current.
        unsafe { drv!(g.cu, cuFuncSetAttribute(self.raw, attr, value)) }
    }

    fn attribute_u32(&self, attr: CUfunction_attribute) -> Result<u32> {
        u32::try_from(self.attribute(attr)?)
            .map_err(|_| Error::InvalidArgument("cuFuncGetAttribute returned a negative value"))
    }

    /// Registers per thread (`CU_FUNC_ATTRIBUTE_NUM_REGS`).
    ///
    /// # Errors
    /// Driver errors.
    pub fn num_regs(&self) -> Result<u32> {
        self.attribute_u32(CUfunction_attribute::CU_FUNC_ATTRIBUTE_NUM_REGS)
    }

    /// Most threads per block this kernel can launch with
    /// (`CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK`).
    ///
    /// # Errors
    /// Driver errors.
    pub fn max_threads_per_block(&self) -> Result<u32> {
        self.attribute_u32(CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)
    }

    /// Static shared memory per block (`CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES`).
    ///
    /// # Errors
    /// Driver errors.
    pub fn static_shared_size_bytes(&self) -> Result<u32> {
        self.attribute_u32(CUfunction_attribute::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)
    }

    /// Most dynamic shared memory a launch may ask for
    /// (`CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`; 48 KiB unless raised).
    ///
    /// # Errors
    /// Driver errors.
    pub fn max_dynamic_shared_size_bytes(&self) -> Result<u32> {
        self.attribute_u32(CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)
    }

    /// The share of the unified L1/shared-memory storage this kernel prefers as shared
    /// memory, in percent (`cuFuncSetAttribute` with
    /// `CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT`): 100 lets as many CTAs reside
    /// as their shared memory allows. Without it the driver may choose a carveout in
    /// which a kernel with a few KiB of static shared memory fits one CTA per SM whatever
    /// its registers allow. A hint: the driver rounds it to a supported carveout.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for more than 100; driver errors.
    #[doc(alias = "CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT")]
    pub fn set_preferred_shared_memory_carveout(&self, percent: u8) -> Result<()> {
        if percent > 100 {
            return Err(Error::InvalidArgument(
                "the shared memory carveout is a percentage, 0 to 100",
            ));
        }
        self.set_attribute(
            CUfunction_attribute::CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
            i32::from(percent),
        )
    }

    /// Opts into more dynamic shared memory (`cuFuncSetAttribute` with
    /// `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`), up to
    /// [`Device::max_shared_memory_per_block_optin`](crate::Device::max_shared_memory_per_block_optin)
    /// minus the static shared memory.
    ///
    /// # Errors
    /// Driver errors.
    pub fn set_max_dynamic_shared_size_bytes(&self, bytes: u32) -> Result<()> {
        let v = i32::try_from(bytes)
            .map_err(|_| Error::InvalidArgument("shared memory size too large"))?;
        self.set_attribute(
            CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            v,
        )
    }

    /// The compile-time cluster dimensions (`CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH`,
    /// `_HEIGHT`, `_DEPTH`); zeros when the kernel has none.
    ///
    /// # Errors
    /// Driver errors.
    pub fn required_cluster_dims(&self) -> Result<[u32; 3]> {
        Ok([
            self.attribute_u32(CUfunction_attribute::CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH)?,
            self.attribute_u32(CUfunction_attribute::CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT)?,
            self.attribute_u32(CUfunction_attribute::CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH)?,
        ])
    }

    /// Sets the cluster dimensions the kernel must be launched with
    /// (`CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH`, `_HEIGHT`, `_DEPTH`).
    ///
    /// # Errors
    /// Driver errors (the dimensions cannot change for a kernel compiled with them).
    pub fn set_required_cluster_dims(&self, dims: [u32; 3]) -> Result<()> {
        let attrs = [
            CUfunction_attribute::CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH,
            CUfunction_attribute::CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT,
            CUfunction_attribute::CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH,
        ];
        for (attr, d) in attrs.into_iter().zip(dims) {
            let d = i32::try_from(d)
                .map_err(|_| Error::InvalidArgument("cluster dimension too large"))?;
            self.set_attribute(attr, d)?;
        }
        Ok(())
    }

    /// Allows cluster sizes above the portable 8 blocks
    /// (`CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED`; 16 on H100).
    ///
    /// # Errors
    /// Driver errors.
    pub fn set_non_portable_cluster_size_allowed(&self, allowed: bool) -> Result<()> {
        self.set_attribute(
            CUfunction_attribute::CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED,
            i32::from(allowed),
        )
    }

    /// `cuFuncGetParamInfo`: `(offset, size)` in bytes of parameter `index` in the
    /// kernel's parameter buffer.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an index at or past [`param_count`](Self::param_count)
    /// once the count is known; else `CUDA_ERROR_INVALID_VALUE` from the driver for an
    /// index past the last parameter.
    #[doc(alias = "cuFuncGetParamInfo")]
    pub fn param_info(&self, index: usize) -> Result<(usize, usize)> {
        let known = self.params.load(Ordering::Relaxed);
        if known != u32::MAX && index >= known as usize {
            return Err(Error::InvalidArgument(
                "parameter index past the kernel's last parameter",
            ));
        }
        self.param_info_raw(index)
    }

    fn param_info_raw(&self, index: usize) -> Result<(usize, usize)> {
        let g = self.enter()?;
        let (mut offset, mut size) = (0, 0);
        // SAFETY: live function, valid out-pointers; the context is current.
        unsafe {
            drv!(
                g.cu,
                cuFuncGetParamInfo(self.raw, index, &mut offset, &mut size)
            )?
        };
        Ok((offset, size))
    }

    /// The number of parameters, learned once per `Function` value (and copied to its
    /// clones) and cached.
    ///
    /// `cuFuncGetParamCount` where the driver has it (CUDA 13.2). Before 13.2 no call
    /// reports the count, so the first call asks `cuFuncGetParamInfo` for indices 0, 1,
    /// ... until the driver answers `CUDA_ERROR_INVALID_VALUE`. That one refused call is
    /// the only API error the layout checks make on such a driver, and compute-sanitizer
    /// reports it once per function; every later check uses the cached count and asks
    /// only for indices that exist.
    ///
    /// # Errors
    /// Other driver errors.
    #[doc(alias = "cuFuncGetParamCount")]
    #[doc(alias = "cuFuncGetParamInfo")]
    pub fn param_count(&self) -> Result<usize> {
        let known = self.params.load(Ordering::Relaxed);
        if known != u32::MAX {
            return Ok(known as usize);
        }
        let g = self.enter()?;
        if g.cu.cuFuncGetParamCount().is_ok() {
            let mut count = 0usize;
            // SAFETY: live function, valid out-pointer; the context is current.
            unsafe { drv!(g.cu, cuFuncGetParamCount(self.raw, &mut count))? };
            let count =
                u32::try_from(count)
                    .ok()
                    .filter(|&c| c <= 32764)
                    .ok_or(Error::InvalidArgument(
                        "cuFuncGetParamCount reported more than 32764 parameters",
                    ))?;
            self.params.store(count, Ordering::Relaxed);
            return Ok(count as usize);
        }
        drop(g);
        // A kernel has at most 32764 bytes of parameters, so at most that many. Going up
        // one index at a time makes exactly one refused call.
        let mut count = 0usize;
        loop {
            match self.param_info_raw(count) {
                Ok(_) if count < 32764 => count += 1,
                Ok(_) => {
                    return Err(Error::InvalidArgument(
                        "cuFuncGetParamInfo reported more than 32764 parameters",
                    ));
                }
                Err(e) if e.is(CUresult::CUDA_ERROR_INVALID_VALUE) => break,
                Err(e) => return Err(e),
            }
        }
        // At most 32764: fits.
        self.params.store(count as u32, Ordering::Relaxed);
        Ok(count)
    }

    /// Checks packed parameters against the layout the driver reports for the kernel
    /// (`cuFuncGetParamInfo` for each parameter, read one at a time: any number of
    /// parameters, no buffer).
    ///
    /// # Errors
    /// [`Error::Layout`] on a mismatch; driver errors (a driver failure wins over the
    /// mismatch it may have caused).
    #[doc(alias = "cuFuncGetParamInfo")]
    pub fn verify_params<const CAP: usize, const N: usize>(
        &self,
        args: &crate::args::PackedArgs<CAP, N>,
    ) -> Result<()> {
        self.verify_packed(args)
    }

    /// `cuOccupancyMaxActiveBlocksPerMultiprocessor`: how many blocks of `block_size`
    /// threads with `dynamic_smem` bytes of dynamic shared memory fit on one SM.
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuOccupancyMaxActiveBlocksPerMultiprocessor")]
    pub fn max_active_blocks_per_sm(&self, block_size: u32, dynamic_smem: usize) -> Result<u32> {
        let g = self.enter()?;
        let bs = i32::try_from(block_size)
            .map_err(|_| Error::InvalidArgument("block size too large"))?;
        let mut n = 0;
        // SAFETY: live function, valid out-pointer; the context is current.
        unsafe {
            drv!(
                g.cu,
                cuOccupancyMaxActiveBlocksPerMultiprocessor(&mut n, self.raw, bs, dynamic_smem)
            )?
        };
        u32::try_from(n).map_err(|_| Error::InvalidArgument("negative occupancy"))
    }

    /// `cuOccupancyMaxPotentialBlockSize`: the block size that gives this kernel the
    /// most resident threads per SM with `dynamic_smem` bytes of dynamic shared memory
    /// per block, and the smallest grid that reaches that occupancy on the whole device:
    /// `(min_grid_size, block_size)`. `block_size_limit` caps the block sizes considered
    /// (0: no cap beyond the kernel's and the device's).
    ///
    /// ```no_run
    /// # fn f(kernel: &cudadrv::Function, stream: &cudadrv::Stream) -> cudadrv::Result<()> {
    /// let (min_grid, block) = kernel.max_potential_block_size(0, 0)?;
    /// let n = 1u32 << 20;
    /// let grid = n.div_ceil(block).max(min_grid);
    /// let cfg = cudadrv::LaunchConfig::new(grid, block).stream(stream);
    /// # let _ = cfg; Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a `block_size_limit` above `i32::MAX`; driver
    /// errors.
    #[doc(alias = "cuOccupancyMaxPotentialBlockSize")]
    pub fn max_potential_block_size(
        &self,
        dynamic_smem: usize,
        block_size_limit: u32,
    ) -> Result<(u32, u32)> {
        self.potential_block_size(None, dynamic_smem, block_size_limit, None)
    }

    /// `cuOccupancyMaxPotentialBlockSizeWithFlags`: as
    /// [`max_potential_block_size`](Self::max_potential_block_size), with `flags`
    /// (`CU_OCCUPANCY_DISABLE_CACHING_OVERRIDE`: do not assume the L1 cache can be
    /// traded for shared memory on devices where that is configurable).
    ///
    /// # Errors
    /// As [`max_potential_block_size`](Self::max_potential_block_size).
    #[doc(alias = "cuOccupancyMaxPotentialBlockSizeWithFlags")]
    pub fn max_potential_block_size_with_flags(
        &self,
        dynamic_smem: usize,
        block_size_limit: u32,
        flags: CUoccupancy_flags,
    ) -> Result<(u32, u32)> {
        self.potential_block_size(None, dynamic_smem, block_size_limit, Some(flags))
    }

    /// `cuOccupancyMaxPotentialBlockSizeWithFlags` for a kernel whose dynamic shared
    /// memory depends on its block size: the driver calls `smem_for_block(block_size)`
    /// for each block size it considers (on the calling thread, before this returns).
    ///
    /// `smem_for_block` is a plain `extern "C" fn`, so calling it is safe; a panic in it
    /// aborts the process (it cannot unwind into the driver). It should not call CUDA.
    ///
    /// ```no_run
    /// # fn f(kernel: &cudadrv::Function) -> cudadrv::Result<()> {
    /// use core::ffi::c_int;
    /// use cudadrv::cuda_sys::CUoccupancy_flags;
    /// /// One `f32` of shared memory per thread.
    /// extern "C" fn smem(block_size: c_int) -> usize {
    ///     usize::try_from(block_size).unwrap_or(0) * 4
    /// }
    /// let (min_grid, block) = kernel.max_potential_block_size_with(
    ///     smem,
    ///     0,
    ///     CUoccupancy_flags::CU_OCCUPANCY_DEFAULT,
    /// )?;
    /// # let _ = (min_grid, block); Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`max_potential_block_size`](Self::max_potential_block_size).
    #[doc(alias = "cuOccupancyMaxPotentialBlockSizeWithFlags")]
    #[doc(alias = "CUoccupancyB2DSize")]
    pub fn max_potential_block_size_with(
        &self,
        smem_for_block: extern "C" fn(c_int) -> usize,
        block_size_limit: u32,
        flags: CUoccupancy_flags,
    ) -> Result<(u32, u32)> {
        self.potential_block_size(Some(smem_for_block), 0, block_size_limit, Some(flags))
    }

    /// The three block-size queries: `cuOccupancyMaxPotentialBlockSize` without flags,
    /// `...WithFlags` with.
    fn potential_block_size(
        &self,
        smem_for_block: Option<extern "C" fn(c_int) -> usize>,
        dynamic_smem: usize,
        block_size_limit: u32,
        flags: Option<CUoccupancy_flags>,
    ) -> Result<(u32, u32)> {
        let limit = c_int::try_from(block_size_limit)
            .map_err(|_| Error::InvalidArgument("block size limit too large"))?;
        // A safe `extern "C" fn` is a valid `unsafe extern "C" fn` of the same signature.
        let b2d: CUoccupancyB2DSize =
            smem_for_block.map(|f| f as unsafe extern "C" fn(c_int) -> usize);
        let g = self.enter()?;
        let (mut min_grid, mut block): (c_int, c_int) = (0, 0);
        // SAFETY: live function, valid out-pointers; `b2d` is null or a function the
        // driver may call with any block size (a safe fn, which cannot unwind); the
        // context is current.
        unsafe {
            match flags {
                None => drv!(
                    g.cu,
                    cuOccupancyMaxPotentialBlockSize(
                        &mut min_grid,
                        &mut block,
                        self.raw,
                        b2d,
                        dynamic_smem,
                        limit
                    )
                )?,
                Some(flags) => drv!(
                    g.cu,
                    cuOccupancyMaxPotentialBlockSizeWithFlags(
                        &mut min_grid,
                        &mut block,
                        self.raw,
                        b2d,
                        dynamic_smem,
                        limit,
                        flags.0
                    )
                )?,
            }
        };
        let grid = u32::try_from(min_grid)
            .map_err(|_| Error::InvalidArgument("negative minimum grid size"))?;
        let block =
            u32::try_from(block).map_err(|_| Error::InvalidArgument("negative block size"))?;
        Ok((grid, block))
    }

    /// `cuOccupancyMaxPotentialClusterSize`: the largest cluster size the kernel can
    /// launch with for this grid and block shape (`config.cluster` is ignored).
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuOccupancyMaxPotentialClusterSize")]
    pub fn max_potential_cluster_size(&self, config: &ClusterConfig) -> Result<u32> {
        let mut plain = *config;
        plain.cluster = [0, 0, 0];
        let mut attr = cluster_attribute(&plain);
        let cfg = launch_config(&plain, &mut attr);
        // SAFETY: `cfg` points at `attr` (or at nothing), which outlives the call.
        unsafe { self.max_potential_cluster_size_raw(&cfg) }
    }

    /// `cuOccupancyMaxPotentialClusterSize` with a raw launch configuration.
    ///
    /// # Safety
    /// `config.attrs` must point to `config.numAttrs` valid attributes (or be null with
    /// zero); `config.hStream` must be null or a live stream.
    #[doc(alias = "cuOccupancyMaxPotentialClusterSize")]
    pub unsafe fn max_potential_cluster_size_raw(&self, config: &CUlaunchConfig) -> Result<u32> {
        let g = self.enter()?;
        let mut n = 0;
        // SAFETY: live function, valid out-pointer; the caller vouches for `config`; the
        // context is current.
        unsafe {
            drv!(
                g.cu,
                cuOccupancyMaxPotentialClusterSize(&mut n, self.raw, config)
            )?
        };
        u32::try_from(n).map_err(|_| Error::InvalidArgument("negative cluster size"))
    }

    /// `cuOccupancyMaxActiveClusters`: how many clusters of `config.cluster` blocks can
    /// be co-resident on the device.
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuOccupancyMaxActiveClusters")]
    pub fn max_active_clusters(&self, config: &ClusterConfig) -> Result<u32> {
        let mut attr = cluster_attribute(config);
        let cfg = launch_config(config, &mut attr);
        // SAFETY: `cfg` points at `attr` (or at nothing), which outlives the call.
        unsafe { self.max_active_clusters_raw(&cfg) }
    }

    /// `cuOccupancyMaxActiveClusters` with a raw launch configuration.
    ///
    /// # Safety
    /// As [`Function::max_potential_cluster_size_raw`].
    #[doc(alias = "cuOccupancyMaxActiveClusters")]
    pub unsafe fn max_active_clusters_raw(&self, config: &CUlaunchConfig) -> Result<u32> {
        let g = self.enter()?;
        let mut n = 0;
        // SAFETY: live function, valid out-pointer; the caller vouches for `config`; the
        // context is current.
        unsafe { drv!(g.cu, cuOccupancyMaxActiveClusters(&mut n, self.raw, config))? };
        u32::try_from(n).map_err(|_| Error::InvalidArgument("negative cluster count"))
    }
}

/// Lazy loading (Programming Guide 4.7): whether the kernel's code is on the device yet,
/// and loading it ahead of its first launch. See [`Module::loading_mode`] for the
/// `CUDA_MODULE_LOADING` setting that decides when the driver loads kernels.
impl Function {
    /// `cuFuncIsLoaded`: whether the kernel's code is loaded on the device.
    ///
    /// Always `true` under eager loading (`CUDA_MODULE_LOADING=EAGER`). Under lazy
    /// loading (the default since CUDA 12.2) a function from [`Module::functions`] may be
    /// unloaded until its first launch, an attribute query that needs its code, or
    /// [`Function::load`].
    ///
    /// # Errors
    /// [`Error::DriverTooOld`] before CUDA 12.4; driver errors.
    #[doc(alias = "cuFuncIsLoaded")]
    pub fn is_loaded(&self) -> Result<bool> {
        let g = self.enter()?;
        let mut state = cudadrv_sys::CUfunctionLoadingState::CU_FUNCTION_LOADING_STATE_UNLOADED;
        // SAFETY: live function (its module is kept loaded), valid out-pointer; the
        // context is current.
        unsafe { drv!(g.cu, cuFuncIsLoaded(&mut state, self.raw))? };
        Ok(state == cudadrv_sys::CUfunctionLoadingState::CU_FUNCTION_LOADING_STATE_LOADED)
    }

    /// `cuFuncLoad`: loads the kernel's code now (under lazy loading), so that its first
    /// launch does not pay for it; does nothing for a loaded function (always the case
    /// under eager loading).
    ///
    /// Loading kernels up front also avoids the lazy-loading hazard of kernels that wait
    /// on each other while running concurrently: a kernel whose load waits for the device
    /// cannot start while the other spins.
    ///
    /// # Errors
    /// [`Error::DriverTooOld`] before CUDA 12.4; driver errors.
    #[doc(alias = "cuFuncLoad")]
    pub fn load(&self) -> Result<()> {
        let g = self.enter()?;
        // SAFETY: live function (its module is kept loaded); the context is current.
        unsafe { drv!(g.cu, cuFuncLoad(self.raw)) }
    }

    /// `cuFuncGetName`: the kernel's name as the module spells it (mangled for C++),
    /// borrowed from the driver for as long as this `Function` keeps its module loaded.
    ///
    /// # Errors
    /// [`Error::DriverTooOld`] before CUDA 12.3; driver errors; [`Error::InvalidArgument`]
    /// if the driver returns no name.
    #[doc(alias = "cuFuncGetName")]
    pub fn name(&self) -> Result<&core::ffi::CStr> {
        let g = self.enter()?;
        let mut name = core::ptr::null();
        // SAFETY: live function, valid out-pointer; the context is current.
        unsafe { drv!(g.cu, cuFuncGetName(&mut name, self.raw))? };
        if name.is_null() {
            return Err(Error::InvalidArgument("cuFuncGetName returned no name"));
        }
        // SAFETY: the driver returns a NUL-terminated string owned by the module, which
        // `self` keeps loaded for the returned borrow's lifetime and never changes.
        Ok(unsafe { core::ffi::CStr::from_ptr(name) })
    }
}

/// The `CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION` attribute of `config`, if it sets one.
fn cluster_attribute(config: &ClusterConfig) -> Option<CUlaunchAttribute> {
    if config.cluster == [0, 0, 0] {
        return None;
    }
    let mut value = CUlaunchAttributeValue { pad: [0; 64] };
    value.clusterDim.x = config.cluster[0];
    value.clusterDim.y = config.cluster[1];
    value.clusterDim.z = config.cluster[2];
    Some(CUlaunchAttribute {
        id: cudadrv_sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION,
        pad: [0; 4],
        value,
    })
}

/// A `CUlaunchConfig` of `config` pointing at `attr` (if any).
fn launch_config(config: &ClusterConfig, attr: &mut Option<CUlaunchAttribute>) -> CUlaunchConfig {
    let (attrs, num) = match attr {
        Some(a) => (core::ptr::from_mut(a), 1),
        None => (core::ptr::null_mut(), 0),
    };
    CUlaunchConfig {
        gridDimX: config.grid[0],
        gridDimY: config.grid[1],
        gridDimZ: config.grid[2],
        blockDimX: config.block[0],
        blockDimY: config.block[1],
        blockDimZ: config.block[2],
        sharedMemBytes: config.shared_mem_bytes,
        hStream: core::ptr::null_mut(),
        attrs,
        numAttrs: num,
    }
}
