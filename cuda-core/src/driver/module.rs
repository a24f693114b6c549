//! Module management (driver API section "Module Management"): [`Module`], code loaded
//! into a context from PTX text (JIT-compiled), a cubin or a fatbin, with
//! [`JitOptions`] (optimization level, register cap, error and info logs).
//!
//! On a JIT failure the error carries the JIT error log: with `alloc`, in the
//! [`Error::Jit`] itself; without, in the caller's [`JitOptions::error_log`] buffer.

use core::ffi::{CStr, c_void};
use core::ptr;

use cudadrv_sys::{CUdeviceptr, CUjit_option, CUjit_target, CUmodule, CUresult};

use crate::driver::context::Context;
use crate::driver::dropping;
use crate::driver::function::Function;
use crate::driver::refcount::{Shared, pooled};
use crate::error::{Error, JitLog, Result, SymbolName, drv};

/// Without `alloc`, how many modules can be loaded at once (clones do not count).
pub const MAX_MODULES: usize = 128;

/// JIT options for [`Module::from_ptx_with`], [`Module::from_image_with`] and
/// [`Linker`](crate::Linker).
///
/// Logs are written into caller buffers when given. Without an error-log buffer, and
/// with the `alloc` feature, an internal 16 KiB buffer catches the error log for the
/// returned [`Error::Jit`].
#[derive(Debug, Default)]
pub struct JitOptions<'a> {
    /// `CU_JIT_ERROR_LOG_BUFFER`: receives the error log (NUL-terminated, truncated to
    /// fit).
    pub error_log: Option<&'a mut [u8]>,
    /// `CU_JIT_INFO_LOG_BUFFER`: receives the info log (register use, ...).
    pub info_log: Option<&'a mut [u8]>,
    /// `CU_JIT_OPTIMIZATION_LEVEL`: 0 to 4 (the default is 4).
    pub optimization_level: Option<u32>,
    /// `CU_JIT_MAX_REGISTERS`: the most registers a thread may use.
    pub max_registers: Option<u32>,
    /// `CU_JIT_TARGET`: compile for this target instead of the context's device.
    pub target: Option<CUjit_target>,
    /// `CU_JIT_LOG_VERBOSE`: verbose logs.
    pub log_verbose: bool,
    /// `CU_JIT_GENERATE_LINE_INFO`: line information for profilers.
    pub generate_line_info: bool,
    /// `CU_JIT_GENERATE_DEBUG_INFO`: debug information.
    pub generate_debug_info: bool,
}

/// Most options [`JitOptions`] sets at once.
const MAX_OPTIONS: usize = 12;

/// A `(options, values)` pair of arrays as the JIT calls take them.
pub(crate) struct OptionList {
    pub(crate) keys: [CUjit_option; MAX_OPTIONS],
    pub(crate) values: [*mut c_void; MAX_OPTIONS],
    pub(crate) len: usize,
}

impl OptionList {
    pub(crate) fn new() -> Self {
        Self {
            keys: [CUjit_option(0); MAX_OPTIONS],
            values: [ptr::null_mut(); MAX_OPTIONS],
            len: 0,
        }
    }

    fn push(&mut self, key: CUjit_option, value: *mut c_void) {
        if let (Some(k), Some(v)) = (self.keys.get_mut(self.len), self.values.get_mut(self.len)) {
            *k = key;
            *v = value;
            self.len += 1;
        }
    }

    /// The number of options, for the C `unsigned int`.
    pub(crate) fn count(&self) -> u32 {
        // MAX_OPTIONS fits in u32.
        self.len as u32
    }
}

/// Where a JIT error log goes: a caller buffer, or (with `alloc`) an internal one.
pub(crate) struct LogBuffer<'a> {
    ptr: *mut u8,
    len: usize,
    #[cfg(feature = "alloc")]
    _owned: Option<alloc::vec::Vec<u8>>,
    _borrow: core::marker::PhantomData<&'a mut [u8]>,
}

/// Size of the internal error-log buffer (with `alloc`).
#[cfg(feature = "alloc")]
const INTERNAL_LOG_BYTES: usize = 16 * 1024;

