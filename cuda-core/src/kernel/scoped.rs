//! [`scope`]: safe launches whose buffer borrows last until the work has finished.
//!
//! The design is `std::thread::scope`'s. [`scope`] hands its closure a `&'s Scope`;
//! every launch in it borrows its buffers for `'s` (shared for [`DeviceSlice`]
//! parameters, exclusive for [`DeviceSliceMut`] ones), and `scope` synchronizes every
//! stream used in it ([`Lane`]s) before it returns, also when the closure panics, so the
//! borrows end only once the GPU is done with them. The host cannot free, move, read or
//! write a buffer the scope has borrowed exclusively, nor free, move or write one it has
//! borrowed shared, until `scope` has returned: the compiler refuses it.
//!
//! Inside a scope, a buffer used by several launches is an [`Owned`] handle, bound to one
//! lane at a time: launches on that lane may read it (`&owned`) or write it
//! (`&mut owned`), in stream order; [`Lane::hand_over`] moves it to another lane with an
//! event, so launches on two streams never touch it unordered. A buffer that no launch of
//! the scope writes is passed as `&DeviceBuffer` to launches on any lane.
//!
//! Cost: a launch is one `cuLaunchKernel` (or `cuLaunchKernelEx` with attributes); the
//! checks before it compare handles already in registers, and nothing allocates.

use core::cell::Cell;
use core::marker::PhantomData;
use core::ptr;

use cudadrv_sys::CUstream;

use super::params::{DeviceSlice, DeviceSliceMut, Element};
use super::typed::{SafeKernel, TypedKernel};
use crate::args::{DeviceRepr, KernelArgs};
use crate::driver::context::Context;
use crate::driver::event::Event;
use crate::driver::stream::Stream;
use crate::error::{Error, Result, drv, report_drop_error};
use crate::launch::{DriverLaunch, LaunchConfig, launch_config};
use crate::memory::{DeviceBuffer, DeviceView, DeviceViewMut};

/// How many streams one [`scope`] can use (the lanes are kept inline, without a heap).
pub const MAX_LANES: usize = 16;

