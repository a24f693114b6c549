//! Host to device and back.
use cudarc::driver::{CudaContext, DriverError};

fn main() -> Result<(), DriverError> {
    let stream = CudaContext::new(0)?.default_stream();
    let host: Vec<u32> = (0..1024).collect();
    let buf = stream.memcpy_stod(&host)?;
    let back = stream.memcpy_dtov(&buf)?;
    assert_eq!(host, back);
    Ok(())
}
