#!/usr/bin/env bash
# fault_resume.sh DLBENCH WORK [KILLS]: the fault test. A small CPU matmul sweep (124 quick cases) is
# killed KILLS times (default 20) at random moments with SIGKILL, SIGTERM or SIGINT, each time
# followed by `run --resume`; then one last --resume (with no flags: the stored options) finishes it.
# After every kill: each results.jsonl line is valid JSON, no case that had finished is lost or
# changed, no case is recorded twice, and a SIGTERM/SIGINT run exits 130 (0 if it had finished).
# At the end the case set equals the planned one and results.json says "complete".
set -u
bin=$1 work=$2 kills=${3:-20}
py=/usr/bin/python3; [ -x "$py" ] || py=python3
rm -rf "$work" && mkdir -p "$work" || exit 1
out=$work/run
sizes=$(seq -s, 8 2 130)
# openblas and blocked only: 124 cases whatever optional backends (oneDNN) the build has
args=(--suite matmul --device cpu --sizes "$sizes" --dtype fp32 --repetitions 3 --min-time 0.002 --no-report --filter 'impl=(openblas|blocked)/')
fail() { echo "FAIL: $*"; exit 1; }

# check.py PREV: validates results.jsonl and that every case in PREV (a snapshot, "" for none) is
# still there with the same lines; prints "N M" (cases done, planned).
check() {
  "$py" - "$out/results.jsonl" "$1" <<'EOF'
import json, sys
def cases(path):
    out, header = {}, None
    with open(path) as f:
        for n, line in enumerate(f, 1):
            try:
                e = json.loads(line)
            except ValueError:
                sys.exit(f"line {n} of {path} is not valid JSON: {line[:80]!r}")
            if "dlbench_run" in e:
                if n != 1: sys.exit(f"run header on line {n}")
                header = e["dlbench_run"]
                continue
            out.setdefault(e["run_name"], []).append(line)
    return header, out
header, now = cases(sys.argv[1])
for name, lines in now.items():  # each entry of a case (a repetition, an aggregate) once
    keys = [(e["name"], e.get("repetition_index")) for e in map(json.loads, lines)]
    if len(keys) != len(set(keys)): sys.exit(f"{name} recorded twice")
if sys.argv[2] and open(sys.argv[2]).read():
    _, before = cases(sys.argv[2])
    for name, lines in before.items():
        if now.get(name) != lines: sys.exit(f"finished case lost or changed: {name}")
planned = header["planned"] if header else []
if set(now) - set(planned): sys.exit(f"cases not in the plan: {sorted(set(now) - set(planned))[:3]}")
print(len(now), len(planned))
EOF
}

sigs=(KILL TERM INT)
kill130=0 sigkills=0
: >"$work/prev.jsonl"
"$bin" run "${args[@]}" --out "$out" >/dev/null 2>"$work/err" &
pid=$!
for i in $(seq 1 "$kills"); do
  sig=${sigs[RANDOM % 3]}
  sleep "0.$(( RANDOM % 6 + 1 ))$(( RANDOM % 10 ))"
  kill -"$sig" "$pid" 2>/dev/null
  { wait "$pid"; } 2>/dev/null; rc=$?
  case "$sig:$rc" in
    KILL:137) sigkills=$((sigkills + 1)) ;;
    TERM:130 | INT:130) kill130=$((kill130 + 1)) ;;
    *:0) ;;  # it had finished before the signal
    TERM:143 | INT:130) ;;  # before the handlers were installed (process start)
    *) cat "$work/err"; fail "kill $i: SIG$sig gave exit $rc" ;;
  esac
  if [ -s "$out/results.jsonl" ]; then
    got=$(check "$work/prev.jsonl" 2>&1) || fail "kill $i (SIG$sig): $got"
    cp "$out/results.jsonl" "$work/prev.jsonl"
  else
    : >"$work/prev.jsonl"; got=""
  fi
  echo "kill $i: SIG$sig exit $rc, cases done/planned: ${got:-0 ?}"
  "$bin" run "${args[@]}" --resume "$out" >/dev/null 2>"$work/err" &
  pid=$!
done
wait "$pid"; rc=$?
[ "$rc" = 0 ] || { cat "$work/err"; fail "the run after the last kill exited $rc"; }
"$bin" run --resume "$out" --no-report >/dev/null 2>"$work/err" || { cat "$work/err"; fail "final bare --resume failed"; }
got=$(check "$work/prev.jsonl") || fail "final: $got"
read -r done planned <<<"$got"
[ "$planned" = 124 ] && [ "$done" = "$planned" ] || fail "final case set: $done of $planned"
grep -q '"state": "complete"' "$out/results.json" || fail "results.json not marked complete"
"$py" -c "import json,sys; d=json.load(open(sys.argv[1])); n={e['run_name'] for e in d['benchmarks']}; sys.exit(0 if len(n)==124 else 1)" \
  "$out/results.json" || fail "results.json does not hold the 124 cases"
echo "ok: $kills kills ($sigkills SIGKILL, $kill130 exited 130 on SIGTERM/SIGINT), 0 finished cases lost, $done of $planned cases"
