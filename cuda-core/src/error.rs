//! [`Error`]: what every fallible call of the host layer returns.
//!
//! A failed driver call keeps the C function's name next to its [`CUresult`], so that
//! `Display` reads `cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY (2): ` and the header's
//! description of the code. Loader failures, functions the driver lacks, JIT failures
//! (with the JIT error log), kernel-parameter layout errors and invalid arguments share
//! the same type. An error names what failed: a kernel or global that a module lacks is
//! [`Error::NotFound`], with the name (`cuModuleGetFunction("vec_ad") failed:
//! CUDA_ERROR_NOT_FOUND (500): ...`); a copy between buffers of different lengths is
//! [`Error::LengthMismatch`], with both lengths.
//!
//! The type stays small and needs no heap: a missing symbol's name is kept inline
//! ([`SymbolName`], cut short with an ellipsis past [`SymbolName::CAPACITY`] bytes);
//! without the `alloc` feature a JIT failure carries only the length of the log, which
//! the driver wrote into the caller's buffer (see
//! [`JitOptions::error_log`](crate::JitOptions::error_log)); with `alloc` it owns the log.

use core::fmt;

use cudadrv_sys::{CUgraphNodeType, CUresult, LoadError, MissingSymbol};

use crate::args::{LayoutMismatch, PackError};

// Small enough to return by value everywhere (a JIT log is behind a `String`; a symbol
// name is inline, sized to fill what the largest variant already takes).
static_assertions::const_assert!(core::mem::size_of::<Error>() <= 64);

/// `core::result::Result` with [`Error`].
pub type Result<T> = core::result::Result<T, Error>;

