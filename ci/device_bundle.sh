#!/usr/bin/env bash
# Builds the folder a lent GPU machine needs to run dlbench (the `device` tool of this workplace, or
# any GPU box without a compiler or Debian's packages): stripped copies of build/bin/dlbench and the
# gpu test binaries, plus the shared libraries they load that are not CUDA's (OpenBLAS, gfortran,
# Google Benchmark, ...). CUDA's own libraries (cudart, cuBLAS, cuDNN) are NOT bundled: they are
# large and the GPU machine has them (toolkit or pip wheels); ci/device_run.sh finds them there.
#   ci/device_bundle.sh [BUILD_DIR=build] [OUT_DIR=.devbundle]
# Prints the bundle's size; the device tool carries at most 64 MiB with the working tree.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
out=${2:-.devbundle}
[ -x "$build/bin/dlbench" ] || { echo "device_bundle: no $build/bin/dlbench (run ./dlbench build first)" >&2; exit 2; }
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
bins=("$build/bin/dlbench")
for t in "$build"/bin/test_*_gpu; do [ -x "$t" ] && bins+=("$t"); done
for b in "${bins[@]}"; do
  strip -o "$out/bin/$(basename "$b")" "$b"
done
# Non-CUDA, non-glibc libraries the binaries resolve here.
for b in "${bins[@]}"; do ldd "$b"; done | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
  grep -Ev '/(libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so' |
  grep -Ev 'lib(cudart|cublas|cublasLt|cudnn[a-z_]*|nvrtc|nvJitLink|cuda)\.so' |
  while read -r lib; do cp -L "$lib" "$out/lib/"; done
strip --strip-unneeded "$out"/lib/*.so* 2>/dev/null || true
du -sh "$out"
ls "$out/bin" "$out/lib"
