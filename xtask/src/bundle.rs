//! `cargo xtask bundle [DIR]`: what a GPU host with no Rust toolchain needs to run the
//! hardware tests: release test binaries (loaded mode, plus `hw_sys_linked` linked
//! against a stub libcuda), the examples (`vector_add` and the kernel template's program
//! also run as one-test suites, `hw_vector_add` and `hw_template`), the PTX, the C++
//! reference sources and `run.sh`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::{R, cargo, run, step, toolkit};

/// Builds the bundle into `dir` and prints its size.
pub fn run_bundle(root: &Path, dir: &Path) -> R {
    // What it needs on a fresh machine: the CUDA wheels (headers, libcudart for the
    // linked hw_sys) and nightly rust-src (the kernel template's host build).
    let tk = toolkit::locate(root)?;
    crate::setup::nightly_rust_src()?;
    if dir.exists() {
        std::fs::remove_dir_all(dir)?;
    }
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin)?;

    step("building hardware test binaries (release, loaded mode)");
    let mut cmd = cargo(root);
    cmd.env("CUDA_SYS_INCLUDE", &tk.include).args([
        "test",
        "--release",
        "--no-run",
        "--message-format=json-render-diagnostics",
        "-p",
        "cuda-workspace",
        "--tests",
    ]);
    for exe in test_executables(&mut cmd)? {
        copy_test(&exe, &bin, "")?;
    }

    step("building hw_sys in linked mode against a stub libcuda");
    let stub_dir = stub_libraries(root, &tk)?;
    let mut cmd = cargo(root);
    cmd.env("CUDA_SYS_LIB_DIR", &stub_dir)
        .env("CUDA_SYS_INCLUDE", &tk.include)
        .args([
            "test",
            "--release",
            "--no-run",
            "--message-format=json-render-diagnostics",
            "-p",
            "cuda-workspace",
            "--no-default-features",
            "--features",
            "linked",
            "--test",
            "hw_sys",
            "--target-dir",
        ])
        .arg(root.join("target/linked-release"));
    for exe in test_executables(&mut cmd)? {
        copy_test(&exe, &bin, "_linked")?;
    }

    step(
        "building the examples (vector_add, pdl_demo, bench, devgraph_bench, tma_bench, peer_bench, mem_bench, region_bench, nccl_bench, data_parallel, kernel_bench), release",
    );
    run(cargo(root).args(["build", "--release", "--examples", "-p", "cuda-workspace"]))?;
    for example in [
        "vector_add",
        "pdl_demo",
        "bench",
        "devgraph_bench",
        "tma_bench",
        "peer_bench",
        "mem_bench",
        "region_bench",
        "nccl_bench",
        "data_parallel",
        "kernel_bench",
    ] {
        let src = root.join("target/release/examples").join(example);
        let dst = bin.join(example);
        std::fs::copy(&src, &dst).map_err(|e| format!("{}: {e}", src.display()))?;
        run(Command::new("strip").arg(&dst)).or_else(|_| -> R { Ok(()) })?;
        println!("  {}", dst.display());
    }

    step("cudadrv embedded in PyTorch (runs as bin/hw_torch)");
    run(cargo(root).args([
        "build",
        "--release",
        "--example",
        "torch_embed",
        "-p",
        "cuda-workspace",
    ]))?;
    std::fs::copy(
        root.join("target/release/examples/libtorch_embed.so"),
        bin.join("libtorch_embed.so"),
    )?;
    std::fs::copy(
        root.join("examples/torch_embed.py"),
        bin.join("torch_embed.py"),
    )?;
    std::fs::copy(
        root.join("examples/nccl_torch.py"),
        bin.join("nccl_torch.py"),
    )?;
    step("the NVTX tool of hw_nvtx (examples/nvtx_injection.rs)");
    run(cargo(root).args([
        "build",
        "--release",
        "--example",
        "nvtx_injection",
        "-p",
        "cuda-workspace",
    ]))?;
    std::fs::copy(
        root.join("target/release/examples/libnvtx_injection.so"),
        bin.join("libnvtx_injection.so"),
    )?;

    step("the kernel template's host program (runs as bin/hw_template)");
    let template = crate::template::build_host(root)?;
    std::fs::copy(&template, bin.join("template-host"))?;
    step("the decode example's program and PyTorch reference (runs as bin/hw_decode)");
    let decode = crate::decode::build_host(root)?;
    std::fs::copy(&decode, bin.join("decode"))?;
    run(Command::new("strip").arg(bin.join("decode"))).or_else(|_| -> R { Ok(()) })?;
    std::fs::copy(
        root.join("examples/decode/reference/reference.py"),
        bin.join("reference.py"),
    )?;
    step(
        "the embedded programs for Linux: the no_std bare-metal program and the C host of the no_std staticlib (run as bin/hw_nostd)",
    );
    for exe in crate::image::linux_programs(root)? {
        let name = exe.file_name().ok_or("no file name")?;
        std::fs::copy(&exe, bin.join(name))?;
    }
    for (name, script) in [
        ("hw_nostd", HW_NOSTD_SH),
        ("hw_decode", HW_DECODE_SH),
        ("hw_template", HW_TEMPLATE_SH),
        ("hw_vector_add", HW_VECTOR_ADD_SH),
        ("hw_nvtx", HW_NVTX_SH),
        ("hw_torch", HW_TORCH_SH),
    ] {
        std::fs::write(bin.join(name), script)?;
        run(Command::new("chmod").arg("+x").arg(bin.join(name)))?;
    }

    step("PTX, C++ reference and run script");
    let ptx_dir = dir.join("ptx");
    std::fs::create_dir_all(&ptx_dir)?;
    for entry in std::fs::read_dir(root.join("ptx/generated"))?.flatten() {
        std::fs::copy(entry.path(), ptx_dir.join(entry.file_name()))?;
    }
    let cpp = root.join("xtask/cpp");
    if cpp.is_dir() {
        let dst = dir.join("cpp");
        std::fs::create_dir_all(&dst)?;
        for entry in std::fs::read_dir(&cpp)?.flatten() {
            std::fs::copy(entry.path(), dst.join(entry.file_name()))?;
        }
    }
    // nccl.h for the C++ NCCL reference (the GPU hosts have libnccl, not its header).
    let nccl_include = dir.join("cpp/include");
    std::fs::create_dir_all(&nccl_include)?;
    std::fs::copy(
        crate::library_bindgen::headers(root)?.join("nccl.h"),
        nccl_include.join("nccl.h"),
    )?;
    let script = dir.join("run.sh");
    std::fs::write(&script, RUN_SH)?;
    run(Command::new("chmod").arg("+x").arg(&script))?;

    let size = dir_size(dir);
    println!(
        "bundle: {} ({:.1} MiB); on a GPU host run `{}/run.sh` (add --sanitize for compute-sanitizer)",
        dir.display(),
        size as f64 / (1u64 << 20) as f64,
        dir.display()
    );
    Ok(())
}

