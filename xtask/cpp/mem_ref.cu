// CUDA C++ reference for the memory benchmark (examples/mem_bench.rs): the same
// managed-memory migrations, small copies and zero-copy reads as the Rust side, made
// with the runtime API, built as a shared library that the Rust benchmark loads with
// dlopen and runs round by round alternately with its own.
//
// Build on a GPU host (cudart linked statically, so the library needs only libcuda):
//   nvcc -O3 -std=c++17 -arch=sm_90 -shared -Xcompiler -fPIC mem_ref.cu -o mem_ref.so
// Then: mem_bench --cpp ./mem_ref.so [--rounds N] [--csv FILE]
//
// Everything runs on one non-blocking stream of the device given to mem_ref_setup (the
// primary context the Rust side uses too), timed with events on that stream except the
// small copies, which are timed on the host clock (steady_clock) as on the Rust side.
//
// (a) Managed migration, one size at a time (mem_ref_migrate_alloc): a pinned host
//     buffer (cudaMallocHost), a device buffer (cudaMalloc) and a managed buffer
//     (cudaMallocManaged, cudaMemAttachGlobal) of `bytes` each. mem_ref_migrate(c):
//       0 pinned H2D       cudaMemcpyAsync pinned -> device
//       1 prefetch to GPU  host-resident managed -> cudaMemPrefetchAsync(device)
//       2 prefetch+kernel  host-resident managed -> prefetch to device, then the
//                          increment kernel managed -> device buffer, timed together
//       3 demand paging    host-resident managed -> the kernel alone (first GPU touch
//                          migrates on fault)
//       4 prefetch to host device-resident managed -> cudaMemPrefetchAsync(host)
//     "Host-resident": prefetched to the host and then one word of every 4 KiB page
//     incremented by the CPU (untimed). "Device-resident": prefetched to the device
//     (untimed).
// (b) Small copies (mem_ref_copies_alloc): one malloc'd host range of count * size
//     bytes registered with cudaHostRegister, and two sets of `count` device buffers of
//     `size` bytes (cudaMalloc each): one for the batch, one for the loop. Copy i reads
//     host bytes [i*size, (i+1)*size). mem_ref_copies(batch): one cudaMemcpyBatchAsync
//     (one attribute, srcAccessOrder stream) or `count` cudaMemcpyAsync; microseconds
//     per copy for the enqueue calls alone and for enqueue + cudaStreamSynchronize.
// (c) Zero copy (mem_ref_zero_copy_alloc): a malloc'd host range registered with
//     cudaHostRegisterMapped (its device address from cudaHostGetDevicePointer), a
//     device buffer with the same contents, and a device output buffer.
//     mem_ref_zero_copy(mapped, reps): `reps` launches of the kernel reading the mapped
//     range (or the device copy) into the output; GB/s of bytes read.
//
// The kernel is the Rust side's chain_step with mode 0 (ptx/src/chain.rs): out[i] =
// in[i] + 1 in a grid-stride loop, 256 threads per block, launched with the grid given
// to mem_ref_setup (0: one thread per element), as on the Rust side.

#include <cuda_runtime.h>

#include "kernels.cuh"  // chain_step

#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

constexpr unsigned kBlock = 256;
constexpr size_t kPage = 4096;

struct Migrate {
    size_t bytes = 0;
    unsigned* pinned = nullptr;   // cudaMallocHost
    unsigned* device = nullptr;   // cudaMalloc: destination of the copy and the kernel
    unsigned* managed = nullptr;  // cudaMallocManaged
};

struct Copies {
    size_t count = 0, size = 0;
    char* host = nullptr;  // malloc, registered
    bool registered = false;
    std::vector<void*> batch_dst, loop_dst;  // also the batch's destination array
    std::vector<const void*> srcs;                // the sources of copy i, built once
    std::vector<size_t> sizes;
};

struct ZeroCopy {
    size_t bytes = 0;
    unsigned* host = nullptr;  // malloc, registered mapped
    bool registered = false;
    unsigned* mapped = nullptr;  // its device address
    unsigned* device = nullptr;  // the same contents in device memory
    unsigned* out = nullptr;
};

