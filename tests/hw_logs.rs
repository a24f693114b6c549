//! Hardware tests of error log management (`cuLogs*`, CUDA 12.9+): a launch the driver
//! rejects (more threads per block than a block holds) writes a log line that a
//! registered callback receives, that a dump shows and that `Error::driver_log`
//! returns; a dropped callback guard is no longer called.
//!
//! If the driver writes no line for a rejected launch, these tests fail and say so (the
//! text of every dump is printed), rather than pass without having seen a line.
//!
//! Kernels come from `ptx/generated/kernels.ptx` (`write_value`: `out[0] = value`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cuda_workspace::{TestResult, check, check_eq, hw_tests, ptx, require_gpu, run_suite, skip};
use cudadrv::launch::{LaunchConfig, launch};
use cudadrv::logs::{self, LogCallback, LogLevel, MAX_LOG_BYTES};
use cudadrv::{Context, Device, DeviceBuffer, Error, Function, Module, Stream};

fn main() {
    run_suite(
        "hw_logs",
        hw_tests![
            rejected_launch_reaches_callback_dump_and_error,
            fn_callback_and_dump_to_file,
            successful_launch_writes_no_error_line,
        ],
    );
}

/// The launch call cuda-core makes; the driver's log names it as the entry point.
const LAUNCH_CALL: &str = "cuLaunchKernelEx";

/// A GPU whose driver has the log API (CUDA 12.9), else a skip.
fn require_logs() -> TestResult {
    let g = require_gpu()?;
    match logs::current() {
        Ok(_) => Ok(()),
        Err(e @ (Error::DriverTooOld { .. } | Error::MissingSymbol(_))) => skip(format!(
            "driver {}.{} has no error log API: {e}",
            g.driver_version / 1000,
            g.driver_version % 1000 / 10
        )),
        Err(e) => Err(e.into()),
    }
}

struct Setup {
    stream: Stream,
    write_value: Function,
    out: DeviceBuffer<u32>,
}

fn setup() -> Result<Setup, Error> {
    let ctx = Context::primary(Device::get(0)?)?;
    let m = Module::from_ptx(&ctx, ptx::KERNELS)?;
    Ok(Setup {
        stream: Stream::non_blocking(&ctx)?,
        write_value: m.function("write_value")?,
        out: DeviceBuffer::<u32>::zeroed(&ctx, 1)?,
    })
}

/// Launches `write_value` with `block` threads per block (2048: more than any GPU
/// allows, so the driver refuses it).
fn launch_with_block(s: &Setup, block: u32) -> Result<(), Error> {
    let cfg = LaunchConfig::new(1, block).stream(&s.stream);
    // SAFETY: write_value(u32*, u32) on a live one-element buffer, synchronized by the
    // callers before the buffer is dropped (a refused launch runs nothing).
    unsafe { launch(&s.write_value, &cfg, &(s.out.as_arg(), 7u32)) }
}

/// A launch that must be refused; its error.
fn rejected_launch(s: &Setup) -> Result<Error, cuda_workspace::Outcome> {
    match launch_with_block(s, 2048) {
        Err(e @ Error::Driver { .. }) => {
            println!("    rejected launch: {e}");
            Ok(e)
        }
        other => Err(cuda_workspace::Outcome::Fail(format!(
            "a 2048-thread block was not refused by the driver: {other:?}"
        ))),
    }
}

/// Dumps what was written since `it` (moving it), prints it under `label`.
fn dump_since(it: &mut logs::LogIterator, label: &str) -> Result<String, Error> {
    let mut buf = vec![0u8; MAX_LOG_BYTES];
    let text = logs::dump_to_memory(Some(it), &mut buf)?.to_owned();
    if text.is_empty() {
        println!("    {label}: the driver's log has no new line");
    } else {
        println!("    {label}:");
        for line in text.lines() {
            println!("      {line}");
        }
    }
    Ok(text)
}

/// Gives a callback on another driver thread (if the driver used one) time to run.
fn settle() {
    std::thread::sleep(Duration::from_millis(50));
}

