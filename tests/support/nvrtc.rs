//! The CUDA C++ sources the NVRTC tests compile (`tests/nvrtc.rs` on the CPU,
//! `tests/hw_nvrtc.rs` on the GPU): the repository's reference kernels, included by name
//! as the nvcc-built references include them, and a template kernel for name expressions.

use cudadrv::nvrtc::Program;

/// `xtask/cpp/kernels.cuh`, the reference kernels (device code only).
pub const KERNELS: &str = include_str!("../../xtask/cpp/kernels.cuh");

/// A program that includes [`KERNELS`] as `"kernels.cuh"`.
pub const MAIN: &str = "#include \"kernels.cuh\"\n";

/// `template <typename T> scale(T* data, T factor, unsigned n)`: `data[i] *= factor`, and
/// a namespaced kernel, for name expressions.
pub const TEMPLATE: &str = r#"
template <typename T> __global__ void scale(T* data, T factor, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) data[i] *= factor;
}
namespace ns { __global__ void fill(int* out, int v) { out[threadIdx.x] = v; } }
"#;

/// The reference kernels as a program: [`MAIN`] with the header [`KERNELS`].
pub fn reference() -> Program<'static> {
    Program::new("reference.cu", MAIN).header("kernels.cuh", KERNELS)
}
