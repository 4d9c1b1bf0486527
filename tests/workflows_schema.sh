#!/usr/bin/env bash
# workflows_schema.sh SRC: every GitHub workflow in SRC/.github/workflows validates against GitHub's
# workflow schema (check-jsonschema --builtin-schema vendor.github-workflows: the schema ships inside
# the package, no network needed), a deliberately broken one (tests/data/workflows/broken.yml) is
# rejected naming its mistake, and the GPU job keeps its two rules: it runs only where a GPU runner is
# registered (vars.DLBENCH_GPU_RUNNER) and it runs what the GPU machine runs (ci/device_run.sh); the
# trackers' example exports for github-action-benchmark and stores history, the nightly job draws it.
# check-jsonschema comes from `ci/bootstrap.sh test` (.venv-tools/, or DLBENCH_TOOLS_VENV).
set -u
src=$1
cj=${DLBENCH_TOOLS_VENV:-$src/.venv-tools}/bin/check-jsonschema
[ -x "$cj" ] || cj=$(command -v check-jsonschema) || {
  echo "FAIL: no check-jsonschema (run ci/bootstrap.sh test, which installs it into .venv-tools/)"; exit 1; }
bad=0
shopt -s nullglob
flows=("$src"/.github/workflows/*.yml "$src"/.github/workflows/*.yaml)
if [ ${#flows[@]} -lt 2 ]; then echo "FAIL: expected cpu.yml and gpu.yml in $src/.github/workflows"; bad=1; fi
if "$cj" --builtin-schema vendor.github-workflows "${flows[@]}"; then
  echo "ok: ${#flows[@]} workflows valid"
else
  echo "FAIL: a workflow in .github/workflows is not valid (above)"; bad=1
fi
out=$("$cj" --builtin-schema vendor.github-workflows "$src/tests/data/workflows/broken.yml" 2>&1); rc=$?
if [ $rc = 1 ] && grep -q "'step' was unexpected" <<<"$out"; then
  echo "ok: broken.yml rejected: $(grep -m1 "'step' was unexpected" <<<"$out" | sed 's/^ *//')"
else
  echo "FAIL: broken.yml not rejected as expected (exit $rc):"; echo "$out"; bad=1
fi
gpu=$src/.github/workflows/gpu.yml
grep -q "if: \${{ vars.DLBENCH_GPU_RUNNER == 'true' }}" "$gpu" || { echo "FAIL: gpu.yml's job lacks its if: on vars.DLBENCH_GPU_RUNNER"; bad=1; }
for c in call-a call-b call-c; do  # the three calls of the GPU plan (ci/README.md)
  grep -q "ci/device_run.sh $c" "$gpu" || { echo "FAIL: gpu.yml does not run ci/device_run.sh $c"; bad=1; }
done
grep -q "ci/device_run.sh call-d" "$gpu" && { echo "FAIL: gpu.yml runs call-d, which the three-call plan dropped"; bad=1; }
# GPU tests never under ctest -j (concurrent GPU tests make the memory tests flaky): ./dlbench test
# runs ctest -j, so in gpu.yml only with -LE gpu; no other ctest -j there either.
runs=$(grep -vE '^\s*#' "$gpu")
if grep -E 'dlbench test' <<<"$runs" | grep -vq -- '-LE gpu' || grep -qE 'ctest .*-j' <<<"$runs"; then
  echo "FAIL: gpu.yml runs the gpu tests under ctest -j"; bad=1
fi
# The trackers' example (issue 32): the export the action reads, the history it stores, the nightly dashboard.
bm=$src/.github/workflows/benchmarks.yml db=$src/.github/workflows/dashboard.yml
grep -q "dlbench export .* --format github-action-benchmark-bigger" "$bm" && grep -q "tool: customBiggerIsBetter" "$bm" &&
  grep -q "ci/history_store.sh" "$bm" || { echo "FAIL: benchmarks.yml lost its export, its tool or its history store"; bad=1; }
grep -q "dlbench history .* --html" "$db" && grep -q "actions/upload-artifact" "$db" ||
  { echo "FAIL: dashboard.yml does not draw and upload the dashboard"; bad=1; }
[ -e "$src/ci/workflows" ] && { echo "FAIL: ci/workflows/ is back: GitHub reads only .github/workflows/"; bad=1; }
exit $bad