/// Runs `f` with a [`Scope`] for safe launches and synchronizes every stream the scope
/// used ([`Scope::lane`]) before returning, whether `f` returns or panics.
///
/// Returns what `f` returned; if `f` succeeded but a synchronization failed (an error of
/// the asynchronous work, such as a kernel that trapped), that error.
///
/// ```no_run
/// # use cudadrv::{Context, DeviceBuffer, Stream};
/// # use cudadrv::kernel::{self, DeviceSlice, DeviceSliceMut, KernelModule, TypedKernel};
/// cudadrv::kernel! {
///     /// `out[i] = a[i] + b[i]`.
///     pub safe fn add(a: DeviceSlice<f32>, b: DeviceSlice<f32>, out: DeviceSliceMut<f32>) {
///         // device body (compiled for nvptx64 only)
///     }
/// }
/// # fn f(ctx: &Context, module: &KernelModule) -> cudadrv::Result<()> {
/// let add: TypedKernel<add> = module.kernel()?; // checked against cuFuncGetParamInfo
/// let a = DeviceBuffer::from_slice(ctx, &[1.0f32; 1024])?;
/// let b = DeviceBuffer::from_slice(ctx, &[2.0f32; 1024])?;
/// let mut out = DeviceBuffer::<f32>::new(ctx, 1024)?;
/// let stream = Stream::non_blocking(ctx)?;
/// kernel::scope(ctx, |s| {
///     let lane = s.lane(&stream)?;
///     lane.launch(&add, &cudadrv::LaunchConfig::new(4, 256), (&a, &b, &mut out))
/// })?; // the stream is synchronized here: `out` is free again
/// let mut host = vec![0.0; 1024];
/// out.copy_to_host(&mut host)?;
/// # Ok(()) }
/// ```
///
/// A buffer a launch writes cannot be touched by the host until the scope has ended:
///
/// ```compile_fail
/// # use cudadrv::{Context, DeviceBuffer, Stream};
/// # use cudadrv::kernel::{self, DeviceSliceMut, KernelModule, TypedKernel};
/// # cudadrv::kernel! { pub safe fn fill(out: DeviceSliceMut<u32>) {} }
/// # fn f(ctx: &Context, k: &TypedKernel<fill>, stream: &Stream) -> cudadrv::Result<()> {
/// let mut out = DeviceBuffer::<u32>::new(ctx, 256)?;
/// kernel::scope(ctx, |s| {
///     s.lane(stream)?.launch(k, &cudadrv::LaunchConfig::new(1, 256), (&mut out,))?;
///     let mut host = [0u32; 256];
///     out.copy_to_host(&mut host) // error: `out` is borrowed mutably by the launch
/// })
/// # }
/// ```
///
/// Nor freed or moved:
///
/// ```compile_fail
/// # use cudadrv::{Context, DeviceBuffer, Stream};
/// # use cudadrv::kernel::{self, DeviceSliceMut, KernelModule, TypedKernel};
/// # cudadrv::kernel! { pub safe fn fill(out: DeviceSliceMut<u32>) {} }
/// # fn f(ctx: &Context, k: &TypedKernel<fill>, stream: &Stream) -> cudadrv::Result<()> {
/// let mut out = DeviceBuffer::<u32>::new(ctx, 256)?;
/// kernel::scope(ctx, |s| {
///     s.lane(stream)?.launch(k, &cudadrv::LaunchConfig::new(1, 256), (&mut out,))?;
///     drop(out); // error: cannot move out of `out` while it is borrowed
///     Ok(())
/// })
/// # }
/// ```
///
/// A buffer read by a launch cannot be written by the host meanwhile:
///
/// ```compile_fail
/// # use cudadrv::{Context, DeviceBuffer, Stream};
/// # use cudadrv::kernel::{self, DeviceSlice, KernelModule, TypedKernel};
/// # cudadrv::kernel! { pub safe fn read(a: DeviceSlice<u32>) {} }
/// # fn f(ctx: &Context, k: &TypedKernel<read>, stream: &Stream) -> cudadrv::Result<()> {
/// let mut a = DeviceBuffer::<u32>::new(ctx, 256)?;
/// kernel::scope(ctx, |s| {
///     s.lane(stream)?.launch(k, &cudadrv::LaunchConfig::new(1, 256), (&a,))?;
///     a.copy_from_host(&[0; 256]) // error: `a` is borrowed by the launch
/// })
/// # }
/// ```
///
/// And one buffer cannot be both a written argument and another argument:
///
/// ```compile_fail
/// # use cudadrv::{Context, DeviceBuffer, Stream};
/// # use cudadrv::kernel::{self, DeviceSlice, DeviceSliceMut, KernelModule, TypedKernel};
/// # cudadrv::kernel! { pub safe fn copy(a: DeviceSlice<u32>, out: DeviceSliceMut<u32>) {} }
/// # fn f(ctx: &Context, k: &TypedKernel<copy>, stream: &Stream) -> cudadrv::Result<()> {
/// let mut a = DeviceBuffer::<u32>::new(ctx, 256)?;
/// kernel::scope(ctx, |s| {
///     // error: cannot borrow `a` as mutable because it is also borrowed as immutable
///     s.lane(stream)?.launch(k, &cudadrv::LaunchConfig::new(1, 256), (&a, &mut a))
/// })
/// # }
/// ```
///
/// # Soundness
/// The closure only ever sees `&'s Scope`, a reference to a value on `scope`'s own stack:
/// leaking a [`Lane`] or an [`Owned`] (`mem::forget`) ends no borrow early and skips no
/// synchronization, because the list of streams to wait for lives in that value, and
/// `scope` waits for them after the closure returns or while a panic unwinds through it
/// (a drop guard), before the borrows of `'s` can end. A lane's stream cannot start or
/// join a stream capture while the scope borrows it (both need `&mut Stream`; default
/// streams, which other `Stream` values can name, are refused), so no launch becomes a
/// graph node that could outlive the scope. If a synchronization fails, the context has
/// an error that stops its work (the failure is returned, or during a panic handed to the
/// drop-error hook, after a `cuCtxSynchronize` attempt).
pub fn scope<'env, F, T>(ctx: &'env Context, f: F) -> Result<T>
where
    F: for<'s> FnOnce(&'s Scope<'s, 'env>) -> Result<T>,
{
    let scope = Scope {
        ctx,
        lanes: [const { Cell::new(ptr::null_mut()) }; MAX_LANES],
        count: Cell::new(0),
        _scope: PhantomData,
        _env: PhantomData,
    };
    // Synchronizes if `f` unwinds; disarmed (forgotten) on the normal path, which
    // synchronizes itself to report the error.
    let guard = SyncOnUnwind(&scope);
    let result = f(&scope);
    core::mem::forget(guard);
    let synced = scope.synchronize_all();
    match (result, synced) {
        (Err(e), _) | (Ok(_), Err(e)) => Err(e),
        (Ok(v), Ok(())) => Ok(v),
    }
}

