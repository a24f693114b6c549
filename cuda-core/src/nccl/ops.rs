//! Collectives, point-to-point calls and groups ([`group`]), on a stream or captured
//! into a graph ([`Target`]).

use core::cell::{Cell, RefCell};
use core::marker::PhantomData;
use std::vec::Vec;

use cudadrv_sys::nccl::{NcclApi, ncclResult_t};

use super::agree::{COLLECTIVE, ChannelKey, Sig};
use super::comm::{Comm, State};
use super::{IN_PROGRESS, NcclType, ReduceOp, api, check};
use crate::driver::context::Context;
use crate::driver::stream::Stream;
use crate::error::{Error, Result};
use crate::memory::{DeviceView, DeviceViewMut, Release, same_len};

/// The kinds of operation, as the agreement record numbers them.
#[derive(Clone, Copy)]
#[repr(u8)]
pub(crate) enum Kind {
    AllReduce = 1,
    Broadcast,
    Reduce,
    AllGather,
    ReduceScatter,
    PointToPoint,
    Split,
}

mod sealed {
    /// Where a call's work goes: a stream, or a stream being captured.
    pub trait Target {
        fn stream(&self) -> &crate::Stream;
        fn captured(&self) -> bool;
    }
}

/// Where an NCCL call's work goes (sealed): a [`Stream`] (`&stream`: queued once; the
/// stream must not be capturing), or a stream being captured (`&capturing`, feature
/// `graph`: recorded into the graph, which then borrows the communicator and the
/// buffers for its lifetime `'a`, as [`Capturing`](crate::graph::Capturing)'s own
/// methods do).
pub trait Target<'a>: sealed::Target {}

impl sealed::Target for &Stream {
    fn stream(&self) -> &Stream {
        self
    }
    fn captured(&self) -> bool {
        false
    }
}
impl<'a> Target<'a> for &Stream {}