/// The test executables a `cargo test --no-run --message-format=json` build produced.
fn test_executables(cmd: &mut Command) -> R<Vec<PathBuf>> {
    cmd.stdout(Stdio::piped());
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!("{cmd:?} failed: {}", out.status).into());
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let mut exes = Vec::new();
    for line in text
        .lines()
        .filter(|l| l.contains("\"reason\":\"compiler-artifact\""))
    {
        let Some(i) = line.find("\"executable\":\"") else {
            continue;
        };
        let rest = &line[i + 14..];
        if let Some(end) = rest.find('"') {
            exes.push(PathBuf::from(&rest[..end]));
        }
    }
    Ok(exes)
}

/// Copies `target/.../deps/hw_core-<hash>` to `bin/hw_core<suffix>` (hardware suites only).
fn copy_test(exe: &Path, bin: &Path, suffix: &str) -> R {
    let file = exe.file_name().and_then(|f| f.to_str()).unwrap_or_default();
    let name = file.rsplit_once('-').map_or(file, |(n, _)| n);
    if name.starts_with("hw_") {
        let dst = bin.join(format!("{name}{suffix}"));
        std::fs::copy(exe, &dst)?;
        run(Command::new("strip").arg(&dst)).or_else(|_| -> R { Ok(()) })?;
        println!("  {}", dst.display());
    }
    Ok(())
}

/// A directory holding `libcuda.so` and `libcudart.so` to link against: the toolkit's
/// `lib64/stubs` where there is one, otherwise a stub built with `cc` from the
/// bindings' symbol list (soname `libcuda.so.1`, so the real driver is loaded at run
/// time), and the wheel's libcudart.
fn stub_libraries(root: &Path, tk: &toolkit::Toolkit) -> R<PathBuf> {
    let dir = root.join("target/stubs");
    std::fs::create_dir_all(&dir)?;
    let lib = tk
        .lib
        .clone()
        .ok_or("no CUDA lib directory (libcudart) found")?;
    let toolkit_stub = lib.join("stubs/libcuda.so");
    let cuda = dir.join("libcuda.so");
    if toolkit_stub.exists() {
        std::fs::copy(&toolkit_stub, &cuda)?;
        println!("  libcuda: the toolkit's stub {}", toolkit_stub.display());
    } else {
        let list = std::fs::read_to_string(root.join("cuda-sys/src/generated/driver_fns.rs"))?;
        let mut c = String::from(
            "/* Stub libcuda for linking only; the real driver is loaded at run time. */\n",
        );
        let mut n = 0;
        for line in list.lines().filter(|l| l.starts_with("    ")) {
            let Some((_, rest)) = line.split_once(" = ") else {
                continue;
            };
            let Some((symbol, _)) = rest.split_once(" @") else {
                continue;
            };
            c.push_str(&format!("void {symbol}(void) {{}}\n"));
            n += 1;
        }
        let src = dir.join("libcuda_stub.c");
        std::fs::write(&src, c)?;
        let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
        run(Command::new(cc)
            .args(["-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o"])
            .arg(&cuda)
            .arg(&src))?;
        println!("  libcuda: stub with {n} symbols built from the bindings");
    }
    let cudart = dir.join("libcudart.so");
    let real = lib.join("libcudart.so.13");
    let _ = std::fs::remove_file(&cudart);
    std::fs::copy(&real, &cudart).map_err(|e| format!("{}: {e}", real.display()))?;
    Ok(dir)
}

