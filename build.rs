//! Root package build script: the C ABI probe for tests/abi.rs.
//!
//! tests/abi/layout.txt lists structs and fields. From it this script writes a C file
//! (sizes, alignments and offsets as the C compiler sees them, compiled with `cc`
//! against the CUDA headers) and a Rust file (the same expressions over cuda-sys types).
//! Headers: `$CUDA_SYS_INCLUDE`, `$CUDA_PATH/include`, `$CUDA_HOME/include`,
//! `/usr/local/cuda/include`, or the wheels xtask installs under `.cuda/`. Without
//! headers the probe is not built and the ABI test says it was skipped and why.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rustc-check-cfg=cfg(abi_probe)");
    println!("cargo:rerun-if-changed=tests/abi/layout.txt");
    for var in ["CUDA_SYS_INCLUDE", "CUDA_PATH", "CUDA_HOME"] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default());
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap_or_default());
    let list = std::fs::read_to_string(root.join("tests/abi/layout.txt")).unwrap_or_default();
    let Some(include) = find_headers(&root) else {
        println!(
            "cargo:warning=no CUDA headers found: the C ABI probe is not built (run `cargo xtask test`)"
        );
        return;
    };
    println!(
        "cargo:rerun-if-changed={}",
        include.join("cuda.h").display()
    );

    let mut c = String::from(
        "#include <stddef.h>\n#include <cuda.h>\n#include <cuda_runtime_api.h>\n\
         struct probe { const char *name; unsigned long value; };\n\
         const struct probe cuda_abi_probe[] = {\n",
    );
    let mut rs = String::from(
        "/// (check, value) pairs as Rust lays the cuda-sys types out.\npub const RUST_LAYOUT: &[(&str, usize)] = &[\n",
    );
    let mut count = 0usize;
    for line in list
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        let Some((ty, fields)) = line.split_once(':') else {
            continue;
        };
        let ty = ty.trim();
        let _ = writeln!(
            c,
            "  {{\"size {ty}\", sizeof({ty})}},\n  {{\"align {ty}\", _Alignof({ty})}},"
        );
        let _ = writeln!(
            rs,
            "    (\"size {ty}\", core::mem::size_of::<cuda_sys::{ty}>()),\n    (\"align {ty}\", core::mem::align_of::<cuda_sys::{ty}>()),"
        );
        count += 2;
        for f in fields.split_whitespace() {
            let (f, rust_f) = match f.split_once('=') {
                Some((c_name, rust_path)) => (c_name, rust_path),
                None => (
                    f,
                    match f {
                        "type" => "type_",
                        "fn" => "fn_",
                        other => other,
                    },
                ),
            };
            let _ = writeln!(c, "  {{\"offset {ty}.{f}\", offsetof({ty}, {f})}},");
            let _ = writeln!(
                rs,
                "    (\"offset {ty}.{f}\", core::mem::offset_of!(cuda_sys::{ty}, {rust_f})),"
            );
            count += 1;
        }
    }
    let _ = writeln!(c, "}};\nconst unsigned long cuda_abi_probe_len = {count};");
    rs.push_str("];\n");
    let c_path = out.join("abi_probe.c");
    if std::fs::write(&c_path, c).is_err() || std::fs::write(out.join("abi_layout.rs"), rs).is_err()
    {
        println!("cargo:warning=could not write the ABI probe sources");
        return;
    }
    match cc::Build::new()
        .file(&c_path)
        .include(&include)
        .warnings(false)
        .try_compile("cuda_abi_probe")
    {
        Ok(()) => println!("cargo:rustc-cfg=abi_probe"),
        Err(e) => println!("cargo:warning=the C ABI probe did not compile: {e}"),
    }
}

fn find_headers(root: &Path) -> Option<PathBuf> {
    let env = |v: &str| std::env::var_os(v).map(PathBuf::from);
    let candidates = [
        env("CUDA_SYS_INCLUDE"),
        env("CUDA_PATH").map(|p| p.join("include")),
        env("CUDA_HOME").map(|p| p.join("include")),
        Some(PathBuf::from("/usr/local/cuda/include")),
        Some(root.join(".cuda/nvidia/cu13/include")),
    ];
    candidates
        .into_iter()
        .flatten()
        .find(|p| p.join("cuda.h").exists())
}
