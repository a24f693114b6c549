//! Work queued across contexts, against a mock driver that models several contexts and
//! what `cuMemFree` waits for, on the CPU and under Miri
//! (`cargo +nightly miri test --test mock_contexts --target-dir target/miri`).
//!
//! The hazard: `cuMemFree` in context A waits for the pending work of context A only. A
//! memset or copy queued on a stream of context B that writes A's memory may still run
//! after the free, when the address has been handed out again, and it then corrupts the
//! new allocation (`hw_promises` shows it on an H100). The crate's async calls therefore
//! refuse a stream (or source buffer) of another context with `Error::ContextMismatch`.
//!
//! The model, kept to what the checks need:
//! - Device memory is a map from address to bytes. `cuMemAlloc` reuses the lowest freed
//!   block that fits before it takes fresh addresses, as the driver hands a freed
//!   address out again; each allocation records its context and a generation number.
//! - A stream belongs to the context current when it was made and holds a queue of
//!   pending operations (async memsets and copies, graph launches). Nothing runs when it
//!   is queued: a queue runs at `cuStreamSynchronize`, at `cuCtxSynchronize` of its
//!   context, at `cuMemFree` in its context (which drains that context's queues and no
//!   other's), when its context is destroyed, or when a check calls
//!   [`mock::run_pending`] (the other context's work running later on its own).
//! - An operation names the allocation generations it was queued against. When it runs
//!   and finds another generation there (or nothing), the mock records a
//!   [`mock::UseAfterFree`] and still writes, as the GPU would, so the corruption of a
//!   new allocation can be read back.
//! - Synchronous memsets and copies run at once. The default streams take no queued
//!   work (the checks use non-blocking streams of their own).
//! - Stricter than the driver, so that a wrong binding shows up: a call on a stream
//!   needs the stream's context current, and `cuMemFree` needs the allocation's context
//!   current. Calls that need a context fail on a thread without one, or when it was
//!   destroyed (a created one) or released by its last reference (the primary one).
//!
//! As in `mock_driver.rs`, the table is process-wide, so one `#[test]` runs the checks
//! in order; handles are integers without provenance and nothing is loaded (no FFI, no
//! dlopen). Unsafe code is the mock's entries (raw pointers of the caller, trusted as
//! the driver trusts them) and the raw driver calls of the first two checks.

#![cfg(not(feature = "linked"))]

use std::ptr;

use cudadrv::graph::InstantiateFlags;
use cudadrv::{Context, ContextFlags, Device, DeviceBuffer, Error, Graph, Stream};
use cudadrv_sys::CUresult;
use mock::UseAfterFree;

/// The mock driver: the table's entries and the state they share.
mod mock {
    use std::cell::RefCell;
    use std::collections::{BTreeMap, BTreeSet, VecDeque};
    use std::ffi::{c_int, c_uchar, c_uint, c_ulonglong, c_void};
    use std::sync::{Mutex, MutexGuard};

    use cudadrv_sys::{
        CUDA_MEMSET_NODE_PARAMS, CUcontext, CUctxCreateParams, CUdevice, CUdeviceptr, CUgraph,
        CUgraphExec, CUgraphNode, CUresult, CUstream, CUstreamCaptureStatus,
    };

    const OK: CUresult = CUresult::CUDA_SUCCESS;
    /// The handle of device 0's primary context.
    const PRIMARY: usize = 0xC000;
    /// The first device address; blocks are multiples of 256 bytes.
    const HEAP: u64 = 0x7000_0000;
    const BLOCK: usize = 256;

    /// A range of device memory as an operation was given it: `generation` is the
    /// allocation that held it then.
    #[derive(Clone, Copy, Debug)]
    struct Target {
        addr: u64,
        len: usize,
        generation: u64,
    }

    #[derive(Clone, Debug)]
    enum Write {
        Fill8(u8),
        Fill32(u32),
        Copy(Target),
        Bytes(Vec<u8>),
    }

    /// One memset or copy, queued or run at once.
    #[derive(Clone, Debug)]
    struct Op {
        /// The driver call that queued it (`cuMemsetD32Async`, `cuGraphLaunch`).
        call: &'static str,
        dst: Target,
        write: Write,
    }