/// Synchronizes the scope's lanes when dropped during unwinding.
struct SyncOnUnwind<'a, 's, 'env>(&'a Scope<'s, 'env>);

impl Drop for SyncOnUnwind<'_, '_, '_> {
    fn drop(&mut self) {
        if let Err(e) = self.0.synchronize_all() {
            report_drop_error(&e);
        }
    }
}

/// The scope of safe launches made by [`scope`]: hands out [`Lane`]s and remembers their
/// streams to wait for them at its end.
///
/// `'s` is the scope's lifetime (every borrow a launch makes lasts that long), `'env`
/// what the scope itself borrows (the context). Both are invariant.
pub struct Scope<'s, 'env: 's> {
    ctx: &'env Context,
    lanes: [Cell<CUstream>; MAX_LANES],
    count: Cell<usize>,
    _scope: PhantomData<&'s mut &'s ()>,
    _env: PhantomData<&'env mut &'env ()>,
}

impl<'s, 'env> Scope<'s, 'env> {
    /// Uses `stream` for launches in this scope; the scope waits for it at its end.
    ///
    /// # Errors
    /// [`Error::ContextMismatch`] for a stream of another context than the scope's;
    /// [`Error::InvalidArgument`] for a default stream ([`Stream::legacy`],
    /// [`Stream::per_thread`]: other `Stream` values may name it, so the scope could not
    /// keep it from being captured) or when [`MAX_LANES`] streams are in use;
    /// [`Error::StreamCapturing`] while the stream is being captured.
    pub fn lane(&'s self, stream: &'s Stream) -> Result<Lane<'s>> {
        const CALL: &str = "cudadrv::kernel::Scope::lane";
        self.ctx.ensure_same(stream.context(), CALL)?;
        if stream.is_default() {
            return Err(Error::InvalidArgument(
                "a scope's lanes must be created streams, not a default stream",
            ));
        }
        stream.ensure_not_capturing(CALL)?;
        let raw = stream.as_raw();
        let n = self.count.get();
        if !self.lanes[..n].iter().any(|l| l.get() == raw) {
            let Some(slot) = self.lanes.get(n) else {
                return Err(Error::InvalidArgument(
                    "too many streams in one kernel::scope (MAX_LANES)",
                ));
            };
            slot.set(raw);
            self.count.set(n + 1);
        }
        Ok(Lane {
            stream,
            ctx: self.ctx,
            _s: PhantomData,
        })
    }

    /// The scope's context.
    #[must_use]
    pub fn context(&self) -> &'env Context {
        self.ctx
    }

    /// Waits for every lane; on a failure, tries `cuCtxSynchronize` before returning it.
    fn synchronize_all(&self) -> Result<()> {
        let n = self.count.get();
        if n == 0 {
            return Ok(());
        }
        // Wait even if the context cannot be made current: `cuStreamSynchronize` finds
        // the context from the stream. Without a driver table nothing was launched.
        let guard = self.ctx.enter();
        let cu = match (&guard, cudadrv_sys::driver()) {
            (Ok(g), _) => g.cu,
            (Err(_), Ok(cu)) => cu,
            (Err(_), Err(_)) => return guard.map(|_| ()),
        };
        let mut first = guard.as_ref().map(|_| ()).map_err(Clone::clone);
        for lane in &self.lanes[..n] {
            // SAFETY: the lane's stream is borrowed for `'s`, which has not ended (this
            // runs inside `scope`); a synchronization names its stream's context.
            let r = unsafe { drv!(cu, cuStreamSynchronize(lane.get())) };
            if first.is_ok() {
                first = r;
            }
        }
        if first.is_err() && guard.is_ok() {
            // SAFETY: no arguments; the context is current. Best effort: the error to
            // report is the stream's.
            let _ = unsafe { drv!(cu, cuCtxSynchronize()) };
        }
        first
    }
}

