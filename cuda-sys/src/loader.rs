//! Finding and opening `libcuda` and `libcudart` (`nvcuda.dll` and `cudart64_13.dll` on
//! Windows) without `std` or a heap.
//!
//! [`Library::open`] and [`getenv`] need a Unix target (`dlopen`, `getenv`) or Windows
//! (`LoadLibraryExW`, `GetEnvironmentVariableW`), and the CUDA library searches
//! ([`open_driver`], [`open_runtime`]) feature `loaded` too. The rest
//! ([`Library::none`], [`FixedStr`], the error types) exists on every target, so a
//! target without an OS (`x86_64-unknown-none`) builds tables with
//! [`DriverApi::from_resolver`](crate::DriverApi::from_resolver).
//!
//! # Errors stay small
//! A [`LoadError`] is at most 64 bytes. What a failed search tried, and the loader's
//! last error, are kept outside it: in one of a few process-lifetime [`SearchLog`]
//! records that the error points to (a search that fails the same way as an earlier one
//! shares its record), so the message still names every candidate and why the last
//! failed.
//!
//! # Unsafe policy
//! `dlopen`/`dlsym`/`dlerror`/`getenv` (and their Windows counterparts) are called with
//! NUL-terminated strings built in fixed stack buffers, and what they return is copied
//! out at once; a library handle is closed only by the [`Library`] that owns it. Opening
//! a library runs its initialisers, so what opens one (`Library::open`, `open_driver`,
//! `open_runtime`) is `unsafe`: the caller vouches for the library found (the CUDA
//! libraries by their names, or paths the user gave for them). A kept search record is
//! written once, by the thread that claimed its slot, before it is published
//! (Release/Acquire), and never written again.

#[cfg(unix)]
use core::ffi::c_char;
use core::ffi::{CStr, c_void};
use core::fmt;

/// The longest path the loader builds, in bytes (its buffer holds one more, for the NUL).
pub const MAX_PATH_LEN: usize = PATH_CAPACITY - 1;

/// The size of the loader's path buffer (text and NUL).
const PATH_CAPACITY: usize = 512;

/// A path the loader builds: [`MAX_PATH_LEN`] bytes at most.
pub type PathStr = FixedStr<PATH_CAPACITY>;

/// The driver library, as errors name it.
pub(crate) const DRIVER_LIBRARY: &str = if cfg!(windows) {
    "nvcuda.dll"
} else {
    "libcuda"
};

/// The runtime library, as errors name it (unused by a `linked` build that does not
/// load).
#[cfg(feature = "runtime")]
#[allow(dead_code)]
pub(crate) const RUNTIME_LIBRARY: &str = if cfg!(windows) {
    "cudart64_13.dll"
} else {
    "libcudart"
};

/// An opened shared library, closed on drop (`dlclose`; `FreeLibrary` on Windows), or none
/// ([`Library::none`]: the linked tables, tables from a resolver).
///
/// A function pointer read from a library is valid only while the library stays open.
/// The function tables ([`DriverApi`](crate::DriverApi), and `RuntimeApi` with feature
/// `runtime`) keep the library they were filled from open for the rest of the process:
/// they never close it, even when dropped.
pub struct Library {
    pub(crate) handle: *mut c_void,
}

// SAFETY: a dlopen handle (an HMODULE) may be used from any thread; dlsym
// (GetProcAddress) is thread-safe.
unsafe impl Send for Library {}
// SAFETY: as above; the handle is never mutated.
unsafe impl Sync for Library {}

impl Library {
    /// A library that owns nothing (tables built from a mock resolver, or linked mode).
    pub const fn none() -> Self {
        Self {
            handle: core::ptr::null_mut(),
        }
    }

    /// `dlopen(path, RTLD_NOW | RTLD_LOCAL)`.
    ///
    /// # Errors
    /// The `dlerror()` text when the library cannot be opened.
    ///
    /// # Safety
    /// Opening a library runs its initialisers (ELF constructors, C++ static
    /// constructors) and those of the libraries it depends on, in this process, with no
    /// contract Rust can check; closing it (when the `Library` drops) runs its
    /// finalisers. The caller must know that the library at `path` (as the dynamic loader
    /// resolves it) is sound to load and unload here: its initialisers and finalisers
    /// must not break invariants of this program, and nothing read from it (function
    /// pointers, addresses of its data) may be used after the `Library` is dropped.
    // The error is the loader's own text (264 bytes); what the tables' constructors
    // return, `LoadError`, is at most 64.
    #[allow(clippy::result_large_err)]
    #[cfg(unix)]
    #[cfg_attr(docsrs, doc(cfg(unix)))]
    pub unsafe fn open(path: &CStr) -> Result<Self, DlError> {
        // SAFETY: `path` is NUL-terminated; the caller vouches for running the library's
        // initialisers (see `# Safety`).
        let handle = unsafe { crate::unix::dlopen(path.as_ptr(), crate::unix::RTLD_NOW | crate::unix::RTLD_LOCAL) };
        if handle.is_null() {
            Err(DlError::last())
        } else {
            Ok(Self { handle })
        }
    }

    /// `dlsym`: the address of `symbol`, or null.
    #[cfg(unix)]
    #[cfg_attr(docsrs, doc(cfg(unix)))]
    pub fn symbol(&self, symbol: &CStr) -> *mut c_void {
        if self.handle.is_null() {
            return core::ptr::null_mut();
        }
        // SAFETY: the handle is open (owned by self) and `symbol` is NUL-terminated.
        unsafe { crate::unix::dlsym(self.handle, symbol.as_ptr()) }
    }

    /// The raw `dlopen` handle (the `HMODULE` on Windows; null for [`Library::none`]).
    pub fn as_raw(&self) -> *mut c_void {
        self.handle
    }
}

#[cfg(unix)]
impl Drop for Library {
    fn drop(&mut self) {
        if !self.handle.is_null() {
            // SAFETY: the handle came from dlopen and is closed exactly once, here.
            unsafe { crate::unix::dlclose(self.handle) };
        }
    }
}

/// A fixed-capacity text buffer (paths, error details) that is `Copy` and needs no heap.
#[derive(Clone, Copy)]
pub struct FixedStr<const N: usize> {
    buf: [u8; N],
    len: usize,
}

impl<const N: usize> FixedStr<N> {
    /// An empty buffer.
    pub const fn new() -> Self {
        Self {
            buf: [0; N],
            len: 0,
        }
    }

