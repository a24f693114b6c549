//! Green contexts and their descriptors (`cuDevResourceGenerateDesc`,
//! `cuGreenCtxCreate`), streams of a green context, and the execution-context operations
//! of the 13.1 guide on any [`Context`] (record and wait an event, synchronize, id,
//! device), all through the driver API.

use core::ptr;

use cudadrv_sys::{
    CUdevResource, CUdevResourceDesc, CUdevResourceType, CUgreenCtx, CUgreenCtxCreate_flags,
    CUstream_flags_enum,
};

use super::{SmPartition, SmResource, empty_resource};
use crate::driver::api;
use crate::driver::context::Context;
use crate::driver::device::Device;
use crate::driver::dropping;
use crate::driver::stream::Stream;
use crate::error::{Error, Result, drv};

/// A resource descriptor (`CUdevResourceDesc`): the SMs a [`GreenContext`] is made with.
/// The driver has no call to free one: it is plain data to this crate.
#[derive(Clone, Copy, Debug)]
pub struct ResourceDesc {
    raw: CUdevResourceDesc,
}

// SAFETY: an opaque, immutable driver object, usable from any thread.
unsafe impl Send for ResourceDesc {}
// SAFETY: as above.
unsafe impl Sync for ResourceDesc {}

/// Most resources one descriptor combines (groups of one split and its remainder).
const MAX_DESC_RESOURCES: usize = 64;

impl ResourceDesc {
    /// `cuDevResourceGenerateDesc` of one or more groups of the same split (and possibly
    /// its remainder).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for no partitions, an empty one, or more than 64;
    /// [`Error::DriverTooOld`] before CUDA 12.4; driver errors
    /// (`CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION` for groups of different splits).
    #[doc(alias = "cuDevResourceGenerateDesc")]
    pub fn new(partitions: &[SmPartition]) -> Result<Self> {
        Self::generate_from(partitions, None)
    }

    /// [`new`](Self::new) with one more (non-SM) resource after the partitions.
    pub(super) fn generate_with(partitions: &[SmPartition], extra: &CUdevResource) -> Result<Self> {
        Self::generate_from(partitions, Some(extra))
    }

    fn generate_from(partitions: &[SmPartition], extra: Option<&CUdevResource>) -> Result<Self> {
        if partitions.is_empty() {
            return Err(Error::InvalidArgument("descriptor: no partitions"));
        }
        if partitions.len() > MAX_DESC_RESOURCES {
            return Err(Error::InvalidArgument(
                "descriptor: more than 64 partitions",
            ));
        }
        if partitions.iter().any(SmPartition::is_empty) {
            return Err(Error::InvalidArgument(
                "descriptor: a partition holds no SMs (an unfilled slot or empty remainder)",
            ));
        }
        // A mutable copy (the C parameter is not const): the partitions, then `extra`.
        let mut copy = [empty_resource(); MAX_DESC_RESOURCES + 1];
        for (slot, p) in copy.iter_mut().zip(partitions) {
            *slot = *p.as_raw();
        }
        let mut n = partitions.len();
        if let Some(extra) = extra {
            copy[n] = *extra;
            n += 1;
        }
        // SAFETY: `copy[..n]` holds `n` valid resources (at most 65).
        unsafe { Self::generate(copy.as_mut_ptr(), n as u32) }
    }

    /// `cuDevResourceGenerateDesc` of a whole resource, unsplit (a green context with
    /// every SM of the device or context).
    ///
    /// # Errors
    /// [`Error::DriverTooOld`] before CUDA 12.4; driver errors.
    #[doc(alias = "cuDevResourceGenerateDesc")]
    pub fn whole(resource: &SmResource) -> Result<Self> {
        let mut copy = *resource.as_raw();
        // SAFETY: one valid SM resource (a copy, the C parameter is not const).
        unsafe { Self::generate(&mut copy, 1) }
    }

    /// # Safety
    /// `resources` points at `n` valid resources.
    unsafe fn generate(resources: *mut CUdevResource, n: u32) -> Result<Self> {
        let cu = api()?;
        let mut raw = ptr::null_mut();
        // SAFETY: the caller's promise; valid out-pointer.
        unsafe { drv!(cu, cuDevResourceGenerateDesc(&mut raw, resources, n))? };
        Ok(Self { raw })
    }

