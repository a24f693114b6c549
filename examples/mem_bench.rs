//! Host/device memory paths (Programming Guide 2.4, 4.1 and 3.1.5): managed-memory
//! migration, many small copies batched or one by one, and zero-copy reads of mapped
//! host memory, cudadrv against a CUDA C++ reference run in the same process, round by
//! round alternately (the side that goes first alternates from one measurement to the
//! next). Every figure is the median over the rounds; GB/s are 1e9 bytes per second of
//! the buffer size.
//!
//! (a) Managed migration, for 256 MiB and 2 GiB (a size is skipped when its device
//! buffers, managed and plain, of both sides would take more than half of the free
//! device memory), timed with events on one stream:
//! - `pinned H2D`: `DeviceBuffer::copy_from_host_async` (`cuMemcpyHtoDAsync`) from a
//!   `PinnedHostBuffer`;
//! - `prefetch to GPU`: `ManagedBuffer::prefetch(Location::Device)` alone, of a buffer
//!   made host-resident first;
//! - `prefetch + kernel`: the prefetch and then the increment kernel (ptx/ `chain_step`,
//!   `out[i] = in[i] + 1`, mode 0) from the managed buffer into a device buffer, timed
//!   together;
//! - `demand paging`: the kernel alone on the host-resident buffer (the GPU's first touch
//!   migrates the pages on fault);
//! - `prefetch to host`: `prefetch(Location::Host)` of a device-resident buffer.
//!
//! "Host-resident": prefetched to the host, then one word of every 4 KiB page incremented
//! through `host_mut` (untimed); "device-resident": prefetched to the device (untimed).
//! The C++ side does the same with `cudaMemcpyAsync`, `cudaMemPrefetchAsync` (CUDA 13:
//! a `cudaMemLocation`) and its own copy of the kernel. The `prefetch to GPU` row also
//! gives its ratio to `pinned H2D` of the same side.
//!
//! (b) 1000 copies of 4 KiB from host to device, each into its own `DeviceBuffer`.
//! `CopyBatch` borrows device, managed and registered memory safely (a `PinnedHostBuffer`,
//! whose contents Rust can reach at any time, only through the `unsafe` `copy_raw`), so
//! both forms read one registered `Vec`
//! (`HostRegistration`, 1000 consecutive 4 KiB parts):
//! - `batch`: one `CopyBatch` (built once, the parts as sources), `submit` per sample
//!   (`cuMemcpyBatchAsync`, stream order);
//! - `loop`: 1000 `DeviceBuffer::copy_from_host_slice_async` (`cuMemcpyHtoDAsync`), the
//!   slices made from the registration's address (the device only reads them, and no
//!   Rust code writes the `Vec` while it is registered), into a second set of buffers.
//!
//! The C++ side: `cudaMemcpyBatchAsync` (one attribute, `cudaMemcpySrcAccessOrderStream`)
//! and 1000 `cudaMemcpyAsync` from a `cudaHostRegister`ed range. Both are timed on the
//! host clock from an idle stream: the enqueue calls alone ("host") and up to the end of
//! a stream synchronize ("end to end"), in microseconds per copy.
//!
//! (c) Zero copy, 256 MiB: the kernel reading registered host memory mapped into the
//! device (`HostRegisterFlags::DEVICE_MAP`, `device_ptr`; C++: `cudaHostRegister` with
//! `cudaHostRegisterMapped` and `cudaHostGetDevicePointer`) against the same kernel
//! reading a device buffer, writing a device buffer in both cases; GB/s of bytes read,
//! 5 launches per sample.
//!
//! The C++ side (xtask/cpp/mem_ref.cu, built with
//! `nvcc -O3 -std=c++17 -arch=sm_90 -shared -Xcompiler -fPIC mem_ref.cu -o mem_ref.so`)
//! works in the same primary context, on its own stream, with the same kernel shape: one
//! thread per element, 256 per block (`--grid N`: N blocks, grid-stride, on both sides).
//! On the H100 the full grid reads mapped host memory at 47 GB/s where 528 blocks
//! (4 per SM) reach 34: zero copy needs many loads in flight to cover PCIe latency.
//!
//! Usage: `mem_bench [--cpp mem_ref.so] [--rounds N] [--grid N] [--csv FILE]` (10
//! rounds by default). Prints one table per part (median [min-max] per side, Rust/C++
//! ratios of the medians) and writes one CSV row per median:
//! `part,case,size_bytes,side,value,unit`. Without a GPU it says so and exits 0.

mod common;

use std::ffi::{CStr, CString, c_int, c_uint, c_void};
use std::fmt::Write as _;
use std::marker::PhantomData;
use std::ops::Range;
use std::time::{Duration, Instant};

use common::{BLOCK, R, stats};
use cudadrv::launch::{LaunchConfig, launch};
use cudadrv::memory::DevicePtr;
use cudadrv::memory::batch::CopyBatch;
use cudadrv::memory::managed::{Attach, Location, ManagedBuffer, MemoryModel};
use cudadrv::memory::registered::{HostRegisterFlags, HostRegistration};
use cudadrv::{
    Context, DeviceBuffer, Event, EventFlags, Function, Module, PinnedHostBuffer, Stream,
};

