//! Green contexts (driver API section "Green Contexts", Programming Guide 4.6): spatial
//! partitions of a GPU's streaming multiprocessors (SMs), each a context whose kernels
//! run only on its own SMs.
//!
//! The four steps of the driver, one type each:
//!
//! 1. [`SmResource::of_device`] (`cuDeviceGetDevResource`): the device's SMs, with the
//!    partitioning rules ([`SmResource::min_partition_size`],
//!    [`SmResource::coscheduled_alignment`]).
//! 2. A split into disjoint groups ([`SmPartition`]) and the SMs left over, by one of
//!    two calls (next section).
//! 3. [`ResourceDesc::new`] (`cuDevResourceGenerateDesc`): a descriptor of the SMs a
//!    green context gets; from CUDA 13.1 also with a workqueue resource
//!    ([`ResourceDesc::with_workqueue_config`], [`ResourceDesc::with_workqueue`]).
//! 4. [`GreenContext::create`] (`cuGreenCtxCreate`), then [`Context::from_green`]
//!    (`cuCtxFromGreenCtx`) for a [`Context`] that every handle of this crate works in
//!    ([`Stream`], [`DeviceBuffer`](crate::DeviceBuffer), [`Module`](crate::Module), ...)
//!    and that destroys the green context (`cuGreenCtxDestroy`) when its last clone, and
//!    the last handle made in it, is dropped. [`stream`] (`cuGreenCtxStreamCreate`) makes
//!    a stream of the green context explicitly; a stream made by [`Stream::new`] in the
//!    converted context belongs to the green context as well.
//!
//! # The 13.0 and the 13.1 paths
//!
//! | step | CUDA 12.4 - 13.0 drivers | CUDA 13.1 and later |
//! |---|---|---|
//! | split | [`SmResource::split_by_count`] (`cuDevSmResourceSplitByCount`): as many groups of one size as fit | [`SmResource::split`] (`cuDevSmResourceSplit`): one group per [`GroupParams`], sizes may differ, co-scheduled SM count, backfill, locality domain |
//! | workqueues | shared by every context of the device | [`WorkqueueConfig`] (concurrency limit, [`WorkqueueScope`]) or a context's [`Workqueue`] in the descriptor |
//! | a stream's SMs | (the context's: [`SmResource::of_context`]) | [`SmResource::of_stream`] (`cuStreamGetDevResource`), [`WorkqueueConfig::of_stream`] |
//! | execution context | [`Context::record_event`], [`Context::wait_event`], [`Context::id`], [`Context::synchronize`], [`Context::device`], [`stream`] | the same calls (the runtime's `cudaExecutionCtx*` functions are these driver calls) |
//!
//! Both splits stay: the by-count split is what a 13.0 driver (the GPU hosts this crate
//! is tested on) runs; on such a driver the 13.1 calls are [`Error::DriverTooOld`]
//! naming the call, 13.1 and the driver's version, found before any work is done.
//!
//! The guide's example (4.6.4: two green contexts on one device, one with 16 SMs for
//! latency-critical work and one with the rest, a stream in each), with the 13.1 split
//! where the driver has it and the by-count split where it does not:
//!
//! ```no_run
//! # fn main() -> cudadrv::Result<()> {
//! use cudadrv::green::{self, GreenContext, GroupParams, ResourceDesc, SmPartition, SmResource, SplitFlags};
//! use cudadrv::{Context, Device, Error};
//!
//! let device = Device::get(0)?;
//! let _primary = Context::primary(device)?; // initialize the primary context once
//! let sms = SmResource::of_device(device)?;
//! let mut groups = [SmPartition::EMPTY; 2];
//! match sms.split(&[GroupParams::sms(16), GroupParams::sms(0).coscheduled(2).backfill()], &mut groups) {
//!     Ok(_) => {}
//!     // A 12.4 - 13.0 driver: one group of 16, the remainder for the rest.
//!     Err(Error::DriverTooOld { .. }) => {
//!         let split = sms.split_by_count(&mut groups[..1], 16, SplitFlags::empty())?;
//!         groups[1] = split.remaining;
//!     }
//!     Err(e) => return Err(e),
//! }
//! let mut contexts = Vec::new();
//! for group in &groups {
//!     let desc = ResourceDesc::new(core::slice::from_ref(group))?;
//!     let green = GreenContext::create(device, &desc)?;
//!     // SAFETY: each green context is used by this thread only.
//!     let ctx = unsafe { Context::from_green(green)? };
//!     let stream = green::stream(&ctx, 0)?;
//!     contexts.push((ctx, stream));
//! }
//! // Launch latency-critical kernels on contexts[0].1, the rest on contexts[1].1.
//! # Ok(()) }
//! ```
//!
//! # The split rules
//!
//! Without [`SplitFlags::IGNORE_SM_COSCHEDULING`], every group has at least
//! [`SmResource::min_partition_size`] SMs and a multiple of
//! [`SmResource::coscheduled_alignment`] SMs: the driver raises `min_count` to the minimum
//! and rounds it up to the alignment ([`SmResource::partition_size`] computes the result).
//! The driver's header gives, as a guideline, a minimum of 2 SMs (multiple of 2) on
//! compute capability 6.x and 7.x, 4 SMs (multiple of 2) on 8.x, and 8 SMs (multiple of 8)
//! on 9.0 and later; the values the device reports win. A split makes as many groups of
//! that size as fit (at most the slots given) and leaves the rest in the remainder, which
//! has none of the groups' guarantees. [`SmResource::split_by_count`] checks these rules
//! before calling the driver and names the one a request breaks.
//!
//! Further limits the driver states: a split's groups cannot be split again (only the
//! resource of a green context made from one, [`SmResource::of_context`]); a descriptor
//! may combine only groups (and the remainder) of one split; partitions are disjoint but
//! kernels in them are not guaranteed to run concurrently (other resources, such as the
//! `CUDA_DEVICE_MAX_CONNECTIONS` hardware queues, are shared), and a kernel may run on
//! more SMs than its partition (never fewer) under MPS with
//! `CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`, or, on compute capability 9.x, on 2 extra shared
//! SMs once a module using dynamic parallelism is loaded.
//!
//! The 13.1 split ([`SmResource::split`]) checks its own rules up front: each group's SM
//! count is 0 (the driver chooses) or even and from 2 to the input's, a multiple of its
//! co-scheduled SM count unless it backfills; together the groups ask for no more SMs
//! than the input has; every group the driver returns holds SMs.
//!
//! Green contexts need a CUDA 12.4 driver ([`stream`] 12.5, the 13.1 calls 13.1); on an
//! older one every such call is [`Error::DriverTooOld`].
//!
//! # Unsafe policy
//! Raw driver calls with valid out-pointers, as in the rest of the host layer; the union
//! of a `CUdevResource` is read only as the member its type names (SM or workqueue
//! configuration: plain integers, valid for any bits). The one promise the compiler cannot check, that a green context is used by one
//! thread at a time, is the caller's, in the `# Safety` section of
//! [`Context::from_green`].

mod green_context;
mod groups;
mod split;
mod workqueue;

pub use green_context::{GreenContext, ResourceDesc, stream};
pub use groups::{GroupParams, MAX_GROUPS};
pub use split::{SmPartition, SmResource, Split, SplitFlags};
pub use workqueue::{Workqueue, WorkqueueConfig, WorkqueueScope};

use split::empty_resource;

// The module docs name these.
#[cfg(doc)]
use crate::{Context, Stream, error::Error};