    /// The raw descriptor.
    pub fn as_raw(&self) -> CUdevResourceDesc {
        self.raw
    }
}

/// A green context (`CUgreenCtx`): a context limited to the SMs of a [`ResourceDesc`],
/// destroyed (`cuGreenCtxDestroy`) on drop unless handed to [`Context::from_green`],
/// which then owns it.
///
/// `Send` but not `Sync`: the driver does not synchronize a green context between
/// threads.
#[derive(Debug)]
pub struct GreenContext {
    raw: CUgreenCtx,
    device: Device,
}

// SAFETY: the handle may move between threads; only concurrent use is unsupported, and
// the type is not `Sync`.
unsafe impl Send for GreenContext {}

impl GreenContext {
    /// `cuGreenCtxCreate` with `CU_GREEN_CTX_DEFAULT_STREAM` (which the driver requires):
    /// a green context on `device` with the SMs of `desc`. It retains `device`'s primary
    /// context until destroyed; retaining the primary context first
    /// ([`Context::primary`]) saves initializing it more than once.
    ///
    /// The green context is not made current; [`Context::from_green`] turns it into a
    /// [`Context`] that the handles of this crate use.
    ///
    /// # Errors
    /// [`Error::DriverTooOld`] before CUDA 12.4; driver errors.
    #[doc(alias = "cuGreenCtxCreate")]
    pub fn create(device: Device, desc: &ResourceDesc) -> Result<Self> {
        let cu = api()?;
        let mut raw = ptr::null_mut();
        // SAFETY: valid out-pointer; `desc` is a descriptor from cuDevResourceGenerateDesc.
        unsafe {
            drv!(
                cu,
                cuGreenCtxCreate(
                    &mut raw,
                    desc.raw,
                    device.as_raw(),
                    CUgreenCtxCreate_flags::CU_GREEN_CTX_DEFAULT_STREAM.0
                )
            )?
        };
        Ok(Self { raw, device })
    }

    /// The raw `CUgreenCtx`.
    pub fn as_raw(&self) -> CUgreenCtx {
        self.raw
    }

    /// The device.
    pub fn device(&self) -> Device {
        self.device
    }

    /// `cuGreenCtxGetDevResource`: the green context's SMs.
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "cuGreenCtxGetDevResource")]
    pub fn sm_resource(&self) -> Result<SmResource> {
        let cu = api()?;
        let mut raw = empty_resource();
        // SAFETY: live green context, valid out-pointer.
        unsafe {
            drv!(
                cu,
                cuGreenCtxGetDevResource(
                    self.raw,
                    &mut raw,
                    CUdevResourceType::CU_DEV_RESOURCE_TYPE_SM
                )
            )?
        };
        SmResource::checked(raw)
    }

    /// Gives up ownership: the caller destroys the green context (`cuGreenCtxDestroy`).
    pub fn into_raw(self) -> CUgreenCtx {
        let raw = self.raw;
        core::mem::forget(self);
        raw
    }

    /// Takes ownership of a green context of `device`; dropping the result destroys it.
    ///
    /// # Safety
    /// `raw` must be a live green context of `device` that nothing else destroys.
    pub unsafe fn from_raw(raw: CUgreenCtx, device: Device) -> Self {
        Self { raw, device }
    }
}

impl Drop for GreenContext {
    /// `cuGreenCtxDestroy`; a failure goes to the drop-error sink.
    fn drop(&mut self) {
        // SAFETY: the green context is ours and no Context was made from it (that would
        // have taken it with `into_raw`).
        unsafe { dropping!(cuGreenCtxDestroy(self.raw)) };
    }
}

