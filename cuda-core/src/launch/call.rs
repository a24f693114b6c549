//! The launch calls: `cuLaunchKernelEx` with a pointer array or a packed buffer, the
//! layout-checked packed launch, and plain `cuLaunchKernel`; and the launch core,
//! [`launch_core`], the one place in the crate that calls either of the driver's launch
//! functions (these calls, [`Lane::launch`](crate::kernel::Lane::launch),
//! [`TypedKernel::launch`](crate::kernel::TypedKernel::launch), a capture's and a
//! replay region's launches all end there).
//!
//! None of them allocates or records an event: each builds the `CUlaunchConfig`, its
//! attribute array ([`RawAttributes`](super::RawAttributes), only the attributes set
//! written) and the `extra` array on the stack and makes one driver call, after making
//! the function's context current when it is not already (one `cuCtxGetCurrent`; a push
//! and pop only on a thread where another context, or none, is current). The stream must
//! belong to that context. After a `cuLaunchKernelEx`, the device node the driver may
//! have written is copied back into the configuration
//! ([`LaunchConfig::device_node`]).

use core::ffi::c_void;
use core::ptr;

use cudadrv_sys::{
    CU_LAUNCH_PARAM_BUFFER_POINTER, CU_LAUNCH_PARAM_BUFFER_SIZE, CU_LAUNCH_PARAM_END, CUfunction,
    CUlaunchConfig, CUstream, DriverApi,
};

use super::LaunchConfig;
use crate::args::{KernelArgs, PackedArgs};
use crate::driver::function::Function;
use crate::error::{Error, Result, drv};

/// `cuLaunchKernelEx`: launches `f` with `cfg` (grid, block, shared memory, stream and
/// every attribute), passing `args` as the `kernelParams` pointer array.
///
/// The tuple's types are the kernel's parameter types, in order: the driver copies each
/// parameter's bytes from the tuple, using the sizes it knows from the kernel. `args`
/// may be dropped as soon as this returns.
///
/// # Errors
/// [`Error::Driver`] naming `cuLaunchKernelEx` with what the driver returned: a block of
/// more threads than the kernel allows or a zero grid gives
/// `CUDA_ERROR_INVALID_VALUE`, too many resources
/// `CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES`, an attribute the device does not support
/// `CUDA_ERROR_NOT_SUPPORTED` or `CUDA_ERROR_INVALID_VALUE`. Errors of the kernel
/// itself show up at the next synchronizing call.
///
/// # Safety
/// - `A` must match the kernel's signature: the same number of parameters, each of the
///   same size and device layout (a mismatch makes the driver read past a value or hand
///   the kernel garbage). [`Function::verify_args`] checks this against the driver's
///   parameter info once, so a hot loop can check before and launch unchecked.
/// - Every pointer in `args` must be valid for everything the kernel does with it (reads
///   and writes of device memory) until the kernel has finished, and memory the kernel
///   writes must not be read or written by the host or other work meanwhile.
/// - The stream in `cfg` must belong to the context `f` was loaded in.
/// - If that stream is being captured, the launch becomes a graph node that runs at
///   every launch of every graph made from the capture: the pointers must be valid, and
///   `f`'s module loaded, for all of them
///   ([`Capturing::launch`](crate::graph::Capturing::launch) ties the function to the
///   graph).
///
/// # Errors
/// [`Error::InvalidArgument`] when `cfg` names no stream.
#[doc(alias = "cuLaunchKernelEx")]
#[inline]
pub unsafe fn launch<A: KernelArgs>(f: &Function, cfg: &LaunchConfig<'_>, args: &A) -> Result<()> {
    // SAFETY: forwarded to the caller.
    unsafe { launch_tuple(f, cfg, args, DriverLaunch::Ex) }
}

/// [`launch`] and [`launch_plain`]: `args` as the `kernelParams` array of `entry`, on
/// `cfg`'s stream.
///
/// # Safety
/// As [`launch`].
#[inline]
unsafe fn launch_tuple<A: KernelArgs>(
    f: &Function,
    cfg: &LaunchConfig<'_>,
    args: &A,
    entry: DriverLaunch,
) -> Result<()> {
    cfg.require_stream()?;
    let mut ptrs = args.arg_ptrs();
    // SAFETY: `ptrs` holds `A::COUNT` pointers into `args`, alive for the call; the
    // driver copies the parameters before returning; the stream is `cfg`'s (its context
    // is `f`'s: the caller's contract, as is the kernel-side one).
    unsafe {
        launch_config(
            f,
            cfg,
            cfg.stream_handle(),
            ptrs.as_mut_ptr(),
            ptr::null_mut(),
            entry,
        )
    }
}

