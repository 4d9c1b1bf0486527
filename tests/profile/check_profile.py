#!/usr/bin/env python3
"""smoke.profile_lecture: `dlbench run --suite lecture --device cpu --quick --profile` end to end.

    check_profile.py DLBENCH GPU_FIXTURE OUT_DIR

Checks every trace file (Chrome Trace Event Format): a region per layer and direction with the right
names, nesting (layers inside their forward/backward phase, everything inside the step), and the leaf
regions summing to within 10% of the step; the records' profile summary, napkin flops/bytes, memory
and energy keys; the report's opening answer, per-layer table and roofline; and the cross-machine
crossover against the committed GPU fixture; the dist section on the synthetic dist fixture.
Standard library only.
"""
import glob
import json
import os
import shutil
import subprocess
import sys

DLBENCH, FIXTURE, OUT = sys.argv[1:4]
LAYERS = ["conv1", "relu1+pool1", "conv2", "relu2+pool2", "flatten1", "fc1", "relu3", "fc2", "relu4", "fc3"]
# Where the CPU's kernels fuse the first convolution with its ReLU and pool (AVX2 and up), one region.
FUSED = "conv1+relu1+pool1"
LAYERS_FUSED = [FUSED] + LAYERS[2:]


def layers_of(names):
    return LAYERS_FUSED if f"forward {FUSED}" in names or FUSED in names else LAYERS

fails = []


def check(ok, what):
    if not ok:
        fails.append(what)
    return ok


shutil.rmtree(OUT, ignore_errors=True)
os.makedirs(OUT)
run_dir = os.path.join(OUT, "run")
p = subprocess.run([DLBENCH, "run", "--suite", "lecture", "--device", "cpu", "--quick", "--profile", "--out", run_dir],
                   capture_output=True, text=True, timeout=500)
if p.returncode != 0:
    print(p.stdout[-3000:], p.stderr[-3000:])
    sys.exit(f"FAIL: dlbench run --profile exited {p.returncode}")
check("profile lecture/train/cpu" in p.stdout and "fwd ms" in p.stdout, "per-layer table not printed")

traces = sorted(glob.glob(os.path.join(run_dir, "traces", "*.json")))
check(len(traces) == 3, f"expected 3 trace files (batch 64, 4, 2), found {len(traces)}")
for path in traces:
    name = os.path.basename(path)
    with open(path) as f:
        doc = json.load(f)  # valid JSON or the test fails here
    ev = [e for e in doc.get("traceEvents", []) if e.get("ph") == "X"]
    if not check(ev, f"{name}: no complete events"):
        continue
    for e in ev:
        check(isinstance(e.get("name"), str) and isinstance(e.get("ts"), (int, float))
              and isinstance(e.get("dur"), (int, float)) and e["dur"] >= 0, f"{name}: malformed event {e}")
    steps = [e for e in ev if e["name"] == "step"]
    if not check(len(steps) == 1, f"{name}: {len(steps)} step events"):
        continue
    step = steps[0]
    end = lambda e: e["ts"] + e["dur"]
    inside = lambda a, b: a["ts"] >= b["ts"] - 1e-3 and end(a) <= end(b) + 1e-3
    names = {e["name"] for e in ev}
    for n in ["data copy", "zero_grad", "forward", "loss", "backward", "optimizer"]:
        check(n in names, f"{name}: no region '{n}'")
    phase = {e["name"]: e for e in ev if e["name"] in ("forward", "backward")}
    for layer in layers_of(names):
        for d in ("forward", "backward"):
            r = [e for e in ev if e["name"] == f"{d} {layer}"]
            if check(len(r) == 1, f"{name}: region '{d} {layer}' appears {len(r)} times") and d in phase:
                check(inside(r[0], phase[d]), f"{name}: '{d} {layer}' is not inside the {d} phase")
                check(r[0]["args"].get("depth") == 2, f"{name}: '{d} {layer}' not at depth 2")
    for e in ev:
        if e is not step:
            check(inside(e, step), f"{name}: '{e['name']}' lies outside the step")
    # Leaves (no event inside them) sum to the step within 10%.
    leaves = [e for e in ev if e is not step and not any(o is not e and o["args"].get("depth", 0) > e["args"].get("depth", 0)
                                                       and inside(o, e) for o in ev)]
    total = sum(e["dur"] for e in leaves)
    check(abs(total - step["dur"]) <= 0.10 * step["dur"],
          f"{name}: regions sum to {total:.1f} us, step is {step['dur']:.1f} us (more than 10% apart)")
    first = layers_of(names)[0]
    flops = [e for e in ev if e["name"] == f"forward {first}"][0]["args"].get("flops", 0)
    check(flops > 0, f"{name}: forward {first} carries no flops")

