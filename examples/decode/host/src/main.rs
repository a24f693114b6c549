//! One token of greedy decoding through a Llama-shaped decoder at batch 1, in Rust
//! kernels (../kernels), issued through six launch paths of the same kernels: plain
//! stream, stream with PDL, replay region, region with PDL, a captured graph, and the
//! graph with PDL.
//!
//! ```text
//! decode [--shape default|wide|small|tiny|D,LAYERS,HEADS,FFN,VOCAB,CACHE] [--steps 64]
//!        [--seed N] [--check-cpu] [--bench] [--rounds 5] [--ctas 3] [--out DIR] [--weights]
//!        [--print-ptx]
//! ```
//!
//! Every run decodes `--steps` tokens from the last positions of the cache on every
//! path and checks that all paths give the same tokens, each the arg-max of its logits.
//! `--check-cpu` also compares tokens and logits with the CPU reference (small shapes);
//! `--out DIR` writes `decode.json` (tokens, timings), `logits.f32` (per step) and, with
//! `--weights`, `weights.bin` for `reference/reference.py`; `--bench` times the paths,
//! measures the copy bandwidth the roofline divides by, the time each kernel adds to the
//! chain, and draws `timeline.svg` (one layer, without and with PDL).
//!
//! Without a GPU it prints one line saying so and exits successfully; a failed check
//! exits with status 1.

mod gpu;
mod model;
mod paths;
mod report;

use std::path::PathBuf;

use cudadrv::{Context, Device, Stream};

use gpu::{Kernels, Model, Trigger};
use model::{CpuModel, Shape, StepDiff, argmax, cpu_decode, cpu_forced, first_token};
use paths::{Path, PathRun, run_path};

/// The command line.
#[derive(Debug)]
pub struct Opts {
    pub shape: Shape,
    pub steps: usize,
    pub seed: u64,
    pub check_cpu: bool,
    pub bench: bool,
    pub rounds: usize,
    pub out: Option<PathBuf>,
    pub weights: bool,
    pub ctas: u32,
}

fn parse() -> Result<Opts, String> {
    let mut o = Opts {
        shape: Shape::DEFAULT,
        steps: 64,
        seed: 2026,
        check_cpu: false,
        bench: false,
        rounds: 5,
        out: None,
        weights: false,
        ctas: 3,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        // A number after `a`, named in its error.
        fn number<T: std::str::FromStr>(a: &str, v: String) -> Result<T, String>
        where
            T::Err: std::fmt::Display,
        {
            v.parse().map_err(|e| format!("{a}: {e}"))
        }
        match a.as_str() {
            "--shape" => o.shape = Shape::parse(&value("--shape")?)?,
            "--steps" => o.steps = number(&a, value(&a)?)?,
            "--seed" => o.seed = number(&a, value(&a)?)?,
            "--ctas" => o.ctas = number(&a, value(&a)?)?,
            "--rounds" => o.rounds = number(&a, value(&a)?)?,
            "--out" => o.out = Some(PathBuf::from(value("--out")?)),
            "--check-cpu" => o.check_cpu = true,
            "--bench" => o.bench = true,
            "--weights" => o.weights = true,
            _ => return Err(format!("unknown argument {a} (see the top of src/main.rs)")),
        }
    }
    if o.steps == 0 || o.steps > o.shape.cache {
        return Err(format!(
            "--steps: 1 to the cache's {} positions",
            o.shape.cache
        ));
    }
    if o.ctas == 0 || o.ctas > 8 {
        return Err("--ctas: 1 to 8 projection CTAs per SM".into());
    }
    if o.rounds == 0 {
        return Err("--rounds: at least 1".into());
    }
    Ok(o)
}

