//! Kernels declared with `cudadrv::kernel!`: one declaration gives these entry points and
//! the typed host handles that `tests/hw_kernels.rs` and the launch benchmark use
//! (tests/support includes this file on the host, where the bodies are not compiled).
//!
//! Every kernel here is `safe`: its body is compiled under `#[forbid(unsafe_code)]` and
//! reaches memory only through bounds-checked slices. Each states its output.

use cudadrv::kernel::{DeviceSlice, DeviceSliceMut};

cudadrv::kernel! {
    /// `out[i] = base + 3 i` for every `i < out.len()` (grid-stride loop; any 1-D shape).
    pub safe fn typed_iota(out: DeviceSliceMut<u32>, base: u32) {
        let stride = cudadrv::device::global_dim_x() as usize;
        let mut i = cudadrv::device::global_idx_x() as usize;
        while i < out.len() {
            out.write(i, base.wrapping_add(3u32.wrapping_mul(i as u32)));
            i += stride;
        }
    }
}

cudadrv::kernel! {
    /// `out[i] += k * x[i]` for every `i < min(x.len(), out.len())` (grid-stride loop).
    pub safe fn typed_mad(x: DeviceSlice<u32>, k: u32, out: DeviceSliceMut<u32>) {
        let stride = cudadrv::device::global_dim_x() as usize;
        let mut i = cudadrv::device::global_idx_x() as usize;
        while let (Some(x), Some(o)) = (x.get(i), out.get(i)) {
            out.write(i, o.wrapping_add(k.wrapping_mul(x)));
            i += stride;
        }
    }
}

cudadrv::kernel! {
    /// `out[i] = a * x[i] + y[i]` (`f32`, one `fma.rn`-free multiply and add each) for
    /// `i < out.len()` where `x` and `y` have element `i`. Four parameters: the launch
    /// benchmark's typed kernel.
    pub safe fn typed_axpy(a: f32, x: DeviceSlice<f32>, y: DeviceSlice<f32>, out: DeviceSliceMut<f32>) {
        let i = cudadrv::device::global_idx_x() as usize;
        if let (Some(x), Some(y)) = (x.get(i), y.get(i)) {
            // `try_write`: threads past `out`'s end write nothing.
            let _ = out.try_write(i, a * x + y);
        }
    }
}

cudadrv::kernel! {
    /// Every thread `i` of the grid calls `out.try_write(i, value)`: the first
    /// `out.len()` elements become `value`, threads past the end write nothing. Thread 0
    /// also stores `out.get(out.len())` (which must be `None`) as 1 (`None`) or 2
    /// (`Some`) into `flag[0]`.
    pub safe fn typed_bounds(out: DeviceSliceMut<u32>, value: u32, flag: DeviceSliceMut<u32>) {
        let i = cudadrv::device::global_idx_x() as usize;
        let _ = out.try_write(i, value);
        if i == 0 {
            let past_end = out.get(out.len());
            flag.write(0, if past_end.is_none() { 1 } else { 2 });
        }
    }
}

cudadrv::kernel! {
    /// `out[0] = x.read(index)`: traps when `index >= x.len()` (the launch then fails).
    pub safe fn typed_read_at(x: DeviceSlice<u32>, index: u32, out: DeviceSliceMut<u32>) {
        if cudadrv::device::global_idx_x() == 0 {
            out.write(0, x.read(index as usize));
        }
    }
}
