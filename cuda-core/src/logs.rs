//! Error log management (`cuLogs*`, CUDA 12.9 and later): the driver's plain-English
//! explanation of why a call failed.
//!
//! A failed driver call returns a bare code (`CUDA_ERROR_INVALID_VALUE`); the driver also
//! writes a line that says why into a log it keeps in memory (at most
//! [`MAX_LOG_BYTES`]; the oldest lines are overwritten), in the form
//!
//! ```text
//! [22:21:32.099][25642][CUDA][E][cuLogsDumpToMemory] buffer cannot be NULL
//! ```
//!
//! (time, thread id, source, severity, API entry point, message). This module reaches
//! that log three ways:
//!
//! - [`LogCallback`]: a callback the driver calls with every new line, registered for as
//!   long as the guard lives (`cuLogsRegisterCallback` / `cuLogsUnregisterCallback`).
//! - [`current`] and [`dump_to_memory`] / [`dump_to_file`]: a position in the log and a
//!   copy of what was written since (or of everything kept), into a caller's buffer (no
//!   heap) or a file.
//! - [`explain`] (also [`Error::driver_log`]): the most recent line about the call an
//!   [`Error`] names, read into a caller's buffer.
//!
//! # Errors stay cheap
//!
//! Nothing here runs unless the caller asks: a launch (or any other call) neither reads
//! the log on success nor on failure, and [`Error`] does not carry the text. After an
//! error, the caller who wants the reason passes a buffer to [`explain`]; the dump is one
//! driver call into that buffer, with no allocation. To see only what one call wrote,
//! take [`current`] before it and dump from that position after it.
//!
//! ```no_run
//! use cudadrv::{DeviceBuffer, Function, LaunchConfig, Stream};
//! # fn demo(f: &Function, stream: &Stream, out: &DeviceBuffer<u32>) {
//! let cfg = LaunchConfig::new(1, 2048).stream(stream); // more threads than a block holds
//! // SAFETY: (the kernel's contract; this launch is refused before it runs)
//! if let Err(e) = unsafe { cfg.launch(f, &(out.as_arg(), 7u32)) } {
//!     let mut buf = [0u8; 1024];
//!     match e.driver_log(&mut buf) {
//!         Some(why) => eprintln!("{e}\n  driver: {why}"),
//!         None => eprintln!("{e}"),
//!     }
//! }
//! # }
//! ```
//!
//! # Unsafe policy
//! The driver calls are in this file, each with a `// SAFETY:` comment. The callback
//! trampolines are the only code the driver calls: they turn the driver's
//! `(data, level, message, length)` into a `&str` and never let a panic unwind into the
//! driver.

use core::ffi::{CStr, c_char, c_void};
use core::sync::atomic::{AtomicUsize, Ordering};
use core::{fmt, ptr};

use cudadrv_sys::{CUlogIterator, CUlogLevel, CUlogsCallbackHandle};

use crate::driver::{api, api_for_drop};
use crate::error::{Error, Result, drv, report_drop};

/// The severity of a log line (`CUlogLevel`): `CU_LOG_LEVEL_ERROR` or
/// `CU_LOG_LEVEL_WARNING`.
pub type LogLevel = CUlogLevel;

/// The most bytes the driver keeps of its log (documented for `cuLogsDumpToMemory`): a
/// buffer this large receives everything it holds.
pub const MAX_LOG_BYTES: usize = 25600;

/// A position in the driver's log (`CUlogIterator`), from [`current`]. A dump from it
/// copies the lines written after it and moves it past them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct LogIterator(CUlogIterator);

impl LogIterator {
    /// The driver's value.
    #[must_use]
    pub const fn as_raw(self) -> CUlogIterator {
        self.0
    }

    /// A position from the driver's value.
    #[must_use]
    pub const fn from_raw(raw: CUlogIterator) -> Self {
        Self(raw)
    }
}

/// `cuLogsCurrent`: the end of the log, where the next line will be written.
///
/// # Errors
/// [`Error::DriverTooOld`] before CUDA 12.9; the call's own error.
#[doc(alias = "cuLogsCurrent")]
pub fn current() -> Result<LogIterator> {
    let cu = api()?;
    let mut it: CUlogIterator = 0;
    // SAFETY: valid out-pointer; flags must be 0.
    unsafe { drv!(cu, cuLogsCurrent(&mut it, 0))? };
    Ok(LogIterator(it))
}

