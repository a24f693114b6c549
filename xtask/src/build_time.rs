//! What the two libraries cost a user's build.
//!
//! - `cargo xtask build-time [--cudarc] [--runs N]` measures it: four small programs
//!   (`xtask/build-time/cudadrv/*.rs`: list the devices, copy to the device and back, load
//!   PTX and launch, time a copy with events), each a fresh crate built clean in release
//!   with `--timings`, and prints each build's wall time and where it went (every
//!   compilation unit's start and duration), twice: against cudadrv with its default
//!   features, and lean, with only the features the programs use (`std`, `loaded`: no
//!   runtime-API bindings, no `graph` or `green` section). With `--cudarc` the same four
//!   programs written against cudarc 0.19 (`xtask/build-time/cudarc/*.rs`; features
//!   `std`, `driver`, `nvrtc` for its `Ptx` type, `dynamic-loading`, `cuda-12080`) are
//!   built the same way, the builds alternating program by program, and the mean walls
//!   and the per-program ratios are compared (each cudadrv build against cudarc's).
//!   Timings need an otherwise idle machine; this is a tool, not a CI step.
//! - `cargo xtask build-cost` is the CI check that keeps the cost from creeping back: the
//!   libraries' dependency set (a new dependency is a compilation unit on every user's
//!   critical path) and the LLVM IR each library hands to LLVM (release, one codegen
//!   unit, before optimization, the lines of function bodies), against budgets. Those counts are
//!   what the compiler's back end spends its time on, and unlike a timing they do not
//!   depend on the machine's load.

use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::{R, cargo, run};

/// The programs: file stem, one line on what it does.
const PROGRAMS: [&str; 4] = ["devices", "copy", "launch", "events"];

/// The cudarc release and features the comparison builds against.
const CUDARC: &str = r#"cudarc = { version = "=0.19.10", default-features = false, features = ["std", "driver", "nvrtc", "dynamic-loading", "cuda-12080"] }"#;

/// cudadrv's features for the programs when it is built lean: `std` and the run-time
/// loaded driver, without the runtime API's bindings or the `graph` and `green` sections.
/// `build-time` builds the programs so and `build-cost` budgets the IR of this build.
const LEAN_FEATURES: &str = "std,loaded";

/// Every package a Linux host build of each library (default features) compiles,
/// besides the two libraries themselves: cudadrv-sys declares the few C functions it
/// needs itself (nothing to compile before it), cudadrv adds `libc` for the file
/// descriptors of `ipc` (feature `std`); its flag types are its own (`flags!`).
const ALLOWED_DEPENDENCIES: [(&str, &[&str]); 2] = [
    ("cudadrv-sys", &["static_assertions"]),
    ("cudadrv", &["libc", "static_assertions"]),
];

/// The most lines of LLVM IR function bodies each library may emit before optimization
/// (release, one codegen unit), with its default features (`None`) or with only the
/// features given: about 15% above what they emit today (default: cudadrv-sys 22,640,
/// cudadrv 144,036; lean, [`LEAN_FEATURES`]: cudadrv 89,257), so that a
/// regression of the kind this check was written for fails it (cudadrv-sys's tables
/// filled by one straight-line function per table emitted 79,095; cudadrv emitted 177,521
/// with a generic node-list helper and `bitflags`; a lean build that compiles the graph
/// and green-context sections again emits the default build's figure) and ordinary
/// growth has room.
const IR_BUDGETS: [(&str, &str, Option<&str>, usize); 3] = [
    ("cudadrv-sys", "cudadrv_sys", None, 26_000),
    ("cudadrv", "cudadrv", None, 165_000),
    ("cudadrv", "cudadrv", Some(LEAN_FEATURES), 102_000),
];

