//! A `no_std` + `alloc` static library: the host program links it, supplies `malloc` and
//! `free` (the global allocator) and a resolver for the driver's functions, and calls
//! the two exported functions. Nothing here needs an OS: the same shape serves a kernel
//! module or firmware with its own allocator.
//!
//! ```c
//! void *resolve(const char *name, size_t len);   /* the host's driver interface */
//! int cudadrv_example_init(void *(*resolve)(const char *, size_t));
//! int cudadrv_example_fill(unsigned n, unsigned value, unsigned *out_sum);
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
        if rc == 0 { out.cast() } else { core::ptr::null_mut() }
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

/// The host's driver interface: the function named (`name`, `len` bytes), or null.
pub type Resolve = unsafe extern "C" fn(name: *const c_char, len: usize) -> *mut c_void;

/// Fills the driver table from `resolve` and installs it. 0 on success, 1 when a table
/// was installed before.
///
/// # Safety
/// Every non-null pointer `resolve` returns must be the driver's function of that name
/// (with its C signature), valid for the rest of the process.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cudadrv_example_init(resolve: Resolve) -> i32 {
    // SAFETY: the caller's promise about `resolve`, which is called with a name valid
    // for `len` bytes.
    let table = unsafe {
        DriverApi::from_resolver(Library::none(), |e| {
            resolve(e.name.as_ptr().cast(), e.name.len())
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
