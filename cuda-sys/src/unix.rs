//! Unix: the six C library functions the loader uses (`dlopen`, `dlsym`, `dlclose`,
//! `dlerror`, `getenv`, `sched_yield`) and the `dlopen` flags.
//!
//! On Linux and Android they are declared here, so that the crate has no dependency to
//! compile before it (the `libc` crate sat on every user's critical build path for one
//! second and a half, for six declarations). On other Unix targets, whose flag values
//! differ, they come from `libc`.

#[cfg(any(target_os = "linux", target_os = "android"))]
mod decls {
    use core::ffi::{c_char, c_int, c_void};

    /// `<dlfcn.h>` of glibc, musl and 64-bit bionic.
    pub(crate) const RTLD_NOW: c_int = 2;
    pub(crate) const RTLD_LOCAL: c_int = 0;
    #[cfg(all(test, feature = "loaded"))]
    pub(crate) const RTLD_NOLOAD: c_int = 4;

    // glibc before 2.34 keeps the dl* functions in libdl (since 2.34 an empty stub,
    // which the linker drops again with --as-needed).
    #[cfg_attr(all(target_os = "linux", target_env = "gnu"), link(name = "dl"))]
    unsafe extern "C" {
        pub(crate) fn dlopen(filename: *const c_char, flags: c_int) -> *mut c_void;
        pub(crate) fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
        pub(crate) fn dlclose(handle: *mut c_void) -> c_int;
        pub(crate) fn dlerror() -> *mut c_char;
    }

    unsafe extern "C" {
        pub(crate) fn getenv(name: *const c_char) -> *mut c_char;
        pub(crate) fn sched_yield() -> c_int;
    }
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
mod decls {
    #[cfg(all(test, feature = "loaded"))]
    pub(crate) use libc::RTLD_NOLOAD;
    pub(crate) use libc::{RTLD_LOCAL, RTLD_NOW, dlclose, dlerror, dlopen, dlsym, getenv, sched_yield};
}

pub(crate) use decls::*;
