"""Section: the machine fingerprint of every results folder."""
from .common import fmt, num
from .style import Table

def sec_machines(page, runs):
    page.section("Machines", "The fingerprint of every results folder: hardware, libraries, build and run settings.")
    rows_spec = [
        ("Results", lambda r, c: r.path),
        ("Host", lambda r, c: c.get("host_name")),
        ("Date", lambda r, c: c.get("date")),
        ("CPU", lambda r, c: (c.get("cpu") or {}).get("model")),
        ("Logical cores", lambda r, c: (c.get("cpu") or {}).get("logical_cores", c.get("num_cpus"))),
        ("ISA", lambda r, c: " ".join(map(str, (c.get("cpu") or {}).get("isa") or []))),
        ("OpenBLAS", lambda r, c: ob(c)),
        ("CPU peaks", lambda r, c: cpu_peaks(c)),
        ("CUDA", lambda r, c: cuda_line(c)),
        ("GPUs", lambda r, c: gpus_line(c)),
        ("OS", lambda r, c: c.get("os")),
        ("Compiler", lambda r, c: c.get("compiler")),
        ("dlbench", lambda r, c: git_line(c)),
        ("Run", lambda r, c: run_line(c)),
        ("Command", lambda r, c: " ".join(map(str, c.get("argv") or []))),
        ("Environment", lambda r, c: " ".join(f"{k}={v}" for k, v in (c.get("env") or {}).items())),
    ]
    rows = []
    for name, fn in rows_spec:
        vals = []
        for r in runs:
            try:
                v = fn(r, r.context)
            except Exception:
                v = None
            vals.append("-" if v in (None, "") else str(v))
        rows.append([name] + vals)
    for r in runs:
        if r.context.get("fixture"):
            page.text(f"{r.label}: FIXTURE, not a measurement: {r.context.get('fixture')}", "warn")
        if r.note:
            page.text(f"{r.label}: {r.note}", "warn")
        run = r.context.get("run") or {}
        if run.get("interrupted") is True:
            page.text(f"{r.label}: this run was interrupted; only the cases that finished are here.", "warn")
        planned = run.get("planned") if isinstance(run.get("planned"), list) else []
        if planned:  # "N of M cases": N finished of the M the run planned
            done = len({c.name for c in r.cases} & set(planned))
            page.text(f"{r.label}: {done} of {len(planned)} cases" + ("" if done == len(planned) else " (incomplete run)"),
                      "" if done == len(planned) else "warn")
    page.table(Table("machines", "Machine fingerprints", ["Field"] + [r.label for r in runs], rows))


def ob(c):
    o = c.get("openblas") or {}
    return f"{o.get('version', '?')} core {o.get('core', '?')}, {o.get('threads', '?')} threads" if o else None


def cpu_peaks(c):
    p = c.get("peaks") or {}
    g, m = num(p.get("cpu_fp32_gflops")), num(p.get("cpu_mem_gb_per_s"))
    if g is None and m is None:
        return None
    return f"{fmt(g)} GFLOP/s fp32 ({p.get('cpu_fma_isa', '?')}), {fmt(m)} GB/s memory"


def cuda_line(c):
    cu = c.get("cuda") or {}
    if not cu:
        return None
    s = f"driver {cu.get('driver', '?')}, runtime {cu.get('runtime', '?')}, cuBLAS {cu.get('cublas', '?')}, cuDNN {cu.get('cudnn', '?')}"
    if cu.get("available") is False:
        s += f" — no GPU used: {cu.get('reason', '')}"
    return s


def gpus_line(c):
    gs = (c.get("cuda") or {}).get("gpus") or []
    out = []
    for g in gs:
        if not isinstance(g, dict):
            continue
        mem = num(g.get("mem_total_bytes"))
        out.append(f"cuda:{g.get('index', '?')} {g.get('name', '?')} (cc {g.get('compute_capability', '?')}, "
                   f"{g.get('sms', '?')} SMs, {fmt(mem / 2**30, 3) if mem else '?'} GiB, "
                   f"{fmt(num(g.get('peak_fp32_gflops')))} GFLOP/s fp32, {fmt(num(g.get('peak_mem_gb_per_s')))} GB/s)")
    return "; ".join(out) or "none"


def git_line(c):
    g = c.get("git") or {}
    s = str(c.get("dlbench_version", ""))
    if g:
        s += f" git {str(g.get('sha', '?'))[:12]}{' (dirty)' if g.get('dirty') else ''}"
    return s.strip() or None


def run_line(c):
    r = c.get("run") or {}
    if not r:
        return None
    return (f"suites {','.join(map(str, r.get('suites') or []))}; devices {','.join(map(str, r.get('devices') or []))}; "
            f"{'quick; ' if r.get('quick') else ''}{r.get('repetitions', '?')} repetitions; "
            f"wall {fmt(num(r.get('wall_s')), 3)} s")
