//! NCCL collectives over this crate's buffers and streams (feature `nccl`, Linux).
//!
//! NCCL is loaded at run time ([`cudadrv_sys::nccl()`]: `$CUDA_SYS_LIBNCCL`,
//! `libnccl.so.2` on the loader path, or the pip wheel PyTorch installs), never linked: a
//! program built with the feature starts where NCCL is absent and gets an error naming
//! the paths tried. NCCL older than [`MIN_VERSION`] is refused with its version.
//!
//! - [`Comm`]: an owned communicator of one rank. [`Comm::init_all`] makes one per GPU for
//!   a process that drives several; [`Comm::init_rank`] joins rank `r` of `n` with a
//!   [`UniqueId`] the caller hands over (bytes or hex: a pipe, a file, an environment
//!   variable), one rank per process or per thread; [`Comm::split`] and
//!   [`Comm::split_all`] split. Every communicator is made non-blocking, so that
//!   nothing NCCL does can hang the calling thread for longer than its
//!   [`Config::timeout`]: initialisation, [`Comm::synchronize`] (which also watches
//!   NCCL's asynchronous error) and the drop all give up after it and abort the
//!   communicator, which ends its kernels.
//! - Collectives and point-to-point calls ([`Comm::all_reduce`], [`Comm::broadcast`],
//!   [`Comm::reduce`], [`Comm::all_gather`], [`Comm::reduce_scatter`], [`Comm::send`],
//!   [`Comm::recv`], and [`group`] for grouped calls) take device buffers or views of an
//!   element type NCCL knows ([`NcclType`], sealed), check every length before NCCL is
//!   called, and queue on a [`Stream`](crate::Stream) or record into a
//!   [`Capturing`](crate::graph::Capturing) stream ([`Target`]).
//!
//! # Soundness
//! - The buffers and the stream must belong to the communicator's context (the device's
//!   primary context, which NCCL's runtime uses): freeing a buffer (`cuMemFree`) then
//!   waits for the collective, as for every asynchronous call of the crate. Memory whose
//!   free does not wait for its context's work is refused, as elsewhere
//!   ([`Release`](crate::memory::Release)).
//! - A captured call borrows the communicator and the buffers for the graph's lifetime.
//! - Ranks of one communicator that live in this process check each other: each
//!   operation is compared with the same operation (by position in each rank's
//!   sequence) of the other in-process ranks, and refused with
//!   [`Error::NcclMismatch`] before NCCL is called when its kind, count, element type,
//!   reduction or root differ. In one process NCCL reads and writes peers' buffers
//!   directly, with offsets from each rank's own count; ranks in other processes are
//!   outside what this process can check (as for memory shared with another process,
//!   [`memory::ipc`](crate::memory::ipc)), and NCCL moves their data through its own
//!   buffers.
//! - Forgetting a communicator leaks it: its kernels keep running until they finish,
//!   and the buffers they use cannot be freed before (the free waits).
//! - A communicator whose calls were captured or recorded is aborted only through
//!   `&mut` ([`Comm::abort`]), which no graph's borrow allows, and its drop waits for
//!   its context's work first (a forgotten executable graph may have a launch pending).
//!
//! ```no_run
//! use cudadrv::nccl::{self, Comm, Config, ReduceOp};
//! use cudadrv::{Context, Device, DeviceBuffer, Stream};
//! # fn main() -> cudadrv::Result<()> {
//! // One process, every GPU: one communicator, stream and buffer each.
//! let ctxs = (0..Device::count()?)
//!     .map(|d| Context::primary(Device::get(d)?))
//!     .collect::<cudadrv::Result<Vec<_>>>()?;
//! let comms = Comm::init_all(&ctxs, &Config::default())?;
//! let streams = ctxs.iter().map(Stream::non_blocking).collect::<cudadrv::Result<Vec<_>>>()?;
//! let mut grads = ctxs
//!     .iter()
//!     .map(|c| DeviceBuffer::from_slice(c, &[1.0f32; 1024]))
//!     .collect::<cudadrv::Result<Vec<_>>>()?;
//! // One thread drives every rank: their calls go in one group.
//! nccl::group(|g| {
//!     for (r, grad) in grads.iter_mut().enumerate() {
//!         g.all_reduce_in_place(&comms[r], grad, ReduceOp::Sum, &streams[r])?;
//!     }
//!     Ok(())
//! })?;
//! for (c, s) in comms.iter().zip(&streams) {
//!     c.synchronize(s)?; // bounded by the timeout; aborts on a failed peer
//! }
//! # Ok(()) }
//! ```
//!
//! The borrows, checked by the compiler. A captured call borrows its buffers (and the
//! communicator) for the graph's life:
//!
//! ```compile_fail,E0505
//! # fn f(ctx: &cudadrv::Context, comm: &cudadrv::nccl::Comm) -> cudadrv::Result<()> {
//! use cudadrv::{DeviceBuffer, Stream, graph::CaptureMode, nccl::ReduceOp};
//! let mut stream = Stream::non_blocking(ctx)?;
//! let buf = DeviceBuffer::<f32>::zeroed(ctx, 64)?;
//! let cap = stream.begin_capture(CaptureMode::ThreadLocal)?;
//! comm.all_reduce_in_place(&buf, ReduceOp::Sum, &*cap)?;
//! let graph = cap.end()?;
//! drop(buf); // error: the graph borrows `buf`
//! let exec = graph.instantiate(Default::default())?;
//! # drop(exec); Ok(()) }
//! ```
//!
//! so it cannot be aborted (which frees what the graph's kernels use) while the graph
//! lives:
//!
//! ```compile_fail,E0502
//! # fn f(ctx: &cudadrv::Context, mut comm: cudadrv::nccl::Comm) -> cudadrv::Result<()> {
//! use cudadrv::{DeviceBuffer, Stream, graph::CaptureMode, nccl::ReduceOp};
//! let mut stream = Stream::non_blocking(ctx)?;
//! let buf = DeviceBuffer::<f32>::zeroed(ctx, 64)?;
//! let cap = stream.begin_capture(CaptureMode::ThreadLocal)?;
//! comm.all_reduce_in_place(&buf, ReduceOp::Sum, &*cap)?;
//! let graph = cap.end()?;
//! comm.abort()?; // error: the graph borrows `comm`
//! # drop(graph); Ok(()) }
//! ```
//!
//! A group's calls run at its end, so what they name outlives the whole group:
//!
//! ```compile_fail,E0597
//! # fn f(ctx: &cudadrv::Context, comm: &cudadrv::nccl::Comm, s: &cudadrv::Stream) -> cudadrv::Result<()> {
//! use cudadrv::{DeviceBuffer, nccl::{self, ReduceOp}};
//! nccl::group(|g| {
//!     let mut local = DeviceBuffer::<f32>::zeroed(ctx, 64)?;
//!     g.all_reduce_in_place(comm, &mut local, ReduceOp::Sum, s) // error: `local` dies first
//! })
//! # }
//! ```
//!
//! A call queued on a stream writes its output through an exclusive borrow:
//!
//! ```compile_fail,E0277
//! # fn f(ctx: &cudadrv::Context, comm: &cudadrv::nccl::Comm, s: &cudadrv::Stream) -> cudadrv::Result<()> {
//! use cudadrv::{DeviceBuffer, nccl::ReduceOp};
//! let a = DeviceBuffer::<f32>::zeroed(ctx, 64)?;
//! let b = DeviceBuffer::<f32>::zeroed(ctx, 64)?;
//! comm.all_reduce(&a, &b, ReduceOp::Sum, s)?; // error: `&b` is not a DeviceViewMut
//! # Ok(()) }
//! ```

