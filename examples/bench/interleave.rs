//! `bench --interleave LIB.so`: cuda-core and the C++ reference (bench.cu built as a
//! library) measured alternately in one process, round by round, so both sides see the
//! same GPU state (clocks, caches, the driver's internal pools).
//!
//! Each round measures every side once, back to back, the starting side rotating from
//! round to round; a table row is the median of the round medians per side, their ratio,
//! and the range of the per-round ratios.

use std::cell::RefCell;
use std::ffi::{CStr, c_char, c_void};
use std::fmt::Write as _;

use cudadrv::{Context, Function, Module, Stream};

use crate::common::{BLOCK, ChainMode, Pair, R, chain_bench, chain_bench_trigger, stats};
use crate::{CROSSOVER_ELEMS, Rows, launch_costs, pair_bench};

/// `cpp_chain_us(variant, n, links, reps, kernel, grid)`: median us/kernel of `reps`
/// chains of `grid` x 256 threads; a null `kernel` runs the nvcc-built chain_step, else
/// that `CUfunction`.
type CppChain = unsafe extern "C" fn(i32, u32, i32, i32, *mut c_void, u32) -> f64;
/// `cpp_pair_us(pdl, n, prolog, reps)`: median us/pair of `reps` runs of 64 pairs.
type CppPair = unsafe extern "C" fn(i32, u32, u32, i32) -> f64;
/// `cpp_launch_ns(case)`: median ns per launch of driver-API case 0..4 (plain0, ex_pdl0,
/// ptrs4, packed4), the order of [`launch_costs`]' cases.
pub type CppLaunch = unsafe extern "C" fn(i32) -> f64;
/// `cpp_kernel(name)`: an nvcc-built kernel as a `CUfunction` of the primary context.
type CppKernel = unsafe extern "C" fn(*const c_char) -> *mut c_void;

/// The C++ reference library and its entry points.
struct CppLib {
    chain: CppChain,
    pair: CppPair,
    launch: CppLaunch,
    kernel: CppKernel,
    /// Kept loaded for the process: the functions above and the kernels' code live in it.
    _library: cudadrv_sys::Library,
}

impl CppLib {
    fn open(path: &str) -> R<Self> {
        let c_path = std::ffi::CString::new(path)?;
        // SAFETY: `path` is the bench's own C++ reference library (xtask/cpp/bench.cu
        // built with -DBENCH_LIB by xtask/cpp/build.sh), named on the command line for
        // this; its constructors are plain C++ static initialisation (its own globals,
        // nvcc's kernel registration, the statically linked CUDA runtime's and the C++
        // standard library's), which touch nothing of this program. It is kept in the
        // returned `CppLib` beside the pointers read from it, and the functions made from
        // its kernels are used only while it is loaded (see `function`), so nothing read
        // from it outlives it.
        let library = unsafe { cudadrv_sys::Library::open(&c_path) }
            .map_err(|e| format!("{path}: {}", e.0))?;
        let sym = |name: &CStr| {
            let p = library.symbol(name);
            if p.is_null() {
                Err(format!("{path} has no {}", name.to_string_lossy()))
            } else {
                Ok(p)
            }
        };
        // SAFETY: each symbol is the `extern "C"` function of that name in bench.cu
        // (BENCH_LIB), whose signature the matching type alias spells out.
        unsafe {
            Ok(Self {
                chain: core::mem::transmute::<*mut c_void, CppChain>(sym(c"cpp_chain_us")?),
                pair: core::mem::transmute::<*mut c_void, CppPair>(sym(c"cpp_pair_us")?),
                launch: core::mem::transmute::<*mut c_void, CppLaunch>(sym(c"cpp_launch_ns")?),
                kernel: core::mem::transmute::<*mut c_void, CppKernel>(sym(c"cpp_kernel")?),
                _library: library,
            })
        }
    }