/// `cuLogsDumpToMemory`: copies the log into `buf` and returns the text written, lines
/// separated by `\n` (without the NUL the driver appends).
///
/// From `from` when given (only lines written after that position; it moves past
/// them), else everything the driver keeps. When `buf` cannot hold every line, the
/// driver writes the most recent ones that fit, after a line saying that some were left
/// out. No allocation: the text borrows `buf`; bytes that are not UTF-8 end it early.
///
/// # Errors
/// [`Error::InvalidArgument`] for an empty `buf`; `CUDA_ERROR_INVALID_VALUE` when `buf`
/// cannot hold even one line; [`Error::DriverTooOld`] before CUDA 12.9.
#[doc(alias = "cuLogsDumpToMemory")]
pub fn dump_to_memory<'b>(from: Option<&mut LogIterator>, buf: &'b mut [u8]) -> Result<&'b str> {
    if buf.is_empty() {
        return Err(Error::InvalidArgument("log buffer is empty"));
    }
    let cu = api()?;
    let it = from.map_or(ptr::null_mut(), |it| ptr::from_mut(&mut it.0));
    let mut size = buf.len();
    // SAFETY: `buf` is valid for `size` writable bytes (the driver writes at most `size`,
    // NUL included); `it` is null or a valid iterator the driver may update; flags 0.
    unsafe {
        drv!(
            cu,
            cuLogsDumpToMemory(it, buf.as_mut_ptr().cast::<c_char>(), &mut size, 0)
        )?
    };
    let written = buf.get(..size.min(buf.len())).unwrap_or(&[]);
    Ok(text_prefix(written))
}

/// `cuLogsDumpToFile`: appends the log to the file at `path` (from `from` when given,
/// moving it past what was written, else everything the driver keeps).
///
/// # Errors
/// The call's error (`CUDA_ERROR_INVALID_VALUE` for a path that cannot be opened);
/// [`Error::DriverTooOld`] before CUDA 12.9.
#[doc(alias = "cuLogsDumpToFile")]
pub fn dump_to_file(from: Option<&mut LogIterator>, path: &CStr) -> Result<()> {
    let cu = api()?;
    let it = from.map_or(ptr::null_mut(), |it| ptr::from_mut(&mut it.0));
    // SAFETY: `path` is NUL-terminated and alive for the call; `it` as in
    // `dump_to_memory`; flags 0.
    unsafe { drv!(cu, cuLogsDumpToFile(it, path.as_ptr(), 0)) }
}

/// The driver's explanation of `e`: the most recent line of its log written by the call
/// `e` names (`cuLaunchKernelEx`, or a versioned entry point of it such as
/// `cuMemAlloc_v2`), as its message text (after the `[...]` fields). The log is read into
/// `buf` ([`MAX_LOG_BYTES`] holds all of it; a smaller buffer holds the newest lines).
///
/// `None` when `e` names no driver call, the driver keeps no such line (it does not
/// explain every failure), or the log cannot be read (a driver before CUDA 12.9).
///
/// The line is the newest of that call in the process, not necessarily of this failure:
/// another thread's failure of the same call may be newer. For an exact answer take
/// [`current`] before the call and [`dump_to_memory`] from it afterwards.
pub fn explain<'b>(e: &Error, buf: &'b mut [u8]) -> Option<&'b str> {
    // Only failures the driver reported (a code and a call) can have a line.
    let call = e.code().and(e.call())?;
    let text = dump_to_memory(None, buf).ok()?;
    latest_for_call(text, call).map(|entry| entry.message)
}

/// The newest line of the log that the driver wrote, whatever the call, read into `buf`
/// (see [`explain`] for one call's line).
pub fn last_entry(buf: &mut [u8]) -> Option<LogEntry<'_>> {
    entries(dump_to_memory(None, buf).ok()?).next_back()
}

