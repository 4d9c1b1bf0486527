#!/usr/bin/env bash
# ci/regression_gate.sh: the CI regression gate. Runs the quick suites on this machine, then
# `dlbench baseline check` against the baseline saved for this machine's fingerprint.
#
#   ci/regression_gate.sh [--baselines DIR] [--out DIR] [--suite LIST] [--device D]
#                         [--threshold T] [--time real|cpu] [--save-missing] [--require]
#
# Exit: 0 no regression (also when this machine has no baseline yet: it says so, and with
# --save-missing saves this run as the baseline); 1 a case significantly slower beyond the threshold
# or failing verification; 2 bad usage/input, or the build is missing; 3 inconclusive (cases NOISY,
# e.g. a change the recorded machine load can explain: rerun on a quieter runner).
# Writes OUT/run (results), OUT/check.txt and OUT/check.json (the verdicts), OUT/report (HTML, when
# the report generator is available) -- upload OUT as the CI artifact.
# Environment: DLBENCH (the CLI, default build/bin/dlbench), DLBENCH_BASELINE_DIR (default for
# --baselines), GITHUB_STEP_SUMMARY / GITHUB_ACTIONS (GitHub annotations and job summary).
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CLI=${DLBENCH:-$ROOT/build/bin/dlbench}
BASELINES=${DLBENCH_BASELINE_DIR:-}
OUT=gate-out
SUITE=all
DEVICE=all
THRESHOLD=5%
TIME=real
EXTRA=()

usage() { echo "regression_gate: error: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case $1 in
    --baselines) BASELINES=${2:-}; shift 2 ;;
    --out) OUT=${2:-}; shift 2 ;;
    --suite) SUITE=${2:-}; shift 2 ;;
    --device) DEVICE=${2:-}; shift 2 ;;
    --threshold) THRESHOLD=${2:-}; shift 2 ;;
    --time) TIME=${2:-}; shift 2 ;;  # cpu: for a runner shared with other jobs (wall time follows the load)
    --save-missing|--require) EXTRA+=("$1"); shift ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) usage "unknown argument '$1'" ;;
  esac
done
[ -n "$BASELINES" ] || usage "no baseline folder (--baselines DIR or DLBENCH_BASELINE_DIR)"
[ -x "$CLI" ] || usage "$CLI not found; build first (./dlbench build)"
mkdir -p "$OUT" || usage "cannot create $OUT"
rm -rf "$OUT/run"

annotate() {  # annotate LEVEL MESSAGE: a GitHub Actions annotation when running there, else a line
  if [ -n "${GITHUB_ACTIONS:-}" ]; then echo "::$1::$2"; else echo "regression_gate: $1: $2"; fi
}

# 1. The quick suites. --repetitions 5: --quick alone times 3 repetitions, and 3 v 3 can never reach
#    p < 0.05 in the Mann-Whitney test, so no regression could ever be flagged.
"$CLI" run --suite "$SUITE" --device "$DEVICE" --quick --repetitions 5 --no-report --out "$OUT/run"
run_rc=$?
case $run_rc in
  0) ;;
  1) annotate error "some cases failed verification (see $OUT/run); the check below reports them as FAILED" ;;
  *) echo "regression_gate: dlbench run exited $run_rc" >&2; exit 2 ;;
esac

# 2. The report (optional: needs python3 + matplotlib).
if ! "$CLI" report "$OUT/run" --out "$OUT/report" >"$OUT/report.log" 2>&1; then
  annotate warning "no HTML report (see $OUT/report.log)"
fi

# 3. The check against this machine's baseline (text for people), then the same comparison as JSON.
"$CLI" baseline check "$OUT/run" --dir "$BASELINES" --threshold "$THRESHOLD" --time "$TIME" "${EXTRA[@]}" 2>&1 | tee "$OUT/check.txt"
rc=${PIPESTATUS[0]}
base=$(sed -n 's/^baseline for this machine: //p' "$OUT/check.txt" | head -1)
if [ -n "$base" ]; then
  "$CLI" compare "$base/results.json" "$OUT/run" --threshold "$THRESHOLD" --time "$TIME" --json >"$OUT/check.json" 2>/dev/null
fi

if grep -q '^no baseline for this machine' "$OUT/check.txt"; then
  annotate warning "$(grep '^no baseline for this machine' "$OUT/check.txt")"
fi
if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then
  { echo "### dlbench regression gate (exit $rc)"; echo '```'; cat "$OUT/check.txt"; echo '```'; } >>"$GITHUB_STEP_SUMMARY"
fi
[ "$rc" = 1 ] && annotate error "$(grep '^dlbench: error: regression' "$OUT/check.txt" | head -1 | sed 's/^dlbench: error: //')"
[ "$rc" = 3 ] && annotate error "$(grep '^dlbench: error: inconclusive' "$OUT/check.txt" | head -1 | sed 's/^dlbench: error: //')"
exit "$rc"
