//! The model on the GPU: its buffers, the typed kernels, and one step issued through any
//! of the launch paths ([`On`]).

use cudadrv::args::Bf16;
use cudadrv::graph::{Capturing, Recorder};
use cudadrv::kernel::{self, Kernel, KernelModule, KernelPtx, TypedKernel};
use cudadrv::launch::{AutoPdl, PdlPlan};
use cudadrv::{Context, DeviceBuffer, LaunchConfig, Result, Stream};
use decode_kernels as k;

use crate::model::{Shape, Tensor, first_token, rope, tensors};

/// The PTX of ../kernels, built by build.rs from the same declarations this program
/// uses for its typed handles.
// SAFETY: build.rs compiles exactly the `decode-kernels` crate this binary links for its
// host half, so each kernel in the PTX is the one its declaration describes.
pub static KERNELS: KernelPtx =
    unsafe { KernelPtx::new(include_str!(concat!(env!("OUT_DIR"), "/kernels.ptx"))) };

/// The step's kernels, in launch order within a layer; [`KINDS`] names them.
pub struct Kernels {
    pub embed: TypedKernel<k::embed>,
    pub rms_qkv: TypedKernel<k::rms_qkv>,
    pub attention: TypedKernel<k::attention>,
    pub o_proj: TypedKernel<k::o_proj>,
    pub rms_gate_up: TypedKernel<k::rms_gate_up>,
    pub down_proj: TypedKernel<k::down_proj>,
    pub rms_logits: TypedKernel<k::rms_logits>,
    pub argmax: TypedKernel<k::argmax>,
    pub fill: TypedKernel<k::fill_uniform>,
}

/// The kernel kinds, as [`Launches`] indexes them.
pub const KINDS: [&str; 8] = [
    "embed",
    "rms_qkv",
    "attention",
    "o_proj",
    "rms_gate_up",
    "down_proj",
    "rms_logits",
    "argmax",
];

impl Kernels {
    /// Loads the module; every handle's parameter layout is checked against the
    /// driver's here.
    pub fn load(ctx: &Context) -> Result<(KernelModule, Kernels)> {
        let m = KernelModule::load(ctx, &KERNELS)?;
        let ks = Kernels {
            embed: m.kernel()?,
            rms_qkv: m.kernel()?,
            attention: m.kernel()?,
            o_proj: m.kernel()?,
            rms_gate_up: m.kernel()?,
            down_proj: m.kernel()?,
            rms_logits: m.kernel()?,
            argmax: m.kernel()?,
            fill: m.kernel()?,
        };
        // The projections keep their input and weight rings in dynamic shared memory:
        // room for the longest input, and the carveout that lets as many CTAs reside as
        // that memory and their registers allow.
        let most = k::projection_smem(k::MAX_STAGED, 2, k::STAGES).max(k::projection_smem(
            k::MAX_STAGED,
            1,
            k::STAGES,
        ));
        for f in [
            ks.rms_qkv.function(),
            ks.o_proj.function(),
            ks.rms_gate_up.function(),
            ks.down_proj.function(),
            ks.rms_logits.function(),
        ] {
            f.set_max_dynamic_shared_size_bytes(most as u32)?;
            f.set_preferred_shared_memory_carveout(100)?;
        }
        Ok((m, ks))
    }

    /// The functions, in [`KINDS`] order.
    pub fn functions(&self) -> [&cudadrv::Function; 8] {
        [
            self.embed.function(),
            self.rms_qkv.function(),
            self.attention.function(),
            self.o_proj.function(),
            self.rms_gate_up.function(),
            self.down_proj.function(),
            self.rms_logits.function(),
            self.argmax.function(),
        ]
    }
}

