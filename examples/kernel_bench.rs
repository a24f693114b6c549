//! Host cost of a typed, safe launch of a 4-parameter kernel against the raw
//! `cuLaunchKernel` of the same kernel with the same parameters, alternating in rounds in
//! one process.
//!
//! ```sh
//! cargo run --release --example kernel_bench -- [--rounds N] [--csv PATH]
//! ```
//!
//! Kernel: `typed_axpy(a: f32, x: DeviceSlice<f32>, y: DeviceSlice<f32>,
//! out: DeviceSliceMut<f32>)` (ptx/src/typed.rs), grid 1, block 32. Cases, each timed
//! as batches of 1000 enqueues with a synchronization between batches (not timed):
//!
//! - `raw`: `cuLaunchKernel` through cudadrv-sys's function pointer, a pointer array to
//!   four locals, no checks.
//! - `typed_safe`: `Lane::launch` in a `kernel::scope` (one scope per batch, its final
//!   synchronization outside the timing as the raw case's): argument conversion, the lane
//!   and context checks, `cuLaunchKernel`.
//! - `typed_unsafe`: `TypedKernel::launch` (no scope).
//! - `raw+event`: `raw` followed by `cuEventRecord` and `cuStreamWaitEvent` on a second
//!   stream: the driver calls that run-time tracking of last use (cudarc's answer to the
//!   same question) adds per launch; the safe launch makes neither.
//!
//! The cases take turns going first in each round; `/raw` is the median over rounds of
//! each case's time divided by `raw`'s in the same round. Heap allocations per launch are
//! counted by a global allocator (must be 0). Reported, not asserted.

#[path = "common/mod.rs"]
mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use common::{R, arg_value, gpu_or_exit, stats};
use cuda_workspace::ptx;
use cuda_workspace::typed::typed_axpy;
use cudadrv::kernel::{self, DeviceSlice, DeviceSliceMut, KernelModule};
use cudadrv::{DeviceBuffer, Event, EventFlags, LaunchConfig, Stream};

/// Counts heap allocations, to show that the launch paths make none.
struct Counting;
static ALLOCS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: forwarded contract.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded contract.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: forwarded contract.
        unsafe { System.realloc(ptr, layout, new) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const BATCH: usize = 1000;
const CASES: [&str; 4] = ["raw", "typed_safe", "typed_unsafe", "raw+event"];

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rounds: usize = arg_value(&args, "--rounds")
        .and_then(|v| v.parse().ok())
        .unwrap_or(30);
    let csv = arg_value(&args, "--csv");
    let ctx = gpu_or_exit("kernel_bench");
    if let Err(e) = run(&ctx, rounds, csv.as_deref()) {
        eprintln!("kernel_bench failed: {e}");
        std::process::exit(1);
    }
}

