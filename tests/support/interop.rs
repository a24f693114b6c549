//! Minimal FFI to NCCL and cuBLAS, loaded at run time (`dlopen`), for the interop test
//! (tests/hw_interop.rs): a program hands a library cudadrv's raw handles. (NCCL itself is
//! `cudadrv::nccl`, feature `nccl`.)
//!
//! cudadrv does not wrap these libraries: it hands them its streams (`Stream::as_raw`,
//! a `CUstream` is a `cudaStream_t`) and its memory (`DeviceBuffer::as_raw`, a device
//! address). Only the handful of entry points the tests use is declared, with the
//! signatures and enum values of the public headers (`nccl.h` of NCCL 2.x, `cublas_api.h`
//! of cuBLAS 13). A missing library is an `Err` with the paths tried, which the callers
//! turn into a skip.
//!
//! Both libraries use the CUDA runtime, which works in the device's primary context: use
//! them with `Context::primary` contexts (and that context current on the calling thread,
//! `Context::bind`).

use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::sync::OnceLock;

use cudadrv::cuda_sys::Library;

/// Opens the first of `candidates` that loads; the error lists every attempt.
///
/// # Safety
/// Each candidate must name the library the caller means (NCCL, cuBLAS), whose
/// initialisers are sound to run in this process.
unsafe fn open_first(candidates: &[String]) -> Result<(Library, String), String> {
    let mut tried = Vec::new();
    for c in candidates {
        let Ok(path) = CString::new(c.as_str()) else {
            continue;
        };
        // SAFETY: the caller vouches for what the candidates name.
        match unsafe { Library::open(&path) } {
            Ok(lib) => return Ok((lib, c.clone())),
            Err(e) => tried.push(format!("{c}: {}", e.0.as_str())),
        }
    }
    Err(format!("not found ({})", tried.join("; ")))
}

/// `dir/name` for each directory in `$var` style roots that are set.
fn under_env_roots(vars: &[&str], sub: &str) -> Vec<String> {
    vars.iter()
        .filter_map(|v| std::env::var(v).ok())
        .map(|root| format!("{root}/{sub}"))
        .collect()
}

/// Reads symbol `name` from `lib` as a function pointer of type `F`.
///
/// # Safety
/// `F` must be an `extern "C"` function pointer type matching the symbol's C signature.
unsafe fn sym<F: Copy>(lib: &Library, path: &str, name: &CStr) -> Result<F, String> {
    let p = lib.symbol(name);
    if p.is_null() {
        return Err(format!("{path} has no {}", name.to_string_lossy()));
    }
    assert_eq!(size_of::<F>(), size_of::<*mut c_void>());
    // SAFETY: a non-null code address of a function with `F`'s signature (the caller's
    // promise); `F` is a function pointer, the size of a data pointer (checked above).
    Ok(unsafe { std::mem::transmute_copy::<*mut c_void, F>(&p) })
}

/// NCCL (`libnccl.so.2`).
pub mod nccl {
    use super::*;

    /// `ncclResult_t`: 0 is `ncclSuccess`.
    pub type NcclResult = c_int;
    /// `ncclComm_t`: an opaque pointer.
    pub type Comm = *mut c_void;
    /// `ncclDataType_t` `ncclInt32`.
    pub const INT32: c_int = 2;
    /// `ncclDataType_t` `ncclFloat32`.
    pub const FLOAT32: c_int = 7;
    /// `ncclRedOp_t` `ncclSum`.
    pub const SUM: c_int = 0;
    /// `ncclRedOp_t` `ncclMax`.
    pub const MAX: c_int = 2;
    /// `NCCL_UNIQUE_ID_BYTES`.
    pub const UNIQUE_ID_BYTES: usize = 128;

    /// `ncclUniqueId`: `char internal[128]`, passed by value to `ncclCommInitRank`.
    #[repr(C)]
    #[derive(Clone, Copy)]
    pub struct UniqueId {
        pub internal: [c_char; UNIQUE_ID_BYTES],
    }

    // SAFETY: plain bytes; NCCL's own rule is that the id is handed to every rank.
    unsafe impl Send for UniqueId {}

