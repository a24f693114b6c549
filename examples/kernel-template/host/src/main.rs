//! Loads the kernels of ../kernels from the PTX build.rs embedded, launches them, and
//! checks every value: a Programmatic Dependent Launch pair (safe launches in a
//! `kernel::scope`) and an mbarrier producer/consumer (an `unsafe` typed launch).
//!
//! `template-host --print-ptx` prints the embedded PTX (CI assembles it with ptxas).

use cudadrv::kernel::{self, DeviceSliceMut, KernelModule, KernelPtx, TypedKernel};
use cudadrv::{Context, Device, DeviceBuffer, LaunchConfig, Stream};
use template_kernels::{WORDS, consume, consumed, handoff, produce, produced};

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
    match run() {
        Ok(()) => println!("template: all values checked"),
        Err(e) => {
            eprintln!("template: FAILED: {e}");
            std::process::exit(1);
        }
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let ctx = Context::primary(Device::get(0)?)?;
    let module = KernelModule::load(&ctx, &KERNELS)?;
    // Typed handles: the parameter layout is checked against the driver's once, here.
    let produce = module.kernel::<produce>()?;
    let consume = module.kernel::<consume>()?;
    let handoff: TypedKernel<handoff> = module.kernel()?;

    // 1. The PDL pair, safely: `a` is written by `produce` and read by `consume`.
    let n = 1u32 << 20;
    let mut a = DeviceBuffer::<u32>::zeroed(&ctx, n as usize)?;
    let mut b = DeviceBuffer::<u32>::zeroed(&ctx, n as usize)?;
    let stream = Stream::non_blocking(&ctx)?;
    let cfg = LaunchConfig::new(n.div_ceil(256), 256);
    let dependent = cfg.clone().programmatic_stream_serialization()?;
    kernel::scope(&ctx, |s| {
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

    // 2. The mbarrier hand-off (an `unsafe` kernel, so an `unsafe` launch).
    let blocks = 8u32;
    let seed = 1000u32;
    let out = DeviceBuffer::<u32>::zeroed(&ctx, blocks as usize * WORDS)?;
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
