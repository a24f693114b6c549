//! Host to device and back.
use cudadrv::{Context, Device, DeviceBuffer};

fn main() -> cudadrv::Result<()> {
    let ctx = Context::primary(Device::get(0)?)?;
    let host: Vec<u32> = (0..1024).collect();
    let mut buf = DeviceBuffer::<u32>::new(&ctx, host.len())?;
    buf.copy_from_host(&host)?;
    let mut back = vec![0u32; host.len()];
    buf.copy_to_host(&mut back)?;
    assert_eq!(host, back);
    Ok(())
}