/// Making a [`Context`] of a green context: every handle of this crate then works in it.
impl Context {
    /// `cuCtxFromGreenCtx`: the context of a green context, which every handle of this
    /// crate works in ([`Stream`], [`DeviceBuffer`](crate::DeviceBuffer),
    /// [`Module`](crate::Module), launches, ...) with the green context's SMs. The result
    /// owns `green`: `cuGreenCtxDestroy` runs when its last clone, and with it the last
    /// handle made in it, is dropped, so no stream or module outlives the green context.
    /// See [the module](crate::green).
    ///
    /// ```no_run
    /// # fn main() -> cudadrv::Result<()> {
    /// use cudadrv::green::{GreenContext, ResourceDesc, SmPartition, SmResource, SplitFlags};
    /// use cudadrv::{Context, Device, DeviceBuffer, Stream};
    /// let dev = Device::get(0)?;
    /// let _primary = Context::primary(dev)?; // retained once, not per green context
    /// let sms = SmResource::of_device(dev)?;
    /// let mut groups = [SmPartition::EMPTY; 1];
    /// let split = sms.split_by_count(&mut groups, 16, SplitFlags::empty())?;
    /// let green = GreenContext::create(dev, &ResourceDesc::new(&groups[..split.count])?)?;
    /// // SAFETY: this example uses the context and its handles on this thread only.
    /// let ctx = unsafe { Context::from_green(green)? };
    /// let stream = Stream::non_blocking(&ctx)?; // runs kernels on the 16 SMs only
    /// let buf = DeviceBuffer::<u32>::zeroed(&ctx, 1024)?;
    /// stream.synchronize()?;
    /// # let _ = buf; Ok(()) }
    /// ```
    ///
    /// # Safety
    /// The driver lets a green context be current on one thread at a time and does not
    /// synchronize calls on it from several threads (the rule `cuGreenCtxCreate`'s
    /// documentation states). The caller must make sure that the result, its clones and the
    /// handles made in it are not used, dropped included, by two threads at the same
    /// time (each call makes the context current for its duration). Moving them to
    /// another thread is fine.
    ///
    /// Why this stays `unsafe` rather than the crate enforcing it: every handle of this
    /// crate is `Send + Sync` and makes its context current per call, so a lock would
    /// have to be taken on every call of every handle (the launch path included) to
    /// serialize them, and it still could not cover the context being current on a
    /// thread outside such a call ([`Context::bind`], or another library making it
    /// current). The promise is the caller's, like the driver's own rule.
    ///
    /// # Errors
    /// [`Error::DriverTooOld`] before CUDA 12.4; driver errors (the green context is
    /// destroyed); without `alloc`, when [`MAX_CONTEXTS`](crate::MAX_CONTEXTS) contexts are alive (the green
    /// context is destroyed).
    #[doc(alias = "cuCtxFromGreenCtx")]
    pub unsafe fn from_green(green: GreenContext) -> Result<Self> {
        let cu = api()?;
        let mut raw = ptr::null_mut();
        // SAFETY: `green` is a live green context; valid out-pointer. On failure `green`
        // is dropped, which destroys it.
        unsafe { drv!(cu, cuCtxFromGreenCtx(&mut raw, green.as_raw()))? };
        let device = green.device();
        Self::adopt_green(raw, device, green.into_raw())
    }
}

/// `cuGreenCtxStreamCreate`: a stream of the green context `ctx` was made from
/// ([`Context::from_green`]), with `priority` (see [`Context::stream_priority_range`]).
/// Always `CU_STREAM_NON_BLOCKING`, as the driver requires. The stream keeps `ctx`, and
/// so the green context, alive.
///
/// [`Stream::new`] and the other stream constructors, given the same `ctx`, make streams
/// of the green context too; this call names the green context explicitly and does not
/// depend on the current context.
///
/// # Errors
/// [`Error::InvalidArgument`] when `ctx` was not made from a green context;
/// [`Error::DriverTooOld`] before CUDA 12.5; driver errors.
#[doc(alias = "cuGreenCtxStreamCreate")]
pub fn stream(ctx: &Context, priority: i32) -> Result<Stream> {
    let green = ctx.green_raw().ok_or(Error::InvalidArgument(
        "cuGreenCtxStreamCreate: the context was not made from a green context",
    ))?;
    let cu = api()?;
    let mut raw = ptr::null_mut();
    // SAFETY: `ctx` keeps the green context alive; valid out-pointer; the required flag.
    unsafe {
        drv!(
            cu,
            cuGreenCtxStreamCreate(
                &mut raw,
                green,
                CUstream_flags_enum::CU_STREAM_NON_BLOCKING.0,
                priority
            )
        )?
    };
    // SAFETY: a stream just made in `ctx`'s green context, ours to destroy.
    Ok(unsafe { Stream::from_raw(raw, ctx) })
}

