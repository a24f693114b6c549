//! [`Comm`]: an owned NCCL communicator of one rank, and how it is made, watched,
//! aborted and destroyed.

use core::cell::Cell;
use core::marker::PhantomData;
use core::ptr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use std::vec;
use std::vec::Vec;

use cudadrv_sys::nccl::{NCCL_SPLIT_NOCOLOR, NcclApi, ncclComm_t, ncclConfig_t, ncclResult_t};

use super::agree::{COLLECTIVE, Clique, Key, Sig};
use super::{IN_PROGRESS, UniqueId, api, check};
use crate::driver::context::Context;
use crate::driver::stream::Stream;
use crate::error::{Error, Result};

/// How a communicator is made ([`Comm::init_rank`], [`Comm::init_all`], splits).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Config {
    /// How long initialisation, [`Comm::synchronize`] and the drop wait for NCCL before
    /// they abort the communicator (default 300 s).
    pub timeout: Duration,
    /// `minCTAs`: the fewest CTAs (channels) NCCL uses; `None` leaves NCCL's default.
    pub min_ctas: Option<u32>,
    /// `maxCTAs`: the most CTAs NCCL uses; `None` leaves NCCL's default.
    pub max_ctas: Option<u32>,
    /// `cgaClusterSize`: the cluster size of NCCL's kernels (0 to 8); `None` leaves
    /// NCCL's default.
    pub cga_cluster_size: Option<u32>,
    /// `blocking`: `false` (the default) makes the communicator non-blocking, so that
    /// initialisation, splits and the drop are bounded by [`timeout`](Self::timeout) (a
    /// rank that never comes is an error, not a hang) and a group's launch is waited
    /// for by polling. `true` makes NCCL's calls block instead: initialisation waits for
    /// every rank without bound, and each call launches its work before it returns,
    /// which costs less per call (measured on 4 H100s: a non-blocking 8 MiB all-reduce
    /// group reached a third of the blocking one's bus bandwidth; from 64 MiB on they
    /// are equal). [`Comm::synchronize`] bounds the wait for the work in both modes.
    pub blocking: bool,
    /// `splitShare`: a split shares its parent's resources (the parent must then outlive
    /// the child's use; this crate's handles do not tie them, so it stays `false` unless
    /// set).
    pub split_share: bool,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(300),
            min_ctas: None,
            max_ctas: None,
            cga_cluster_size: None,
            blocking: false,
            split_share: false,
        }
    }
}

impl Config {
    /// The default configuration, blocking (see [`blocking`](Self::blocking)).
    pub fn blocking() -> Self {
        Self {
            blocking: true,
            ..Self::default()
        }
    }

    /// The default configuration with `timeout`.
    pub fn with_timeout(timeout: Duration) -> Self {
        Self {
            timeout,
            ..Self::default()
        }
    }

    /// `ncclConfig_t` as `NCCL_CONFIG_INITIALIZER` makes it, with the set fields.
    fn raw(&self) -> ncclConfig_t {
        const UNDEF: i32 = i32::MIN; // NCCL_CONFIG_UNDEF_INT
        let int = |v: Option<u32>| v.map_or(UNDEF, |v| i32::try_from(v).unwrap_or(i32::MAX));
        ncclConfig_t {
            size: size_of::<ncclConfig_t>(),
            magic: 0xcafe_beef,
            version: cudadrv_sys::nccl::NCCL_VERSION_CODE,
            blocking: i32::from(self.blocking),
            cgaClusterSize: int(self.cga_cluster_size),
            minCTAs: int(self.min_ctas),
            maxCTAs: int(self.max_ctas),
            netName: ptr::null(),
            splitShare: if self.split_share { 1 } else { UNDEF },
            trafficClass: UNDEF,
            commName: ptr::null(),
            collnetEnable: UNDEF,
            CTAPolicy: UNDEF,
            shrinkShare: UNDEF,
            nvlsCTAs: UNDEF,
            nChannelsPerNetPeer: UNDEF,
            nvlinkCentricSched: UNDEF,
        }
    }
}

/// What a communicator's handle still names.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum State {
    Live,
    /// `ncclCommAbort` freed it.
    Aborted,
}

