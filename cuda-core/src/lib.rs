//! Safe layer over the CUDA driver API for the host, and inline-PTX helpers for kernels
//! written in Rust ([`device`]). `no_std` first; `alloc` and `std` are features.
//!
//! The sections below walk the whole path once: load a module, allocate, copy, launch,
//! copy back; then a Programmatic Dependent Launch pair, a captured graph, errors, threads
//! and builds without `std`. Every example is a doctest that compiles; those that need a
//! GPU are not run. Each safe wrapper's own docs open with the driver call it makes, and
//! rustdoc's search finds it by that C name (`cuMemAlloc`, `cuLaunchKernelEx`, ...).
//!
//! # A Rust kernel, launched safely
//!
//! A kernel declared once with [`kernel!`] is the device entry point in the nvptx64 build
//! of its crate and a typed handle in the host build, so the host cannot pass the wrong
//! arguments: a count, order or type mismatch does not compile, and the layout is
//! checked against the driver's (`cuFuncGetParamInfo`) when the handle is made. A `safe`
//! kernel (its body compiled under `#[forbid(unsafe_code)]`, memory reached through
//! bounds-checked slices) loaded from its own crate's PTX is launched without `unsafe`
//! in a `kernel::scope`, which borrows each buffer (shared when read,
//! exclusive when written) until the GPU is done with it: the scope waits for its streams
//! before it returns, also on a panic. `examples/kernel-template` is a host + kernels
//! crate pair to start from.
//!
//! ```no_run
//! use cudadrv::kernel::{self, DeviceSlice, DeviceSliceMut, KernelModule, KernelPtx};
//! use cudadrv::{Context, Device, DeviceBuffer, LaunchConfig, Stream};
//!
//! // In the kernels crate (built for nvptx64 by `kernel::build::PtxBuild` in build.rs,
//! // and for the host as a dependency):
//! cudadrv::kernel! {
//!     /// `out[i] = a * x[i] + y[i]`.
//!     pub safe fn saxpy(a: f32, x: DeviceSlice<f32>, y: DeviceSlice<f32>, out: DeviceSliceMut<f32>) {
//!         let i = cudadrv::device::global_idx_x() as usize;
//!         if let (Some(x), Some(y)) = (x.get(i), y.get(i)) {
//!             let _ = out.try_write(i, a * x + y);
//!         }
//!     }
//! }
//! # const TEXT: &str = "";
//! // SAFETY: the PTX build.rs made from the crate that declares `saxpy`.
//! static KERNELS: KernelPtx = unsafe { KernelPtx::new(TEXT) };
//!
//! fn main() -> cudadrv::Result<()> {
//!     let ctx = Context::primary(Device::get(0)?)?;
//!     let module = KernelModule::load(&ctx, &KERNELS)?;
//!     let saxpy = module.kernel::<saxpy>()?; // checked against cuFuncGetParamInfo
//!     let x = DeviceBuffer::from_slice(&ctx, &[1.0f32; 4096])?;
//!     let y = DeviceBuffer::from_slice(&ctx, &[2.0f32; 4096])?;
//!     let mut out = DeviceBuffer::<f32>::new(&ctx, 4096)?;
//!     let stream = Stream::non_blocking(&ctx)?;
//!     kernel::scope(&ctx, |s| {
//!         let lane = s.lane(&stream)?;
//!         lane.launch(&saxpy, &LaunchConfig::new(16, 256), (3.0, &x, &y, &mut out))
//!         // `out.copy_to_host(..)` here would not compile: the launch borrows `out`.
//!     })?; // the stream is synchronized: `out` is the host's again
//!     let mut host = vec![0.0f32; 4096];
//!     out.copy_to_host(&mut host)?;
//!     assert_eq!(host[7], 5.0);
//!     Ok(())
//! }
//! ```
//!
//! The rest of this page is the layer underneath: modules, functions and `unsafe`
//! launches of any kernel (PTX from `nvcc`, or Rust kernels with raw pointers).
//!
//! # Load PTX, allocate, copy, launch, copy back
//!
//! A `Context` is a shared owner of a device's context. Every handle made in it (`Module`,
//! `Function`, `Stream`, `DeviceBuffer`, ...) keeps a clone, has no lifetime parameter,
//! and makes its context current by itself on whichever thread uses it.
//!
//! ```no_run
//! use cudadrv::{Context, Device, DeviceBuffer, DevicePtr, LaunchConfig, Module, Stream};
//! # const PTX: &str = r".version 8.0
//! # .target sm_90
//! # .address_size 64
//! # .visible .entry scale(.param .u64 data, .param .f32 factor, .param .u32 n)
//! # {
//! # .reg .pred %p; .reg .b32 %r<5>; .reg .f32 %f<3>; .reg .b64 %rd<4>;
//! # ld.param.u64 %rd1, [data]; ld.param.f32 %f1, [factor]; ld.param.u32 %r1, [n];
//! # mov.u32 %r2, %ctaid.x; mov.u32 %r3, %ntid.x; mov.u32 %r4, %tid.x;
//! # mad.lo.s32 %r2, %r2, %r3, %r4; setp.ge.u32 %p, %r2, %r1; @%p bra DONE;
//! # cvta.to.global.u64 %rd2, %rd1; mul.wide.u32 %rd3, %r2, 4; add.s64 %rd2, %rd2, %rd3;
//! # ld.global.f32 %f2, [%rd2]; mul.f32 %f2, %f2, %f1; st.global.f32 [%rd2], %f2;
//! # DONE: ret;
//! # }";
//!
//! fn main() -> cudadrv::Result<()> {
//!     let ctx = Context::primary(Device::get(0)?)?;
//!     // PTX text (from `nvcc -ptx`, or Rust built for nvptx64), JIT-compiled for the
//!     // device. It holds `scale(float *data, float factor, unsigned n)`: data[i] *= factor.
//!     let module = Module::from_ptx(&ctx, PTX)?;
//!     let scale = module.function("scale")?;
//!     // `launch` cannot see the kernel's signature: check the argument tuple's layout
//!     // against the driver's parameter info once (sizes and offsets, not meanings).
//!     scale.verify_args::<(DevicePtr<f32>, f32, u32)>()?;
//!
//!     let host: Vec<f32> = (0..4096).map(|i| i as f32).collect();
//!     let data = DeviceBuffer::from_slice(&ctx, &host)?; // cuMemAlloc + cuMemcpyHtoD
//!     let stream = Stream::non_blocking(&ctx)?;
//!     let n = host.len() as u32;
//!     // A launch configuration names its stream; there is no implicit default stream.
//!     let cfg = LaunchConfig::new(n.div_ceil(256), 256).stream(&stream);
//!     // SAFETY: the tuple matches `scale` (verified above); `data` holds `n` floats and
//!     // lives until the kernel is done (the stream is synchronized below).
//!     unsafe { cfg.launch(&scale, &(data.as_arg(), 2.0f32, n))? };
//!     stream.synchronize()?;
//!     let mut back = vec![0.0f32; host.len()];
//!     data.copy_to_host(&mut back)?; // cuMemcpyDtoH
//!     assert_eq!(back[3], 6.0);
//!     Ok(())
//! }
//! ```
//!
//! # A Programmatic Dependent Launch pair
//!
//! On sm_90 and newer, a launch with the programmatic-stream-serialization attribute may
//! start before the kernel ahead of it in the stream finishes, so its prologue overlaps
//! the other's tail. The device side decides how far: a kernel may call
//! `griddepcontrol.launch_dependents` ([`device::launch_dependents`]) to let the next one
//! be scheduled early, and the dependent calls `griddepcontrol.wait`
//! ([`device::grid_dependency_wait`]) before it reads anything the first wrote.
//!
//! Whether an early trigger helps depends on the grid: it pays off only in grids of a few
//! blocks, and costs a lot in grids of several waves, where waiting without one is
//! fastest (the figures, with device and date: `docs/measurements.md` in the
//! repository, "Where PDL helps and where it hurts"). `launch::AutoPdl` makes that choice per launch from the grid and the
//! function's occupancy, and the kernel follows it with one call,
//! [`device::pdl_auto`]`(plan)`. Here the grids have 4096 blocks, so both launches get
//! the attribute and neither kernel triggers early.
//!
//! ```no_run
//! # use cudadrv::{Context, Device, DeviceBuffer, DevicePtr, LaunchConfig, Module, Stream};
//! # const PTX: &str = r".version 8.0
//! # .target sm_90
//! # .address_size 64
//! # .visible .entry produce(.param .u64 out, .param .u32 n, .param .u32 plan)
//! # {
//! # .reg .pred %p<4>; .reg .b32 %r<8>; .reg .b64 %rd<4>;
//! # ld.param.u32 %r6, [plan];
//! # and.b32 %r7, %r6, 1; setp.eq.u32 %p2, %r7, 0; @%p2 bra NOWAIT;
//! # griddepcontrol.wait;
//! # NOWAIT: and.b32 %r7, %r6, 2; setp.eq.u32 %p3, %r7, 0; @%p3 bra NOTRIG;
//! # griddepcontrol.launch_dependents;
//! # NOTRIG: ld.param.u64 %rd1, [out]; ld.param.u32 %r1, [n];
//! # mov.u32 %r2, %ctaid.x; mov.u32 %r3, %ntid.x; mov.u32 %r4, %tid.x;
//! # mad.lo.s32 %r2, %r2, %r3, %r4; setp.ge.u32 %p1, %r2, %r1; @%p1 bra DONE;
//! # cvta.to.global.u64 %rd2, %rd1; mul.wide.u32 %rd3, %r2, 4; add.s64 %rd2, %rd2, %rd3;
//! # st.global.u32 [%rd2], %r2;
//! # DONE: ret;
//! # }
//! # .visible .entry consume(.param .u64 in, .param .u64 out, .param .u32 n, .param .u32 plan)
//! # {
//! # .reg .pred %p<4>; .reg .b32 %r<9>; .reg .b64 %rd<6>;
//! # ld.param.u64 %rd1, [in]; ld.param.u64 %rd4, [out]; ld.param.u32 %r1, [n];
//! # mov.u32 %r2, %ctaid.x; mov.u32 %r3, %ntid.x; mov.u32 %r4, %tid.x;
//! # mad.lo.s32 %r2, %r2, %r3, %r4;
//! # ld.param.u32 %r6, [plan];
//! # and.b32 %r7, %r6, 1; setp.eq.u32 %p2, %r7, 0; @%p2 bra NOWAIT;
//! # griddepcontrol.wait;
//! # NOWAIT: and.b32 %r7, %r6, 2; setp.eq.u32 %p3, %r7, 0; @%p3 bra NOTRIG;
//! # griddepcontrol.launch_dependents;
//! # NOTRIG: setp.ge.u32 %p1, %r2, %r1; @%p1 bra DONE;
//! # mul.wide.u32 %rd3, %r2, 4;
//! # cvta.to.global.u64 %rd2, %rd1; add.s64 %rd2, %rd2, %rd3; ld.global.u32 %r5, [%rd2];
//! # shl.b32 %r5, %r5, 1;
//! # cvta.to.global.u64 %rd5, %rd4; add.s64 %rd5, %rd5, %rd3; st.global.u32 [%rd5], %r5;
//! # DONE: ret;
//! # }";
//! # fn main() -> cudadrv::Result<()> {
//! # let ctx = Context::primary(Device::get(0)?)?;
//! # let stream = Stream::non_blocking(&ctx)?;
//! use cudadrv::launch::{AutoPdl, PdlPlan};
//! let module = Module::from_ptx(&ctx, PTX)?;
//! let (produce, consume) = (module.function("produce")?, module.function("consume")?);
//! produce.verify_args::<(DevicePtr<u32>, u32, PdlPlan)>()?;
//! consume.verify_args::<(DevicePtr<u32>, DevicePtr<u32>, u32, PdlPlan)>()?;
//! let n: u32 = 1 << 20;
//! let a = DeviceBuffer::<u32>::new(&ctx, n as usize)?;
//! let b = DeviceBuffer::<u32>::new(&ctx, n as usize)?;
//! // SM count and occupancy, queried once per function and block shape.
//! let (auto_p, auto_c) = (AutoPdl::new(&produce)?, AutoPdl::new(&consume)?);
//! let shape = LaunchConfig::new(n.div_ceil(256), 256).stream(&stream);
//! let (first, p_plan) = shape.clone().auto_pdl(&auto_p)?;
//! let (dependent, c_plan) = shape.auto_pdl(&auto_c)?;
//! assert_eq!(c_plan, PdlPlan::WAIT_ONLY); // 4096 blocks
//! // SAFETY: each tuple matches its kernel (verified above); `a` and `b` hold `n` values
//! // and outlive both kernels; each kernel calls `pdl_auto(plan)` before reading.
//! unsafe {
//!     first.launch(&produce, &(a.as_arg(), n, p_plan))?;
//!     dependent.launch(&consume, &(a.as_arg(), b.as_arg(), n, c_plan))?;
//! }
//! stream.synchronize()?;
//! # Ok(()) }
//! ```
//!
//! The same pair written in Rust, in a crate built for `nvptx64-nvidia-cuda` (as
//! `cargo xtask ptx` builds `ptx/`):
//!
//! ```ignore
//! use cudadrv::device::{PdlPlan, global_idx_x, pdl_auto};
//!
//! #[unsafe(no_mangle)]
//! pub unsafe extern "ptx-kernel" fn produce(out: *mut u32, n: u32, plan: PdlPlan) {
//!     pdl_auto(plan); // waits if launched early; triggers early only in tiny grids
//!     let i = global_idx_x();
//!     if i < n {
//!         unsafe { *out.add(i as usize) = i };
//!     }
//! }
//!
//! #[unsafe(no_mangle)]
//! pub unsafe extern "ptx-kernel" fn consume(input: *const u32, out: *mut u32, n: u32, plan: PdlPlan) {
//!     let i = global_idx_x(); // work that reads nothing of `produce`'s may come first
//!     pdl_auto(plan); // `produce` has completed and its writes are visible
//!     if i < n {
//!         unsafe { *out.add(i as usize) = 2 * *input.add(i as usize) };
//!     }
//! }
//! ```
//!
//! Code written as plain stream launches runs at graph speed inside a
//! `graph::Region`: the first execution is captured, later ones update the changed
//! arguments in place and launch the cached graph.
//!
//! # Capture a graph
//!
//! Work recorded on a capturing stream becomes a graph that can be launched any number of
//! times. The capture's methods borrow what the graph will name (buffers, functions), so
//! none of it can be dropped while the graph or an executable graph made from it lives.
//! Safe calls that would let the graph keep something by address without that borrow are
//! refused on a capturing stream with `Error::StreamCapturing`.
//!
//! ```no_run
//! use cudadrv::graph::CaptureMode;
//! # use cudadrv::{Context, Device, DeviceBuffer, LaunchConfig, Module, Stream};
//! # const PTX: &str = r".version 8.0
//! # .target sm_90
//! # .address_size 64
//! # .visible .entry scale(.param .u64 data, .param .f32 factor, .param .u32 n)
//! # {
//! # .reg .pred %p; .reg .b32 %r<5>; .reg .f32 %f<3>; .reg .b64 %rd<4>;
//! # ld.param.u64 %rd1, [data]; ld.param.f32 %f1, [factor]; ld.param.u32 %r1, [n];
//! # mov.u32 %r2, %ctaid.x; mov.u32 %r3, %ntid.x; mov.u32 %r4, %tid.x;
//! # mad.lo.s32 %r2, %r2, %r3, %r4; setp.ge.u32 %p, %r2, %r1; @%p bra DONE;
//! # cvta.to.global.u64 %rd2, %rd1; mul.wide.u32 %rd3, %r2, 4; add.s64 %rd2, %rd2, %rd3;
//! # ld.global.f32 %f2, [%rd2]; mul.f32 %f2, %f2, %f1; st.global.f32 [%rd2], %f2;
//! # DONE: ret;
//! # }";
//! # fn main() -> cudadrv::Result<()> {
//! # let ctx = Context::primary(Device::get(0)?)?;
//! # let module = Module::from_ptx(&ctx, PTX)?;
//! let scale = module.function("scale")?;
//! let data = DeviceBuffer::<f32>::new(&ctx, 4096)?;
//! let mut stream = Stream::non_blocking(&ctx)?;
//!
//! let cap = stream.begin_capture(CaptureMode::Global)?; // cuStreamBeginCapture
//! cap.memset_d32(&data, 1.0f32.to_bits())?; // a memset node
//! // SAFETY: as for a plain launch, at every launch of the graph: the tuple matches
//! // `scale`, and `data` (borrowed by the graph) holds 4096 floats.
//! let args = (data.as_arg(), 2.0f32, 4096u32);
//! unsafe { cap.launch(&scale, &LaunchConfig::new(16, 256), &args)? };
//! let graph = cap.end()?; // cuStreamEndCapture
//! let exec = graph.instantiate(Default::default())?;
//! for _ in 0..100 {
//!     exec.launch(&stream)?; // cuGraphLaunch
//! }
//! stream.synchronize()?;
//! # Ok(()) }
//! ```
//!
//! # Which launch do I use
//!
//! Every form below ends in one internal launch core (the crate's only call of
//! `cuLaunchKernel` / `cuLaunchKernelEx`), except graph kernel nodes, which the driver
//! adds with `cuGraphAddKernelNode` instead of launching. They differ in what they check
//! and what they ask of the caller:
//!
//! | You have | Use | Safe? | What is checked |
//! | --- | --- | --- | --- |
//! | a `kernel!` `safe fn` and buffers to borrow | `kernel::scope(&stream, \|lane\| lane.launch(..))` | safe | types at compile time, layout at load, buffers of the context, borrows until the scope synchronizes |
//! | a `kernel!` or `extern fn` declaration | `TypedKernel::launch` (`module.kernel::<K>()?`) | `unsafe` | types at compile time, layout at load; pointers are yours |
//! | a `Function` and a tuple of values | `launch::launch` / `LaunchConfig::launch` (`cuLaunchKernelEx`), `launch::launch_plain` (`cuLaunchKernel`) | `unsafe` | nothing before the driver; `Function::verify_args` checks the layout once |
//! | parameters packed into one buffer | `launch::launch_checked` (layout checked per call), `launch::launch_packed` | `unsafe` | `launch_checked`: count, offsets, sizes against `cuFuncGetParamInfo` |
//! | a stream being captured | `Capturing::launch` (from `Stream::capture`) | `unsafe` | as `launch`; the graph borrows the function |
//! | the same step every iteration | `Region::launch` inside `Region::run` (replay region) | `unsafe` | the function's context; the recording is replayed, updated in place when only values change |
//! | a graph built node by node | `Graph::add_kernel_node` / `add_kernel_node_packed` | `unsafe` | as `launch`, for every launch of the graph |
//!
//! Programmatic Dependent Launch is an attribute on any of them
//! (`LaunchConfig::programmatic_stream_serialization`, or `AutoPdl::apply` to let the
//! crate choose); a safe launch takes it only for a kernel declared `dependent`.
//!
//! # Handle errors
//!
//! Every fallible call returns `cudadrv::Result`. A failed driver call is
//! `Error::Driver { call, code }`: the C function and the `CUresult` it returned, so
//! `Display` reads `cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY (2): ` and the header's
//! description of the code. A JIT failure is `Error::Jit` with the compiler's log (with
//! `alloc`; without it, the log is in the buffer given as `JitOptions::error_log`).
//! Errors name what failed: a missing kernel's name, both lengths of a mismatched copy.
//!
//! ```
//! use cudadrv::{Error, SymbolName, cuda_sys::CUresult};
//!
//! fn explain(e: &Error) -> String {
//!     match e {
//!         Error::Driver { call, code } if *code == CUresult::CUDA_ERROR_OUT_OF_MEMORY => {
//!             format!("{call}: the device is out of memory")
//!         }
//!         Error::Driver { call, code } => format!("{call} returned {code}"),
//!         Error::NotFound { name, .. } => format!("the module has no `{name}`"),
//!         Error::Jit { log, .. } => format!("the PTX does not compile:\n{log}"),
//!         Error::StreamCapturing(call) => format!("{call}: record it through the capture"),
//!         other => other.to_string(), // `Error` is non-exhaustive
//!     }
//! }
//!
//! let oom = Error::Driver { call: "cuMemAlloc", code: CUresult::CUDA_ERROR_OUT_OF_MEMORY };
//! assert_eq!(explain(&oom), "cuMemAlloc: the device is out of memory");
//! assert!(oom.is(CUresult::CUDA_ERROR_OUT_OF_MEMORY) && oom.call() == Some("cuMemAlloc"));
//! assert!(oom.to_string().starts_with("cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY (2): "));
//! // What `module.function("scael")` returns when the module has no such kernel:
//! let missing = Error::NotFound { call: "cuModuleGetFunction", name: SymbolName::new("scael") };
//! assert_eq!(explain(&missing), "the module has no `scael`");
//! assert!(missing.is(CUresult::CUDA_ERROR_NOT_FOUND));
//! let copy = Error::LengthMismatch { expected: 4, found: 3 };
//! assert!(explain(&copy).ends_with("lengths differ: 4 elements expected, 3 given"));
//!
//! // A `Drop` cannot return an error: failures of `cuMemFree`, `cuStreamDestroy`, ... are
//! // counted and handed to a hook (on the dropping thread; it must not panic).
//! fn on_drop_error(e: &cudadrv::DropError) {
//!     eprintln!("cudadrv: {e}");
//! }
//! cudadrv::set_drop_error_hook(Some(on_drop_error));
//! assert_eq!(cudadrv::drop_error_count(), 0);
//! ```
//!
//! # Share across threads
//!
//! Handles are `Send` (and `Sync` where the driver allows concurrent use), `Context` is
//! `Clone`, and none borrows another, so GPU state lives in an ordinary struct that moves to
//! another thread. No `cuCtxSetCurrent` is needed there: each call makes its handle's
//! context current where it is not.
//!
//! ```no_run
//! use std::thread;
//! use cudadrv::{Context, Device, DeviceBuffer, Function, LaunchConfig, Module, Stream};
//! # const PTX: &str = r".version 8.0
//! # .target sm_90
//! # .address_size 64
//! # .visible .entry scale(.param .u64 data, .param .f32 factor, .param .u32 n)
//! # {
//! # .reg .pred %p; .reg .b32 %r<5>; .reg .f32 %f<3>; .reg .b64 %rd<4>;
//! # ld.param.u64 %rd1, [data]; ld.param.f32 %f1, [factor]; ld.param.u32 %r1, [n];
//! # mov.u32 %r2, %ctaid.x; mov.u32 %r3, %ntid.x; mov.u32 %r4, %tid.x;
//! # mad.lo.s32 %r2, %r2, %r3, %r4; setp.ge.u32 %p, %r2, %r1; @%p bra DONE;
//! # cvta.to.global.u64 %rd2, %rd1; mul.wide.u32 %rd3, %r2, 4; add.s64 %rd2, %rd2, %rd3;
//! # ld.global.f32 %f2, [%rd2]; mul.f32 %f2, %f2, %f1; st.global.f32 [%rd2], %f2;
//! # DONE: ret;
//! # }";
//!
//! /// One worker's GPU state, moved to its thread as one value.
//! struct Worker {
//!     stream: Stream,
//!     scale: Function, // keeps its module loaded
//!     data: DeviceBuffer<f32>,
//! }
//!
//! impl Worker {
//!     fn run(self, factor: f32) -> cudadrv::Result<Vec<f32>> {
//!         let n = self.data.len() as u32;
//!         let cfg = LaunchConfig::new(n.div_ceil(256), 256).stream(&self.stream);
//!         // SAFETY: `scale(float*, float, unsigned)`; `data` holds `n` floats and lives
//!         // until the kernel is done (synchronized below).
//!         unsafe { cfg.launch(&self.scale, &(self.data.as_arg(), factor, n))? };
//!         self.stream.synchronize()?;
//!         let mut out = vec![0.0; self.data.len()];
//!         self.data.copy_to_host(&mut out)?;
//!         Ok(out)
//!     }
//! }
//!
//! fn main() -> cudadrv::Result<()> {
//!     let ctx = Context::primary(Device::get(0)?)?;
//!     let module = Module::from_ptx(&ctx, PTX)?;
//!     let mut workers = Vec::new();
//!     for i in 0..4u8 {
//!         let worker = Worker {
//!             stream: Stream::non_blocking(&ctx)?,
//!             scale: module.function("scale")?,
//!             data: DeviceBuffer::from_slice(&ctx, &[1.0f32; 1024])?,
//!         };
//!         workers.push(thread::spawn(move || worker.run(f32::from(i))));
//!     }
//!     for (i, worker) in workers.into_iter().enumerate() {
//!         let out = worker.join().expect("worker panicked")?;
//!         assert!(out.iter().all(|&v| v == i as f32));
//!     }
//!     Ok(())
//! }
//! ```
//!
//! # Streams stay in their context; memory beyond `DeviceBuffer`
//!
//! Asynchronous work that names memory, an event or an executable graph goes on a stream
//! of that handle's context (else `Error::ContextMismatch`): a free waits only for its own
//! context's work. Order work across contexts with `Stream::wait_event`, which takes
//! events of any context. The guide's other kinds of memory are in `memory`:
//! `ManagedBuffer` (unified memory: prefetches, advice, host views that wait for the
//! device), `registered::HostRegistration` (pinning memory the program owns, with safe
//! asynchronous copies) and `batch::CopyBatch` (many copies in one call).
//!
//! ```no_run
//! use cudadrv::memory::managed::{Attach, Location, ManagedBuffer};
//! use cudadrv::memory::registered::{HostRegisterFlags, HostRegistration};
//! use cudadrv::{Context, Device, DeviceBuffer, Stream};
//! # fn main() -> cudadrv::Result<()> {
//! let dev = Device::get(0)?;
//! let ctx = Context::primary(dev)?;
//! let stream = Stream::non_blocking(&ctx)?;
//!
//! let mut table = ManagedBuffer::<f32>::new(&ctx, 1 << 20, Attach::Global)?;
//! table.host_mut()?.fill(0.5); // the CPU writes it in place
//! table.prefetch(Location::Device(dev), &stream)?; // before kernels read table.as_arg()
//!
//! let mut samples = vec![0u16; 1 << 20]; // a buffer the program already owns
//! let mut on_device = DeviceBuffer::<u16>::new(&ctx, samples.len())?;
//! HostRegistration::scope(&ctx, &mut samples, HostRegisterFlags::empty(), |pinned| {
//!     pinned.copy_to_device_async(&mut on_device, &stream)
//! })?; // unpinned once the copy is done
//! stream.synchronize()?;
//! # Ok(()) }
//! ```
//!
//! # Without `std`, without a heap
//!
//! Features:
//! - `std` (default): implies `alloc`.
//! - `alloc`: closures as host functions (`Stream::launch_host_fn`,
//!   `Graph::add_host_node`, the capture's `host_fn`), `Linker::new`, JIT logs owned by
//!   `Error::Jit`, a NUL appended to PTX text that lacks one, `Arc`-counted contexts and
//!   modules.
//! - `loaded` (default) and `linked`: how cudadrv-sys reaches the driver, `dlopen` at run
//!   time or `-lcuda` at link time (with both, `driver()` loads; with neither, only
//!   tables from a resolver, `cudadrv_sys::install_driver`, as on a bare-metal target).
//! - `runtime` (default): cudadrv-sys's runtime API (`cudadrv::cuda_sys::runtime()`);
//!   cudadrv itself uses only the driver, and a `linked` build without it does not link
//!   libcudart.
//! - `graph` (default): the `graph` module (graphs, stream capture, replay regions,
//!   conditional nodes, device graph launch from the host) and the capture forms of
//!   batched copies and prefetches.
//! - `green` (default): the `green` module (green contexts) and `Context::from_green`.
//!
//! The last three are a program's to leave out: nothing else in either crate needs them,
//! and together they are about a quarter of a clean build's time against them. A program
//! that uses none of them depends on `cudadrv = { default-features = false, features =
//! ["std", "loaded"] }` (figures: `docs/measurements.md`, "Build time").
//!
//! With `default-features = false, features = ["loaded"]` the crate needs neither `std`
//! nor a heap: contexts and modules live in fixed static pools (`MAX_CONTEXTS`,
//! `MAX_MODULES` at once; one more is an `Error::InvalidArgument`), PTX text must end in a
//! NUL (or come as a `&CStr`), and JIT logs go to caller buffers. No launch allocates, in
//! any build: configurations and argument arrays live on the stack.
//!
//! ```no_run
//! # use cudadrv::{Context, JitOptions, Module};
//! # fn load(ctx: &Context) -> cudadrv::Result<()> {
//! let mut log = [0u8; 4096];
//! let options = JitOptions { error_log: Some(&mut log), ..JitOptions::default() };
//! let ptx = c".version 8.0\n.target sm_90\n.address_size 64\n";
//! match Module::from_ptx_cstr(ctx, ptx, options) {
//!     Ok(module) => { /* ... */ }
//!     Err(e) => { /* `log` holds the JIT's error text, up to its first NUL */ }
//! }
//! # Ok(()) }
//! ```
//!
//! Items that need a feature, and device helpers that need an SM or PTX ISA version, are
//! marked as such in documentation built the docs.rs way
//! (`RUSTDOCFLAGS="--cfg docsrs" cargo +nightly doc`). The [`device`] module is compiled
//! only for `nvptx64-nvidia-cuda`; it appears in host documentation so that both sides of a
//! launch read in one place.
#![cfg_attr(
    not(target_arch = "nvptx64"),
    doc = r#"
