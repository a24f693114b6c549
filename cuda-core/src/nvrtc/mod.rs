//! Run-time compilation of CUDA C++ with NVRTC (feature `nvrtc`): a [`Program`] from
//! source, headers, options and name expressions, compiled to a CUBIN for the device at
//! hand (or to PTX), kept in a compile cache, and loaded as an [`RtcModule`] whose
//! kernels come out typed and checked against the driver's parameter layout.
//!
//! NVRTC (`libnvrtc.so.13` or `.so.12`, `nvrtc64_130_0.dll`) is loaded at run time the
//! way the driver is ([`cudadrv_sys::loader::open_nvrtc`] lists the search): a machine
//! without it gets [`Error::Load`] naming every path tried, never a panic. NVRTC runs on
//! the CPU alone, so compiling needs no GPU; loading does.
//!
//! # CUBIN by default
//!
//! [`Target::for_device`] compiles for the device's own architecture to a CUBIN (`-arch=
//! sm_90`), which the driver loads as it is. PTX would instead be compiled again by the
//! driver's JIT, and PTX from an NVRTC newer than the driver carries an ISA version the
//! driver rejects (`CUDA_ERROR_UNSUPPORTED_PTX_VERSION`); a CUBIN of the same major
//! release loads on an older driver. PTX is the choice for a device newer than the NVRTC
//! ([`Target::for_device`] picks it by itself there: the newest architecture the NVRTC
//! knows, compiled further by the driver) or on request ([`Target::ptx`]).
//!
//! # The cache
//!
//! [`Program::compile`] keeps what it compiled, keyed by everything that decides the
//! output: the NVRTC version, the program's name and source, every header (name and
//! text), the name expressions, the options and the target (architecture, `a` suffix,
//! CUBIN or PTX). The device enters through its architecture: every device of one
//! compute capability shares the entry. The key is compared in full, never by a hash
//! alone. The cache lives in the process ([`cache_stats`], [`clear_cache`]) and, when a
//! directory is set ([`set_cache_dir`], or `CUDADRV_NVRTC_CACHE` in the environment), in
//! files there that later runs read: a file whose key, layout or checksum does not match
//! is ignored and compiled anew.
//!
//! # Example
//!
//! ```no_run
//! use cudadrv::nvrtc::Program;
//! use cudadrv::{Context, Device, DeviceBuffer, LaunchConfig, Stream};
//!
//! cudadrv::kernel! {
//!     /// `template <typename T> __global__ void scale(T* data, T factor, unsigned n)`,
//!     /// instantiated for float.
//!     pub extern fn scale_f32(data: cudadrv::DevicePtr<f32>, factor: f32, n: u32);
//! }
//!
//! const SRC: &str = r#"
//! #include "config.h"
//! template <typename T> __global__ void scale(T* data, T factor, unsigned n) {
//!     unsigned i = blockIdx.x * BLOCK + threadIdx.x;
//!     if (i < n) data[i] *= factor;
//! }"#;
//!
//! fn main() -> cudadrv::Result<()> {
//!     let ctx = Context::primary(Device::get(0)?)?;
//!     let module = Program::new("scale.cu", SRC)
//!         .header("config.h", "#define BLOCK 256")
//!         .name_expression("scale<float>")
//!         .option("-std=c++17")
//!         .load(&ctx)?; // a CUBIN for this device, cached; a failure carries the log
//!     // The lowered (mangled) name of `scale<float>`, checked against the declaration.
//!     let scale = module.kernel_as::<scale_f32>("scale<float>")?;
//!     let data = DeviceBuffer::from_slice(&ctx, &[1.0f32; 1024])?;
//!     let stream = Stream::non_blocking(&ctx)?;
//!     let cfg = LaunchConfig::new(4, 256).stream(&stream);
//!     // SAFETY: `data` holds 1024 floats and outlives the kernel (synchronized below).
//!     unsafe { scale.launch(&cfg, &(data.as_arg(), 2.0, 1024))? };
//!     stream.synchronize()?;
//!     Ok(())
//! }
//! ```
//!
//! Kernels compiled from C++ are [`Foreign`]: their launches are `unsafe`, as for any
//! kernel whose code the crate cannot see (safe launches are for Rust kernels declared
//! `safe` with [`kernel!`](crate::kernel!)).

