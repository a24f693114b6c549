// CUDA C++ reference for the peer-copy benchmark (examples/peer_bench.rs): the same
// copies as the Rust side, made with cudaMemcpyPeerAsync, built as a shared library that
// the Rust benchmark loads with dlopen and runs round by round alternately with its own.
//
// Build on a GPU host (cudart linked statically, so the library needs only libcuda):
//   nvcc -O3 -std=c++17 -arch=sm_90 -shared -Xcompiler -fPIC peer_ref.cu -o peer_ref.so
// Then: peer_bench --cpp ./peer_ref.so [--rounds N] [--csv FILE]
//
// Directions, each timed with events on the stream that issues the copies (the source
// device's, as on the Rust side):
//   0: device 0 -> device 1, on a stream of device 0
//   1: device 1 -> device 0, on a stream of device 1
//   2: both at once, each on its own source's stream; timed from an event on device 0's
//      stream (device 1's stream waits for it) to an event on device 0's stream recorded
//      after device 1's stream finished.

#include <cuda_runtime.h>

#include <cstddef>

namespace {

struct State {
    bool ready = false;
    size_t max_bytes = 0;
    void *a0 = nullptr, *b0 = nullptr;  // device 0: source of 0->1, destination of 1->0
    void *a1 = nullptr, *b1 = nullptr;  // device 1: destination of 0->1, source of 1->0
    cudaStream_t s0 = nullptr, s1 = nullptr;
    cudaEvent_t start0 = nullptr, end0 = nullptr, start1 = nullptr, end1 = nullptr;
};

State st;

// Enables peer access from the current device to `peer`; "already enabled" (the Rust
// side may have done it in the same primary context) is fine.
cudaError_t enable_peer(int peer) {
    int can = 0;
    cudaError_t e = cudaDeviceCanAccessPeer(&can, peer == 0 ? 1 : 0, peer);
    if (e != cudaSuccess || !can) return e;
    e = cudaDeviceEnablePeerAccess(peer, 0);
    if (e == cudaErrorPeerAccessAlreadyEnabled) {
        cudaGetLastError();  // clear the sticky-free error state
        return cudaSuccess;
    }
    return e;
}

}  // namespace

