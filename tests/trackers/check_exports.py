#!/usr/bin/env python3
"""The exports of a real run, read the way each tool reads them (issue 32):
  github-action-benchmark  custom(Bigger|Smaller)IsBetter: JSON.parse, an array mapped to {name,
                           value, unit, range, extra}; a range it can normalise matches
                           (+-|±) <number>; one entry per case (the googlecpp reader would have taken
                           every repetition and aggregate of results.json as its own point)
  Bencher                  the BMF JSON against tests/trackers/bmf.schema.json (check-jsonschema)
  Google Benchmark         its compare.py (Debian's libbenchmark-tools) reads results.json; its newer
                           readers want context.json_schema_version 1
  Conbench                 benchadapt's GoogleBenchmarkAdapter parses results.json and tracks each
                           case's throughput (i/s or B/s), not its time
  csv                      a row per case
The values: the bigger-is-better value of each case is the throughput of its median aggregate.

    check_exports.py DLBENCH RUN_DIR WORK_DIR SRC_DIR
Tools: check-jsonschema and benchadapt in SRC/.venv-tools (or $DLBENCH_TOOLS_VENV), compare.py in
/usr/share/benchmark: ci/bootstrap.sh test installs them.
"""
import csv
import json
import math
import os
import re
import subprocess
import sys

from checklist import check, done  # noqa: E402  (beside this file)

DLBENCH, RUN, WORK, SRC = sys.argv[1:5]
VENV = os.environ.get("DLBENCH_TOOLS_VENV") or os.path.join(SRC, ".venv-tools")
HERE = os.path.dirname(os.path.abspath(__file__))

os.makedirs(WORK, exist_ok=True)
doc = json.load(open(os.path.join(RUN, "results.json")))
medians = {}  # case -> its median aggregate entry
for e in doc["benchmarks"]:
    if e.get("aggregate_name") == "median" and not e.get("error_occurred"):
        medians[e["run_name"]] = e
timed = {e["run_name"] for e in doc["benchmarks"] if e.get("run_type") == "iteration" and not e.get("error_occurred")}
check(len(timed) > 0 and timed == set(medians), f"the run has {len(timed)} timed cases, each with a median aggregate")


def export(fmt):
    path = os.path.join(WORK, fmt + (".csv" if fmt == "csv" else ".json"))
    p = subprocess.run([DLBENCH, "export", RUN, "--format", fmt, "--out", path], capture_output=True, text=True, timeout=60)
    check(p.returncode == 0 and os.path.isfile(path), f"export --format {fmt}: exit {p.returncode} {p.stderr.strip()}")
    return open(path).read() if os.path.isfile(path) else ""


# github-action-benchmark: its custom reader, step by step.
RANGE = re.compile(r"(?P<prefix>(\+-|±)\s*)(?P<value>\d.+)")
for fmt, tool in (("github-action-benchmark-bigger", "customBiggerIsBetter"), ("github-action-benchmark-smaller", "customSmallerIsBetter")):
    benches = json.loads(export(fmt))  # JSON.parse
    check(isinstance(benches, list), f"{tool}: a JSON array")
    mapped = [{k: b.get(k) for k in ("name", "value", "unit", "range", "extra")} for b in benches]  # json.map(...)
    check(all(isinstance(b["name"], str) and isinstance(b["value"], (int, float)) and not isinstance(b["value"], bool)
              and math.isfinite(b["value"]) and isinstance(b["unit"], str) and isinstance(b["extra"], str) for b in mapped),
          f"{tool}: every entry has a string name, unit and extra and a finite number value")
    ranges = [RANGE.search(b["range"] or "") for b in mapped]
    check(all(m and math.isfinite(float(m.group("value"))) for m in ranges), f"{tool}: every range is '± <number>'")
    names = [b["name"] for b in mapped]
    check(len(names) == len(set(names)) and set(names) == timed,
          f"{tool}: one entry per timed case ({len(names)}; googlecpp would chart {len(doc['benchmarks'])} points)")
    check(not any(re.search(r"_(mean|median|stddev|cv)$", n) for n in names), f"{tool}: no aggregate pseudo-cases")
    if tool == "customBiggerIsBetter":
        units = {b["unit"] for b in mapped}
        check(units <= {"GFLOP/s", "images/s", "GB/s", "iter/s"}, f"{tool}: throughput units {sorted(units)}")
        for b in mapped:
            m = medians[b["name"]]
            key = {"GFLOP/s": "gflops", "images/s": "imgs_per_s", "GB/s": "gb_per_s"}.get(b["unit"])
            want = m[key] if key else 1e6 / m["real_time"]
            if abs(b["value"] - want) > 1e-9 * abs(want):
                check(False, f"{tool}: {b['name']}: {b['value']} is not its median's {want}")
                break
        else:
            check(True, f"{tool}: each value is the throughput of the case's median")
    else:
        check({b["unit"] for b in mapped} == {"us/iter"} and
              all(abs(b["value"] - medians[b["name"]]["real_time"]) <= 1e-9 * b["value"] for b in mapped),
              f"{tool}: each value is the median time in us/iter")

