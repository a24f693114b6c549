//! NVTX ranges and marks (`nvToolsExt` v3), in Rust: what a profiler (Nsight Systems,
//! Nsight Compute) shows on its timeline by name. No C compiler and no `libnvToolsExt`
//! (CUDA 12.9 removed it): this module speaks NVTX's injection protocol itself, as the
//! header-only C library does.
//!
//! - [`mark`], [`push`] / [`pop`], [`range`] (a guard that pops when dropped),
//!   [`start`] / [`end`] (a range that may end on another thread), [`name_category`],
//!   and [`Event`] for a color, a category and a payload ([`Event::mark`],
//!   [`Event::push`], [`Event::range`]).
//! - Nothing happens unless a tool is attached: the first call looks for one (the path
//!   in `NVTX_INJECTION64_PATH`, loaded with `dlopen`, on Unix with feature `loaded`, or
//!   an entry point given to [`set_injection`]); without one every later call is one
//!   atomic load and a branch.
//! - `no_std`: nothing here allocates. On a target without `dlopen`, a tool's entry point
//!   comes through [`set_injection`].
//! - Leaking a [`RangeGuard`] leaves its range open on the profiler's timeline; nothing
//!   else.
//!
//! # The protocol
//! A tool's library exports `InitializeInjectionNvtx2(get_export_table)`. The first
//! NVTX call (one thread; the others wait) loads the library and calls it with this
//! module's `get_export_table`; the tool asks that for the callbacks table
//! (`NVTX_ETID_CALLBACKS`) and, through its `GetModuleFunctionTable`, for each module's
//! table of slots (CORE, CUDA, OPENCL, CUDART, CORE2, SYNC), and writes its functions
//! into the slots it handles. Each call here reads its slot once the initialisation is
//! complete (Acquire), and does nothing when the slot is empty.

use core::cell::UnsafeCell;
use core::ffi::{CStr, c_char, c_int, c_uint, c_void};
use core::sync::atomic::{AtomicPtr, AtomicU8, Ordering};

/// `NVTX_VERSION`.
pub const VERSION: u16 = 3;

/// `NvtxGetExportTableFunc_t`: what a tool's entry point is given.
pub type GetExportTable = unsafe extern "C" fn(export_table_id: u32) -> *const c_void;
/// `NvtxInitializeInjectionNvtxFunc_t`: a tool's entry point (`InitializeInjectionNvtx2`);
/// returns nonzero on success.
pub type InitializeInjection = unsafe extern "C" fn(get_export_table: GetExportTable) -> c_int;

/// `nvtxEventAttributes_v2` (48 bytes on 64-bit targets).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct EventAttributes {
    /// `NVTX_VERSION`.
    pub version: u16,
    /// `sizeof(nvtxEventAttributes_t)`.
    pub size: u16,
    /// The category (0: none).
    pub category: u32,
    /// `nvtxColorType_t`: 0 unknown, 1 ARGB.
    pub color_type: i32,
    /// The color, `0xAARRGGBB`.
    pub color: u32,
    /// `nvtxPayloadType_t`: 0 none, 1 u64, 2 i64, 3 f64, 4 u32, 5 i32, 6 f32.
    pub payload_type: i32,
    /// Reserved (0).
    pub reserved0: i32,
    /// The payload's bits (as `payload_type` says).
    pub payload: u64,
    /// `nvtxMessageType_t`: 1 ASCII (`message` points at a NUL-terminated string).
    pub message_type: i32,
    /// The message.
    pub message: *const c_char,
}

const _: () = assert!(size_of::<EventAttributes>() == 48 || size_of::<usize>() != 8);

/// `nvtxRangeId_t`: what [`start`] returns and [`end`] takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RangeId(pub u64);

