#!/usr/bin/env bash
# Runs dlbench's GPU steps on a GPU machine from the bundle that ci/device_bundle.sh made (nothing is
# built there), and leaves exactly TWO files in $OUT: dlbench-device-<UTC time>.tar.gz (every log,
# each suite's results folder, gtest/sanitizer/ncu output, env facts) and summary.txt (one line per
# step: result, exit code, seconds, key facts), printed LAST on stdout since the device tool shows
# only the output's tail. A step that fails does not stop the others; a step that runs past its time
# is stopped (SIGTERM, then SIGKILL 30 s later; dlbench keeps the cases finished so far) and shown as
# TIMEOUT; an interrupted script still writes both files (trap), and both are rewritten after each step.
#
#   ci/device_run.sh [STEP|CALL]...        default: call-a       ci/device_run.sh --list: the steps
#
# Steps (default time limit in s; DLB_TIMEOUT_<STEP>=N overrides it, e.g. DLB_TIMEOUT_MATMUL_FULL=400):
#   env           60  GPU, driver, clocks (nvidia-smi), tools (nvcc, compute-sanitizer, ncu), where each
#                     CUDA library resolves, torch's version/CUDA/cuDNN and the libraries it maps
#   check         90  ldd of every bundled binary, `dlbench info` (+ --json), test_lazy_libs: every
#                     lazily loaded cuBLAS/cuDNN/NCCL symbol resolves from the libraries found here
#   tests        300  every test_*_gpu binary, one after the other (never concurrently), gtest JSON
#   rerun        150  a narrowed rerun of failed tests after a fix: DLB_RERUN="binary:gtest_filter ..."
#                     (e.g. "test_conv_gpu:ConvGpu.CudnnBf16"); SKIP when DLB_RERUN is unset
#   sanitize     300  compute-sanitizer memcheck + racecheck over OUR kernels' tests at small shapes
#                     (gtest filters: our sgemm/mma rows up to 256^3 and the odd sizes, not cuBLAS's;
#                     the implicit-GEMM conv; the amp kernels), never cuBLAS/cuDNN tests or the trainer
#                     (its cuDNN algorithm searches); DLB_SANITIZE replaces the list ("tool:binary:filter ...")
#   ncu          180  one Nsight Compute profile each of warptile (fp32), mma and mma_256 (bf16) at n=4096
#                     (DLB_NCU_SIZE), --clock-control none, sections SpeedOfLight, Occupancy,
#                     MemoryWorkloadAnalysis, WarpStateStats, LaunchStats
#   ncu-seq       90  ncu, one metric (gpu__time_duration.sum) over the first 800 launches of our
#                     rnn training at batch 1 and 8: the kernels by total device time (ours at batch
#                     8 took 3.8x its batch-1 step on the H100; which kernel)
#   ncu-attn      90  ncu sections (as ncu's) of our tensor-core attention forward, flash_tc and
#                     flash_tc_pipe, at seq 1024, head dim 64, causal (flash_tc: 40% of PyTorch's SDPA)
#   matmul       240  --quick: 128, 512 and one DeepBench shape; every impl and dtype vs cuBLAS
#   conv         240  --quick: the lecture's layers and one DeepBench layer, cuDNN vs implicit GEMM
#   transfer     180  --quick: 1 KiB, 1 MiB, 64 MiB; pageable/pinned/write-combined, sync/async, overlap
#   lecture      240  --quick (1024 images) on cpu and the GPU with the PyTorch peer (--peer pytorch)
#   amp          180  --quick: fp32/tf32/fp16/bf16 training steps and GEMMs; mlp, net128 and the
#                     sequence models (rnn, lstm, transformer: fp32, and tf32/bf16/fp16 GEMM autocast,
#                     fp16 with the device loss scaler: its first run)
#   train        180  --quick: the four models
#   seq          240  --quick --op train,infer: rnn, lstm (ours, cudnn) and transformer on cpu and the GPU
#                     (the GPU sequence trainer's first run, verified against the fp64 reference), and
#                     forward-only latency of those and mlp at batch 1, 4 (the GPU's verified against
#                     the CPU fp32 forward)
#   gpt2         120  --quick: gpt-mini B=1 T=32, ours on cpu and the GPU (the GPU step verified
#                     against the CPU fp32 step first): tokens/s, MFU, device memory, with and without
#                     --checkpoint-activations, on the GPU in fp32 and with its GEMMs in tf32 / bf16 /
#                     fp16 (--dtype; fp16 with loss scaling; MFU against the dtype's dense peak; fp16
#                     adds two gpt-mini GPU cases, seconds, inside the 120 s); and op=infer:
#                     prefill and decode at batch 1 with the K/V cache (the GPU decoder's first run)
#   attention    120  --quick on the GPU: ours (flash, flash_tc), unfused and cuDNN's fused SDPA (cudnn),
#                     forward and backward, causal and full, each verified before it is timed (in no
#                     call yet: run it by name)
#   matmul-4096  300  --sizes 1024,2048,4096: every impl and dtype against cuBLAS (the ratio tables)
#   attention-1024 200 seq 1024, head dim 64, 16k tokens, forward and backward: ours, unfused, cuDNN's
#                     SDPA and the PyTorch peer's SDPA (fp32, bf16): the fused-attention figure of issues
#                     29 and 31 (with seq 4096 too it finished 28 of 56 cases in 120 s on the H100)
#   attention-fwd 90  attention-1024's forward causal cases only (issues 29 and 31's targets: our fused forward
#                     >= 50% of PyTorch's SDPA / cuDNN's at seq 1024, head dim 64, bf16), flash_tc_pipe's first
#                     timing
#   gpt2-124m    180  gpt2-124m at B=4, T=64 and 1024 on the GPU: ours fp32 and bf16 GEMMs, attention
#                     core flash and unfused (fp32 flash was 3-6x slower than unfused at T 1024 on the
#                     H100), the PyTorch peer (fp32, bf16 autocast): tokens/s and MFU (issue 31's GPU rows); --profile
#                     (ours per layer: where T=1024's step goes)
#   gpt2-graph    90  gpt2-124m B=4 T=64 on the GPU, ours fp32 eager and with every step replayed from a CUDA
#                     graph (--cuda-graph; ours' step there is ~10 ms of ~400 launches): its first timing
#   seq-peer     240  the sequence models at their default sizes on the GPU, train, batch 1, 8, 64:
#                     ours, cuDNN's RNN/LSTM and the PyTorch peer (issue 29's GPU rows)
#   infer-peer   320  op=infer of every model of the zoo on the GPU at batch 1 and 64, ours eager and
#                     from a CUDA graph (--cuda-graph), cuDNN's RNN, and the PyTorch peer (the image
#                     models' on our weights, checked by the loss): p50 / p99 (~50 cases; 16 took
#                     100 s on the H100)
#   seq-profile  150  ours only, the sequence models at their default sizes, train, batch 1, 8, 64, on
#                     that machine's CPU and the GPU (the GPU-vs-CPU crossover per model), --profile:
#                     where a step's time goes per layer (ours at batch 8 took 3.8x its batch-1 step
#                     on the H100, unexplained)
#   seq-own-ws    60  rnn and lstm as seq-profile times them, under DLB_CUBLAS_WORKSPACE=1 (our own cuBLAS
#                     workspace per stream instead of cuBLAS's default pool): the ablation
#   seq-fused    120  rnn and lstm at batch 1, 8, 64 under DLB_RNN_STEP=fused (one kernel a step for the
#                     recurrent product and the cell at batch <= 16, kernels/cuda/seq/rnn.h), eager and with
#                     every training step replayed from a CUDA graph (--cuda-graph), beside the PyTorch peer
#                     in the same run: their first timing
#   matmul-full  480  --sizes 1024,2048,4096,8192 (the issue-3 sizes): every impl and dtype
#   conv-full    480  every seed layer and DeepBench layer, the batch sweep
#   transfer-full 480 1 KiB .. 1 GiB
#   lecture-full 480  50,000 images, GPU + PyTorch peer (the CPU at 50,000 images does not fit a call)
#   amp-full     480  --batch 64,256, every model and dtype
#   train-full   480  the full sweep
# Calls (the GPU session's plan, ci/README.md: a and b back to back in 15 minutes of device time, c if time is left):
#   call-a = env check tests train transfer amp     (correctness first, then three quick baselines)
#   call-b = lecture gpt2 conv matmul-4096          (the comparison tables: PyTorch peer, GPT-2, cuDNN, cuBLAS)
#   call-c = rerun ncu sanitize                     (what is left: a narrowed rerun, profiles, sanitizers)
#   call-next = env check tests seq-fused seq-peer attention-fwd gpt2-124m sanitize  (~500 s: the fixes since
#               2026-11-27's second H100 run checked, then issues 29's and 31's GPU rows)
#   call-then = infer-peer ncu-attn gpt2-graph seq-profile ncu-seq attention-1024 seq-own-ws  (~760 s: what a second call's
#               time allows, most wanted first)
# Suite steps add DLB_ARGS_<STEP> (e.g. DLB_ARGS_MATMUL_FULL="--filter impl=warptile") to their flags.
#
# Environment:
#   BUNDLE           .devbundle (its dlbench-bundle.tar.xz is unpacked into $TMPDIR for the call; a
#                    folder with bin/ is used as is)
#   OUT              where the two files go (default ./device-out)
#   DLB_DEVICE       the GPU for the suites (default cuda:0; cpu: a rehearsal of the suite steps on the
#                    CPU, as tests/device_dry_run.sh uses it)
#   DLB_TORCH_PYTHON the venv python with PyTorch (default /opt/torch/.venv/bin/python3); it becomes
#                    DLBENCH_PYTHON and DLBENCH_PEER_PYTHON unless those are set
#   DLB_RUN_TIMEOUT  seconds for one gpu test binary or one sanitizer run (default 180)
#   DLB_CALL_BUDGET  seconds for the whole call (default 540: the device tool stops a command at 600);
#                    each step gets min(its limit, what is left - 35 s); a step with < 10 s left is NOT RUN
#   DLB_DRY_RUN      1: no GPU here, GPU skips are expected (suites only check their flags with --list,
#                    sanitize/ncu skip without their tools); 0: a GPU machine, where every skip is a
#                    failure; default: dry exactly when there is neither nvidia-smi nor /dev/nvidiactl
# LD_LIBRARY_PATH: torch's CUDA wheels first (site-packages/nvidia/cu13/lib, then nvidia/*/lib: what
# torch was built with wins, for torch and for dlbench, which takes any cuBLAS 13.x / cuDNN 9.x), then
# the bundle, then the toolkit. Of the bundled libraries, OpenBLAS, oneDNN and Google Benchmark are
# always the bundle's; the others (zlib, gomp, Open MPI, ...) only where the machine lacks them.
# Exit: 0 every step ok (or skipped in a dry run), 1 a step failed or timed out, 2 bad usage.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

