//! Hardware tests of cudadrv next to the libraries users combine it with: NCCL and
//! cuBLAS, reached through the minimal run-time-loaded FFI of `cuda_workspace::interop`.
//! cudadrv reimplements neither: it hands them its streams (`Stream::as_raw`) and its
//! memory (`DeviceBuffer::as_raw`).
//!
//! - NCCL all-reduce: a single-rank communicator on one GPU (`ncclCommInitAll`, ndev 1),
//!   and one rank per GPU on two GPUs (`ncclGetUniqueId` + `ncclCommInitRank`, one thread
//!   per rank). Integer-valued data, so sums are exact.
//! - cuBLAS SGEMM on a cudadrv stream, captured into a graph between Rust kernels
//!   (`vec_add` before and after it), checked against a host GEMM of small integers.
//!
//! A missing library (or a missing second GPU) is a skip with the reason.

use std::ffi::{c_int, c_void};

use cuda_workspace::interop::cublas::{self, Cublas};
use cuda_workspace::interop::nccl::{self, Nccl};
use cuda_workspace::{
    Kernels, Outcome, TestResult, check_eq, hw_tests, require_gpu, run_suite, skip,
};
use cudadrv::graph::{CaptureMode, InstantiateFlags};
use cudadrv::launch::LaunchConfig;
use cudadrv::{Context, Device, DeviceBuffer, PinnedHostBuffer, Stream};

fn main() {
    run_suite(
        "hw_interop",
        hw_tests![
            nccl_single_rank_all_reduce,
            nccl_two_ranks_all_reduce,
            cublas_sgemm_in_a_captured_graph,
        ],
    );
}

/// Elements per all-reduce.
const COUNT: usize = 1 << 20;

fn nccl() -> Result<&'static Nccl, Outcome> {
    let lib = match Nccl::get() {
        Ok(lib) => lib,
        Err(why) => return skip(why),
    };
    let (ma, mi, pa) = lib.version()?;
    println!("    NCCL {ma}.{mi}.{pa} from {}", lib.path);
    Ok(lib)
}

fn cublas() -> Result<&'static Cublas, Outcome> {
    match Cublas::get() {
        Ok(lib) => Ok(lib),
        Err(why) => skip(why),
    }
}

/// Rank `r`'s float input at `i`: integer-valued, `(r + 1) * (i % 1000)`.
fn rank_value(r: usize, i: usize) -> f32 {
    ((r + 1) * (i % 1000)) as f32
}

fn nccl_single_rank_all_reduce() -> TestResult {
    require_gpu()?;
    let lib = nccl()?;
    let ctx = Context::primary(Device::get(0)?)?;
    ctx.bind()?; // NCCL works in the primary context the runtime uses
    let mut comm: nccl::Comm = std::ptr::null_mut();
    let devs: [c_int; 1] = [0];
    // SAFETY: valid out-pointer and a device list of 1.
    lib.check(
        unsafe { (lib.comm_init_all)(&mut comm, 1, devs.as_ptr()) },
        "ncclCommInitAll(1)",
    )?;
    let result = (|| -> TestResult {
        let stream = Stream::non_blocking(&ctx)?;
        let host: Vec<f32> = (0..COUNT).map(|i| rank_value(0, i)).collect();
        let send = DeviceBuffer::from_slice(&ctx, &host)?;
        let recv = DeviceBuffer::<f32>::zeroed(&ctx, COUNT)?;
        // Out of place, float sum; then in place, int32 max.
        let ints: Vec<i32> = (0..COUNT as i32).map(|i| i - 5000).collect();
        let inplace = DeviceBuffer::from_slice(&ctx, &ints)?;
        // SAFETY: the buffers hold COUNT elements of the named types and live past the
        // stream synchronization below; the stream is a live stream of the primary
        // context, which NCCL's communicator uses.
        unsafe {
            lib.check(
                (lib.all_reduce)(
                    send.as_raw() as *const c_void,
                    recv.as_raw() as *mut c_void,
                    COUNT,
                    nccl::FLOAT32,
                    nccl::SUM,
                    comm,
                    stream.as_raw(),
                ),
                "ncclAllReduce(float, sum)",
            )?;
            lib.check(
                (lib.all_reduce)(
                    inplace.as_raw() as *const c_void,
                    inplace.as_raw() as *mut c_void,
                    COUNT,
                    nccl::INT32,
                    nccl::MAX,
                    comm,
                    stream.as_raw(),
                ),
                "ncclAllReduce(int32, max, in place)",
            )?;
        }
        stream.synchronize()?;
        let mut got = vec![0f32; COUNT];
        recv.copy_to_host(&mut got)?;
        check_eq(got == host, true, "one-rank sum equals the input")?;
        let mut got_i = vec![0i32; COUNT];
        inplace.copy_to_host(&mut got_i)?;
        check_eq(
            got_i == ints,
            true,
            "one-rank in-place max equals the input",
        )
    })();
    // SAFETY: the communicator is ours and its work has completed (or failed).
    let destroyed = lib.check(unsafe { (lib.comm_destroy)(comm) }, "ncclCommDestroy");
    result?;
    destroyed?;
    Ok(())
}

