// CUDA C++ reference for `examples/bench.rs`: the same measurements, made with nvcc-built
// kernels equivalent to the Rust ones in ptx/src (chain_step, pdl_primary,
// pdl_secondary), through the driver API (impl cpp-drv) and the runtime API (cpp-rt).
// Built on the GPU host by build.sh (nvcc -O3 -arch=sm_90).
//
// Usage: bench [--csv PATH] [--ptx KERNELS.ptx] [--quick]
//   (default PATH: $OUT/bench_cpp.csv, else ./bench_cpp.csv; with --ptx, also the chain
//   rows with the Rust-built chain_step, impl cpp-rt-rustptx)
//
// CSV schema, shared with examples/bench.rs (one header line, then one row per measurement):
//   impl,section,case,elems,prolog,unit,median,min,max,samples
//   impl     rust (cuda-core) | rust-raw (cuda-sys function pointers) | cpp-drv | cpp-rt
//   section  launch     host cost of one enqueue, timed around the enqueue only
//                       cases plain0 (empty kernel, cuLaunchKernel / <<<>>>),
//                       ex_pdl0 (empty kernel, cuLaunchKernelEx / cudaLaunchKernelEx with
//                       the programmatic-stream-serialization attribute), ptrs4 (4 params,
//                       kernelParams pointer array), packed4 (4 params, one packed buffer
//                       via CU_LAUNCH_PARAM_BUFFER_POINTER, cuLaunchKernelEx); unit
//                       ns/launch
//                       (rust also: unit allocs/launch, heap allocations per launch)
//            chain      256 dependent chain_step kernels, grid 132 x block 256, elems 33792
//                       cases stream, stream_pdl, graph, graph_pdl; unit us/kernel
//            crossover  the same four cases for elems 33792 .. 4194304
//            pair       pdl_primary (no work) + pdl_secondary (prolog iterations before
//                       the wait)
//                       cases plain, pdl; unit us/pair
//            loader     cases load_driver, cuInit, ctx_create, module_load, first_launch;
//                       unit ms (one sample each, cold, except load_driver_warm)
//   elems    elements per kernel (0: not applicable)
//   prolog   pdl_secondary prolog iterations (0: not applicable)
//   median,min,max over `samples` repetitions (each repetition: a batch, a chain, ...)

#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
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

