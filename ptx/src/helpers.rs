//! The device helpers a decode step builds on, each checked by `hw_device`: bfloat16
//! conversions, 16-byte loads of bfloat16 weights, and warp reductions. Declared with
//! `cudadrv::kernel!`, so tests/support includes this file for the host handles.

use cudadrv::args::Bf16;
use cudadrv::kernel::{DeviceSlice, DeviceSliceMut};

cudadrv::kernel! {
    /// `out[i] = bf16(x[i])` (round to nearest even, `Bf16::from_f32`) and `back[i] =
    /// f32(out[i])` for every `i < x.len()`; `fast[i]` the same rounding by
    /// `cudadrv::device::to_bf16` (one `cvt`) and `pairs[j]` the pair `x[2j], x[2j + 1]`
    /// by `pack_bf16x2` (grid-stride loop).
    pub safe fn bf16_round_trip(
        x: DeviceSlice<f32>,
        out: DeviceSliceMut<Bf16>,
        back: DeviceSliceMut<f32>,
        fast: DeviceSliceMut<Bf16>,
        pairs: DeviceSliceMut<u32>,
    ) {
        use cudadrv::device::{pack_bf16x2, to_bf16};
        let stride = cudadrv::device::global_dim_x() as usize;
        let mut i = cudadrv::device::global_idx_x() as usize;
        while let Some(v) = x.get(i) {
            let b = Bf16::from_f32(v);
            out.write(i, b);
            back.write(i, b.to_f32());
            fast.write(i, to_bf16(v));
            if i % 2 == 0 {
                if let Some(w) = x.get(i + 1) {
                    pairs.write(i / 2, pack_bf16x2(v, w));
                }
            }
            i += stride;
        }
    }
}