// Callback ids of the CORE module (NvtxCallbackIdCore).
const MARK_EX: usize = 1;
const MARK_A: usize = 2;
const RANGE_START_EX: usize = 4;
const RANGE_START_A: usize = 5;
const RANGE_END: usize = 7;
const RANGE_PUSH_EX: usize = 8;
const RANGE_PUSH_A: usize = 9;
const RANGE_POP: usize = 11;
const NAME_CATEGORY_A: usize = 12;

/// One function slot a tool may fill: written by the tool during the initialisation
/// (on the initialising thread, while every other caller waits), read after it.
#[repr(transparent)]
struct Slot(UnsafeCell<*const c_void>);

// SAFETY: a slot is written only while the initialisation runs, by the thread that runs
// it (the tool's entry point, called from `initialize`), and read only after the state
// is COMPLETE (stored with Release after the writes, loaded with Acquire before the
// reads), so no write races a read.
unsafe impl Sync for Slot {}

impl Slot {
    const fn new() -> Self {
        Self(UnsafeCell::new(core::ptr::null()))
    }
}

/// The slots of one module: index = callback id (index 0 is unused, as in NVTX).
struct Module<const N: usize>([Slot; N]);

/// A module's table as the protocol hands it out: a pointer to each slot (null at 0 and
/// at the end, as NVTX's tables have an extra null).
#[repr(transparent)]
struct Table<const M: usize>([*mut *const c_void; M]);

// SAFETY: the pointers name the statics' slots, whose accesses `Slot` makes sound; the
// table itself is never written.
unsafe impl<const M: usize> Sync for Table<M> {}

macro_rules! module {
    ($slots:ident, $table:ident, $n:literal) => {
        static $slots: Module<$n> = Module([const { Slot::new() }; $n]);
        static $table: Table<{ $n + 1 }> = Table({
            let mut t = [core::ptr::null_mut(); $n + 1];
            let mut i = 1;
            while i < $n {
                t[i] = $slots.0[i].0.get();
                i += 1;
            }
            t
        });
    };
}

// Sizes: NVTX_CBID_<module>_SIZE.
module!(CORE, CORE_TABLE, 16);
module!(CUDA, CUDA_TABLE, 9);
module!(OPENCL, OPENCL_TABLE, 15);
module!(CUDART, CUDART_TABLE, 7);
module!(CORE2, CORE2_TABLE, 16);
module!(SYNC, SYNC_TABLE, 7);

/// `NvtxExportTableCallbacks`.
#[repr(C)]
struct Callbacks {
    struct_size: usize,
    get_module_function_table: unsafe extern "C" fn(
        module: c_int,
        out_table: *mut *const c_void,
        out_size: *mut c_uint,
    ) -> c_int,
}

/// `NvtxExportTableVersionInfo`.
#[repr(C)]
struct VersionInfo {
    struct_size: usize,
    version: u32,
    reserved0: u32,
    set_injection_nvtx_version: unsafe extern "C" fn(version: u32),
}

static CALLBACKS: Callbacks = Callbacks {
    struct_size: size_of::<Callbacks>(),
    get_module_function_table,
};

static VERSION_INFO: VersionInfo = VersionInfo {
    struct_size: size_of::<VersionInfo>(),
    version: VERSION as u32,
    reserved0: 0,
    set_injection_nvtx_version,
};

unsafe extern "C" fn get_module_function_table(
    module: c_int,
    out_table: *mut *const c_void,
    out_size: *mut c_uint,
) -> c_int {
    let (table, size): (*const c_void, usize) = match module {
        1 => (CORE_TABLE.0.as_ptr().cast(), CORE_TABLE.0.len()),
        2 => (CUDA_TABLE.0.as_ptr().cast(), CUDA_TABLE.0.len()),
        3 => (OPENCL_TABLE.0.as_ptr().cast(), OPENCL_TABLE.0.len()),
        4 => (CUDART_TABLE.0.as_ptr().cast(), CUDART_TABLE.0.len()),
        5 => (CORE2_TABLE.0.as_ptr().cast(), CORE2_TABLE.0.len()),
        6 => (SYNC_TABLE.0.as_ptr().cast(), SYNC_TABLE.0.len()),
        _ => return 0,
    };
    // SAFETY: the tool passes writable out-pointers or null (the protocol's contract).
    unsafe {
        if !out_size.is_null() {
            // The number of callback ids: the table's length less its trailing null.
            *out_size = (size - 1) as c_uint;
        }
        if !out_table.is_null() {
            *out_table = table;
        }
    }
    1
}

