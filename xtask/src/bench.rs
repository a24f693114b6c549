//! `cargo xtask bench` and `cargo xtask timeline`.
//!
//! - `bench [ARGS]`: on a machine with a GPU, builds and runs the CUDA C++ reference
//!   (`xtask/cpp/bench.cu`, when `nvcc` is found), then the Rust benchmark
//!   (`examples/bench.rs`, release) with `--cpp` pointing at the C++ results so that it
//!   prints the comparison, then the PDL demo, whose `%globaltimer` stamps become a
//!   timeline SVG. Results go to `$OUT` if set, else `target/bench/`. Without a GPU it
//!   says so and how to run the benchmark on a GPU host through the bundle.
//! - `timeline --csv STAMPS.csv [--svg OUT.svg] [--synthetic]`: draws the stamps that
//!   `pdl_demo` writes as an SVG: one bar per block, y = SM id, x = time, the primary and
//!   the secondary of each pair in different colours, one panel per pair (PDL and plain)
//!   on the same time scale. `--synthetic` first writes made-up stamps to the CSV path
//!   (to see the drawing without a GPU).
//!
//! Stamps CSV (header line, then one row per block):
//! `pair,kernel,block,sm,start_ns,mid_ns,end_ns` with `pair` a label (`pdl`, `plain`),
//! `kernel` `primary` or `secondary`, times raw `%globaltimer` nanoseconds. For the
//! primary (which triggers `launch_dependents` at entry), `mid` is when its work was
//! done and `end` after its writes; for the secondary, `start` is block entry (before the prolog),
//! `mid` when `griddepcontrol.wait` returned, `end` after its writes.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{R, cargo, step};

const NO_GPU_HELP: &str = "\
to run the benchmark on a GPU host without Rust:
  cargo xtask bundle           # builds bundle/ with bin/bench, bin/pdl_demo and cpp/
  # copy bundle/ to the GPU host, then there:
  ./run.sh                     # hardware tests, then the benchmark (see run.sh)
or, by hand on the GPU host:
  cpp/build.sh cpp/bench_cpp && cpp/bench_cpp --csv $OUT/bench_cpp.csv
  bin/bench --csv $OUT/bench.csv --cpp $OUT/bench_cpp.csv
  bin/pdl_demo --stamps $OUT/stamps.csv
and back here: cargo xtask timeline --csv stamps.csv --svg timeline.svg";

/// `cargo xtask bench [ARGS]`: ARGS go to the Rust bench example (`--quick`, ...);
/// `--no-cpp` skips the C++ reference.
pub fn run(root: &Path, args: &[String]) -> R {
    if let Err(why) = gpu_present() {
        println!("xtask bench: no GPU, nothing was run: {why}");
        println!("{NO_GPU_HELP}");
        return Ok(());
    }
    let out = std::env::var_os("OUT")
        .filter(|o| !o.is_empty())
        .map_or_else(|| root.join("target/bench"), PathBuf::from);
    std::fs::create_dir_all(&out)?;
    let no_cpp = args.iter().any(|a| a == "--no-cpp");
    let mut bench_args: Vec<String> = args.iter().filter(|a| *a != "--no-cpp").cloned().collect();
    let quick = args.iter().any(|a| a == "--quick");

    if !no_cpp {
        match find_nvcc() {
            Some(nvcc) => {
                step("building the C++ reference (xtask/cpp/bench.cu)");
                let exe = root.join("target/bench/bench_cpp");
                std::fs::create_dir_all(root.join("target/bench"))?;
                crate::run(
                    Command::new("bash")
                        .arg(root.join("xtask/cpp/build.sh"))
                        .arg(&exe)
                        .env("NVCC", &nvcc),
                )?;
                step("running the C++ reference");
                let csv = out.join("bench_cpp.csv");
                let mut cmd = Command::new(&exe);
                cmd.arg("--csv").arg(&csv);
                if quick {
                    cmd.arg("--quick");
                }
                crate::run(&mut cmd)?;
                bench_args.push("--cpp".into());
                bench_args.push(csv.display().to_string());
            }
            None => {
                println!("nvcc not found (CUDA_PATH, CUDA_HOME, /usr/local/cuda, PATH): Rust only")
            }
        }
    }

    step("running the Rust benchmark (examples/bench.rs, release)");
    let csv = out.join("bench.csv");
    crate::run(
        cargo(root)
            .args(["run", "--release", "--example", "bench", "--", "--csv"])
            .arg(&csv)
            .args(&bench_args),
    )?;

    step("running the PDL demo and drawing its timeline");
    let stamps = out.join("stamps.csv");
    crate::run(
        cargo(root)
            .args([
                "run",
                "--release",
                "--example",
                "pdl_demo",
                "--",
                "--stamps",
            ])
            .arg(&stamps),
    )?;
    if stamps.exists() {
        let svg = out.join("timeline.svg");
        render_file(&stamps, &svg)?;
        println!("timeline: {}", svg.display());
    }
    Ok(())
}

