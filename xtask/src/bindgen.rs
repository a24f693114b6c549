//! `cargo xtask bindgen [--check] [--cuda <release>] [--crate <dir>]`: generates
//! cuda-sys/src/generated/ from the pinned CUDA headers ([`toolkit::HEADERS`], the newest
//! release), or from another 12.x/13.x release's headers for users who vendor
//! cudadrv-sys and pin their own.
//!
//! One bindgen pass over `cuda.h`, `cudaTypedefs.h` and `cuda_runtime_api.h` gives the
//! types and the function prototypes. The prototypes are not emitted as an `extern`
//! block: they become data (one line per function) for the hand-written table macros in
//! cuda-sys, together with what the loader needs to know about each function:
//! - the documented name (`cuMemAlloc`) of the versioned symbol (`cuMemAlloc_v2`), from
//!   cuda.h's `#define cuX cuX_vN` lines;
//! - the ABI version to ask `cuGetProcAddress_v2` for, from the `PFN_<name>_v<version>`
//!   typedefs of cudaTypedefs.h whose signature matches the prototype (and the same for
//!   the `_ptds`/`_ptsz` typedefs, for per-thread-default-stream loading);
//! - for libcudart, the `_ptds`/`_ptsz` symbol of each function that has one.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use quote::ToTokens;
use syn::visit_mut::VisitMut;

use crate::{R, step, toolkit};

/// What `cargo xtask bindgen` was asked for.
#[derive(Default)]
pub struct Args {
    /// Compare with the committed files instead of writing.
    pub check: bool,
    /// A release (`12.4`, `13.1.80`) other than the pinned one.
    pub cuda: Option<String>,
    /// The cudadrv-sys crate directory to regenerate (default: the workspace's cuda-sys).
    pub krate: Option<PathBuf>,
    /// Exact header wheels (instead of resolving `cuda` on PyPI).
    pub wheels: Option<toolkit::HeaderWheels>,
}

impl Args {
    /// Parses `--check`, `--cuda <release>`, `--crate <dir>`.
    pub fn parse(args: &[String]) -> R<Args> {
        let mut out = Args::default();
        let mut it = args.iter();
        while let Some(a) = it.next() {
            match a.as_str() {
                "--check" => out.check = true,
                "--cuda" => out.cuda = Some(it.next().ok_or("--cuda needs a release")?.clone()),
                "--crate" => {
                    out.krate = Some(PathBuf::from(it.next().ok_or("--crate needs a directory")?))
                }
                other => return Err(format!("bindgen: unknown argument {other}").into()),
            }
        }
        Ok(out)
    }
}

/// Runs the generator; with `check`, compares with the committed files instead. With a
/// release, fetches that release's header wheels, regenerates the crate's
/// `src/generated/` and sets its version's build metadata to `+cuda-<major.minor>`.
pub fn run(root: &Path, args: &Args) -> R {
    toolkit::ensure_libclang()?;
    let wheels = match (&args.wheels, &args.cuda) {
        (Some(w), _) => w.clone(),
        (None, Some(v)) => toolkit::header_wheels(v)?,
        (None, None) => toolkit::HEADERS,
    };
    let includes = toolkit::headers(root, &wheels)?;
    let krate = args.krate.clone().unwrap_or_else(|| root.join("cuda-sys"));
    step(&format!(
        "bindgen over the CUDA {} headers ({}, {}) for {}",
        wheels.release,
        wheels.runtime,
        wheels.crt,
        krate.display()
    ));
    let mut files = generate(&includes, &wheels.release)?;
    let nccl = crate::library_bindgen::headers(root)?;
    files.extend(crate::library_bindgen::generate(&nccl)?);
    let nvrtc = crate::library_bindgen::nvrtc_headers(root)?;
    files.extend(crate::library_bindgen::generate_nvrtc(&nvrtc)?);
    toolkit::write_or_check(
        &krate.join("src/generated"),
        &files,
        args.check,
        "generated bindings",
        "cargo xtask bindgen",
    )?;
    set_build_metadata(&krate.join("Cargo.toml"), wheels.major_minor(), args.check)
}

/// The 12.x header set CI regenerates a copy of cudadrv-sys from (exact wheels: no PyPI
/// index query in CI).
pub const CI_CUDA12: toolkit::HeaderWheels = toolkit::HeaderWheels {
    release: std::borrow::Cow::Borrowed("12.4.127"),
    runtime: std::borrow::Cow::Borrowed("nvidia-cuda-runtime-cu12==12.4.127"),
    crt: std::borrow::Cow::Borrowed("nvidia-cuda-nvcc-cu12==12.4.131"),
};