    /// Appends as much of `s` as fits (one byte stays free for a NUL terminator), on a
    /// character boundary. Returns whether all of it fit.
    pub fn push(&mut self, s: &str) -> bool {
        let room = N.saturating_sub(1).saturating_sub(self.len);
        let mut take = s.len().min(room);
        while take > 0 && !s.is_char_boundary(take) {
            take -= 1;
        }
        let (Some(dst), Some(src)) = (self.buf.get_mut(self.len..self.len + take), s.get(..take))
        else {
            return false;
        };
        dst.copy_from_slice(src.as_bytes());
        self.len += take;
        // Keep the byte after the text 0, so `as_cstr` ends there even when the buffer
        // held longer text before a `clear`.
        if let Some(nul) = self.buf.get_mut(self.len) {
            *nul = 0;
        }
        take == s.len()
    }

    /// The text so far.
    pub fn as_str(&self) -> &str {
        let bytes = self.buf.get(..self.len).unwrap_or(&[]);
        // Only whole `&str` prefixes cut at char boundaries are ever copied in.
        core::str::from_utf8(bytes).unwrap_or("")
    }

    /// The text as a C string (the byte after it is always 0; text with a NUL in it ends
    /// at that NUL).
    pub fn as_cstr(&self) -> &CStr {
        let bytes = self.buf.get(..=self.len).unwrap_or(&[0]);
        CStr::from_bytes_until_nul(bytes).unwrap_or(c"")
    }

    /// The most bytes of text the buffer holds (`N - 1`: one byte stays for the NUL).
    pub const fn capacity() -> usize {
        N.saturating_sub(1)
    }

    /// Forgets the text.
    pub fn clear(&mut self) {
        self.len = 0;
        if let Some(b) = self.buf.first_mut() {
            *b = 0;
        }
    }
}

impl<const N: usize> fmt::Write for FixedStr<N> {
    /// Appends what fits; an error when something did not.
    fn write_str(&mut self, s: &str) -> fmt::Result {
        if self.push(s) { Ok(()) } else { Err(fmt::Error) }
    }
}

impl<const N: usize> Default for FixedStr<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> fmt::Debug for FixedStr<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl<const N: usize> fmt::Display for FixedStr<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The text of `dlerror()` at the time of a failure (on Windows, the `GetLastError` code
/// of `LoadLibraryExW`, with its name).
#[derive(Clone, Copy, Debug)]
pub struct DlError(pub FixedStr<256>);

#[cfg(unix)]
impl DlError {
    fn last() -> Self {
        let mut s = FixedStr::new();
        // SAFETY: dlerror returns null or a NUL-terminated string valid until the next
        // dl* call on this thread; it is copied out at once.
        let msg = unsafe { crate::unix::dlerror() };
        if msg.is_null() {
            s.push("unknown dlopen error");
        } else {
            // SAFETY: non-null dlerror result is a C string (see above).
            let text = unsafe { CStr::from_ptr(msg as *const c_char) };
            s.push(text.to_str().unwrap_or("dlopen error (not UTF-8)"));
        }
        Self(s)
    }
}

/// Why an environment variable could not be used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum EnvError {
    /// The value (or the path built from it) is `len` bytes; the buffer holds `max`.
    TooLong {
        /// Bytes in the value, or in the path built from it.
        len: usize,
        /// The most bytes that fit.
        max: usize,
    },
    /// The value is not UTF-8 (on Windows: not valid UTF-16).
    NotUtf8,
}

impl fmt::Display for EnvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TooLong { len, max } => write!(f, "too long ({len} bytes; at most {max} fit)"),
            Self::NotUtf8 => f.write_str("not valid UTF-8"),
        }
    }
}

impl core::error::Error for EnvError {}

/// What a failed library search tried: the candidates in order, and the last loader
/// error (`dlerror`, or the Windows error code). Kept for the rest of the process, so a
/// [`LoadError`] carries a reference, not the text.
#[derive(Clone, Copy)]
pub struct SearchLog {
    tried: FixedStr<2048>,
    last: DlError,
}

impl SearchLog {
    /// The candidates tried, comma-separated, in order.
    pub fn tried(&self) -> &str {
        self.tried.as_str()
    }

    /// The loader's error for the last candidate that failed to open.
    pub fn last_error(&self) -> &str {
        self.last.0.as_str()
    }
}

impl PartialEq for SearchLog {
    fn eq(&self, other: &Self) -> bool {
        self.tried() == other.tried() && self.last_error() == other.last_error()
    }
}

impl Eq for SearchLog {}

impl fmt::Debug for SearchLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SearchLog")
            .field("tried", &self.tried())
            .field("last_error", &self.last_error())
            .finish()
    }
}

/// How many failed searches that differ from each other keep their [`SearchLog`].
pub const KEPT_SEARCHES: usize = 8;

/// The kept search records (`EMPTY`, `BUSY` while written, `READY` after).
#[cfg(all(feature = "loaded", any(unix, windows)))]
mod kept {
    use core::cell::UnsafeCell;
    use core::mem::MaybeUninit;
    use core::sync::atomic::{AtomicU8, Ordering};

    use super::{KEPT_SEARCHES, SearchLog};

    const EMPTY: u8 = 0;
    const BUSY: u8 = 1;
    const READY: u8 = 2;

    struct Slot {
        state: AtomicU8,
        log: UnsafeCell<MaybeUninit<SearchLog>>,
    }

    // SAFETY: a slot's log is written only by the thread that moved it EMPTY -> BUSY,
    // and read only after READY was published (Release/Acquire); never written again.
    unsafe impl Sync for Slot {}

    static SLOTS: [Slot; KEPT_SEARCHES] = [const {
        Slot {
            state: AtomicU8::new(EMPTY),
            log: UnsafeCell::new(MaybeUninit::uninit()),
        }
    }; KEPT_SEARCHES];

