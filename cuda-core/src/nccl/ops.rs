//! Collectives, point-to-point calls and groups ([`group`]), on a stream or captured
//! into a graph ([`Target`]).

use core::cell::{Cell, RefCell};
use core::marker::PhantomData;
use std::vec::Vec;

use core::ffi::c_void;

use cudadrv_sys::nccl::{NcclApi, ncclComm_t, ncclDataType_t, ncclRedOp_t, ncclResult_t};
use cudadrv_sys::{CUdeviceptr, CUstream};

use super::agree::{COLLECTIVE, ChannelKey, Sig};
use super::comm::{Comm, State};
use super::{IN_PROGRESS, NcclType, ReduceOp, api, check};
use crate::driver::context::Context;
use crate::driver::stream::Stream;
use crate::error::{Error, Result};
use crate::memory::{DeviceView, DeviceViewMut, Release, same_len};

/// The kinds of operation (the agreement record numbers them; send and receive are
/// one kind there).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Kind {
    AllReduce = 1,
    Broadcast,
    Reduce,
    AllGather,
    ReduceScatter,
    Send,
    Recv,
    Split,
}

impl Kind {
    /// The kind as the agreement record compares it.
    fn sig(self) -> u8 {
        match self {
            Self::Recv => Self::Send as u8,
            k => k as u8,
        }
    }

    #[cfg(feature = "graph")]
    fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            1 => Self::AllReduce,
            2 => Self::Broadcast,
            3 => Self::Reduce,
            4 => Self::AllGather,
            5 => Self::ReduceScatter,
            6 => Self::Send,
            7 => Self::Recv,
            _ => return None,
        })
    }
}

/// One NCCL call as plain data: what `Comm::issue` calls at once, and what a replay
/// region records and calls when it captures (`launch_recorded`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Call {
    pub(crate) kind: Kind,
    pub(crate) dtype: ncclDataType_t,
    pub(crate) op: ncclRedOp_t,
    /// The root, or the peer of a send or receive.
    pub(crate) root: i32,
    /// The count NCCL is given (per rank for gathers and scatters).
    pub(crate) count: usize,
    pub(crate) send: CUdeviceptr,
    pub(crate) recv: CUdeviceptr,
}

impl Call {
    fn name(&self) -> &'static str {
        match self.kind {
            Kind::AllReduce => "ncclAllReduce",
            Kind::Broadcast => "ncclBroadcast",
            Kind::Reduce => "ncclReduce",
            Kind::AllGather => "ncclAllGather",
            Kind::ReduceScatter => "ncclReduceScatter",
            Kind::Send => "ncclSend",
            Kind::Recv => "ncclRecv",
            Kind::Split => "ncclCommSplit",
        }
    }

    /// Calls NCCL.
    ///
    /// # Safety
    /// `comm` is a live communicator; `send` and `recv` hold what the kind reads and
    /// writes for `count` elements of `dtype` on a communicator of its size (checked by
    /// the public calls), in `comm`'s context, and outlive the work; `stream` is a live
    /// stream of that context, which is current.
    unsafe fn launch(
        &self,
        api: &NcclApi,
        comm: ncclComm_t,
        stream: CUstream,
    ) -> Result<ncclResult_t> {
        // Device addresses: NCCL's to dereference, never Rust's.
        let s = core::ptr::without_provenance::<c_void>(self.send as usize);
        let r = core::ptr::without_provenance_mut::<c_void>(self.recv as usize);
        let (n, t, op, root) = (self.count, self.dtype, self.op, self.root);
        // SAFETY: the caller's promise, for the function of this kind.
        Ok(unsafe {
            match self.kind {
                Kind::AllReduce => api.ncclAllReduce()?(s, r, n, t, op, comm, stream),
                Kind::Broadcast => api.ncclBroadcast()?(s, r, n, t, root, comm, stream),
                Kind::Reduce => api.ncclReduce()?(s, r, n, t, op, root, comm, stream),
                Kind::AllGather => api.ncclAllGather()?(s, r, n, t, comm, stream),
                Kind::ReduceScatter => api.ncclReduceScatter()?(s, r, n, t, op, comm, stream),
                Kind::Send => api.ncclSend()?(s, n, t, root, comm, stream),
                Kind::Recv => api.ncclRecv()?(r, n, t, root, comm, stream),
                Kind::Split => {
                    return Err(Error::InvalidArgument("a split is not a recorded call"));
                }
            }
        })
    }

    fn sig(&self) -> Sig {
        let rooted = matches!(self.kind, Kind::Broadcast | Kind::Reduce);
        let reduces = matches!(
            self.kind,
            Kind::AllReduce | Kind::Reduce | Kind::ReduceScatter
        );
        Sig {
            kind: self.kind.sig(),
            dtype: self.dtype.0,
            op: if reduces { self.op.0 } else { 0 },
            root: if rooted { self.root } else { -1 },
            count: self.count,
        }
    }

    /// The call's parts as a replay region keys them: the kind, element type,
    /// reduction and root or peer; the count; the send and receive addresses.
    #[cfg(feature = "graph")]
    fn parts(&self) -> ([u32; 4], usize, [u64; 2]) {
        (
            [self.kind as u32, self.dtype.0, self.op.0, self.root as u32],
            self.count,
            [self.send, self.recv],
        )
    }

    /// The call a replay region recorded as [`parts`](Self::parts).
    #[cfg(feature = "graph")]
    fn from_parts(shape: [u32; 4], count: usize, addrs: [u64; 2]) -> Option<Self> {
        Some(Self {
            kind: Kind::from_u8(u8::try_from(shape[0]).ok()?)?,
            dtype: ncclDataType_t(shape[1]),
            op: ncclRedOp_t(shape[2]),
            root: shape[3] as i32,
            count,
            send: addrs[0],
            recv: addrs[1],
        })
    }
}

