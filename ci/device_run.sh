#!/usr/bin/env bash
# Runs dlbench on a GPU machine from the bundle ci/device_bundle.sh made (no build there). For the
# workplace's `device` tool: carry `.devbundle`, run `ci/device_run.sh STEP...` from the repo root;
# everything lands in $OUT (default ./device-out): one log per step and each suite's results.json
# (copy those to reports/baselines/<gpu-name>/<suite>.json to commit them).
# Steps (in the order given; each gets its own log, a failing step does not stop the others):
#   check      libraries resolve, `dlbench info` (GPU, driver, CUDA/cuBLAS/cuDNN versions, peaks)
#   tests      every gpu test binary (they must RUN there, not skip)
#   matmul     the issue-3 sizes: 1024..8192, our kernels vs cuBLAS fp32/tf32/fp16/bf16
#   conv       every seed layer, cuDNN vs ours (--quick batch set)
#   transfer   1 KB..1 GB, pinned/pageable, sync/async, overlap
#   lecture    the lecture table, CPU + GPU, PyTorch peer (torch is there)
#   amp        fp32/tf32/fp16/bf16 training steps and GEMMs
#   train      the four models (quick sweep)
# Environment: BUNDLE (default .devbundle), OUT, DLB_DEVICE (default cuda:0 for GPU-only steps).
set -uo pipefail
cd "$(dirname "$0")/.."
bundle=${BUNDLE:-.devbundle}
out=${OUT:-$PWD/device-out}
dev=${DLB_DEVICE:-cuda:0}
mkdir -p "$out"
bin="$bundle/bin"
[ -x "$bin/dlbench" ] || { echo "device_run: no $bin/dlbench: run ci/device_bundle.sh here and carry $bundle" >&2; exit 2; }

# CUDA's libraries: the toolkit's, then any pip wheel's (nvidia-cublas, nvidia-cudnn-cu13, ...).
libs="$PWD/$bundle/lib"
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do [ -d "$d" ] && libs="$libs:$d"; done
for py in python3 /opt/torch/.venv/bin/python3; do
  sp=$("$py" -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null) || continue
  for s in $sp; do
    [ -d "$s/nvidia" ] || continue
    while read -r f; do libs="$libs:$(dirname "$f")"; done < <(find "$s/nvidia" -name 'lib*.so*' \
      \( -name 'libcudnn.so.9*' -o -name 'libcublas.so.1*' -o -name 'libcudart.so.1*' -o -name 'libnvrtc.so.1*' \
         -o -name 'libnvJitLink.so.1*' -o -name 'libcublasLt.so.1*' \) 2>/dev/null | sort -u)
  done
done
export LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export DLB_SOURCE_DIR="$PWD"  # the PyTorch peer script
export PYTHONUNBUFFERED=1

status=0
step() {  # step NAME COMMAND...: runs it with its output in $out/NAME.log (and on stdout)
  local name=$1; shift
  echo "=== $name: $*"
  local t0=$SECONDS
  "$@" 2>&1 | tee "$out/$name.log"
  local rc=${PIPESTATUS[0]}
  echo "=== $name: exit $rc after $((SECONDS - t0)) s"
  [ "$rc" = 0 ] || status=1
}
suite() {  # suite NAME FLAGS...: a run into $out/NAME/, its results.json kept
  local name=$1; shift
  step "$name" "$bin/dlbench" run --suite "$name" --out "$out/$name" --no-report "$@"
}

for s in "${@:-check tests}"; do
  for s1 in $s; do
    case "$s1" in
      check)
        step ldd bash -c "for b in $bin/*; do ldd \$b | grep 'not found' && exit 1; done; echo all libraries found"
        step info "$bin/dlbench" info ;;
      tests)
        for t in "$bin"/test_*_gpu; do step "$(basename "$t")" "$t" --gtest_brief=1; done
        # A skip here means the GPU was not seen: that is a failure on a GPU machine.
        if grep -l "SKIPPED" "$out"/test_*_gpu.log 2>/dev/null; then echo "device_run: gpu tests SKIPPED on a GPU machine"; status=1; fi ;;
      matmul) suite matmul --device "$dev" --sizes 1024,2048,4096,8192 ;;
      conv) suite conv --device "$dev" --quick ;;
      transfer) suite transfer --device "$dev" ;;
      lecture) suite lecture --device "cpu,$dev" --peer pytorch ;;
      amp) suite amp --device "$dev" --batch 64,256 ;;
      train) suite train --device "$dev" --quick ;;
      *) echo "device_run: unknown step '$s1'" >&2; exit 2 ;;
    esac
  done
done
exit $status