#[cfg(feature = "graph")]
impl sealed::Target for &crate::graph::Capturing<'_, '_> {
    fn stream(&self) -> &Stream {
        crate::graph::Capturing::stream(self)
    }
    fn captured(&self) -> bool {
        true
    }
}
#[cfg(feature = "graph")]
impl<'a> Target<'a> for &crate::graph::Capturing<'_, 'a> {}

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
    /// (queued: its stream's or context's work; captured: its context's); the
    /// in-process ranks agree; then NCCL is called with the target's stream and the
    /// context current. Outside a group a call NCCL reports in progress is waited for
    /// (bounded by the timeout); inside one, `pending` gets the communicator.
    #[allow(clippy::too_many_arguments)]
    fn issue<'env>(
        &'env self,
        call: &'static str,
        channel: ChannelKey,
        sig: Sig,
        mem: &[Option<Mem<'_>>],
        on: &dyn sealed::Target,
        pending: Option<&Pending<'env>>,
        f: impl FnOnce(&NcclApi, cudadrv_sys::CUstream) -> Result<ncclResult_t>,
    ) -> Result<()> {
        self.ensure_live(call)?;
        let in_group = GROUP_DEPTH.with(Cell::get) > 0;
        if in_group && pending.is_none() {
            return Err(Error::InvalidArgument(
                "inside nccl::group, NCCL defers the work to the group's end: issue it \
                 through the Group, which borrows the buffers until then",
            ));
        }
        let api = api()?;
        let stream = on.stream();
        for m in mem.iter().flatten() {
            self.ctx.ensure_same(m.ctx, call)?;
            if on.captured() {
                #[cfg(feature = "graph")]
                m.release.for_graph()?;
            } else {
                m.release.allows(stream)?;
            }
        }
        let q = if on.captured() {
            stream.queue_capturable(&self.ctx, call)?
        } else {
            stream.queue(&self.ctx, call)?
        };
        self.clique_check(channel, sig, call)?;
        if channel == COLLECTIVE {
            self.collectives.set(self.collectives.get() + 1);
        }
        let rc = f(api, q.stream)?;
        if rc != IN_PROGRESS {
            check(rc, call)?;
        }
        match pending {
            // A non-blocking group may still be launching its work when `ncclGroupEnd`
            // returns (from a thread of NCCL's): every communicator of the group is
            // settled before `group` returns and the buffers' borrows end.
            Some(p) => {
                p.borrow_mut().push(self);
                Ok(())
            }
            None if rc == IN_PROGRESS => self.settle(api, call),
            None => Ok(()),
        }
    }

    /// Waits while NCCL reports this communicator's last call in progress; on an error
    /// or the timeout, aborts it.
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
                    let _ = self.abort();
                }
                return check(state, call);
            }
            if start.elapsed() > self.timeout {
                let _ = self.abort();
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

    fn all_reduce_in<'a, T: NcclType>(
        &'a self,
        send: DeviceView<'a, T>,
        recv: Option<DeviceViewMut<'a, T>>,
        op: ReduceOp,
        on: &dyn sealed::Target,
        pending: Option<&Pending<'a>>,
    ) -> Result<()> {
        const CALL: &str = "ncclAllReduce";
        let n = send.len();
        let sig = Sig {
            kind: Kind::AllReduce as u8,
            dtype: T::DATA_TYPE.0,
            op: op.raw().0,
            root: -1,
            count: n,
        };
        let recv_ptr = match &recv {
            Some(r) => {
                same_len(r.len(), n)?;
                r.as_raw()
            }
            None => send.as_raw(),
        };
        let mem = [Some((&send).into()), recv.as_ref().map(Mem::from)];
        self.issue(CALL, COLLECTIVE, sig, &mem, on, pending, |api, s| {
            // SAFETY: both operands hold `n` elements of `T` (checked), in this
            // communicator's context, released after the work (checked by `issue`);
            // a live communicator; its context is current.
            Ok(unsafe {
                api.ncclAllReduce()?(
                    send.as_raw() as _,
                    recv_ptr as _,
                    n,
                    T::DATA_TYPE,
                    op.raw(),
                    self.raw,
                    s,
                )
            })
        })
    }

    fn broadcast_in<'a, T: NcclType>(
        &'a self,
        send: Option<DeviceView<'a, T>>,
        recv: DeviceViewMut<'a, T>,
        root: usize,
        on: &dyn sealed::Target,
        pending: Option<&Pending<'a>>,
    ) -> Result<()> {
        const CALL: &str = "ncclBroadcast";
        let root = self.root(root)?;
        let n = recv.len();
        let sig = Sig {
            kind: Kind::Broadcast as u8,
            dtype: T::DATA_TYPE.0,
            op: 0,
            root,
            count: n,
        };
        let send_ptr = match &send {
            Some(s) => {
                same_len(n, s.len())?;
                s.as_raw()
            }
            None => recv.as_raw(),
        };
        let mem = [Some((&recv).into()), send.as_ref().map(Mem::from)];
        self.issue(CALL, COLLECTIVE, sig, &mem, on, pending, |api, s| {
            // SAFETY: as in `all_reduce_in`: `n` elements on both sides.
            Ok(unsafe {
                api.ncclBroadcast()?(
                    send_ptr as _,
                    recv.as_raw() as _,
                    n,
                    T::DATA_TYPE,
                    root,
                    self.raw,
                    s,
                )
            })
        })
    }

    fn reduce_in<'a, T: NcclType>(
        &'a self,
        send: DeviceView<'a, T>,
        recv: DeviceViewMut<'a, T>,
        op: ReduceOp,
        root: usize,
        on: &dyn sealed::Target,
        pending: Option<&Pending<'a>>,
    ) -> Result<()> {
        const CALL: &str = "ncclReduce";
        let root = self.root(root)?;
        let n = send.len();
        same_len(recv.len(), n)?;
        let sig = Sig {
            kind: Kind::Reduce as u8,
            dtype: T::DATA_TYPE.0,
            op: op.raw().0,
            root,
            count: n,
        };
        let mem = [Some((&send).into()), Some((&recv).into())];
        self.issue(CALL, COLLECTIVE, sig, &mem, on, pending, |api, s| {
            // SAFETY: as in `all_reduce_in`: `n` elements on both sides.
            Ok(unsafe {
                api.ncclReduce()?(
                    send.as_raw() as _,
                    recv.as_raw() as _,
                    n,
                    T::DATA_TYPE,
                    op.raw(),
                    root,
                    self.raw,
                    s,
                )
            })
        })
    }

    fn all_gather_in<'a, T: NcclType>(
        &'a self,
        send: DeviceView<'a, T>,
        recv: DeviceViewMut<'a, T>,
        on: &dyn sealed::Target,
        pending: Option<&Pending<'a>>,
    ) -> Result<()> {
        const CALL: &str = "ncclAllGather";
        let n = send.len();
        let total = n
            .checked_mul(self.size())
            .ok_or(Error::InvalidArgument("count overflows"))?;
        same_len(recv.len(), total)?;
        let sig = Sig {
            kind: Kind::AllGather as u8,
            dtype: T::DATA_TYPE.0,
            op: 0,
            root: -1,
            count: n,
        };
        let mem = [Some((&send).into()), Some((&recv).into())];
        self.issue(CALL, COLLECTIVE, sig, &mem, on, pending, |api, s| {
            // SAFETY: `send` holds `n` elements and `recv` `n * size` (checked); as in
            // `all_reduce_in` otherwise.
            Ok(unsafe {
                api.ncclAllGather()?(
                    send.as_raw() as _,
                    recv.as_raw() as _,
                    n,
                    T::DATA_TYPE,
                    self.raw,
                    s,
                )
            })
        })
    }

    fn reduce_scatter_in<'a, T: NcclType>(
        &'a self,
        send: DeviceView<'a, T>,
        recv: DeviceViewMut<'a, T>,
        op: ReduceOp,
        on: &dyn sealed::Target,
        pending: Option<&Pending<'a>>,
    ) -> Result<()> {
        const CALL: &str = "ncclReduceScatter";
        let n = recv.len();
        let total = n
            .checked_mul(self.size())
            .ok_or(Error::InvalidArgument("count overflows"))?;
        same_len(send.len(), total)?;
        let sig = Sig {
            kind: Kind::ReduceScatter as u8,
            dtype: T::DATA_TYPE.0,
            op: op.raw().0,
            root: -1,
            count: n,
        };
        let mem = [Some((&send).into()), Some((&recv).into())];
        self.issue(CALL, COLLECTIVE, sig, &mem, on, pending, |api, s| {
            // SAFETY: `send` holds `n * size` elements and `recv` `n` (checked); as in
            // `all_reduce_in` otherwise.
            Ok(unsafe {
                api.ncclReduceScatter()?(
                    send.as_raw() as _,
                    recv.as_raw() as _,
                    n,
                    T::DATA_TYPE,
                    op.raw(),
                    self.raw,
                    s,
                )
            })
        })
    }

    fn send_in<'a, T: NcclType>(
        &'a self,
        buf: DeviceView<'a, T>,
        peer: usize,
        on: &dyn sealed::Target,
        pending: Option<&Pending<'a>>,
    ) -> Result<()> {
        const CALL: &str = "ncclSend";
        let peer = self.root(peer)?;
        let n = buf.len();
        let sig = Sig {
            kind: Kind::PointToPoint as u8,
            dtype: T::DATA_TYPE.0,
            op: 0,
            root: -1,
            count: n,
        };
        let mem = [Some((&buf).into())];
        self.issue(
            CALL,
            (self.rank, peer as u32),
            sig,
            &mem,
            on,
            pending,
            |api, s| {
                // SAFETY: `buf` holds `n` elements; as in `all_reduce_in` otherwise.
                Ok(unsafe {
                    api.ncclSend()?(buf.as_raw() as _, n, T::DATA_TYPE, peer, self.raw, s)
                })
            },
        )
    }

    fn recv_in<'a, T: NcclType>(
        &'a self,
        buf: DeviceViewMut<'a, T>,
        peer: usize,
        on: &dyn sealed::Target,
        pending: Option<&Pending<'a>>,
    ) -> Result<()> {
        const CALL: &str = "ncclRecv";
        let peer = self.root(peer)?;
        let n = buf.len();
        let sig = Sig {
            kind: Kind::PointToPoint as u8,
            dtype: T::DATA_TYPE.0,
            op: 0,
            root: -1,
            count: n,
        };
        let mem = [Some((&buf).into())];
        self.issue(
            CALL,
            (peer as u32, self.rank),
            sig,
            &mem,
            on,
            pending,
            |api, s| {
                // SAFETY: `buf` holds `n` elements; as in `all_reduce_in` otherwise.
                Ok(unsafe {
                    api.ncclRecv()?(buf.as_raw() as _, n, T::DATA_TYPE, peer, self.raw, s)
                })
            },
        )
    }
}

