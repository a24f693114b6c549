// The CUDA C++ reference kernels, device code only: the C++ references include it
// (bench.cu, mem_ref.cu, region_ref.cu, vector_add.cu, built by nvcc on the GPU host),
// and cudadrv's NVRTC tests compile it as it is (tests/nvrtc.rs, tests/hw_nvrtc.rs), so
// it includes nothing and uses only what NVRTC provides without headers.
//
// Each is the twin of a Rust kernel in ptx/src: chain_step (chain.rs), pdl_primary and
// pdl_secondary (pdl.rs), vector_add (vector_add.rs). The names are extern "C", so a
// module built from this file has them under these names.

#pragma once

__device__ __forceinline__ void grid_dependency_wait() {
    asm volatile("griddepcontrol.wait;" ::: "memory");
}
__device__ __forceinline__ void launch_dependents() {
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}
__device__ __forceinline__ unsigned long long globaltimer() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
__device__ __forceinline__ unsigned smid() {
    unsigned s;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
    return s;
}

extern "C" __global__ void empty_kernel() {}

// mode: 0 no PDL, 1 wait + early trigger, 2 wait + late trigger, 3 wait only.
extern "C" __global__ void chain_step(const unsigned* in, unsigned* out, unsigned n, unsigned mode) {
    if (mode > 3) mode = 0;
    if (mode != 0) grid_dependency_wait();
    if (mode == 1) launch_dependents();
    const unsigned stride = gridDim.x * blockDim.x;
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n;) {
        out[i] = in[i] + 1u;
        const unsigned next = i + stride;
        if (next < i) break;
        i = next;
    }
    if (mode == 2) launch_dependents();
}

__device__ __forceinline__ void stamp(unsigned long long* stamps, int slot, unsigned long long v) {
    if (threadIdx.x == 0) {
        volatile unsigned long long* p = stamps + 4 * blockIdx.x + slot;
        *p = v;
    }
}

// Trigger at block entry, busy-wait work_ns, then write (as ptx/src/pdl.rs).
extern "C" __global__ void pdl_primary(unsigned* out, unsigned n, unsigned long long* stamps,
                            unsigned work_ns) {
    launch_dependents();
    const unsigned long long start = globaltimer();
    stamp(stamps, 0, start);
    while (globaltimer() - start < work_ns) {
    }
    stamp(stamps, 1, globaltimer());
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        out[i] = i * 3u + 7u;
    __syncthreads();
    stamp(stamps, 2, globaltimer());
    stamp(stamps, 3, smid());
}

extern "C" __global__ void pdl_secondary(const unsigned* in, unsigned* out, unsigned n,
                              unsigned long long* stamps, unsigned prolog_iters) {
    stamp(stamps, 0, globaltimer());
    // Same prolog as ptx/src/pdl.rs: sum %clock64 reads, use the sum (so it stays).
    unsigned long long acc = 0;
    for (unsigned k = 0; k < prolog_iters; ++k) acc += clock64();
    grid_dependency_wait();
    stamp(stamps, 1, globaltimer());
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        out[i] = in[i] * 2u + 1u;
    __syncthreads();
    stamp(stamps, 2, globaltimer());
    stamp(stamps, 3, acc == ~0ull ? acc : smid());
}

// c[i] = a[i] + b[i] for i < n, one thread per element: thread i reads a[i] and b[i],
// writes c[i], and touches nothing else (examples/vector_add.rs's SAFETY comment relies
// on this).
extern "C" __global__ void vector_add(const float* a, const float* b, float* c, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