    /// The entry points, loaded once per process and never unloaded.
    pub struct Nccl {
        pub path: String,
        pub get_version: unsafe extern "C" fn(*mut c_int) -> NcclResult,
        pub get_unique_id: unsafe extern "C" fn(*mut UniqueId) -> NcclResult,
        pub comm_init_rank: unsafe extern "C" fn(*mut Comm, c_int, UniqueId, c_int) -> NcclResult,
        pub comm_init_all: unsafe extern "C" fn(*mut Comm, c_int, *const c_int) -> NcclResult,
        pub comm_destroy: unsafe extern "C" fn(Comm) -> NcclResult,
        pub group_start: unsafe extern "C" fn() -> NcclResult,
        pub group_end: unsafe extern "C" fn() -> NcclResult,
        /// `(sendbuff, recvbuff, count, datatype, op, comm, stream)`.
        pub all_reduce: unsafe extern "C" fn(
            *const c_void,
            *mut c_void,
            usize,
            c_int,
            c_int,
            Comm,
            cudadrv::cuda_sys::CUstream,
        ) -> NcclResult,
        pub get_error_string: unsafe extern "C" fn(NcclResult) -> *const c_char,
        _lib: Library,
    }

    static NCCL: OnceLock<Result<Nccl, String>> = OnceLock::new();

    impl Nccl {
        /// NCCL, loaded from `$NCCL_LIB`, `libnccl.so.2` (the loader's path) or
        /// `/usr/lib/x86_64-linux-gnu/libnccl.so.2`; the error says what was tried.
        pub fn get() -> Result<&'static Nccl, String> {
            NCCL.get_or_init(Self::load)
                .as_ref()
                .map_err(|e| format!("NCCL {e}"))
        }

        fn load() -> Result<Self, String> {
            let mut cands: Vec<String> = std::env::var("NCCL_LIB").into_iter().collect();
            cands.push("libnccl.so.2".into());
            cands.push("/usr/lib/x86_64-linux-gnu/libnccl.so.2".into());
            // SAFETY: these name NCCL, whose initialisers set up its own globals only.
            let (lib, path) = unsafe { open_first(&cands)? };
            // SAFETY: each type spells out the C signature of the symbol in nccl.h.
            unsafe {
                Ok(Self {
                    get_version: sym(&lib, &path, c"ncclGetVersion")?,
                    get_unique_id: sym(&lib, &path, c"ncclGetUniqueId")?,
                    comm_init_rank: sym(&lib, &path, c"ncclCommInitRank")?,
                    comm_init_all: sym(&lib, &path, c"ncclCommInitAll")?,
                    comm_destroy: sym(&lib, &path, c"ncclCommDestroy")?,
                    group_start: sym(&lib, &path, c"ncclGroupStart")?,
                    group_end: sym(&lib, &path, c"ncclGroupEnd")?,
                    all_reduce: sym(&lib, &path, c"ncclAllReduce")?,
                    get_error_string: sym(&lib, &path, c"ncclGetErrorString")?,
                    path,
                    _lib: lib,
                })
            }
        }

        /// `Ok` for `ncclSuccess`, else an error naming `what` and NCCL's text.
        pub fn check(&self, rc: NcclResult, what: &str) -> Result<(), String> {
            if rc == 0 {
                return Ok(());
            }
            // SAFETY: NCCL returns a static string for any code.
            let text = unsafe {
                let p = (self.get_error_string)(rc);
                if p.is_null() {
                    String::new()
                } else {
                    CStr::from_ptr(p).to_string_lossy().into_owned()
                }
            };
            Err(format!("{what} failed: ncclResult {rc} ({text})"))
        }

        /// `ncclGetVersion` as `(major, minor, patch)` (`NCCL_VERSION_CODE` is
        /// `major * 10000 + minor * 100 + patch` since 2.9).
        pub fn version(&self) -> Result<(i32, i32, i32), String> {
            let mut v = 0;
            // SAFETY: valid out-pointer.
            self.check(unsafe { (self.get_version)(&mut v) }, "ncclGetVersion")?;
            Ok((v / 10000, v / 100 % 100, v % 100))
        }
    }
}