/// The newest entry of `text` (a dump) that explains a failure of `call` or of a
/// versioned entry point of it (`call` followed by `_`: `cuMemAlloc_v2` for
/// `cuMemAlloc`).
///
/// Driver 580 (CUDA 13.0) writes a failure as two lines of the same thread, the
/// explanation and then `Returning 1 (CUDA_ERROR_INVALID_VALUE) from cuLaunchKernelEx`
/// (seen on an H100); for that form the explanation line is returned. A line that names
/// its entry point in a fifth `[...]` field is returned as it is.
#[must_use]
pub fn latest_for_call<'t>(text: &'t str, call: &str) -> Option<LogEntry<'t>> {
    let mut newest_first = entries(text).rev();
    let found = newest_first.by_ref().find(|entry| entry.is_from(call))?;
    if !found.is_return_line() {
        return Some(found);
    }
    match newest_first.next() {
        Some(before) if before.thread == found.thread && !before.is_return_line() => {
            Some(LogEntry {
                entry_point: found.entry_point,
                ..before
            })
        }
        _ => Some(found),
    }
}

/// The lines of `text` (a dump) that have the driver's form, oldest first; other lines
/// (such as the note that older lines were left out) are skipped.
pub fn entries(text: &str) -> impl DoubleEndedIterator<Item = LogEntry<'_>> {
    text.lines().filter_map(LogEntry::parse)
}

/// One line of the driver's log: `[time][thread][source][severity] message`, where the
/// failing call is named either by a fifth `[entry point]` field or, as driver 580
/// writes it, by the message `Returning <code> (<name>) from <entry point>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogEntry<'a> {
    /// When it was written (`22:21:32.099`).
    pub time: &'a str,
    /// The id of the thread whose call wrote it.
    pub thread: &'a str,
    /// What wrote it (`CUDA`).
    pub source: &'a str,
    /// `E` (error) or `W` (warning).
    pub severity: &'a str,
    /// The API function that failed (`cuLaunchKernelEx`), when the line names one
    /// (empty otherwise).
    pub entry_point: &'a str,
    /// The explanation.
    pub message: &'a str,
    /// The whole line.
    pub line: &'a str,
}

impl<'a> LogEntry<'a> {
    /// Splits a line of the driver's form; `None` for any other line.
    #[must_use]
    pub fn parse(line: &'a str) -> Option<Self> {
        let line = line.trim_end_matches(['\r', '\n', '\0']);
        let mut rest = line;
        let mut fields = [""; 4];
        for field in &mut fields {
            let inner = rest.strip_prefix('[')?;
            let end = inner.find(']')?;
            *field = inner.get(..end)?;
            rest = inner.get(end + 1..)?;
        }
        let [time, thread, source, severity] = fields;
        // An optional fifth field names the entry point; else a `Returning ... from X`
        // message does.
        let mut entry_point = "";
        if let Some(inner) = rest.strip_prefix('[') {
            let end = inner.find(']')?;
            entry_point = inner.get(..end)?;
            rest = inner.get(end + 1..)?;
        }
        let message = rest.trim();
        if entry_point.is_empty() && message.starts_with("Returning ") {
            if let Some((_, call)) = message.rsplit_once(" from ") {
                entry_point = call.trim();
            }
        }
        Some(Self {
            time,
            thread,
            source,
            severity,
            entry_point,
            message,
            line,
        })
    }

    /// The severity as a [`LogLevel`] (`None` for a letter other than `E` or `W`).
    #[must_use]
    pub fn level(&self) -> Option<LogLevel> {
        match self.severity {
            "E" => Some(CUlogLevel::CU_LOG_LEVEL_ERROR),
            "W" => Some(CUlogLevel::CU_LOG_LEVEL_WARNING),
            _ => None,
        }
    }

    /// Whether this is the `Returning <code> (<name>) from <entry point>` line that
    /// driver 580 writes after the explanation of a failure.
    #[must_use]
    pub fn is_return_line(&self) -> bool {
        self.message.starts_with("Returning ") && self.message.contains(" from ")
    }

    /// Whether the entry point is `call` or a versioned form of it (`call_v2`,
    /// `call_ptsz`).
    #[must_use]
    pub fn is_from(&self, call: &str) -> bool {
        if call.is_empty() {
            return false;
        }
        self.entry_point
            .strip_prefix(call)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('_'))
    }
}

impl fmt::Display for LogEntry<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.line)
    }
}