/// `cargo xtask timeline --csv STAMPS.csv [--svg OUT.svg] [--synthetic]`.
pub fn timeline(_root: &Path, args: &[String]) -> R {
    let mut csv = None;
    let mut svg = None;
    let mut synthetic = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--csv" => csv = it.next().map(PathBuf::from),
            "--svg" => svg = it.next().map(PathBuf::from),
            "--synthetic" => synthetic = true,
            other => return Err(format!("timeline: unknown argument `{other}`").into()),
        }
    }
    let csv =
        csv.ok_or("usage: cargo xtask timeline --csv STAMPS.csv [--svg OUT.svg] [--synthetic]")?;
    let svg = svg.unwrap_or_else(|| csv.with_extension("svg"));
    if synthetic {
        std::fs::write(&csv, synthetic_stamps())?;
        println!("wrote synthetic stamps to {}", csv.display());
    }
    render_file(&csv, &svg)?;
    println!("wrote {}", svg.display());
    Ok(())
}

/// Whether this machine has a usable NVIDIA GPU (device node or a working `nvidia-smi`).
fn gpu_present() -> Result<(), String> {
    let smi = Command::new("nvidia-smi").arg("-L").output();
    match smi {
        Ok(o) if o.status.success() && String::from_utf8_lossy(&o.stdout).contains("GPU ") => {
            Ok(())
        }
        _ if Path::new("/dev/nvidia0").exists() => Ok(()),
        Ok(o) => Err(format!("nvidia-smi -L found no GPU ({})", o.status)),
        Err(e) => Err(format!("no /dev/nvidia0 and no nvidia-smi ({e})")),
    }
}

/// `nvcc` from `CUDA_PATH`, `CUDA_HOME`, `/usr/local/cuda`, or `PATH`.
fn find_nvcc() -> Option<PathBuf> {
    let roots = ["CUDA_PATH", "CUDA_HOME"]
        .iter()
        .filter_map(std::env::var_os)
        .map(PathBuf::from)
        .chain([PathBuf::from("/usr/local/cuda")]);
    for r in roots {
        let nvcc = r.join("bin/nvcc");
        if nvcc.is_file() {
            return Some(nvcc);
        }
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("nvcc"))
        .find(|p| p.is_file())
}

/// One block's stamps.
#[derive(Clone, Debug)]
struct Stamp {
    pair: String,
    secondary: bool,
    sm: u32,
    start: u64,
    mid: u64,
    end: u64,
}