/// An NCCL communicator: one rank of a group of GPUs, in the primary context of its
/// device. Destroyed on drop (`ncclCommFinalize`, bounded by the timeout, then
/// `ncclCommDestroy`; `ncclCommAbort` when the finalize fails or times out).
///
/// `Send` (any thread may use it) but not `Sync`: NCCL does not allow concurrent calls on
/// one communicator.
pub struct Comm {
    pub(crate) raw: ncclComm_t,
    pub(crate) ctx: Context,
    pub(crate) rank: u32,
    size: u32,
    pub(crate) timeout: Duration,
    pub(crate) clique: Arc<Clique>,
    pub(crate) state: Cell<State>,
    /// How many collectives (splits included) this rank has issued: the same in every
    /// in-process rank whose operations agreed, so it names a split in its children's
    /// clique key.
    pub(crate) collectives: Cell<u64>,
    /// A call was captured into a graph or recorded by a region: a graph may name the
    /// communicator's resources, so it is aborted only through `&mut self`, and the
    /// drop waits for the context's work first.
    pub(crate) captured: Cell<bool>,
    _not_sync: PhantomData<Cell<()>>,
}

// SAFETY: an NCCL communicator may be used from any thread, one call at a time (`Comm`
// is not `Sync`, and its methods that call NCCL take `&self` on one thread); the context
// is `Send`.
unsafe impl Send for Comm {}

impl core::fmt::Debug for Comm {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Comm")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("device", &self.ctx.device())
            .field("state", &self.state.get())
            .finish()
    }
}

/// [`Error::InvalidArgument`] unless `ctx` is its device's primary context.
fn ensure_primary(ctx: &Context) -> Result<()> {
    if ctx.is_primary()? {
        Ok(())
    } else {
        Err(Error::InvalidArgument(
            "NCCL works in the device's primary context (Context::primary), which the CUDA \
             runtime uses",
        ))
    }
}

/// Polls `ncclCommGetAsyncError` while it reports `ncclInProgress`, up to `timeout`.
fn wait_ready(api: &NcclApi, raw: ncclComm_t, timeout: Duration, call: &'static str) -> Result<()> {
    let start = Instant::now();
    loop {
        let mut state = ncclResult_t::ncclSuccess;
        // SAFETY: a communicator NCCL handed out and nobody freed; valid out-pointer.
        check(
            unsafe { api.ncclCommGetAsyncError()?(raw, &mut state) },
            "ncclCommGetAsyncError",
        )?;
        if state != IN_PROGRESS {
            return check(state, call);
        }
        if start.elapsed() > timeout {
            return Err(Error::Timeout {
                call,
                after_ms: timeout.as_millis() as u64,
            });
        }
        std::thread::yield_now();
    }
}

/// `ncclCommAbort` of a handle nothing else will use again.
fn abort_raw(api: &NcclApi, raw: ncclComm_t) {
    if raw.is_null() {
        return;
    }
    if let Ok(f) = api.ncclCommAbort() {
        // SAFETY: a communicator NCCL handed out; the caller drops the handle.
        let _ = unsafe { f(raw) };
    }
}

/// `ncclCommUserRank` and `ncclCommCount`.
fn rank_and_size(api: &NcclApi, raw: ncclComm_t) -> Result<(u32, u32)> {
    let (mut rank, mut size) = (0, 0);
    // SAFETY: a ready communicator; valid out-pointers.
    unsafe {
        check(api.ncclCommUserRank()?(raw, &mut rank), "ncclCommUserRank")?;
        check(api.ncclCommCount()?(raw, &mut size), "ncclCommCount")?;
    }
    Ok((rank as u32, size as u32))
}

impl Comm {
    fn from_parts(
        raw: ncclComm_t,
        ctx: &Context,
        rank: u32,
        size: u32,
        config: &Config,
        clique: Arc<Clique>,
    ) -> Self {
        Self {
            raw,
            ctx: ctx.clone(),
            rank,
            size,
            timeout: config.timeout,
            clique,
            state: Cell::new(State::Live),
            collectives: Cell::new(0),
            captured: Cell::new(false),
            _not_sync: PhantomData,
        }
    }