mod sealed {
    /// Where a call goes.
    pub enum Dest<'x> {
        /// Queued on a stream that is not capturing.
        Stream(&'x crate::Stream),
        /// Recorded by a stream capture.
        Capture(&'x crate::Stream),
        /// Recorded by a replay region (called when it captures).
        #[cfg(feature = "graph")]
        Record(&'x mut dyn Record),
    }

    /// What a call writes: its address, length, context and release rule.
    pub trait Out<'a, T> {
        fn parts(
            &self,
        ) -> (
            cudadrv_sys::CUdeviceptr,
            usize,
            &crate::Context,
            crate::memory::Release,
        );
    }

    impl<'a, T: Copy> Out<'a, T> for crate::memory::DeviceViewMut<'a, T> {
        fn parts(
            &self,
        ) -> (
            cudadrv_sys::CUdeviceptr,
            usize,
            &crate::Context,
            crate::memory::Release,
        ) {
            (self.as_raw(), self.len(), self.context(), self.release())
        }
    }

    impl<'a, T: Copy> Out<'a, T> for crate::memory::DeviceView<'a, T> {
        fn parts(
            &self,
        ) -> (
            cudadrv_sys::CUdeviceptr,
            usize,
            &crate::Context,
            crate::memory::Release,
        ) {
            (self.as_raw(), self.len(), self.context(), self.release())
        }
    }

    /// Where a call's work goes (sealed).
    pub trait Target {
        fn dest(&mut self) -> Dest<'_>;
    }

    /// A replay region's recorder, as the calls see it.
    #[cfg(feature = "graph")]
    pub trait Record {
        fn context(&self) -> &crate::Context;
        /// Records a call: the communicator, the kind, element type, reduction and root
        /// or peer, the count, the send and receive addresses.
        fn record(
            &mut self,
            comm: cudadrv_sys::nccl::ncclComm_t,
            shape: [u32; 4],
            count: usize,
            addrs: [u64; 2],
        );
    }
}

/// Where an NCCL call's work goes (sealed):
/// - `&stream`: queued once on a [`Stream`] that is not capturing;
/// - `&capturing` (feature `graph`): recorded into a stream capture
///   ([`Capturing`](crate::graph::Capturing)), whose graph then borrows the
///   communicator and the buffers for its lifetime `'a`;
/// - `&mut recorder` (feature `graph`): recorded by a replay region
///   ([`Recorder`](crate::graph::Recorder)), which borrows them for `'a` and makes the
///   call when it captures: an execution with the same calls on the same buffers and
///   communicator replays the cached graph, another is captured anew. The region's
///   capture makes the call at once, so it serves one rank per thread or process (a
///   thread driving several ranks issues their calls in a [`group`] instead).
///
/// A communicator whose calls were captured or recorded is no longer aborted by this
/// module on its own (a graph may still name its resources): its timeouts return
/// [`Error::Timeout`] and leave it as it is; [`Comm::abort`] takes it by `&mut`, which no
/// graph's borrow allows.
pub trait Target<'a>: sealed::Target {
    /// How a call takes the memory it writes: exclusively on a stream
    /// ([`DeviceViewMut`], as the crate's other asynchronous writes), shared in a graph
    /// ([`DeviceView`], as [`Capturing::copy`](crate::graph::Capturing::copy) takes its
    /// destination), so that later nodes may read it and later executions of a region
    /// may record into it again.
    type Out<T: Copy + 'a>: sealed::Out<'a, T>;
}

