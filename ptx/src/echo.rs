//! `param_echo`: writes each parameter's bytes to known offsets, so host tests can check
//! what arrived through each launch path (kernelParams array, packed buffer, device-side
//! launch).

use cudadrv::args::{Float2, Float4};

cudadrv::kernel_struct! {
    /// `struct Pair { float a; float4 b; }`: size 32, alignment 16, 12 bytes of padding
    /// after `a`.
    pub struct Pair {
        /// Offset 0.
        pub a: f32,
        /// Offset 16.
        pub b: Float4,
    }
}

/// Byte offsets in the echo output (128 bytes; padding between them is never written).
pub mod offsets {
    /// `a: i32`, 4 bytes.
    pub const A: usize = 0;
    /// `b: Float4`, 16 bytes.
    pub const B: usize = 16;
    /// `c: u8`, 1 byte.
    pub const C: usize = 32;
    /// `d: f32`, 4 bytes.
    pub const D: usize = 48;
    /// `e: *const u8`, 8 bytes (the pointer value).
    pub const E: usize = 64;
    /// `f: Float2`, 8 bytes.
    pub const F: usize = 80;
    /// `g.a: f32`, 4 bytes.
    pub const G_A: usize = 96;
    /// `g.b: Float4`, 16 bytes.
    pub const G_B: usize = 112;
    /// Bytes the echo output spans.
    pub const LEN: usize = 128;
}

/// Writes the parameters' bytes to `out` at [`offsets`].
///
/// # Safety
/// `out` 16-byte aligned (as `cudaMalloc` memory is) and writable for [`offsets::LEN`]
/// bytes.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub unsafe fn echo_params(
    out: *mut u8,
    a: i32,
    b: Float4,
    c: u8,
    d: f32,
    e: *const u8,
    f: Float2,
    g: Pair,
) {
    // SAFETY: every offset plus its size is at most `offsets::LEN`, which the caller
    // guarantees writable; each offset is a multiple of its type's alignment and `out`
    // is 16-byte aligned.
    unsafe {
        out.add(offsets::A).cast::<i32>().write(a);
        out.add(offsets::B).cast::<Float4>().write(b);
        out.add(offsets::C).write(c);
        out.add(offsets::D).cast::<f32>().write(d);
        out.add(offsets::E).cast::<u64>().write(e as u64);
        out.add(offsets::F).cast::<Float2>().write(f);
        out.add(offsets::G_A).cast::<f32>().write(g.a);
        out.add(offsets::G_B).cast::<Float4>().write(g.b);
    }
}

/// Echoes its parameters: `out[0..4] = a`, `out[16..32] = b`, `out[32] = c`,
/// `out[48..52] = d`, `out[64..72] = e` (pointer value), `out[80..88] = f`,
/// `out[96..100] = g.a`, `out[112..128] = g.b`, all little-endian; other bytes of
/// `out[0..128]` untouched (zero them first).
///
/// Device parameter layout (what `cuFuncGetParamInfo` should report; offset, size):
/// `out` (0, 8), `a` (8, 4), `b` (16, 16), `c` (32, 1), `d` (36, 4), `e` (40, 8),
/// `f` (48, 8), `g` (64, 32); 96 bytes in all.
///
/// Launch: grid 1, block 1 (only block 0's thread 0 writes), no dynamic shared memory.
///
/// # Safety
/// `out` 16-byte aligned and writable for 128 bytes.
#[allow(clippy::too_many_arguments)]
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn param_echo(
    out: *mut u8,
    a: i32,
    b: Float4,
    c: u8,
    d: f32,
    e: *const u8,
    f: Float2,
    g: Pair,
) {
    if cudadrv::device::global_idx_x() == 0 {
        // SAFETY: the host passes 128 writable, 16-byte aligned bytes.
        unsafe { echo_params(out, a, b, c, d, e, f, g) };
    }
}
