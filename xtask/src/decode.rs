//! The decode example (`examples/decode`: `host/`, `kernels/`, `reference/`, each crate
//! its own workspace, like the kernel template): CI builds the host program (whose
//! build.rs compiles the kernels to PTX with the nightly toolchain), assembles that PTX
//! with ptxas for sm_90, runs the host crate's unit tests (shapes, the weight generator,
//! the arg-max and the cache indexing against the CPU reference on a tiny shape), and runs
//! the program, which without a GPU must say so and exit 0. The bundle carries the
//! program and `reference/reference.py`; `run.sh` runs them as `hw_decode` and as the
//! `decode` benchmark.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{R, run};

/// Where the example lives, and where its builds go.
fn dirs(root: &Path) -> (PathBuf, PathBuf) {
    (root.join("examples/decode"), root.join("target/decode"))
}

/// `cargo build --release` of the host program (stable toolchain; build.rs builds the
/// kernels with nightly, whose `rust-src` is installed first when missing); returns the
/// executable.
pub fn build_host(root: &Path) -> R<PathBuf> {
    crate::setup::nightly_rust_src()?;
    let (example, target) = dirs(root);
    run(crate::ptx::toolchain_cargo(&example.join("host"), "stable")
        .args(["build", "--release", "--target-dir"])
        .arg(&target))?;
    Ok(target.join("release/decode"))
}

/// The CI step: build, ptxas the PTX for sm_90, the host-side tests, the no-GPU run.
pub fn check(root: &Path, ptxas: &Path) -> R {
    let exe = build_host(root)?;
    let (example, target) = dirs(root);
    let out = Command::new(&exe).arg("--print-ptx").output()?;
    if !out.status.success() || !out.stdout.starts_with(b"//") {
        return Err(format!("{} --print-ptx failed ({})", exe.display(), out.status).into());
    }
    let ptx = target.join("decode.ptx");
    std::fs::write(&ptx, &out.stdout)?;
    let entries = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains(".entry"))
        .count();
    let assembled = Command::new(ptxas)
        .args(["-arch=sm_90", "-v"])
        .arg(&ptx)
        .arg("-o")
        .arg(target.join("decode.cubin"))
        .output()?;
    let log = String::from_utf8_lossy(&assembled.stderr);
    if !assembled.status.success() {
        return Err(format!("ptxas failed on the decode kernels:\n{log}").into());
    }
    // Arrays the kernels keep in registers must stay there: a spill or a large stack
    // frame is a slow kernel.
    if let Some(l) = log.lines().find(|l| {
        l.contains("bytes spill") && !l.contains(" 0 bytes spill stores, 0 bytes spill loads")
    }) {
        return Err(format!("ptxas: a decode kernel spills: {l}").into());
    }
    println!("  decode: {entries} kernels, PTX assembled for sm_90 without spills");
    run(crate::ptx::toolchain_cargo(&example.join("host"), "stable")
        .args(["test", "--release", "--target-dir"])
        .arg(&target))?;
    run(crate::ptx::toolchain_cargo(&example.join("host"), "stable")
        .args(["clippy", "--release", "--all-targets", "--target-dir"])
        .arg(&target)
        .args(["--", "-D", "warnings"]))?;
    // With a GPU the tiny shape is decoded and checked against the CPU reference.
    let out = Command::new(&exe)
        .args(["--shape", "tiny", "--check-cpu"])
        .output()?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    if !out.status.success()
        || !(last.starts_with("decode: no GPU, nothing was run: ")
            || last == "decode: all values checked")
    {
        return Err(format!(
            "{} --shape tiny --check-cpu failed or did not end with the no-GPU line or the \
             checked line ({}):\n{stdout}{}",
            exe.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    println!("  {last}");
    Ok(())
}
