"""Section: the roofline per device. Ceilings: the CPU's measured FMA peak and memory bandwidth
(context.peaks), a GPU's measured cuBLAS SGEMM figure when the probe ran (else its theoretical fp32
peak) and its memory bandwidth. Every case whose record carries the napkin keys `flops` and `bytes`
(bench/napkin.h: matmul, conv, training) is a point at arithmetic intensity flops/bytes and its
achieved GFLOP/s."""
from .common import device_name, fmt, gpu_facts, num
from .style import Table, dedupe_legend, plt_new, wrap_label

MARKERS = {"matmul": "o", "conv": "s", "lecture": "D", "train": "^", "amp": "v"}
PALETTE = ["#2f6db5", "#e07b00", "#1b7f3b", "#7b3fa0", "#b3261e", "#008b8b", "#9c6b30", "#d4a017", "#5a7d9a"]


def series(c):
    """Legend label of a point: suite and op (training cases: the suite), plus impl when recorded."""
    base = f"{c.suite} training" if c.suite in ("lecture", "train") else f"{c.suite} {c.op}"
    impl = c.params.get("impl", c.rec.get("impl"))
    return base + (f" ({impl})" if isinstance(impl, str) and impl not in ("ours", "") else "")


def tag(c):
    """A few characters that say which point is which."""
    for k, fmt_ in (("batch", "b{}"), ("size", "{}"), ("layer", "{}")):
        if k in c.params:
            return fmt_.format(c.params[k])
    if all(k in c.params for k in ("m", "n", "k")):
        return f"{c.params['m']}x{c.params['n']}x{c.params['k']}"
    return ""


def ceilings(run, dev):
    """(GFLOP/s, GB/s, what) for a device of a run, or (None, None, why)."""
    if dev == "cpu":
        p = run.context.get("peaks") or {}
        return num(p.get("cpu_fp32_gflops")), num(p.get("cpu_mem_gb_per_s")), "measured FMA peak and bandwidth"
    g = gpu_facts(run, dev)
    probe = (((run.context.get("peaks") or {}).get("gpus") or {}).get(dev) or {})
    measured = num(probe.get("cublas_sgemm_gflops"))
    peak = measured or num(g.get("peak_fp32_gflops"))
    what = "cuBLAS SGEMM measured" if measured else "theoretical fp32 peak"
    return peak, num(g.get("peak_mem_gb_per_s")), what + ", theoretical bandwidth"


def points(runs):
    out = {}
    for r in runs:
        for c in r.cases:
            f, b = num(c.rec.get("flops")), num(c.rec.get("bytes"))
            if not (c.ok and f and b and c.time_s):
                continue
            out.setdefault((r, c.device), []).append((c, f / b, f / c.time_s * 1e-9))
    return out


def sec_roofline(page, runs):
    pts = points(runs)
    if not pts:
        return
    page.section("Roofline", "Achieved GFLOP/s against arithmetic intensity (FLOPs per byte that must move, "
                 "bench/napkin.h) per device; the roof is min(peak, bandwidth x intensity). Points under the slanted "
                 "part are memory-bound, under the flat part compute-bound.")
    multi_run = len({r.label for r, _ in pts}) > 1
    for (r, dev), ps in pts.items():
        peak, bw, what = ceilings(r, dev)
        fig, (ax,) = plt_new(8.5, 5.0)
        lo = min(i for _, i, _ in ps) / 4
        hi = max(i for _, i, _ in ps) * 4
        if peak and bw:
            ridge = peak / bw
            lo, hi = min(lo, ridge / 8), max(hi, ridge * 8)
            xs = [lo * (hi / lo) ** (k / 200) for k in range(201)]
            ax.plot(xs, [min(peak, bw * x) for x in xs], "-", color="#333", linewidth=2,
                    label=f"roof: {fmt(peak)} GFLOP/s, {fmt(bw)} GB/s ({what})")
            ax.axvline(ridge, color="#999", linestyle=":", linewidth=1)
            ax.annotate(f"ridge {ridge:.3g} FLOP/B", (ridge, 0.5), xycoords=("data", "axes fraction"), rotation=90,
                        fontsize=7, color="#666", ha="right", va="center")
        rows = []
        labels = []
        for c, _, _ in ps:
            if series(c) not in labels:
                labels.append(series(c))
        for c, inten, gf in sorted(ps, key=lambda t: t[1]):
            ax.plot([inten], [gf], MARKERS.get(c.suite, "x"), markersize=6, alpha=0.8,
                    color=PALETTE[labels.index(series(c)) % len(PALETTE)], label=series(c))
            if len(ps) <= 40 and tag(c):
                ax.annotate(tag(c), (inten, gf), xytext=(4, 3), textcoords="offset points", fontsize=6, color="#333")
            roof = min(peak, bw * inten) if (peak and bw) else None
            bound = "-" if roof is None else ("memory" if bw * inten < peak else "compute")
            rows.append([c.short(), f"{inten:.3g}", fmt(gf), fmt(roof) if roof else "-",
                         f"{100 * gf / roof:.1f}%" if roof else "-", bound])
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(lo, hi)
        top = max([gf for _, _, gf in ps] + ([peak] if peak else []))
        bottom = min(gf for _, _, gf in ps)
        ax.set_ylim(bottom / 3, top * 2)
        ax.set_xlabel("arithmetic intensity (FLOP per byte)")
        ax.set_ylabel("achieved GFLOP/s")
        title = f"Roofline: {device_name(r, dev)} ({dev})" + (f", {r.label}" if multi_run else "")
        ax.set_title(wrap_label(title, 70))
        dedupe_legend(ax, loc="lower right")
        if not (peak and bw):
            notes = [f"no roof: this run records no {'peak' if not peak else 'bandwidth'} for {dev}"]
        else:
            notes = []
        page.figure(fig, f"roofline_{dev}_{r.label}", f"{title}: every matmul, conv and training case with its "
                    "napkin FLOPs and bytes.", notes)
        page.table(Table(f"roofline_{dev}", f"Roofline points: {device_name(r, dev)} ({dev})",
                         ["Case", "FLOP/byte", "GFLOP/s", "Roof at it", "% of roof", "Bound"], rows),
                   collapsed=len(rows) > 25)