unsafe extern "C" fn set_injection_nvtx_version(_version: u32) {}

/// `nvtxGetExportTable`: the export tables a tool asks for.
unsafe extern "C" fn get_export_table(id: u32) -> *const c_void {
    match id {
        1 => (&raw const CALLBACKS).cast(),
        3 => (&raw const VERSION_INFO).cast(),
        _ => core::ptr::null(),
    }
}

const FRESH: u8 = 0;
const STARTED: u8 = 1;
const COMPLETE: u8 = 2;

static STATE: AtomicU8 = AtomicU8::new(FRESH);
/// An entry point given by [`set_injection`] (used when no library is named).
static GIVEN: AtomicPtr<c_void> = AtomicPtr::new(core::ptr::null_mut());

/// Gives NVTX a tool's entry point, for a target without `dlopen` (or a tool linked into
/// the program): used by the first NVTX call when `NVTX_INJECTION64_PATH` names no
/// library. Returns `false` when the first call already happened (too late).
///
/// # Safety
/// `init` must follow NVTX's injection protocol: called once, it may ask the export
/// tables and write, into the slots the module tables name, functions with the C
/// signatures of the NVTX v3 calls of those callback ids, valid for the rest of the
/// process, and write nothing else.
pub unsafe fn set_injection(init: InitializeInjection) -> bool {
    GIVEN.store(init as *mut c_void, Ordering::Release);
    STATE.load(Ordering::Acquire) == FRESH
}

/// Whether a tool is attached (and the first call has looked for one).
pub fn attached() -> bool {
    ensure_initialized();
    CORE.0.iter().chain(CORE2.0.iter()).any(|s| {
        // SAFETY: read after COMPLETE (see `Slot`).
        !unsafe { *s.0.get() }.is_null()
    })
}

#[inline]
fn ensure_initialized() {
    if STATE.load(Ordering::Acquire) != COMPLETE {
        initialize_slow();
    }
}

#[cold]
#[inline(never)]
fn initialize_slow() {
    match STATE.compare_exchange(FRESH, STARTED, Ordering::Acquire, Ordering::Acquire) {
        Ok(_) => {
            let ok = match find_injection() {
                // SAFETY: a tool's entry point (the library the user named through the
                // profiler's variable, or `set_injection`'s promise), called once, on
                // this thread, while every other caller waits.
                Some(init) => (unsafe { init(get_export_table) }) != 0,
                None => false,
            };
            if !ok {
                clear_slots();
            }
            STATE.store(COMPLETE, Ordering::Release);
        }
        Err(_) => {
            while STATE.load(Ordering::Acquire) != COMPLETE {
                core::hint::spin_loop();
                #[cfg(feature = "std")]
                std::thread::yield_now();
            }
        }
    }
}

/// Empties every slot (a tool whose initialisation failed attaches nothing). Runs on the
/// initialising thread before COMPLETE.
fn clear_slots() {
    fn clear<const N: usize>(m: &Module<N>) {
        for s in &m.0 {
            // SAFETY: the initialising thread, before COMPLETE (see `Slot`).
            unsafe { *s.0.get() = core::ptr::null() };
        }
    }
    clear(&CORE);
    clear(&CUDA);
    clear(&OPENCL);
    clear(&CUDART);
    clear(&CORE2);
    clear(&SYNC);
}

