//! Thin safe layer over the CUDA driver API (host) and inline-PTX helpers (device).
//!
//! # Unsafe policy
//! Every `unsafe` block carries a `// SAFETY:` comment naming the invariant it relies on;
//! every public `unsafe fn` documents its contract under `# Safety`. Raw driver calls are
//! confined to the host modules; the device modules confine `asm!` to one file.
#![no_std]
#![cfg_attr(target_arch = "nvptx64", feature(asm_experimental_arch, abi_ptx, stdarch_nvptx))]

#[cfg(feature = "alloc")]
extern crate alloc;
#[cfg(feature = "std")]
extern crate std;

pub mod args;

#[cfg(target_arch = "nvptx64")]
pub mod device;