    /// `ncclCommInitRankConfig`: rank `rank` of `nranks`, on `ctx`'s device (its primary
    /// context), joining the ranks given the same `id`. Returns once every rank has
    /// joined, or fails after `config.timeout` ([`Error::Timeout`]: a rank that never
    /// came), having aborted what NCCL had made.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a `rank` not below `nranks` or a context that is
    /// not primary; loading NCCL; NCCL's errors; [`Error::Timeout`].
    #[doc(alias = "ncclCommInitRankConfig")]
    pub fn init_rank(
        ctx: &Context,
        id: &UniqueId,
        nranks: usize,
        rank: usize,
        config: &Config,
    ) -> Result<Self> {
        const CALL: &str = "ncclCommInitRankConfig";
        if rank >= nranks || nranks > i32::MAX as usize {
            return Err(Error::InvalidArgument(
                "an NCCL rank is below the number of ranks",
            ));
        }
        let api = api()?;
        ensure_primary(ctx)?;
        let clique = Clique::join(Key::Id(id.0), rank as u32);
        let made = (|| {
            let _current = ctx.enter()?;
            let mut raw = ptr::null_mut();
            let mut cfg = config.raw();
            // SAFETY: valid out-pointer and config; the id is 128 bytes; the device's
            // primary context is current, which NCCL's runtime calls use.
            let rc = unsafe {
                api.ncclCommInitRankConfig()?(
                    &mut raw,
                    nranks as i32,
                    id.raw(),
                    rank as i32,
                    &mut cfg,
                )
            };
            if rc != IN_PROGRESS {
                if let Err(e) = check(rc, CALL) {
                    abort_raw(api, raw);
                    return Err(e);
                }
            }
            if let Err(e) = wait_ready(api, raw, config.timeout, CALL) {
                abort_raw(api, raw);
                return Err(e);
            }
            Ok(raw)
        })();
        match made {
            Ok(raw) => Ok(Self::from_parts(
                raw,
                ctx,
                rank as u32,
                nranks as u32,
                config,
                clique,
            )),
            Err(e) => {
                clique.leave(rank as u32);
                Err(e)
            }
        }
    }

    /// One communicator per context, rank `i` on `contexts[i]` (primary contexts of
    /// distinct devices): a process that drives several GPUs. NCCL's initialisation of
    /// the ranks is one group (`ncclGroupStart`, `ncclCommInitRankConfig` per rank,
    /// `ncclGroupEnd`), bounded by `config.timeout`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an empty list, a context that is not primary, or
    /// two contexts of one device; loading NCCL; NCCL's errors; [`Error::Timeout`].
    pub fn init_all(contexts: &[Context], config: &Config) -> Result<Vec<Self>> {
        const CALL: &str = "ncclCommInitRankConfig";
        if contexts.is_empty() || contexts.len() > i32::MAX as usize {
            return Err(Error::InvalidArgument(
                "Comm::init_all needs one context or more",
            ));
        }
        for (i, c) in contexts.iter().enumerate() {
            ensure_primary(c)?;
            if contexts[..i].iter().any(|o| o.device() == c.device()) {
                return Err(Error::InvalidArgument(
                    "Comm::init_all takes one context per device",
                ));
            }
        }
        let api = api()?;
        let id = UniqueId::new()?;
        let n = contexts.len();
        let mut raws: Vec<ncclComm_t> = vec![ptr::null_mut(); n];
        let abort_all = |raws: &[ncclComm_t]| {
            for &r in raws {
                abort_raw(api, r);
            }
        };
        // SAFETY: no arguments.
        check(unsafe { api.ncclGroupStart()?() }, "ncclGroupStart")?;
        let mut first_err = None;
        for (i, ctx) in contexts.iter().enumerate() {
            let entered = ctx.enter();
            let rc = match &entered {
                // SAFETY: as in `init_rank`, for rank `i` on the current context.
                Ok(_) => match api.ncclCommInitRankConfig() {
                    Ok(f) => unsafe {
                        f(
                            &mut raws[i],
                            n as i32,
                            id.raw(),
                            i as i32,
                            &mut config.raw(),
                        )
                    },
                    Err(m) => {
                        first_err.get_or_insert(Error::MissingSymbol(m));
                        break;
                    }
                },
                Err(e) => {
                    first_err.get_or_insert(e.clone());
                    break;
                }
            };
            if rc != IN_PROGRESS {
                if let Err(e) = check(rc, CALL) {
                    first_err.get_or_insert(e);
                    break;
                }
            }
        }
        // SAFETY: no arguments; ends the group begun above.
        let rc = unsafe { api.ncclGroupEnd()?() };
        if rc != IN_PROGRESS {
            if let Err(e) = check(rc, "ncclGroupEnd") {
                first_err.get_or_insert(e);
            }
        }
        if first_err.is_none() {
            for &raw in &raws {
                if let Err(e) = wait_ready(api, raw, config.timeout, CALL) {
                    first_err = Some(e);
                    break;
                }
            }
        }
        if let Some(e) = first_err {
            abort_all(&raws);
            return Err(e);
        }
        let members: Vec<u32> = (0..n as u32).collect();
        let clique = Clique::new(&members);
        Ok(raws
            .into_iter()
            .zip(contexts)
            .enumerate()
            .map(|(i, (raw, ctx))| {
                Self::from_parts(raw, ctx, i as u32, n as u32, config, clique.clone())
            })
            .collect())
    }