impl<'a> LogBuffer<'a> {
    /// The caller's buffer, else an internal one (with `alloc`), else none. The first
    /// byte is cleared so an untouched buffer reads as an empty log.
    pub(crate) fn new(user: Option<&'a mut [u8]>, internal: bool) -> Self {
        if let Some(buf) = user {
            if let Some(first) = buf.first_mut() {
                *first = 0;
            }
            return Self {
                ptr: buf.as_mut_ptr(),
                len: buf.len(),
                #[cfg(feature = "alloc")]
                _owned: None,
                _borrow: core::marker::PhantomData,
            };
        }
        #[cfg(feature = "alloc")]
        if internal {
            let mut v = alloc::vec![0u8; INTERNAL_LOG_BYTES];
            return Self {
                ptr: v.as_mut_ptr(),
                len: v.len(),
                _owned: Some(v),
                _borrow: core::marker::PhantomData,
            };
        }
        let _ = internal;
        Self {
            ptr: ptr::null_mut(),
            len: 0,
            #[cfg(feature = "alloc")]
            _owned: None,
            _borrow: core::marker::PhantomData,
        }
    }

    pub(crate) fn is_some(&self) -> bool {
        !self.ptr.is_null() && self.len > 0
    }

    /// The log as written so far (up to the first NUL).
    pub(crate) fn text(&self) -> &[u8] {
        if !self.is_some() {
            return &[];
        }
        // SAFETY: `ptr..ptr+len` is the caller's `&'a mut [u8]` or our own vector, which
        // live as long as `self`; the driver has finished writing (the call returned).
        let all = unsafe { core::slice::from_raw_parts(self.ptr, self.len) };
        let end = all.iter().position(|&b| b == 0).unwrap_or(all.len());
        all.get(..end).unwrap_or(&[])
    }

    pub(crate) fn log(&self) -> JitLog {
        JitLog::from_bytes(self.text())
    }
}

impl<'a> JitOptions<'a> {
    /// Splits off the log buffers and fills `list` with every option, including the log
    /// buffers' pointers. `list` points into the returned buffers.
    pub(crate) fn build(&mut self, list: &mut OptionList) -> (LogBuffer<'a>, LogBuffer<'a>) {
        let err = LogBuffer::new(self.error_log.take(), true);
        let info = LogBuffer::new(self.info_log.take(), false);
        if err.is_some() {
            list.push(CUjit_option::CU_JIT_ERROR_LOG_BUFFER, err.ptr.cast());
            list.push(
                CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                ptr::without_provenance_mut(err.len),
            );
        }
        if info.is_some() {
            list.push(CUjit_option::CU_JIT_INFO_LOG_BUFFER, info.ptr.cast());
            list.push(
                CUjit_option::CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
                ptr::without_provenance_mut(info.len),
            );
        }
        if let Some(level) = self.optimization_level {
            list.push(
                CUjit_option::CU_JIT_OPTIMIZATION_LEVEL,
                ptr::without_provenance_mut(level as usize),
            );
        }
        if let Some(regs) = self.max_registers {
            list.push(
                CUjit_option::CU_JIT_MAX_REGISTERS,
                ptr::without_provenance_mut(regs as usize),
            );
        }
        if let Some(target) = self.target {
            list.push(
                CUjit_option::CU_JIT_TARGET,
                ptr::without_provenance_mut(target.0 as usize),
            );
        }
        if self.log_verbose {
            list.push(
                CUjit_option::CU_JIT_LOG_VERBOSE,
                ptr::without_provenance_mut(1),
            );
        }
        if self.generate_line_info {
            list.push(
                CUjit_option::CU_JIT_GENERATE_LINE_INFO,
                ptr::without_provenance_mut(1),
            );
        }
        if self.generate_debug_info {
            list.push(
                CUjit_option::CU_JIT_GENERATE_DEBUG_INFO,
                ptr::without_provenance_mut(1),
            );
        }
        (err, info)
    }
}

/// A module (`CUmodule`) loaded into a context: a shared owner, unloaded
/// (`cuModuleUnload`) when the last clone, and the last [`Function`] taken from it, is
/// dropped.
///
/// Functions keep their module loaded, so a struct can hold a module next to the
/// functions taken from it (or only the functions):
///
/// ```no_run
/// # fn main() -> cudadrv::Result<()> {
/// use cudadrv::{Context, Device, Function, Module};
/// struct Kernels {
///     fill: Function,
///     scale: Function,
/// }
/// let ctx = Context::primary(Device::get(0)?)?;
/// let module = Module::from_ptx(&ctx, "...")?;
/// let kernels = Kernels { fill: module.function("fill")?, scale: module.function("scale")? };
/// drop(module); // still loaded: the functions hold it
/// # let _ = kernels; Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Module {
    inner: Shared<ModuleInner>,
}

