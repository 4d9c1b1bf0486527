#!/usr/bin/env bash
# compare_smoke.sh MODE CLI OUT: end-to-end checks of `dlbench compare|baseline|history` on real runs
# (tests/smoke_compare.cmake registers one CTest test per mode).
#   setup     two real runs of a tiny matmul suite (OUT/a, OUT/b), OUT/a made 1.5x slower (OUT/a15),
#             and OUT/hist: eight dated copies of OUT/a, the last four 1.5x slower
#   pair      compare a b: exit 0 (two runs of the same build on the same machine)
#   slowed    compare a a15: exit 1, one stderr line naming the slowed cases, each SLOWER in the table
#             (a case whose own repetitions spread over 1.5x may be NOISY: checked independently)
#   baseline  save a; check b (0), check a15 (1), no baseline (0 + "no baseline for this machine"),
#             --require without one (2)
#   history   history OUT/hist: exit 0, every timed case flagged with a +50% step from run 5
#   busy      the fixture base.json and real run a, each compared with itself doubled, both sides
#             marked as measured under ~50% foreign CPU (common-mode): exit 1, the cases SLOWER; the
#             same with the load on one side only: exit 3 (inconclusive), last line INCONCLUSIVE;
#             never "no regression"
#   save_race 20 concurrent `baseline save`s into one folder, 3 rounds: all exit 0, one baseline, no
#             temporary file left
#
# Why `--time cpu --threshold 100%` for the real pair: this box has 2 cores shared by a build farm;
# wall-clock time of the same binary moves by 2x or more between two runs seconds apart when the load
# changes (seen: real_time 2.5x cpu_time at load 10), and no statistics over one run's repetitions
# can see load that arrives between runs. CPU time with one OpenBLAS thread only moves with cache and
# frequency effects (~10% here), so "exit 0" is then a real statement: no case got 2x slower.
set -uo pipefail
mode=$1 cli=$2 out=$3

fail() { echo "FAIL: $*" >&2; exit 1; }

timed_cases() {  # timed_cases RUN [spread]: the run_names of the cases timed in a results folder; with
                 # "spread", "NAME 1" when max/min of its real_time repetitions is below 1.5, else "NAME 0"
  python3 - "$1/results.json" "${2:-}" <<'EOF'
import json, sys
doc = json.load(open(sys.argv[1]))
times = {}
for e in doc["benchmarks"]:
    if e.get("run_type") == "iteration" and not e.get("error_occurred"):
        times.setdefault(e["run_name"], []).append(e["real_time"])
for name, t in times.items():
    print(name + (" %d" % (max(t) < 1.5 * min(t)) if sys.argv[2] else ""))
EOF
}

scale() {  # scale IN OUT FACTOR [DATE|-] [FOREIGN_CPU]: a copy of a results folder (or results.json) with
           # every time multiplied, optionally redated and with every record's foreign_cpu set
  python3 - "$@" <<'EOF'
import json, os, sys
src, dst, f = sys.argv[1], sys.argv[2], float(sys.argv[3])
doc = json.load(open(src if src.endswith(".json") else os.path.join(src, "results.json")))
if len(sys.argv) > 4 and sys.argv[4] != "-":
    doc["context"]["date"] = sys.argv[4]
if len(sys.argv) > 5:
    for e in doc["benchmarks"]:
        e["foreign_cpu"] = float(sys.argv[5])
for e in doc["benchmarks"]:
    if e.get("error_occurred"):
        continue
    if e.get("aggregate_name") != "cv":  # cv is a ratio: unchanged by scaling
        for k in ("real_time", "cpu_time"):
            if k in e: e[k] *= f
    for k in ("gflops", "gb_per_s", "imgs_per_s", "pct_of_peak", "items_per_second", "bytes_per_second"):
        if k in e: e[k] /= f
os.makedirs(dst, exist_ok=True)
json.dump(doc, open(os.path.join(dst, "results.json"), "w"), indent=1)
EOF
}

# run CODE ARGS...: runs the CLI, shows its output, checks the exit code; stderr kept in $err
run() {
  local want=$1; shift
  err=$(mktemp)
  "$cli" "$@" 2>"$err"
  local got=$?
  cat "$err" >&2
  [ "$got" = "$want" ] || fail "dlbench $* exited $got, expected $want"
  if [ "$want" != 0 ]; then
    [ "$(grep -c '' "$err")" = 1 ] && grep -q '^dlbench: error: ' "$err" || fail "expected one 'dlbench: error:' line on stderr"
  fi
}

