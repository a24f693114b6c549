//! Start here: the smallest useful program. Two vectors go to the GPU, a kernel adds
//! them (`c[i] = a[i] + b[i]`), and the host checks every sum.
//!
//! ```sh
//! cargo run --release --example vector_add
//! # and the same launch of a C++ kernel compiled by nvcc:
//! nvcc -arch=sm_90 -ptx xtask/cpp/vector_add.cu -o vector_add.ptx
//! cargo run --release --example vector_add -- --cpp-ptx vector_add.ptx
//! ```
//!
//! 1. The kernel written in Rust: `ptx/src/vector_add.rs` declares it once with
//!    `cudadrv::kernel!`. `cargo xtask ptx` compiled that file for the GPU into
//!    `ptx/generated/kernels.ptx` (committed, so no nightly toolchain is needed here), and
//!    this program includes the same file for the typed host handle. The kernel is
//!    `safe` (its body cannot use `unsafe`), so its launch is safe: `kernel::scope`
//!    borrows the buffers until the GPU is done with them.
//! 2. With `--cpp-ptx FILE`: the same sum by the C++ kernel of `xtask/cpp/vector_add.cu`,
//!    compiled by nvcc. Its typed handle is checked against the kernel's parameters when
//!    it is loaded, but no Rust compiler saw its body, so its launch is `unsafe`.
//!
//! Without a GPU it prints one line saying so and exits successfully; a wrong sum exits
//! with status 1. Next: `pdl_demo` (two kernels overlapping with Programmatic Dependent
//! Launch), `examples/kernel-template` (your own kernels crate).

mod common;

use cudadrv::kernel::{self, KernelModule, TypedKernel};
use cudadrv::{Context, DeviceBuffer, LaunchConfig, Module, Stream};

/// The Rust kernel: the file `cargo xtask ptx` compiles for the device. On the host its
/// `kernel!` declaration is the typed handle `kernels::vector_add` (the body is not
/// compiled here).
#[path = "../ptx/src/vector_add.rs"]
mod kernels;

/// The C++ kernel of `xtask/cpp/vector_add.cu`. The `extern fn` form declares a kernel
/// built elsewhere, in the C++ parameter types (a `float*` is a `DevicePtr<f32>`).
mod cpp {
    use cudadrv::DevicePtr;

    cudadrv::kernel! {
        /// `vector_add(const float *a, const float *b, float *c, unsigned n)`.
        pub extern fn vector_add(a: DevicePtr<f32>, b: DevicePtr<f32>, c: DevicePtr<f32>, n: u32);
    }
}

/// Elements per vector.
const N: usize = 1 << 20;
/// Threads per block; the grid has one thread per element.
const BLOCK: u32 = 256;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let cpp_ptx = common::arg_value(&args, "--cpp-ptx");
    // Device 0's primary context, or the no-GPU line and exit status 0.
    let ctx = common::gpu_or_exit("vector_add");
    if let Err(e) = run(&ctx, cpp_ptx.as_deref()) {
        eprintln!("vector_add: error: {e}");
        std::process::exit(1);
    }
}

fn run(ctx: &Context, cpp_ptx: Option<&str>) -> common::R {
    let dev = ctx.device();
    let (major, minor) = dev.compute_capability()?;
    println!("vector_add: {} (sm_{major}{minor})", dev.name()?);
    if major < 9 {
        println!("vector_add: the PTX here is built for sm_90; nothing was run on this GPU.");
        return Ok(());
    }

    // The inputs, made on the host and copied to the device; the output, filled with NaN
    // so that a launch that wrote nothing fails the check.
    let a_host: Vec<f32> = (0..N).map(|i| i as f32).collect();
    let b_host: Vec<f32> = (0..N).map(|i| 2.0 * i as f32).collect();
    let a = DeviceBuffer::from_slice(ctx, &a_host)?;
    let b = DeviceBuffer::from_slice(ctx, &b_host)?;
    let mut c = DeviceBuffer::<f32>::new(ctx, N)?;
    c.memset_d32(f32::NAN.to_bits())?;
    let stream = Stream::non_blocking(ctx)?;
    let cfg = LaunchConfig::new((N as u32).div_ceil(BLOCK), BLOCK);

    // 1. The Rust kernel. `ptx::TRUSTED` is kernels.ptx marked as rustc's output, which
    // is what lets a `safe` kernel from it launch without `unsafe`; loading the kernel
    // checks its parameters against the driver's view (`cuFuncGetParamInfo`).
    let module = KernelModule::load(ctx, &cuda_workspace::ptx::TRUSTED)?;
    let add = module.kernel::<kernels::vector_add>()?;
    kernel::scope(ctx, |s| {
        let lane = s.lane(&stream)?; // launches on `stream`
        lane.launch(&add, &cfg, (&a, &b, &mut c)) // `a`, `b` read; `c` written
    })?; // the scope waited for the stream: `c` is the host's again
    check(&c, &a_host, &b_host, "Rust kernel (ptx/src/vector_add.rs)")?;

    // 2. The C++ kernel, from PTX that nvcc made.
    let Some(path) = cpp_ptx else {
        println!(
            "vector_add: no --cpp-ptx: the nvcc kernel was not run (nvcc -arch=sm_90 -ptx xtask/cpp/vector_add.cu -o vector_add.ptx, then --cpp-ptx vector_add.ptx)"
        );
        return Ok(());
    };
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    let module = Module::from_ptx(ctx, &text)?;
    let add = TypedKernel::<cpp::vector_add>::from_module(&module)?; // parameters checked
    c.memset_d32(f32::NAN.to_bits())?;
    // SAFETY: `unsafe` because the compiler never saw the C++ body: what it promises is
    // read from its source, xtask/cpp/vector_add.cu: thread i < n reads a[i] and b[i] and
    // writes c[i], nothing else. `a`, `b` and `c` hold N = n floats each, `c` overlaps
    // neither input, and all three live until after the stream is synchronized below;
    // nothing else uses them meanwhile.
    unsafe {
        add.launch(
            &cfg.clone().stream(&stream),
            &(a.as_arg(), b.as_arg(), c.as_arg(), N as u32),
        )?;
    }
    stream.synchronize()?;
    check(&c, &a_host, &b_host, "C++ kernel (nvcc)")
}

/// Copies `c` back and compares every element with `a[i] + b[i]` computed on the host.
fn check(c: &DeviceBuffer<f32>, a: &[f32], b: &[f32], what: &str) -> common::R {
    let mut got = vec![0.0f32; c.len()];
    c.copy_to_host(&mut got)?;
    if let Some(i) = (0..got.len()).find(|&i| got[i] != a[i] + b[i]) {
        return Err(format!("{what}: c[{i}] = {}, expected {}", got[i], a[i] + b[i]).into());
    }
    println!("vector_add: {what}: all {} sums correct", got.len());
    Ok(())
}