struct State {
    bool ready = false;
    int device = 0;
    unsigned grid = 0;
    cudaStream_t s = nullptr;
    cudaEvent_t start = nullptr, end = nullptr;
    Migrate m;
    Copies c;
    ZeroCopy z;
};

State st;

cudaMemLocation device_location() {
    cudaMemLocation loc{};
    loc.type = cudaMemLocationTypeDevice;
    loc.id = st.device;
    return loc;
}

cudaMemLocation host_location() {
    cudaMemLocation loc{};
    loc.type = cudaMemLocationTypeHost;
    loc.id = 0;
    return loc;
}

cudaError_t launch_kernel(const unsigned* in, unsigned* out, size_t bytes) {
    const unsigned n = unsigned(bytes / sizeof(unsigned));
    const unsigned grid = st.grid != 0 ? st.grid : (n + kBlock - 1) / kBlock;
    chain_step<<<grid, kBlock, 0, st.s>>>(in, out, n, 0u);
    return cudaGetLastError();
}

// Milliseconds between the two events, after waiting for the second.
cudaError_t elapsed(float* ms) {
    cudaError_t e = cudaEventSynchronize(st.end);
    if (e == cudaSuccess) e = cudaEventElapsedTime(ms, st.start, st.end);
    return e;
}

double gbps(double bytes, float ms) { return bytes / (double(ms) * 1e-3) / 1e9; }

// Prefetches the managed buffer to the host, then the CPU increments one word of every
// page: every page host-resident and written by the host.
cudaError_t make_host_resident() {
    cudaError_t e = cudaMemPrefetchAsync(st.m.managed, st.m.bytes, host_location(), 0, st.s);
    if (e == cudaSuccess) e = cudaStreamSynchronize(st.s);
    if (e != cudaSuccess) return e;
    const size_t words = st.m.bytes / sizeof(unsigned);
    for (size_t i = 0; i < words; i += kPage / sizeof(unsigned)) st.m.managed[i] += 1u;
    return cudaSuccess;
}

cudaError_t make_device_resident() {
    cudaError_t e = cudaMemPrefetchAsync(st.m.managed, st.m.bytes, device_location(), 0, st.s);
    if (e == cudaSuccess) e = cudaStreamSynchronize(st.s);
    return e;
}

double now_us() {
    using namespace std::chrono;
    return duration<double, std::micro>(steady_clock::now().time_since_epoch()).count();
}

}  // namespace