    /// The nvcc-built kernel `name`, as a cuda-core function of `ctx` (the primary
    /// context, the one the library uses). Its module is the one the CUDA runtime loaded
    /// for the library's kernels, borrowed (`cuFuncGetModule`, `Module::borrow_raw`):
    /// dropping the function unloads nothing.
    ///
    /// # Safety
    /// `ctx` must be the primary context, and the result (and every clone of it) must not
    /// be used after `self` is dropped: the kernel's module belongs to the library.
    unsafe fn function(&self, ctx: &Context, name: &CStr) -> R<Function> {
        // SAFETY: a NUL-terminated name; the library returns null for unknown names.
        let raw = unsafe { (self.kernel)(name.as_ptr()) };
        if raw.is_null() {
            return Err(format!("the C++ library has no kernel {}", name.to_string_lossy()).into());
        }
        let raw: cudadrv_sys::CUfunction = raw.cast();
        let mut module = core::ptr::null_mut();
        // SAFETY: `raw` is a live CUfunction (cudaGetFuncBySymbol); valid out-pointer.
        unsafe { cudadrv_sys::driver()?.cuFuncGetModule()?(&mut module, raw) }
            .result()
            .map_err(|e| format!("cuFuncGetModule: {e}"))?;
        // SAFETY: the module holding `raw`, loaded by the runtime into the primary context
        // (`ctx`, the caller's promise); it stays loaded while the library is, and the
        // caller uses the result only while `self` keeps the library loaded.
        let module = unsafe { Module::borrow_raw(module, ctx) }?;
        // SAFETY: `raw` is a function of `module` (cuFuncGetModule said so).
        Ok(unsafe { Function::from_raw(raw, &module) })
    }
}

/// Per-round medians of the sides measured in each round.
pub struct Rounds<const K: usize>(Vec<[f64; K]>);

/// One side of a comparison: measures once, returns its median.
pub type Side<'a> = &'a mut dyn FnMut() -> R<f64>;

impl<const K: usize> Rounds<K> {
    /// Runs `rounds` rounds; each measures every side once, starting with side
    /// `round % K` and going round the list, so no side always goes first (or follows
    /// the same other side).
    pub fn run(rounds: usize, sides: [Side<'_>; K]) -> R<Self> {
        let mut all = Vec::with_capacity(rounds);
        for round in 0..rounds {
            let mut medians = [0.0; K];
            for k in 0..K {
                let i = (round + k) % K;
                medians[i] = sides[i]()?;
            }
            all.push(medians);
        }
        Ok(Self(all))
    }

    /// Median over the rounds of side `i`.
    pub fn median(&self, i: usize) -> f64 {
        stats(&mut self.0.iter().map(|r| r[i]).collect::<Vec<_>>()).0
    }

    /// Side `a` over side `b`: the ratio of their medians and the range of the per-round
    /// ratios.
    pub fn ratio(&self, a: usize, b: usize) -> (f64, f64, f64) {
        let (_, lo, hi) = stats(&mut self.0.iter().map(|r| r[a] / r[b]).collect::<Vec<_>>());
        (self.median(a) / self.median(b), lo, hi)
    }
}

/// Rows of the interleaved CSV: one per compared pair of sides.
struct Csv(String);

impl Csv {
    const HEADER: &str = "section,case,elems,prolog,unit,lhs,rhs,lhs_median,rhs_median,ratio,ratio_min,ratio_max,rounds";

