//! Lists the devices.
fn main() -> cudadrv::Result<()> {
    for i in 0..cudadrv::Device::count()? {
        println!("{i}: {}", cudadrv::Device::get(i)?.name()?);
    }
    Ok(())
}