/// What a user who vendors cudadrv-sys and pins CUDA 12.x headers does: a copy of the
/// crate in `target/cudadrv-sys-<release>/` (with a workspace manifest of its own that
/// carries the inherited fields), regenerated from [`CI_CUDA12`]'s headers, then its unit
/// tests. cudadrv is not part of it: it stays on the committed headers.
pub fn check_regenerated_release(root: &Path) -> R {
    let wheels = CI_CUDA12;
    let dir = root.join(format!("target/cudadrv-sys-{}", wheels.release));
    let krate = dir.join("cudadrv-sys");
    if krate.exists() {
        std::fs::remove_dir_all(&krate)?;
    }
    copy_dir(&root.join("cuda-sys"), &krate)?;
    let manifest = std::fs::read_to_string(root.join("Cargo.toml"))?;
    let section = |name: &str| -> String {
        let start = manifest
            .find(&format!("[{name}]"))
            .unwrap_or(manifest.len());
        let rest = &manifest[start..];
        let end = rest[1..].find("\n[").map_or(rest.len(), |e| e + 2);
        rest[..end].to_string()
    };
    std::fs::write(
        dir.join("Cargo.toml"),
        format!(
            "# Written by cargo xtask test: a vendored copy of cudadrv-sys, regenerated.\n\
             [workspace]\nmembers = [\"cudadrv-sys\"]\nresolver = \"3\"\n\n{}\n{}",
            section("workspace.package"),
            section("workspace.dependencies")
                .lines()
                .filter(|l| !l.contains("path = "))
                .collect::<Vec<_>>()
                .join("\n")
        ),
    )?;
    run(
        root,
        &Args {
            wheels: Some(wheels.clone()),
            krate: Some(krate.clone()),
            ..Default::default()
        },
    )?;
    crate::run(
        crate::cargo(&dir)
            .args(["test", "-q", "-p", "cudadrv-sys", "--lib", "--target-dir"])
            .arg(root.join("target/cudadrv-sys-regen")),
    )
}

fn copy_dir(from: &Path, to: &Path) -> R {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let path = entry.path();
        if entry.file_type()?.is_dir() {
            copy_dir(&path, &to.join(entry.file_name()))?;
        } else {
            std::fs::copy(&path, to.join(entry.file_name()))?;
        }
    }
    Ok(())
}

