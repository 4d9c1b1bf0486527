#!/usr/bin/env bash
# results_files.sh MODE DLBENCH WORK: the files dlbench reads and writes (issue 27), with real hard links,
# symlinks, FIFOs, devices, signals and resource limits. tests/smoke_results.cmake registers one CTest
# test per mode:
#   snapshot  after `cp -al RUN SNAP`, --force and --resume on RUN leave SNAP's files byte for byte
#   lock      a .dlbench.lock that is a symlink (its target untouched) or a FIFO is refused, exit 2
#   plan      --resume refuses a results.jsonl holding a record not in the run's plan
#   force     --force removes the old run's report/ and traces/ (made by dlbench), keeps a user's folder
#   special   a FIFO or /dev/zero link as results.jsonl (--resume), key.txt (baseline check --dir) or a
#             DLBENCH_POWERCAP_ROOT counter: refused or noted, never a hang or unbounded read
#   header    --resume refuses stored options outside the flags' ranges (2e9 and -5 repetitions, 1e9 s)
#   deep      a valid results.json nested 150,000 levels deep: compare and baseline save exit 2, one line
#   fsize     under `ulimit -f`, run and baseline save exit with one line naming EFBIG, no temp file left
#   full      on a full disk (a small tmpfs; 77 where none can be mounted) run and baseline save exit
#             with one line naming the path and ENOSPC, no temporary file left
#   report    SIGTERM and SIGINT to `dlbench report` reach its Python child at once
set -u
mode=$1 bin=$2 work=$3
case $bin in /*) ;; */*) bin=$PWD/$bin ;; esac
case $work in /*) ;; *) work=$PWD/$work ;; esac
rm -rf "$work" && mkdir -p "$work" || exit 1
small=(--suite matmul --device cpu --sizes 8,16 --dtype fp32 --repetitions 2 --min-time 0.001 --no-report --filter 'impl=(openblas|blocked)/')
fail() { echo "FAIL: $*"; exit 1; }

# expect CODE PATTERN ARGS...: exit CODE; for a non-empty PATTERN exactly one stderr line, a
# "dlbench: error:" one matching it. Bounded by timeout: a hang is a failure, not a stuck test.
expect() {
  local want=$1 pat=$2; shift 2
  timeout -k 5 60 "$bin" "$@" >"$work/out" 2>"$work/err" </dev/null
  local got=$?
  [ "$got" = "$want" ] || { cat "$work/err"; fail "dlbench $*: exit $got, expected $want"; }
  if [ -n "$pat" ]; then
    [ "$(grep -c '' "$work/err")" = 1 ] && grep -Eq "^dlbench: error: .*$pat" "$work/err" ||
      { cat "$work/err"; fail "dlbench $*: not one error line matching '$pat'"; }
  fi
  echo "ok: dlbench $* -> $got"
}
same() { cmp -s "$1" "$2" || fail "$1 changed (it is a snapshot's file)"; }

case $mode in
snapshot)
  expect 0 "" run "${small[@]}" --out "$work/run"
  head -n 2 "$work/run/results.jsonl" > "$work/cut" && cp "$work/cut" "$work/run/results.jsonl"  # "interrupted" after 1 case
  cp -al "$work/run" "$work/snap"
  cp -a "$work/snap" "$work/copy"  # what the snapshot holds now, by value
  expect 0 "" run --resume "$work/run" --no-report
  for f in results.jsonl results.json .dlbench.lock; do same "$work/snap/$f" "$work/copy/$f"; done
  [ "$(grep -c '' "$work/run/results.jsonl")" -gt 2 ] || fail "--resume added no cases"
  expect 0 "" run --suite matmul --device cpu --sizes 24 --dtype fp32 --repetitions 2 --min-time 0.001 --no-report --out "$work/run" --force
  for f in results.jsonl results.json .dlbench.lock; do same "$work/snap/$f" "$work/copy/$f"; done
  grep -q 'size=24' "$work/run/results.jsonl" || fail "--force did not write the new run"
  # a results.jsonl that is a symlink to a file elsewhere: replaced, the target untouched
  head -n 2 "$work/copy/results.jsonl" > "$work/outside.jsonl" && cp "$work/outside.jsonl" "$work/outside.orig"
  cp -a "$work/copy" "$work/sym" && ln -sf "$work/outside.jsonl" "$work/sym/results.jsonl"
  expect 0 "" run --resume "$work/sym" --no-report
  same "$work/outside.jsonl" "$work/outside.orig"
  ls -a "$work/run" "$work/sym" | grep -q '\.tmp$' && fail "a temporary file was left behind"
  echo "ok: hard-linked and symlinked results files never written through" ;;
lock)
  echo "precious" > "$work/target"
  mkdir -p "$work/a" && ln -s "$work/target" "$work/a/.dlbench.lock"
  expect 2 "lock.*symbolic link" run "${small[@]}" --out "$work/a"
  [ "$(cat "$work/target")" = precious ] || fail "the lock symlink's target was written"
  mkdir -p "$work/b" && mkfifo "$work/b/.dlbench.lock"
  expect 2 "lock.*not a regular file" run "${small[@]}" --out "$work/b"
  mkdir -p "$work/c" && ln -s /dev/null "$work/c/.dlbench.lock"
  expect 2 "lock.*symbolic link" run "${small[@]}" --out "$work/c" ;;
plan)
  expect 0 "" run "${small[@]}" --out "$work/r"
  expect 0 "" run --suite transfer --device cpu --quick --repetitions 2 --min-time 0.001 --no-report --out "$work/t"
  head -n 2 "$work/r/results.jsonl" > "$work/mixed" && sed -n 2p "$work/t/results.jsonl" >> "$work/mixed"
  cp "$work/mixed" "$work/r/results.jsonl" && rm -f "$work/r/results.json"
  expect 2 "not in the run's plan" run --resume "$work/r" --no-report
  cmp -s "$work/mixed" "$work/r/results.jsonl" || fail "a refused resume changed results.jsonl" ;;
force)
  expect 0 "" run "${small[@]}" --out "$work/r"
  mkdir -p "$work/r/report/plots" "$work/r/traces" "$work/r/mine"
  echo x > "$work/r/report/index.html" && echo x > "$work/r/report/plots/a.png" && echo x > "$work/r/traces/t.json"
  echo keep > "$work/r/mine/notes.txt"
  expect 0 "" run "${small[@]}" --out "$work/r" --force
  [ -e "$work/r/report" ] && fail "--force left the old report/"
  [ -e "$work/r/traces" ] && fail "--force left the old traces/"
  [ "$(cat "$work/r/mine/notes.txt")" = keep ] || fail "--force removed a folder dlbench did not make"
  # a report/ holding a link is not one dlbench made: kept, and its link's target untouched
  mkdir -p "$work/r/report" && echo keep > "$work/outside" && ln -s "$work/outside" "$work/r/report/link"
  expect 0 "" run "${small[@]}" --out "$work/r" --force
  [ -L "$work/r/report/link" ] && [ "$(cat "$work/outside")" = keep ] || fail "--force removed a report/ with a link in it" ;;
special)
  expect 0 "" run "${small[@]}" --out "$work/r"
  cp -a "$work/r" "$work/f" && rm "$work/f/results.jsonl" && mkfifo "$work/f/results.jsonl"
  expect 2 "results.jsonl.*FIFO" run --resume "$work/f" --no-report
  cp -a "$work/r" "$work/z" && ln -sf /dev/zero "$work/z/results.jsonl"
  expect 2 "results.jsonl.*device" run --resume "$work/z" --no-report
  expect 0 "" baseline save "$work/r" --dir "$work/bl"
  for k in "$work"/bl/*/key.txt; do rm "$k" && mkfifo "$k"; done
  expect 2 "key.txt.*FIFO" baseline check "$work/r" --dir "$work/bl"
  for k in "$work"/bl/*/key.txt; do rm "$k" && ln -s /dev/zero "$k"; done
  expect 2 "key.txt.*device" baseline check "$work/r" --dir "$work/bl"
  mkdir -p "$work/rapl/intel-rapl:0" && mkfifo "$work/rapl/intel-rapl:0/energy_uj"
  DLBENCH_POWERCAP_ROOT=$work/rapl expect 0 "" run --suite matmul --device cpu --sizes 8 --dtype fp32 --repetitions 2 --min-time 0.001 --no-report --filter impl=blocked/ --no-interleave --out "$work/p"
  grep -q 'energy_uj: not a regular file (a FIFO)' "$work/p/results.json" || fail "the FIFO counter is not named in energy_note"
  rm "$work/rapl/intel-rapl:0/energy_uj" && ln -s /dev/zero "$work/rapl/intel-rapl:0/energy_uj"
  DLBENCH_POWERCAP_ROOT=$work/rapl expect 0 "" run --suite matmul --device cpu --sizes 8 --dtype fp32 --repetitions 2 --min-time 0.001 --no-report --filter impl=blocked/ --no-interleave --out "$work/p2"
  grep -q 'energy_uj: not a regular file (a device)' "$work/p2/results.json" || fail "the /dev/zero counter is not named in energy_note" ;;
header)
  expect 0 "" run "${small[@]}" --out "$work/r"
  head -n 2 "$work/r/results.jsonl" > "$work/cut"
  for bad in '"repetitions":2000000000' '"repetitions":-5' '"min_time":1000000000.0'; do
    key=${bad%%:*}
    rm -rf "$work/h" && cp -a "$work/r" "$work/h" && rm -f "$work/h/results.json"
    sed "1s/$key:[-0-9.e]*/$bad/" "$work/cut" > "$work/h/results.jsonl"
    grep -q "$bad" "$work/h/results.jsonl" || fail "the header edit '$bad' did not apply"
    expect 2 "${key//\"/}.*not" run --resume "$work/h" --no-report
  done ;;
