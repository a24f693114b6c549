//! JIT linking (driver API section "Module Management", `cuLink*`): [`Linker`] combines
//! PTX, cubins, fatbins, objects and libraries (`libcudadevrt.a` for dynamic
//! parallelism) into one cubin, which loads as a [`Module`].
//!
//! The driver keeps pointers to the option arrays and log buffers for the life of the
//! link state, so they live at a fixed address: boxed with `alloc`
//! (`Linker::new`), or in caller storage without it ([`Linker::new_in`]).

use core::ffi::{CStr, c_void};
use core::marker::PhantomData;
use core::ptr;

use cudadrv_sys::{CUjitInputType, CUlinkState};

use crate::driver::api;
use crate::driver::context::Context;
use crate::driver::module::{JitOptions, LogBuffer, Module, OptionList, with_cstr};
use crate::error::{Error, JitLog, Result};

/// Fixed-address storage for a [`Linker`]'s JIT option arrays (no heap needed).
pub struct LinkStorage {
    options: OptionList,
}

impl LinkStorage {
    /// Empty storage.
    pub fn new() -> Self {
        Self {
            options: OptionList::new(),
        }
    }
}

impl Default for LinkStorage {
    fn default() -> Self {
        Self::new()
    }
}

impl core::fmt::Debug for LinkStorage {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("LinkStorage")
    }
}

/// A pending JIT link (`CUlinkState`), destroyed on drop (`cuLinkDestroy`).
///
/// ```no_run
/// # fn main() -> cudadrv::Result<()> {
/// use cudadrv::{Context, Device, JitOptions, Linker};
/// let ctx = Context::primary(Device::get(0)?)?;
/// let mut linker = Linker::new(&ctx, JitOptions::default())?;
/// linker.add_library_file("/usr/local/cuda/lib64/libcudadevrt.a")?;
/// linker.add_ptx("...PTX that launches child grids...", "parent.ptx")?;
/// let module = linker.into_module()?;
/// # let _ = module; Ok(()) }
/// ```
///
/// A linker borrows its context (it lives only until its module is made):
///
/// ```compile_fail,E0505
/// # fn f() -> cudadrv::Result<()> {
/// use cudadrv::{Context, Device, JitOptions, Linker};
/// let ctx = Context::primary(Device::get(0)?)?;
/// let linker = Linker::new(&ctx, JitOptions::default())?;
/// drop(ctx); // error: the linker borrows the context
/// let module = linker.into_module()?;
/// # drop(module); Ok(()) }
/// ```
pub struct Linker<'ctx, 'log> {
    raw: CUlinkState,
    ctx: &'ctx Context,
    storage: *mut LinkStorage,
    #[cfg(feature = "alloc")]
    owns_storage: bool,
    error_log: LogBuffer<'log>,
    info_log: LogBuffer<'log>,
    _storage: PhantomData<&'log mut LinkStorage>,
}

impl core::fmt::Debug for Linker<'_, '_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Linker").field("raw", &self.raw).finish()
    }
}

impl<'ctx, 'log> Linker<'ctx, 'log> {
    /// `cuLinkCreate` with `options`; the option arrays are boxed. Without an error-log
    /// buffer in `options`, an internal one catches the log for errors.
    ///
    /// # Errors
    /// Driver errors.
    #[cfg(feature = "alloc")]
    #[doc(alias = "cuLinkCreate")]
    pub fn new(ctx: &'ctx Context, options: JitOptions<'log>) -> Result<Self> {
        let storage = alloc::boxed::Box::into_raw(alloc::boxed::Box::new(LinkStorage::new()));
        // SAFETY: `storage` is a fresh box, reclaimed by `Drop` (or below on error).
        let made = unsafe { Self::create(ctx, options, storage, true) };
        if made.is_err() {
            // SAFETY: `create` failed, so no link state refers to the box.
            drop(unsafe { alloc::boxed::Box::from_raw(storage) });
        }
        made
    }

    /// `cuLinkCreate` with `options`, the option arrays kept in `storage`.
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuLinkCreate")]
    pub fn new_in(
        ctx: &'ctx Context,
        options: JitOptions<'log>,
        storage: &'log mut LinkStorage,
    ) -> Result<Self> {
        // SAFETY: `storage` is borrowed mutably for `'log`, which the linker outlives not.
        unsafe { Self::create(ctx, options, storage, false) }
    }