#define CKD(x)                                                                             \
    do {                                                                                   \
        CUresult r_ = (x);                                                                 \
        if (r_ != CUDA_SUCCESS) {                                                          \
            const char* s_ = nullptr;                                                      \
            cuGetErrorName(r_, &s_);                                                       \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, s_ ? s_ : "?");     \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

// ---- kernels (equivalent to ptx/src/chain.rs and ptx/src/pdl.rs): kernels.cuh --------

#include "kernels.cuh"

// ---- measurement helpers --------------------------------------------------------------

using Clock = std::chrono::steady_clock;

static double ms_since(Clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

struct Stats {
    double median, min, max;
    size_t samples;
};

static Stats stats(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    if (n == 0) return {0, 0, 0, 0};
    const double med = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    return {med, v.front(), v.back(), n};
}

static FILE* g_csv = nullptr;
// Library mode: rows are not printed; the last median is kept for the caller.
static bool g_silent = false;
static double g_last_median = 0;

static void row(const char* impl, const char* section, const char* kase, unsigned elems,
                unsigned prolog, const char* unit, Stats s) {
    g_last_median = s.median;
    if (g_silent) return;
    char line[512];
    snprintf(line, sizeof line, "%s,%s,%s,%u,%u,%s,%.4f,%.4f,%.4f,%zu\n", impl, section, kase,
             elems, prolog, unit, s.median, s.min, s.max, s.samples);
    fputs(line, stdout);
    if (g_csv) fputs(line, g_csv);
}

static const unsigned GRID = 132, BLOCK = 256;
static bool g_quick = false;

// ---- (1) host cost of one launch -------------------------------------------------------

// Times `batches` batches of `batch` enqueues (after `warm` unrecorded batches), with a
// stream sync between batches; ns per launch.
template <class F>
static Stats launch_cost(cudaStream_t s, F&& launch_one) {
    const int batch = 1000, warm = 5, batches = g_quick ? 10 : 50;
    std::vector<double> ns;
    for (int b = 0; b < warm + batches; ++b) {
        const auto t0 = Clock::now();
        for (int i = 0; i < batch; ++i) launch_one();
        const double dt = std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
        CK(cudaStreamSynchronize(s));
        if (b >= warm) ns.push_back(dt / batch);
    }
    CK(cudaGetLastError());
    return stats(ns);
}

// `only` >= 0 runs just that driver-API case (0 plain0, 1 ex_pdl0, 2 ptrs4, 3 packed4).
static void bench_launch(cudaStream_t s, int only) {
    CUstream cs = (CUstream)s;
    cudaFunction_t rf_empty, rf_chain;
    CK(cudaGetFuncBySymbol(&rf_empty, (const void*)empty_kernel));
    CK(cudaGetFuncBySymbol(&rf_chain, (const void*)chain_step));
    CUfunction f_empty = (CUfunction)rf_empty, f_chain = (CUfunction)rf_chain;

    unsigned *in, *out;
    CK(cudaMalloc(&in, 4 * sizeof(unsigned)));
    CK(cudaMalloc(&out, 4 * sizeof(unsigned)));
    unsigned n = 0, mode = 0;

    // Driver API.
    if (only < 0 || only == 0)
    row("cpp-drv", "launch", "plain0", 0, 0, "ns/launch", launch_cost(s, [&] {
            CKD(cuLaunchKernel(f_empty, 1, 1, 1, 1, 1, 1, 0, cs, nullptr, nullptr));
        }));
    CUlaunchAttribute attr[1] = {};
    attr[0].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attr[0].value.programmaticStreamSerializationAllowed = 1;
    CUlaunchConfig cfg = {};
    cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
    cfg.blockDimX = cfg.blockDimY = cfg.blockDimZ = 1;
    cfg.hStream = cs;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    if (only < 0 || only == 1)
    row("cpp-drv", "launch", "ex_pdl0", 0, 0, "ns/launch", launch_cost(s, [&] {
            CKD(cuLaunchKernelEx(&cfg, f_empty, nullptr, nullptr));
        }));
    if (only < 0 || only == 2)
    row("cpp-drv", "launch", "ptrs4", 0, 0, "ns/launch", launch_cost(s, [&] {
            void* args[4] = {&in, &out, &n, &mode};
            CKD(cuLaunchKernel(f_chain, 1, 1, 1, 1, 1, 1, 0, cs, args, nullptr));
        }));
    // packed4 goes through cuLaunchKernelEx without attributes, as cuda-core's
    // launch_packed does.
    CUlaunchConfig cfg0 = cfg;
    cfg0.attrs = nullptr;
    cfg0.numAttrs = 0;
    if (only < 0 || only == 3)
    row("cpp-drv", "launch", "packed4", 0, 0, "ns/launch", launch_cost(s, [&] {
            // Device layout of (const u32*, u32*, u32, u32): offsets 0, 8, 16, 20; 24 bytes.
            alignas(8) unsigned char buf[24];
            memcpy(buf + 0, &in, 8);
            memcpy(buf + 8, &out, 8);
            memcpy(buf + 16, &n, 4);
            memcpy(buf + 20, &mode, 4);
            size_t size = sizeof buf;
            void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE,
                             &size, CU_LAUNCH_PARAM_END};
            CKD(cuLaunchKernelEx(&cfg0, f_chain, nullptr, extra));
        }));

    if (only >= 0) {
        CK(cudaFree(in));
        CK(cudaFree(out));
        return;
    }
    // Runtime API.
    row("cpp-rt", "launch", "plain0", 0, 0, "ns/launch",
        launch_cost(s, [&] { empty_kernel<<<1, 1, 0, s>>>(); }));
    cudaLaunchAttribute rattr[1] = {};
    rattr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    rattr[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t rcfg = {};
    rcfg.gridDim = dim3(1);
    rcfg.blockDim = dim3(1);
    rcfg.stream = s;
    rcfg.attrs = rattr;
    rcfg.numAttrs = 1;
    row("cpp-rt", "launch", "ex_pdl0", 0, 0, "ns/launch",
        launch_cost(s, [&] { CK(cudaLaunchKernelEx(&rcfg, empty_kernel)); }));
    row("cpp-rt", "launch", "ptrs4", 0, 0, "ns/launch",
        launch_cost(s, [&] { chain_step<<<1, 1, 0, s>>>(in, out, n, mode); }));

    CK(cudaFree(in));
    CK(cudaFree(out));
}

// ---- (2)+(3) chain of dependent kernels ------------------------------------------------

enum Variant { STREAM, STREAM_PDL, GRAPH, GRAPH_PDL };
static const char* VARIANT_NAMES[] = {"stream", "stream_pdl", "graph", "graph_pdl"};

// Link k reads buf[k % 2] and writes buf[(k + 1) % 2]; with PDL, kernel mode 1 (wait,
// then trigger early) and the attribute on every link after the first.
// When set (--ptx PATH), the chain runs the Rust-built chain_step from ptx/ (loaded with
// cuModuleLoad) through the driver API instead of the nvcc-built kernel: the same host
// code with the other kernel separates kernel code from launch-path differences.
static CUfunction g_ptx_chain = nullptr;

static void enqueue_chain(cudaStream_t s, unsigned* buf[2], unsigned n, int links, bool pdl,
                          unsigned grid) {
    cudaLaunchAttribute attr[1] = {};
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(grid);
    cfg.blockDim = dim3(BLOCK);
    cfg.stream = s;
    cfg.attrs = attr;
    CUlaunchAttribute dattr[1] = {};
    dattr[0].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    dattr[0].value.programmaticStreamSerializationAllowed = 1;
    CUlaunchConfig dcfg = {};
    dcfg.gridDimX = grid;
    dcfg.gridDimY = dcfg.gridDimZ = 1;
    dcfg.blockDimX = BLOCK;
    dcfg.blockDimY = dcfg.blockDimZ = 1;
    dcfg.hStream = (CUstream)s;
    dcfg.attrs = dattr;
    for (int k = 0; k < links; ++k) {
        const unsigned* in = buf[k & 1];
        unsigned* out = buf[(k + 1) & 1];
        if (g_ptx_chain) {
            unsigned mode = pdl ? 1u : 0u;
            void* args[4] = {&in, &out, &n, &mode};
            dcfg.numAttrs = pdl && k > 0 ? 1 : 0;
            CKD(cuLaunchKernelEx(&dcfg, g_ptx_chain, args, nullptr));
        } else if (pdl) {
            cfg.numAttrs = k == 0 ? 0 : 1;
            CK(cudaLaunchKernelEx(&cfg, chain_step, in, out, n, 1u));
        } else {
            chain_step<<<grid, BLOCK, 0, s>>>(in, out, n, 0u);
        }
    }
}

// us per kernel: `reps` timed chains of `links` kernels (after 2 warm-up chains); checks
// that buf[0] == x0 + links * chains at the end.
static Stats chain_bench(cudaStream_t s, Variant v, unsigned n, int links, int reps,
                         unsigned grid = GRID) {
    std::vector<unsigned> x0(n), host(n);
    for (unsigned i = 0; i < n; ++i) x0[i] = i * 2654435761u ^ 0x9e3779b9u;
    unsigned* buf[2];
    CK(cudaMalloc(&buf[0], n * sizeof(unsigned)));
    CK(cudaMalloc(&buf[1], n * sizeof(unsigned)));
    CK(cudaMemcpy(buf[0], x0.data(), n * sizeof(unsigned), cudaMemcpyHostToDevice));
    CK(cudaMemset(buf[1], 0xff, n * sizeof(unsigned)));
    // cudaMemset (and a pageable cudaMemcpy's DMA) run on the legacy stream, which the
    // non-blocking stream `s` does not wait for: without this the memset can land after
    // the first link wrote buf[1] (seen on the H100 as a wrong chain result).
    CK(cudaDeviceSynchronize());
    const bool pdl = v == STREAM_PDL || v == GRAPH_PDL;
    const bool graph = v == GRAPH || v == GRAPH_PDL;
    cudaGraphExec_t exec = nullptr;
    if (graph) {
        cudaGraph_t g;
        CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
        enqueue_chain(s, buf, n, links, pdl, grid);
        CK(cudaStreamEndCapture(s, &g));
        CK(cudaGraphInstantiate(&exec, g, 0));
        CK(cudaGraphDestroy(g));
        CK(cudaGraphUpload(exec, s));
    }
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    const int warm = 2;
    std::vector<double> us;
    for (int r = 0; r < warm + reps; ++r) {
        CK(cudaEventRecord(e0, s));
        if (graph)
            CK(cudaGraphLaunch(exec, s));
        else
            enqueue_chain(s, buf, n, links, pdl, grid);
        CK(cudaEventRecord(e1, s));
        CK(cudaEventSynchronize(e1));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        if (r >= warm) us.push_back(1000.0 * ms / links);
    }
    CK(cudaGetLastError());
    CK(cudaMemcpy(host.data(), buf[0], n * sizeof(unsigned), cudaMemcpyDeviceToHost));
    const unsigned total = (unsigned)(links * (warm + reps));
    for (unsigned i = 0; i < n; ++i) {
        if (host[i] != x0[i] + total) {
            fprintf(stderr, "C++ chain %s n=%u: element %u is %u, expected %u\n", VARIANT_NAMES[v], n,
                    i, host[i], x0[i] + total);
            exit(1);
        }
    }
    if (exec) CK(cudaGraphExecDestroy(exec));
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    CK(cudaFree(buf[0]));
    CK(cudaFree(buf[1]));
    return stats(us);
}

// ---- (3b) PDL pair with a prolog ---------------------------------------------------------

static Stats pair_bench(cudaStream_t s, bool pdl, unsigned n, unsigned prolog, int pairs,
                        int reps) {
    unsigned *a, *b;
    unsigned long long *st_p, *st_s;
    CK(cudaMalloc(&a, n * sizeof(unsigned)));
    CK(cudaMalloc(&b, n * sizeof(unsigned)));
    CK(cudaMalloc(&st_p, GRID * 4 * sizeof(unsigned long long)));
    CK(cudaMalloc(&st_s, GRID * 4 * sizeof(unsigned long long)));
    CK(cudaMemset(b, 0xff, n * sizeof(unsigned)));
    CK(cudaDeviceSynchronize());  // as in chain_bench: the legacy stream vs `s`
    cudaLaunchAttribute attr[1] = {};
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(GRID);
    cfg.blockDim = dim3(BLOCK);
    cfg.stream = s;
    cfg.attrs = attr;
    cfg.numAttrs = pdl ? 1 : 0;
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    std::vector<double> us;
    for (int r = 0; r < 2 + reps; ++r) {
        CK(cudaEventRecord(e0, s));
        for (int p = 0; p < pairs; ++p) {
            pdl_primary<<<GRID, BLOCK, 0, s>>>(a, n, st_p, 0u);
            CK(cudaLaunchKernelEx(&cfg, pdl_secondary, (const unsigned*)a, b, n, st_s, prolog));
        }
        CK(cudaEventRecord(e1, s));
        CK(cudaEventSynchronize(e1));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        if (r >= 2) us.push_back(1000.0 * ms / pairs);
    }
    CK(cudaGetLastError());
    std::vector<unsigned> host(n);
    CK(cudaMemcpy(host.data(), b, n * sizeof(unsigned), cudaMemcpyDeviceToHost));
    for (unsigned i = 0; i < n; ++i) {
        if (host[i] != i * 6u + 15u) {
            fprintf(stderr, "C++ pair n=%u: element %u is %u, expected %u\n", n, i, host[i],
                    i * 6u + 15u);
            exit(1);
        }
    }
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    CK(cudaFree(a));
    CK(cudaFree(b));
    CK(cudaFree(st_p));
    CK(cudaFree(st_s));
    return stats(us);
}

#ifndef BENCH_LIB
int main(int argc, char** argv) {
    std::string csv_path, ptx_path;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--csv") && i + 1 < argc) {
            csv_path = argv[++i];
        } else if (!strcmp(argv[i], "--ptx") && i + 1 < argc) {
            ptx_path = argv[++i];
        } else if (!strcmp(argv[i], "--quick")) {
            g_quick = true;
        } else {
            fprintf(stderr, "usage: %s [--csv PATH] [--ptx KERNELS.ptx] [--quick]\n", argv[0]);
            return 2;
        }
    }
    if (csv_path.empty()) {
        const char* out = getenv("OUT");
        csv_path = out && *out ? std::string(out) + "/bench_cpp.csv" : "bench_cpp.csv";
    }

    // (4) loader: cold costs, before anything else touches CUDA.
    auto t = Clock::now();
    CKD(cuInit(0));
    const double ms_init = ms_since(t);
    t = Clock::now();
    CK(cudaSetDevice(0));
    CK(cudaFree(nullptr));  // creates the primary context
    const double ms_ctx = ms_since(t);
    t = Clock::now();
    empty_kernel<<<1, 1>>>();
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    const double ms_first = ms_since(t);

    g_csv = fopen(csv_path.c_str(), "w");
    if (!g_csv) {
        fprintf(stderr, "cannot write %s\n", csv_path.c_str());
        return 1;
    }
    const char* header = "impl,section,case,elems,prolog,unit,median,min,max,samples\n";
    fputs(header, stdout);
    fputs(header, g_csv);

    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    int drv = 0, rt = 0;
    CK(cudaDriverGetVersion(&drv));
    CK(cudaRuntimeGetVersion(&rt));
    fprintf(stderr, "# %s (sm_%d%d, %d SMs), driver %d, runtime %d\n", prop.name, prop.major,
            prop.minor, prop.multiProcessorCount, drv, rt);

    row("cpp-rt", "loader", "cuInit", 0, 0, "ms", {ms_init, ms_init, ms_init, 1});
    row("cpp-rt", "loader", "ctx_create", 0, 0, "ms", {ms_ctx, ms_ctx, ms_ctx, 1});
    row("cpp-rt", "loader", "first_launch", 0, 0, "ms", {ms_first, ms_first, ms_first, 1});

    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

    bench_launch(s, -1);

    const int links = 256;
    for (int v = STREAM; v <= GRAPH_PDL; ++v)
        row("cpp-rt", "chain", VARIANT_NAMES[v], GRID * BLOCK, 0, "us/kernel",
            chain_bench(s, (Variant)v, GRID * BLOCK, links, g_quick ? 5 : 20));

    if (!ptx_path.empty()) {
        CUmodule mod;
        CKD(cuModuleLoad(&mod, ptx_path.c_str()));
        CKD(cuModuleGetFunction(&g_ptx_chain, mod, "chain_step"));
        for (int v = STREAM; v <= GRAPH_PDL; ++v)
            row("cpp-rt-rustptx", "chain", VARIANT_NAMES[v], GRID * BLOCK, 0, "us/kernel",
                chain_bench(s, (Variant)v, GRID * BLOCK, links, g_quick ? 5 : 20));
        g_ptx_chain = nullptr;
    }

    const unsigned sizes[] = {33792, 131072, 262144, 524288, 1048576, 2097152, 4194304};
    for (unsigned n : sizes)
        for (int v = STREAM; v <= GRAPH_PDL; ++v)
            row("cpp-rt", "crossover", VARIANT_NAMES[v], n, 0, "us/kernel",
                chain_bench(s, (Variant)v, n, links, g_quick ? 3 : 10));

    const unsigned pair_sizes[] = {33792, 1048576};
    const unsigned prologs[] = {0, 1024, 16384};
    for (unsigned n : pair_sizes)
        for (unsigned p : prologs)
            for (int pdl = 0; pdl < 2; ++pdl)
                row("cpp-rt", "pair", pdl ? "pdl" : "plain", n, p, "us/pair",
                    pair_bench(s, pdl, n, p, 64, g_quick ? 3 : 10));

    CK(cudaStreamDestroy(s));
    fclose(g_csv);
    fprintf(stderr, "# wrote %s\n", csv_path.c_str());
    return 0;
}
#endif  // BENCH_LIB