case $mode in
  setup)
    rm -rf "$out" && mkdir -p "$out" || fail "cannot create $out"
    # One OpenBLAS/OpenMP thread: a second thread spinning on a busy core makes small GEMMs erratic.
    export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
    for r in a b; do
      "$cli" run --suite matmul --device cpu --sizes 64 --repetitions 10 --min-time 0.05 --no-report --out "$out/$r" \
        >"$out/$r.log" 2>&1 || { cat "$out/$r.log"; fail "run $r failed"; }
    done
    [ -n "$(timed_cases "$out/a")" ] || fail "run a timed no case"
    scale "$out/a" "$out/a15" 1.5 || fail "scaling failed"
    for i in 1 2 3 4 5 6 7 8; do
      f=1.0; [ "$i" -ge 5 ] && f=1.5
      scale "$out/a" "$out/hist/run$i" "$f" "2026-01-0${i}T12:00:00+0000" || fail "scaling failed"
    done
    echo "ok: $out/{a,b,a15,hist}"
    ;;
  pair)
    run 0 compare "$out/a" "$out/b" --time cpu --threshold 100%
    echo "ok: two real runs compare with exit 0"
    ;;
  slowed)
    # --max-busy 100%: a15 is a scaled copy of a, so it carries a's foreign_cpu; a busy machine during
    # run a would otherwise (rightly, for real runs) make every change NOISY.
    run 1 compare "$out/a" "$out/a15" --max-busy 100% >"$out/slowed.txt"
    cat "$out/slowed.txt"
    # A case whose repetitions do not overlap their 1.5x copies (max/min < 1.5) must be SLOWER and
    # named; one whose own spread exceeds 1.5x (a preempted repetition) may honestly be NOISY.
    n=0 slower=0
    while read -r c clean; do
      n=$((n + 1))
      if grep -F "| $c " "$out/slowed.txt" | grep -q '| SLOWER '; then
        slower=$((slower + 1))
        grep -qF "$c (+50.0%)" "$err" || fail "stderr does not name $c (+50.0%)"
      elif [ "$clean" = 1 ]; then
        fail "$c is not SLOWER in the table"
      else
        grep -F "| $c " "$out/slowed.txt" | grep -q '| NOISY ' || fail "$c is neither SLOWER nor NOISY"
      fi
    done < <(timed_cases "$out/a" spread)
    [ "$n" -gt 0 ] && [ "$slower" -gt 0 ] || fail "no timed case"
    echo "ok: exit 1 naming $slower of $n slowed case(s) (any other: NOISY, its repetitions spread over 1.5x)"
    ;;
  baseline)
    rm -rf "$out/baselines"
    run 0 baseline check "$out/b" --dir "$out/baselines" >"$out/nobase.txt"
    cat "$out/nobase.txt"
    grep -q '^no baseline for this machine: ' "$out/nobase.txt" || fail "no 'no baseline for this machine' line"
    run 2 baseline check "$out/b" --dir "$out/baselines" --require
    run 0 baseline save "$out/a" --dir "$out/baselines"
    [ "$(ls "$out/baselines" | wc -l)" = 1 ] || fail "expected one baseline folder"
    run 0 baseline check "$out/b" --dir "$out/baselines" --time cpu --threshold 100%
    run 1 baseline check "$out/a15" --dir "$out/baselines" --max-busy 100%
    grep -q 'regression' "$err" || fail "check of the slowed run did not report a regression"
    echo "ok: baseline save/check"
    ;;
  history)
    run 0 history "$out/hist" --time cpu >"$out/history.txt"
    cat "$out/history.txt"
    while read -r c; do
      grep -F "| $c " "$out/history.txt" | grep -q '+50.0% from run 5' || fail "$c: no +50% step from run 5"
    done < <(timed_cases "$out/a")
    echo "ok: history flags the step"
    ;;
  busy)
    data=$(cd "$(dirname "$0")/data/compare" && pwd)
    rm -rf "$out/busy" && mkdir -p "$out/busy"
    for src in "$data/base.json" "$out/a"; do
      tag=$(basename "$src" .json)
      scale "$src" "$out/busy/$tag-base" 1 - 0.5 && scale "$src" "$out/busy/$tag-2x" 2 - 0.52 &&
        scale "$src" "$out/busy/$tag-quiet" 1 - 0.0 || fail "scaling failed"
      # Common-mode load: the doubling is far beyond what 50% vs 52% explains.
      if [ "$tag" = base ]; then
        run 1 compare "$out/busy/$tag-base" "$out/busy/$tag-2x" >"$out/busy/$tag.txt"
        cat "$out/busy/$tag.txt"
        [ "$(grep -c '| SLOWER ' "$out/busy/$tag.txt")" = 9 ] || fail "base: not every case SLOWER"
        tail -n 1 "$out/busy/$tag.txt" | grep -q '^REGRESSION: ' || fail "base: last line is not REGRESSION"
      else
        # Real run a: a case whose own repetitions spread near 2x may honestly stay NOISY, so exit 1
        # (some case SLOWER) or 3 (none could be judged); never 0, every case SLOWER or NOISY.
        "$cli" compare "$out/busy/$tag-base" "$out/busy/$tag-2x" >"$out/busy/$tag.txt" 2>"$out/busy/$tag.err"
        rc=$?
        cat "$out/busy/$tag.txt" "$out/busy/$tag.err"
        [ "$rc" = 1 ] || [ "$rc" = 3 ] || fail "a: exit $rc for a 2x slowdown, expected 1 (or 3)"
        [ "$(grep -c '' "$out/busy/$tag.err")" = 1 ] || fail "a: expected one stderr line"
        while read -r c; do
          grep -F "| $c " "$out/busy/$tag.txt" | grep -qE '\| (SLOWER|NOISY) ' || fail "a: $c is neither SLOWER nor NOISY"
        done < <(timed_cases "$out/a")
        tail -n 1 "$out/busy/$tag.txt" | grep -qE '^(REGRESSION|INCONCLUSIVE): ' || fail "a: last line says neither"
      fi
      ! grep -q 'no regression' "$out/busy/$tag.txt" || fail "$tag: 'no regression' for a 2x slowdown"
      # The load on NEW only (0% -> 52%) explains up to 2.1x: nothing can be judged, and it says so.
      run 3 compare "$out/busy/$tag-quiet" "$out/busy/$tag-2x" >"$out/busy/$tag-q.txt"
      cat "$out/busy/$tag-q.txt"
      tail -n 1 "$out/busy/$tag-q.txt" | grep -q '^INCONCLUSIVE: ' || fail "$tag: last line is not INCONCLUSIVE"
      grep -q 'inconclusive' "$err" || fail "$tag: stderr does not say inconclusive"
      ! grep -q 'no regression' "$out/busy/$tag-q.txt" || fail "$tag: 'no regression' when nothing was judged"
    done
    echo "ok: a 2x slowdown under common-mode load fails (exit 1); under one-sided load it is inconclusive (exit 3)"
    ;;
  save_race)
    data=$(cd "$(dirname "$0")/data/compare" && pwd)
    for round in 1 2 3; do
      rm -rf "$out/race" && mkdir -p "$out/race"
      pids=()
      for i in $(seq 1 20); do
        "$cli" baseline save "$data/base.json" --dir "$out/race/bl" >"$out/race/$i.out" 2>"$out/race/$i.err" &
        pids+=($!)
      done
      failed=0
      for i in "${!pids[@]}"; do
        wait "${pids[$i]}" || { failed=$((failed + 1)); cat "$out/race/$((i + 1)).err" >&2; }
      done
      [ "$failed" = 0 ] || fail "round $round: $failed of 20 concurrent baseline saves failed"
      [ "$(ls "$out/race/bl" | wc -l)" = 1 ] || fail "round $round: expected one baseline folder"
      [ -z "$(ls -A "$out/race/bl"/* | grep -v -x -e results.json -e key.txt)" ] ||
        fail "round $round: files left beside the baseline: $(ls -A "$out/race/bl"/*)"
      run 0 compare "$data/base.json" "$out/race/bl"/*/results.json >/dev/null
    done
    echo "ok: 3 rounds of 20 concurrent baseline saves, all saved, nothing left behind"
    ;;
  *) fail "unknown mode $mode" ;;
esac
