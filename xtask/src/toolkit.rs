//! Where the CUDA headers, ptxas and libcudart come from.
//!
//! Two toolkits, on purpose:
//! - the build toolchain (ptxas, nvcc, libcudart, the headers nvcc compiles the C++
//!   references with) is CUDA 13.0, the GPU hosts' driver: `CUDA_PATH`, `CUDA_HOME`,
//!   `/usr/local/cuda`, or when none of them holds `include/cuda.h` and `ptxas`, the
//!   PyPI wheels of [`WHEELS`] installed into `.cuda/` at the workspace root (pip, no root
//!   needed);
//! - the headers the bindings are generated from are a pinned release of their own
//!   ([`HEADERS`], the newest), or any 12.x/13.x release for `cargo xtask bindgen --cuda`:
//!   only the runtime wheel (`cuda.h`, `cudaTypedefs.h`, `cuda_runtime_api.h`, ...) and
//!   the one that carries `crt/host_defines.h`, installed into `.cuda/headers/<version>/`.
//!
//! libclang for bindgen comes from Debian's `libclang-dev`.

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{R, run, step};

/// Wheels that give a CPU machine the CUDA 13.0 headers, ptxas, nvcc, libcudart and
/// libnvrtc.
pub const WHEELS: &[&str] = &[
    "nvidia-cuda-runtime==13.0.96",
    "nvidia-cuda-crt==13.0.88",
    "nvidia-cuda-nvcc==13.0.88",
    // NVRTC for the run-time compilation tests (tests/nvrtc.rs): the release of the GPU
    // hosts' driver, so its PTX loads there too.
    "nvidia-cuda-nvrtc==13.0.88",
];

/// The release the committed bindings of cuda-sys are generated from: the runtime wheel
/// (headers) and the crt wheel (`crt/host_defines.h`), exact versions.
pub const HEADERS: HeaderWheels = HeaderWheels {
    release: Cow::Borrowed("13.5.37"),
    runtime: Cow::Borrowed("nvidia-cuda-runtime==13.5.37"),
    crt: Cow::Borrowed("nvidia-cuda-crt==13.5.37"),
};

/// The header wheels of one CUDA release.
#[derive(Clone, Debug)]
pub struct HeaderWheels {
    /// The runtime wheel's version (`13.5.37`, `12.4.127`): the release, to the patch.
    pub release: Cow<'static, str>,
    /// `nvidia-cuda-runtime==<v>` (13.x) or `nvidia-cuda-runtime-cu12==<v>` (12.x).
    pub runtime: Cow<'static, str>,
    /// `nvidia-cuda-crt==<v>` (13.x) or `nvidia-cuda-nvcc-cu12==<v>` (12.x, the wheel
    /// that carries `crt/host_defines.h` before 13.0).
    pub crt: Cow<'static, str>,
}

impl HeaderWheels {
    /// `major.minor` of the release (`13.5`).
    pub fn major_minor(&self) -> &str {
        let mut dots = self.release.match_indices('.');
        match dots.nth(1) {
            Some((i, _)) => &self.release[..i],
            None => &self.release,
        }
    }
}

/// The header wheels of a CUDA release given as `12.4`, `12.4.127`, `13.1` or `13.1.80`:
/// a full version is taken as the runtime wheel's own; `major.minor` picks the newest
/// runtime wheel of that release. The crt (13.x) or nvcc (12.x) wheel is the one of the
/// same version when PyPI has it, else the newest of the same `major.minor`. Asks PyPI
/// (`pip index versions`) unless the release is [`HEADERS`]'.
pub fn header_wheels(version: &str) -> R<HeaderWheels> {
    if version == HEADERS.release || version == HEADERS.major_minor() {
        return Ok(HEADERS);
    }
    let parts: Vec<&str> = version.split('.').collect();
    let valid = (2..=3).contains(&parts.len())
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    if !valid {
        return Err(
            format!("--cuda {version}: expected a release like 12.4, 13.1 or 13.1.80").into(),
        );
    }
    let (runtime, crt) = match parts[0] {
        "12" => ("nvidia-cuda-runtime-cu12", "nvidia-cuda-nvcc-cu12"),
        "13" => ("nvidia-cuda-runtime", "nvidia-cuda-crt"),
        _ => {
            return Err(format!(
                "--cuda {version}: cudadrv-sys is generated for CUDA 12.0 and later (12.x, 13.x)"
            )
            .into());
        }
    };
    let minor = format!("{}.{}.", parts[0], parts[1]);
    let runtime_versions = pypi_versions(runtime)?;
    let release = if parts.len() == 3 {
        runtime_versions
            .iter()
            .find(|v| *v == version)
            .cloned()
            .ok_or_else(|| format!("PyPI has no {runtime}=={version}"))?
    } else {
        newest(&runtime_versions, &minor)
            .ok_or_else(|| format!("PyPI has no {runtime} of CUDA {version}"))?
    };
    let crt_versions = pypi_versions(crt)?;
    let crt_version = crt_versions
        .iter()
        .find(|v| **v == release)
        .cloned()
        .or_else(|| newest(&crt_versions, &minor))
        .ok_or_else(|| format!("PyPI has no {crt} of CUDA {version}"))?;
    Ok(HeaderWheels {
        runtime: format!("{runtime}=={release}").into(),
        crt: format!("{crt}=={crt_version}").into(),
        release: release.into(),
    })
}

