#!/usr/bin/env bash
# Packs what a lent GPU machine needs to run dlbench without building there (the workplace's `device`
# tool, or any GPU box without this compiler and Debian's packages) into ONE archive, and checks that
# the tree the tool sends stays well under its 64 MiB limit.
#   ci/device_bundle.sh [BUILD_DIR=build] [OUT_DIR=.devbundle]
# OUT_DIR gets dlbench-bundle.tar.xz (stripped build/bin/dlbench, the gpu test binaries and
# test_lazy_libs, and the non-CUDA, non-glibc shared libraries they load: OpenBLAS, oneDNN, Google
# Benchmark, Open MPI, gfortran, ...) and MANIFEST.txt (git sha, build, contents, the glibc it needs).
# CUDA's own libraries (cuBLAS, cuDNN, NCCL) are not bundled: the GPU machine has them (pip wheels or
# the toolkit) and ci/device_run.sh finds them there; the CUDA runtime is linked statically.
# Uncompressed the bundle is ~100 MiB (oneDNN 38, OpenBLAS 35), so only the archive travels;
# ci/device_run.sh unpacks it into /tmp. Prints the size of what the tool would send (tracked files,
# untracked files git does not ignore, and OUT_DIR) and exits 2 when that passes DLB_CARRY_LIMIT_MIB
# (default 52, a margin under the tool's 64).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
out=${2:-.devbundle}
limit_mib=${DLB_CARRY_LIMIT_MIB:-52}
die() { echo "device_bundle: $*" >&2; exit 2; }
[[ "$limit_mib" =~ ^[0-9]+$ ]] && [ "$limit_mib" -ge 1 ] && [ "$limit_mib" -le 64 ] ||
  die "DLB_CARRY_LIMIT_MIB=$limit_mib: expected a whole number of MiB, 1..64"
[ -x "$build/bin/dlbench" ] ||
  die "no $build/bin/dlbench: build it first (cmake --preset release && cmake --build build -j2)"
"$build/bin/dlbench" info --json 2>/dev/null | grep -q '"built_with_cuda": *true' ||
  die "$build is a CPU-only build (dlbench info: built_with_cuda false): configure where nvcc is found"
gpu_tests=("$build"/bin/test_*_gpu)
[ -x "${gpu_tests[0]}" ] || die "no gpu test binaries in $build/bin (test_*_gpu): they are not built yet"
# Every gpu test in the tree must travel: a binary left unbuilt would never run on the GPU and its
# absence would read as "all gpu tests passed".
while IFS= read -r src; do
  t=$(basename "$src"); t=${t%.*}
  [ -x "$build/bin/$t" ] || die "$build/bin/$t missing (from $src): build every target first (cmake --build $build -j2)"
