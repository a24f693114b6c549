//! The device helpers a decode step builds on, each checked by `hw_device`: bfloat16
//! conversions, 16-byte loads of bfloat16 weights, and warp reductions. Declared with
//! `cudadrv::kernel!`, so tests/support includes this file for the host handles.

use cudadrv::args::Bf16;
use cudadrv::kernel::{DeviceSlice, DeviceSliceMut};

cudadrv::kernel! {
    /// `out[i] = bf16(x[i])` (round to nearest even) and `back[i] = f32(out[i])` for
    /// every `i < x.len()` (grid-stride loop).
    pub safe fn bf16_round_trip(x: DeviceSlice<f32>, out: DeviceSliceMut<Bf16>, back: DeviceSliceMut<f32>) {
        let stride = cudadrv::device::global_dim_x() as usize;
        let mut i = cudadrv::device::global_idx_x() as usize;
        while let Some(v) = x.get(i) {
            let b = Bf16::from_f32(v);
            out.write(i, b);
            back.write(i, b.to_f32());
            i += stride;
        }
    }
}

cudadrv::kernel! {
    /// `out[8k + j] = f32(w[8k + j])` for every whole chunk of 8 values, read with
    /// `get8_f32` (one 16-byte load per chunk when `w` is 16-byte aligned; grid-stride).
    pub safe fn bf16_load8(w: DeviceSlice<Bf16>, out: DeviceSliceMut<f32>) {
        let stride = cudadrv::device::global_dim_x() as usize;
        let mut k = cudadrv::device::global_idx_x() as usize;
        while let Some(v) = w.get8_f32(k) {
            let mut j = 0;
            while j < 8 {
                out.write(8 * k + j, v[j]);
                j += 1;
            }
            k += stride;
        }
    }
}

cudadrv::kernel! {
    /// One warp per 32 consecutive values of `x` (threads past its end count 0.0): lane 0
    /// of warp `w` writes the warp's sum to `sums[w]`, its largest value to `maxes[w]`,
    /// the index of its first largest value to `arg[w]`, and the sum of the warp's
    /// global thread indices to `idx_sums[w]`.
    ///
    /// # Safety
    /// Launch with a block size that is a multiple of 32 (every lane of every warp takes
    /// part in the exchanges); the outputs need one element per warp of the grid.
    pub unsafe fn warp_reduce(
        x: DeviceSlice<f32>,
        sums: DeviceSliceMut<f32>,
        maxes: DeviceSliceMut<f32>,
        arg: DeviceSliceMut<u32>,
        idx_sums: DeviceSliceMut<u32>,
    ) {
        let tid = cudadrv::device::global_idx_x();
        let v = x.get(tid as usize).unwrap_or(0.0);
        // SAFETY: the launch shape (caller): whole warps, no lane leaves before these.
        let (s, m, (_, a), u) = unsafe {
            (
                cudadrv::device::warp_sum_f32(v),
                cudadrv::device::warp_max_f32(v),
                cudadrv::device::warp_argmax_f32(v, tid),
                cudadrv::device::warp_sum_u32(tid),
            )
        };
        if cudadrv::device::lane_id() == 0 {
            let w = (tid / 32) as usize;
            let _ = sums.try_write(w, s);
            let _ = maxes.try_write(w, m);
            let _ = arg.try_write(w, a);
            let _ = idx_sums.try_write(w, u);
        }
    }
}
