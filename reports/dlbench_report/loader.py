"""Section: the data loader alone (suite loader): images/s against workers, ours beside PyTorch's DataLoader."""
from .common import fmt, series_label
from .style import Table, dedupe_legend, mark_failed, plt_new, zero_based


def sec_loader(page, runs):
    cases = [c for r in runs for c in r.cases if c.suite == "loader" and isinstance(c.params.get("workers"), (int, float))]
    if not cases:
        return
    page.section("Data loader: images/s against workers",
                 "One epoch per repetition through a fresh loader (workers started, ToTensor + Normalize per image, "
                 "batches collated, stopped), every batch checked against the reference transform before timing; "
                 "PyTorch: torchvision's dataset and DataLoader over the same files. Solid: ours; dashed: PyTorch.")
    multi_run = len({c.run.label for c in cases}) > 1
    keys = ("decode", "augment", "pin", "prefetch", "batch")
    varying = [k for k in keys if len({str(c.params.get(k)) for c in cases}) > 1]
    impl = lambda c: str(c.params.get("impl", "ours"))
    mode = lambda c: str(c.params.get("mode", ""))
    lines = {}
    for c in cases:
        # Workers 0 (mode "inline") starts every mode's line.
        modes = sorted({mode(x) for x in cases if mode(x) != "inline"}) or ["inline"]
        for m in (modes if mode(c) == "inline" else [mode(c)]):
            key = (c.run.label if multi_run else "", impl(c), m) + tuple(f"{k}={c.params.get(k)}" for k in varying)
            lines.setdefault(key, []).append(c)
    fig, (ax,) = plt_new(8, 4.6)
    colors = ["#2f6db5", "#e07b00", "#1b7f3b", "#7b3fa0", "#b3261e", "#008b8b"]
    failed, rows = [], []
    groups = sorted({k[2:] for k in lines})
    for key, lc in lines.items():
        ok = sorted([c for c in lc if c.ok], key=lambda c: c.params["workers"])
        failed += [c.params["workers"] for c in lc if not c.ok]
        if ok:
            ax.plot([c.params["workers"] for c in ok], [c.value for c in ok], "-" if key[1] == "ours" else "--",
                    marker="o", markersize=4, color=colors[groups.index(key[2:]) % 6],
                    label=series_label([key[0], "ours" if key[1] == "ours" else "PyTorch"] + list(key[2:])))
    mark_failed(ax, failed)
    zero_based(ax)
    ax.xaxis.set_major_locator(__import__("matplotlib.ticker", fromlist=["MaxNLocator"]).MaxNLocator(integer=True))
    ax.set_xlabel("workers (0: in the training loop's thread)")
    ax.set_ylabel("images/s")
    ax.set_title("Data loader scaling")
    dedupe_legend(ax, loc="best")
    page.figure(fig, "loader_scaling", "Loader throughput against worker count, ours beside PyTorch's DataLoader.")
    by = {}
    for c in cases:
        k = (c.run.label, mode(c), c.params["workers"]) + tuple(str(c.params.get(x)) for x in keys)
        by.setdefault(k, {})[impl(c)] = c
    for k, pair in by.items():
        o, p = pair.get("ours"), pair.get("pytorch")
        ratio = f"{o.value / p.value:.1f}x" if o is not None and p is not None and o.ok and p.ok and p.value else "-"
        val = lambda c: fmt(c.value) if c is not None and c.ok else ("-" if c is None else c.status)
        first = lambda c: fmt(c.get("first_batch_ms")) if c is not None and c.ok and c.get("first_batch_ms") is not None else "-"
        rows.append(([k[0]] if multi_run else []) + [k[3], k[1], str(k[2]), k[5], val(o), val(p), ratio, first(o), first(p)])
    page.table(Table("loader", "Loader images/s, ours and PyTorch's DataLoader, same files and rounds",
                     (["Run"] if multi_run else []) + ["Decode", "Mode", "Workers", "Pin", "Ours imgs/s", "PyTorch imgs/s",
                                                       "Ours / PyTorch", "First batch ms", "PyTorch first ms"], rows))
