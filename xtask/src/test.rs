//! `cargo xtask test`: everything CI checks, set up from a fresh machine.
//!
//! Steps: toolkit wheels and libclang; rustfmt, clippy and (nightly) rust-src and Miri
//! components; `cargo fmt --check`; `bindgen --check`; `ptx --check` and ptxas over every
//! shipped PTX file; clippy (`-D warnings`) in both binding modes; rustdoc (`-D
//! warnings`); no_std builds; all tests (compile-fail doctests included), whose hardware
//! suites run on a GPU or report themselves skipped; the CPU suites again under Miri. The
//! last line sums the hardware suites.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::{R, cargo, run, setup, step, toolkit};

/// The library packages (folders cuda-sys/ and cuda-core/).
const SYS: &str = "cudadrv-sys";
const CORE: &str = "cudadrv";

/// Totals of the hardware suites' summary lines.
#[derive(Default, Debug)]
pub struct HwTotals {
    /// Tests that ran and passed.
    pub passed: u32,
    /// Tests that failed.
    pub failed: u32,
    /// Tests that reported themselves skipped.
    pub skipped: u32,
    /// Suites seen.
    pub suites: u32,
    /// The first "no GPU" reason printed, if any.
    pub no_gpu: Option<String>,
}

impl HwTotals {
    /// Reads one output line; counts `hw_x: N passed, N failed, N skipped`.
    pub fn read_line(&mut self, line: &str) {
        if let Some(i) = line.find(": no GPU (") {
            if line.starts_with("hw_") && self.no_gpu.is_none() {
                self.no_gpu = Some(line[i + 2..].to_string());
            }
        }
        let Some((suite, rest)) = line.split_once(": ") else {
            return;
        };
        if !suite.starts_with("hw_") || suite.contains(' ') {
            return;
        }
        let nums: Vec<u32> = rest
            .split(", ")
            .filter_map(|part| part.split_once(' ').and_then(|(n, _)| n.parse().ok()))
            .collect();
        if let [p, f, s] = nums[..] {
            if rest.contains("passed") && rest.contains("skipped") {
                self.passed += p;
                self.failed += f;
                self.skipped += s;
                self.suites += 1;
            }
        }
    }
}

