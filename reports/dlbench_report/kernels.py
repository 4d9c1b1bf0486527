"""Section: GFLOP/s against size for the kernel suites (matmul, conv) with the device peaks."""
from .common import flops_peak, fmt, series_label
from .style import batch_axis, dedupe_legend, mark_failed, plt_new, zero_based

def shape_kind(c):
    """How a case is placed on an x axis: by 'size', by an m x n x k shape, by 'layer', or 'other'."""
    if isinstance(c.params.get("size"), (int, float)):
        return "size"
    if all(isinstance(c.params.get(k), (int, float)) for k in ("m", "n", "k")):
        return "mnk"
    return "layer" if "layer" in c.params else "other"


def sec_gflops(page, runs):
    cases = [c for r in runs for c in r.cases if c.metric == "gflops"]
    if not cases:
        return
    page.section("GFLOP/s against size",
                 "Per implementation and device; horizontal dashed lines are the device's peak for the "
                 "figure's dtype, the one its % of peak is taken against (CPU: the measured FMA peak, twice it "
                 "for a bf16 row that ran on bf16 dot products; GPU: theoretical).")
    groups = {}
    for c in cases:
        groups.setdefault((c.suite, c.op, c.dtype, shape_kind(c)), []).append(c)
    multi_run = len({c.run.label for c in cases}) > 1
    for (suite, op, dtype, shape), cs in groups.items():
        if not any(c.ok for c in cs):
            page.text(f"{suite} {op} {dtype}: nothing to plot, every case is "
                      + ", ".join(sorted({c.status for c in cs})) + f" ({len(cs)} cases, listed under All cases).", "warn")
            continue
        kind, xlabel = shape, {"size": "size (n for n x n x n)" if suite == "matmul" else "size",
                               "mnk": "shape m x n x k", "layer": "layer"}.get(shape, "case")
        if shape == "other" and len({c.params.get("batch") for c in cs}) > 1 and \
                all(isinstance(c.params.get("batch"), (int, float)) for c in cs):
            kind, xlabel = "batch", "batch size"
        fixed = {"size": ("size",), "mnk": ("m", "n", "k"), "layer": ("layer",), "batch": ("batch",)}.get(kind, ())
        var_keys = [k for k in sorted({k for c in cs for k in c.params})
                    if k not in fixed and len({str(c.params.get(k)) for c in cs}) > 1]
        if kind in ("size", "batch"):
            xpos = lambda c, kind=kind: c.params.get(kind)
        else:
            by_batch = kind == "layer" and len({str(c.params.get("batch")) for c in cs}) > 1
            if by_batch:
                var_keys = [k for k in var_keys if k != "batch"]
            lab = {"mnk": lambda c: f"{c.params['m']}x{c.params['n']}x{c.params['k']}",
                   "layer": lambda c: str(c.params["layer"]) + (f" b{c.params.get('batch')}" if by_batch else "")
                   }.get(kind, lambda c: c.short())
            order = sorted(cs, key=lambda c: (float(c.params["m"]) * float(c.params["n"]) * float(c.params["k"]))
                           if kind == "mnk" else 0)
            cats = []
            for c in order:
                if lab(c) not in cats:
                    cats.append(lab(c))
            xpos = lambda c, lab=lab, cats=cats: cats.index(lab(c))
            kind = "cat"
        lines = {}
        for c in cs:
            key = (c.run.label if multi_run else "", c.device) + tuple(f"{k}={c.params.get(k)}" for k in var_keys)
            lines.setdefault(key, []).append(c)
        fig, (ax,) = plt_new(8.5 if kind != "cat" else 10, 4.8)
        failed_x, notes = [], []
        for key, lc in lines.items():
            ok = [c for c in lc if c.ok and isinstance(xpos(c), (int, float))]
            ok.sort(key=xpos)
            for c in lc:
                if not c.ok:
                    if isinstance(xpos(c), (int, float)):
                        failed_x.append(xpos(c))
                    notes.append(f"not plotted: {c.short()}: {c.status}")
            if ok:
                mk = ("o" if key[1] == "cpu" else "s") + ("" if kind == "cat" else "-")  # categories are not a curve
                ax.plot([xpos(c) for c in ok], [c.value for c in ok], mk, markersize=7, label=series_label(list(key)))
        peaks = {}
        for c in cs:
            p, what = flops_peak(c)
            key = (c.run.label if multi_run else "", c.device)
            if p and (key not in peaks or c.pct):  # a case's own ceiling before the fp32 fallback
                peaks[key] = (p, what)
        for i, ((rl, dev), (p, what)) in enumerate(sorted(peaks.items())):
            ax.axhline(p, linestyle="--", color=["#555", "#b3261e", "#1b7f3b", "#7b3fa0"][i % 4], linewidth=1.2,
                       label=series_label([rl, dev, f"{what} {fmt(p)} GFLOP/s"]))
        mark_failed(ax, failed_x)
        if kind == "cat":
            ax.set_xticks(range(len(cats)))
            ax.set_xticklabels(cats, rotation=30, ha="right", fontsize=8)
        else:
            batch_axis(ax)
        zero_based(ax)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(f"GFLOP/s ({dtype})")
        ax.set_title(f"{suite} {op} {dtype}" + (f" by {xlabel}" if shape != "size" else ""))
        dedupe_legend(ax, loc="best")
        page.figure(fig, f"gflops_{suite}_{op}_{dtype}_{shape}", f"{suite} {op} {dtype}: GFLOP/s against {xlabel}.", notes)