/// `cuLaunchKernelEx` with the parameters in one packed buffer
/// (`extra = [CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
/// CU_LAUNCH_PARAM_END]`), laid out by device alignment.
///
/// # Errors
/// As [`launch`]. The driver checks the buffer's size only one way: a buffer larger
/// than the kernel's parameters is refused (driver 580 on an H100 answers
/// `CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES`), a shorter one is accepted and the kernel reads
/// past it. [`launch_checked`] refuses both, naming the mismatch.
///
/// # Safety
/// As [`launch`]: `packed` must hold exactly the kernel's parameters, in order, at the
/// kernel's offsets ([`launch_checked`] verifies that), and the pointers in it must be
/// valid for what the kernel does.
#[doc(alias = "cuLaunchKernelEx")]
#[doc(alias = "CU_LAUNCH_PARAM_BUFFER_POINTER")]
#[inline]
pub unsafe fn launch_packed<const CAP: usize, const N: usize>(
    f: &Function,
    cfg: &LaunchConfig<'_>,
    packed: &PackedArgs<CAP, N>,
) -> Result<()> {
    cfg.require_stream()?;
    let mut size: usize = packed.len();
    let mut extra: [*mut c_void; 5] = [
        CU_LAUNCH_PARAM_BUFFER_POINTER,
        packed.as_ptr().cast_mut().cast::<c_void>(),
        CU_LAUNCH_PARAM_BUFFER_SIZE,
        ptr::from_mut(&mut size).cast::<c_void>(),
        CU_LAUNCH_PARAM_END,
    ];
    // SAFETY: `extra` is a well-formed, END-terminated list whose buffer pointer and
    // size pointer are alive for the call; the driver only reads them. The stream and
    // the kernel-side contract are the caller's.
    unsafe {
        launch_config(
            f,
            cfg,
            cfg.stream_handle(),
            ptr::null_mut(),
            extra.as_mut_ptr(),
            DriverLaunch::Ex,
        )
    }
}

/// [`launch_packed`] after checking `packed` against the kernel's parameter layout as
/// `cuFuncGetParamInfo` reports it: the same number of parameters, each at the same
/// offset with the same size.
///
/// The check makes one `cuFuncGetParamInfo` call per parameter (plus one to find the
/// end) on every launch and caches nothing; for a hot loop, check once with
/// [`Function::verify_packed`] or [`Function::verify_args`] and launch unchecked.
///
/// # Errors
/// [`Error::Layout`] naming the first mismatch (count, offset or size) without
/// launching; [`Error::Driver`] naming `cuFuncGetParamInfo` if the driver cannot report
/// the layout (a driver before 12.4, or a function without parameter info); else as
/// [`launch`].
///
/// # Safety
/// The layout is checked, the contents are not: every pointer in `packed` must be valid
/// for what the kernel does with it until the kernel has finished, and a parameter of
/// the right size but the wrong meaning (a `u64` where the kernel takes a pointer) is
/// not caught.
#[doc(alias = "cuLaunchKernelEx")]
#[doc(alias = "cuFuncGetParamInfo")]
#[inline]
pub unsafe fn launch_checked<const CAP: usize, const N: usize>(
    f: &Function,
    cfg: &LaunchConfig<'_>,
    packed: &PackedArgs<CAP, N>,
) -> Result<()> {
    f.verify_packed(packed)?;
    // SAFETY: the layout matches the kernel's (checked above); the pointer contract is
    // forwarded to the caller.
    unsafe { launch_packed(f, cfg, packed) }
}

/// `cuLaunchKernel`: the plain launch, for configurations without attributes, passing
/// `args` as the `kernelParams` pointer array.
///
/// # Errors
/// [`Error::InvalidArgument`] if `cfg` has attributes (`cuLaunchKernel` cannot carry
/// them; use [`launch`]); else [`Error::Driver`] naming `cuLaunchKernel`, as for
/// [`launch`].
///
/// # Safety
/// As [`launch`].
#[doc(alias = "cuLaunchKernel")]
#[inline]
pub unsafe fn launch_plain<A: KernelArgs>(
    f: &Function,
    cfg: &LaunchConfig<'_>,
    args: &A,
) -> Result<()> {
    if cfg.num_attributes() != 0 {
        return Err(Error::InvalidArgument(
            "cuLaunchKernel cannot carry launch attributes; use launch (cuLaunchKernelEx)",
        ));
    }
    // SAFETY: forwarded to the caller.
    unsafe { launch_tuple(f, cfg, args, DriverLaunch::Plain) }
}