    /// `ncclCommSplit`: this rank's place in a new communicator of the ranks that give
    /// the same `color` (ordered by `key`, then by their rank here), or `None` for
    /// `color` `None` (`NCCL_SPLIT_NOCOLOR`). Every rank must call it (a collective); for
    /// several ranks driven by this thread use [`split_all`](Self::split_all).
    ///
    /// # Errors
    /// As for the collectives ([`Error::NcclMismatch`] when an in-process rank did
    /// something else at this point); NCCL's errors; [`Error::Timeout`].
    #[doc(alias = "ncclCommSplit")]
    pub fn split(&self, color: Option<u32>, key: i32, config: &Config) -> Result<Option<Self>> {
        Ok(Self::split_all(&[self], &[(color, key)], config)?
            .pop()
            .flatten())
    }

    /// [`split`](Self::split) of several in-process ranks at once (one group):
    /// `comms[i]` with `colors_keys[i]`.
    ///
    /// # Errors
    /// As for [`split`](Self::split); [`Error::InvalidArgument`] when the lists differ in
    /// length.
    pub fn split_all(
        comms: &[&Self],
        colors_keys: &[(Option<u32>, i32)],
        config: &Config,
    ) -> Result<Vec<Option<Self>>> {
        const CALL: &str = "ncclCommSplit";
        if comms.len() != colors_keys.len() {
            return Err(Error::InvalidArgument(
                "Comm::split_all: one (color, key) per communicator",
            ));
        }
        let api = api()?;
        let mut seqs = Vec::with_capacity(comms.len());
        for c in comms {
            c.ensure_live(CALL)?;
            c.clique_check(
                COLLECTIVE,
                Sig {
                    kind: super::ops::Kind::Split as u8,
                    root: -1,
                    ..Sig::default()
                },
                CALL,
            )?;
            seqs.push(c.collectives.get());
            c.collectives.set(c.collectives.get() + 1);
        }
        let mut news: Vec<ncclComm_t> = vec![ptr::null_mut(); comms.len()];
        let grouped = comms.len() > 1;
        if grouped {
            // SAFETY: no arguments.
            check(unsafe { api.ncclGroupStart()?() }, "ncclGroupStart")?;
        }
        let mut first_err = None;
        for (i, (c, &(color, key))) in comms.iter().zip(colors_keys).enumerate() {
            let color = color.map_or(NCCL_SPLIT_NOCOLOR, |c| i32::try_from(c).unwrap_or(i32::MAX));
            let rc = match (c.ctx.enter(), api.ncclCommSplit()) {
                // SAFETY: a live communicator; valid out-pointer and config; its
                // context is current.
                (Ok(_g), Ok(f)) => unsafe { f(c.raw, color, key, &mut news[i], &mut config.raw()) },
                (Err(e), _) => {
                    first_err.get_or_insert(e);
                    break;
                }
                (_, Err(m)) => {
                    first_err.get_or_insert(Error::MissingSymbol(m));
                    break;
                }
            };
            if rc != IN_PROGRESS {
                if let Err(e) = check(rc, CALL) {
                    first_err.get_or_insert(e);
                    break;
                }
            }
        }
        if grouped {
            // SAFETY: no arguments; ends the group begun above.
            let rc = unsafe { api.ncclGroupEnd()?() };
            if rc != IN_PROGRESS {
                if let Err(e) = check(rc, "ncclGroupEnd") {
                    first_err.get_or_insert(e);
                }
            }
        }
        let mut out = Vec::with_capacity(comms.len());
        for (i, c) in comms.iter().enumerate() {
            if first_err.is_some() {
                break;
            }
            // The parent settles too (a non-blocking split is in progress on it).
            if let Err(e) = wait_ready(api, c.raw, c.timeout, CALL) {
                first_err = Some(e);
                break;
            }
            let raw = news[i];
            if raw.is_null() {
                out.push(None);
                continue;
            }
            if let Err(e) = wait_ready(api, raw, config.timeout, CALL) {
                first_err = Some(e);
                break;
            }
            match rank_and_size(api, raw) {
                Ok((rank, size)) => {
                    let color = colors_keys[i].0.map_or(-1, |c| c as i32);
                    let clique = Clique::join(Key::Split(c.clique.id(), seqs[i], color), rank);
                    out.push(Some(Self::from_parts(
                        raw, &c.ctx, rank, size, config, clique,
                    )));
                    news[i] = ptr::null_mut();
                }
                Err(e) => {
                    first_err = Some(e);
                    break;
                }
            }
        }
        if let Some(e) = first_err {
            for raw in news {
                abort_raw(api, raw);
            }
            return Err(e);
        }
        Ok(out)
    }