/// cuBLAS (`libcublas.so.13`).
pub mod cublas {
    use super::*;

    /// `cublasStatus_t`: 0 is `CUBLAS_STATUS_SUCCESS`.
    pub type Status = c_int;
    /// `cublasHandle_t`: an opaque pointer.
    pub type Handle = *mut c_void;
    /// `cublasOperation_t` `CUBLAS_OP_N`.
    pub const OP_N: c_int = 0;
    /// `cublasOperation_t` `CUBLAS_OP_T`.
    pub const OP_T: c_int = 1;
    /// Workspace cuBLAS recommends on Hopper (32 MiB), given to it so that work recorded
    /// into a graph does not allocate.
    pub const WORKSPACE_BYTES: usize = 32 << 20;

    /// `cublasSgemm_v2`: `(handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta,
    /// C, ldc)`, column-major.
    pub type Sgemm = unsafe extern "C" fn(
        Handle,
        c_int,
        c_int,
        c_int,
        c_int,
        c_int,
        *const f32,
        *const f32,
        c_int,
        *const f32,
        c_int,
        *const f32,
        *mut f32,
        c_int,
    ) -> Status;

    /// The entry points, loaded once per process and never unloaded.
    pub struct Cublas {
        pub path: String,
        pub create: unsafe extern "C" fn(*mut Handle) -> Status,
        pub destroy: unsafe extern "C" fn(Handle) -> Status,
        pub set_stream: unsafe extern "C" fn(Handle, cudadrv::cuda_sys::CUstream) -> Status,
        pub set_workspace: unsafe extern "C" fn(Handle, *mut c_void, usize) -> Status,
        pub get_version: unsafe extern "C" fn(Handle, *mut c_int) -> Status,
        pub sgemm: Sgemm,
        _lib: Library,
    }

    static CUBLAS: OnceLock<Result<Cublas, String>> = OnceLock::new();

    impl Cublas {
        /// cuBLAS, loaded from `$CUBLAS_LIB`, `libcublas.so.13` (the loader's path),
        /// `lib64/` of `$CUDA_PATH`, `$CUDA_HOME` and `/usr/local/cuda`; the error says
        /// what was tried.
        pub fn get() -> Result<&'static Cublas, String> {
            CUBLAS
                .get_or_init(Self::load)
                .as_ref()
                .map_err(|e| format!("cuBLAS {e}"))
        }

        fn load() -> Result<Self, String> {
            let mut cands: Vec<String> = std::env::var("CUBLAS_LIB").into_iter().collect();
            cands.push("libcublas.so.13".into());
            cands.extend(under_env_roots(
                &["CUDA_PATH", "CUDA_HOME"],
                "lib64/libcublas.so.13",
            ));
            cands.push("/usr/local/cuda/lib64/libcublas.so.13".into());
            // SAFETY: these name cuBLAS 13, whose initialisers set up its own globals.
            let (lib, path) = unsafe { open_first(&cands)? };
            // SAFETY: each type spells out the C signature of the symbol in cublas_api.h.
            unsafe {
                Ok(Self {
                    create: sym(&lib, &path, c"cublasCreate_v2")?,
                    destroy: sym(&lib, &path, c"cublasDestroy_v2")?,
                    set_stream: sym(&lib, &path, c"cublasSetStream_v2")?,
                    set_workspace: sym(&lib, &path, c"cublasSetWorkspace_v2")?,
                    get_version: sym(&lib, &path, c"cublasGetVersion_v2")?,
                    sgemm: sym(&lib, &path, c"cublasSgemm_v2")?,
                    path,
                    _lib: lib,
                })
            }
        }

        /// `Ok` for `CUBLAS_STATUS_SUCCESS`, else an error naming `what`.
        pub fn check(&self, rc: Status, what: &str) -> Result<(), String> {
            if rc == 0 {
                Ok(())
            } else {
                Err(format!("{what} failed: cublasStatus {rc}"))
            }
        }
    }
}