/// The tool's entry point: the library in `NVTX_INJECTION64_PATH` (Unix, feature
/// `loaded`), else what [`set_injection`] gave.
fn find_injection() -> Option<InitializeInjection> {
    #[cfg(all(unix, feature = "loaded"))]
    if let Ok(Some(path)) = cudadrv_sys::loader::getenv::<512>(c"NVTX_INJECTION64_PATH") {
        let mut buf = [0u8; 513];
        let bytes = path.as_str().as_bytes();
        buf[..bytes.len()].copy_from_slice(bytes);
        if let Ok(c) = CStr::from_bytes_until_nul(&buf) {
            // SAFETY: the library a profiler names for exactly this (its NVTX injection
            // library): opening it runs its initialisers, which is what the profiler
            // asks for.
            if let Ok(lib) = unsafe { cudadrv_sys::Library::open(c) } {
                let f = lib.symbol(c"InitializeInjectionNvtx2");
                if !f.is_null() {
                    // The tool stays loaded for the rest of the process (its functions
                    // sit in the slots).
                    core::mem::forget(lib);
                    // SAFETY: the protocol's entry point, with its C signature.
                    return Some(unsafe {
                        core::mem::transmute::<*mut c_void, InitializeInjection>(f)
                    });
                }
            }
        }
    }
    let given = GIVEN.load(Ordering::Acquire);
    if given.is_null() {
        None
    } else {
        // SAFETY: stored from an `InitializeInjection` by `set_injection`.
        Some(unsafe { core::mem::transmute::<*mut c_void, InitializeInjection>(given) })
    }
}

/// The function a tool put in CORE slot `id`, if any.
#[inline]
fn core_slot(id: usize) -> *const c_void {
    ensure_initialized();
    // SAFETY: read after COMPLETE (see `Slot`); `id` is below the module's size.
    unsafe { *CORE.0[id].0.get() }
}

/// Calls the tool's function in CORE slot `$id` as `$ty` with `$args`, or does nothing.
macro_rules! call {
    ($id:expr, $ty:ty, ($($arg:expr),*), $none:expr) => {{
        let f = core_slot($id);
        if f.is_null() {
            $none
        } else {
            // SAFETY: the tool wrote a function of this callback id's C signature (the
            // protocol), valid for the rest of the process.
            unsafe { core::mem::transmute::<*const c_void, $ty>(f)($($arg),*) }
        }
    }};
}

/// `nvtxMarkA`: an instant on the timeline.
pub fn mark(message: &CStr) {
    call!(
        MARK_A,
        unsafe extern "C" fn(*const c_char),
        (message.as_ptr()),
        ()
    )
}

/// `nvtxRangePushA`: opens a nested range on this thread; returns its depth (0-based),
/// or a negative value (no tool, or the tool's error).
pub fn push(message: &CStr) -> i32 {
    call!(
        RANGE_PUSH_A,
        unsafe extern "C" fn(*const c_char) -> c_int,
        (message.as_ptr()),
        -1
    )
}

/// `nvtxRangePop`: closes this thread's innermost range; returns the depth it had, or a
/// negative value.
pub fn pop() -> i32 {
    call!(RANGE_POP, unsafe extern "C" fn() -> c_int, (), -1)
}

/// `nvtxRangeStartA`: a range that [`end`] closes, from any thread.
pub fn start(message: &CStr) -> RangeId {
    RangeId(call!(
        RANGE_START_A,
        unsafe extern "C" fn(*const c_char) -> u64,
        (message.as_ptr()),
        0
    ))
}

/// `nvtxRangeEnd`.
pub fn end(id: RangeId) {
    call!(RANGE_END, unsafe extern "C" fn(u64), (id.0), ())
}

/// `nvtxNameCategoryA`: names a category (as [`Event::category`] uses it).
pub fn name_category(category: u32, name: &CStr) {
    call!(
        NAME_CATEGORY_A,
        unsafe extern "C" fn(u32, *const c_char),
        (category, name.as_ptr()),
        ()
    )
}