# Where things are

- Devices and contexts: [`Device`], [`Context`] and its [`Limit`]s, [`driver`] (`cuInit`,
  the driver's version; its folder holds every host handle, re-exported here).
- Code: [`Module`] (PTX, cubin, fatbin, with [`JitOptions`]), [`Linker`], [`Function`]
  (attributes, occupancy, [`Function::verify_args`]).
- Memory: [`DeviceBuffer`], [`PinnedHostBuffer`], [`AsyncDeviceBuffer`], [`MemPool`]
  (see [`memory`]); views of any of them and of memory from elsewhere
  ([`memory::DeviceView`], [`memory::DeviceViewMut`], [`memory::pointer_info`]),
  DLPack tensors ([`memory::dlpack`]); several devices in [`memory::peer`], other
  processes in [`memory::ipc`].
- Work: [`Stream`], [`Event`], [`LaunchConfig`] with every `cuLaunchKernelEx` attribute
  ([`launch`]), kernel arguments ([`args`]).
- Graphs (feature `graph`): [`Graph`], [`GraphExec`], [`graph::Capture`] (see [`graph`]).
- Errors: [`Error`], [`set_drop_error_hook`], [`drop_error_count`].
- The raw bindings: [`cudadrv_sys`]. The device side: [`device`].
"#
)]
#![cfg_attr(
    target_arch = "nvptx64",
    doc = "