/// A stream used by a [`Scope`]: launches go to it, in order.
///
/// `Copy`; invariant in `'s` so that a lane of an outer scope cannot take arguments
/// borrowed only for an inner one.
#[derive(Clone, Copy)]
pub struct Lane<'s> {
    stream: &'s Stream,
    ctx: &'s Context,
    _s: PhantomData<fn(&'s ()) -> &'s ()>,
}

impl<'s> Lane<'s> {
    /// The stream.
    #[must_use]
    pub fn stream(&self) -> &'s Stream {
        self.stream
    }

    /// Binds a buffer that several launches of this scope use (some writing it) to this
    /// lane, exclusively borrowed until the scope ends.
    ///
    /// # Errors
    /// [`Error::ContextMismatch`] for a buffer of another context.
    pub fn own<T: Element>(&self, buf: impl Into<DeviceViewMut<'s, T>>) -> Result<Owned<'s, T>> {
        let buf = buf.into();
        self.ctx
            .ensure_same(buf.context(), "cudadrv::kernel::Lane::own")?;
        Ok(Owned {
            ptr: buf.as_raw(),
            len: buf.len(),
            stream: Cell::new(self.stream.as_raw()),
            _b: PhantomData,
        })
    }

    /// `cuEventRecord` on this lane + `cuStreamWaitEvent` on `to`: `buf` moves to lane
    /// `to`, whose later work waits for this lane's work so far.
    ///
    /// The event is taken `&mut` so that nothing records it elsewhere between the two
    /// calls (a wait for an event recorded in a capture would make `to` join it).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `buf` is not on this lane;
    /// [`Error::ContextMismatch`] for an event of another context; driver errors.
    #[doc(alias = "cuEventRecord")]
    #[doc(alias = "cuStreamWaitEvent")]
    pub fn hand_over<T: Element>(
        &self,
        buf: &mut Owned<'s, T>,
        to: &Lane<'s>,
        event: &mut Event,
    ) -> Result<()> {
        if buf.stream.get() != self.stream.as_raw() {
            return Err(Error::InvalidArgument(
                "hand_over: the buffer is bound to another lane",
            ));
        }
        event.record(self.stream)?;
        let g = self.ctx.enter()?;
        // SAFETY: live stream and event (borrowed); the event was just recorded on this
        // lane's stream, which is not capturing, so `to` joins no capture.
        unsafe {
            drv!(
                g.cu,
                cuStreamWaitEvent(to.stream.as_raw(), event.as_raw(), 0)
            )?
        };
        buf.stream.set(to.stream.as_raw());
        Ok(())
    }

    /// Launches `kernel` on this lane: `cuLaunchKernel` (or `cuLaunchKernelEx` when `cfg`
    /// has attributes) with `args` converted to the kernel's parameter types.
    ///
    /// Each argument is what its parameter takes: `&DeviceBuffer<T>` or `&Owned<T>` for
    /// a [`DeviceSlice<T>`], `&mut DeviceBuffer<T>` or `&mut Owned<T>` for a
    /// [`DeviceSliceMut<T>`], a value for a scalar. A wrong count, order or type does not
    /// compile; the borrows last until the scope's end (buffers) or, for `Owned`
    /// handles, which the scope already holds, for the call.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a handle made by [`TypedKernel::from_module`]
    /// (its code is not known to be the declaration's) or from a [`KernelModule`](super::KernelModule)
    /// without the kernel's safe-body marker (see [`SafeKernel`]), a configuration naming another
    /// stream, an [`Owned`] bound to another lane, or a programmatic (PDL) attribute for
    /// a kernel not declared `dependent`; [`Error::ContextMismatch`] for a kernel or
    /// buffer of another context; launch errors as [`crate::launch::launch`].
    #[doc(alias = "cuLaunchKernel")]
    #[doc(alias = "cuLaunchKernelEx")]
    #[inline]
    pub fn launch<K, A>(
        &self,
        kernel: &'s TypedKernel<K>,
        cfg: &LaunchConfig<'_>,
        args: A,
    ) -> Result<()>
    where
        K: SafeKernel,
        A: Args<'s, K::Params>,
    {
        let f = kernel.function();
        if !kernel.is_trusted() {
            return Err(Error::InvalidArgument(
                "safe launches need a TypedKernel made from a KernelModule whose device \
                 build marked the kernel as a `safe fn` of this signature (host-only \
                 declarations and `unsafe fn` kernels are refused)",
            ));
        }
        self.ctx
            .ensure_same(f.context(), "cudadrv::kernel::Lane::launch")?;
        let stream = self.stream.as_raw();
        if cfg.has_stream() && cfg.stream_handle() != stream {
            return Err(Error::InvalidArgument(
                "the LaunchConfig names another stream than the lane's",
            ));
        }
        let attrs = cfg.num_attributes();
        if attrs != 0 && !K::WAITS_FOR_DEPENDENCY && cfg.is_programmatic() {
            return Err(Error::InvalidArgument(
                "a programmatic (PDL) launch of a kernel not declared `dependent`: it \
                 could read its predecessor's output before it is written",
            ));
        }
        let params = args.into_params(self, Token(()))?;
        let mut ptrs = params.arg_ptrs();
        let entry = if attrs == 0 {
            DriverLaunch::Plain
        } else {
            DriverLaunch::Ex
        };
        // SAFETY: `K::Params` is the kernel's verified signature (types and the
        // load-time `cuFuncGetParamInfo` check), and `ptrs` points into `params`, alive
        // for the call; every slice in it names a live buffer of this context, borrowed
        // (exclusively where written) until the scope has synchronized this lane's
        // stream, which is not capturing and belongs to `f`'s context (checked above);
        // the kernel is a `SafeKernel` from a trusted module, so it touches memory only
        // through those slices; its module stays loaded (`kernel` is borrowed for `'s`).
        unsafe { launch_config(f, cfg, stream, ptrs.as_mut_ptr(), ptr::null_mut(), entry) }
    }
}

