//! `cudadrv::nvrtc` with the real NVRTC, on the CPU (NVRTC needs no GPU): the
//! repository's C++ reference kernels (`xtask/cpp/kernels.cuh`) compiled to a CUBIN and
//! to PTX, template kernels found by name expression, compile errors with their log,
//! refused options and name expressions, and the compile cache in memory and on disk.
//!
//! `cargo xtask test` installs the NVRTC wheel and points `CUDA_SYS_LIBNVRTC` at it, with
//! `CUDADRV_NVRTC_REQUIRED=1`; a plain `cargo test` on a machine without NVRTC reports
//! the tests skipped instead.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use cuda_workspace::nvrtc::{KERNELS, MAIN, TEMPLATE, reference};
use cudadrv::Error;
use cudadrv::nvrtc::{self, Output, Program, Target};

/// The cache and its counters are process-wide: one test at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// The lock, or `None` (and a line saying so) when NVRTC is absent and not required.
fn nvrtc_or_skip(test: &str) -> Option<MutexGuard<'static, ()>> {
    let guard = SERIAL.lock().unwrap_or_else(PoisonError::into_inner);
    match nvrtc::version() {
        Ok(_) => Some(guard),
        Err(e) if std::env::var_os("CUDADRV_NVRTC_REQUIRED").is_none() => {
            println!("{test}: skipped (no NVRTC: {e})");
            None
        }
        Err(e) => panic!("NVRTC is required here (CUDADRV_NVRTC_REQUIRED): {e}"),
    }
}

/// Whether `haystack` contains `needle`.
fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn nvrtc_reports_its_version_and_sm_90() {
    let Some(_g) = nvrtc_or_skip("nvrtc_reports_its_version_and_sm_90") else {
        return;
    };
    let (major, minor) = nvrtc::version().unwrap();
    println!("NVRTC {major}.{minor}");
    assert!(major >= 12, "NVRTC {major}.{minor}");
    let archs = nvrtc::supported_archs().unwrap();
    assert!(archs.contains(&90), "{archs:?}");
    assert!(archs.windows(2).all(|w| w[0] < w[1]), "{archs:?}");
}

/// The reference kernels compile to an sm_90 CUBIN (an ELF image naming each kernel)
/// and to PTX (an entry per kernel, the griddepcontrol instructions of the PDL ones).
#[test]
fn the_reference_kernels_compile_to_cubin_and_ptx() {
    let Some(_g) = nvrtc_or_skip("the_reference_kernels_compile_to_cubin_and_ptx") else {
        return;
    };
    let cubin = reference().compile(Target::cubin(90)).unwrap();
    assert_eq!(cubin.target().output(), Output::Cubin);
    assert_eq!(&cubin.code()[..4], b"\x7fELF");
    assert!(cubin.ptx().is_none());
    for name in [
        "empty_kernel",
        "chain_step",
        "pdl_primary",
        "pdl_secondary",
        "vector_add",
    ] {
        assert!(
            contains(cubin.code(), name.as_bytes()),
            "{name} missing from the CUBIN"
        );
    }
    let ptx = reference().compile(Target::ptx(90)).unwrap();
    let text = ptx.ptx().unwrap();
    assert!(
        text.contains(".target sm_90"),
        "{}",
        &text[..200.min(text.len())]
    );
    for entry in [
        ".entry chain_step(",
        ".entry pdl_primary(",
        ".entry vector_add(",
    ] {
        assert!(text.contains(entry), "{entry} missing");
    }
    assert!(text.contains("griddepcontrol.wait"));
    assert!(text.contains("griddepcontrol.launch_dependents"));
    // The architecture-specific variant.
    let a = reference()
        .compile(Target::cubin(90).arch_specific())
        .unwrap();
    assert_eq!(&a.code()[..4], b"\x7fELF");
    assert_ne!(a.code(), cubin.code());
}

/// Name expressions give the lowered names of template instances and namespaced
/// kernels, and those names are the PTX entries.
#[test]
fn name_expressions_give_lowered_names() {
    let Some(_g) = nvrtc_or_skip("name_expressions_give_lowered_names") else {
        return;
    };
    let c = Program::new("template.cu", TEMPLATE)
        .name_expression("scale<float>")
        .name_expression("scale<double>")
        .name_expression("&ns::fill")
        .compile(Target::ptx(90))
        .unwrap();
    let f = c.lowered_name("scale<float>").unwrap();
    let d = c.lowered_name("scale<double>").unwrap();
    let n = c.lowered_name("&ns::fill").unwrap();
    assert_eq!(f, "_Z5scaleIfEvPT_S0_j");
    assert_eq!(d, "_Z5scaleIdEvPT_S0_j");
    assert_eq!(n, "_ZN2ns4fillEPii");
    let text = c.ptx().unwrap();
    for name in [f, d, n] {
        assert!(
            text.contains(&format!(".entry {name}(")),
            "{name} is not an entry"
        );
    }
    assert_eq!(c.lowered_names().count(), 3);
}

