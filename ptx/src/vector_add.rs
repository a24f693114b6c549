//! `vector_add`: the first kernel a newcomer meets (`examples/vector_add.rs`).
//!
//! Declared with `cudadrv::kernel!`, so this one declaration is both the device entry
//! point (here, in the nvptx64 build) and the typed host handle (the example includes
//! this file with `#[path]`; the body is not compiled on the host). `safe`: the body is
//! compiled under `#[forbid(unsafe_code)]` and reaches memory only through the
//! bounds-checked slices, so the host launches it without `unsafe`.

use cudadrv::kernel::{DeviceSlice, DeviceSliceMut};

cudadrv::kernel! {
    /// `c[i] = a[i] + b[i]` (`f32`, one add), one thread per element: thread `i` of the
    /// grid writes `c[i]` when `a`, `b` and `c` all have element `i`, and nothing
    /// otherwise, so any 1-D grid of at least `c.len()` threads fills `c`.
    pub safe fn vector_add(a: DeviceSlice<f32>, b: DeviceSlice<f32>, c: DeviceSliceMut<f32>) {
        let i = cudadrv::device::global_idx_x() as usize;
        if let (Some(a), Some(b)) = (a.get(i), b.get(i)) {
            // `try_write`: a thread past `c`'s end writes nothing.
            let _ = c.try_write(i, a + b);
        }
    }
}
