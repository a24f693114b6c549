// CUDA C++ reference for examples/tma_bench.rs: the same streaming kernels as the Rust
// ones in ptx/src/async_copy.rs and ptx/src/vec_stream.rs, with the same parameters
// and the same output (dst[i] = src[i] * 3 + 1, wrapping u32). Built on the GPU host
// by run.sh with `nvcc -O3 -arch=sm_90 -ptx` and loaded by the benchmark next to the
// Rust PTX, so both run in one process with the same host code.
#include <cstdint>

__device__ __forceinline__ unsigned smem_u32(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}

__device__ __forceinline__ void mbar_arrive(unsigned bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}

__device__ __forceinline__ void mbar_arrive_expect_tx(unsigned bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
                 : "memory");
}

__device__ __forceinline__ void mbar_wait_parity(unsigned bar, unsigned parity) {
    unsigned done = 0;
    while (!done) {
        asm volatile(
            "{\n.reg .pred p;\n"
            "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
            "selp.u32 %0, 1, 0, p;\n}"
            : "=r"(done)
            : "r"(bar), "r"(parity)
            : "memory");
    }
}

__device__ __forceinline__ void bulk_g2s(unsigned dst, const void* src, unsigned bytes,
                                         unsigned bar) {
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, "
        "[%3];" ::"r"(dst),
        "l"(src), "r"(bytes), "r"(bar)
        : "memory");
}

__device__ __forceinline__ uint4 transform(uint4 v) {
    v.x = v.x * 3u + 1u;
    v.y = v.y * 3u + 1u;
    v.z = v.z * 3u + 1u;
    v.w = v.w * 3u + 1u;
    return v;
}

__device__ __forceinline__ unsigned long long evict_first_policy() {
    unsigned long long p;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
    return p;
}

__device__ __forceinline__ void bulk_g2s_hint(unsigned dst, const void* src, unsigned bytes,
                                              unsigned bar, unsigned long long policy) {
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint "
        "[%0], [%1], %2, [%3], %4;" ::"r"(dst),
        "l"(src), "r"(bytes), "r"(bar), "l"(policy)
        : "memory");
}

__device__ __forceinline__ void bulk_s2g(void* dst, unsigned src, unsigned bytes) {
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst),
                 "r"(src), "r"(bytes)
                 : "memory");
}

__device__ __forceinline__ void bulk_s2g_hint(void* dst, unsigned src, unsigned bytes,
                                              unsigned long long policy) {
    asm volatile(
        "cp.async.bulk.global.shared::cta.bulk_group.L2::cache_hint [%0], [%1], %2, %3;" ::"l"(
            dst),
        "r"(src), "r"(bytes), "l"(policy)
        : "memory");
}

__device__ __forceinline__ void st_hint(uint4* dst, uint4 v, unsigned long long policy) {
    asm volatile("st.global.L2::cache_hint.v4.b32 [%0], {%1, %2, %3, %4}, %5;" ::"l"(dst),
                 "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w), "l"(policy)
                 : "memory");
}

// Flags, as PIPE_* in ptx/src/async_copy.rs.
constexpr unsigned kBulkStore = 1, kLoadEvictFirst = 2, kStoreEvictFirst = 4, kContiguous = 8;