fn dir_size(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| match e.metadata() {
                    Ok(m) if m.is_dir() => dir_size(&e.path()),
                    Ok(m) => m.len(),
                    Err(_) => 0,
                })
                .sum()
        })
        .unwrap_or(0)
}

/// `bin/hw_template`: the kernel template's program as a one-test suite, so `run.sh`
/// counts it with the others (skipped when it printed that nothing was run).
const HW_TEMPLATE_SH: &str = r#"#!/usr/bin/env bash
# The user kernel-crate template (examples/kernel-template) run on the GPU.
out=$("$(dirname "$0")/template-host" 2>&1); rc=$?
echo "$out"
if [ "$rc" != 0 ]; then r="0 passed, 1 failed, 0 skipped"
elif echo "$out" | grep -q "nothing was run"; then r="0 passed, 0 failed, 1 skipped"
else r="1 passed, 0 failed, 0 skipped"; fi
echo "hw_template: $r"
case "$r" in *" 1 failed"*) exit 1 ;; *) exit 0 ;; esac
"#;

/// `bin/hw_decode`: the decode example as a four-test suite: the small shape against the
/// CPU reference over 64 steps; the default shape's six launch paths against each other;
/// the default shape against the PyTorch reference (tokens and logits over 64 steps;
/// skipped without python3, torch and a GPU); the width-4096 shape's paths against each
/// other over 16 steps.
const HW_DECODE_SH: &str = r#"#!/usr/bin/env bash
# examples/decode on the GPU: Rust kernels of a Llama-shaped decode step, checked.
here=$(cd "$(dirname "$0")" && pwd)
py=${PYTHON:-python3}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/hw_decode.XXXXXX")
p=0; f=0; s=0
verdict() { # name rc output
  if [ "$2" != 0 ]; then f=$((f+1)); echo "hw_decode: $1 FAILED"
  elif echo "$3" | grep -q "nothing was run"; then s=$((s+1)); echo "hw_decode: $1 skipped"
  else p=$((p+1)); echo "hw_decode: $1 passed"; fi
}
out=$("$here/decode" --shape small --check-cpu 2>&1); rc=$?; echo "$out"
verdict "small shape vs the CPU reference" $rc "$out"
out=$("$here/decode" --shape default --out "$tmp" --weights 2>&1); rc=$?; echo "$out"
verdict "default shape: six paths agree" $rc "$out"
if [ "$rc" != 0 ] || echo "$out" | grep -q "nothing was run"; then
  out="reference: the Rust run did not complete, nothing was run"; rc=0
elif "$py" -c "import torch, numpy; assert torch.cuda.is_available()" 2>/dev/null; then
  out=$("$py" "$here/reference.py" "$tmp" --check 2>&1); rc=$?
else
  out="reference: no python3 with torch and a GPU, nothing was run"; rc=0
fi
echo "$out"
verdict "default shape vs the PyTorch reference" $rc "$out"
rm -rf "$tmp"
out=$("$here/decode" --shape wide --steps 16 2>&1); rc=$?; echo "$out"
verdict "width-4096 shape: six paths" $rc "$out"
echo "hw_decode: $p passed, $f failed, $s skipped"
[ "$f" = 0 ]
"#;

/// `bin/hw_nostd`: the embedded path on the GPU as a two-test suite: the `no_std`
/// bare-metal program built for Linux (its own `dlsym` resolver and C `main`), and the C
/// program that links the `no_std` + `alloc` static library and hands it `dlsym`.
const HW_NOSTD_SH: &str = r#"#!/usr/bin/env bash
# The no_std builds of cudadrv on the GPU, the driver resolved by the programs themselves.
here=$(cd "$(dirname "$0")" && pwd)
p=0; f=0; s=0
for prog in bare-metal-example nostd-host; do
  out=$("$here/$prog" 2>&1); rc=$?
  echo "$out"
  if [ "$rc" != 0 ] || ! echo "$out" | tail -1 | grep -qE "all values checked|nothing was run"; then f=$((f+1)); echo "hw_nostd: $prog FAILED"
  elif echo "$out" | grep -q "nothing was run"; then s=$((s+1))
  else p=$((p+1)); fi
