//! Times a copy between two events.
use cudarc::driver::{CudaContext, DriverError, sys::CUevent_flags};

fn main() -> Result<(), DriverError> {
    let ctx = CudaContext::new(0)?;
    let stream = ctx.new_stream()?;
    let start = ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?;
    let end = ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?;
    let mut buf = stream.alloc_zeros::<u8>(1 << 20)?;
    start.record(&stream)?;
    stream.memcpy_htod(&vec![1u8; 1 << 20], &mut buf)?;
    end.record(&stream)?;
    end.synchronize()?;
    println!("{} ms", start.elapsed_ms(&end)?);
    Ok(())
}