fn parse(text: &str) -> R<Vec<Stamp>> {
    let mut out = Vec::new();
    for (no, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with("pair,") {
            continue;
        }
        let f: Vec<&str> = line.split(',').map(str::trim).collect();
        if f.len() != 7 {
            return Err(
                format!("stamps line {}: expected 7 fields, got {}", no + 1, f.len()).into(),
            );
        }
        let num = |i: usize| -> R<u64> {
            f[i].parse::<u64>()
                .map_err(|e| format!("stamps line {}: field {}: {e}", no + 1, i + 1).into())
        };
        let secondary = match f[1] {
            "primary" => false,
            "secondary" => true,
            k => return Err(format!("stamps line {}: unknown kernel `{k}`", no + 1).into()),
        };
        out.push(Stamp {
            pair: f[0].to_string(),
            secondary,
            sm: u32::try_from(num(3)?)?,
            start: num(4)?,
            mid: num(5)?,
            end: num(6)?,
        });
    }
    if out.is_empty() {
        return Err("stamps: no rows".into());
    }
    Ok(out)
}

fn render_file(csv: &Path, svg: &Path) -> R {
    let text = std::fs::read_to_string(csv).map_err(|e| format!("{}: {e}", csv.display()))?;
    let stamps = parse(&text)?;
    std::fs::write(svg, render(&stamps))?;
    Ok(())
}

/// A tick step near `span / 8` from 1, 2, 5 times a power of ten.
fn nice_step(span: f64) -> f64 {
    let raw = (span / 8.0).max(1e-9);
    let p = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * p)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * p)
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

const PRIMARY_WORK: &str = "#2b6cb0";
const PRIMARY_TAIL: &str = "#90cdf4";
const SECONDARY_WAIT: &str = "#fbd38d";
const SECONDARY_WORK: &str = "#dd6b20";

