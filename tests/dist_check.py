#!/usr/bin/env python3
"""Checks a dist results folder: dist_check.py DIR --ranks N [--collectives] [--ddp] [--cap-gbit X].

Every entry verified, 0 wrong elements, busbw = algbw x nccl-tests' factor, all four collectives out
of place and in place, the DDP variants with efficiency and percentiles, the context's world size.
With --cap-gbit: the largest all-reduce's busbw lies in [0.6, 1.0] x the cap (GB = 1e9)."""
import argparse, json, sys

ap = argparse.ArgumentParser()
ap.add_argument("dir"); ap.add_argument("--ranks", type=int, required=True)
ap.add_argument("--collectives", action="store_true"); ap.add_argument("--ddp", action="store_true")
ap.add_argument("--cap-gbit", type=float); ap.add_argument("--hosts", type=int)
a = ap.parse_args()
doc = json.load(open(a.dir + "/results.json"))
ents = [e for e in doc["benchmarks"] if e.get("suite") == "dist"]
errors = []
def bad(msg): errors.append(msg)
if not ents: bad("no dist entries")
ctx = doc["context"].get("dist", {})
if ctx.get("world_size") != a.ranks: bad(f"context.dist.world_size {ctx.get('world_size')} != {a.ranks}")
if a.hosts and len(ctx.get("hosts", [])) != a.hosts: bad(f"context.dist.hosts {ctx.get('hosts')}: expected {a.hosts}")
n = a.ranks
factor = {"all_reduce": 2 * (n - 1) / n, "all_gather": (n - 1) / n, "reduce_scatter": (n - 1) / n, "broadcast": 1.0}
seen = set()
for e in ents:
    if e.get("error_occurred") or e.get("verified") is not True: bad(f"{e['name']}: not verified: {e.get('error_message')}")
    if e.get("ranks") != n: bad(f"{e['name']}: ranks {e.get('ranks')}")
    if e.get("op") in factor:
        seen.add((e["op"], e["inplace"]))
        if e.get("wrong") != 0: bad(f"{e['name']}: wrong = {e.get('wrong')}")
        if e["count"] * 4 != e["bytes"]: bad(f"{e['name']}: count x 4 != bytes")
        if e["op"] in ("all_gather", "reduce_scatter") and e["count"] % n: bad(f"{e['name']}: count not a multiple of ranks")
        if "algbw_gb_per_s" in e:
            want = e["bytes"] / (e["real_time"] * 1e-6) / 1e9
            if abs(e["algbw_gb_per_s"] - want) > 1e-9 * max(1, want): bad(f"{e['name']}: algbw {e['algbw_gb_per_s']} != {want}")
            if abs(e["busbw_gb_per_s"] - want * factor[e["op"]]) > 1e-9 * max(1, want): bad(f"{e['name']}: busbw factor")
            if abs(e["gb_per_s"] - e["busbw_gb_per_s"]) > 1e-9 * max(1, want): bad(f"{e['name']}: gb_per_s != busbw")
    elif e.get("op") == "ddp_step":
        seen.add(("ddp", e["variant"]))
        if e.get("run_type") == "aggregate" and e.get("aggregate_name") != "median": continue
        for k in ("imgs_per_s", "efficiency", "p50_ms", "p90_ms", "p95_ms", "max_rel_err", "bucket_mb", "batch", "model"):
            if k not in e: bad(f"{e['name']}: no {k}")
        if "p50_ms" in e and not (0 < e["p50_ms"] <= e["p90_ms"] <= e["p95_ms"]): bad(f"{e['name']}: percentiles out of order")
        if e.get("efficiency", 0) <= 0: bad(f"{e['name']}: efficiency {e.get('efficiency')}")
if a.collectives:
    for op in factor:
        for ip in (0, 1):
            if (op, ip) not in seen: bad(f"no {op} inplace={ip} case")
if a.ddp:
    for v in ("no_sync", "after_backward", "overlap"):
        if ("ddp", v) not in seen: bad(f"no ddp_step variant {v}")
if a.cap_gbit:
    ar = [e for e in ents if e.get("op") == "all_reduce" and e.get("aggregate_name") == "median"]
    big = max(ar, key=lambda e: e["bytes"])
    cap = a.cap_gbit / 8  # GB/s
    ratio = big["busbw_gb_per_s"] / cap
    print(f"all_reduce {big['bytes']} B: busbw {big['busbw_gb_per_s']:.4f} GB/s = {ratio:.2f} of the {a.cap_gbit} Gbit/s cap")
    if not 0.6 <= ratio <= 1.0: bad(f"all_reduce busbw {ratio:.2f} x cap, outside [0.6, 1.0]")
for m in errors: print("FAIL:", m)
print(f"{len(ents)} dist entries checked, {len(errors)} problem(s)")
sys.exit(1 if errors else 0)