/// Runs the whole check; fails on the first failing step (tests run to the end).
pub fn run_all(root: &Path) -> R {
    let start = Instant::now();
    step("toolchain components (rustfmt, clippy, nightly rust-src and Miri, targets)");
    setup::fmt_and_clippy()?;
    setup::nightly_rust_src()?;
    setup::nightly_miri()?;
    setup::targets(&[
        "x86_64-unknown-none",
        "aarch64-unknown-none",
        "aarch64-unknown-linux-gnu",
        "thumbv7em-none-eabihf",
        "x86_64-pc-windows-msvc",
    ])?;
    setup::toolchain("1.85")?;
    let tk = toolkit::locate(root)?;
    // The ABI probe's headers (environment for child processes): the release the
    // bindings are generated from, not the 13.0 build toolchain's.
    let include = toolkit::headers(root, &toolkit::HEADERS)?.remove(0);

    step("package metadata: no placeholder addresses in the manifests and READMEs");
    for file in [
        "Cargo.toml",
        "cuda-sys/Cargo.toml",
        "cuda-core/Cargo.toml",
        "README.md",
        "cuda-sys/README.md",
        "cuda-core/README.md",
    ] {
        let text = std::fs::read_to_string(root.join(file))?;
        if text.contains("example.invalid") {
            return Err(format!("{file} names a placeholder address (example.invalid)").into());
        }
    }

    step("cargo fmt --check");
    run(cargo(root).args(["fmt", "--all", "--", "--check"]))?;

    step("build cost: the libraries' dependencies and the LLVM IR they emit, against budgets");
    crate::build_time::check(root)?;

    step("bindings are current (cargo xtask bindgen --check)");
    crate::bindgen::run(
        root,
        &crate::bindgen::Args {
            check: true,
            ..Default::default()
        },
    )?;

    step(&format!(
        "a vendored cudadrv-sys regenerated from the CUDA {} headers builds and passes its unit tests",
        crate::bindgen::CI_CUDA12.release
    ));
    crate::bindgen::check_regenerated_release(root)?;

    step("driver ABI sets of CUDA 12.0-13.5 are current (cargo xtask driver-abi --check)");
    crate::driver_abi::run(root, true)?;

    step("PTX is current (cargo xtask ptx --check)");
    crate::ptx::build(root, true)?;
    let ptxas = tk
        .ptxas()
        .ok_or("ptxas not found in the CUDA toolkit or wheels")?;
    step(&format!(
        "assembling every shipped PTX file for sm_90 with {}",
        ptxas.display()
    ));
    let n = crate::ptx::assemble_all(root, &ptxas)?;
    println!("  {n} PTX files assembled");

    step("the kernel template (examples/kernel-template): host + kernels build, ptxas sm_90");
    crate::template::check(root, &ptxas)?;

    step(
        "the decode example (examples/decode): host + kernels build, ptxas sm_90, host-side tests",
    );
    crate::decode::check(root, &ptxas)?;

    step("clippy -D warnings (loaded mode, all targets)");
    run(cargo(root).env("CUDA_SYS_INCLUDE", &include).args([
        "clippy",
        "--workspace",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ]))?;
    step("clippy -D warnings (linked mode)");
    run(cargo(root).env("CUDA_SYS_INCLUDE", &include).args([
        "clippy",
        "--workspace",
        "--all-targets",
        "--no-default-features",
        "--features",
        "linked",
        "--target-dir",
        "target/linked",
        "--",
        "-D",
        "warnings",
    ]))?;

    step("no_std builds: cuda-sys and cuda-core without std or alloc, both modes");
    for features in ["loaded", "linked"] {
        run(cargo(root).args([
            "build",
            "-p",
            SYS,
            "-p",
            CORE,
            "--no-default-features",
            "--features",
            features,
            "--target-dir",
            "target/nostd",
        ]))?;
    }

    step(
        "bare-metal targets: both library crates, no binding mode (from_resolver tables only), linked, loaded and both",
    );
    for target in ["x86_64-unknown-none", "aarch64-unknown-none"] {
        for features in ["", "linked", "loaded", "loaded,linked"] {
            run(cargo(root).args([
                "build",
                "-p",
                SYS,
                "-p",
                CORE,
                "--no-default-features",
                "--features",
                features,
                "--target",
                target,
                "--target-dir",
                "target/nostd",
            ]))?;
        }
    }

    step("a 32-bit target (thumbv7em-none-eabihf): one clear error from cudadrv-sys");
    let out = cargo(root)
        .args([
            "build",
            "-p",
            SYS,
            "--no-default-features",
            "--target",
            "thumbv7em-none-eabihf",
        ])
        .args(["--target-dir", "target/nostd", "--color", "never"])
        .output()?;
    let text = String::from_utf8_lossy(&out.stderr);
    let errors = text.lines().filter(|l| l.starts_with("error")).count();
    if out.status.success()
        || !text.contains("error: cudadrv-sys needs a 64-bit target")
        || errors != 2
    {
        return Err(format!(
            "a 32-bit build of cudadrv-sys should fail with the one 64-bit message \
             ({errors} error lines):\n{text}"
        )
        .into());
    }
    println!("  refused with: cudadrv-sys needs a 64-bit target (...)");

    step(&format!(
        "embedded examples: the bare-metal image (budget {} bytes) and the no_std + alloc staticlib",
        crate::image::BARE_METAL_BUDGET
    ));
    crate::image::check(root)?;

    step(
        "features are additive: clippy with loaded and linked together; cuda-sys without runtime; cudadrv without graph or green",
    );
    run(cargo(root).env("CUDA_SYS_INCLUDE", &include).args([
        "clippy",
        "--workspace",
        "--all-targets",
        "--no-default-features",
        "--features",
        "loaded,linked",
        "--target-dir",
        "target/both",
        "--",
        "-D",
        "warnings",
    ]))?;
    // Each crate alone with a subset of its features: cuda-sys without `runtime`, and
    // cudadrv with its optional sections (`graph`, `green`) each off and both off.
    for (package, features) in [
        (SYS, "loaded"),
        (SYS, "linked"),
        (SYS, "loaded,linked"),
        (CORE, "std,loaded"),
        (CORE, "std,loaded,graph"),
        (CORE, "std,loaded,green"),
        (CORE, "loaded,nvrtc"),
    ] {
        run(cargo(root).args([
            "clippy",
            "-p",
            package,
            "--all-targets",
            "--no-default-features",
            "--features",
            features,
            "--target-dir",
            "target/combo",
            "--",
            "-D",
            "warnings",
        ]))?;
    }

    step("cuda-sys without a binding mode: unit tests (tables from a resolver only)");
    run(cargo(root).args([
        "test",
        "-p",
        SYS,
        "--lib",
        "--no-default-features",
        "--target-dir",
        "target/nostd",
    ]))?;

    step("aarch64-unknown-linux-gnu: check everything; the C ABI probe compared under qemu");
    if !Path::new("/usr/bin/aarch64-linux-gnu-gcc").exists()
        || !Path::new("/usr/bin/qemu-aarch64").exists()
    {
        toolkit::apt_install(&[
            "gcc-aarch64-linux-gnu",
            "libc6-dev-arm64-cross",
            "qemu-user",
        ])?;
    }
    let aarch64 = |cmd: &mut Command| {
        cmd.env("CUDA_SYS_INCLUDE", &include)
            .env(
                "CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER",
                "aarch64-linux-gnu-gcc",
            )
            .env(
                "CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER",
                "qemu-aarch64 -L /usr/aarch64-linux-gnu",
            )
            .env("CC_aarch64_unknown_linux_gnu", "aarch64-linux-gnu-gcc")
            .args([
                "--target",
                "aarch64-unknown-linux-gnu",
                "--target-dir",
                "target/aarch64",
            ]);
    };
    let mut check = cargo(root);
    check.args(["clippy", "--workspace", "--all-targets"]);
    aarch64(&mut check);
    run(check.args(["--", "-D", "warnings"]))?;
    let mut probe = cargo(root);
    probe.args(["test", "--test", "abi"]);
    aarch64(&mut probe);
    run(&mut probe)?;

    step(
        "x86_64-pc-windows-msvc: clippy of both crates (loaded, linked, no_std) and the mock-driver suites",
    );
    let windows = |cmd: &mut Command| {
        cmd.env("CUDA_SYS_INCLUDE", &include).args([
            "--target",
            "x86_64-pc-windows-msvc",
            "--target-dir",
            "target/windows",
        ]);
    };
    // Loaded (all targets, with NVRTC, which Windows has too), linked (all targets), and
    // no binding mode without std (lib).
    for variant in [
        &["--all-targets", "--features", "cudadrv/nvrtc"][..],
        &[
            "--all-targets",
            "--no-default-features",
            "--features",
            "linked,runtime,std",
        ][..],
        &["--lib", "--no-default-features"][..],
    ] {
        let mut check = cargo(root);
        check.args(["clippy", "-p", "cudadrv-sys", "-p", "cudadrv"]);
        check.args(variant);
        windows(&mut check);
        run(check.args(["--", "-D", "warnings"]))?;
    }
    let mut mocks = cargo(root);
    mocks.args(["clippy"]);
    for suite in crate::package::MOCK_SUITES {
        mocks.args(["--test", suite]);
    }
    windows(&mut mocks);
    run(mocks.args(["--", "-D", "warnings"]))?;

    step("nvptx64 docs of the device helpers (warnings are errors)");
    run(crate::ptx::toolchain_cargo(root, "nightly")
        .env("RUSTDOCFLAGS", "-D warnings")
        .args([
            "doc",
            "-p",
            CORE,
            "--no-deps",
            "--target",
            "nvptx64-nvidia-cuda",
            "-Zbuild-std=core",
            "--no-default-features",
            "--target-dir",
            "target/nvptx-doc",
        ]))?;

    step("packages: cargo package of both libraries, a fresh crate built offline against them");
    crate::package::run_package(root)?;

    step("MSRV: cuda-sys and cuda-core build with Rust 1.85 (their rust-version)");
    for features in [
        &[][..],
        &["--no-default-features", "--features", "loaded"][..],
    ] {
        run(crate::ptx::toolchain_cargo(root, "1.85")
            .args([
                "check",
                "-p",
                SYS,
                "-p",
                CORE,
                "--target-dir",
                "target/msrv",
            ])
            .args(features))?;
    }

    step("cargo doc (warnings are errors)");
    run(cargo(root).env("RUSTDOCFLAGS", "-D warnings").args([
        "doc",
        "--workspace",
        "--no-deps",
        "--document-private-items",
    ]))?;

    step("tests (host tests, mock driver, ABI probe, compile-fail doctests, hardware suites)");
    let nvrtc = toolkit::nvrtc_library(root, &tk)?;
    let totals = run_tests(root, &include, &nvrtc)?;

    step("Miri: cuda-sys and cuda-core unit tests and the mock-driver suites");
    for args in [
        &["-p", SYS, "--lib"][..],
        &["-p", CORE, "--lib"][..],
        &["-p", "cuda-workspace", "--test", "mock_driver"][..],
        &["-p", "cuda-workspace", "--test", "mock_contexts"][..],
        &["-p", "cuda-workspace", "--test", "mock_memory"][..],
        &["-p", "cuda-workspace", "--test", "mock_green"][..],
        &["-p", "cuda-workspace", "--test", "mock_kernels"][..],
        &["-p", "cuda-workspace", "--test", "mock_region"][..],
        &["-p", "cuda-workspace", "--test", "mock_async"][..],
        &["-p", "cuda-workspace", "--test", "mock_nccl"][..],
        &["-p", "cuda-workspace", "--test", "mock_nvrtc"][..],
        &["-p", "cuda-workspace", "--test", "mock_nvtx"][..],
    ] {
        run(crate::ptx::toolchain_cargo(root, "nightly")
            .env("CUDA_SYS_INCLUDE", &include)
            .args(["miri", "test", "--target-dir", "target/miri"])
            .args(args))?;
    }
    println!();
    match &totals.no_gpu {
        Some(why) => println!(
            "hardware tests SKIPPED on this machine: {why}\n  ({} hardware tests in {} suites; run `cargo xtask bundle` and its run.sh on a GPU host)",
            totals.skipped, totals.suites
        ),
        None => println!("hardware tests ran on a GPU ({} suites)", totals.suites),
    }
    println!(
        "xtask test finished in {:.0} s",
        start.elapsed().as_secs_f64()
    );
    println!(
        "hardware: {} passed, {} failed, {} skipped",
        totals.passed, totals.failed, totals.skipped
    );
    if totals.failed > 0 {
        return Err(format!("{} hardware tests failed", totals.failed).into());
    }
    Ok(())
}

