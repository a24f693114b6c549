//! Finding and opening `libcuda` and `libcudart` without `std` or a heap.
//!
//! # Unsafe policy
//! Errors carry their text in fixed buffers (no heap), so they are a few KiB: clippy's
//! size lints are allowed here on purpose.
//!
//! `dlopen`/`dlsym`/`dlerror` are called with NUL-terminated strings built in fixed
//! stack buffers; a library handle is closed only by the [`Library`] that owns it.

#![allow(clippy::result_large_err, clippy::large_enum_variant)]

use core::ffi::{CStr, c_char, c_void};
use core::fmt;

/// An opened shared library, closed on drop (`dlclose`).
///
/// Tables filled from a library own it, so their function pointers cannot outlive it.
pub struct Library {
    handle: *mut c_void,
}

// SAFETY: a dlopen handle may be used from any thread; dlsym is thread-safe.
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

    /// Opens `path` with `RTLD_NOW | RTLD_LOCAL`.
    pub fn open(path: &CStr) -> Result<Self, DlError> {
        // SAFETY: `path` is NUL-terminated; dlopen has no other precondition.
        let handle = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if handle.is_null() {
            Err(DlError::last())
        } else {
            Ok(Self { handle })
        }
    }

    /// `dlsym`: the address of `symbol`, or null.
    pub fn symbol(&self, symbol: &CStr) -> *mut c_void {
        if self.handle.is_null() {
            return core::ptr::null_mut();
        }
        // SAFETY: the handle is open (owned by self) and `symbol` is NUL-terminated.
        unsafe { libc::dlsym(self.handle, symbol.as_ptr()) }
    }

    /// The raw `dlopen` handle (null for [`Library::none`]).
    pub fn as_raw(&self) -> *mut c_void {
        self.handle
    }
}

impl Drop for Library {
    fn drop(&mut self) {
        if !self.handle.is_null() {
            // SAFETY: the handle came from dlopen and is closed exactly once, here.
            unsafe { libc::dlclose(self.handle) };
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
        take == s.len()
    }

    /// The text so far.
    pub fn as_str(&self) -> &str {
        let bytes = self.buf.get(..self.len).unwrap_or(&[]);
        // Only whole `&str` prefixes cut at char boundaries are ever copied in.
        core::str::from_utf8(bytes).unwrap_or("")
    }

    /// The text as a C string (the byte after it is always 0).
    pub fn as_cstr(&self) -> &CStr {
        let bytes = self.buf.get(..=self.len).unwrap_or(&[0]);
        CStr::from_bytes_until_nul(bytes).unwrap_or(c"")
    }

    /// Forgets the text.
    pub fn clear(&mut self) {
        self.len = 0;
        if let Some(b) = self.buf.first_mut() {
            *b = 0;
        }
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

/// The text of `dlerror()` at the time of a failure.
#[derive(Clone, Copy, Debug)]
pub struct DlError(pub FixedStr<256>);

impl DlError {
    fn last() -> Self {
        let mut s = FixedStr::new();
        // SAFETY: dlerror returns null or a NUL-terminated string valid until the next
        // dl* call on this thread; it is copied out at once.
        let msg = unsafe { libc::dlerror() };
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

/// Why a library or its table could not be loaded.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub enum LoadError {
    /// No candidate could be opened. `tried` lists them; `last` is the last `dlerror`.
    LibraryNotFound {
        /// `libcuda` or `libcudart`.
        library: &'static str,
        /// The candidates, comma-separated.
        tried: FixedStr<2048>,
        /// The last loader error.
        last: DlError,
    },
    /// The library opened but lacks the entry point the loader needs.
    MissingEntryPoint {
        /// The library.
        library: &'static str,
        /// The missing symbol.
        symbol: &'static str,
    },
    /// A table was already installed (see `install_driver`).
    AlreadyLoaded,
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::LibraryNotFound {
                library,
                tried,
                last,
            } => write!(
                f,
                "could not load {library}: tried {tried} (last error: {})",
                last.0
            ),
            Self::MissingEntryPoint { library, symbol } => {
                write!(f, "{library} was found but has no `{symbol}`")
            }
            Self::AlreadyLoaded => f.write_str("a CUDA function table was already loaded"),
        }
    }
}

impl core::error::Error for LoadError {}

/// Reads an environment variable (no `std`): `None` when unset, empty or not UTF-8.
pub fn getenv(name: &CStr) -> Option<&'static str> {
    // SAFETY: `name` is NUL-terminated. The returned pointer stays valid unless the
    // environment is modified, which this crate never does.
    let value = unsafe { libc::getenv(name.as_ptr()) };
    if value.is_null() {
        return None;
    }
    // SAFETY: getenv returns a NUL-terminated string.
    let text = unsafe { CStr::from_ptr(value) }.to_str().ok()?;
    (!text.is_empty()).then_some(text)
}

/// Tries candidate paths in order, recording each in `tried`.
pub(crate) struct Search {
    pub(crate) library: &'static str,
    pub(crate) tried: FixedStr<2048>,
    pub(crate) last: Option<DlError>,
}

impl Search {
    pub(crate) const fn new(library: &'static str) -> Self {
        Self {
            library,
            tried: FixedStr::new(),
            last: None,
        }
    }