    #[allow(clippy::too_many_arguments)]
    fn add<const K: usize>(
        &mut self,
        section: &str,
        case: &str,
        elems: u32,
        prolog: u32,
        unit: &str,
        sides: [&str; K],
        r: &Rounds<K>,
        (a, b): (usize, usize),
    ) {
        let (ratio, lo, hi) = r.ratio(a, b);
        let _ = writeln!(
            self.0,
            "{section},{case},{elems},{prolog},{unit},{},{},{:.4},{:.4},{ratio:.4},{lo:.4},{hi:.4},{}",
            sides[a],
            sides[b],
            r.median(a),
            r.median(b),
            r.0.len()
        );
    }
}

/// Formats `ratio (lo..hi)`.
pub fn ratio_text((ratio, lo, hi): (f64, f64, f64)) -> String {
    format!("{ratio:.3} ({lo:.2}..{hi:.2})")
}

/// `--interleave LIB.so [--rounds N] [--csv PATH]`: launch costs, the 256-kernel chain
/// with both kernel builds under both hosts, the crossover sweep on two grid shapes and
/// the PDL pair, each alternating Rust and C++ round by round, and the PDL trigger
/// placement (Rust only). Writes the comparisons to `csv_path`.
pub fn interleave(ctx: &Context, lib: &str, rounds: usize, csv_path: &str) -> R {
    let cpp = CppLib::open(lib)?;
    let module = Module::from_ptx(ctx, cuda_workspace::ptx::KERNELS)?;
    let rust_chain = module.function("chain_step")?;
    // SAFETY: `ctx` is the primary context (`open_gpu`); the nvcc functions are locals of
    // this function declared after `cpp`, so they are dropped, and last used, before it.
    let nvcc_chain = unsafe { cpp.function(ctx, c"chain_step")? };
    // The nvcc kernel must take what the Rust kernel takes: (in, out, n, mode).
    nvcc_chain.verify_args::<(cudadrv::DevicePtr<u32>, cudadrv::DevicePtr<u32>, u32, u32)>()?;
    let mut csv = Csv(format!("{}\n", Csv::HEADER));

    // 1. Host cost of one launch.
    // One stream for every section, as before. In a RefCell because the chain's graph
    // modes capture it (`&mut`) and several sides of one round use it; each borrow is
    // taken before a measurement starts, never inside a timed loop.
    let stream = RefCell::new(Stream::non_blocking(ctx)?);
    let mut rows = Rows { csv: String::new() };
    // SAFETY: as for `nvcc_chain`.
    let nvcc_empty = unsafe { cpp.function(ctx, c"empty_kernel")? };
    let launch = launch_costs(
        ctx,
        &module,
        &stream.borrow(),
        &mut rows,
        true,
        // Host launch costs vary most from round to round: twice the rounds.
        Some((cpp.launch, 2 * rounds, [&nvcc_empty, &nvcc_chain])),
    )?;
    let launch_sides = [
        "rust-host-rust-kernel",
        "rust-host-nvcc-kernel",
        "cpp-host-nvcc-kernel",
    ];
    for (case, r) in &launch {
        for pair in [(0, 2), (1, 2)] {
            csv.add("launch", case, 0, 0, "ns/launch", launch_sides, r, pair);
        }
    }

    // 2. The chain, 2 hosts x 2 kernel builds.
    let sms = ctx.device().multiprocessor_count()?;
    let n = sms * BLOCK;
    const REPS: usize = 5;
    const LINKS: usize = 256;
    println!(
        "\ninterleaved, {rounds} rounds (stream modes {}: host-bound, noisier) of {REPS} chains of {LINKS} kernels, {n} elements: us/kernel",
        3 * rounds
    );
    println!("  host x kernel: cuda-core or C++ (runtime API; driver API for the Rust kernel) x");
    println!("  Rust (ptx/) or nvcc chain_step; ratios are medians (per-round range)");
    println!(
        "{:<11} {:>8} {:>8} {:>8} {:>8}  {:<18} {:<18} {:<18} {:<18}",
        "mode",
        "rs/rs",
        "c++/rs",
        "rs/nvcc",
        "c++/nvcc",
        "all Rust/all C++",
        "host, Rust kernel",
        "host, nvcc kernel",
        "kernel, Rust host"
    );
    let sides = [
        "rust-host-rust-kernel",
        "cpp-host-rust-kernel",
        "rust-host-nvcc-kernel",
        "cpp-host-nvcc-kernel",
    ];
    for (variant, mode) in ChainMode::ALL.into_iter().enumerate() {
        let cpp_chain = |kernel: *mut c_void| {
            // SAFETY: plain values and null or a live CUfunction of this context; the
            // library checks its own results and exits on error.
            Ok(unsafe { (cpp.chain)(variant as i32, n, LINKS as i32, REPS as i32, kernel, sms) })
        };
        let rust_host = |f: &Function| -> R<f64> {
            Ok(stats(&mut chain_bench(
                ctx,
                &mut stream.borrow_mut(),
                f,
                mode,
                n,
                sms,
                LINKS,
                REPS,
            )?)
            .0)
        };
        let chain_rounds = if mode.graph() { rounds } else { 3 * rounds };
        let r = Rounds::run(
            chain_rounds,
            [
                &mut || rust_host(&rust_chain),
                &mut || cpp_chain(rust_chain.as_raw().cast()),
                &mut || rust_host(&nvcc_chain),
                &mut || cpp_chain(core::ptr::null_mut()),
            ],
        )?;
        println!(
            "{:<11} {:>8.4} {:>8.4} {:>8.4} {:>8.4}  {:<18} {:<18} {:<18} {:<18}",
            mode.name(),
            r.median(0),
            r.median(1),
            r.median(2),
            r.median(3),
            ratio_text(r.ratio(0, 3)),
            ratio_text(r.ratio(0, 1)),
            ratio_text(r.ratio(2, 3)),
            ratio_text(r.ratio(0, 2)),
        );
        for pair in [(0, 3), (0, 1), (2, 3), (0, 2)] {
            csv.add("chain", mode.name(), n, 0, "us/kernel", sides, &r, pair);
        }
    }

    // 3. The crossover: elements per kernel, all Rust against all C++, on two grid shapes:
    // one block per SM looping over the elements (the chain above), and one thread per
    // element (elems / 256 blocks, several waves).
    let sweep_rounds = (rounds / 3).max(3);
    // Blocks per kernel: one per SM (grid-stride), or one thread per element.
    let grid_for = |elems: u32, one_per_thread: bool| {
        if one_per_thread {
            elems.div_ceil(BLOCK)
        } else {
            sms
        }
    };
    println!(
        "\ninterleaved crossover, {sweep_rounds} rounds of {REPS} chains of {LINKS} kernels: us/kernel"
    );
    println!("  PDL: this mode minus the same mode without PDL (negative: PDL is faster)");
    println!(
        "{:>8} {:>6} {:<11} {:>9} {:>9}  {:<18} {:>9} {:>9}",
        "elems", "grid", "mode", "rust", "c++", "rust/c++", "PDL rust", "PDL c++"
    );
    for (section, one_per_thread) in [("crossover", false), ("crossover_full", true)] {
        for elems in CROSSOVER_ELEMS {
            let grid = grid_for(elems, one_per_thread);
            let mut without = [0.0f64; 2];
            for (variant, mode) in ChainMode::ALL.into_iter().enumerate() {
                let r = Rounds::run(
                    sweep_rounds,
                    [
                        &mut || {
                            let mut us = chain_bench(
                                ctx,
                                &mut stream.borrow_mut(),
                                &rust_chain,
                                mode,
                                elems,
                                grid,
                                LINKS,
                                REPS,
                            )?;
                            Ok(stats(&mut us).0)
                        },
                        // SAFETY: plain values; the library checks its own results.
                        &mut || unsafe {
                            Ok((cpp.chain)(
                                variant as i32,
                                elems,
                                LINKS as i32,
                                REPS as i32,
                                core::ptr::null_mut(),
                                grid,
                            ))
                        },
                    ],
                )?;
                let pdl = if mode.pdl() {
                    [
                        format!("{:+.3}", r.median(0) - without[0]),
                        format!("{:+.3}", r.median(1) - without[1]),
                    ]
                } else {
                    without = [r.median(0), r.median(1)];
                    [String::new(), String::new()]
                };
                println!(
                    "{elems:>8} {grid:>6} {:<11} {:>9.3} {:>9.3}  {:<18} {:>9} {:>9}",
                    mode.name(),
                    r.median(0),
                    r.median(1),
                    ratio_text(r.ratio(0, 1)),
                    pdl[0],
                    pdl[1]
                );
                csv.add(
                    section,
                    mode.name(),
                    elems,
                    0,
                    "us/kernel",
                    ["rust", "cpp"],
                    &r,
                    (0, 1),
                );
            }
        }
    }

    // 4. Where the trigger goes, for the shapes where PDL helps and where it hurts:
    // captured graphs of the Rust chain_step, without PDL and with each kernel mode.
    println!(
        "\nPDL trigger placement (graph, Rust kernels), {sweep_rounds} rounds of {REPS} chains of {LINKS} kernels: us/kernel"
    );
    println!(
        "{:>8} {:>6} {:>9} {:>12} {:>12} {:>12}",
        "elems", "grid", "no PDL", "wait+early", "wait+late", "wait only"
    );
    for (elems, one_per_thread) in [
        (1_048_576u32, false),
        (33_792, true),
        (1_048_576, true),
        (4_194_304, true),
    ] {
        let grid = grid_for(elems, one_per_thread);
        let run = |pdl: Option<u32>| -> R<f64> {
            let mut us = chain_bench_trigger(
                ctx,
                &mut stream.borrow_mut(),
                &rust_chain,
                ChainMode::Graph,
                pdl,
                elems,
                grid,
                LINKS,
                REPS,
            )?;
            Ok(stats(&mut us).0)
        };
        let r = Rounds::run(
            sweep_rounds,
            [
                &mut || run(None),
                &mut || run(Some(1)),
                &mut || run(Some(2)),
                &mut || run(Some(3)),
            ],
        )?;
        println!(
            "{elems:>8} {grid:>6} {:>9.3} {:>12.3} {:>12.3} {:>12.3}",
            r.median(0),
            r.median(1),
            r.median(2),
            r.median(3)
        );
        let sides = ["no-pdl", "pdl-wait-early", "pdl-wait-late", "pdl-wait-only"];
        for pair in [(1, 0), (2, 0), (3, 0)] {
            csv.add(
                // Sections named like the crossover's: the grid shape, not a prolog.
                if one_per_thread {
                    "trigger_full"
                } else {
                    "trigger"
                },
                "graph",
                elems,
                0,
                "us/kernel",
                sides,
                &r,
                pair,
            );
        }
    }

    // 5. The PDL pair with a prolog before griddepcontrol.wait.
    println!(
        "\ninterleaved pair (primary works 0 ns after its early trigger), {sweep_rounds} rounds: us/pair"
    );
    println!(
        "{:>8} {:>6} {:<6} {:>9} {:>9}  {:<18}",
        "elems", "prolog", "case", "rust", "c++", "rust/c++"
    );
    for elems in [33_792u32, 1_048_576] {
        let pair = Pair::new(ctx, &module, elems, sms)?;
        for prolog in [0u32, 1024, 16_384] {
            for pdl in [false, true] {
                let r = Rounds::run(
                    sweep_rounds,
                    [
                        &mut || {
                            Ok(stats(&mut pair_bench(
                                ctx,
                                &pair,
                                &stream.borrow(),
                                pdl,
                                prolog,
                                REPS,
                            )?)
                            .0)
                        },
                        // SAFETY: plain values; the library checks its own results.
                        &mut || unsafe {
                            Ok((cpp.pair)(i32::from(pdl), elems, prolog, REPS as i32))
                        },
                    ],
                )?;
                let case = if pdl { "pdl" } else { "plain" };
                println!(
                    "{elems:>8} {prolog:>6} {case:<6} {:>9.3} {:>9.3}  {:<18}",
                    r.median(0),
                    r.median(1),
                    ratio_text(r.ratio(0, 1))
                );
                csv.add(
                    "pair",
                    case,
                    elems,
                    prolog,
                    "us/pair",
                    ["rust", "cpp"],
                    &r,
                    (0, 1),
                );
            }
        }
    }
    std::fs::write(csv_path, &csv.0)?;
    eprintln!("# wrote {csv_path}");
    Ok(())
}