mod agree;
mod comm;
mod ops;

use core::fmt;
use std::string::String;
use std::sync::OnceLock;

use cudadrv_sys::nccl::{
    NCCL_UNIQUE_ID_BYTES, NcclApi, ncclDataType_t, ncclRedOp_t, ncclResult_t, ncclUniqueId,
};

use crate::error::{Error, Result};

pub use comm::{Comm, Config};
#[cfg(feature = "graph")]
pub(crate) use ops::launch_recorded;
pub use ops::{Group, Target, group};

/// The oldest NCCL this module uses (2.18.0: `ncclCommSplit`; non-blocking
/// communicators and `ncclCommFinalize` are 2.14), as NCCL's version code.
pub const MIN_VERSION: u32 = 21800;

/// `ncclInProgress`.
pub(crate) const IN_PROGRESS: ncclResult_t = ncclResult_t::ncclInProgress;

/// The process-wide NCCL table, its version checked once.
pub(crate) fn api() -> Result<&'static NcclApi> {
    static VERSION: OnceLock<core::result::Result<u32, Error>> = OnceLock::new();
    let api = cudadrv_sys::nccl().map_err(Error::Load)?;
    let found = VERSION.get_or_init(|| library_version(api)).clone()?;
    if found < MIN_VERSION {
        return Err(Error::NcclTooOld {
            found,
            needs: MIN_VERSION,
        });
    }
    Ok(api)
}