done
echo "hw_nostd: $p passed, $f failed, $s skipped"
[ "$f" = 0 ]
"#;

/// `bin/hw_torch`: examples/torch_embed.rs (a shared library) driven from PyTorch by
/// examples/torch_embed.py as a one-test suite; skipped without python3, torch or a GPU.
const HW_TORCH_SH: &str = r#"#!/usr/bin/env bash
# cudadrv embedded in PyTorch: torch's tensors and streams through DLPack, on the GPU.
here=$(cd "$(dirname "$0")" && pwd)
py=${PYTHON:-python3}
if ! command -v "$py" >/dev/null; then
  echo "hw_torch: no $py, nothing was run"; echo "hw_torch: 0 passed, 0 failed, 1 skipped"; exit 0
fi
out=$("$py" "$here/torch_embed.py" "$here/libtorch_embed.so" 2>&1); rc=$?
echo "$out"
if [ "$rc" != 0 ]; then r="0 passed, 1 failed, 0 skipped"
elif echo "$out" | grep -q "nothing was run"; then r="0 passed, 0 failed, 1 skipped"
else r="1 passed, 0 failed, 0 skipped"; fi
echo "hw_torch: $r"
case "$r" in *" 1 failed"*) exit 1 ;; *) exit 0 ;; esac
"#;

/// `bin/hw_vector_add`: the newcomer's example as a one-test suite: its Rust kernel, and
/// the same launch of `cpp/vector_add.cu` compiled by nvcc (`$NVCC`, default
/// `/usr/local/cuda/bin/nvcc`); every sum is checked by the example, which exits 1 on a
/// wrong one. Without nvcc only the Rust kernel runs.
const HW_VECTOR_ADD_SH: &str = r#"#!/usr/bin/env bash
# examples/vector_add run on the GPU: the Rust kernel, then the nvcc-built C++ kernel.
here=$(cd "$(dirname "$0")" && pwd)
nvcc=${NVCC:-/usr/local/cuda/bin/nvcc}
ptx=${TMPDIR:-/tmp}/hw_vector_add_$$.ptx
args=(); fail=0
if [ -x "$nvcc" ]; then
  if "$nvcc" -arch=sm_90 -ptx "$here/../cpp/vector_add.cu" -o "$ptx"; then
    args=(--cpp-ptx "$ptx")
  else
    echo "vector_add: nvcc failed on cpp/vector_add.cu"; fail=1
  fi
else
  echo "vector_add: no nvcc at $nvcc: the C++ kernel is not run"
fi
out=$("$here/vector_add" "${args[@]}" 2>&1); rc=$?
echo "$out"
rm -f "$ptx"
if [ "$rc" != 0 ] || [ "$fail" = 1 ]; then r="0 passed, 1 failed, 0 skipped"
elif echo "$out" | grep -q "nothing was run"; then r="0 passed, 0 failed, 1 skipped"
else r="1 passed, 0 failed, 0 skipped"; fi
echo "hw_vector_add: $r"
case "$r" in *" 1 failed"*) exit 1 ;; *) exit 0 ;; esac
"#;

const HW_NVTX_SH: &str = r#"#!/usr/bin/env bash
# pdl_demo with an NVTX tool attached (bin/libnvtx_injection.so, the way a profiler
# attaches): its phases must reach the tool as named, balanced ranges.
here=$(cd "$(dirname "$0")" && pwd)
log=${TMPDIR:-/tmp}/hw_nvtx_$$.log
rm -f "$log"
out=$(NVTX_INJECTION64_PATH="$here/libnvtx_injection.so" NVTX_TEST_LOG="$log" "$here/pdl_demo" 2>&1); rc=$?
echo "$out" | tail -3
touch "$log"
echo "nvtx calls received: $(wc -l < "$log")"; grep -E "^(push_ex|category)" "$log" | sort | uniq -c
pushes=$(grep -cE "^push" "$log"); pops=$(grep -c "^pop" "$log")
want=("attached" "category 1 pdl_demo" "push_ex pdl_demo: setup" "push_ex pdl_demo: 1. PDL pair" "push 1 plain pairs" "push 1 PDL pairs" "push_ex pdl_demo: 2. chain of 256 kernels" "mark chain: graph_pdl" "push_ex pdl_demo: 3. multi-wave")
missing=0; ran=1
echo "$out" | grep -q "nothing was run\|no GPU" && ran=0
if [ "$ran" = 1 ]; then
  for w in "${want[@]}"; do grep -q "^$w" "$log" || { echo "hw_nvtx: missing: $w"; missing=1; }; done
fi
rm -f "$log"
if [ "$ran" = 0 ]; then r="0 passed, 0 failed, 1 skipped"
elif [ "$rc" != 0 ] || [ "$missing" = 1 ] || [ "$pushes" != "$pops" ]; then echo "pushes $pushes, pops $pops"; r="0 passed, 1 failed, 0 skipped"
else r="1 passed, 0 failed, 0 skipped"; fi
echo "hw_nvtx: $r"
case "$r" in *" 1 failed"*) exit 1 ;; *) exit 0 ;; esac
"#;