declare -A LIMIT=([env]=60 [check]=90 [tests]=300 [rerun]=150 [sanitize]=300 [ncu]=180 [ncu-seq]=90 [ncu-attn]=90
  [matmul]=240 [matmul-4096]=300 [conv]=240 [transfer]=180 [lecture]=240 [amp]=180 [train]=180 [seq]=240
  [gpt2]=120 [attention]=120 [attention-1024]=200 [attention-fwd]=90 [gpt2-124m]=180 [gpt2-graph]=90 [seq-peer]=240 [infer-peer]=320 [seq-profile]=150 [seq-own-ws]=60 [seq-fused]=120 [matmul-full]=480 [conv-full]=480 [transfer-full]=480 [lecture-full]=480 [amp-full]=480 [train-full]=480)
declare -A STEP_ENV=([seq-own-ws]="DLB_CUBLAS_WORKSPACE=1" [seq-fused]="DLB_RNN_STEP=fused")  # a suite step's environment
declare -A CALL=([call-a]="env check tests train transfer amp" [call-b]="lecture gpt2 conv matmul-4096"
  [call-c]="rerun ncu sanitize"
  [call-next]="env check tests seq-fused seq-peer attention-fwd gpt2-124m sanitize"
  [call-then]="infer-peer ncu-attn gpt2-graph seq-profile ncu-seq attention-1024 seq-own-ws")