/// A range open on this thread until the guard drops ([`range`], [`Event::range`]).
/// Forgetting it leaves the range open on the timeline.
#[must_use = "the range closes when the guard drops"]
#[derive(Debug)]
pub struct RangeGuard {
    _not_send: core::marker::PhantomData<*const ()>,
}

impl Drop for RangeGuard {
    fn drop(&mut self) {
        pop();
    }
}

/// [`push`] with a guard that [`pop`]s when it drops.
pub fn range(message: &CStr) -> RangeGuard {
    push(message);
    RangeGuard {
        _not_send: core::marker::PhantomData,
    }
}

/// An event with attributes (`nvtxEventAttributes_t`): a message, and optionally a
/// color, a category and a payload.
#[derive(Clone, Copy, Debug)]
pub struct Event<'m> {
    attrs: EventAttributes,
    _message: core::marker::PhantomData<&'m CStr>,
}

impl<'m> Event<'m> {
    /// An event with `message` and nothing else.
    pub const fn new(message: &'m CStr) -> Self {
        Self {
            attrs: EventAttributes {
                version: VERSION,
                size: size_of::<EventAttributes>() as u16,
                category: 0,
                color_type: 0,
                color: 0,
                payload_type: 0,
                reserved0: 0,
                payload: 0,
                message_type: 1,
                message: message.as_ptr(),
            },
            _message: core::marker::PhantomData,
        }
    }

    /// An ARGB color (`0xAARRGGBB`).
    #[must_use]
    pub const fn color(mut self, argb: u32) -> Self {
        self.attrs.color_type = 1;
        self.attrs.color = argb;
        self
    }

    /// A category ([`name_category`] names it).
    #[must_use]
    pub const fn category(mut self, category: u32) -> Self {
        self.attrs.category = category;
        self
    }

    /// A 64-bit unsigned payload.
    #[must_use]
    pub const fn payload_u64(mut self, value: u64) -> Self {
        self.attrs.payload_type = 1;
        self.attrs.payload = value;
        self
    }

    /// A 64-bit floating-point payload.
    #[must_use]
    pub const fn payload_f64(mut self, value: f64) -> Self {
        self.attrs.payload_type = 3;
        self.attrs.payload = value.to_bits();
        self
    }

    /// The attributes as NVTX takes them.
    pub fn attributes(&self) -> &EventAttributes {
        &self.attrs
    }

    /// `nvtxMarkEx`.
    pub fn mark(&self) {
        call!(
            MARK_EX,
            unsafe extern "C" fn(*const EventAttributes),
            (&raw const self.attrs),
            ()
        )
    }

    /// `nvtxRangePushEx`: returns the depth, or a negative value.
    pub fn push(&self) -> i32 {
        call!(
            RANGE_PUSH_EX,
            unsafe extern "C" fn(*const EventAttributes) -> c_int,
            (&raw const self.attrs),
            -1
        )
    }

    /// [`push`](Self::push) with a guard that pops when it drops.
    pub fn range(&self) -> RangeGuard {
        self.push();
        RangeGuard {
            _not_send: core::marker::PhantomData,
        }
    }

    /// `nvtxRangeStartEx`.
    pub fn start(&self) -> RangeId {
        RangeId(call!(
            RANGE_START_EX,
            unsafe extern "C" fn(*const EventAttributes) -> u64,
            (&raw const self.attrs),
            0
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without a tool (this test binary names none and gives none), every call does
    /// nothing and says so.
    #[test]
    fn without_a_tool_every_call_is_a_no_op() {
        assert!(!attached());
        assert_eq!(push(c"x"), -1);
        assert_eq!(pop(), -1);
        mark(c"m");
        let g = range(c"r");
        drop(g);
        assert_eq!(start(c"s"), RangeId(0));
        end(RangeId(0));
        assert_eq!(Event::new(c"e").color(1).push(), -1);
        assert_eq!(Event::new(c"e").attributes().size, 48);
    }
}