impl<'a> LaunchConfig<'a> {
    /// [`launch`] with this configuration: `cfg.launch(&f, &(ptr, n))`.
    ///
    /// # Errors
    /// As [`launch`].
    ///
    /// # Safety
    /// As [`launch`].
    #[doc(alias = "cuLaunchKernelEx")]
    #[inline]
    pub unsafe fn launch<A: KernelArgs>(&self, f: &Function, args: &A) -> Result<()> {
        // SAFETY: forwarded to the caller.
        unsafe { launch(f, self, args) }
    }
}

/// Which of the driver's launch functions [`launch_core`] calls.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum DriverLaunch {
    /// `cuLaunchKernel`: grid, block, shared memory and stream; no attributes.
    Plain,
    /// `cuLaunchKernelEx`: the whole `CUlaunchConfig`, attributes included.
    Ex,
}

/// The launch core: the crate's one call of `cuLaunchKernel` / `cuLaunchKernelEx`.
///
/// `raw` carries grid, block, dynamic shared memory, stream and (for [`DriverLaunch::Ex`]) the
/// attributes; `params` is the `kernelParams` pointer array (or null), `extra` the
/// `extra` list (or null). A context the function and the stream belong to must be
/// current.
///
/// # Safety
/// Everything the driver's launch requires: `f` a live function, `raw.hStream` a live
/// stream of its context (or null), `raw.attrs` pointing at `raw.numAttrs` valid
/// attributes, `params` at the kernel's parameters (or `extra` a well-formed list),
/// all alive for the call; the kernel-side contract (what the kernel reads and writes
/// stays valid until it has run) is the caller's.
#[inline]
pub(crate) unsafe fn launch_core(
    cu: &DriverApi,
    f: CUfunction,
    raw: &CUlaunchConfig,
    params: *mut *mut c_void,
    extra: *mut *mut c_void,
    entry: DriverLaunch,
) -> Result<()> {
    match entry {
        // SAFETY: the caller's contract above.
        DriverLaunch::Plain => unsafe {
            drv!(
                cu,
                cuLaunchKernel(
                    f,
                    raw.gridDimX,
                    raw.gridDimY,
                    raw.gridDimZ,
                    raw.blockDimX,
                    raw.blockDimY,
                    raw.blockDimZ,
                    raw.sharedMemBytes,
                    raw.hStream,
                    params,
                    extra,
                )
            )
        },
        // SAFETY: the caller's contract above.
        DriverLaunch::Ex => unsafe { drv!(cu, cuLaunchKernelEx(raw, f, params, extra)) },
    }
}

/// [`launch_core`] with `cfg`'s grid, block, shared memory and (for [`DriverLaunch::Ex`])
/// attributes, on `stream`, after making `f`'s context current. The attribute array is
/// built on this stack; a device node the driver writes back lands in `cfg`.
///
/// # Safety
/// As [`launch_core`]: `stream` a live stream of `f`'s context (or null), `params` /
/// `extra` as there, the kernel-side contract the caller's.
#[inline]
pub(crate) unsafe fn launch_config(
    f: &Function,
    cfg: &LaunchConfig<'_>,
    stream: CUstream,
    params: *mut *mut c_void,
    extra: *mut *mut c_void,
    entry: DriverLaunch,
) -> Result<()> {
    let g = f.enter()?;
    match entry {
        DriverLaunch::Plain => {
            let raw = CUlaunchConfig {
                gridDimX: cfg.grid.x,
                gridDimY: cfg.grid.y,
                gridDimZ: cfg.grid.z,
                blockDimX: cfg.block.x,
                blockDimY: cfg.block.y,
                blockDimZ: cfg.block.z,
                sharedMemBytes: cfg.shared_mem_bytes,
                hStream: stream,
                attrs: ptr::null_mut(),
                numAttrs: 0,
            };
            // SAFETY: the caller's contract; `f`'s context is current.
            unsafe { launch_core(g.cu, f.as_raw(), &raw, params, extra, entry) }
        }
        DriverLaunch::Ex => cfg.with_raw(|raw| {
            raw.hStream = stream;
            // SAFETY: `raw` points at the attribute array `with_raw` built on this
            // stack, alive and not otherwise borrowed for the call; the rest is the
            // caller's contract; `f`'s context is current.
            unsafe { launch_core(g.cu, f.as_raw(), raw, params, extra, entry) }
        }),
    }
}