    fn read(slot: &'static Slot) -> Option<&'static SearchLog> {
        // SAFETY: READY is published after the write, which is never repeated.
        (slot.state.load(Ordering::Acquire) == READY)
            .then(|| unsafe { (*slot.log.get()).assume_init_ref() })
    }

    /// `log` kept for the rest of the process: an equal record kept before, or a free
    /// slot written with it; `None` when every slot holds another record.
    pub(super) fn keep(log: &SearchLog) -> Option<&'static SearchLog> {
        if let Some(same) = SLOTS.iter().filter_map(read).find(|kept| *kept == log) {
            return Some(same);
        }
        let free = SLOTS.iter().find(|slot| {
            slot.state
                .compare_exchange(EMPTY, BUSY, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        })?;
        // SAFETY: BUSY gives this thread the only access to the slot until READY.
        unsafe { (*free.log.get()).write(*log) };
        free.state.store(READY, Ordering::Release);
        read(free)
    }
}

/// Why a library or its table could not be loaded. At most 64 bytes (checked at
/// compile time): what a search tried is in a [`SearchLog`] it refers to.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub enum LoadError {
    /// No candidate could be opened.
    LibraryNotFound {
        /// `libcuda` or `libcudart` (`nvcuda.dll`, `cudart64_13.dll` on Windows).
        library: &'static str,
        /// The candidates tried and the last loader error; `None` only when
        /// [`KEPT_SEARCHES`] records of other failed searches were kept already (the
        /// message then points to the documented search order).
        search: Option<&'static SearchLog>,
    },
    /// The library opened but lacks the entry point the loader needs.
    MissingEntryPoint {
        /// The library.
        library: &'static str,
        /// The missing symbol.
        symbol: &'static str,
    },
    /// An environment variable that names a path (or the start of one) cannot be used:
    /// the path is longer than [`MAX_PATH_LEN`], or not UTF-8. Loading stops here rather
    /// than going on to other candidates, which could load a different library than the
    /// one the variable names.
    BadEnvPath {
        /// The library being searched for.
        library: &'static str,
        /// The variable (`CUDA_SYS_LIBCUDA`).
        variable: &'static str,
        /// What is wrong with it.
        problem: EnvError,
    },
    /// A table was already installed (see `install_driver`).
    AlreadyLoaded,
    /// The process-wide table was asked for, none was installed, and this build has no
    /// way to make one: it cannot load libraries (feature `loaded` on Unix or Windows) and
    /// has no linked table (feature `linked`). Build one with `from_resolver` and
    /// install it ([`install_driver`](crate::install_driver)) before the first use.
    NotInstalled {
        /// `libcuda` or `libcudart`.
        library: &'static str,
    },
    /// An earlier attempt to load this table panicked, so there is no table.
    Poisoned,
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::LibraryNotFound {
                library,
                search: Some(log),
            } => write!(
                f,
                "could not load {library}: tried {} (last error: {})",
                log.tried(),
                log.last_error()
            ),
            Self::LibraryNotFound {
                library,
                search: None,
            } => write!(
                f,
                "could not load {library}: no candidate of the documented search \
                 (`cudadrv_sys::loader::open_driver` / `open_runtime`) opened; the list \
                 of what was tried is not kept ({KEPT_SEARCHES} other failed searches \
                 were kept first)"
            ),
            Self::MissingEntryPoint { library, symbol } => {
                write!(f, "{library} was found but has no `{symbol}`")
            }
            Self::BadEnvPath {
                library,
                variable,
                problem: EnvError::TooLong { len, max },
            } => write!(
                f,
                "could not load {library}: the path from ${variable} is too long \
                 ({len} bytes; paths of at most {max} bytes are supported)"
            ),
            Self::BadEnvPath {
                library,
                variable,
                problem,
            } => write!(f, "could not load {library}: ${variable} is {problem}"),
            Self::AlreadyLoaded => f.write_str("a CUDA function table was already loaded"),
            Self::NotInstalled { library } => write!(
                f,
                "no table for {library} was installed, and this build can neither load it \
                 (feature `loaded`, Unix and Windows targets) nor link it (feature \
                 `linked`): install one built with `from_resolver` first"
            ),
            Self::Poisoned => {
                f.write_str("loading the CUDA function table panicked earlier; it is not loaded")
            }
        }
    }
}

impl core::error::Error for LoadError {}

// Errors are returned by value through every frame of a load: they stay small.
const _: () = assert!(core::mem::size_of::<LoadError>() <= 64);
const _: () = assert!(core::mem::size_of::<EnvError>() <= 24);

impl crate::once::Poison for LoadError {
    fn poisoned() -> Self {
        Self::Poisoned
    }
}

#[cfg(windows)]
pub use crate::win32::getenv;

/// Reads an environment variable (no `std`) into an owned buffer: `Ok(None)` when unset
/// or empty.
///
/// The value is copied out at once, so it stays as read whatever later changes the
/// environment. (Like every `getenv`, the read itself races with a `setenv` on another
/// thread; that is why `std::env::set_var` is `unsafe`.)
///
/// # Errors
/// [`EnvError::TooLong`] when the value has more than [`FixedStr::<N>::capacity`]
/// bytes (it is neither cut short nor skipped), [`EnvError::NotUtf8`] when it is not
/// UTF-8.
#[cfg(unix)]
#[cfg_attr(docsrs, doc(cfg(unix)))]
pub fn getenv<const N: usize>(name: &CStr) -> Result<Option<FixedStr<N>>, EnvError> {
    // SAFETY: `name` is NUL-terminated. The result is null or points to the variable's
    // NUL-terminated value, which is copied below before this function returns.
    let value = unsafe { crate::unix::getenv(name.as_ptr()) };
    if value.is_null() {
        return Ok(None);
    }
    // SAFETY: a non-null getenv result is a NUL-terminated string (see above); the borrow
    // ends inside this function.
    let bytes = unsafe { CStr::from_ptr(value) }.to_bytes();
    let text = core::str::from_utf8(bytes).map_err(|_| EnvError::NotUtf8)?;
    if text.is_empty() {
        return Ok(None);
    }
    let mut out = FixedStr::new();
    if !out.push(text) {
        return Err(EnvError::TooLong {
            len: text.len(),
            max: FixedStr::<N>::capacity(),
        });
    }
    Ok(Some(out))
}

/// Tries candidate paths in order, recording each in its [`SearchLog`] (on the stack
/// while the search runs; kept only when it fails).
#[cfg(all(feature = "loaded", any(unix, windows)))]
pub(crate) struct Search {
    library: &'static str,
    log: SearchLog,
    failed: bool,
}

