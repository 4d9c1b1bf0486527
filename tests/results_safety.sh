#!/usr/bin/env bash
# results_safety.sh MODE DLBENCH WORK: results folders are never lost or mixed (tests/smoke_results.cmake
# registers one CTest test per mode). Real runs of a tiny CPU matmul sweep, real signals.
#   refuse      a second run into a folder with results exits 2 (one line), the results untouched;
#               --force replaces them
#   lock        a second run on a folder a running one holds exits 2 naming the holder's pid
#   unique      four runs started together with no --out get four folders
#   resume      --resume refuses a changed suite, flag or machine (exit 2 naming it), a folder with
#               nothing to resume, and finishes an interrupted run
#   incomplete  an interrupted run: compare and baseline check exit 1 unless --allow-incomplete,
#               baseline save refuses it, report says "N of M cases"
#   signals     SIGTERM and SIGHUP behave like Ctrl-C: exit 130, results.json "state": "interrupted";
#               SIGTERM to `dlbench report` stops its generator child too
#   child       Ctrl-C while the OpenBLAS core probe (a child dlbench) runs: exit 130, the case is not
#               recorded as FAILED, the child is gone and its temporary folder removed; after SIGKILL the
#               probe dies with the run and the next probe removes its folder (77: no probe here)
set -u
mode=$1 bin=$2 work=$3
case $bin in /*) ;; */*) bin=$PWD/$bin ;; esac
case $work in /*) ;; *) work=$PWD/$work ;; esac
py=/usr/bin/python3; [ -x "$py" ] || py=python3
rm -rf "$work" && mkdir -p "$work" || exit 1
small=(--suite matmul --device cpu --sizes 8,16 --dtype fp32 --repetitions 2 --min-time 0.001 --no-report)
# Two CPU impls only (openblas, blocked): the case counts below must not depend on which optional
# backends (oneDNN) a build has. The filter is the last two words, so a test can swap it.
long=(--suite matmul --device cpu --sizes "$(seq -s, 8 4 200)" --dtype fp32 --repetitions 3 --min-time 0.003 --no-report --filter 'impl=(openblas|blocked)/')
fail() { echo "FAIL: $*"; exit 1; }

# expect CODE PATTERN ARGS...: runs dlbench; exit CODE and, for CODE 2, exactly one stderr line, a
# "dlbench: error:" one matching PATTERN ("" for CODE 0/1 skips the line check).
expect() {
  local want=$1 pat=$2; shift 2
  "$bin" "$@" >"$work/out" 2>"$work/err"
  local got=$?
  [ "$got" = "$want" ] || { cat "$work/err"; fail "dlbench $*: exit $got, expected $want"; }
  if [ -n "$pat" ]; then
    local errs
    errs=$(grep -c 'dlbench: error:' "$work/err")
    [ "$errs" = 1 ] && grep -Eq "dlbench: error: .*$pat" "$work/err" || { cat "$work/err"; fail "dlbench $*: no one error line matching '$pat'"; }
    if [ "$want" = 2 ]; then [ "$(grep -c '' "$work/err")" = 1 ] || { cat "$work/err"; fail "dlbench $*: more than one stderr line"; }; fi
  fi
  echo "ok: dlbench $* -> $got"
}

# start_long OUT: a long sweep in the background (pid in $pid), back once its first case is on disk
start_long() {
  "$bin" run "${long[@]}" --out "$1" >/dev/null 2>"$work/long.err" &
  pid=$!
  for _ in $(seq 1 600); do
    [ "$(grep -c '' "$1/results.jsonl" 2>/dev/null)" -ge 2 ] && return 0
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  cat "$work/long.err"; fail "the long run did not record a case"
}

stop() {  # stop SIG: signal the background run, wait, check it exits 130
  kill -"$1" "$pid"
  wait "$pid"; local rc=$?
  [ "$rc" = 130 ] || { cat "$work/long.err"; fail "SIG$1: exit $rc, expected 130"; }
}

case $mode in
refuse)
  expect 0 "" run "${small[@]}" --out "$work/r"
  sum=$(md5sum <"$work/r/results.jsonl")
  expect 2 "already holds results" run "${small[@]}" --out "$work/r"
  expect 2 "already holds results" run --suite matmul --device cpu --sizes 24 --no-report --out "$work/r"
  [ "$(md5sum <"$work/r/results.jsonl")" = "$sum" ] || fail "the refused run changed results.jsonl"
  expect 0 "" run --suite matmul --device cpu --sizes 24 --dtype fp32 --repetitions 2 --min-time 0.001 --no-report --out "$work/r" --force
  grep -q 'size=24' "$work/r/results.jsonl" && ! grep -q 'size=16' "$work/r/results.jsonl" || fail "--force did not replace the results"
  expect 2 "" run "${small[@]}" --out "$work/r" --resume "$work/r"  # --resume excludes --out
  ;;
lock)
  start_long "$work/l"
  expect 2 "in use by another dlbench run \\(pid $pid on " run "${small[@]}" --out "$work/l" --force
  expect 2 "in use by another dlbench run \\(pid $pid on " run --resume "$work/l" --no-report
  stop INT
  expect 0 "" run --resume "$work/l" --no-report  # released at exit
  ;;
unique)
  mkdir -p "$work/cwd" && cd "$work/cwd" || exit 1
  pids=()
  for i in 1 2 3 4; do "$bin" run "${small[@]}" >/dev/null 2>"$work/u$i.err" & pids+=($!); done
  for i in 0 1 2 3; do wait "${pids[$i]}" || { cat "$work/u$((i + 1)).err"; fail "default-folder run $((i + 1)) failed"; }; done
  n=$(ls -d results/*/ | wc -l)
  [ "$n" = 4 ] || { ls -l results; fail "4 runs made $n folders"; }
  for d in results/*/; do grep -q '"state": "complete"' "$d/results.json" || fail "$d: not a complete run"; done
  echo "ok: $(ls results | tr '\n' ' ')"
  ;;
resume)
  long=(--suite matmul --device cpu --sizes "$(seq -s, 8 4 100)" --dtype fp32 --repetitions 3 --min-time 0.003 --no-report --filter 'impl=(openblas|blocked)/')
  expect 2 "no such folder" run --resume "$work/none" --no-report
  [ ! -e "$work/none" ] || fail "--resume created the folder it was to resume"
  mkdir -p "$work/empty"
  expect 2 "nothing to resume" run --resume "$work/empty" --no-report
  mkdir -p "$work/old" && echo '{"name":"matmul/gemm/cpu/fp32/impl=openblas/size=8","run_name":"x"}' >"$work/old/results.jsonl"
  expect 2 "no run header" run --resume "$work/old" --no-report
  start_long "$work/r"
  stop INT
  expect 2 "suites was \\[\"matmul\"\\], now \\[\"conv\"\\]" run --resume "$work/r" --suite conv --device cpu --no-report
  expect 2 "different flags: overrides" run --resume "$work/r" --suite matmul --device cpu --sizes 8,12 --dtype fp32 --repetitions 3 --min-time 0.003 --no-report
  expect 2 "different flags: repetitions was 3, now 4" run --resume "$work/r" --suite matmul --device cpu --sizes "$(seq -s, 8 4 100)" --dtype fp32 --min-time 0.003 --repetitions 4 --no-report --filter 'impl=(openblas|blocked)/'
  cp -r "$work/r" "$work/m"
  "$py" - "$work/m/results.jsonl" <<'EOF' || fail "cannot edit the header"
import json, sys
lines = open(sys.argv[1]).read().splitlines()
h = json.loads(lines[0]); h["dlbench_run"]["machine"]["logical_cores"] = 96
open(sys.argv[1], "w").write("\n".join([json.dumps(h)] + lines[1:]) + "\n")
EOF
  expect 2 "different machine: logical_cores was 96" run --resume "$work/m" --no-report
  before=$(grep -vc dlbench_run "$work/r/results.jsonl")
  expect 0 "" run --resume "$work/r" --no-report
  grep -q '"state": "complete"' "$work/r/results.json" || fail "resumed run not complete"
  "$bin" run "${long[@]}" --list 2>/dev/null | sort >"$work/planned"
  "$py" -c "import json,sys; print('\n'.join(sorted({e['run_name'] for e in json.load(open(sys.argv[1]))['benchmarks']})))" \
    "$work/r/results.json" >"$work/got"
  diff -q "$work/planned" "$work/got" >/dev/null || fail "resumed case set differs from the planned one"
  echo "ok: resumed after $before entries; case set equals the planned one"
  ;;
incomplete)
  expect 0 "" run "${long[@]:0:${#long[@]}-2}" --filter 'impl=(openblas|blocked)/size=(8|12|16)$' --out "$work/a"
  start_long "$work/b"
  stop INT
  expect 1 "incomplete run \\(interrupted, [0-9]+ of 98 cases\\)" compare "$work/a" "$work/b"
  expect 1 "incomplete run" compare "$work/b" "$work/a"
  "$bin" compare "$work/a" "$work/b" --allow-incomplete --time cpu --threshold 1000% >/dev/null 2>"$work/err"
  rc=$?; { [ $rc = 0 ] || [ $rc = 1 ] || [ $rc = 3 ]; } && ! grep -q 'error: .*incomplete' "$work/err" || { cat "$work/err"; fail "--allow-incomplete: exit $rc"; }
  expect 2 "incomplete run" baseline save "$work/b" --dir "$work/bl"
  expect 0 "" baseline save "$work/a" --dir "$work/bl"
  expect 1 "incomplete run" baseline check "$work/b" --dir "$work/bl"
  # SIGKILL: nothing marks the run, the plan in the header still says how far it got
  "$bin" run "${long[@]}" --out "$work/k" >/dev/null 2>&1 &
  pid=$!
  for _ in $(seq 1 600); do [ "$(grep -c '' "$work/k/results.jsonl" 2>/dev/null)" -ge 2 ] && break; sleep 0.05; done
  kill -KILL $pid; wait $pid 2>/dev/null
  expect 1 "incomplete run \\(incomplete, [0-9]+ of 98 cases\\)" compare "$work/a" "$work/k"
  if "$py" -c 'import matplotlib' 2>/dev/null; then
    expect 0 "" report "$work/b" --out "$work/rep"
    grep -Eq "b: [0-9]+ of 98 cases \(interrupted\)" "$work/out" || { cat "$work/out"; fail "report did not print N of M cases"; }
    grep -Eq "[0-9]+ of 98 cases \(incomplete run\)" "$work/rep/index.html" || fail "the HTML report does not say N of M cases"
  else
    echo "note: no matplotlib for $py; report not checked"
  fi
  ;;
signals)
  for sig in TERM HUP; do
    start_long "$work/$sig"
    stop "$sig"
    grep -q '"state": "interrupted"' "$work/$sig/results.json" || fail "SIG$sig: results.json not marked interrupted"
    grep -q 'interrupted; results so far' "$work/long.err" || fail "SIG$sig: no interrupted message"
    echo "ok: SIG$sig -> exit 130, results.json interrupted"
  done
  # the report generator (a python child): SIGTERM to dlbench reaches it, exit 130, no child left
  "$py" -c 'import matplotlib' 2>/dev/null || { echo "note: no matplotlib for $py; report not checked"; exit 0; }
  "$bin" report "$work/TERM" --out "$work/rep" >/dev/null 2>"$work/long.err" &
  pid=$!
  child=""
  for _ in $(seq 1 200); do
    child=$(grep -l "^[0-9]* ([^)]*) [A-Z] $pid " /proc/[0-9]*/stat 2>/dev/null | head -1 | cut -d/ -f3)
    [ -n "$child" ] && break
    sleep 0.02
  done
  [ -n "$child" ] || fail "no report generator process seen"
  stop TERM
  for _ in $(seq 1 50); do kill -0 "$child" 2>/dev/null || break; sleep 0.1; done
  ! kill -0 "$child" 2>/dev/null || fail "the report generator (pid $child) outlived dlbench report"
  echo "ok: SIGTERM during report generation -> exit 130, generator gone"
  ;;
