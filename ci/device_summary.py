#!/usr/bin/env python3
"""One line of key facts per step of ci/device_run.sh (standard library only: it runs on the GPU
machine's python3 and on Debian's here). Each subcommand prints one line and exits 0 (the step is
fine) or 1 (it is a failure, e.g. a skipped GPU test or an unavailable PyTorch peer on a GPU machine).

  device_summary.py info INFO_JSON MODE            dlbench info --json: GPU, cc, SMs, CUDA libraries
  device_summary.py gtest DIR MODE                 DIR/*.json (--gtest_output) + DIR/rc.txt ("binary rc")
  device_summary.py results RUN_DIR MODE           a suite's results.jsonl (or results.json)
  device_summary.py sanitizer LOG MODE             compute-sanitizer's summary lines
  device_summary.py ncu_kernels CSV MODE           ncu --csv (gpu__time_duration.sum per kernel): the
                                                   kernels by total time, count and mean
MODE: gpu (a GPU machine: skips are failures) or dry (no GPU here: GPU skips are expected).
"""
import json
import os
import re
import sys


def out(line, ok):
    print(line)
    return 0 if ok else 1


def info(path, mode):
    try:
        with open(path) as f:
            j = json.load(f)
    except (OSError, ValueError) as e:
        return out(f"no dlbench info --json ({e})", False)
    cu = j.get("cuda", {})
    libs = f"runtime {cu.get('runtime')}, built against cuBLAS {cu.get('cublas')} cuDNN {cu.get('cudnn')}"
    gpus = cu.get("gpus") or []
    if not gpus:
        why = cu.get("reason", "no GPU")
        return out(f"no GPU seen ({why}); {libs}", mode == "dry")
    g = gpus[0]
    line = (f"{g.get('name')} cc {g.get('compute_capability')}, {g.get('sms')} SMs, "
            f"{g.get('sm_clock_mhz')} MHz, {g.get('mem_total_bytes', 0) / 2**30:.0f} GiB, "
            f"fp32 peak {g.get('peak_fp32_gflops', 0) / 1e3:.1f} TF, mem {g.get('peak_mem_gb_per_s', 0):.0f} GB/s; "
            f"driver {cu.get('driver')}, {libs}")
    if len(gpus) > 1:
        line += f" (+{len(gpus) - 1} more GPUs)"
    return out(line, True)


def gtest(d, mode):
    rcs = {}
    try:
        with open(os.path.join(d, "rc.txt")) as f:
            for ln in f:
                parts = ln.split()
                if len(parts) == 2:
                    rcs[parts[0]] = parts[1]
    except OSError:
        pass
    passed, failed, skipped, broken = 0, [], [], []
    reasons = {}
    for name, rc in sorted(rcs.items()):
        p = os.path.join(d, name + ".json")
        try:
            with open(p) as f:
                j = json.load(f)
        except (OSError, ValueError):
            # No report: the binary crashed, was killed by its timeout or never started. Its log's
            # last "[ RUN      ]" names the test it was in.
            last = ""
            try:
                with open(os.path.join(d, name + ".log"), errors="replace") as f:
                    runs = [ln.split("]", 1)[1].strip() for ln in f if ln.startswith("[ RUN      ]")]
                last = f", in {runs[-1]}" if runs else ""
            except OSError:
                pass
            broken.append(f"{name} (exit {rc}, no report{last})")
            continue
        for suite in j.get("testsuites", []):
            for t in suite.get("testsuite", []):
                full = f"{suite.get('name')}.{t.get('name')}"
                if t.get("status") == "NOTRUN":
                    continue  # DISABLED_ tests
                if t.get("result") == "SKIPPED":
                    skipped.append(full)
                elif t.get("failures"):
                    failed.append(full)
                else:
                    passed += 1
        try:  # the skip reasons gtest printed ("path:line: Skipped" then the message)
            with open(os.path.join(d, name + ".log"), errors="replace") as f:
                lines = f.read().splitlines()
            for i, ln in enumerate(lines[:-1]):
                if ln.endswith(": Skipped") and lines[i + 1].strip():
                    why = lines[i + 1].strip()[:80]
                    reasons[why] = reasons.get(why, 0) + 1
        except OSError:
            pass
        if rc not in ("0", "1"):
            broken.append(f"{name} (exit {rc})")
    total = passed + len(failed) + len(skipped)
    line = f"{len(rcs)} binaries, {total} tests: {passed} passed, {len(failed)} failed, {len(skipped)} skipped"
    if failed:
        line += "; failed: " + ", ".join(failed[:6]) + (" ..." if len(failed) > 6 else "")
    if broken:
        line += "; broken: " + ", ".join(broken)
    if skipped and mode == "gpu":
        line += "; SKIPPED on a GPU machine: " + ", ".join(skipped[:6]) + (" ..." if len(skipped) > 6 else "")
    if skipped and reasons:
        line += " (" + "; ".join(sorted(reasons, key=reasons.get, reverse=True)[:2]) + ")"
    if not rcs:
        line = "no test binary ran"
    ok = bool(rcs) and not failed and not broken and (mode == "dry" or not skipped)
    return out(line, ok)