This is the nvptx64 build: only [`device`], [`args`] and [`Dim3`] exist in it. The host
types named above are documented by `cargo doc` on a host target.
"
)]
//!
//! # Safety rules every safe API follows
//! Safe code never reaches undefined behaviour, whatever the driver keeps after a call
//! returns and whatever the program leaks. Four rules, each broken once and seen on a GPU:
//!
//! 1. **Leaks are safe.** `mem::forget` is safe code, so no SAFETY argument rests on a
//!    destructor running. Work that outlives a call is tied to a closure scope (as
//!    `kernel::scope` and `memory::registered::HostRegistration::scope`: the closure
//!    sees references only, and the scope waits before the borrows end), to memory owned
//!    by value (a `graph::Region` owns the pinned buffers its copies
//!    write, `bind_host`), or to a driver rule checked on the GPU (a
//!    free waits for the work of its own context, and only of it, so every safe call
//!    that queues work on a stream refuses streams of another context: `hw_promises`,
//!    `hw_soundness`). Forms that cannot be made so
//!    are `unsafe` (`DeviceBuffer::copy_to_host_async`, `HostRegistration::new`).
//!    Where this crate's types wait in their drop, that is for tidiness only. Under
//!    Miri, `mock_async` (a mock driver whose copies land later, on other threads)
//!    forgets what a registration scope hands out and frees a buffer mid-copy, and
//!    `mock_kernels` leaks lanes and `Owned` handles; `hw_soundness` forgets a region
//!    with a copy pending on the GPU.
//! 2. **No borrow laundering.** No public safe function turns a borrowed buffer into a
//!    value (address, slice, parameter) that outlives the borrow *and that a safe API
//!    accepts*: the kernel-argument conversions are sealed and run only inside
//!    `kernel::Lane::launch`, and a [`kernel::DeviceSlice`] / [`kernel::DeviceSliceMut`]
//!    (or a struct holding one: [`args::DeviceRepr::PLAIN`]) is never a value argument
//!    of a safe launch. Raw addresses (`as_raw`, `as_arg`) are for interop and reach the
//!    driver only through `unsafe` calls.
//! 3. **Closed doors.** A public trait through which user types reach the driver or a
//!    launch (addresses, lengths, contexts, kernel parameters, element sizes) is sealed
//!    (`memory::batch::BatchSide`, `tensor_map::TensorElement`, `kernel::Arg`,
//!    `kernel::Args`) or `unsafe` ([`args::DeviceRepr`], [`args::KernelArgs`],
//!    [`kernel::Element`], `memory::Pod`, `kernel::SafeKernel`).
//! 4. **Local trust roots.** An `unsafe` promise covers what its caller can see at the
//!    call, never declarations written later or elsewhere: a safe kernel is trusted
//!    because its device build emitted a marker with its parameter fingerprint, checked
//!    when the kernel is loaded (`kernel::SafeKernel`), not because a host declaration
//!    says `safe fn`; `kernel::KernelPtx::new` promises only what its text contains.
//!    What the compiler did not check on the device is not safe on the host. On the
//!    device too: [`device::MBarrier::from_shared_addr`] promises the storage and its
//!    initialization, and each arrival or tx-count change (and each asynchronous remote
//!    write of [`device::RemoteShared`]) is `unsafe` on its own, because only its call
//!    site can see whether the phase still expects it.
//!
//! Lifetime rules have compile-fail tests (the `compile_fail` examples in these docs),
//! and every SAFETY argument that relies on the driver is probed on the GPU.
//!
//! # Unsafe policy
//! Every `unsafe` block carries a `// SAFETY:` comment naming the invariant it relies on;
//! every public `unsafe fn` documents its contract under `# Safety`. Raw driver calls are
//! confined to the host modules; the device modules confine `asm!` to one file.
#![no_std]
#![cfg_attr(
    target_arch = "nvptx64",
    feature(asm_experimental_arch, abi_ptx, stdarch_nvptx)
)]
// `doc(cfg)` marks on feature- and target-gated items: on docs.rs-style builds
// (`RUSTDOCFLAGS="--cfg docsrs" cargo +nightly doc`) and in nvptx64 docs, which always
// build with nightly.
// The host layer's `not(target_arch = "nvptx64")` is left unmarked (it is the default).
#![cfg_attr(any(docsrs, all(doc, target_arch = "nvptx64")), feature(doc_cfg))]
#![cfg_attr(docsrs, doc(auto_cfg(hide(target_arch = "nvptx64"))))]

