//! [`Recorder`]: what a region's body issues through, the stream calls with their
//! checks, recorded as operations.

#[allow(clippy::wildcard_imports)]
use super::*;

/// Records what a [`Region`] execution issues: the stream calls of this crate, with
/// their checks, recorded instead of queued (see [`Region`]).
/// Lives for one execution; what the graph will name is borrowed for the region's `'a`.
pub struct Recorder<'r, 'a> {
    pub(super) entries: &'r mut Vec<Entry<'a>>,
    pub(super) s: &'r mut Scratch<'a>,
    /// The entry being followed, while every operation so far matched it.
    pub(super) spec: Option<usize>,
    /// Operations recorded so far.
    pub(super) pos: usize,
    pub(super) hash: u64,
    /// A host closure with state was recorded: capture this execution.
    pub(super) stateful: bool,
    /// The entry whose setter failed (to drop).
    pub(super) failed: Option<usize>,
    /// Setters applied while following.
    pub(super) updated: u64,
    pub(super) stream: &'r Stream,
    pub(super) ctx: &'r Context,
    /// The region's bound host buffers and id.
    pub(super) sinks: &'r [(usize, usize)],
    pub(super) id: usize,
}

impl fmt::Debug for Recorder<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Recorder")
            .field("operations", &self.pos)
            .finish_non_exhaustive()
    }
}

/// Writes each kernel argument into whole 8-byte words of a zeroed buffer sized for the
/// tuple.
pub(super) struct WordWriter<'v> {
    pub(super) words: &'v mut [u64],
    pub(super) at: usize,
}

impl ArgVisitor for WordWriter<'_> {
    type Error = Error;

    #[inline]
    fn visit<T: DeviceRepr>(&mut self, value: &T) -> Result<()> {
        let n = T::DEVICE_SIZE.div_ceil(8);
        let Some(dst) = self.words.get_mut(self.at..self.at + n) else {
            return Err(Error::InvalidArgument(
                "Region: argument words out of range",
            ));
        };
        // SAFETY: `dst` holds `n` zeroed words, at least `DEVICE_SIZE` bytes, not
        // overlapping `value`.
        unsafe { value.write_device_bytes(dst.as_mut_ptr().cast::<u8>()) };
        self.at += n;
        Ok(())
    }
}

/// Words a kernel argument tuple takes (each parameter padded to whole words).
pub(super) const fn tuple_words(params: &[crate::args::ParamSpec]) -> usize {
    let mut total = 0;
    let mut i = 0;
    while i < params.len() {
        total += params[i].size.div_ceil(8);
        i += 1;
    }
    total
}

