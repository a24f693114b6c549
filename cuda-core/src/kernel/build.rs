//! [`PtxBuild`]: a `build.rs` helper that compiles a crate of kernels to PTX with the
//! nightly toolchain, for the host crate to embed (feature `std`).
//!
//! ```ignore
//! // host/build.rs
//! fn main() {
//!     let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").unwrap());
//!     if let Err(e) = cudadrv::kernel::build::PtxBuild::new("../kernels").build(&out.join("kernels.ptx")) {
//!         eprintln!("{e}");
//!         std::process::exit(1);
//!     }
//! }
//! ```
//!
//! What it runs: `rustup run nightly cargo rustc --lib --release --target
//! nvptx64-nvidia-cuda -Zbuild-std=core` in the kernels crate, with `-C target-cpu=sm_90
//! -C target-feature=+ptx80 -Z cross-crate-inline-threshold=always` (so cudadrv's device
//! helpers are compiled into the kernels crate) and `--emit=asm`, into a target directory
//! of its own under the output's directory. The host build itself stays on stable.

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::string::{String, ToString};
use std::vec::Vec;
use std::{env, format, fs};

/// Why a kernel build failed, with what to do about it.
#[derive(Debug)]
pub struct BuildError(String);

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BuildError {}

/// A crate of kernels to compile to PTX.
#[derive(Clone, Debug)]
pub struct PtxBuild {
    dir: PathBuf,
    toolchain: String,
    sm: String,
    ptx: String,
}

impl PtxBuild {
    /// The kernels crate in `dir` (relative paths are taken from the current directory,
    /// which in a build script is the host crate's directory), for sm_90 and PTX ISA 8.0
    /// with the `nightly` toolchain.
    #[must_use]
    pub fn new(dir: impl AsRef<Path>) -> Self {
        Self {
            dir: dir.as_ref().to_path_buf(),
            toolchain: "nightly".into(),
            sm: "sm_90".into(),
            ptx: "ptx80".into(),
        }
    }

    /// Another rustup toolchain (a dated nightly, `nightly-2026-05-19`).
    #[must_use]
    pub fn toolchain(mut self, name: &str) -> Self {
        self.toolchain = name.into();
        self
    }

    /// The target SM (`sm_90`) and PTX ISA feature (`ptx80`).
    #[must_use]
    pub fn target(mut self, sm: &str, ptx: &str) -> Self {
        self.sm = sm.into();
        self.ptx = ptx.into();
        self
    }

    /// Builds the PTX into `out` and, when run from a build script, tells cargo to rerun
    /// it when the kernels crate changes.
    ///
    /// # Errors
    /// [`BuildError`] saying what is missing (rustup, the nightly toolchain, its
    /// `rust-src` component) with the command that installs it, or the cargo failure;
    /// or when the PTX references a function outside itself (a dependency function
    /// that was not inlined).
    pub fn build(&self, out: &Path) -> Result<(), BuildError> {
        let dir = fs::canonicalize(&self.dir)
            .map_err(|e| BuildError(format!("kernels crate {}: {e}", self.dir.display())))?;
        self.check_toolchain()?;
        let target_dir = out
            .parent()
            .unwrap_or(Path::new("."))
            .join("kernels-target");
        // rustc writes the PTX here when it compiles the crate; when cargo finds the crate
        // fresh, the file from that compilation is still here.
        let asm = target_dir.join("kernels.s");
        self.compile(&dir, &target_dir, &asm)?;
        if !asm.exists() {
            // Fresh, but the PTX is gone: build again from scratch.
            let _ = fs::remove_dir_all(&target_dir);
            self.compile(&dir, &target_dir, &asm)?;
        }
        fs::copy(&asm, out).map_err(|e| {
            BuildError(format!(
                "the kernels build produced no PTX at {} ({e}); is the crate a library \
                 (`crate-type = [\"rlib\"]`)?",
                asm.display()
            ))
        })?;
        let text = fs::read_to_string(out)
            .map_err(|e| BuildError(format!("reading {}: {e}", out.display())))?;
        let externs: Vec<&str> = text
            .lines()
            .map(str::trim)
            .filter(|l| l.starts_with(".extern .func"))
            .collect();
        if !externs.is_empty() {
            return Err(BuildError(format!(
                "the PTX calls functions it does not define (not inlined; a panic path, \
                 or a dependency function): {}",
                externs.join("; ")
            )));
        }
        if env::var_os("OUT_DIR").is_some() {
            std::println!("cargo:rerun-if-changed={}", dir.join("src").display());
            std::println!(
                "cargo:rerun-if-changed={}",
                dir.join("Cargo.toml").display()
            );
        }
        Ok(())
    }