deep)
  expect 0 "" run "${small[@]}" --out "$work/r"
  # valid JSON and a results file in every other respect: the context holds a value 150,000 deep
  python3 - "$work/r/results.json" "$work/deep.json" <<'PY' || fail "cannot write the deep file"
import json, sys
doc = json.load(open(sys.argv[1]))
doc["context"]["deep"] = "@DEEP@"
open(sys.argv[2], "w").write(json.dumps(doc).replace('"@DEEP@"', "[" * 150000 + "]" * 150000))
PY
  expect 2 "nested deeper than" compare "$work/r" "$work/deep.json"
  expect 2 "nested deeper than" compare "$work/deep.json" "$work/r"
  expect 2 "nested deeper than" baseline save "$work/deep.json" --dir "$work/bl"
  [ -n "$(ls -A "$work/bl" 2>/dev/null)" ] && fail "baseline save wrote something for a refused input"
  echo "ok: deep nesting refused" ;;
fsize)
  # ulimit -f counts 1024-byte blocks: 8 KiB is less than a results.json of two cases
  expect 0 "" run "${small[@]}" --out "$work/r"
  ( ulimit -f 8; exec timeout -k 5 60 "$bin" run --suite matmul --device cpu --sizes 8,16,24,32 --dtype fp32 --repetitions 2 --min-time 0.001 --no-report --out "$work/f" ) >/dev/null 2>"$work/err"
  rc=$?
  [ "$rc" = 1 ] || [ "$rc" = 2 ] || { cat "$work/err"; fail "run under ulimit -f: exit $rc, expected 1 or 2"; }
  grep -Eq '^dlbench: error: .*EFBIG' "$work/err" || { cat "$work/err"; fail "run under ulimit -f: no line naming EFBIG"; }
  ls -A "$work/f" | grep -q 'tmp' && fail "run under ulimit -f left a temporary file: $(ls -A "$work/f")"
  echo "ok: run under ulimit -f -> $rc, one line naming EFBIG"
  ( ulimit -f 4; exec timeout -k 5 60 "$bin" baseline save "$work/r" --dir "$work/bl" ) >/dev/null 2>"$work/err"
  rc=$?
  [ "$rc" = 2 ] && [ "$(grep -c '' "$work/err")" = 1 ] && grep -Eq '^dlbench: error: .*EFBIG' "$work/err" ||
    { cat "$work/err"; fail "baseline save under ulimit -f: exit $rc, expected 2 and one line naming EFBIG"; }
  find "$work/bl" -name '*.tmp*' | grep -q . && fail "baseline save under ulimit -f left a temporary file"
  find "$work/bl" -name results.json | grep -q . && fail "baseline save under ulimit -f left a half-written results.json"
  echo "ok: baseline save under ulimit -f -> 2, one line naming EFBIG" ;;
