// CUDA C++ reference for NCCL all-reduce bus bandwidth: one process drives every GPU it
// uses (one communicator per GPU from ncclCommInitAll), the way nccl-tests' all_reduce_perf
// runs with -g N. The PyTorch counterpart is examples/nccl_torch.py (one process per GPU).
//
// Build on a GPU host:
//   nvcc -O3 -std=c++17 -arch=sm_90 nccl_ref.cu -I<dir with nccl.h> <path to libnccl.so.2> -o nccl_ref
// Usage:
//   nccl_ref [--gpus N] [--min-bytes B] [--max-bytes B] [--warmup W] [--iters I] [--csv FILE]
// Defaults: every visible GPU, 8 MiB to 1 GiB per rank (sizes double from the minimum),
// 5 warmup and 20 timed all-reduces per size.
//
// Each size: W all-reduces (float32, sum, out of place), then an event on every GPU's
// stream, I all-reduces, an event on every stream. The time of one all-reduce is the
// largest elapsed time over the GPUs divided by I. algbw = bytes / time;
// busbw = algbw * 2 * (n - 1) / n, nccl-tests' definition for all-reduce (0 for one GPU).
//
// NCCL_NVLS_ENABLE is set to 0 before any NCCL call, whatever its value was: NVLink
// multicast can take a shared host's GPUs out of service.

#include <cuda_runtime.h>
#include <nccl.h>

#include <cerrno>
#include <climits>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CUDA_CHECK(x)                                                                      \
    do {                                                                                   \
        cudaError_t e_ = (x);                                                              \
        if (e_ != cudaSuccess) {                                                           \
            fprintf(stderr, "nccl_ref: %s failed at %s:%d: %s\n", #x, __FILE__, __LINE__,  \
                    cudaGetErrorString(e_));                                               \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

#define NCCL_CHECK(x)                                                                      \
    do {                                                                                   \
        ncclResult_t r_ = (x);                                                             \
        if (r_ != ncclSuccess) {                                                           \
            fprintf(stderr, "nccl_ref: %s failed at %s:%d: %s\n", #x, __FILE__, __LINE__,  \
                    ncclGetErrorString(r_));                                               \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

namespace {

struct Options {
    int gpus = 0;  // 0: every visible GPU
    size_t min_bytes = size_t(8) << 20;
    size_t max_bytes = size_t(1) << 30;
    int warmup = 5;
    int iters = 20;
    const char* csv = nullptr;
};

// One GPU's share: its stream, buffers and the two timing events.
struct Rank {
    int device = 0;
    ncclComm_t comm = nullptr;
    cudaStream_t stream = nullptr;
    float* send = nullptr;
    float* recv = nullptr;
    cudaEvent_t start = nullptr;
    cudaEvent_t end = nullptr;
};

__global__ void fill(float* p, size_t n, float v) {
    size_t stride = size_t(gridDim.x) * blockDim.x;
    for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) p[i] = v;
}

void usage(const char* argv0) {
    fprintf(stderr,
            "usage: %s [--gpus N] [--min-bytes B] [--max-bytes B] [--warmup W] [--iters I] "
            "[--csv FILE]\n",
            argv0);
    exit(1);
}

// Parses a non-negative decimal integer; exits with the usage line on anything else.
unsigned long long parse_number(const char* argv0, const char* flag, const char* text) {
    char* end = nullptr;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || text[0] == '-') {
        fprintf(stderr, "nccl_ref: %s needs a non-negative integer, got '%s'\n", flag, text);
        usage(argv0);
    }
    return v;
}

int parse_int(const char* argv0, const char* flag, const char* text) {
    unsigned long long v = parse_number(argv0, flag, text);
    if (v > INT_MAX) {
        fprintf(stderr, "nccl_ref: %s is too large: %s\n", flag, text);
        usage(argv0);
    }
    return int(v);
}

Options parse_args(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        const char* a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) usage(argv[0]);
        if (i + 1 >= argc) {
            fprintf(stderr, "nccl_ref: unknown argument or missing value: %s\n", a);
            usage(argv[0]);
        }
        const char* v = argv[++i];
        if (!strcmp(a, "--gpus")) {
            o.gpus = parse_int(argv[0], a, v);
        } else if (!strcmp(a, "--min-bytes")) {
            o.min_bytes = size_t(parse_number(argv[0], a, v));
        } else if (!strcmp(a, "--max-bytes")) {
            o.max_bytes = size_t(parse_number(argv[0], a, v));
        } else if (!strcmp(a, "--warmup")) {
            o.warmup = parse_int(argv[0], a, v);
        } else if (!strcmp(a, "--iters")) {
            o.iters = parse_int(argv[0], a, v);
        } else if (!strcmp(a, "--csv")) {
            o.csv = v;
        } else {
            fprintf(stderr, "nccl_ref: unknown argument: %s\n", a);
            usage(argv[0]);
        }
    }
    if (o.min_bytes < sizeof(float) || o.min_bytes % sizeof(float) != 0 ||
        o.max_bytes < o.min_bytes) {
        fprintf(stderr,
                "nccl_ref: need 4 <= --min-bytes <= --max-bytes, --min-bytes a multiple of 4 "
                "(got %zu and %zu)\n",
                o.min_bytes, o.max_bytes);
        exit(1);
    }
    if (o.iters < 1) {
        fprintf(stderr, "nccl_ref: --iters must be at least 1\n");
        exit(1);
    }
    return o;
}

// Issues one all-reduce of `count` floats on every rank, as one NCCL group.
void all_reduce(std::vector<Rank>& ranks, size_t count) {
    NCCL_CHECK(ncclGroupStart());
    for (Rank& r : ranks) {
        NCCL_CHECK(ncclAllReduce(r.send, r.recv, count, ncclFloat32, ncclSum, r.comm, r.stream));
    }
    NCCL_CHECK(ncclGroupEnd());
}

void sync_all(std::vector<Rank>& ranks) {
    for (Rank& r : ranks) {
        CUDA_CHECK(cudaSetDevice(r.device));
        CUDA_CHECK(cudaStreamSynchronize(r.stream));
    }
}

}  // namespace