with open(os.path.join(run_dir, "results.json")) as f:
    res = json.load(f)
med = [b for b in res["benchmarks"] if b.get("aggregate_name") == "median"]
check(len(med) == 3, f"expected 3 median records, found {len(med)}")
for b in med:
    pr = b.get("profile", {})
    check(pr.get("verified") is True, f"{b['name']}: profiled step not verified: {pr.get('check')}")
    regions = [r["region"] for r in pr.get("rows", [])]
    check(all(l in regions for l in layers_of(regions)) and "unaccounted" in regions,
          f"{b['name']}: summary rows {regions}")
    check(pr.get("trace", "").startswith("traces/") and os.path.isfile(os.path.join(run_dir, pr.get("trace", "-"))),
          f"{b['name']}: summary names no trace file")
    check(b.get("flops", 0) > 0 and b.get("bytes", 0) > 0, f"{b['name']}: no napkin flops/bytes")
    check(b.get("host_peak_rss_bytes", 0) > 1 << 20, f"{b['name']}: no host_peak_rss_bytes")
    check("energy_j" in b or str(b.get("energy_note", "")).startswith("not readable here"),
          f"{b['name']}: neither energy_j nor 'not readable here'")

html_path = os.path.join(run_dir, "report", "index.html")
if check(os.path.isfile(html_path), "dlbench run wrote no report"):
    page = open(html_path, encoding="utf-8").read()
    for what in ('class="answer"', "Where the time goes", "one step per layer", "Roofline", "Memory and energy"):
        check(what in page, f"report lacks {what!r}")
    check("only the CPU was measured" in page or "Only the CPU was measured" in page,
          "CPU-only opening answer missing")

# The cross-machine crossover: this CPU run beside the committed GPU fixture.
rep = os.path.join(OUT, "cross")
p = subprocess.run([DLBENCH, "report", run_dir, FIXTURE, "--out", rep], capture_output=True, text=True, timeout=300)
if check(p.returncode == 0, f"dlbench report RUN FIXTURE exited {p.returncode}: {p.stderr.strip()}"):
    page = open(os.path.join(rep, "index.html"), encoding="utf-8").read()
    check("times as fast at batch 64" in page and "at batch 2" in page, "no speed-up at batch 64 and 2 in the answer")
    check("crossover" in page.lower() and "GPU against CPU: crossover" in page, "no crossover section")
    check("committed fixture" in page and "FIXTURE" in page, "the fixture is not labelled as one")
    check("GPU cuda:0 (gpu_fixture) ms" in page and "CPU (run) ms" in page,
          "the per-layer table does not put the CPU and the GPU side by side")
    first = page.index('class="answer"')
    check(first < page.index("<nav>"), "the answer does not open the report")

# The dist section against the synthetic fixture made from the agreed suite-dist schema.
dist = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(FIXTURE))), "dist_synthetic")
rep = os.path.join(OUT, "dist")
p = subprocess.run([DLBENCH, "report", dist, "--out", rep], capture_output=True, text=True, timeout=300)
if check(p.returncode == 0, f"dlbench report dist_synthetic exited {p.returncode}: {p.stderr.strip()}"):
    page = open(os.path.join(rep, "index.html"), encoding="utf-8").read()
    for what in ("all_reduce: out-of-place and in-place", "busbw (GB/s)", "Data-parallel training step: scaling",
                 "Scaling efficiency of the data-parallel step", "SYNTHETIC"):
        check(what in page, f"dist report lacks {what!r}")
    check(len(glob.glob(os.path.join(rep, "fig*_dist_*.png"))) == 3, "dist report: expected 3 dist plots")

if fails:
    print("\n".join("FAIL: " + f for f in fails))
    sys.exit(1)
print(f"ok: {len(traces)} traces, regions per layer and direction, nesting, sums; report and crossover")