/// `ncclGetVersion` of `api`, as a code of the 2.9+ form (`major * 10000 + minor * 100 +
/// patch`; older releases report `major * 1000 + minor * 100 + patch`).
fn library_version(api: &NcclApi) -> Result<u32> {
    let mut code = 0;
    // SAFETY: valid out-pointer.
    check(
        unsafe { api.ncclGetVersion()?(&mut code) },
        "ncclGetVersion",
    )?;
    let code = u32::try_from(code).unwrap_or(0);
    Ok(if code < 10000 {
        code / 1000 * 10000 + code % 1000 / 100 * 100 + code % 100
    } else {
        code
    })
}

/// The loaded NCCL's version code (`22809` is 2.28.9).
///
/// # Errors
/// [`Error::Load`] when NCCL cannot be loaded (the message names the paths tried);
/// [`Error::NcclTooOld`] for a library older than [`MIN_VERSION`].
pub fn version() -> Result<u32> {
    let api = cudadrv_sys::nccl().map_err(Error::Load)?;
    let code = library_version(api)?;
    if code < MIN_VERSION {
        return Err(Error::NcclTooOld {
            found: code,
            needs: MIN_VERSION,
        });
    }
    Ok(code)
}

/// `Ok` for `ncclSuccess`, else [`Error::Nccl`].
pub(crate) fn check(rc: ncclResult_t, call: &'static str) -> Result<()> {
    if rc == ncclResult_t::ncclSuccess {
        Ok(())
    } else {
        Err(Error::Nccl { call, code: rc.0 })
    }
}

/// `ncclUniqueId`: what every rank of a new communicator is given (128 bytes, made once
/// by [`UniqueId::new`] and handed to the other ranks by any means).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct UniqueId(pub(crate) [u8; ID_BYTES]);

/// `NCCL_UNIQUE_ID_BYTES`.
pub const ID_BYTES: usize = NCCL_UNIQUE_ID_BYTES as usize;

impl UniqueId {
    /// `ncclGetUniqueId`: a new id (NCCL also opens the bootstrap listener the ranks
    /// connect to, in this process).
    ///
    /// # Errors
    /// Loading NCCL ([`version`]); NCCL's errors.
    #[doc(alias = "ncclGetUniqueId")]
    pub fn new() -> Result<Self> {
        let api = api()?;
        let mut raw = ncclUniqueId::default();
        // SAFETY: valid out-pointer.
        check(
            unsafe { api.ncclGetUniqueId()?(&mut raw) },
            "ncclGetUniqueId",
        )?;
        // `c_char` is `i8` or `u8` by target.
        #[allow(clippy::unnecessary_cast)]
        Ok(Self(raw.internal.map(|c| c as u8)))
    }

    /// The id's bytes.
    pub fn as_bytes(&self) -> &[u8; ID_BYTES] {
        &self.0
    }

    /// An id from its bytes.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] unless `bytes` holds exactly [`ID_BYTES`] bytes.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let bytes: [u8; ID_BYTES] = bytes.try_into().map_err(|_| {
            Error::InvalidArgument("an NCCL unique id is NCCL_UNIQUE_ID_BYTES (128) bytes")
        })?;
        Ok(Self(bytes))
    }

    /// The id as 256 lowercase hex digits (for an environment variable or a command
    /// line).
    pub fn to_hex(&self) -> String {
        use fmt::Write as _;
        let mut s = String::with_capacity(2 * ID_BYTES);
        for b in self.0 {
            let _ = write!(s, "{b:02x}");
        }
        s
    }

    /// An id from [`to_hex`](Self::to_hex)'s text (either case; surrounding whitespace
    /// ignored).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] unless the text is 256 hex digits.
    pub fn from_hex(text: &str) -> Result<Self> {
        const BAD: Error =
            Error::InvalidArgument("an NCCL unique id in hex is 256 hex digits (128 bytes)");
        let text = text.trim().as_bytes();
        if text.len() != 2 * ID_BYTES {
            return Err(BAD);
        }
        let mut out = [0u8; ID_BYTES];
        for (o, pair) in out.iter_mut().zip(text.chunks_exact(2)) {
            let s = core::str::from_utf8(pair).map_err(|_| BAD)?;
            *o = u8::from_str_radix(s, 16).map_err(|_| BAD)?;
        }
        Ok(Self(out))
    }

    pub(crate) fn raw(&self) -> ncclUniqueId {
        ncclUniqueId {
            internal: self.0.map(|b| b as core::ffi::c_char),
        }
    }
}