fn run(ctx: &cudadrv::Context, rounds: usize, csv: Option<&str>) -> R {
    let module = KernelModule::load(ctx, &ptx::TRUSTED)?;
    let axpy = module.kernel::<typed_axpy>()?;
    let n = 32usize;
    let x = DeviceBuffer::from_slice(ctx, &vec![1.0f32; n])?;
    let y = DeviceBuffer::from_slice(ctx, &vec![2.0f32; n])?;
    let mut out = DeviceBuffer::<f32>::zeroed(ctx, n)?;
    let stream = Stream::non_blocking(ctx)?;
    let other = Stream::non_blocking(ctx)?;
    let event = Event::new(ctx, EventFlags::DISABLE_TIMING)?;
    let cfg = LaunchConfig::new(1, 32);

    let cu = cudadrv_sys::driver()?;
    let (lk, record, wait) = (
        cu.cuLaunchKernel()?,
        cu.cuEventRecord()?,
        cu.cuStreamWaitEvent()?,
    );
    let (f, s, s2, ev) = (
        axpy.function().as_raw(),
        stream.as_raw(),
        other.as_raw(),
        event.as_raw(),
    );
    // The raw parameters: the same values the typed launch builds.
    let mut a = 3.0f32;
    // SAFETY: the buffers hold `n` floats and outlive every launch (each batch is
    // synchronized before the next starts and before they drop).
    let (mut xs, mut ys, mut os) = unsafe {
        (
            DeviceSlice::<f32>::from_raw_parts(x.as_raw() as *const f32, n),
            DeviceSlice::<f32>::from_raw_parts(y.as_raw() as *const f32, n),
            DeviceSliceMut::<f32>::from_raw_parts(out.as_raw() as *mut f32, n),
        )
    };
    let typed_args = (3.0f32, xs, ys, os);
    let null = core::ptr::null_mut();
    let check = |rc: cudadrv_sys::CUresult| -> R { rc.result().map_err(|e| e.to_string().into()) };
    let mut raw_launch = || -> R {
        let mut ptrs: [*mut core::ffi::c_void; 4] = [
            (&raw mut a).cast(),
            (&raw mut xs).cast(),
            (&raw mut ys).cast(),
            (&raw mut os).cast(),
        ];
        // SAFETY: four pointers to live locals of the kernel's parameter types (the
        // layout verified when `axpy` was made); the buffers are live (see above).
        check(unsafe { lk(f, 1, 1, 1, 32, 1, 1, 0, s, ptrs.as_mut_ptr(), null) })
    };

    // ns/launch per case per round, and allocations per case.
    let mut ns: [Vec<f64>; 4] = Default::default();
    let mut allocs = [0usize; 4];
    // Per round, each case's ns/launch divided by `raw`'s of the same round.
    let mut ratios: [Vec<f64>; 4] = Default::default();
    for round in 0..rounds + 2 {
        let mut this_round = [0.0f64; 4];
        // The cases take turns going first, so no case always follows the same one.
        for c in (0..CASES.len()).map(|k| (k + round) % CASES.len()) {
            let slot = &mut ns[c];
            let before = ALLOCS.load(Ordering::Relaxed);
            let dt = match c {
                0 => {
                    let t = Instant::now();
                    for _ in 0..BATCH {
                        raw_launch()?;
                    }
                    t.elapsed()
                }
                1 => {
                    let mut dt = None;
                    kernel::scope(ctx, |sc| {
                        let lane = sc.lane(&stream)?;
                        let mut o = lane.own(&mut out)?;
                        let t = Instant::now();
                        for _ in 0..BATCH {
                            lane.launch(&axpy, &cfg, (3.0f32, &x, &y, &mut o))?;
                        }
                        dt = Some(t.elapsed());
                        Ok(())
                    })?;
                    dt.unwrap_or_default()
                }
                2 => {
                    let on_stream = cfg.clone().stream(&stream);
                    let t = Instant::now();
                    for _ in 0..BATCH {
                        // SAFETY: the slices name live buffers, synchronized below.
                        unsafe { axpy.launch(&on_stream, &typed_args)? };
                    }
                    t.elapsed()
                }
                _ => {
                    let t = Instant::now();
                    for _ in 0..BATCH {
                        raw_launch()?;
                        // SAFETY: live event and streams of this context.
                        check(unsafe { record(ev, s) })?;
                        // SAFETY: as above.
                        check(unsafe { wait(s2, ev, 0) })?;
                    }
                    t.elapsed()
                }
            };
            let after = ALLOCS.load(Ordering::Relaxed);
            stream.synchronize()?;
            other.synchronize()?;
            if round >= 2 {
                let per = dt.as_secs_f64() * 1e9 / BATCH as f64;
                slot.push(per);
                this_round[c] = per;
                allocs[c] += after - before;
            }
        }
        if round >= 2 {
            for c in 0..CASES.len() {
                ratios[c].push(this_round[c] / this_round[0]);
            }
        }
    }
    // The kernel ran: out = 3 * 1 + 2.
    let mut host = vec![0.0f32; n];
    out.copy_to_host(&mut host)?;
    if host.iter().any(|&v| v != 5.0) {
        return Err(format!("typed_axpy output {host:?}, expected 5.0 each").into());
    }

    let mut rows =
        String::from("case,ns_per_launch_median,min,max,ratio_to_raw_median,allocs_per_launch\n");
    println!(
        "kernel_bench: {rounds} rounds x {BATCH} launches of typed_axpy (4 parameters), host ns/launch"
    );
    println!("  /raw: median over rounds of the case's batch / raw's batch in the same round");
    println!(
        "{:<13} {:>8} {:>8} {:>8} {:>8} {:>7}",
        "case", "median", "min", "max", "/raw", "allocs"
    );
    for (c, v) in ns.iter_mut().enumerate() {
        let (med, min, max) = stats(v);
        let ratio = stats(&mut ratios[c]).0;
        let per = allocs[c] as f64 / (rounds * BATCH) as f64;
        println!(
            "{:<13} {med:>8.1} {min:>8.1} {max:>8.1} {ratio:>8.3} {per:>7}",
            CASES[c]
        );
        rows.push_str(&format!(
            "{},{med:.1},{min:.1},{max:.1},{ratio:.4},{per}\n",
            CASES[c]
        ));
    }
    if let Some(path) = csv {
        std::fs::write(path, rows)?;
    }
    Ok(())
}