impl sealed::Target for &Stream {
    fn dest(&mut self) -> sealed::Dest<'_> {
        sealed::Dest::Stream(self)
    }
}
impl<'a> Target<'a> for &Stream {
    type Out<T: Copy + 'a> = DeviceViewMut<'a, T>;
}

#[cfg(feature = "graph")]
impl sealed::Target for &crate::graph::Capturing<'_, '_> {
    fn dest(&mut self) -> sealed::Dest<'_> {
        sealed::Dest::Capture(crate::graph::Capturing::stream(self))
    }
}
#[cfg(feature = "graph")]
impl<'a> Target<'a> for &crate::graph::Capturing<'_, 'a> {
    type Out<T: Copy + 'a> = DeviceView<'a, T>;
}

#[cfg(feature = "graph")]
impl sealed::Target for &mut crate::graph::Recorder<'_, '_> {
    fn dest(&mut self) -> sealed::Dest<'_> {
        sealed::Dest::Record(&mut **self)
    }
}
#[cfg(feature = "graph")]
impl<'a> Target<'a> for &mut crate::graph::Recorder<'_, 'a> {
    type Out<T: Copy + 'a> = DeviceView<'a, T>;
}

#[cfg(feature = "graph")]
impl sealed::Record for crate::graph::Recorder<'_, '_> {
    fn context(&self) -> &Context {
        self.region_context()
    }
    fn record(&mut self, comm: ncclComm_t, shape: [u32; 4], count: usize, addrs: [u64; 2]) {
        self.record_nccl(comm.expose_provenance(), shape, count, addrs);
    }
}

/// How long a region's capture waits for a recorded call NCCL reports in progress.
#[cfg(feature = "graph")]
const RECORDED_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);

/// Makes the call a replay region recorded, on the stream it captures (of the
/// communicator's context, the region's). A call NCCL reports in progress is waited
/// for (up to 300 s).
///
/// # Safety
/// `comm` and the addresses are what `Comm::issue` recorded after its checks, and the
/// region borrows the communicator and the buffers for its lifetime, so they are alive;
/// the communicator is not aborted (a recorded one is aborted only through `&mut`).
#[cfg(feature = "graph")]
pub(crate) unsafe fn launch_recorded(
    comm: usize,
    shape: [u32; 4],
    count: usize,
    addrs: [u64; 2],
    stream: &Stream,
) -> Result<()> {
    let call = Call::from_parts(shape, count, addrs).ok_or(Error::InvalidArgument(
        "Region: a recorded NCCL call is malformed",
    ))?;
    let api = api()?;
    let comm = core::ptr::with_exposed_provenance_mut(comm);
    let g = stream.context().enter()?;
    // SAFETY: the caller's promise; the stream's context is current.
    let rc = unsafe { call.launch(api, comm, stream.as_raw()) }?;
    drop(g);
    if rc != IN_PROGRESS {
        return check(rc, call.name());
    }
    let start = std::time::Instant::now();
    loop {
        let mut state = ncclResult_t::ncclSuccess;
        // SAFETY: a live communicator (above); valid out-pointer.
        check(
            unsafe { api.ncclCommGetAsyncError()?(comm, &mut state) },
            "ncclCommGetAsyncError",
        )?;
        if state != IN_PROGRESS {
            return check(state, call.name());
        }
        if start.elapsed() > RECORDED_TIMEOUT {
            return Err(Error::Timeout {
                call: call.name(),
                after_ms: RECORDED_TIMEOUT.as_millis() as u64,
            });
        }
        std::thread::yield_now();
    }
}

std::thread_local! {
    /// How deep this thread is in [`group`] calls.
    static GROUP_DEPTH: Cell<u32> = const { Cell::new(0) };
}

