//! A bare-metal program that reaches the CUDA driver through a resolver and launches a
//! kernel twice: the shape of a `no_std` system (a hypervisor, a unikernel, firmware)
//! whose platform hands out the driver's entry points by name.
//!
//! The platform hook `platform_cuda_resolve` (exported symbol, length) -> function is what
//! such a system provides. On a bare target this example defines a stand-in that
//! resolves nothing, so the image links anywhere (`cargo xtask test` builds it for
//! `aarch64-unknown-none` and checks its size), and the first driver call reports the
//! missing function instead of crashing. Built for Linux, the same `no_std` program is
//! its own platform: its `main` opens `libcuda.so.1` with the C library's `dlopen` and
//! resolves with `dlsym` (the program's resolver; the crate never loads anything), runs
//! the kernel and checks every value; the bundle runs it on the GPU as `hw_nostd`.

#![no_std]
#![no_main]

#[cfg(not(target_os = "linux"))]
use core::ffi::c_void;

use cudadrv::cuda_sys::{self, DriverApi, Library};
use cudadrv::launch::{LaunchConfig, launch};
use cudadrv::{Context, Device, DeviceBuffer, Module, Stream, StreamFlags};
#[cfg(target_os = "linux")]
use linux::platform_cuda_resolve;

/// A kernel that adds 1 to every element of a `u32` buffer.
const PTX: &str = concat!(include_str!("add_one.ptx"), "\0");

/// The platform's driver interface: the exported function `symbol` (NUL-terminated,
/// `len` bytes before the NUL; versioned, as `cuMemAlloc_v2`), or null. A real system
/// links its own; this stand-in resolves nothing.
#[cfg(not(target_os = "linux"))]
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn platform_cuda_resolve(symbol: *const u8, len: usize) -> *mut c_void {
    // Opaque to the optimizer, as a real platform's answer would be.
    core::hint::black_box((symbol, len));
    core::hint::black_box(core::ptr::null_mut())
}

fn run() -> cudadrv::Result<u32> {
    // SAFETY: `platform_cuda_resolve` hands out the driver's own functions (with the C
    // signatures of the entries they are asked for), valid for the rest of the program.
    let table = unsafe {
        DriverApi::from_resolver(Library::none(), |e| {
            platform_cuda_resolve(e.symbol.as_ptr(), e.symbol.len().saturating_sub(1))
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
    if out.iter().any(|&v| v != 2) {
        return Err(cudadrv::Error::InvalidArgument(
            "a value the two launches wrote is wrong",
        ));
    }
    Ok(out.iter().sum())
}

/// The entry point the platform jumps to.
#[cfg(not(target_os = "linux"))]
#[unsafe(no_mangle)]
pub extern "C" fn _start() -> ! {
    let _ = core::hint::black_box(run());
    loop {
        core::hint::spin_loop();
    }
}

#[cfg(not(target_os = "linux"))]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    loop {
        core::hint::spin_loop();
    }
}

/// Linux as the platform: the C library's `dlopen`/`dlsym` for the resolver, `write` for
/// the report, and a C `main` (no Rust runtime: the C library's start-up calls it).
#[cfg(target_os = "linux")]
mod linux {
    use core::ffi::{c_char, c_int, c_void};

    #[link(name = "c")]
    #[link(name = "dl")]
    unsafe extern "C" {
        fn dlopen(file: *const c_char, mode: c_int) -> *mut c_void;
        fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
        fn write(fd: c_int, buf: *const c_void, n: usize) -> isize;
        fn abort() -> !;
    }

    const RTLD_NOW: c_int = 2;

    static DRIVER: core::sync::atomic::AtomicPtr<c_void> =
        core::sync::atomic::AtomicPtr::new(core::ptr::null_mut());

    fn say(parts: &[&[u8]]) {
        for p in parts {
            // SAFETY: `p` is readable for its length; fd 1 is the standard output.
            unsafe { write(1, p.as_ptr().cast(), p.len()) };
        }
    }

    /// The decimal digits of `v`.
    fn digits(mut v: u32, buf: &mut [u8; 10]) -> &[u8] {
        let mut i = buf.len();
        loop {
            i -= 1;
            buf[i] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 || i == 0 {
                break;
            }
        }
        &buf[i..]
    }

    /// The platform hook: `dlsym` in the driver `main` opened.
    #[unsafe(no_mangle)]
    pub extern "C" fn platform_cuda_resolve(symbol: *const u8, _len: usize) -> *mut c_void {
        let driver = DRIVER.load(core::sync::atomic::Ordering::Acquire);
        if driver.is_null() {
            return core::ptr::null_mut();
        }
        // SAFETY: `symbol` is NUL-terminated (the table's symbols are); `driver` is the
        // handle `dlopen` returned, never closed.
        unsafe { dlsym(driver, symbol.cast()) }
    }

    #[unsafe(no_mangle)]
    pub extern "C" fn main() -> c_int {
        // SAFETY: a NUL-terminated file name.
        let driver = unsafe { dlopen(c"libcuda.so.1".as_ptr(), RTLD_NOW) };
        if driver.is_null() {
            say(&[b"bare-metal: no GPU, nothing was run: libcuda.so.1 not found\n"]);
            return 0;
        }
        DRIVER.store(driver, core::sync::atomic::Ordering::Release);
        match super::run() {
            Ok(sum) => {
                let mut b = [0u8; 10];
                say(&[
                    b"bare-metal: two launches over 1024 words, every word checked: sum ",
                    digits(sum, &mut b),
                    b"\nbare-metal: all values checked\n",
                ]);
                0
            }
            Err(cudadrv::Error::Driver { code, .. }) if code.0 == 100 => {
                say(&[b"bare-metal: no GPU, nothing was run: CUDA_ERROR_NO_DEVICE\n"]);
                0
            }
            Err(_) => {
                say(&[b"bare-metal: FAILED\n"]);
                1
            }
        }
    }

    #[panic_handler]
    fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
        say(&[b"bare-metal: panic\n"]);
        // SAFETY: ends the process.
        unsafe { abort() }
    }
}