const RUN_SH: &str = r#"#!/usr/bin/env bash
# Runs the hardware suites, then the PDL demo and the benchmarks against the CUDA C++
# reference, on a GPU host (no Rust toolchain needed).
# Generated by `cargo xtask bundle`.
# Usage: ./run.sh [--sanitize] [--no-bench | --bench-only] [--rounds N] [filter]
#   --sanitize    also run the suites under compute-sanitizer in its default mode
#                 (memcheck, API errors reported; racecheck and synccheck for hw_device)
#   --no-bench    skip pdl_demo and the benchmarks
#   --bench-only  skip the hardware suites
#   --rounds N    rounds of the interleaved Rust/C++ comparison (default 30)
#   --suites "hw_a hw_b"   run only these hardware suites (default: all)
#   --benches "a b"        run only these benchmarks: pdl bench devgraph tma peer mem region nccl kernels decode
# Logs go to ./logs; with $OUT set, the summary, CSVs and a logs.tgz are copied there.
set -u
cd "$(dirname "$0")"
LOGS=$PWD/logs
rm -rf "$LOGS"; mkdir -p "$LOGS"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export CUDA_DEVRT_LIB=${CUDA_DEVRT_LIB:-/usr/local/cuda/lib64/libcudadevrt.a}
SANITIZE=0; BENCH=1; TESTS=1; ROUNDS=30; SUITES=""; BENCHES="pdl bench devgraph tma peer mem region nccl kernels decode"
while [ $# -gt 0 ]; do
  case "$1" in
    --suites) SUITES=$2; shift 2 ;;
    --benches) BENCHES=$2; shift 2 ;;
    --sanitize) SANITIZE=1; shift ;;
    --no-bench) BENCH=0; shift ;;
    --bench-only) TESTS=0; shift ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    *) break ;;
  esac
done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'
want() { case " $1 " in *" $2 "*) return 0 ;; *) return 1 ;; esac; }
for t in bin/hw_*; do
  [ "$TESTS" = 1 ] || break
  name=$(basename "$t")
  [ -z "$SUITES" ] || want "$SUITES" "$name" || want "$SUITES" "${name%_linked}" || continue
  if [ "$name" = hw_nccl ]; then
    # Written for any number of GPUs: run with 1, 2 and 4 of them visible (as many as
    # the host has), and with all of them. NVLink multicast stays off.
    GPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || echo 0)
    for k in 1 2 4; do
      [ "$k" -lt "$GPUS" ] || continue
      echo "=== $name ($k of $GPUS GPUs visible)"
      CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((k - 1))) NCCL_NVLS_ENABLE=0 "$t" "$@" 2>&1 | tee "$LOGS/${name}_gpus$k.log" | grep -v '^$'
    done
  fi
  echo "=== $name"
  NCCL_NVLS_ENABLE=0 "$t" "$@" 2>&1 | tee "$LOGS/$name.log" | grep -v '^$'
done
cat "$LOGS"/hw_*.log | awk '/^hw_[a-z_]+: [0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$/ {p+=$2; f+=$4; s+=$6}
  END {printf "hardware: %d passed, %d failed, %d skipped\n", p, f, s}' > "$LOGS/summary.txt"
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
if [ "$BENCH" = 1 ] && want "$BENCHES" pdl; then
  echo "=== pdl_demo"
  bin/pdl_demo --stamps "$LOGS/stamps.csv" 2>&1 | tee "$LOGS/pdl_demo.log"
fi
if [ "$BENCH" = 1 ] && want "$BENCHES" bench; then
  echo "=== C++ reference (nvcc)"
  if cpp/build.sh "$PWD/bench_cpp" > "$LOGS/bench_cpp_build.log" 2>&1; then
    ./bench_cpp --csv "$LOGS/bench_cpp.csv" --ptx ptx/kernels.ptx > "$LOGS/bench_cpp.log" 2>&1 || echo "bench_cpp failed (see logs)"
  else
    echo "nvcc build of cpp/bench.cu failed:"; tail -20 "$LOGS/bench_cpp_build.log"
  fi
  echo "=== bench (Rust) vs C++"
  bin/bench --csv "$LOGS/bench.csv" --cpp "$LOGS/bench_cpp.csv" > "$LOGS/bench.log" 2>&1 || echo "bench failed"
  sed -n '/^section /,$p' "$LOGS/bench.log"
  if [ -f "$PWD/bench_cpp.so" ]; then
    echo "=== bench --interleave (Rust and C++ alternating in one process)"
    bin/bench --interleave "$PWD/bench_cpp.so" --rounds "$ROUNDS" --csv "$LOGS/bench_interleave.csv" 2>&1 | tee "$LOGS/bench_interleave.log"
  fi
  grep -E "error|allocs/launch" "$LOGS/bench.log" | head -20
