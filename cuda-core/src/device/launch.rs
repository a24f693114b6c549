//! Device-side kernel launch (dynamic parallelism, CDP2) through
//! `cudaGetParameterBufferV2` / `cudaLaunchDeviceV2`, with the parameter buffer written
//! by the same layout code the host packer uses ([`crate::args`]).

use core::ffi::c_void;
use core::fmt;

use super::Dim3;
use super::devrt_ffi;
use crate::args::{
    DeviceRepr, KernelArgs, LayoutRule, MAX_PARAM_BYTES, PackError, params_size, write_params_raw,
};

/// A kernel function pointer (`extern "ptx-kernel" fn(A, B, ...)`, arity 0 to 16) and the
/// argument tuple its parameters make, so [`launch_child`] checks the arguments against
/// the kernel's signature at compile time.
///
/// Coerce a kernel item to its pointer type with a cast:
/// `my_kernel as unsafe extern "ptx-kernel" fn(_, _)`.
///
/// Implemented for `extern "ptx-kernel" fn(A, ..)` and `unsafe extern "ptx-kernel"
/// fn(A, ..)` with 0 to 16 parameters, each [`DeviceRepr`]. The implementations exist
/// only in nvptx64 builds (the `"ptx-kernel"` ABI is unknown to other targets), so the
/// host documentation does not list them.
///
/// # Safety
/// `Args` must be the tuple of the function's parameter types, in order, and
/// [`as_ptr`](Self::as_ptr) must return the function's address.
pub unsafe trait DeviceKernel: Copy {
    /// The parameter types as a tuple.
    type Args: KernelArgs;

    /// The kernel's address, as `cudaGetParameterBufferV2` takes it.
    fn as_ptr(self) -> *const c_void;
}

/// Implements [`DeviceKernel`] for safe and unsafe kernel pointers of one arity (on
/// nvptx64 only: the `"ptx-kernel"` ABI is an error elsewhere, rustdoc's host build
/// included).
macro_rules! device_kernel {
    ($($T:ident),*) => {
        // SAFETY: `Args` lists the parameter types in order; the cast yields the address.
        #[cfg(target_arch = "nvptx64")]
        unsafe impl<$($T: DeviceRepr),*> DeviceKernel for unsafe extern "ptx-kernel" fn($($T),*) {
            type Args = ($($T,)*);

            #[inline(always)]
            fn as_ptr(self) -> *const c_void {
                self as *const c_void
            }
        }

        // SAFETY: as above.
        #[cfg(target_arch = "nvptx64")]
        unsafe impl<$($T: DeviceRepr),*> DeviceKernel for extern "ptx-kernel" fn($($T),*) {
            type Args = ($($T,)*);

            #[inline(always)]
            fn as_ptr(self) -> *const c_void {
                self as *const c_void
            }
        }
    };
}

device_kernel!();
device_kernel!(A);
device_kernel!(A, B);
device_kernel!(A, B, C);
device_kernel!(A, B, C, D);
device_kernel!(A, B, C, D, E);
device_kernel!(A, B, C, D, E, F);
device_kernel!(A, B, C, D, E, F, G);
device_kernel!(A, B, C, D, E, F, G, H);
device_kernel!(A, B, C, D, E, F, G, H, I);
device_kernel!(A, B, C, D, E, F, G, H, I, J);
device_kernel!(A, B, C, D, E, F, G, H, I, J, K);
device_kernel!(A, B, C, D, E, F, G, H, I, J, K, L);
device_kernel!(A, B, C, D, E, F, G, H, I, J, K, L, M);
device_kernel!(A, B, C, D, E, F, G, H, I, J, K, L, M, N);
device_kernel!(A, B, C, D, E, F, G, H, I, J, K, L, M, N, O);
device_kernel!(A, B, C, D, E, F, G, H, I, J, K, L, M, N, O, P);

/// A device-runtime stream handle (`cudaStream_t` in device code).
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceStream(*mut c_void);

