//! `cudadrv::nvrtc` against a mock NVRTC, on the CPU and under Miri: the strings and
//! arrays each call gets, the log and code copied out, the lowered names copied before
//! the program is destroyed, every program destroyed once (also when compiling fails),
//! the cache's hits, and the refusals made before NVRTC is called.
//!
//! One `#[test]` drives the checks in order (the NVRTC table and the cache are
//! process-wide).

#![cfg(not(feature = "linked"))]

use std::collections::HashSet;
use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use cudadrv::Error;
use cudadrv::nvrtc::{self, Output, Program, Target};
use cudadrv_sys::Library;
use cudadrv_sys::nvrtc::{_nvrtcProgram, NvrtcApi, nvrtcProgram, nvrtcResult};

/// A program of the mock: what `nvrtcCreateProgram` got and what compiling made.
struct Mock {
    source: String,
    headers: Vec<(String, String)>,
    expressions: Vec<String>,
    /// With their NULs, as the C strings NVRTC hands out live in the program.
    lowered: Vec<CString>,
    options: Vec<String>,
    log: Vec<u8>,
    code: Vec<u8>,
}

/// Programs alive (created, not destroyed), by address.
static LIVE: Mutex<Option<HashSet<usize>>> = Mutex::new(None);
static CREATED: AtomicUsize = AtomicUsize::new(0);
static COMPILED: AtomicUsize = AtomicUsize::new(0);

const OK: nvrtcResult = nvrtcResult::NVRTC_SUCCESS;

fn live() -> std::sync::MutexGuard<'static, Option<HashSet<usize>>> {
    LIVE.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The mock behind a handle, checked to be alive.
///
/// # Safety
/// `p` must come from `create_program` (the crate passes what it got).
unsafe fn mock<'a>(p: nvrtcProgram) -> &'a mut Mock {
    assert!(
        live().as_ref().is_some_and(|l| l.contains(&(p as usize))),
        "a program not alive"
    );
    // SAFETY: created by `create_program` from a `Box<Mock>`, and alive.
    unsafe { &mut *p.cast::<Mock>() }
}

/// # Safety
/// A NUL-terminated string.
unsafe fn text(s: *const c_char) -> String {
    // SAFETY: the caller's.
    unsafe { CStr::from_ptr(s) }
        .to_str()
        .expect("UTF-8")
        .to_string()
}