fi
if [ "$BENCH" = 1 ] && want "$BENCHES" devgraph; then
  echo "=== devgraph_bench (device graph launch; Rust and nvcc C++ kernels alternating)"
  if "${NVCC:-/usr/local/cuda/bin/nvcc}" -arch=sm_90 -O3 -rdc=true -ptx cpp/devgraph_ref.cu -o devgraph_ref.ptx > "$LOGS/devgraph_ref_build.log" 2>&1; then
    bin/devgraph_bench --cpp-ptx devgraph_ref.ptx --rounds "$ROUNDS" --csv "$LOGS/devgraph_bench.csv" 2>&1 | tee "$LOGS/devgraph_bench.log"
  else
    echo "nvcc build of cpp/devgraph_ref.cu failed:"; tail -20 "$LOGS/devgraph_ref_build.log"
    bin/devgraph_bench --rounds "$ROUNDS" --csv "$LOGS/devgraph_bench.csv" 2>&1 | tee "$LOGS/devgraph_bench.log"
  fi
fi
if [ "$BENCH" = 1 ] && want "$BENCHES" tma; then
  echo "=== tma_bench (streaming through asynchronous copies; Rust and nvcc C++ kernels alternating)"
  TMA_ARGS="--rounds ${TMA_ROUNDS:-10} --csv $LOGS/tma_bench.csv --tune-csv $LOGS/tma_tune.csv --sweep-csv $LOGS/tma_sweep.csv --svg $LOGS/tma_sweep.svg ${TMA_EXTRA:-}"
  if "$NVCC" -arch=sm_90 -O3 -ptx cpp/tma_ref.cu -o tma_ref.ptx > "$LOGS/tma_ref_build.log" 2>&1; then
    bin/tma_bench --cpp-ptx tma_ref.ptx $TMA_ARGS 2>&1 | tee "$LOGS/tma_bench.log"
  else
    echo "nvcc build of cpp/tma_ref.cu failed:"; tail -20 "$LOGS/tma_ref_build.log"
    bin/tma_bench $TMA_ARGS 2>&1 | tee "$LOGS/tma_bench.log"
  fi
fi
if [ "$BENCH" = 1 ] && want "$BENCHES" peer; then
  echo "=== peer_bench (peer copies between two GPUs; Rust and nvcc C++ alternating)"
  if "$NVCC" -O3 -std=c++17 -arch=sm_90 -shared -Xcompiler -fPIC cpp/peer_ref.cu -o peer_ref.so > "$LOGS/peer_ref_build.log" 2>&1; then
    bin/peer_bench --cpp ./peer_ref.so --rounds 10 --csv "$LOGS/peer_bench.csv" 2>&1 | tee "$LOGS/peer_bench.log"
  else
    echo "nvcc build of cpp/peer_ref.cu failed:"; tail -20 "$LOGS/peer_ref_build.log"
    bin/peer_bench --rounds 10 --csv "$LOGS/peer_bench.csv" 2>&1 | tee "$LOGS/peer_bench.log"
  fi
fi
if [ "$BENCH" = 1 ] && want "$BENCHES" mem; then
  echo "=== mem_bench (managed migration, batched copies, zero copy; Rust and nvcc C++ alternating)"
  if "$NVCC" -O3 -std=c++17 -arch=sm_90 -shared -Xcompiler -fPIC cpp/mem_ref.cu -o mem_ref.so > "$LOGS/mem_ref_build.log" 2>&1; then
    bin/mem_bench --cpp ./mem_ref.so --rounds 10 --csv "$LOGS/mem_bench.csv" 2>&1 | tee "$LOGS/mem_bench.log"
  else
    echo "nvcc build of cpp/mem_ref.cu failed:"; tail -20 "$LOGS/mem_ref_build.log"
    bin/mem_bench --rounds 10 --csv "$LOGS/mem_bench.csv" 2>&1 | tee "$LOGS/mem_bench.log"
  fi
fi
if [ "$BENCH" = 1 ] && want "$BENCHES" region; then
  echo "=== region_bench (replay regions vs hand-captured graphs in Rust and nvcc C++; automatic PDL sweep)"
  REGION_ARGS="--rounds ${REGION_ROUNDS:-10} --csv $LOGS/region_bench.csv --sweep-csv $LOGS/auto_pdl_sweep.csv --svg $LOGS/auto_pdl_sweep.svg ${REGION_EXTRA:-}"
  if "$NVCC" -O3 -std=c++17 -arch=sm_90 -shared -Xcompiler -fPIC cpp/region_ref.cu -o region_ref.so > "$LOGS/region_ref_build.log" 2>&1; then
    bin/region_bench --cpp ./region_ref.so $REGION_ARGS 2>&1 | tee "$LOGS/region_bench.log"
  else
    echo "nvcc build of cpp/region_ref.cu failed:"; tail -20 "$LOGS/region_ref_build.log"
    bin/region_bench $REGION_ARGS 2>&1 | tee "$LOGS/region_bench.log"
  fi
