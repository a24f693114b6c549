//! A minimal NVTX tool: the injection library a profiler puts in
//! `NVTX_INJECTION64_PATH`, here writing each NVTX call it receives as a line of the file
//! `$NVTX_TEST_LOG` (`push <depth> <message>`, `pop`, `mark <message>`, `push_ex <message>
//! color <argb> category <n>`, `start <id> <message>`, `end <id>`, `category <n> <name>`).
//! `tests/nvtx.rs` and the bundle's `hw_nvtx` (with `pdl_demo`) read it.
//!
//! It follows NVTX's protocol from the tool's side: `InitializeInjectionNvtx2` is given
//! the application's `get_export_table`, asks it for the callbacks table, and writes its
//! functions into the CORE module's slots.
//!
//! Its `unsafe` is the tool's side of a C interface, not a gap in `cudadrv`: every
//! function is an `extern "C"` callback that NVTX calls with raw pointers (messages,
//! attributes, the slot table) whose validity is the protocol's promise.

use std::ffi::{CStr, c_char, c_int, c_uint, c_void};
use std::io::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};

use cudadrv::nvtx::{EventAttributes, GetExportTable};

static LOG: Mutex<()> = Mutex::new(());
static DEPTH: AtomicI32 = AtomicI32::new(0);
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

fn write(line: &str) {
    let _g = LOG.lock();
    if let Ok(path) = std::env::var("NVTX_TEST_LOG") {
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let _ = writeln!(f, "{line}");
        }
    }
}

/// # Safety
/// `p` is null or a NUL-terminated string (NVTX's contract for messages).
unsafe fn text(p: *const c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        // SAFETY: the caller's promise.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

unsafe extern "C" fn mark_a(m: *const c_char) {
    // SAFETY: NVTX's contract.
    write(&format!("mark {}", unsafe { text(m) }));
}
unsafe extern "C" fn push_a(m: *const c_char) -> c_int {
    let d = DEPTH.fetch_add(1, Ordering::Relaxed);
    // SAFETY: NVTX's contract.
    write(&format!("push {d} {}", unsafe { text(m) }));
    d
}
unsafe extern "C" fn pop() -> c_int {
    let d = DEPTH.fetch_sub(1, Ordering::Relaxed) - 1;
    write("pop");
    d
}
unsafe extern "C" fn push_ex(a: *const EventAttributes) -> c_int {
    let d = DEPTH.fetch_add(1, Ordering::Relaxed);
    // SAFETY: NVTX's contract: a valid attributes struct whose message is a string.
    let a = unsafe { &*a };
    // SAFETY: as above.
    let m = unsafe { text(a.message) };
    write(&format!(
        "push_ex {m} color {:08x} category {}",
        a.color, a.category
    ));
    d
}
unsafe extern "C" fn mark_ex(a: *const EventAttributes) {
    // SAFETY: as in `push_ex`.
    let a = unsafe { &*a };
    // SAFETY: as above.
    let m = unsafe { text(a.message) };
    write(&format!("mark_ex {m} payload {}", a.payload));
}
unsafe extern "C" fn start_a(m: *const c_char) -> u64 {
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    // SAFETY: NVTX's contract.
    write(&format!("start {id} {}", unsafe { text(m) }));
    id
}
unsafe extern "C" fn end(id: u64) {
    write(&format!("end {id}"));
}
unsafe extern "C" fn name_category_a(c: u32, m: *const c_char) {
    // SAFETY: NVTX's contract.
    write(&format!("category {c} {}", unsafe { text(m) }));
}

/// `NvtxExportTableCallbacks`, as the tool reads it.
#[repr(C)]
struct Callbacks {
    struct_size: usize,
    get_module_function_table:
        unsafe extern "C" fn(c_int, *mut *mut *mut *const c_void, *mut c_uint) -> c_int,
}

/// The tool's entry point.
///
/// # Safety
/// Called by an NVTX client with its `get_export_table`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn InitializeInjectionNvtx2(get: GetExportTable) -> c_int {
    // SAFETY: the client's export table 1 is its callbacks table.
    let cb = unsafe { get(1) }.cast::<Callbacks>();
    if cb.is_null() {
        return 0;
    }
    let mut table: *mut *mut *const c_void = std::ptr::null_mut();
    let mut size: c_uint = 0;
    // SAFETY: the callbacks table is valid for the process; out-pointers are ours.
    if unsafe { ((*cb).get_module_function_table)(1, &mut table, &mut size) } == 0 {
        return 0;
    }
    let fns: [(usize, *const c_void); 8] = [
        (1, mark_ex as *const c_void),
        (2, mark_a as *const c_void),
        (5, start_a as *const c_void),
        (7, end as *const c_void),
        (8, push_ex as *const c_void),
        (9, push_a as *const c_void),
        (11, pop as *const c_void),
        (12, name_category_a as *const c_void),
    ];
    for (id, f) in fns {
        if id < size as usize {
            // SAFETY: the CORE table has `size` slot pointers (index 0 unused), each
            // writable by the tool during this call.
            unsafe {
                let slot = *table.add(id);
                if !slot.is_null() {
                    *slot = f;
                }
            }
        }
    }
    write("attached");
    1
}