extern "C" {

// Selects `device`, makes the stream and the events; `grid` blocks of 256 threads for
// every kernel (0: one thread per element). Returns 0 or the cudaError_t.
int mem_ref_setup(int device, unsigned grid) {
    cudaError_t e;
    if ((e = cudaSetDevice(device)) != cudaSuccess) return e;
    if ((e = cudaStreamCreateWithFlags(&st.s, cudaStreamNonBlocking)) != cudaSuccess) return e;
    if ((e = cudaEventCreate(&st.start)) != cudaSuccess) return e;
    if ((e = cudaEventCreate(&st.end)) != cudaSuccess) return e;
    st.device = device;
    st.grid = grid;
    st.ready = true;
    return 0;
}

// Frees the buffers of part (a).
void mem_ref_migrate_free() {
    if (st.m.bytes != 0) cudaStreamSynchronize(st.s);
    cudaFreeHost(st.m.pinned);
    cudaFree(st.m.device);
    cudaFree(st.m.managed);
    st.m = Migrate{};
}

// Allocates the buffers of part (a), `bytes` each (a multiple of 4), freeing earlier
// ones. Returns 0 or the cudaError_t.
int mem_ref_migrate_alloc(size_t bytes) {
    if (!st.ready || bytes == 0 || bytes % sizeof(unsigned) != 0) return cudaErrorInvalidValue;
    mem_ref_migrate_free();
    cudaError_t e;
    if ((e = cudaMallocHost(reinterpret_cast<void**>(&st.m.pinned), bytes)) != cudaSuccess)
        return e;
    std::memset(st.m.pinned, 1, bytes);
    if ((e = cudaMalloc(reinterpret_cast<void**>(&st.m.device), bytes)) != cudaSuccess)
        return e;
    if ((e = cudaMallocManaged(reinterpret_cast<void**>(&st.m.managed), bytes,
                               cudaMemAttachGlobal)) != cudaSuccess)
        return e;
    st.m.bytes = bytes;
    return 0;
}

// GB/s (1e9 bytes/s of the buffer size) of migration case `c` (see the top of the
// file). Negative on error: -cudaError_t, or -1e9 for bad arguments.
double mem_ref_migrate(int c) {
    if (!st.ready || st.m.bytes == 0 || c < 0 || c > 4) return -1e9;
    const size_t bytes = st.m.bytes;
    cudaError_t e = cudaSuccess;
    if (c == 1 || c == 2 || c == 3) e = make_host_resident();
    if (c == 4) e = make_device_resident();
    if (e == cudaSuccess) e = cudaEventRecord(st.start, st.s);
    if (e == cudaSuccess) {
        switch (c) {
            case 0:
                e = cudaMemcpyAsync(st.m.device, st.m.pinned, bytes, cudaMemcpyHostToDevice,
                                    st.s);
                break;
            case 1:
                e = cudaMemPrefetchAsync(st.m.managed, bytes, device_location(), 0, st.s);
                break;
            case 2:
                e = cudaMemPrefetchAsync(st.m.managed, bytes, device_location(), 0, st.s);
                if (e == cudaSuccess) e = launch_kernel(st.m.managed, st.m.device, bytes);
                break;
            case 3:
                e = launch_kernel(st.m.managed, st.m.device, bytes);
                break;
            default:
                e = cudaMemPrefetchAsync(st.m.managed, bytes, host_location(), 0, st.s);
                break;
        }
    }
    if (e == cudaSuccess) e = cudaEventRecord(st.end, st.s);
    float ms = 0.0f;
    if (e == cudaSuccess) e = elapsed(&ms);
    if (e != cudaSuccess) return -double(e);
    return gbps(double(bytes), ms);
}

// Frees the buffers of part (b).
void mem_ref_copies_free() {
    if (st.c.count != 0) cudaStreamSynchronize(st.s);
    for (void* p : st.c.batch_dst) cudaFree(p);
    for (void* p : st.c.loop_dst) cudaFree(p);
    if (st.c.registered) cudaHostUnregister(st.c.host);
    std::free(st.c.host);
    st.c = Copies{};
}

// Allocates part (b): the registered host range and 2 * count device buffers of `size`
// bytes, and builds the batch's arrays. Returns 0 or the cudaError_t.
int mem_ref_copies_alloc(size_t count, size_t size) {
    if (!st.ready || count == 0 || size == 0) return cudaErrorInvalidValue;
    mem_ref_copies_free();
    Copies& c = st.c;
    c.host = static_cast<char*>(std::malloc(count * size));
    if (c.host == nullptr) return cudaErrorMemoryAllocation;
    for (size_t i = 0; i < count * size; ++i) c.host[i] = char(i);
    cudaError_t e = cudaHostRegister(c.host, count * size, cudaHostRegisterDefault);
    if (e != cudaSuccess) return e;
    c.registered = true;
    c.count = count;
    c.size = size;
    for (size_t i = 0; i < count; ++i) {
        void* p = nullptr;
        if ((e = cudaMalloc(&p, size)) != cudaSuccess) return e;
        c.batch_dst.push_back(p);
        if ((e = cudaMalloc(&p, size)) != cudaSuccess) return e;
        c.loop_dst.push_back(p);
        c.srcs.push_back(c.host + i * size);
        c.sizes.push_back(size);
    }
    return 0;
}

// One batch (`batch` != 0) or one loop of single copies: microseconds per copy for the
// enqueue calls alone (`host_us`) and for enqueue + stream synchronize (`total_us`).
// Returns 0 or the cudaError_t.
int mem_ref_copies(int batch, double* host_us, double* total_us) {
    Copies& c = st.c;
    if (!st.ready || c.count == 0 || host_us == nullptr || total_us == nullptr)
        return cudaErrorInvalidValue;
    cudaError_t e = cudaStreamSynchronize(st.s);
    if (e != cudaSuccess) return e;
    cudaMemcpyAttributes attr{};
    attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    attr.srcLocHint = host_location();  // as the Rust side's default attributes
    attr.dstLocHint = host_location();
    attr.flags = 0;
    size_t attr_idx = 0;
    const double t0 = now_us();
    if (batch) {
        e = cudaMemcpyBatchAsync(c.batch_dst.data(), c.srcs.data(), c.sizes.data(), c.count,
                                 &attr, &attr_idx, 1, st.s);
    } else {
        for (size_t i = 0; i < c.count && e == cudaSuccess; ++i)
            e = cudaMemcpyAsync(c.loop_dst[i], c.srcs[i], c.size, cudaMemcpyHostToDevice, st.s);
    }
    const double t1 = now_us();
    if (e == cudaSuccess) e = cudaStreamSynchronize(st.s);
    const double t2 = now_us();
    if (e != cudaSuccess) return e;
    *host_us = (t1 - t0) / double(c.count);
    *total_us = (t2 - t0) / double(c.count);
    return 0;
}

// Frees the buffers of part (c).
void mem_ref_zero_copy_free() {
    if (st.z.bytes != 0) cudaStreamSynchronize(st.s);
    cudaFree(st.z.device);
    cudaFree(st.z.out);
    if (st.z.registered) cudaHostUnregister(st.z.host);
    std::free(st.z.host);
    st.z = ZeroCopy{};
}

// Allocates part (c): `bytes` (a multiple of 4) of host memory registered mapped, a
// device copy and a device output. Returns 0 or the cudaError_t.
int mem_ref_zero_copy_alloc(size_t bytes) {
    if (!st.ready || bytes == 0 || bytes % sizeof(unsigned) != 0) return cudaErrorInvalidValue;
    mem_ref_zero_copy_free();
    ZeroCopy& z = st.z;
    z.host = static_cast<unsigned*>(std::malloc(bytes));
    if (z.host == nullptr) return cudaErrorMemoryAllocation;
    for (size_t i = 0; i < bytes / sizeof(unsigned); ++i) z.host[i] = 1u;
    cudaError_t e = cudaHostRegister(z.host, bytes, cudaHostRegisterMapped);
    if (e != cudaSuccess) return e;
    z.registered = true;
    z.bytes = bytes;
    if ((e = cudaHostGetDevicePointer(reinterpret_cast<void**>(&z.mapped), z.host, 0)) !=
        cudaSuccess)
        return e;
    if ((e = cudaMalloc(reinterpret_cast<void**>(&z.device), bytes)) != cudaSuccess) return e;
    if ((e = cudaMalloc(reinterpret_cast<void**>(&z.out), bytes)) != cudaSuccess) return e;
    return cudaMemcpy(z.device, z.host, bytes, cudaMemcpyHostToDevice);
}

// GB/s of bytes read by `reps` launches of the kernel reading the mapped host range
// (`mapped` != 0) or the device copy. Negative on error: -cudaError_t, or -1e9 for bad
// arguments.
double mem_ref_zero_copy(int mapped, int reps) {
    ZeroCopy& z = st.z;
    if (!st.ready || z.bytes == 0 || reps <= 0) return -1e9;
    const unsigned* in = mapped ? z.mapped : z.device;
    cudaError_t e = cudaEventRecord(st.start, st.s);
    for (int r = 0; r < reps && e == cudaSuccess; ++r) e = launch_kernel(in, z.out, z.bytes);
    if (e == cudaSuccess) e = cudaEventRecord(st.end, st.s);
    float ms = 0.0f;
    if (e == cudaSuccess) e = elapsed(&ms);
    if (e != cudaSuccess) return -double(e);
    return gbps(double(z.bytes) * reps, ms);
}

// Frees everything mem_ref_* made.
void mem_ref_teardown() {
    if (!st.ready) return;
    mem_ref_migrate_free();
    mem_ref_copies_free();
    mem_ref_zero_copy_free();
    cudaEventDestroy(st.start);
    cudaEventDestroy(st.end);
    cudaStreamDestroy(st.s);
    st = State{};
}

}  // extern "C"