/// An error of the host layer.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Error {
    /// A driver call returned something other than `CUDA_SUCCESS`.
    Driver {
        /// The C function that failed (`"cuMemAlloc"`).
        call: &'static str,
        /// What it returned.
        code: CUresult,
    },
    /// The driver library could not be loaded.
    Load(&'static LoadError),
    /// The loaded driver does not provide a function (it is older than the headers).
    MissingSymbol(MissingSymbol),
    /// The JIT compiler or linker failed; its error log is kept.
    Jit {
        /// The C function that failed (`"cuModuleLoadDataEx"`, `"cuLinkComplete"`).
        call: &'static str,
        /// What it returned (`CUDA_ERROR_INVALID_PTX`, ...).
        code: CUresult,
        /// The JIT error log.
        log: JitLog,
    },
    /// A kernel's parameters do not fit the parameter buffer.
    Pack(PackError),
    /// Packed parameters differ from the layout the driver reports for the kernel.
    Layout(LayoutMismatch),
    /// An argument the driver would reject, or that would be unsound to pass to it.
    InvalidArgument(&'static str),
    /// A module has no kernel or global of this name: `cuModuleGetFunction` or
    /// `cuModuleGetGlobal` returned `CUDA_ERROR_NOT_FOUND`. [`code`](Self::code) is
    /// `CUDA_ERROR_NOT_FOUND`, so `e.is(CUresult::CUDA_ERROR_NOT_FOUND)` holds.
    NotFound {
        /// The C function that failed (`"cuModuleGetFunction"`, `"cuModuleGetGlobal"`).
        call: &'static str,
        /// The name looked up (its first [`SymbolName::CAPACITY`] bytes).
        name: SymbolName,
    },
    /// A copy between two buffers of different lengths, in elements: `expected` is the
    /// length of the buffer the call copies into or out of (for a copy between two
    /// device buffers, the destination), `found` that of the other side.
    LengthMismatch {
        /// The length the copy needs.
        expected: usize,
        /// The length it was given.
        found: usize,
    },
    /// A call refused because its stream is being captured into a graph: the graph
    /// would keep what the call names (memory, an event, a closure) by address, with
    /// nothing tying its lifetime to the graph. Record such work through the
    /// [`Capture`](crate::graph::Capture), whose methods borrow what the graph names.
    StreamCapturing(&'static str),
    /// The driver is older than the ABI of a call this crate makes, and the call has no
    /// older ABI to fall back to (or the fallback cannot express the arguments, such as
    /// a programmatic edge on a driver without edge data). [`code`](Self::code) is
    /// `CUDA_ERROR_NOT_SUPPORTED`.
    DriverTooOld {
        /// The C function (`"cuFuncGetParamInfo"`).
        call: &'static str,
        /// The CUDA version it needs (`12040` = 12.4).
        needs: u32,
        /// The driver's CUDA version.
        driver: u32,
    },
    /// A graph that cannot be instantiated for device launch (Programming Guide 4.2.6,
    /// "device graph requirements"), found before the driver call.
    /// [`code`](Self::code) is `CUDA_ERROR_INVALID_VALUE`, what the driver returns.
    NotDeviceLaunchable {
        /// The requirement the graph breaks.
        rule: &'static str,
        /// The type of the offending node, when a node breaks it.
        node_type: Option<CUgraphNodeType>,
    },
    /// Tensor-map parameters that break a rule of `cuTensorMapEncodeTiled`, found before
    /// the driver call ([`crate::tensor_map`]). [`code`](Self::code) is
    /// `CUDA_ERROR_INVALID_VALUE`, what the driver returns.
    TensorMap {
        /// The requirement broken.
        rule: &'static str,
        /// The dimension (innermost is 0) that breaks it, where one does.
        dim: Option<u8>,
    },
    /// Asynchronous work refused because its stream belongs to another context than
    /// the memory or executable graph it names. `cuMemFree` and the context
    /// synchronization before `cuGraphExecDestroy` wait only for work queued in their own
    /// context, so work queued on another context's stream could still write the memory
    /// after it was freed and handed out again. Use a stream of the same context (order
    /// it after other contexts' work with [`Stream::wait_event`](crate::Stream::wait_event)).
    /// [`code`](Self::code) is `CUDA_ERROR_INVALID_CONTEXT`.
    ContextMismatch {
        /// The C function that was refused (`"cuMemcpyDtoDAsync"`).
        call: &'static str,
    },
    /// A copy added to a [`CopyBatch`](crate::memory::batch::CopyBatch) that breaks a
    /// rule, found before the driver call. [`code`](Self::code) is
    /// `CUDA_ERROR_INVALID_VALUE`.
    BatchCopy {
        /// The index of the copy in the batch.
        index: usize,
        /// The rule it breaks.
        rule: &'static str,
    },
    /// A graph node used with a graph it does not belong to (or the null node,
    /// [`GraphNode::NULL`](crate::graph::GraphNode::NULL)), found before the driver
    /// call. [`code`](Self::code) is `CUDA_ERROR_INVALID_VALUE`, what the driver returns.
    ForeignNode {
        /// The C function that was refused (`"cuGraphAddDependencies"`).
        call: &'static str,
    },
    /// An NCCL call returned something other than `ncclSuccess` (feature `nccl`; the
    /// communicator's [`last_error`](crate::nccl::Comm::last_error) has NCCL's text).
    Nccl {
        /// The C function that failed (`"ncclAllReduce"`).
        call: &'static str,
        /// What it returned (`ncclResult_t`: 1 unhandled CUDA error, 2 system error, 3
        /// internal error, 4 invalid argument, 5 invalid usage, 6 remote error).
        code: u32,
    },
    /// The NCCL library found is older than the release the crate needs (feature
    /// `nccl`). Versions are NCCL's codes: `22809` is 2.28.9.
    NcclTooOld {
        /// The library's version.
        found: u32,
        /// The oldest version the crate uses.
        needs: u32,
    },
    /// Ranks of one communicator in this process asked for operations that do not
    /// match (another operation, count, type, reduction or root at the same place in
    /// their sequences), found before NCCL was called (feature `nccl`).
    NcclMismatch {
        /// The C function that was refused (`"ncclAllGather"`).
        call: &'static str,
        /// The rank whose call was refused.
        rank: u32,
        /// What differs.
        what: &'static str,
    },
    /// An NVRTC call returned something other than `NVRTC_SUCCESS` (feature `nvrtc`);
    /// a failed compilation keeps NVRTC's log.
    Nvrtc {
        /// The C function that failed (`"nvrtcCompileProgram"`).
        call: &'static str,
        /// What it returned (`nvrtcResult`: 5 invalid option, 6 compilation, 10 name
        /// expression not valid, ...).
        code: u32,
        /// The compile log (empty for calls other than `nvrtcCompileProgram`).
        log: JitLog,
    },
    /// Work did not finish within the timeout (a peer that exited, a mismatch in
    /// another process): the communicator was aborted, so no NCCL kernel of it is
    /// left running (feature `nccl`).
    Timeout {
        /// What was waited for (`"ncclCommInitRankConfig"`, `"stream completion"`).
        call: &'static str,
        /// The timeout, in milliseconds.
        after_ms: u64,
    },
}

impl Error {
    /// Builds [`Error::Driver`].
    pub const fn driver(call: &'static str, code: CUresult) -> Self {
        Self::Driver { call, code }
    }

    /// The driver's result code, for [`Error::Driver`] and [`Error::Jit`];
    /// `CUDA_ERROR_NOT_FOUND` for [`Error::NotFound`]; `CUDA_ERROR_NOT_SUPPORTED` for
    /// [`Error::DriverTooOld`]; `CUDA_ERROR_INVALID_VALUE` for the refusals the driver
    /// would make with it (device-graph rules, tensor maps, foreign graph nodes);
    /// `CUDA_ERROR_INVALID_CONTEXT` for [`Error::ContextMismatch`].
    pub const fn code(&self) -> Option<CUresult> {
        match self {
            Self::Driver { code, .. } | Self::Jit { code, .. } => Some(*code),
            Self::NotFound { .. } => Some(CUresult::CUDA_ERROR_NOT_FOUND),
            Self::DriverTooOld { .. } => Some(CUresult::CUDA_ERROR_NOT_SUPPORTED),
            Self::NotDeviceLaunchable { .. }
            | Self::TensorMap { .. }
            | Self::ForeignNode { .. } => Some(CUresult::CUDA_ERROR_INVALID_VALUE),
            Self::ContextMismatch { .. } => Some(CUresult::CUDA_ERROR_INVALID_CONTEXT),
            _ => None,
        }
    }

    /// The C function that failed, for [`Error::Driver`], [`Error::Jit`] and
    /// [`Error::NotFound`]; the missing function for [`Error::MissingSymbol`] and
    /// [`Error::DriverTooOld`]; the refused function for [`Error::ContextMismatch`] and
    /// [`Error::ForeignNode`].
    pub const fn call(&self) -> Option<&'static str> {
        match self {
            Self::Driver { call, .. }
            | Self::Jit { call, .. }
            | Self::NotFound { call, .. }
            | Self::DriverTooOld { call, .. }
            | Self::ContextMismatch { call }
            | Self::ForeignNode { call }
            | Self::Nccl { call, .. }
            | Self::Nvrtc { call, .. }
            | Self::NcclMismatch { call, .. }
            | Self::Timeout { call, .. } => Some(*call),
            Self::MissingSymbol(m) => Some(m.name),
            _ => None,
        }
    }

    /// Whether this is a driver failure with `code`.
    pub fn is(&self, code: CUresult) -> bool {
        self.code() == Some(code)
    }

    /// The JIT log of an [`Error::Jit`], or the compile log of an [`Error::Nvrtc`] (with
    /// `alloc`; empty text without it).
    pub fn jit_log(&self) -> Option<&str> {
        match self {
            Self::Jit { log, .. } | Self::Nvrtc { log, .. } => Some(log.as_str()),
            _ => None,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Driver { call, code } => write!(f, "{call} failed: {code}"),
            Self::Load(e) => write!(f, "cannot load a CUDA library: {e}"),
            Self::MissingSymbol(m) => fmt::Display::fmt(m, f),
            Self::Jit { call, code, log } => {
                write!(f, "{call} failed: {code}")?;
                let text = log.as_str().trim_end();
                if !text.is_empty() {
                    write!(f, "\nJIT error log:\n{text}")?;
                } else if !log.is_empty() {
                    write!(
                        f,
                        " (JIT error log: {} bytes in the caller's buffer)",
                        log.len()
                    )?;
                }
                Ok(())
            }
            Self::Pack(e) => write!(f, "kernel parameters: {e}"),
            Self::Layout(e) => write!(f, "kernel parameter layout: {e}"),
            Self::NotFound { call, name } => write!(
                f,
                "{call}(\"{name}\") failed: {}",
                CUresult::CUDA_ERROR_NOT_FOUND
            ),
            Self::LengthMismatch { expected, found } => write!(
                f,
                "copy source and destination lengths differ: {expected} elements expected, \
                 {found} given"
            ),
            Self::InvalidArgument(what) => write!(f, "invalid argument: {what}"),
            Self::StreamCapturing(call) => write!(
                f,
                "{call} refused: the stream is being captured into a graph (record it \
                 through the Capture, which ties what the graph names to the graph)"
            ),
            Self::DriverTooOld {
                call,
                needs,
                driver,
            } => write!(
                f,
                "{call} needs a CUDA {}.{} driver (this one is {}.{})",
                needs / 1000,
                needs % 1000 / 10,
                driver / 1000,
                driver % 1000 / 10
            ),
            Self::NotDeviceLaunchable { rule, node_type } => {
                write!(f, "graph cannot be instantiated for device launch: {rule}")?;
                if let Some(t) = node_type {
                    #[cfg(feature = "graph")]
                    if let Some(name) = crate::graph::node_type_name(*t) {
                        return write!(f, " (node type: {name})");
                    }
                    write!(f, " (node type {})", t.0)?;
                }
                Ok(())
            }
            Self::TensorMap { rule, dim } => {
                write!(f, "invalid tensor map: {rule}")?;
                if let Some(d) = dim {
                    write!(f, " (dimension {d})")?;
                }
                Ok(())
            }
            Self::ContextMismatch { call } => write!(
                f,
                "{call} refused: the stream belongs to another context than the memory or \
                 graph it names (a free waits only for its own context's work)"
            ),
            Self::BatchCopy { index, rule } => write!(f, "batched copy {index} refused: {rule}"),
            Self::ForeignNode { call } => write!(
                f,
                "{call} refused: a graph node of another graph, or the null node"
            ),
            Self::Nccl { call, code } => {
                let name = match code {
                    1 => "ncclUnhandledCudaError",
                    2 => "ncclSystemError",
                    3 => "ncclInternalError",
                    4 => "ncclInvalidArgument",
                    5 => "ncclInvalidUsage",
                    6 => "ncclRemoteError",
                    7 => "ncclInProgress",
                    _ => "unknown ncclResult_t",
                };
                write!(f, "{call} failed: {name} ({code})")
            }
            Self::NcclTooOld { found, needs } => write!(
                f,
                "NCCL {}.{}.{} is too old: this crate needs NCCL {}.{}.{} or newer",
                found / 10000,
                found / 100 % 100,
                found % 100,
                needs / 10000,
                needs / 100 % 100,
                needs % 100
            ),
            Self::Nvrtc { call, code, log } => {
                write!(f, "{call} failed: {} ({code})", nvrtc_result_name(*code))?;
                let text = log.as_str().trim_end();
                if !text.is_empty() {
                    write!(f, "\ncompile log:\n{text}")?;
                }
                Ok(())
            }
            Self::NcclMismatch { call, rank, what } => write!(
                f,
                "{call} refused on rank {rank}: {what} differs from the same operation of \
                 another rank of the communicator in this process"
            ),
            Self::Timeout { call, after_ms } => write!(
                f,
                "{call} did not finish within {after_ms} ms; the communicator was aborted"
            ),
        }
    }
}

impl core::error::Error for Error {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            Self::Driver { code, .. } | Self::Jit { code, .. } => Some(code),
            Self::NotFound { .. } => Some(&CUresult::CUDA_ERROR_NOT_FOUND),
            Self::Load(e) => Some(*e),
            Self::MissingSymbol(m) => Some(m),
            Self::Pack(e) => Some(e),
            Self::Layout(e) => Some(e),
            Self::LengthMismatch { .. }
            | Self::InvalidArgument(_)
            | Self::StreamCapturing(_)
            | Self::DriverTooOld { .. }
            | Self::NotDeviceLaunchable { .. }
            | Self::TensorMap { .. }
            | Self::ContextMismatch { .. }
            | Self::BatchCopy { .. }
            | Self::ForeignNode { .. }
            | Self::Nccl { .. }
            | Self::Nvrtc { .. }
            | Self::NcclTooOld { .. }
            | Self::NcclMismatch { .. }
            | Self::Timeout { .. } => None,
        }
    }
}