    /// # Safety
    /// `storage` must be valid and unaliased for the linker's life.
    unsafe fn create(
        ctx: &'ctx Context,
        mut options: JitOptions<'log>,
        storage: *mut LinkStorage,
        owned: bool,
    ) -> Result<Self> {
        #[cfg(not(feature = "alloc"))]
        let _ = owned;
        let g = ctx.enter()?;
        // SAFETY: valid and unaliased (caller).
        let list = unsafe { &mut (*storage).options };
        *list = OptionList::new();
        let (error_log, info_log) = options.build(list);
        let mut raw = ptr::null_mut();
        let create = g.cu.cuLinkCreate()?;
        // SAFETY: the arrays hold `list.len` entries and, with the log buffers, stay at
        // their address for the linker's life; the context is current.
        let rc = unsafe {
            create(
                list.count(),
                list.keys.as_mut_ptr(),
                list.values.as_mut_ptr(),
                &mut raw,
            )
        };
        if !rc.is_success() {
            return Err(Error::jit("cuLinkCreate", rc, error_log.log()));
        }
        Ok(Self {
            raw,
            ctx,
            storage,
            #[cfg(feature = "alloc")]
            owns_storage: owned,
            error_log,
            info_log,
            _storage: PhantomData,
        })
    }

    /// Takes ownership of a link state of `ctx` made elsewhere (`cuLinkCreate` with the
    /// caller's own options); dropping the result destroys it (`cuLinkDestroy`).
    ///
    /// The linker keeps no log of its own: [`error_log`](Self::error_log) and
    /// [`info_log_bytes`](Self::info_log_bytes) are empty, and errors carry no JIT log
    /// (whatever log buffers the creator passed still receive it).
    ///
    /// # Safety
    /// `raw` must be a live link state created while `ctx` was current, that nothing
    /// else destroys, and whose option arrays and log buffers (if any) stay valid until
    /// the result is dropped.
    #[must_use]
    pub unsafe fn from_raw(raw: CUlinkState, ctx: &'ctx Context) -> Self {
        Self {
            raw,
            ctx,
            storage: ptr::null_mut(),
            #[cfg(feature = "alloc")]
            owns_storage: false,
            error_log: LogBuffer::new(None, false),
            info_log: LogBuffer::new(None, false),
            _storage: PhantomData,
        }
    }

    /// The raw `CUlinkState`.
    pub fn as_raw(&self) -> CUlinkState {
        self.raw
    }

    fn fail(&self, call: &'static str, code: cudadrv_sys::CUresult) -> Error {
        Error::jit(call, code, self.error_log.log())
    }

    /// `cuLinkAddData` of PTX text (a NUL is added with `alloc` when missing).
    ///
    /// # Errors
    /// [`Error::Jit`] with the error log when the PTX does not compile.
    #[doc(alias = "cuLinkAddData")]
    pub fn add_ptx(&mut self, ptx: &str, name: &str) -> Result<()> {
        if ptx.as_bytes().last() == Some(&0) {
            return self.add_data(CUjitInputType::CU_JIT_INPUT_PTX, ptx.as_bytes(), name);
        }
        #[cfg(feature = "alloc")]
        {
            let mut text = alloc::vec::Vec::with_capacity(ptx.len().saturating_add(1));
            text.extend_from_slice(ptx.as_bytes());
            text.push(0);
            self.add_data(CUjitInputType::CU_JIT_INPUT_PTX, &text, name)
        }
        #[cfg(not(feature = "alloc"))]
        {
            let _ = name;
            Err(Error::InvalidArgument(
                "PTX text must end with a NUL byte (no `alloc` feature to add one)",
            ))
        }
    }

    /// `cuLinkAddData` with `CU_JIT_INPUT_CUBIN`.
    ///
    /// # Errors
    /// As [`Linker::add_data`].
    pub fn add_cubin(&mut self, cubin: &[u8], name: &str) -> Result<()> {
        self.add_data(CUjitInputType::CU_JIT_INPUT_CUBIN, cubin, name)
    }

    /// `cuLinkAddData` with `CU_JIT_INPUT_FATBINARY`.
    ///
    /// # Errors
    /// As [`Linker::add_data`].
    pub fn add_fatbin(&mut self, fatbin: &[u8], name: &str) -> Result<()> {
        self.add_data(CUjitInputType::CU_JIT_INPUT_FATBINARY, fatbin, name)
    }

    /// `cuLinkAddData` with `CU_JIT_INPUT_LIBRARY`: an archive of device objects (the
    /// bytes of `libcudadevrt.a`, say).
    ///
    /// # Errors
    /// As [`Linker::add_data`].
    pub fn add_library(&mut self, archive: &[u8], name: &str) -> Result<()> {
        self.add_data(CUjitInputType::CU_JIT_INPUT_LIBRARY, archive, name)
    }

