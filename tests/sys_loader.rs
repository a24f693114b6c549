//! cuda-sys on the CPU: result codes, the generated tables, and loading failures.

use cudadrv_sys::{CUresult, DRIVER_ENTRIES, RUNTIME_ENTRIES, cudaError_t};

/// Tests that load (and so read the environment) or write it hold this.
#[cfg(feature = "loaded")]
static ENV: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn result_codes_have_names_and_descriptions_without_a_driver() {
    let oom = CUresult::CUDA_ERROR_OUT_OF_MEMORY;
    assert_eq!(oom.name(), Some("CUDA_ERROR_OUT_OF_MEMORY"));
    let text = oom.to_string();
    assert!(text.starts_with("CUDA_ERROR_OUT_OF_MEMORY (2): "), "{text}");
    assert!(text.contains("memory"), "{text}");
    assert!(CUresult::CUDA_SUCCESS.is_success());
    assert_eq!(
        CUresult::CUDA_ERROR_INVALID_PTX.result(),
        Err(CUresult::CUDA_ERROR_INVALID_PTX)
    );
    // A code from a newer driver is a value like any other, not undefined behaviour.
    let unknown = CUresult(123_456);
    assert_eq!(unknown.name(), None);
    assert_eq!(unknown.to_string(), "unknown CUresult 123456");
    let rt = cudaError_t::cudaErrorMemoryAllocation;
    assert_eq!(rt.name(), Some("cudaErrorMemoryAllocation"));
    assert!(rt.to_string().contains("(2)"));
}

#[test]
fn documented_names_map_to_versioned_symbols() {
    let find = |name: &str| DRIVER_ENTRIES.iter().find(|e| e.name == name).copied();
    for (name, symbol, version) in [
        ("cuMemAlloc", "cuMemAlloc_v2", 3020),
        ("cuCtxCreate", "cuCtxCreate_v4", 12050),
        ("cuGraphAddDependencies", "cuGraphAddDependencies_v2", 12030),
        ("cuLaunchKernelEx", "cuLaunchKernelEx", 11060),
        ("cuMemcpyHtoD", "cuMemcpyHtoD_v2", 3020),
        ("cuGraphInstantiate", "cuGraphInstantiateWithFlags", 11040),
    ] {
        let e = find(name).unwrap_or_else(|| panic!("{name} missing from the table"));
        assert_eq!(e.symbol.trim_end_matches('\0'), symbol, "{name}");
        assert_eq!(e.version, version, "{name}");
        assert!(e.symbol_cstr().to_bytes().len() == symbol.len());
    }
    // cuLaunchKernel has a per-thread-default-stream ABI (_ptsz) at 7000.
    assert_eq!(
        find("cuLaunchKernel").map(|e| e.per_thread_version),
        Some(7000)
    );
    // cuStreamGetCtx_v2 is asked for as cuStreamGetCtx at ABI 12050.
    let v2 = find("cuStreamGetCtx_v2").expect("cuStreamGetCtx_v2");
    assert_eq!(
        (v2.lookup_cstr().to_str().ok(), v2.version),
        (Some("cuStreamGetCtx"), 12050)
    );
    let mut names: Vec<&str> = DRIVER_ENTRIES.iter().map(|e| e.name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), DRIVER_ENTRIES.len(), "duplicate driver names");
    assert!(
        DRIVER_ENTRIES.len() > 440,
        "{} driver entries",
        DRIVER_ENTRIES.len()
    );
    assert!(
        RUNTIME_ENTRIES.len() > 300,
        "{} runtime entries",
        RUNTIME_ENTRIES.len()
    );
    let memcpy = RUNTIME_ENTRIES
        .iter()
        .find(|e| e.name == "cudaMemcpy")
        .expect("cudaMemcpy");
    assert_eq!(memcpy.lookup_cstr().to_str().ok(), Some("cudaMemcpy_ptds"));
}

/// Tables from a resolver: in every build, whatever the features.
mod resolver {
    use core::ffi::{c_int, c_uint, c_void};

    use cudadrv_sys::{CUresult, DriverApi, Library};

    unsafe extern "C" fn mock_init(flags: c_uint) -> CUresult {
        if flags == 0 {
            CUresult::CUDA_SUCCESS
        } else {
            CUresult::CUDA_ERROR_INVALID_VALUE
        }
    }

    unsafe extern "C" fn mock_version(v: *mut c_int) -> CUresult {
        // SAFETY: the caller passes a valid out-pointer.
        unsafe { *v = 11_080 };
        CUresult::CUDA_SUCCESS
    }

    /// A table like an old driver's: only cuInit and cuDriverGetVersion exist.
    fn old_driver() -> DriverApi {
        // SAFETY: each non-null pointer has the C signature of the entry it is given for.
        unsafe {
            DriverApi::from_resolver(Library::none(), |e| match e.name {
                "cuInit" => mock_init as *mut c_void,
                "cuDriverGetVersion" => mock_version as *mut c_void,
                _ => core::ptr::null_mut(),
            })
        }
    }

    #[test]
    fn a_missing_entry_is_an_error_naming_it_when_called() {
        let api = old_driver();
        assert!(!api.is_linked());
        // SAFETY: mock functions with valid arguments.
        unsafe {
            assert_eq!(
                api.cuInit().expect("cuInit resolved")(0),
                CUresult::CUDA_SUCCESS
            );
            let mut v = 0;
            assert!(api.cuDriverGetVersion().expect("resolved")(&mut v).is_success());
            assert_eq!(v, 11_080);
        }
        let err = api
            .cuLaunchKernelEx()
            .expect_err("an 11.8 driver lacks nothing here, but the mock does");
        assert_eq!(err.name, "cuLaunchKernelEx");
        assert!(err.to_string().contains("`cuLaunchKernelEx`"), "{err}");
        let resolved = api.resolved();
        assert_eq!(resolved.iter().filter(|r| **r).count(), 2);
    }
}

