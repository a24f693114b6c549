#!/usr/bin/env bash
# Builds the CUDA C++ reference benchmark (bench.cu) on a GPU host:
#   ./build.sh [OUTPUT]   (default OUTPUT: ./bench_cpp next to this script)
# Then: ./bench_cpp --csv "$OUT/bench_cpp.csv", and merge with the Rust numbers:
#   bench --cpp "$OUT/bench_cpp.csv"   (the Rust bench example)
# NVCC overrides the compiler (default: /usr/local/cuda/bin/nvcc, then nvcc on PATH).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/bench_cpp}
nvcc=${NVCC:-/usr/local/cuda/bin/nvcc}
[ -x "$nvcc" ] || nvcc=$(command -v nvcc)
cuda_root=$(cd "$(dirname "$nvcc")/.." && pwd)
# -lcuda: the driver API half (cpp-drv rows). The toolkit's stub satisfies the link; the
# binary loads the real libcuda.so.1 at run time.
"$nvcc" -O3 -std=c++17 -arch=sm_90 -lineinfo "$here/bench.cu" -o "$out" \
  -L"$cuda_root/lib64" -L"$cuda_root/lib64/stubs" -lcuda
echo "built $out"
# The same code as a shared library for `bench --interleave` (cudart linked statically,
# so the library needs only libcuda at run time).
"$nvcc" -O3 -std=c++17 -arch=sm_90 -DBENCH_LIB -shared -Xcompiler -fPIC "$here/bench.cu" \
  -o "$out.so" -L"$cuda_root/lib64" -L"$cuda_root/lib64/stubs" -lcuda \
  && echo "built $out.so" || echo "could not build $out.so (bench --interleave unavailable)"