    /// A queued operation that ran on memory that was no longer the allocation it was
    /// queued against.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct UseAfterFree {
        /// The driver call that queued the operation.
        pub call: &'static str,
        /// The stream it ran on.
        pub stream: usize,
        /// The address it read or wrote.
        pub addr: u64,
        /// The allocation generation it was queued against.
        pub expected: u64,
        /// The generation there when it ran (`None`: no allocation).
        pub found: Option<u64>,
    }

    struct Allocation {
        ctx: usize,
        generation: u64,
        bytes: Vec<u8>,
        /// The block's size; a freed block keeps it for reuse.
        capacity: usize,
    }

    struct StreamState {
        ctx: usize,
        queue: VecDeque<Op>,
        /// Destroyed with work pending: the work still runs (as on the driver), then the
        /// stream goes.
        destroyed: bool,
    }

    /// A graph or an executable graph: its context and its memset nodes.
    struct GraphState {
        ctx: usize,
        nodes: Vec<Op>,
    }

    struct World {
        next_handle: usize,
        next_generation: u64,
        primary_refs: usize,
        /// Live contexts made by `cuCtxCreate`.
        created: BTreeSet<usize>,
        memory: BTreeMap<u64, Allocation>,
        /// Freed block address -> size, reused lowest address first.
        free_blocks: BTreeMap<u64, usize>,
        /// The next address never handed out.
        top: u64,
        streams: BTreeMap<usize, StreamState>,
        graphs: BTreeMap<usize, GraphState>,
        execs: BTreeMap<usize, GraphState>,
        use_after_free: Vec<UseAfterFree>,
        /// Allocations and streams still alive when their context went.
        left_at_destroy: Vec<String>,
    }

    static WORLD: Mutex<World> = Mutex::new(World {
        next_handle: 0x1000,
        next_generation: 0,
        primary_refs: 0,
        created: BTreeSet::new(),
        memory: BTreeMap::new(),
        free_blocks: BTreeMap::new(),
        top: HEAP,
        streams: BTreeMap::new(),
        graphs: BTreeMap::new(),
        execs: BTreeMap::new(),
        use_after_free: Vec::new(),
        left_at_destroy: Vec::new(),
    });

    /// Every entry called, by name, in order.
    static CALLS: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());

    thread_local! {
        /// The calling thread's context stack; the last one is current.
        static STACK: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
    }

    /// Locks, ignoring poison (a failed check must not hide the next one).
    fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
        m.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn current() -> usize {
        STACK.with(|s| s.borrow().last().copied().unwrap_or(0))
    }

    fn as_handle<T>(h: usize) -> *mut T {
        std::ptr::without_provenance_mut(h)
    }

    /// The null handle and the two default-stream handles.
    fn is_default_stream(s: CUstream) -> bool {
        s.is_null() || s == cudadrv_sys::CU_STREAM_LEGACY || s == cudadrv_sys::CU_STREAM_PER_THREAD
    }

    impl World {
        fn handle(&mut self) -> usize {
            self.next_handle += 0x10;
            self.next_handle
        }

        fn alive(&self, ctx: usize) -> bool {
            (ctx == PRIMARY && self.primary_refs > 0) || self.created.contains(&ctx)
        }

        /// The calling thread's current context, if it is alive.
        fn current(&self) -> Result<usize, CUresult> {
            match current() {
                0 => Err(CUresult::CUDA_ERROR_INVALID_CONTEXT),
                ctx if self.alive(ctx) => Ok(ctx),
                _ => Err(CUresult::CUDA_ERROR_CONTEXT_IS_DESTROYED),
            }
        }

        /// A live stream of the current context.
        fn stream(&mut self, s: CUstream) -> Result<&mut StreamState, CUresult> {
            let ctx = self.current()?;
            match self.streams.get_mut(&s.addr()) {
                Some(st) if !st.destroyed && st.ctx == ctx => Ok(st),
                Some(st) if !st.destroyed => Err(CUresult::CUDA_ERROR_INVALID_CONTEXT),
                _ => Err(CUresult::CUDA_ERROR_INVALID_HANDLE),
            }
        }

        /// The base address of the allocation holding `addr..addr + len`.
        fn locate(&self, addr: u64, len: usize) -> Option<u64> {
            let (&base, a) = self.memory.range(..=addr).next_back()?;
            (addr + len as u64 <= base + a.bytes.len() as u64).then_some(base)
        }

        /// `addr..addr + len` as a target in a live allocation, or the driver's error.
        fn target(&self, addr: u64, len: usize) -> Result<Target, CUresult> {
            let base = self
                .locate(addr, len)
                .ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)?;
            Ok(Target {
                addr,
                len,
                generation: self.memory[&base].generation,
            })
        }

        fn alloc(&mut self, ctx: usize, bytes: usize) -> u64 {
            let wanted = bytes.next_multiple_of(BLOCK);
            let reuse = self
                .free_blocks
                .iter()
                .find(|&(_, &capacity)| capacity >= wanted)
                .map(|(&addr, &capacity)| (addr, capacity));
            let (addr, capacity) = match reuse {
                Some((addr, capacity)) => {
                    self.free_blocks.remove(&addr);
                    (addr, capacity)
                }
                None => {
                    self.top += wanted as u64;
                    (self.top - wanted as u64, wanted)
                }
            };
            self.next_generation += 1;
            let a = Allocation {
                ctx,
                generation: self.next_generation,
                bytes: vec![0; bytes],
                capacity,
            };
            self.memory.insert(addr, a);
            addr
        }

        /// Forgets an allocation; its block is handed out again.
        fn release(&mut self, addr: u64) {
            if let Some(a) = self.memory.remove(&addr) {
                self.free_blocks.insert(addr, a.capacity);
            }
        }

        /// Where `t` is now (the allocation's base), recording a use after free when it
        /// is not the allocation `t` was queued against.
        fn resolve(&mut self, stream: usize, call: &'static str, t: Target) -> Option<u64> {
            let base = self.locate(t.addr, t.len);
            let found = base.map(|b| self.memory[&b].generation);
            if found != Some(t.generation) {
                self.use_after_free.push(UseAfterFree {
                    call,
                    stream,
                    addr: t.addr,
                    expected: t.generation,
                    found,
                });
            }
            base
        }

        /// Runs one operation, on whatever memory is at its addresses now.
        fn run(&mut self, stream: usize, op: Op) {
            let data = match op.write {
                Write::Fill8(v) => vec![v; op.dst.len],
                Write::Fill32(v) => v.to_ne_bytes().repeat(op.dst.len / 4),
                Write::Bytes(bytes) => bytes,
                Write::Copy(src) => {
                    // Nothing there to read: the copy faults and writes nothing.
                    let Some(base) = self.resolve(stream, op.call, src) else {
                        return;
                    };
                    let at = (src.addr - base) as usize;
                    self.memory[&base].bytes[at..at + src.len].to_vec()
                }
            };
            if let Some(base) = self.resolve(stream, op.call, op.dst) {
                let at = (op.dst.addr - base) as usize;
                let a = self.memory.get_mut(&base).expect("resolved");
                a.bytes[at..at + data.len()].copy_from_slice(&data);
            }
        }

        /// Runs a stream's queue; a destroyed stream goes once it is empty.
        fn drain_stream(&mut self, id: usize) {
            while let Some(op) = self.streams.get_mut(&id).and_then(|s| s.queue.pop_front()) {
                self.run(id, op);
            }
            if self.streams.get(&id).is_some_and(|s| s.destroyed) {
                self.streams.remove(&id);
            }
        }

        fn streams_of(&self, ctx: usize) -> Vec<usize> {
            let of_ctx = self.streams.iter().filter(|(_, s)| s.ctx == ctx);
            of_ctx.map(|(&id, _)| id).collect()
        }

        /// Runs the queues of every stream of `ctx`, and of no other context.
        fn drain(&mut self, ctx: usize) {
            for id in self.streams_of(ctx) {
                self.drain_stream(id);
            }
        }

        /// A context goes (`cuCtxDestroy`, last primary release): its work runs, and
        /// what is left of it is noted and freed.
        fn retire(&mut self, ctx: usize) {
            self.drain(ctx);
            for id in self.streams_of(ctx) {
                self.streams.remove(&id);
                self.left_at_destroy
                    .push(format!("stream {id:#x} of context {ctx:#x}"));
            }
            let of_ctx = self.memory.iter().filter(|(_, a)| a.ctx == ctx);
            let memory: Vec<u64> = of_ctx.map(|(&addr, _)| addr).collect();
            for addr in memory {
                self.release(addr);
                self.left_at_destroy
                    .push(format!("allocation {addr:#x} of context {ctx:#x}"));
            }
        }

        /// Queues an operation of `call` on `s`, a stream of the current context.
        fn enqueue(
            &mut self,
            s: CUstream,
            call: &'static str,
            dst: Target,
            write: Write,
        ) -> Result<(), CUresult> {
            if is_default_stream(s) {
                self.current()?;
                return Err(CUresult::CUDA_ERROR_NOT_SUPPORTED);
            }
            let op = Op { call, dst, write };
            self.stream(s)?.queue.push_back(op);
            Ok(())
        }

        /// Runs a synchronous operation of `call` now, in the current context.
        fn now(&mut self, call: &'static str, dst: Target, write: Write) -> Result<(), CUresult> {
            self.current()?;
            self.run(0, Op { call, dst, write });
            Ok(())
        }
    }

    /// Logs the entry and runs `f` on the locked state.
    fn entry(name: &'static str, f: impl FnOnce(&mut World) -> Result<(), CUresult>) -> CUresult {
        lock(&CALLS).push(name);
        match f(&mut lock(&WORLD)) {
            Ok(()) => OK,
            Err(code) => code,
        }
    }

    /// Writes an entry's result through its out-pointer.
    ///
    /// # Safety
    /// `out` is null or valid for a write of `T` (the caller's side of the C contract).
    unsafe fn put<T>(out: *mut T, value: T) -> Result<(), CUresult> {
        if out.is_null() {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: non-null, and valid for writes (this function's contract).
        unsafe { out.write(value) };
        Ok(())
    }

    // -----------------------------------------------------------------------------------
    // Initialization, devices and contexts.

    unsafe extern "C" fn cu_init(_flags: c_uint) -> CUresult {
        entry("cuInit", |_| Ok(()))
    }
    unsafe extern "C" fn cu_driver_get_version(v: *mut c_int) -> CUresult {
        // SAFETY: the caller's out-pointer.
        entry("cuDriverGetVersion", |_| unsafe { put(v, 13000) })
    }
    unsafe extern "C" fn cu_device_get(d: *mut CUdevice, ordinal: c_int) -> CUresult {
        entry("cuDeviceGet", |_| match ordinal {
            // SAFETY: the caller's out-pointer.
            0 => unsafe { put(d, 0) },
            _ => Err(CUresult::CUDA_ERROR_INVALID_DEVICE),
        })
    }
    unsafe extern "C" fn cu_primary_retain(ctx: *mut CUcontext, dev: CUdevice) -> CUresult {
        entry("cuDevicePrimaryCtxRetain", |w| {
            if dev != 0 {
                return Err(CUresult::CUDA_ERROR_INVALID_DEVICE);
            }
            // SAFETY: the caller's out-pointer.
            unsafe { put(ctx, as_handle(PRIMARY)) }?;
            w.primary_refs += 1;
            Ok(())
        })
    }
    unsafe extern "C" fn cu_primary_release(dev: CUdevice) -> CUresult {
        entry("cuDevicePrimaryCtxRelease", |w| {
            if dev != 0 || w.primary_refs == 0 {
                return Err(CUresult::CUDA_ERROR_INVALID_CONTEXT);
            }
            w.primary_refs -= 1;
            if w.primary_refs == 0 {
                w.retire(PRIMARY);
            }
            Ok(())
        })
    }
    unsafe extern "C" fn cu_ctx_create(
        ctx: *mut CUcontext,
        _params: *mut CUctxCreateParams,
        _flags: c_uint,
        dev: CUdevice,
    ) -> CUresult {
        entry("cuCtxCreate", |w| {
            if dev != 0 {
                return Err(CUresult::CUDA_ERROR_INVALID_DEVICE);
            }
            let h = w.handle();
            // SAFETY: the caller's out-pointer.
            unsafe { put(ctx, as_handle(h)) }?;
            w.created.insert(h);
            // The new context is pushed on the calling thread's stack.
            STACK.with(|s| s.borrow_mut().push(h));
            Ok(())
        })
    }
    unsafe extern "C" fn cu_ctx_destroy(ctx: CUcontext) -> CUresult {
        entry("cuCtxDestroy", |w| {
            if !w.created.remove(&ctx.addr()) {
                return Err(CUresult::CUDA_ERROR_INVALID_CONTEXT);
            }
            w.retire(ctx.addr());
            // Current on this thread: popped, as by cuCtxPopCurrent.
            STACK.with(|s| {
                let mut s = s.borrow_mut();
                if s.last() == Some(&ctx.addr()) {
                    s.pop();
                }
            });
            Ok(())
        })
    }
    unsafe extern "C" fn cu_ctx_get_current(ctx: *mut CUcontext) -> CUresult {
        // SAFETY: the caller's out-pointer.
        entry("cuCtxGetCurrent", |_| unsafe {
            put(ctx, as_handle(current()))
        })
    }
    unsafe extern "C" fn cu_ctx_set_current(ctx: CUcontext) -> CUresult {
        entry("cuCtxSetCurrent", |_| {
            STACK.with(|s| {
                let mut s = s.borrow_mut();
                s.pop();
                if !ctx.is_null() {
                    s.push(ctx.addr());
                }
            });
            Ok(())
        })
    }
    unsafe extern "C" fn cu_ctx_push(ctx: CUcontext) -> CUresult {
        entry("cuCtxPushCurrent", |_| {
            STACK.with(|s| s.borrow_mut().push(ctx.addr()));
            Ok(())
        })
    }
    unsafe extern "C" fn cu_ctx_pop(ctx: *mut CUcontext) -> CUresult {
        entry("cuCtxPopCurrent", |_| {
            let popped = STACK.with(|s| s.borrow_mut().pop());
            let popped = popped.ok_or(CUresult::CUDA_ERROR_INVALID_CONTEXT)?;
            if !ctx.is_null() {
                // SAFETY: the caller's out-pointer.
                unsafe { put(ctx, as_handle(popped)) }?;
            }
            Ok(())
        })
    }
    unsafe extern "C" fn cu_ctx_synchronize() -> CUresult {
        entry("cuCtxSynchronize", |w| {
            let ctx = w.current()?;
            w.drain(ctx);
            Ok(())
        })
    }

    // -----------------------------------------------------------------------------------
    // Streams.

    unsafe extern "C" fn cu_stream_create(s: *mut CUstream, _flags: c_uint) -> CUresult {
        entry("cuStreamCreate", |w| {
            let ctx = w.current()?;
            let h = w.handle();
            // SAFETY: the caller's out-pointer.
            unsafe { put(s, as_handle(h)) }?;
            let state = StreamState {
                ctx,
                queue: VecDeque::new(),
                destroyed: false,
            };
            w.streams.insert(h, state);
            Ok(())
        })
    }
    unsafe extern "C" fn cu_stream_destroy(s: CUstream) -> CUresult {
        entry("cuStreamDestroy", |w| {
            let st = w.stream(s)?;
            st.destroyed = true;
            if st.queue.is_empty() {
                w.streams.remove(&s.addr());
            }
            Ok(())
        })
    }
    unsafe extern "C" fn cu_stream_synchronize(s: CUstream) -> CUresult {
        entry("cuStreamSynchronize", |w| {
            if is_default_stream(s) {
                // Synchronous work already ran; the default streams queue nothing.
                return w.current().map(drop);
            }
            w.stream(s)?;
            w.drain_stream(s.addr());
            Ok(())
        })
    }
    unsafe extern "C" fn cu_stream_query(s: CUstream) -> CUresult {
        entry("cuStreamQuery", |w| {
            if is_default_stream(s) {
                return w.current().map(drop);
            }
            match w.stream(s)?.queue.is_empty() {
                true => Ok(()),
                false => Err(CUresult::CUDA_ERROR_NOT_READY),
            }
        })
    }
    unsafe extern "C" fn cu_stream_is_capturing(
        s: CUstream,
        status: *mut CUstreamCaptureStatus,
    ) -> CUresult {
        entry("cuStreamIsCapturing", |w| {
            if is_default_stream(s) {
                w.current()?;
            } else {
                w.stream(s)?;
            }
            let none = CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
            // SAFETY: the caller's out-pointer.
            unsafe { put(status, none) }
        })
    }

    // -----------------------------------------------------------------------------------
    // Memory.

    unsafe extern "C" fn cu_mem_alloc(p: *mut CUdeviceptr, bytes: usize) -> CUresult {
        entry("cuMemAlloc", |w| {
            let ctx = w.current()?;
            if bytes == 0 {
                return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
            }
            let addr = w.alloc(ctx, bytes);
            // SAFETY: the caller's out-pointer.
            unsafe { put(p, addr) }.inspect_err(|_| w.release(addr))
        })
    }
    unsafe extern "C" fn cu_mem_free(p: CUdeviceptr) -> CUresult {
        entry("cuMemFree", |w| {
            let ctx = w.current()?;
            let Some(a) = w.memory.get(&p) else {
                return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
            };
            if a.ctx != ctx {
                return Err(CUresult::CUDA_ERROR_INVALID_CONTEXT);
            }
            // Waits for the pending work of its own context, and only of it.
            w.drain(ctx);
            w.release(p);
            Ok(())
        })
    }
    unsafe extern "C" fn cu_memset_d8(p: CUdeviceptr, v: c_uchar, n: usize) -> CUresult {
        entry("cuMemsetD8", |w| {
            w.now("cuMemsetD8", w.target(p, n)?, Write::Fill8(v))
        })
    }
    unsafe extern "C" fn cu_memset_d32(p: CUdeviceptr, v: c_uint, n: usize) -> CUresult {
        entry("cuMemsetD32", |w| {
            w.now("cuMemsetD32", w.target(p, n * 4)?, Write::Fill32(v))
        })
    }
    unsafe extern "C" fn cu_memset_d8_async(
        p: CUdeviceptr,
        v: c_uchar,
        n: usize,
        s: CUstream,
    ) -> CUresult {
        entry("cuMemsetD8Async", |w| {
            w.enqueue(s, "cuMemsetD8Async", w.target(p, n)?, Write::Fill8(v))
        })
    }
    unsafe extern "C" fn cu_memset_d32_async(
        p: CUdeviceptr,
        v: c_uint,
        n: usize,
        s: CUstream,
    ) -> CUresult {
        entry("cuMemsetD32Async", |w| {
            w.enqueue(s, "cuMemsetD32Async", w.target(p, n * 4)?, Write::Fill32(v))
        })
    }
    unsafe extern "C" fn cu_memcpy_htod(
        dst: CUdeviceptr,
        src: *const c_void,
        n: usize,
    ) -> CUresult {
        entry("cuMemcpyHtoD", |w| {
            let dst = w.target(dst, n)?;
            // SAFETY: the caller's `n` readable bytes at `src`.
            let bytes = unsafe { std::slice::from_raw_parts(src.cast::<u8>(), n) }.to_vec();
            w.now("cuMemcpyHtoD", dst, Write::Bytes(bytes))
        })
    }
    unsafe extern "C" fn cu_memcpy_dtoh(dst: *mut c_void, src: CUdeviceptr, n: usize) -> CUresult {
        entry("cuMemcpyDtoH", |w| {
            w.current()?;
            let base = w.locate(src, n).ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)?;
            let at = (src - base) as usize;
            let from = &w.memory[&base].bytes[at..at + n];
            // SAFETY: the caller's `n` writable bytes at `dst`, not device memory.
            unsafe { std::ptr::copy_nonoverlapping(from.as_ptr(), dst.cast::<u8>(), n) };
            Ok(())
        })
    }
    unsafe extern "C" fn cu_memcpy_dtod(dst: CUdeviceptr, src: CUdeviceptr, n: usize) -> CUresult {
        entry("cuMemcpyDtoD", |w| {
            let write = Write::Copy(w.target(src, n)?);
            w.now("cuMemcpyDtoD", w.target(dst, n)?, write)
        })
    }
    unsafe extern "C" fn cu_memcpy_dtod_async(
        dst: CUdeviceptr,
        src: CUdeviceptr,
        n: usize,
        s: CUstream,
    ) -> CUresult {
        entry("cuMemcpyDtoDAsync", |w| {
            let write = Write::Copy(w.target(src, n)?);
            w.enqueue(s, "cuMemcpyDtoDAsync", w.target(dst, n)?, write)
        })
    }

    // -----------------------------------------------------------------------------------
    // Graphs: memset nodes only; a launch queues them on the stream.

    unsafe extern "C" fn cu_graph_create(g: *mut CUgraph, _flags: c_uint) -> CUresult {
        entry("cuGraphCreate", |w| {
            let ctx = w.current()?;
            let h = w.handle();
            // SAFETY: the caller's out-pointer.
            unsafe { put(g, as_handle(h)) }?;
            let nodes = Vec::new();
            w.graphs.insert(h, GraphState { ctx, nodes });
            Ok(())
        })
    }
    unsafe extern "C" fn cu_graph_destroy(g: CUgraph) -> CUresult {
        entry("cuGraphDestroy", |w| match w.graphs.remove(&g.addr()) {
            Some(_) => Ok(()),
            None => Err(CUresult::CUDA_ERROR_INVALID_VALUE),
        })
    }
    unsafe extern "C" fn cu_graph_add_memset_node(
        node: *mut CUgraphNode,
        g: CUgraph,
        _deps: *const CUgraphNode,
        _count: usize,
        params: *const CUDA_MEMSET_NODE_PARAMS,
        _ctx: CUcontext,
    ) -> CUresult {
        entry("cuGraphAddMemsetNode", |w| {
            // SAFETY: the caller's parameters, valid for reads.
            let p = unsafe { params.read() };
            let write = match (p.elementSize, p.height) {
                (1, 1) => Write::Fill8(p.value as u8),
                (4, 1) => Write::Fill32(p.value),
                _ => return Err(CUresult::CUDA_ERROR_NOT_SUPPORTED),
            };
            let dst = w.target(p.dst, p.width * p.elementSize as usize)?;
            let h = w.handle();
            let graph = w
                .graphs
                .get_mut(&g.addr())
                .ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)?;
            let call = "cuGraphLaunch";
            graph.nodes.push(Op { call, dst, write });
            // SAFETY: the caller's out-pointer.
            unsafe { put(node, as_handle(h)) }
        })
    }
    unsafe extern "C" fn cu_graph_instantiate(
        exec: *mut CUgraphExec,
        g: CUgraph,
        _flags: c_ulonglong,
    ) -> CUresult {
        entry("cuGraphInstantiate", |w| {
            w.current()?;
            let graph = w
                .graphs
                .get(&g.addr())
                .ok_or(CUresult::CUDA_ERROR_INVALID_VALUE)?;
            let state = GraphState {
                ctx: graph.ctx,
                nodes: graph.nodes.clone(),
            };
            let h = w.handle();
            // SAFETY: the caller's out-pointer.
            unsafe { put(exec, as_handle(h)) }?;
            w.execs.insert(h, state);
            Ok(())
        })
    }
    unsafe extern "C" fn cu_graph_exec_destroy(exec: CUgraphExec) -> CUresult {
        entry("cuGraphExecDestroy", |w| {
            match w.execs.remove(&exec.addr()) {
                Some(_) => Ok(()),
                None => Err(CUresult::CUDA_ERROR_INVALID_VALUE),
            }
        })
    }
    /// Queues the nodes on `s`. Like the driver (see `hw_promises`), the mock takes a
    /// stream of another context than the graph's: refusing it is the crate's job.
    unsafe extern "C" fn cu_graph_launch(exec: CUgraphExec, s: CUstream) -> CUresult {
        entry("cuGraphLaunch", |w| {
            let nodes = match w.execs.get(&exec.addr()) {
                Some(e) => e.nodes.clone(),
                None => return Err(CUresult::CUDA_ERROR_INVALID_VALUE),
            };
            nodes
                .into_iter()
                .try_for_each(|op| w.enqueue(s, op.call, op.dst, op.write))
        })
    }
    unsafe extern "C" fn cu_graph_upload(exec: CUgraphExec, s: CUstream) -> CUresult {
        entry("cuGraphUpload", |w| {
            if !w.execs.contains_key(&exec.addr()) {
                return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
            }
            w.stream(s).map(drop)
        })
    }

    cuda_workspace::mock_entries! {
        /// The mocked entries by name (null for the others: the crate reports a missing
        /// symbol).
        fn mock_entry {
            "cuInit" => cu_init as unsafe extern "C" fn(_) -> _,
            "cuDriverGetVersion" => cu_driver_get_version as unsafe extern "C" fn(_) -> _,
            "cuDeviceGet" => cu_device_get as unsafe extern "C" fn(_, _) -> _,
            "cuDevicePrimaryCtxRetain" => cu_primary_retain as unsafe extern "C" fn(_, _) -> _,
            "cuDevicePrimaryCtxRelease" => cu_primary_release as unsafe extern "C" fn(_) -> _,
            // The CUDA 12.5+ signature (cuCtxCreate_v4); the table names it cuCtxCreate.
            "cuCtxCreate" => cu_ctx_create as unsafe extern "C" fn(_, _, _, _) -> _,
            "cuCtxDestroy" => cu_ctx_destroy as unsafe extern "C" fn(_) -> _,
            "cuCtxGetCurrent" => cu_ctx_get_current as unsafe extern "C" fn(_) -> _,
            "cuCtxSetCurrent" => cu_ctx_set_current as unsafe extern "C" fn(_) -> _,
            "cuCtxPushCurrent" => cu_ctx_push as unsafe extern "C" fn(_) -> _,
            "cuCtxPopCurrent" => cu_ctx_pop as unsafe extern "C" fn(_) -> _,
            "cuCtxSynchronize" => cu_ctx_synchronize as unsafe extern "C" fn() -> _,
            "cuStreamCreate" => cu_stream_create as unsafe extern "C" fn(_, _) -> _,
            "cuStreamDestroy" => cu_stream_destroy as unsafe extern "C" fn(_) -> _,
            "cuStreamSynchronize" => cu_stream_synchronize as unsafe extern "C" fn(_) -> _,
            "cuStreamQuery" => cu_stream_query as unsafe extern "C" fn(_) -> _,
            "cuStreamIsCapturing" => cu_stream_is_capturing as unsafe extern "C" fn(_, _) -> _,
            "cuMemAlloc" => cu_mem_alloc as unsafe extern "C" fn(_, _) -> _,
            "cuMemFree" => cu_mem_free as unsafe extern "C" fn(_) -> _,
            "cuMemsetD8" => cu_memset_d8 as unsafe extern "C" fn(_, _, _) -> _,
            "cuMemsetD32" => cu_memset_d32 as unsafe extern "C" fn(_, _, _) -> _,
            "cuMemsetD8Async" => cu_memset_d8_async as unsafe extern "C" fn(_, _, _, _) -> _,
            "cuMemsetD32Async" => cu_memset_d32_async as unsafe extern "C" fn(_, _, _, _) -> _,
            "cuMemcpyHtoD" => cu_memcpy_htod as unsafe extern "C" fn(_, _, _) -> _,
            "cuMemcpyDtoH" => cu_memcpy_dtoh as unsafe extern "C" fn(_, _, _) -> _,
            "cuMemcpyDtoD" => cu_memcpy_dtod as unsafe extern "C" fn(_, _, _) -> _,
            "cuMemcpyDtoDAsync" => cu_memcpy_dtod_async as unsafe extern "C" fn(_, _, _, _) -> _,
            "cuGraphCreate" => cu_graph_create as unsafe extern "C" fn(_, _) -> _,
            "cuGraphDestroy" => cu_graph_destroy as unsafe extern "C" fn(_) -> _,
            "cuGraphAddMemsetNode" =>
                cu_graph_add_memset_node as unsafe extern "C" fn(_, _, _, _, _, _) -> _,
            "cuGraphInstantiate" => cu_graph_instantiate as unsafe extern "C" fn(_, _, _) -> _,
            "cuGraphExecDestroy" => cu_graph_exec_destroy as unsafe extern "C" fn(_) -> _,
            "cuGraphLaunch" => cu_graph_launch as unsafe extern "C" fn(_, _) -> _,
            "cuGraphUpload" => cu_graph_upload as unsafe extern "C" fn(_, _) -> _,
        }
    }

    // -----------------------------------------------------------------------------------
    // What the checks use.

    /// Installs the mock as the process-wide driver table.
    pub fn install() {
        // SAFETY: every non-null pointer `mock_entry` returns is a function of this program
        // with the C signature of the entry of that name (the mocks mirror cuda.h).
        unsafe { cuda_workspace::mock::MockDriver::new().entries(mock_entry) }.install();
    }

    /// The other context's work running on its own: runs the queues of `ctx`'s streams.
    pub fn run_pending(ctx: CUcontext) {
        lock(&WORLD).drain(ctx.addr());
    }

    /// How many operations are queued on `stream`.
    pub fn pending(stream: CUstream) -> usize {
        lock(&WORLD)
            .streams
            .get(&stream.addr())
            .map_or(0, |s| s.queue.len())
    }

    /// How many nodes a graph holds.
    pub fn graph_nodes(graph: CUgraph) -> usize {
        lock(&WORLD)
            .graphs
            .get(&graph.addr())
            .map_or(0, |g| g.nodes.len())
    }

    /// The generation of the allocation at `addr` (its base), if one is there.
    pub fn generation(addr: u64) -> Option<u64> {
        lock(&WORLD).memory.get(&addr).map(|a| a.generation)
    }

    /// The context the allocation at `addr` was made in.
    pub fn allocation_context(addr: u64) -> Option<usize> {
        lock(&WORLD).memory.get(&addr).map(|a| a.ctx)
    }

    /// The uses after free recorded since the last call.
    pub fn take_use_after_free() -> Vec<UseAfterFree> {
        std::mem::take(&mut lock(&WORLD).use_after_free)
    }

    /// The entries called since the last call.
    pub fn take_calls() -> Vec<&'static str> {
        std::mem::take(&mut *lock(&CALLS))
    }

    /// Allocations and streams that were still alive when their context went.
    pub fn left_at_destroy() -> Vec<String> {
        lock(&WORLD).left_at_destroy.clone()
    }
}