ORDER="env check tests rerun sanitize ncu ncu-seq ncu-attn matmul conv transfer lecture amp train seq gpt2 attention attention-1024 attention-fwd gpt2-124m gpt2-graph seq-peer infer-peer seq-profile seq-own-ws seq-fused matmul-4096 matmul-full conv-full transfer-full lecture-full amp-full train-full"

usage() { echo "device_run: $*" >&2; exit 2; }
if [ "${1:-}" = --list ] || [ "${1:-}" = --help ] || [ "${1:-}" = -h ]; then
  sed -n '2,/^set -uo pipefail/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
  exit 0
fi

# The steps asked for, calls expanded, checked before anything runs.
steps=()
for a in "${@:-call-a}"; do
  for w in $a; do
    if [ -n "${CALL[$w]+x}" ]; then
      for s in ${CALL[$w]}; do steps+=("$s"); done
    elif [ -n "${LIMIT[$w]+x}" ]; then
      steps+=("$w")
    else
      usage "unknown step '$w' (steps: $ORDER; calls: ${!CALL[*]})"
    fi
  done
done
int_env() {  # int_env NAME DEFAULT MIN MAX: a whole number from the environment, else exit 2 naming it
  local v=${!1:-$2}
  [[ "$v" =~ ^[0-9]+$ ]] && [ "$v" -ge "$3" ] && [ "$v" -le "$4" ] || usage "$1=$v: expected a whole number $3..$4"
  echo "$v"
}
budget=$(int_env DLB_CALL_BUDGET 540 60 86400) || exit 2
for s in "${steps[@]}"; do
  v=DLB_TIMEOUT_$(echo "$s" | tr 'a-z-' 'A-Z_')
  LIMIT[$s]=$(int_env "$v" "${LIMIT[$s]}" 10 86400) || exit 2
done
ncu_n=$(int_env DLB_NCU_SIZE 4096 64 16384) || exit 2
run_cap=$(int_env DLB_RUN_TIMEOUT 180 10 86400) || exit 2
dev=${DLB_DEVICE:-cuda:0}
[[ "$dev" =~ ^(cuda(:[0-9]+)?|cpu)$ ]] || usage "DLB_DEVICE=$dev: expected cuda, cuda:N or cpu"

case "${DLB_DRY_RUN:-auto}" in
  1) dry=1; dry_why="DLB_DRY_RUN=1" ;;
  0) dry=0 ;;
  auto)
    if command -v nvidia-smi >/dev/null 2>&1 || [ -e /dev/nvidiactl ]; then dry=0; else
      dry=1; dry_why="no nvidia-smi and no /dev/nvidiactl here"
    fi ;;
  *) usage "DLB_DRY_RUN=${DLB_DRY_RUN}: expected 1, 0 or unset" ;;
esac
mode=$([ $dry = 1 ] && echo dry || echo gpu)

out=${OUT:-$ROOT/device-out}
mkdir -p "$out" || usage "OUT=$out: cannot create it"
out=$(cd "$out" && pwd)
stamp=$(date -u +%Y%m%d-%H%M%S)
name="dlbench-device-$stamp"
workroot=$(mktemp -d "${TMPDIR:-/tmp}/dlbench-device.XXXXXX") || usage "cannot make a folder in ${TMPDIR:-/tmp}"
work="$workroot/$name"
mkdir -p "$work/logs" "$work/results"
summary="$work/summary.txt"
t_start=$SECONDS

# ---- the two files, written after every step and at exit ----------------------------------------
declare -a LINES=()
failed_steps=()
header() {
  echo "dlbench device run $stamp UTC on $(uname -n): ${steps[*]}"
  if [ $dry = 1 ]; then echo "DRY RUN ($dry_why): GPU tests and cases skip as expected, suites only list their cases"; fi
  [ -n "${bundle_sha:-}" ] && echo "bundle: $bundle_sha"
  printf '%-14s %-8s %5s %6s  %s\n' STEP RESULT EXIT SECS FACTS
}
write_files() {  # summary.txt + the archive (overwritten each time: an interrupted call keeps what it had)
  {
    header
    for l in "${LINES[@]}"; do echo "$l"; done
    [ -n "${1:-}" ] && echo "$1"
  } >"$summary"
  cp "$summary" "$out/summary.txt"
  tar -C "$workroot" -czf "$workroot/archive.tmp" "$name" 2>/dev/null && mv -f "$workroot/archive.tmp" "$out/$name.tar.gz"
}
record() {  # record STEP RESULT EXIT SECS FACTS
  local facts=${5//$'\n'/ }
  LINES+=("$(printf '%-14s %-8s %5s %6s  %s' "$1" "$2" "$3" "$4" "${facts:0:400}")")
  case "$2" in ok|SKIP) ;; *) failed_steps+=("$1") ;; esac
  echo "=== $1: $2 (exit $3, $4 s) $facts"
  write_files
}

