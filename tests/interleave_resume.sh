#!/usr/bin/env bash
# interleave_resume.sh DLBENCH WORK: interleaved timing end to end. A 40-case CPU matmul sweep (windows
# of 16) is killed (SIGKILL) as soon as its second window starts: results.jsonl must hold exactly the
# first window's 16 cases, each with its 3 repetitions (6 if noisy) and 4 aggregates, and the context must record
# the interleaving and its seed. `run --resume` then reruns the killed window and finishes the rest:
# every planned case once, state complete. A --no-interleave run records the old timing mode.
set -u
bin=$1 work=$2
py=/usr/bin/python3; [ -x "$py" ] || py=python3
rm -rf "$work" && mkdir -p "$work" || exit 1
out=$work/run
fail() { echo "FAIL: $*"; exit 1; }
sizes=$(seq -s, 8 4 84)  # 20 sizes x (openblas, blocked) = 40 cases
"$bin" run --suite matmul --device cpu --sizes "$sizes" --dtype fp32 --repetitions 3 --min-time 0.05 --seed 11 \
  --no-report --out "$out" >/dev/null 2>"$work/err" &
pid=$!
for _ in $(seq 1 2400); do  # up to 120 s for the first window
  [ "$(grep -c 'setting up and verifying' "$work/err")" -ge 2 ] && break
  kill -0 $pid 2>/dev/null || break
  sleep 0.05
done
kill -KILL $pid 2>/dev/null
wait $pid 2>/dev/null
[ "$(grep -c 'setting up and verifying' "$work/err")" -ge 2 ] || { cat "$work/err"; fail "the second window never started"; }

check() {  # check.py STAGE: killed | complete
  "$py" - "$out" "$1" <<'PY'
import json, sys
out, stage = sys.argv[1], sys.argv[2]
cases, header = {}, None
for n, line in enumerate(open(out + "/results.jsonl"), 1):
    e = json.loads(line)
    if "dlbench_run" in e:
        header = e["dlbench_run"]
        continue
    cases.setdefault(e["run_name"], []).append(e)
planned = header["planned"]
if stage == "killed":
    if len(cases) != 16: sys.exit(f"after the kill: {len(cases)} cases on disk, expected the first window's 16")
    if list(cases) != planned[:16]: sys.exit("the first window's cases are not the first 16 planned, in order")
else:
    if sorted(cases) != sorted(planned): sys.exit(f"{len(cases)} of {len(planned)} planned cases after --resume")
    run = json.load(open(out + "/results.json"))["context"]["run"]
    if run["state"] != "complete": sys.exit(f"state {run['state']}")
    t = run["timing"]
    if t["mode"] != "interleaved" or t["seed"] != 11: sys.exit(f"context.run.timing is {t}")
for name, es in cases.items():
    its = [e for e in es if e["run_type"] == "iteration"]
    aggs = [e["aggregate_name"] for e in es if e["run_type"] == "aggregate"]
    n = len(its)  # 3, or 6 for a case the noise policy gave extra rounds
    if n not in (3, 6) or [e["repetition_index"] for e in its] != list(range(n)) or any(e["repetitions"] != n for e in its) \
            or aggs != ["mean", "median", "stddev", "cv"]:
        sys.exit(f"{name}: repetitions {[e.get('repetition_index') for e in its]}, aggregates {aggs}")
    if not all(e["verified"] and e["real_time"] > 0 for e in its): sys.exit(f"{name}: unverified or no time")
print(len(cases), "of", len(planned))
PY
}
r=$(check killed 2>&1) || fail "$r"
echo "killed in window 2: $r cases kept"
"$bin" run --resume "$out" >/dev/null 2>"$work/err2"; rc=$?
[ $rc -eq 0 ] || { tail -3 "$work/err2"; fail "--resume exited $rc"; }
r=$(check complete 2>&1) || fail "$r"
echo "resumed: $r cases"

"$bin" run --suite matmul --device cpu --sizes 8,16 --dtype fp32 --repetitions 3 --min-time 0.01 --no-interleave \
  --no-report --out "$work/b2b" >/dev/null 2>"$work/err3" || { tail -3 "$work/err3"; fail "--no-interleave run failed"; }
grep -q '"mode": "back-to-back"' "$work/b2b/results.json" || fail "--no-interleave not recorded in the context"
echo "ok"
