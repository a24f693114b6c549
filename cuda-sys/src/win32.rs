//! Windows: opening DLLs (`LoadLibraryExW`, `GetProcAddress`, `FreeLibrary`) and reading
//! the environment (`GetEnvironmentVariableW`) for the loader, with the few `kernel32`
//! declarations written out here (no dependency).
//!
//! Compile-checked for `x86_64-pc-windows-msvc` in CI; not yet run on Windows hardware.
//!
//! # Unsafe policy
//! Every call passes NUL-terminated UTF-16 strings built in fixed stack buffers, and
//! what a call writes back is read only up to the length it reports. A module handle is
//! freed only by the [`Library`] that owns it.

use core::ffi::{CStr, c_char, c_void};
use core::fmt::Write as _;

use crate::loader::{DlError, EnvError, FixedStr, Library, MAX_PATH_LEN};

/// `LoadLibraryExW`: for a full path, look for the DLLs it needs in its folder first.
pub(crate) const LOAD_WITH_ALTERED_SEARCH_PATH: u32 = 0x0000_0008;
/// `LoadLibraryExW`: look in the system folder (`System32`) only.
#[cfg(feature = "loaded")]
pub(crate) const LOAD_LIBRARY_SEARCH_SYSTEM32: u32 = 0x0000_0800;

#[link(name = "kernel32")]
unsafe extern "system" {
    fn LoadLibraryExW(name: *const u16, file: *mut c_void, flags: u32) -> *mut c_void;
    fn GetProcAddress(module: *mut c_void, name: *const c_char) -> *mut c_void;
    fn FreeLibrary(module: *mut c_void) -> i32;
    fn GetLastError() -> u32;
    fn GetEnvironmentVariableW(name: *const u16, buffer: *mut u16, size: u32) -> u32;
    pub(crate) fn SwitchToThread() -> i32;
}

/// `text` as NUL-terminated UTF-16 in `buf`, or `None` if it does not fit.
fn wide<'a>(text: &str, buf: &'a mut [u16]) -> Option<&'a [u16]> {
    let mut len = 0;
    for unit in text.encode_utf16() {
        *buf.get_mut(len)? = unit;
        len += 1;
    }
    *buf.get_mut(len)? = 0;
    buf.get(..=len)
}

impl Library {
    /// `LoadLibraryExW(path, NULL, flags)`: a path with a folder in it
    /// (`C:\CUDA\bin\x64\cudart64_13.dll`) with `LOAD_WITH_ALTERED_SEARCH_PATH` (the DLLs
    /// it needs are looked for in its folder first), a bare name (`cudart64_13.dll`) by
    /// the standard DLL search order.
    ///
    /// # Errors
    /// The `GetLastError` code, with its name when it is a common one.
    ///
    /// # Safety
    /// Opening a DLL runs its `DllMain` and those of the DLLs it depends on, in this
    /// process, with no contract Rust can check; closing it (when the `Library` drops)
    /// runs them again. The caller must know that the DLL `path` names (as the loader
    /// resolves it) is sound to load and unload here, and nothing read from it may be
    /// used after the `Library` is dropped.
    // The error is the loader's own text (264 bytes); what the tables' constructors
    // return, `LoadError`, is at most 64.
    #[allow(clippy::result_large_err)]
    pub unsafe fn open(path: &CStr) -> Result<Self, DlError> {
        let bytes = path.to_bytes();
        let flags = if bytes.iter().any(|&b| b == b'\\' || b == b'/') {
            LOAD_WITH_ALTERED_SEARCH_PATH
        } else {
            0
        };
        // SAFETY: the caller's promise (`# Safety`).
        unsafe { Self::open_with(path, flags) }
    }

    /// `LoadLibraryExW(path, NULL, flags)`.
    ///
    /// # Safety
    /// As for [`Library::open`].
    // The error is the loader's own text (264 bytes); what the tables' constructors
    // return, `LoadError`, is at most 64.
    #[allow(clippy::result_large_err)]
    pub(crate) unsafe fn open_with(path: &CStr, flags: u32) -> Result<Self, DlError> {
        let mut buf = [0u16; MAX_PATH_LEN + 1];
        let Some(name) = path.to_str().ok().and_then(|p| wide(p, &mut buf)) else {
            let mut s = FixedStr::new();
            s.push("the path is not UTF-8 or too long");
            return Err(DlError(s));
        };
        // SAFETY: `name` is NUL-terminated UTF-16; the caller vouches for running the
        // DLL's initialisers (see `# Safety`).
        let handle = unsafe { LoadLibraryExW(name.as_ptr(), core::ptr::null_mut(), flags) };
        if handle.is_null() {
            // SAFETY: no arguments; reads this thread's last error, set by the call above.
            Err(DlError::windows(unsafe { GetLastError() }))
        } else {
            Ok(Self { handle })
        }
    }

