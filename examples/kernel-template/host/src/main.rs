//! Loads the kernels of ../kernels from the PTX build.rs embedded, launches them, and
//! checks every value: first `saxpy` (a safe launch in a `kernel::scope`), then, for
//! later, a Programmatic Dependent Launch pair (safe launches) and an mbarrier
//! producer/consumer (an `unsafe` typed launch).
//!
//! Without a GPU it prints one line saying so and exits successfully (as every example
//! of cudadrv does); a wrong value exits with status 1.
//!
//! `template-host --print-ptx` prints the embedded PTX (CI assembles it with ptxas).

use cudadrv::kernel::{self, DeviceSliceMut, KernelModule, KernelPtx, TypedKernel};
use cudadrv::{Context, Device, DeviceBuffer, LaunchConfig, Stream};
use template_kernels::{WORDS, consume, consumed, handoff, produce, produced, saxpy};

/// The PTX of ../kernels, built by build.rs from the same declarations this program
/// uses for its typed handles.
// SAFETY: build.rs compiles exactly the `template-kernels` crate this binary links for
// its host half, so each kernel in the PTX is the one its declaration describes.
static KERNELS: KernelPtx =
    unsafe { KernelPtx::new(include_str!(concat!(env!("OUT_DIR"), "/kernels.ptx"))) };

fn main() {
    if std::env::args().any(|a| a == "--print-ptx") {
        print!("{}", KERNELS.text());
        return;
    }
    let ctx = match Device::get(0).and_then(Context::primary) {
        Ok(ctx) => ctx,
        Err(why) => {
            // No driver or no device: not this program's failure.
            println!("template: no GPU, nothing was run: {why}");
            return;
        }
    };
    match run(&ctx) {
        Ok(()) => println!("template: all values checked"),
        Err(e) => {
            eprintln!("template: FAILED: {e}");
            std::process::exit(1);
        }
    }
}

fn run(ctx: &Context) -> Result<(), Box<dyn std::error::Error>> {
    let module = KernelModule::load(ctx, &KERNELS)?;
    // Typed handles: the parameter layout is checked against the driver's once, here.
    let saxpy = module.kernel::<saxpy>()?;
    let produce = module.kernel::<produce>()?;
    let consume = module.kernel::<consume>()?;
    let handoff: TypedKernel<handoff> = module.kernel()?;
    let stream = Stream::non_blocking(ctx)?;

    // 1. saxpy, safely: `x` is read and `y` written until the scope has waited for the
    // stream.
    let n = 1u32 << 20;
    let alpha = 2.0f32;
    let x_host: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let y_host = vec![1.0f32; n as usize];
    let x = DeviceBuffer::from_slice(ctx, &x_host)?;
    let mut y = DeviceBuffer::from_slice(ctx, &y_host)?;
    let cfg = LaunchConfig::new(n.div_ceil(256), 256);
    kernel::scope(ctx, |s| {
        let lane = s.lane(&stream)?;
        lane.launch(&saxpy, &cfg, (alpha, &x, &mut y))
    })?; // the stream is synchronized here; `y` is the host's again
    let mut got = vec![0.0f32; n as usize];
    y.copy_to_host(&mut got)?;
    if let Some(i) = (0..n as usize).find(|&i| got[i] != alpha * x_host[i] + y_host[i]) {
        return Err(format!(
            "saxpy: y[{i}] = {}, expected {}",
            got[i],
            alpha * x_host[i] + y_host[i]
        )
        .into());
    }
    println!("template: saxpy, {n} values checked");

    // The rest is for later: what PDL and mbarriers look like in this layout.

    // 2. The PDL pair, safely: `a` is written by `produce` and read by `consume`.
    let mut a = DeviceBuffer::<u32>::zeroed(ctx, n as usize)?;
    let mut b = DeviceBuffer::<u32>::zeroed(ctx, n as usize)?;
    let dependent = cfg.clone().programmatic_stream_serialization()?;
    kernel::scope(ctx, |s| {
        let lane = s.lane(&stream)?;
        let mut a = lane.own(&mut a)?;
        lane.launch(&produce, &cfg, (&mut a,))?;
        // `consume` is declared `dependent`: it waits for `produce` on the device.
        lane.launch(&consume, &dependent, (&a, &mut b))
    })?; // the stream is synchronized here; `a` and `b` are the host's again
    let mut got = vec![0u32; n as usize];
    b.copy_to_host(&mut got)?;
    if let Some(i) = (0..n).find(|&i| got[i as usize] != consumed(i)) {
        return Err(format!(
            "PDL pair: b[{i}] = {}, expected {}",
            got[i as usize],
            consumed(i)
        )
        .into());
    }
    a.copy_to_host(&mut got)?;
    if let Some(i) = (0..n).find(|&i| got[i as usize] != produced(i)) {
        return Err(format!("PDL pair: a[{i}] = {}", got[i as usize]).into());
    }
    println!("template: PDL pair, {n} values checked");

    // 3. The mbarrier hand-off (an `unsafe` kernel, so an `unsafe` launch).
    let blocks = 8u32;
    let seed = 1000u32;
    let out = DeviceBuffer::<u32>::zeroed(ctx, blocks as usize * WORDS)?;
    // SAFETY: `out` holds `blocks * WORDS` words, the kernel writes only through the
    // slice (bounds-checked) and the stream is synchronized before `out` is read or
    // dropped.
    unsafe {
        let slice = DeviceSliceMut::<u32>::from_raw_parts(out.as_raw() as *mut u32, out.len());
        handoff.launch(
            &LaunchConfig::new(blocks, 64).stream(&stream),
            &(slice, seed),
        )?;
    }
    stream.synchronize()?;
    let mut words = vec![0u32; out.len()];
    out.copy_to_host(&mut words)?;
    for (k, &v) in words.iter().enumerate() {
        let lane = (k % WORDS) as u32;
        let want = seed + lane * lane + lane;
        if v != want {
            return Err(format!("mbarrier hand-off: out[{k}] = {v}, expected {want}").into());
        }
    }
    println!(
        "template: mbarrier hand-off, {} values checked",
        words.len()
    );
    Ok(())
}