    /// `cargo rustc` of the kernels crate in `dir` for nvptx64, PTX to `asm`.
    fn compile(&self, dir: &Path, target_dir: &Path, asm: &Path) -> Result<(), BuildError> {
        let mut emit = OsString::from("--emit=asm=");
        emit.push(asm);
        let mut cmd = self.cargo(dir);
        cmd.args([
            "rustc",
            "--lib",
            "--release",
            "--target",
            "nvptx64-nvidia-cuda",
        ])
        .arg("-Zbuild-std=core")
        .arg("--target-dir")
        .arg(target_dir)
        .env(
            "CARGO_ENCODED_RUSTFLAGS",
            [
                format!("-Ctarget-cpu={}", self.sm),
                format!("-Ctarget-feature=+{}", self.ptx),
                "-Zcross-crate-inline-threshold=always".to_string(),
            ]
            .join("\x1f"),
        )
        .arg("--")
        .arg(emit);
        let status = cmd
            .status()
            .map_err(|e| BuildError(format!("running rustup: {e}")))?;
        if status.success() {
            Ok(())
        } else {
            Err(BuildError(format!(
                "building the kernels crate {} for nvptx64-nvidia-cuda failed ({status})",
                dir.display()
            )))
        }
    }

    /// Fails with the install command when rustup, the toolchain or `rust-src` is
    /// missing.
    fn check_toolchain(&self) -> Result<(), BuildError> {
        let tc = &self.toolchain;
        let sysroot = Command::new("rustup")
            .args(["run", tc, "rustc", "--print", "sysroot"])
            .env_remove("RUSTUP_TOOLCHAIN")
            .output()
            .map_err(|e| {
                BuildError(format!(
                    "rustup not found ({e}): kernels need a nightly toolchain through rustup \
                     (https://rustup.rs), then `rustup toolchain install {tc} --component rust-src`"
                ))
            })?;
        if !sysroot.status.success() {
            return Err(BuildError(format!(
                "the `{tc}` toolchain is not installed: `rustup toolchain install {tc} \
                 --component rust-src` (kernels need nightly for -Zbuild-std and abi_ptx)"
            )));
        }
        let root = String::from_utf8_lossy(&sysroot.stdout).trim().to_string();
        let core = Path::new(&root).join("lib/rustlib/src/rust/library/core");
        if !core.is_dir() {
            return Err(BuildError(format!(
                "the `{tc}` toolchain has no rust-src (needed by -Zbuild-std=core): \
                 `rustup component add rust-src --toolchain {tc}`"
            )));
        }
        Ok(())
    }

    /// `rustup run <toolchain> cargo` in `dir`, without the environment the outer cargo
    /// set for this build script (which would pin the stable toolchain and its flags).
    fn cargo(&self, dir: &Path) -> Command {
        let mut cmd = Command::new("rustup");
        cmd.args(["run", &self.toolchain, "cargo"]).current_dir(dir);
        for (key, _) in env::vars_os() {
            let Some(key) = key.to_str() else { continue };
            let inherited = (key.starts_with("CARGO_") && key != "CARGO_HOME")
                || key.starts_with("RUSTC")
                || matches!(
                    key,
                    "CARGO"
                        | "RUSTUP_TOOLCHAIN"
                        | "RUSTFLAGS"
                        | "RUSTDOC"
                        | "RUSTDOCFLAGS"
                        | "TARGET"
                        | "HOST"
                        | "OUT_DIR"
                        | "OPT_LEVEL"
                        | "PROFILE"
                        | "DEBUG"
                        | "NUM_JOBS"
                );
            if inherited {
                cmd.env_remove(key);
            }
        }
        cmd
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(miri, ignore = "runs rustup")]
    fn a_missing_toolchain_names_the_install_command() {
        let dir = env::temp_dir();
        let out = dir.join("cudadrv-ptxbuild-test.ptx");
        let err = PtxBuild::new(&dir)
            .toolchain("nightly-1999-01-01")
            .build(&out)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        // Without rustup the message says so; with it, the toolchain is not installed.
        // Either way it names the command that installs what is missing.
        assert!(
            err.contains("rustup toolchain install nightly-1999-01-01"),
            "{err}"
        );
    }

    #[test]
    #[cfg_attr(miri, ignore = "touches the file system")]
    fn a_missing_crate_is_named() {
        let err = PtxBuild::new("/nonexistent/kernels")
            .build(Path::new("/nonexistent/out.ptx"))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            err.starts_with("kernels crate /nonexistent/kernels:"),
            "{err}"
        );
    }
}
