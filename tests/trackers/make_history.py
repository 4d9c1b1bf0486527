#!/usr/bin/env python3
"""Writes a history folder for the dashboard checks: RUNS results folders spread over MACHINES
machines (dated one per 6 hours, each with a git sha), every case 5 repetitions with a few percent
of seeded noise, in dlbench's results.json layout (the context's machine fingerprint keys the
machines). Planted: on machine 0 the case PLANTED is 40% slower from 60% of its runs on; on machine
1 the case FAILING fails in its latest run. Every third run folder of machine 0 has a report
(report/index.html) for the points to link to.

    make_history.py OUT [--runs 200] [--machines 3]
Prints PLANTED and FAILING on two lines.
"""
import argparse
import datetime
import hashlib
import json
import os
import random

PLANTED = "matmul/gemm/cpu/fp32/impl=openblas/size=512"
FAILING = "conv/conv2d_fwd/cpu/fp32/layer=lecture_conv1/batch=64/impl=im2col"
CASES = [  # name, median us, throughput key, work per us
    (PLANTED, 1200.0, "gflops", 0.268),
    ("matmul/gemm/cpu/fp32/impl=openblas/size=128", 30.0, "gflops", 0.14),
    ("matmul/gemm/cpu/bf16/impl=onednn/size=512", 800.0, "gflops", 0.335),
    (FAILING, 9000.0, "gflops", 0.12),
    ("conv/conv2d_bwd_data/cpu/fp32/layer=lecture_conv2/batch=64/impl=direct", 5200.0, "gflops", 0.08),
    ("lecture/train_step/cpu/fp32/model=net128/batch=64", 16000.0, "imgs_per_s", 64e6),
    ("lecture/train_step/cpu/fp32/model=net128/batch=4", 1100.0, "imgs_per_s", 4e6),
    ("transfer/h2d/cuda:0/fp32/size=64MiB/mem=pinned", 2900.0, "gb_per_s", 0.067),
    ("matmul/gemm/cuda:0/fp32/impl=cublas/size=4096", 9000.0, "gflops", 15.3),
    ("amp/train_step/cuda:0/bf16/model=net128/batch=64", 2100.0, "imgs_per_s", 64e6),
]
MACHINES = [
    ("AMD EPYC 9B14 (fixture)", []),
    ("Intel Xeon Platinum 8581C (fixture)", []),
    ("AMD Ryzen 9 5900X (fixture)", ["NVIDIA GeForce RTX 3080 Ti"]),
]


def context(machine, when, sha):
    model, gpus = MACHINES[machine % len(MACHINES)]
    return {"date": when.strftime("%Y-%m-%dT%H:%M:%S+0000"), "host_name": "ci-%d" % machine, "num_cpus": 2,
            "library_build_type": "release", "library_version": "v1.7.1", "json_schema_version": 1,
            "cpu": {"model": model + ("" if machine < len(MACHINES) else " #%d" % machine), "logical_cores": 2},
            "openblas": {"version": "0.3.21", "core": "Zen", "threads": 2},
            "cuda": {"runtime": "12.4" if gpus else "n/a", "cublas": 120400 if gpus else 0, "cudnn": 90100 if gpus else 0,
                     "gpus": [{"name": g} for g in gpus]},
            "git": {"sha": sha, "dirty": False}}


def entries(name, med, key, work, rng, failed):
    suite, op, device, dtype = name.split("/")[:4]
    base = {"name": name, "run_name": name, "suite": suite, "op": op, "device": device, "dtype": dtype,
            "threads": 1, "time_unit": "us"}
    if failed:
        return [dict(base, run_type="iteration", repetitions=0, repetition_index=0, iterations=0, real_time=0,
                     cpu_time=0, error_occurred=True, error_message="verification failed", verified=False)]
    out, times = [], []
    for r in range(5):
        t = med * (1 + rng.gauss(0, 0.02))
        times.append(t)
        out.append(dict(base, run_type="iteration", repetitions=5, repetition_index=r, iterations=100, real_time=t,
                        cpu_time=t, verified=True, **{key: work / t}))
    times.sort()
    for agg, v in (("mean", sum(times) / 5), ("median", times[2])):
        out.append(dict(base, name=name + "_" + agg, run_type="aggregate", aggregate_name=agg, repetitions=5,
                        iterations=5, real_time=v, cpu_time=v, verified=True, **{key: work / v}))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--machines", type=int, default=3)
    a = ap.parse_args()
    rng = random.Random(32)
    os.makedirs(a.out, exist_ok=True)
    start = datetime.datetime(2026, 6, 1, tzinfo=datetime.timezone.utc)
    per = [0] * a.machines
    counts = [a.runs // a.machines + (m < a.runs % a.machines) for m in range(a.machines)]
    for i in range(a.runs):
        m = i % a.machines
        k, n = per[m], counts[m]
        per[m] += 1
        when = start + datetime.timedelta(hours=6 * i)
        sha = hashlib.sha1(b"commit %d" % i).hexdigest()
        bench = []
        for name, med, key, work in CASES:
            if "cuda" in name and not MACHINES[m % len(MACHINES)][1]:
                continue
            slow = 1.4 if (m == 0 and name == PLANTED and k >= int(0.6 * n)) else 1.0
            bench += entries(name, med * slow, key, work, rng, m == 1 and name == FAILING and k == n - 1)
        d = os.path.join(a.out, "%s-m%d" % (when.strftime("%Y%m%dT%H%M%S"), m))
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "results.json"), "w") as f:
            json.dump({"context": context(m, when, sha), "benchmarks": bench}, f)
        if m == 0 and k % 3 == 0:
            os.makedirs(os.path.join(d, "report"), exist_ok=True)
            with open(os.path.join(d, "report", "index.html"), "w") as f:
                f.write("<!DOCTYPE html><title>run report</title><p>report of %s</p>\n" % d)
    print(PLANTED)
    print(FAILING)


if __name__ == "__main__":
    main()