/// Where a step's launches go.
pub enum On<'x, 'r, 'a> {
    /// Straight onto a stream (`cuLaunchKernelEx`).
    Stream(&'x Stream),
    /// Into a stream capture (one graph of the step).
    Capture(&'x Capturing<'x, 'a>),
    /// Into a replay region's execution.
    Region(&'x mut Recorder<'r, 'a>),
}

impl<'a> On<'_, '_, 'a> {
    /// Launches `kernel` with `cfg` and `args` where `self` says.
    ///
    /// # Safety
    /// The slices in `args` name live buffers of the kernel's context, of the lengths the
    /// kernel's docs ask for, that outlive the launch (and every launch of a graph made
    /// of it), and nothing else writes them meanwhile.
    unsafe fn launch<K: Kernel>(
        &mut self,
        kernel: &'a TypedKernel<K>,
        cfg: &LaunchConfig<'_>,
        args: &K::Params,
    ) -> Result<()> {
        // SAFETY: forwarded to the caller (the tuple type is the kernel's own, checked
        // against the module at load).
        unsafe {
            match self {
                On::Stream(s) => kernel.launch(&cfg.clone().stream(s), args),
                On::Capture(c) => c.launch(kernel.function(), cfg, args),
                On::Region(r) => r.launch(kernel.function(), cfg, args),
            }
        }
    }
}

/// The step's launch configurations and PDL plans, per kernel kind.
pub struct Launches {
    pub cfg: [LaunchConfig<'static>; 8],
    /// Ring slots per warp of each projection kind (0 for the others): see
    /// `decode_kernels::STAGES`.
    pub slots: [u32; 8],
    pub plan: [u32; 8],
}

/// Where the dependents are let go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trigger {
    /// At each kernel's exit (`griddepcontrol.wait` only).
    Exit,
    /// Right after each kernel's wait.
    Early,
    /// As `AutoPdl`'s rule picks per kernel (early for grids of a few CTAs).
    Auto,
}

impl Launches {
    /// The shapes of `s`'s kernels (`ctas` CTAs per SM for the projections); with `pdl`,
    /// every launch carries programmatic stream serialization and its kernel waits,
    /// triggering as `trigger` says.
    pub fn new(
        s: &Shape,
        ks: &Kernels,
        pdl: bool,
        trigger: Trigger,
        ctas: u32,
    ) -> Result<Launches> {
        // The projections: `ctas` resident CTAs per SM, their warps looping over rows.
        // Each with the dynamic shared memory its input and weight ring need.
        let sms = ks
            .rms_qkv
            .function()
            .context()
            .device()
            .multiprocessor_count()?;
        // A projection with fewer rows than those CTAs have warps gets only the CTAs its
        // rows fill (one row a warp at least), leaving the SMs' room to the next kernel.
        // Its rings get STAGES slots, or one fewer where only that lets more of those
        // CTAs reside at once (the same chunks in flight in less shared memory: at width
        // 4096 three CTAs an SM of the normalizing projections fit only so).
        let proj = |f: &cudadrv::Function, k: usize, rw: usize, rows: usize| {
            let warps_per_sm = sms as usize * k::WARPS;
            let per_sm = (rows.div_ceil(warps_per_sm) as u32).clamp(1, ctas);
            let resident = |slots: usize| {
                f.max_active_blocks_per_sm(k::BLOCK, k::projection_smem(k / 8, rw, slots))
                    .map(|n| n.min(per_sm))
            };
            let slots = if resident(k::STAGES - 1)? > resident(k::STAGES)? {
                k::STAGES - 1
            } else {
                k::STAGES
            };
            let cfg = LaunchConfig::new(sms * per_sm, k::BLOCK).shared_mem(k::projection_smem(
                k / 8,
                rw,
                slots,
            ) as u32);
            Ok::<_, cudadrv::Error>((cfg, slots as u32))
        };
        let qkv = proj(ks.rms_qkv.function(), s.d, 1, 3 * s.d)?;
        let o = proj(ks.o_proj.function(), s.d, 1, s.d)?;
        let gate_up = proj(ks.rms_gate_up.function(), s.d, 2, s.ffn)?;
        let down = proj(ks.down_proj.function(), s.ffn, 1, s.d)?;
        let logits = proj(ks.rms_logits.function(), s.d, 1, s.vocab)?;
        let slots = [0, qkv.1, 0, o.1, gate_up.1, down.1, logits.1, 0];
        let shapes = [
            LaunchConfig::new(1, k::BLOCK),
            qkv.0,
            // One cluster of the cache's splits per head.
            LaunchConfig::new(
                ((s.cache / k::SPLIT) as u32, s.heads as u32, 1),
                k::ATTN_THREADS,
            )
            .cluster_dim((s.cache / k::SPLIT) as u32)?,
            o.0,
            gate_up.0,
            down.0,
            logits.0,
            LaunchConfig::new(1, k::ARGMAX_THREADS),
        ];
        let mut plan = [0u32; 8];
        let mut cfg = shapes.clone();
        if pdl {
            for (i, f) in ks.functions().into_iter().enumerate() {
                let p = match trigger {
                    Trigger::Exit => PdlPlan::WAIT_ONLY,
                    Trigger::Early => PdlPlan::EARLY_TRIGGER,
                    Trigger::Auto => AutoPdl::new(f)?.rule_plan(&shapes[i])?,
                };
                plan[i] = p.bits();
                cfg[i] = shapes[i].clone().programmatic_stream_serialization()?;
            }
        }
        Ok(Launches { cfg, slots, plan })
    }
}

/// Timeline slots per step: one per kernel.
pub fn kernels_per_step(s: &Shape) -> usize {
    3 + 5 * s.layers
}

/// The model's buffers.
pub struct Model {
    pub shape: Shape,
    /// The generator's seed.
    pub seed: u64,
    /// Projection CTAs per SM.
    pub ctas: u32,
    /// Per tensor of [`tensors`], all layers.
    pub w: Vec<DeviceBuffer<Bf16>>,
    pub rope: DeviceBuffer<f32>,
    pub x: DeviceBuffer<Bf16>,
    pub qkv: DeviceBuffer<Bf16>,
    pub attn: DeviceBuffer<Bf16>,
    pub h: DeviceBuffer<Bf16>,
    pub logits: DeviceBuffer<f32>,
    /// The step's arg-max key (`decode_kernels::argmax_key`), 0 between steps.
    pub best: DeviceBuffer<u64>,
    pub token: DeviceBuffer<u32>,
    pub pos: DeviceBuffer<u32>,
    /// The token decoded at each position.
    pub tokens: DeviceBuffer<u32>,
    /// The timeline: `[step][kernel][start, wait passed, end]`, or empty.
    pub trace: DeviceBuffer<u64>,
}

/// Bytes of each of the gate and up projections' weights the output projection asks L2
/// for before its wait (the first 2 MiB of each; see `o_proj`). Measured on an H200
/// (graph + PDL, early trigger, each against no hint in one call): 1, 2 or 3 MiB of each
/// gave 0.6122-0.6127, 0.6095-0.6107 and 0.6098-0.6103 ms against 0.6149-0.6160 ms;
/// 4 to 12.4 MiB of each 0.6138-0.6347 ms against 0.6164-0.6194 ms.
const GATE_UP_HINT: usize = 2 << 20;

/// Tensor indexes in [`tensors`]' order.
const EMB: usize = 0;
const FINAL_NORM: usize = 1;
const LM_HEAD: usize = 2;
const ATTN_NORM: usize = 3;
const W_QKV: usize = 4;
const W_O: usize = 5;
const FFN_NORM: usize = 6;
const W_GATE: usize = 7;
const W_UP: usize = 8;
const W_DOWN: usize = 9;
const K_CACHE: usize = 10;
const V_CACHE: usize = 11;

impl Model {
    /// Allocates the model and generates its weights and cache prefix on the GPU with
    /// `fill_uniform` (safe launches), then synchronizes.
    pub fn new(
        ctx: &Context,
        ks: &Kernels,
        shape: Shape,
        seed: u64,
        stream: &Stream,
    ) -> Result<Model> {
        let ts = tensors(&shape);
        let layers = |t: &Tensor| if t.per_layer { shape.layers } else { 1 };
        let mut w = Vec::with_capacity(ts.len());
        for t in &ts {
            w.push(DeviceBuffer::<Bf16>::new(ctx, t.len() * layers(t))?);
        }
        kernel::scope(ctx, |sc| {
            let lane = sc.lane(stream)?;
            for (t, buf) in ts.iter().zip(w.iter_mut()) {
                // One launch per layer, each on its own part of the tensor.
                let mut rest = buf.view_mut();
                for l in 0..layers(t) {
                    let (part, tail) = rest.split_at_mut(t.len())?;
                    rest = tail;
                    let cfg = LaunchConfig::new(1024, 256);
                    lane.launch(&ks.fill, &cfg, (part, t.seed(seed, l), t.scale, t.offset))?;
                }
            }
            Ok(())
        })?;
        Ok(Model {
            shape,
            seed,
            ctas: 3,
            w,
            rope: DeviceBuffer::from_slice(ctx, &rope(&shape))?,
            x: DeviceBuffer::zeroed(ctx, shape.d)?,
            qkv: DeviceBuffer::zeroed(ctx, 3 * shape.d)?,
            attn: DeviceBuffer::zeroed(ctx, shape.d)?,
            h: DeviceBuffer::zeroed(ctx, shape.ffn)?,
            logits: DeviceBuffer::zeroed(ctx, shape.vocab)?,
            best: DeviceBuffer::zeroed(ctx, 1)?,
            token: DeviceBuffer::from_slice(ctx, &[first_token(&shape, seed)])?,
            pos: DeviceBuffer::zeroed(ctx, 1)?,
            tokens: DeviceBuffer::zeroed(ctx, shape.cache)?,
            trace: DeviceBuffer::zeroed(ctx, 0)?,
        })
    }

    /// Sets the decoding state: `token` next at position `pos` (synchronous copies).
    pub fn reset(&mut self, token: u32, pos: usize) -> Result<()> {
        self.token.copy_from_host(&[token])?;
        self.pos.copy_from_host(&[pos as u32])?;
        self.best.copy_from_host(&[0])?;
        self.tokens.memset_d32(u32::MAX)
    }

    /// A timeline buffer for `steps` steps (each slot's start and wait at `u64::MAX`,
    /// its end at 0), or none for `steps == 0`.
    pub fn arm_trace(&mut self, ctx: &Context, steps: usize) -> Result<()> {
        let n = steps * kernels_per_step(&self.shape);
        let init: Vec<u64> = (0..n * k::TRACE_SLOTS)
            .map(|i| if i % k::TRACE_SLOTS == 2 { 0 } else { u64::MAX })
            .collect();
        self.trace = DeviceBuffer::from_slice(ctx, &init)?;
        Ok(())
    }

    /// Layer `l`'s part of tensor `t`.
    fn part(&self, t: usize, l: usize) -> Result<cudadrv::kernel::DeviceSlice<Bf16>> {
        let n = self.w[t].len() / if t >= ATTN_NORM { self.shape.layers } else { 1 };
        Ok(self.w[t].slice(l * n..(l + 1) * n)?.kernel_slice())
    }

    /// Issues one decoding step on `on`: it reads the token and position the previous
    /// step left on the device and leaves the next ones there. `trace_step` selects the
    /// step's rows of an armed timeline (ignored when none is armed).
    pub fn step<'a>(
        &mut self,
        ks: &'a Kernels,
        on: &mut On<'_, '_, 'a>,
        l: &Launches,
        trace_step: usize,
    ) -> Result<()> {
        let s = self.shape;
        let per_step = kernels_per_step(&s);
        let traced = !self.trace.is_empty();
        let rows = if traced {
            let n = per_step * k::TRACE_SLOTS;
            trace_step * n..(trace_step + 1) * n
        } else {
            0..0
        };
        let trace = self.trace.slice_mut(rows)?.kernel_slice_mut();
        let slot = |i: usize| i as u32;
        let cache_len = s.cache * s.d;
        let x = self.x.view().kernel_slice();
        let xm = self.x.view_mut().kernel_slice_mut();
        let qkv = self.qkv.view().kernel_slice();
        let qkvm = self.qkv.view_mut().kernel_slice_mut();
        let attn = self.attn.view().kernel_slice();
        let attnm = self.attn.view_mut().kernel_slice_mut();
        let h = self.h.view().kernel_slice();
        let hm = self.h.view_mut().kernel_slice_mut();
        let logitsm = self.logits.view_mut().kernel_slice_mut();
        let bestm = self.best.view_mut().kernel_slice_mut();
        let rope = self.rope.view().kernel_slice();
        let pos = self.pos.view().kernel_slice();
        let posm = self.pos.view_mut().kernel_slice_mut();
        let token = self.token.view().kernel_slice();
        let tokenm = self.token.view_mut().kernel_slice_mut();
        let tokens = self.tokens.view_mut().kernel_slice_mut();
        let (c, p, sl) = (&l.cfg, &l.plan, &l.slots);
        // SAFETY (every launch below): each slice names a buffer of this model, which
        // outlives the step's work (the caller synchronizes, or drops the graph, before
        // the model), with the lengths the kernels' docs ask for (the shape's); the
        // launches run in stream order, so no two of them touch a buffer at once except
        // as PDL's waits order them.
        unsafe {
            on.launch(
                &ks.embed,
                &c[0],
                &(self.part(EMB, 0)?, token, xm, p[0], trace, slot(0)),
            )?;
            for layer in 0..s.layers {
                let at = 1 + 5 * layer;
                let kc = self.w[K_CACHE]
                    .slice_mut(layer * cache_len..(layer + 1) * cache_len)?
                    .kernel_slice_mut();
                let vc = self.w[V_CACHE]
                    .slice_mut(layer * cache_len..(layer + 1) * cache_len)?
                    .kernel_slice_mut();
                on.launch(
                    &ks.rms_qkv,
                    &c[1],
                    &(
                        x,
                        self.part(ATTN_NORM, layer)?,
                        self.part(W_QKV, layer)?,
                        qkvm,
                        sl[1],
                        p[1],
                        trace,
                        slot(at),
                    ),
                )?;
                on.launch(
                    &ks.attention,
                    &c[2],
                    &(qkv, kc, vc, rope, pos, attnm, p[2], trace, slot(at + 1)),
                )?;
                on.launch(
                    &ks.o_proj,
                    &c[3],
                    &(
                        attn,
                        self.part(W_O, layer)?,
                        xm,
                        self.part(W_GATE, layer)?,
                        self.part(W_UP, layer)?,
                        (GATE_UP_HINT / 2) as u32,
                        sl[3],
                        p[3],
                        trace,
                        slot(at + 2),
                    ),
                )?;
                on.launch(
                    &ks.rms_gate_up,
                    &c[4],
                    &(
                        x,
                        self.part(FFN_NORM, layer)?,
                        self.part(W_GATE, layer)?,
                        self.part(W_UP, layer)?,
                        hm,
                        sl[4],
                        p[4],
                        trace,
                        slot(at + 3),
                    ),
                )?;
                on.launch(
                    &ks.down_proj,
                    &c[5],
                    &(
                        h,
                        self.part(W_DOWN, layer)?,
                        xm,
                        sl[5],
                        p[5],
                        trace,
                        slot(at + 4),
                    ),
                )?;
            }
            let last = 1 + 5 * s.layers;
            on.launch(
                &ks.rms_logits,
                &c[6],
                &(
                    x,
                    self.part(FINAL_NORM, 0)?,
                    self.part(LM_HEAD, 0)?,
                    logitsm,
                    bestm,
                    sl[6],
                    p[6],
                    trace,
                    slot(last),
                ),
            )?;
            on.launch(
                &ks.argmax,
                &c[7],
                &(bestm, tokenm, posm, tokens, p[7], trace, slot(last + 1)),
            )?;
        }
        Ok(())
    }

    /// Copies tensor `t` (all layers) to the host as raw bfloat16 bits.
    pub fn download(&self, t: usize) -> Result<Vec<u16>> {
        let mut v = vec![Bf16::ZERO; self.w[t].len()];
        self.w[t].copy_to_host(&mut v)?;
        Ok(v.into_iter().map(Bf16::to_bits).collect())
    }
}