#[cfg(feature = "loaded")]
mod loaded {
    use cudadrv_sys::{DriverApi, LoadOptions, RuntimeApi};

    /// Without a driver on this machine, loading fails with every candidate named; on a
    /// GPU machine it loads. Either way, nothing panics.
    #[test]
    fn loading_reports_what_it_tried() {
        let _env = crate::ENV.lock();
        // SAFETY: every test in this binary that reads or writes the environment holds
        // `ENV`.
        unsafe { std::env::set_var("CUDA_SYS_LIBCUDA", "/nonexistent/libcuda.so.1") };
        // SAFETY: the search opens only a CUDA driver (the variable names no file).
        match unsafe { DriverApi::load(LoadOptions::default()) } {
            Ok(api) => assert!(api.resolved().iter().filter(|r| **r).count() > 400),
            Err(e) => {
                let text = e.to_string();
                assert!(text.contains("/nonexistent/libcuda.so.1"), "{text}");
                assert!(text.contains("libcuda.so.1, libcuda.so"), "{text}");
            }
        }
        // SAFETY: as above.
        unsafe { std::env::set_var("CUDA_SYS_LIBCUDART", "/nonexistent/libcudart.so.13") };
        // SAFETY: the search opens only a CUDA runtime (the variable names no file).
        if let Err(e) = unsafe { RuntimeApi::load(LoadOptions::default()) } {
            let text = e.to_string();
            assert!(text.contains("/nonexistent/libcudart.so.13"), "{text}");
            assert!(text.contains("nvidia/cu13/lib"), "{text}");
        }
    }
}

/// Both binding modes in one build (features are additive, as `ash`'s `Entry::load` and
/// `Entry::linked`): both constructors exist, and the process-wide table still loads,
/// so a crate that relies on the loaded table is not changed by another crate of the
/// build turning on `linked`.
#[cfg(all(feature = "loaded", feature = "linked"))]
mod both_modes {
    use cudadrv_sys::{DriverApi, LoadError, LoadOptions, RuntimeApi};

    #[test]
    fn both_constructors_exist_and_driver_loads() {
        let _env = crate::ENV.lock();
        let linked = DriverApi::linked();
        assert!(linked.is_linked());
        assert!(linked.resolved().iter().all(|r| *r));
        assert!(linked.cuInit().is_ok(), "a linked entry is never missing");
        assert!(linked.library().as_raw().is_null());
        assert!(RuntimeApi::linked().is_linked());
        // SAFETY: the search opens only a CUDA driver, from its documented names.
        match unsafe { DriverApi::load(LoadOptions::default()) } {
            Ok(loaded) => assert!(!loaded.is_linked()),
            Err(e) => assert!(matches!(e, LoadError::LibraryNotFound { .. }), "{e}"),
        }
        assert_eq!(cudadrv_sys::binding_mode(), "loaded");
        match cudadrv_sys::driver() {
            Ok(table) => assert!(!table.is_linked(), "driver() loads when `loaded` is on"),
            Err(e) => assert!(
                matches!(e, LoadError::LibraryNotFound { .. }),
                "driver() tried to load: {e}"
            ),
        }
    }
}

/// `linked` alone: the process-wide table is the linked one, made without a driver.
#[cfg(all(feature = "linked", not(feature = "loaded")))]
#[test]
fn linked_alone_driver_is_the_linked_table() {
    assert_eq!(cudadrv_sys::binding_mode(), "linked");
    let table = cudadrv_sys::driver().expect("the linked table needs no loading");
    assert!(table.is_linked());
    assert!(cudadrv_sys::install_driver(cudadrv_sys::DriverApi::linked()).is_err());
}

/// `linked` names libcudart only together with `runtime`: a machine with only the driver
/// has no libcudart, so `linked` alone must link `-lcuda` and nothing else of CUDA.
///
/// Reads the link line of cuda-sys's own unit-test binary as rustc prints it
/// (`--print link-args`), with `true` as the linker so that nothing needs CUDA (or links
/// anything) here. Builds into `target/link-check`, beside this test's target directory.
#[test]
fn linked_names_cudart_only_with_the_runtime_feature() {
    let cargo = std::env::var_os("CARGO").expect("run through `cargo test` (CARGO is unset)");
    let exe = std::env::current_exe().expect("the test executable's path");
    // target/<profile>/deps/sys_loader-<hash> -> target/link-check
    let target_dir = exe
        .ancestors()
        .nth(3)
        .expect("a target directory above the test executable")
        .join("link-check");
    let libraries = |features: &str| -> Vec<String> {
        let out = std::process::Command::new(&cargo)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .args([
                "rustc",
                "--quiet",
                "--offline",
                "-p",
                "cudadrv-sys",
                "--lib",
            ])
            .args([
                "--profile",
                "test",
                "--no-default-features",
                "--features",
                features,
            ])
            .arg("--target-dir")
            .arg(&target_dir)
            .args(["--", "--print", "link-args", "-C", "linker=true"])
            .output()
            .expect("cargo runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "cargo rustc --features {features} failed:\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut libs: Vec<String> = stdout
            .split_whitespace()
            .map(|arg| arg.trim_matches('"'))
            .filter(|arg| *arg == "-lcuda" || *arg == "-lcudart")
            .map(String::from)
            .collect();
        libs.sort();
        libs.dedup();
        libs
    };
    assert_eq!(libraries("linked"), ["-lcuda"]);
    assert_eq!(libraries("linked,runtime"), ["-lcuda", "-lcudart"]);
    assert_eq!(libraries("loaded,runtime"), Vec::<String>::new());
}
