//! Awaitable GPU work on the GPU (`cudadrv::driver::future`): completions awaited under
//! tokio's multi-threaded runtime are woken by the driver's host functions, not by a
//! polling thread.

use std::time::Instant;

use cuda_workspace::{Outcome, TestResult, check, check_eq, hw_tests, require_gpu, run_suite};
use cudadrv::{Context, Device, DeviceBuffer, Event, EventFlags, Stream, StreamFlags};

fn main() {
    run_suite(
        "hw_async",
        hw_tests![
            awaits_under_tokio_without_a_busy_thread,
            event_completion_under_tokio
        ],
    );
}

/// User plus system CPU time of the process, in seconds.
fn cpu_seconds() -> f64 {
    // SAFETY: `getrusage` fills the zeroed struct it is given.
    let usage = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut u);
        u
    };
    let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 * 1e-6;
    t(usage.ru_utime) + t(usage.ru_stime)
}

fn runtime() -> Result<tokio::runtime::Runtime, Outcome> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .build()
        .map_err(|e| Outcome::Fail(format!("tokio runtime: {e}")))
}

/// 1,000 awaits over four streams, each after 512 MiB of memset on its stream: every value
/// the work wrote is there after its await (checked every 50 rounds), some awaits found
/// the work still running (so the driver's host function woke them), and the process
/// used far less CPU time than the wall time (no thread polled while the GPU worked).
fn awaits_under_tokio_without_a_busy_thread() -> TestResult {
    require_gpu()?;
    let ctx = Context::primary(Device::get(0)?)?;
    const STREAMS: usize = 4;
    const ROUNDS: usize = 250;
    const WORDS: usize = 128 << 20; // 512 MiB: the GPU's time dominates the wall time
    let streams: Vec<Stream> = (0..STREAMS)
        .map(|_| Stream::new(&ctx, StreamFlags::NON_BLOCKING))
        .collect::<Result<_, _>>()?;
    let mut bufs: Vec<DeviceBuffer<u32>> = (0..STREAMS)
        .map(|_| DeviceBuffer::zeroed(&ctx, WORDS))
        .collect::<Result<_, _>>()?;
    let rt = runtime()?;
    let (cpu0, wall0) = (cpu_seconds(), Instant::now());
    let (pending, awaited) = rt.block_on(async {
        let (mut pending, mut awaited) = (0usize, 0usize);
        for round in 0..ROUNDS {
            let mut done = Vec::with_capacity(STREAMS);
            for (s, buf) in streams.iter().zip(bufs.iter_mut()) {
                buf.memset_d32_async((round * STREAMS) as u32, s)?;
                done.push(s.completed()?);
            }
            for d in done {
                pending += usize::from(!d.is_complete());
                d.await?;
                awaited += 1;
            }
            if round % 50 == 49 {
                let mut first = [0u32; 4];
                bufs[STREAMS - 1]
                    .view()
                    .slice(0..4)?
                    .copy_to_host(&mut first)?;
                if first != [(round * STREAMS) as u32; 4] {
                    return Err(cudadrv::Error::InvalidArgument(
                        "a value the awaited work wrote is missing",
                    ));
                }
            }
        }
        Ok::<_, cudadrv::Error>((pending, awaited))
    })?;
    let (cpu, wall) = (cpu_seconds() - cpu0, wall0.elapsed().as_secs_f64());
    drop(rt);
    println!(
        "    {awaited} awaits on {STREAMS} streams, {pending} found the work running: wall {:.1} ms, CPU {:.1} ms",
        wall * 1e3,
        cpu * 1e3
    );
    check_eq(awaited, STREAMS * ROUNDS, "awaits")?;
    check(pending > 0, || {
        "no await found the work still running".into()
    })?;
    check(cpu < 0.5 * wall, || {
        format!(
            "CPU time {:.1} ms is not well below the wall time {:.1} ms",
            cpu * 1e3,
            wall * 1e3
        )
    })
}

/// `Event::completed`: an event recorded after work on one stream, awaited on another:
/// after the await the work's values are there.
fn event_completion_under_tokio() -> TestResult {
    require_gpu()?;
    let ctx = Context::primary(Device::get(0)?)?;
    let work = Stream::new(&ctx, StreamFlags::NON_BLOCKING)?;
    let mut waiter = Stream::new(&ctx, StreamFlags::NON_BLOCKING)?;
    let mut buf = DeviceBuffer::<u32>::zeroed(&ctx, 64 << 20)?;
    let ev = Event::new(&ctx, EventFlags::DISABLE_TIMING)?;
    let rt = runtime()?;
    for value in [7u32, 11, 13] {
        buf.memset_d32_async(value, &work)?;
        ev.record(&work)?;
        let done = ev.completed(&mut waiter)?;
        rt.block_on(done)?;
        let mut last = [0u32; 1];
        buf.view()
            .slice((64 << 20) - 1..)?
            .copy_to_host(&mut last)?;
        check_eq(last[0], value, "the last word after the event's completion")?;
    }
    Ok(())
}
