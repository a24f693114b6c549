// CUDA C++ reference for `examples/region_bench.rs`: the 256-kernel chain as a graph
// captured by hand (cudaStreamBeginCapture ... cudaGraphInstantiate), with and without
// PDL, timed like the Rust side (events around one graph launch, median of `reps`,
// checked). Built on the GPU host by run.sh as a shared library:
//   nvcc -O3 -std=c++17 -arch=sm_90 -shared -Xcompiler -fPIC region_ref.cu -o region_ref.so
// Uses the primary context (the runtime's), which cuda-core shares.

#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                              \
    do {                                                                                   \
        cudaError_t e_ = (x);                                                              \
        if (e_ != cudaSuccess) {                                                           \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x,                     \
                    cudaGetErrorString(e_));                                               \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

static const unsigned BLOCK = 256;

// The link is chain_step of kernels.cuh, as ptx/src/chain.rs (mode 0: no PDL; 1: wait,
// then trigger at once).
#include "kernels.cuh"

static cudaStream_t ref_stream() {
    static cudaStream_t s = nullptr;
    if (!s) CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    return s;
}

static void enqueue(cudaStream_t s, unsigned* buf[2], unsigned n, unsigned grid, int links,
                    bool pdl) {
    cudaLaunchAttribute attr[1] = {};
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(grid);
    cfg.blockDim = dim3(BLOCK);
    cfg.stream = s;
    cfg.attrs = attr;
    for (int k = 0; k < links; ++k) {
        const unsigned* in = buf[k & 1];
        unsigned* out = buf[(k + 1) & 1];
        cfg.numAttrs = pdl && k > 0 ? 1 : 0;
        CK(cudaLaunchKernelEx(&cfg, chain_step, in, out, n, pdl ? 1u : 0u));
    }
}

static double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    if (n == 0) return 0;
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Median us per kernel of `reps` launches (after 2 warm-up launches) of one captured graph
// of `links` dependent kernels, `grid` x 256 threads over `n` elements; checks the values.
extern "C" double region_ref_graph_us(int pdl, unsigned n, unsigned grid, int links,
                                      int reps) {
    cudaStream_t s = ref_stream();
    std::vector<unsigned> x0(n), host(n);
    for (unsigned i = 0; i < n; ++i) x0[i] = i * 2654435761u ^ 0x9e3779b9u;
    unsigned* buf[2];
    CK(cudaMalloc(&buf[0], n * sizeof(unsigned)));
    CK(cudaMalloc(&buf[1], n * sizeof(unsigned)));
    CK(cudaMemcpy(buf[0], x0.data(), n * sizeof(unsigned), cudaMemcpyHostToDevice));
    CK(cudaDeviceSynchronize());
    cudaGraph_t g;
    cudaGraphExec_t exec;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    enqueue(s, buf, n, grid, links, pdl != 0);
    CK(cudaStreamEndCapture(s, &g));
    CK(cudaGraphInstantiate(&exec, g, 0));
    CK(cudaGraphDestroy(g));
    CK(cudaGraphUpload(exec, s));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    const int warm = 2;
    std::vector<double> us;
    for (int r = 0; r < warm + reps; ++r) {
        CK(cudaEventRecord(e0, s));
        CK(cudaGraphLaunch(exec, s));
        CK(cudaEventRecord(e1, s));
        CK(cudaEventSynchronize(e1));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        if (r >= warm) us.push_back(1000.0 * ms / links);
    }
    CK(cudaMemcpy(host.data(), buf[0], n * sizeof(unsigned), cudaMemcpyDeviceToHost));
    const unsigned total = (unsigned)(links * (warm + reps));
    for (unsigned i = 0; i < n; ++i) {
        if (host[i] != x0[i] + total) {
            fprintf(stderr, "region_ref chain pdl=%d: element %u is %u, expected %u\n", pdl, i,
                    host[i], x0[i] + total);
            exit(1);
        }
    }
    CK(cudaGraphExecDestroy(exec));
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    CK(cudaFree(buf[0]));
    CK(cudaFree(buf[1]));
    return median(us);
}

// Host us per kernel to capture the chain again with every link's buffers swapped and
// apply it with cudaGraphExecUpdate (the whole-graph update path), median of `reps`.
extern "C" double region_ref_exec_update_us(unsigned n, unsigned grid, int links, int reps) {
    cudaStream_t s = ref_stream();
    unsigned* a[2];
    unsigned* b[2];
    for (int i = 0; i < 2; ++i) {
        CK(cudaMalloc(&a[i], n * sizeof(unsigned)));
        CK(cudaMalloc(&b[i], n * sizeof(unsigned)));
    }
    CK(cudaDeviceSynchronize());
    cudaGraph_t g;
    cudaGraphExec_t exec;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    enqueue(s, a, n, grid, links, false);
    CK(cudaStreamEndCapture(s, &g));
    CK(cudaGraphInstantiate(&exec, g, 0));
    CK(cudaGraphDestroy(g));
    std::vector<double> us;
    for (int r = 0; r < reps; ++r) {
        auto t0 = std::chrono::steady_clock::now();
        CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
        enqueue(s, (r & 1) ? a : b, n, grid, links, false);
        CK(cudaStreamEndCapture(s, &g));
        cudaGraphExecUpdateResultInfo info;
        CK(cudaGraphExecUpdate(exec, g, &info));
        CK(cudaGraphDestroy(g));
        CK(cudaGraphLaunch(exec, s));
        auto t1 = std::chrono::steady_clock::now();
        CK(cudaStreamSynchronize(s));
        us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / links);
    }
    CK(cudaGraphExecDestroy(exec));
    for (int i = 0; i < 2; ++i) {
        CK(cudaFree(a[i]));
        CK(cudaFree(b[i]));
    }
    return median(us);
}