/// What the clones of a [`Module`] share.
#[derive(Debug)]
pub(crate) struct ModuleInner {
    raw: CUmodule,
    owned: bool,
    ctx: Context,
}

// SAFETY: a CUmodule may be used from any thread; the driver synchronizes it.
unsafe impl Send for ModuleInner {}
// SAFETY: as above.
unsafe impl Sync for ModuleInner {}

impl Drop for ModuleInner {
    /// `cuModuleUnload` for owned modules; a failure goes to the drop-error sink.
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        let _g = crate::error::enter_for_drop!(self.ctx);
        // SAFETY: the module is ours and no clone or Function holds it any more; the
        // context is current.
        unsafe { dropping!(cuModuleUnload(self.raw)) };
    }
}

pooled!(ModuleInner, MAX_MODULES);

/// A `__device__` global of a module: its device address and size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Global {
    /// Device address.
    pub ptr: CUdeviceptr,
    /// Size in bytes.
    pub size: usize,
}

impl Module {
    /// `cuModuleLoadDataEx` of PTX text, JIT-compiled for the context's device.
    ///
    /// The text needs a terminating NUL; with `alloc` one is added when missing (a copy),
    /// without `alloc` a missing NUL is [`Error::InvalidArgument`].
    ///
    /// ```no_run
    /// # fn main() -> cudadrv::Result<()> {
    /// use cudadrv::{Context, Device, Module};
    /// let ctx = Context::primary(Device::get(0)?)?;
    /// let module = Module::from_ptx(&ctx, ".version 8.0\n.target sm_90\n.address_size 64\n")?;
    /// # let _ = module; Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::Jit`] with the JIT error log when the PTX does not compile (or
    /// [`Error::Driver`] when the driver failed without writing a log); driver errors.
    #[doc(alias = "cuModuleLoadDataEx")]
    pub fn from_ptx(ctx: &Context, ptx: &str) -> Result<Self> {
        Self::from_ptx_with(ctx, ptx, JitOptions::default())
    }

    /// [`Module::from_ptx`] with JIT options.
    ///
    /// # Errors
    /// As [`Module::from_ptx`].
    #[doc(alias = "cuModuleLoadDataEx")]
    pub fn from_ptx_with(ctx: &Context, ptx: &str, options: JitOptions<'_>) -> Result<Self> {
        if ptx.as_bytes().last() == Some(&0) {
            return Self::load(ctx, ptx.as_ptr().cast(), options);
        }
        #[cfg(feature = "alloc")]
        {
            let mut text = alloc::vec::Vec::with_capacity(ptx.len().saturating_add(1));
            text.extend_from_slice(ptx.as_bytes());
            text.push(0);
            Self::load(ctx, text.as_ptr().cast(), options)
        }
        #[cfg(not(feature = "alloc"))]
        {
            let _ = options;
            Err(Error::InvalidArgument(
                "PTX text must end with a NUL byte (no `alloc` feature to add one)",
            ))
        }
    }

    /// `cuModuleLoadDataEx` of a NUL-terminated PTX string (no copy).
    ///
    /// # Errors
    /// As [`Module::from_ptx`].
    #[doc(alias = "cuModuleLoadDataEx")]
    pub fn from_ptx_cstr(ctx: &Context, ptx: &CStr, options: JitOptions<'_>) -> Result<Self> {
        Self::load(ctx, ptx.as_ptr().cast(), options)
    }

    /// `cuModuleLoadDataEx` of a cubin (ELF), a fatbin, or NUL-terminated PTX bytes.
    ///
    /// The driver reads the image without a length, so the image is checked first, with
    /// no driver call: an ELF64 cubin's header must be consistent (entry sizes, counts,
    /// `e_shstrndx`) and its program and section headers, segments and section contents
    /// must lie inside `image`; so must a fatbin's declared size; anything else must
    /// contain a NUL.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a truncated image; [`Error::Jit`] when embedded
    /// PTX fails to compile; driver errors (`CUDA_ERROR_NO_BINARY_FOR_GPU`, ...).
    #[doc(alias = "cuModuleLoadDataEx")]
    pub fn from_image(ctx: &Context, image: &[u8]) -> Result<Self> {
        Self::from_image_with(ctx, image, JitOptions::default())
    }