const MIB: usize = 1 << 20;
/// Sizes of part (a).
const MIGRATION_SIZES: [usize; 2] = [256 * MIB, 2048 * MIB];
/// The cases of part (a), in the order of `mem_ref_migrate`'s argument.
const MIGRATIONS: [&str; 5] = [
    "pinned H2D",
    "prefetch to GPU",
    "prefetch + kernel",
    "demand paging",
    "prefetch to host",
];
const PINNED_H2D: usize = 0;
const PREFETCH_TO_GPU: usize = 1;
/// CUDA C++ on the H100 at 2 GiB, from the issue (GB/s), per case of part (a).
const MIGRATION_ISSUE: [Option<f64>; 5] = [Some(49.8), Some(49.9), None, Some(6.5), Some(11.6)];
/// `u32` words per 4 KiB page.
const PAGE_WORDS: usize = 4096 / 4;
/// Part (b): number and size of the copies.
const COPIES: usize = 1000;
const COPY_BYTES: usize = 4096;
/// Part (b), CUDA C++ on the H100 from the issue: (host, end to end) us per copy.
const COPIES_ISSUE: [(&str, f64, f64); 2] = [("batch", 1.4, 1.7), ("loop", 1.6, 2.5)];
/// Part (c): buffer size and kernel launches per sample.
const ZERO_COPY_BYTES: usize = 256 * MIB;
const ZERO_COPY_REPS: usize = 5;
/// Part (c): the kernel's input, in the order of `mem_ref_zero_copy`'s `mapped` (1, 0).
const ZERO_COPY_INPUTS: [&str; 2] = ["mapped host", "device"];
/// Part (c), from the issue: zero copy over PCIe 5 x16 (GB/s).
const ZERO_COPY_ISSUE: f64 = 49.7;

/// (median, min, max) of one side's samples.
type Stat = (f64, f64, f64);
/// One part of the benchmark: measures, prints its table, adds its CSV rows.
type Part = fn(&Bench, &mut Csv) -> R;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let opt = |name: &str| common::arg_value(&args, name);
    let rounds: usize = opt("--rounds").and_then(|r| r.parse().ok()).unwrap_or(10);
    let grid: Option<u32> = opt("--grid").and_then(|g| g.parse().ok());
    let ctx = common::gpu_or_exit("mem_bench");
    if let Err(e) = run(&ctx, rounds.max(1), grid, opt("--cpp"), opt("--csv")) {
        eprintln!("mem_bench: error: {e}");
        std::process::exit(1);
    }
}

fn run(
    ctx: &Context,
    rounds: usize,
    grid: Option<u32>,
    cpp: Option<String>,
    csv_path: Option<String>,
) -> R {
    let dev = ctx.device();
    let (free, total) = ctx.mem_info()?;
    let model = MemoryModel::of(dev)?;
    println!(
        "mem_bench: {}, {:.1} GiB free of {:.1} GiB, concurrent managed access {}, \
         {rounds} rounds, median [min-max]",
        dev.name()?,
        free as f64 / (1u64 << 30) as f64,
        total as f64 / (1u64 << 30) as f64,
        model.concurrent_managed_access,
    );
    let grid = grid.unwrap_or(0);
    if grid == 0 {
        println!("kernel: chain_step, one thread per element, {BLOCK} per block");
    } else {
        println!("kernel: chain_step, {grid} blocks of {BLOCK} threads (grid-stride)");
    }
    let module = Module::from_ptx(ctx, cuda_workspace::ptx::KERNELS)?;
    let bench = Bench {
        ctx: ctx.clone(),
        kernel: Kernel {
            f: module.function("chain_step")?,
            grid,
        },
        timer: Timer::new(ctx)?,
        cpp: match cpp {
            Some(path) => Some(CppRef::open(&path, dev.as_raw(), grid)?),
            None => {
                println!("(no --cpp mem_ref.so: cudadrv only)");
                None
            }
        },
        rounds,
    };
    let mut csv = Csv::default();
    let parts: [(&str, Part); 3] = [
        ("(a) managed migration", migration),
        ("(b) 1000 copies of 4 KiB", small_copies),
        ("(c) zero copy", zero_copy),
    ];
    let mut failed = Vec::new();
    for (title, part) in parts {
        println!("\n{title}");
        if let Err(e) = part(&bench, &mut csv) {
            println!("  error: {e}");
            failed.push(title);
        }
    }
    if let Some(path) = csv_path {
        std::fs::write(&path, &csv.0)?;
        println!("\nwrote {path}");
    }
    drop(bench);
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!("failed: {}", failed.join(", ")).into())
    }
}

/// What every part uses.
struct Bench {
    ctx: Context,
    kernel: Kernel,
    timer: Timer,
    cpp: Option<CppRef>,
    rounds: usize,
}

impl Bench {
    /// Sides taking part: 2 with the C++ reference.
    fn sides(&self) -> usize {
        if self.cpp.is_some() { 2 } else { 1 }
    }