/// A buffer bound to one lane of a scope, exclusively borrowed until the scope ends:
/// launches on its lane read it (`&owned`) or write it (`&mut owned`) in stream order,
/// and [`Lane::hand_over`] moves it to another lane.
pub struct Owned<'s, T: Element> {
    ptr: u64,
    len: usize,
    stream: Cell<CUstream>,
    _b: PhantomData<DeviceViewMut<'s, T>>,
}

impl<T: Element> Owned<'_, T> {
    /// The number of elements.
    #[must_use]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer is empty.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The raw stream of the lane it is bound to.
    #[must_use]
    pub fn lane_stream(&self) -> CUstream {
        self.stream.get()
    }

    fn on_lane(&self, lane: &Lane<'_>) -> Result<()> {
        if self.stream.get() == lane.stream.as_raw() {
            Ok(())
        } else {
            Err(Error::InvalidArgument(
                "an Owned buffer is bound to another lane: hand it over first",
            ))
        }
    }
}

impl<T: Element> core::fmt::Debug for Owned<'_, T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Owned")
            .field("ptr", &format_args!("{:#x}", self.ptr))
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

/// The key to [`Arg`] and [`Args`]: only this module can make one, so no code outside it
/// can implement those traits or call their methods, and a parameter value made from a
/// borrow never reaches a caller's hands (where it could outlive the borrow).
mod sealed {
    /// Made only by `Lane::launch`.
    #[derive(Clone, Copy, Debug)]
    pub struct Token(pub(super) ());
}
use sealed::Token;