/// The execution-context operations of the 13.1 guide (4.6.5) on any [`Context`], a
/// green context's or a primary one, through the driver: the runtime's
/// `cudaExecutionCtxRecordEvent`, `...WaitEvent`, `...GetId`, `...GetDevice` and
/// `...Synchronize` are these calls ([`Context::device`], [`Context::synchronize`]),
/// `cudaExecutionCtxStreamCreate` is [`stream`] and `cudaExecutionCtxGetDevResource` is
/// [`SmResource::of_context`].
impl Context {
    /// Records in `event` all the work submitted to this context so far:
    /// `cuGreenCtxRecordEvent` for a context made from a green context (CUDA 12.4),
    /// `cuCtxRecordEvent` otherwise (12.5). The event and the context must belong to
    /// the same device's primary context (a green context's events may come from the
    /// primary context, and the other way round).
    ///
    /// # Errors
    /// [`Error::DriverTooOld`] before 12.4 / 12.5; driver errors
    /// (`CUDA_ERROR_INVALID_HANDLE` for an event of another device,
    /// `CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED` while a stream of the context captures).
    #[doc(alias = "cuCtxRecordEvent")]
    #[doc(alias = "cuGreenCtxRecordEvent")]
    #[doc(alias = "cudaExecutionCtxRecordEvent")]
    pub fn record_event(&self, event: &crate::Event) -> Result<()> {
        let cu = api()?;
        // SAFETY: `self` and `event` keep both handles alive for the call.
        unsafe {
            match self.green_raw() {
                Some(green) => drv!(cu, cuGreenCtxRecordEvent(green, event.as_raw())),
                None => drv!(cu, cuCtxRecordEvent(self.as_raw(), event.as_raw())),
            }
        }
    }

    /// Makes all future work submitted to this context wait for `event`:
    /// `cuGreenCtxWaitEvent` for a context made from a green context (CUDA 12.4),
    /// `cuCtxWaitEvent` otherwise (12.5).
    ///
    /// # Errors
    /// As [`record_event`](Self::record_event).
    #[doc(alias = "cuCtxWaitEvent")]
    #[doc(alias = "cuGreenCtxWaitEvent")]
    #[doc(alias = "cudaExecutionCtxWaitEvent")]
    pub fn wait_event(&self, event: &crate::Event) -> Result<()> {
        let cu = api()?;
        // SAFETY: `self` and `event` keep both handles alive for the call.
        unsafe {
            match self.green_raw() {
                Some(green) => drv!(cu, cuGreenCtxWaitEvent(green, event.as_raw())),
                None => drv!(cu, cuCtxWaitEvent(self.as_raw(), event.as_raw())),
            }
        }
    }

    /// The context's unique id: `cuGreenCtxGetId` for a context made from a green
    /// context (CUDA 12.9), `cuCtxGetId` otherwise (12.0).
    ///
    /// # Errors
    /// [`Error::DriverTooOld`] before 12.9 for a green context; driver errors.
    #[doc(alias = "cuCtxGetId")]
    #[doc(alias = "cuGreenCtxGetId")]
    #[doc(alias = "cudaExecutionCtxGetId")]
    pub fn id(&self) -> Result<u64> {
        let cu = api()?;
        let mut id = 0;
        // SAFETY: `self` keeps the handle alive; valid out-pointer.
        unsafe {
            match self.green_raw() {
                Some(green) => drv!(cu, cuGreenCtxGetId(green, &mut id))?,
                None => drv!(cu, cuCtxGetId(self.as_raw(), &mut id))?,
            }
        };
        Ok(id)
    }
}
