//! `cargo xtask package`: packages `cudadrv-sys` and `cudadrv` the way `cargo publish`
//! would, then builds a fresh crate against the packaged sources, offline, with no CUDA
//! and no libclang.
//!
//! 1. `cargo package -p cudadrv-sys -p cudadrv --allow-dirty`: cargo packages both and
//!    verifies each `.crate` by building it on its own; `cudadrv`'s dependency on
//!    `cudadrv-sys` resolves to the `.crate` just packaged (a temporary local registry),
//!    never to crates.io.
//! 2. Both `.crate` files are unpacked into `target/package-check/crates/`.
//! 3. A crate written here (`target/package-check/smoke/`) depends on the unpacked
//!    `cudadrv` by path, with `[patch.crates-io]` pointing `cudadrv-sys` at the unpacked
//!    one, and uses the public API. `cargo tree` shows that nothing in its graph runs
//!    bindgen (libclang); `cargo build --offline` builds it with the default features and
//!    with `--no-default-features --features loaded` (the `no_std`, no-heap library from
//!    a `std` binary), and runs it: without a driver `init()` reports an error, it does
//!    not panic. `cargo check --offline --no-default-features --features linked` covers
//!    the linked mode (linking needs libcuda, so it is not linked here).
//! 4. The mock-driver suites of `tests/` (`MOCK_SUITES`) are copied into the fresh crate
//!    and run with `cargo test --offline` against the unpacked crates: the packaged
//!    files pass the same tests as the workspace.
//!
//! Every step runs with `CUDA_PATH`, `CUDA_HOME`, `CUDA_SYS_INCLUDE`, `CUDA_SYS_LIB_DIR`
//! and `LIBCLANG_PATH` removed from the environment: the packaged crates carry their
//! generated bindings, and cudadrv-sys's build script only prints link-search paths.
//! Set `CARGO_NET_OFFLINE=true` to keep the `cargo package` step off the network too (its
//! dependencies must then be in cargo's cache).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{R, cargo, run, step};

/// The published package names.
const SYS: &str = "cudadrv-sys";
const CORE: &str = "cudadrv";

/// Variables that would let a build find CUDA or libclang.
const CLEARED_ENV: &[&str] = &[
    "CUDA_PATH",
    "CUDA_HOME",
    "CUDA_SYS_INCLUDE",
    "CUDA_SYS_LIB_DIR",
    "LIBCLANG_PATH",
];

/// The mock-driver suites of tests/ that run against the packaged crates.
pub(crate) const MOCK_SUITES: &[&str] = &[
    "mock_driver",
    "mock_contexts",
    "mock_memory",
    "mock_green",
    "mock_kernels",
    "mock_region",
    "mock_async",
];

/// Dependencies that would mean a build needs libclang or the CUDA headers.
const FORBIDDEN_DEPS: &[&str] = &["bindgen", "clang-sys"];