    /// [`Module::from_image`] with JIT options (they apply to PTX inside a fatbin).
    ///
    /// # Errors
    /// As [`Module::from_image`].
    #[doc(alias = "cuModuleLoadDataEx")]
    pub fn from_image_with(ctx: &Context, image: &[u8], options: JitOptions<'_>) -> Result<Self> {
        check_image(image)?;
        Self::load(ctx, image.as_ptr().cast(), options)
    }

    fn load(ctx: &Context, image: *const c_void, mut options: JitOptions<'_>) -> Result<Self> {
        let g = ctx.enter()?;
        let mut list = OptionList::new();
        let (err, _info) = options.build(&mut list);
        let load = g.cu.cuModuleLoadDataEx()?;
        let mut raw = ptr::null_mut();
        // SAFETY: `image` is a complete image (checked by the callers); the option arrays
        // hold `list.len` entries whose buffers (`err`, `_info`) outlive the call; the
        // context is current.
        let rc = unsafe {
            load(
                &mut raw,
                image,
                list.count(),
                list.keys.as_mut_ptr(),
                list.values.as_mut_ptr(),
            )
        };
        if !rc.is_success() {
            return Err(Error::jit("cuModuleLoadDataEx", rc, err.log()));
        }
        // SAFETY: a module just loaded into `ctx`, ours.
        unsafe { Self::from_raw(raw, ctx) }
    }

    /// Takes ownership of a module of `ctx`; the last clone unloads it.
    ///
    /// # Safety
    /// `raw` must be a live module of `ctx` that nothing else unloads.
    ///
    /// # Errors
    /// Without `alloc`, when [`MAX_MODULES`] modules are loaded (the module is unloaded
    /// again).
    pub unsafe fn from_raw(raw: CUmodule, ctx: &Context) -> Result<Self> {
        Self::share(ModuleInner {
            raw,
            owned: true,
            ctx: ctx.clone(),
        })
    }

    /// Wraps a module owned elsewhere; dropping the result does nothing.
    ///
    /// # Safety
    /// `raw` must be a live module of `ctx` that stays loaded as long as the result, its
    /// clones and every [`Function`] taken from them.
    ///
    /// # Errors
    /// Without `alloc`, when [`MAX_MODULES`] modules are wrapped.
    pub unsafe fn borrow_raw(raw: CUmodule, ctx: &Context) -> Result<Self> {
        Self::share(ModuleInner {
            raw,
            owned: false,
            ctx: ctx.clone(),
        })
    }

    fn share(inner: ModuleInner) -> Result<Self> {
        Shared::new(inner)
            .map(|inner| Self { inner })
            .map_err(|inner| {
                drop(inner);
                Error::InvalidArgument("too many loaded modules (MAX_MODULES without `alloc`)")
            })
    }

    /// The raw `CUmodule`.
    #[inline]
    pub fn as_raw(&self) -> CUmodule {
        self.inner.raw
    }

    /// The context the module is loaded in.
    #[inline]
    pub fn context(&self) -> &Context {
        &self.inner.ctx
    }

    /// `cuModuleGetFunction`: the kernel named `name` (its mangled name for C++).
    ///
    /// # Errors
    /// [`Error::NotFound`] naming `name` when there is none (its
    /// [`code`](Error::code) is `CUDA_ERROR_NOT_FOUND`); driver errors.
    #[doc(alias = "cuModuleGetFunction")]
    pub fn function(&self, name: &str) -> Result<Function> {
        with_cstr(name, |name| self.function_cstr(name))?
    }

    /// `cuModuleGetFunction` with a C string name.
    ///
    /// # Errors
    /// As [`Module::function`].
    #[doc(alias = "cuModuleGetFunction")]
    pub fn function_cstr(&self, name: &CStr) -> Result<Function> {
        let g = self.inner.ctx.enter()?;
        let mut raw = ptr::null_mut();
        // SAFETY: live module, NUL-terminated name, valid out-pointer; the context is
        // current.
        unsafe {
            drv!(
                g.cu,
                cuModuleGetFunction(&mut raw, self.inner.raw, name.as_ptr())
            )
        }
        .map_err(|e| name_not_found(e, name))?;
        // SAFETY: the function belongs to this module, which the result keeps loaded.
        Ok(unsafe { Function::from_raw(raw, self) })
    }