/// The SVG: one panel per pair, blocks as bars on their SM's row.
fn render(stamps: &[Stamp]) -> String {
    let mut pairs: Vec<&str> = Vec::new();
    for s in stamps {
        if !pairs.contains(&s.pair.as_str()) {
            pairs.push(&s.pair);
        }
    }
    let n_sm = stamps.iter().map(|s| s.sm).max().unwrap_or(0) + 1;
    let row_h = 4.0_f64;
    let (left, right, width) = (70.0_f64, 30.0_f64, 1100.0_f64);
    let plot_w = width - left - right;
    let head = 56.0;
    let axis = 34.0;
    let panel_h = head + f64::from(n_sm) * row_h + axis;
    let legend_h = 30.0;
    let height = legend_h + panel_h * pairs.len() as f64;
    // One time scale for every panel, so their lengths compare.
    let span_of = |p: &str| {
        let rows = stamps.iter().filter(|s| s.pair == p);
        let t0 = rows.clone().map(|s| s.start).min().unwrap_or(0);
        let t1 = rows.map(|s| s.end.max(s.mid)).max().unwrap_or(t0);
        (t0, t1)
    };
    let max_span_us = pairs
        .iter()
        .map(|p| span_of(p))
        .map(|(a, b)| (b - a) as f64 / 1e3)
        .fold(0.0, f64::max)
        .max(1e-3);
    let x = |us: f64| left + us / max_span_us * plot_w;

    let mut o = String::new();
    let _ = writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(o, r#"<rect width="100%" height="100%" fill="white"/>"#);
    // Legend.
    let items = [
        (PRIMARY_WORK, "primary: work after its early trigger"),
        (PRIMARY_TAIL, "primary: writes"),
        (SECONDARY_WAIT, "secondary: prolog + griddepcontrol.wait"),
        (SECONDARY_WORK, "secondary: after wait, its work"),
    ];
    let mut lx = left;
    for (c, label) in items {
        let _ = writeln!(
            o,
            r#"<rect x="{lx}" y="10" width="14" height="10" fill="{c}"/>"#
        );
        let _ = writeln!(o, r#"<text x="{}" y="19">{}</text>"#, lx + 18.0, esc(label));
        lx += 250.0;
    }

    for (pi, pair) in pairs.iter().enumerate() {
        let top = legend_h + panel_h * pi as f64;
        let plot_top = top + head;
        let (t0, _) = span_of(pair);
        let rows: Vec<&Stamp> = stamps.iter().filter(|s| s.pair == *pair).collect();
        let us = |t: u64| t.saturating_sub(t0) as f64 / 1e3;
        let prim_end = rows.iter().filter(|s| !s.secondary).map(|s| s.end).max();
        let prim_start = rows.iter().filter(|s| !s.secondary).map(|s| s.start).min();
        let sec_start = rows.iter().filter(|s| s.secondary).map(|s| s.start).min();
        let sec_mid = rows.iter().filter(|s| s.secondary).map(|s| s.mid).min();
        let mut title = format!("pair `{pair}`");
        let mut detail = String::new();
        if let (Some(pe), Some(ps), Some(ss)) = (prim_end, prim_start, sec_start) {
            let overlap = pe as f64 / 1e3 - ss as f64 / 1e3;
            let _ = write!(title, ": primary {:.2} us", (pe - ps) as f64 / 1e3);
            let _ = write!(
                detail,
                "secondary's first block started {:.2} us {} the primary's last block ended",
                overlap.abs(),
                if overlap > 0.0 { "before" } else { "after" }
            );
            if let Some(sm) = sec_mid {
                let _ = write!(
                    detail,
                    "; its first wait returned {:+.2} us after that",
                    (sm as f64 - pe as f64) / 1e3
                );
            }
        }
        let _ = writeln!(
            o,
            r#"<text x="{left}" y="{}" font-size="13" font-weight="bold">{}</text>"#,
            top + 20.0,
            esc(&title)
        );
        let _ = writeln!(
            o,
            r#"<text x="{left}" y="{}" font-size="12">{}</text>"#,
            top + 36.0,
            esc(&detail)
        );
        // Frame and SM labels.
        let _ = writeln!(
            o,
            r##"<rect x="{left}" y="{plot_top}" width="{plot_w}" height="{}" fill="none" stroke="#999"/>"##,
            f64::from(n_sm) * row_h
        );
        let mut sm = 0;
        while sm < n_sm {
            let y = plot_top + f64::from(sm) * row_h + row_h;
            let _ = writeln!(
                o,
                r#"<text x="{}" y="{y}" text-anchor="end">SM {sm}</text>"#,
                left - 6.0
            );
            sm += 16;
        }
        let _ = writeln!(
            o,
            r#"<text x="14" y="{}" transform="rotate(-90 14 {})" text-anchor="middle">SM id</text>"#,
            plot_top + f64::from(n_sm) * row_h / 2.0,
            plot_top + f64::from(n_sm) * row_h / 2.0
        );
        // Bars: primary in the upper half of its SM's row, secondary in the lower half.
        for s in &rows {
            let y =
                plot_top + f64::from(s.sm) * row_h + if s.secondary { row_h / 2.0 } else { 0.0 };
            let (a, m, e) = (us(s.start), us(s.mid.max(s.start)), us(s.end.max(s.mid)));
            let (c1, c2) = if s.secondary {
                (SECONDARY_WAIT, SECONDARY_WORK)
            } else {
                (PRIMARY_WORK, PRIMARY_TAIL)
            };
            let h = row_h / 2.0;
            let _ = writeln!(
                o,
                r#"<rect x="{:.2}" y="{y:.2}" width="{:.2}" height="{h}" fill="{c1}" fill-opacity="0.85"/>"#,
                x(a),
                (x(m) - x(a)).max(0.5)
            );
            let _ = writeln!(
                o,
                r#"<rect x="{:.2}" y="{y:.2}" width="{:.2}" height="{h}" fill="{c2}" fill-opacity="0.85"/>"#,
                x(m),
                (x(e) - x(m)).max(0.5)
            );
        }
        // Markers: the primary's last block end, the secondary's first block start.
        let bottom = plot_top + f64::from(n_sm) * row_h;
        if let Some(pe) = prim_end {
            let px = x(us(pe));
            let _ = writeln!(
                o,
                r##"<line x1="{px:.2}" y1="{}" x2="{px:.2}" y2="{bottom}" stroke="#c53030" stroke-dasharray="4 3"/>"##,
                plot_top - 14.0
            );
            let _ = writeln!(
                o,
                r##"<text x="{:.2}" y="{}" fill="#c53030">primary done</text>"##,
                px + 3.0,
                plot_top - 4.0
            );
        }
        if let Some(ss) = sec_start {
            let sx = x(us(ss));
            let _ = writeln!(
                o,
                r##"<line x1="{sx:.2}" y1="{}" x2="{sx:.2}" y2="{bottom}" stroke="#2f855a" stroke-dasharray="2 2"/>"##,
                plot_top - 14.0
            );
            let _ = writeln!(
                o,
                r##"<text x="{:.2}" y="{}" fill="#2f855a" text-anchor="end">secondary starts</text>"##,
                sx - 3.0,
                plot_top - 4.0
            );
        }
        // Time axis.
        let step_us = nice_step(max_span_us);
        let mut t = 0.0;
        while t <= max_span_us + 1e-9 {
            let tx = x(t);
            let _ = writeln!(
                o,
                r##"<line x1="{tx:.2}" y1="{bottom}" x2="{tx:.2}" y2="{}" stroke="#666"/>"##,
                bottom + 4.0
            );
            let _ = writeln!(
                o,
                r#"<text x="{tx:.2}" y="{}" text-anchor="middle">{}</text>"#,
                bottom + 16.0,
                fmt_us(t)
            );
            t += step_us;
        }
        let _ = writeln!(
            o,
            r#"<text x="{}" y="{}" text-anchor="end">time since the pair's first block started (us)</text>"#,
            left + plot_w,
            bottom + 30.0
        );
    }
    o.push_str("</svg>\n");
    o
}

fn fmt_us(t: f64) -> String {
    let s = format!("{t:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s.is_empty() { "0".into() } else { s.into() }
}

/// Made-up stamps for two pairs on 132 SMs: with PDL the secondary's blocks start while
/// the primary runs and wait; without, they start after it.
fn synthetic_stamps() -> String {
    let mut seed = 0x2545_f491_u64;
    let mut jitter = |range: u64| {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (seed >> 33) % range
    };
    let mut s = String::from("pair,kernel,block,sm,start_ns,mid_ns,end_ns\n");
    for (pair, base, pdl) in [
        ("pdl", 1_000_000_000_000_u64, true),
        ("plain", 2_000_000_000_000, false),
    ] {
        let mut prim_end = 0;
        let mut prim = Vec::new();
        for b in 0..132u64 {
            let start = base + jitter(600);
            let mid = start + 3_000 + jitter(800);
            let end = mid + 50 + jitter(60);
            prim_end = prim_end.max(end);
            prim.push((b, start, mid, end));
        }
        for (b, start, mid, end) in prim {
            let _ = writeln!(s, "{pair},primary,{b},{b},{start},{mid},{end}");
        }
        for b in 0..132u64 {
            let start = if pdl {
                base + 1_200 + jitter(900)
            } else {
                prim_end + 1_800 + jitter(500)
            };
            let mid = if pdl {
                prim_end + 300 + jitter(200)
            } else {
                start + 400 + jitter(100)
            };
            let end = mid + 2_500 + jitter(600);
            let _ = writeln!(
                s,
                "{pair},secondary,{b},{},{start},{mid},{end}",
                (b + 7) % 132
            );
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synthetic_round_trip() {
        let stamps = parse(&synthetic_stamps()).unwrap();
        assert_eq!(stamps.len(), 4 * 132);
        let svg = render(&stamps);
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("pair `").count(), 2);
    }

    #[test]
    fn bad_rows_are_errors() {
        assert!(parse("pair,kernel,block,sm,start_ns,mid_ns,end_ns\n").is_err());
        assert!(parse("pdl,primary,0,0,1,2\n").is_err());
        assert!(parse("pdl,third,0,0,1,2,3\n").is_err());
    }

    #[test]
    fn ticks() {
        assert_eq!(nice_step(8.0), 1.0);
        assert_eq!(nice_step(9.0), 2.0);
        assert_eq!(fmt_us(2.5), "2.5");
        assert_eq!(fmt_us(0.0), "0");
    }
}