#[cfg(all(feature = "loaded", any(unix, windows)))]
impl Search {
    /// A search for `library`.
    ///
    /// # Safety
    /// Every path then tried ([`Search::try_path`], `Search::try_quiet`) is opened
    /// with [`Library::open`]: the caller vouches for all of them, as its `# Safety`
    /// asks.
    pub(crate) const unsafe fn new(library: &'static str) -> Self {
        Self {
            library,
            log: SearchLog {
                tried: FixedStr::new(),
                last: DlError(FixedStr::new()),
            },
            failed: false,
        }
    }

    /// Reads `variable`, a path or the start of one: `Ok(None)` when unset or empty, an
    /// error naming it when it is too long for a path or not UTF-8.
    pub(crate) fn env(&self, variable: &'static CStr) -> Result<Option<PathStr>, LoadError> {
        getenv(variable).map_err(|problem| self.bad_env(variable, problem))
    }

    fn bad_env(&self, variable: &'static CStr, problem: EnvError) -> LoadError {
        LoadError::BadEnvPath {
            library: self.library,
            variable: variable.to_str().unwrap_or("?"),
            problem,
        }
    }

    /// The concatenation of `parts`; a path too long for the buffer is an error that
    /// names `variable`, the environment variable the path came from.
    fn build(&self, variable: Option<&'static CStr>, parts: &[&str]) -> Result<PathStr, LoadError> {
        let mut path = PathStr::new();
        for part in parts {
            if !path.push(part) {
                let len = parts.iter().map(|p| p.len()).sum();
                let problem = EnvError::TooLong {
                    len,
                    max: MAX_PATH_LEN,
                };
                return Err(self.bad_env(variable.unwrap_or(c"?"), problem));
            }
        }
        Ok(path)
    }

    /// Records a candidate (or a summary of candidates tried quietly).
    pub(crate) fn note(&mut self, text: &str) {
        if !self.log.tried.as_str().is_empty() {
            self.log.tried.push(", ");
        }
        self.log.tried.push(text);
    }

    /// Opens `path`, remembering the loader's error if it fails.
    fn open(&mut self, path: &CStr) -> Option<Library> {
        // SAFETY: whoever made this search vouched for every path it tries
        // (`Search::new`).
        match unsafe { Library::open(path) } {
            Ok(lib) => Some(lib),
            Err(e) => {
                self.log.last = e;
                self.failed = true;
                None
            }
        }
    }

    /// Tries the concatenation of `parts` (one path, from `variable` if it names one);
    /// records it.
    pub(crate) fn try_path(
        &mut self,
        variable: Option<&'static CStr>,
        parts: &[&str],
    ) -> Result<Option<Library>, LoadError> {
        let path = self.build(variable, parts)?;
        self.note(path.as_str());
        Ok(self.open(path.as_cstr()))
    }

    /// Tries a path without recording it (for wide searches summarised by [`Search::note`]).
    #[cfg(all(unix, any(feature = "runtime", feature = "nccl", feature = "nvrtc")))]
    pub(crate) fn try_quiet(
        &mut self,
        variable: Option<&'static CStr>,
        parts: &[&str],
    ) -> Result<Option<Library>, LoadError> {
        let path = self.build(variable, parts)?;
        // SAFETY: as in `open`.
        Ok(unsafe { Library::open(path.as_cstr()) }.ok())
    }

    /// Tries `name` from the Windows system folder alone (`LOAD_LIBRARY_SEARCH_SYSTEM32`:
    /// no DLL of that name planted elsewhere is picked up); records it.
    #[cfg(windows)]
    pub(crate) fn try_system32(&mut self, name: &'static CStr) -> Option<Library> {
        self.note(name.to_str().unwrap_or("?"));
        self.log.tried.push(" (System32)");
        // SAFETY: as in `open`.
        match unsafe { Library::open_with(name, crate::win32::LOAD_LIBRARY_SEARCH_SYSTEM32) } {
            Ok(lib) => Some(lib),
            Err(e) => {
                self.log.last = e;
                self.failed = true;
                None
            }
        }
    }

    /// The error of a search where no candidate opened, its record kept.
    pub(crate) fn fail(mut self) -> LoadError {
        if !self.failed {
            self.log.last.0.push("no candidate was tried");
        }
        LoadError::LibraryNotFound {
            library: self.library,
            search: kept::keep(&self.log),
        }
    }
}

/// Opens the driver. Linux and other Unix targets: `$CUDA_SYS_LIBCUDA`, then
/// `libcuda.so.1`, then `libcuda.so` (by the dynamic loader's search). Windows:
/// `%CUDA_SYS_LIBCUDA%` (a full path; the DLLs it needs are looked for in its folder
/// first), then `nvcuda.dll` from the system folder (`System32`, where the display
/// driver installs it) and nowhere else.
///
/// # Errors
/// [`LoadError::BadEnvPath`] when `$CUDA_SYS_LIBCUDA` is set but longer than
/// [`MAX_PATH_LEN`] or not UTF-8; [`LoadError::LibraryNotFound`] when no candidate opens.
///
/// # Safety
/// As for [`Library::open`], for the first of these candidates that opens: it must be
/// the CUDA driver (or have its exports and signatures), sound to open in this process.
/// NVIDIA's libraries are built to be opened and closed with `dlopen`/`dlclose`
/// (`LoadLibrary`/`FreeLibrary`) at any time (the CUDA runtime itself opens the driver
/// so); the variable can name any file.
#[cfg(all(feature = "loaded", any(unix, windows)))]
#[cfg_attr(docsrs, doc(cfg(all(feature = "loaded", any(unix, windows)))))]
pub unsafe fn open_driver() -> Result<Library, LoadError> {
    const VAR: &CStr = c"CUDA_SYS_LIBCUDA";
    // SAFETY: the caller vouches for the candidates (`# Safety`).
    let mut search = unsafe { Search::new(DRIVER_LIBRARY) };
    if let Some(p) = search.env(VAR)? {
        if let Some(lib) = search.try_path(Some(VAR), &[p.as_str()])? {
            return Ok(lib);
        }
    }
    #[cfg(unix)]
    for name in ["libcuda.so.1", "libcuda.so"] {
        if let Some(lib) = search.try_path(None, &[name])? {
            return Ok(lib);
        }
    }
    #[cfg(windows)]
    if let Some(lib) = search.try_system32(c"nvcuda.dll") {
        return Ok(lib);
    }
    Err(search.fail())
}