/// The newest of `versions` that starts with `prefix` (`12.4.`), by numeric order.
fn newest(versions: &[String], prefix: &str) -> Option<String> {
    let key = |v: &String| -> Vec<u32> { v.split('.').map(|p| p.parse().unwrap_or(0)).collect() };
    versions
        .iter()
        .filter(|v| v.starts_with(prefix))
        .max_by_key(|v| key(v))
        .cloned()
}

/// The versions PyPI lists for `package` (`pip index versions`).
fn pypi_versions(package: &str) -> R<Vec<String>> {
    let out = Command::new(python()?)
        .args([
            "-m",
            "pip",
            "index",
            "versions",
            "--disable-pip-version-check",
            package,
        ])
        .output()
        .map_err(|e| format!("pip index versions {package}: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let list = text
        .lines()
        .find_map(|l| l.strip_prefix("Available versions:"))
        .ok_or_else(|| {
            format!(
                "pip index versions {package} listed nothing (network?): {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )
        })?;
    Ok(list.split(',').map(|v| v.trim().to_string()).collect())
}

/// Installs (once) the header wheels of `wheels` into `<workspace>/.cuda/headers/<release>`
/// and returns the include directories: the first holds `cuda.h`, the second (12.x only)
/// `crt/host_defines.h`.
pub fn headers(workspace: &Path, wheels: &HeaderWheels) -> R<Vec<PathBuf>> {
    let dir = workspace.join(".cuda/headers").join(&*wheels.release);
    let includes: Vec<PathBuf> = if wheels.release.starts_with("12.") {
        vec![
            dir.join("nvidia/cuda_runtime/include"),
            dir.join("nvidia/cuda_nvcc/include"),
        ]
    } else {
        vec![dir.join("nvidia/cu13/include")]
    };
    let stamp = dir.join(".installed");
    let want = format!("{} {}", wheels.runtime, wheels.crt);
    let present = includes[0].join("cuda.h").exists()
        && includes
            .iter()
            .any(|i| i.join("crt/host_defines.h").exists());
    if std::fs::read_to_string(&stamp).ok().as_deref() != Some(want.as_str()) || !present {
        step(&format!(
            "fetching the CUDA {} headers into {}",
            wheels.release,
            dir.display()
        ));
        pip_install(&dir, &[&wheels.runtime, &wheels.crt])?;
        std::fs::write(&stamp, &want)?;
    }
    if !includes[0].join("cuda.h").exists() {
        return Err(format!("{} installed but has no include/cuda.h", wheels.runtime).into());
    }
    Ok(includes)
}

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

/// `libnvrtc.so.13` of `tk`, else of the wheels (installed into `<workspace>/.cuda` if
/// needed): the NVRTC the CPU tests compile with.
pub fn nvrtc_library(workspace: &Path, tk: &Toolkit) -> R<PathBuf> {
    const SONAME: &str = "libnvrtc.so.13";
    if let Some(lib) = tk
        .lib
        .as_ref()
        .map(|l| l.join(SONAME))
        .filter(|p| p.exists())
    {
        return Ok(lib);
    }
    wheels(workspace)?
        .lib
        .map(|l| l.join(SONAME))
        .filter(|p| p.exists())
        .ok_or_else(|| format!("{SONAME} not found in the toolkit or the wheels").into())
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
    let mut cmd = Command::new(python()?);
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

fn python() -> R<&'static str> {
    Ok(["python3", "python"]
        .into_iter()
        .find(|p| Command::new(p).arg("--version").output().is_ok())
        .ok_or("python3 is needed to fetch the CUDA wheels (pip)")?)
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
