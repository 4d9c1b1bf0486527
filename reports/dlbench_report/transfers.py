"""Section: host <-> device transfer bandwidth against copy size."""
from .common import fmt, fmt_bytes, series_label
from .style import Table, dedupe_legend, mark_failed, plt_new, zero_based

def sec_transfer(page, runs):
    cases = [c for r in runs for c in r.cases if c.suite == "transfer" and c.metric == "gb_per_s"
             and isinstance(c.params.get("size"), (int, float))]
    if not cases:
        return
    page.section("Host <-> device transfers",
                 "GB/s against copy size, one panel per direction; solid = pinned host memory, dashed = pageable, "
                 "dotted = pinned write-combined; colour = API.")
    direction = lambda c: str(c.params.get("direction", c.op))
    dirs = []
    for c in cases:
        if direction(c) not in dirs:
            dirs.append(direction(c))
    multi_run = len({c.run.label for c in cases}) > 1
    styles = {"pinned": "-", "pageable": "--", "pinned_wc": ":"}
    apis = sorted({str(c.params.get("api", "")) for c in cases})
    colors = ["#2f6db5", "#e07b00", "#1b7f3b", "#7b3fa0", "#b3261e", "#008b8b"]
    fig, axes = plt_new(7.5, 4.4, ncols=min(len(dirs), 3))
    notes = []
    rows = []
    for di, d in enumerate(dirs):
        ax = axes[di % len(axes)] if len(dirs) <= 3 else None
        if ax is None:
            continue
        cs = [c for c in cases if direction(c) == d]
        lines = {}
        for c in cs:
            key = (c.run.label if multi_run else "", c.device, str(c.params.get("host", "")), str(c.params.get("api", "")))
            lines.setdefault(key, []).append(c)
        failed_x = []
        for key, lc in lines.items():
            ok = sorted([c for c in lc if c.ok], key=lambda c: c.params["size"])
            for c in lc:
                if not c.ok:
                    failed_x.append(c.params["size"])
                    notes.append(f"not plotted: {c.short()}: {c.status}")
            if ok:
                ax.plot([c.params["size"] for c in ok], [c.value for c in ok], styles.get(key[2], "-.") ,
                        marker="o", markersize=3, color=colors[apis.index(key[3]) % 6] if len(set(k[1] for k in lines)) == 1
                        else colors[(apis.index(key[3]) * 2 + list(lines).index(key)) % 6],
                        label=series_label(list(key)))
                best = max(ok, key=lambda c: c.value)
                rows.append([d] + ([key[0]] if multi_run else []) + [key[1], key[2] or "-", key[3] or "-",
                             f"{fmt(best.value)} GB/s", fmt_bytes(best.params["size"])])
        mark_failed(ax, failed_x)
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(__import__("matplotlib.ticker", fromlist=["FuncFormatter"]).FuncFormatter(
            lambda v, _: fmt_bytes(v) if v >= 1 else ""))
        for lab in ax.get_xticklabels():
            lab.set_fontsize(7)
        zero_based(ax)
        ax.set_xlabel("copy size")
        ax.set_ylabel("GB/s")
        ax.set_title(d)
        dedupe_legend(ax, loc="best")
    if len(dirs) > 3:
        notes.append("directions not drawn (more than three): " + ", ".join(dirs[3:]))
    page.figure(fig, "transfer", "Transfer bandwidth against size per direction: pinned against pageable.", notes)
    if rows:
        page.table(Table("transfer_best", "Best bandwidth per direction and host memory",
                         ["Direction"] + (["Run"] if multi_run else []) + ["Device", "Host memory", "API",
                                                                          "Best GB/s", "at size"], rows))