/// Opens the runtime, in this order.
///
/// Linux and other Unix targets: `$CUDA_SYS_LIBCUDART`; `lib64/libcudart.so.13` under
/// `$CUDA_PATH`, `$CUDA_HOME` and `/usr/local/cuda`; `libcudart.so.13` on the loader
/// path; the PyPI wheel (`nvidia/cu13/lib`) in the site-packages of `$VIRTUAL_ENV`,
/// `~/.local`, `/usr/local` and `/usr` for Python 3.8 to 3.14.
///
/// Windows: `%CUDA_SYS_LIBCUDART%`; `bin\x64\cudart64_13.dll` then `bin\cudart64_13.dll`
/// under `%CUDA_PATH%` and `%CUDA_HOME%` (the CUDA 13 installer sets `CUDA_PATH`);
/// `cudart64_13.dll` by the standard DLL search (the program's folder, the system
/// folders, then `PATH`). Only the runtime of the headers' major version (13) is
/// looked for, as on Linux: a 12.x `cudart64_12.dll` has other layouts for some of the
/// structs these bindings declare. The pip wheel is not searched on Windows (name it in
/// `CUDA_SYS_LIBCUDART`).
///
/// # Errors
/// [`LoadError::BadEnvPath`] when one of those variables is set but the path built from
/// it is longer than [`MAX_PATH_LEN`] or not UTF-8 (the search stops there);
/// [`LoadError::LibraryNotFound`] when no candidate opens.
///
/// # Safety
/// As for [`open_driver`]: the first candidate that opens must be the CUDA runtime (or
/// have its exports and signatures), sound to open in this process.
#[cfg(all(feature = "loaded", feature = "runtime", any(unix, windows)))]
#[cfg_attr(
    docsrs,
    doc(cfg(all(feature = "loaded", feature = "runtime", any(unix, windows))))
)]
pub unsafe fn open_runtime() -> Result<Library, LoadError> {
    const VAR: &CStr = c"CUDA_SYS_LIBCUDART";
    // SAFETY: the caller vouches for the candidates (`# Safety`).
    let mut search = unsafe { Search::new(RUNTIME_LIBRARY) };
    if let Some(p) = search.env(VAR)? {
        if let Some(lib) = search.try_path(Some(VAR), &[p.as_str()])? {
            return Ok(lib);
        }
    }
    #[cfg(unix)]
    {
        if let Some(lib) = runtime_unix(&mut search)? {
            return Ok(lib);
        }
    }
    #[cfg(windows)]
    {
        const DLL: &str = "cudart64_13.dll";
        for var in [c"CUDA_PATH", c"CUDA_HOME"] {
            if let Some(root) = search.env(var)? {
                for bin in ["\\bin\\x64\\", "\\bin\\"] {
                    let root = root.as_str().trim_end_matches(['\\', '/']);
                    if let Some(lib) = search.try_path(Some(var), &[root, bin, DLL])? {
                        return Ok(lib);
                    }
                }
            }
        }
        if let Some(lib) = search.try_path(None, &[DLL])? {
            return Ok(lib);
        }
    }
    Err(search.fail())
}

/// The Unix candidates of [`open_runtime`] after `$CUDA_SYS_LIBCUDART`.
#[cfg(all(feature = "loaded", feature = "runtime", unix))]
fn runtime_unix(search: &mut Search) -> Result<Option<Library>, LoadError> {
    const SONAME: &str = "libcudart.so.13";
    for var in [c"CUDA_PATH", c"CUDA_HOME"] {
        if let Some(root) = search.env(var)? {
            if let Some(lib) = search.try_path(Some(var), &[root.as_str(), "/lib64/", SONAME])? {
                return Ok(Some(lib));
            }
        }
    }
    if let Some(lib) = search.try_path(None, &["/usr/local/cuda/lib64/", SONAME])? {
        return Ok(Some(lib));
    }
    if let Some(lib) = search.try_path(None, &[SONAME])? {
        return Ok(Some(lib));
    }
    if let Some(lib) = site_packages(search, "/nvidia/cu13/lib/", SONAME)? {
        return Ok(Some(lib));
    }
    search.note("<site-packages>/nvidia/cu13/lib/libcudart.so.13 (pip wheel nvidia-cuda-runtime)");
    Ok(None)
}

/// `<site-packages><dir><soname>` in the Python site-packages (and dist-packages) of
/// `$VIRTUAL_ENV`, `~/.local`, `/usr/local` and `/usr`, for Python 3.8 to 3.14: where a
/// pip wheel (`nvidia-cuda-runtime`, `nvidia-nccl-cu13`) puts its library. Tried
/// quietly (the caller notes the pattern once).
#[cfg(all(
    feature = "loaded",
    any(feature = "runtime", feature = "nccl", feature = "nvrtc"),
    unix
))]
fn site_packages(search: &mut Search, dir: &str, soname: &str) -> Result<Option<Library>, LoadError> {
    let venv = search.env(c"VIRTUAL_ENV")?;
    let home = search.env(c"HOME")?;
    let bases: [(Option<&CStr>, Option<&str>, &str); 4] = [
        (
            Some(c"VIRTUAL_ENV"),
            venv.as_ref().map(PathStr::as_str),
            "/lib/",
        ),
        (
            Some(c"HOME"),
            home.as_ref().map(PathStr::as_str),
            "/.local/lib/",
        ),
        (None, Some("/usr/local"), "/lib/"),
        (None, Some("/usr"), "/lib/"),
    ];
    const PYTHONS: [&str; 7] = [
        "python3.8",
        "python3.9",
        "python3.10",
        "python3.11",
        "python3.12",
        "python3.13",
        "python3.14",
    ];
    for (var, base, lib) in bases {
        let Some(base) = base else { continue };
        for py in PYTHONS {
            for pkgs in ["/site-packages", "/dist-packages"] {
                let parts = [base, lib, py, pkgs, dir, soname];
                if let Some(found) = search.try_quiet(var, &parts)? {
                    return Ok(Some(found));
                }
            }
        }
    }
    Ok(None)
}

/// NCCL, as errors name it.
#[cfg(feature = "nccl")]
pub(crate) const NCCL_LIBRARY: &str = "libnccl";