/// The text of bytes the driver wrote: up to the first NUL, without trailing line
/// breaks, and up to the first byte that is not UTF-8 (no allocation, so no
/// replacement character).
#[must_use]
pub fn text_prefix(bytes: &[u8]) -> &str {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    let bytes = bytes.get(..end).unwrap_or(&[]);
    let text = match core::str::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => bytes
            .get(..e.valid_up_to())
            .and_then(|b| core::str::from_utf8(b).ok())
            .unwrap_or(""),
    };
    text.trim_end_matches(['\r', '\n'])
}

/// A log callback registered with the driver (`cuLogsRegisterCallback`); dropping it
/// unregisters it (`cuLogsUnregisterCallback`).
///
/// The driver calls the callback with each new log line, on the thread whose call wrote
/// the line, possibly on several threads at once; hence `Send + Sync + 'static`. The
/// callback should be short and must not call the driver. A panic in it does not reach
/// the driver: with `std` it is caught and dropped; without `std` the panic aborts the
/// process (a panic cannot leave an `extern "C"` function).
///
/// The driver keeps the data pointer it was given until the callback is unregistered,
/// so what it points at lives exactly as long as the guard: a `fn` pointer is passed
/// as the data itself (nothing to free); a closure is boxed and freed only after
/// unregistering succeeded and no callback of this module is running. If unregistering
/// fails, or a callback keeps running (for instance one that drops its own guard), the
/// closure is leaked rather than freed under the driver.
#[doc(alias = "cuLogsRegisterCallback")]
#[doc(alias = "cuLogsUnregisterCallback")]
#[must_use = "dropping the guard unregisters the callback"]
pub struct LogCallback {
    handle: CUlogsCallbackHandle,
    /// The boxed closure and how to free it (`None` for a `fn`).
    owned: Option<(*mut c_void, FreeData)>,
}

/// Frees a callback's data.
type FreeData = unsafe fn(*mut c_void);

// SAFETY: the handle is a process-wide registration the driver lets any thread
// unregister; the closure it owns is `Send + Sync`.
unsafe impl Send for LogCallback {}
// SAFETY: `&LogCallback` exposes only the raw handle value.
unsafe impl Sync for LogCallback {}

impl fmt::Debug for LogCallback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LogCallback")
            .field("handle", &self.handle)
            .field("closure", &self.owned.is_some())
            .finish()
    }
}

impl LogCallback {
    /// `cuLogsRegisterCallback` with a plain function, called with each new line's
    /// severity and text. Needs no heap.
    ///
    /// # Errors
    /// [`Error::DriverTooOld`] before CUDA 12.9; the call's own error.
    pub fn register(callback: fn(LogLevel, &str)) -> Result<Self> {
        // SAFETY: `fn_trampoline` reads `data` back as this `fn` pointer; a `fn` pointer
        // lives forever.
        unsafe { Self::register_raw(fn_trampoline, callback as *mut c_void, None) }
    }

    /// `cuLogsRegisterCallback` with a closure (boxed; freed after unregistering).
    ///
    /// # Errors
    /// As [`register`](Self::register); the closure is dropped.
    #[cfg(feature = "alloc")]
    #[cfg_attr(docsrs, doc(cfg(feature = "alloc")))]
    pub fn register_closure<F>(callback: F) -> Result<Self>
    where
        F: Fn(LogLevel, &str) + Send + Sync + 'static,
    {
        let data = alloc::boxed::Box::into_raw(alloc::boxed::Box::new(callback)).cast::<c_void>();
        // SAFETY: `closure_trampoline::<F>` reads `data` as the `F` boxed above, which
        // `drop_box::<F>` frees once (after unregistering, or on failure here).
        unsafe { Self::register_raw(closure_trampoline::<F>, data, Some(drop_box::<F>)) }
    }