mod cache;

use alloc::borrow::Cow;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::ffi::{CStr, c_char, c_int};
use std::ffi::CString;

use cudadrv_sys::nvrtc::{NvrtcApi, nvrtcProgram, nvrtcResult};

pub use cache::{CacheStats, cache_dir, cache_stats, clear_cache, set_cache_dir};

use crate::driver::context::Context;
use crate::driver::device::Device;
use crate::driver::function::Function;
use crate::driver::module::Module;
use crate::error::{Error, JitLog, Result};
use crate::kernel::{Foreign, Kernel, TypedKernel};

/// The process-wide NVRTC table ([`cudadrv_sys::nvrtc()`]), with its builtins library
/// loaded (once).
fn api() -> Result<&'static NvrtcApi> {
    let api = cudadrv_sys::nvrtc().map_err(Error::Load)?;
    static BUILTINS: std::sync::Once = std::sync::Once::new();
    BUILTINS.call_once(|| preload_builtins(api));
    Ok(api)
}

/// Loads `libnvrtc-builtins.so.<major>.<minor>` from the directory NVRTC was loaded
/// from, for good (Linux).
///
/// NVRTC opens its builtins by that name alone when it first compiles, which finds them
/// only on the loader path; a toolkit's `lib64` usually is on it, a pip wheel's directory
/// is not. A library of that name already loaded is what the loader hands back, so
/// loading it here from NVRTC's own directory makes a wheel work like a toolkit. Where
/// this finds nothing (another layout, a mock), NVRTC's own search runs as before, and a
/// failure there is `NVRTC_ERROR_BUILTIN_OPERATION_FAILURE` with NVRTC's message.
fn preload_builtins(api: &'static NvrtcApi) {
    #[cfg(all(target_os = "linux", not(miri)))]
    {
        let Ok(version_fn) = api.nvrtcVersion() else {
            return;
        };
        // SAFETY: `Dl_info` is plain data; all-zero is a valid value to be overwritten.
        let mut info: libc::Dl_info = unsafe { core::mem::zeroed() };
        // SAFETY: `dladdr` reads the address of a function of a loaded object and fills
        // `info`; the names it points to live as long as the object (never closed).
        let found = unsafe { libc::dladdr(version_fn as *const libc::c_void, &mut info) };
        if found == 0 || info.dli_fname.is_null() {
            return;
        }
        // SAFETY: a NUL-terminated path owned by the loader (see above).
        let path = unsafe { CStr::from_ptr(info.dli_fname) };
        let path = std::path::Path::new(
            <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(path.to_bytes()),
        );
        let Some(dir) = path.parent() else { return };
        let Ok((major, minor)) = version_of(api) else {
            return;
        };
        let builtins = dir.join(alloc::format!("libnvrtc-builtins.so.{major}.{minor}"));
        if let Ok(c) = CString::new(builtins.as_os_str().as_encoded_bytes()) {
            // SAFETY: NVRTC's own builtins library, from NVRTC's directory, opened as
            // NVRTC opens it; the handle is never closed.
            let _ = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
        }
    }
    #[cfg(not(all(target_os = "linux", not(miri))))]
    let _ = api;
}

/// `Ok` for `NVRTC_SUCCESS`, else [`Error::Nvrtc`] with `log`.
fn check(call: &'static str, result: nvrtcResult, log: JitLog) -> Result<()> {
    if result == nvrtcResult::NVRTC_SUCCESS {
        Ok(())
    } else {
        Err(Error::Nvrtc {
            call,
            code: result.0,
            log,
        })
    }
}

/// The name of an `nvrtcResult` code (`"NVRTC_ERROR_COMPILATION"` for 6), as
/// [`Error::Nvrtc`] displays it.
#[must_use]
pub fn result_name(code: u32) -> &'static str {
    crate::error::nvrtc_result_name(code)
}