/// A source that does not compile is an error with NVRTC's log; so are an unknown
/// option and a name expression that names nothing.
#[test]
fn errors_carry_the_compile_log() {
    let Some(_g) = nvrtc_or_skip("errors_carry_the_compile_log") else {
        return;
    };
    let e = Program::new(
        "broken.cu",
        "__global__ void k(int* p) { *p = undefined_name; }",
    )
    .compile(Target::cubin(90))
    .unwrap_err();
    let text = format!("{e}");
    println!("{text}");
    assert!(
        matches!(
            e,
            Error::Nvrtc {
                call: "nvrtcCompileProgram",
                code: 6,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(text.contains("NVRTC_ERROR_COMPILATION"), "{text}");
    assert!(text.contains("broken.cu"), "{text}");
    assert!(text.contains("undefined_name"), "{text}");

    let e = reference()
        .option("--no-such-option")
        .compile(Target::cubin(90))
        .unwrap_err();
    println!("{e}");
    assert!(matches!(e, Error::Nvrtc { code: 5, .. }), "{e:?}");

    let e = Program::new("template.cu", TEMPLATE)
        .name_expression("no_such_kernel<float>")
        .compile(Target::cubin(90))
        .unwrap_err();
    println!("{e}");
    assert!(matches!(e, Error::Nvrtc { .. }), "{e:?}");

    // Refused before NVRTC: the target chooses the architecture.
    assert!(matches!(
        reference().option("-arch=sm_80").compile(Target::cubin(90)),
        Err(Error::InvalidArgument(_))
    ));
}

/// The cache: the same compilation twice is one compile; a change of source, option or
/// target is another; a directory keeps results across the process's map, and a damaged
/// file there is compiled anew.
#[test]
fn the_cache_keys_every_input_and_survives_in_files() {
    let Some(_g) = nvrtc_or_skip("the_cache_keys_every_input_and_survives_in_files") else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("cudadrv-nvrtc-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    nvrtc::set_cache_dir(Some(dir.clone()));
    nvrtc::clear_cache();

    let t = Target::cubin(90);
    let first = reference().compile(t).unwrap();
    let second = reference().compile(t).unwrap();
    assert!(Arc::ptr_eq(&first, &second));
    let s = nvrtc::cache_stats();
    assert_eq!((s.compiles, s.memory_hits, s.disk_hits), (1, 1, 0));

    reference().define("UNUSED", "1").compile(t).unwrap();
    reference().compile(Target::ptx(90)).unwrap();
    Program::new("reference.cu", MAIN)
        .header("kernels.cuh", &format!("{KERNELS}\n// edited\n"))
        .compile(t)
        .unwrap();
    assert_eq!(nvrtc::cache_stats().compiles, 4);
    let files: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().collect();
    assert_eq!(files.len(), 4, "one file per compilation");

    // A new process's view: the map empty, the files there.
    nvrtc::clear_cache();
    let from_disk = reference().compile(t).unwrap();
    assert_eq!(from_disk.code(), first.code());
    assert_eq!(from_disk.log(), first.log());
    let s = nvrtc::cache_stats();
    assert_eq!((s.compiles, s.memory_hits, s.disk_hits), (0, 0, 1));

    // Every file damaged: compiled again, and the files rewritten.
    for f in std::fs::read_dir(&dir).unwrap().flatten() {
        let mut bytes = std::fs::read(f.path()).unwrap();
        let mid = bytes.len() / 2;
        bytes[mid] ^= 0xff;
        std::fs::write(f.path(), bytes).unwrap();
    }
    nvrtc::clear_cache();
    let rebuilt = reference().compile(t).unwrap();
    assert_eq!(rebuilt.code(), first.code());
    assert_eq!(nvrtc::cache_stats().compiles, 1);
    nvrtc::clear_cache();
    reference().compile(t).unwrap();
    assert_eq!(nvrtc::cache_stats().disk_hits, 1);

    nvrtc::set_cache_dir(None);
    let _ = std::fs::remove_dir_all(&dir);
}