    /// Tries the concatenation of `parts` (one path); records it.
    pub(crate) fn try_path(&mut self, parts: &[&str]) -> Option<Library> {
        let mut path = FixedStr::<512>::new();
        for part in parts {
            if !path.push(part) {
                return None;
            }
        }
        if !self.tried.as_str().is_empty() {
            self.tried.push(", ");
        }
        self.tried.push(path.as_str());
        match Library::open(path.as_cstr()) {
            Ok(lib) => Some(lib),
            Err(e) => {
                self.last = Some(e);
                None
            }
        }
    }

    /// Tries a path without recording it (for wide searches summarised by [`Search::note`]).
    pub(crate) fn try_quiet(&mut self, parts: &[&str]) -> Option<Library> {
        let mut path = FixedStr::<512>::new();
        for part in parts {
            if !path.push(part) {
                return None;
            }
        }
        Library::open(path.as_cstr()).ok()
    }

    /// Records a summary of candidates tried quietly.
    pub(crate) fn note(&mut self, text: &str) {
        if !self.tried.as_str().is_empty() {
            self.tried.push(", ");
        }
        self.tried.push(text);
    }

    pub(crate) fn fail(self) -> LoadError {
        let mut none = FixedStr::new();
        none.push("no candidate was tried");
        LoadError::LibraryNotFound {
            library: self.library,
            tried: self.tried,
            last: self.last.unwrap_or(DlError(none)),
        }
    }
}

/// Opens the driver: `$CUDA_SYS_LIBCUDA`, then `libcuda.so.1`, then `libcuda.so`.
pub fn open_driver() -> Result<Library, LoadError> {
    let mut search = Search::new("libcuda");
    if let Some(p) = getenv(c"CUDA_SYS_LIBCUDA") {
        if let Some(lib) = search.try_path(&[p]) {
            return Ok(lib);
        }
    }
    for name in ["libcuda.so.1", "libcuda.so"] {
        if let Some(lib) = search.try_path(&[name]) {
            return Ok(lib);
        }
    }
    Err(search.fail())
}

/// Opens the runtime, in this order: `$CUDA_SYS_LIBCUDART`; `lib64/libcudart.so.13`
/// under `$CUDA_PATH`, `$CUDA_HOME` and `/usr/local/cuda`; `libcudart.so.13` on the
/// loader path; the PyPI wheel (`nvidia/cu13/lib`) in the site-packages of
/// `$VIRTUAL_ENV`, `~/.local`, `/usr/local` and `/usr` for Python 3.8 to 3.14.
pub fn open_runtime() -> Result<Library, LoadError> {
    const SONAME: &str = "libcudart.so.13";
    let mut search = Search::new("libcudart");
    if let Some(p) = getenv(c"CUDA_SYS_LIBCUDART") {
        if let Some(lib) = search.try_path(&[p]) {
            return Ok(lib);
        }
    }
    for var in [c"CUDA_PATH", c"CUDA_HOME"] {
        if let Some(root) = getenv(var) {
            if let Some(lib) = search.try_path(&[root, "/lib64/", SONAME]) {
                return Ok(lib);
            }
        }
    }
    if let Some(lib) = search.try_path(&["/usr/local/cuda/lib64/", SONAME]) {
        return Ok(lib);
    }
    if let Some(lib) = search.try_path(&[SONAME]) {
        return Ok(lib);
    }
    let home = getenv(c"HOME");
    let venv = getenv(c"VIRTUAL_ENV");
    let bases: [(Option<&str>, &str); 4] = [
        (venv, "/lib/"),
        (home, "/.local/lib/"),
        (Some("/usr/local"), "/lib/"),
        (Some("/usr"), "/lib/"),
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
    for (base, lib) in bases {
        let Some(base) = base else { continue };
        for py in PYTHONS {
            for pkgs in ["/site-packages", "/dist-packages"] {
                let parts = [base, lib, py, pkgs, "/nvidia/cu13/lib/", SONAME];
                if let Some(found) = search.try_quiet(&parts) {
                    return Ok(found);
                }
            }
        }
    }
    search.note("<site-packages>/nvidia/cu13/lib/libcudart.so.13 (pip wheel nvidia-cuda-runtime)");
    Err(search.fail())
}