/// `cargo xtask build-time [--cudarc] [--runs N]`.
pub fn measure(root: &Path, args: &[String]) -> R {
    let with_cudarc = args.iter().any(|a| a == "--cudarc");
    let runs: usize = match args.iter().position(|a| a == "--runs") {
        Some(i) => args
            .get(i + 1)
            .and_then(|n| n.parse().ok())
            .ok_or("--runs takes a number")?,
        None => 1,
    };
    // (label, the programs' source folder, the dependency line): cudadrv with its
    // default features, and with only what the programs use (as the cudarc build
    // selects its own).
    let path = root.join("cuda-core").display().to_string();
    let mut libs = vec![
        (
            "cudadrv",
            "cudadrv",
            format!("cudadrv = {{ path = {path:?} }}"),
        ),
        (
            "cudadrv-lean",
            "cudadrv",
            format!(
                "cudadrv = {{ path = {path:?}, default-features = false, features = {:?} }}",
                LEAN_FEATURES.split(',').collect::<Vec<_>>()
            ),
        ),
    ];
    if with_cudarc {
        libs.push(("cudarc", "cudarc", CUDARC.to_string()));
    }
    let base = root.join("target/build-time");
    // Builds alternate between the configurations, program by program, the order
    // rotating each time, so that a drift of the machine's speed over the minutes the
    // builds take falls on all alike; each program's builds give one ratio per cudadrv
    // configuration.
    let mut walls: Vec<Vec<f64>> = vec![Vec::new(); libs.len()];
    // Per program and round, each cudadrv build's wall over cudarc's.
    let mut ratios = [Vec::new(), Vec::new()];
    for round in 0..runs {
        for (p, program) in PROGRAMS.iter().enumerate() {
            let mut walls_now = vec![0.0; libs.len()];
            for k in 0..libs.len() {
                let l = (k + round + p) % libs.len();
                let (lib, sources, dependency) = &libs[l];
                let dir = base.join(format!("{lib}-{program}"));
                write_program(root, &dir, lib, sources, program, dependency)?;
                walls_now[l] = build(&dir, lib, program)?;
                walls[l].push(walls_now[l]);
            }
            if let [default, lean, theirs] = walls_now[..] {
                ratios[0].push(default / theirs);
                ratios[1].push(lean / theirs);
            }
        }
    }
    let mut means = Vec::new();
    for ((lib, _, _), w) in libs.iter().zip(&walls) {
        let mean = w.iter().sum::<f64>() / w.len() as f64;
        println!("{lib}: mean {mean:.2} s over {} builds", w.len());
        means.push(mean);
    }
    if let [default, lean, theirs] = means[..] {
        for (k, ours) in [default, lean].into_iter().enumerate() {
            let ratios = &mut ratios[k];
            ratios.sort_by(f64::total_cmp);
            println!(
                "{} / cudarc: {:.3} (means); per program and round {:.3} median, {:.3}-{:.3}",
                libs[k].0,
                ours / theirs,
                ratios[ratios.len() / 2],
                ratios[0],
                ratios[ratios.len() - 1]
            );
        }
    }
    Ok(())
}

/// One clean release build of a program's crate in `dir`: its wall time in seconds,
/// printed with where it went (every compilation unit's start and duration).
fn build(dir: &Path, lib: &str, program: &str) -> R<f64> {
    let target = dir.join("target");
    if target.exists() {
        std::fs::remove_dir_all(&target)?;
    }
    let start = Instant::now();
    run(cargo(dir).args(["build", "--release", "--quiet", "--timings"]))?;
    let wall = start.elapsed().as_secs_f64();
    println!("{lib} {program}: {wall:.2} s");
    let html = std::fs::read_to_string(target.join("cargo-timings/cargo-timing.html"))?;
    for unit in units(&html) {
        println!(
            "    {:<20} {:<22} start {:>5.2}  {:>5.2} s",
            unit.name, unit.target, unit.start, unit.duration
        );
    }
    Ok(wall)
}

/// Writes one program's crate: the manifest (its own workspace), `src/main.rs`, the PTX,
/// and the workspace's lock file, so that cudadrv's dependencies resolve to the
/// versions CI tests.
fn write_program(
    root: &Path,
    dir: &Path,
    lib: &str,
    sources: &str,
    program: &str,
    dependency: &str,
) -> R {
    let src = dir.join("src");
    std::fs::create_dir_all(&src)?;
    let sources_dir = root.join("xtask/build-time");
    std::fs::copy(
        sources_dir.join(sources).join(format!("{program}.rs")),
        src.join("main.rs"),
    )?;
    std::fs::copy(sources_dir.join("kernel.ptx"), src.join("kernel.ptx"))?;
    std::fs::write(
        dir.join("Cargo.toml"),
        format!(
            "[package]\nname = \"{lib}-{program}\"\nversion = \"0.0.0\"\nedition = \"2024\"\npublish = false\n\n\
             [dependencies]\n{dependency}\n\n[workspace]\n"
        ),
    )?;
    if sources == "cudadrv" && !dir.join("Cargo.lock").exists() {
        std::fs::copy(root.join("Cargo.lock"), dir.join("Cargo.lock"))?;
    }
    Ok(())
}

/// One compilation unit of a `--timings` report.
struct Unit {
    name: String,
    target: String,
    start: f64,
    duration: f64,
}

/// The units of cargo's `--timings` HTML report (its `UNIT_DATA` array), read field by
/// field: each unit is an object with `"name"`, `"target"`, `"start"` and `"duration"`
/// (compact or pretty-printed, as cargo versions write it).
fn units(html: &str) -> Vec<Unit> {
    let Some(data) = html
        .split_once("UNIT_DATA = [")
        .and_then(|(_, rest)| rest.split_once("];"))
        .map(|(data, _)| compact(data))
    else {
        return Vec::new();
    };
    data.split("{\"i\":")
        .skip(1)
        .filter_map(|unit| {
            Some(Unit {
                name: string_field(unit, "name")?,
                target: string_field(unit, "target").unwrap_or_default(),
                start: number_field(unit, "start")?,
                duration: number_field(unit, "duration")?,
            })
        })
        .collect()
}

