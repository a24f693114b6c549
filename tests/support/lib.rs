//! Support for the integration tests: the hardware-test harness and the PTX they load.
//!
//! Hardware tests are `harness = false` test binaries whose `main` calls [`run_suite`].
//! Each test returns [`Outcome`]: on a machine without a usable GPU it returns
//! [`Outcome::Skip`] with the reason (never a silent pass), and the suite's last line
//! counts passes, failures and skips: `hardware: 3 passed, 0 failed, 5 skipped`.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::OnceLock;
use std::time::Instant;

/// Minimal run-time-loaded NCCL and cuBLAS FFI (hw_interop).
pub mod interop;
pub mod mock;
/// The CUDA C++ sources the NVRTC tests compile.
pub mod nvrtc;

/// What one hardware test ended with.
#[derive(Debug)]
pub enum Outcome {
    /// It ran and its checks held.
    Pass,
    /// It could not run here (no GPU, too old a GPU, a tool missing), and why.
    Skip(String),
    /// It ran and a check failed, or an API call failed.
    Fail(String),
}

/// The result type tests use with `?`: any error becomes a failure; [`skip`] and
/// [`require_gpu`] produce skips.
pub type TestResult = Result<(), Outcome>;

impl<E: std::fmt::Display> From<E> for Outcome {
    fn from(e: E) -> Self {
        Outcome::Fail(e.to_string())
    }
}

/// Ends the test as skipped.
pub fn skip<T>(reason: impl Into<String>) -> Result<T, Outcome> {
    Err(Outcome::Skip(reason.into()))
}

/// Fails the test unless `cond` holds.
pub fn check(cond: bool, what: impl FnOnce() -> String) -> TestResult {
    if cond {
        Ok(())
    } else {
        Err(Outcome::Fail(what()))
    }
}

/// Fails the test unless `a == b`.
pub fn check_eq<T: PartialEq + std::fmt::Debug>(a: T, b: T, what: &str) -> TestResult {
    if a == b {
        Ok(())
    } else {
        Err(Outcome::Fail(format!("{what}: {a:?} != {b:?}")))
    }
}

/// What the harness found about the GPU, once per process.
#[derive(Clone, Debug)]
pub struct GpuInfo {
    /// Number of CUDA devices.
    pub count: i32,
    /// Compute capability of device 0.
    pub cc: (i32, i32),
    /// Name of device 0.
    pub name: String,
    /// Driver version (`cuDriverGetVersion`, e.g. 13000).
    pub driver_version: i32,
}

static GPU: OnceLock<Result<GpuInfo, String>> = OnceLock::new();

/// The GPU if this machine has a usable one (driver loads, `cuInit` succeeds, at least
/// one device), else the reason there is none. Probed once, with cuda-sys directly.
pub fn gpu() -> Result<&'static GpuInfo, &'static str> {
    GPU.get_or_init(probe).as_ref().map_err(String::as_str)
}

/// The GPU, or a skip naming why there is none.
pub fn require_gpu() -> Result<&'static GpuInfo, Outcome> {
    gpu().map_err(|why| Outcome::Skip(format!("no GPU: {why}")))
}

/// The GPU if it has at least compute capability `major.minor`, else a skip.
pub fn require_sm(major: i32, minor: i32) -> Result<&'static GpuInfo, Outcome> {
    let g = require_gpu()?;
    if g.cc >= (major, minor) {
        Ok(g)
    } else {
        Err(Outcome::Skip(format!(
            "needs sm_{major}{minor}, {} is sm_{}{}",
            g.name, g.cc.0, g.cc.1
        )))
    }
}