/// Bytes per test allocation (a multiple of 4), and as 32-bit words.
const BYTES: usize = 1024;
const WORDS: usize = BYTES / 4;
/// What the stale memsets write.
const POISON: u32 = 0xDEAD_BEEF;
const NON_BLOCKING: u32 = cudadrv_sys::CUstream_flags::CU_STREAM_NON_BLOCKING.0;

/// Calls a raw driver entry (the mock's) and asserts that it succeeded.
macro_rules! raw {
    ($name:ident ( $($arg:expr),* $(,)? )) => {{
        let cu = cudadrv_sys::driver().expect("the mock is installed");
        let f = cu.$name().expect(concat!(stringify!($name), " is mocked"));
        // SAFETY: the mock's entry, with the C signature; pointer arguments are live
        // locals of the check, handles are ones the mock handed out.
        let rc = unsafe { f($($arg),*) };
        assert_eq!(rc, CUresult::CUDA_SUCCESS, "{}", stringify!($name));
    }};
}

#[test]
fn cross_context_work_against_a_mock_driver() {
    mock::install();
    raw_free_does_not_wait_for_another_context();
    raw_free_waits_for_its_own_context();

    let dev = Device::get(0).expect("device 0");
    let a = Context::primary(dev).expect("primary context (A)");
    let b = Context::create(dev, ContextFlags::empty()).expect("created context (B)");
    assert_ne!(a, b, "two contexts");
    let stream_a = Stream::non_blocking(&a).expect("stream of A");
    let stream_b = Stream::non_blocking(&b).expect("stream of B");
    crate_refuses_cross_context_work(&a, &b, &stream_a, &stream_b);
    crate_refuses_cross_context_graph_launch(&a, &stream_a, &stream_b);
    graph_nodes_take_memory_of_their_own_context(&a, &b, &stream_a);
    drop((stream_a, stream_b, a, b));

    assert_eq!(
        mock::take_use_after_free(),
        [],
        "a use after free nobody checked"
    );
    assert_eq!(
        mock::left_at_destroy(),
        Vec::<String>::new(),
        "a context went before the handles made in it"
    );
    assert_eq!(cudadrv::drop_error_count(), 0, "a drop failed");
}