impl Comm {
    /// `ncclAllReduce`: `recv[i]` = `op` over the ranks of `send[i]`, out of place.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] when the lengths differ; [`Error::ContextMismatch`] for memory or a stream of another context; [`Error::StreamCapturing`] for a capturing stream given as `&Stream`; [`Error::InvalidArgument`] for memory whose release is not ordered after the work, or inside a [`group`]; [`Error::NcclMismatch`] when an in-process rank issued something else at this point; NCCL's errors; [`Error::Timeout`] (the communicator is then aborted).
    #[doc(alias = "ncclAllReduce")]
    pub fn all_reduce<'a, T: NcclType>(
        &'a self,
        send: impl Into<DeviceView<'a, T>>,
        recv: impl Into<DeviceViewMut<'a, T>>,
        op: ReduceOp,
        on: impl Target<'a>,
    ) -> Result<()> {
        self.all_reduce_in(send.into(), Some(recv.into()), op, &on, None)
    }

    /// `ncclAllReduce` in place: `buf[i]` = `op` over the ranks of `buf[i]`.
    ///
    /// # Errors
    /// [`Error::ContextMismatch`] for memory or a stream of another context; [`Error::StreamCapturing`] for a capturing stream given as `&Stream`; [`Error::InvalidArgument`] for memory whose release is not ordered after the work, or inside a [`group`]; [`Error::NcclMismatch`] when an in-process rank issued something else at this point; NCCL's errors; [`Error::Timeout`] (the communicator is then aborted).
    #[doc(alias = "ncclAllReduce")]
    pub fn all_reduce_in_place<'a, T: NcclType>(
        &'a self,
        buf: impl Into<DeviceViewMut<'a, T>>,
        op: ReduceOp,
        on: impl Target<'a>,
    ) -> Result<()> {
        self.all_reduce_in(DeviceView::from(buf.into()), None, op, &on, None)
    }

    /// `ncclBroadcast`: every rank's `recv` = the root's `send` (same lengths on every rank; `send` is read on the root only).
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] when the lengths differ; [`Error::InvalidArgument`] for a root that is not a rank; [`Error::ContextMismatch`] for memory or a stream of another context; [`Error::StreamCapturing`] for a capturing stream given as `&Stream`; [`Error::InvalidArgument`] for memory whose release is not ordered after the work, or inside a [`group`]; [`Error::NcclMismatch`] when an in-process rank issued something else at this point; NCCL's errors; [`Error::Timeout`] (the communicator is then aborted).
    #[doc(alias = "ncclBroadcast")]
    pub fn broadcast<'a, T: NcclType>(
        &'a self,
        send: impl Into<DeviceView<'a, T>>,
        recv: impl Into<DeviceViewMut<'a, T>>,
        root: usize,
        on: impl Target<'a>,
    ) -> Result<()> {
        self.broadcast_in(Some(send.into()), recv.into(), root, &on, None)
    }

    /// `ncclBroadcast` in place: every rank's `buf` = the root's.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a root that is not a rank; [`Error::ContextMismatch`] for memory or a stream of another context; [`Error::StreamCapturing`] for a capturing stream given as `&Stream`; [`Error::InvalidArgument`] for memory whose release is not ordered after the work, or inside a [`group`]; [`Error::NcclMismatch`] when an in-process rank issued something else at this point; NCCL's errors; [`Error::Timeout`] (the communicator is then aborted).
    #[doc(alias = "ncclBroadcast")]
    pub fn broadcast_in_place<'a, T: NcclType>(
        &'a self,
        buf: impl Into<DeviceViewMut<'a, T>>,
        root: usize,
        on: impl Target<'a>,
    ) -> Result<()> {
        self.broadcast_in(None, buf.into(), root, &on, None)
    }

    /// `ncclReduce`: the root's `recv[i]` = `op` over the ranks of `send[i]` (`recv` is written on the root only; same lengths on every rank).
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] when the lengths differ; [`Error::InvalidArgument`] for a root that is not a rank; [`Error::ContextMismatch`] for memory or a stream of another context; [`Error::StreamCapturing`] for a capturing stream given as `&Stream`; [`Error::InvalidArgument`] for memory whose release is not ordered after the work, or inside a [`group`]; [`Error::NcclMismatch`] when an in-process rank issued something else at this point; NCCL's errors; [`Error::Timeout`] (the communicator is then aborted).
    #[doc(alias = "ncclReduce")]
    pub fn reduce<'a, T: NcclType>(
        &'a self,
        send: impl Into<DeviceView<'a, T>>,
        recv: impl Into<DeviceViewMut<'a, T>>,
        op: ReduceOp,
        root: usize,
        on: impl Target<'a>,
    ) -> Result<()> {
        self.reduce_in(send.into(), recv.into(), op, root, &on, None)
    }

    /// `ncclAllGather`: `recv` (`size * n` elements) = every rank's `send` (`n`), in rank order.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] unless `recv` holds `size` times as many elements as `send`; [`Error::ContextMismatch`] for memory or a stream of another context; [`Error::StreamCapturing`] for a capturing stream given as `&Stream`; [`Error::InvalidArgument`] for memory whose release is not ordered after the work, or inside a [`group`]; [`Error::NcclMismatch`] when an in-process rank issued something else at this point; NCCL's errors; [`Error::Timeout`] (the communicator is then aborted).
    #[doc(alias = "ncclAllGather")]
    pub fn all_gather<'a, T: NcclType>(
        &'a self,
        send: impl Into<DeviceView<'a, T>>,
        recv: impl Into<DeviceViewMut<'a, T>>,
        on: impl Target<'a>,
    ) -> Result<()> {
        self.all_gather_in(send.into(), recv.into(), &on, None)
    }

    /// `ncclReduceScatter`: rank `r`'s `recv` (`n` elements) = `op` over the ranks of their `send[r * n..(r + 1) * n]` (`send`: `size * n`).
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] unless `send` holds `size` times as many elements as `recv`; [`Error::ContextMismatch`] for memory or a stream of another context; [`Error::StreamCapturing`] for a capturing stream given as `&Stream`; [`Error::InvalidArgument`] for memory whose release is not ordered after the work, or inside a [`group`]; [`Error::NcclMismatch`] when an in-process rank issued something else at this point; NCCL's errors; [`Error::Timeout`] (the communicator is then aborted).
    #[doc(alias = "ncclReduceScatter")]
    pub fn reduce_scatter<'a, T: NcclType>(
        &'a self,
        send: impl Into<DeviceView<'a, T>>,
        recv: impl Into<DeviceViewMut<'a, T>>,
        op: ReduceOp,
        on: impl Target<'a>,
    ) -> Result<()> {
        self.reduce_scatter_in(send.into(), recv.into(), op, &on, None)
    }

    /// `ncclSend`: sends `buf` to rank `peer`, whose matching [`recv`](Self::recv) takes the same count. Between ranks driven by one thread, issue both sides in one [`group`].
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a peer that is not a rank; [`Error::ContextMismatch`] for memory or a stream of another context; [`Error::StreamCapturing`] for a capturing stream given as `&Stream`; [`Error::InvalidArgument`] for memory whose release is not ordered after the work, or inside a [`group`]; [`Error::NcclMismatch`] when an in-process rank issued something else at this point; NCCL's errors; [`Error::Timeout`] (the communicator is then aborted).
    #[doc(alias = "ncclSend")]
    pub fn send<'a, T: NcclType>(
        &'a self,
        buf: impl Into<DeviceView<'a, T>>,
        peer: usize,
        on: impl Target<'a>,
    ) -> Result<()> {
        self.send_in(buf.into(), peer, &on, None)
    }

    /// `ncclRecv`: receives `buf` from rank `peer` (its matching [`send`](Self::send) has the same count).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a peer that is not a rank; [`Error::ContextMismatch`] for memory or a stream of another context; [`Error::StreamCapturing`] for a capturing stream given as `&Stream`; [`Error::InvalidArgument`] for memory whose release is not ordered after the work, or inside a [`group`]; [`Error::NcclMismatch`] when an in-process rank issued something else at this point; NCCL's errors; [`Error::Timeout`] (the communicator is then aborted).
    #[doc(alias = "ncclRecv")]
    pub fn recv<'a, T: NcclType>(
        &'a self,
        buf: impl Into<DeviceViewMut<'a, T>>,
        peer: usize,
        on: impl Target<'a>,
    ) -> Result<()> {
        self.recv_in(buf.into(), peer, &on, None)
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

impl<'a> Group<'a> {
    /// [`Comm::all_reduce`] in the group.
    ///
    /// # Errors
    /// As for [`Comm::all_reduce`].
    pub fn all_reduce<T: NcclType>(
        &self,
        comm: &'a Comm,
        send: impl Into<DeviceView<'a, T>>,
        recv: impl Into<DeviceViewMut<'a, T>>,
        op: ReduceOp,
        on: impl Target<'a>,
    ) -> Result<()> {
        comm.all_reduce_in(send.into(), Some(recv.into()), op, &on, Some(&self.pending))
    }

    /// [`Comm::all_reduce_in_place`] in the group.
    ///
    /// # Errors
    /// As for [`Comm::all_reduce_in_place`].
    pub fn all_reduce_in_place<T: NcclType>(
        &self,
        comm: &'a Comm,
        buf: impl Into<DeviceViewMut<'a, T>>,
        op: ReduceOp,
        on: impl Target<'a>,
    ) -> Result<()> {
        comm.all_reduce_in(
            DeviceView::from(buf.into()),
            None,
            op,
            &on,
            Some(&self.pending),
        )
    }

    /// [`Comm::broadcast`] in the group.
    ///
    /// # Errors
    /// As for [`Comm::broadcast`].
    pub fn broadcast<T: NcclType>(
        &self,
        comm: &'a Comm,
        send: impl Into<DeviceView<'a, T>>,
        recv: impl Into<DeviceViewMut<'a, T>>,
        root: usize,
        on: impl Target<'a>,
    ) -> Result<()> {
        comm.broadcast_in(
            Some(send.into()),
            recv.into(),
            root,
            &on,
            Some(&self.pending),
        )
    }

    /// [`Comm::broadcast_in_place`] in the group.
    ///
    /// # Errors
    /// As for [`Comm::broadcast_in_place`].
    pub fn broadcast_in_place<T: NcclType>(
        &self,
        comm: &'a Comm,
        buf: impl Into<DeviceViewMut<'a, T>>,
        root: usize,
        on: impl Target<'a>,
    ) -> Result<()> {
        comm.broadcast_in(None, buf.into(), root, &on, Some(&self.pending))
    }

    /// [`Comm::reduce`] in the group.
    ///
    /// # Errors
    /// As for [`Comm::reduce`].
    pub fn reduce<T: NcclType>(
        &self,
        comm: &'a Comm,
        send: impl Into<DeviceView<'a, T>>,
        recv: impl Into<DeviceViewMut<'a, T>>,
        op: ReduceOp,
        root: usize,
        on: impl Target<'a>,
    ) -> Result<()> {
        comm.reduce_in(send.into(), recv.into(), op, root, &on, Some(&self.pending))
    }

    /// [`Comm::all_gather`] in the group.
    ///
    /// # Errors
    /// As for [`Comm::all_gather`].
    pub fn all_gather<T: NcclType>(
        &self,
        comm: &'a Comm,
        send: impl Into<DeviceView<'a, T>>,
        recv: impl Into<DeviceViewMut<'a, T>>,
        on: impl Target<'a>,
    ) -> Result<()> {
        comm.all_gather_in(send.into(), recv.into(), &on, Some(&self.pending))
    }

    /// [`Comm::reduce_scatter`] in the group.
    ///
    /// # Errors
    /// As for [`Comm::reduce_scatter`].
    pub fn reduce_scatter<T: NcclType>(
        &self,
        comm: &'a Comm,
        send: impl Into<DeviceView<'a, T>>,
        recv: impl Into<DeviceViewMut<'a, T>>,
        op: ReduceOp,
        on: impl Target<'a>,
    ) -> Result<()> {
        comm.reduce_scatter_in(send.into(), recv.into(), op, &on, Some(&self.pending))
    }

    /// [`Comm::send`] in the group.
    ///
    /// # Errors
    /// As for [`Comm::send`].
    pub fn send<T: NcclType>(
        &self,
        comm: &'a Comm,
        buf: impl Into<DeviceView<'a, T>>,
        peer: usize,
        on: impl Target<'a>,
    ) -> Result<()> {
        comm.send_in(buf.into(), peer, &on, Some(&self.pending))
    }

    /// [`Comm::recv`] in the group.
    ///
    /// # Errors
    /// As for [`Comm::recv`].
    pub fn recv<T: NcclType>(
        &self,
        comm: &'a Comm,
        buf: impl Into<DeviceViewMut<'a, T>>,
        peer: usize,
        on: impl Target<'a>,
    ) -> Result<()> {
        comm.recv_in(buf.into(), peer, &on, Some(&self.pending))
    }
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
            let _ = comm.abort();
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