fn nccl_two_ranks_all_reduce() -> TestResult {
    require_gpu()?;
    let count = Device::count()?;
    if count < 2 {
        return skip(format!("needs 2 GPUs (found {count})"));
    }
    let lib = nccl()?;
    const RANKS: usize = 2;
    let mut id = nccl::UniqueId {
        internal: [0; nccl::UNIQUE_ID_BYTES],
    };
    // SAFETY: valid out-pointer.
    lib.check(unsafe { (lib.get_unique_id)(&mut id) }, "ncclGetUniqueId")?;
    // One thread per rank: ncclCommInitRank returns once every rank has joined.
    let results: Vec<Result<(), String>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..RANKS)
            .map(|rank| s.spawn(move || run_rank(lib, id, rank, RANKS)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("rank thread panicked".into()))
            })
            .collect()
    });
    for (rank, r) in results.into_iter().enumerate() {
        r.map_err(|e| Outcome::Fail(format!("rank {rank}: {e}")))?;
    }
    Ok(())
}

/// One rank on device `rank`: init, float-sum all-reduce on a cudadrv stream, check.
fn run_rank(lib: &Nccl, id: nccl::UniqueId, rank: usize, ranks: usize) -> Result<(), String> {
    let ctx = Context::primary(Device::get(rank).map_err(|e| e.to_string())?)
        .map_err(|e| e.to_string())?;
    ctx.bind().map_err(|e| e.to_string())?; // NCCL picks the runtime's current device
    let mut comm: nccl::Comm = std::ptr::null_mut();
    // SAFETY: valid out-pointer; `id` came from ncclGetUniqueId and is given to every
    // rank; rank < ranks.
    lib.check(
        unsafe { (lib.comm_init_rank)(&mut comm, ranks as c_int, id, rank as c_int) },
        "ncclCommInitRank",
    )?;
    let result = (|| -> Result<(), String> {
        let e = |e: cudadrv::Error| e.to_string();
        let stream = Stream::non_blocking(&ctx).map_err(e)?;
        let host: Vec<f32> = (0..COUNT).map(|i| rank_value(rank, i)).collect();
        let send = DeviceBuffer::from_slice(&ctx, &host).map_err(e)?;
        let recv = DeviceBuffer::<f32>::zeroed(&ctx, COUNT).map_err(e)?;
        // SAFETY: COUNT floats each, alive past the synchronization; a live stream of
        // this rank's primary context.
        lib.check(
            unsafe {
                (lib.all_reduce)(
                    send.as_raw() as *const c_void,
                    recv.as_raw() as *mut c_void,
                    COUNT,
                    nccl::FLOAT32,
                    nccl::SUM,
                    comm,
                    stream.as_raw(),
                )
            },
            "ncclAllReduce",
        )?;
        stream.synchronize().map_err(e)?;
        let mut got = vec![0f32; COUNT];
        recv.copy_to_host(&mut got).map_err(e)?;
        let want = |i: usize| (0..ranks).map(|r| rank_value(r, i)).sum::<f32>();
        match (0..COUNT).find(|&i| got[i] != want(i)) {
            None => Ok(()),
            Some(i) => Err(format!("element {i} is {}, expected {}", got[i], want(i))),
        }
    })();
    // SAFETY: our communicator; its work completed (or failed).
    let destroyed = lib.check(unsafe { (lib.comm_destroy)(comm) }, "ncclCommDestroy");
    result.and(destroyed)
}

