//! Hardware tests of cuda-sys alone: the driver and runtime tables on a real GPU.
//!
//! Built in both binding modes by `cargo xtask bundle` (`hw_sys` loaded, `hw_sys_linked`
//! linked against a stub libcuda), each printing what it loaded and how fast.

use std::time::Instant;

use cuda_workspace::{Outcome, TestResult, check, check_eq, require_gpu};
use cudadrv_sys::{CUdevice_attribute, CUresult};

fn ok(rc: CUresult, what: &str) -> TestResult {
    rc.result()
        .map_err(|e| Outcome::Fail(format!("{what}: {e}")))
}

/// The driver table: cuInit, version, device name, compute capability, how many
/// entries resolved and which are missing, and how long loading took.
fn driver_table_loads() -> TestResult {
    require_gpu()?;
    // The harness already loaded the process-wide table; time a fresh load too.
    let cu = cudadrv_sys::driver()?;
    if cu.is_linked() {
        println!(
            "    linked mode: {} driver entries linked",
            cudadrv_sys::DRIVER_ENTRIES.len()
        );
    }
    #[cfg(feature = "loaded")]
    if !cu.is_linked() {
        let start = Instant::now();
        // SAFETY: the same search as the process-wide table's, which already opened
        // this host's CUDA driver.
        let fresh = unsafe { cudadrv_sys::DriverApi::load(cudadrv_sys::LoadOptions::default()) }
            .map_err(|e| Outcome::Fail(e.to_string()))?;
        let load_us = start.elapsed().as_secs_f64() * 1e6;
        let resolved = fresh.resolved();
        let found = resolved.iter().filter(|r| **r).count();
        println!(
            "    loaded mode: {found} of {} driver entries resolved in {load_us:.0} us",
            resolved.len()
        );
        let missing: Vec<&str> = resolved
            .iter()
            .zip(cudadrv_sys::DRIVER_ENTRIES)
            .filter(|(r, _)| !**r)
            .map(|(_, e)| e.name)
            .collect();
        println!("    missing ({}): {}", missing.len(), missing.join(", "));
        check(found > 400, || format!("only {found} entries resolved"))?;
    }
    // SAFETY: plain driver queries with valid out-pointers.
    unsafe {
        ok(cu.cuInit()?(0), "cuInit")?;
        let mut version = 0;
        ok(cu.cuDriverGetVersion()?(&mut version), "cuDriverGetVersion")?;
        let mut dev = 0;
        ok(cu.cuDeviceGet()?(&mut dev, 0), "cuDeviceGet")?;
        let mut name = [0 as core::ffi::c_char; 128];
        ok(
            cu.cuDeviceGetName()?(name.as_mut_ptr(), 128, dev),
            "cuDeviceGetName",
        )?;
        let name = std::ffi::CStr::from_ptr(name.as_ptr())
            .to_string_lossy()
            .into_owned();
        let (mut major, mut minor) = (0, 0);
        let get = cu.cuDeviceGetAttribute()?;
        ok(
            get(
                &mut major,
                CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                dev,
            ),
            "cc major",
        )?;
        ok(
            get(
                &mut minor,
                CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                dev,
            ),
            "cc minor",
        )?;
        let mut bytes = 0usize;
        ok(cu.cuDeviceTotalMem()?(&mut bytes, dev), "cuDeviceTotalMem")?;
        println!(
            "    {} mode: driver {version} ({}.{}), device 0 = {name}, sm_{major}{minor}, {:.1} GiB",
            cudadrv_sys::binding_mode(),
            version / 1000,
            version % 1000 / 10,
            bytes as f64 / (1u64 << 30) as f64
        );
        check(version >= 12000, || format!("driver version {version}"))?;
        check(!name.is_empty(), || "empty device name".into())?;
    }
    Ok(())
}