/// `cargo xtask package`.
pub fn run_package(root: &Path) -> R {
    let check_dir = root.join("target/package-check");
    let target_dir = check_dir.join("target");
    let package_dir = target_dir.join("package");

    // Stale `.crate` files of another version would be picked up below.
    if let Ok(entries) = fs::read_dir(&package_dir) {
        for entry in entries.flatten() {
            if entry.path().extension().is_some_and(|e| e == "crate") {
                fs::remove_file(entry.path())?;
            }
        }
    }

    step(&format!(
        "cargo package -p {SYS} -p {CORE} --allow-dirty (each .crate verified alone)"
    ));
    run(clean_env(cargo(root))
        .args(["package", "-p", SYS, "-p", CORE, "--allow-dirty"])
        .arg("--target-dir")
        .arg(&target_dir))?;

    step("unpacking the .crate files into target/package-check/crates");
    let crates_dir = check_dir.join("crates");
    if crates_dir.exists() {
        fs::remove_dir_all(&crates_dir)?;
    }
    fs::create_dir_all(&crates_dir)?;
    let sys_dir = unpack(&package_dir, SYS, &crates_dir)?;
    let core_dir = unpack(&package_dir, CORE, &crates_dir)?;
    for dir in [&sys_dir, &core_dir] {
        let manifest = fs::read_to_string(dir.join("Cargo.toml"))?;
        if manifest.contains("build-dependencies") {
            return Err(format!(
                "{}: the packaged manifest has build-dependencies",
                dir.display()
            )
            .into());
        }
    }

    step("a fresh crate against the unpacked sources (target/package-check/smoke)");
    let smoke = check_dir.join("smoke");
    if smoke.exists() {
        fs::remove_dir_all(&smoke)?;
    }
    fs::create_dir_all(smoke.join("src"))?;
    fs::write(
        smoke.join("Cargo.toml"),
        smoke_manifest(&core_dir, &sys_dir),
    )?;
    fs::write(smoke.join("src/main.rs"), SMOKE_MAIN)?;
    // The mock-driver suites, as a vendoring user would run them against the packaged
    // sources, in a crate of their own (they name the crates `cudadrv` and `cudadrv_sys`,
    // as this workspace does).
    let mocks = check_dir.join("mocks");
    if mocks.exists() {
        fs::remove_dir_all(&mocks)?;
    }
    fs::create_dir_all(mocks.join("tests"))?;
    fs::create_dir_all(mocks.join("src"))?;
    // Their library: the mock-driver builder of tests/support, under the name the
    // suites use (`cuda_workspace::mock`).
    fs::write(
        mocks.join("src/lib.rs"),
        "//! Written by `cargo xtask package`.\npub mod mock;\n",
    )?;
    fs::copy(
        root.join("tests/support/mock.rs"),
        mocks.join("src/mock.rs"),
    )?;
    fs::write(
        mocks.join("Cargo.toml"),
        mocks_manifest(&core_dir, &sys_dir),
    )?;
    for suite in MOCK_SUITES {
        fs::copy(
            root.join("tests").join(format!("{suite}.rs")),
            mocks.join("tests").join(format!("{suite}.rs")),
        )?;
    }
    // The single-context mock drivers they share.
    fs::create_dir_all(mocks.join("tests/mock_common"))?;
    fs::copy(
        root.join("tests/mock_common/mod.rs"),
        mocks.join("tests/mock_common/mod.rs"),
    )?;

    let tree = clean_env(cargo(&smoke))
        .args([
            "tree",
            "--offline",
            "--prefix",
            "none",
            "-e",
            "normal,build",
        ])
        .output()
        .map_err(|e| format!("cargo tree: {e}"))?;
    let tree_text = String::from_utf8_lossy(&tree.stdout);
    if !tree.status.success() {
        return Err(format!(
            "cargo tree in {} failed:\n{}",
            smoke.display(),
            String::from_utf8_lossy(&tree.stderr)
        )
        .into());
    }
    let packages: Vec<&str> = tree_text
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    if let Some(bad) = FORBIDDEN_DEPS.iter().find(|d| packages.contains(d)) {
        return Err(format!("the package graph contains {bad}:\n{tree_text}").into());
    }
    for name in [SYS, CORE] {
        let line = tree_text
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .ok_or_else(|| format!("{name} is not in the smoke crate's graph:\n{tree_text}"))?;
        if !line.contains("package-check/crates") {
            return Err(format!("{name} does not come from the unpacked .crate: {line}").into());
        }
    }

    for features in [
        &[][..],
        &["--no-default-features", "--features", "loaded"][..],
    ] {
        let label = if features.is_empty() {
            "default features".to_owned()
        } else {
            features.join(" ")
        };
        step(&format!(
            "cargo build --offline ({label}), no CUDA, no libclang"
        ));
        run(clean_env(cargo(&smoke))
            .args(["build", "--offline"])
            .args(features))?;
        run(clean_env(cargo(&smoke))
            .args(["run", "--offline", "--quiet"])
            .args(features))?;
    }
    step(&format!(
        "the mock-driver suites against the .crate files, offline: {}",
        MOCK_SUITES.join(", ")
    ));
    run(clean_env(cargo(&mocks)).args(["test", "--offline", "--tests", "--quiet"]))?;
    step("cargo check --offline --no-default-features --features linked");
    run(clean_env(cargo(&smoke)).args([
        "check",
        "--offline",
        "--no-default-features",
        "--features",
        "linked",
    ]))?;

    println!(
        "package check passed: {} and {} build from their .crate files offline, without CUDA or libclang, and pass the mock-driver suites",
        file_name(&sys_dir),
        file_name(&core_dir)
    );
    Ok(())
}

/// `cmd` without the variables that point at CUDA or libclang.
fn clean_env(mut cmd: Command) -> Command {
    for var in CLEARED_ENV {
        cmd.env_remove(var);
    }
    cmd
}

