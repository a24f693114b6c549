//! Link search paths for the `linked` feature (the loaded mode links nothing).
//!
//! `-lcuda` and `-lcudart` come from `#[link]` attributes in the generated tables; this
//! script only says where to look: `$CUDA_SYS_LIB_DIR` (`:`-separated), then `lib64`
//! and `lib64/stubs` under `$CUDA_PATH`, `$CUDA_HOME` and `/usr/local/cuda`.

use std::path::PathBuf;

fn main() {
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
