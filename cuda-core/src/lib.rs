//! Thin safe layer over the CUDA driver API (host) and inline-PTX helpers (device).
//!
//! # Unsafe policy
//! Every `unsafe` block carries a `// SAFETY:` comment naming the invariant it relies on;
//! every public `unsafe fn` documents its contract under `# Safety`. Raw driver calls are
//! confined to the host modules; the device modules confine `asm!` to one file.
#![no_std]
#![cfg_attr(
    target_arch = "nvptx64",
    feature(asm_experimental_arch, abi_ptx, stdarch_nvptx)
)]

#[cfg(feature = "alloc")]
extern crate alloc;
#[cfg(feature = "std")]
extern crate std;

/// The raw bindings this crate is built on, re-exported so that users reach the same
/// copy (`cuda_core::cuda_sys::CUstream`, `cuda_core::cuda_sys::driver()`).
#[cfg(not(target_arch = "nvptx64"))]
pub use cuda_sys;

pub mod args;
mod dim3;
pub use dim3::Dim3;

#[cfg(target_arch = "nvptx64")]
pub mod device;

// Host layer: RAII handles over the driver API, one module per driver API section.
#[cfg(not(target_arch = "nvptx64"))]
mod context;
#[cfg(not(target_arch = "nvptx64"))]
mod device_host;
#[cfg(not(target_arch = "nvptx64"))]
pub mod driver;
#[cfg(not(target_arch = "nvptx64"))]
pub mod error;
#[cfg(not(target_arch = "nvptx64"))]
mod event;
#[cfg(not(target_arch = "nvptx64"))]
mod function;
#[cfg(not(target_arch = "nvptx64"))]
pub mod graph;
#[cfg(not(target_arch = "nvptx64"))]
pub mod launch;
#[cfg(not(target_arch = "nvptx64"))]
pub mod limits;
#[cfg(not(target_arch = "nvptx64"))]
mod linker;
#[cfg(not(target_arch = "nvptx64"))]
pub mod memory;
#[cfg(not(target_arch = "nvptx64"))]
mod module;
#[cfg(not(target_arch = "nvptx64"))]
mod shared;
#[cfg(not(target_arch = "nvptx64"))]
mod stream;

#[cfg(not(target_arch = "nvptx64"))]
pub use context::{Context, MAX_CONTEXTS, StreamPriorityRange};
#[cfg(not(target_arch = "nvptx64"))]
pub use device_host::{Device, DeviceName};
#[cfg(not(target_arch = "nvptx64"))]
pub use error::{DropError, Error, JitLog, Result, drop_error_count, set_drop_error_hook};
#[cfg(not(target_arch = "nvptx64"))]
pub use event::{Event, EventFlags};
#[cfg(not(target_arch = "nvptx64"))]
pub use function::{ClusterConfig, Function};
#[cfg(not(target_arch = "nvptx64"))]
pub use graph::{Graph, GraphExec};
#[cfg(not(target_arch = "nvptx64"))]
pub use launch::LaunchConfig;
#[cfg(not(target_arch = "nvptx64"))]
pub use limits::Limit;
#[cfg(not(target_arch = "nvptx64"))]
pub use linker::{LinkStorage, Linker};
#[cfg(not(target_arch = "nvptx64"))]
pub use memory::{AsyncDeviceBuffer, DeviceBuffer, DevicePtr, MemPool, PinnedHostBuffer, Pod};
#[cfg(not(target_arch = "nvptx64"))]
pub use module::{Global, JitOptions, MAX_MODULES, Module};
#[cfg(not(target_arch = "nvptx64"))]
pub use stream::{EventWaitFlags, Stream, StreamFlags};