/// `nvrtcVersion`: the loaded NVRTC's release as (major, minor), `(13, 0)`.
///
/// # Errors
/// [`Error::Load`] when no NVRTC is found; [`Error::Nvrtc`].
#[doc(alias = "nvrtcVersion")]
pub fn version() -> Result<(u32, u32)> {
    version_of(api()?)
}

/// `nvrtcVersion` of `api`.
fn version_of(api: &NvrtcApi) -> Result<(u32, u32)> {
    let (mut major, mut minor): (c_int, c_int) = (0, 0);
    // SAFETY: two valid out-pointers.
    let r = unsafe { api.nvrtcVersion()?(&mut major, &mut minor) };
    check("nvrtcVersion", r, JitLog::default())?;
    Ok((major.max(0) as u32, minor.max(0) as u32))
}

/// `nvrtcGetSupportedArchs`: the architectures the loaded NVRTC compiles for, as
/// `major * 10 + minor` (`[75, 80, 86, 87, 89, 90, ...]`), ascending.
///
/// # Errors
/// [`Error::Load`]; [`Error::Nvrtc`].
#[doc(alias = "nvrtcGetSupportedArchs")]
pub fn supported_archs() -> Result<Vec<u32>> {
    let api = api()?;
    let mut n: c_int = 0;
    // SAFETY: a valid out-pointer.
    check(
        "nvrtcGetNumSupportedArchs",
        unsafe { api.nvrtcGetNumSupportedArchs()?(&mut n) },
        JitLog::default(),
    )?;
    let mut archs: Vec<c_int> = alloc::vec![0; n.max(0) as usize];
    if !archs.is_empty() {
        // SAFETY: `archs` has room for the `n` entries NVRTC writes.
        let r = unsafe { api.nvrtcGetSupportedArchs()?(archs.as_mut_ptr()) };
        check("nvrtcGetSupportedArchs", r, JitLog::default())?;
    }
    let mut out: Vec<u32> = archs
        .into_iter()
        .filter(|&a| a > 0)
        .map(|a| a as u32)
        .collect();
    out.sort_unstable();
    Ok(out)
}

/// What a compilation produces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Output {
    /// Machine code for one architecture (`-arch=sm_XY`), loaded by the driver as is.
    Cubin,
    /// PTX for a virtual architecture (`-arch=compute_XY`), compiled by the driver's JIT
    /// when loaded (for this architecture and newer ones).
    Ptx,
}

/// The architecture and output of a compilation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Target {
    arch: u32,
    specific: bool,
    output: Output,
}

impl Target {
    /// A CUBIN for `sm_<arch>` (`arch` as `major * 10 + minor`: 90 for sm_90).
    #[must_use]
    pub const fn cubin(arch: u32) -> Self {
        Self {
            arch,
            specific: false,
            output: Output::Cubin,
        }
    }

    /// PTX for `compute_<arch>`.
    #[must_use]
    pub const fn ptx(arch: u32) -> Self {
        Self {
            arch,
            specific: false,
            output: Output::Ptx,
        }
    }

    /// The architecture-specific variant (`sm_90a`, `compute_90a`): the features of
    /// exactly this architecture (`wgmma`, `setmaxnreg` on sm_90), runnable on it alone.
    #[must_use]
    pub const fn arch_specific(mut self) -> Self {
        self.specific = true;
        self
    }

    /// For `device`: a CUBIN for its compute capability when the loaded NVRTC supports
    /// it ([`supported_archs`]); otherwise (a device newer than the NVRTC) PTX for the
    /// newest architecture below it that the NVRTC supports, which the driver compiles
    /// for the device when loading.
    ///
    /// # Errors
    /// [`Error::Load`]; driver errors reading the compute capability;
    /// [`Error::InvalidArgument`] when the NVRTC supports no architecture at or below the
    /// device's.
    pub fn for_device(device: Device) -> Result<Self> {
        let (major, minor) = device.compute_capability()?;
        let arch = (major.max(0) as u32) * 10 + minor.max(0) as u32;
        Self::for_arch(arch, &supported_archs()?)
    }

