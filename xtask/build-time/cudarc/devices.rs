//! Lists the devices.
use cudarc::driver::{CudaContext, DriverError};

fn main() -> Result<(), DriverError> {
    for i in 0..CudaContext::device_count()? {
        println!("{i}: {}", CudaContext::new(i as usize)?.name()?);
    }
    Ok(())
}