impl From<&'static LoadError> for Error {
    fn from(e: &'static LoadError) -> Self {
        Self::Load(e)
    }
}

impl From<PackError> for Error {
    fn from(e: PackError) -> Self {
        Self::Pack(e)
    }
}

impl From<LayoutMismatch> for Error {
    fn from(e: LayoutMismatch) -> Self {
        Self::Layout(e)
    }
}

/// The name of a kernel or global that a module lacks, kept inline (no heap): up to
/// [`CAPACITY`](Self::CAPACITY) bytes, cut at a character boundary; a longer name
/// displays with a trailing `…`.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct SymbolName {
    bytes: [u8; Self::CAPACITY],
    len: u8,
    truncated: bool,
}

impl SymbolName {
    /// The most bytes of a name kept.
    pub const CAPACITY: usize = 45;

    /// Keeps the first [`CAPACITY`](Self::CAPACITY) bytes of `name` (fewer, to end at a
    /// character boundary).
    #[must_use]
    pub fn new(name: &str) -> Self {
        let mut out = Self {
            bytes: [0; Self::CAPACITY],
            len: 0,
            truncated: false,
        };
        out.push_str(name);
        out
    }

    /// A name from C bytes (without the NUL); bytes that are not UTF-8 become `�`.
    #[must_use]
    pub fn from_bytes(name: &[u8]) -> Self {
        let mut out = Self::new("");
        for chunk in name.utf8_chunks() {
            out.push_str(chunk.valid());
            if !chunk.invalid().is_empty() {
                out.push_str("\u{FFFD}");
            }
        }
        out
    }

