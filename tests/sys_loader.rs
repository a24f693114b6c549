//! cuda-sys on the CPU: result codes, the generated tables, and loading failures.

use cuda_sys::{CUresult, DRIVER_ENTRIES, RUNTIME_ENTRIES, cudaError_t};

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

#[cfg(not(feature = "linked"))]
mod loaded {
    use core::ffi::{c_int, c_uint, c_void};

    use cuda_sys::{CUresult, DriverApi, Library};

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

    /// Without a driver on this machine, loading fails with every candidate named; on a
    /// GPU machine it loads. Either way, nothing panics.
    #[test]
    fn loading_reports_what_it_tried() {
        // SAFETY: no other test in this binary reads or writes the environment.
        unsafe { std::env::set_var("CUDA_SYS_LIBCUDA", "/nonexistent/libcuda.so.1") };
        match cuda_sys::load_driver(cuda_sys::LoadOptions::default()) {
            Ok(api) => assert!(api.resolved().iter().filter(|r| **r).count() > 400),
            Err(e) => {
                let text = e.to_string();
                assert!(text.contains("/nonexistent/libcuda.so.1"), "{text}");
                assert!(text.contains("libcuda.so.1, libcuda.so"), "{text}");
            }
        }
        // SAFETY: as above.
        unsafe { std::env::set_var("CUDA_SYS_LIBCUDART", "/nonexistent/libcudart.so.13") };
        if let Err(e) = cuda_sys::load_runtime(cuda_sys::LoadOptions::default()) {
            let text = e.to_string();
            assert!(text.contains("/nonexistent/libcudart.so.13"), "{text}");
            assert!(text.contains("nvidia/cu13/lib"), "{text}");
        }
    }
}