full)
  # a full disk: a small tmpfs (77 when it cannot be mounted here: not root, or no CAP_SYS_ADMIN)
  mkdir -p "$work/mnt"
  mount -t tmpfs -o size=256k tmpfs "$work/mnt" 2>/dev/null || { echo "skipped: cannot mount a tmpfs here"; exit 77; }
  trap 'umount "$work/mnt" 2>/dev/null' EXIT
  expect 0 "" run "${small[@]}" --out "$work/r"
  fill() {  # fill ROOM: leaves ROOM bytes free on the tmpfs
    rm -f "$work/mnt/fill"
    local avail=$(( $(stat -f -c '%a * %S' "$work/mnt") ))
    head -c $(( avail - $1 )) /dev/zero > "$work/mnt/fill" 2>/dev/null
  }
  for room in 0 8192; do
    rm -rf "$work/mnt/out" "$work/mnt/bl"; fill "$room"
    timeout -k 5 60 "$bin" run "${small[@]}" --out "$work/mnt/out" >/dev/null 2>"$work/err" </dev/null
    rc=$?
    { [ "$rc" = 1 ] || [ "$rc" = 2 ]; } && grep -Eq "^dlbench: error: .*$work/mnt/out.*ENOSPC" "$work/err" ||
      { cat "$work/err"; fail "run on a full disk ($room bytes free): exit $rc, expected 1 or 2 and a line naming the path and ENOSPC"; }
    [ "$(grep -c 'dlbench: error:' "$work/err")" = 1 ] || { cat "$work/err"; fail "run on a full disk: not one error line"; }
    ls -A "$work/mnt/out" | grep -q 'tmp' && fail "run on a full disk left a temporary file: $(ls -A "$work/mnt/out")"
    echo "ok: run on a full disk ($room bytes free) -> $rc, $(cat "$work/err")"
    expect 2 "ENOSPC" baseline save "$work/r" --dir "$work/mnt/bl"
    find "$work/mnt/bl" -name '*.tmp' | grep -q . && fail "baseline save on a full disk left a temporary file"
  done ;;