    /// Appends `s`, or as much of it as fits, ending at a character boundary.
    fn push_str(&mut self, s: &str) {
        if self.truncated {
            return;
        }
        let start = usize::from(self.len);
        let room = Self::CAPACITY - start;
        let mut take = s.len().min(room);
        while !s.is_char_boundary(take) {
            take -= 1;
        }
        if let (Some(dst), Some(src)) = (self.bytes.get_mut(start..start + take), s.get(..take)) {
            dst.copy_from_slice(src.as_bytes());
            // `start + take <= CAPACITY`, which fits in a `u8`.
            self.len = (start + take) as u8;
        }
        self.truncated = take < s.len();
    }

    /// The name as kept (without the `…` of a truncated one).
    #[must_use]
    pub fn as_str(&self) -> &str {
        let kept = self.bytes.get(..usize::from(self.len)).unwrap_or(&[]);
        // Only whole `str` prefixes are ever copied in.
        core::str::from_utf8(kept).unwrap_or("")
    }

    /// Whether the name was longer than [`CAPACITY`](Self::CAPACITY) bytes.
    #[must_use]
    pub const fn is_truncated(&self) -> bool {
        self.truncated
    }
}

impl fmt::Display for SymbolName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())?;
        if self.truncated {
            f.write_str("…")?;
        }
        Ok(())
    }
}