/// Opens NCCL (Linux and other Unix targets), in this order: `$CUDA_SYS_LIBNCCL`;
/// `libnccl.so.2` on the loader path (a system package, `LD_LIBRARY_PATH`); the PyPI
/// wheel (`nvidia/nccl/lib/libnccl.so.2`, which PyTorch installs) in the site-packages
/// of `$VIRTUAL_ENV`, `~/.local`, `/usr/local` and `/usr` for Python 3.8 to 3.14.
///
/// # Errors
/// [`LoadError::BadEnvPath`] when one of those variables is set but unusable;
/// [`LoadError::LibraryNotFound`] naming every candidate when none opens.
///
/// # Safety
/// As for [`open_driver`]: the first candidate that opens must be NCCL 2 (or have its
/// exports and signatures), sound to open in this process.
#[cfg(all(feature = "loaded", feature = "nccl", unix))]
#[cfg_attr(docsrs, doc(cfg(all(feature = "loaded", feature = "nccl", unix))))]
pub unsafe fn open_nccl() -> Result<Library, LoadError> {
    const VAR: &CStr = c"CUDA_SYS_LIBNCCL";
    const SONAME: &str = "libnccl.so.2";
    // SAFETY: the caller vouches for the candidates (`# Safety`).
    let mut search = unsafe { Search::new(NCCL_LIBRARY) };
    if let Some(p) = search.env(VAR)? {
        if let Some(lib) = search.try_path(Some(VAR), &[p.as_str()])? {
            return Ok(lib);
        }
    }
    if let Some(lib) = search.try_path(None, &[SONAME])? {
        return Ok(lib);
    }
    if let Some(lib) = site_packages(&mut search, "/nvidia/nccl/lib/", SONAME)? {
        return Ok(lib);
    }
    search.note("<site-packages>/nvidia/nccl/lib/libnccl.so.2 (pip wheel nvidia-nccl-cu13)");
    Err(search.fail())
}

/// NVRTC, as errors name it.
#[cfg(feature = "nvrtc")]
pub(crate) const NVRTC_LIBRARY: &str = "libnvrtc";

/// Opens NVRTC, in this order.
///
/// Linux and other Unix targets: `$CUDA_SYS_LIBNVRTC`; `lib64/libnvrtc.so.13`, then
/// `.so.12`, under `$CUDA_PATH`, `$CUDA_HOME` and `/usr/local/cuda` (a toolkit installed
/// next to the driver it was made for); `libnvrtc.so.13`, then `.so.12`, on the loader
/// path; the pip wheels (`nvidia/cu13/lib/libnvrtc.so.13` of `nvidia-cuda-nvrtc`,
/// `nvidia/cuda_nvrtc/lib/libnvrtc.so.12` of `nvidia-cuda-nvrtc-cu12`) in the
/// site-packages of `$VIRTUAL_ENV`, `~/.local`, `/usr/local` and `/usr` for Python 3.8 to
/// 3.14.
///
/// Windows: `%CUDA_SYS_LIBNVRTC%`; `bin\x64\nvrtc64_130_0.dll`, `bin\nvrtc64_130_0.dll`,
/// then `bin\nvrtc64_120_0.dll` under `%CUDA_PATH%` and `%CUDA_HOME%`; the same names by
/// the standard DLL search.
///
/// NVRTC keeps its C interface across releases, so 12.x serves as well as 13.x; which one
/// was found is `nvrtcVersion`'s answer.
///
/// # Errors
/// [`LoadError::BadEnvPath`] when one of those variables is set but unusable;
/// [`LoadError::LibraryNotFound`] naming every candidate when none opens.
///
/// # Safety
/// As for [`open_driver`]: the first candidate that opens must be NVRTC (or have its
/// exports and signatures), sound to open in this process.
#[cfg(all(feature = "loaded", feature = "nvrtc", any(unix, windows)))]
#[cfg_attr(
    docsrs,
    doc(cfg(all(feature = "loaded", feature = "nvrtc", any(unix, windows))))
)]
pub unsafe fn open_nvrtc() -> Result<Library, LoadError> {
    const VAR: &CStr = c"CUDA_SYS_LIBNVRTC";
    // SAFETY: the caller vouches for the candidates (`# Safety`).
    let mut search = unsafe { Search::new(NVRTC_LIBRARY) };
    if let Some(p) = search.env(VAR)? {
        if let Some(lib) = search.try_path(Some(VAR), &[p.as_str()])? {
            return Ok(lib);
        }
    }
    #[cfg(unix)]
    {
        const SONAMES: [&str; 2] = ["libnvrtc.so.13", "libnvrtc.so.12"];
        for var in [c"CUDA_PATH", c"CUDA_HOME"] {
            if let Some(root) = search.env(var)? {
                for soname in SONAMES {
                    let parts = [root.as_str(), "/lib64/", soname];
                    if let Some(lib) = search.try_path(Some(var), &parts)? {
                        return Ok(lib);
                    }
                }
            }
        }
        for soname in SONAMES {
            if let Some(lib) = search.try_path(None, &["/usr/local/cuda/lib64/", soname])? {
                return Ok(lib);
            }
        }
        for soname in SONAMES {
            if let Some(lib) = search.try_path(None, &[soname])? {
                return Ok(lib);
            }
        }
        if let Some(lib) = site_packages(&mut search, "/nvidia/cu13/lib/", SONAMES[0])? {
            return Ok(lib);
        }
        search.note("<site-packages>/nvidia/cu13/lib/libnvrtc.so.13 (pip wheel nvidia-cuda-nvrtc)");
        if let Some(lib) = site_packages(&mut search, "/nvidia/cuda_nvrtc/lib/", SONAMES[1])? {
            return Ok(lib);
        }
        search.note(
            "<site-packages>/nvidia/cuda_nvrtc/lib/libnvrtc.so.12 (pip wheel nvidia-cuda-nvrtc-cu12)",
        );
    }
    #[cfg(windows)]
    {
        const DLLS: [&str; 2] = ["nvrtc64_130_0.dll", "nvrtc64_120_0.dll"];
        for var in [c"CUDA_PATH", c"CUDA_HOME"] {
            if let Some(root) = search.env(var)? {
                let root = root.as_str().trim_end_matches(['\\', '/']);
                for dll in DLLS {
                    for bin in ["\\bin\\x64\\", "\\bin\\"] {
                        if let Some(lib) = search.try_path(Some(var), &[root, bin, dll])? {
                            return Ok(lib);
                        }
                    }
                }
            }
        }
        for dll in DLLS {
            if let Some(lib) = search.try_path(None, &[dll])? {
                return Ok(lib);
            }
        }
    }
    Err(search.fail())
}

#[cfg(test)]
mod tests {
    extern crate std;