    /// This rank.
    pub fn rank(&self) -> usize {
        self.rank as usize
    }

    /// The number of ranks.
    pub fn size(&self) -> usize {
        self.size as usize
    }

    /// The context (its device's primary context) the communicator works in.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// The timeout of [`synchronize`](Self::synchronize) and the drop.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The raw handle (null once aborted), for NCCL calls this module does not make.
    /// The communicator keeps ownership.
    pub fn as_raw(&self) -> ncclComm_t {
        match self.state.get() {
            State::Live => self.raw,
            State::Aborted => ptr::null_mut(),
        }
    }

    pub(crate) fn ensure_live(&self, call: &'static str) -> Result<()> {
        match self.state.get() {
            State::Live => Ok(()),
            State::Aborted => Err(Error::Nccl {
                call,
                code: ncclResult_t::ncclInvalidUsage.0,
            }),
        }
    }

    /// The agreement check of this rank's next operation on `channel`.
    pub(crate) fn clique_check(
        &self,
        channel: super::agree::ChannelKey,
        sig: Sig,
        call: &'static str,
    ) -> Result<()> {
        self.clique
            .check(self.rank, channel, sig)
            .map_err(|what| Error::NcclMismatch {
                call,
                rank: self.rank,
                what,
            })
    }

    /// `ncclCommGetAsyncError`: `Ok` while NCCL reports no asynchronous error (or work
    /// still in progress), else the error (a peer that failed: `ncclRemoteError`,
    /// `ncclSystemError`).
    ///
    /// # Errors
    /// As said; NCCL's errors; an aborted communicator.
    #[doc(alias = "ncclCommGetAsyncError")]
    pub fn async_error(&self) -> Result<()> {
        const CALL: &str = "ncclCommGetAsyncError";
        self.ensure_live(CALL)?;
        let api = api()?;
        let mut state = ncclResult_t::ncclSuccess;
        // SAFETY: a live communicator; valid out-pointer.
        check(
            unsafe { api.ncclCommGetAsyncError()?(self.raw, &mut state) },
            CALL,
        )?;
        if state == IN_PROGRESS {
            Ok(())
        } else {
            check(state, "asynchronous NCCL operation")
        }
    }

    /// `ncclGetLastError`: NCCL's text about the last error (empty when it has none).
    pub fn last_error(&self) -> std::string::String {
        let Ok(api) = api() else {
            return std::string::String::new();
        };
        let Ok(f) = api.ncclGetLastError() else {
            return std::string::String::new();
        };
        // SAFETY: the communicator is live or null (NCCL takes null); the text is NCCL's
        // static or per-thread buffer, copied at once.
        unsafe {
            let p = f(self.as_raw());
            if p.is_null() {
                std::string::String::new()
            } else {
                core::ffi::CStr::from_ptr(p).to_string_lossy().into_owned()
            }
        }
    }

