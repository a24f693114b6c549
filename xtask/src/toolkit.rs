//! Where the CUDA 13.0 headers, ptxas and libcudart come from.
//!
//! Search order: `CUDA_PATH`, `CUDA_HOME`, `/usr/local/cuda`; when none of them holds
//! `include/cuda.h`, the PyPI wheels are installed into `.cuda/` at the workspace root
//! (pip, no root needed). libclang for bindgen comes from Debian's `libclang-dev`.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{R, run, step};

/// Wheels that give a CPU machine the CUDA 13.0 headers, ptxas, nvcc and libcudart.
pub const WHEELS: &[&str] = &[
    "nvidia-cuda-runtime==13.0.96",
    "nvidia-cuda-crt==13.0.88",
    "nvidia-cuda-nvcc==13.0.88",
];

/// A located CUDA toolkit (full install or the wheels).
pub struct Toolkit {
    /// Directory holding `cuda.h`, `cudaTypedefs.h`, `cuda_runtime_api.h`.
    pub include: PathBuf,
    /// Directory holding `ptxas` (and `nvcc`), if present.
    pub bin: Option<PathBuf>,
    /// Directory holding `libcudart.so.13` and `libcudadevrt.a`.
    pub lib: Option<PathBuf>,
}

impl Toolkit {
    /// `ptxas`, if the toolkit has one.
    pub fn ptxas(&self) -> Option<PathBuf> {
        self.bin
            .as_ref()
            .map(|b| b.join("ptxas"))
            .filter(|p| p.exists())
    }
}

fn from_root(root: &Path) -> Option<Toolkit> {
    if !root.join("include/cuda.h").exists() {
        return None;
    }
    let lib = ["lib64", "lib"]
        .iter()
        .map(|l| root.join(l))
        .find(|p| p.exists());
    let bin = Some(root.join("bin")).filter(|p| p.join("ptxas").exists());
    Some(Toolkit {
        include: root.join("include"),
        bin,
        lib,
    })
}

/// Finds an installed toolkit, or installs the wheels into `<workspace>/.cuda`.
pub fn locate(workspace: &Path) -> R<Toolkit> {
    for var in ["CUDA_PATH", "CUDA_HOME"] {
        if let Some(tk) = std::env::var_os(var).and_then(|v| from_root(Path::new(&v))) {
            if tk.ptxas().is_some() {
                return Ok(tk);
            }
        }
    }
    if let Some(tk) = from_root(Path::new("/usr/local/cuda")).filter(|t| t.ptxas().is_some()) {
        return Ok(tk);
    }
    wheels(workspace)
}

/// Installs (once) and returns the wheel toolkit under `<workspace>/.cuda`.
pub fn wheels(workspace: &Path) -> R<Toolkit> {
    let dir = workspace.join(".cuda");
    let root = dir.join("nvidia/cu13");
    let stamp = dir.join(".installed");
    let want = WHEELS.join(" ");
    if std::fs::read_to_string(&stamp).ok().as_deref() != Some(want.as_str()) {
        step(&format!("fetching CUDA 13.0 wheels into {}", dir.display()));
        pip_install(&dir, WHEELS)?;
        std::fs::write(&stamp, &want)?;
    }
    let tk = from_root(&root).ok_or("the CUDA wheels installed but include/cuda.h is missing")?;
    Ok(tk)
}

/// `pip install --no-deps --upgrade --target <dir>` of `wheels` (PyPI packages, pinned).
pub fn pip_install(dir: &Path, wheels: &[&str]) -> R {
    let python = ["python3", "python"]
        .into_iter()
        .find(|p| Command::new(p).arg("--version").output().is_ok())
        .ok_or("python3 is needed to fetch the CUDA wheels (pip)")?;
    let mut cmd = Command::new(python);
    cmd.args([
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
    ])
    .args(["--no-deps", "--upgrade", "--target"])
    .arg(dir)
    .args(wheels);
    run(&mut cmd)
}

/// Writes generated `files` (name, text) into `out_dir`, or with `check` compares them
/// with what is there and fails naming the stale ones and `regenerate`, the command that
/// rewrites them. `what` names the files in messages.
pub fn write_or_check(
    out_dir: &Path,
    files: &[(String, String)],
    check: bool,
    what: &str,
    regenerate: &str,
) -> R {
    let mut stale = Vec::new();
    for (name, text) in files {
        let path = out_dir.join(name);
        if check {
            if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
                stale.push(path.display().to_string());
            }
        } else {
            std::fs::create_dir_all(out_dir)?;
            std::fs::write(&path, text)?;
            println!(
                "  wrote {} ({} lines)",
                path.display(),
                text.lines().count()
            );
        }
    }
    if !stale.is_empty() {
        return Err(format!(
            "{what} are stale: {}\n  run `{regenerate}` and commit the result",
            stale.join(", ")
        )
        .into());
    }
    if check {
        println!("  {what} are up to date ({} files)", files.len());
    }
    Ok(())
}

/// Makes sure bindgen can find libclang: installs Debian's `libclang-dev` when absent.
pub fn ensure_libclang() -> R {
    if std::env::var_os("LIBCLANG_PATH").is_some() || libclang_present() {
        return Ok(());
    }
    step("installing libclang-dev (bindgen needs libclang)");
    apt_install(&["libclang-dev"])?;
    if libclang_present() {
        Ok(())
    } else {
        Err("libclang-dev installed but no libclang.so found; set LIBCLANG_PATH".into())
    }
}

/// `apt-get install` of Debian packages (through `sudo` when not root), running `apt-get
/// update` first if the plain install fails (a fresh machine has no package lists).
pub fn apt_install(packages: &[&str]) -> R {
    let sudo: &[&str] = if is_root() { &[] } else { &["sudo"] };
    let apt = |args: &[&str]| -> R {
        let mut cmd = Command::new(sudo.first().copied().unwrap_or("apt-get"));
        if !sudo.is_empty() {
            cmd.arg("apt-get");
        }
        cmd.args(args).env("DEBIAN_FRONTEND", "noninteractive");
        run(&mut cmd)
    };
    let install = |pkgs: &[&str]| {
        let mut args = vec!["install", "-y", "-qq"];
        args.extend_from_slice(pkgs);
        apt(&args)
    };
    if install(packages).is_err() {
        apt(&["update", "-qq"])?;
        install(packages)?;
    }
    Ok(())
}

fn libclang_present() -> bool {
    // libclang.so or libclang-N.so*, not libclang-cpp (which other packages pull in).
    let is_libclang = |name: &str| {
        name.starts_with("libclang.so")
            || name
                .strip_prefix("libclang-")
                .is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit()))
    };
    let mut dirs: Vec<PathBuf> = ["/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib"]
        .iter()
        .map(PathBuf::from)
        .collect();
    if let Ok(rd) = std::fs::read_dir("/usr/lib") {
        dirs.extend(
            rd.flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with("llvm-"))
                .map(|e| e.path().join("lib")),
        );
    }
    dirs.iter().any(|d| {
        std::fs::read_dir(d).is_ok_and(|rd| {
            rd.flatten()
                .any(|e| is_libclang(&e.file_name().to_string_lossy()))
        })
    })
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}