/// Check 1, raw driver calls only: the sequence the crate must refuse. A memset queued
/// on a stream of B into A's memory is still pending after A's `cuMemFree`; the address
/// is handed out again, and when B's work runs it lands in the new allocation.
fn raw_free_does_not_wait_for_another_context() {
    raw!(cuInit(0));
    let mut dev = -1;
    raw!(cuDeviceGet(&mut dev, 0));
    let (mut a, mut b, mut stream_b) = (ptr::null_mut(), ptr::null_mut(), ptr::null_mut());
    let mut popped = ptr::null_mut();
    raw!(cuDevicePrimaryCtxRetain(&mut a, dev));
    raw!(cuCtxSetCurrent(a));
    raw!(cuCtxCreate(&mut b, ptr::null_mut(), 0, dev)); // pushed over A
    raw!(cuStreamCreate(&mut stream_b, NON_BLOCKING));
    raw!(cuCtxPopCurrent(&mut popped)); // A current again

    let mut old = 0;
    raw!(cuMemAlloc(&mut old, BYTES));
    let old_generation = mock::generation(old).expect("allocated");
    raw!(cuCtxPushCurrent(b));
    raw!(cuMemsetD32Async(old, POISON, WORDS, stream_b));
    raw!(cuCtxPopCurrent(&mut popped));
    assert_eq!(mock::pending(stream_b), 1, "the memset is queued, not run");

    raw!(cuMemFree(old));
    assert_eq!(
        mock::pending(stream_b),
        1,
        "cuMemFree in A waited for B's work"
    );
    let mut new = 0;
    raw!(cuMemAlloc(&mut new, BYTES));
    assert_eq!(new, old, "the freed address is handed out again");
    let new_generation = mock::generation(new).expect("allocated");
    let fresh = [7u32; WORDS];
    raw!(cuMemcpyHtoD(new, fresh.as_ptr().cast(), BYTES));

    mock::run_pending(b); // B's work runs later, on its own
    assert_eq!(
        mock::take_use_after_free(),
        [UseAfterFree {
            call: "cuMemsetD32Async",
            stream: stream_b.addr(),
            addr: old,
            expected: old_generation,
            found: Some(new_generation),
        }],
        "B's memset ran on the allocation that reused A's freed address"
    );
    let mut back = [0u32; WORDS];
    raw!(cuMemcpyDtoH(back.as_mut_ptr().cast(), new, BYTES));
    assert!(
        back.iter().all(|&v| v == POISON),
        "B's stale memset overwrote the new allocation: {:#x?}",
        &back[..4]
    );

    raw!(cuMemFree(new));
    raw!(cuCtxPushCurrent(b));
    raw!(cuStreamDestroy(stream_b));
    raw!(cuCtxPopCurrent(&mut popped));
    raw!(cuCtxDestroy(b));
    raw!(cuDevicePrimaryCtxRelease(dev));
    assert_eq!(
        mock::left_at_destroy(),
        Vec::<String>::new(),
        "check 1 leaked"
    );
}