    /// `cuModuleGetGlobal`: the address and size of the `__device__` global `name`.
    ///
    /// # Errors
    /// [`Error::NotFound`] naming `name` when there is none (its
    /// [`code`](Error::code) is `CUDA_ERROR_NOT_FOUND`); driver errors.
    #[doc(alias = "cuModuleGetGlobal")]
    pub fn global(&self, name: &str) -> Result<Global> {
        let g = self.inner.ctx.enter()?;
        with_cstr(name, |name| {
            let (mut ptr, mut size) = (0, 0);
            // SAFETY: live module, NUL-terminated name, valid out-pointers; the context
            // is current.
            unsafe {
                drv!(
                    g.cu,
                    cuModuleGetGlobal(&mut ptr, &mut size, self.inner.raw, name.as_ptr())
                )
            }
            .map_err(|e| name_not_found(e, name))?;
            Ok(Global { ptr, size })
        })?
    }

    /// The value of an 8-byte global of this module (found with
    /// [`global`](Self::global)), read back to the host with `cuMemcpyDtoH`. A global of
    /// another size is [`Error::InvalidArgument`].
    pub(crate) fn read_u64(&self, global: Global) -> Result<u64> {
        if global.size != 8 {
            return Err(Error::InvalidArgument("the global is not 8 bytes"));
        }
        let g = self.inner.ctx.enter()?;
        let mut value = 0u64;
        // SAFETY: `global` is 8 bytes of this module (callers pass what `global` found),
        // alive while the module is borrowed; `value` is 8 writable host bytes; the
        // context is current.
        unsafe {
            drv!(
                g.cu,
                cuMemcpyDtoH(ptr::from_mut(&mut value).cast(), global.ptr, 8)
            )?
        };
        Ok(value)
    }

    /// `cuModuleGetFunctionCount`: the number of functions in the module.
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuModuleGetFunctionCount")]
    pub fn function_count(&self) -> Result<u32> {
        let g = self.inner.ctx.enter()?;
        let mut n = 0;
        // SAFETY: live module, valid out-pointer; the context is current.
        unsafe { drv!(g.cu, cuModuleGetFunctionCount(&mut n, self.inner.raw))? };
        Ok(n)
    }
}

/// [`Error::NotFound`] naming `name` for a lookup that returned `CUDA_ERROR_NOT_FOUND`;
/// any other error unchanged.
fn name_not_found(e: Error, name: &CStr) -> Error {
    match e {
        Error::Driver { call, code } if code == CUresult::CUDA_ERROR_NOT_FOUND => Error::NotFound {
            call,
            name: SymbolName::from_bytes(name.to_bytes()),
        },
        e => e,
    }
}

/// Runs `f` with `s` as a NUL-terminated string: copied into a stack buffer (up to 511
/// bytes), else (with `alloc`) onto the heap.
pub(crate) fn with_cstr<R>(s: &str, f: impl FnOnce(&CStr) -> R) -> Result<R> {
    let bytes = s.as_bytes();
    if bytes.contains(&0) {
        return Err(Error::InvalidArgument("name contains a NUL byte"));
    }
    let mut buf = [0u8; 512];
    if let Some(dst) = buf.get_mut(..bytes.len()) {
        if bytes.len() < 512 {
            dst.copy_from_slice(bytes);
            let c = CStr::from_bytes_until_nul(&buf).map_err(|_| Error::InvalidArgument("name"))?;
            return Ok(f(c));
        }
    }
    #[cfg(feature = "alloc")]
    {
        let mut v = alloc::vec::Vec::with_capacity(bytes.len().saturating_add(1));
        v.extend_from_slice(bytes);
        v.push(0);
        let c = CStr::from_bytes_with_nul(&v).map_err(|_| Error::InvalidArgument("name"))?;
        Ok(f(c))
    }
    #[cfg(not(feature = "alloc"))]
    {
        Err(Error::InvalidArgument(
            "name longer than 511 bytes (no `alloc` feature)",
        ))
    }
}

/// The fatbin magic (`FATBIN_MAGIC`, `fatbinary_section.h`).
const FATBIN_MAGIC: u32 = 0xBA55_ED50;
/// The fatbin wrapper magic (`__fatBinC_Wrapper_t`), which points elsewhere.
const FATBIN_WRAPPER_MAGIC: u32 = 0x4662_43B1;

fn read_u16(b: &[u8], at: usize) -> Option<usize> {
    let s = b.get(at..at.checked_add(2)?)?;
    Some(u16::from_le_bytes([*s.first()?, *s.get(1)?]) as usize)
}

fn read_u32(b: &[u8], at: usize) -> Option<u32> {
    let s: [u8; 4] = b.get(at..at.checked_add(4)?)?.try_into().ok()?;
    Some(u32::from_le_bytes(s))
}

