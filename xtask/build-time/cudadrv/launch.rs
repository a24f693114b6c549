//! Loads PTX and launches a kernel.
use cudadrv::launch::{LaunchConfig, launch};
use cudadrv::{Context, Device, DeviceBuffer, Module, Stream, StreamFlags};

fn main() -> cudadrv::Result<()> {
    let ctx = Context::primary(Device::get(0)?)?;
    let stream = Stream::new(&ctx, StreamFlags::NON_BLOCKING)?;
    let module = Module::from_ptx(&ctx, concat!(include_str!("kernel.ptx"), "\0"))?;
    let add_one = module.function("add_one")?;
    let n = 1024u32;
    let buf = DeviceBuffer::<u32>::zeroed(&ctx, n as usize)?;
    let cfg = LaunchConfig::new(n / 128, 128).stream(&stream);
    // SAFETY: `add_one(buf, n)` adds one to `n` words of `buf`.
    unsafe { launch(&add_one, &cfg, &(buf.as_arg(), n))? };
    stream.synchronize()?;
    let mut out = vec![0u32; n as usize];
    buf.copy_to_host(&mut out)?;
    println!("{}", out.iter().sum::<u32>());
    Ok(())
}
