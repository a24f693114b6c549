//! `cargo xtask driver-abi [--check]`: the driver ABI symbol sets of CUDA 12.0, 12.2,
//! 12.4, 12.8, 13.0, 13.1 and 13.5, for the mock drivers of `tests/driver_versions.rs`.
//!
//! A driver's `cuGetProcAddress` serves, for each function, the ABI versions its
//! `cudaTypedefs.h` declares as `PFN_<name>_v<abi>` typedefs. The 12.x headers come from
//! the PyPI wheels `nvidia-cuda-runtime-cu12==<version>` (installed with pip into
//! `.cuda/cu12/<version>/`), the 13.0 headers from the build toolkit, 13.1 and 13.5 from
//! the header wheels (13.5 is the set the bindings are generated from). Each set is written to `tests/driver_abi/<major>.<minor>.txt`, one function a
//! line with every ABI version its header declares. Parsing is textual: no libclang.
//!
//! The step also checks that each older-ABI entry of the driver table
//! ([`crate::bindgen::OLDER_ABIS`]) names an ABI and a symbol that
//! the headers declare.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::{R, bindgen, step, toolkit};

/// The CUDA 12 runtime wheels whose headers give the 12.x symbol sets.
pub const CU12_WHEELS: &[&str] = &["12.0.107", "12.2.140", "12.4.127", "12.8.90"];

/// The 13.1 header wheels (the release that introduced the guide's green-context API).
const CU13_1: toolkit::HeaderWheels = toolkit::HeaderWheels {
    release: std::borrow::Cow::Borrowed("13.1.80"),
    runtime: std::borrow::Cow::Borrowed("nvidia-cuda-runtime==13.1.80"),
    crt: std::borrow::Cow::Borrowed("nvidia-cuda-crt==13.1.80"),
};

const OUT_DIR: &str = "tests/driver_abi";

/// Writes (or with `check`, compares) `tests/driver_abi/*.txt`.
pub fn run(root: &Path, check: bool) -> R {
    let mut headers = Vec::new();
    for version in CU12_WHEELS {
        headers.push((
            format!("nvidia-cuda-runtime-cu12=={version}"),
            cu12(root, version)?,
        ));
    }
    let tk = toolkit::locate(root)?;
    headers.push(("the CUDA 13.0 headers".to_string(), tk.include.clone()));
    for wheels in [CU13_1, toolkit::HEADERS] {
        let include = toolkit::headers(root, &wheels)?.remove(0);
        headers.push((wheels.runtime.to_string(), include));
    }

    let mut files = Vec::new();
    let mut declared = String::new();
    let mut sets = Vec::new();
    for (source, include) in &headers {
        let cuda_h = read(&include.join("cuda.h"))?;
        let typedefs = read(&include.join("cudaTypedefs.h"))?;
        let version: u32 = define(&cuda_h, "CUDA_VERSION")
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("no CUDA_VERSION in {}", include.join("cuda.h").display()))?;
        if source.contains("13.0") && version != 13000 {
            return Err(
                format!("expected the CUDA 13.0 headers, found CUDA_VERSION {version}").into(),
            );
        }
        let set = symbol_set(&typedefs);
        let name = format!("{}.{}.txt", version / 1000, version % 1000 / 10);
        files.push((name, render(source, version, &set)));
        declared.push_str(&cuda_h);
        sets.push(set);
    }
    check_older_abis(&sets, &declared)?;

    toolkit::write_or_check(
        &root.join(OUT_DIR),
        &files,
        check,
        "driver ABI sets",
        "cargo xtask driver-abi",
    )
}

fn read(path: &Path) -> R<String> {
    std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()).into())
}

/// Installs (once) `nvidia-cuda-runtime-cu12==<version>` into `.cuda/cu12/<version>` and
/// returns its include directory.
fn cu12(root: &Path, version: &str) -> R<PathBuf> {
    let dir = root.join(".cuda/cu12").join(version);
    let include = dir.join("nvidia/cuda_runtime/include");
    let wheel = format!("nvidia-cuda-runtime-cu12=={version}");
    let stamp = dir.join(".installed");
    if std::fs::read_to_string(&stamp).ok().as_deref() != Some(wheel.as_str())
        || !include.join("cudaTypedefs.h").exists()
    {
        step(&format!("fetching {wheel} into {}", dir.display()));
        toolkit::pip_install(&dir, &[wheel.as_str()])?;
        std::fs::write(&stamp, &wheel)?;
    }
    if !include.join("cudaTypedefs.h").exists() {
        return Err(format!("{wheel} installed but has no include/cudaTypedefs.h").into());
    }
    Ok(include)
}

