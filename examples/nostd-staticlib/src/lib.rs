//! A `no_std` + `alloc` static library: the host program links it, supplies `malloc` and
//! `free` (the global allocator) and a resolver for the driver's functions, and calls
//! the exported functions. Nothing here needs an OS: the same shape serves a kernel
//! module or firmware with its own allocator. `host.c` is such a host program (on Linux,
//! its resolver is `dlsym` on the `libcuda.so.1` it opened itself); the bundle runs it on
//! the GPU as `hw_nostd`.
//!
//! ```c
//! /* the host's driver interface: the exported function `symbol` (NUL-terminated,
//!    `len` bytes before the NUL; versioned, as `cuMemAlloc_v2`), or NULL */
//! void *resolve(const char *symbol, size_t len);
//! int cudadrv_example_init(void *(*resolve)(const char *, size_t));
//! int cudadrv_example_fill(unsigned n, unsigned value, unsigned *out_sum);
//! int cudadrv_example_add_one(unsigned n, unsigned rounds, unsigned *out_sum);
//! ```

#![no_std]

extern crate alloc;

use core::alloc::{GlobalAlloc, Layout};
use core::ffi::{c_char, c_void};

use cudadrv::cuda_sys::{self, DriverApi, Library};
use cudadrv::{Context, Device, DeviceBuffer, Error};

unsafe extern "C" {
    fn malloc(size: usize) -> *mut c_void;
    fn free(ptr: *mut c_void);
    fn posix_memalign(out: *mut *mut c_void, align: usize, size: usize) -> i32;
}

/// The host's allocator.
struct HostAlloc;

// SAFETY: `malloc`/`posix_memalign` return memory of at least the asked size and
// alignment (or null), and `free` takes what they returned.
unsafe impl GlobalAlloc for HostAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.align() <= 16 {
            // SAFETY: plain allocation of `size` bytes (16-byte aligned by the C ABI).
            return unsafe { malloc(layout.size()).cast() };
        }
        let mut out = core::ptr::null_mut();
        // SAFETY: valid out-pointer; the alignment is a power of two (a `Layout`'s).
        let rc = unsafe { posix_memalign(&mut out, layout.align(), layout.size()) };
        if rc == 0 {
            out.cast()
        } else {
            core::ptr::null_mut()
        }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, _: Layout) {
        // SAFETY: `ptr` came from `alloc` above.
        unsafe { free(ptr.cast()) }
    }
}

#[global_allocator]
static ALLOC: HostAlloc = HostAlloc;

#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    loop {
        core::hint::spin_loop();
    }
}

/// The host's driver interface: the exported function `symbol` (NUL-terminated, `len`
/// bytes before the NUL; the versioned symbol, `cuMemAlloc_v2`, whose C signature is the
/// one the bindings use), or null.
pub type Resolve = unsafe extern "C" fn(symbol: *const c_char, len: usize) -> *mut c_void;

/// Fills the driver table from `resolve` and installs it. 0 on success, 1 when a table
/// was installed before.
///
/// # Safety
/// Every non-null pointer `resolve` returns must be the driver's exported function of
/// that symbol, valid for the rest of the process.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cudadrv_example_init(resolve: Resolve) -> i32 {
    // SAFETY: the caller's promise about `resolve`, which is called with a name valid
    // for `len` bytes.
    let table = unsafe {
        DriverApi::from_resolver(Library::none(), |e| {
            resolve(e.symbol.as_ptr().cast(), e.symbol.len().saturating_sub(1))
        })
    };
    i32::from(cuda_sys::install_driver(table).is_err())
}

/// Fills `n` `u32`s on device 0 with `value`, reads them back and stores their sum in
/// `out_sum`. 0 on success, else the driver's error code (or -1).
///
/// # Safety
/// `out_sum` must be valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cudadrv_example_fill(n: u32, value: u32, out_sum: *mut u32) -> i32 {
    match fill(n as usize, value) {
        Ok(sum) => {
            // SAFETY: the caller's promise.
            unsafe { *out_sum = sum };
            0
        }
        Err(e) => e.code().map_or(-1, |c| c.0 as i32),
    }
}

fn fill(n: usize, value: u32) -> Result<u32, Error> {
    let ctx = Context::primary(Device::get(0)?)?;
    let mut buf = DeviceBuffer::<u32>::new(&ctx, n)?;
    buf.memset_d32(value)?;
    let mut host = alloc::vec![0u32; n];
    buf.copy_to_host(&mut host)?;
    Ok(host.iter().fold(0u32, |a, &v| a.wrapping_add(v)))
}

/// A kernel that adds 1 to every element of a `u32` buffer: the bare-metal example's.
const ADD_ONE: &str = include_str!("../../bare-metal/src/add_one.ptx");

/// Loads a module, launches its kernel `rounds` times over `n` zeroed `u32`s on device
/// 0 (each launch adds 1 to every element), checks that every element is `rounds`, and
/// stores their sum in `out_sum`. 0 on success, -2 for a wrong element, else the
/// driver's error code (or -1).
///
/// # Safety
/// `out_sum` must be valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cudadrv_example_add_one(n: u32, rounds: u32, out_sum: *mut u32) -> i32 {
    match add_one(n, rounds) {
        Ok(Some(sum)) => {
            // SAFETY: the caller's promise.
            unsafe { *out_sum = sum };
            0
        }
        Ok(None) => -2,
        Err(e) => e.code().map_or(-1, |c| c.0 as i32),
    }
}

fn add_one(n: u32, rounds: u32) -> Result<Option<u32>, Error> {
    use cudadrv::launch::{LaunchConfig, launch};
    let ctx = Context::primary(Device::get(0)?)?;
    let stream = cudadrv::Stream::new(&ctx, cudadrv::StreamFlags::NON_BLOCKING)?;
    let module = cudadrv::Module::from_ptx(&ctx, ADD_ONE)?;
    let kernel = module.function("add_one")?;
    kernel.verify_args::<(cudadrv::DevicePtr<u32>, u32)>()?;
    let buf = DeviceBuffer::<u32>::zeroed(&ctx, n as usize)?;
    let cfg = LaunchConfig::new(n.div_ceil(256), 256).stream(&stream);
    for _ in 0..rounds {
        // SAFETY: add_one(buf, n) (layout verified above) writes `n` u32s of `buf`, which
        // holds `n`; the buffer outlives the launches (the stream is synchronized below).
        unsafe { launch(&kernel, &cfg, &(buf.as_arg(), n))? };
    }
    stream.synchronize()?;
    let mut host = alloc::vec![0u32; n as usize];
    buf.copy_to_host(&mut host)?;
    if host.iter().any(|&v| v != rounds) {
        return Ok(None);
    }
    Ok(Some(host.iter().fold(0u32, |a, &v| a.wrapping_add(v))))
}