    /// Registers `trampoline` with `data`; on failure frees `data` with `free`.
    ///
    /// # Safety
    /// `trampoline` must accept `data` until it is unregistered; `free` (if any) must
    /// free `data` once.
    unsafe fn register_raw(
        trampoline: unsafe extern "C" fn(*mut c_void, CUlogLevel, *mut c_char, usize),
        data: *mut c_void,
        free: Option<FreeData>,
    ) -> Result<Self> {
        let registered = api().and_then(|cu| {
            let mut handle: CUlogsCallbackHandle = ptr::null_mut();
            // SAFETY: `trampoline` is a valid callback for `data` (caller's contract);
            // valid out-pointer.
            unsafe {
                drv!(
                    cu,
                    cuLogsRegisterCallback(Some(trampoline), data, &mut handle)
                )?
            };
            Ok(handle)
        });
        match registered {
            Ok(handle) => Ok(Self {
                handle,
                owned: free.map(|free| (data, free)),
            }),
            Err(e) => {
                if let Some(free) = free {
                    // SAFETY: not registered, so the driver never saw `data`; freed once.
                    unsafe { free(data) };
                }
                Err(e)
            }
        }
    }

    /// The driver's handle.
    #[must_use]
    pub fn as_raw(&self) -> CUlogsCallbackHandle {
        self.handle
    }
}

impl Drop for LogCallback {
    fn drop(&mut self) {
        let rc = match api_for_drop().map(|cu| cu.cuLogsUnregisterCallback()) {
            // SAFETY: the handle came from `cuLogsRegisterCallback` and is unregistered
            // once, here.
            Some(Ok(unregister)) => unsafe { unregister(self.handle) },
            _ => cudadrv_sys::CUresult::CUDA_ERROR_NOT_INITIALIZED,
        };
        report_drop("cuLogsUnregisterCallback", rc);
        if let Some((data, free)) = self.owned.take() {
            if rc.is_success() && wait_for_callbacks() {
                // SAFETY: unregistered, and no trampoline is running: the driver no
                // longer reaches `data`; freed once (`owned` was taken).
                unsafe { free(data) };
            }
        }
    }
}

/// How many trampolines are running, process-wide.
static IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);

/// Counts a running trampoline until dropped.
struct InFlight;

impl InFlight {
    fn enter() -> Self {
        IN_FLIGHT.fetch_add(1, Ordering::SeqCst);
        Self
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        IN_FLIGHT.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Waits (boundedly) until no trampoline runs; `false` if some still does.
fn wait_for_callbacks() -> bool {
    for _ in 0..100_000 {
        if IN_FLIGHT.load(Ordering::SeqCst) == 0 {
            return true;
        }
        #[cfg(feature = "std")]
        std::thread::yield_now();
        #[cfg(not(feature = "std"))]
        core::hint::spin_loop();
    }
    false
}

/// The message the driver passed: `length` bytes at `message` (a trailing NUL and line
/// break dropped).
///
/// # Safety
/// `message` is null or valid for `length` bytes for the returned lifetime.
unsafe fn message_text<'a>(message: *const c_char, length: usize) -> &'a str {
    if message.is_null() || length == 0 {
        return "";
    }
    // SAFETY: caller's contract.
    text_prefix(unsafe { core::slice::from_raw_parts(message.cast::<u8>(), length) })
}

/// Runs `f`, keeping a panic from unwinding into the driver.
fn no_unwind(f: impl FnOnce()) {
    #[cfg(feature = "std")]
    {
        // The payload is dropped; a panic in its drop aborts (extern "C" caller).
        let _ = std::panic::catch_unwind(core::panic::AssertUnwindSafe(f));
    }
    #[cfg(not(feature = "std"))]
    f();
}

/// The driver's callback for [`LogCallback::register`]: `data` is the `fn`.
unsafe extern "C" fn fn_trampoline(
    data: *mut c_void,
    level: CUlogLevel,
    message: *mut c_char,
    length: usize,
) {
    let _running = InFlight::enter();
    // SAFETY: `register` passed a `fn(LogLevel, &str)` as `data`; function and data
    // pointers have the same size on every target this crate builds for.
    let callback = unsafe { core::mem::transmute::<*mut c_void, fn(LogLevel, &str)>(data) };
    // SAFETY: the driver passes `length` valid bytes, alive during the call.
    let text = unsafe { message_text(message, length) };
    no_unwind(|| callback(level, text));
}

/// The driver's callback for [`LogCallback::register_closure`]: `data` is the boxed `F`.
#[cfg(feature = "alloc")]
unsafe extern "C" fn closure_trampoline<F: Fn(LogLevel, &str) + Send + Sync + 'static>(
    data: *mut c_void,
    level: CUlogLevel,
    message: *mut c_char,
    length: usize,
) {
    let _running = InFlight::enter();
    // SAFETY: `data` is the `Box<F>` of `register_closure`, freed only after
    // unregistering and once no trampoline runs; `F: Sync` allows shared use.
    let callback = unsafe { &*data.cast::<F>() };
    // SAFETY: as in `fn_trampoline`.
    let text = unsafe { message_text(message, length) };
    no_unwind(|| callback(level, text));
}

/// Frees the boxed `F` of `register_closure`.
///
/// # Safety
/// `data` came from `Box::<F>::into_raw` and is freed once.
#[cfg(feature = "alloc")]
unsafe fn drop_box<F>(data: *mut c_void) {
    // SAFETY: caller's contract.
    drop(unsafe { alloc::boxed::Box::from_raw(data.cast::<F>()) });
}

impl Error {
    /// The driver's explanation of this error from its log, read into `buf`: see
    /// [`explain`]. Nothing is read unless this is called.
    #[doc(alias = "cuLogsDumpToMemory")]
    pub fn driver_log<'b>(&self, buf: &'b mut [u8]) -> Option<&'b str> {
        explain(self, buf)
    }
}

