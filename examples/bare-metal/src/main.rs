//! A bare-metal program that reaches the CUDA driver through a resolver and launches a
//! kernel twice: the shape of a `no_std` system (a hypervisor, a unikernel, firmware)
//! whose platform hands out the driver's entry points by name.
//!
//! The platform hook `platform_cuda_resolve` (name, length) -> function is what such a
//! system provides; this example defines a stand-in that resolves nothing, so the image
//! links anywhere (`cargo xtask test` builds it for `aarch64-unknown-none` and checks its
//! size), and the first driver call reports the missing function instead of crashing.

#![no_std]
#![no_main]

use core::ffi::c_void;

use cudadrv::cuda_sys::{self, DriverApi, Library};
use cudadrv::launch::{LaunchConfig, launch};
use cudadrv::{Context, Device, DeviceBuffer, Module, Stream, StreamFlags};

/// A kernel that adds 1 to every element of a `u32` buffer.
const PTX: &str = "
.version 8.0
.target sm_90
.address_size 64
.visible .entry add_one(.param .u64 buf, .param .u32 n)
{
    .reg .pred %p;
    .reg .b32 %r<6>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [buf];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.u32 %p, %r5, %r1;
    @%p bra DONE;
    cvta.to.global.u64 %rd2, %rd1;
    mul.wide.u32 %rd3, %r5, 4;
    add.s64 %rd2, %rd2, %rd3;
    ld.global.u32 %r2, [%rd2];
    add.s32 %r2, %r2, 1;
    st.global.u32 [%rd2], %r2;
DONE:
    ret;
}
\0";

/// The platform's driver interface: the function named `name` (`len` bytes, no NUL),
/// or null. A real system links its own; this stand-in resolves nothing.
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn platform_cuda_resolve(name: *const u8, len: usize) -> *mut c_void {
    // Opaque to the optimizer, as a real platform's answer would be.
    core::hint::black_box((name, len));
    core::hint::black_box(core::ptr::null_mut())
}

fn run() -> cudadrv::Result<u32> {
    // SAFETY: `platform_cuda_resolve` hands out the driver's own functions (with the C
    // signatures of the entries they are asked for), valid for the rest of the program.
    let table = unsafe {
        DriverApi::from_resolver(Library::none(), |e| {
            platform_cuda_resolve(e.name.as_ptr(), e.name.len())
        })
    };
    let _ = cuda_sys::install_driver(table);
    let ctx = Context::primary(Device::get(0)?)?;
    let stream = Stream::new(&ctx, StreamFlags::NON_BLOCKING)?;
    let module = Module::from_ptx(&ctx, PTX)?;
    let add_one = module.function("add_one")?;
    const N: u32 = 1024;
    let buf = DeviceBuffer::<u32>::zeroed(&ctx, N as usize)?;
    let cfg = LaunchConfig::new(N / 128, 128).stream(&stream);
    for _ in 0..2 {
        // SAFETY: add_one(buf, n) writes `n` u32s of `buf`, which holds `N`; the buffer
        // outlives the launches (the stream is synchronized below).
        unsafe { launch(&add_one, &cfg, &(buf.as_arg(), N))? };
    }
    stream.synchronize()?;
    let mut out = [0u32; N as usize];
    buf.copy_to_host(&mut out)?;
    Ok(out.iter().sum())
}

/// The entry point the platform jumps to.
#[unsafe(no_mangle)]
pub extern "C" fn _start() -> ! {
    let _ = core::hint::black_box(run());
    loop {
        core::hint::spin_loop();
    }
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    loop {
        core::hint::spin_loop();
    }
}