/// Check 2, raw driver calls only: the same sequence in one context. The free runs the
/// pending memset first, so the reused address keeps what its new owner wrote.
fn raw_free_waits_for_its_own_context() {
    let mut dev = -1;
    raw!(cuDeviceGet(&mut dev, 0));
    let (mut a, mut stream_a) = (ptr::null_mut(), ptr::null_mut());
    raw!(cuDevicePrimaryCtxRetain(&mut a, dev));
    raw!(cuCtxSetCurrent(a));
    raw!(cuStreamCreate(&mut stream_a, NON_BLOCKING));

    let mut old = 0;
    raw!(cuMemAlloc(&mut old, BYTES));
    raw!(cuMemsetD32Async(old, POISON, WORDS, stream_a));
    assert_eq!(mock::pending(stream_a), 1, "the memset is queued, not run");
    raw!(cuMemFree(old));
    assert_eq!(
        mock::pending(stream_a),
        0,
        "cuMemFree ran its own context's pending work"
    );
    let mut new = 0;
    raw!(cuMemAlloc(&mut new, BYTES));
    assert_eq!(new, old, "the freed address is handed out again");
    let fresh = [7u32; WORDS];
    raw!(cuMemcpyHtoD(new, fresh.as_ptr().cast(), BYTES));
    mock::run_pending(a);
    assert_eq!(
        mock::take_use_after_free(),
        [],
        "a same-context memset ran after the free"
    );
    let mut back = [0u32; WORDS];
    raw!(cuMemcpyDtoH(back.as_mut_ptr().cast(), new, BYTES));
    assert_eq!(back, fresh, "the new allocation is intact");

    raw!(cuMemFree(new));
    raw!(cuStreamDestroy(stream_a));
    raw!(cuDevicePrimaryCtxRelease(dev));
    assert_eq!(
        mock::left_at_destroy(),
        Vec::<String>::new(),
        "check 2 leaked"
    );
}

