//! Kernel parameters laid out by **device** size and alignment.
//!
//! A CUDA kernel receives its parameters in one buffer, each at an offset that meets the
//! parameter's device alignment. Device alignment equals host alignment except for the
//! CUDA vector types (`float2` is 8-aligned, `float4` 16-aligned, ...) and 8-byte
//! scalars that some host ABIs align to 4. This module knows the device layout of every
//! parameter type and reuses one offset computation for every path that builds a
//! parameter list:
//!
//! - [`DeviceRepr`]: the device size and alignment of a parameter type, implemented for
//!   scalars, raw pointers, arrays, the [`vector`] types, and structs declared with
//!   [`kernel_struct!`](crate::kernel_struct), whose host layout is proven equal to the
//!   device layout at compile time.
//! - [`KernelArgs`]: a tuple of parameter values, turned into the `kernelParams` array of
//!   pointers without allocating ([`KernelArgs::arg_ptrs`]).
//! - [`PackedArgs`]: one packed buffer for `CU_LAUNCH_PARAM_BUFFER_POINTER`, with the
//!   offset of each parameter recorded so that [`PackedArgs::verify`] can compare it
//!   with what `cuFuncGetParamInfo` reports.
//! - [`write_params`] / [`write_params_raw`]: the same layout written into a device-side
//!   parameter buffer (`cudaGetParameterBufferV2`).
//! - [`LayoutRule`]: the offset rule, [`LayoutRule::Alignment`] by default, with
//!   [`LayoutRule::SizeMultiple`] as the alternative the Programming Guide's wording
//!   suggests for device-side launches.
//!
//! The module uses `core` only, so the device build (`nvptx64-nvidia-cuda`) shares it.
//!
//! # Unsafe policy
//! [`DeviceRepr`] and [`KernelArgs`] are `unsafe` traits: the byte copies and the pointer
//! arrays rely on their contracts, stated under `# Safety` on each. Every `unsafe` block
//! carries a `// SAFETY:` comment. Types declared with
//! [`kernel_struct!`](crate::kernel_struct) get a [`DeviceRepr`] implementation whose
//! contract the macro checks at compile time, so users need no `unsafe` of their own.

mod bf16;
mod error;
mod kernel_struct;
mod layout;
mod packed;
mod repr;
mod tuple;
pub mod vector;
mod write;

pub use bf16::Bf16;
pub use error::{LayoutMismatch, PackError};
pub use layout::{
    LayoutRule, ParamInfo, ParamSpec, align_up, checked_align_up, param_offset, params_size,
    struct_layout,
};
pub use packed::{MAX_PARAM_BYTES, MAX_PARAMS, PackedArgs};
pub use repr::{DeviceRepr, SIGNATURE_SEED, signature_mix};
pub use tuple::{ArgPtrs, ArgVisitor, KernelArgs};
pub use vector::*;
pub use write::{write_params, write_params_raw};