child)
  "$bin" run --suite matmul --device cpu --sizes 1024 --dtype fp32 --filter openblas-core --list 2>/dev/null | grep -q . ||
    { echo "no other OpenBLAS core to probe on this CPU"; exit 77; }
  mkdir -p "$work/tmp"
  TMPDIR=$work/tmp "$bin" run --suite matmul --device cpu --sizes 1024 --dtype fp32 --filter openblas-core --no-report \
    --out "$work/c" >/dev/null 2>"$work/long.err" &
  pid=$!
  for _ in $(seq 1 600); do ls "$work/tmp" | grep -q dlbench-core && break; sleep 0.05; done
  ls "$work/tmp" | grep -q dlbench-core || fail "no probe started"
  sleep 0.5
  child=$(grep -l "^[0-9]* ([^)]*) [A-Z] $pid " /proc/[0-9]*/stat 2>/dev/null | head -1 | cut -d/ -f3)  # ppid == run
  [ -n "$child" ] || fail "no child process of the run"
  stop INT
  ! grep -q FAILED "$work/long.err" || { cat "$work/long.err"; fail "the interrupted probe was recorded as FAILED"; }
  ! grep -v dlbench_run "$work/c/results.jsonl" | grep -q 'openblas-core' || fail "the interrupted probe case was recorded"
  [ -z "$(ls "$work/tmp")" ] || fail "temporary folder left: $(ls "$work/tmp")"
  ! kill -0 "$child" 2>/dev/null || fail "the probe (pid $child) outlived the run"
  echo "ok: probe interrupted, exit 130, nothing recorded or left behind"
  # SIGKILL of the run: its probe dies with it, and the next probe removes the folder it left
  TMPDIR=$work/tmp "$bin" run --suite matmul --device cpu --sizes 1024 --dtype fp32 --filter openblas-core --no-report \
    --out "$work/k" >/dev/null 2>"$work/long.err" &
  pid=$!
  for _ in $(seq 1 600); do ls "$work/tmp" | grep -q dlbench-core && break; sleep 0.05; done
  sleep 0.5
  child=$(grep -l "^[0-9]* ([^)]*) [A-Z] $pid " /proc/[0-9]*/stat 2>/dev/null | head -1 | cut -d/ -f3)
  [ -n "$child" ] || fail "no child process of the run"
  kill -KILL $pid; wait $pid 2>/dev/null
  for _ in $(seq 1 300); do kill -0 "$child" 2>/dev/null || break; sleep 0.1; done
  ! kill -0 "$child" 2>/dev/null || fail "the probe (pid $child) outlived a killed run by 30 s"
  [ -n "$(ls "$work/tmp")" ] || fail "expected the killed run's probe folder to be left (nothing could remove it)"
  TMPDIR=$work/tmp "$bin" run --suite matmul --device cpu --sizes 1024 --dtype fp32 --filter openblas-core --no-report \
    --repetitions 2 --out "$work/n" >/dev/null 2>"$work/long.err" || { cat "$work/long.err"; fail "the next probe run failed"; }
  [ -z "$(ls "$work/tmp")" ] || fail "stale probe folder not removed by the next run: $(ls "$work/tmp")"
  echo "ok: SIGKILL: the probe died with the run; its folder was removed by the next probe"
  ;;
*) fail "unknown mode $mode" ;;
esac