fn main() {
    if std::env::args().any(|a| a == "--print-ptx") {
        print!("{}", gpu::KERNELS.text());
        return;
    }
    let opts = match parse() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("decode: {e}");
            std::process::exit(2);
        }
    };
    let ctx = match Device::get(0).and_then(Context::primary) {
        Ok(ctx) => ctx,
        Err(why) => {
            println!("decode: no GPU, nothing was run: {why}");
            return;
        }
    };
    match run(&ctx, &opts) {
        Ok(()) => println!("decode: all values checked"),
        Err(e) => {
            eprintln!("decode: FAILED: {e}");
            std::process::exit(1);
        }
    }
}

type Res<T = ()> = Result<T, Box<dyn std::error::Error>>;

fn run(ctx: &Context, o: &Opts) -> Res {
    let s = o.shape;
    let device = ctx.device();
    println!(
        "decode: {} ({}), shape {s:?}, {} steps from position {}",
        device.name()?,
        cudadrv::driver::driver_version()?,
        o.steps,
        s.start(o.steps)
    );
    let (_module, ks) = Kernels::load(ctx)?;
    let mut stream = Stream::non_blocking(ctx)?;
    let t = std::time::Instant::now();
    let mut model = Model::new(ctx, &ks, s, o.seed, &stream)?;
    model.ctas = o.ctas;
    println!(
        "decode: {:.2} GB of weights and cache generated on the GPU in {:.2} s",
        (s.weight_bytes() + s.cache_bytes(s.cache - 1)) as f64 / 1e9,
        t.elapsed().as_secs_f64()
    );
    let slots = gpu::Launches::new(&s, &ks, false, Trigger::Exit, model.ctas)?.slots;
    let rings: Vec<String> = gpu::KINDS
        .iter()
        .zip(slots)
        .filter(|(_, n)| *n > 0)
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
    println!(
        "decode: {} projection CTAs an SM; ring slots per warp: {}",
        model.ctas,
        rings.join(", ")
    );
    let run = (first_token(&s, o.seed), s.start(o.steps), o.steps);

    // The checked run: plain launches, the logits of every step copied back.
    let (tokens, logits) = checked_run(&ks, &mut model, &stream, run)?;
    println!("decode: tokens {:?}", &tokens[..tokens.len().min(16)]);
    if o.check_cpu {
        check_cpu(&model, o, run, &tokens, &logits)?;
    }

    // Every path, the same tokens: the six paths, then (bench) PDL with the other
    // triggers, then the graph with the early trigger over resident projection CTAs per
    // SM (fewer leave room for the next kernel's CTAs to start and load their weights
    // early; more keep more loads in flight).
    let mut runs: Vec<(String, Path, Trigger, u32)> = Path::ALL
        .iter()
        .map(|&p| (p.name().to_string(), p, Trigger::Auto, model.ctas))
        .collect();
    if o.bench {
        for (name, trigger) in [("exit", Trigger::Exit), ("early", Trigger::Early)] {
            for p in [Path::StreamPdl, Path::GraphPdl] {
                runs.push((format!("{}/{name}", p.name()), p, trigger, model.ctas));
            }
        }
        for c in 1..=4 {
            runs.push((
                format!("graph+pdl/early/ctas{c}"),
                Path::GraphPdl,
                Trigger::Early,
                c,
            ));
        }
    }
    let rounds = if o.bench { o.rounds } else { 1 };
    let chosen = model.ctas;
    let mut results: Vec<(String, PathRun)> = Vec::with_capacity(runs.len());
    for (label, path, trigger, ctas) in runs {
        model.ctas = ctas;
        let r = run_path(
            ctx,
            &ks,
            &mut model,
            &mut stream,
            path,
            trigger,
            run,
            rounds,
        )?;
        if r.tokens != tokens {
            return Err(format!(
                "{label}: tokens {:?} differ from the stream's {:?}",
                r.tokens, tokens
            )
            .into());
        }
        results.push((label, r));
    }
    model.ctas = chosen;
    println!(
        "decode: {} paths decoded the same {} tokens",
        results.len(),
        tokens.len()
    );

    let bench = if o.bench {
        Some(report::bench(ctx, &ks, &mut model, &stream, run, &results)?)
    } else {
        None
    };
    if let Some(dir) = &o.out {
        std::fs::create_dir_all(dir)?;
        report::write_outputs(
            dir,
            &model,
            o,
            run,
            &tokens,
            &logits,
            &results,
            bench.as_ref(),
        )?;
    }
    Ok(())
}

