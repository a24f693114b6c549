//! [`Kernel`], [`SafeKernel`], and the typed handle [`TypedKernel`], checked once against
//! `cuFuncGetParamInfo` when it is made.

use core::ffi::CStr;
use core::marker::PhantomData;

use crate::args::KernelArgs;
use crate::driver::context::Context;
use crate::driver::function::Function;
use crate::driver::module::{JitOptions, Module};
use crate::error::Result;
use crate::launch::LaunchConfig;

/// A kernel's name and parameter types, as one declaration states them for both sides.
///
/// [`kernel!`](crate::kernel!) implements it for the host half of a declaration (an
/// empty enum named like the kernel); implement it by hand for a kernel built elsewhere, such
/// as a C++ kernel compiled by `nvcc` (or declare it with `kernel!`'s `extern fn` form).
/// The parameter types are checked against what the driver reports for the loaded
/// function (`cuFuncGetParamInfo`: count, offsets and sizes) when a [`TypedKernel`] is
/// made, so a wrong count, order or size is an error there and never reaches a launch.
pub trait Kernel {
    /// The entry point's name in the module (`extern "C"` / `#[unsafe(no_mangle)]`).
    const NAME: &'static CStr;
    /// The parameter types in order, as a tuple: the device signature.
    type Params: KernelArgs;
    /// Whether the entry point runs `griddepcontrol.wait` before anything else (the
    /// `dependent` form of [`kernel!`](crate::kernel!)), so that a Programmatic Dependent
    /// Launch of it never reads its predecessor's output early. Safe launches refuse the
    /// programmatic attributes for kernels that do not.
    const WAITS_FOR_DEPENDENCY: bool = false;
}

/// A kernel whose launch is safe: any grid, block, dynamic shared memory and argument
/// values that the safe conversions of [`scope`](super::scope) produce make it do
/// nothing undefined.
///
/// [`kernel!`](crate::kernel!)'s `safe fn` form implements it: the body is compiled
/// under `#[forbid(unsafe_code)]`, so it reaches memory only through the safe device API
/// (bounds-checked [`DeviceSlice`](super::DeviceSlice) / [`DeviceSliceMut`](super::DeviceSliceMut)
/// accesses, which trap on an index out of range; thread indices; `griddepcontrol`), and
/// the promise below holds by construction. What the promise does not cover: the values a
/// kernel computes (racing writes of threads leave one of the values), traps (an index
/// out of range ends the kernel with an error, reported by the next synchronizing call),
/// and kernels that never finish. As everywhere in Rust, the safe functions the body calls
/// (its crate's own included) must be sound: an `unsafe` block hidden in a safe helper is
/// that helper's promise.
///
/// # Where the trust comes from
/// The trait alone makes nothing launchable: a declaration compiled only for the host
/// has no device body, and its name could match any kernel of a module. The device build
/// of a `safe fn` also emits a global `__cudadrv_safe_<name>` holding the fingerprint of
/// its parameter list ([`KernelArgs::SIGNATURE`]) mixed with whether it is `dependent`;
/// [`TypedKernel::new`] looks it up in the [`KernelModule`] and accepts the handle for
/// safe launches only when it is there and equals the host declaration's value. A
/// host-only `safe fn` whose name matches an `unsafe fn` kernel, or whose slice element
/// types, mutability or `dependent` flag differ from the device build's, is never
/// launched safely (a host-only `dependent` would let a PDL launch read its
/// predecessor's output early).
///
/// # Safety
/// An implementation promises that `Self` is the host half of a `safe` declaration
/// whose device half, where the device build emitted one, is the code the marker
/// describes. [`kernel!`](crate::kernel!) keeps this promise; a hand-written
/// implementation should not be needed.
pub unsafe trait SafeKernel: Kernel {}

/// PTX text built from a crate that declares its kernels with
/// [`kernel!`](crate::kernel!): the trust root of safe launches.
///
/// Made once per crate of kernels, where the PTX is embedded (typically
/// `include_str!(concat!(env!("OUT_DIR"), "/kernels.ptx"))` after a `build.rs` built it):
///
/// ```ignore
/// pub static KERNELS: cudadrv::kernel::KernelPtx =
///     // SAFETY: the PTX rustc produced from the `my-kernels` crate (build.rs).
///     unsafe { cudadrv::kernel::KernelPtx::new(include_str!(concat!(env!("OUT_DIR"), "/kernels.ptx"))) };
/// ```
#[derive(Clone, Copy, Debug)]
pub struct KernelPtx {
    text: &'static str,
}