#[cfg(all(test, feature = "std"))]
mod tests {
    use super::*;

    const DUMP: &str = "Some logs were overwritten\n\
        [22:21:32.099][25642][CUDA][E][cuMemAlloc_v2] out of memory: 1 TiB asked\n\
        [22:21:32.100][25642][CUDA][W][cuLaunchKernelEx] first\n\
        [22:21:32.101][25643][CUDA][E][cuMemAllocHost_v2] pinned allocation failed\n\
        [22:21:32.102][25642][CUDA][E][cuLaunchKernelEx] block size 2048 exceeds 1024\n";

    #[test]
    fn parses_the_documented_line() {
        let e = LogEntry::parse(
            "[22:21:32.099][25642][CUDA][E][cuLogsDumpToMemory] buffer cannot be NULL\r\n",
        )
        .unwrap();
        assert_eq!(e.time, "22:21:32.099");
        assert_eq!(e.thread, "25642");
        assert_eq!(e.source, "CUDA");
        assert_eq!(e.severity, "E");
        assert_eq!(e.entry_point, "cuLogsDumpToMemory");
        assert_eq!(e.message, "buffer cannot be NULL");
        assert_eq!(e.level(), Some(CUlogLevel::CU_LOG_LEVEL_ERROR));
        assert!(e.line.ends_with("NULL"));
        assert_eq!(LogEntry::parse("Some logs were overwritten"), None);
        assert_eq!(LogEntry::parse("[a][b][c] three fields"), None);
        assert_eq!(LogEntry::parse("[a][b][c][d][e"), None);
    }

    /// The form driver 580 wrote on an H100 for a launch of 2048 threads per block.
    const DUMP_580: &str = "\
        [18:38:42.640][140551750494080][CUDA][E] Returning 1 (CUDA_ERROR_INVALID_VALUE) from cuMemAlloc_v2\n\
        [18:38:42.648][140551750494080][CUDA][E] One or more of block dimensions of (2048,1,1) exceeds correspsonding maximum value of (1024,1024,64)\n\
        [18:38:42.648][140551750494080][CUDA][E] Returning 1 (CUDA_ERROR_INVALID_VALUE) from cuLaunchKernelEx\n";

