//! Kernels that call the CUDA device runtime (`libcudadevrt.a`), compiled to
//! `ptx/generated/devrt.ptx` by `cargo xtask ptx`.
//!
//! The module has unresolved references to `cudaGetParameterBufferV2`, `cudaGraphLaunch`,
//! `cudaLaunchDeviceV2` and `cudaGraphSetConditional`: load it through the JIT linker
//! (`cuLinkCreate`, `cuLinkAddData(PTX)`, `cuLinkAddFile(libcudadevrt.a,
//! CU_JIT_INPUT_LIBRARY)`, `cuLinkComplete`), not with plain `cuModuleLoadData`.
//! Set `CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT` (and sync depth) on the host first
//! if the defaults are too small.
//!
//! # Unsafe policy
//! As in `ptx-kernels`: `# Safety` on each kernel, `// SAFETY:` on each `unsafe` block,
//! no panic paths.
#![no_std]
#![feature(abi_ptx)]

#[cfg(not(all(
    target_arch = "nvptx64",
    target_feature = "sm_90",
    target_feature = "ptx80"
)))]
compile_error!(
    "ptx-devrt builds only for nvptx64-nvidia-cuda with -C target-cpu=sm_90 \
     -C target-feature=+ptx80: run `cargo xtask ptx`"
);

pub mod dyn_launch;
pub mod graph_launch;
pub mod set_selector;
pub mod while_cond;