/// What a safe launch accepts for a parameter of type `P`, borrowed for the scope `'s`.
///
/// Implemented for: `&'s DeviceBuffer<T>` and `&Owned<'s, T>` as [`DeviceSlice<T>`];
/// `&'s mut DeviceBuffer<T>` and `&mut Owned<'s, T>` as [`DeviceSliceMut<T>`]; and any
/// [`DeviceRepr`] value whose [`PLAIN`](DeviceRepr::PLAIN) is `true` as itself
/// (scalars, vectors, `kernel_struct!` types of plain fields).
///
/// Sealed: the conversion runs only inside [`Lane::launch`], so the slices it makes
/// never outlive the borrows they come from. A slice value itself is not an argument
/// (it carries no borrow); neither is a struct holding one:
///
/// ```compile_fail
/// # use cudadrv::{Context, DeviceBuffer, Stream};
/// # use cudadrv::kernel::{self, DeviceSliceMut, TypedKernel};
/// # cudadrv::kernel! { pub safe fn fill(out: DeviceSliceMut<u32>) {} }
/// fn f(
///     ctx: &Context,
///     k: &TypedKernel<fill>,
///     stream: &Stream,
///     laundered: DeviceSliceMut<u32>,
/// ) -> cudadrv::Result<()> {
///     kernel::scope(ctx, |s| {
///         // error: `DeviceSliceMut` is not a plain value (when the launch is built:
///         // "a slice or handle is not a value argument")
///         s.lane(stream)?.launch(k, &cudadrv::LaunchConfig::new(1, 256), (laundered,))
///     })
/// }
/// # fn main() {
/// #     let _ = f as fn(&Context, &TypedKernel<fill>, &Stream, DeviceSliceMut<u32>) -> _;
/// # }
/// ```
///
/// and the conversion cannot be called from outside:
///
/// ```compile_fail
/// # use cudadrv::{Context, DeviceBuffer, Stream};
/// # use cudadrv::kernel::{self, Arg, DeviceSliceMut};
/// # fn f(ctx: &Context, stream: &Stream) -> cudadrv::Result<()> {
/// let mut buf = DeviceBuffer::<u32>::new(ctx, 256)?;
/// kernel::scope(ctx, |s| {
///     let lane = s.lane(stream)?;
///     let slice: DeviceSliceMut<u32> = Arg::into_param(&mut buf, &lane)?; // error
///     Ok(())
/// })
/// # }
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be passed for a kernel parameter of type `{P}`",
    label = "the kernel declares `{P}` here",
    note = "a DeviceSlice<T> takes &DeviceBuffer<T>, a DeviceView<T> or &Owned<T>; a \
            DeviceSliceMut<T> takes &mut DeviceBuffer<T>, a DeviceViewMut<T> or &mut Owned<T>; \
            other parameters take a value of their type"
)]
pub trait Arg<'s, P> {
    /// The parameter value, after checking the argument against `lane`.
    ///
    /// # Errors
    /// [`Error::ContextMismatch`] or [`Error::InvalidArgument`] as
    /// [`Lane::launch`] documents.
    #[doc(hidden)]
    fn into_param(self, lane: &Lane<'s>, token: Token) -> Result<P>;
}

impl<'s, P: DeviceRepr> Arg<'s, P> for P {
    #[inline(always)]
    fn into_param(self, _lane: &Lane<'s>, _: Token) -> Result<P> {
        const {
            assert!(
                P::PLAIN,
                "a slice or handle is not a value argument of a safe launch: pass the \
                 buffer it should borrow (&DeviceBuffer, &mut DeviceBuffer, an Owned)"
            )
        };
        Ok(self)
    }
}

impl<'s, T: Element> Arg<'s, DeviceSlice<T>> for &'s DeviceBuffer<T> {
    #[inline(always)]
    fn into_param(self, lane: &Lane<'s>, _: Token) -> Result<DeviceSlice<T>> {
        lane.ctx
            .ensure_same(self.context(), "cudadrv::kernel::Lane::launch")?;
        Ok(DeviceSlice {
            ptr: self.as_raw() as *const T,
            len: self.len(),
        })
    }
}

impl<'s, T: Element> Arg<'s, DeviceSliceMut<T>> for &'s mut DeviceBuffer<T> {
    #[inline(always)]
    fn into_param(self, lane: &Lane<'s>, _: Token) -> Result<DeviceSliceMut<T>> {
        lane.ctx
            .ensure_same(self.context(), "cudadrv::kernel::Lane::launch")?;
        // SAFETY: the buffer's memory, exclusively borrowed until the scope has waited
        // for the lane this launch goes to; the value goes straight to the launch.
        Ok(unsafe { DeviceSliceMut::from_raw_parts(self.as_raw() as *mut T, self.len()) })
    }
}

impl<'s, T: Element> Arg<'s, DeviceSlice<T>> for DeviceView<'s, T> {
    #[inline(always)]
    fn into_param(self, lane: &Lane<'s>, _: Token) -> Result<DeviceSlice<T>> {
        lane.ctx
            .ensure_same(self.context(), "cudadrv::kernel::Lane::launch")?;
        Ok(DeviceSlice {
            ptr: self.as_raw() as *const T,
            len: self.len(),
        })
    }
}