// Producer/consumer ring: warp 0 (one lane) issues one bulk copy of `tile_bytes` per
// tile into stage k % stages, armed on full[s]; warps 1.. consume the stage and every
// consumer thread arrives on empty[s]. By default the consumers write the transformed
// tile from registers; with kBulkStore warp w transforms its slice (tile / C bytes) in
// place and lane 0 writes it back with one bulk store, waiting until it has been read
// before the warp arrives. Dynamic shared memory: stages * tile_bytes + 16 * stages + 128.
extern "C" __global__ void ref_bulk_pipeline(const uint32_t* __restrict__ src,
                                             uint32_t* __restrict__ dst,
                                             unsigned long long n_tiles, unsigned tile_bytes,
                                             unsigned stages, unsigned flags) {
    extern __shared__ unsigned char smem_raw[];
    const unsigned raw = smem_u32(smem_raw);
    const unsigned base = (raw + 127u) & ~127u;
    unsigned char* buf = smem_raw + (base - raw);
    const unsigned bars = base + stages * tile_bytes;  // full[s] = bars + 8s, empty[s] after
    const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const unsigned consumers = blockDim.x / 32 - 1;
    const bool bulk_store = flags & kBulkStore;
    if (bulk_store && tile_bytes % (16 * consumers) != 0) return;

    if (threadIdx.x == 0) {
        for (unsigned s = 0; s < stages; ++s) {
            mbar_init(bars + 8 * s, 1);
            mbar_init(bars + 8 * (stages + s), 32 * consumers);
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    const unsigned long long policy = evict_first_policy();
    // Block b's tiles: b, b + grid, ... or, with kContiguous, one run of ceil(n / grid).
    unsigned long long first = blockIdx.x, end = n_tiles, step = gridDim.x;
    if (flags & kContiguous) {
        const unsigned long long run = (n_tiles + gridDim.x - 1) / gridDim.x;
        first = blockIdx.x * run;
        end = first + run < n_tiles ? first + run : n_tiles;
        step = 1;
    }

    if (warp == 0) {
        if (lane == 0) {
            const bool hint = flags & kLoadEvictFirst;
            unsigned long long k = 0;
            for (unsigned long long t = first; t < end; t += step, ++k) {
                const unsigned s = static_cast<unsigned>(k % stages);
                const unsigned long long use = k / stages;
                if (use > 0) mbar_wait_parity(bars + 8 * (stages + s), (use - 1) & 1);
                const unsigned full = bars + 8 * s;
                mbar_arrive_expect_tx(full, tile_bytes);
                const unsigned char* from = reinterpret_cast<const unsigned char*>(src) +
                                            t * tile_bytes;
                if (hint)
                    bulk_g2s_hint(base + s * tile_bytes, from, tile_bytes, full, policy);
                else
                    bulk_g2s(base + s * tile_bytes, from, tile_bytes, full);
            }
        }
    } else {
        const bool hint = flags & kStoreEvictFirst;
        const unsigned vecs = tile_bytes / 16;
        const unsigned me = (warp - 1) * 32 + lane;
        const unsigned slice = tile_bytes / consumers;
        unsigned long long k = 0;
        for (unsigned long long t = first; t < end; t += step, ++k) {
            const unsigned s = static_cast<unsigned>(k % stages);
            mbar_wait_parity(bars + 8 * s, (k / stages) & 1);
            if (bulk_store) {
                uint4* mine = reinterpret_cast<uint4*>(buf + s * tile_bytes +
                                                       (warp - 1) * slice);
                for (unsigned i = lane; i < slice / 16; i += 32) mine[i] = transform(mine[i]);
                asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
                __syncwarp();
                if (lane == 0) {
                    unsigned char* to = reinterpret_cast<unsigned char*>(dst) +
                                        t * tile_bytes + (warp - 1) * slice;
                    if (hint)
                        bulk_s2g_hint(to, smem_u32(mine), slice, policy);
                    else
                        bulk_s2g(to, smem_u32(mine), slice);
                    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
                    asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
                }
                __syncwarp();
            } else {
                const uint4* in = reinterpret_cast<const uint4*>(buf + s * tile_bytes);
                uint4* out = reinterpret_cast<uint4*>(dst) + t * vecs;
                for (unsigned i = me; i < vecs; i += consumers * 32) {
                    if (hint)
                        st_hint(out + i, transform(in[i]), policy);
                    else
                        out[i] = transform(in[i]);
                }
            }
            mbar_arrive(bars + 8 * (stages + s));
        }
        if (bulk_store && lane == 0) asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
    }
}

// Plain vectorized streaming: grid-stride over 16-byte vectors.
extern "C" __global__ void ref_vec_transform(const uint4* __restrict__ src,
                                             uint4* __restrict__ dst,
                                             unsigned long long n_vec) {
    const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
    for (unsigned long long i = static_cast<unsigned long long>(blockIdx.x) * blockDim.x +
                                threadIdx.x;
         i < n_vec; i += stride)
        dst[i] = transform(src[i]);
}
