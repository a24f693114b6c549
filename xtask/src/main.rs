//! `cargo xtask`: bindings, PTX, tests, GPU bundle and benchmarks for this workspace.

mod bindgen;
mod toolkit;

use std::path::{Path, PathBuf};
use std::process::Command;

/// Result type of every xtask step.
pub type R<T = ()> = Result<T, Box<dyn std::error::Error>>;

const USAGE: &str = "usage: cargo xtask <command>

commands:
  bindgen [--check]   regenerate cuda-sys/src/generated (or fail if stale)
";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let root = workspace_root();
    let result = match args.first().map(String::as_str) {
        Some("bindgen") => bindgen::run(&root, args.iter().any(|a| a == "--check")),
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
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().map(Path::to_path_buf).unwrap_or_default()
}

/// Prints a progress line for a long step.
pub fn step(msg: &str) {
    println!("==> {msg}");
}

/// Runs a command, failing with its command line when it does not succeed.
pub fn run(cmd: &mut Command) -> R {
    let status = cmd.status().map_err(|e| format!("{cmd:?}: {e}"))?;
    if status.success() { Ok(()) } else { Err(format!("{cmd:?} failed: {status}").into()) }
}