/// One device memory operand: its context and what its release waits for.
struct Mem<'c> {
    ctx: &'c Context,
    release: Release,
}

impl<'c, T: Copy> From<&'c DeviceView<'_, T>> for Mem<'c> {
    fn from(v: &'c DeviceView<'_, T>) -> Self {
        Self {
            ctx: v.context(),
            release: v.release(),
        }
    }
}

impl<'c, T: Copy> From<&'c DeviceViewMut<'_, T>> for Mem<'c> {
    fn from(v: &'c DeviceViewMut<'_, T>) -> Self {
        Self {
            ctx: v.context(),
            release: v.release(),
        }
    }
}

/// The communicators a group issued calls on: NCCL may still be launching their work
/// when `ncclGroupEnd` returns (`ncclInProgress`, non-blocking communicators), so each
/// is settled before the group returns.
type Pending<'env> = RefCell<Vec<&'env Comm>>;

impl Comm {
    /// The one path of every call: the communicator is live; the memory and the target
    /// belong to its context, and the memory's release is ordered after the work
    /// (queued: its stream's or context's work; captured or recorded: its context's);
    /// the in-process ranks agree; then NCCL is called with the target's stream and the
    /// context current (or the call is recorded). Outside a group a call NCCL reports in
    /// progress is waited for (bounded by the timeout); inside one, `pending` gets the
    /// communicator.
    fn issue<'env>(
        &'env self,
        channel: ChannelKey,
        mem: &[Option<Mem<'_>>],
        call: Call,
        on: &mut dyn sealed::Target,
        pending: Option<&Pending<'env>>,
    ) -> Result<()> {
        let name = call.name();
        self.ensure_live(name)?;
        let in_group = GROUP_DEPTH.with(Cell::get) > 0;
        if in_group && pending.is_none() {
            return Err(Error::InvalidArgument(
                "inside nccl::group, NCCL defers the work to the group's end: issue it \
                 through the Group, which borrows the buffers until then",
            ));
        }
        let api = api()?;
        let (stream, captured) = match on.dest() {
            sealed::Dest::Stream(s) => (s, false),
            sealed::Dest::Capture(s) => (s, true),
            #[cfg(feature = "graph")]
            sealed::Dest::Record(rec) => {
                if in_group {
                    return Err(Error::InvalidArgument(
                        "a replay region makes its NCCL calls when it captures: record \
                         them outside nccl::group",
                    ));
                }
                self.ctx.ensure_same(rec.context(), name)?;
                for m in mem.iter().flatten() {
                    self.ctx.ensure_same(m.ctx, name)?;
                    m.release.for_graph()?;
                }
                self.agree(channel, &call)?;
                self.captured.set(true);
                let (shape, count, addrs) = call.parts();
                rec.record(self.raw, shape, count, addrs);
                return Ok(());
            }
        };
        for m in mem.iter().flatten() {
            self.ctx.ensure_same(m.ctx, name)?;
            if captured {
                #[cfg(feature = "graph")]
                m.release.for_graph()?;
            } else {
                m.release.allows(stream)?;
            }
        }
        let q = if captured {
            stream.queue_capturable(&self.ctx, name)?
        } else {
            stream.queue(&self.ctx, name)?
        };
        self.agree(channel, &call)?;
        if captured {
            self.captured.set(true);
        }
        // SAFETY: the public calls checked the lengths for the kind and count; the
        // memory is of this communicator's context and released after the work (checked
        // above); a live communicator; the stream is of its context, which `q` keeps
        // current.
        let rc = unsafe { call.launch(api, self.raw, q.stream) }?;
        if rc != IN_PROGRESS {
            check(rc, name)?;
        }
        match pending {
            // A non-blocking group may still be launching its work when `ncclGroupEnd`
            // returns (from a thread of NCCL's): every communicator of the group is
            // settled before `group` returns and the buffers' borrows end.
            Some(p) => {
                p.borrow_mut().push(self);
                Ok(())
            }
            None if rc == IN_PROGRESS => self.settle(api, name),
            None => Ok(()),
        }
    }

    /// The agreement check of `call` on `channel`, and the count of collectives.
    fn agree(&self, channel: ChannelKey, call: &Call) -> Result<()> {
        self.clique_check(channel, call.sig(), call.name())?;
        if channel == COLLECTIVE {
            self.collectives.set(self.collectives.get() + 1);
        }
        Ok(())
    }