/// Decodes on a plain stream, one step at a time, copying each step's logits back;
/// checks each token is the host's arg-max of its logits.
fn checked_run(
    ks: &Kernels,
    model: &mut Model,
    stream: &Stream,
    (first, start, steps): (u32, usize, usize),
) -> Res<(Vec<u32>, Vec<Vec<f32>>)> {
    let launches = gpu::Launches::new(&model.shape, ks, false, Trigger::Exit, model.ctas)?;
    model.reset(first, start)?;
    let mut logits = Vec::with_capacity(steps);
    for _ in 0..steps {
        model.step(ks, &mut gpu::On::Stream(stream), &launches, 0)?;
        stream.synchronize()?;
        let mut l = vec![0f32; model.shape.vocab];
        model.logits.copy_to_host(&mut l)?;
        logits.push(l);
    }
    let mut all = vec![0u32; model.shape.cache];
    model.tokens.copy_to_host(&mut all)?;
    let tokens = all[start..start + steps].to_vec();
    for (i, (t, l)) in tokens.iter().zip(&logits).enumerate() {
        if *t != argmax(l) || l.iter().any(|v| !v.is_finite()) {
            return Err(format!(
                "step {i}: token {t}, the logits' arg-max {} (or a logit not finite)",
                argmax(l)
            )
            .into());
        }
    }
    Ok((tokens, logits))
}

/// The GPU's generated weights equal the CPU generator's; its tokens equal the CPU
/// reference's, and its logits agree within bfloat16 tolerance.
fn check_cpu(
    model: &Model,
    o: &Opts,
    (first, start, steps): (u32, usize, usize),
    tokens: &[u32],
    logits: &[Vec<f32>],
) -> Res {
    let s = o.shape;
    let cpu = CpuModel::new(s, o.seed);
    // The caches only where no step wrote (positions before `start`).
    let written = |t: usize, i: usize| t >= 10 && (i / s.d) % s.cache >= start;
    for t in [0, 4, 9, 10, 11] {
        let gpu_bits = model.download(t)?;
        let cpu_bits: Vec<u16> = cpu.w[t]
            .iter()
            .map(|v| cudadrv::args::Bf16::from_f32(*v).to_bits())
            .collect();
        let differs = gpu_bits
            .iter()
            .zip(&cpu_bits)
            .enumerate()
            .any(|(i, (g, c))| g != c && !written(t, i));
        if gpu_bits.len() != cpu_bits.len() || differs {
            return Err(format!(
                "tensor {}: the GPU's generated values differ from the CPU's",
                model::tensors(&s)[t].name
            )
            .into());
        }
    }
    // Fed the GPU's tokens, step by step.
    let cpu_logits = cpu_forced(&cpu, first, start, tokens);
    let (mut worst, mut same, mut ties) = (0.0f32, 0, 0);
    for (i, ((g, c), &t)) in logits.iter().zip(&cpu_logits).zip(tokens).enumerate() {
        let d = StepDiff::new(g, c, t);
        worst = worst.max(d.max);
        if !d.within_tolerance() || !d.token_ok() {
            return Err(format!("step {i}: against the CPU reference {d:?}").into());
        }
        if d.same_token {
            same += 1;
        } else {
            ties += 1;
        }
    }
    let (free, _) = cpu_decode(&cpu, first, start, steps);
    let agree = free.iter().zip(tokens).take_while(|(a, b)| a == b).count();
    println!(
        "decode: CPU reference: {same} of {steps} tokens its arg-max ({ties} near ties), logits within {worst:.2e} of the largest; decoding on its own it agrees for the first {agree} steps"
    );
    Ok(())
}