    /// [`for_device`](Self::for_device)'s choice for a device of `arch` given what the
    /// NVRTC supports.
    fn for_arch(arch: u32, supported: &[u32]) -> Result<Self> {
        if supported.contains(&arch) {
            return Ok(Self::cubin(arch));
        }
        supported
            .iter()
            .copied()
            .filter(|&a| a < arch)
            .max()
            .map(Self::ptx)
            .ok_or(Error::InvalidArgument(
                "the loaded NVRTC supports no architecture at or below the device's",
            ))
    }

    /// The architecture, as `major * 10 + minor`.
    #[must_use]
    pub const fn arch(&self) -> u32 {
        self.arch
    }

    /// CUBIN or PTX.
    #[must_use]
    pub const fn output(&self) -> Output {
        self.output
    }

    /// Whether this is the architecture-specific (`a`) variant.
    #[must_use]
    pub const fn is_arch_specific(&self) -> bool {
        self.specific
    }

    /// The `-arch=` option NVRTC gets.
    fn option(&self) -> String {
        let kind = match self.output {
            Output::Cubin => "sm",
            Output::Ptx => "compute",
        };
        let suffix = if self.specific { "a" } else { "" };
        alloc::format!("-arch={kind}_{}{suffix}", self.arch)
    }
}

/// A CUDA C++ program to compile: a source with its name, the headers it includes by
/// name, name expressions whose lowered names to keep, and options.
///
/// The architecture is the [`Target`]'s: an option that sets it (`-arch`,
/// `--gpu-architecture`) or changes what comes out (`-dlto`, `--dlink-time-opt`,
/// `-optix-ir`, `-ewp`) is refused with [`Error::InvalidArgument`].
#[derive(Clone, Debug)]
pub struct Program<'a> {
    name: &'a str,
    source: &'a str,
    headers: Vec<(&'a str, &'a str)>,
    name_expressions: Vec<&'a str>,
    options: Vec<Cow<'a, str>>,
    cached: bool,
}

impl<'a> Program<'a> {
    /// A program named `name` (used in diagnostics, `"kernels.cu"`) with `source`.
    #[must_use]
    pub fn new(name: &'a str, source: &'a str) -> Self {
        Self {
            name,
            source,
            headers: Vec::new(),
            name_expressions: Vec::new(),
            options: Vec::new(),
            cached: true,
        }
    }

    /// A header the source includes as `#include "include_name"`, with its text.
    #[must_use]
    pub fn header(mut self, include_name: &'a str, text: &'a str) -> Self {
        self.headers.push((include_name, text));
        self
    }

    /// A name expression (`"scale<float>"`, `"&ns::kernel"`): NVRTC instantiates it and
    /// reports its lowered (mangled) name, which [`Compiled::lowered_name`],
    /// [`RtcModule::function`] and [`RtcModule::kernel_as`] use.
    #[must_use]
    pub fn name_expression(mut self, expression: &'a str) -> Self {
        self.name_expressions.push(expression);
        self
    }

    /// An NVRTC option (`"-std=c++17"`, `"--use_fast_math"`, `"-I/path"`, `"-G"`).
    #[must_use]
    pub fn option(mut self, option: impl Into<Cow<'a, str>>) -> Self {
        self.options.push(option.into());
        self
    }

    /// `-D<name>=<value>`.
    #[must_use]
    pub fn define(self, name: &str, value: &str) -> Self {
        self.option(alloc::format!("-D{name}={value}"))
    }

    /// Compiles on every call, neither reading nor filling the cache.
    #[must_use]
    pub fn uncached(mut self) -> Self {
        self.cached = false;
        self
    }