impl DeviceStream {
    /// The NULL stream: launches from one block run in order; the parent grid completes
    /// only after its children.
    pub const NULL: Self = Self(core::ptr::null_mut());
    /// `cudaStreamTailLaunch`: runs after the parent grid (and its other work) completes.
    pub const TAIL_LAUNCH: Self = Self(0x3 as *mut c_void);
    /// `cudaStreamFireAndForget`: runs immediately, independent of the parent's other
    /// launches.
    pub const FIRE_AND_FORGET: Self = Self(0x4 as *mut c_void);

    /// Wraps a stream created in device code.
    ///
    /// # Safety
    /// `raw` must be a valid device-runtime stream for as long as it is used.
    #[inline(always)]
    #[must_use]
    pub const unsafe fn from_raw(raw: *mut c_void) -> Self {
        Self(raw)
    }

    /// The raw `cudaStream_t`.
    #[inline(always)]
    #[must_use]
    pub const fn as_raw(self) -> *mut c_void {
        self.0
    }
}

/// A `cudaError_t` returned by the device runtime.
#[repr(transparent)]
#[must_use]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DevRtError(pub u32);

impl DevRtError {
    /// `cudaErrorInvalidValue`.
    pub const INVALID_VALUE: Self = Self(1);
    /// `cudaErrorMemoryAllocation`.
    pub const MEMORY_ALLOCATION: Self = Self(2);
    /// `cudaErrorInvalidConfiguration`.
    pub const INVALID_CONFIGURATION: Self = Self(9);
    /// `cudaErrorLaunchMaxDepthExceeded`.
    pub const LAUNCH_MAX_DEPTH_EXCEEDED: Self = Self(65);
    /// `cudaErrorLaunchPendingCountExceeded`.
    pub const LAUNCH_PENDING_COUNT_EXCEEDED: Self = Self(69);
    /// `cudaErrorInvalidDevice`.
    pub const INVALID_DEVICE: Self = Self(101);
    /// `cudaErrorStartupFailure`.
    pub const STARTUP_FAILURE: Self = Self(127);
    /// `cudaErrorLaunchOutOfResources`.
    pub const LAUNCH_OUT_OF_RESOURCES: Self = Self(701);

    /// The CUDA name of a known code.
    #[must_use]
    pub const fn name(self) -> Option<&'static str> {
        Some(match self.0 {
            1 => "cudaErrorInvalidValue",
            2 => "cudaErrorMemoryAllocation",
            9 => "cudaErrorInvalidConfiguration",
            65 => "cudaErrorLaunchMaxDepthExceeded",
            69 => "cudaErrorLaunchPendingCountExceeded",
            101 => "cudaErrorInvalidDevice",
            127 => "cudaErrorStartupFailure",
            701 => "cudaErrorLaunchOutOfResources",
            _ => return None,
        })
    }
}

impl fmt::Display for DevRtError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => f.write_str(name),
            None => write!(f, "unknown cudaError_t {}", self.0),
        }
    }
}

/// Why [`launch_child`] did not launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub enum LaunchError {
    /// The arguments do not fit a 4 KB parameter buffer (checked before one is taken).
    Pack(PackError),
    /// `cudaGetParameterBufferV2` returned null (launch pool exhausted or bad
    /// configuration).
    NoParameterBuffer,
    /// `cudaLaunchDeviceV2` failed.
    Launch(DevRtError),
}

impl LaunchError {
    /// A 32-bit code for reporting to the host: the `cudaError_t` for
    /// [`Launch`](Self::Launch), `0xFFFF_FFFF` for [`NoParameterBuffer`](Self::NoParameterBuffer),
    /// `0xFFFF_FFFE` for [`Pack`](Self::Pack).
    #[must_use]
    pub const fn code(self) -> u32 {
        match self {
            Self::Launch(e) => e.0,
            Self::NoParameterBuffer => 0xFFFF_FFFF,
            Self::Pack(_) => 0xFFFF_FFFE,
        }
    }
}