impl KernelPtx {
    /// Marks `text` as PTX the Rust compiler produced from crates of
    /// [`kernel!`](crate::kernel!) declarations.
    ///
    /// # Safety
    /// A promise about `text` alone, which the caller has at hand: every global named
    /// `__cudadrv_safe_<name>` in it was emitted by the device build of a
    /// [`kernel!`](crate::kernel!) `safe` declaration of the entry point `<name>` in the
    /// same text (so no hand-written PTX and no `#[export_name]` of such a name). Host
    /// declarations written elsewhere need no promise: loading a kernel compares them
    /// with these markers ([`SafeKernel`]).
    #[must_use]
    pub const unsafe fn new(text: &'static str) -> Self {
        Self { text }
    }

    /// The PTX text.
    #[must_use]
    pub const fn text(&self) -> &'static str {
        self.text
    }
}

/// A [`Module`] loaded from a [`KernelPtx`]: typed handles made from it may be launched
/// safely (for [`SafeKernel`]s).
#[derive(Clone, Debug)]
pub struct KernelModule {
    module: Module,
    /// The PTX it was loaded from: a marker absent from the text is not looked up (the
    /// driver's `CUDA_ERROR_NOT_FOUND` would show in a user's sanitizer run).
    text: &'static str,
}

impl KernelModule {
    /// `cuModuleLoadDataEx` of the PTX (JIT-compiled for the context's device).
    ///
    /// # Errors
    /// As [`Module::from_ptx`].
    #[doc(alias = "cuModuleLoadDataEx")]
    pub fn load(ctx: &Context, ptx: &KernelPtx) -> Result<Self> {
        Self::load_with(ctx, ptx, JitOptions::default())
    }

    /// [`load`](Self::load) with JIT options: the most registers a thread may use (a
    /// cap the PTX of a Rust kernel cannot state itself), the optimization level, the
    /// logs (the info log has each kernel's register and shared-memory use). The typed
    /// handles made from the module are checked and trusted as with `load`.
    ///
    /// # Errors
    /// As [`Module::from_ptx_with`].
    #[doc(alias = "cuModuleLoadDataEx")]
    pub fn load_with(ctx: &Context, ptx: &KernelPtx, options: JitOptions<'_>) -> Result<Self> {
        Ok(Self {
            module: Module::from_ptx_with(ctx, ptx.text, options)?,
            text: ptx.text,
        })
    }

    /// The module.
    #[must_use]
    pub fn module(&self) -> &Module {
        &self.module
    }

    /// [`TypedKernel::new`] on this module.
    ///
    /// # Errors
    /// As [`TypedKernel::new`].
    pub fn kernel<K: Kernel>(&self) -> Result<TypedKernel<K>> {
        TypedKernel::new(self)
    }
}

/// A loaded kernel with its parameter types: `cuModuleGetFunction` plus a layout check
/// (`cuFuncGetParamInfo`) done once, here.
///
/// Launch it safely in a [`scope`](super::scope) (for a [`SafeKernel`] loaded from a
/// [`KernelModule`]), or with [`launch`](Self::launch) (`unsafe`, for any kernel) with
/// the arguments typed as [`Kernel::Params`].
///
/// The second parameter says where the handle came from: [`Loaded`] (the default: from a
/// [`KernelModule`], or trusted by [`from_function`](Self::from_function)'s caller),
/// which a safe launch may take once its module's marker trusts it; or [`Foreign`]
/// ([`from_module`](Self::from_module): any module, never trusted), whose launches are
/// `unsafe` only: a safe launch of one does not compile.
///
/// ```compile_fail,E0308
/// # use cudadrv::{Context, DeviceBuffer, LaunchConfig, Module, Stream};
/// # use cudadrv::kernel::{self, DeviceSliceMut, TypedKernel};
/// cudadrv::kernel! { pub safe fn fill(out: DeviceSliceMut<u32>) {} }
/// # fn f(ctx: &Context, m: &Module, stream: &Stream) -> cudadrv::Result<()> {
/// let k = TypedKernel::<fill>::from_module(m)?; // a Foreign handle
/// let mut out = DeviceBuffer::<u32>::new(ctx, 256)?;
/// kernel::scope(ctx, |s| {
///     // error: a safe launch takes a Loaded handle
///     s.lane(stream)?.launch(&k, &LaunchConfig::new(1, 256), (&mut out,))
/// })
/// # }
/// # fn main() { let _ = f as fn(&Context, &Module, &Stream) -> _; }
/// ```
pub struct TypedKernel<K: Kernel, From: Source = Loaded> {
    f: Function,
    /// The module's device build marked the kernel safe with this signature (or
    /// `from_function`'s caller promised it): the code is a safe declaration's.
    trusted: bool,
    _k: PhantomData<fn() -> (K, From)>,
}