    /// Compiles for `target` (`nvrtcCreateProgram`, `nvrtcAddNameExpression`,
    /// `nvrtcCompileProgram`, `nvrtcGetCUBIN`/`nvrtcGetPTX`, `nvrtcGetLoweredName`), or
    /// returns the cached result of the same compilation (see the module docs).
    ///
    /// # Errors
    /// [`Error::Load`] without NVRTC; [`Error::InvalidArgument`] for a refused option or
    /// a NUL byte in a string; [`Error::Nvrtc`] with the compile log when the source does
    /// not compile (`NVRTC_ERROR_COMPILATION`), an option is unknown
    /// (`NVRTC_ERROR_INVALID_OPTION`) or a name expression names nothing
    /// (`NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID`).
    #[doc(alias = "nvrtcCompileProgram")]
    pub fn compile(&self, target: Target) -> Result<Arc<Compiled>> {
        self.check_options()?;
        if !self.cached {
            return self.compile_now(target, version()?).map(Arc::new);
        }
        let nvrtc = version()?;
        let key = cache::key(self, target, nvrtc);
        if let Some(hit) = cache::lookup(&key, target) {
            return Ok(hit);
        }
        let compiled = Arc::new(self.compile_now(target, nvrtc)?);
        cache::store(key, &compiled);
        Ok(compiled)
    }

    /// Compiles for the context's device ([`Target::for_device`]) and loads the result:
    /// [`compile`](Self::compile), then [`Compiled::load`].
    ///
    /// # Errors
    /// As [`compile`](Self::compile) and [`Compiled::load`].
    pub fn load(&self, ctx: &Context) -> Result<RtcModule> {
        let target = Target::for_device(ctx.device())?;
        Compiled::load_arc(self.compile(target)?, ctx)
    }

    /// Refuses options that set the architecture or the kind of output.
    fn check_options(&self) -> Result<()> {
        const REFUSED: [&str; 8] = [
            "-arch",
            "--gpu-architecture",
            "-dlto",
            "--dlink-time-opt",
            "-optix-ir",
            "--optix-ir",
            "-ewp",
            "--extensible-whole-program",
        ];
        for o in &self.options {
            let flag = o.split(['=', ' ']).next().unwrap_or("");
            if REFUSED.contains(&flag) {
                return Err(Error::InvalidArgument(
                    "an NVRTC option that sets the architecture or the output: the Target \
                     chooses them",
                ));
            }
        }
        Ok(())
    }

