//! Device-side launch: `dyn_parent` / `dyn_parent_size_multiple` launch `dyn_echo` with
//! a mix of scalar, pointer, vector and struct parameters, the buffer written by
//! `cudadrv::device::launch_child_with_rule` (the host packer's layout code).

use cudadrv::args::{Float2, Float4, LayoutRule};
use cudadrv::device::{DeviceStream, Dim3, global_idx_x, launch_child_with_rule};
use ptx_kernels::echo::{Pair, echo_params};

/// `a` the parents pass: `-123456789`.
pub const DYN_A: i32 = -123_456_789;
/// `b`: `(1.5, -2.25, 3.0, 4.75)`.
pub const DYN_B: Float4 = Float4::new(1.5, -2.25, 3.0, 4.75);
/// `c`: `0xAB`.
pub const DYN_C: u8 = 0xAB;
/// `d`: `6.5`.
pub const DYN_D: f32 = 6.5;
/// `e` (a pointer value, never dereferenced): `0x1122_3344_5566_7788`.
pub const DYN_E: u64 = 0x1122_3344_5566_7788;
/// `f`: `(7.25, -8.5)`.
pub const DYN_F: Float2 = Float2::new(7.25, -8.5);
/// `g`: `{ a: 9.75, b: (10.0, 11.0, 12.0, 13.0) }`.
pub const DYN_G: Pair = Pair {
    a: 9.75,
    b: Float4::new(10.0, 11.0, 12.0, 13.0),
};

/// The child: echoes its parameters exactly like `param_echo` (same output offsets:
/// `a` 0, `b` 16, `c` 32, `d` 48, `e` 64, `f` 80, `g.a` 96, `g.b` 112; 128 bytes), but
/// takes `g` before `f`, so that the two layout rules place them differently.
///
/// Device parameter layout (offset, size): `out` (0, 8), `a` (8, 4), `b` (16, 16),
/// `c` (32, 1), `d` (36, 4), `e` (40, 8), `g` (48, 32), `f` (80, 8); 88 bytes. The
/// `SizeMultiple` rule would put `g` at 64 and `f` at 96 instead.
///
/// Launch: by the parents (grid 1, block 1); may also be launched from the host the same
/// way as `param_echo`.
///
/// # Safety
/// `out` 16-byte aligned and writable for 128 bytes.
#[allow(clippy::too_many_arguments)]
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn dyn_echo(
    out: *mut u8,
    a: i32,
    b: Float4,
    c: u8,
    d: f32,
    e: *const u8,
    g: Pair,
    f: Float2,
) {
    if global_idx_x() == 0 {
        // SAFETY: the launcher passes 128 writable, 16-byte aligned bytes.
        unsafe { echo_params(out, a, b, c, d, e, f, g) };
    }
}

/// Launches `dyn_echo(out, DYN_A, DYN_B, DYN_C, DYN_D, DYN_E, DYN_G, DYN_F)` (grid 1,
/// block 1, NULL stream) with `rule` and writes the outcome to `status[0]`.
///
/// # Safety
/// `out` 16-byte aligned and writable for 128 bytes and `status` for one `u32`.
#[inline(always)]
unsafe fn parent(out: *mut u8, status: *mut u32, rule: LayoutRule) {
    if global_idx_x() != 0 {
        return;
    }
    let args = (
        out,
        DYN_A,
        DYN_B,
        DYN_C,
        DYN_D,
        DYN_E as *const u8,
        DYN_G,
        DYN_F,
    );
    let child = dyn_echo as unsafe extern "ptx-kernel" fn(_, _, _, _, _, _, _, _);
    // SAFETY: `dyn_echo` is a kernel of this module (the argument types are checked
    // against its signature); NULL stream; `out` outlives the child (the parent grid
    // completes only after its children).
    let result = unsafe {
        launch_child_with_rule(
            rule,
            child,
            Dim3::x(1),
            Dim3::x(1),
            0,
            DeviceStream::NULL,
            &args,
        )
    };
    let code = match result {
        Ok(()) => 0,
        Err(e) => e.code(),
    };
    // SAFETY: `status` holds one `u32` (kernel contract).
    unsafe { status.write(code) };
}

/// Device-side launch with the host's layout rule ([`LayoutRule::Alignment`]): launches
/// `dyn_echo` with the `DYN_*` constants through `cudaGetParameterBufferV2` +
/// `cudaLaunchDeviceV2`.
///
/// Launch: grid 1, block 1, no dynamic shared memory; module linked with
/// `libcudadevrt.a`. Zero `out[0..128]` and `status` first.
///
/// Output: `status[0] == 0` (else the `cudaError_t`, or `0xFFFFFFFF` when no parameter
/// buffer was available); after the stream synchronizes, `out` holds the echo of the
/// `DYN_*` values at `param_echo`'s offsets: `a` = -123456789, `b` = (1.5, -2.25, 3.0,
/// 4.75), `c` = 0xAB, `d` = 6.5, `e` = 0x1122334455667788, `f` = (7.25, -8.5),
/// `g.a` = 9.75, `g.b` = (10, 11, 12, 13). Anything else means the device runtime does
/// not read the buffer by the alignment rule.
///
/// # Safety
/// `out` 16-byte aligned and writable for 128 bytes and `status` for one `u32`.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn dyn_parent(out: *mut u8, status: *mut u32) {
    // SAFETY: forwarded kernel contract.
    unsafe { parent(out, status, LayoutRule::Alignment) };
}

/// [`dyn_parent`] with the buffer written by [`LayoutRule::SizeMultiple`] (the
/// Programming Guide's wording): `g` at offset 64 and `f` at 96 instead of 48 and 80;
/// the buffer is zeroed over 0..104 first.
///
/// Output: `status[0]` as for `dyn_parent`. If the device runtime reads parameters at
/// the kernel's real (alignment) offsets, the echo shows every value as in `dyn_parent`
/// except `g.a` = 0.0, `g.b` = (9.75, 0.0, 0.0, 0.0) and `f` = (10.0, 11.0); if it
/// honoured the size-multiple rule, the echo equals `dyn_parent`'s.
///
/// # Safety
/// `out` 16-byte aligned and writable for 128 bytes and `status` for one `u32`.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn dyn_parent_size_multiple(out: *mut u8, status: *mut u32) {
    // SAFETY: forwarded kernel contract.
    unsafe { parent(out, status, LayoutRule::SizeMultiple) };
}