/// Asserts `r` is `Error::ContextMismatch` naming `call`.
fn refused(r: Result<(), Error>, call: &str, what: &str) {
    assert!(
        matches!(r, Err(Error::ContextMismatch { call: c }) if c == call),
        "{what}: expected ContextMismatch {{ call: {call:?} }}, got {r:?}"
    );
}

/// Reads a buffer back (synchronous `cuMemcpyDtoH`).
fn read(buf: &DeviceBuffer<u32>) -> Vec<u32> {
    let mut back = vec![0; buf.len()];
    buf.copy_to_host(&mut back).expect("copy_to_host");
    back
}

/// Check 3, through the crate's safe calls: streams and sources of another context are
/// refused before the driver is called; the same calls in the buffer's own context
/// queue their work, which lands at the stream's synchronization; a buffer dropped with
/// its own context's memset pending is freed after it.
fn crate_refuses_cross_context_work(
    a: &Context,
    b: &Context,
    stream_a: &Stream,
    stream_b: &Stream,
) {
    let mut buf = DeviceBuffer::<u32>::zeroed(a, WORDS).expect("buffer of A");
    let src_a = DeviceBuffer::from_slice(a, &[5u32; WORDS]).expect("source of A");
    let src_b = DeviceBuffer::from_slice(b, &[6u32; WORDS]).expect("source of B");
    let short = DeviceBuffer::<u32>::new(a, WORDS / 2).expect("short buffer of A");
    let a_raw = a.as_raw().addr();
    assert_eq!(mock::allocation_context(buf.as_raw()), Some(a_raw));
    assert_eq!(
        mock::allocation_context(src_b.as_raw()),
        Some(b.as_raw().addr())
    );

    mock::take_calls();
    let d8 = "cuMemsetD8Async";
    let d32 = "cuMemsetD32Async";
    let dtod = "cuMemcpyDtoDAsync";
    refused(
        buf.memset_d8_async(1, stream_b),
        d8,
        "memset_d8_async, stream of B",
    );
    refused(
        buf.memset_d32_async(1, stream_b),
        d32,
        "memset_d32_async, stream of B",
    );
    let legacy_b = Stream::legacy(b);
    refused(
        buf.memset_d32_async(1, &legacy_b),
        d32,
        "legacy stream of B",
    );
    let r = buf.copy_from_device_async(&src_a, stream_b);
    refused(r, dtod, "copy_from_device_async, stream of B");
    let r = buf.copy_from_device_async(&src_b, stream_a);
    refused(r, dtod, "copy_from_device_async, source of B");
    let r = buf.copy_from_device_async(&short, stream_a);
    assert!(
        matches!(
            r,
            Err(Error::LengthMismatch {
                expected: WORDS,
                found
            }) if found == WORDS / 2
        ),
        "copy_from_device_async, {WORDS} from {}: {r:?}",
        WORDS / 2
    );
    assert_eq!(
        mock::take_calls(),
        [] as [&str; 0],
        "refused before any driver call"
    );
    assert_eq!(mock::pending(stream_b.as_raw()), 0, "B's queue stays empty");
    assert_eq!(mock::pending(stream_a.as_raw()), 0, "A's queue stays empty");
    assert!(read(&buf).iter().all(|&v| v == 0), "a refused call wrote");

    // The unsafe host copies follow the same rule.
    let host = [1u32; WORDS];
    let mut host_back = [0u32; WORDS];
    // SAFETY: `host` outlives the call, which is refused before anything is queued.
    let r = unsafe { buf.copy_from_host_slice_async(&host, stream_b) };
    refused(
        r,
        "cuMemcpyHtoDAsync",
        "copy_from_host_slice_async, stream of B",
    );
    // SAFETY: as above, for `host_back`.
    let r = unsafe { buf.copy_to_host_slice_async(&mut host_back, stream_b) };
    refused(
        r,
        "cuMemcpyDtoHAsync",
        "copy_to_host_slice_async, stream of B",
    );
    assert_eq!(mock::pending(stream_b.as_raw()), 0, "B's queue stays empty");

    // The buffer's own context: queued, not run, until the stream is synchronized.
    buf.memset_d8_async(0x01, stream_a)
        .expect("memset_d8_async");
    assert_eq!(mock::pending(stream_a.as_raw()), 1, "queued on A's stream");
    assert!(read(&buf).iter().all(|&v| v == 0), "ran before its stream");
    stream_a.synchronize().expect("synchronize");
    assert!(
        read(&buf).iter().all(|&v| v == 0x0101_0101),
        "memset_d8_async"
    );
    buf.memset_d32_async(0xA5A5_A5A5, stream_a)
        .expect("memset_d32_async");
    stream_a.synchronize().expect("synchronize");
    assert!(
        read(&buf).iter().all(|&v| v == 0xA5A5_A5A5),
        "memset_d32_async"
    );
    buf.copy_from_device_async(&src_a, stream_a)
        .expect("copy_from_device_async");
    stream_a.synchronize().expect("synchronize");
    assert!(read(&buf).iter().all(|&v| v == 5), "copy_from_device_async");

    // Dropped with its memset pending: the free runs it first.
    let mut doomed = DeviceBuffer::<u32>::new(a, WORDS).expect("buffer of A");
    let addr = doomed.as_raw();
    doomed.memset_d32_async(POISON, stream_a).expect("memset");
    assert_eq!(mock::pending(stream_a.as_raw()), 1, "queued on A's stream");
    drop(doomed);
    free_drained_its_context(a, stream_a, addr, Some(b));
}