    /// The compilation itself, with no cache.
    fn compile_now(&self, target: Target, nvrtc: (u32, u32)) -> Result<Compiled> {
        let api = api()?;
        let c = |s: &str| {
            CString::new(s).map_err(|_| Error::InvalidArgument("a NUL byte in an NVRTC string"))
        };
        let source = c(self.source)?;
        let name = c(self.name)?;
        let header_texts: Vec<CString> =
            self.headers.iter().map(|h| c(h.1)).collect::<Result<_>>()?;
        let header_names: Vec<CString> =
            self.headers.iter().map(|h| c(h.0)).collect::<Result<_>>()?;
        let text_ptrs: Vec<*const c_char> = header_texts.iter().map(|s| s.as_ptr()).collect();
        let name_ptrs: Vec<*const c_char> = header_names.iter().map(|s| s.as_ptr()).collect();
        let exprs: Vec<CString> = self
            .name_expressions
            .iter()
            .map(|e| c(e))
            .collect::<Result<_>>()?;
        let mut options: Vec<CString> = self.options.iter().map(|o| c(o)).collect::<Result<_>>()?;
        options.push(c(&target.option())?);
        let option_ptrs: Vec<*const c_char> = options.iter().map(|s| s.as_ptr()).collect();
        let count = |n: usize| {
            c_int::try_from(n)
                .map_err(|_| Error::InvalidArgument("too many NVRTC headers or options"))
        };

        let mut raw: nvrtcProgram = core::ptr::null_mut();
        // SAFETY: NUL-terminated strings and arrays of `headers.len()` pointers to them,
        // all alive across the call (NVRTC copies what it keeps).
        let r = unsafe {
            api.nvrtcCreateProgram()?(
                &mut raw,
                source.as_ptr(),
                name.as_ptr(),
                count(text_ptrs.len())?,
                if text_ptrs.is_empty() {
                    core::ptr::null()
                } else {
                    text_ptrs.as_ptr()
                },
                if name_ptrs.is_empty() {
                    core::ptr::null()
                } else {
                    name_ptrs.as_ptr()
                },
            )
        };
        check("nvrtcCreateProgram", r, JitLog::default())?;
        let program = ProgramHandle { api, raw };
        for e in &exprs {
            // SAFETY: a live program and a NUL-terminated string.
            let r = unsafe { api.nvrtcAddNameExpression()?(program.raw, e.as_ptr()) };
            check("nvrtcAddNameExpression", r, JitLog::default())?;
        }
        // SAFETY: a live program and `options.len()` NUL-terminated strings.
        let r = unsafe {
            api.nvrtcCompileProgram()?(program.raw, count(option_ptrs.len())?, option_ptrs.as_ptr())
        };
        let log = program.log()?;
        check("nvrtcCompileProgram", r, JitLog::from_bytes(log.as_bytes()))?;
        let code = match target.output {
            Output::Cubin => program.bytes(
                "nvrtcGetCUBIN",
                api.nvrtcGetCUBINSize()?,
                api.nvrtcGetCUBIN()?,
            )?,
            Output::Ptx => {
                program.bytes("nvrtcGetPTX", api.nvrtcGetPTXSize()?, api.nvrtcGetPTX()?)?
            }
        };
        let mut lowered = Vec::with_capacity(exprs.len());
        for (e, expr) in exprs.iter().zip(&self.name_expressions) {
            let mut out: *const c_char = core::ptr::null();
            // SAFETY: a live, compiled program; a name expression added before compiling.
            let r = unsafe { api.nvrtcGetLoweredName()?(program.raw, e.as_ptr(), &mut out) };
            check("nvrtcGetLoweredName", r, JitLog::default())?;
            if out.is_null() {
                return Err(Error::Nvrtc {
                    call: "nvrtcGetLoweredName",
                    code: nvrtcResult::NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID.0,
                    log: JitLog::default(),
                });
            }
            // SAFETY: NVRTC returns a NUL-terminated string owned by the program, which is
            // alive here; it is copied before the program is destroyed.
            let name = unsafe { CStr::from_ptr(out) }
                .to_string_lossy()
                .into_owned();
            lowered.push((String::from(*expr), name));
        }
        Ok(Compiled {
            target,
            nvrtc,
            code,
            log,
            lowered,
        })
    }
}

/// A created program, destroyed on drop (`nvrtcDestroyProgram`).
struct ProgramHandle {
    api: &'static NvrtcApi,
    raw: nvrtcProgram,
}

type SizeFn = unsafe extern "C" fn(nvrtcProgram, *mut usize) -> nvrtcResult;
type CopyFn = unsafe extern "C" fn(nvrtcProgram, *mut c_char) -> nvrtcResult;

impl ProgramHandle {
    /// The program's log (`nvrtcGetProgramLogSize`, `nvrtcGetProgramLog`), up to its NUL.
    fn log(&self) -> Result<String> {
        let bytes = self.bytes(
            "nvrtcGetProgramLog",
            self.api.nvrtcGetProgramLogSize()?,
            self.api.nvrtcGetProgramLog()?,
        )?;
        let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
        Ok(String::from_utf8_lossy(bytes.get(..end).unwrap_or(&[])).into_owned())
    }

    /// A size query, then the copy into a buffer of that size.
    fn bytes(&self, call: &'static str, size: SizeFn, copy: CopyFn) -> Result<Vec<u8>> {
        let mut n = 0usize;
        // SAFETY: a live program and a valid out-pointer.
        check(call, unsafe { size(self.raw, &mut n) }, JitLog::default())?;
        let mut buf = alloc::vec![0u8; n];
        if n != 0 {
            // SAFETY: `buf` has the `n` bytes NVRTC reported it writes.
            check(
                call,
                unsafe { copy(self.raw, buf.as_mut_ptr().cast()) },
                JitLog::default(),
            )?;
        }
        Ok(buf)
    }
}