impl fmt::Debug for UniqueId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The id holds the bootstrap address; the start is enough to tell two apart.
        write!(f, "UniqueId({}…)", &self.to_hex()[..16])
    }
}

mod sealed {
    pub trait Sealed {}
}

/// An element type NCCL reduces and moves (`ncclDataType_t`). Sealed: the crate maps
/// each type to NCCL's own, whose size NCCL computes the bytes it touches from.
pub trait NcclType: crate::memory::Pod + sealed::Sealed {
    /// The type's `ncclDataType_t`.
    const DATA_TYPE: ncclDataType_t;
}

macro_rules! nccl_types {
    ($($t:ty => $nccl:ident),* $(,)?) => {$(
        impl sealed::Sealed for $t {}
        impl NcclType for $t {
            const DATA_TYPE: ncclDataType_t = ncclDataType_t::$nccl;
        }
    )*};
}
nccl_types!(
    i8 => ncclInt8,
    u8 => ncclUint8,
    i32 => ncclInt32,
    u32 => ncclUint32,
    i64 => ncclInt64,
    u64 => ncclUint64,
    f32 => ncclFloat32,
    f64 => ncclFloat64,
    crate::args::Bf16 => ncclBfloat16,
);

/// A reduction (`ncclRedOp_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// `ncclSum`.
    Sum,
    /// `ncclProd`.
    Prod,
    /// `ncclMax`.
    Max,
    /// `ncclMin`.
    Min,
    /// `ncclAvg`: the sum divided by the number of ranks (integer types: rounded toward
    /// zero).
    Avg,
}

impl ReduceOp {
    pub(crate) fn raw(self) -> ncclRedOp_t {
        match self {
            Self::Sum => ncclRedOp_t::ncclSum,
            Self::Prod => ncclRedOp_t::ncclProd,
            Self::Max => ncclRedOp_t::ncclMax,
            Self::Min => ncclRedOp_t::ncclMin,
            Self::Avg => ncclRedOp_t::ncclAvg,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(clippy::unnecessary_cast)] // `c_char` is `i8` or `u8` by target
    fn unique_id_hex_round_trips() {
        let mut bytes = [0u8; ID_BYTES];
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = (i * 37 + 11) as u8;
        }
        let id = UniqueId(bytes);
        let hex = id.to_hex();
        assert_eq!(hex.len(), 256);
        assert_eq!(UniqueId::from_hex(&hex).unwrap(), id);
        assert_eq!(
            UniqueId::from_hex(&std::format!(" {}\n", hex.to_uppercase())).unwrap(),
            id
        );
        assert!(UniqueId::from_hex(&hex[1..]).is_err());
        assert!(UniqueId::from_hex(&hex.replace('0', "g")).is_err());
        assert_eq!(UniqueId::from_bytes(id.as_bytes()).unwrap(), id);
        assert!(UniqueId::from_bytes(&bytes[..127]).is_err());
        assert_eq!(
            UniqueId::from_bytes(&id.raw().internal.map(|c| c as u8)).unwrap(),
            id
        );
    }

    #[test]
    fn data_types_match_nccl_h() {
        assert_eq!(<f32 as NcclType>::DATA_TYPE.0, 7);
        assert_eq!(<crate::args::Bf16 as NcclType>::DATA_TYPE.0, 9);
        assert_eq!(<u64 as NcclType>::DATA_TYPE.0, 5);
        assert_eq!(ReduceOp::Avg.raw().0, 4);
    }
}