impl fmt::Debug for SymbolName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "\"{}\"", self.as_str().escape_debug())?;
        if self.truncated {
            f.write_str("…")?;
        }
        Ok(())
    }
}

/// The error log of a failed JIT compilation or link.
///
/// With `alloc`, the text itself. Without `alloc`, only the number of bytes the driver
/// wrote into the caller's log buffer (the error stays small; the caller owns the text).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JitLog {
    #[cfg(feature = "alloc")]
    text: alloc::string::String,
    #[cfg(not(feature = "alloc"))]
    len: usize,
}

impl JitLog {
    /// A log from the bytes the driver wrote (up to the first NUL; invalid UTF-8 is
    /// replaced). Without `alloc`, only the length is kept.
    pub fn from_bytes(bytes: &[u8]) -> Self {
        let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
        let bytes = bytes.get(..end).unwrap_or(&[]);
        #[cfg(feature = "alloc")]
        {
            Self {
                text: alloc::string::String::from_utf8_lossy(bytes).into_owned(),
            }
        }
        #[cfg(not(feature = "alloc"))]
        {
            Self { len: bytes.len() }
        }
    }

    /// The log text (empty without `alloc`).
    pub fn as_str(&self) -> &str {
        #[cfg(feature = "alloc")]
        {
            &self.text
        }
        #[cfg(not(feature = "alloc"))]
        {
            ""
        }
    }

    /// Length of the log in bytes.
    pub fn len(&self) -> usize {
        #[cfg(feature = "alloc")]
        {
            self.text.len()
        }
        #[cfg(not(feature = "alloc"))]
        {
            self.len
        }
    }

    /// Whether the log is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl fmt::Display for JitLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Error {
    /// [`Error::Jit`] when the JIT wrote an error log, else [`Error::Driver`] (a failure
    /// before compiling, such as `CUDA_ERROR_INVALID_CONTEXT`).
    pub(crate) fn jit(call: &'static str, code: CUresult, log: JitLog) -> Self {
        if log.is_empty() {
            Self::Driver { call, code }
        } else {
            Self::Jit { call, code, log }
        }
    }
}