impl fmt::Display for LaunchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Pack(e) => write!(f, "device-side launch: {e}"),
            Self::NoParameterBuffer => f.write_str("cudaGetParameterBufferV2 returned null"),
            Self::Launch(e) => write!(f, "cudaLaunchDeviceV2: {e}"),
        }
    }
}

impl core::error::Error for LaunchError {}

/// Launches `kernel` from device code with parameters laid out by
/// [`LayoutRule::Alignment`], the rule the host packer uses
/// ([`launch_child_with_rule`] for the other).
///
/// # Safety
/// See [`launch_child_with_rule`].
///
/// # Errors
/// See [`launch_child_with_rule`].
#[doc(alias = "cudaLaunchDeviceV2")]
#[inline(always)]
pub unsafe fn launch_child<K: DeviceKernel>(
    kernel: K,
    grid: Dim3,
    block: Dim3,
    shmem: u32,
    stream: DeviceStream,
    args: &K::Args,
) -> Result<(), LaunchError> {
    // SAFETY: forwarded to the caller.
    unsafe {
        launch_child_with_rule(
            LayoutRule::Alignment,
            kernel,
            grid,
            block,
            shmem,
            stream,
            args,
        )
    }
}

/// Launches `kernel` from device code: `cudaGetParameterBufferV2`, the buffer
/// zeroed over the parameters' extent and filled by [`write_params_raw`] with `rule`,
/// then `cudaLaunchDeviceV2`.
///
/// The arguments' types are checked against the kernel's signature ([`DeviceKernel`]).
///
/// # Safety
/// - `kernel` is a kernel (`#[no_mangle] extern "ptx-kernel" fn`) of the same PTX module;
/// - `stream` is [`DeviceStream::NULL`], a special stream, or one created by this grid;
/// - the module is linked with `libcudadevrt.a` and the launch configuration respects
///   the device-runtime limits the host set (pending launch count, sync depth);
/// - pointers in `args` stay valid until the child completes.
///
/// # Errors
/// [`LaunchError::Pack`] when the arguments exceed 4 KB, [`LaunchError::NoParameterBuffer`]
/// when no buffer is available, [`LaunchError::Launch`] when the launch fails.
#[doc(alias = "cudaGetParameterBufferV2")]
#[inline(always)]
pub unsafe fn launch_child_with_rule<K: DeviceKernel>(
    rule: LayoutRule,
    kernel: K,
    grid: Dim3,
    block: Dim3,
    shmem: u32,
    stream: DeviceStream,
    args: &K::Args,
) -> Result<(), LaunchError> {
    let params = <K::Args as KernelArgs>::PARAMS;
    let size = match params_size(rule, params) {
        Some(size) if size <= MAX_PARAM_BYTES => size,
        _ => {
            return Err(LaunchError::Pack(PackError::TooLarge {
                index: params.len().saturating_sub(1),
                needed: params_size(rule, params).unwrap_or(usize::MAX),
                capacity: MAX_PARAM_BYTES,
            }));
        }
    };
    // SAFETY: the caller guarantees `kernel` is a kernel of this module and the module is
    // linked with the device runtime; `Dim3` is passed by value as C's `dim3`.
    let buf = unsafe { devrt_ffi::cudaGetParameterBufferV2(kernel.as_ptr(), grid, block, shmem) };
    if buf.is_null() {
        return Err(LaunchError::NoParameterBuffer);
    }
    // SAFETY: the device runtime's buffer holds `MAX_PARAM_BYTES` writable bytes and
    // `size <= MAX_PARAM_BYTES`; it is fresh memory, so it does not overlap `args`.
    unsafe {
        core::ptr::write_bytes(buf, 0, size);
        write_params_raw(rule, buf, MAX_PARAM_BYTES, args).map_err(LaunchError::Pack)?;
    }
    // SAFETY: `buf` came from `cudaGetParameterBufferV2` and is launched once; the caller
    // guarantees the stream and that the parameters match the kernel.
    match unsafe { devrt_ffi::cudaLaunchDeviceV2(buf, stream.as_raw()) } {
        0 => Ok(()),
        e => Err(LaunchError::Launch(DevRtError(e))),
    }
}