/// Unpacks `<package_dir>/<name>-<version>.crate` into `into`; returns the crate's
/// directory (`<into>/<name>-<version>`).
fn unpack(package_dir: &Path, name: &str, into: &Path) -> R<PathBuf> {
    let prefix = format!("{name}-");
    let mut found = Vec::new();
    for entry in fs::read_dir(package_dir)? {
        let path = entry?.path();
        let Some(file) = path.file_name().and_then(|f| f.to_str()) else {
            continue;
        };
        // `cudadrv-` also starts `cudadrv-sys-...`: the version must follow the prefix.
        let is_ours = file.ends_with(".crate")
            && file
                .strip_prefix(&prefix)
                .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()));
        if is_ours {
            found.push(path);
        }
    }
    let [krate] = found.as_slice() else {
        return Err(format!(
            "expected one {name}-<version>.crate in {}, found {found:?}",
            package_dir.display()
        )
        .into());
    };
    run(Command::new("tar")
        .arg("-xzf")
        .arg(krate)
        .arg("-C")
        .arg(into))?;
    let stem = krate
        .file_name()
        .and_then(|f| f.to_str())
        .and_then(|f| f.strip_suffix(".crate"))
        .unwrap_or_default();
    let dir = into.join(stem);
    if !dir.join("Cargo.toml").is_file() {
        return Err(format!("{} did not unpack to {}", krate.display(), dir.display()).into());
    }
    Ok(dir)
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The smoke crate's manifest: `cudadrv` by path, `cudadrv-sys` (which the unpacked
/// `cudadrv` asks crates.io for) patched to the unpacked one. Its features mirror
/// cudadrv's so that `--no-default-features --features loaded` reaches the library.
fn smoke_manifest(core_dir: &Path, sys_dir: &Path) -> String {
    format!(
        r#"# Written by `cargo xtask package`.
[package]
name = "cudadrv-package-check"
version = "0.0.0"
edition = "2024"
publish = false

# Not a member of the cuda-rs workspace above it.
[workspace]

[dependencies]
cudadrv = {{ path = "{core}", default-features = false }}

[features]
default = ["std", "loaded", "runtime", "graph", "green"]
std = ["cudadrv/std"]
loaded = ["cudadrv/loaded"]
linked = ["cudadrv/linked"]
runtime = ["cudadrv/runtime"]
graph = ["cudadrv/graph"]
green = ["cudadrv/green"]

[patch.crates-io]
cudadrv-sys = {{ path = "{sys}" }}
"#,
        core = toml_path(core_dir),
        sys = toml_path(sys_dir),
    )
}

/// The mock suites' crate: the packaged crates under the names the suites use.
fn mocks_manifest(core_dir: &Path, sys_dir: &Path) -> String {
    format!(
        r#"# Written by `cargo xtask package`: tests/ holds the repository's mock-driver suites.
[package]
name = "cudadrv-package-mocks"
version = "0.0.0"
edition = "2024"
publish = false

[workspace]

[lib]
name = "cuda_workspace"

[dependencies]
cudadrv-sys = {{ path = "{sys}" }}

[dev-dependencies]
cudadrv = {{ path = "{core}" }}

# The suites skip themselves in a linked build.
[features]
linked = []

[patch.crates-io]
cudadrv-sys = {{ path = "{sys}" }}
"#,
        core = toml_path(core_dir),
        sys = toml_path(sys_dir),
    )
}

/// `path` as the inside of a TOML basic string.
fn toml_path(path: &Path) -> String {
    path.display()
        .to_string()
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
}

/// The smoke crate's `main.rs`: public API only, and nothing that needs a GPU to succeed.
const SMOKE_MAIN: &str = r#"//! Written by `cargo xtask package`: uses cudadrv as a crates.io user would.

use cudadrv::cuda_sys::{self, CUresult};
use cudadrv::{Dim3, LaunchConfig};

fn main() {
    let ok = CUresult::CUDA_SUCCESS;
    assert!(ok.is_success());
    println!("cudadrv-sys: {} mode, {ok}", cuda_sys::binding_mode());

    let cfg = LaunchConfig::new((4, 2), Dim3::x(256))
        .shared_mem(1024)
        .programmatic_stream_serialization()
        .expect("room for one attribute");
    assert_eq!(cfg.num_attributes(), 1);
    println!(
        "LaunchConfig: grid {:?}, block {:?}, {} B shared, {} attribute(s)",
        cfg.grid,
        cfg.block,
        cfg.shared_mem_bytes,
        cfg.num_attributes()
    );

    match cudadrv::driver::init() {
        Ok(()) => println!(
            "cudadrv::driver::init(): ok, driver version {:?}",
            cudadrv::driver::driver_version()
        ),
        Err(e) => println!("cudadrv::driver::init(): {e}"),
    }
}
"#;