/// The versioned symbols are the ones the documented names mean: `cuMemAlloc` is
/// `cuMemAlloc_v2` (64-bit sizes) and works on the real driver, as do `cuCtxCreate`
/// (`_v4`, with create params) and `cuGraphAddDependencies` (`_v2`, edge data).
fn versioned_names_work() -> TestResult {
    require_gpu()?;
    let cu = cudadrv_sys::driver()?;
    // SAFETY: a context is created, used for one allocation and destroyed; all
    // out-pointers are valid locals.
    unsafe {
        ok(cu.cuInit()?(0), "cuInit")?;
        let mut dev = 0;
        ok(cu.cuDeviceGet()?(&mut dev, 0), "cuDeviceGet")?;
        let mut ctx = core::ptr::null_mut();
        ok(
            cu.cuCtxCreate()?(&mut ctx, core::ptr::null_mut(), 0, dev),
            "cuCtxCreate (v4)",
        )?;
        let mut ptr = 0;
        let size = 5usize << 30; // 5 GiB: needs the 64-bit size of the _v2 ABI
        ok(cu.cuMemAlloc()?(&mut ptr, size), "cuMemAlloc 5 GiB (v2)")?;
        ok(cu.cuMemsetD8()?(ptr + size as u64 - 1, 7, 1), "cuMemsetD8")?;
        let mut last = 0u8;
        ok(
            cu.cuMemcpyDtoH()?((&mut last as *mut u8).cast(), ptr + size as u64 - 1, 1),
            "cuMemcpyDtoH",
        )?;
        check_eq(last, 7, "last byte of a 5 GiB allocation")?;
        ok(cu.cuMemFree()?(ptr), "cuMemFree")?;
        let mut graph = core::ptr::null_mut();
        ok(cu.cuGraphCreate()?(&mut graph, 0), "cuGraphCreate")?;
        let mut a = core::ptr::null_mut();
        let mut b = core::ptr::null_mut();
        ok(
            cu.cuGraphAddEmptyNode()?(&mut a, graph, core::ptr::null(), 0),
            "empty node a",
        )?;
        ok(
            cu.cuGraphAddEmptyNode()?(&mut b, graph, core::ptr::null(), 0),
            "empty node b",
        )?;
        ok(
            cu.cuGraphAddDependencies()?(graph, &a, &b, core::ptr::null(), 1),
            "cuGraphAddDependencies (v2)",
        )?;
        let mut n = 0usize;
        let edges = cu.cuGraphGetEdges()?;
        ok(
            edges(
                graph,
                core::ptr::null_mut(),
                core::ptr::null_mut(),
                core::ptr::null_mut(),
                &mut n,
            ),
            "edges",
        )?;
        check_eq(n, 1, "edge count")?;
        ok(cu.cuGraphDestroy()?(graph), "cuGraphDestroy")?;
        ok(cu.cuCtxDestroy()?(ctx), "cuCtxDestroy")?;
    }
    Ok(())
}

/// The runtime table loads from the host's libcudart and shares the driver's primary
/// context: a runtime allocation is visible to the driver API.
fn runtime_table_loads() -> TestResult {
    require_gpu()?;
    let start = Instant::now();
    let rt = match cudadrv_sys::runtime() {
        Ok(rt) => rt,
        Err(e) => return cuda_workspace::skip(format!("libcudart not found: {e}")),
    };
    let load_us = start.elapsed().as_secs_f64() * 1e6;
    let found = rt.resolved().iter().filter(|r| **r).count();
    println!(
        "    runtime: {found} of {} entries resolved in {load_us:.0} us",
        cudadrv_sys::RUNTIME_ENTRIES.len()
    );
    // SAFETY: runtime calls with valid out-pointers; the allocation is freed.
    unsafe {
        let mut version = 0;
        rt.cudaRuntimeGetVersion()?(&mut version).result()?;
        let mut ptr = core::ptr::null_mut();
        rt.cudaMalloc()?(&mut ptr, 4096).result()?;
        let cu = cudadrv_sys::driver()?;
        let mut base = 0;
        let mut size = 0usize;
        ok(
            cu.cuMemGetAddressRange()?(&mut base, &mut size, ptr as u64),
            "cuMemGetAddressRange",
        )?;
        check_eq(size, 4096, "allocation size seen by the driver")?;
        rt.cudaFree()?(ptr).result()?;
        println!("    runtime version {version}");
    }
    Ok(())
}

fn main() {
    cuda_workspace::run_suite(
        "hw_sys",
        cuda_workspace::hw_tests![
            driver_table_loads,
            versioned_names_work,
            runtime_table_loads
        ],
    );
}
