//! Link search paths for the `linked` feature (the loaded mode links nothing), and the
//! `cudadrv_headers_13` cfg when the generated bindings are of CUDA 13.x headers (the
//! static layout checks of `src/abi.rs` are the 13.x layouts cudadrv builds; a copy
//! regenerated from 12.x headers is checked by bindgen's own layout tests alone).
//!
//! `-lcuda` and `-lcudart` come from `#[link]` attributes in the generated tables; this
//! script only says where to look: `$CUDA_SYS_LIB_DIR` (`:`-separated), then `lib64`
//! and `lib64/stubs` under `$CUDA_PATH`, `$CUDA_HOME` and `/usr/local/cuda`.

use std::path::PathBuf;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(cudadrv_headers_13)");
    println!("cargo:rerun-if-changed=src/generated/types.rs");
    let types = std::fs::read_to_string("src/generated/types.rs").unwrap_or_default();
    let version = types.lines().find_map(|l| {
        l.strip_prefix("pub const CUDA_VERSION: u32 = ")
            .and_then(|v| v.trim_end_matches(';').parse::<u32>().ok())
    });
    if version.is_some_and(|v| v >= 13000) {
        println!("cargo::rustc-cfg=cudadrv_headers_13");
    }
    println!("cargo:rerun-if-env-changed=CUDA_SYS_LIB_DIR");
    println!("cargo:rerun-if-env-changed=CUDA_PATH");
    println!("cargo:rerun-if-env-changed=CUDA_HOME");
    if std::env::var_os("CARGO_FEATURE_LINKED").is_none() {
        return;
    }
    let mut dirs: Vec<PathBuf> = std::env::var_os("CUDA_SYS_LIB_DIR")
        .map(|v| std::env::split_paths(&v).collect())
        .unwrap_or_default();
    for root in ["CUDA_PATH", "CUDA_HOME"]
        .iter()
        .filter_map(|v| std::env::var_os(v).map(PathBuf::from))
        .chain([PathBuf::from("/usr/local/cuda")])
    {
        dirs.push(root.join("lib64"));
        dirs.push(root.join("lib64/stubs"));
    }
    for dir in dirs.iter().filter(|d| d.is_dir()) {
        println!("cargo:rustc-link-search=native={}", dir.display());
    }
}