extern "C" {

// Allocates `max_bytes` twice on each device, makes the streams and events, and enables
// peer access both ways where the devices allow it. Returns 0 or the cudaError_t.
int peer_ref_setup(size_t max_bytes) {
    cudaError_t e;
    if ((e = cudaSetDevice(0)) != cudaSuccess) return e;
    if ((e = enable_peer(1)) != cudaSuccess) return e;
    if ((e = cudaMalloc(&st.a0, max_bytes)) != cudaSuccess) return e;
    if ((e = cudaMalloc(&st.b0, max_bytes)) != cudaSuccess) return e;
    if ((e = cudaMemset(st.a0, 1, max_bytes)) != cudaSuccess) return e;
    if ((e = cudaStreamCreateWithFlags(&st.s0, cudaStreamNonBlocking)) != cudaSuccess) return e;
    if ((e = cudaEventCreate(&st.start0)) != cudaSuccess) return e;
    if ((e = cudaEventCreate(&st.end0)) != cudaSuccess) return e;
    if ((e = cudaSetDevice(1)) != cudaSuccess) return e;
    if ((e = enable_peer(0)) != cudaSuccess) return e;
    if ((e = cudaMalloc(&st.a1, max_bytes)) != cudaSuccess) return e;
    if ((e = cudaMalloc(&st.b1, max_bytes)) != cudaSuccess) return e;
    if ((e = cudaMemset(st.b1, 2, max_bytes)) != cudaSuccess) return e;
    if ((e = cudaStreamCreateWithFlags(&st.s1, cudaStreamNonBlocking)) != cudaSuccess) return e;
    if ((e = cudaEventCreate(&st.start1)) != cudaSuccess) return e;
    if ((e = cudaEventCreate(&st.end1)) != cudaSuccess) return e;
    if ((e = cudaDeviceSynchronize()) != cudaSuccess) return e;
    cudaSetDevice(0);
    if ((e = cudaDeviceSynchronize()) != cudaSuccess) return e;
    st.max_bytes = max_bytes;
    st.ready = true;
    return 0;
}

// GB/s (1e9 bytes per second) of `reps` copies of `bytes` in direction `dir` (see the top
// of the file; for 2, both directions' bytes count). Negative on error: -cudaError_t, or
// -1e9 for bad arguments.
double peer_ref_gbps(int dir, size_t bytes, int reps) {
    if (!st.ready || bytes == 0 || bytes > st.max_bytes || reps <= 0 || dir < 0 || dir > 2)
        return -1e9;
    cudaError_t e = cudaSuccess;
    float ms = 0.0f;
    double moved = double(bytes) * reps;
    if (dir == 0) {
        cudaSetDevice(0);
        e = cudaEventRecord(st.start0, st.s0);
        for (int i = 0; i < reps && e == cudaSuccess; ++i)
            e = cudaMemcpyPeerAsync(st.a1, 1, st.a0, 0, bytes, st.s0);
        if (e == cudaSuccess) e = cudaEventRecord(st.end0, st.s0);
        if (e == cudaSuccess) e = cudaEventSynchronize(st.end0);
        if (e == cudaSuccess) e = cudaEventElapsedTime(&ms, st.start0, st.end0);
    } else if (dir == 1) {
        cudaSetDevice(1);
        e = cudaEventRecord(st.start1, st.s1);
        for (int i = 0; i < reps && e == cudaSuccess; ++i)
            e = cudaMemcpyPeerAsync(st.b0, 0, st.b1, 1, bytes, st.s1);
        if (e == cudaSuccess) e = cudaEventRecord(st.end1, st.s1);
        if (e == cudaSuccess) e = cudaEventSynchronize(st.end1);
        if (e == cudaSuccess) e = cudaEventElapsedTime(&ms, st.start1, st.end1);
        cudaSetDevice(0);
    } else {
        moved *= 2;
        cudaSetDevice(0);
        e = cudaEventRecord(st.start0, st.s0);
        if (e == cudaSuccess) e = cudaStreamWaitEvent(st.s1, st.start0, 0);
        for (int i = 0; i < reps && e == cudaSuccess; ++i) {
            e = cudaMemcpyPeerAsync(st.a1, 1, st.a0, 0, bytes, st.s0);
            if (e == cudaSuccess) e = cudaMemcpyPeerAsync(st.b0, 0, st.b1, 1, bytes, st.s1);
        }
        if (e == cudaSuccess) {
            cudaSetDevice(1);
            e = cudaEventRecord(st.end1, st.s1);
            cudaSetDevice(0);
        }
        if (e == cudaSuccess) e = cudaStreamWaitEvent(st.s0, st.end1, 0);
        if (e == cudaSuccess) e = cudaEventRecord(st.end0, st.s0);
        if (e == cudaSuccess) e = cudaEventSynchronize(st.end0);
        if (e == cudaSuccess) e = cudaEventElapsedTime(&ms, st.start0, st.end0);
    }
    if (e != cudaSuccess) return -double(e);
    return moved / (double(ms) * 1e-3) / 1e9;
}

// Frees what peer_ref_setup made.
void peer_ref_teardown() {
    if (!st.ready) return;
    cudaSetDevice(0);
    cudaStreamSynchronize(st.s0);
    cudaFree(st.a0);
    cudaFree(st.b0);
    cudaStreamDestroy(st.s0);
    cudaEventDestroy(st.start0);
    cudaEventDestroy(st.end0);
    cudaSetDevice(1);
    cudaStreamSynchronize(st.s1);
    cudaFree(st.a1);
    cudaFree(st.b1);
    cudaStreamDestroy(st.s1);
    cudaEventDestroy(st.start1);
    cudaEventDestroy(st.end1);
    cudaSetDevice(0);
    st = State{};
}

}  // extern "C"