int main(int argc, char** argv) {
    // First, before anything that may load or configure NCCL.
    setenv("NCCL_NVLS_ENABLE", "0", 1);

    Options o = parse_args(argc, argv);

    int visible = 0;
    cudaError_t ce = cudaGetDeviceCount(&visible);
    if (ce != cudaSuccess || visible < 1) {
        fprintf(stderr, "nccl_ref: needs at least 1 GPU (found %d%s%s)\n",
                ce == cudaSuccess ? visible : 0, ce == cudaSuccess ? "" : ": ",
                ce == cudaSuccess ? "" : cudaGetErrorString(ce));
        return 1;
    }
    int n = o.gpus == 0 ? visible : o.gpus;
    if (n < 1 || n > visible) {
        fprintf(stderr, "nccl_ref: --gpus %d, but %d GPU(s) are visible\n", o.gpus, visible);
        return 1;
    }

    // Codes are major*10000 + minor*100 + patch from 2.9 on, major*1000 + minor*100 + patch
    // before.
    int code = 0;
    NCCL_CHECK(ncclGetVersion(&code));
    int major, minor, patch;
    if (code >= 20900) {
        major = code / 10000;
        minor = code / 100 % 100;
        patch = code % 100;
    } else {
        major = code / 1000;
        minor = code / 100 % 10;
        patch = code % 100;
    }
    printf("nccl_ref: NCCL %d.%d.%d, %d GPU(s)\n", major, minor, patch, n);
    fflush(stdout);

    FILE* csv = nullptr;
    if (o.csv) {
        // Appended to (run.sh collects every round and program in one file); the header
        // goes into an empty file only.
        csv = fopen(o.csv, "a");
        if (!csv) {
            fprintf(stderr, "nccl_ref: cannot write %s: %s\n", o.csv, strerror(errno));
            return 1;
        }
        fseek(csv, 0, SEEK_END);
        if (ftell(csv) == 0) fputs("impl,ranks,bytes,time_us,algbw_gbs,busbw_gbs\n", csv);
    }

    const size_t max_count = o.max_bytes / sizeof(float);
    std::vector<Rank> ranks(n);
    for (int g = 0; g < n; ++g) {
        Rank& r = ranks[g];
        r.device = g;
        CUDA_CHECK(cudaSetDevice(g));
        CUDA_CHECK(cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking));
        CUDA_CHECK(cudaMalloc(&r.send, max_count * sizeof(float)));
        CUDA_CHECK(cudaMalloc(&r.recv, max_count * sizeof(float)));
        fill<<<1024, 256, 0, r.stream>>>(r.send, max_count, 1.0f);
        CUDA_CHECK(cudaGetLastError());
        CUDA_CHECK(cudaMemsetAsync(r.recv, 0, max_count * sizeof(float), r.stream));
        CUDA_CHECK(cudaEventCreate(&r.start));
        CUDA_CHECK(cudaEventCreate(&r.end));
        CUDA_CHECK(cudaStreamSynchronize(r.stream));
    }

    // ncclCommInitAll sets each device itself.
    std::vector<ncclComm_t> comms(n);
    std::vector<int> devs(n);
    for (int g = 0; g < n; ++g) devs[g] = g;
    NCCL_CHECK(ncclCommInitAll(comms.data(), n, devs.data()));
    for (int g = 0; g < n; ++g) ranks[g].comm = comms[g];

    for (size_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= 2) {
        const size_t count = bytes / sizeof(float);

        for (int i = 0; i < o.warmup; ++i) all_reduce(ranks, count);
        sync_all(ranks);

        for (Rank& r : ranks) {
            CUDA_CHECK(cudaSetDevice(r.device));
            CUDA_CHECK(cudaEventRecord(r.start, r.stream));
        }
        for (int i = 0; i < o.iters; ++i) all_reduce(ranks, count);
        for (Rank& r : ranks) {
            CUDA_CHECK(cudaSetDevice(r.device));
            CUDA_CHECK(cudaEventRecord(r.end, r.stream));
        }
        sync_all(ranks);

        float worst_ms = 0.0f;
        for (Rank& r : ranks) {
            CUDA_CHECK(cudaSetDevice(r.device));
            float ms = 0.0f;
            CUDA_CHECK(cudaEventElapsedTime(&ms, r.start, r.end));
            if (ms > worst_ms) worst_ms = ms;
        }
        const double time_s = double(worst_ms) * 1e-3 / o.iters;
        const double time_us = time_s * 1e6;
        const double algbw = time_s > 0.0 ? double(bytes) / time_s / 1e9 : 0.0;
        const double busbw = n > 1 ? algbw * 2.0 * (n - 1) / n : 0.0;
        printf("size=%zu time_us=%.2f algbw=%.2f busbw=%.2f\n", bytes, time_us, algbw, busbw);
        fflush(stdout);
        if (csv) {
            fprintf(csv, "cpp,%d,%zu,%.3f,%.3f,%.3f\n", n, bytes, time_us, algbw, busbw);
        }

        if (bytes > o.max_bytes / 2) break;  // the next doubling would pass the maximum
    }

    for (Rank& r : ranks) NCCL_CHECK(ncclCommDestroy(r.comm));
    for (Rank& r : ranks) {
        CUDA_CHECK(cudaSetDevice(r.device));
        CUDA_CHECK(cudaEventDestroy(r.start));
        CUDA_CHECK(cudaEventDestroy(r.end));
        CUDA_CHECK(cudaFree(r.send));
        CUDA_CHECK(cudaFree(r.recv));
        CUDA_CHECK(cudaStreamDestroy(r.stream));
    }
    if (csv && fclose(csv) != 0) {
        fprintf(stderr, "nccl_ref: cannot finish %s: %s\n", o.csv, strerror(errno));
        return 1;
    }
    return 0;
}
