//! Automatic Programmatic Dependent Launch: [`AutoPdl`] picks, per launch, whether the
//! launch carries programmatic stream serialization and where the kernel triggers its
//! dependents, from the grid and the function's occupancy; [`PdlPlan`] carries the
//! choice to the kernel, whose side is one call (`cudadrv::device::pdl_auto(plan)`).
//!
//! The rule and its measurements are on [`AutoPdl`].

use core::cell::Cell;

use cudadrv_sys::CUlaunchAttributeID;

use super::{LaunchAttribute, LaunchConfig};
use crate::args::DeviceRepr;
use crate::driver::event::{Event, EventFlags};
use crate::driver::function::Function;
use crate::driver::stream::Stream;
use crate::error::{Error, Result};

/// The per-launch PDL choice passed to the kernel as one `u32` parameter (the device
/// type `cudadrv::device::PdlPlan` has the same layout and bits).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct PdlPlan(u32);

impl PdlPlan {
    /// Bit: the launch carries programmatic stream serialization (the kernel waits).
    pub const WAIT: u32 = 1;
    /// Bit: the kernel triggers its dependents right after the wait.
    pub const TRIGGER_EARLY: u32 = 2;
    /// No PDL: no attribute, no wait, the trigger at grid exit.
    pub const NONE: Self = Self(0);
    /// PDL, wait only.
    pub const WAIT_ONLY: Self = Self(Self::WAIT);
    /// PDL with an early trigger.
    pub const EARLY_TRIGGER: Self = Self(Self::WAIT | Self::TRIGGER_EARLY);

    /// The bits.
    #[must_use]
    pub const fn bits(self) -> u32 {
        self.0
    }

    /// Whether the launch gets the programmatic-stream-serialization attribute.
    #[must_use]
    pub const fn waits(self) -> bool {
        self.0 & Self::WAIT != 0
    }

    /// Whether the kernel triggers its dependents early.
    #[must_use]
    pub const fn triggers_early(self) -> bool {
        self.0 & Self::TRIGGER_EARLY != 0
    }

    /// Sets or removes the programmatic-stream-serialization attribute on `cfg` as this
    /// plan says.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the attribute list is full.
    pub fn apply(self, cfg: &mut LaunchConfig<'_>) -> Result<()> {
        if self.waits() {
            cfg.set(LaunchAttribute::programmatic_stream_serialization(true))?;
        } else {
            cfg.remove(CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION);
        }
        Ok(())
    }
}

// SAFETY: `repr(transparent)` over `u32`: four bytes, no padding, the device's `u32`.
unsafe impl DeviceRepr for PdlPlan {
    const DEVICE_SIZE: usize = 4;
    const DEVICE_ALIGN: usize = 4;
}

/// Occupancy cache slots per [`AutoPdl`].
const SLOTS: usize = 4;

/// One cached occupancy: (threads per block, dynamic shared memory, blocks per SM).
type Slot = (u32, u32, u32);

/// Measured choices per [`AutoPdl`] (the oldest is replaced when full).
pub const MAX_TUNED_SHAPES: usize = 8;

/// Most rounds [`AutoPdl::tune`] measures.
pub const MAX_TUNE_ROUNDS: usize = 32;

/// One measured choice: (threads per block, dynamic shared memory, blocks, plan).
type Tuned = Option<(u32, u32, u64, PdlPlan)>;

/// The launch's threads per block and blocks.
fn shape(cfg: &LaunchConfig<'_>) -> Result<(u32, u64)> {
    let threads = cfg
        .block
        .x
        .checked_mul(cfg.block.y)
        .and_then(|t| t.checked_mul(cfg.block.z))
        .ok_or(Error::InvalidArgument(
            "block of more than u32::MAX threads",
        ))?;
    let blocks = u64::from(cfg.grid.x) * u64::from(cfg.grid.y) * u64::from(cfg.grid.z);
    Ok((threads, blocks))
}