impl Drop for ProgramHandle {
    fn drop(&mut self) {
        if let Ok(destroy) = self.api.nvrtcDestroyProgram() {
            // SAFETY: the program was created by this table's NVRTC and is destroyed once.
            let _ = unsafe { destroy(&mut self.raw) };
        }
    }
}

/// What a compilation produced: the code (CUBIN or PTX), the log (warnings), and the
/// lowered name of every name expression.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Compiled {
    target: Target,
    nvrtc: (u32, u32),
    /// The CUBIN, or the PTX with its NUL.
    code: Vec<u8>,
    log: String,
    lowered: Vec<(String, String)>,
}

impl Compiled {
    /// The target it was compiled for.
    #[must_use]
    pub fn target(&self) -> Target {
        self.target
    }

    /// The NVRTC release that compiled it (major, minor).
    #[must_use]
    pub fn nvrtc_version(&self) -> (u32, u32) {
        self.nvrtc
    }

    /// The CUBIN (for [`Output::Cubin`]), or the PTX text with its NUL.
    #[must_use]
    pub fn code(&self) -> &[u8] {
        &self.code
    }

    /// The PTX text, for [`Output::Ptx`].
    #[must_use]
    pub fn ptx(&self) -> Option<&str> {
        if self.target.output != Output::Ptx {
            return None;
        }
        let end = self
            .code
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(self.code.len());
        core::str::from_utf8(self.code.get(..end)?).ok()
    }

    /// NVRTC's log of a successful compilation (warnings; often empty).
    #[must_use]
    pub fn log(&self) -> &str {
        &self.log
    }

    /// The lowered (mangled) name NVRTC gave `expression`, one of the program's name
    /// expressions (`"scale<float>"` → `"_Z5scaleIfEvPT_S0_j"`).
    #[must_use]
    pub fn lowered_name(&self, expression: &str) -> Option<&str> {
        self.lowered
            .iter()
            .find(|(e, _)| e == expression)
            .map(|(_, l)| l.as_str())
    }

    /// The name expressions and their lowered names, in the order they were added.
    pub fn lowered_names(&self) -> impl Iterator<Item = (&str, &str)> {
        self.lowered.iter().map(|(e, l)| (e.as_str(), l.as_str()))
    }

    /// Loads the code into `ctx` (`cuModuleLoadDataEx`: the CUBIN as it is; PTX through
    /// the driver's JIT).
    ///
    /// # Errors
    /// Driver errors: `CUDA_ERROR_NO_BINARY_FOR_GPU` for a CUBIN of another architecture,
    /// [`Error::Jit`] with the JIT log for PTX the driver cannot compile (such as PTX of a
    /// newer ISA than the driver's).
    #[doc(alias = "cuModuleLoadDataEx")]
    pub fn load(self: &Arc<Self>, ctx: &Context) -> Result<RtcModule> {
        Self::load_arc(Arc::clone(self), ctx)
    }

    fn load_arc(compiled: Arc<Self>, ctx: &Context) -> Result<RtcModule> {
        let module = match compiled.target.output {
            Output::Cubin => Module::from_image(ctx, &compiled.code)?,
            Output::Ptx => Module::from_ptx(
                ctx,
                compiled
                    .ptx()
                    .ok_or(Error::InvalidArgument("NVRTC's PTX is not UTF-8"))?,
            )?,
        };
        Ok(RtcModule { module, compiled })
    }
}

/// A [`Module`] loaded from a [`Compiled`] program, which finds kernels by name or by
/// name expression.
#[derive(Clone, Debug)]
pub struct RtcModule {
    module: Module,
    compiled: Arc<Compiled>,
}

impl RtcModule {
    /// The module.
    #[must_use]
    pub fn module(&self) -> &Module {
        &self.module
    }

    /// What it was loaded from.
    #[must_use]
    pub fn compiled(&self) -> &Arc<Compiled> {
        &self.compiled
    }

