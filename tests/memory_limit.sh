#!/usr/bin/env bash
# memory_limit.sh CLI OUT: under address-space limits (ulimit -v, in a subshell) dlbench always exits:
# `info --peaks` exits 0 (peaks "not measured" when they do not fit), and a small CPU matmul sweep and a
# small CPU training run either succeed (0), or refuse at once with exit 2 and one "dlbench: error:"
# line; a case that runs out of memory is marked, never a crash or a hang (issue 13; no other
# failure exit either). No timing is asserted.
set -u
cli=$1 out=$2
rm -rf "$out" && mkdir -p "$out"
# An AddressSanitizer build reserves terabytes of shadow address space at start: ulimit -v cannot apply.
if nm -D "$cli" 2>/dev/null | grep -q ' __asan_init$'; then echo "skipped: AddressSanitizer build"; exit 77; fi
bad=0
check() {  # check LIMIT_KB ALLOWED_CODES ARGS...
  local kb=$1 allowed=$2; shift 2
  (ulimit -v "$kb"; timeout -k 5 120 "$cli" "$@" >"$out/stdout" 2>"$out/stderr" </dev/null)
  local rc=$? lines
  lines=$(grep -c '' "$out/stderr")
  local why=""
  if [ $rc = 124 ] || [ $rc = 137 ]; then why="did not exit within 120 s"
  elif ! [[ " $allowed " == *" $rc "* ]]; then why="exit $rc (allowed: $allowed)"
  elif [ $rc = 2 ] && { [ "$lines" != 1 ] || ! grep -q '^dlbench: error: ' "$out/stderr"; }; then why="exit 2 with $lines stderr lines"
  fi
  if grep -qE 'terminate called|Aborted|core dumped' "$out/stderr"; then why="${why:+$why; }trace on stderr"; fi
  if [ -n "$why" ]; then
    bad=$((bad + 1)); echo "FAIL: ulimit -v $kb: dlbench $* -> $why"; head -5 "$out/stderr"
  else
    echo "ok: ulimit -v $kb: dlbench $* -> exit $rc $(grep -m1 -E 'error|not measured' "$out/stderr" "$out/stdout" | cut -c1-160)"
  fi
}
for kb in 200000 300000 500000; do check $kb "0" info --peaks; done
# Just above the binary's own floor OpenBLAS cannot start its thread pool in its library constructor
# (before main) and raises SIGINT: that is exit 2 with one line naming the limit, not 130 as if
# interrupted. The floor is the lowest limit, in 4 MB steps, at which the binary starts at all with one
# OpenBLAS thread (its libraries' constructors, libgfortran's first, need that much before any code of
# ours runs; it grows with the binary: ~100 MB in Nov 2026).
floor=""
for kb in $(seq 60000 4000 300000); do
  if (ulimit -v "$kb"; OPENBLAS_NUM_THREADS=1 "$cli" --help >/dev/null 2>&1 </dev/null); then floor=$kb; break; fi
done
if [ -z "$floor" ]; then bad=$((bad + 1)); echo "FAIL: dlbench --help does not start under ulimit -v 300000"
else check "$floor" "0 2" info; fi
for kb in 150000 300000 450000 800000; do
  check $kb "0 2" run --suite matmul --device cpu --sizes 64,1024 --dtype fp32 --repetitions 1 --min-time 0.01 \
    --no-report --out "$out/mm-$kb"
done
# The lecture's conv1 at batch 64 through im2col + OpenBLAS (its GEMMs on every kernel thread at once)
# and oneDNN: at 620000 KiB some cases fit and some are marked out of memory. Here OpenBLAS once
# retried a buffer forever (a hang) and oneDNN's JIT crashed on a refused mapping.
for kb in 620000 800000; do
  check $kb "0 2" run --suite conv --device cpu --quick --filter 'fp32/impl=.*lecture.conv1/batch=64' --repetitions 1 \
    --min-time 0.01 --no-report --out "$out/conv-$kb"
done
for kb in 300000 700000; do
  check $kb "0 2" train --model mlp --device cpu --epochs 1 --limit 256
done
echo "$bad failure(s)"
[ $bad = 0 ]