fn cublas_sgemm_in_a_captured_graph() -> TestResult {
    require_gpu()?;
    let lib = cublas()?;
    let ctx = Context::primary(Device::get(0)?)?;
    ctx.bind()?; // cuBLAS works in the primary context the runtime uses
    let k = Kernels::load(&ctx)?;
    // Column-major C (m x n) = A (m x k) * B (k x n), small integers: exact in f32.
    const M: usize = 96;
    const N: usize = 80;
    const K: usize = 64;
    let a_host: Vec<f32> = (0..M * K).map(|i| ((i * 7) % 9) as f32 - 4.0).collect();
    let b_host: Vec<f32> = (0..K * N).map(|i| ((i * 5) % 7) as f32 - 3.0).collect();
    let a_pinned = PinnedHostBuffer::from_slice(&ctx, &a_host)?;
    let b_pinned = PinnedHostBuffer::from_slice(&ctx, &b_host)?;
    let a = DeviceBuffer::<f32>::zeroed(&ctx, M * K)?;
    let a2 = DeviceBuffer::<f32>::zeroed(&ctx, M * K)?;
    let b = DeviceBuffer::<f32>::zeroed(&ctx, K * N)?;
    let c = DeviceBuffer::<f32>::zeroed(&ctx, M * N)?;
    let d = DeviceBuffer::<f32>::zeroed(&ctx, M * N)?;
    let workspace = DeviceBuffer::<u8>::zeroed(&ctx, cublas::WORKSPACE_BYTES)?;
    let mut stream = Stream::non_blocking(&ctx)?;

    let mut handle: cublas::Handle = std::ptr::null_mut();
    // SAFETY: valid out-pointer; the primary context is current.
    lib.check(unsafe { (lib.create)(&mut handle) }, "cublasCreate")?;
    let result = (|| -> TestResult {
        let mut version = 0;
        // SAFETY: live handle, valid out-pointer.
        lib.check(
            unsafe { (lib.get_version)(handle, &mut version) },
            "cublasGetVersion",
        )?;
        println!("    cuBLAS {version} from {}", lib.path);
        // SAFETY: live handle; `stream` is a live stream of the primary context and
        // outlives the handle's use of it (the handle is destroyed below, after the
        // last synchronization); the workspace holds WORKSPACE_BYTES and outlives it too.
        unsafe {
            lib.check((lib.set_stream)(handle, stream.as_raw()), "cublasSetStream")?;
            lib.check(
                (lib.set_workspace)(
                    handle,
                    workspace.as_raw() as *mut c_void,
                    cublas::WORKSPACE_BYTES,
                ),
                "cublasSetWorkspace",
            )?;
        }
        let (alpha, beta) = (1.0f32, 0.0f32);
        let sgemm = |a: &DeviceBuffer<f32>| {
            // SAFETY: `a` (M x K, lda M), B (K x N, ldb K) and C (M x N, ldc M) are live
            // device buffers of those sizes that outlive every run of this call, on the
            // stream or in the graph and its executable graph (they are declared before
            // them); the scalars are valid host pointers for the call (cuBLAS reads
            // host-mode scalars when the call is made, also under capture).
            lib.check(
                unsafe {
                    (lib.sgemm)(
                        handle,
                        cublas::OP_N,
                        cublas::OP_N,
                        M as c_int,
                        N as c_int,
                        K as c_int,
                        &alpha,
                        a.as_raw() as *const f32,
                        M as c_int,
                        b.as_raw() as *const f32,
                        K as c_int,
                        &beta,
                        c.as_raw() as *mut f32,
                        M as c_int,
                    )
                },
                "cublasSgemm",
            )
        };
        // One call outside the capture first: cuBLAS's first call initializes the handle
        // and loads its kernels, which is better not done while capturing.
        sgemm(&a)?;
        stream.synchronize()?;
        let cap = stream.begin_capture(CaptureMode::Global)?;
        // A and B from pinned host memory, then A2 = A + A (a Rust kernel), then
        // C = A2 * B (cuBLAS), then D = C + C (a Rust kernel): D = 4 A B.
        cap.copy_from_host(&a, &a_pinned)?;
        cap.copy_from_host(&b, &b_pinned)?;
        let add = |x: &DeviceBuffer<f32>, out: &DeviceBuffer<f32>, n: usize| {
            let cfg = LaunchConfig::new((n as u32).div_ceil(256), 256);
            // SAFETY: vec_add(a, b, c, n) reads a[..n], b[..n], writes c[..n]; `x` and
            // `out` hold n floats and outlive the graph and its executable graph.
            unsafe {
                cap.launch(
                    &k.vec_add,
                    &cfg,
                    &(x.as_arg(), x.as_arg(), out.as_arg(), n as u32),
                )
            }
        };
        add(&a, &a2, M * K)?;
        // Recorded on the capturing stream (the handle's stream): cuBLAS's kernels
        // become nodes of the graph.
        sgemm(&a2)?;
        add(&c, &d, M * N)?;
        let graph = cap.end()?;
        let nodes = graph.node_count()?;
        println!("    captured graph: {nodes} nodes (2 copies, 2 Rust kernels, cuBLAS's)");
        let exec = graph.instantiate(InstantiateFlags::empty())?;
        // Twice: a replay gives the same result.
        for _ in 0..2 {
            exec.launch(&stream)?;
        }
        stream.synchronize()?;
        let mut got = vec![0f32; M * N];
        d.copy_to_host(&mut got)?;
        for col in 0..N {
            for row in 0..M {
                let dot: f32 = (0..K)
                    .map(|p| a_host[row + p * M] * b_host[p + col * K])
                    .sum();
                let want = 4.0 * dot;
                let v = got[row + col * M];
                if v != want {
                    return Err(Outcome::Fail(format!(
                        "D[{row}, {col}] = {v}, expected {want} (4 A B)"
                    )));
                }
            }
        }
        Ok(())
    })();
    // SAFETY: our handle; its work has completed (synchronized above) or failed.
    let destroyed = lib.check(unsafe { (lib.destroy)(handle) }, "cublasDestroy");
    result?;
    destroyed?;
    Ok(())
}