fn read_u64(b: &[u8], at: usize) -> Option<usize> {
    let s: [u8; 8] = b.get(at..at.checked_add(8)?)?.try_into().ok()?;
    usize::try_from(u64::from_le_bytes(s)).ok()
}

/// Whether `[off, off + n * size)` lies inside `len` bytes.
fn fits(len: usize, off: usize, n: usize, size: usize) -> bool {
    n.checked_mul(size)
        .and_then(|bytes| off.checked_add(bytes))
        .is_some_and(|end| end <= len)
}

/// The refusal of an image too short for its own headers.
const BAD_IMAGE: Error = Error::InvalidArgument("truncated or malformed module image");

/// Checks that the driver, reading `image` without a length, stays inside it. Pure: no
/// driver call.
fn check_image(image: &[u8]) -> Result<()> {
    if image.starts_with(b"\x7fELF") {
        return check_elf(image);
    }
    match read_u32(image, 0) {
        Some(FATBIN_MAGIC) => {
            // struct { u32 magic; u16 version; u16 headerSize; u64 fatSize; }
            let header = read_u16(image, 6).ok_or(BAD_IMAGE)?;
            let body = read_u64(image, 8).ok_or(BAD_IMAGE)?;
            if header < 16 || !fits(image.len(), header, 1, body) {
                return Err(BAD_IMAGE);
            }
            Ok(())
        }
        Some(FATBIN_WRAPPER_MAGIC) => Err(Error::InvalidArgument(
            "a fatbin wrapper (__fatBinC_Wrapper_t): pass the fatbin it points to",
        )),
        _ if image.contains(&0) => Ok(()),
        _ => Err(Error::InvalidArgument(
            "PTX image must contain a terminating NUL byte",
        )),
    }
}

/// The ELF64 header rules of [`check_image`]: a little-endian ELF64 header whose
/// program-header table (each entry 56 bytes, at most `0xfffe` of them), section-header
/// table (1 to `0xffff` entries of 64 bytes) and `e_shstrndx` are consistent, the tables,
/// every segment's file contents and every section's contents (but `SHT_NOBITS`) inside
/// `image`. All arithmetic is checked.
fn check_elf(image: &[u8]) -> Result<()> {
    /// `e_phnum` saying that the count is in section 0's `sh_info`.
    const PN_XNUM: usize = 0xffff;
    /// The size of an `Elf64_Phdr`.
    const PHDR_SIZE: usize = 56;
    /// The size of an `Elf64_Shdr`.
    const SHDR_SIZE: usize = 64;
    /// A section that occupies no file bytes (`.bss`).
    const SHT_NOBITS: u32 = 8;
    // ELF64 little-endian header: e_phoff 0x20, e_shoff 0x28, e_phentsize 0x36,
    // e_phnum 0x38, e_shentsize 0x3a, e_shnum 0x3c, e_shstrndx 0x3e.
    if image.get(4) != Some(&2) || image.get(5) != Some(&1) || image.len() < 64 {
        return Err(BAD_IMAGE);
    }
    let h = |r: Option<usize>| r.ok_or(BAD_IMAGE);
    let (phoff, shoff) = (h(read_u64(image, 0x20))?, h(read_u64(image, 0x28))?);
    let (phentsize, phnum) = (h(read_u16(image, 0x36))?, h(read_u16(image, 0x38))?);
    let (shentsize, shnum) = (h(read_u16(image, 0x3a))?, h(read_u16(image, 0x3c))?);
    let shstrndx = h(read_u16(image, 0x3e))?;
    if phnum == PN_XNUM {
        return Err(Error::InvalidArgument(
            "ELF image: e_phnum is PN_XNUM (0xffff), which a cubin does not use",
        ));
    }
    if phnum > 0 && phentsize != PHDR_SIZE {
        return Err(Error::InvalidArgument(
            "ELF image: e_phentsize must be 56 (an ELF64 program header) when e_phnum > 0",
        ));
    }
    if shnum == 0 {
        return Err(Error::InvalidArgument(
            "ELF image: e_shnum must be non-zero (a cubin has a section table)",
        ));
    }
    if shentsize != SHDR_SIZE {
        return Err(Error::InvalidArgument(
            "ELF image: e_shentsize must be 64 (an ELF64 section header)",
        ));
    }
    if !fits(image.len(), phoff, phnum, PHDR_SIZE) {
        return Err(Error::InvalidArgument(
            "ELF image: the program-header table (e_phoff + e_phnum * e_phentsize) must lie \
             inside the image",
        ));
    }
    if !fits(image.len(), shoff, shnum, SHDR_SIZE) {
        return Err(Error::InvalidArgument(
            "ELF image: the section-header table (e_shoff + e_shnum * e_shentsize) must lie \
             inside the image",
        ));
    }
    if shstrndx >= shnum {
        return Err(Error::InvalidArgument(
            "ELF image: e_shstrndx must be below e_shnum",
        ));
    }
    // Both tables are inside `image`: every `at + field` below is too, and `read_*`
    // answer `None` (never panic) if not.
    for i in 0..phnum {
        let at = h(i.checked_mul(PHDR_SIZE).and_then(|o| o.checked_add(phoff)))?;
        let off = h(at.checked_add(0x08).and_then(|at| read_u64(image, at)))?;
        let size = h(at.checked_add(0x20).and_then(|at| read_u64(image, at)))?;
        if !fits(image.len(), off, 1, size) {
            return Err(Error::InvalidArgument(
                "ELF image: a segment (p_offset + p_filesz) must lie inside the image",
            ));
        }
    }
    for i in 0..shnum {
        let at = h(i.checked_mul(SHDR_SIZE).and_then(|o| o.checked_add(shoff)))?;
        let kind = at.checked_add(4).and_then(|at| read_u32(image, at));
        if kind.ok_or(BAD_IMAGE)? == SHT_NOBITS {
            continue;
        }
        let off = h(at.checked_add(0x18).and_then(|at| read_u64(image, at)))?;
        let size = h(at.checked_add(0x20).and_then(|at| read_u64(image, at)))?;
        if !fits(image.len(), off, 1, size) {
            return Err(Error::InvalidArgument(
                "ELF image: a section (sh_offset + sh_size) must lie inside the image",
            ));
        }
    }
    Ok(())
}