    use super::*;
    #[cfg(unix)]
    use std::string::String;
    #[cfg(unix)]
    use std::sync::Mutex;

    /// Tests that write the environment hold this, so no read races a write.
    #[cfg(unix)]
    static ENV: Mutex<()> = Mutex::new(());

    #[cfg(unix)]
    fn set_env(name: &str, value: &str) {
        // SAFETY: every test in this crate that reads or writes the environment holds
        // `ENV`, so no other thread of this test binary touches it concurrently.
        unsafe { std::env::set_var(name, value) };
    }

    #[cfg(unix)]
    fn remove_env(name: &str) {
        // SAFETY: as in `set_env`.
        unsafe { std::env::remove_var(name) };
    }

    /// Errors stay small (the issue's goal: at most 64 bytes), and so does what a load
    /// returns by value.
    #[test]
    fn errors_are_small() {
        use core::mem::size_of;
        std::println!(
            "LoadError {} B, EnvError {} B, SearchLog {} B (kept outside the error)",
            size_of::<LoadError>(),
            size_of::<EnvError>(),
            size_of::<SearchLog>()
        );
        assert!(size_of::<LoadError>() <= 64);
        assert!(size_of::<Result<(), LoadError>>() <= 64);
        assert!(size_of::<Result<Library, LoadError>>() <= 64);
        assert!(size_of::<Option<&'static SearchLog>>() == 8);
    }

    #[cfg(all(feature = "loaded", any(unix, windows)))]
    fn log(tried: &str, last: &str) -> SearchLog {
        let mut log = SearchLog {
            tried: FixedStr::new(),
            last: DlError(FixedStr::new()),
        };
        log.tried.push(tried);
        log.last.0.push(last);
        log
    }

    /// A failed search's record is kept once for the process: an equal one shares it;
    /// when the slots are full, an error says where to look instead.
    #[test]
    #[cfg(all(feature = "loaded", any(unix, windows)))]
    fn failed_searches_keep_their_record() {
        let a = kept::keep(&log("/x/libcuda.so.1, libcuda.so.1", "not found"));
        let again = kept::keep(&log("/x/libcuda.so.1, libcuda.so.1", "not found"));
        let (Some(a), Some(again)) = (a, again) else {
            panic!("no slot for the first record");
        };
        assert!(core::ptr::eq(a, again), "an equal record is shared");
        let error = LoadError::LibraryNotFound {
            library: "libcuda",
            search: Some(a),
        };
        assert_eq!(
            std::format!("{error}"),
            "could not load libcuda: tried /x/libcuda.so.1, libcuda.so.1 (last error: not found)"
        );
        // Other records fill the slots; then none is kept, and the message says so.
        let mut kept_others = 0;
        for i in 0..2 * KEPT_SEARCHES {
            let other = log(&std::format!("/other/{i}"), "not found");
            match kept::keep(&other) {
                Some(k) => {
                    assert_eq!(k.tried(), std::format!("/other/{i}"));
                    kept_others += 1;
                }
                None => break,
            }
        }
        assert!(kept_others < KEPT_SEARCHES);
        assert!(kept::keep(&log("/one/more", "x")).is_none());
        let again = kept::keep(&log("/x/libcuda.so.1, libcuda.so.1", "not found"));
        assert!(again.is_some_and(|k| core::ptr::eq(k, a)), "still shared");
        let error = LoadError::LibraryNotFound {
            library: "libcuda",
            search: None,
        };
        let text = std::format!("{error}");
        assert!(text.contains("open_driver"), "{text}");
    }

    /// A real search that fails names every candidate and the loader's last error.
    #[test]
    #[cfg(all(feature = "loaded", unix))]
    #[cfg_attr(miri, ignore = "calls dlopen")]
    fn a_failed_driver_search_names_what_it_tried() {
        let _env = ENV.lock();
        set_env("CUDA_SYS_LIBCUDA", "/nonexistent/libcuda.so.1");
        // SAFETY: the variable names no file; the rest are the CUDA driver's names.
        let result = unsafe { open_driver() };
        remove_env("CUDA_SYS_LIBCUDA");
        let Err(error) = result else {
            std::println!("skipped: this machine has a CUDA driver");
            return;
        };
        let LoadError::LibraryNotFound {
            library,
            search: Some(log),
        } = error
        else {
            panic!("{error:?}");
        };
        assert_eq!(library, "libcuda");
        assert_eq!(
            log.tried(),
            "/nonexistent/libcuda.so.1, libcuda.so.1, libcuda.so"
        );
        assert!(log.last_error().contains("libcuda.so"), "{log:?}");
    }

    #[test]
    fn fixed_str_clear_then_shorter_push() {
        let mut s = FixedStr::<16>::new();
        assert!(s.push("hello world"));
        s.clear();
        assert!(s.push("hi"));
        assert_eq!(s.as_str(), "hi");
        assert_eq!(s.as_cstr(), c"hi");
        assert!(s.push("!"));
        assert_eq!(s.as_cstr(), c"hi!");
        s.clear();
        assert_eq!((s.as_str(), s.as_cstr()), ("", c""));
    }

    #[test]
    fn fixed_str_reports_what_does_not_fit() {
        let mut s = FixedStr::<6>::new();
        assert_eq!(FixedStr::<6>::capacity(), 5);
        assert!(s.push("abcde"));
        assert!(!s.push("f"));
        assert_eq!(s.as_cstr(), c"abcde");
        let mut s = FixedStr::<4>::new();
        assert!(!s.push("aé€"), "cut on a character boundary");
        assert_eq!(s.as_str(), "aé");
        assert_eq!(FixedStr::<0>::new().as_cstr(), c"");
        assert!(!FixedStr::<0>::new().push("x"));
    }

    #[test]
    #[cfg(unix)]
    fn getenv_copies_the_value_out() {
        let _env = ENV.lock();
        set_env("CUDA_SYS_TEST_GETENV", "/first/value");
        let first = getenv::<64>(c"CUDA_SYS_TEST_GETENV");
        set_env("CUDA_SYS_TEST_GETENV", "/a/second/and/longer/value");
        assert_eq!(
            first.map(|v| v.map(|v| String::from(v.as_str()))),
            Ok(Some("/first/value".into()))
        );
        remove_env("CUDA_SYS_TEST_GETENV");
        assert_eq!(
            getenv::<64>(c"CUDA_SYS_TEST_GETENV").map(|v| v.is_some()),
            Ok(false)
        );
        set_env("CUDA_SYS_TEST_GETENV", "");
        assert_eq!(
            getenv::<64>(c"CUDA_SYS_TEST_GETENV").map(|v| v.is_some()),
            Ok(false)
        );
        remove_env("CUDA_SYS_TEST_GETENV");
    }

    #[test]
    #[cfg(unix)]
    fn getenv_reports_a_value_too_long_for_its_buffer() {
        let _env = ENV.lock();
        set_env("CUDA_SYS_TEST_GETENV_LONG", "0123456789");
        assert_eq!(
            getenv::<10>(c"CUDA_SYS_TEST_GETENV_LONG").map(|v| v.map(|v| String::from(v.as_str()))),
            Err(EnvError::TooLong { len: 10, max: 9 })
        );
        let fits = getenv::<11>(c"CUDA_SYS_TEST_GETENV_LONG");
        assert_eq!(
            fits.map(|v| v.map(|v| String::from(v.as_cstr().to_str().unwrap_or("")))),
            Ok(Some("0123456789".into()))
        );
        remove_env("CUDA_SYS_TEST_GETENV_LONG");
    }

    /// A path variable longer than the path buffer stops the search with an error that
    /// names it, instead of being skipped (which would load another library).
    #[test]
    #[cfg(all(feature = "loaded", unix))]
    fn a_path_variable_too_long_is_an_error_naming_it() {
        let _env = ENV.lock();
        let long = "/x".repeat(300);
        set_env("CUDA_SYS_LIBCUDA", &long);
        // SAFETY: the path is too long to be opened; no library is.
        let err = unsafe { open_driver() }.err();
        remove_env("CUDA_SYS_LIBCUDA");
        let Some(LoadError::BadEnvPath {
            library,
            variable,
            problem,
        }) = err
        else {
            panic!("expected BadEnvPath, got {err:?}");
        };
        assert_eq!((library, variable), ("libcuda", "CUDA_SYS_LIBCUDA"));
        assert_eq!(
            problem,
            EnvError::TooLong {
                len: 600,
                max: MAX_PATH_LEN
            }
        );
        let text = std::format!("{}", err.map_or(LoadError::AlreadyLoaded, |e| e));
        assert!(
            text.contains("the path from $CUDA_SYS_LIBCUDA is too long (600 bytes"),
            "{text}"
        );
    }

    /// The same for the runtime's variables.
    #[test]
    #[cfg(all(feature = "loaded", feature = "runtime", unix))]
    fn a_runtime_path_variable_too_long_is_an_error_naming_it() {
        let _env = ENV.lock();
        let long = "/x".repeat(300);
        set_env("CUDA_SYS_LIBCUDART", &long);
        // SAFETY: the path is too long to be opened; no library is.
        let err = unsafe { open_runtime() }.err();
        remove_env("CUDA_SYS_LIBCUDART");
        assert!(
            matches!(
                err,
                Some(LoadError::BadEnvPath {
                    variable: "CUDA_SYS_LIBCUDART",
                    ..
                })
            ),
            "{err:?}"
        );

        // A root that fits the buffer alone but not with the file name added.
        let root = "/r".repeat(250);
        set_env("CUDA_SYS_LIBCUDART", "");
        set_env("CUDA_PATH", &root);
        // SAFETY: as above; the search stops at the long path.
        let err = unsafe { open_runtime() }.err();
        remove_env("CUDA_PATH");
        remove_env("CUDA_SYS_LIBCUDART");
        let expected = EnvError::TooLong {
            len: 500 + "/lib64/libcudart.so.13".len(),
            max: MAX_PATH_LEN,
        };
        assert!(
            matches!(err, Some(LoadError::BadEnvPath { variable: "CUDA_PATH", problem, .. }) if problem == expected),
            "{err:?}"
        );
    }

    /// A missing NCCL is an error that names what was tried: the variable's path, the
    /// loader's name and the pip wheel's place.
    #[test]
    #[cfg(all(feature = "loaded", feature = "nccl", unix))]
    fn a_missing_nccl_names_the_paths_tried() {
        let _env = ENV.lock();
        set_env("CUDA_SYS_LIBNCCL", "/nonexistent/cudadrv-test/libnccl.so.2");
        // SAFETY: the variable names no file; any NCCL found on the loader path or in a
        // wheel is NCCL (opened and closed, its initialisers run, as a framework's would).
        let found = unsafe { open_nccl() };
        remove_env("CUDA_SYS_LIBNCCL");
        match found {
            Ok(_) => std::println!("an NCCL is installed here: nothing to check"),
            Err(e) => {
                let text = std::format!("{e}");
                std::println!("{text}");
                for part in [
                    "could not load libnccl",
                    "/nonexistent/cudadrv-test/libnccl.so.2",
                    "libnccl.so.2",
                    "nvidia/nccl/lib/libnccl.so.2",
                ] {
                    assert!(text.contains(part), "{part:?} missing from: {text}");
                }
            }
        }
    }

    /// A missing NVRTC is an error that names what was tried, 13.x and 12.x.
    #[test]
    #[cfg(all(feature = "loaded", feature = "nvrtc", unix))]
    fn a_missing_nvrtc_names_the_paths_tried() {
        let _env = ENV.lock();
        set_env("CUDA_SYS_LIBNVRTC", "/nonexistent/cudadrv-test/libnvrtc.so.13");
        set_env("CUDA_PATH", "/nonexistent/cudadrv-test/cuda");
        // SAFETY: the variables name no file; any NVRTC found elsewhere is NVRTC.
        let found = unsafe { open_nvrtc() };
        remove_env("CUDA_SYS_LIBNVRTC");
        remove_env("CUDA_PATH");
        match found {
            Ok(_) => std::println!("an NVRTC is installed here: nothing to check"),
            Err(e) => {
                let text = std::format!("{e}");
                std::println!("{text}");
                for part in [
                    "could not load libnvrtc",
                    "/nonexistent/cudadrv-test/libnvrtc.so.13",
                    "/nonexistent/cudadrv-test/cuda/lib64/libnvrtc.so.12",
                    "/usr/local/cuda/lib64/libnvrtc.so.13",
                    "nvidia/cu13/lib/libnvrtc.so.13",
                    "nvidia/cuda_nvrtc/lib/libnvrtc.so.12",
                ] {
                    assert!(text.contains(part), "{part:?} missing from: {text}");
                }
            }
        }
    }
}