    /// The function `name`: one of the program's name expressions (looked up by its
    /// lowered name), or else an entry point's own name (an `extern "C"` kernel).
    ///
    /// # Errors
    /// [`Error::NotFound`] naming what was looked up.
    pub fn function(&self, name: &str) -> Result<Function> {
        self.module
            .function(self.compiled.lowered_name(name).unwrap_or(name))
    }

    /// The kernel `K` (found by `K::NAME`, an `extern "C"` entry point), with its
    /// parameter layout checked against the driver's (`cuFuncGetParamInfo`): a
    /// [`Foreign`] handle, launched with `unsafe`
    /// ([`TypedKernel::launch`]).
    ///
    /// # Errors
    /// [`Error::NotFound`]; [`Error::Layout`] naming the first parameter that differs.
    pub fn kernel<K: Kernel>(&self) -> Result<TypedKernel<K, Foreign>> {
        TypedKernel::<K>::from_module(&self.module)
    }

    /// The kernel of `name_expression` (a template instance, `"scale<float>"`, or a
    /// C++ name), typed as `K` and checked as [`kernel`](Self::kernel) does; `K::NAME`
    /// is not used.
    ///
    /// # Errors
    /// As [`kernel`](Self::kernel); [`Error::InvalidArgument`] when `name_expression`
    /// was not one of the program's name expressions.
    pub fn kernel_as<K: Kernel>(&self, name_expression: &str) -> Result<TypedKernel<K, Foreign>> {
        let lowered = self
            .compiled
            .lowered_name(name_expression)
            .ok_or(Error::InvalidArgument(
                "not a name expression of the program (Program::name_expression)",
            ))?;
        TypedKernel::<K>::from_function_foreign(self.module.function(lowered)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A supported architecture gets a CUBIN; a newer device PTX of the newest
    /// architecture below it; an older one an error.
    #[test]
    fn the_device_target_follows_what_nvrtc_supports() {
        let supported = [75, 80, 86, 89, 90, 100, 120];
        assert_eq!(
            Target::for_arch(90, &supported).ok(),
            Some(Target::cubin(90))
        );
        assert_eq!(
            Target::for_arch(103, &supported).ok(),
            Some(Target::ptx(100))
        );
        assert!(matches!(
            Target::for_arch(70, &supported),
            Err(Error::InvalidArgument(_))
        ));
        assert_eq!(Target::cubin(90).option(), "-arch=sm_90");
        assert_eq!(
            Target::ptx(90).arch_specific().option(),
            "-arch=compute_90a"
        );
    }

    /// Options that choose the architecture or the output are refused before NVRTC is
    /// loaded; others pass.
    #[test]
    fn architecture_and_output_options_are_refused() {
        for o in [
            "-arch=sm_80",
            "--gpu-architecture=compute_80",
            "-arch",
            "-dlto",
            "--dlink-time-opt",
            "-ewp",
        ] {
            let p = Program::new("k.cu", "").option(o);
            assert!(
                matches!(p.check_options(), Err(Error::InvalidArgument(_))),
                "{o}"
            );
        }
        let p = Program::new("k.cu", "")
            .option("-std=c++17")
            .option("--use_fast_math")
            .define("ARCH", "1");
        assert!(p.check_options().is_ok());
    }

    /// A failed compilation displays NVRTC's result name and the log.
    #[test]
    fn a_compile_error_shows_its_log() {
        let e = Error::Nvrtc {
            call: "nvrtcCompileProgram",
            code: 6,
            log: JitLog::from_bytes(b"k.cu(1): error: identifier \"x\" is undefined\n\0"),
        };
        let text = alloc::format!("{e}");
        assert!(text.starts_with("nvrtcCompileProgram failed: NVRTC_ERROR_COMPILATION (6)"));
        assert!(text.contains("compile log:\nk.cu(1): error: identifier \"x\" is undefined"));
        assert_eq!(
            e.jit_log(),
            Some("k.cu(1): error: identifier \"x\" is undefined\n")
        );
    }
}