/// Lazy loading (Programming Guide 4.7): the loading mode, and the functions of a
/// module whether or not they are loaded yet.
impl Module {
    /// `cuModuleGetLoadingMode`: whether the driver loads kernels lazily
    /// (`CU_MODULE_LAZY_LOADING`) or eagerly (`CU_MODULE_EAGER_LOADING`).
    ///
    /// # `CUDA_MODULE_LOADING`
    ///
    /// The mode is a process-wide setting read from the `CUDA_MODULE_LOADING` environment
    /// variable when the driver initializes (`cuInit`, the first call of this crate), so
    /// it must be set before the process makes any CUDA call; changing it later has no
    /// effect. Its values:
    ///
    /// - `LAZY` (the default since CUDA 12.2; unset means this): loading a module
    ///   ([`Module::from_ptx`], [`Module::from_image`], ...) only registers its kernels.
    ///   Each kernel's code is loaded onto the device the first time it is needed: its
    ///   first launch, an attribute query that needs the loaded code, or
    ///   [`Function::load`]. The handles [`Module::functions`] returns may therefore be
    ///   unloaded ([`Function::is_loaded`] is `false` until one of those events; a
    ///   lookup by name, [`Module::function`], may load the kernel it returns). Module loading
    ///   is faster and device memory is spent only on kernels that run, but the first
    ///   launch of each kernel pays the load, which a latency-sensitive application
    ///   moves out of its hot path with [`Function::load`] (or by launching once to warm
    ///   up). Lazy loading can also deadlock a kernel that waits for another kernel
    ///   launched concurrently (the second one's load waits for the device): load both
    ///   first.
    /// - `EAGER`: every kernel of a module is loaded with the module, as before CUDA
    ///   11.7; every [`Function`] reports [`Function::is_loaded`] from the start and
    ///   [`Function::load`] does nothing.
    ///
    /// ```no_run
    /// # fn main() -> cudadrv::Result<()> {
    /// use cudadrv::Module;
    /// use cudadrv::cuda_sys::CUmoduleLoadingMode;
    /// // Run as `CUDA_MODULE_LOADING=EAGER ./app` to load every kernel with its module.
    /// if Module::loading_mode()? == CUmoduleLoadingMode::CU_MODULE_LAZY_LOADING {
    ///     println!("kernels load on first use");
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// Loader errors; [`Error::DriverTooOld`] before CUDA 11.7 (never with the CUDA 12.0+
    /// drivers this crate supports).
    #[doc(alias = "cuModuleGetLoadingMode")]
    #[doc(alias = "CUDA_MODULE_LOADING")]
    pub fn loading_mode() -> Result<cudadrv_sys::CUmoduleLoadingMode> {
        let cu = crate::driver::api()?;
        let mut mode = cudadrv_sys::CUmoduleLoadingMode(0);
        // SAFETY: valid out-pointer; the call needs no context.
        unsafe { drv!(cu, cuModuleGetLoadingMode(&mut mode))? };
        Ok(mode)
    }

