//! The benchmark's figures (per-token latency per path, the roofline, what each kernel
//! adds to the chain), the timeline SVG, and the files `reference/reference.py` reads.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path as FsPath;

use cudadrv::{Context, Stream};

use crate::gpu::{KINDS, Kernels, Model, Trigger, kernels_per_step};
use crate::model::{Shape, rope, tensors};
use crate::paths::{PathRun, copy_bandwidth, traced};
use crate::{Opts, Res};

/// One kernel kind's figures, averaged over its launches in the traced steps.
pub struct KernelRow {
    pub name: &'static str,
    /// Bytes one launch must read (weights, cache; the activations are negligible).
    pub bytes: f64,
    /// Microseconds it adds to the chain (its end minus the previous kernel's end), with
    /// PDL and without.
    pub chain_us_pdl: f64,
    pub chain_us: f64,
    /// With PDL: microseconds from the previous kernel's end to this one's first CTA
    /// start and to its first CTA past the wait (negative: before that end).
    pub start_us_pdl: f64,
    pub wait_us_pdl: f64,
}

/// The benchmark.
pub struct Bench {
    pub copy_gbps: f64,
    pub step_bytes: f64,
    pub roofline_ms: f64,
    /// Median milliseconds per token, per path.
    pub paths: Vec<(String, f64)>,
    pub kernels: Vec<KernelRow>,
    pub svg: String,
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s.get(s.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Bytes kernel `j` of a step at position `pos` reads.
fn kernel_bytes(s: &Shape, j: usize, pos: usize) -> f64 {
    let (d, f, v) = (s.d as f64, s.ffn as f64, s.vocab as f64);
    let last = 1 + 5 * s.layers;
    if j == 0 {
        2.0 * d
    } else if j == last {
        2.0 * v * d
    } else if j == last + 1 {
        // The arg-max key.
        8.0
    } else {
        match (j - 1) % 5 {
            0 => 2.0 * 3.0 * d * d,
            1 => 2.0 * 2.0 * (pos as f64 + 1.0) * d,
            2 => 2.0 * d * d,
            3 => 2.0 * 2.0 * f * d,
            _ => 2.0 * d * f,
        }
    }
}

/// The kind (index into [`KINDS`]) of kernel `j` of a step.
fn kind(s: &Shape, j: usize) -> usize {
    let last = 1 + 5 * s.layers;
    if j == 0 {
        0
    } else if j == last {
        6
    } else if j == last + 1 {
        7
    } else {
        1 + (j - 1) % 5
    }
}

/// Per kind: (bytes per launch, microseconds added to the chain), averaged over the
/// traced steps.
fn per_kind(s: &Shape, trace: &[[u64; 3]], start: usize) -> Vec<[f64; 4]> {
    let per = kernels_per_step(s);
    let mut sum = vec![([0.0f64; 4], 0usize); KINDS.len()];
    for (i, t) in trace.iter().enumerate() {
        let (step, j) = (i / per, i % per);
        let prev_end = if i == 0 { t[0] } else { trace[i - 1][2] };
        let us = |at: u64| (at as i64 - prev_end as i64) as f64 / 1e3;
        let k = kind(s, j);
        let row = [
            kernel_bytes(s, j, start + step),
            us(t[2]).max(0.0),
            us(t[0]),
            us(t[1]),
        ];
        for (a, v) in sum[k].0.iter_mut().zip(row) {
            *a += v;
        }
        sum[k].1 += 1;
    }
    sum.iter()
        .map(|(v, n)| v.map(|x| x / (*n).max(1) as f64))
        .collect()
}

/// Times are in; measures the rest: the copy bandwidth, the traced runs, the timeline.
pub fn bench(
    ctx: &Context,
    ks: &Kernels,
    model: &mut Model,
    stream: &Stream,
    run: (u32, usize, usize),
    results: &[(String, PathRun)],
) -> Res<Bench> {
    let s = model.shape;
    let (_, start, steps) = run;
    let copy_gbps = copy_bandwidth(ctx, stream)?;
    let cache: f64 = (0..steps)
        .map(|i| s.cache_bytes(start + i) as f64)
        .sum::<f64>()
        / steps as f64;
    let step_bytes = s.weight_bytes() as f64 + cache;
    let roofline_ms = step_bytes / (copy_gbps * 1e9) * 1e3;
    let paths: Vec<(String, f64)> = results
        .iter()
        .map(|(n, r)| (n.clone(), median(&r.ms_per_token)))
        .collect();

    let plain = traced(ctx, ks, model, stream, false, Trigger::Exit, run)?;
    // PDL with the trigger right after each kernel's wait: the fastest of the three.
    let pdl = traced(ctx, ks, model, stream, true, Trigger::Early, run)?;
    let a = per_kind(&s, &plain, start);
    let b = per_kind(&s, &pdl, start);
    let kernels = KINDS
        .iter()
        .enumerate()
        .map(|(k, name)| KernelRow {
            name,
            bytes: b[k][0],
            chain_us_pdl: b[k][1],
            chain_us: a[k][1],
            start_us_pdl: b[k][2],
            wait_us_pdl: b[k][3],
        })
        .collect();
    let svg = timeline(&s, &plain, &pdl, steps);

    println!(
        "decode: copy bandwidth {copy_gbps:.0} GB/s; a step reads {:.3} GB (weights {:.3}, cache {:.3} on average): roofline {roofline_ms:.3} ms",
        step_bytes / 1e9,
        s.weight_bytes() as f64 / 1e9,
        cache / 1e9
    );
    println!(
        "decode: {:<22} {:>10} {:>10}",
        "path", "ms/token", "roofline"
    );
    for (name, ms) in &paths {
        println!(
            "decode: {name:<22} {ms:>10.4} {:>9.1}%",
            100.0 * roofline_ms / ms
        );
    }
    println!(
        "decode: {:<12} {:>10} {:>12} {:>8} {:>12} {:>8} {:>8} {:>8}",
        "kernel", "MB/launch", "us (PDL)", "of bw", "us (plain)", "of bw", "start", "wait"
    );
    let bench = Bench {
        copy_gbps,
        step_bytes,
        roofline_ms,
        paths,
        kernels,
        svg,
    };
    for k in &bench.kernels {
        let share = |us: f64| 100.0 * k.bytes / (us * 1e-6) / (copy_gbps * 1e9);
        println!(
            "decode: {:<12} {:>10.2} {:>12.2} {:>7.1}% {:>12.2} {:>7.1}% {:>8.2} {:>8.2}",
            k.name,
            k.bytes / 1e6,
            k.chain_us_pdl,
            share(k.chain_us_pdl),
            k.chain_us,
            share(k.chain_us),
            k.start_us_pdl,
            k.wait_us_pdl
        );
    }
    Ok(bench)
}

/// One layer of the last traced step (the middle layer), without and with PDL: per
/// kernel a bar from its first CTA's start to its last CTA's end, lighter until its
/// first CTA passed the wait.
fn timeline(s: &Shape, plain: &[[u64; 3]], pdl: &[[u64; 3]], steps: usize) -> String {
    let per = kernels_per_step(s);
    let first = (steps - 1) * per + 1 + 5 * (s.layers / 2);
    let lanes = [("stream", plain), ("stream + PDL", pdl)];
    let t0 = |tr: &[[u64; 3]]| tr[first][0].min(tr[first - 1][2]);
    let span = lanes
        .iter()
        .map(|(_, tr)| tr[first + 4][2].saturating_sub(t0(tr)))
        .max()
        .unwrap_or(1)
        .max(1) as f64
        / 1e3;
    let (left, width, lane_h) = (110.0, 860.0, 120.0);
    let x = |us: f64| left + width * us / span;
    let colors = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#b07aa1"];
    let mut out = String::new();
    let h = 60.0 + lane_h * lanes.len() as f64;
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="1000" height="{h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(
        out,
        r#"<text x="10" y="18" font-size="14">One layer of a decode step ({} x {}, FFN {}): per kernel, first CTA start to last CTA end; lighter until the wait passed</text>"#,
        s.layers, s.d, s.ffn
    );
    let mut tick = 0.0;
    let step = if span > 60.0 { 10.0 } else { 5.0 };
    while tick <= span {
        let _ = writeln!(
            out,
            r##"<line x1="{0:.1}" y1="30" x2="{0:.1}" y2="{1}" stroke="#ddd"/><text x="{0:.1}" y="{2}" text-anchor="middle">{tick} us</text>"##,
            x(tick),
            h - 20.0,
            h - 6.0
        );
        tick += step;
    }
    for (li, (name, tr)) in lanes.iter().enumerate() {
        let top = 40.0 + lane_h * li as f64;
        let base = t0(tr);
        let _ = writeln!(out, r#"<text x="10" y="{}">{name}</text>"#, top + 50.0);
        for k in 0..5 {
            let [st, wt, en] = tr[first + k];
            let (a, b, c) = (
                st.saturating_sub(base) as f64 / 1e3,
                wt.saturating_sub(base) as f64 / 1e3,
                en.saturating_sub(base) as f64 / 1e3,
            );
            let y = top + 20.0 * k as f64;
            let col = colors[k];
            let _ = writeln!(
                out,
                r##"<rect x="{:.1}" y="{y}" width="{:.1}" height="16" fill="{col}" opacity="0.35"/><rect x="{:.1}" y="{y}" width="{:.1}" height="16" fill="{col}"/><text x="{:.1}" y="{}" fill="#333">{}</text>"##,
                x(a),
                (x(b) - x(a)).max(0.5),
                x(b),
                (x(c) - x(b)).max(0.5),
                x(c) + 4.0,
                y + 12.0,
                KINDS[1 + k]
            );
        }
    }
    out.push_str("</svg>\n");
    out
}

/// `decode.json`, `logits.f32`, `timeline.svg`, and with `--weights` `weights.bin`.
#[allow(clippy::too_many_arguments)]
pub fn write_outputs(
    dir: &FsPath,
    model: &Model,
    o: &Opts,
    (first, start, steps): (u32, usize, usize),
    tokens: &[u32],
    logits: &[Vec<f32>],
    results: &[(String, PathRun)],
    bench: Option<&Bench>,
) -> Res {
    let s = model.shape;
    let mut j = String::new();
    let _ = write!(
        j,
        "{{\n  \"shape\": {{\"d\": {}, \"layers\": {}, \"heads\": {}, \"ffn\": {}, \"vocab\": {}, \"cache\": {}}},\n  \"seed\": {}, \"first\": {first}, \"start\": {start}, \"steps\": {steps},\n  \"tokens\": {tokens:?},\n",
        s.d, s.layers, s.heads, s.ffn, s.vocab, s.cache, o.seed
    );
    let _ = write!(j, "  \"paths\": {{");
    for (i, (name, r)) in results.iter().enumerate() {
        let sep = if i == 0 { "" } else { "," };
        let _ = write!(j, "{sep}\n    \"{name}\": {:?}", r.ms_per_token);
    }
    let _ = write!(j, "\n  }}");
    if let Some(b) = bench {
        let _ = write!(
            j,
            ",\n  \"copy_gbps\": {:.1}, \"step_bytes\": {:.0}, \"roofline_ms\": {:.5},\n  \"kernels\": [",
            b.copy_gbps, b.step_bytes, b.roofline_ms
        );
        for (i, k) in b.kernels.iter().enumerate() {
            let sep = if i == 0 { "" } else { "," };
            let _ = write!(
                j,
                "{sep}\n    {{\"name\": \"{}\", \"bytes\": {:.0}, \"chain_us_pdl\": {:.3}, \"chain_us\": {:.3}}}",
                k.name, k.bytes, k.chain_us_pdl, k.chain_us
            );
        }
        let _ = write!(j, "\n  ],\n  \"median_ms\": {{");
        for (i, (name, ms)) in b.paths.iter().enumerate() {
            let sep = if i == 0 { "" } else { "," };
            let _ = write!(j, "{sep}\n    \"{name}\": {ms:.5}");
        }
        let _ = write!(j, "\n  }}");
        std::fs::write(dir.join("timeline.svg"), &b.svg)?;
    }
    j.push_str("\n}\n");
    std::fs::write(dir.join("decode.json"), j)?;
    let mut f = std::io::BufWriter::new(std::fs::File::create(dir.join("logits.f32"))?);
    for l in logits {
        for v in l {
            f.write_all(&v.to_le_bytes())?;
        }
    }
    f.flush()?;
    if o.weights {
        write_weights(&dir.join("weights.bin"), model)?;
    }
    println!("decode: wrote {}", dir.display());
    Ok(())
}

/// `weights.bin`: `DECODE01`, the header's length (`u64`, little-endian), the JSON
/// header (each tensor's name, dtype, shape and byte offset from the data's start), zero
/// padding to 64 bytes, then the data: every tensor as [`tensors`] lists them (bfloat16,
/// `[layers][rows][cols]` for per-layer ones; the caches as generated, before decoding),
/// then the rotary table (`f32`, `[2][cache][64]`).
fn write_weights(path: &FsPath, model: &Model) -> Res {
    let s = model.shape;
    let ts = tensors(&s);
    let mut header = String::from("{\"tensors\": [");
    let mut offset = 0usize;
    for (i, t) in ts.iter().enumerate() {
        let layers = if t.per_layer { s.layers } else { 1 };
        let sep = if i == 0 { "" } else { ", " };
        let _ = write!(
            header,
            "{sep}{{\"name\": \"{}\", \"dtype\": \"bf16\", \"shape\": [{layers}, {}, {}], \"offset\": {offset}}}",
            t.name, t.rows, t.cols
        );
        offset += 2 * layers * t.len();
    }
    let _ = write!(
        header,
        ", {{\"name\": \"rope\", \"dtype\": \"f32\", \"shape\": [2, {}, 64], \"offset\": {offset}}}]}}",
        s.cache
    );
    let mut f = std::io::BufWriter::with_capacity(1 << 24, std::fs::File::create(path)?);
    f.write_all(b"DECODE01")?;
    f.write_all(&(header.len() as u64).to_le_bytes())?;
    f.write_all(header.as_bytes())?;
    let pad = (64 - (16 + header.len()) % 64) % 64;
    f.write_all(&vec![0u8; pad])?;
    // The caches on the device were written by the decoding; the file gets the
    // generator's values, regenerated on the host.
    for (i, t) in ts.iter().enumerate() {
        let bits: Vec<u16> = if t.name.ends_with("cache") {
            let seed = model.seed;
            (0..s.layers)
                .flat_map(|l| (0..t.len()).map(move |k| t.value(seed, l, k).to_bits()))
                .collect()
        } else {
            model.download(i)?
        };
        let bytes: Vec<u8> = bits.iter().flat_map(|b| b.to_le_bytes()).collect();
        f.write_all(&bytes)?;
    }
    for v in rope(&s) {
        f.write_all(&v.to_le_bytes())?;
    }
    f.flush()?;
    Ok(())
}