/// Sets (or checks) the `+cuda-<major.minor>` build metadata of the manifest's version.
fn set_build_metadata(manifest: &Path, major_minor: &str, check: bool) -> R {
    let text =
        std::fs::read_to_string(manifest).map_err(|e| format!("{}: {e}", manifest.display()))?;
    let mut found = false;
    let mut out = String::new();
    for line in text.lines() {
        match line.strip_prefix("version = \"").filter(|_| !found) {
            Some(rest) => {
                found = true;
                let base = rest.trim_end_matches('"').split('+').next().unwrap_or("");
                out.push_str(&format!("version = \"{base}+cuda-{major_minor}\""));
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    if !found {
        return Err(format!("{}: no version line", manifest.display()).into());
    }
    if out == text {
        return Ok(());
    }
    if check {
        return Err(format!(
            "{}: the version's build metadata is not +cuda-{major_minor}; run `cargo xtask bindgen`",
            manifest.display()
        )
        .into());
    }
    std::fs::write(manifest, out)?;
    println!("  set {} to +cuda-{major_minor}", manifest.display());
    Ok(())
}

/// One C function as the header declares it.
pub(crate) struct Proto {
    pub(crate) symbol: String,
    pub(crate) args: Vec<(String, String)>,
    pub(crate) ret: String,
}

/// Generates every file of cuda-sys/src/generated, by name, from the headers in
/// `includes` (the first holds `cuda.h`) of CUDA `release` (`13.5.37`).
pub fn generate(includes: &[PathBuf], release: &str) -> R<Vec<(String, String)>> {
    let header = format!(
        "// Generated by `cargo xtask bindgen` from the CUDA {release} headers; do not edit.\n"
    );
    let header = header.as_str();
    let include = &includes[0];
    let mut file = bindings(includes, Abi::Unix)?;
    let mut windows = bindings(includes, Abi::Windows)?;

    let driver_docs = result_docs(&file, "cudaError_enum");
    let runtime_docs = result_docs(&file, "cudaError");
    StripDocs.visit_file_mut(&mut file);
    StripDocs.visit_file_mut(&mut windows);
    let split = merge_windows_layouts(&mut file, &windows)?;

    let mut protos = Vec::new();
    file.items.retain(|item| match item {
        syn::Item::ForeignMod(fm) => {
            for fi in &fm.items {
                if let syn::ForeignItem::Fn(f) = fi {
                    protos.push(proto(&f.sig));
                }
            }
            false
        }
        _ => true,
    });
    let pfns = pfn_typedefs(&file);

    let cuda_h = std::fs::read_to_string(include.join("cuda.h"))?;
    let rt_h = std::fs::read_to_string(include.join("cuda_runtime_api.h"))?;
    let version = define_value(&cuda_h, "CUDA_VERSION").ok_or("CUDA_VERSION not found")?;
    let mut parts = release.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let expected = parts.next().unwrap_or(0) * 1000 + parts.next().unwrap_or(0) * 10;
    if version != expected.to_string() {
        return Err(format!(
            "expected the CUDA {release} headers (CUDA_VERSION {expected}), found CUDA_VERSION {version}"
        )
        .into());
    }

    println!(
        "  Windows (x86_64-pc-windows-msvc): same declarations; layout tests per ABI for {}",
        if split.is_empty() {
            "none".to_string()
        } else {
            split.join(", ")
        }
    );
    // The layout tests go to a file of their own, which cudadrv-sys compiles where CI has
    // not already evaluated them (see `mod layout` in lib.rs): each is a constant
    // evaluation per type and field, a second of every user's build.
    let (layout_items, items): (Vec<syn::Item>, Vec<syn::Item>) = file
        .items
        .drain(..)
        .partition(|item| layout_test_of(item).is_some());
    file.items = items;
    let layout_file = syn::File {
        shebang: None,
        attrs: Vec::new(),
        items: layout_items,
    };
    let layout = format!(
        "{header}//\n// bindgen's layout tests: the size and alignment of every type and the offset of\n\
         // every field, as constant assertions (per ABI where Windows differs).\n\n{}",
        prettyplease::unparse(&layout_file)
    );
    let types = format!("{header}\n{}", prettyplease::unparse(&file));
    let pinned = release == toolkit::HEADERS.release;
    let (driver, pfn_check) = driver_table(&protos, &pfns, &cuda_h, header, pinned)?;
    let runtime = runtime_table(&protos, &rt_h, header);
    let results = format!(
        "{header}\n{}\n{}",
        result_fns("cudaError_enum", "CUresult", &driver_docs),
        result_fns("cudaError", "cudaError_t", &runtime_docs)
    );
    Ok(vec![
        ("types.rs".into(), types),
        ("layout.rs".into(), layout),
        ("driver_fns.rs".into(), driver),
        ("pfn_check.rs".into(), pfn_check),
        ("runtime_fns.rs".into(), runtime),
        ("results.rs".into(), results),
    ])
}

/// The C ABI a bindgen pass lays the types out for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Abi {
    /// x86_64/aarch64 Linux (LP64: `long` is 64-bit), the host's target.
    Unix,
    /// `x86_64-pc-windows-msvc` (LLP64: `long` is 32-bit, C enums are `int`).
    Windows,
}

/// One bindgen pass over the headers, for `abi`.
fn bindings(includes: &[PathBuf], abi: Abi) -> R<syn::File> {
    let wrapper = "#include <cuda.h>\n#include <cudaTypedefs.h>\n#include <cuda_runtime_api.h>\n";
    let mut args: Vec<String> = includes
        .iter()
        .map(|i| format!("-I{}", i.display()))
        .collect();
    if abi == Abi::Windows {
        args.push("--target=x86_64-pc-windows-msvc".into());
        args.push(format!("-I{}", msvc_stub_headers()?.display()));
    }
    let bindings = bindgen::Builder::default()
        .header_contents("cuda_sys_wrapper.h", wrapper)
        .clang_args(args)
        .rust_target(bindgen::RustTarget::stable(85, 0).map_err(|e| format!("{e:?}"))?)
        .rust_edition(bindgen::RustEdition::Edition2024)
        .use_core()
        .ctypes_prefix("::core::ffi")
        .allowlist_function("cu.*")
        .allowlist_type("(CU|cu|PFN_cu|cuda|CUDA|dim3).*")
        .allowlist_var("(CU|cu|CUDA|cuda).*")
        .default_enum_style(bindgen::EnumVariation::NewType {
            is_bitfield: false,
            is_global: false,
        })
        .prepend_enum_name(false)
        .must_use_type("cudaError_enum")
        .must_use_type("cudaError")
        // Result codes print their names (hand-written `Debug` in cuda-sys/src/result.rs).
        .no_debug("cudaError_enum")
        .no_debug("cudaError")
        .derive_default(true)
        .derive_eq(true)
        .derive_hash(true)
        .layout_tests(true)
        .generate_comments(true)
        .merge_extern_blocks(true)
        .generate()
        .map_err(|e| format!("bindgen failed: {e}"))?;
    Ok(syn::parse_str(&bindings.to_string())?)
}

/// Stand-ins for the C headers the CUDA headers include, written for the Windows pass:
/// this machine has no MSVC SDK, and libclang finds no headers of its own for that
/// target. The CUDA headers use only `size_t` (LLP64: 64-bit) from them.
fn msvc_stub_headers() -> R<PathBuf> {
    let dir = std::env::temp_dir().join("cudadrv-sys-msvc-stub-headers");
    std::fs::create_dir_all(&dir)?;
    let stub = "/* Stand-in for the MSVC C library header (cargo xtask bindgen). */\n";
    let stddef = "/* Stand-in for the MSVC header (cargo xtask bindgen). */\n\
                  #pragma once\n\
                  typedef unsigned __int64 size_t;\n\
                  typedef __int64 ptrdiff_t;\n\
                  #define NULL ((void *)0)\n";
    for (name, text) in [
        ("stdlib.h", stub),
        ("ctype.h", stub),
        ("limits.h", stub),
        ("stdint.h", stub),
        ("stddef.h", stddef),
    ] {
        std::fs::write(dir.join(name), text)?;
    }
    Ok(dir)
}

/// The type a bindgen layout test (`const _: () = { ["Size of X"][..]; .. };`) checks.
fn layout_test_of(item: &syn::Item) -> Option<String> {
    let syn::Item::Const(c) = item else {
        return None;
    };
    if c.ident != "_" {
        return None;
    }
    let text = tokens(&c.expr);
    let start = text.find("\"Size of ")? + "\"Size of ".len();
    let len = text[start..].find('"')?;
    Some(text[start..start + len].to_string())
}

/// A key for the other items, to pair the two passes' items.
fn item_key(item: &syn::Item) -> String {
    match item {
        syn::Item::Struct(s) => format!("struct {}", s.ident),
        syn::Item::Union(u) => format!("union {}", u.ident),
        syn::Item::Type(t) => format!("type {}", t.ident),
        syn::Item::Const(c) => format!("const {}", c.ident),
        syn::Item::Impl(i) => format!(
            "impl {} for {}",
            i.trait_.as_ref().map_or(String::new(), |t| tokens(&t.1)),
            tokens(&i.self_ty)
        ),
        other => tokens(other),
    }
}

/// Makes the Unix pass's layout tests check the Windows layouts too: a type laid out
/// differently there (`cudaPointerAttributes`, whose `long` fields are 32-bit on
/// Windows) gets each ABI's test, under `cfg(windows)` and `cfg(not(windows))`.
///
/// The declarations stay the Unix pass's, one set for both: they spell the C types
/// (`c_long`), which Rust lays out per target. Generation fails where a Windows
/// declaration differs other than in the two ways that change no layout or call:
/// - C enums are `int` on MSVC and `unsigned int` elsewhere: the enum newtypes keep
///   `c_uint` (same size and alignment; every constant has the same value in both);
/// - `cuuint32_t` / `cuuint64_t` are `unsigned __int32` / `unsigned __int64` on MSVC,
///   which bindgen spells `c_uint` / `c_ulonglong` rather than `u32` / `u64`.
fn merge_windows_layouts(unix: &mut syn::File, windows: &syn::File) -> R<Vec<String>> {
    let mut win_tests: HashMap<String, String> = HashMap::new();
    let mut win_items: HashMap<String, String> = HashMap::new();
    for item in &windows.items {
        match layout_test_of(item) {
            Some(ty) => win_tests.insert(ty, tokens(item)),
            None => win_items.insert(item_key(item), tokens(item)),
        };
    }
    let same_abi = |unix: &str, windows: &str| {
        let enum_sign = |t: &str| {
            t.replace(
                "(pub :: core :: ffi :: c_int) ;",
                "(pub :: core :: ffi :: c_uint) ;",
            )
        };
        let windows = enum_sign(windows)
            .replace("cuuint32_t = :: core :: ffi :: c_uint", "cuuint32_t = u32")
            .replace(
                "cuuint64_t = :: core :: ffi :: c_ulonglong",
                "cuuint64_t = u64",
            );
        enum_sign(unix) == windows
    };
    let mut differ = Vec::new();
    for item in unix.items.iter().filter(|i| layout_test_of(i).is_none()) {
        let key = item_key(item);
        match win_items.remove(&key) {
            Some(w) if same_abi(&tokens(item), &w) => {}
            Some(_) => differ.push(format!("{key} (declared otherwise)")),
            None => differ.push(format!("{key} (missing)")),
        }
    }
    differ.extend(win_items.into_keys().map(|k| format!("{k} (Windows only)")));
    let mut out = Vec::with_capacity(unix.items.len());
    let mut split = Vec::new();
    for item in unix.items.drain(..) {
        let Some(ty) = layout_test_of(&item) else {
            out.push(item);
            continue;
        };
        match win_tests.remove(&ty) {
            Some(w) if w == tokens(&item) => out.push(item),
            Some(w) => {
                let mut w: syn::Item = syn::parse_str(&w)?;
                let mut u = item;
                if let (syn::Item::Const(u), syn::Item::Const(w)) = (&mut u, &mut w) {
                    u.attrs.push(syn::parse_quote!(#[cfg(not(windows))]));
                    w.attrs.push(syn::parse_quote!(#[cfg(windows)]));
                }
                out.push(u);
                out.push(w);
                split.push(ty);
            }
            None => differ.push(format!("layout test of {ty} (missing)")),
        }
    }
    differ.extend(
        win_tests
            .into_keys()
            .map(|k| format!("layout test of {k} (Windows only)")),
    );
    if !differ.is_empty() {
        differ.sort();
        return Err(format!(
            "the Windows (x86_64-pc-windows-msvc) bindings differ from the Unix ones beyond \
             layout: {}",
            differ.join(", ")
        )
        .into());
    }
    unix.items = out;
    Ok(split)
}

/// Removes bindgen's copies of the header comments (megabytes of doxygen markup that
/// rustdoc would misread); the C documentation stays the reference.
struct StripDocs;
impl VisitMut for StripDocs {
    fn visit_attributes_mut(&mut self, attrs: &mut Vec<syn::Attribute>) {
        attrs.retain(|a| !a.path().is_ident("doc"));
    }
    fn visit_item_mut(&mut self, i: &mut syn::Item) {
        syn::visit_mut::visit_item_mut(self, i);
    }
}

fn tokens(t: &impl ToTokens) -> String {
    t.to_token_stream().to_string()
}

pub(crate) fn proto(sig: &syn::Signature) -> Proto {
    let args = sig
        .inputs
        .iter()
        .filter_map(|a| match a {
            syn::FnArg::Typed(pt) => Some((tokens(&pt.pat), tokens(&pt.ty))),
            syn::FnArg::Receiver(_) => None,
        })
        .collect();
    let ret = match &sig.output {
        syn::ReturnType::Default => "()".to_string(),
        syn::ReturnType::Type(_, t) => tokens(t),
    };
    Proto {
        symbol: sig.ident.to_string(),
        args,
        ret,
    }
}

/// One `PFN_<name>_v<version>[_ptds|_ptsz]` typedef.
struct Pfn {
    version: u32,
    per_thread: bool,
    /// Normalized signature text, to compare with a prototype's.
    sig: String,
    /// The function pointer type's arguments (name, type) and return type, as written.
    args: Vec<(String, String)>,
    ret: String,
}

/// The PFN typedefs of each function name.
type Pfns = HashMap<String, Vec<Pfn>>;

/// Older ABIs that cuda-core falls back to on drivers without the 13.0 one, each a
/// table entry `<name>_v<abi>` asked of `cuGetProcAddress` as `<name>` at that ABI,
/// with the signature of `PFN_<name>_v<abi>`: (name, ABI, exported symbol). The symbol
/// is what the CUDA 12.x `cuda.h` maps the documented name to while that ABI was the
/// newest; `cargo xtask driver-abi` checks it against those headers.
pub const OLDER_ABIS: &[(&str, u32, &str)] = &[
    ("cuCtxCreate", 3020, "cuCtxCreate_v2"),
    ("cuEventElapsedTime", 2000, "cuEventElapsedTime"),
    ("cuGraphAddDependencies", 10000, "cuGraphAddDependencies"),
    ("cuGraphAddNode", 12020, "cuGraphAddNode"),
    ("cuGraphGetEdges", 10000, "cuGraphGetEdges"),
    (
        "cuGraphNodeGetDependencies",
        10000,
        "cuGraphNodeGetDependencies",
    ),
    (
        "cuGraphNodeGetDependentNodes",
        10000,
        "cuGraphNodeGetDependentNodes",
    ),
    (
        "cuGraphRemoveDependencies",
        10000,
        "cuGraphRemoveDependencies",
    ),
    ("cuStreamGetCaptureInfo", 11030, "cuStreamGetCaptureInfo_v2"),
    (
        "cuStreamUpdateCaptureDependencies",
        11030,
        "cuStreamUpdateCaptureDependencies",
    ),
];

fn pfn_typedefs(file: &syn::File) -> Pfns {
    let mut out: Pfns = HashMap::new();
    for item in &file.items {
        let syn::Item::Type(t) = item else { continue };
        let name = t.ident.to_string();
        let Some(rest) = name.strip_prefix("PFN_") else {
            continue;
        };
        let (rest, ptds) = match rest
            .strip_suffix("_ptds")
            .or_else(|| rest.strip_suffix("_ptsz"))
        {
            Some(r) => (r, true),
            None => (rest, false),
        };
        let Some((base, ver)) = rest.rsplit_once("_v") else {
            continue;
        };
        let Ok(ver) = ver.parse::<u32>() else {
            continue;
        };
        // Option<unsafe extern "C" fn(..) -> R>
        if let Some(pfn) = fn_type(&t.ty, ver, ptds) {
            out.entry(base.to_string()).or_default().push(pfn);
        }
    }
    out
}

fn fn_type(ty: &syn::Type, version: u32, per_thread: bool) -> Option<Pfn> {
    let syn::Type::Path(p) = ty else { return None };
    let seg = p.path.segments.last()?;
    let syn::PathArguments::AngleBracketed(ab) = &seg.arguments else {
        return None;
    };
    let syn::GenericArgument::Type(syn::Type::BareFn(f)) = ab.args.first()? else {
        return None;
    };
    let args: Vec<(String, String)> = f
        .inputs
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let name = a
                .name
                .as_ref()
                .map_or_else(|| format!("arg{i}"), |(n, _)| n.to_string());
            (name, tokens(&a.ty))
        })
        .collect();
    let ret = match &f.output {
        syn::ReturnType::Default => "()".to_string(),
        syn::ReturnType::Type(_, t) => tokens(t),
    };
    let normalized: Vec<String> = args.iter().map(|(_, t)| normalize(t)).collect();
    Some(Pfn {
        version,
        per_thread,
        sig: format!("({}) -> {}", normalized.join(", "), normalize(&ret)),
        args,
        ret,
    })
}

/// Signature text with versioned typedef names (`CUdevice_v1`) folded to their base.
fn normalize(s: &str) -> String {
    s.split(' ')
        .map(|w| match w.rsplit_once("_v") {
            Some((base, v)) if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) => base,
            _ => w,
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Token text as a person writes it (`*mut ::core::ffi::c_void`).
pub(crate) fn tidy(t: &str) -> String {
    t.replace(" :: ", "::")
        .replace(":: ", "::")
        .replace("* mut ", "*mut ")
        .replace("* const ", "*const ")
}

fn proto_signature(p: &Proto) -> String {
    let args: Vec<String> = p.args.iter().map(|(_, t)| normalize(t)).collect();
    format!("({}) -> {}", args.join(", "), normalize(&p.ret))
}

fn define_value<'a>(header: &'a str, name: &str) -> Option<&'a str> {
    header.lines().find_map(|l| {
        let mut w = l.split_whitespace();
        (w.next() == Some("#define") && w.next() == Some(name))
            .then(|| w.next())
            .flatten()
    })
}

/// `#define cuX cuX_vN` and `#define cuX __CUDA_API_PTDS(cuX_vN)`: symbol -> documented name.
fn documented_names(header: &str, prefix: &str) -> HashMap<String, String> {
    let mut out = HashMap::new();
    for line in header.lines() {
        let mut w = line.split_whitespace();
        if w.next() != Some("#define") {
            continue;
        }
        let (Some(name), Some(value)) = (w.next(), w.next()) else {
            continue;
        };
        if !name.starts_with(prefix) || name.contains('(') {
            continue;
        }
        let target = value
            .trim_start_matches("__CUDA_API_PTDS(")
            .trim_start_matches("__CUDA_API_PTSZ(")
            .trim_end_matches(')');
        if target != name && target.starts_with(name) {
            out.insert(target.to_string(), name.to_string());
        }
    }
    out
}

/// The driver list, and a compile-time check that each entry's signature is that of
/// the `PFN_<lookup>_v<version>` typedef the loader asks `cuGetProcAddress` for.
fn driver_table(
    protos: &[Proto],
    pfns: &Pfns,
    cuda_h: &str,
    header: &str,
    release_is_pinned: bool,
) -> R<(String, String)> {
    let docs = documented_names(cuda_h, "cu");
    let mut lines = BTreeMap::new();
    let mut checks = BTreeMap::new();
    let mut unversioned = Vec::new();
    let mut driver: Vec<&Proto> = protos
        .iter()
        .filter(|p| p.symbol.starts_with("cu") && !p.symbol.starts_with("cuda"))
        .collect();
    // Newest symbol first (`cuGraphAddNode_v3` before `cuGraphAddNode_v2` before
    // `cuGraphAddNode`): where two symbols of one function have the same C signature
    // (13.4's `cuGraphAddNode_v3` and `_v2`), the newer symbol takes the newer ABI and
    // each older one the newest ABI below it.
    let suffix = |s: &str| match s.rsplit_once("_v") {
        Some((_, v)) if !v.is_empty() && v.bytes().all(|c| c.is_ascii_digit()) => {
            v.parse::<u32>().unwrap_or(1)
        }
        _ => 1,
    };
    driver.sort_by_key(|p| std::cmp::Reverse(suffix(&p.symbol)));
    // Per lookup name: the ABI the newer symbol took (default-stream, per-thread).
    let mut ceiling: HashMap<String, (u32, u32)> = HashMap::new();
    for p in driver {
        let name = docs
            .get(&p.symbol)
            .cloned()
            .unwrap_or_else(|| p.symbol.clone());
        // cuGetProcAddress takes the unversioned name (`cuStreamGetCtx` for
        // `cuStreamGetCtx_v2`); `cuGraphInstantiate` is `cuGraphInstantiateWithFlags`.
        let sig = proto_signature(p);
        let strip = |s: &str| match s.rsplit_once("_v") {
            Some((b, v)) if !v.is_empty() && v.bytes().all(|c| c.is_ascii_digit()) => b.to_string(),
            _ => s.to_string(),
        };
        let candidates = [
            name.clone(),
            p.symbol.clone(),
            strip(&name),
            strip(&p.symbol),
        ];
        let matches = |base: &str, ptds: bool, below: u32| -> u32 {
            pfns.get(base)
                .into_iter()
                .flatten()
                .filter(|p| p.per_thread == ptds && p.sig == sig && p.version < below)
                .map(|p| p.version)
                .max()
                .unwrap_or(0)
        };
        let lookup = candidates
            .iter()
            .find(|c| matches(c, false, u32::MAX) != 0)
            .cloned()
            .unwrap_or_else(|| strip(&p.symbol));
        let (below, below_ptds) = ceiling
            .get(&lookup)
            .copied()
            .unwrap_or((u32::MAX, u32::MAX));
        let version = matches(&lookup, false, below);
        let ptds = matches(&lookup, true, below_ptds);
        if version != 0 {
            ceiling.insert(
                lookup.clone(),
                (version, if ptds != 0 { ptds } else { below_ptds }),
            );
        }
        if version == 0 {
            unversioned.push(name.clone());
        } else {
            checks.insert(
                name.clone(),
                format!("    let _: PFN_{lookup}_v{version} = api.{name}().ok();"),
            );
        }
        let args: Vec<String> = p
            .args
            .iter()
            .map(|(n, t)| format!("{n}: {}", tidy(t)))
            .collect();
        let mut line = String::new();
        write!(
            line,
            "    {name} = {sym} @ \"{lookup}\" [{version}, {ptds}] ({args}) -> {ret};",
            sym = p.symbol,
            args = args.join(", "),
            ret = tidy(&p.ret)
        )?;
        lines.insert(name, line);
    }
    for &(name, abi, symbol) in OLDER_ABIS {
        let of = |ptds: bool| {
            pfns.get(name)
                .into_iter()
                .flatten()
                .find(|p| p.version == abi && p.per_thread == ptds)
        };
        // Headers older than the ABI's own release (a 12.0 set for cuGraphAddNode's
        // 12.2 ABI) have nothing to fall back to: the entry is left out. The committed
        // headers must declare every one (cudadrv calls them).
        let Some(pfn) = of(false) else {
            if release_is_pinned {
                return Err(format!("no PFN_{name}_v{abi} in cudaTypedefs.h").into());
            }
            continue;
        };
        let ptds = of(true).map_or(0, |p| p.version);
        let entry = format!("{name}_v{abi}");
        if lines.contains_key(&entry) {
            return Err(format!("older ABI entry {entry} clashes with a function name").into());
        }
        checks.insert(
            entry.clone(),
            format!("    let _: PFN_{name}_v{abi} = api.{entry}().ok();"),
        );
        let args: Vec<String> = pfn
            .args
            .iter()
            .map(|(n, t)| format!("{n}: {}", tidy(t)))
            .collect();
        let mut line = String::new();
        write!(
            line,
            "    {entry} = {symbol} @ \"{name}\" [{abi}, {ptds}] ({args}) -> {ret};",
            args = args.join(", "),
            ret = tidy(&pfn.ret)
        )?;
        lines.insert(entry, line);
    }
    println!(
        "  driver: {} functions ({} older ABIs), {} without a PFN typedef (asked for at CUDA_VERSION)",
        lines.len(),
        OLDER_ABIS.len(),
        unversioned.len()
    );
    let check_body: Vec<&str> = checks.values().map(String::as_str).collect();
    let check = format!(
        "{header}//\n// Compiles only if every driver entry has the signature of the PFN typedef whose\n// version the loader asks for.\n\nuse crate::*;\n\n#[allow(dead_code)]\nfn signatures_match_pfn_typedefs(api: &DriverApi) {{\n{}\n}}\n",
        check_body.join("\n")
    );
    let body: Vec<&str> = lines.values().map(String::as_str).collect();
    Ok((
        format!(
            "{header}//\n// name = symbol @ \"cuGetProcAddress name\" [ABI version, per-thread ABI version] (args) -> ret;\n// A version of 0 means cudaTypedefs.h has no matching PFN typedef. `<name>_v<ABI>`\n// entries are older ABIs of `<name>` (OLDER_ABIS in xtask/src/bindgen.rs), with the\n// signature of `PFN_<name>_v<ABI>`.\n\nuse crate::*;\n\ncrate::table::driver_table! {{\n{}\n}}\n",
            body.join("\n")
        ),
        check,
    ))
}

fn runtime_table(protos: &[Proto], rt_h: &str, header: &str) -> String {
    // `#define cudaX __CUDART_API_PTDS(cudaX)` -> cudaX_ptds (and PTSZ -> _ptsz).
    let mut per_thread = HashMap::new();
    for line in rt_h.lines() {
        let mut w = line.split_whitespace();
        if w.next() != Some("#define") {
            continue;
        }
        let (Some(name), Some(value)) = (w.next(), w.next()) else {
            continue;
        };
        if let Some(inner) = value.strip_prefix("__CUDART_API_PTDS(") {
            per_thread.insert(
                inner.trim_end_matches(')').to_string(),
                format!("{name}_ptds"),
            );
        } else if let Some(inner) = value.strip_prefix("__CUDART_API_PTSZ(") {
            per_thread.insert(
                inner.trim_end_matches(')').to_string(),
                format!("{name}_ptsz"),
            );
        }
    }
    let mut lines = BTreeMap::new();
    for p in protos.iter().filter(|p| p.symbol.starts_with("cuda")) {
        let args: Vec<String> = p
            .args
            .iter()
            .map(|(n, t)| format!("{n}: {}", tidy(t)))
            .collect();
        let pt = per_thread
            .get(&p.symbol)
            .map_or("\"\"".to_string(), |s| format!("\"{s}\""));
        lines.insert(
            p.symbol.clone(),
            format!(
                "    {0} = {0} @ {pt} ({1}) -> {2};",
                p.symbol,
                args.join(", "),
                tidy(&p.ret)
            ),
        );
    }
    println!(
        "  runtime: {} functions, {} with per-thread variants",
        lines.len(),
        per_thread.len()
    );
    let body: Vec<&str> = lines.values().map(String::as_str).collect();
    format!(
        "{header}//\n// name = symbol @ \"per-thread-default-stream symbol or empty\" (args) -> ret;\n\nuse crate::*;\n\ncrate::table::runtime_table! {{\n{}\n}}\n",
        body.join("\n")
    )
}

/// Name and first documentation sentence of each constant of a result newtype.
fn result_docs(file: &syn::File, ty: &str) -> Vec<(String, i64, String)> {
    let mut out = Vec::new();
    for item in &file.items {
        let syn::Item::Impl(imp) = item else { continue };
        if tokens(&imp.self_ty) != ty {
            continue;
        }
        for ii in &imp.items {
            let syn::ImplItem::Const(c) = ii else {
                continue;
            };
            let value = match &c.expr {
                syn::Expr::Call(call) => call.args.first().map(tokens),
                _ => None,
            };
            let Some(value) = value.and_then(|v| v.replace(' ', "").parse::<i64>().ok()) else {
                continue;
            };
            let doc: Vec<String> = c
                .attrs
                .iter()
                .filter(|a| a.path().is_ident("doc"))
                .filter_map(|a| match &a.meta {
                    syn::Meta::NameValue(nv) => match &nv.value {
                        syn::Expr::Lit(syn::ExprLit {
                            lit: syn::Lit::Str(s),
                            ..
                        }) => Some(s.value()),
                        _ => None,
                    },
                    _ => None,
                })
                .collect();
            out.push((c.ident.to_string(), value, clean_doc(&doc.join(" "))));
        }
    }
    out
}

/// Doxygen text -> one plain line (no `::name` cross references, no markup).
fn clean_doc(s: &str) -> String {
    let mut text = s.split_whitespace().collect::<Vec<_>>().join(" ");
    for (from, to) in [
        ("\\p ", ""),
        ("\\e ", ""),
        ("\\c ", ""),
        ("::", ""),
        ("\\ref ", ""),
    ] {
        text = text.replace(from, to);
    }
    if let Some(i) = text.find(" \\deprecated") {
        text.truncate(i);
    }
    text.trim().to_string()
}

fn result_fns(ty: &str, alias: &str, docs: &[(String, i64, String)]) -> String {
    let mut seen = std::collections::HashSet::new();
    let mut names = String::new();
    let mut descs = String::new();
    for (name, value, doc) in docs {
        if !seen.insert(*value) {
            continue;
        }
        let _ = writeln!(names, "            {value} => Some(\"{name}\"),");
        let _ = writeln!(descs, "            {value} => Some({doc:?}),");
    }
    format!(
        "impl crate::{ty} {{
    /// The C name of this code (`{alias}`), or `None` for a code these headers do not know.
    pub const fn name(self) -> Option<&'static str> {{
        match self.0 {{
{names}            _ => None,
        }}
    }}

    /// The headers' description of this code, without asking the driver.
    pub const fn description(self) -> Option<&'static str> {{
        match self.0 {{
{descs}            _ => None,
        }}
    }}
}}
"
    )
}