    /// `cuLinkAddData`: one input of kind `kind`, named `name` in logs. PTX input must
    /// contain a NUL.
    ///
    /// # Errors
    /// [`Error::Jit`] with the error log; [`Error::InvalidArgument`] for PTX without a NUL.
    #[doc(alias = "cuLinkAddData")]
    pub fn add_data(&mut self, kind: CUjitInputType, data: &[u8], name: &str) -> Result<()> {
        if kind == CUjitInputType::CU_JIT_INPUT_PTX && !data.contains(&0) {
            return Err(Error::InvalidArgument(
                "PTX input must contain a terminating NUL byte",
            ));
        }
        let cu = api()?;
        let add = cu.cuLinkAddData()?;
        let _g = self.ctx.enter()?;
        let rc = with_cstr(name, |name| {
            // SAFETY: live link state; `data` holds `data.len()` bytes (PTX: NUL-terminated,
            // checked); no per-input options.
            unsafe {
                add(
                    self.raw,
                    kind,
                    data.as_ptr().cast_mut().cast::<c_void>(),
                    data.len(),
                    name.as_ptr(),
                    0,
                    ptr::null_mut(),
                    ptr::null_mut(),
                )
            }
        })?;
        if rc.is_success() {
            Ok(())
        } else {
            Err(self.fail("cuLinkAddData", rc))
        }
    }

    /// `cuLinkAddFile`: one input read from `path`.
    ///
    /// # Errors
    /// [`Error::Jit`] with the error log (`CUDA_ERROR_FILE_NOT_FOUND`, ...).
    #[doc(alias = "cuLinkAddFile")]
    pub fn add_file(&mut self, kind: CUjitInputType, path: &str) -> Result<()> {
        with_cstr(path, |path| self.add_file_cstr(kind, path))?
    }

    /// `cuLinkAddFile` with `CU_JIT_INPUT_LIBRARY`: e.g.
    /// `/usr/local/cuda/lib64/libcudadevrt.a` for dynamic parallelism.
    ///
    /// # Errors
    /// As [`Linker::add_file`].
    pub fn add_library_file(&mut self, path: &str) -> Result<()> {
        self.add_file(CUjitInputType::CU_JIT_INPUT_LIBRARY, path)
    }

    /// `cuLinkAddFile` with a C string path.
    ///
    /// # Errors
    /// As [`Linker::add_file`].
    #[doc(alias = "cuLinkAddFile")]
    pub fn add_file_cstr(&mut self, kind: CUjitInputType, path: &CStr) -> Result<()> {
        let cu = api()?;
        let add = cu.cuLinkAddFile()?;
        let _g = self.ctx.enter()?;
        // SAFETY: live link state, NUL-terminated path, no per-input options.
        let rc = unsafe {
            add(
                self.raw,
                kind,
                path.as_ptr(),
                0,
                ptr::null_mut(),
                ptr::null_mut(),
            )
        };
        if rc.is_success() {
            Ok(())
        } else {
            Err(self.fail("cuLinkAddFile", rc))
        }
    }

    /// `cuLinkComplete`: links the inputs; the cubin belongs to the linker (valid until
    /// it is dropped).
    ///
    /// # Errors
    /// [`Error::Jit`] with the error log (unresolved symbols, ...).
    #[doc(alias = "cuLinkComplete")]
    pub fn complete(&mut self) -> Result<&[u8]> {
        let cu = api()?;
        let complete = cu.cuLinkComplete()?;
        let _g = self.ctx.enter()?;
        let (mut cubin, mut size) = (ptr::null_mut::<c_void>(), 0usize);
        // SAFETY: live link state, valid out-pointers.
        let rc = unsafe { complete(self.raw, &mut cubin, &mut size) };
        if !rc.is_success() {
            return Err(self.fail("cuLinkComplete", rc));
        }
        if cubin.is_null() {
            return Ok(&[]);
        }
        // SAFETY: the driver returns `size` bytes it owns until cuLinkDestroy, which runs
        // only when `self` (borrowed by the result) is dropped.
        Ok(unsafe { core::slice::from_raw_parts(cubin.cast::<u8>(), size) })
    }

    /// [`Linker::complete`], then loads the cubin into the context as a [`Module`]
    /// (`cuModuleLoadDataEx`).
    ///
    /// # Errors
    /// As [`Linker::complete`] and [`Module::from_image`].
    pub fn into_module(mut self) -> Result<Module> {
        let ctx = self.ctx;
        let cubin = self.complete()?;
        Module::from_image(ctx, cubin)
    }

    /// The error log so far (empty if none was kept: no `alloc` and no caller buffer).
    pub fn error_log(&self) -> JitLog {
        self.error_log.log()
    }

    /// The info log so far, bytes up to the first NUL (empty without a caller buffer).
    pub fn info_log_bytes(&self) -> &[u8] {
        self.info_log.text()
    }
}

impl Drop for Linker<'_, '_> {
    /// `cuLinkDestroy`, then frees boxed storage; a failure goes to the drop-error sink.
    fn drop(&mut self) {
        // SAFETY: the link state is ours; no cubin slice borrows it any more.
        unsafe { crate::driver::dropping!(cuLinkDestroy(self.raw)) };
        #[cfg(feature = "alloc")]
        if self.owns_storage {
            // SAFETY: boxed in `new`; the link state that used it is destroyed.
            drop(unsafe { alloc::boxed::Box::from_raw(self.storage) });
        }
        #[cfg(not(feature = "alloc"))]
        let _ = self.storage;
    }
}