cur_pid="" cur_step=""
finish() {
  local rc=$?
  trap - EXIT INT TERM HUP
  local verdict
  if [ -n "${final_rc:-}" ]; then
    verdict="overall: FAIL (${failed_steps[*]})"
    rc=$final_rc
  elif [ ${#failed_steps[@]} = 0 ]; then
    verdict="overall: ok$([ $dry = 1 ] && echo ' (dry run)'), $((SECONDS - t_start)) s"
    rc=0
  else
    verdict="overall: FAIL (${failed_steps[*]}), $((SECONDS - t_start)) s"
    rc=1
  fi
  write_files "$verdict; files: $name.tar.gz $(du -k "$out/$name.tar.gz" 2>/dev/null | cut -f1) KiB, summary.txt"
  rm -rf "$workroot"
  echo
  cat "$out/summary.txt"
  exit $rc
}
on_signal() {
  if [ -n "$cur_pid" ]; then
    kill -TERM "$cur_pid" 2>/dev/null
    for _ in $(seq 20); do kill -0 "$cur_pid" 2>/dev/null || break; sleep 1; done
    kill -KILL "$cur_pid" 2>/dev/null
  fi
  [ -n "$cur_step" ] && record "$cur_step" INTERRUPTED - $((SECONDS - step_t0)) "stopped by a signal (the call's own time limit?)"
  cur_step=""
  exit 1
}
trap finish EXIT
trap on_signal INT TERM HUP

# ---- the bundle ---------------------------------------------------------------------------------
bundle=${BUNDLE:-.devbundle}
if [ -x "$bundle/bin/dlbench" ]; then
  bdir=$(cd "$bundle" && pwd)
elif [ -f "$bundle/dlbench-bundle.tar.xz" ]; then  # unpacked for this call only (~2 s), removed at exit
  bdir="$workroot/bundle"
  mkdir -p "$bdir"
  if command -v xz >/dev/null 2>&1; then
    tar -C "$bdir" -xJf "$bundle/dlbench-bundle.tar.xz"
  else  # no xz binary: Python's tarfile reads it
    python3 -c 'import sys, tarfile; t = tarfile.open(sys.argv[1]); t.extractall(sys.argv[2], **({"filter": "tar"} if hasattr(tarfile, "tar_filter") else {}))' \
      "$bundle/dlbench-bundle.tar.xz" "$bdir"
  fi
else
  echo "device_run: no bundle: $bundle/dlbench-bundle.tar.xz (make it with ci/device_bundle.sh and carry $bundle)" >&2
  final_rc=2
  record bundle FAIL 2 0 "no $bundle/dlbench-bundle.tar.xz: run ci/device_bundle.sh here and carry $bundle"
  exit 2
fi
[ -x "$bdir/bin/dlbench" ] || { final_rc=2; record bundle FAIL 2 0 "unpacking $bundle failed: no bin/dlbench in $bdir"; exit 2; }
bin="$bdir/bin"
bundle_sha=$(sed -n 's/^git *//p' "$bdir/MANIFEST.txt" 2>/dev/null | head -1)
# The results' context.git: the bundle's build, not whatever git tree (if any) the machine's copy has.
[ -n "$bundle_sha" ] && export DLB_GIT_SHA="$bundle_sha"
cp "$bdir/MANIFEST.txt" "$work/MANIFEST.txt" 2>/dev/null

# ---- the libraries: torch's wheels, then the bundle, then the toolkit ----------------------------
torch_py=${DLB_TORCH_PYTHON:-/opt/torch/.venv/bin/python3}
[ -x "$torch_py" ] || torch_py=""
libpath=()
addlib() { local d; for d in "$@"; do [ -d "$d" ] && [[ " ${libpath[*]-} " != *" $d "* ]] && libpath+=("$d"); done; }
if [ -n "$torch_py" ]; then
  for sp in $("$torch_py" -c 'import site, sysconfig; print(" ".join(dict.fromkeys(site.getsitepackages() + [sysconfig.get_paths()["platlib"]])))' 2>/dev/null); do
    addlib "$sp/nvidia/cu13/lib"
    for d in "$sp"/nvidia/*/lib; do addlib "$d"; done
  done
  export DLBENCH_PYTHON=${DLBENCH_PYTHON:-$torch_py} DLBENCH_PEER_PYTHON=${DLBENCH_PEER_PYTHON:-$torch_py}
fi
# Bundled libraries: OpenBLAS, oneDNN, Google Benchmark always ours (they decide the numbers); the
# rest only where the machine has no library of that name (its own, newer one wins).
blib="$workroot/bundle-lib"
mkdir -p "$blib"
have=$(ldconfig -p 2>/dev/null | awk '{print $1}')
for f in "$bdir"/lib/*; do
  so=$(basename "$f")
  if [[ "$so" =~ ^lib(openblas|dnnl|benchmark) ]] || ! grep -qxF "$so" <<<"$have" || [ "${DLB_BUNDLE_ALL_LIBS:-0}" = 1 ]; then
    ln -s "$f" "$blib/$so"
  fi
done
addlib "$blib" /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda/lib
LD_LIBRARY_PATH=$(IFS=:; echo "${libpath[*]}")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export LD_LIBRARY_PATH
export DLB_SOURCE_DIR="$ROOT"  # the PyTorch peer script: bench/peers/ in this tree
export PYTHONUNBUFFERED=1
py=""
for p in python3 /usr/bin/python3 "$torch_py"; do
  [ -n "$p" ] && "$p" -c 'import json' >/dev/null 2>&1 && { py=$p; break; }
done
facts() {  # facts SUBCOMMAND ARG: the one-line facts (ci/device_summary.py); its exit code says ok
  if [ -z "$py" ]; then echo "(no python3 for the facts)"; return 1; fi
  "$py" "$ROOT/ci/device_summary.py" "$1" "$2" "$mode"
}
find_tool() {  # find_tool NAME: PATH, then the toolkit's and Nsight's usual folders
  command -v "$1" 2>/dev/null && return
  local c
  for c in /usr/local/cuda/bin/$1 /usr/local/cuda/compute-sanitizer/$1 /opt/nvidia/nsight-compute/*/$1 /usr/local/cuda/nsight-compute*/$1; do
    [ -x "$c" ] && { echo "$c"; return; }
  done
  return 1
}

# ---- running one command of a step --------------------------------------------------------------
STEP_TIMED_OUT=0
run_cmd() {  # run_cmd LOG CMD...: in the background under the step's deadline (so traps stay live)
  local log=$1; shift
  local left=$((step_deadline - SECONDS)) capped=0
  # one binary must not starve the rest
  [ -n "${RUN_CAP:-}" ] && [ "$RUN_CAP" -lt "$left" ] && left=$RUN_CAP capped=1
  if [ $left -le 0 ]; then echo "+ (no time left in the step) $*" >>"$log"; STEP_TIMED_OUT=1; return 124; fi
  echo "+ $*" >>"$log"
  timeout -k 30 "$left" "$@" >>"$log" 2>&1 </dev/null &
  cur_pid=$!
  wait "$cur_pid"
  local rc=$?
  cur_pid=""
  if [ $rc = 124 ] || [ $rc = 137 ] || { [ $rc != 0 ] && [ $SECONDS -ge $step_deadline ]; }; then
    # The limit that stopped it: the per-binary cap, else the step's own (STEP_LIMIT_HIT as the step
    # set it), not the seconds this command had left of it (earlier commands took the rest).
    STEP_TIMED_OUT=1
    [ $capped = 1 ] && STEP_LIMIT_HIT=$RUN_CAP
    echo "+ stopped at its limit of $STEP_LIMIT_HIT s ($left s were left for this command)" >>"$log"
  fi
  echo "+ exit $rc" >>"$log"
  return $rc
}

# ---- the steps: each sets FACTS and returns 0 ok, 77 skipped (dry run), else failed ---------------
step_env() {
  local log=$1 rc=0 gpu="" torch_line
  {
    echo "## machine"; date -u; uname -a; nproc; free -g 2>/dev/null; ldd --version 2>&1 | head -1
    echo "## bundle"; cat "$bdir/MANIFEST.txt" 2>/dev/null
    echo "## LD_LIBRARY_PATH"; echo "$LD_LIBRARY_PATH" | tr ':' '\n'
    echo "## peer python: ${DLBENCH_PEER_PYTHON:-unset}; report python: ${DLBENCH_PYTHON:-unset}"
  } >>"$log" 2>&1
  if command -v nvidia-smi >/dev/null 2>&1; then
    run_cmd "$log" nvidia-smi
    run_cmd "$log" nvidia-smi --format=csv --query-gpu=name,driver_version,pci.bus_id,memory.total,clocks.sm,clocks.max.sm,clocks.mem,clocks.max.mem,power.draw,power.limit,temperature.gpu,persistence_mode,compute_mode,mig.mode.current
    run_cmd "$log" nvidia-smi -q -d CLOCK,PERFORMANCE
    gpu=$(timeout 20 nvidia-smi --format=csv,noheader --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.max.mem 2>/dev/null | head -1 |
      awk -F', ' '{printf "%s, driver %s, SM %s (max %s), mem max %s", $1, $2, $3, $4, $5}')
  fi
  [ -n "$gpu" ] || { gpu="no GPU (nvidia-smi: $(command -v nvidia-smi >/dev/null && echo failed || echo absent))"; [ $dry = 1 ] || rc=1; }
  local t
  for t in nvcc compute-sanitizer ncu; do
    local p; p=$(find_tool "$t") && { echo "## $t: $p" >>"$log"; "$p" --version 2>&1 | tail -2 >>"$log"; } || echo "## $t: not found" >>"$log"
  done
  # Where each CUDA library the code opens resolves, in LD_LIBRARY_PATH order, then ldconfig's cache.
  local so d found libs="" missing=""
  for so in libcublas.so.13 libcublasLt.so.13 libcudnn.so.9 libnccl.so.2 libnvrtc.so.13; do
    found=""
    for d in ${LD_LIBRARY_PATH//:/ }; do [ -e "$d/$so" ] && { found=$(readlink -f "$d/$so"); break; }; done
    [ -n "$found" ] || found=$(ldconfig -p 2>/dev/null | awk -v s="$so" '$1 == s {print $NF; exit}')
    echo "## $so -> ${found:-NOT FOUND}" >>"$log"
    if [ -n "$found" ]; then libs+=" $(basename "$found")"; else missing+=" $so"; fi
  done
  [ -z "$missing" ] || rc=1
  # Torch as the peer will see it: its version, CUDA, cuDNN, and which cuBLAS/cuDNN files it maps.
  if [ -n "${DLBENCH_PEER_PYTHON:-}" ]; then
    cat >"$work/torch_check.py" <<'EOF'
import sys
import torch
ok = torch.cuda.is_available()
line = f"torch {torch.__version__} (CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()})"
if ok:
    x = torch.randn(256, 256, device="cuda")
    (x @ x).sum().item()
    torch.nn.functional.conv2d(torch.randn(2, 3, 16, 16, device="cuda"), torch.randn(8, 3, 5, 5, device="cuda")).sum().item()
    libs = sorted({ln.split()[-1].rsplit("/", 1)[-1] for ln in open("/proc/self/maps")
                   if ("libcublas" in ln or "libcudnn" in ln) and "/" in ln})
    line += f" on {torch.cuda.get_device_name(0)}, maps {' '.join(libs)}"
else:
    line += ": torch.cuda.is_available() is False"
print("TORCH:", line)
sys.exit(0 if ok else 3)
EOF
    run_cmd "$log" "$DLBENCH_PEER_PYTHON" "$work/torch_check.py"
  fi
  torch_line=$(sed -n 's/^TORCH: //p' "$log" | tail -1)
  if [ -z "$torch_line" ]; then
    torch_line="torch: none (${DLBENCH_PEER_PYTHON:-no ${DLB_TORCH_PYTHON:-/opt/torch/.venv/bin/python3}})"
    [ $dry = 1 ] || rc=1
  elif [[ "$torch_line" == *"is False"* ]]; then
    [ $dry = 1 ] || rc=1
  fi
  FACTS="$gpu; $torch_line; libs:${libs}${missing:+; NOT FOUND:$missing}"
  return $rc
}

step_check() {
  local log=$1 rc=0 b bad=""
  for b in "$bin"/*; do
    echo "## ldd $b" >>"$log"
    ldd "$b" >>"$log" 2>&1
    ldd "$b" 2>&1 | grep -q 'not found' && bad+=" $(basename "$b")"
  done
  [ -n "$bad" ] && rc=1
  run_cmd "$log" "$bin/dlbench" info || rc=1
  timeout 60 "$bin/dlbench" info --json >"$work/info.json" 2>>"$log" || rc=1
  local info_facts; info_facts=$(facts info "$work/info.json") || rc=1
  local lazy="no test_lazy_libs in the bundle"
  if [ -x "$bin/test_lazy_libs" ]; then
    if run_cmd "$log" "$bin/test_lazy_libs" \
      --gtest_filter='LazyLibs.SonamesFollowTheHeaders:LazyLibs.EveryShimResolvesItsSymbolFromTheRealLibrary:LazyLibs.AMissingSymbolIsNamedInOneLine'; then
      lazy="every lazily loaded symbol resolves"
    else
      lazy="lazy libraries: a symbol did not resolve (log)"; rc=1
    fi
  fi
  FACTS="$([ -n "$bad" ] && echo "ldd: not found for$bad" || echo "all libraries found"); $info_facts; $lazy"
  return $rc
}

step_tests() {
  local log=$1 t n RUN_CAP=$run_cap
  mkdir -p "$work/tests"
  : >"$work/tests/rc.txt"
  for t in "$bin"/test_*_gpu; do
    n=$(basename "$t")
    echo "## $n" >>"$log"
    run_cmd "$work/tests/$n.log" "$t" --gtest_output="json:$work/tests/$n.json" ${DLB_GTEST_FILTER:+--gtest_filter=$DLB_GTEST_FILTER}
    echo "$n $?" >>"$work/tests/rc.txt"
    grep -E '^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED  \]' "$work/tests/$n.log" >>"$log"
  done
  FACTS=$(facts gtest "$work/tests")
}

step_rerun() {  # the tests step narrowed to DLB_RERUN="binary:filter ...", after a local fix and a new bundle
  local log=$1 spec b filter RUN_CAP=$run_cap
  if [ -z "${DLB_RERUN:-}" ]; then FACTS="nothing to rerun (DLB_RERUN unset)"; return 77; fi
  mkdir -p "$work/rerun"
  : >"$work/rerun/rc.txt"
  local -a specs; read -r -a specs <<<"$DLB_RERUN"
  for spec in "${specs[@]}"; do
    b=${spec%%:*}; filter=${spec#*:}; [ "$filter" = "$spec" ] && filter='*'
    [ -x "$bin/$b" ] || { echo "## $b: not in the bundle" >>"$log"; echo "$b 127" >>"$work/rerun/rc.txt"; continue; }
    run_cmd "$work/rerun/$b.log" "$bin/$b" --gtest_output="json:$work/rerun/$b.json" --gtest_filter="$filter"
    echo "$b $?" >>"$work/rerun/rc.txt"
    grep -E '^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED  \]' "$work/rerun/$b.log" >>"$log"
  done
  FACTS="rerun: $(facts gtest "$work/rerun")"
}

step_sanitize() {
  local log=$1 cs rc=0 spec tool b filter n=0 parts="" RUN_CAP=$run_cap
  if ! cs=$(find_tool compute-sanitizer); then
    FACTS="compute-sanitizer not found"
    [ $dry = 1 ] && { FACTS+=" (dry run)"; return 77; }
    return 1
  fi
  mkdir -p "$work/sanitize"
  # Only our kernels' tests, small shapes: the matmul rows named <impl>_<m>x<n>x<k> less cuBLAS's
  # and the three largest shapes, the implicit-GEMM conv, the amp kernels, the fused RNN step (memcheck
  # only: its test runs cuBLAS too, whose hazards racecheck flags), flash_tc_pipe's cp.async double
  # buffer (memcheck and racecheck: its test runs only flash_tc and it). Not the trainer (every
  # cuDNN algorithm search under memcheck) nor cuBLAS's kernels (racecheck flags their hazards).
  local mm='Impls/GpuSgemm.*:Impls/GpuHalf.*:GpuGemmOffsetPointers.*:GpuGemmF32.*-*cublas*:*_1000x1000x1000:*_512x1024x27:*_300x70x1001'
  local list=${DLB_SANITIZE:-"memcheck:test_matmul_gpu:$mm racecheck:test_matmul_gpu:$mm memcheck:test_conv_gpu:ConvGpu.ImplicitGemmForward racecheck:test_conv_gpu:ConvGpu.ImplicitGemmForward memcheck:test_amp_gpu:AmpGpu.* racecheck:test_amp_gpu:AmpGpu.* memcheck:test_seq_gpu:SeqGpu.RnnFused* memcheck:test_seq_gpu:SeqGpu.FlashTcPipe* racecheck:test_seq_gpu:SeqGpu.FlashTcPipe*"}
  local -a specs; read -r -a specs <<<"$list"  # (read: no pathname expansion of the filters)
  for spec in "${specs[@]}"; do
    tool=${spec%%:*}; spec=${spec#*:}; b=${spec%%:*}; filter=${spec#*:}
    n=$((n + 1))
    local f="$work/sanitize/$n-$tool-$b.log"
    run_cmd "$f" "$cs" --tool "$tool" --error-exitcode 86 --print-limit 20 "$bin/$b" --gtest_filter="$filter" --gtest_brief=1
    local r=$? one
    one=$(facts sanitizer "$f" 2>/dev/null) || rc=1
    [ $r = 0 ] || rc=1
    parts+="${parts:+; }$tool $b: ${one} (exit $r)"
    tail -5 "$f" >>"$log"
  done
  FACTS=$parts
  return $rc
}

# ncu into $ncu (the caller's local), else FACTS and the step's code: 77 (a dry run's skip) or 1.
need_ncu() {
  ncu=$(find_tool ncu) && return 0
  FACTS="ncu not found"
  [ $dry = 1 ] && { FACTS+=" (dry run)"; return 77; }
  return 1
}
# One kernel's ncu report ($1.ncu-rep) as text beside it, and its facts: time, SM and memory
# throughput, registers, occupancy.
ncu_facts() {
  local ncu=$1 rep=$2
  [ -f "$rep.ncu-rep" ] || { echo "no report"; return 1; }
  "$ncu" --import "$rep.ncu-rep" --page details >"$rep.txt" 2>&1
  awk '/^ *Duration /{v["time"]=$NF" "$(NF-1)} /Compute \(SM\) Throughput/{v["sm"]=$NF"%"} /^ *Memory Throughput .*%/{v["mem"]=$NF"%"}
       /Registers Per Thread/{v["regs"]=$NF} /Achieved Occupancy/{v["occ"]=$NF"%"}
       END {printf "%s, SM %s, mem %s, %s regs, occupancy %s", v["time"], v["sm"], v["mem"], v["regs"], v["occ"]}' "$rep.txt"
}
# ncu_kernel LOG REP KERNEL_REGEX RUN_ARGS...: the first launch of the kernel in `dlbench run
# RUN_ARGS` profiled (SpeedOfLight, Occupancy, MemoryWorkloadAnalysis, WarpStateStats, LaunchStats)
# into REP.ncu-rep; NCU_FACT = its facts. In this shell, not a subshell: run_cmd keeps the step's
# deadline and the pid the traps stop.
ncu_kernel() {
  local log=$1 rep=$2 k=$3 rc=0
  shift 3
  run_cmd "$log" "$ncu" --clock-control none --target-processes all -k "regex:$k" -c 1 --section SpeedOfLight \
    --section Occupancy --section MemoryWorkloadAnalysis --section WarpStateStats --section LaunchStats \
    -f -o "$rep" "$bin/dlbench" run "$@" --repetitions 1 --no-report --out "$rep-run" || rc=1
  NCU_FACT=$(ncu_facts "$ncu" "$rep") || rc=1
  return $rc
}

# ncu_profiles LOG DIR "NAME|KERNEL_REGEX|RUN_ARGS"...: each kernel profiled (ncu_kernel) into
# DIR/NAME; FACTS = "NAME: its facts; ...". RUN_ARGS split at spaces (no arguments with spaces).
ncu_profiles() {
  local log=$1 dir=$2 rc=0 parts="" spec name k args
  shift 2
  mkdir -p "$dir"
  for spec in "$@"; do
    IFS='|' read -r name k args <<<"$spec"
    local -a a=()
    read -r -a a <<<"$args"
    ncu_kernel "$log" "$dir/$name" "$k" "${a[@]}" || rc=1
    parts+="${parts:+; }$name: $NCU_FACT"
  done
  FACTS=$parts
  return $rc
}

step_ncu() {
  local log=$1 ncu impl dt k specs=()
  need_ncu || return $?
  for spec in "warptile fp32 sgemm_forward_warptile" "mma bf16 hgemm_forward_mma" "mma_256 bf16 hgemm_forward_mma"; do
    read -r impl dt k <<<"$spec"
    specs+=("$impl-$ncu_n|$k|--suite matmul --device $dev --sizes $ncu_n --dtype $dt --filter impl=$impl/size=$ncu_n\$")
  done
  ncu_profiles "$log" "$work/ncu" "${specs[@]}"
}

# Our tensor-core attention forward at seq 1024, head dim 64, causal (flash_tc: 40% of PyTorch's SDPA
# on the H100, 2026-11-27; issues 29 and 31 ask 50%), and its pipelined twin: what bounds them.
step_ncu_attn() {
  local log=$1 ncu impl specs=()
  need_ncu || return $?
  for impl in flash_tc flash_tc_pipe; do
    specs+=("$impl|flash_tc_fwd_k|--suite attention --device $dev --filter forward/.*impl=$impl/causal=true/seq=1024/head_dim=64/")
  done
  ncu_profiles "$log" "$work/ncu-attn" "${specs[@]}"
}

# Per-kernel device time of our GPU rnn training step at batch 1 and 8 (ours at 8 took 3.8x its
# batch-1 step on the H100, 2026-11-27; cuDNN's did not): one metric, every launch of a short run.
step_ncu_seq() {
  local log=$1 ncu rc=0 b parts="" one
  need_ncu || return $?
  mkdir -p "$work/ncu-seq"
  for b in 1 8; do
    local csv="$work/ncu-seq/rnn-b$b.csv"
    run_cmd "$log" "$ncu" --clock-control none --target-processes all --metrics gpu__time_duration.sum --csv \
      --launch-count 800 --log-file "$csv" "$bin/dlbench" run --suite seq --device "$dev" --op train --model rnn \
      --impl ours --batch "$b" --samples 16 --repetitions 1 --no-report --out "$work/ncu-seq/run-b$b" || rc=1
    one=$(facts ncu_kernels "$csv") || rc=1
    parts+="${parts:+; }b$b: $one"
  done
  FACTS=$parts
  return $rc
}

suite_args() {  # suite_args STEP: the suite and its flags
  case "$1" in
    matmul) echo "matmul --device $dev --quick" ;;
    conv) echo "conv --device $dev --quick" ;;
    transfer) echo "transfer --device $dev --quick" ;;
    lecture) echo "lecture --device $([ "$dev" = cpu ] || echo cpu,)$dev --quick --peer pytorch" ;;
    amp) echo "amp --device $dev --quick --model mlp,net128,rnn,lstm,transformer" ;;
    train) echo "train --device $dev --quick" ;;
    seq) echo "seq --device $([ "$dev" = cpu ] || echo cpu,)$dev --op train,infer --quick" ;;
    gpt2) echo "gpt2 --device $([ "$dev" = cpu ] || echo cpu,)$dev --quick --op train,infer --checkpoint-activations off,on --dtype fp32,tf32,bf16,fp16" ;;
    attention) echo "attention --device $dev --quick" ;;
    matmul-4096) echo "matmul --device $dev --sizes 1024,2048,4096" ;;
    attention-1024) echo "attention --device $dev --peer pytorch --filter seq=1024/head_dim=64/" ;;
    attention-fwd) echo "attention --device $dev --peer pytorch --filter forward/.*causal=true/seq=1024/head_dim=64/" ;;
    gpt2-124m) echo "gpt2 --device $dev --config gpt2-124m --batch 4 --seq-len 64,1024 --dtype fp32,bf16 --impl ours,pytorch --attn flash,unfused --profile" ;;
    gpt2-graph) echo "gpt2 --device $dev --config gpt2-124m --batch 4 --seq-len 64 --dtype fp32 --impl ours --cuda-graph" ;;
    seq-peer) echo "seq --device $dev --op train --batch 1,8,64 --peer pytorch" ;;
    infer-peer) echo "seq --device $dev --op infer --peer pytorch --infer-batch 1,64 --cuda-graph" ;;
    seq-profile) echo "seq --device $([ "$dev" = cpu ] || echo cpu,)$dev --op train --batch 1,8,64 --impl ours --profile" ;;
    seq-own-ws) echo "seq --device $dev --op train --batch 1,8,64 --impl ours --model rnn,lstm" ;;
    seq-fused) echo "seq --device $dev --op train --batch 1,8,64 --impl ours --model rnn,lstm --peer pytorch --cuda-graph" ;;
    matmul-full) echo "matmul --device $dev --sizes 1024,2048,4096,8192" ;;
    conv-full) echo "conv --device $dev" ;;
    transfer-full) echo "transfer --device $dev" ;;
    lecture-full) echo "lecture --device $dev --peer pytorch" ;;
    amp-full) echo "amp --device $dev --batch 64,256" ;;
    train-full) echo "train --device $dev" ;;
  esac
}

step_suite() {  # step_suite LOG STEP
  local log=$1 step=$2 rc
  local -a a
  read -r -a a <<<"$(suite_args "$step")"
  local extra_var; extra_var=DLB_ARGS_$(echo "$step" | tr 'a-z-' 'A-Z_')
  local -a extra=(); read -r -a extra <<<"${!extra_var:-}"
  local s=${a[0]}; a=("${a[@]:1}")
  local dir="$work/results/$step"
  if [ $dry = 1 ]; then  # no GPU: the same flags on the CPU with --list, so a typo shows before the GPU call
    local i; for i in "${!a[@]}"; do [ "${a[$i]}" = --device ] && a[$((i + 1))]=cpu; done
    run_cmd "$log" "$bin/dlbench" run --suite "$s" --no-report --out "$dir" --list "${a[@]}" "${extra[@]}"
    rc=$?
    local cases; cases=$(grep -c "^$s/" "$log")
    FACTS="dry run: flags accepted, $cases cases listed on cpu; the GPU run needs a GPU"
    [ $rc = 0 ] && return 77
    FACTS="flags refused (exit $rc): $(grep -m1 'error' "$log")"
    return 1
  fi
  local -a envs=(); read -r -a envs <<<"${STEP_ENV[$step]:-}"
  run_cmd "$log" env "${envs[@]}" "$bin/dlbench" run --suite "$s" --no-report --out "$dir" "${a[@]}" "${extra[@]}"
  rc=$?
  FACTS=$(facts results "$dir") || { [ $rc = 0 ] && rc=1; }
  return $rc
}

# ---- run the steps ------------------------------------------------------------------------------
i=0
for s in "${steps[@]}"; do
  i=$((i + 1))
  left=$((budget - (SECONDS - t_start) - 35))  # 30 s for a stopped step to end, 5 to write the files
  lim=${LIMIT[$s]}
  [ $left -lt "$lim" ] && lim=$left
  if [ "$lim" -lt 10 ]; then
    record "$s" "NOT RUN" - 0 "the call's budget is spent (DLB_CALL_BUDGET=$budget s): run it in the next call"
    continue
  fi
  log="$work/logs/$(printf %02d $i)-$s.log"
  : >"$log"
  echo "=== $s (limit $lim s): log $name/logs/$(basename "$log")"
  step_t0=$SECONDS step_deadline=$((SECONDS + lim)) STEP_TIMED_OUT=0 STEP_LIMIT_HIT=$lim FACTS="" cur_step=$s
  case "$s" in
    env|check|tests|rerun|sanitize|ncu) "step_$s" "$log" ;;
    ncu-seq) step_ncu_seq "$log" ;;
    ncu-attn) step_ncu_attn "$log" ;;
    *) step_suite "$log" "$s" ;;
  esac
  rc=$?
  cur_step=""
  secs=$((SECONDS - step_t0))
  if [ $STEP_TIMED_OUT = 1 ]; then result=TIMEOUT; FACTS="stopped at its limit of $STEP_LIMIT_HIT s; $FACTS"
  elif [ $rc = 0 ]; then result=ok
  elif [ $rc = 77 ]; then result=SKIP; rc=0
  else result=FAIL
  fi
  tail -4 "$log" | sed 's/^/    /'
  record "$s" "$result" "$rc" "$secs" "$FACTS"
done