fi
if [ "$BENCH" = 1 ] && want "$BENCHES" kernels; then
  echo "=== kernel_bench (typed safe launch vs raw cuLaunchKernel, 4 parameters)"
  bin/kernel_bench --rounds "$ROUNDS" --csv "$LOGS/kernel_bench.csv" 2>&1 | tee "$LOGS/kernel_bench.log"
fi
if [ "$BENCH" = 1 ] && want "$BENCHES" decode; then
  echo "=== decode (one token of a Llama-shaped model in Rust kernels, six launch paths; PyTorch on the same GPU)"
  for shape in ${DECODE_SHAPES:-default wide}; do
    dir=$LOGS/decode-$shape
    bin/decode --shape "$shape" --bench --rounds "${DECODE_ROUNDS:-5}" --out "$dir" --weights 2>&1 | tee "$LOGS/decode-$shape.log"
    modes=eager,graph; [ "$shape" = default ] && modes=${DECODE_MODES:-eager,graph,compile,compile-ro}
    if [ -f "$dir/weights.bin" ]; then
      ${PYTHON:-python3} bin/reference.py "$dir" --check --bench --modes "$modes" --rounds "${DECODE_ROUNDS:-5}" 2>&1 | tee -a "$LOGS/decode-$shape.log"
      rm -f "$dir/weights.bin" "$dir/logits.f32"
    fi
  done
fi
if [ "$BENCH" = 1 ] && want "$BENCHES" nccl; then
  # NVLink multicast stays off for every program here and its children.
  export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
  # One libnccl for all three: the loader's, else PyTorch's wheel.
  NCCL_SO=${CUDA_SYS_LIBNCCL:-$(ldconfig -p 2>/dev/null | awk '/libnccl\.so\.2 /{print $NF; exit}')}
  [ -n "$NCCL_SO" ] || NCCL_SO=$(${PYTHON:-python3} -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null)
  export CUDA_SYS_LIBNCCL=$NCCL_SO
  NCCL_ARGS=${NCCL_ARGS:---warmup 10 --iters 50}
  echo "=== nccl: all-reduce bus bandwidth, cudadrv::nccl vs CUDA C++ vs PyTorch ($NCCL_SO)"
  rm -f "$LOGS/nccl.csv"
  if [ -n "$NCCL_SO" ] && "$NVCC" -O3 -std=c++17 -arch=sm_90 cpp/nccl_ref.cu -Icpp/include -L"$(dirname "$NCCL_SO")" -l:libnccl.so.2 -Xlinker -rpath -Xlinker "$(dirname "$NCCL_SO")" -o nccl_ref > "$LOGS/nccl_ref_build.log" 2>&1; then
    for round in 1 2 3; do
      bin/nccl_bench $NCCL_ARGS --csv "$LOGS/nccl.csv" 2>&1 | tee -a "$LOGS/nccl_bench.log"
      ./nccl_ref $NCCL_ARGS --csv "$LOGS/nccl.csv" 2>&1 | tee -a "$LOGS/nccl_bench.log"
    done
  else
    echo "nvcc build of cpp/nccl_ref.cu failed:"; tail -20 "$LOGS/nccl_ref_build.log"
    bin/nccl_bench $NCCL_ARGS --csv "$LOGS/nccl.csv" 2>&1 | tee -a "$LOGS/nccl_bench.log"
  fi
  # Against PyTorch, one rank per process, with PyTorch's own NCCL where it has one.
  TORCH_NCCL=$(${PYTHON:-python3} -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null)
  [ -f "$TORCH_NCCL" ] || TORCH_NCCL=$NCCL_SO
  for round in 1 2 3 4 5; do
    CUDA_SYS_LIBNCCL=$TORCH_NCCL bin/nccl_bench --procs $NCCL_ARGS --csv "$LOGS/nccl.csv" 2>&1 | tee -a "$LOGS/nccl_bench.log"
    ${PYTHON:-python3} bin/nccl_torch.py $NCCL_ARGS --csv "$LOGS/nccl.csv" 2>&1 | tee -a "$LOGS/nccl_bench.log"
  done
  bin/nccl_bench --nonblocking $NCCL_ARGS --csv "$LOGS/nccl.csv" 2>&1 | tee -a "$LOGS/nccl_bench.log"
  bin/nccl_bench --graph --csv "$LOGS/nccl.csv" 2>&1 | tee -a "$LOGS/nccl_bench.log"
  echo "=== data_parallel (all-reduce overlapped with the backward pass)"
  bin/data_parallel --svg "$LOGS/data_parallel_timeline.svg" 2>&1 | tee "$LOGS/data_parallel.log"