#[cfg(feature = "alloc")]
extern crate alloc;
#[cfg(feature = "std")]
extern crate std;

/// The raw bindings this crate is built on, re-exported so that users reach the same
/// copy (`cudadrv::cuda_sys::CUstream`, `cudadrv::cuda_sys::driver()`).
#[cfg(not(target_arch = "nvptx64"))]
pub use cudadrv_sys as cuda_sys;

pub mod args;
mod dim3;
// Typed kernels (both targets: the parameter types and `kernel!`), safe launches (host).
pub mod kernel;
pub use dim3::Dim3;

// Documented on every target (rustdoc does not compile the inline PTX in function
// bodies); compiled only for nvptx64.
#[cfg(any(target_arch = "nvptx64", doc))]
#[cfg_attr(
    any(docsrs, all(doc, target_arch = "nvptx64")),
    doc(cfg(target_arch = "nvptx64"))
)]
pub mod device;

// Host layer, one module per driver API section. `driver`: the driver's host objects
// (initialization, device, context, module and function, linker, stream, event).
#[cfg(not(target_arch = "nvptx64"))]
pub mod driver;
#[cfg(not(target_arch = "nvptx64"))]
pub mod error;
#[cfg(not(target_arch = "nvptx64"))]
mod flags;
#[cfg(all(not(target_arch = "nvptx64"), feature = "graph"))]
pub mod graph;
#[cfg(all(not(target_arch = "nvptx64"), feature = "green"))]
pub mod green;
#[cfg(not(target_arch = "nvptx64"))]
pub mod launch;
#[cfg(not(target_arch = "nvptx64"))]
pub mod logs;
#[cfg(not(target_arch = "nvptx64"))]
pub mod memory;
#[cfg(all(not(target_arch = "nvptx64"), feature = "nccl", unix))]
#[cfg_attr(docsrs, doc(cfg(feature = "nccl")))]
pub mod nccl;
#[cfg(all(not(target_arch = "nvptx64"), feature = "nvrtc"))]
#[cfg_attr(docsrs, doc(cfg(feature = "nvrtc")))]
pub mod nvrtc;
#[cfg(not(target_arch = "nvptx64"))]
pub mod nvtx;
#[cfg(not(target_arch = "nvptx64"))]
pub mod tensor_map;
#[cfg(test)]
mod testing;