cudadrv::kernel! {
    /// `out[8k + j] = f32(w[8k + j])` for every whole chunk of 8 values, read with
    /// `get8_f32` (one 16-byte load per chunk when `w` is 16-byte aligned; grid-stride);
    /// `out16` the same through `w.chunks16()` when `w` is 16-byte aligned, and
    /// `aligned[0]` 1 when it is, 0 when not (thread 0).
    pub safe fn bf16_load8(w: DeviceSlice<Bf16>, out: DeviceSliceMut<f32>, out16: DeviceSliceMut<f32>, aligned: DeviceSliceMut<u32>) {
        let stride = cudadrv::device::global_dim_x() as usize;
        let first = cudadrv::device::global_idx_x() as usize;
        // Chunk `k`, `k + stride`, ... of `get` into `dst`, until `get` has none.
        let copy = |dst: &DeviceSliceMut<f32>, get: &dyn Fn(usize) -> Option<[f32; 8]>| {
            let mut k = first;
            while let Some(v) = get(k) {
                let mut j = 0;
                while j < 8 {
                    dst.write(8 * k + j, v[j]);
                    j += 1;
                }
                k += stride;
            }
        };
        copy(&out, &|k| w.get8_f32(k));
        let chunks = w.chunks16();
        if first == 0 {
            let _ = aligned.try_write(0, u32::from(chunks.is_some()));
        }
        if let Some(c) = chunks {
            copy(&out16, &|k| c.get8_f32(k));
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

cudadrv::kernel! {
    /// For every `i < x.len()` (grid-stride): `e2[i] = 2^x[i]`, `ex[i] = e^x[i]`,
    /// `rs[i] = 1/sqrt(|x[i]|)` (the approximate forms); `tickets[i]` = the value of
    /// `counter[0]` this thread's `fetch_add(0, 1)` returned; `minmax[0]` / `minmax[1]`
    /// the smallest / largest `key(i) = (i * 2654435761) mod 2^32 + 2^32` through
    /// `fetch_min` / `fetch_max`.
    pub safe fn sfu_atomics(
        x: DeviceSlice<f32>,
        e2: DeviceSliceMut<f32>,
        ex: DeviceSliceMut<f32>,
        rs: DeviceSliceMut<f32>,
        counter: DeviceSliceMut<u32>,
        tickets: DeviceSliceMut<u32>,
        minmax: DeviceSliceMut<u64>,
    ) {
        use cudadrv::device::{exp_approx, exp2_approx, rsqrt_approx};
        let stride = cudadrv::device::global_dim_x() as usize;
        let mut i = cudadrv::device::global_idx_x() as usize;
        while let Some(v) = x.get(i) {
            e2.write(i, exp2_approx(v));
            ex.write(i, exp_approx(v));
            rs.write(i, rsqrt_approx(v.abs()));
            if let Some(t) = counter.fetch_add(0, 1) {
                tickets.write(i, t);
            }
            let key = u64::from((i as u32).wrapping_mul(2_654_435_761)) + (1 << 32);
            let _ = minmax.fetch_min(0, key);
            let _ = minmax.fetch_max(1, key);
            i += stride;
        }
    }
}

#[cfg(target_arch = "nvptx64")]
cudadrv::shared_array! {
    /// `group_reduce`'s block-sum scratch.
    fn group_scratch() -> [f32; 32];
}

cudadrv::kernel! {
    /// Thread `t` (of the whole grid) reads `x[t]` (0.0 past the end) and writes the sum
    /// over its aligned group of 16 lanes to `g16[t]`, of 4 lanes to `g4[t]`, and over
    /// its whole CTA to `blocks[block]` (thread 0 of the CTA).
    ///
    /// # Safety
    /// A one-dimensional launch whose block size is a multiple of 32, at most 1024;
    /// `blocks` needs one element per CTA.
    pub unsafe fn group_reduce(
        x: DeviceSlice<f32>,
        g16: DeviceSliceMut<f32>,
        g4: DeviceSliceMut<f32>,
        blocks: DeviceSliceMut<f32>,
    ) {
        let t = cudadrv::device::global_idx_x() as usize;
        let v = x.get(t).unwrap_or(0.0);
        // SAFETY: the launch shape (caller): whole warps, every thread reaches these.
        let (a, b, c) = unsafe {
            (
                cudadrv::device::warp_group_sum_f32::<16>(v),
                cudadrv::device::warp_group_sum_f32::<4>(v),
                cudadrv::device::block_sum_f32(v, group_scratch()),
            )
        };
        let _ = g16.try_write(t, a);
        let _ = g4.try_write(t, b);
        if cudadrv::device::thread_idx().x == 0 {
            let _ = blocks.try_write(cudadrv::device::block_idx().x as usize, c);
        }
    }
}

cudadrv::kernel! {
    /// Thread `t` (of the whole grid) exchanges `x[t]` (0 past the end) with lane
    /// `lane ^ mask` of its warp: `ints[t]` through `warp_xor_u32`, `floats[t]` through
    /// `warp_xor_f32` (the same bits as an `f32`).
    ///
    /// # Safety
    /// A one-dimensional launch whose block size is a multiple of 32.
    pub unsafe fn lane_xor(
        x: DeviceSlice<u32>,
        mask: u32,
        ints: DeviceSliceMut<u32>,
        floats: DeviceSliceMut<f32>,
    ) {
        let t = cudadrv::device::global_idx_x() as usize;
        let v = x.get(t).unwrap_or(0);
        // SAFETY: the launch shape (caller): whole warps, every lane reaches both.
        let (a, b) = unsafe {
            (
                cudadrv::device::warp_xor_u32(v, mask),
                cudadrv::device::warp_xor_f32(f32::from_bits(v), mask),
            )
        };
        let _ = ints.try_write(t, a);
        let _ = floats.try_write(t, b);
    }
}

cudadrv::kernel! {
    /// A hand-placed PDL wait: `out[i] = weight[i] + input[i]` where `weight` is read
    /// before `grid_dependency_wait` (no predecessor writes it) and `input` (the
    /// predecessor's output) after it; grid-stride.
    ///
    /// # Safety
    /// Nothing beyond the slices: every CTA waits before it reads `input`.
    pub unsafe dependent(manual) fn prefetch_then_wait(
        weight: DeviceSlice<u32>,
        input: DeviceSlice<u32>,
        out: DeviceSliceMut<u32>,
    ) {
        let stride = cudadrv::device::global_dim_x() as usize;
        let first = cudadrv::device::global_idx_x() as usize;
        let w = weight.get(first);
        cudadrv::device::grid_dependency_wait();
        let mut i = first;
        let mut w = w;
        while let Some(v) = input.get(i) {
            let wi = match w.take() {
                Some(p) => p,
                None => weight.get(i).unwrap_or(0),
            };
            let _ = out.try_write(i, wi.wrapping_add(v));
            i += stride;
        }
    }
}

cudadrv::kernel! {
    /// `out[i] = fma(a[i], b[i], c[i])` for every `i` the three inputs have
    /// (grid-stride).
    pub safe fn fused_multiply_add(a: DeviceSlice<f32>, b: DeviceSlice<f32>, c: DeviceSlice<f32>, out: DeviceSliceMut<f32>) {
        let stride = cudadrv::device::global_dim_x() as usize;
        let mut i = cudadrv::device::global_idx_x() as usize;
        while let (Some(x), Some(y), Some(z)) = (a.get(i), b.get(i), c.get(i)) {
            out.write(i, cudadrv::device::fma(x, y, z));
            i += stride;
        }
    }
}