    /// Waits while NCCL reports this communicator's last call in progress; on an error
    /// or the timeout, aborts it (unless a graph may name it).
    fn settle(&self, api: &NcclApi, call: &'static str) -> Result<()> {
        if self.state.get() != State::Live {
            return Ok(());
        }
        let start = std::time::Instant::now();
        loop {
            let mut state = ncclResult_t::ncclSuccess;
            // SAFETY: a live communicator; valid out-pointer.
            check(
                unsafe { api.ncclCommGetAsyncError()?(self.raw, &mut state) },
                "ncclCommGetAsyncError",
            )?;
            if state != IN_PROGRESS {
                if state != ncclResult_t::ncclSuccess {
                    self.abort_unless_captured();
                }
                return check(state, call);
            }
            if start.elapsed() > self.timeout {
                self.abort_unless_captured();
                return Err(Error::Timeout {
                    call,
                    after_ms: self.timeout.as_millis() as u64,
                });
            }
            std::thread::yield_now();
        }
    }

    fn root(&self, root: usize) -> Result<i32> {
        if root < self.size() {
            Ok(root as i32)
        } else {
            Err(Error::InvalidArgument(
                "an NCCL root or peer is a rank of the communicator",
            ))
        }
    }

    /// Every public call: the length rules of `kind`, then [`issue`](Self::issue).
    #[allow(clippy::too_many_arguments)]
    fn call_in<'a, T: NcclType, R: sealed::Out<'a, T>>(
        &'a self,
        kind: Kind,
        send: Option<DeviceView<'a, T>>,
        recv: Option<R>,
        op: ReduceOp,
        root: usize,
        on: &mut dyn sealed::Target,
        pending: Option<&Pending<'a>>,
    ) -> Result<()> {
        const OVERFLOW: Error = Error::InvalidArgument("count overflows");
        let size = self.size();
        let slen = send.as_ref().map(DeviceView::len);
        let out = recv.as_ref().map(sealed::Out::parts);
        let rlen = out.map(|o| o.1);
        // The count NCCL is given, after the length rules of the kind.
        let count = match (kind, slen, rlen) {
            (Kind::AllReduce | Kind::Broadcast | Kind::Reduce, Some(s), Some(r)) => {
                same_len(r, s)?;
                s
            }
            (Kind::Send, Some(s), None) => s,
            (Kind::AllReduce | Kind::Broadcast | Kind::Recv, None, Some(r)) => r,
            (Kind::AllGather, Some(s), Some(r)) => {
                same_len(r, s.checked_mul(size).ok_or(OVERFLOW)?)?;
                s
            }
            (Kind::ReduceScatter, Some(s), Some(r)) => {
                same_len(s, r.checked_mul(size).ok_or(OVERFLOW)?)?;
                r
            }
            _ => return Err(Error::InvalidArgument("NCCL call without its buffers")),
        };
        let root = match kind {
            Kind::Broadcast | Kind::Reduce | Kind::Send | Kind::Recv => self.root(root)?,
            _ => 0,
        };
        let channel = match kind {
            Kind::Send => (self.rank, root as u32),
            Kind::Recv => (root as u32, self.rank),
            _ => COLLECTIVE,
        };
        // In place: the one buffer is both sides.
        let send_ptr = send.as_ref().map(DeviceView::as_raw);
        let recv_ptr = out.map(|o| o.0);
        let call = Call {
            kind,
            dtype: T::DATA_TYPE,
            op: op.raw(),
            root,
            count,
            send: send_ptr.or(recv_ptr).unwrap_or(0),
            recv: recv_ptr.or(send_ptr).unwrap_or(0),
        };
        let mem = [
            send.as_ref().map(Mem::from),
            out.map(|(_, _, ctx, release)| Mem { ctx, release }),
        ];
        self.issue(channel, &mem, call, on, pending)
    }
}

/// A group of calls (`ncclGroupStart` / `ncclGroupEnd`), made by [`group`]: what a
/// thread that drives several ranks needs (each rank's call would otherwise wait for the
/// others), and what fuses point-to-point calls. NCCL runs the calls at the group's end,
/// so they borrow the communicators and buffers for `'env`, which outlives the whole
/// [`group`] call (as [`std::thread::scope`]'s `'env`).
pub struct Group<'env> {
    pending: Pending<'env>,
    _env: PhantomData<&'env mut &'env ()>,
}

