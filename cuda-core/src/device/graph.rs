//! Device-side graph calls (`libcudadevrt.a`): conditional nodes
//! (`cudaGraphSetConditional`) and device graph launch (`cudaGraphLaunch`,
//! `cudaGetCurrentGraphExec`; Programming Guide 4.2.6).

use core::ffi::c_void;

use super::devrt_ffi;
use super::launch::DevRtError;
use crate::args::DeviceRepr;

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

/// Where [`DeviceGraphExec::launch`] puts a device graph launch: the three named streams
/// of `cuda_device_runtime_api.h`. A device graph can only be launched into these.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GraphLaunchStream {
    /// `cudaStreamGraphTailLaunch` (`0x01 << 56`): runs after the launching graph has
    /// completed, including all the fire-and-forget work it launched; tail launches of
    /// one graph run one after another in the order they were made (up to 255 pending).
    TailLaunch,
    /// `cudaStreamGraphFireAndForget` (`0x02 << 56`): runs at once, as a child of the
    /// launching graph, which does not complete before it (up to 120 per graph run).
    FireAndForget,
    /// `cudaStreamGraphFireAndForgetAsSibling` (`0x03 << 56`): runs at once, as a child of
    /// the launching graph's parent (a sibling of the launching graph): the launching
    /// graph's tail launches do not wait for it, the host stream does.
    FireAndForgetAsSibling,
}

impl GraphLaunchStream {
    /// The `cudaStream_t` value of the named stream.
    #[inline(always)]
    #[must_use]
    pub const fn as_raw(self) -> *mut c_void {
        let v: usize = match self {
            Self::TailLaunch => 0x0100_0000_0000_0000,
            Self::FireAndForget => 0x0200_0000_0000_0000,
            Self::FireAndForgetAsSibling => 0x0300_0000_0000_0000,
        };
        v as *mut c_void
    }
}

/// A `cudaGraphExec_t` that device code may launch: an executable graph instantiated on
/// the host for device launch and uploaded (`GraphExec::device_handle` on the host),
/// passed to the kernel as a parameter, or the graph the kernel runs in
/// ([`current`](Self::current)).
///
/// The same 8 bytes as the host's `DeviceGraphHandle` (a kernel parameter of 8-byte
/// alignment).
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DeviceGraphExec(pub u64);

// SAFETY: a transparent `u64`: 8 bytes, no padding, the device's encoding.
unsafe impl DeviceRepr for DeviceGraphExec {
    const DEVICE_SIZE: usize = 8;
    const DEVICE_ALIGN: usize = 8;
}

impl DeviceGraphExec {
    /// `cudaGetCurrentGraphExec()` (`%current_graph_exec`): the device graph the calling
    /// kernel runs in, `None` when it does not run in a device-launchable graph (a plain
    /// stream launch, or a graph instantiated without the device-launch flag).
    #[doc(alias = "cudaGetCurrentGraphExec")]
    #[cfg(any(doc, target_feature = "ptx80"))]
    #[inline(always)]
    #[must_use]
    pub fn current() -> Option<Self> {
        // SAFETY: reading a special register has no precondition.
        let g = unsafe { super::ptx_asm::current_graph_exec() };
        if g == 0 { None } else { Some(Self(g)) }
    }

    /// `cudaGraphLaunch(exec, stream)`: launches the graph from the device into one of
    /// the named streams.
    ///
    /// # Errors
    /// The device runtime's `cudaError_t` (for example `cudaErrorInvalidValue` when the
    /// calling kernel does not itself run in a graph, or when the graph is already
    /// running from a device launch, or the 120 fire-and-forget / 255 tail-launch limits
    /// are reached).
    ///
    /// # Safety
    /// `self` is an executable graph instantiated for device launch, uploaded, and not
    /// destroyed before this launch and everything it starts have completed; the PTX
    /// module is linked with `libcudadevrt.a`; what the graph's nodes name is valid
    /// while it runs.
    #[doc(alias = "cudaGraphLaunch")]
    #[inline(always)]
    pub unsafe fn launch(self, stream: GraphLaunchStream) -> Result<(), DevRtError> {
        // SAFETY: forwarded to the caller; the stream is one of the named ones.
        let code = unsafe { devrt_ffi::cudaGraphLaunch(self.0, stream.as_raw()) };
        if code == 0 {
            Ok(())
        } else {
            Err(DevRtError(code))
        }
    }

    /// [`launch`](Self::launch) of the graph the calling kernel runs in, as a tail
    /// launch: the guide's self-relaunch (scheduler) pattern. `Err` with
    /// `cudaErrorInvalidValue` when the kernel does not run in a device graph.
    ///
    /// # Safety
    /// As [`launch`](Self::launch): the PTX module is linked with `libcudadevrt.a`, and
    /// the host keeps the graph alive until the relaunches have stopped.
    #[cfg(any(doc, target_feature = "ptx80"))]
    #[inline(always)]
    pub unsafe fn relaunch_current() -> Result<(), DevRtError> {
        match Self::current() {
            // SAFETY: the running graph was instantiated for device launch and uploaded
            // (it has a device handle); its lifetime is the caller's contract.
            Some(g) => unsafe { g.launch(GraphLaunchStream::TailLaunch) },
            None => Err(DevRtError::INVALID_VALUE),
        }
    }
}