report)
  # a stand-in for Python that only waits: it must be signalled by dlbench while dlbench waits for it
  expect 0 "" run "${small[@]}" --out "$work/r"
  cat > "$work/py" <<EOS
#!/bin/bash
echo \$\$ > "$work/child.pid"
exec sleep 300
EOS
  chmod +x "$work/py"
  for sig in TERM INT; do
    rm -f "$work/child.pid"
    # dlbench itself is signalled (no timeout in between: it would signal the child's group itself);
    # a watchdog bounds a hang. A background job starts with SIGINT ignored, as from a script.
    DLBENCH_PYTHON=$work/py "$bin" report "$work/r" --out "$work/rep" >/dev/null 2>"$work/err" &
    pid=$!
    ( sleep 60; kill -KILL "$pid" 2>/dev/null ) >/dev/null 2>&1 & dog=$!  # not holding the output pipe
    for _ in $(seq 1 400); do [ -s "$work/child.pid" ] && break; sleep 0.05; done
    [ -s "$work/child.pid" ] || fail "the report child did not start"
    child=$(cat "$work/child.pid")
    kill -"$sig" "$pid"
    wait "$pid"; rc=$?
    kill "$dog" 2>/dev/null
    [ "$rc" = 137 ] && { kill -KILL "$child" 2>/dev/null; fail "SIG$sig to report: dlbench did not end (its child was not signalled)"; }
    [ "$rc" = 130 ] || { cat "$work/err"; fail "SIG$sig to report: exit $rc, expected 130"; }
    ! kill -0 "$child" 2>/dev/null || { kill -KILL "$child"; fail "SIG$sig to report: the child (pid $child) is still running"; }
    echo "ok: SIG$sig to report -> 130, child gone"
  done ;;
*) fail "unknown mode $mode" ;;
esac
echo "PASS $mode"