    /// `GetProcAddress`: the address of `symbol`, or null.
    pub fn symbol(&self, symbol: &CStr) -> *mut c_void {
        if self.handle.is_null() {
            return core::ptr::null_mut();
        }
        // SAFETY: the handle is open (owned by self) and `symbol` is NUL-terminated.
        unsafe { GetProcAddress(self.handle, symbol.as_ptr()) }
    }
}

impl Drop for Library {
    fn drop(&mut self) {
        if !self.handle.is_null() {
            // SAFETY: the handle came from LoadLibraryExW and is freed exactly once, here.
            unsafe { FreeLibrary(self.handle) };
        }
    }
}

impl DlError {
    /// The text for a `GetLastError` code of `LoadLibraryExW`.
    fn windows(code: u32) -> Self {
        let what = match code {
            2 => "ERROR_FILE_NOT_FOUND: the file was not found",
            3 => "ERROR_PATH_NOT_FOUND: the folder was not found",
            5 => "ERROR_ACCESS_DENIED",
            126 => "ERROR_MOD_NOT_FOUND: the DLL or one it depends on was not found",
            127 => "ERROR_PROC_NOT_FOUND: a DLL it depends on lacks a function it imports",
            193 => "ERROR_BAD_EXE_FORMAT: not a DLL for this architecture",
            1114 => "ERROR_DLL_INIT_FAILED: its DllMain failed",
            _ => "see the Windows system error codes",
        };
        let mut s = FixedStr::new();
        let _ = write!(s, "LoadLibraryExW failed with Windows error {code} ({what})");
        Self(s)
    }
}

/// Reads an environment variable (`GetEnvironmentVariableW`) into an owned buffer:
/// `Ok(None)` when unset or empty. As the Unix `getenv`, with UTF-16 read as UTF-8.
///
/// # Errors
/// [`EnvError::TooLong`] when the value has more than [`FixedStr::<N>::capacity`]
/// bytes as UTF-8 (or more than [`MAX_PATH_LEN`] UTF-16 units, what the read buffer
/// holds), [`EnvError::NotUtf8`] when it is not valid UTF-16.
pub fn getenv<const N: usize>(name: &CStr) -> Result<Option<FixedStr<N>>, EnvError> {
    let mut name_buf = [0u16; 128];
    let too_long = |len| EnvError::TooLong {
        len,
        max: FixedStr::<N>::capacity(),
    };
    let name_text = name.to_str().map_err(|_| EnvError::NotUtf8)?;
    let Some(wname) = wide(name_text, &mut name_buf) else {
        return Ok(None); // no variable has a name this long
    };
    let mut value = [0u16; MAX_PATH_LEN + 1];
    let size = u32::try_from(value.len()).unwrap_or(u32::MAX);
    // SAFETY: `wname` is NUL-terminated; `value` holds `size` units, which bounds what
    // the call writes.
    let units = unsafe { GetEnvironmentVariableW(wname.as_ptr(), value.as_mut_ptr(), size) };
    if units == 0 {
        return Ok(None); // not set (ERROR_ENVVAR_NOT_FOUND), or set to the empty string
    }
    let units = units as usize;
    let Some(text) = value.get(..units).filter(|_| units < value.len()) else {
        // The buffer is too small: `units` is the size needed, with the NUL.
        return Err(too_long(units.saturating_sub(1)));
    };
    let mut out = FixedStr::<N>::new();
    let mut len = 0;
    let mut fits = true;
    for c in char::decode_utf16(text.iter().copied()) {
        let c = c.map_err(|_| EnvError::NotUtf8)?;
        len += c.len_utf8();
        fits = fits && out.push(c.encode_utf8(&mut [0; 4]));
    }
    if fits { Ok(Some(out)) } else { Err(too_long(len)) }
}