/// `Ok(())` for `CUDA_SUCCESS`, else [`Error::Driver`] naming `call`.
#[inline]
pub(crate) fn call(rc: CUresult, what: &'static str) -> Result<()> {
    if rc.is_success() {
        Ok(())
    } else {
        Err(Error::Driver {
            call: what,
            code: rc,
        })
    }
}

/// Calls a driver function through the table and maps the result:
/// `drv!(cu, cuMemAlloc(&mut p, n))` is `call(cu.cuMemAlloc()?(&mut p, n), "cuMemAlloc")`.
/// Must be used inside an `unsafe` block; the call carries the C function's contract.
macro_rules! drv {
    ($cu:expr, $name:ident ( $($arg:expr),* $(,)? )) => {
        $crate::error::call(($cu).$name()?($($arg),*), stringify!($name))
    };
}
pub(crate) use drv;

/// A driver call that failed inside a `Drop` (`cuMemFree`, `cuStreamDestroy`, ...),
/// where it cannot be returned: see [`set_drop_error_hook`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DropError {
    /// The C function that failed.
    pub call: &'static str,
    /// What it returned; `CUDA_ERROR_NOT_INITIALIZED` when the driver could not be
    /// reached at all (loader failure, missing symbol).
    pub code: CUresult,
}

impl fmt::Display for DropError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} failed while dropping a handle: {}",
            self.call, self.code
        )
    }
}

static DROP_ERRORS: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);
static DROP_HOOK: core::sync::atomic::AtomicPtr<()> =
    core::sync::atomic::AtomicPtr::new(core::ptr::null_mut());

/// How many driver calls failed inside `Drop` implementations of this crate since the
/// process started (a destroyed handle cannot return its error; it is counted here and
/// passed to the hook, never swallowed silently).
#[must_use]
pub fn drop_error_count() -> usize {
    DROP_ERRORS.load(core::sync::atomic::Ordering::Relaxed)
}

/// Installs (or with `None` removes) a function called with every [`DropError`], on the
/// thread that dropped the handle. It must not panic (a panic in `Drop` may abort) and
/// should not call this crate (it may run inside a driver call's aftermath).
pub fn set_drop_error_hook(hook: Option<fn(&DropError)>) {
    let raw = hook.map_or(core::ptr::null_mut(), |h| h as *mut ());
    DROP_HOOK.store(raw, core::sync::atomic::Ordering::Release);
}

/// Counts a failure inside `Drop` and hands it to the hook.
pub(crate) fn report_drop(call: &'static str, code: CUresult) {
    if code.is_success() {
        return;
    }
    DROP_ERRORS.fetch_add(1, core::sync::atomic::Ordering::Relaxed);
    let raw = DROP_HOOK.load(core::sync::atomic::Ordering::Acquire);
    if !raw.is_null() {
        // SAFETY: only `set_drop_error_hook` stores here, and only `fn(&DropError)`
        // pointers cast to `*mut ()`; function pointers and data pointers have the same
        // size on every target this crate builds for.
        let hook: fn(&DropError) = unsafe { core::mem::transmute::<*mut (), fn(&DropError)>(raw) };
        hook(&DropError { call, code });
    }
}

/// Reports `e` (a failure inside `Drop` before or instead of the destroying call) through
/// [`report_drop`], with the call and code it names.
pub(crate) fn report_drop_error(e: &Error) {
    report_drop(
        e.call().unwrap_or("cudadrv drop"),
        e.code().unwrap_or(CUresult::CUDA_ERROR_NOT_INITIALIZED),
    );
}

/// Makes `ctx` current for the rest of a `Drop`, or reports why it could not and returns
/// from the `drop`: `let _g = enter_for_drop!(self.ctx);`.
macro_rules! enter_for_drop {
    ($ctx:expr) => {
        match $ctx.enter() {
            Ok(g) => g,
            Err(e) => {
                $crate::error::report_drop_error(&e);
                return;
            }
        }
    };
}
pub(crate) use enter_for_drop;

