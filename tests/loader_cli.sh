#!/usr/bin/env bash
# loader_cli.sh DLBENCH WORK: the data loader from the command line. `data make` writes every form and
# `data load` reads each (no workers, 2 threads, 2 processes; every epoch checked by the command
# itself). Then its workers under signals and faults, as real processes (process workers): Ctrl-C to the whole process group (as a terminal sends it)
# or to dlbench alone stops every worker and exits 130; dlbench killed (SIGKILL) takes its workers
# with it; a worker killed, or one that throws (DLBENCH_LOADER_FAULT), ends the run with exit 1 and
# one line naming the worker. After each case no worker process is left.
set -u
bin=$1 work=$2
rm -rf "$work" && mkdir -p "$work" || exit 1
fail() { echo "FAIL: $*"; exit 1; }
"$bin" data make cifar10 "$work/ds" --format python,binary,png,jpeg --images 400 >/dev/null || fail "data make"
for form in none png jpeg "none --loader preset=lecture" "none --pin on --augment crop-flip"; do
  "$bin" data load "$work/ds" --decode $form --workers 0,2 --mode thread,process --epochs 2 >"$work/out" 2>"$work/err" ||
    fail "data load --decode $form: exit $?: $(cat "$work/err")"
  [ "$(grep -c '^| *\(-\|thread\|process\) ' "$work/out")" = 3 ] || fail "data load --decode $form: not 3 rows: $(cat "$work/out")"
done
"$bin" data load "$work/ds/cifar-10-batches-bin" --workers 1 >/dev/null 2>"$work/err" || fail "data load binary: $(cat "$work/err")"
set -m  # each background job in its own process group (its pid), so a signal can go to the group

# start ARGS...: dlbench data load in the background, forever (many epochs); waits for its 2 workers.
start() {
  "$bin" data load "$work/ds" --decode png --workers 2 --mode process --batch 16 --epochs 1000000 "$@" \
    >"$work/out" 2>"$work/err" &
  pid=$!
  for _ in $(seq 1 200); do
    kids=$(pgrep -P "$pid" | tr '\n' ' ')
    [ "$(echo $kids | wc -w)" = 2 ] && return 0
    sleep 0.05
  done
  fail "no 2 workers under dlbench $pid after 10 s: $(cat "$work/err")"
}
none_left() {  # none_left WHAT: every worker pid in $kids is gone (within 2 s)
  for _ in $(seq 1 40); do
    left=""
    for k in $kids; do kill -0 "$k" 2>/dev/null && left="$left $k"; done
    [ -z "$left" ] && return 0
    sleep 0.05
  done
  fail "$1: workers$left still alive"
}
finish() {  # finish WANT_RC WHAT: waits for dlbench (at most 10 s) and checks its exit code
  for _ in $(seq 1 200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
  kill -0 "$pid" 2>/dev/null && { kill -KILL "$pid"; fail "$2: dlbench still running 10 s after"; }
  wait "$pid"; rc=$?
  [ "$rc" = "$1" ] || fail "$2: exit $rc, expected $1; stderr: $(cat "$work/err")"
}

start; sleep 0.3; kill -INT -- "-$pid"; finish 130 "Ctrl-C to the group"; none_left "Ctrl-C to the group"
start; sleep 0.3; kill -INT "$pid"; finish 130 "SIGINT to dlbench"; none_left "SIGINT to dlbench"
start; sleep 0.3; kill -TERM "$pid"; finish 130 "SIGTERM to dlbench"; none_left "SIGTERM to dlbench"
start; sleep 0.3; kill -KILL "$pid"; finish 137 "SIGKILL to dlbench"; none_left "SIGKILL to dlbench"

start; sleep 0.3; victim=${kids%% *}; kill -KILL "$victim"; finish 1 "a worker killed"; none_left "a worker killed"
grep -q "^dlbench: error: loader worker [01] (pid $victim) died: killed by signal 9" "$work/err" ||
  fail "a worker killed: stderr does not name it: $(cat "$work/err")"
[ "$(grep -c '' "$work/err")" = 1 ] || fail "a worker killed: stderr is not one line: $(cat "$work/err")"

DLBENCH_LOADER_FAULT=throw@5 timeout -k 2 20 "$bin" data load "$work/ds" --decode png --workers 2 --mode process \
  --batch 16 --epochs 3 >"$work/out" 2>"$work/err"
rc=$?
[ "$rc" = 1 ] || fail "a worker throws: exit $rc, expected 1"
grep -qx "dlbench: error: loader worker 1: injected fault at batch 5 (DLBENCH_LOADER_FAULT)" "$work/err" ||
  fail "a worker throws: stderr: $(cat "$work/err")"
echo "ok: Ctrl-C (group, dlbench), SIGTERM, SIGKILL, a killed and a throwing worker: no worker left"
