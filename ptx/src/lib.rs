//! Kernels for cuda-core's hardware tests, examples and benchmarks, compiled to
//! `ptx/generated/kernels.ptx` by `cargo xtask ptx`. That module loads with plain
//! `cuModuleLoadData` (no device-runtime references); the kernels that call the device
//! runtime are in `ptx-devrt` (`ptx/generated/devrt.ptx`).
//!
//! Each kernel's doc states its parameters, launch shape and the exact output a host
//! test can check. All kernels need sm_90 (PTX ISA 8.0).
//!
//! # Unsafe policy
//! Kernels are `unsafe extern "ptx-kernel" fn`s: the host promises the buffer sizes and
//! launch shape each one documents under `# Safety`. Every `unsafe` block carries a
//! `// SAFETY:` comment. Kernels contain no panic path (no indexing that could fail, no
//! division by a runtime value), so the PTX has no unresolved `core::panicking`
//! references.
#![no_std]
#![feature(abi_ptx, asm_experimental_arch)]

#[cfg(not(all(
    target_arch = "nvptx64",
    target_feature = "sm_90",
    target_feature = "ptx80"
)))]
compile_error!(
    "ptx-kernels builds only for nvptx64-nvidia-cuda with -C target-cpu=sm_90 \
     -C target-feature=+ptx80: run `cargo xtask ptx`"
);

pub mod async_copy;
pub mod chain;
pub mod cluster;
pub mod echo;
pub mod fill;
pub mod grid;
pub mod grid_barrier;
pub mod helpers;
pub mod mbar_forms;
pub mod mbar_pipeline;
pub mod pdl;
pub mod typed;
pub mod region;
pub mod vec_add;
pub mod vec_stream;
pub mod vector_add;