def load_records(d):
    """The run's planned case names and its entries (results.jsonl, else results.json)."""
    planned, entries, state = [], [], "no results"
    jl = os.path.join(d, "results.jsonl")
    if os.path.exists(jl):
        with open(jl, errors="replace") as f:
            for ln in f:
                try:
                    j = json.loads(ln)
                except ValueError:
                    continue  # a line cut by a kill
                if "dlbench_run" in j:
                    planned = j["dlbench_run"].get("planned", [])
                elif isinstance(j, dict) and "name" in j:
                    entries.append(j)
        state = "jsonl only"
    js = os.path.join(d, "results.json")
    if os.path.exists(js):
        try:
            with open(js) as f:
                j = json.load(f)
            run = j.get("context", {}).get("run", {})
            state = run.get("state", "complete")
            planned = run.get("planned", planned)
            if not entries:
                entries = j.get("benchmarks", [])
        except (OSError, ValueError):
            state = "results.json unreadable"
    return planned, entries, state


def headline(entries):
    """One figure worth seeing in the summary, per suite (the largest matmul, the lecture at batch 64)."""
    med = {}
    for e in entries:
        if e.get("run_type") == "aggregate" and e.get("aggregate_name") != "median":
            continue
        for k in ("gflops", "imgs_per_s", "gb_per_s"):
            if k in e and not e.get("error_occurred"):
                med[e["name"]] = (e, e[k])
    if not med:
        return ""
    suite = next(iter(med.values()))[0].get("suite")
    try:
        if suite == "matmul":
            gpu = [(e, v) for e, v in med.values() if e.get("device", "").startswith("cuda") and "size" in e]
            if not gpu:
                return ""
            n = max(e["size"] for e, _ in gpu)
            at = {(e.get("impl"), e.get("dtype")): v for e, v in gpu if e["size"] == n}
            parts = []
            for impl, dt in (("warptile", "fp32"), ("warptile_lb2", "fp32"), ("warptile_128t", "fp32"),
                             ("mma", "bf16"), ("mma_256", "bf16")):
                lib = at.get(("cublas", dt))
                if (impl, dt) in at and lib:
                    parts.append(f"{impl} {at[(impl, dt)] / 1e3:.1f} TF = {100 * at[(impl, dt)] / lib:.0f}% of cuBLAS {dt}")
            return f"n={n}: " + ", ".join(parts) if parts else ""
        if suite == "lecture":
            rows = [(e, v) for e, v in med.values() if e.get("batch") == 64 and e.get("dtype", "fp32") == "fp32"]
            return "batch 64: " + ", ".join(f"{e.get('device')} {e.get('impl')} {v:.0f} img/s"
                                            for e, v in sorted(rows, key=lambda r: (r[0].get("device"), r[0].get("impl"))))
        if suite == "transfer":
            best = {}
            for e, v in med.values():
                if e.get("host") == "pinned" and e.get("op") in ("h2d", "d2h"):
                    best[e["op"]] = max(best.get(e["op"], 0), v)
            return ", ".join(f"pinned {op} max {v:.1f} GB/s" for op, v in sorted(best.items()))
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return ""
    return ""


