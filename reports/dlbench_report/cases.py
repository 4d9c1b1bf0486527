"""Sections: comparison of several results folders, and every case of every suite."""
from .common import METRICS, fmt, fmt_time
from .style import Cell, Table, case_throughput, plt_new, ratio_axis, wrap_label

def sec_compare(page, runs):
    if len(runs) < 2:
        return
    suites = []
    for r in runs:
        for s in r.suites:
            if s not in suites:
                suites.append(s)
    shared_suites = [s for s in suites if sum(s in r.suites for r in runs) >= 2]
    page.section("Comparison", "Cases the results folders share, side by side; ratio = this run's throughput over the "
                 "first run that has the suite (above 1: faster).")
    single = [s for s in suites if s not in shared_suites]
    if single:
        page.text("Suites present in only one results folder (nothing to compare): " + ", ".join(
            f"{s} ({next(r.label for r in runs if s in r.suites)})" for s in single))
    if not shared_suites:
        return
    for s in shared_suites:
        rs = [r for r in runs if s in r.suites]
        base = rs[0]
        by = {}
        order = []
        for r in rs:
            for c in r.cases:
                if c.suite == s:
                    if c.name not in by:
                        by[c.name] = {}
                        order.append(c.name)
                    by[c.name][r.label] = c
        shared = [n for n in order if len(by[n]) >= 2]
        only = [n for n in order if len(by[n]) == 1]
        rows, ratios = [], {r.label: [] for r in rs[1:]}
        for n in shared:
            row = ["/".join(n.split("/")[1:])]
            metric = next((c.metric for c in by[n].values() if c.metric), None)
            row.append(METRICS.get(metric, "-"))
            for r in rs:
                c = by[n].get(r.label)
                row.append("(absent)" if c is None else Cell(c.status, "bad") if not c.ok else fmt(c.value))
            b = by[n].get(base.label)
            for r in rs[1:]:
                c = by[n].get(r.label)
                if b is not None and c is not None and b.ok and c.ok and b.value:
                    q = c.value / b.value
                    row.append(Cell(f"{q:.2f}x", "good" if q >= 1 else ""))
                    ratios[r.label].append((row[0], q))
                else:
                    row.append("-")
            rows.append(row)
        if rows:
            page.table(Table(f"compare_{s}", f"{s}: shared cases",
                             ["Case", "Metric"] + [r.label for r in rs] + [f"{r.label} / {base.label}" for r in rs[1:]], rows))
        else:
            page.text(f"{s}: the results folders share no case.")
        if only:
            page.table(Table(f"only_{s}", f"{s}: cases present in only one results folder", ["Case", "Only in"],
                             [["/".join(n.split("/")[1:]), next(iter(by[n]))] for n in only]), collapsed=len(only) > 15)
        for lab, qs in ratios.items():
            if not qs:
                continue
            shown = qs[:60]
            fig, (ax,) = plt_new(9, max(2.2, 0.28 * sum(wrap_label(n, 60).count(chr(10)) + 1 for n, _ in shown) + 1.2))
            ys = range(len(shown))
            ax.barh(list(ys), [q for _, q in shown], color=["#1b7f3b" if q >= 1 else "#b3261e" for _, q in shown])
            ax.axvline(1.0, color="#333", linewidth=1)
            ratio_axis(ax, [q for _, q in shown])
            ax.set_yticks(list(ys))
            ax.set_yticklabels([wrap_label(n, 60) for n, _ in shown], fontsize=7)
            ax.invert_yaxis()
            ax.set_xlabel(f"throughput ratio {lab} / {base.label}")
            ax.set_title(f"{s}: {lab} against {base.label}")
            for y, (_, q) in zip(ys, shown):
                ax.annotate(f"{q:.2f}x", (q, y), xytext=(3, 0), textcoords="offset points", va="center", fontsize=7)
            page.figure(fig, f"ratio_{s}_{lab}", f"{s}: throughput ratio {lab} / {base.label} per shared case "
                        "(green: faster, red: slower).",
                        [f"{len(qs) - len(shown)} more cases in the table"] if len(qs) > len(shown) else [])


def sec_cases(page, runs):
    page.section("All cases", "Every case of every suite with its verification status; failed, skipped and "
                 "unverified cases are shown as such.")
    suites = []
    for r in runs:
        for s in r.suites:
            if s not in suites:
                suites.append(s)
    for s in suites:
        multi_run = sum(s in r.suites for r in runs) > 1
        rows = []
        for r in runs:
            for c in r.cases:
                if c.suite != s:
                    continue
                status = Cell("yes", "good") if c.status == "ok" else Cell(c.status_text(), "bad")
                rows.append(([r.label] if multi_run else []) + [c.short(), status, fmt_time(c.time_s),
                             case_throughput(c), fmt(c.pct, 3), "-" if c.err is None else f"{c.err:.2g}"])
        bad = sum(1 for row in rows if getattr(row[2 if multi_run else 1], "cls", "") == "bad")
        page.table(Table(f"cases_{s}", f"{s}: {len(rows)} cases" + (f", {bad} failed/skipped/unverified" if bad else ""),
                         (["Run"] if multi_run else []) + ["Case", "Verified", "Median time", "Throughput", "% of peak",
                                                          "Max rel err"], rows), collapsed=len(rows) > 40)
