//! `cargo xtask`: bindings, PTX, tests, GPU bundle and benchmarks for this workspace.

mod bench;
mod bindgen;
mod build_time;
mod bundle;
mod decode;
mod driver_abi;
mod image;
mod library_bindgen;
mod package;
mod ptx;
mod setup;
mod template;
mod test;
mod toolkit;

use std::path::{Path, PathBuf};
use std::process::Command;

/// Result type of every xtask step.
pub type R<T = ()> = Result<T, Box<dyn std::error::Error>>;

const USAGE: &str = "usage: cargo xtask <command>

Each command first installs what it needs and lacks (nightly rust-src, rustup targets,
the CUDA wheels in .cuda/, libclang), so any of them works on a fresh machine.

commands:
  bindgen [--check] [--cuda RELEASE] [--crate DIR]
                      regenerate cuda-sys/src/generated from the pinned CUDA 13.5.37
                      headers (or fail if stale); --cuda 12.4 / 13.1.80 fetches that
                      release's header wheels instead and sets the crate version's
                      build metadata (+cuda-12.4); --crate regenerates another copy of
                      cudadrv-sys (a vendored one)
  embedded            build examples/bare-metal (aarch64-unknown-none, size budget) and
                      examples/nostd-staticlib
  build-time [--cudarc] [--runs N]
                      clean release builds of four small programs against cudadrv (and
                      with --cudarc the same four against cudarc 0.19): wall times and
                      where they went (needs an idle machine; not part of `test`)
  build-cost          the dependency set of cudadrv and the LLVM IR each library emits,
                      against budgets (part of `test`)
  bindgen-release-check
                      regenerate a copy of cudadrv-sys from the CUDA 12.4 headers in
                      target/ and run its unit tests (what a vendoring user does)
  driver-abi [--check]  write tests/driver_abi/*.txt, the driver ABI sets of CUDA 12.0-13.5
                      (from the nvidia-cuda-runtime-cu12 wheels' headers), or fail if stale
  ptx [--check]       build ptx/ to ptx/generated/*.ptx with nightly (or fail if stale)
  template            build examples/kernel-template (host + kernels), ptxas its PTX for
                      sm_90, check that `unsafe` in a `safe` kernel fails the device build
  test                everything CI checks; hardware suites run on a GPU or report skips
  bundle [DIR]        test binaries + PTX + run.sh for a GPU host without Rust (default: bundle/)
  package             cargo package cudadrv-sys + cudadrv, then build a fresh crate against
                      the .crate files offline without CUDA or libclang
  bench [ARGS]        benchmarks against the CUDA C++ reference (on a GPU host)
  timeline --csv F    SVG timeline of a PDL pair from pdl_demo's %globaltimer stamps
";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let root = workspace_root();
    let result = match args.first().map(String::as_str) {
        Some("bindgen") => bindgen::Args::parse(&args[1..]).and_then(|a| bindgen::run(&root, &a)),
        Some("bindgen-release-check") => bindgen::check_regenerated_release(&root),
        Some("embedded") => image::check(&root),
        Some("build-time") => build_time::measure(&root, &args[1..]),
        Some("build-cost") => build_time::check(&root),
        Some("driver-abi") => driver_abi::run(&root, args.iter().any(|a| a == "--check")),
        Some("ptx") => ptx::build(&root, args.iter().any(|a| a == "--check")),
        Some("template") => template::build_and_check(&root),
        Some("test") => test::run_all(&root),
        Some("package") => package::run_package(&root),
        Some("bench") => bench::run(&root, &args[1..]),
        Some("timeline") => bench::timeline(&root, &args[1..]),
        Some("bundle") => {
            let dir = args
                .get(1)
                .map_or_else(|| root.join("bundle"), PathBuf::from);
            bundle::run_bundle(&root, &dir)
        }
        _ => {
            eprint!("{USAGE}");
            std::process::exit(2);
        }
    };
    if let Err(e) = result {
        eprintln!("xtask: error: {e}");
        std::process::exit(1);
    }
}

/// The workspace root (xtask's manifest dir is `<root>/xtask`).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// `cargo` (the one running xtask) in the workspace root, with [`lean_builds`].
pub fn cargo(root: &Path) -> Command {
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cmd.current_dir(root);
    lean_builds(&mut cmd);
    cmd
}

/// Keeps the many target directories of `cargo xtask test` small (a fresh CI machine
/// may have little disk): no incremental caches, and line tables only as debug info
/// in the dev and test profiles (panics and backtraces keep their file and line). A
/// value the caller set wins.
pub fn lean_builds(cmd: &mut Command) {
    for (key, value) in [
        ("CARGO_INCREMENTAL", "0"),
        ("CARGO_PROFILE_DEV_DEBUG", "line-tables-only"),
    ] {
        if std::env::var_os(key).is_none() {
            cmd.env(key, value);
        }
    }
}

/// Prints a progress line for a long step.
pub fn step(msg: &str) {
    println!("==> {msg}");
}

/// Runs a command, failing with its command line when it does not succeed.
pub fn run(cmd: &mut Command) -> R {
    let status = cmd.status().map_err(|e| format!("{cmd:?}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{cmd:?} failed: {status}").into())
    }
}