/// The automatic PDL choice for one function: the device's SM count and a small
/// occupancy cache, so a launch with a shape seen before makes no driver call and no
/// allocation.
///
/// # The rule
/// From the grid (`blocks`), the SM count and `capacity = active blocks per SM x SMs`
/// (`cuOccupancyMaxActiveBlocksPerMultiprocessor` for the launch's block size and dynamic
/// shared memory, cached per shape):
/// - a grid of a few blocks (at most one per 16 SMs: 8 on an H100): PDL attribute and an
///   **early trigger** (right after the wait). The dependent's blocks find idle SMs and
///   wait there, so its launch latency hides behind this grid entirely.
/// - any larger grid: PDL attribute, **wait only** (the trigger is the grid's exit). The
///   launch still overlaps the end of this grid, and no dependent block takes an SM slot
///   while this grid has blocks left to run. An explicit trigger in a grid of more than
///   one wave lets the dependent's blocks take those slots, which slowed such chains
///   markedly on an H100; within one wave, waiting alone was faster than the early
///   trigger too from 16 blocks up (figures: `docs/measurements.md` in the repository).
/// - a kernel that fits nowhere (capacity 0, its launch fails): no PDL.
///
/// No rule from the grid and the occupancy alone is right everywhere: on the H100, at
/// half a wave the early trigger made chains of one kernel faster and of the same kernel
/// moving four times the bytes per thread slower, with the same grid, block and
/// occupancy (`docs/measurements.md`). Where it matters,
/// [`tune`](AutoPdl::tune) measures the three choices for a shape on the GPU and keeps
/// the fastest: from then on, launches of that shape (grid, block, dynamic shared
/// memory) get the measured plan instead of the rule's, with no driver call.
///
/// `region_bench` measures the rule and the tuned choice against the three fixed choices
/// from one block to 17 waves and three element sizes (`docs/measurements.md`,
/// `docs/auto_pdl_sweep.svg`).
///
/// ```no_run
/// # fn f(step: &cudadrv::Function, stream: &cudadrv::Stream, a: cudadrv::DevicePtr<u32>,
/// #      b: cudadrv::DevicePtr<u32>, n: u32) -> cudadrv::Result<()> {
/// use cudadrv::launch::{AutoPdl, LaunchConfig, launch};
/// let auto = AutoPdl::new(step)?; // the SM count, and an occupancy cache
/// let (cfg, plan) = LaunchConfig::new(n.div_ceil(256), 256).stream(stream).auto_pdl(&auto)?;
/// // SAFETY: `step(in, out, n, plan)` reads and writes `n` words of live buffers, and
/// // calls `pdl_auto(plan)` before it reads `in`.
/// unsafe { launch(step, &cfg, &(a, b, n, plan))? };
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct AutoPdl<'f> {
    f: &'f Function,
    sms: u32,
    slots: Cell<[Slot; SLOTS]>,
    next: Cell<usize>,
    tuned: Cell<[Tuned; MAX_TUNED_SHAPES]>,
    next_tuned: Cell<usize>,
}

impl<'f> AutoPdl<'f> {
    /// The choice for launches of `f` (`cuDeviceGetAttribute` for the SM count of its
    /// context's device).
    ///
    /// # Errors
    /// Driver errors.
    #[doc(alias = "CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT")]
    pub fn new(f: &'f Function) -> Result<Self> {
        let sms = f.context().device().multiprocessor_count()?;
        Ok(Self {
            f,
            sms,
            slots: Cell::new([(0, 0, 0); SLOTS]),
            next: Cell::new(0),
            tuned: Cell::new([None; MAX_TUNED_SHAPES]),
            next_tuned: Cell::new(0),
        })
    }

