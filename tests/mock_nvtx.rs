//! NVTX's injection protocol against a tool written here and given with
//! `nvtx::set_injection` (the path of a target without `dlopen`), on the CPU and under
//! Miri: the tool reads the export tables, writes its functions into the slots, and
//! receives the calls; a guard forgotten mid-range is only an open range.

use std::ffi::{CStr, c_char, c_int, c_uint, c_void};
use std::sync::Mutex;

use cudadrv::nvtx::{self, Event, EventAttributes, GetExportTable};

static SEEN: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn seen(line: String) {
    SEEN.lock().unwrap().push(line);
}

unsafe extern "C" fn push_a(m: *const c_char) -> c_int {
    // SAFETY: NVTX's contract: a NUL-terminated message.
    seen(format!(
        "push {}",
        unsafe { CStr::from_ptr(m) }.to_str().unwrap()
    ));
    0
}
unsafe extern "C" fn pop() -> c_int {
    seen("pop".into());
    0
}
unsafe extern "C" fn push_ex(a: *const EventAttributes) -> c_int {
    // SAFETY: NVTX's contract: valid attributes with a message.
    let a = unsafe { &*a };
    // SAFETY: as above.
    let m = unsafe { CStr::from_ptr(a.message) }.to_str().unwrap();
    seen(format!(
        "push_ex {m} {:x} {} {}",
        a.color, a.category, a.size
    ));
    0
}

#[repr(C)]
struct Callbacks {
    struct_size: usize,
    get_module_function_table:
        unsafe extern "C" fn(c_int, *mut *mut *mut *const c_void, *mut c_uint) -> c_int,
}

unsafe extern "C" fn init(get: GetExportTable) -> c_int {
    // SAFETY: export table 1 is the callbacks table.
    let cb = unsafe { &*get(1).cast::<Callbacks>() };
    assert_eq!(cb.struct_size, 16);
    // Table 3 is the version info; others are absent.
    // SAFETY: as above.
    assert!(!unsafe { get(3) }.is_null());
    // SAFETY: as above.
    assert!(unsafe { get(2) }.is_null());
    let mut table: *mut *mut *const c_void = std::ptr::null_mut();
    let mut size = 0;
    // SAFETY: valid out-pointers.
    assert_eq!(
        unsafe { (cb.get_module_function_table)(1, &mut table, &mut size) },
        1
    );
    assert_eq!(size, 16, "NVTX_CBID_CORE_SIZE");
    // SAFETY: an unknown module is refused.
    assert_eq!(
        unsafe { (cb.get_module_function_table)(9, &mut table, &mut size) },
        0
    );
    // SAFETY: as above, for the CORE table again.
    unsafe { (cb.get_module_function_table)(1, &mut table, &mut size) };
    for (id, f) in [
        (8, push_ex as *const c_void),
        (9, push_a as *const c_void),
        (11, pop as *const c_void),
    ] {
        // SAFETY: slot pointers of the CORE table, writable during this call.
        unsafe { **table.add(id) = f };
    }
    1
}

#[test]
fn the_protocol_with_a_tool_given_in_process() {
    // SAFETY: `init` follows the protocol (above).
    assert!(unsafe { nvtx::set_injection(init) });
    {
        let _a = nvtx::range(c"a");
        let _b = Event::new(c"b").color(0xff12_3456).category(7).range();
        nvtx::mark(c"no mark function: nothing");
    }
    // Forgotten mid-range: the range stays open, nothing else happens.
    std::mem::forget(nvtx::range(c"forgotten"));
    assert_eq!(
        *SEEN.lock().unwrap(),
        [
            "push a",
            "push_ex b ff123456 7 48",
            "pop",
            "pop",
            "push forgotten"
        ]
    );
    // Too late for another tool.
    // SAFETY: as above.
    assert!(!unsafe { nvtx::set_injection(init) });
}
