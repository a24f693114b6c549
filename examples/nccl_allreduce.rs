//! An NCCL all-reduce on cudadrv streams and buffers: one rank per GPU of this machine
//! (a single-rank communicator on a one-GPU machine), through the minimal run-time-loaded
//! FFI of `cuda_workspace::interop` (tests/support/interop.rs).
//!
//! cudadrv does not reimplement collectives: it hands NCCL its memory
//! (`DeviceBuffer::as_raw`) and its streams (`Stream::as_raw`). NCCL uses the CUDA
//! runtime, which works in each device's primary context: the buffers and streams are
//! made in `Context::primary` contexts.
//!
//! Usage: `nccl_allreduce [--count N]` (floats per rank, default 16 Mi). Without a GPU or
//! without libnccl it says so and exits 0.

mod common;

use std::ffi::{c_int, c_void};
use std::time::Instant;

use common::{R, exit_no_gpu};
use cuda_workspace::interop::nccl::{self, Nccl};
use cudadrv::{Context, Device, DeviceBuffer, Stream};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let count: usize = args
        .iter()
        .position(|a| a == "--count")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(16 << 20);
    let gpus = match Device::count() {
        Ok(0) => exit_no_gpu("nccl_allreduce", "the driver reports no device"),
        Ok(n) => n,
        Err(e) => exit_no_gpu("nccl_allreduce", e),
    };
    let lib = match Nccl::get() {
        Ok(lib) => lib,
        Err(why) => {
            println!("nccl_allreduce: {why}; nothing was run.");
            return;
        }
    };
    if let Err(e) = run(lib, gpus, count) {
        eprintln!("nccl_allreduce: error: {e}");
        std::process::exit(1);
    }
}

/// One rank's state: its context, stream and buffers (all cudadrv handles).
struct Rank {
    ctx: Context,
    stream: Stream,
    send: DeviceBuffer<f32>,
    recv: DeviceBuffer<f32>,
}

/// Rank `r`'s input at `i`: `(r + 1) * (i % 1000)`, integer-valued so the sum is exact.
fn value(r: usize, i: usize) -> f32 {
    ((r + 1) * (i % 1000)) as f32
}

fn run(lib: &Nccl, gpus: usize, count: usize) -> R {
    let (ma, mi, pa) = lib.version()?;
    println!(
        "NCCL {ma}.{mi}.{pa} ({}), {gpus} GPU(s), {count} floats per rank",
        lib.path
    );
    let mut ranks = Vec::new();
    for r in 0..gpus {
        let ctx = Context::primary(Device::get(r)?)?;
        let host: Vec<f32> = (0..count).map(|i| value(r, i)).collect();
        ranks.push(Rank {
            stream: Stream::non_blocking(&ctx)?,
            send: DeviceBuffer::from_slice(&ctx, &host)?,
            recv: DeviceBuffer::zeroed(&ctx, count)?,
            ctx,
        });
    }
    // One communicator per GPU, in this process (ncclCommInitAll sets each device itself).
    let devs: Vec<c_int> = (0..gpus as c_int).collect();
    let mut comms: Vec<nccl::Comm> = vec![std::ptr::null_mut(); gpus];
    // SAFETY: `comms` and `devs` hold `gpus` entries.
    lib.check(
        unsafe { (lib.comm_init_all)(comms.as_mut_ptr(), gpus as c_int, devs.as_ptr()) },
        "ncclCommInitAll",
    )?;
    let result = (|| -> R {
        let start = Instant::now();
        // SAFETY: no arguments.
        lib.check(unsafe { (lib.group_start)() }, "ncclGroupStart")?;
        for (rank, comm) in ranks.iter().zip(&comms) {
            // SAFETY: `count` floats in each buffer, alive until the streams are
            // synchronized below; each stream is a live stream of its rank's primary
            // context, the one NCCL's communicator uses.
            lib.check(
                unsafe {
                    (lib.all_reduce)(
                        rank.send.as_raw() as *const c_void,
                        rank.recv.as_raw() as *mut c_void,
                        count,
                        nccl::FLOAT32,
                        nccl::SUM,
                        *comm,
                        rank.stream.as_raw(),
                    )
                },
                "ncclAllReduce",
            )?;
        }
        // SAFETY: no arguments; closes the group opened above.
        lib.check(unsafe { (lib.group_end)() }, "ncclGroupEnd")?;
        for rank in &ranks {
            rank.stream.synchronize()?;
        }
        let secs = start.elapsed().as_secs_f64();
        let want = |i: usize| (0..gpus).map(|r| value(r, i)).sum::<f32>();
        for (r, rank) in ranks.iter().enumerate() {
            let mut got = vec![0f32; count];
            rank.recv.copy_to_host(&mut got)?;
            if let Some(i) = (0..count).find(|&i| got[i] != want(i)) {
                return Err(format!(
                    "rank {r} (device {}): element {i} is {}, expected {}",
                    rank.ctx.device().as_raw(),
                    got[i],
                    want(i)
                )
                .into());
            }
        }
        let bytes = (count * 4) as f64;
        println!(
            "all-reduce (sum) of {:.1} MiB per rank: every rank holds the exact sum; \
             {:.3} ms first call (includes NCCL's setup), algorithm bandwidth {:.1} GB/s",
            bytes / (1 << 20) as f64,
            secs * 1e3,
            bytes / secs / 1e9
        );
        Ok(())
    })();
    for comm in comms {
        // SAFETY: our communicators; their work has completed (or failed).
        lib.check(unsafe { (lib.comm_destroy)(comm) }, "ncclCommDestroy")?;
    }
    result
}