    #[test]
    fn reads_the_form_driver_580_writes() {
        let lines: std::vec::Vec<_> = entries(DUMP_580).collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[1].entry_point, "");
        assert_eq!(lines[2].entry_point, "cuLaunchKernelEx");
        assert!(lines[2].is_return_line() && !lines[1].is_return_line());
        let launch = latest_for_call(DUMP_580, "cuLaunchKernelEx").unwrap();
        assert!(
            launch
                .message
                .starts_with("One or more of block dimensions of (2048,1,1)")
        );
        assert_eq!(launch.entry_point, "cuLaunchKernelEx");
        // A return line with no explanation before it (of its thread) stands alone.
        let alloc = latest_for_call(DUMP_580, "cuMemAlloc").unwrap();
        assert!(alloc.is_return_line());
        assert!(latest_for_call(DUMP_580, "cuLaunchKernel").is_none());
        assert!(latest_for_call(DUMP_580, "").is_none());
    }

    #[test]
    fn finds_the_newest_line_of_a_call_and_its_versions() {
        assert_eq!(entries(DUMP).count(), 4);
        let launch = latest_for_call(DUMP, "cuLaunchKernelEx").unwrap();
        assert_eq!(launch.message, "block size 2048 exceeds 1024");
        let alloc = latest_for_call(DUMP, "cuMemAlloc").unwrap();
        assert_eq!(alloc.message, "out of memory: 1 TiB asked");
        assert_eq!(alloc.level(), Some(CUlogLevel::CU_LOG_LEVEL_ERROR));
        assert!(latest_for_call(DUMP, "cuMemAllocHost").is_some());
        assert!(latest_for_call(DUMP, "cuMemFree").is_none());
        assert!(latest_for_call(DUMP, "cuLaunch").is_none());
        assert_eq!(entries(DUMP).next_back().unwrap().thread, "25642");
    }

    #[test]
    fn text_stops_at_nul_invalid_utf8_and_drops_trailing_breaks() {
        assert_eq!(text_prefix(b"abc\n\0garbage"), "abc");
        assert_eq!(text_prefix(b"line 1\nline 2\r\n"), "line 1\nline 2");
        assert_eq!(text_prefix(b"ok \xff more"), "ok ");
        assert_eq!(text_prefix(b""), "");
        assert_eq!(text_prefix(b"\0"), "");
        // SAFETY: null and zero lengths are handled without reading.
        assert_eq!(unsafe { message_text(ptr::null(), 5) }, "");
        let msg = b"[t][1][CUDA][E][cuX] why\n\0";
        // SAFETY: `msg` is valid for its length.
        let text = unsafe { message_text(msg.as_ptr().cast(), msg.len()) };
        assert_eq!(text, "[t][1][CUDA][E][cuX] why");
    }

    #[test]
    fn buffers_and_errors_checked_before_the_driver() {
        assert!(matches!(
            dump_to_memory(None, &mut []),
            Err(Error::InvalidArgument(_))
        ));
        let mut buf = [0u8; 64];
        // Errors that name no driver call are never looked up.
        let e = Error::LengthMismatch {
            expected: 1,
            found: 2,
        };
        assert_eq!(e.driver_log(&mut buf), None);
        assert_eq!(explain(&Error::InvalidArgument("x"), &mut buf), None);
    }

    #[test]
    fn trampolines_keep_panics_from_the_driver() {
        fn panics(_: LogLevel, _: &str) {
            panic!("in a log callback");
        }
        let msg = b"text";
        let prev = std::panic::take_hook();
        std::panic::set_hook(std::boxed::Box::new(|_| {}));
        // SAFETY: the driver's calling convention, with a valid message.
        unsafe {
            fn_trampoline(
                panics as *mut c_void,
                CUlogLevel::CU_LOG_LEVEL_ERROR,
                msg.as_ptr().cast_mut().cast(),
                msg.len(),
            );
        }
        std::panic::set_hook(prev);
        let seen = std::sync::Arc::new(std::sync::Mutex::new(std::string::String::new()));
        let keep = std::sync::Arc::clone(&seen);
        call_boxed(
            move |_: LogLevel, text: &str| *keep.lock().unwrap() = text.into(),
            msg,
        );
        assert_eq!(*seen.lock().unwrap(), "text");
        assert_eq!(std::sync::Arc::strong_count(&seen), 1, "closure freed");
        assert!(wait_for_callbacks());
    }

    /// Boxes `f` as `register_closure` does, calls it through its trampoline, frees it.
    fn call_boxed<F: Fn(LogLevel, &str) + Send + Sync + 'static>(f: F, msg: &[u8]) {
        let data = std::boxed::Box::into_raw(std::boxed::Box::new(f)).cast::<c_void>();
        // SAFETY: `data` is the boxed `F` the trampoline is instantiated for, freed once
        // after the call; `msg` is valid for its length.
        unsafe {
            closure_trampoline::<F>(
                data,
                CUlogLevel::CU_LOG_LEVEL_WARNING,
                msg.as_ptr().cast_mut().cast(),
                msg.len(),
            );
            drop_box::<F>(data);
        }
    }
}