unsafe extern "C" fn version(major: *mut c_int, minor: *mut c_int) -> nvrtcResult {
    // SAFETY: valid out-pointers (the crate's call).
    unsafe { (*major, *minor) = (13, 0) };
    OK
}
unsafe extern "C" fn num_archs(n: *mut c_int) -> nvrtcResult {
    // SAFETY: valid out-pointer.
    unsafe { *n = 3 };
    OK
}
unsafe extern "C" fn archs(out: *mut c_int) -> nvrtcResult {
    // SAFETY: room for the 3 entries `num_archs` reported.
    unsafe { std::ptr::copy_nonoverlapping([100, 80, 90].as_ptr(), out, 3) };
    OK
}
unsafe extern "C" fn create_program(
    prog: *mut nvrtcProgram,
    src: *const c_char,
    _name: *const c_char,
    n: c_int,
    headers: *const *const c_char,
    names: *const *const c_char,
) -> nvrtcResult {
    let n = usize::try_from(n).expect("header count");
    let headers = (0..n)
        // SAFETY: `n` entries in each array, each a C string.
        .map(|i| unsafe { (text(*names.add(i)), text(*headers.add(i))) })
        .collect();
    let m = Box::new(Mock {
        // SAFETY: a C string.
        source: unsafe { text(src) },
        headers,
        expressions: Vec::new(),
        lowered: Vec::new(),
        options: Vec::new(),
        log: Vec::new(),
        code: Vec::new(),
    });
    let p = Box::into_raw(m).cast::<_nvrtcProgram>();
    live().get_or_insert_with(HashSet::new).insert(p as usize);
    CREATED.fetch_add(1, Ordering::Relaxed);
    // SAFETY: valid out-pointer.
    unsafe { *prog = p };
    OK
}
unsafe extern "C" fn add_name_expression(p: nvrtcProgram, e: *const c_char) -> nvrtcResult {
    // SAFETY: a program of ours; a C string.
    unsafe { mock(p).expressions.push(text(e)) };
    OK
}
unsafe extern "C" fn compile(
    p: nvrtcProgram,
    n: c_int,
    options: *const *const c_char,
) -> nvrtcResult {
    COMPILED.fetch_add(1, Ordering::Relaxed);
    // SAFETY: a program of ours.
    let m = unsafe { mock(p) };
    // SAFETY: `n` C strings.
    m.options = (0..n as usize)
        .map(|i| unsafe { text(*options.add(i)) })
        .collect();
    if m.source.contains("error") {
        m.log = b"mock.cu(1): error: this declaration has no storage class or type specifier\n\0"
            .to_vec();
        return nvrtcResult::NVRTC_ERROR_COMPILATION;
    }
    m.log = b"mock.cu(2): warning: variable \"x\" was declared but never referenced\n\0".to_vec();
    let arch = m.options.last().cloned().unwrap_or_default();
    let headers: Vec<String> = m.headers.iter().map(|(n, t)| format!("{n}={t}")).collect();
    m.code = format!("{arch};{};{}\0", m.source, headers.join(",")).into_bytes();
    m.lowered = m
        .expressions
        .iter()
        .map(|e| CString::new(format!("_Z{}{}", e.len(), e.replace(['<', '>'], "_"))).unwrap())
        .collect();
    OK
}
unsafe extern "C" fn code_size(p: nvrtcProgram, n: *mut usize) -> nvrtcResult {
    // SAFETY: a program of ours; a valid out-pointer.
    unsafe { *n = mock(p).code.len() };
    OK
}
unsafe extern "C" fn code(p: nvrtcProgram, out: *mut c_char) -> nvrtcResult {
    // SAFETY: a program of ours; `out` has room for the size reported.
    unsafe {
        let m = mock(p);
        std::ptr::copy_nonoverlapping(m.code.as_ptr(), out.cast(), m.code.len());
    }
    OK
}
unsafe extern "C" fn log_size(p: nvrtcProgram, n: *mut usize) -> nvrtcResult {
    // SAFETY: as `code_size`.
    unsafe { *n = mock(p).log.len().max(1) };
    OK
}
unsafe extern "C" fn log(p: nvrtcProgram, out: *mut c_char) -> nvrtcResult {
    // SAFETY: as `code`.
    unsafe {
        let m = mock(p);
        if m.log.is_empty() {
            *out = 0;
        } else {
            std::ptr::copy_nonoverlapping(m.log.as_ptr(), out.cast(), m.log.len());
        }
    }
    OK
}
unsafe extern "C" fn lowered_name(
    p: nvrtcProgram,
    e: *const c_char,
    out: *mut *const c_char,
) -> nvrtcResult {
    // SAFETY: a program of ours; a C string; a valid out-pointer.
    unsafe {
        let m = mock(p);
        let e = text(e);
        match m.expressions.iter().position(|x| *x == e) {
            Some(i) => {
                *out = m.lowered[i].as_ptr();
                OK
            }
            None => nvrtcResult::NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID,
        }
    }
}
unsafe extern "C" fn destroy(p: *mut nvrtcProgram) -> nvrtcResult {
    // SAFETY: a valid pointer to a program handle of ours.
    let raw = unsafe { *p };
    assert!(
        live().as_mut().is_some_and(|l| l.remove(&(raw as usize))),
        "a program destroyed twice or never created"
    );
    // SAFETY: made by `Box::into_raw` in `create_program`, destroyed once (checked).
    drop(unsafe { Box::from_raw(raw.cast::<Mock>()) });
    // SAFETY: as above.
    unsafe { *p = std::ptr::null_mut() };
    OK
}

fn entry(name: &str) -> *mut c_void {
    match name {
        "nvrtcVersion" => version as unsafe extern "C" fn(_, _) -> _ as *mut c_void,
        "nvrtcGetNumSupportedArchs" => num_archs as unsafe extern "C" fn(_) -> _ as *mut c_void,
        "nvrtcGetSupportedArchs" => archs as unsafe extern "C" fn(_) -> _ as *mut c_void,
        "nvrtcCreateProgram" => {
            create_program as unsafe extern "C" fn(_, _, _, _, _, _) -> _ as *mut c_void
        }
        "nvrtcAddNameExpression" => {
            add_name_expression as unsafe extern "C" fn(_, _) -> _ as *mut c_void
        }
        "nvrtcCompileProgram" => compile as unsafe extern "C" fn(_, _, _) -> _ as *mut c_void,
        "nvrtcGetCUBINSize" | "nvrtcGetPTXSize" => {
            code_size as unsafe extern "C" fn(_, _) -> _ as *mut c_void
        }
        "nvrtcGetCUBIN" | "nvrtcGetPTX" => code as unsafe extern "C" fn(_, _) -> _ as *mut c_void,
        "nvrtcGetProgramLogSize" => log_size as unsafe extern "C" fn(_, _) -> _ as *mut c_void,
        "nvrtcGetProgramLog" => log as unsafe extern "C" fn(_, _) -> _ as *mut c_void,
        "nvrtcGetLoweredName" => lowered_name as unsafe extern "C" fn(_, _, _) -> _ as *mut c_void,
        "nvrtcDestroyProgram" => destroy as unsafe extern "C" fn(_) -> _ as *mut c_void,
        _ => std::ptr::null_mut(),
    }
}

