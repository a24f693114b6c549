//! Loads PTX and launches a kernel.
use cudarc::driver::{CudaContext, DriverError, LaunchConfig, PushKernelArg};
use cudarc::nvrtc::Ptx;

fn main() -> Result<(), DriverError> {
    let ctx = CudaContext::new(0)?;
    let stream = ctx.new_stream()?;
    let module = ctx.load_module(Ptx::from_src(include_str!("kernel.ptx")))?;
    let add_one = module.load_function("add_one")?;
    let n = 1024u32;
    let mut buf = stream.alloc_zeros::<u32>(n as usize)?;
    let cfg = LaunchConfig { grid_dim: (n / 128, 1, 1), block_dim: (128, 1, 1), shared_mem_bytes: 0 };
    let mut args = stream.launch_builder(&add_one);
    args.arg(&mut buf).arg(&n);
    // SAFETY: `add_one(buf, n)` adds one to `n` words of `buf`.
    unsafe { args.launch(cfg)? };
    let out = stream.memcpy_dtov(&buf)?;
    println!("{}", out.iter().sum::<u32>());
    Ok(())
}
