#!/usr/bin/env bash
# A/A check of `dlbench compare`: N pairs of back-to-back real runs of the same build on the same
# machine (nothing changed), each pair compared; counts the pairs compare calls a regression (exit 1).
# Every one of them is a false regression. Runs are kept, so the comparisons can be redone later
# (COMPARE_ONLY=1) with another build of compare on the same data.
#   [COMPARE_FLAGS="--max-busy 100%"] ci/aa_compare.sh [PAIRS=20] [OUT=/tmp/dlbench-aa] [run flags...]
# Default run: --suite matmul --device cpu --sizes 256,512 (about 5-11 s a run on 2 cores). Runs are
# interleaved by default; pass run flags to compare modes, e.g. ... --sizes 256,512 --no-interleave.
# COMPARE_FLAGS="--max-busy 100% --noise-floor DIR" judges with a floor learned from earlier runs.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CLI=${DLBENCH_CLI:-$ROOT/build/bin/dlbench}
PAIRS=${1:-20}
OUT=${2:-/tmp/dlbench-aa}
shift $(( $# < 2 ? $# : 2 ))
FLAGS=("$@")
[ ${#FLAGS[@]} -eq 0 ] && FLAGS=(--suite matmul --device cpu --sizes 256,512)
mkdir -p "$OUT"
false_regressions=0
for i in $(seq 1 "$PAIRS"); do
  for side in a b; do
    d="$OUT/pair$i-$side"
    if [ "${COMPARE_ONLY:-0}" != 1 ]; then
      rm -rf "$d"
      "$CLI" run "${FLAGS[@]}" --no-report --out "$d" >/dev/null 2>"$d.err" || { echo "run $d failed (see $d.err)"; exit 2; }
    fi
  done
  "$CLI" compare "$OUT/pair$i-a" "$OUT/pair$i-b" ${COMPARE_FLAGS:-} >"$OUT/pair$i.compare" 2>&1
  rc=$?
  [ $rc -eq 2 ] && { echo "compare failed: $OUT/pair$i.compare"; exit 2; }
  if [ $rc -eq 1 ]; then
    false_regressions=$((false_regressions + 1))
    echo "pair $i: FALSE REGRESSION: $(grep -m1 '^REGRESSION' "$OUT/pair$i.compare")"
  else
    echo "pair $i: $(grep -m1 '^verdicts:' "$OUT/pair$i.compare")"
  fi
done
busy=$(grep -l 'machine busy' "$OUT"/pair*.compare 2>/dev/null | wc -l)
echo "A/A: $false_regressions false regression(s) in $PAIRS pairs ($busy pair(s) with a case NOISY because the machine was busy)"
[ $false_regressions -eq 0 ]