fn no_program_alive() -> bool {
    live().as_ref().is_none_or(HashSet::is_empty)
}

#[test]
fn nvrtc_against_a_mock() {
    // SAFETY: every non-null pointer is a function with the signature nvrtc.h gives the
    // entry of that name, a plain function of this program.
    let table = unsafe { NvrtcApi::from_resolver(Library::none(), |e| entry(e.name)) };
    assert!(cudadrv_sys::install_nvrtc(table).is_ok());
    nvrtc::set_cache_dir(None);

    assert_eq!(nvrtc::version().unwrap(), (13, 0));
    assert_eq!(nvrtc::supported_archs().unwrap(), [80, 90, 100]);

    // A compilation: headers and options passed, the architecture last, the code and
    // log copied out, lowered names kept, the program destroyed.
    let program = Program::new("k.cu", "__global__ void k() {}")
        .header("a.h", "int a;")
        .header("b.h", "int b;")
        .name_expression("k<float>")
        .name_expression("k<int>")
        .option("-std=c++17")
        .define("N", "4");
    let c = program.compile(Target::cubin(90)).unwrap();
    assert_eq!(
        c.code(),
        b"-arch=sm_90;__global__ void k() {};a.h=int a;,b.h=int b;\0"
    );
    assert_eq!(c.target().output(), Output::Cubin);
    assert!(c.log().contains("warning: variable \"x\""), "{}", c.log());
    assert_eq!(c.lowered_name("k<float>"), Some("_Z8k_float_"));
    assert_eq!(c.lowered_name("k<int>"), Some("_Z6k_int_"));
    assert_eq!(c.lowered_name("k<double>"), None);
    assert_eq!(c.nvrtc_version(), (13, 0));
    assert!(no_program_alive());
    assert_eq!(CREATED.load(Ordering::Relaxed), 1);

    // The same program again: from the cache, no NVRTC call; another target compiles.
    let again = program.compile(Target::cubin(90)).unwrap();
    assert!(std::sync::Arc::ptr_eq(&c, &again));
    assert_eq!(COMPILED.load(Ordering::Relaxed), 1);
    let ptx = program.compile(Target::ptx(90).arch_specific()).unwrap();
    assert_eq!(COMPILED.load(Ordering::Relaxed), 2);
    assert!(ptx.ptx().unwrap().starts_with("-arch=compute_90a;"));
    let stats = nvrtc::cache_stats();
    assert_eq!((stats.memory_hits, stats.compiles), (1, 2));
    // Uncached: compiled each time.
    program
        .clone()
        .uncached()
        .compile(Target::cubin(90))
        .unwrap();
    assert_eq!(COMPILED.load(Ordering::Relaxed), 3);

    // A failed compilation: the log in the error, the program destroyed.
    let e = Program::new("bad.cu", "error here")
        .compile(Target::cubin(90))
        .unwrap_err();
    match &e {
        Error::Nvrtc { call, code, .. } => {
            assert_eq!((*call, *code), ("nvrtcCompileProgram", 6));
        }
        other => panic!("{other:?}"),
    }
    assert!(e.jit_log().unwrap().contains("no storage class"), "{e}");
    assert!(format!("{e}").contains("NVRTC_ERROR_COMPILATION (6)\ncompile log:\nmock.cu(1)"));
    assert!(no_program_alive());

    // Refused before NVRTC is called: an architecture option, a NUL byte.
    let before = CREATED.load(Ordering::Relaxed);
    assert!(matches!(
        Program::new("k.cu", "")
            .option("-arch=sm_80")
            .compile(Target::cubin(90)),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        Program::new("k.cu", "a\0b").compile(Target::cubin(90)),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(CREATED.load(Ordering::Relaxed), before);
    assert!(no_program_alive());
}