def results(d, mode):
    planned, entries, state = load_records(d)
    cases = {}
    for e in entries:  # one status per case name: failed > oom > skipped > verified
        name = e.get("name", "?")
        if e.get("run_type") == "aggregate":
            continue
        if e.get("skipped"):
            st = ("skipped", e["skipped"])
        elif e.get("error") == "out of memory":
            st = ("oom", e.get("error_message", ""))
        elif e.get("error_occurred") or e.get("verified") is False:
            st = ("failed", e.get("error_message", "not verified"))
        else:
            st = ("verified", "")
        rank = {"failed": 3, "oom": 2, "skipped": 1, "verified": 0}
        if name not in cases or rank[st[0]] > rank[cases[name][0]]:
            cases[name] = st
    count = lambda s: sum(1 for v in cases.values() if v[0] == s)
    line = (f"cases {len(cases)}/{len(planned) or '?'}: {count('verified')} verified, {count('failed')} failed, "
            f"{count('oom')} out of memory, {count('skipped')} skipped; {state}")
    failed = [n for n, v in cases.items() if v[0] == "failed"]
    if failed:
        line += "; failed: " + ", ".join(failed[:3]) + (" ..." if len(failed) > 3 else "")
        line += f" ({cases[failed[0]][1][:100]})"
    # On a GPU machine a skipped GPU case or peer is a failure: the GPU or torch was not usable.
    bad_skips = [(n, v[1]) for n, v in cases.items() if v[0] == "skipped" and
                 ("/cuda" in n or "pytorch" in n or "peer" in v[1] or "CUDA" in v[1])]
    peer = [why for n, why in bad_skips if "peer" in why]
    if peer:
        line += f"; PEER UNAVAILABLE: {peer[0][:120]}"
    elif bad_skips:
        line += f"; skipped: {bad_skips[0][1][:120]}"
    h = headline(entries)
    if h:
        line += "; " + h
    ok = bool(cases) and not failed and state in ("complete", "jsonl only") and len(cases) >= len(planned)
    if mode == "gpu" and bad_skips:
        ok = False
    if not cases:
        line = f"no case finished ({state})"
    return out(line, ok)


def sanitizer(log, mode):
    try:
        with open(log, errors="replace") as f:
            text = f.read()
    except OSError as e:
        return out(f"no log ({e})", False)
    m = re.findall(r"(ERROR SUMMARY|RACECHECK SUMMARY): ([^\n]*)", text)
    if not m:
        return out("no summary line (did compute-sanitizer start?)", False)
    n = sum(int(x) for _, s in m for x in re.findall(r"^(\d+)", s))
    return out("; ".join(s.strip() for _, s in m), n == 0)


def ncu_kernels(csv_path, mode):
    """The top kernels of one `ncu --csv --metrics gpu__time_duration.sum` run by total device time."""
    import csv
    total, count = {}, {}
    try:
        with open(csv_path, newline="", errors="replace") as f:
            rows = [r for r in csv.reader(f) if r]
    except OSError as e:
        return out(f"no csv ({e})", False)
    head = next((i for i, r in enumerate(rows) if "Kernel Name" in r and "Metric Value" in r), None)
    if head is None:
        return out("no kernel rows (did ncu profile anything?)", False)
    cols = rows[head]
    k, unit, val = cols.index("Kernel Name"), cols.index("Metric Unit"), cols.index("Metric Value")
    scale = {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3, "second": 1e6}
    for r in rows[head + 1:]:
        if len(r) <= val:
            continue
        try:
            us = float(r[val].replace(",", "")) * scale.get(r[unit], float("nan"))
        except ValueError:
            continue
        name = re.sub(r"\(.*", "", r[k]).strip()[:64]  # the name without its argument list
        total[name] = total.get(name, 0.0) + us
        count[name] = count.get(name, 0) + 1
    if not total:
        return out("no kernel durations", False)
    top = sorted(total, key=total.get, reverse=True)[:8]
    n = sum(count.values())
    return out(f"{n} kernels, {sum(total.values()) / 1e3:.2f} ms: " +
               "; ".join(f"{t} {count[t]}x {total[t] / count[t]:.1f} us" for t in top), True)


def main(argv):
    cmds = {"info": info, "gtest": gtest, "results": results, "sanitizer": sanitizer, "ncu_kernels": ncu_kernels}
    if len(argv) != 4 or argv[1] not in cmds:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        return 2
    return cmds[argv[1]](argv[2], argv[3])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
