//! The template's kernels. Each `cudadrv::kernel!` is both the device entry point (in the
//! nvptx64 build) and the host's typed handle (in the host build), so the two sides
//! cannot disagree about parameters.
//!
//! 1. `saxpy`: the kernel to start from, `safe` (launched without `unsafe`), one thread
//!    per element.
//! 2. For later: a Programmatic Dependent Launch pair (`produce`, then `consume`, which
//!    may start before `produce` has finished).
//! 3. For later: an mbarrier producer/consumer in shared memory (`handoff`, an `unsafe`
//!    kernel, so an `unsafe` launch).
#![no_std]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx, asm_experimental_arch))]

use cudadrv::kernel::{DeviceSlice, DeviceSliceMut};

// Device-only imports: the host build sees only the declarations.
#[cfg(target_arch = "nvptx64")]
use cudadrv::device::{
    MBarrier, block_dim, fence_mbarrier_init, global_idx_x, launch_dependents, sync_threads,
    thread_idx,
};

// 1. The first kernel.

cudadrv::kernel! {
    /// `y[i] = a * x[i] + y[i]` (`f32`, a multiply then an add) for every `i` that both
    /// slices have, one thread per element: any 1-D grid of at least `y.len()` threads
    /// covers `y`; threads past the end do nothing.
    ///
    /// `safe` form: the body is compiled under `#[forbid(unsafe_code)]` and reaches
    /// memory only through the bounds-checked slices, so the host launches it without
    /// `unsafe`.
    pub safe fn saxpy(a: f32, x: DeviceSlice<f32>, y: DeviceSliceMut<f32>) {
        let i = global_idx_x() as usize;
        if let (Some(xi), Some(yi)) = (x.get(i), y.get(i)) {
            y.write(i, a * xi + yi);
        }
    }
}

// 2. A Programmatic Dependent Launch pair.

/// What `produce` writes at `i`.
pub const fn produced(i: u32) -> u32 {
    i.wrapping_mul(3).wrapping_add(7)
}

/// What `consume` writes at `i` after `produce`.
pub const fn consumed(i: u32) -> u32 {
    produced(i).wrapping_mul(2).wrapping_add(1)
}

cudadrv::kernel! {
    /// First of a Programmatic Dependent Launch pair: lets the dependent kernel be
    /// scheduled at once, then writes `out[i] = 3i + 7`.
    pub safe fn produce(out: DeviceSliceMut<u32>) {
        launch_dependents();
        let i = global_idx_x();
        let _ = out.try_write(i as usize, produced(i));
    }
}

cudadrv::kernel! {
    /// Second of the pair (`dependent`: its entry waits for `produce` with
    /// `griddepcontrol.wait` before the body runs): `out[i] = 2 input[i] + 1`.
    pub safe dependent fn consume(input: DeviceSlice<u32>, out: DeviceSliceMut<u32>) {
        let i = global_idx_x() as usize;
        if let Some(v) = input.get(i) {
            let _ = out.try_write(i, v.wrapping_mul(2).wrapping_add(1));
        }
    }
}

// 3. An mbarrier producer/consumer in one block.

/// Words the producer warp hands to the consumer warp through shared memory.
pub const WORDS: usize = 32;

#[cfg(target_arch = "nvptx64")]
cudadrv::shared_array! {
    /// The words in flight.
    fn words() -> [u32; 32];
}

#[cfg(target_arch = "nvptx64")]
cudadrv::shared_array! {
    /// The mbarrier guarding them.
    fn bar_storage() -> [u64; 1];
}

cudadrv::kernel! {
    /// An mbarrier producer/consumer in one block of 64 threads: warp 0 writes
    /// `seed + lane * lane` into shared memory and arrives on the barrier; warp 1 arrives,
    /// waits for the phase, and writes the word it reads plus its lane to
    /// `out[block * 32 + lane]`. Blocks of another shape return at once.
    ///
    /// `unsafe` form: mbarrier setup and `sync_threads` are `unsafe` device calls.
    pub unsafe fn handoff(out: DeviceSliceMut<u32>, seed: u32) {
        if block_dim().x != 64 {
            return;
        }
        let tid = thread_idx().x;
        let lane = tid % 32;
        // SAFETY: `bar_storage` is a `u64` in this block's shared memory used only as
        // this barrier; thread 0 initializes it before the `sync_threads` every thread
        // reaches.
        let bar = unsafe { MBarrier::from_ptr(bar_storage().as_mut_ptr()) };
        if tid == 0 {
            // SAFETY: only thread 0, before any other use (see above).
            unsafe { bar.init(64) };
            fence_mbarrier_init();
        }
        // SAFETY: every thread of the block reaches it (the shape check is uniform).
        unsafe { sync_threads() };
        let slot = words().ptr(lane as usize);
        if tid < 32 {
            if let Some(p) = slot {
                // SAFETY: `p` is word `lane` of the shared array; only this thread
                // writes it, before its arrival releases it.
                unsafe { p.write_volatile(seed.wrapping_add(lane * lane)) };
            }
            // SAFETY: each of the 64 threads arrives once, the expected count.
            let _ = unsafe { bar.arrive() };
        } else {
            // SAFETY: as above.
            unsafe { bar.arrive() }.wait();
            if let Some(p) = slot {
                // SAFETY: the phase completed after warp 0's arrivals, so its writes are
                // visible; nothing writes the word any more.
                let v = unsafe { p.read_volatile() };
                let block = cudadrv::device::block_idx().x as usize;
                let _ = out.try_write(block * WORDS + lane as usize, v.wrapping_add(lane));
            }
        }
    }
}