/// `#define NAME value`.
fn define<'a>(header: &'a str, name: &str) -> Option<&'a str> {
    header.lines().find_map(|l| {
        let mut w = l.split_whitespace();
        (w.next() == Some("#define") && w.next() == Some(name))
            .then(|| w.next())
            .flatten()
    })
}

/// Function name -> the ABI versions of its `PFN_<name>_v<abi>` typedefs (the
/// per-thread-default-stream `_ptds`/`_ptsz` typedefs are left out: the mock drivers
/// serve the default-stream ABIs).
pub fn symbol_set(typedefs: &str) -> BTreeMap<String, BTreeSet<u32>> {
    let mut out: BTreeMap<String, BTreeSet<u32>> = BTreeMap::new();
    for line in typedefs.lines() {
        let line = line.trim_start();
        // `#define PFN_<name> PFN_<name>_v<abi>` and
        // `#define PFN_<name> __API_TYPEDEF_PTSZ(PFN_<name>, <abi>, <abi>)` name the ABI of
        // an unversioned typedef (some 12.x headers declare only those).
        if let Some(rest) = line.strip_prefix("#define PFN_") {
            let mut words = rest.split_whitespace();
            let (Some(name), Some(value)) = (words.next(), words.next()) else {
                continue;
            };
            let abi = if let Some(v) = value.strip_prefix(&format!("PFN_{name}_v")) {
                v.parse::<u32>().ok()
            } else if value.starts_with("__API_TYPEDEF_PT") {
                words
                    .next()
                    .and_then(|w| w.trim_end_matches(',').parse::<u32>().ok())
            } else {
                None
            };
            if let Some(abi) = abi.filter(|_| !name.contains("_v")) {
                out.entry(name.to_string()).or_default().insert(abi);
            }
            continue;
        }
        if !line.starts_with("typedef") {
            continue;
        }
        let Some(at) = line.find("*PFN_") else {
            continue;
        };
        let ident: String = line[at + 5..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if ident.ends_with("_ptds") || ident.ends_with("_ptsz") {
            continue;
        }
        let Some((name, abi)) = ident.rsplit_once("_v") else {
            continue;
        };
        let Ok(abi) = abi.parse::<u32>() else {
            continue;
        };
        out.entry(name.to_string()).or_default().insert(abi);
    }
    out
}

fn render(source: &str, version: u32, set: &BTreeMap<String, BTreeSet<u32>>) -> String {
    let mut text = format!(
        "# Generated by `cargo xtask driver-abi` from cudaTypedefs.h of {source}; do not edit.\n\
         # The ABI versions a CUDA {}.{} driver's cuGetProcAddress serves, per function.\n\
         # driver {version}\n",
        version / 1000,
        version % 1000 / 10
    );
    for (name, abis) in set {
        let abis: Vec<String> = abis.iter().map(u32::to_string).collect();
        text.push_str(&format!("{name} {}\n", abis.join(" ")));
    }
    text
}

/// Each older-ABI table entry names an ABI some header declares a PFN typedef for, and a
/// symbol some `cuda.h` declares.
fn check_older_abis(sets: &[BTreeMap<String, BTreeSet<u32>>], cuda_h: &str) -> R {
    for &(name, abi, symbol) in bindgen::OLDER_ABIS {
        if !sets
            .iter()
            .any(|s| s.get(name).is_some_and(|a| a.contains(&abi)))
        {
            return Err(format!("OLDER_ABIS: no header declares PFN_{name}_v{abi}").into());
        }
        if !cuda_h.contains(&format!("CUDAAPI {symbol}(")) {
            return Err(
                format!("OLDER_ABIS: no cuda.h declares {symbol} (for {name} ABI {abi})").into(),
            );
        }
    }
    Ok(())
}