fi
if [ "$SANITIZE" = 1 ] && [ "$TESTS" = 1 ] && command -v compute-sanitizer >/dev/null; then
  # Which calls a sanitizer log says returned errors, counted (each one a test provoking
  # it on purpose, or a bug).
  api_errors() {
    grep -oE "Program hit [A-Z_]+ \(error [0-9]+\) due to \"[^\"]*\" on CUDA API call to [A-Za-z0-9_]+" "$1" \
      | sed 's/Program hit //' | sort | uniq -c | sed 's/^/    /'
  }
  for t in bin/hw_core bin/hw_launch bin/hw_graph bin/hw_device bin/hw_soundness bin/hw_samples bin/hw_logs bin/hw_green bin/hw_devgraph bin/hw_vmm bin/hw_multi_gpu bin/hw_interop bin/hw_nccl bin/hw_nvrtc bin/hw_ipc bin/hw_tma bin/hw_promises bin/hw_memory bin/hw_views bin/hw_region bin/hw_kernels bin/hw_template bin/hw_vector_add bin/hw_torch bin/hw_async; do
    [ -x "$t" ] || continue
    name=$(basename "$t")
    [ -z "$SUITES" ] || want "$SUITES" "$name" || continue
    echo "=== compute-sanitizer memcheck $name (default mode: API errors reported)"
    # hw_nccl with one GPU: with two or more, NCCL 2.28's own u8 all-reduce kernel
    # (RING_LL) reads up to 3 bytes past a buffer whose length is not a multiple of 4
    # (inside the allocation's granularity), which memcheck stops as out of bounds.
    ONE=""; [ "$name" = hw_nccl ] && ONE="env CUDA_VISIBLE_DEVICES=0"
    HW_STRESS_SECS=${HW_STRESS_SECS:-5} $ONE compute-sanitizer --tool memcheck --print-limit 200 "$t" "$@" > "$LOGS/memcheck_$name.log" 2>&1
    grep -E "ERROR SUMMARY|passed, .* failed" "$LOGS/memcheck_$name.log"
    api_errors "$LOGS/memcheck_$name.log"
  done
  for tool in racecheck synccheck; do
    for name in hw_device hw_tma; do
      [ -x "bin/$name" ] || continue
      [ -z "$SUITES" ] || want "$SUITES" "$name" || continue
      echo "=== compute-sanitizer $tool $name"
      HW_SANITIZER_TOOL=$tool compute-sanitizer --tool $tool --print-limit 20 "bin/$name" "$@" > "$LOGS/${tool}_$name.log" 2>&1
      grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed, .* failed" "$LOGS/${tool}_$name.log"
    done
  done
  # The decode example's kernels, every launch path, on its small shape; with 4
  # projection CTAs an SM its rings take three slots instead of four.
  if [ -x bin/decode ] && { [ -z "$SUITES" ] || want "$SUITES" hw_decode; }; then
    for tool in memcheck racecheck; do
      for ctas in 3 4; do
        echo "=== compute-sanitizer $tool decode (small shape, 4 steps, $ctas CTAs an SM)"
        compute-sanitizer --tool $tool --print-limit 20 bin/decode --shape small --steps 4 --ctas $ctas > "$LOGS/${tool}_decode_ctas$ctas.log" 2>&1
        grep -E "ERROR SUMMARY|RACECHECK SUMMARY|FAILED|all values checked" "$LOGS/${tool}_decode_ctas$ctas.log"
        api_errors "$LOGS/${tool}_decode_ctas$ctas.log"
      done
    done
  fi
fi
cat "$LOGS/summary.txt"
if [ -n "${OUT:-}" ]; then
  tar czf "$OUT/logs.tgz" -C "$LOGS" .
  for f in summary.txt bench.csv bench_cpp.csv stamps.csv bench_interleave.csv bench_interleave.log devgraph_bench.csv devgraph_bench.log tma_bench.csv tma_bench.log tma_tune.csv tma_sweep.csv tma_sweep.svg peer_bench.csv peer_bench.log mem_bench.csv mem_bench.log region_bench.csv region_bench.log auto_pdl_sweep.csv auto_pdl_sweep.svg nccl.csv nccl_bench.log data_parallel.log data_parallel_timeline.svg kernel_bench.csv kernel_bench.log decode-default.log decode-wide.log; do [ -f "$LOGS/$f" ] && cp "$LOGS/$f" "$OUT/"; done
  for d in "$LOGS"/decode-*/; do [ -d "$d" ] && mkdir -p "$OUT/$(basename "$d")" && cp "$d"/*.json "$d"/*.svg "$OUT/$(basename "$d")/" 2>/dev/null; done
fi
[ "$TESTS" = 0 ] || grep -q "^hardware: [0-9]* passed, 0 failed" "$LOGS/summary.txt"
"#;
