//! Times a copy between two events.
use cudadrv::{Context, Device, DeviceBuffer, Event, EventFlags, Stream, StreamFlags};

fn main() -> cudadrv::Result<()> {
    let ctx = Context::primary(Device::get(0)?)?;
    let stream = Stream::new(&ctx, StreamFlags::NON_BLOCKING)?;
    let (start, end) = (Event::new(&ctx, EventFlags::empty())?, Event::new(&ctx, EventFlags::empty())?);
    let mut buf = DeviceBuffer::<u8>::new(&ctx, 1 << 20)?;
    start.record(&stream)?;
    buf.copy_from_host(&vec![1u8; 1 << 20])?;
    end.record(&stream)?;
    end.synchronize()?;
    println!("{} ms", Event::elapsed_ms(&start, &end)?);
    Ok(())
}