/// The public calls, each written once: on [`Comm`] (outside a group, `pending` none)
/// and on [`Group`] (the communicator and buffers borrowed for the group's `'env`).
/// Each entry: the docs, the parameters, and `call_in`'s kind, send, receive, reduction
/// and root or peer.
macro_rules! calls {
    ($(
        $(#[$doc:meta])*
        fn $name:ident($($arg:ident: $ty:ty),*) => ($kind:ident, $send:expr, $recv:expr, $op:expr, $root:expr);
    )*) => {
        impl Comm {$(
            $(#[$doc])*
            /// [`Error::ContextMismatch`] for memory or a stream of another context;
            /// [`Error::StreamCapturing`] for a capturing stream given as `&Stream`;
            /// [`Error::InvalidArgument`] for memory whose release is not ordered after
            /// the work, or inside a [`group`]; [`Error::NcclMismatch`] when an
            /// in-process rank issued something else at this point; NCCL's errors;
            /// [`Error::Timeout`] (the communicator is then aborted).
            pub fn $name<'a, T: NcclType, On: Target<'a>>(
                &'a self,
                $($arg: $ty,)*
                mut on: On,
            ) -> Result<()> {
                self.call_in(Kind::$kind, $send, $recv, $op, $root, &mut on, None)
            }
        )*}

        impl<'a> Group<'a> {$(
            #[doc = concat!("[`Comm::", stringify!($name), "`] in the group.")]
            ///
            /// # Errors
            #[doc = concat!("As for [`Comm::", stringify!($name), "`].")]
            pub fn $name<T: NcclType, On: Target<'a>>(
                &self,
                comm: &'a Comm,
                $($arg: $ty,)*
                mut on: On,
            ) -> Result<()> {
                comm.call_in(Kind::$kind, $send, $recv, $op, $root, &mut on, Some(&self.pending))
            }
        )*}
    };
}

calls! {
    /// `ncclAllReduce`: `recv[i]` = `op` over the ranks of `send[i]`, out of place.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] when the lengths differ;
    #[doc(alias = "ncclAllReduce")]
    fn all_reduce(send: impl Into<DeviceView<'a, T>>, recv: impl Into<On::Out<T>>, op: ReduceOp)
        => (AllReduce, Some(send.into()), Some(recv.into()), op, 0);

    /// `ncclAllReduce` in place: `buf[i]` = `op` over the ranks of `buf[i]`.
    ///
    /// # Errors
    #[doc(alias = "ncclAllReduce")]
    fn all_reduce_in_place(buf: impl Into<On::Out<T>>, op: ReduceOp)
        => (AllReduce, None, Some(buf.into()), op, 0);

    /// `ncclBroadcast`: every rank's `recv` = the root's `send` (same lengths on every
    /// rank; `send` is read on the root only).
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] when the lengths differ; [`Error::InvalidArgument`] for
    /// a root that is not a rank;
    #[doc(alias = "ncclBroadcast")]
    fn broadcast(send: impl Into<DeviceView<'a, T>>, recv: impl Into<On::Out<T>>, root: usize)
        => (Broadcast, Some(send.into()), Some(recv.into()), ReduceOp::Sum, root);

    /// `ncclBroadcast` in place: every rank's `buf` = the root's.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a root that is not a rank;
    #[doc(alias = "ncclBroadcast")]
    fn broadcast_in_place(buf: impl Into<On::Out<T>>, root: usize)
        => (Broadcast, None, Some(buf.into()), ReduceOp::Sum, root);

    /// `ncclReduce`: the root's `recv[i]` = `op` over the ranks of `send[i]` (`recv` is
    /// written on the root only; same lengths on every rank).
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] when the lengths differ; [`Error::InvalidArgument`] for
    /// a root that is not a rank;
    #[doc(alias = "ncclReduce")]
    fn reduce(
        send: impl Into<DeviceView<'a, T>>,
        recv: impl Into<On::Out<T>>,
        op: ReduceOp,
        root: usize
    ) => (Reduce, Some(send.into()), Some(recv.into()), op, root);

    /// `ncclAllGather`: `recv` (`size * n` elements) = every rank's `send` (`n`), in rank
    /// order.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] unless `recv` holds `size` times as many elements as
    /// `send`;
    #[doc(alias = "ncclAllGather")]
    fn all_gather(send: impl Into<DeviceView<'a, T>>, recv: impl Into<On::Out<T>>)
        => (AllGather, Some(send.into()), Some(recv.into()), ReduceOp::Sum, 0);

    /// `ncclReduceScatter`: rank `r`'s `recv` (`n` elements) = `op` over the ranks of
    /// their `send[r * n..(r + 1) * n]` (`send`: `size * n`).
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] unless `send` holds `size` times as many elements as
    /// `recv`;
    #[doc(alias = "ncclReduceScatter")]
    fn reduce_scatter(
        send: impl Into<DeviceView<'a, T>>,
        recv: impl Into<On::Out<T>>,
        op: ReduceOp
    ) => (ReduceScatter, Some(send.into()), Some(recv.into()), op, 0);

    /// `ncclSend`: sends `buf` to rank `peer`, whose matching [`recv`](Self::recv)
    /// takes the same count. Between ranks driven by one thread, issue both sides in one
    /// [`group`].
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a peer that is not a rank;
    #[doc(alias = "ncclSend")]
    fn send(buf: impl Into<DeviceView<'a, T>>, peer: usize)
        => (Send, Some(buf.into()), None::<DeviceView<'a, T>>, ReduceOp::Sum, peer);

    /// `ncclRecv`: receives `buf` from rank `peer` (its matching [`send`](Self::send) has
    /// the same count).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a peer that is not a rank;
    #[doc(alias = "ncclRecv")]
    fn recv(buf: impl Into<On::Out<T>>, peer: usize)
        => (Recv, None, Some(buf.into()), ReduceOp::Sum, peer);
}

/// Runs `f` inside `ncclGroupStart` / `ncclGroupEnd` (see [`Group`]); after the end,
/// waits (bounded by each communicator's timeout) while NCCL reports a call of the group
/// in progress. The group ends also when `f` fails or panics; when `f` fails, the
/// communicators it issued calls on are aborted (their calls lack the parts `f` did not
/// issue, and could only hang).
///
/// # Errors
/// `f`'s error; `ncclGroupEnd`'s (the calls' own errors surface there); NCCL's
/// asynchronous errors and [`Error::Timeout`] for a communicator of the group (which is
/// then aborted).
#[doc(alias = "ncclGroupStart")]
#[doc(alias = "ncclGroupEnd")]
pub fn group<'env, R>(f: impl for<'g> FnOnce(&'g Group<'env>) -> Result<R>) -> Result<R> {
    let api = api()?;
    /// Ends the group however `f` leaves.
    struct End<'x> {
        api: &'x NcclApi,
        rc: Option<ncclResult_t>,
    }
    impl End<'_> {
        fn end(&mut self) -> Result<ncclResult_t> {
            GROUP_DEPTH.with(|d| d.set(d.get() - 1));
            self.rc = Some(ncclResult_t::ncclSuccess);
            // SAFETY: no arguments; ends the group `group` began.
            Ok(unsafe { self.api.ncclGroupEnd()?() })
        }
    }
    impl Drop for End<'_> {
        fn drop(&mut self) {
            if self.rc.is_none() {
                let _ = self.end();
            }
        }
    }
    // Both ends exist before the group begins, so it always ends.
    api.ncclGroupEnd()?;
    // SAFETY: no arguments.
    check(unsafe { api.ncclGroupStart()?() }, "ncclGroupStart")?;
    GROUP_DEPTH.with(|d| d.set(d.get() + 1));
    let g = Group {
        pending: RefCell::new(Vec::new()),
        _env: PhantomData,
    };
    let mut end = End { api, rc: None };
    let result = f(&g);
    let rc = end.end()?;
    if let Err(e) = result {
        // The group's calls queued before the failure miss their peers' parts (the
        // in-process ranks of a collective are issued together): they could only hang,
        // so their communicators are aborted, which ends their kernels.
        for comm in g.pending.borrow().iter() {
            comm.abort_unless_captured();
        }
        return Err(e);
    }
    let ended = if rc == IN_PROGRESS || rc == ncclResult_t::ncclSuccess {
        Ok(())
    } else {
        check(rc, "ncclGroupEnd")
    };
    if GROUP_DEPTH.with(Cell::get) == 0 {
        for comm in g.pending.borrow().iter() {
            comm.settle(api, "ncclGroupEnd")?;
        }
    }
    ended?;
    result
}
