//! What the commands need from rustup, in parts that each command calls for itself, so
//! that every `cargo xtask` command works on a fresh machine (with rustup), not only
//! after `cargo xtask test` has installed everything.
//!
//! Each part asks rustup what is installed first (`rustup run`, `component list
//! --installed`, `target list --installed`: local queries, no network) and installs only
//! what is missing, so a second call costs a few milliseconds. An installed toolchain is
//! never updated: the committed PTX is the output of the nightly that is there.
//!
//! | command | needs |
//! |---|---|
//! | `test` | all of the below, Miri, rustfmt and clippy, the MSRV toolchain and the cross targets |
//! | `ptx` | [`nightly_rust_src`] |
//! | `template` | [`nightly_rust_src`] (the host's build.rs builds the kernels), the CUDA wheels for ptxas ([`crate::toolkit::locate`]) |
//! | `bundle` | [`nightly_rust_src`] (the template's host program), the CUDA wheels (headers, libcudart) |
//! | `embedded` | [`targets`] `aarch64-unknown-none` |
//! | `bindgen`, `bindgen-release-check`, `driver-abi` | libclang and the header wheels ([`crate::toolkit`]) |
//! | `package`, `bench`, `build-time`, `build-cost`, `timeline` | the stable toolchain running xtask, nothing more |

use std::process::Command;

use crate::{R, run, step};

/// The nightly toolchain that device builds use (`rustup run nightly`, `-Zbuild-std=core`)
/// with its `rust-src` component.
pub fn nightly_rust_src() -> R {
    toolchain("nightly")?;
    component("nightly", "rust-src")
}

/// Miri on the nightly toolchain (the CPU suites run under it in `test`).
pub fn nightly_miri() -> R {
    toolchain("nightly")?;
    component("nightly", "miri")
}

/// rustfmt and clippy for the toolchain running xtask.
pub fn fmt_and_clippy() -> R {
    let works = |sub: &str| {
        Command::new("cargo")
            .args([sub, "--version"])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if works("fmt") && works("clippy") {
        return Ok(());
    }
    step("installing rustfmt and clippy");
    run(Command::new("rustup").args(["component", "add", "rustfmt", "clippy"]))
}

/// The toolchain `name` (`nightly`, `1.85`), installed with the minimal profile when
/// `rustup run <name> rustc --version` fails.
pub fn toolchain(name: &str) -> R {
    let present = Command::new("rustup")
        .args(["run", name, "rustc", "--version"])
        .output()
        .map_err(|e| format!("running rustup (needed for the {name} toolchain): {e}"))?
        .status
        .success();
    if present {
        return Ok(());
    }
    step(&format!(
        "installing the {name} toolchain (rustup, minimal profile)"
    ));
    run(Command::new("rustup").args(["toolchain", "install", name, "--profile", "minimal"]))
}

/// `rustup component add <name> --toolchain <toolchain>` unless it is installed.
fn component(toolchain: &str, name: &str) -> R {
    let out = Command::new("rustup")
        .args(["component", "list", "--installed", "--toolchain", toolchain])
        .output()
        .map_err(|e| format!("running rustup: {e}"))?;
    // Installed components are listed as `rust-src` or `miri-x86_64-unknown-linux-gnu`.
    let listed = String::from_utf8_lossy(&out.stdout)
        .lines()
        .any(|l| l.trim() == name || l.trim().starts_with(&format!("{name}-")));
    if out.status.success() && listed {
        return Ok(());
    }
    step(&format!("installing {name} for the {toolchain} toolchain"));
    run(Command::new("rustup").args(["component", "add", name, "--toolchain", toolchain]))
}

/// `rustup target add` of those of `targets` the toolchain running xtask lacks.
pub fn targets(targets: &[&str]) -> R {
    let out = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output()
        .map_err(|e| format!("running rustup: {e}"))?;
    let installed = String::from_utf8_lossy(&out.stdout).into_owned();
    let missing: Vec<&str> = targets
        .iter()
        .copied()
        .filter(|t| !out.status.success() || !installed.lines().any(|l| l.trim() == *t))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    step(&format!("adding the targets {}", missing.join(", ")));
    run(Command::new("rustup")
        .args(["target", "add"])
        .args(&missing))
}