/// After a buffer of `a` at `addr` was dropped with work pending on `stream_a`: its free
/// ran that work first, the address is handed out again, and nothing ran after the free
/// (neither A's work nor, once the new buffer exists, the pending work of `other`).
fn free_drained_its_context(a: &Context, stream_a: &Stream, addr: u64, other: Option<&Context>) {
    assert_eq!(
        mock::pending(stream_a.as_raw()),
        0,
        "the drop's cuMemFree ran A's pending work"
    );
    let reused = DeviceBuffer::from_slice(a, &[3u32; WORDS]).expect("buffer of A");
    assert_eq!(
        reused.as_raw(),
        addr,
        "the freed address is handed out again"
    );
    stream_a.synchronize().expect("synchronize");
    if let Some(other) = other {
        mock::run_pending(other.as_raw());
    }
    assert_eq!(
        mock::take_use_after_free(),
        [],
        "pending work ran after the free"
    );
    assert!(
        read(&reused).iter().all(|&v| v == 3),
        "the new buffer is intact"
    );
}

/// Check 4: an executable graph launches and uploads on streams of its own context only.
fn crate_refuses_cross_context_graph_launch(a: &Context, stream_a: &Stream, stream_b: &Stream) {
    let buf = DeviceBuffer::<u32>::zeroed(a, WORDS).expect("buffer of A");
    let graph = Graph::new(a).expect("graph of A");
    graph
        .add_memset_d32_node(&[], &buf, 0x77)
        .expect("memset node");
    let exec = graph
        .instantiate(InstantiateFlags::empty())
        .expect("instantiate");

    mock::take_calls();
    refused(
        exec.launch(stream_b),
        "cuGraphLaunch",
        "launch, stream of B",
    );
    refused(
        exec.upload(stream_b),
        "cuGraphUpload",
        "upload, stream of B",
    );
    assert_eq!(
        mock::take_calls(),
        [] as [&str; 0],
        "refused before any driver call"
    );
    let r = graph
        .instantiate_with_upload(InstantiateFlags::empty(), Some(stream_b))
        .map(drop);
    let call = "cuGraphInstantiateWithParams";
    refused(r, call, "instantiate_with_upload, stream of B");
    assert_eq!(mock::pending(stream_b.as_raw()), 0, "B's queue stays empty");

    exec.upload(stream_a).expect("upload");
    exec.launch(stream_a).expect("launch");
    assert_eq!(mock::pending(stream_a.as_raw()), 1, "queued on A's stream");
    stream_a.synchronize().expect("synchronize");
    assert!(read(&buf).iter().all(|&v| v == 0x77), "the graph's memset");
    drop(exec);
    drop(graph);
}