/// Where a [`TypedKernel`] came from (sealed): [`Loaded`] or [`Foreign`].
pub trait Source: source::Sealed {}

mod source {
    pub trait Sealed {}
    impl Sealed for super::Loaded {}
    impl Sealed for super::Foreign {}
}

/// A handle from a [`KernelModule`] (or [`TypedKernel::from_function`]): safe launches
/// take it when its module's device build marked the kernel safe.
#[derive(Clone, Copy, Debug)]
pub enum Loaded {}

/// A handle from any [`Module`] ([`TypedKernel::from_module`]): launched `unsafe` only.
#[derive(Clone, Copy, Debug)]
pub enum Foreign {}

impl Source for Loaded {}
impl Source for Foreign {}

impl<K: Kernel> TypedKernel<K> {
    /// `cuModuleGetFunction(K::NAME)` in a module built from the declaring crate's PTX,
    /// then [`Function::verify_args`] with `K::Params`, then the safe-body marker
    /// (`cuModuleGetGlobal("__cudadrv_safe_<name>")`, see [`SafeKernel`]): the handle is
    /// accepted by safe launches only when the module's device build of the kernel was a
    /// `safe fn` with the same parameter fingerprint.
    ///
    /// # Errors
    /// [`Error::NotFound`](crate::Error::NotFound) when the module has no such kernel;
    /// [`Error::Layout`](crate::Error::Layout) naming the first parameter whose offset or
    /// size differs (or a count difference); `cuFuncGetParamInfo` failures;
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) when the module's marker
    /// for the kernel records another declaration (same layout, other element types or
    /// mutability, or another `dependent` flag).
    #[doc(alias = "cuModuleGetFunction")]
    #[doc(alias = "cuFuncGetParamInfo")]
    pub fn new(module: &KernelModule) -> Result<Self> {
        let f = module.module.function_cstr(K::NAME)?;
        f.verify_args::<K::Params>()?;
        let trusted = has_safe_body::<K>(&module.module, module.text)?;
        Ok(Self {
            f,
            trusted,
            _k: PhantomData,
        })
    }

    /// `cuModuleGetFunction(K::NAME)` in any module (PTX from `nvcc`, a cubin, ...), then
    /// the layout check: a [`Foreign`] handle, whose launches are `unsafe`
    /// ([`launch`](Self::launch)); a safe launch of it does not compile.
    ///
    /// # Errors
    /// As [`new`](Self::new).
    pub fn from_module(module: &Module) -> Result<TypedKernel<K, Foreign>> {
        let f = module.function_cstr(K::NAME)?;
        f.verify_args::<K::Params>()?;
        Ok(TypedKernel {
            f,
            trusted: false,
            _k: PhantomData,
        })
    }

    /// The layout check on a function found some other way (by a run-time name, such as
    /// the lowered name of a C++ template instance): a [`Foreign`] handle, launched
    /// `unsafe` only.
    ///
    /// # Errors
    /// As [`new`](Self::new) (the name is not checked).
    pub fn from_function_foreign(f: Function) -> Result<TypedKernel<K, Foreign>> {
        f.verify_args::<K::Params>()?;
        Ok(TypedKernel {
            f,
            trusted: false,
            _k: PhantomData,
        })
    }

    /// The layout check on a function found some other way; the result may be launched
    /// safely when `K` is a [`SafeKernel`].
    ///
    /// # Errors
    /// As [`new`](Self::new) (the name is not checked).
    ///
    /// # Safety
    /// `f` must be the code of `K`'s declaration: for a [`SafeKernel`], code that keeps
    /// that trait's promise.
    pub unsafe fn from_function(f: Function) -> Result<Self> {
        f.verify_args::<K::Params>()?;
        Ok(Self {
            f,
            trusted: true,
            _k: PhantomData,
        })
    }
}