# Bencher Metric Format: the schema, and latency = the median in nanoseconds.
bmf_path = os.path.join(WORK, "bencher.json")
bmf = json.loads(export("bencher"))
cj = os.path.join(VENV, "bin", "check-jsonschema")
if not os.access(cj, os.X_OK):
    check(False, f"check-jsonschema in {VENV} (run ci/bootstrap.sh test)")
else:
    p = subprocess.run([cj, "--schemafile", os.path.join(HERE, "bmf.schema.json"), bmf_path], capture_output=True, text=True)
    check(p.returncode == 0, f"bencher: valid against the Bencher Metric Format schema: {p.stdout.strip()} {p.stderr.strip()}")
    bad = os.path.join(WORK, "bmf-bad.json")
    json.dump({"case": {"latency": {"lower_value": 1.0}}}, open(bad, "w"))
    p = subprocess.run([cj, "--schemafile", os.path.join(HERE, "bmf.schema.json"), bad], capture_output=True, text=True)
    check(p.returncode == 1, "bencher: the schema refuses a measure without a value")
check(set(bmf) == timed and all(abs(bmf[n]["latency"]["value"] - 1e3 * medians[n]["real_time"]) <= 1e-9 * bmf[n]["latency"]["value"]
                                 for n in bmf), "bencher: every timed case, latency = its median in ns")

rows = list(csv.DictReader(open(os.path.join(WORK, "csv.csv")) if export("csv") else []))
check({r["name"] for r in rows} == {e["run_name"] for e in doc["benchmarks"]}, f"csv: a row per case ({len(rows)})")

# Google Benchmark's compare.py on results.json itself.
ctx = doc["context"]
check(ctx.get("json_schema_version") == 1 and str(ctx.get("library_version", "")).startswith("v"),
      f"context: json_schema_version {ctx.get('json_schema_version')}, library_version {ctx.get('library_version')}")
cmp_py = "/usr/share/benchmark/compare.py"
if not os.path.isfile(cmp_py):
    check(False, f"{cmp_py} (Debian's libbenchmark-tools; ci/bootstrap.sh test installs it)")
else:
    r = os.path.join(RUN, "results.json")
    p = subprocess.run([sys.executable, cmp_py, "benchmarks", r, r], capture_output=True, text=True, timeout=120)
    check(p.returncode == 0 and "OVERALL_GEOMEAN" in p.stdout and all(n in p.stdout for n in timed),
          f"compare.py benchmarks reads results.json: exit {p.returncode} {p.stderr.strip()[-300:]}")

# Conbench's Google Benchmark adapter (benchadapt) on results.json.
py = os.path.join(VENV, "bin", "python")
snippet = """
import json, sys
from benchadapt.adapters.gbench import GoogleBenchmarkAdapter
res = GoogleBenchmarkAdapter(command=["true"], result_file=sys.argv[1])._transform_results()
print(json.dumps([[r.tags["name"] + "/" + r.tags.get("params", ""), r.stats["unit"]] for r in res]))
"""
env = dict(os.environ, CONBENCH_PROJECT_REPOSITORY="https://example.invalid/dlbench",
           CONBENCH_PROJECT_COMMIT="0" * 40, CONBENCH_MACHINE_INFO_NAME="ci")
p = subprocess.run([py, "-c", snippet, os.path.join(RUN, "results.json")], capture_output=True, text=True, env=env, timeout=120)
if p.returncode != 0:
    check(False, f"benchadapt's GoogleBenchmarkAdapter reads results.json (ci/bootstrap.sh test installs it): {p.stderr.strip()[-400:]}")
else:
    got = json.loads(p.stdout.strip().splitlines()[-1])
    check({n for n, _ in got} == timed and all(u in ("i/s", "B/s") for _, u in got),
          f"Conbench's adapter tracks every case by its throughput: units {sorted({u for _, u in got})}")
done()