    /// The function.
    #[must_use]
    pub fn function(&self) -> &'f Function {
        self.f
    }

    /// Blocks of `threads` threads with `smem` bytes of dynamic shared memory resident at
    /// once on the whole device (`cuOccupancyMaxActiveBlocksPerMultiprocessor` x SMs, the
    /// first time for a shape).
    ///
    /// # Errors
    /// Driver errors of the occupancy query.
    #[doc(alias = "cuOccupancyMaxActiveBlocksPerMultiprocessor")]
    pub fn capacity(&self, threads: u32, smem: u32) -> Result<u64> {
        let mut slots = self.slots.get();
        let per_sm = match slots.iter().find(|s| s.0 == threads && s.1 == smem) {
            Some(s) => s.2,
            None => {
                let n = self.f.max_active_blocks_per_sm(threads, smem as usize)?;
                let i = self.next.get() % SLOTS;
                if let Some(s) = slots.get_mut(i) {
                    *s = (threads, smem, n);
                }
                self.slots.set(slots);
                self.next.set(i + 1);
                n
            }
        };
        Ok(u64::from(per_sm) * u64::from(self.sms))
    }

    /// The plan for a launch of `cfg`'s shape: the measured one if [`tune`](Self::tune)
    /// measured this shape, else the rule's (early trigger for a grid of at most one
    /// block per 16 SMs, wait only for a larger one; see [`AutoPdl`]).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a block of more than `u32::MAX` threads; driver
    /// errors of the occupancy query.
    pub fn plan(&self, cfg: &LaunchConfig<'_>) -> Result<PdlPlan> {
        let (threads, blocks) = shape(cfg)?;
        if let Some(plan) = self.tuned_plan(threads, cfg.shared_mem_bytes, blocks) {
            return Ok(plan);
        }
        let capacity = self.capacity(threads, cfg.shared_mem_bytes)?;
        Ok(choose(blocks, capacity, self.sms))
    }

    /// The plan the rule alone picks for `cfg`'s shape (whatever was measured).
    ///
    /// # Errors
    /// As [`plan`](Self::plan).
    pub fn rule_plan(&self, cfg: &LaunchConfig<'_>) -> Result<PdlPlan> {
        let (threads, blocks) = shape(cfg)?;
        let capacity = self.capacity(threads, cfg.shared_mem_bytes)?;
        Ok(choose(blocks, capacity, self.sms))
    }

    /// The measured plan for `cfg`'s shape, if [`tune`](Self::tune) measured it (and it
    /// was not replaced since).
    #[must_use]
    pub fn tuned(&self, cfg: &LaunchConfig<'_>) -> Option<PdlPlan> {
        let (threads, blocks) = shape(cfg).ok()?;
        self.tuned_plan(threads, cfg.shared_mem_bytes, blocks)
    }

    fn tuned_plan(&self, threads: u32, smem: u32, blocks: u64) -> Option<PdlPlan> {
        self.tuned
            .get()
            .iter()
            .flatten()
            .find(|t| t.0 == threads && t.1 == smem && t.2 == blocks)
            .map(|t| t.3)
    }

    /// Keeps `plan` as the choice for launches of `cfg`'s shape (grid, block, dynamic
    /// shared memory), replacing an earlier choice for it, or the oldest of
    /// [`MAX_TUNED_SHAPES`] when full. [`tune`](Self::tune) calls it with what it
    /// measured; a caller that measured otherwise may too.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a block of more than `u32::MAX` threads.
    pub fn set_tuned(&self, cfg: &LaunchConfig<'_>, plan: PdlPlan) -> Result<()> {
        let (threads, blocks) = shape(cfg)?;
        let smem = cfg.shared_mem_bytes;
        let mut tuned = self.tuned.get();
        let at = tuned
            .iter()
            .position(|t| t.is_some_and(|t| t.0 == threads && t.1 == smem && t.2 == blocks));
        let i = at.unwrap_or_else(|| {
            let i = self.next_tuned.get() % MAX_TUNED_SHAPES;
            self.next_tuned.set(i + 1);
            i
        });
        if let Some(t) = tuned.get_mut(i) {
            *t = Some((threads, smem, blocks, plan));
        }
        self.tuned.set(tuned);
        Ok(())
    }

    /// Forgets every measured choice (the rule applies again).
    pub fn clear_tuned(&self) {
        self.tuned.set([None; MAX_TUNED_SHAPES]);
        self.next_tuned.set(0);
    }

    /// Measures the three choices ([`PdlPlan::NONE`], [`PdlPlan::WAIT_ONLY`],
    /// [`PdlPlan::EARLY_TRIGGER`]) for launches of `cfg`'s shape and keeps the fastest
    /// (see [`set_tuned`](Self::set_tuned)), which it returns. `run(stream, plan)` issues
    /// one sample of the caller's work on `stream` with `plan` (typically a chain of
    /// launches of this shape, each configured with [`PdlPlan::apply`] and passed
    /// `plan`); each round times one sample of each plan between two events
    /// (`cuEventRecord`, `cuEventSynchronize`, `cuEventElapsedTime`), the plans taking
    /// turns at going first, and the plan with the smallest median wins. The work runs
    /// for real: `3 x rounds` samples of it.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for 0 rounds or more than [`MAX_TUNE_ROUNDS`], or a
    /// block of more than `u32::MAX` threads; [`Error::ContextMismatch`] for a stream of
    /// another context; `run`'s errors; driver errors of the events.
    #[doc(alias = "cuEventElapsedTime")]
    pub fn tune<F>(
        &self,
        stream: &mut Stream,
        cfg: &LaunchConfig<'_>,
        rounds: usize,
        mut run: F,
    ) -> Result<PdlPlan>
    where
        F: FnMut(&mut Stream, PdlPlan) -> Result<()>,
    {
        if rounds == 0 || rounds > MAX_TUNE_ROUNDS {
            return Err(Error::InvalidArgument(
                "AutoPdl::tune: 1 to MAX_TUNE_ROUNDS rounds",
            ));
        }
        shape(cfg)?;
        self.f
            .context()
            .ensure_same(stream.context(), "cuEventRecord")?;
        let ctx = stream.context().clone();
        let events = [
            Event::new(&ctx, EventFlags::empty())?,
            Event::new(&ctx, EventFlags::empty())?,
        ];
        const PLANS: [PdlPlan; 3] = [PdlPlan::NONE, PdlPlan::WAIT_ONLY, PdlPlan::EARLY_TRIGGER];
        // ms[plan][round]
        let mut ms = [[0f32; MAX_TUNE_ROUNDS]; 3];
        for round in 0..rounds {
            for k in 0..PLANS.len() {
                let p = (k + round) % PLANS.len();
                events[0].record(stream)?;
                run(stream, PLANS[p])?;
                events[1].record(stream)?;
                events[1].synchronize()?;
                let t = Event::elapsed_ms(&events[0], &events[1])?;
                if let Some(slot) = ms.get_mut(p).and_then(|row| row.get_mut(round)) {
                    *slot = t;
                }
            }
        }
        // The middle sample, or the mean of the middle two (for odd `n`, both indices
        // are the middle one).
        let median = |v: &mut [f32]| {
            v.sort_unstable_by(f32::total_cmp);
            let n = v.len();
            let hi = v.get(n / 2).copied().unwrap_or(f32::INFINITY);
            let lo = v.get(n.saturating_sub(1) / 2).copied().unwrap_or(hi);
            0.5 * (lo + hi)
        };
        let mut best = (f32::INFINITY, PdlPlan::WAIT_ONLY);
        for (row, plan) in ms.iter_mut().zip(PLANS) {
            let m = median(&mut row[..rounds]);
            if m < best.0 {
                best = (m, plan);
            }
        }
        self.set_tuned(cfg, best.1)?;
        Ok(best.1)
    }
}

