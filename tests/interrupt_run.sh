#!/usr/bin/env bash
# interrupt_run.sh DLBENCH OUTDIR: starts a long sweep, sends Ctrl-C (SIGINT) once the first case is on
# disk, and checks nothing is lost: exit 130, results.jsonl keeps the finished cases (after its run
# header line), results.json is complete JSON marked "interrupted": true.
set -u
bin=$1; out=$2
rm -rf "$out" && mkdir -p "$(dirname "$out")"  # ctest in a fresh build folder: no smoke-out/ yet
# 17 sizes: 51 cases, more than one interleaved window (16), so the run goes on after the first lands
"$bin" run --suite matmul --device cpu --sizes "$(seq -s, 64 2 96)" \
  --repetitions 5 --min-time 0.05 --no-report --out "$out" >/dev/null 2>"$out.err" &
pid=$!
for _ in $(seq 1 1200); do
  [ "$(grep -c '' "$out/results.jsonl" 2>/dev/null)" -ge 2 ] && break  # the header, then a case
  sleep 0.05
done
kill -INT $pid
wait $pid
rc=$?
[ $rc = 130 ] || { echo "expected exit 130 after SIGINT, got $rc"; cat "$out.err"; exit 1; }
lines=$(grep -vc '"dlbench_run"' "$out/results.jsonl")
[ "$lines" -ge 1 ] || { echo "results.jsonl lost the finished cases"; exit 1; }
py=$(command -v python3 || true)
grep -q '"interrupted": true' "$out/results.json" || { echo "results.json not marked interrupted"; exit 1; }
total=$(grep -c '"run_name"' "$out/results.json")
[ "$total" = "$lines" ] || { echo "results.json has $total entries, results.jsonl $lines"; exit 1; }
echo "ok: interrupted after $lines entries, exit $rc"