    /// `ncclCommAbort`: stops this rank's NCCL work at once (its kernels on the GPU
    /// exit) and frees the communicator. Later calls on it fail; the drop does nothing
    /// more. Buffers the aborted work used hold unspecified values. `&mut self`: no
    /// graph that captured a call of it (and so names its resources) is alive.
    ///
    /// # Errors
    /// NCCL's errors (the communicator counts as aborted whatever NCCL returned).
    #[doc(alias = "ncclCommAbort")]
    pub fn abort(&mut self) -> Result<()> {
        self.abort_now()
    }

    /// What the module does on its own when a peer fails or a wait times out: abort,
    /// unless a call was captured or recorded (a graph may still name the
    /// communicator's resources; its calls then keep waiting, and the caller gets the
    /// error).
    pub(crate) fn abort_unless_captured(&self) {
        if !self.captured.get() {
            let _ = self.abort_now();
        }
    }

    fn abort_now(&self) -> Result<()> {
        if self.state.get() == State::Aborted {
            return Ok(());
        }
        let api = api()?;
        self.state.set(State::Aborted);
        self.clique.leave(self.rank);
        let _current = self.ctx.enter();
        // SAFETY: a live communicator, which no call uses after this one (state); no
        // graph names it (`&mut self` in `abort`, or never captured).
        check(unsafe { api.ncclCommAbort()?(self.raw) }, "ncclCommAbort")
    }

    /// Waits until `stream` (of this communicator's context) has finished its work,
    /// watching NCCL's asynchronous error meanwhile: on an error, or when the timeout
    /// passes first, aborts the communicator (which ends its kernels) and returns the
    /// error. Use it where a peer may fail: a plain `Stream::synchronize` would wait
    /// forever for a collective whose peer is gone. (A communicator whose calls were
    /// captured or recorded is not aborted: see [`Target`](super::Target).)
    ///
    /// # Errors
    /// [`Error::ContextMismatch`] for a stream of another context; the asynchronous
    /// error; [`Error::Timeout`]; driver errors of the stream's work.
    pub fn synchronize(&self, stream: &Stream) -> Result<()> {
        const CALL: &str = "stream completion";
        self.ctx
            .ensure_same(stream.context(), "Comm::synchronize")?;
        let start = Instant::now();
        let mut spins = 0u32;
        loop {
            if stream.query()? {
                return Ok(());
            }
            if let Err(e) = self.async_error() {
                self.abort_unless_captured();
                return Err(e);
            }
            if start.elapsed() > self.timeout {
                self.abort_unless_captured();
                return Err(Error::Timeout {
                    call: CALL,
                    after_ms: self.timeout.as_millis() as u64,
                });
            }
            spins += 1;
            if spins < 64 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
    }
}

impl Drop for Comm {
    fn drop(&mut self) {
        if self.state.get() == State::Aborted {
            return;
        }
        self.clique.leave(self.rank);
        let Ok(api) = api() else { return };
        let _current = self.ctx.enter();
        if self.captured.get() {
            // A forgotten executable graph may still have a launch pending that uses
            // the communicator's resources: let the context's work finish first.
            let _ = self.ctx.synchronize();
        }
        // Finalize (flushes this rank's outstanding work, non-blocking), bounded; then
        // destroy. A finalize that fails or times out (a peer gone) becomes an abort.
        let finalized = match api.ncclCommFinalize() {
            // SAFETY: a live communicator, used by nothing after the drop.
            Ok(f) => {
                let rc = unsafe { f(self.raw) };
                (rc == IN_PROGRESS || rc == ncclResult_t::ncclSuccess)
                    && wait_ready(api, self.raw, self.timeout, "ncclCommFinalize").is_ok()
            }
            Err(_) => false,
        };
        if finalized {
            if let Ok(f) = api.ncclCommDestroy() {
                // SAFETY: as above; finalized.
                let _ = unsafe { f(self.raw) };
                return;
            }
        }
        abort_raw(api, self.raw);
    }
}
