"""Section: suite dist. Collectives in the layout of nccl-tests (size, count, type, time, algbw,
busbw, #wrong; out-of-place beside in-place) with busbw against size per collective, and the
data-parallel training step's scaling (imgs/s, efficiency, step-time percentiles) with efficiency
against ranks. Record keys as agreed for suite dist (see the synthetic fixture in
tests/data/report/dist_synthetic/)."""
from .common import fmt, fmt_bytes, num, series_label
from .style import Cell, Table, dedupe_legend, mark_failed, plt_new, zero_based

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast")


def ival(c, key):
    v = c.get(key)
    n = num(v)
    return int(n) if n is not None and n == int(n) else v


def sec_dist(page, runs):
    cases = [c for r in runs for c in r.cases if c.suite == "dist"]
    if not cases:
        return
    page.section("Distributed: collectives and data-parallel training",
                 "Collectives as nccl-tests prints them: algbw = bytes / time; busbw = algbw x the collective's bus "
                 "factor (all_reduce 2(n-1)/n, all_gather and reduce_scatter (n-1)/n, broadcast 1), comparable "
                 "across rank counts. Data-parallel step: global imgs/s and efficiency = imgs/s over ranks x one "
                 "rank's imgs/s.")
    multi_run = len({c.run.label for c in cases}) > 1
    coll = [c for c in cases if c.op in COLLECTIVES]
    for op in [o for o in COLLECTIVES if any(c.op == o for c in coll)]:
        cs = [c for c in coll if c.op == op]
        keys = []
        for c in cs:
            k = (c.run.label if multi_run else "", c.device, c.dtype, ival(c, "ranks"))
            if k not in keys:
                keys.append(k)
        rows = []
        for k in keys:
            by_size = {}
            for c in cs:
                if (c.run.label if multi_run else "", c.device, c.dtype, ival(c, "ranks")) == k:
                    by_size.setdefault(ival(c, "bytes"), {})[int(num(c.get("inplace")) or 0)] = c
            for size in sorted(by_size, key=lambda s: num(s) or 0):
                row = ([k[0]] if multi_run else []) + [k[1], str(k[3]), fmt_bytes(size) if num(size) else str(size)]
                first = next(iter(by_size[size].values()))
                row += [str(ival(first, "count")), k[2]]
                for ip in (0, 1):
                    c = by_size[size].get(ip)
                    if c is None:
                        row += ["-"] * 4
                    elif not c.ok:
                        row += [Cell(c.status_text(), "bad"), "-", "-", "-"]
                    else:
                        t = num(c.rec.get("real_time"))
                        wrong = ival(c, "wrong")
                        row += [fmt(t, 4) if t is not None else "-", fmt(num(c.get("algbw_gb_per_s")), 4),
                                fmt(num(c.get("busbw_gb_per_s")), 4),
                                Cell(str(wrong), "bad" if wrong not in (0, None, "0") else "")]
                rows.append(row)
        page.table(Table(f"dist_{op}", f"{op}: out-of-place and in-place",
                         (["Run"] if multi_run else []) + ["Device", "Ranks", "Size", "Count", "Type",
                                                          "time (us)", "algbw (GB/s)", "busbw (GB/s)", "#wrong",
                                                          "in-place time (us)", "in-place algbw", "in-place busbw",
                                                          "in-place #wrong"], rows))
        # One panel per device (a CPU's MPI and a GPU's NCCL differ by 10-100x: one axis would flatten one).
        devs = sorted({c.device for c in cs}, key=lambda d: (d != "cpu", d))[:3]
        fig, axes = plt_new(7.5 if len(devs) > 1 else 8, 4.4, ncols=len(devs))
        notes = [] if len({c.device for c in cs}) <= 3 else ["devices not drawn (more than three)"]
        for dev, ax in zip(devs, axes):
            failed, lines = [], {}
            for c in cs:
                if c.device != dev:
                    continue
                key = (c.run.label if multi_run else "", c.dtype, f"{ival(c, 'ranks')} ranks",
                       "in-place" if num(c.get("inplace")) else "")
                lines.setdefault(key, []).append(c)
            for key, lc in lines.items():
                ok = sorted([c for c in lc if c.ok and num(c.get("busbw_gb_per_s")) is not None],
                            key=lambda c: num(c.get("bytes")) or 0)
                for c in lc:
                    if not c.ok:
                        failed.append(num(c.get("bytes")) or 1)
                        notes.append(f"not plotted: {c.short()}: {c.status}")
                if ok:
                    ax.plot([num(c.get("bytes")) for c in ok], [num(c.get("busbw_gb_per_s")) for c in ok],
                            "--" if key[3] else "-", marker="o", markersize=3, label=series_label(list(key)))
            mark_failed(ax, failed)
            ax.set_xscale("log", base=2)
            from matplotlib.ticker import FuncFormatter
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: fmt_bytes(v) if v >= 1 else ""))
            for lab in ax.get_xticklabels():
                lab.set_fontsize(7)
            zero_based(ax)
            ax.set_xlabel("message size")
            ax.set_ylabel("busbw (GB/s)")
            ax.set_title(f"{op} on {dev}")
            dedupe_legend(ax, loc="best")
        page.figure(fig, f"dist_{op}", f"{op}: busbw against message size (solid out-of-place, dashed in-place).",
                    notes)

    ddp = [c for c in cases if c.op == "ddp_step"]
    if not ddp:
        return
    ddp.sort(key=lambda c: (c.run.label, str(c.get("model")), str(c.get("variant")), num(c.get("bucket_mb")) or 0,
                            c.device, num(c.get("ranks")) or 0))
    rows = []
    for c in ddp:
        base = ([c.run.label] if multi_run else []) + [str(c.get("model", "-")), c.device, str(c.get("variant", "-")),
                                                       str(ival(c, "bucket_mb")), str(ival(c, "ranks")),
                                                       str(ival(c, "batch"))]
        if not c.ok:
            rows.append(base + [Cell(c.status_text(), "bad")] + ["-"] * 4)
            continue
        eff = num(c.get("efficiency"))
        rows.append(base + [fmt(c.value), f"{100 * eff:.0f}%" if eff is not None else "-"]
                    + [fmt(num(c.get(k)), 3) for k in ("p50_ms", "p90_ms", "p95_ms")])
    page.table(Table("dist_ddp", "Data-parallel training step: scaling",
                     (["Run"] if multi_run else []) + ["Model", "Device", "Variant", "Bucket MB", "Ranks",
                                                      "Batch per rank", "imgs/s (global)", "Efficiency",
                                                      "p50 ms", "p90 ms", "p95 ms"], rows))
    fig, (ax,) = plt_new(8, 4.4)
    lines = {}
    for c in ddp:
        if c.ok and num(c.get("efficiency")) is not None:
            key = (c.run.label if multi_run else "", str(c.get("model", "")), c.device, str(c.get("variant", "")),
                   f"bucket {ival(c, 'bucket_mb')} MB" if c.get("bucket_mb") is not None else "")
            lines.setdefault(key, []).append(c)
    for key, lc in lines.items():
        lc.sort(key=lambda c: num(c.get("ranks")) or 0)
        ax.plot([num(c.get("ranks")) for c in lc], [100 * num(c.get("efficiency")) for c in lc], "o-",
                label=series_label(list(key)))
    ranks = sorted({num(c.get("ranks")) for lc in lines.values() for c in lc})
    if ranks:
        ax.set_xticks(ranks)
        ax.set_xticklabels([f"{r:g}" for r in ranks])
    ax.axhline(100, color="#333", linewidth=1, linestyle=":")
    zero_based(ax)
    ax.set_ylim(0, max(110, ax.get_ylim()[1]))
    ax.set_xlabel("ranks")
    ax.set_ylabel("scaling efficiency (%)")
    ax.set_title("Data-parallel training: efficiency against ranks")
    dedupe_legend(ax, loc="best")
    page.figure(fig, "dist_efficiency", "Scaling efficiency of the data-parallel step against the number of ranks.")