/// The hole this mock found: a graph of A whose memset node named a buffer of B. Once
/// the executable graph was given up with the safe `GraphExec::into_raw` (or leaked),
/// its drop's `cuCtxSynchronize` never ran, B's free did not wait for A's stream, and
/// the launch landed in the allocation that reused the address. The node adders now
/// refuse memory of another context (and child graphs of another context); with the
/// buffer in the graph's own context, the same leak is harmless: the free waits for the
/// leaked launch, its own context's work.
fn graph_nodes_take_memory_of_their_own_context(a: &Context, b: &Context, stream_a: &Stream) {
    let buf_b = DeviceBuffer::<u32>::zeroed(b, WORDS).expect("buffer of B");
    let buf_a = DeviceBuffer::<u32>::zeroed(a, WORDS).expect("buffer of A");
    let graph = Graph::new(a).expect("graph of A");
    let refused = |r: Result<(), Error>, call: &str, what: &str| {
        assert!(
            matches!(&r, Err(Error::ContextMismatch { call: c }) if *c == call),
            "{what}: {r:?}"
        );
    };
    let r = graph.add_memset_d32_node(&[], &buf_b, POISON).map(drop);
    refused(r, "cuGraphAddMemsetNode", "memset node on a buffer of B");
    let r = graph.add_memset_d8_node(&[], &buf_b, 1).map(drop);
    refused(r, "cuGraphAddMemsetNode", "memset_d8 node on a buffer of B");
    let r = graph.add_copy_node(&[], &buf_a, &buf_b).map(drop);
    refused(r, "cuGraphAddMemcpyNode", "copy node from a buffer of B");
    let child = Graph::new(b).expect("graph of B");
    let r = graph.add_child_graph_node(&[], &child).map(drop);
    refused(r, "cuGraphAddChildGraphNode", "child graph of B");
    assert_eq!(mock::graph_nodes(graph.as_raw()), 0, "nothing added");

    // The buffer of the graph's own context, the executable graph leaked.
    let addr = buf_a.as_raw();
    graph
        .add_memset_d32_node(&[], &buf_a, POISON)
        .expect("memset node on a buffer of A");
    let exec = graph
        .instantiate(InstantiateFlags::empty())
        .expect("instantiate");
    exec.launch(stream_a).expect("launch");
    let exec = exec.into_raw(); // safe code: the drop's cuCtxSynchronize never runs
    drop(graph);
    drop(buf_a); // cuMemFree in A drains A's queue, the leaked launch included
    free_drained_its_context(a, stream_a, addr, None);
    drop(buf_b);
    raw!(cuGraphExecDestroy(exec));
}