#[cfg(not(target_arch = "nvptx64"))]
pub use driver::context::{Context, ContextFlags, MAX_CONTEXTS, StreamPriorityRange};
#[cfg(not(target_arch = "nvptx64"))]
pub use driver::device::{Device, DeviceName};
#[cfg(not(target_arch = "nvptx64"))]
pub use driver::event::{Event, EventFlags};
#[cfg(not(target_arch = "nvptx64"))]
pub use driver::function::{ClusterConfig, Function};
#[cfg(not(target_arch = "nvptx64"))]
pub use driver::limits::Limit;
#[cfg(not(target_arch = "nvptx64"))]
pub use driver::linker::{LinkStorage, Linker};
#[cfg(not(target_arch = "nvptx64"))]
pub use driver::module::{Global, JitOptions, MAX_MODULES, Module};
#[cfg(not(target_arch = "nvptx64"))]
pub use driver::stream::{EventWaitFlags, Stream, StreamFlags};
#[cfg(not(target_arch = "nvptx64"))]
pub use error::{
    DropError, Error, JitLog, Result, SymbolName, drop_error_count, set_drop_error_hook,
};
#[cfg(all(not(target_arch = "nvptx64"), feature = "graph"))]
pub use graph::{Graph, GraphExec};
#[cfg(not(target_arch = "nvptx64"))]
pub use launch::LaunchConfig;
#[cfg(not(target_arch = "nvptx64"))]
pub use memory::{
    AsyncDeviceBuffer, DeviceBuffer, DevicePtr, GrowableBuffer, MemPool, PinnedHostBuffer, Pod,
};