done < <(git ls-files 'tests/*test_*_gpu.cu' 'tests/*test_*_gpu.cpp')
case "$out" in ""|/|.|..|*/..|../*) die "OUT_DIR '$out': refusing to replace it" ;; esac
if [ -e "$out" ] && [ -n "$(ls -A "$out")" ] && [ ! -f "$out/MANIFEST.txt" ] && [ ! -d "$out/bin" ]; then
  die "OUT_DIR $out exists and holds something else than a bundle; not replacing it"
fi
case "$(realpath -m "$out")" in  # inside the repo it must be ignored, or it travels twice (tree + carry)
  "$PWD"/*)
    # The rule (/.devbundle/) matches directories only: in a fresh checkout the folder must exist first.
    made=""; [ -e "$out" ] || { mkdir -p "$out" && made=1; }
    git check-ignore -q "$out" 2>/dev/null || {
      [ -n "$made" ] && rmdir "$out"
      die "$out is not ignored by git: it would travel as part of the tree and again as a carry"
    } ;;
esac
for tool in strip ldd tar xz; do command -v "$tool" >/dev/null || die "$tool not found"; done

stage="$build/devbundle-stage"
rm -rf "$stage"
mkdir -p "$stage/bin" "$stage/lib"
bins=("$build/bin/dlbench" "${gpu_tests[@]}")
[ -x "$build/bin/test_lazy_libs" ] && bins+=("$build/bin/test_lazy_libs")  # every lazily loaded symbol resolves there
for b in "${bins[@]}"; do strip --strip-all -o "$stage/bin/$(basename "$b")" "$b"; done

# The shared libraries the binaries resolve here, less glibc/libstdc++/libgcc (the GPU machine's own are
# newer) and CUDA's (found there). A library ldd cannot find here is an error now, not on the GPU.
missing=$(for b in "${bins[@]}"; do ldd "$b"; done | awk '/not found/ {print $1}' | sort -u | tr '\n' ' ')
[ -z "$missing" ] || die "libraries not found here: $missing"
for b in "${bins[@]}"; do ldd "$b"; done | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
  grep -Ev '/(libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so' |
  grep -Ev '/lib(cudart|cublas|cublasLt|cudnn[a-z_]*|nccl|nvrtc[a-z-]*|nvJitLink|cuda)\.so' |
  while read -r lib; do cp -L "$lib" "$stage/lib/"; done
strip --strip-unneeded "$stage"/lib/*.so* 2>/dev/null || true

# The newest glibc / libstdc++ symbol versions anything in the bundle asks for: the GPU machine must
# have at least these (device_run.sh's check step finds a shortfall with ldd).
glibc=$(objdump -T "$stage"/bin/* "$stage"/lib/* 2>/dev/null | grep -o 'GLIBC_2\.[0-9]*' | sort -t. -k2 -n -u | tail -1)
glibcxx=$(objdump -T "$stage"/bin/* "$stage"/lib/* 2>/dev/null | grep -o 'GLIBCXX_3\.4\.[0-9]*' | sort -t. -k3 -n -u | tail -1)
sha=$(git rev-parse HEAD 2>/dev/null || echo unknown)
dirty=$([ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ] && echo " (dirty)" || true)
{
  echo "dlbench device bundle"
  echo "git        $sha$dirty"
  echo "made       $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n), $(. /etc/os-release && echo "$PRETTY_NAME")"
  echo "build      $build ($(grep -E '^CMAKE_BUILD_TYPE:' "$build/CMakeCache.txt" 2>/dev/null | cut -d= -f2), CUDA archs $(grep -E '^CMAKE_CUDA_ARCHITECTURES:' "$build/CMakeCache.txt" 2>/dev/null | cut -d= -f2))"
  echo "needs      $glibc, $glibcxx, an NVIDIA driver for CUDA 13, cuBLAS 13 / cuDNN 9 / NCCL 2 (wheels or toolkit)"
  echo "files      (bytes, stripped)"
  (cd "$stage" && find bin lib -type f -printf '  %-40p %10s\n' | sort)
} >"$stage/MANIFEST.txt"

mkdir -p "$out"
rm -rf "${out:?}"/* 2>/dev/null || true
cp "$stage/MANIFEST.txt" "$out/MANIFEST.txt"
XZ_OPT=${XZ_OPT:--6 -T1} tar -C "$stage" -cJf "$out/dlbench-bundle.tar.xz" MANIFEST.txt bin lib

# What the device tool sends: tracked files, untracked files git does not ignore, and the carried OUT_DIR.
bytes_of() { xargs -0 -r stat -L -c %s 2>/dev/null | awk '{s += $1} END {print s + 0}'; }
tracked=$(git ls-files -z | bytes_of)
untracked=$(git ls-files -z -o --exclude-standard | bytes_of)
carried=$(find "$out" -type f -print0 | bytes_of)
staged=$(find "$stage" -type f -print0 | bytes_of)
nlibs=$(ls "$stage/lib" | wc -l)
total=$((tracked + untracked + carried))
mib() { awk -v b="$1" 'BEGIN {printf "%.1f MiB", b / 1048576}'; }
echo "device_bundle: $out/dlbench-bundle.tar.xz $(mib "$carried") (unpacked $(mib "$staged"): ${#bins[@]} binaries, $nlibs libraries)"
echo "device_bundle: the tool sends $(mib "$total"): tracked tree $(mib "$tracked") + untracked, not ignored $(mib "$untracked") + carry $out $(mib "$carried") (limit 64 MiB, margin here ${limit_mib} MiB)"
echo "device_bundle: needs $glibc and $glibcxx on the GPU machine"
rm -rf "$stage"
if [ "$total" -gt $((limit_mib * 1048576)) ]; then
  echo "device_bundle: error: $(mib "$total") is over the ${limit_mib} MiB margin (untracked files that git does not ignore travel too: git status)" >&2
  exit 2
fi
echo "device_bundle: carry [\"$out\"]; on the GPU machine run ci/device_run.sh (ci/README.md)"