/// The name of an `nvrtcResult` code (`"NVRTC_ERROR_COMPILATION"`), for messages.
pub(crate) const fn nvrtc_result_name(code: u32) -> &'static str {
    match code {
        0 => "NVRTC_SUCCESS",
        1 => "NVRTC_ERROR_OUT_OF_MEMORY",
        2 => "NVRTC_ERROR_PROGRAM_CREATION_FAILURE",
        3 => "NVRTC_ERROR_INVALID_INPUT",
        4 => "NVRTC_ERROR_INVALID_PROGRAM",
        5 => "NVRTC_ERROR_INVALID_OPTION",
        6 => "NVRTC_ERROR_COMPILATION",
        7 => "NVRTC_ERROR_BUILTIN_OPERATION_FAILURE",
        8 => "NVRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION",
        9 => "NVRTC_ERROR_NO_LOWERED_NAMES_BEFORE_COMPILATION",
        10 => "NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID",
        11 => "NVRTC_ERROR_INTERNAL_ERROR",
        12 => "NVRTC_ERROR_TIME_FILE_WRITE_FAILED",
        13 => "NVRTC_ERROR_NO_PCH_CREATE_ATTEMPTED",
        14 => "NVRTC_ERROR_PCH_CREATE_HEAP_EXHAUSTED",
        15 => "NVRTC_ERROR_PCH_CREATE",
        16 => "NVRTC_ERROR_CANCELLED",
        17 => "NVRTC_ERROR_TIME_TRACE_FILE_WRITE_FAILED",
        18 => "NVRTC_ERROR_BUSY",
        _ => "unknown nvrtcResult",
    }
}

#[cfg(all(test, feature = "std"))]
mod tests {
    use super::*;
    use std::format;
    use std::string::ToString;

    #[test]
    fn not_found_names_the_symbol_and_keeps_its_code() {
        let e = Error::NotFound {
            call: "cuModuleGetFunction",
            name: SymbolName::new("vec_ad"),
        };
        assert!(e.is(CUresult::CUDA_ERROR_NOT_FOUND));
        assert_eq!(e.call(), Some("cuModuleGetFunction"));
        let text = e.to_string();
        assert!(
            text.starts_with("cuModuleGetFunction(\"vec_ad\") failed: CUDA_ERROR_NOT_FOUND"),
            "{text}"
        );
        assert!(core::error::Error::source(&e).is_some());
    }

    #[test]
    fn long_names_are_cut_at_a_char_boundary_with_an_ellipsis() {
        let fits = "k".repeat(SymbolName::CAPACITY);
        let n = SymbolName::new(&fits);
        assert!(!n.is_truncated());
        assert_eq!(n.as_str(), fits);
        assert_eq!(n.to_string(), fits);

        let long = "_ZN7cutlass6KernelINS_4gemm6kernel4GemmIfEEEEvNT_6ParamsE";
        let n = SymbolName::new(long);
        assert!(n.is_truncated());
        assert_eq!(n.as_str(), &long[..SymbolName::CAPACITY]);
        assert_eq!(n.to_string(), format!("{}…", &long[..SymbolName::CAPACITY]));

        // A multi-byte character straddling the end is dropped whole.
        let wide = format!("{}é", "a".repeat(SymbolName::CAPACITY - 1));
        let n = SymbolName::new(&wide);
        assert!(n.is_truncated());
        assert_eq!(n.as_str().len(), SymbolName::CAPACITY - 1);

        assert_eq!(SymbolName::from_bytes(b"ab\xffc").as_str(), "ab\u{FFFD}c");
        assert_eq!(format!("{:?}", SymbolName::new("a\"b")), "\"a\\\"b\"");
    }

    #[test]
    fn length_mismatch_shows_both_lengths() {
        let text = Error::LengthMismatch {
            expected: 1024,
            found: 10,
        }
        .to_string();
        assert!(text.contains("1024") && text.contains("10 given"), "{text}");
        assert_eq!(
            Error::LengthMismatch {
                expected: 1,
                found: 2
            }
            .code(),
            None
        );
    }

    #[test]
    fn driver_too_old_names_the_call_and_both_versions() {
        let e = Error::DriverTooOld {
            call: "cuFuncGetParamInfo",
            needs: 12040,
            driver: 12020,
        };
        assert_eq!(
            e.to_string(),
            "cuFuncGetParamInfo needs a CUDA 12.4 driver (this one is 12.2)"
        );
        assert!(e.is(CUresult::CUDA_ERROR_NOT_SUPPORTED));
        assert_eq!(e.call(), Some("cuFuncGetParamInfo"));
    }
}