    /// Whether `bytes` of device memory (all sides together) fit in half the free
    /// memory; prints why not.
    fn fits(&self, what: &str, bytes: usize) -> R<bool> {
        let (free, _) = self.ctx.mem_info()?;
        let fits = bytes <= free / 2;
        if !fits {
            println!(
                "  {what}: skipped, needs {} MiB of device memory, more than half of the \
                 {} MiB free",
                bytes / MIB,
                free / MIB
            );
        }
        Ok(fits)
    }
}

/// The stream the Rust side works on and two events that time it.
struct Timer {
    stream: Stream,
    start: Event,
    end: Event,
}

impl Timer {
    fn new(ctx: &Context) -> R<Self> {
        Ok(Self {
            stream: Stream::non_blocking(ctx)?,
            start: Event::new(ctx, EventFlags::empty())?,
            end: Event::new(ctx, EventFlags::empty())?,
        })
    }

    /// Milliseconds of what `enqueue` queues on the stream, between an event recorded
    /// before and one recorded after (waited for).
    fn time(&self, enqueue: impl FnOnce(&Stream) -> R) -> R<f64> {
        self.start.record(&self.stream)?;
        enqueue(&self.stream)?;
        self.end.record(&self.stream)?;
        self.end.synchronize()?;
        Ok(f64::from(Event::elapsed_ms(&self.start, &self.end)?))
    }
}

/// GB/s (1e9 bytes/s) of `bytes` in `ms` milliseconds.
fn gbps(bytes: usize, ms: f64) -> f64 {
    bytes as f64 / (ms * 1e-3) / 1e9
}

/// The increment kernel, ptx/ `chain_step(in: *const u32, out: *mut u32, n: u32, mode:
/// u32)` with mode 0: `out[i] = in[i] + 1`, grid-stride, blocks of `BLOCK` threads.
struct Kernel {
    f: Function,
    /// Blocks per launch; 0: enough for one thread per element.
    grid: u32,
}

impl Kernel {
    /// Queues the kernel on `stream` for `n` words.
    ///
    /// # Safety
    /// `input` must be readable and `out` writable by the device for `n` words until the
    /// stream has run the kernel, and nothing else may access `out` meanwhile.
    unsafe fn enqueue(
        &self,
        input: DevicePtr<u32>,
        out: DevicePtr<u32>,
        n: usize,
        stream: &Stream,
    ) -> R {
        let n = u32::try_from(n)?;
        let grid = if self.grid == 0 {
            n.div_ceil(BLOCK)
        } else {
            self.grid
        };
        let cfg = LaunchConfig::new(grid, BLOCK).stream(stream);
        // SAFETY: the arguments match chain_step's signature (two pointers, two u32);
        // the pointers' validity is the caller's promise; `stream` is of the context the
        // module was loaded in (the benchmark has one context).
        unsafe { launch(&self.f, &cfg, &(input, out, n, 0u32))? };
        Ok(())
    }
}

/// Samples of one case, per side.
#[derive(Clone, Default)]
struct Samples {
    rust: Vec<f64>,
    cpp: Vec<f64>,
}

impl Samples {
    fn push(&mut self, rust: f64, cpp: Option<f64>) {
        self.rust.push(rust);
        self.cpp.extend(cpp);
    }

    /// (median, min, max) of each side.
    fn stats(&mut self) -> (Stat, Option<Stat>) {
        let cpp = (!self.cpp.is_empty()).then(|| stats(&mut self.cpp));
        (stats(&mut self.rust), cpp)
    }
}

/// One measurement of each side; Rust first when `turn` is even.
fn pair<T>(
    turn: usize,
    rust: impl FnOnce() -> R<T>,
    cpp: Option<impl FnOnce() -> R<T>>,
) -> R<(T, Option<T>)> {
    match cpp {
        None => Ok((rust()?, None)),
        Some(cpp) if turn % 2 == 0 => {
            let r = rust()?;
            Ok((r, Some(cpp()?)))
        }
        Some(cpp) => {
            let c = cpp()?;
            Ok((rust()?, Some(c)))
        }
    }
}

// ---------------------------------------------------------------------------------------
// (a) Managed migration

/// The Rust side's buffers of part (a), `words` u32 each.
struct Migration {
    pinned: PinnedHostBuffer<u32>,
    device: DeviceBuffer<u32>,
    managed: ManagedBuffer<u32>,
}

impl Migration {
    fn new(ctx: &Context, words: usize) -> R<Self> {
        let mut pinned = PinnedHostBuffer::zeroed(ctx, words)?;
        pinned.fill(0x0101_0101);
        Ok(Self {
            pinned,
            device: DeviceBuffer::new(ctx, words)?,
            managed: ManagedBuffer::new(ctx, words, Attach::Global)?,
        })
    }

    /// Prefetches the managed buffer to the host, then increments one word of every page
    /// on the host (`host_mut` synchronizes the context first).
    fn make_host_resident(&mut self, stream: &Stream) -> R {
        self.managed.prefetch(Location::Host, stream)?;
        for w in self.managed.host_mut()?.iter_mut().step_by(PAGE_WORDS) {
            *w = w.wrapping_add(1);
        }
        Ok(())
    }

