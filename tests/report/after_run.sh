#!/usr/bin/env bash
# after_run.sh DLBENCH WORK_DIR: a real `dlbench run` (matmul, CPU, --quick) ends by writing its report
# to RUN_DIR/report and printing the path; the page lists the run's cases and its plot is a PNG.
set -u
DLBENCH=$1 WORK=$2
rm -rf "$WORK"
out=$("$DLBENCH" run --suite matmul --device cpu --quick --out "$WORK" 2>"$WORK.stderr")
rc=$?
fail() { echo "FAIL: $*"; echo "--- stdout"; echo "$out"; echo "--- stderr"; cat "$WORK.stderr"; exit 1; }
[ $rc = 0 ] || fail "dlbench run exit $rc"
grep -qF "report:  $WORK/report/index.html" <<<"$out" || fail "no 'report:' line with the path"
[ -s "$WORK/report/index.html" ] || fail "no $WORK/report/index.html"
grep -qE 'matmul: [0-9]+ cases' "$WORK/report/index.html" || fail "the page does not list the matmul cases"
png=$(ls "$WORK"/report/fig*_gflops_matmul*.png 2>/dev/null | head -1)
[ -n "$png" ] || fail "no GFLOP/s plot"
[ "$(head -c 8 "$png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || fail "$png is not a PNG"
[ -s "$WORK/report/cases_matmul.csv" ] && [ -s "$WORK/report/cases_matmul.md" ] || fail "no CSV/MD tables"
echo "ok: $WORK/report/index.html"
