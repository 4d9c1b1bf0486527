#!/usr/bin/env bash
# bad_input.sh DLBENCH PYTHON DATA_DIR WORK_DIR: `dlbench report` (and reports/report.py run directly)
# on bad input: a missing folder, a folder with no results, truncated / foreign / empty JSON, a jsonl
# with a broken line, an uncreatable --out. Each must exit 2 with exactly one stderr line
# "dlbench: error: ..." that names the file, no traceback, and leave no report behind.
set -u
DLBENCH=$1 PY=$2 DATA=$3 WORK=$4
SCRIPT=$(cd "$(dirname "$0")/../../reports" && pwd)/report.py
rm -rf "$WORK" && mkdir -p "$WORK"
bad=0
expect2() {  # expect2 NAMED_FILE CMD...
  local named=$1; shift
  local err=$WORK/stderr
  "$@" >/dev/null 2>"$err"
  local rc=$? lines
  lines=$(grep -c '' "$err")
  if [ "$rc" != 2 ] || [ "$lines" != 1 ] || ! grep -q '^dlbench: error: ' "$err" || ! grep -qF -- "$named" "$err" \
     || grep -q Traceback "$err"; then
    echo "FAIL: $* -> exit $rc, $lines line(s), want exit 2 and one line naming $named:"; cat "$err"; bad=$((bad + 1))
  else
    echo "ok: $(cat "$err")"
  fi
}
B=$DATA/bad
for via in cli script; do
  if [ $via = cli ]; then run=("$DLBENCH" report); else run=("$PY" "$SCRIPT"); fi
  out=$WORK/out-$via
  expect2 "$WORK/no-such-folder" "${run[@]}" "$WORK/no-such-folder" --out "$out"
  expect2 "$B/no_results" "${run[@]}" "$B/no_results" --out "$out"
  expect2 "$B/truncated.json" "${run[@]}" "$B/truncated.json" --out "$out"
  expect2 "$B/foreign.json" "${run[@]}" "$B/foreign.json" --out "$out"
  expect2 "$B/gbench_only.json" "${run[@]}" "$B/gbench_only.json" --out "$out"
  expect2 "$B/empty.json" "${run[@]}" "$B/empty.json" --out "$out"
  expect2 "$B/empty_list/results.json" "${run[@]}" "$B/empty_list" --out "$out"
  expect2 "$B/bad_line/results.jsonl" "${run[@]}" "$B/bad_line" --out "$out"
  # a good run first, a bad one second: still exit 2, naming the bad one
  expect2 "$B/truncated.json" "${run[@]}" "$DATA/lecture_a" "$B/truncated.json" --out "$out"
  expect2 "/proc/dlbench-report" "${run[@]}" "$DATA/lecture_a" --out /proc/dlbench-report
  if [ -e "$out" ]; then echo "FAIL: a report folder was written for bad input ($out)"; bad=$((bad + 1)); fi
done
echo "$bad failure(s)"
[ $bad = 0 ]