    fn make_device_resident(&self, stream: &Stream) -> R {
        self.managed
            .prefetch(Location::Device(self.managed.context().device()), stream)?;
        stream.synchronize()?;
        Ok(())
    }

    /// GB/s of case `case` of [`MIGRATIONS`].
    fn measure(&mut self, case: usize, timer: &Timer, kernel: &Kernel) -> R<f64> {
        let gpu = Location::Device(self.managed.context().device());
        match case {
            1..=3 => self.make_host_resident(&timer.stream)?,
            4 => self.make_device_resident(&timer.stream)?,
            _ => {}
        }
        let (n, bytes) = (self.managed.len(), self.managed.size_bytes());
        let (input, output) = (self.managed.as_arg(), self.device.as_arg());
        let increment = |s: &Stream| {
            // SAFETY: `input` (the managed buffer) and `output` (the device buffer) hold
            // `n` words and live in `self`; `timer.time` waits for the stream before
            // returning, and no host code touches either buffer meanwhile.
            unsafe { kernel.enqueue(input, output, n, s) }
        };
        let (pinned, device, managed) = (&self.pinned, &mut self.device, &self.managed);
        let ms = timer.time(|s| {
            match case {
                // SAFETY: `pinned` lives in `self` and is not written before `time` has
                // waited for the copy.
                0 => unsafe { device.copy_from_host_async(pinned, s)? },
                1 => managed.prefetch(gpu, s)?,
                2 => {
                    managed.prefetch(gpu, s)?;
                    increment(s)?;
                }
                3 => increment(s)?,
                _ => managed.prefetch(Location::Host, s)?,
            }
            Ok(())
        })?;
        Ok(gbps(bytes, ms))
    }
}

fn migration(b: &Bench, csv: &mut Csv) -> R {
    if !MemoryModel::of(b.ctx.device())?.concurrent_managed_access {
        println!("  skipped: the device has no concurrent managed access (prefetches need it)");
        return Ok(());
    }
    let mut table = Table::new(
        2,
        &[
            "size",
            "case",
            "Rust GB/s",
            "C++ GB/s",
            "Rust/C++",
            "/pinned H2D",
            "issue C++",
        ],
    );
    for bytes in MIGRATION_SIZES {
        // Managed and device buffer, per side.
        if !b.fits(&size_name(bytes), 2 * bytes * b.sides())? {
            continue;
        }
        let mut samples = measure_migrations(b, bytes)?;
        let stats: Vec<_> = samples.iter_mut().map(Samples::stats).collect();
        for (case, &(r, c)) in stats.iter().enumerate() {
            let vs_pinned = if case == PREFETCH_TO_GPU {
                let (pr, pc) = stats[PINNED_H2D];
                let cpp = c
                    .zip(pc)
                    .map_or(String::new(), |(c, p)| format!(" (C++ {:.2})", c.0 / p.0));
                format!("{:.2}{cpp}", r.0 / pr.0)
            } else {
                "-".into()
            };
            let issue = MIGRATION_ISSUE[case]
                .filter(|_| bytes == 2048 * MIB)
                .map_or("-".into(), |g| format!("{g:.1}"));
            table.row(vec![
                size_name(bytes),
                MIGRATIONS[case].into(),
                cell(r, 1),
                c.map_or("-".into(), |c| cell(c, 1)),
                ratio(r, c),
                vs_pinned,
                issue,
            ]);
            csv.medians("managed", MIGRATIONS[case], bytes, r, c, "GB/s");
        }
    }
    table.print();
    println!("  issue C++: CUDA C++ on the H100 at 2 GiB, as reported in the issue");
    Ok(())
}

/// The samples of every case of part (a) at `bytes`, after one warm-up of each.
fn measure_migrations(b: &Bench, bytes: usize) -> R<Vec<Samples>> {
    let mut rust = Migration::new(&b.ctx, bytes / 4)?;
    let _cpp = b.cpp.as_ref().map(|c| c.migrate_alloc(bytes)).transpose()?;
    let mut samples = vec![Samples::default(); MIGRATIONS.len()];
    for round in 0..=b.rounds {
        for (case, s) in samples.iter_mut().enumerate() {
            let (r, c) = pair(
                round + case,
                || rust.measure(case, &b.timer, &b.kernel),
                b.cpp.as_ref().map(|c| || c.migrate(case)),
            )?;
            // Round 0 is the warm-up.
            if round > 0 {
                s.push(r, c);
            }
        }
    }
    Ok(samples)
}

// ---------------------------------------------------------------------------------------
// (b) Small copies

/// The bytes of copy `i` in the registered range.
fn copy_range(i: usize) -> Range<usize> {
    i * COPY_BYTES..(i + 1) * COPY_BYTES
}