impl<K: Kernel, From: Source> TypedKernel<K, From> {
    /// The function.
    #[must_use]
    pub fn function(&self) -> &Function {
        &self.f
    }

    /// Whether safe launches accept this handle: made from a [`KernelModule`] whose device
    /// build marked the kernel as a `safe fn` of this signature (or promised by
    /// [`from_function`](Self::from_function)'s caller).
    #[must_use]
    pub fn is_trusted(&self) -> bool {
        self.trusted
    }

    /// `cuLaunchKernel` (no attributes) or `cuLaunchKernelEx` with `args` typed as the
    /// declaration's parameters: a count, order or type mismatch does not compile.
    ///
    /// # Errors
    /// As [`crate::launch::launch`].
    ///
    /// A programmatic (PDL) launch is refused for a kernel not declared `dependent`
    /// (`safe dependent fn`, `unsafe dependent fn`, `extern dependent fn`): it would not
    /// wait for its predecessor's output.
    ///
    /// # Safety
    /// As [`crate::launch::launch`] except the signature, which the types and the check
    /// at load guarantee: every pointer and slice in `args` must be valid for what the
    /// kernel does with it until it has finished.
    #[doc(alias = "cuLaunchKernel")]
    #[doc(alias = "cuLaunchKernelEx")]
    #[inline]
    pub unsafe fn launch(&self, cfg: &LaunchConfig<'_>, args: &K::Params) -> Result<()> {
        if cfg.num_attributes() != 0 && !K::WAITS_FOR_DEPENDENCY && cfg.is_programmatic() {
            return Err(crate::Error::InvalidArgument(
                "a programmatic (PDL) launch of a kernel not declared `dependent`: declare \
                 it `extern dependent fn` (or `unsafe dependent fn`) if it waits with \
                 griddepcontrol.wait",
            ));
        }
        if cfg.num_attributes() == 0 {
            // SAFETY: the signature matches (types and load-time check); the rest is the
            // caller's.
            unsafe { crate::launch::launch_plain(&self.f, cfg, args) }
        } else {
            // SAFETY: as above.
            unsafe { crate::launch::launch(&self.f, cfg, args) }
        }
    }
}

impl<K: Kernel, From: Source> Clone for TypedKernel<K, From> {
    fn clone(&self) -> Self {
        Self {
            f: self.f.clone(),
            trusted: self.trusted,
            _k: PhantomData,
        }
    }
}

impl<K: Kernel, From: Source> core::fmt::Debug for TypedKernel<K, From> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("TypedKernel")
            .field("name", &K::NAME)
            .field("trusted", &self.trusted)
            .finish_non_exhaustive()
    }
}

/// Whether `module`'s device build marked `K::NAME` as the entry point of a `safe`
/// declaration with `K`'s marker value ([`__safe_marker`](super::__safe_marker) of the
/// parameter fingerprint and the `dependent` flag): the global `__cudadrv_safe_<name>`
/// (see [`SafeKernel`]). Only a marker the PTX text declares is asked of the driver, so
/// a kernel without one (an `unsafe fn` or extern kernel) is untrusted without a failing
/// driver call. A name too long for the stack buffer is never trusted.
fn has_safe_body<K: Kernel>(module: &Module, text: &str) -> Result<bool> {
    const PREFIX: &[u8] = b"__cudadrv_safe_";
    let name = K::NAME.to_bytes();
    let mut buf = [0u8; 256];
    let Some(joined) = buf.get_mut(..PREFIX.len() + name.len()) else {
        return Ok(false);
    };
    joined[..PREFIX.len()].copy_from_slice(PREFIX);
    joined[PREFIX.len()..].copy_from_slice(name);
    let Ok(marker) = core::str::from_utf8(joined) else {
        return Ok(false);
    };
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '$';
    let declared = text
        .match_indices(marker)
        .any(|(at, _)| !text[at + marker.len()..].starts_with(ident));
    if !declared {
        return Ok(false);
    }
    let value = module.read_u64(module.global(marker)?)?;
    let expected = super::__safe_marker(
        <K::Params as KernelArgs>::SIGNATURE,
        K::WAITS_FOR_DEPENDENCY,
    );
    if value == expected {
        Ok(true)
    } else {
        Err(crate::Error::InvalidArgument(
            "the module's device build of this safe kernel differs from the host \
             declaration (parameter types, slice element size or mutability, or `dependent`)",
        ))
    }
}