/// `cargo test --workspace`, with NVRTC (`nvrtc`, the toolkit's or the wheel's) required
/// by the NVRTC tests, which compile on the CPU.
fn run_tests(root: &Path, include: &Path, nvrtc: &Path) -> R<HwTotals> {
    let mut cmd = cargo(root);
    cmd.env("CUDA_SYS_INCLUDE", include)
        .env("CUDA_SYS_LIBNVRTC", nvrtc)
        .env("CUDADRV_NVRTC_REQUIRED", "1")
        .args(["test", "--workspace", "--no-fail-fast", "--color", "never"])
        .stdout(Stdio::piped());
    let mut child = cmd.spawn().map_err(|e| format!("{cmd:?}: {e}"))?;
    let mut totals = HwTotals::default();
    if let Some(out) = child.stdout.take() {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            println!("{line}");
            totals.read_line(&line);
        }
    }
    let status = child.wait()?;
    if !status.success() {
        return Err(format!("cargo test failed: {status}").into());
    }
    if totals.suites == 0 {
        return Err("no hardware suite printed its summary line".into());
    }
    Ok(totals)
}

#[cfg(test)]
mod tests {
    use super::HwTotals;

    #[test]
    fn sums_suite_lines_and_ignores_others() {
        let mut t = HwTotals::default();
        t.read_line("hw_sys: no GPU (could not load libcuda): hardware tests will report SKIPPED");
        t.read_line("hw_sys: 0 passed, 0 failed, 3 skipped");
        t.read_line("hw_core: 10 passed, 1 failed, 2 skipped");
        t.read_line("test result: ok. 4 passed; 0 failed; 0 ignored");
        t.read_line("note: 1 passed, 2 failed, 3 skipped");
        assert_eq!((t.passed, t.failed, t.skipped, t.suites), (10, 1, 5, 2));
        assert!(t.no_gpu.as_deref().is_some_and(|w| w.contains("libcuda")));
    }
}