impl<'a> Recorder<'_, 'a> {
    pub(super) fn same_context(&self, ctx: &Context, call: &'static str) -> Result<()> {
        self.ctx.ensure_same(ctx, call)
    }

    /// The current operation's argument words (the first `nwords` of the scratch
    /// buffer).
    #[inline]
    pub(super) fn words(&self, op: &Op<'_>) -> &[u64] {
        self.s.words.get(..op.key.nwords as usize).unwrap_or(&[])
    }

    /// Records `op` (its argument words in the scratch buffer, its attributes in `cfg`):
    /// sets the changed parameters on the entry being followed while it matches, else
    /// appends to the scratch recording.
    #[inline]
    pub(super) fn record(
        &mut self,
        op: Op<'a>,
        cfg: Option<&LaunchConfig<'_>>,
        host: Option<HostClosure>,
    ) {
        if let Some(i) = self.spec {
            if self
                .follow_kernel(i, &op, cfg)
                .unwrap_or_else(|| self.follow(i, &op))
            {
                if let Some(h) = host {
                    self.s.spec_hosts.push((self.pos as u32, h));
                }
                self.pos += 1;
                return;
            }
            self.hash = diverge(self.entries, self.s, i, self.pos);
            self.spec = None;
        }
        self.hash = op.key.hash_into(self.hash);
        if let Some(h) = host {
            self.s.rec.hosts.push((self.pos as u32, h));
        }
        let s = &mut *self.s;
        s.rec.push(
            op,
            s.words.get(..op.key.nwords as usize).unwrap_or(&[]),
            cfg,
        );
        self.pos += 1;
    }

    /// Whether kernel `op` matches operation `pos` of entry `i` (then its words are set
    /// on the node if they changed); `None` for an operation that is not a kernel, which
    /// [`follow`](Self::follow) decides. The common operation of a replay, checked
    /// inline: attributes other than one-bit ones are compared out of line.
    #[inline]
    pub(super) fn follow_kernel(
        &mut self,
        i: usize,
        op: &Op<'a>,
        cfg: Option<&LaunchConfig<'_>>,
    ) -> Option<bool> {
        if op.key.kind != Kind::Kernel {
            return None;
        }
        let Some(old) = self.entries.get(i).and_then(|e| e.rec.ops.get(self.pos)) else {
            return Some(false);
        };
        if self.stateful
            || old.key != op.key
            || !same_layout(old.layout, op.layout)
            || (op.key.attrs == FULL_ATTRS && !self.same_attributes(i, old, cfg))
        {
            return Some(false);
        }
        let stored = self.entries[i].rec.words.get(old.words());
        if stored.is_some_and(|w| same(w, self.words(op))) {
            return Some(true);
        }
        let set = self.set_words(i, op);
        Some(self.settle(i, set))
    }

    /// Whether `cfg` sets the attributes `old` (of entry `i`, with an equal key: the
    /// same number, each ID once) was recorded with: each stored one found with the
    /// same value.
    #[inline(never)]
    pub(super) fn same_attributes(
        &self,
        i: usize,
        old: &Op<'_>,
        cfg: Option<&LaunchConfig<'_>>,
    ) -> bool {
        let stored = self
            .entries
            .get(i)
            .and_then(|e| e.rec.attrs.get(old.attrs()));
        match (cfg, stored) {
            (Some(cfg), Some(attrs)) => attrs.iter().all(|a| cfg.sets_same(a, attr_eq)),
            _ => false,
        }
    }

    /// Whether memory or host-function operation `op` matches operation `pos` of entry
    /// `i`; if so, its changed parameters are set on the entry's executable and stored
    /// in the entry.
    #[inline(never)]
    pub(super) fn follow(&mut self, i: usize, op: &Op<'a>) -> bool {
        if self.stateful {
            return false;
        }
        let Some(e) = self.entries.get_mut(i) else {
            return false;
        };
        let (Some(old), Some(&node)) = (e.rec.ops.get(self.pos), e.nodes.get(self.pos)) else {
            return false;
        };
        if old.key != op.key {
            return false;
        }
        let set = match op.key.kind {
            // (Kernels are followed by `follow_kernel`.)
            Kind::Kernel => return false,
            // The key is the whole call: equal keys, nothing to set.
            Kind::HostFn | Kind::Nccl => return true,
            _ => {
                let r = set_memory(e.exec.as_raw(), node, old, op, self.ctx);
                if let (Ok(true), Some(o)) = (&r, e.rec.ops.get_mut(self.pos)) {
                    o.dst = op.dst;
                    o.src = op.src;
                    o.value = op.value;
                }
                r
            }
        };
        self.settle(i, set)
    }

    /// Sets kernel `op`'s argument words on node `pos` of entry `i` (whose structure it
    /// matches) and stores them in the entry.
    #[inline(never)]
    pub(super) fn set_words(&mut self, i: usize, op: &Op<'a>) -> Result<bool> {
        // (Callers matched the structure, so none of these is missing; if one were, the
        // entry is dropped and the execution captured, never launched with old words.)
        const MISSING: Error = Error::InvalidArgument("Region: recorded node missing");
        let new = self.s.words.get(..op.key.nwords as usize).unwrap_or(&[]);
        let e = self.entries.get_mut(i).ok_or(MISSING)?;
        let (Some(old), Some(&node), Some(f)) =
            (e.rec.ops.get(self.pos), e.nodes.get(self.pos), op.func)
        else {
            return Err(MISSING);
        };
        let stored = e
            .rec
            .words
            .get_mut(old.words())
            .filter(|w| w.len() == new.len())
            .ok_or(MISSING)?;
        let mut ptrs = [ptr::null_mut(); MAX_PARAMS];
        set_kernel(
            e.exec.as_raw(),
            node,
            f,
            &op.key.shape,
            new,
            op.layout,
            &mut ptrs,
        )?;
        stored.copy_from_slice(new);
        Ok(true)
    }

    /// Counts a setter's result: whether the operation is followed. A refused setter
    /// marks entry `i` to be dropped (the executable cannot take this execution's
    /// values: it is dropped at the end, and this execution captured).
    pub(super) fn settle(&mut self, i: usize, set: Result<bool>) -> bool {
        match set {
            Ok(changed) => {
                self.updated += u64::from(changed);
                true
            }
            Err(_) => {
                self.failed = Some(i);
                false
            }
        }
    }

    /// `cuLaunchKernelEx`, recorded: a kernel node launching `f` with `cfg`'s grid,
    /// block, dynamic shared memory and attributes (its stream is ignored: the region's
    /// stream runs it) and `args`, whose values are copied now. The region borrows `f`
    /// for `'a`. A launch with [`programmatic_stream_serialization`](LaunchConfig::programmatic_stream_serialization)
    /// becomes a programmatic edge from the operation before it.
    ///
    /// # Errors
    /// [`Error::ContextMismatch`] for a function of another context;
    /// [`Error::InvalidArgument`] for an attribute that names an event or that the driver
    /// writes back (programmatic and launch-completion events, device-updatable node), or
    /// more than [`MAX_PARAMS`] parameters; at capture, what
    /// [`launch`](crate::launch::launch) returns.
    ///
    /// # Safety
    /// As [`launch`](crate::launch::launch), for the execution this call belongs to: `A`
    /// matches the kernel, and the pointers in `args` are valid for what the kernel does
    /// when this execution's graph runs.
    #[doc(alias = "cuLaunchKernelEx")]
    #[inline]
    pub unsafe fn launch<A: KernelArgs>(
        &mut self,
        f: &'a Function,
        cfg: &LaunchConfig<'_>,
        args: &A,
    ) -> Result<()> {
        self.same_context(f.context(), "cuLaunchKernelEx")?;
        if cfg.names_event_or_node() {
            return Err(Error::InvalidArgument(
                "Region: event and device-node launch attributes are not recorded (use \
                 programmatic stream serialization; events with Recorder::record_event)",
            ));
        }
        if A::COUNT > MAX_PARAMS {
            return Err(Error::InvalidArgument("Region: too many kernel parameters"));
        }
        let total = const { tuple_words(A::PARAMS) };
        // The scratch buffer keeps its largest length: only the first `total` words
        // are this launch's.
        if self.s.words.len() < total {
            self.s.words.resize(total, 0);
        }
        let Some(words) = self.s.words.get_mut(..total) else {
            return Err(Error::InvalidArgument(
                "Region: argument words out of range",
            ));
        };
        words.fill(0);
        args.visit(&mut WordWriter { words, at: 0 })?;
        let op = Op {
            key: Key {
                func: f.as_raw() as usize,
                shape: [
                    cfg.grid.x,
                    cfg.grid.y,
                    cfg.grid.z,
                    cfg.block.x,
                    cfg.block.y,
                    cfg.block.z,
                    cfg.shared_mem_bytes,
                ],
                nattrs: cfg.num_attributes() as u32,
                nparams: A::PARAMS.len() as u32,
                nwords: total as u32,
                attrs: cfg.one_bit_attributes().unwrap_or(FULL_ATTRS),
                ..Key::new(Kind::Kernel)
            },
            func: Some(f),
            layout: A::PARAMS,
            ..Op::new(Kind::Kernel)
        };
        self.record(op, Some(cfg), None);
        Ok(())
    }

    /// A memory operation (no argument words).
    pub(super) fn record_memory(&mut self, op: Op<'a>) {
        self.record(op, None, None);
    }

    /// The region's context.
    #[cfg(all(feature = "nccl", unix))]
    pub(crate) fn region_context(&self) -> &Context {
        self.ctx
    }

    /// Records an NCCL call that `nccl::Comm` checked (its communicator and buffers
    /// borrowed for `'a` by the call's signature): `comm`, `shape` (kind, element type,
    /// reduction, root or peer), the count and the send and receive addresses.
    #[cfg(all(feature = "nccl", unix))]
    pub(crate) fn record_nccl(
        &mut self,
        comm: usize,
        shape: [u32; 4],
        count: usize,
        addrs: [u64; 2],
    ) {
        self.record_memory(Op {
            key: Key {
                func: comm,
                shape: [shape[0], shape[1], shape[2], shape[3], 0, 0, 0],
                bytes: count,
                nccl: addrs,
                ..Key::new(Kind::Nccl)
            },
            ..Op::new(Kind::Nccl)
        });
    }

    /// `cuMemsetD8Async`, recorded: every byte of `buf` set to `value`; the region
    /// borrows `buf` for `'a`.
    ///
    /// # Errors
    /// [`Error::ContextMismatch`] for a buffer of another context.
    #[doc(alias = "cuMemsetD8Async")]
    pub fn memset_d8<T: Copy + 'a>(
        &mut self,
        buf: impl Into<DeviceView<'a, T>>,
        value: u8,
    ) -> Result<()> {
        let buf = buf.into();
        buf.release().for_graph()?;
        self.same_context(buf.context(), "cuMemsetD8Async")?;
        self.record_memory(Op {
            key: Key {
                bytes: buf.size_bytes(),
                ..Key::new(Kind::MemsetD8)
            },
            dst: buf.as_raw(),
            value: u32::from(value),
            ..Op::new(Kind::MemsetD8)
        });
        Ok(())
    }

    /// `cuMemsetD32Async`, recorded: every 32-bit word of `buf` set to `value`; the
    /// region borrows `buf` for `'a`.
    ///
    /// # Errors
    /// [`Error::ContextMismatch`] for a buffer of another context;
    /// [`Error::InvalidArgument`] unless the size is a multiple of 4.
    #[doc(alias = "cuMemsetD32Async")]
    pub fn memset_d32<T: Copy + 'a>(
        &mut self,
        buf: impl Into<DeviceView<'a, T>>,
        value: u32,
    ) -> Result<()> {
        let buf = buf.into();
        buf.release().for_graph()?;
        self.same_context(buf.context(), "cuMemsetD32Async")?;
        if buf.size_bytes() % 4 != 0 {
            return Err(Error::InvalidArgument(
                "memset_d32 needs a size that is a multiple of 4 bytes",
            ));
        }
        self.record_memory(Op {
            key: Key {
                bytes: buf.size_bytes(),
                ..Key::new(Kind::MemsetD32)
            },
            dst: buf.as_raw(),
            value,
            ..Op::new(Kind::MemsetD32)
        });
        Ok(())
    }

    /// `cuMemcpyDtoDAsync`, recorded: `src` copied into `dst` (same length); the region
    /// borrows both for `'a`.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] when the lengths differ; [`Error::ContextMismatch`] for
    /// a buffer of another context.
    #[doc(alias = "cuMemcpyDtoDAsync")]
    pub fn copy<T: Copy + 'a>(
        &mut self,
        dst: impl Into<DeviceView<'a, T>>,
        src: impl Into<DeviceView<'a, T>>,
    ) -> Result<()> {
        let dst = dst.into();
        dst.release().for_graph()?;
        let src = src.into();
        src.release().for_graph()?;
        same_len(dst.len(), src.len())?;
        self.same_context(dst.context(), "cuMemcpyDtoDAsync")?;
        self.same_context(src.context(), "cuMemcpyDtoDAsync")?;
        self.record_memory(Op {
            key: Key {
                bytes: src.size_bytes(),
                ..Key::new(Kind::CopyDtoD)
            },
            dst: dst.as_raw(),
            src: src.as_raw(),
            ..Op::new(Kind::CopyDtoD)
        });
        Ok(())
    }

    /// `cuMemcpyHtoDAsync`, recorded: pinned host memory `src` copied into `dst` (same
    /// length); the region borrows both for `'a`, `src` shared, so no Rust code writes it
    /// while the region lives (as [`Capturing::copy_from_host`](crate::graph::Capturing::copy_from_host)).
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] when the lengths differ; [`Error::ContextMismatch`] for
    /// a device buffer of another context.
    #[doc(alias = "cuMemcpyHtoDAsync")]
    pub fn copy_from_host<T: Copy + 'a>(
        &mut self,
        dst: impl Into<DeviceView<'a, T>>,
        src: &'a PinnedHostBuffer<T>,
    ) -> Result<()> {
        let dst = dst.into();
        dst.release().for_graph()?;
        same_len(dst.len(), src.len())?;
        self.same_context(dst.context(), "cuMemcpyHtoDAsync")?;
        self.record_memory(Op {
            key: Key {
                bytes: dst.size_bytes(),
                ..Key::new(Kind::CopyHtoD)
            },
            dst: dst.as_raw(),
            src: src.as_ptr() as usize as u64,
            ..Op::new(Kind::CopyHtoD)
        });
        Ok(())
    }

    /// `cuMemcpyDtoHAsync`, recorded: `src` copied into the pinned host buffer bound as
    /// `dst` ([`Region::bind_host`]; same length). The region borrows `src` for `'a`;
    /// it owns `dst`'s buffer already. Read the result with [`Region::host`].
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a target of another region or one handed back;
    /// [`Error::LengthMismatch`] when the lengths differ; [`Error::ContextMismatch`] for
    /// a device buffer of another context.
    #[doc(alias = "cuMemcpyDtoHAsync")]
    pub fn copy_to_host<T: Pod + 'a>(
        &mut self,
        dst: HostTarget<T>,
        src: impl Into<DeviceView<'a, T>>,
    ) -> Result<()> {
        let src = src.into();
        src.release().for_graph()?;
        if dst.region != self.id {
            return Err(Error::InvalidArgument(
                "Region: a HostTarget bound to another region",
            ));
        }
        let &(addr, bytes) = self
            .sinks
            .get(dst.index)
            .ok_or(Error::InvalidArgument("Region: unknown HostTarget"))?;
        if addr == UNBOUND {
            return Err(Error::InvalidArgument(
                "Region: a HostTarget whose buffer was handed back (unbind_host)",
            ));
        }
        same_len(bytes / core::mem::size_of::<T>().max(1), src.len())?;
        self.same_context(src.context(), "cuMemcpyDtoHAsync")?;
        self.record_memory(Op {
            key: Key {
                bytes: src.size_bytes(),
                ..Key::new(Kind::CopyDtoH)
            },
            dst: addr as u64,
            src: src.as_raw(),
            ..Op::new(Kind::CopyDtoH)
        });
        Ok(())
    }

    /// `cuLaunchHostFunc`, recorded: a host node running `f`, owned by the graph (a CUDA
    /// user object, as [`Capturing::host_fn`](crate::graph::Capturing::host_fn)). A zero-sized
    /// closure (no captured state) replays with the graph; one with state makes this
    /// execution a capture. `f` must not call CUDA functions; a panic aborts.
    ///
    /// # Errors
    /// At capture, driver errors.
    #[doc(alias = "cuLaunchHostFunc")]
    pub fn host_fn<F>(&mut self, f: F) -> Result<()>
    where
        F: Fn() + Send + Sync + 'static,
    {
        if core::mem::size_of::<F>() != 0 {
            self.stateful = true;
        }
        // A box of a zero-sized closure allocates nothing.
        let boxed: HostClosure = Box::new(f);
        let op = Op {
            key: Key {
                host: Some(TypeId::of::<F>()),
                ..Key::new(Kind::HostFn)
            },
            ..Op::new(Kind::HostFn)
        };
        self.record(op, None, Some(boxed));
        Ok(())
    }

    /// `cuStreamWaitEvent`: the region's work waits for `event`'s latest record (queued
    /// at once on the region's stream, so it orders the whole execution, also what was
    /// recorded before it).
    ///
    /// # Errors
    /// [`Error::ContextMismatch`] for an event of another context; driver errors.
    #[doc(alias = "cuStreamWaitEvent")]
    pub fn wait_event(&mut self, event: &Event) -> Result<()> {
        self.same_context(event.context(), "cuStreamWaitEvent")?;
        // SAFETY: a plain wait on a stream that is not capturing (the region's stream is
        // borrowed exclusively by the run, and a capture would hold it too), so it is
        // an ordinary wait, not a node naming the event.
        unsafe {
            self.stream
                .wait_event_unchecked(event, EventWaitFlags::empty())
        }
    }

    /// `cuEventRecord`, recorded: `event` is recorded on the region's stream after the
    /// execution's graph (so it completes after all of the execution's work, also what
    /// was recorded after it). The region borrows `event` for `'a`.
    ///
    /// # Errors
    /// [`Error::ContextMismatch`] for an event of another context.
    #[doc(alias = "cuEventRecord")]
    pub fn record_event(&mut self, event: &'a Event) -> Result<()> {
        self.same_context(event.context(), "cuEventRecord")?;
        self.s.records.push(event);
        Ok(())
    }

    /// How many operations this execution recorded so far.
    #[must_use]
    pub fn len(&self) -> usize {
        self.pos
    }

    /// Whether it recorded none.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.pos == 0
    }
}