#ifdef BENCH_LIB
// Library build (build.sh --lib: nvcc -DBENCH_LIB -shared): the Rust bench loads this and
// alternates Rust and C++ chains in one process (`bench --interleave`), so both see the
// same GPU state. Uses the primary context, which cuda-core shares.
static cudaStream_t lib_stream() {
    static cudaStream_t s = nullptr;
    g_silent = true;
    g_quick = true;  // 10 timed batches of 1000 launches per call
    if (!s) CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    return s;
}

// Median us/kernel of `reps` chains of `grid` x 256 threads. `kernel` null: the nvcc-built
// chain_step through the runtime; else that CUfunction (the Rust-built chain_step, from the
// caller's module in the same primary context) through the driver API, as with --ptx.
extern "C" double cpp_chain_us(int variant, unsigned n, int links, int reps, void* kernel,
                               unsigned grid) {
    cudaStream_t s = lib_stream();
    g_ptx_chain = (CUfunction)kernel;
    const double us = chain_bench(s, (Variant)variant, n, links, reps, grid).median;
    g_ptx_chain = nullptr;
    return us;
}

// Median us/pair of `reps` runs of 64 pairs (nvcc-built pdl_primary / pdl_secondary).
extern "C" double cpp_pair_us(int pdl, unsigned n, unsigned prolog, int reps) {
    return pair_bench(lib_stream(), pdl != 0, n, prolog, 64, reps).median;
}

// The nvcc-built kernel `name` (chain_step, pdl_primary, pdl_secondary, empty_kernel) as a
// CUfunction of the primary context, so the Rust side can launch it; null if unknown.
extern "C" void* cpp_kernel(const char* name) {
    const void* sym = nullptr;
    if (!strcmp(name, "chain_step")) sym = (const void*)chain_step;
    else if (!strcmp(name, "pdl_primary")) sym = (const void*)pdl_primary;
    else if (!strcmp(name, "pdl_secondary")) sym = (const void*)pdl_secondary;
    else if (!strcmp(name, "empty_kernel")) sym = (const void*)empty_kernel;
    if (!sym) return nullptr;
    lib_stream();
    cudaFunction_t f;
    CK(cudaGetFuncBySymbol(&f, sym));
    return (void*)f;
}

// Median ns per launch of driver-API case `kase` (0 plain0, 1 ex_pdl0, 2 ptrs4, 3 packed4).
extern "C" double cpp_launch_ns(int kase) {
    bench_launch(lib_stream(), kase);
    return g_last_median;
}
#endif