impl<'s, T: Element> Arg<'s, DeviceSliceMut<T>> for DeviceViewMut<'s, T> {
    #[inline(always)]
    fn into_param(self, lane: &Lane<'s>, _: Token) -> Result<DeviceSliceMut<T>> {
        lane.ctx
            .ensure_same(self.context(), "cudadrv::kernel::Lane::launch")?;
        // SAFETY: the view's memory, exclusively borrowed until the scope has waited for
        // the lane this launch goes to (the view is consumed, its borrow is `'s`); the
        // value goes straight to the launch.
        Ok(unsafe { DeviceSliceMut::from_raw_parts(self.as_raw() as *mut T, self.len()) })
    }
}

impl<'s, T: Element> Arg<'s, DeviceSlice<T>> for &Owned<'s, T> {
    #[inline(always)]
    fn into_param(self, lane: &Lane<'s>, _: Token) -> Result<DeviceSlice<T>> {
        self.on_lane(lane)?;
        Ok(DeviceSlice {
            ptr: self.ptr as *const T,
            len: self.len,
        })
    }
}

impl<'s, T: Element> Arg<'s, DeviceSliceMut<T>> for &mut Owned<'s, T> {
    #[inline(always)]
    fn into_param(self, lane: &Lane<'s>, _: Token) -> Result<DeviceSliceMut<T>> {
        self.on_lane(lane)?;
        // SAFETY: the buffer is exclusively borrowed by the scope; launches reach it only
        // on its lane, in stream order, and other lanes only after a hand-over event;
        // the value goes straight to the launch.
        Ok(unsafe { DeviceSliceMut::from_raw_parts(self.ptr as *mut T, self.len) })
    }
}

/// A tuple of safe-launch arguments for the parameter tuple `P` (arity 0 to 12), each
/// element an [`Arg`] of the matching parameter. Sealed like [`Arg`].
pub trait Args<'s, P: KernelArgs> {
    /// The parameter values.
    ///
    /// # Errors
    /// The first argument's error.
    #[doc(hidden)]
    fn into_params(self, lane: &Lane<'s>, token: Token) -> Result<P>;
}

impl<'s> Args<'s, ()> for () {
    #[inline(always)]
    fn into_params(self, _lane: &Lane<'s>, _: Token) -> Result<()> {
        Ok(())
    }
}

/// Implements [`Args`] for one arity.
macro_rules! tuple_args {
    ($($P:ident $A:ident $i:tt),+) => {
        impl<'s, $($P: DeviceRepr, $A: Arg<'s, $P>),+> Args<'s, ($($P,)+)> for ($($A,)+) {
            #[inline(always)]
            fn into_params(self, lane: &Lane<'s>, token: Token) -> Result<($($P,)+)> {
                Ok(($(self.$i.into_param(lane, token)?,)+))
            }
        }
    };
}

tuple_args!(P0 A0 0);
tuple_args!(P0 A0 0, P1 A1 1);
tuple_args!(P0 A0 0, P1 A1 1, P2 A2 2);
tuple_args!(P0 A0 0, P1 A1 1, P2 A2 2, P3 A3 3);
tuple_args!(P0 A0 0, P1 A1 1, P2 A2 2, P3 A3 3, P4 A4 4);
tuple_args!(P0 A0 0, P1 A1 1, P2 A2 2, P3 A3 3, P4 A4 4, P5 A5 5);
tuple_args!(P0 A0 0, P1 A1 1, P2 A2 2, P3 A3 3, P4 A4 4, P5 A5 5, P6 A6 6);
tuple_args!(P0 A0 0, P1 A1 1, P2 A2 2, P3 A3 3, P4 A4 4, P5 A5 5, P6 A6 6, P7 A7 7);
tuple_args!(P0 A0 0, P1 A1 1, P2 A2 2, P3 A3 3, P4 A4 4, P5 A5 5, P6 A6 6, P7 A7 7, P8 A8 8);
tuple_args!(
    P0 A0 0, P1 A1 1, P2 A2 2, P3 A3 3, P4 A4 4, P5 A5 5, P6 A6 6, P7 A7 7, P8 A8 8, P9 A9 9
);
tuple_args!(
    P0 A0 0, P1 A1 1, P2 A2 2, P3 A3 3, P4 A4 4, P5 A5 5, P6 A6 6, P7 A7 7, P8 A8 8, P9 A9 9,
    P10 A10 10
);
tuple_args!(
    P0 A0 0, P1 A1 1, P2 A2 2, P3 A3 3, P4 A4 4, P5 A5 5, P6 A6 6, P7 A7 7, P8 A8 8, P9 A9 9,
    P10 A10 10, P11 A11 11
);
