//! Automatic Programmatic Dependent Launch: [`AutoPdl`] picks, per launch, whether the
//! launch carries programmatic stream serialization and where the kernel triggers its
//! dependents, from the grid and the function's occupancy; [`PdlPlan`] carries the
//! choice to the kernel, whose side is one call (`cudadrv::device::pdl_auto(plan)`).
//!
//! The rule and its measurements are on [`AutoPdl`].

use core::cell::Cell;

use cuda_sys::CUlaunchAttributeID;

use super::{LaunchAttribute, LaunchConfig};
use crate::args::DeviceRepr;
use crate::error::{Error, Result};
use crate::function::Function;

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
///   one wave lets the dependent's blocks take those slots, and the H100 ran such chains
///   at 55% of their bandwidth (1M elements, 4096 blocks: no PDL 3.46 us, early trigger
///   5.43, wait-only 3.26); within one wave, waiting alone was faster than the early
///   trigger too from 16 blocks up (up to 28% at 132-264 blocks).
/// - a kernel that fits nowhere (capacity 0, its launch fails): no PDL.
///
/// `region_bench` measures the rule against the three fixed choices from one block to 17
/// waves and three element sizes (README, `docs/auto_pdl_sweep.svg`).
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

    /// The plan for a launch of `cfg`'s shape: early trigger for a grid of at most one
    /// block per 16 SMs, wait only for a larger one (see [`AutoPdl`]).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a block of more than `u32::MAX` threads; driver
    /// errors of the occupancy query.
    pub fn plan(&self, cfg: &LaunchConfig<'_>) -> Result<PdlPlan> {
        let threads = cfg
            .block
            .x
            .checked_mul(cfg.block.y)
            .and_then(|t| t.checked_mul(cfg.block.z))
            .ok_or(Error::InvalidArgument(
                "block of more than u32::MAX threads",
            ))?;
        let blocks = u64::from(cfg.grid.x) * u64::from(cfg.grid.y) * u64::from(cfg.grid.z);
        let capacity = self.capacity(threads, cfg.shared_mem_bytes)?;
        Ok(choose(blocks, capacity, self.sms))
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
