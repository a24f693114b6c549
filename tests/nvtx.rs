//! NVTX through a real injection library, on the CPU: `examples/nvtx_injection.rs` (a
//! `cdylib` that `cargo test` builds with the examples) is named in
//! `NVTX_INJECTION64_PATH`, as a profiler names its own, and writes each call it
//! receives to `$NVTX_TEST_LOG`; the calls below must arrive in order, with their
//! messages, colors, categories, payloads, depths and range ids.

use std::ffi::CStr;
use std::path::PathBuf;

use cudadrv::nvtx::{self, Event};

/// `target/<profile>/examples/libnvtx_injection.so`, next to this test's `deps/`.
fn injection_library() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let lib = exe
        .parent()?
        .parent()?
        .join("examples/libnvtx_injection.so");
    lib.exists().then_some(lib)
}

#[test]
#[cfg_attr(miri, ignore = "loads a shared library")]
fn calls_reach_an_injected_tool_in_order() {
    let Some(lib) = injection_library() else {
        panic!("libnvtx_injection.so not built (cargo test builds the examples)");
    };
    let log = std::env::temp_dir().join(format!("cudadrv-nvtx-{}.log", std::process::id()));
    let _ = std::fs::remove_file(&log);
    // SAFETY: the only test of this binary, before any other thread reads the
    // environment.
    unsafe {
        std::env::set_var("NVTX_INJECTION64_PATH", &lib);
        std::env::set_var("NVTX_TEST_LOG", &log);
    }
    assert!(nvtx::attached(), "the tool attached");
    nvtx::name_category(3, c"io");
    nvtx::mark(c"hello");
    {
        let _outer = nvtx::range(c"outer");
        let _inner = Event::new(c"inner").color(0xff00_ff00).category(3).range();
        Event::new(c"tick").payload_u64(42).mark();
    }
    let id = nvtx::start(c"across threads");
    std::thread::spawn(move || nvtx::end(id)).join().unwrap();
    // A leaked guard leaves its range open; the next pop closes it.
    std::mem::forget(nvtx::range(c"leaked"));
    assert_eq!(nvtx::pop(), 0);
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines,
        [
            "attached",
            "category 3 io",
            "mark hello",
            "push 0 outer",
            "push_ex inner color ff00ff00 category 3",
            "mark_ex tick payload 42",
            "pop",
            "pop",
            "start 1 across threads",
            "end 1",
            "push 0 leaked",
            "pop",
        ]
    );
    let _ = std::fs::remove_file(&log);
    let _: &CStr = c"";
}