/// Bytes `range` of a registration, as a slice for the single-copy loop.
fn registered_slice<'r>(reg: &'r HostRegistration<'_, u8>, range: Range<usize>) -> &'r [u8] {
    assert!(range.start <= range.end && range.end <= reg.len());
    // SAFETY: inside the registered range (checked), memory of a live `Vec` that the
    // registration borrows exclusively for longer than `'r`: no Rust code writes it
    // meanwhile, and the device only reads it (every copy of part (b) is host to
    // device), so a shared slice is valid for `'r`.
    unsafe { std::slice::from_raw_parts(reg.as_ptr().add(range.start), range.len()) }
}

/// `COPIES` device buffers of `COPY_BYTES`.
fn copy_targets(ctx: &Context) -> R<Vec<DeviceBuffer<u8>>> {
    Ok((0..COPIES)
        .map(|_| DeviceBuffer::new(ctx, COPY_BYTES))
        .collect::<Result<_, _>>()?)
}

/// Microseconds per copy of what `enqueue` queues (`COPIES` copies), from an idle
/// stream, on the host clock: (the enqueue calls alone, until the stream has run them).
fn time_copies(stream: &Stream, enqueue: impl FnOnce() -> R) -> R<(f64, f64)> {
    stream.synchronize()?;
    let t0 = Instant::now();
    enqueue()?;
    let host = t0.elapsed();
    stream.synchronize()?;
    let total = t0.elapsed();
    let per_copy = |d: Duration| d.as_secs_f64() * 1e6 / COPIES as f64;
    Ok((per_copy(host), per_copy(total)))
}

/// Checks that every target holds its part of the source.
fn check_copies(targets: &[DeviceBuffer<u8>], srcs: &[&[u8]], what: &str) -> R {
    let mut got = vec![0u8; COPY_BYTES];
    for (i, (t, s)) in targets.iter().zip(srcs).enumerate() {
        t.copy_to_host(&mut got)?;
        if got != *s {
            return Err(format!("{what}: copy {i} did not arrive").into());
        }
    }
    Ok(())
}

fn small_copies(b: &Bench, csv: &mut Csv) -> R {
    let mut host: Vec<u8> = (0..COPIES * COPY_BYTES).map(|i| (i % 251) as u8).collect();
    let mut out = Ok(());
    HostRegistration::scope(&b.ctx, &mut host, HostRegisterFlags::empty(), |reg| {
        out = small_copies_from(b, csv, reg);
        Ok(())
    })?;
    out
}