/// `json` without the whitespace outside its strings.
fn compact(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    let (mut in_string, mut escaped) = (false, false);
    for c in json.chars() {
        if in_string {
            out.push(c);
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                _ => {}
            }
        } else if c == '"' {
            in_string = true;
            out.push(c);
        } else if !c.is_whitespace() {
            out.push(c);
        }
    }
    out
}

fn string_field(object: &str, key: &str) -> Option<String> {
    let rest = object.split_once(&format!("\"{key}\":\""))?.1;
    Some(rest.split_once('"')?.0.trim().to_string())
}

fn number_field(object: &str, key: &str) -> Option<f64> {
    let rest = object.split_once(&format!("\"{key}\":"))?.1;
    let end = rest.find([',', '}']).unwrap_or(rest.len());
    rest[..end].trim().parse().ok()
}

/// `cargo xtask build-cost`: the dependency set and the IR budgets.
pub fn check(root: &Path) -> R {
    for (package, allowed) in ALLOWED_DEPENDENCIES {
        let output = cargo(root)
            .args([
                "tree", "-p", package, "-e", "normal", "--prefix", "none", "--format", "{p}",
            ])
            .output()?;
        if !output.status.success() {
            return Err(format!(
                "cargo tree failed: {}",
                String::from_utf8_lossy(&output.stderr)
            )
            .into());
        }
        let mut packages: Vec<String> = String::from_utf8_lossy(&output.stdout)
            .lines()
            .filter_map(|l| l.split_whitespace().next().map(str::to_string))
            .filter(|p| p != "cudadrv" && p != "cudadrv-sys")
            .collect();
        packages.sort();
        packages.dedup();
        let extra: Vec<&String> = packages
            .iter()
            .filter(|p| !allowed.contains(&p.as_str()))
            .collect();
        println!("  dependencies of {package} (host, default features): {packages:?}");
        if !extra.is_empty() {
            return Err(format!(
                "{package}'s build gained dependencies {extra:?} (allowed: {allowed:?})"
            )
            .into());
        }
    }
    for (package, crate_name, features, budget) in IR_BUDGETS {
        // One target directory per feature set: the newest IR file in it is then the
        // one of these features.
        let (target_dir, which) = match features {
            None => (
                root.join("target/build-cost"),
                "default features".to_string(),
            ),
            Some(f) => (
                root.join(format!("target/build-cost-{}", f.replace(',', "-"))),
                format!("features {f} only"),
            ),
        };
        let lines = ir_lines(root, &target_dir, package, crate_name, features)?;
        println!(
            "  {package} ({which}): {lines} lines of LLVM IR in function bodies; budget {budget}"
        );
        if lines > budget {
            return Err(format!(
                "{package} ({which}) emits {lines} lines of LLVM IR, over its budget of {budget}"
            )
            .into());
        }
    }
    Ok(())
}

/// Compiles `package`'s library (release, one codegen unit) with `--emit=llvm-ir`,
/// before LLVM's optimization passes (what those passes and the code generator are
/// given), and counts the lines inside its function definitions.
fn ir_lines(
    root: &Path,
    target_dir: &Path,
    package: &str,
    crate_name: &str,
    features: Option<&str>,
) -> R<usize> {
    let deps = target_dir.join("release/deps");
    if ir_files(&deps, crate_name).is_empty() {
        // Built before without the IR (or the IR removed): build it again.
        run(cargo(root)
            .args([
                "clean",
                "--release",
                "--quiet",
                "-p",
                package,
                "--target-dir",
            ])
            .arg(target_dir))?;
    }
    run(cargo(root)
        .args([
            "rustc",
            "--release",
            "--quiet",
            "--lib",
            "-p",
            package,
            "--target-dir",
        ])
        .arg(target_dir)
        .args(
            features
                .map(|f| ["--no-default-features", "--features", f])
                .iter()
                .flatten(),
        )
        .args([
            "--",
            "--emit=llvm-ir",
            "-Ccodegen-units=1",
            "-Cno-prepopulate-passes",
            "-Cpasses=name-anon-globals",
        ]))?;
    // Cargo leaves a fresh library alone, and with it the IR of the same sources: the
    // newest file is the current one either way.
    let file = ir_files(&deps, crate_name)
        .into_iter()
        .max_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok())
        .ok_or_else(|| format!("no {crate_name}-*.ll in {}", deps.display()))?;
    let ir = std::fs::read_to_string(&file)?;
    let mut inside = false;
    let mut lines = 0;
    for line in ir.lines() {
        if line.starts_with("define ") {
            inside = true;
        } else if inside && line == "}" {
            inside = false;
        } else if inside {
            lines += 1;
        }
    }
    Ok(lines)
}

fn ir_files(deps: &Path, crate_name: &str) -> Vec<PathBuf> {
    std::fs::read_dir(deps)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.extension().is_some_and(|x| x == "ll")
                        && p.file_name()
                            .and_then(|n| n.to_str())
                            .is_some_and(|n| n.starts_with(&format!("{crate_name}-")))
                })
                .collect()
        })
        .unwrap_or_default()
}