/// The rule: a grid of at most one block per 16 SMs triggers early, a larger one waits
/// only; a kernel that fits nowhere (capacity 0: its launch fails) gets no PDL.
#[must_use]
const fn choose(blocks: u64, capacity: u64, sms: u32) -> PdlPlan {
    if capacity == 0 {
        PdlPlan::NONE
    } else if blocks * EARLY_SMS_PER_BLOCK <= sms as u64 {
        PdlPlan::EARLY_TRIGGER
    } else {
        PdlPlan::WAIT_ONLY
    }
}

/// SMs per block below which a grid triggers its dependents early.
const EARLY_SMS_PER_BLOCK: u64 = 16;

impl<'a> LaunchConfig<'a> {
    /// Automatic PDL for a launch of `auto`'s function with this shape: sets (or
    /// removes) programmatic stream serialization as [`AutoPdl::plan`] decides and
    /// returns the plan to pass to the kernel, which calls
    /// `cudadrv::device::pdl_auto(plan)` before reading its predecessor's output. No
    /// allocation; a driver call only the first time a block shape is seen.
    ///
    /// # Errors
    /// As [`AutoPdl::plan`]; [`Error::InvalidArgument`] when the attribute list is full.
    #[doc(alias = "CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION")]
    pub fn auto_pdl(mut self, auto: &AutoPdl<'_>) -> Result<(Self, PdlPlan)> {
        let plan = auto.plan(&self)?;
        plan.apply(&mut self)?;
        Ok((self, plan))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiny_grids_trigger_early_larger_ones_wait_only() {
        // H100: 8 blocks of 256 threads per SM, 132 SMs.
        let (cap, sms) = (8 * 132, 132);
        assert_eq!(choose(1, cap, sms), PdlPlan::EARLY_TRIGGER);
        assert_eq!(choose(8, cap, sms), PdlPlan::EARLY_TRIGGER);
        assert_eq!(choose(9, cap, sms), PdlPlan::WAIT_ONLY);
        assert_eq!(choose(132, cap, sms), PdlPlan::WAIT_ONLY);
        assert_eq!(choose(cap + 1, cap, sms), PdlPlan::WAIT_ONLY);
        assert_eq!(choose(4096, cap, sms), PdlPlan::WAIT_ONLY);
        assert_eq!(choose(1, 0, sms), PdlPlan::NONE);
    }

    #[test]
    fn plans_set_and_remove_the_attribute() {
        let id = CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        let mut cfg = LaunchConfig::new(1, 1);
        PdlPlan::WAIT_ONLY.apply(&mut cfg).unwrap();
        assert!(cfg.find(id).is_some());
        PdlPlan::NONE.apply(&mut cfg).unwrap();
        assert!(cfg.find(id).is_none());
        assert_eq!(PdlPlan::EARLY_TRIGGER.bits(), 3);
        assert!(PdlPlan::EARLY_TRIGGER.triggers_early() && !PdlPlan::WAIT_ONLY.triggers_early());
        assert_eq!(PdlPlan::DEVICE_SIZE, core::mem::size_of::<PdlPlan>());
    }
}