fn small_copies_from(b: &Bench, csv: &mut Csv, reg: &HostRegistration<'_, u8>) -> R {
    let stream = &b.timer.stream;
    let parts = (0..COPIES)
        .map(|i| reg.part(copy_range(i)))
        .collect::<Result<Vec<_>, _>>()?;
    let srcs: Vec<&[u8]> = (0..COPIES)
        .map(|i| registered_slice(reg, copy_range(i)))
        .collect();
    let mut batch_dst = copy_targets(&b.ctx)?;
    let mut loop_dst = copy_targets(&b.ctx)?;
    let mut batch = CopyBatch::new();
    for (dst, src) in batch_dst.iter_mut().zip(&parts) {
        batch.copy(dst, src)?;
    }
    let _cpp = b.cpp.as_ref().map(CppRef::copies_alloc).transpose()?;

    // [batch, loop] x [host, end to end]
    let mut samples = vec![Samples::default(); 4];
    for round in 0..=b.rounds {
        for case in 0..2 {
            let rust = || match case {
                0 => time_copies(stream, || Ok(batch.submit(stream)?)),
                _ => time_copies(stream, || {
                    for (dst, src) in loop_dst.iter_mut().zip(&srcs) {
                        // SAFETY: `src` stays valid and unwritten (see
                        // `registered_slice`) until `time_copies` has synchronized the
                        // stream.
                        unsafe { dst.copy_from_host_slice_async(src, stream)? };
                    }
                    Ok(())
                }),
            };
            let cpp = b.cpp.as_ref().map(|c| || c.copies(case == 0));
            let (r, c) = pair(round + case, rust, cpp)?;
            // Round 0 is the warm-up.
            if round > 0 {
                samples[2 * case].push(r.0, c.map(|c| c.0));
                samples[2 * case + 1].push(r.1, c.map(|c| c.1));
            }
        }
    }
    check_copies(&batch_dst, &srcs, "batch")?;
    check_copies(&loop_dst, &srcs, "loop")?;

    let mut table = Table::new(
        1,
        &[
            "case",
            "Rust host us",
            "C++ host us",
            "Rust/C++",
            "Rust e2e us",
            "C++ e2e us",
            "Rust/C++",
            "issue C++ host/e2e",
        ],
    );
    let mut e2e = Vec::new();
    for (case, (name, issue_host, issue_e2e)) in COPIES_ISSUE.into_iter().enumerate() {
        let (rh, ch) = samples[2 * case].stats();
        let (rt, ct) = samples[2 * case + 1].stats();
        table.row(vec![
            name.into(),
            cell(rh, 2),
            ch.map_or("-".into(), |c| cell(c, 2)),
            ratio(rh, ch),
            cell(rt, 2),
            ct.map_or("-".into(), |c| cell(c, 2)),
            ratio(rt, ct),
            format!("{issue_host:.1} / {issue_e2e:.1}"),
        ]);
        csv.medians("copies", name, COPY_BYTES, rh, ch, "us/copy host");
        csv.medians("copies", name, COPY_BYTES, rt, ct, "us/copy end to end");
        e2e.push((rt.0, ct.map(|c| c.0)));
    }
    table.print();
    let speedup = |b: f64, l: f64| format!("{:.2}x", l / b);
    println!(
        "  batch over loop, end to end: Rust {}{}",
        speedup(e2e[0].0, e2e[1].0),
        e2e[0]
            .1
            .zip(e2e[1].1)
            .map_or(String::new(), |(b, l)| format!(", C++ {}", speedup(b, l)))
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------
// (c) Zero copy

fn zero_copy(b: &Bench, csv: &mut Csv) -> R {
    if !MemoryModel::of(b.ctx.device())?.host_register {
        println!("  skipped: the device does not support cuMemHostRegister");
        return Ok(());
    }
    // Device input and output, per side.
    if !b.fits(&size_name(ZERO_COPY_BYTES), 2 * ZERO_COPY_BYTES * b.sides())? {
        return Ok(());
    }
    let n = ZERO_COPY_BYTES / 4;
    let mut host = vec![1u32; n];
    let mut result = Ok(());
    HostRegistration::scope(&b.ctx, &mut host, HostRegisterFlags::DEVICE_MAP, |reg| {
        result = zero_copy_from(b, csv, reg);
        Ok(())
    })?;
    result
}

fn zero_copy_from(b: &Bench, csv: &mut Csv, reg: &HostRegistration<'_, u32>) -> R {
    let n = ZERO_COPY_BYTES / 4;
    let device_input = DeviceBuffer::from_slice(&b.ctx, &vec![1u32; n])?;
    let out = DeviceBuffer::<u32>::new(&b.ctx, n)?;
    // In the order of ZERO_COPY_INPUTS.
    let inputs = [reg.device_ptr()?, device_input.as_arg()];
    let _cpp = b.cpp.as_ref().map(CppRef::zero_copy_alloc).transpose()?;
    let read = |input: DevicePtr<u32>| -> R<f64> {
        let ms = b.timer.time(|s| {
            for _ in 0..ZERO_COPY_REPS {
                // SAFETY: `input` is the mapped registration or `device_input`, `n` words
                // each, and `out` holds `n` words, all alive until `zero_copy` returns;
                // `time` waits for the stream, and no host code touches them meanwhile.
                unsafe { b.kernel.enqueue(input, out.as_arg(), n, s)? };
            }
            Ok(())
        })?;
        Ok(gbps(ZERO_COPY_BYTES * ZERO_COPY_REPS, ms))
    };

    let mut samples = vec![Samples::default(); 2];
    for round in 0..=b.rounds {
        for (case, s) in samples.iter_mut().enumerate() {
            let cpp = b
                .cpp
                .as_ref()
                .map(|c| || c.zero_copy(case == 0, ZERO_COPY_REPS));
            let (r, c) = pair(round + case, || read(inputs[case]), cpp)?;
            // Round 0 is the warm-up.
            if round > 0 {
                s.push(r, c);
            }
        }
    }
    // The last samples left in + 1 = 2 everywhere; read once more through the mapping
    // and check.
    read(inputs[0])?;
    let mut back = vec![0u32; n];
    out.copy_to_host(&mut back)?;
    if let Some(i) = back.iter().position(|&v| v != 2) {
        return Err(format!("zero copy: out[{i}] = {}, expected 2", back[i]).into());
    }

    let mut table = Table::new(
        2,
        &[
            "size",
            "input",
            "Rust GB/s",
            "C++ GB/s",
            "Rust/C++",
            "issue C++",
        ],
    );
    for (case, s) in samples.iter_mut().enumerate() {
        let (r, c) = s.stats();
        table.row(vec![
            size_name(ZERO_COPY_BYTES),
            ZERO_COPY_INPUTS[case].into(),
            cell(r, 1),
            c.map_or("-".into(), |c| cell(c, 1)),
            ratio(r, c),
            if case == 0 {
                format!("{ZERO_COPY_ISSUE:.1}")
            } else {
                "-".into()
            },
        ]);
        csv.medians(
            "zero_copy",
            ZERO_COPY_INPUTS[case],
            ZERO_COPY_BYTES,
            r,
            c,
            "GB/s",
        );
    }
    table.print();
    println!("  GB/s of bytes read; the kernel also writes as many bytes to device memory");
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Output

/// "256 MiB", "2 GiB", "4 KiB".
fn size_name(bytes: usize) -> String {
    match bytes {
        b if b >= 1 << 30 && b % (1 << 30) == 0 => format!("{} GiB", b >> 30),
        b if b >= MIB && b % MIB == 0 => format!("{} MiB", b / MIB),
        b => format!("{} KiB", b / 1024),
    }
}

/// "median [min-max]" with `digits` decimals.
fn cell(s: Stat, digits: usize) -> String {
    format!("{:.d$} [{:.d$}-{:.d$}]", s.0, s.1, s.2, d = digits)
}

/// Rust's median over C++'s, or "-".
fn ratio(rust: Stat, cpp: Option<Stat>) -> String {
    cpp.map_or("-".into(), |c| format!("{:.3}", rust.0 / c.0))
}

/// Rows of cells, printed with every column as wide as its widest cell: the first
/// `left` columns aligned left, the others right.
struct Table {
    left: usize,
    rows: Vec<Vec<String>>,
}

impl Table {
    fn new(left: usize, header: &[&str]) -> Self {
        Self {
            left,
            rows: vec![header.iter().map(|h| h.to_string()).collect()],
        }
    }

    fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    fn print(&self) {
        let columns = self.rows.iter().map(Vec::len).max().unwrap_or(0);
        let width = |c: usize| {
            self.rows
                .iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        };
        let widths: Vec<usize> = (0..columns).map(width).collect();
        for row in &self.rows {
            let mut line = String::from(" ");
            for (c, text) in row.iter().enumerate() {
                let w = widths[c];
                // Writing to a String cannot fail.
                let _ = if c < self.left {
                    write!(line, " {text:<w$}")
                } else {
                    write!(line, " {text:>w$}")
                };
            }
            println!("{}", line.trim_end());
        }
    }
}

/// The CSV: one row per median, `part,case,size_bytes,side,value,unit`.
struct Csv(String);

impl Default for Csv {
    fn default() -> Self {
        Self("part,case,size_bytes,side,value,unit\n".into())
    }
}

impl Csv {
    /// The medians of both sides (C++ when measured).
    fn medians(
        &mut self,
        part: &str,
        case: &str,
        size: usize,
        rust: Stat,
        cpp: Option<Stat>,
        unit: &str,
    ) {
        let sides = [("rust", Some(rust)), ("cpp", cpp)];
        for (side, s) in sides {
            if let Some(s) = s {
                // Writing to a String cannot fail.
                let _ = writeln!(self.0, "{part},{case},{size},{side},{:.4},{unit}", s.0);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// The C++ reference

/// `mem_ref_setup(device, grid)`, `*_alloc(bytes)`, `copies_alloc(count, size)`: 0 or a
/// cudaError_t.
type CppSetup = unsafe extern "C" fn(c_int, c_uint) -> c_int;
type CppAlloc = unsafe extern "C" fn(usize) -> c_int;
type CppCopiesAlloc = unsafe extern "C" fn(usize, usize) -> c_int;
/// `*_free()`, `mem_ref_teardown()`.
type CppFree = unsafe extern "C" fn();
/// `mem_ref_migrate(case)`: GB/s, negative on error.
type CppMigrate = unsafe extern "C" fn(c_int) -> f64;
/// `mem_ref_copies(batch, &host_us, &total_us)`: 0 or a cudaError_t.
type CppCopies = unsafe extern "C" fn(c_int, *mut f64, *mut f64) -> c_int;
/// `mem_ref_zero_copy(mapped, reps)`: GB/s, negative on error.
type CppZeroCopy = unsafe extern "C" fn(c_int, c_int) -> f64;

/// The C++ reference library (xtask/cpp/mem_ref.cu) and its entry points.
struct CppRef {
    migrate_alloc: CppAlloc,
    migrate_free: CppFree,
    migrate: CppMigrate,
    copies_alloc: CppCopiesAlloc,
    copies_free: CppFree,
    copies: CppCopies,
    zero_copy_alloc: CppAlloc,
    zero_copy_free: CppFree,
    zero_copy: CppZeroCopy,
    teardown: CppFree,
    /// Kept loaded while the pointers above are used.
    _library: cudadrv_sys::Library,
}

/// The function `name` of `library`, as `F`.
///
/// # Safety
/// `F` must be an `unsafe extern "C" fn` type with the symbol's C signature.
unsafe fn symbol<F: Copy>(library: &cudadrv_sys::Library, path: &str, name: &CStr) -> R<F> {
    let p = library.symbol(name);
    if p.is_null() {
        return Err(format!("{path} has no {}", name.to_string_lossy()).into());
    }
    assert_eq!(size_of::<F>(), size_of::<*mut c_void>());
    // SAFETY: a non-null address of the function `name`, whose type the caller names.
    Ok(unsafe { core::mem::transmute_copy::<*mut c_void, F>(&p) })
}

/// A cudaError_t return value as a result.
fn cuda_rc(call: &str, rc: c_int) -> R {
    if rc == 0 {
        Ok(())
    } else {
        Err(format!("{call} failed: cudaError {rc}").into())
    }
}

/// A GB/s return value (negative on error) as a result.
fn cuda_gbps(call: &str, v: f64) -> R<f64> {
    if v < 0.0 {
        Err(format!("{call} failed ({v})").into())
    } else {
        Ok(v)
    }
}

impl CppRef {
    fn open(path: &str, device: c_int, grid: u32) -> R<Self> {
        let c_path = CString::new(path)?;
        // SAFETY: the benchmark's own reference library (xtask/cpp/mem_ref.cu), named on
        // the command line for this; its initialisers are the statically linked CUDA
        // runtime's and plain C++ static initialisation of its own globals. It is kept
        // beside the pointers read from it.
        let library = unsafe { cudadrv_sys::Library::open(&c_path) }
            .map_err(|e| format!("{path}: {}", e.0))?;
        let l = &library;
        // SAFETY: each symbol is the `extern "C"` function of that name in mem_ref.cu,
        // whose signature the type alias spells out.
        let (setup, this) = unsafe {
            (
                symbol::<CppSetup>(l, path, c"mem_ref_setup")?,
                Self {
                    migrate_alloc: symbol(l, path, c"mem_ref_migrate_alloc")?,
                    migrate_free: symbol(l, path, c"mem_ref_migrate_free")?,
                    migrate: symbol(l, path, c"mem_ref_migrate")?,
                    copies_alloc: symbol(l, path, c"mem_ref_copies_alloc")?,
                    copies_free: symbol(l, path, c"mem_ref_copies_free")?,
                    copies: symbol(l, path, c"mem_ref_copies")?,
                    zero_copy_alloc: symbol(l, path, c"mem_ref_zero_copy_alloc")?,
                    zero_copy_free: symbol(l, path, c"mem_ref_zero_copy_free")?,
                    zero_copy: symbol(l, path, c"mem_ref_zero_copy")?,
                    teardown: symbol(l, path, c"mem_ref_teardown")?,
                    _library: library,
                },
            )
        };
        // SAFETY: plain values; the library makes its own stream and events.
        cuda_rc("mem_ref_setup", unsafe { setup(device, grid) })?;
        Ok(this)
    }

    /// Allocates part (a)'s buffers, `bytes` each.
    fn migrate_alloc(&self, bytes: usize) -> R<CppBuffers<'_>> {
        // SAFETY: a plain size; the library allocates and owns the buffers.
        cuda_rc("mem_ref_migrate_alloc", unsafe {
            (self.migrate_alloc)(bytes)
        })?;
        Ok(CppBuffers::new(self.migrate_free))
    }

    /// GB/s of case `case` of [`MIGRATIONS`] (fails cleanly without migrate_alloc).
    fn migrate(&self, case: usize) -> R<f64> {
        let case = c_int::try_from(case)?;
        // SAFETY: a plain value.
        let v = unsafe { (self.migrate)(case) };
        cuda_gbps("mem_ref_migrate", v)
    }

    /// Allocates part (b)'s buffers: `COPIES` copies of `COPY_BYTES`.
    fn copies_alloc(&self) -> R<CppBuffers<'_>> {
        // SAFETY: plain sizes; the library allocates and owns the buffers.
        let rc = unsafe { (self.copies_alloc)(COPIES, COPY_BYTES) };
        cuda_rc("mem_ref_copies_alloc", rc)?;
        Ok(CppBuffers::new(self.copies_free))
    }

    /// (host, end to end) microseconds per copy of the batch or the loop.
    fn copies(&self, batch: bool) -> R<(f64, f64)> {
        let (mut host, mut total) = (0.0, 0.0);
        // SAFETY: valid out-pointers; fails cleanly without copies_alloc.
        let rc = unsafe { (self.copies)(c_int::from(batch), &mut host, &mut total) };
        cuda_rc("mem_ref_copies", rc)?;
        Ok((host, total))
    }

    /// Allocates part (c)'s buffers of `ZERO_COPY_BYTES`.
    fn zero_copy_alloc(&self) -> R<CppBuffers<'_>> {
        // SAFETY: a plain size; the library allocates and owns the buffers.
        let rc = unsafe { (self.zero_copy_alloc)(ZERO_COPY_BYTES) };
        cuda_rc("mem_ref_zero_copy_alloc", rc)?;
        Ok(CppBuffers::new(self.zero_copy_free))
    }

    /// GB/s of bytes read by `reps` launches reading mapped host memory or device memory
    /// (fails cleanly without zero_copy_alloc).
    fn zero_copy(&self, mapped: bool, reps: usize) -> R<f64> {
        let reps = c_int::try_from(reps)?;
        // SAFETY: plain values.
        let v = unsafe { (self.zero_copy)(c_int::from(mapped), reps) };
        cuda_gbps("mem_ref_zero_copy", v)
    }
}

impl Drop for CppRef {
    fn drop(&mut self) {
        // SAFETY: frees what the library made; nothing of it is used afterwards.
        unsafe { (self.teardown)() };
    }
}

/// Buffers of one part on the C++ side, freed on drop by the part's `*_free`. It
/// borrows the `CppRef`, which keeps the library loaded.
struct CppBuffers<'c> {
    free: CppFree,
    _library: PhantomData<&'c CppRef>,
}

impl CppBuffers<'_> {
    fn new(free: CppFree) -> Self {
        Self {
            free,
            _library: PhantomData,
        }
    }
}

impl Drop for CppBuffers<'_> {
    fn drop(&mut self) {
        // SAFETY: frees what the part's `*_alloc` made; nothing of it is used afterwards.
        unsafe { (self.free)() };
    }
}