/// A closure callback receives the line of a rejected launch; the dump since the
/// launch holds it; `Error::driver_log` returns its message; after the guard is dropped
/// the closure is freed and a second rejected launch (which the driver logs, checked by
/// a dump) does not reach it.
fn rejected_launch_reaches_callback_dump_and_error() -> TestResult {
    require_logs()?;
    let s = setup()?;
    let seen: Arc<Mutex<Vec<(LogLevel, String)>>> = Arc::default();
    let keep = Arc::clone(&seen);
    let guard = LogCallback::register_closure(move |level, text| {
        keep.lock().unwrap().push((level, text.to_owned()));
    })?;
    let mut it = logs::current()?;

    let e = rejected_launch(&s)?;
    settle();
    let dumped = dump_since(&mut it, "dump since the launch")?;
    let received = seen.lock().unwrap().clone();
    println!("    callback received {} line(s):", received.len());
    for (level, text) in &received {
        println!("      {level:?}: {text}");
    }
    check(!(received.is_empty() && dumped.is_empty()), || {
        "the driver wrote no log line for a refused launch (callback not called, dump \
         empty): nothing to explain"
            .into()
    })?;
    check(!received.is_empty(), || {
        "the dump has a line but the callback was never called".into()
    })?;
    let entry = logs::latest_for_call(&dumped, LAUNCH_CALL);
    check(entry.is_some(), || {
        format!("no line from {LAUNCH_CALL} in the dump since the launch:\n{dumped}")
    })?;
    let entry = entry.unwrap();
    check(!entry.message.is_empty(), || {
        format!("empty message: {entry}")
    })?;
    // The explanation is about the refused block shape, not just the returned code.
    check(entry.message.contains("2048"), || {
        format!("the explanation does not name the block size: {entry}")
    })?;

    let mut buf = [0u8; MAX_LOG_BYTES];
    let explained = e.driver_log(&mut buf).map(str::to_owned);
    println!("    Error::driver_log: {explained:?}");
    check_eq(
        explained.as_deref(),
        Some(entry.message),
        "Error::driver_log against the dump",
    )?;
    let mut buf = [0u8; MAX_LOG_BYTES];
    check_eq(
        logs::explain(&e, &mut buf),
        Some(entry.message),
        "logs::explain",
    )?;
    check(
        received
            .iter()
            .any(|(_, text)| text.contains(entry.message)),
        || format!("the callback's lines do not hold {:?}", entry.message),
    )?;

    drop(guard);
    check_eq(
        Arc::strong_count(&seen),
        1,
        "closure freed after the guard drop",
    )?;
    let before = seen.lock().unwrap().len();
    rejected_launch(&s)?;
    settle();
    let again = dump_since(&mut it, "dump since the second launch")?;
    check(logs::latest_for_call(&again, LAUNCH_CALL).is_some(), || {
        format!(
            "the second refused launch wrote no line, so the unregister check proves nothing:\n{again}"
        )
    })?;
    check_eq(
        seen.lock().unwrap().len(),
        before,
        "callback lines after its guard was dropped",
    )?;
    s.stream.synchronize()?;
    Ok(())
}

static FN_CALLS: AtomicUsize = AtomicUsize::new(0);

fn count_line(_: LogLevel, text: &str) {
    FN_CALLS.fetch_add(1, Ordering::SeqCst);
    println!("      fn callback: {text}");
}

/// A plain `fn` callback (no heap) is called for a refused launch and not after its
/// guard drops; `dump_to_file` writes the launch's line to a file.
fn fn_callback_and_dump_to_file() -> TestResult {
    require_logs()?;
    let s = setup()?;
    let guard = LogCallback::register(count_line)?;
    let mut it = logs::current()?;
    FN_CALLS.store(0, Ordering::SeqCst);
    rejected_launch(&s)?;
    settle();
    let calls = FN_CALLS.load(Ordering::SeqCst);
    check(calls > 0, || {
        "the fn callback was not called for a refused launch (does the driver log it?)".into()
    })?;

    let path = std::env::temp_dir().join(format!("hw_logs_{}.txt", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let cpath = std::ffi::CString::new(path.to_str().unwrap_or_default())?;
    logs::dump_to_file(Some(&mut it), &cpath)?;
    let text = std::fs::read_to_string(&path)?;
    let _ = std::fs::remove_file(&path);
    println!("    dump_to_file ({}):", path.display());
    for line in text.lines() {
        println!("      {line}");
    }
    check(logs::latest_for_call(&text, LAUNCH_CALL).is_some(), || {
        format!("no line from {LAUNCH_CALL} in the file:\n{text}")
    })?;

    drop(guard);
    rejected_launch(&s)?;
    settle();
    check_eq(
        FN_CALLS.load(Ordering::SeqCst),
        calls,
        "fn callback calls after its guard was dropped",
    )?;
    s.stream.synchronize()?;
    Ok(())
}

/// A launch that succeeds leaves no error line of the launch call in the log (and
/// nothing of cuda-core reads the log on that path).
fn successful_launch_writes_no_error_line() -> TestResult {
    require_logs()?;
    let s = setup()?;
    let mut it = logs::current()?;
    launch_with_block(&s, 32)?;
    s.stream.synchronize()?;
    let text = dump_since(&mut it, "dump since a good launch")?;
    check(logs::latest_for_call(&text, LAUNCH_CALL).is_none(), || {
        format!("a successful launch left a line:\n{text}")
    })?;
    let mut got = [0u32];
    s.out.copy_to_host(&mut got)?;
    check_eq(got[0], 7, "write_value wrote its value")
}