    /// `cuModuleEnumerateFunctions`: fills `out` with the module's functions, in the
    /// driver's order, and returns how many the module has
    /// ([`function_count`](Self::function_count), `cuModuleGetFunctionCount`).
    ///
    /// When `out` is shorter than the count, only its length is filled (pass a longer
    /// slice to see them all); slots past the count are set to `None`, and so are the
    /// slots of a failed call. No heap is used: the driver writes the raw handles into
    /// `out`'s own memory, which the `Function`s then replace.
    ///
    /// Under lazy loading ([`Module::loading_mode`]) the functions returned here may not
    /// be loaded yet: [`Function::is_loaded`] tells, [`Function::load`] loads one, and a
    /// launch or an attribute query that needs the code loads it on the way (at a cost
    /// in latency). Like every [`Function`], each keeps the module loaded.
    ///
    /// ```no_run
    /// # fn f(module: &cudadrv::Module) -> cudadrv::Result<()> {
    /// let mut slots: [Option<cudadrv::Function>; 32] = Default::default();
    /// let n = module.functions(&mut slots)?;
    /// for f in slots.iter().flatten() {
    ///     if !f.is_loaded()? {
    ///         f.load()?; // pay the load now, not at the first launch
    ///     }
    /// }
    /// assert!(n <= 32, "the module has more functions than the slots");
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::DriverTooOld`] before CUDA 12.4; driver errors.
    #[doc(alias = "cuModuleEnumerateFunctions")]
    pub fn functions(&self, out: &mut [Option<Function>]) -> Result<usize> {
        // The driver's array of handles must fit in the slots' memory at the same
        // alignment; it does, since a `Function` holds a `CUfunction`.
        const _: () = assert!(
            size_of::<Option<Function>>() >= size_of::<cudadrv_sys::CUfunction>()
                && align_of::<Option<Function>>() >= align_of::<cudadrv_sys::CUfunction>()
        );
        for slot in out.iter_mut() {
            *slot = None;
        }
        let count = self.function_count()?;
        let total = usize::try_from(count)
            .map_err(|_| Error::InvalidArgument("function count does not fit usize"))?;
        let k = total.min(out.len());
        if k == 0 {
            return Ok(total);
        }
        let g = self.inner.ctx.enter()?;
        let enumerate = g.cu.cuModuleEnumerateFunctions()?;
        // `k <= count`, a u32.
        let k32 = u32::try_from(k).unwrap_or(count);
        let slots = out.as_mut_ptr();
        let handles = slots.cast::<cudadrv_sys::CUfunction>();
        // SAFETY: `handles` points at the first `k` slots, `k * size_of::<Option<Function>>()`
        // bytes, aligned for and large enough for `k` handles (the assertion above); every
        // slot is `None` (nothing is leaked when its bytes are overwritten). The module is
        // live and the context current. From here until every slot is written again
        // below, the slots hold raw bytes; nothing reads them as `Option<Function>` and
        // nothing in between can panic.
        let rc = unsafe { enumerate(handles, k32, self.inner.raw) };
        if !rc.is_success() {
            for i in 0..k {
                // SAFETY: `i < k <= out.len()`; restores a valid value without dropping
                // the raw bytes there.
                unsafe { slots.add(i).write(None) };
            }
            return Err(Error::Driver {
                call: "cuModuleEnumerateFunctions",
                code: rc,
            });
        }
        // Backwards: slot `i` spans bytes `[i * S, (i + 1) * S)` with `S >= 8`, and handle
        // `j` lies at `[8 j, 8 j + 8)`; for `j < i` that is below `i * S`, so writing slot
        // `i` never overwrites a handle still to be read.
        for i in (0..k).rev() {
            // SAFETY: `i < k`: handle `i` was written by the driver and is read before
            // slot `i` is written; slot `i` is in bounds, and `write` drops nothing. The
            // handle is a function of this module, which the `Function` keeps loaded.
            unsafe {
                let raw = handles.add(i).read();
                slots.add(i).write(Some(Function::from_raw(raw, self)));
            }
        }
        Ok(total)
    }
}

#[cfg(test)]
mod tests;
