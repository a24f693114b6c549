//! The user kernel-crate template (`examples/kernel-template`: `host/` and `kernels/`,
//! each its own workspace): CI builds the host program (whose build.rs compiles the
//! kernels to PTX with the nightly toolchain), assembles that PTX with ptxas for sm_90,
//! runs the program (on a machine without a GPU it must say so and exit 0, as every
//! example does; on a GPU it checks its kernels' values), and checks that a `safe`
//! kernel body using `unsafe` (the first kernel, `saxpy`) does not build for the device.
//! The bundle carries the host program; `run.sh` runs it on the GPU as `hw_template`.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{R, run};

/// Where the template lives, and where its builds go.
fn dirs(root: &Path) -> (PathBuf, PathBuf) {
    (
        root.join("examples/kernel-template"),
        root.join("target/kernel-template"),
    )
}

/// `cargo build --release` of the template's host program from its own directory (stable
/// toolchain; build.rs runs the nightly kernel build, so nightly `rust-src` is installed
/// first when missing); returns the executable.
pub fn build_host(root: &Path) -> R<PathBuf> {
    crate::setup::nightly_rust_src()?;
    let (template, target) = dirs(root);
    run(
        crate::ptx::toolchain_cargo(&template.join("host"), "stable")
            .args(["build", "--release", "--target-dir"])
            .arg(&target),
    )?;
    Ok(target.join("release/template-host"))
}

/// `cargo xtask template`: [`check`] with the toolkit's ptxas.
pub fn build_and_check(root: &Path) -> R {
    let tk = crate::toolkit::locate(root)?;
    let ptxas = tk
        .ptxas()
        .ok_or("ptxas not found in the CUDA toolkit or wheels")?;
    check(root, &ptxas)
}

/// The CI step: build, ptxas the embedded PTX for sm_90, and the device-side
/// compile-fail check of the `safe` form.
pub fn check(root: &Path, ptxas: &Path) -> R {
    let exe = build_host(root)?;
    let (template, target) = dirs(root);
    let out = Command::new(&exe).arg("--print-ptx").output()?;
    if !out.status.success() || !out.stdout.starts_with(b"//") {
        return Err(format!("{} --print-ptx failed ({})", exe.display(), out.status).into());
    }
    let ptx = target.join("template.ptx");
    std::fs::write(&ptx, &out.stdout)?;
    let entries = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains(".entry"))
        .count();
    run(Command::new(ptxas)
        .arg("-arch=sm_90")
        .arg(&ptx)
        .arg("-o")
        .arg(target.join("template.cubin")))?;
    println!("  template: {entries} kernels, PTX assembled for sm_90");

    // The program itself: with a GPU it launches every kernel and checks the values;
    // without one it prints the no-GPU line and succeeds.
    let out = Command::new(&exe).output()?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "{} failed ({}):\n{stdout}{}",
            exe.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    let last = stdout.lines().last().unwrap_or_default();
    if !last.starts_with("template: no GPU, nothing was run: ")
        && last != "template: all values checked"
    {
        return Err(format!(
            "{} succeeded but did not end with the no-GPU line or the checked line:\n{stdout}",
            exe.display()
        )
        .into());
    }
    println!("  {last}");

    // A copy of the kernels crate whose safe `saxpy` dereferences a raw pointer.
    let neg = target.join("unsafe-in-safe");
    let _ = std::fs::remove_dir_all(&neg);
    std::fs::create_dir_all(neg.join("src"))?;
    let core = root.join("cuda-core");
    let manifest = std::fs::read_to_string(template.join("kernels/Cargo.toml"))?
        .replace("../../../cuda-core", &core.display().to_string());
    std::fs::write(neg.join("Cargo.toml"), manifest)?;
    let anchor = "            y.write(i, a * xi + yi);\n";
    let src = std::fs::read_to_string(template.join("kernels/src/lib.rs"))?;
    if src.matches(anchor).count() != 1 {
        return Err(format!(
            "kernel-template: `saxpy`'s line {:?} is not in kernels/src/lib.rs once",
            anchor.trim()
        )
        .into());
    }
    let src = src.replacen(
        anchor,
        "            unsafe { *y.as_ptr().add(1 << 30) = 1.0 };\n            y.write(i, a * xi + yi);\n",
        1,
    );
    std::fs::write(neg.join("src/lib.rs"), src)?;
    let mut emit = std::ffi::OsString::from("--emit=asm=");
    emit.push(neg.join("out.s"));
    let out = crate::ptx::toolchain_cargo(&neg, "nightly")
        .env(
            "CARGO_ENCODED_RUSTFLAGS",
            "-Ctarget-cpu=sm_90\x1f-Ctarget-feature=+ptx80",
        )
        .args([
            "rustc",
            "--lib",
            "--release",
            "--target",
            "nvptx64-nvidia-cuda",
        ])
        .arg("-Zbuild-std=core")
        .arg("--target-dir")
        .arg(target.join("unsafe-in-safe-target"))
        .arg("--")
        .arg(emit)
        .output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.status.success() || !stderr.contains("usage of an `unsafe` block") {
        return Err(format!(
            "kernel-template: a `safe` kernel with an `unsafe` block must not build for the \
             device (status {}):\n{stderr}",
            out.status
        )
        .into());
    }
    println!("  template: an `unsafe` block in a `safe` kernel is refused by the device build");
    Ok(())
}
