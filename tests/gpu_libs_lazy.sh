#!/usr/bin/env bash
# gpu_libs_lazy.sh CLI OUT: the dlbench binary needs no GPU library to start (issue 13). It names no
# cuBLAS/cuBLASLt/cuDNN/NCCL/cudart as DT_NEEDED (kernels/cuda/lazy_libs.h loads them on first use where
# a device exists), and `info` and a tiny CPU matmul run succeed under `ulimit -v 600000` (600 MB),
# where a CUDA build that linked those libraries aborted (about 676 MiB mapped before main). In a
# CPU-only build the same checks hold trivially. No timing is asserted.
set -u
cli=$1 out=$2
rm -rf "$out" && mkdir -p "$out"
# An AddressSanitizer build reserves terabytes of shadow address space at start: ulimit -v cannot apply.
if nm -D "$cli" 2>/dev/null | grep -q ' __asan_init$'; then echo "skipped: AddressSanitizer build"; exit 77; fi
bad=0
needed=$(LC_ALL=C readelf -d "$cli" | grep -E '\(NEEDED\)' | grep -oiE 'lib(cublas|cublaslt|cudnn|nccl|cudart)[^]]*' | tr '\n' ' ')
if [ -n "$needed" ]; then echo "FAIL: $cli needs at startup: $needed"; bad=$((bad + 1)); else echo "ok: no GPU library in DT_NEEDED"; fi
run() {  # run NAME ARGS...: exit 0 under the limit, within 120 s
  local name=$1; shift
  (ulimit -v 600000; timeout -k 5 120 "$cli" "$@" >"$out/$name.out" 2>"$out/$name.err" </dev/null)
  local rc=$?
  if [ $rc != 0 ]; then
    echo "FAIL: ulimit -v 600000: dlbench $* -> exit $rc"; head -5 "$out/$name.err"; bad=$((bad + 1))
  else
    echo "ok: ulimit -v 600000: dlbench $* -> exit 0"
  fi
}
run info info
run info_json info --json
run matmul run --suite matmul --device cpu --sizes 64 --dtype fp32 --repetitions 1 --min-time 0.01 \
  --no-report --out "$out/matmul"
if [ -f "$out/info.out" ] && grep -q 'CUDA nvcc' "$out/info.out"; then
  grep -m1 -E '^CUDA ' "$out/info.out"  # a CUDA build: the versions it reports without loading the libraries
fi
echo "$bad failure(s)"
[ $bad = 0 ]
