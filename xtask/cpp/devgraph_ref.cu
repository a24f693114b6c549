// CUDA C++ reference for the device graph launch benchmark (examples/devgraph_bench.rs):
// the same self-relaunching chain link and scheduler tick as ptx/devrt/src/graph_launch.rs
// (dg_chain_plain, dg_chain_link, dg_tick), written with the device runtime's C++ API.
//
// Built on the GPU host by run.sh:
//   nvcc -arch=sm_90 -O3 -rdc=true -ptx devgraph_ref.cu -o devgraph_ref.ptx
// and linked by the Rust benchmark with libcudadevrt.a through the driver's JIT linker,
// so both versions run under the same host code.
#include <cuda_runtime.h>
#include <cstdint>

extern "C" __global__ void cpp_dg_chain_plain(uint32_t *data, uint32_t n) {
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        data[i] += 1;
    }
}

extern "C" __global__ void cpp_dg_chain_link(uint32_t *data, uint32_t n, uint32_t *remaining) {
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        data[i] += 1;
    }
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    volatile uint32_t *rem = remaining;
    uint32_t r = *rem;
    uint32_t next;
    if (r > 1 && (r & 0x80000000u) == 0) {
        cudaError_t e = cudaGraphLaunch(cudaGetCurrentGraphExec(), cudaStreamGraphTailLaunch);
        next = e == cudaSuccess ? r - 1 : (0x80000000u | (uint32_t)e);
    } else if (r & 0x80000000u) {
        next = r;
    } else {
        next = 0;
    }
    *rem = next;
}

__device__ __forceinline__ uint64_t globaltimer() {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// Record layout as in graph_launch.rs: [start, end, current_graph_exec, ran, -, -, code_tail, 0].
extern "C" __global__ void cpp_dg_tick(uint64_t *recs, uint32_t *count, uint32_t limit) {
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    uint64_t start = globaltimer();
    volatile uint32_t *c = count;
    uint32_t k = *c;
    *c = k + 1;
    uint64_t code = ~0ull;
    if (k + 1 < limit) {
        cudaGraphExec_t g = cudaGetCurrentGraphExec();
        code = g ? (uint64_t)cudaGraphLaunch(g, cudaStreamGraphTailLaunch) : 1ull;
    }
    uint64_t current = (uint64_t)cudaGetCurrentGraphExec();
    uint64_t end = globaltimer();
    if (k < limit) {
        volatile uint64_t *r = recs + (size_t)k * 8;
        r[0] = start; r[1] = end; r[2] = current; r[3] = 1;
        r[4] = ~0ull; r[5] = ~0ull; r[6] = code; r[7] = 0;
    }
}