fn probe() -> Result<GpuInfo, String> {
    let cu = cudadrv_sys::driver().map_err(|e| e.to_string())?;
    let call =
        |rc: cudadrv_sys::CUresult, what: &str| rc.result().map_err(|e| format!("{what}: {e}"));
    // SAFETY: plain driver queries with valid out-pointers.
    unsafe {
        call(cu.cuInit().map_err(|e| e.to_string())?(0), "cuInit")?;
        let mut count = 0;
        call(
            cu.cuDeviceGetCount().map_err(|e| e.to_string())?(&mut count),
            "cuDeviceGetCount",
        )?;
        if count == 0 {
            return Err("the driver reports no CUDA device".into());
        }
        let mut dev = 0;
        call(
            cu.cuDeviceGet().map_err(|e| e.to_string())?(&mut dev, 0),
            "cuDeviceGet",
        )?;
        let attr = |a: cudadrv_sys::CUdevice_attribute| -> Result<i32, String> {
            let mut v = 0;
            call(
                cu.cuDeviceGetAttribute().map_err(|e| e.to_string())?(&mut v, a, dev),
                "cuDeviceGetAttribute",
            )?;
            Ok(v)
        };
        let cc = (
            attr(cudadrv_sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            attr(cudadrv_sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        );
        let mut name = [0 as core::ffi::c_char; 256];
        call(
            cu.cuDeviceGetName().map_err(|e| e.to_string())?(name.as_mut_ptr(), 256, dev),
            "cuDeviceGetName",
        )?;
        let name = std::ffi::CStr::from_ptr(name.as_ptr())
            .to_string_lossy()
            .into_owned();
        let mut driver_version = 0;
        call(
            cu.cuDriverGetVersion().map_err(|e| e.to_string())?(&mut driver_version),
            "cuDriverGetVersion",
        )?;
        Ok(GpuInfo {
            count,
            cc,
            name,
            driver_version,
        })
    }
}

/// One hardware test.
pub struct HwTest {
    /// Its name, printed in the report.
    pub name: &'static str,
    /// The test.
    pub run: fn() -> TestResult,
}

/// Declares a list of hardware tests: `hw_tests![a, b, c]` for functions `a`, `b`, `c`.
#[macro_export]
macro_rules! hw_tests {
    ($($f:path),* $(,)?) => {
        &[$($crate::HwTest { name: stringify!($f), run: $f }),*]
    };
}

/// Runs `tests` (filtered by the first command-line argument that is not a flag, as a
/// substring), prints one line per test and the summary line, and exits: 0 when
/// nothing failed, 1 otherwise. `--list` prints the names only.
pub fn run_suite(suite: &str, tests: &[HwTest]) -> ! {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--list") {
        for t in tests {
            println!("{suite}::{}: test", t.name);
        }
        std::process::exit(0);
    }
    let filter = args.iter().find(|a| !a.starts_with('-')).cloned();
    match gpu() {
        Ok(g) => println!(
            "{suite}: GPU {} (sm_{}{}), driver {}.{}, {} device(s), binding mode {}",
            g.name,
            g.cc.0,
            g.cc.1,
            g.driver_version / 1000,
            g.driver_version % 1000 / 10,
            g.count,
            cudadrv_sys::binding_mode()
        ),
        Err(why) => println!("{suite}: no GPU ({why}): hardware tests will report SKIPPED"),
    }
    let (mut passed, mut failed, mut skipped) = (0, 0, 0);
    for t in tests {
        if filter
            .as_ref()
            .is_some_and(|f| !t.name.contains(f.as_str()))
        {
            continue;
        }
        let start = Instant::now();
        let outcome = match catch_unwind(AssertUnwindSafe(t.run)) {
            Ok(Ok(())) => Outcome::Pass,
            Ok(Err(o)) => o,
            Err(panic) => Outcome::Fail(format!(
                "panicked: {}",
                panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_default()
            )),
        };
        let ms = start.elapsed().as_secs_f64() * 1e3;
        match outcome {
            Outcome::Pass => {
                passed += 1;
                println!("test {suite}::{} ... ok ({ms:.1} ms)", t.name);
            }
            Outcome::Skip(why) => {
                skipped += 1;
                println!("test {suite}::{} ... SKIPPED ({why})", t.name);
            }
            Outcome::Fail(why) => {
                failed += 1;
                println!(
                    "test {suite}::{} ... FAILED ({ms:.1} ms)\n    {why}",
                    t.name
                );
            }
        }
    }
    println!("{suite}: {passed} passed, {failed} failed, {skipped} skipped");
    std::process::exit(if failed == 0 { 0 } else { 1 });
}

/// `fill`'s value at `i` (ptx/src/fill.rs): `3i + 1`.
pub fn fill_value(i: u32) -> u32 {
    i.wrapping_mul(3).wrapping_add(1)
}

/// Fails unless `got[i] == fill_value(i)` for every `i`, naming `what` and the first
/// element that differs.
pub fn check_filled(got: &[u32], what: &str) -> TestResult {
    match got
        .iter()
        .enumerate()
        .find(|&(i, &v)| v != fill_value(i as u32))
    {
        None => Ok(()),
        Some((i, v)) => Err(Outcome::Fail(format!(
            "{what}: element {i} is {v}, expected {}",
            fill_value(i as u32)
        ))),
    }
}

/// The kernels of `ptx::KERNELS` most tests launch: `fill(u32*, u32)` (`out[i] = 3i +
/// 1`), `write_value(u32*, u32)` (`out[0] = value`), `vec_add(f32*, f32*, f32*, u32)`.
pub struct Kernels {
    /// `fill`.
    pub fill: cudadrv::Function,
    /// `write_value`.
    pub write_value: cudadrv::Function,
    /// `vec_add`.
    pub vec_add: cudadrv::Function,
}

impl Kernels {
    /// Loads `ptx::KERNELS` into `ctx` and looks the three kernels up.
    pub fn load(ctx: &cudadrv::Context) -> Result<Self, cudadrv::Error> {
        let m = cudadrv::Module::from_ptx(ctx, ptx::KERNELS)?;
        Ok(Self {
            fill: m.function("fill")?,
            write_value: m.function("write_value")?,
            vec_add: m.function("vec_add")?,
        })
    }
}

/// The PTX files built from ptx/ by `cargo xtask ptx` (committed, so no nightly needed).
pub mod ptx {
    /// Kernels that load with a plain `cuModuleLoadData`.
    pub const KERNELS: &str = include_str!("../../ptx/generated/kernels.ptx");
    /// Kernels that call the device runtime: link with `libcudadevrt.a` (cuLink*).
    pub const DEVRT: &str = include_str!("../../ptx/generated/devrt.ptx");
    /// Kernels built with PTX ISA 8.1 (`st.async`, `red.async`): ptx/async81.
    pub const ASYNC81: &str = include_str!("../../ptx/generated/async81.ptx");

    /// [`KERNELS`] as the trust root of safe launches of the `kernel!` declarations in
    /// ptx/src/typed.rs ([`crate::typed`]).
    // SAFETY: kernels.ptx is the PTX rustc produced from ptx/src (`cargo xtask ptx`):
    // every `__cudadrv_safe_*` global in it comes from a `kernel!` safe declaration.
    pub static TRUSTED: cudadrv::kernel::KernelPtx =
        unsafe { cudadrv::kernel::KernelPtx::new(KERNELS) };
}

/// The host half of ptx/src/typed.rs: typed handles of the `kernel!` declarations whose
/// device half is in [`ptx::KERNELS`] (the bodies are not compiled here).
#[path = "../../ptx/src/typed.rs"]
pub mod typed;

/// The host half of ptx/src/helpers.rs (bfloat16, 16-byte loads, warp reductions).
#[path = "../../ptx/src/helpers.rs"]
pub mod helpers;

/// Where libcudadevrt.a is: `$CUDA_DEVRT_LIB`, then `lib64/` of `$CUDA_PATH`,
/// `$CUDA_HOME` and `/usr/local/cuda`.
pub fn cudadevrt_path() -> Option<std::path::PathBuf> {
    use std::path::PathBuf;
    let mut cands: Vec<PathBuf> = Vec::new();
    if let Some(p) = std::env::var_os("CUDA_DEVRT_LIB") {
        cands.push(PathBuf::from(p));
    }
    for var in ["CUDA_PATH", "CUDA_HOME"] {
        if let Some(p) = std::env::var_os(var) {
            cands.push(PathBuf::from(p).join("lib64/libcudadevrt.a"));
        }
    }
    cands.push("/usr/local/cuda/lib64/libcudadevrt.a".into());
    cands.into_iter().find(|p| p.is_file())
}

/// `ptx_src` (named `name` in JIT messages) linked with `libcudadevrt.a` by the JIT
/// linker; a skip when the library is not found.
pub fn link_with_devrt(
    ctx: &cudadrv::Context,
    ptx_src: &str,
    name: &str,
) -> Result<cudadrv::Module, Outcome> {
    use cudadrv::{JitOptions, Linker};
    let Some(devrt) = cudadevrt_path() else {
        return skip(
            "libcudadevrt.a not found ($CUDA_DEVRT_LIB, $CUDA_PATH/lib64, $CUDA_HOME/lib64, \
             /usr/local/cuda/lib64)",
        );
    };
    let mut linker = Linker::new(ctx, JitOptions::default())?;
    linker.add_ptx(ptx_src, name)?;
    linker.add_library_file(devrt.to_str().ok_or("libcudadevrt.a path is not UTF-8")?)?;
    Ok(linker.into_module()?)
}

/// True under compute-sanitizer (any tool).
pub fn under_sanitizer() -> bool {
    std::env::var_os("NV_SANITIZER_INJECTION_PORT_BASE").is_some()
}

/// The C ABI probe built by build.rs (present when CUDA headers were found).
#[cfg(abi_probe)]
pub mod abi {
    include!(concat!(env!("OUT_DIR"), "/abi_layout.rs"));

    #[repr(C)]
    struct Probe {
        name: *const core::ffi::c_char,
        value: core::ffi::c_ulong,
    }

    unsafe extern "C" {
        static cuda_abi_probe: [Probe; 0];
        static cuda_abi_probe_len: core::ffi::c_ulong;
    }

    /// (check, value) pairs as the C compiler lays the structs out.
    pub fn c_layout() -> Vec<(String, usize)> {
        // SAFETY: the probe defines `cuda_abi_probe_len` entries of `struct probe`, whose
        // names are string literals.
        unsafe {
            let len = cuda_abi_probe_len as usize;
            let base = (&raw const cuda_abi_probe).cast::<Probe>();
            (0..len)
                .map(|i| {
                    let p = &*base.add(i);
                    let name = std::ffi::CStr::from_ptr(p.name)
                        .to_string_lossy()
                        .into_owned();
                    (name, p.value as usize)
                })
                .collect()
        }
    }
}
