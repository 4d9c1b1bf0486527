"""Sections: the lecture table and bars, throughput against batch size with the CPU/GPU crossover, AMP."""
import math

from .common import LECTURE_FIGURES, LECTURE_HW, device_kind, device_name, fmt, num, same_machine, series_label
from .style import Cell, Table, batch_axis, case_throughput, dedupe_legend, mark_failed, plt_new, wrap_label, zero_based

def sec_lecture(page, runs):
    cases = [c for r in runs for c in r.cases if c.suite == "lecture" and c.metric in (None, "imgs_per_s")]
    cases = [c for c in cases if "batch" in c.params]
    if not cases:
        return
    page.section("Lecture: training throughput",
                 f"Net(hidden_num_chans=128) on CIFAR-10, one training epoch. Lecture figures: {LECTURE_HW}.")
    multi_run = len({c.run.label for c in cases}) > 1
    multi_gpu = len({c.device for c in cases if c.device != "cpu"}) > 1
    # Rows fed by the data loader (--loader: key fed_by) get their own column beside the resident rows.
    fed = lambda c: str(c.get("fed_by", "resident"))
    has_fed = any(fed(c) != "resident" for c in cases)
    varying = {k for k in {k for c in cases for k in c.params}
               if k not in ("batch", "fed_by") and len({str(c.params.get(k)) for c in cases}) > 1}
    variant = lambda c: series_label([c.op if len({x.op for x in cases}) > 1 else ""]
                                     + [f"{k}={v}" for k, v in c.params.items() if k in varying]
                                     + ([c.dtype] if len({x.dtype for x in cases}) > 1 else []))
    has_variant = any(variant(c) for c in cases)

    def order(c):
        b = c.params["batch"]
        pref = {64: 0, 4: 1, 2: 2}.get(b, 3)
        return (c.run.label if multi_run else "", pref, -b if isinstance(b, (int, float)) else 0,
                0 if c.device == "cpu" else 1, c.device, variant(c), fed(c) != "resident", fed(c))
    cases.sort(key=order)
    headers = (["Run"] if multi_run else []) + ["Device", "Batchsize"] + (["Variant"] if has_variant else []) + \
              (["Fed by"] if has_fed else []) + ["Train throughput", "Lecture", "Ours / lecture", "Hardware"]
    fed_label = lambda c: "resident tensors" if fed(c) == "resident" else (
        "loader: 2 workers (the lecture's)" if fed(c) == "lecture" else f"loader: {fed(c)}")
    rows = []
    for c in cases:
        kind = device_kind(c.device)
        dev = f"{kind} ({c.device})" if multi_gpu and kind == "GPU" else kind
        lec = LECTURE_FIGURES.get((kind, c.params["batch"]))
        ours = Cell(c.status_text(), "bad") if not c.ok else f"{fmt(c.value, 4)} imgs/sec"
        ratio = f"{c.value / lec:.2f}x" if (c.ok and lec) else "-"
        rows.append(([c.run.label] if multi_run else []) + [dev, str(c.params["batch"])]
                    + ([variant(c)] if has_variant else []) + ([fed_label(c)] if has_fed else [])
                    + [ours, f"{lec} imgs/sec" if lec else "-", ratio, device_name(c.run, c.device)])
    page.table(Table("lecture", "Device | Batchsize | Train throughput (ours beside the lecture's)", headers, rows))

    def who(c):  # our implementation, or a peer (the PyTorch run) measured beside it
        return "peer" if c.params.get("impl") == "pytorch" else "ours"

    # Bar chart: ours (per run) and the lecture's, grouped by device x batch.
    groups = []
    for c in cases:
        g = (device_kind(c.device), c.params["batch"])
        if g not in groups:
            groups.append(g)
    for g in LECTURE_FIGURES:
        if g not in groups:
            groups.append(g)
    if any(g in LECTURE_FIGURES for g in groups if any((device_kind(c.device), c.params["batch"]) == g for c in cases)):
        groups = [g for g in groups if g in LECTURE_FIGURES]  # the lecture's batches; the rest are in the batch plot
    groups.sort(key=lambda g: ({64: 0, 4: 1, 2: 2}.get(g[1], 3), -g[1] if isinstance(g[1], (int, float)) else 0,
                               0 if g[0] == "CPU" else 1))
    series = []
    for c in cases:
        s = series_label([c.run.label if multi_run else who(c), c.device if multi_gpu else "", variant(c),
                                fed_label(c) if has_fed else ""])
        if s not in series:
            series.append(s)
    fig, (ax,) = plt_new(9, 4.6)
    width = 0.8 / (len(series) + 1)
    xs = range(len(groups))
    failed = []
    colors = ["#2f6db5", "#e07b00", "#1b7f3b", "#7b3fa0", "#b3261e", "#008b8b"]
    for si, s in enumerate(series):
        vals = []
        for gi, g in enumerate(groups):
            v = None
            for c in cases:
                cs = series_label([c.run.label if multi_run else who(c), c.device if multi_gpu else "", variant(c),
                                fed_label(c) if has_fed else ""])
                if cs == s and (device_kind(c.device), c.params["batch"]) == g:
                    if c.ok:
                        v = c.value
                    else:
                        failed.append((gi + si * width - 0.4 + width / 2, f"{g[0]} {g[1]}: {c.status}"))
            vals.append(v if v is not None else 0)
        bars = ax.bar([x + si * width - 0.4 + width / 2 for x in xs], vals, width, label=s, color=colors[si % 6])
        for b, v in zip(bars, vals):
            if v:
                ax.annotate(f"{v:.0f}", (b.get_x() + b.get_width() / 2, v), ha="center", va="bottom", fontsize=7,
                            rotation=90 if len(series) > 1 else 0)
    lec = [LECTURE_FIGURES.get(g, 0) for g in groups]
    lb = ax.bar([x + len(series) * width - 0.4 + width / 2 for x in xs], lec, width,
                label=f"lecture ({LECTURE_HW})", color="#9aa4b2", hatch="//")
    for b, v in zip(lb, lec):
        if v:
            ax.annotate(f"{v}", (b.get_x() + b.get_width() / 2, v), ha="center", va="bottom", fontsize=7,
                        rotation=90 if len(series) > 1 else 0)
    mark_failed(ax, [f[0] for f in failed])
    ax.set_xticks(list(xs))
    ax.set_xticklabels([f"{d}\nbatch {b}" for d, b in groups])
    ax.set_ylabel("train throughput (imgs/sec)")
    ax.margins(y=0.15)
    ax.set_title("Lecture model: training throughput, ours vs the lecture's")
    dedupe_legend(ax, loc="upper right")
    page.figure(fig, "lecture_bars", "Training throughput per device and batch size; grey hatched bars are the "
                "lecture's published figures.", [f"not plotted: {f[1]}" for f in failed])


def crossover(cpu_pts, gpu_pts):
    """Batch sizes where the GPU curve crosses the CPU curve (log-log interpolation), and a summary."""
    shared = sorted(set(cpu_pts) & set(gpu_pts))
    if not shared:
        return [], "no shared batch sizes"
    diff = [(b, math.log(gpu_pts[b]) - math.log(cpu_pts[b])) for b in shared]
    xs = []
    for (b0, d0), (b1, d1) in zip(diff, diff[1:]):
        if (d0 <= 0) != (d1 <= 0):
            t = d0 / (d0 - d1) if d0 != d1 else 0.5
            xs.append(math.exp(math.log(b0) + t * (math.log(b1) - math.log(b0))))
    faster = [b for b, d in diff if d > 0]
    if not faster:
        summary = "CPU faster at every shared batch size"
    elif len(faster) == len(diff):
        summary = f"GPU faster at every shared batch size (from {shared[0]})"
    else:
        first = next(b for i, (b, d) in enumerate(diff) if all(dd > 0 for _, dd in diff[i:])) \
            if diff[-1][1] > 0 else None
        summary = f"GPU faster from batch {first}" if first else "GPU faster at some batch sizes only"
    return xs, summary


def sec_batch(page, runs):
    cases = [c for r in runs for c in r.cases if c.rate_unit() and isinstance(c.params.get("batch"), (int, float))]
    groups = {}
    for c in cases:
        model = c.get("model", c.get("config", c.get("net", "")))
        groups.setdefault((c.suite, c.op, str(model), c.rate_unit()), []).append(c)
    groups = {k: v for k, v in groups.items() if len({c.params["batch"] for c in v}) >= 2}
    if not groups:
        return
    page.section("Throughput against batch size",
                 "Images (or, for the sequence models and GPT-2, tokens) per second against batch size (log batch axis, throughput from zero), one line per device and setting; the dotted "
                 "vertical lines mark where the GPU curve crosses the CPU curve.")
    multi_run = len({c.run.label for c in cases}) > 1
    xrows = []
    for (suite, op, model, unit), cs in groups.items():
        var_keys = [k for k in sorted({k for c in cs for k in c.params}) if k not in ("batch", "model", "config", "net")
                    and len({str(c.params.get(k)) for c in cs}) > 1]
        multi_dtype = len({c.dtype for c in cs}) > 1
        lines = {}
        for c in cs:
            key = (c.run.label if multi_run else "", c.dtype if multi_dtype else "",
                   tuple(f"{k}={c.params.get(k)}" for k in var_keys))
            lines.setdefault(key, {}).setdefault(c.device, []).append(c)
        fig, (ax,) = plt_new()
        failed_x, notes = [], []
        for key, by_dev in lines.items():
            pts = {}
            for dev in sorted(by_dev, key=lambda d: (d != "cpu", d)):
                ok = sorted([c for c in by_dev[dev] if c.rate() is not None], key=lambda c: c.params["batch"])
                for c in by_dev[dev]:
                    if c.rate() is None:
                        failed_x.append(c.params["batch"])
                        notes.append(f"not plotted: {c.device} batch {c.params['batch']} {series_label(key)}: {c.status}")
                if ok:
                    pts[dev] = {c.params["batch"]: c.rate() for c in ok}
                    ax.plot([c.params["batch"] for c in ok], [c.rate() for c in ok],
                            "o-" if dev == "cpu" else "s-", label=series_label([device_kind(dev) + f" ({dev})"] + list(key)))
            for dev in pts:
                if dev == "cpu" or "cpu" not in pts:
                    continue
                xs, summary = crossover(pts["cpu"], pts[dev])
                for x in xs:
                    ax.axvline(x, color="#b3261e", linestyle=":", linewidth=1.5)
                    ax.annotate(f"crossover ~{x:.3g}", (x, 0.96), xycoords=("data", "axes fraction"),
                                rotation=90, ha="right", va="top", fontsize=8, color="#b3261e")
                xrows.append([suite, op, model or "-", series_label(list(key)) or "-", dev, summary,
                              ", ".join(f"{x:.3g}" for x in xs) or "-"])
        mark_failed(ax, failed_x)
        batch_axis(ax)
        zero_based(ax)
        ax.set_xlabel("batch size")
        ax.set_ylabel(unit)
        ax.set_title(series_label([suite, op, model]))
        dedupe_legend(ax, loc="best")
        page.figure(fig, f"batch_{suite}_{op}_{model}", f"{series_label([suite, op, model])}: throughput against batch size.", notes)
    if xrows:
        page.table(Table("crossover", "CPU/GPU crossover", ["Suite", "Op", "Model", "Setting", "GPU", "Verdict",
                                                            "Crossing batch (interpolated)"], xrows))


def sec_amp(page, runs):
    cases = [c for r in runs for c in r.cases if c.suite == "amp"]
    if not cases:
        return
    page.section("Mixed precision (AMP)", "Speedup over fp32 and peak device memory per dtype.")
    multi_run = len({c.run.label for c in cases}) > 1
    setting = lambda c: series_label(([c.run.label] if multi_run else []) + [c.device, c.get("model", ""),
                                     f"batch {c.params['batch']}" if "batch" in c.params else "",
                                     ] + [f"{k}={v}" for k, v in c.params.items() if k not in ("model", "batch")])
    fp32 = {setting(c): c for c in cases if c.dtype == "fp32" and c.ok}
    rows, data = [], []
    for c in cases:
        sp = num(c.rec.get("speedup")) if c.status == "ok" else None
        if sp is None and c.ok and setting(c) in fp32 and fp32[setting(c)].value:
            sp = c.value / fp32[setting(c)].value
        mem = num(c.rec.get("peak_device_bytes")) if c.status == "ok" else None
        rows.append([setting(c), c.dtype, case_throughput(c), f"{sp:.2f}x" if sp is not None else "-",
                     f"{fmt(mem / 2**20)} MiB" if mem is not None else "-"])
        data.append((c, sp, mem))
    page.table(Table("amp", "AMP per dtype", ["Setting", "dtype", "Throughput", "Speedup vs fp32", "Peak device memory"], rows))
    settings = []
    for c in cases:
        if setting(c) not in settings:
            settings.append(setting(c))
    dtypes = []
    for c in cases:
        if c.dtype not in dtypes:
            dtypes.append(c.dtype)
    fig, axes = plt_new(7.2, 4.6, ncols=2)
    width = 0.8 / max(1, len(dtypes))
    colors = {"fp32": "#9aa4b2", "tf32": "#2f6db5", "bf16": "#e07b00", "fp16": "#1b7f3b"}
    notes = []
    for ai, (ax, what) in enumerate(zip(axes, ("speedup", "memory"))):
        failed_x = []
        for di, dt in enumerate(dtypes):
            xs, ys = [], []
            for si, s in enumerate(settings):
                for c, sp, mem in data:
                    if setting(c) == s and c.dtype == dt:
                        x = si - 0.4 + width * (di + 0.5)
                        v = sp if what == "speedup" else (mem / 2**20 if mem is not None else None)
                        if c.status != "ok" or v is None:
                            if c.status != "ok":
                                failed_x.append(x)
                                if ai == 0:
                                    notes.append(f"not plotted: {s} {dt}: {c.status}")
                        else:
                            xs.append(x)
                            ys.append(v)
            ax.bar(xs, ys, width, label=dt, color=colors.get(dt, "#7b3fa0"))
        mark_failed(ax, failed_x)
        if what == "speedup":
            ax.axhline(1.0, color="#333", linewidth=1)
        ax.set_xticks(range(len(settings)))
        ax.set_xticklabels([wrap_label(s, 28) for s in settings], rotation=25, ha="right", fontsize=7)
        ax.set_ylabel("speedup over fp32 (x)" if what == "speedup" else "peak device memory (MiB)")
        ax.set_title("AMP speedup" if what == "speedup" else "AMP peak memory")
        dedupe_legend(ax, loc="best")
    page.figure(fig, "amp", "Speedup over fp32 and peak device memory per dtype.", notes)


# ---------------------------------------------------------------------------------------------
# The opening answer: GPU against CPU per model, across results folders (a CPU run from this machine
# beside a committed GPU run from another works the same as one run with both devices).

def training_series(runs):
    """{model: [(run, device, {batch: rate}, unit)]} of our fp32 training cases in the lecture's setting
    (pageable input, no CUDA graph; peers excluded): the image models' imgs/s (lecture, train) and the
    sequence models' and GPT-2's tokens/s (seq, gpt2), a model with its sizes (Case.model_label)."""
    out = {}
    for r in runs:
        series = {}
        for c in r.cases:
            if not (c.rate() is not None and c.suite in ("lecture", "train", "seq", "gpt2") and c.op == "train"
                    and c.dtype == "fp32" and isinstance(c.params.get("batch"), (int, float))):
                continue
            if c.params.get("impl", "ours") != "ours" or str(c.params.get("input", "pageable")) != "pageable" \
                    or c.get("cuda_graph") in (True, 1) or str(c.get("attn", "flash")) != "flash" \
                    or str(c.get("ckpt", "off")) != "off":
                continue
            model = c.model_label() if c.suite in ("seq", "gpt2") else str(c.get("model", "net128"))
            pts = series.setdefault((model, c.device, c.rate_unit()), {})
            pts[c.params["batch"]] = max(pts.get(c.params["batch"], 0), c.rate())
        for (model, dev, unit), pts in series.items():
            out.setdefault(model, []).append((r, dev, pts, unit))
    return out


def is_fixture(run):
    return bool(run.context.get("fixture"))


def cross_rows(runs):
    """One row per model x (CPU series, GPU series): speed-ups at batch 64 and 2, crossover."""
    rows = []
    for model, ss in training_series(runs).items():
        cpus = [s for s in ss if s[1] == "cpu"]
        gpus = [s for s in ss if s[1] != "cpu"]
        if not cpus or not gpus:
            continue
        cr, _, cpts, unit = cpus[0]  # the first folder's CPU (this machine's, by the command's order)
        for gr, gdev, gpts, _ in gpus:
            xs, summary = crossover(cpts, gpts)
            # At batch 64 and 2 (the lecture's); a series measured elsewhere (gpt2: batch 4) at its own batches.
            shared = sorted(set(cpts) & set(gpts))
            picks = ([b for b in (64, 2) if b in shared] or sorted({shared[-1], shared[0]}, reverse=True)) if shared else []
            sp = {b: gpts[b] / cpts[b] for b in picks if cpts[b]}
            rows.append({"model": model, "cpu_run": cr, "gpu_run": gr, "gpu": gdev, "cpu_pts": cpts, "gpu_pts": gpts,
                         "xs": xs, "summary": summary, "sp": sp, "unit": unit})
    return rows


def opening_answer(page, runs):
    rows = cross_rows(runs)
    if rows:
        for x in rows:
            gname, cname = device_name(x["gpu_run"], x["gpu"]), device_name(x["cpu_run"], "cpu")
            where = "on this machine" if x["gpu_run"] is x["cpu_run"] else \
                f"with the CPU from {x['cpu_run'].label} and the GPU from {x['gpu_run'].label} " + \
                ("(one machine, two results folders)" if same_machine(x["cpu_run"], x["gpu_run"]) else "(another machine)")
            sp = " and ".join((f"{v:.2f} times" if v >= 1 else f"{100 * v:.0f}%") + f" as fast at batch {b}"
                              for b, v in x["sp"].items()) \
                or "not measured at a batch size both have"
            shared = sorted(set(x["cpu_pts"]) & set(x["gpu_pts"]))
            if x["xs"]:
                cross = f"crossover at batch ~{', ~'.join(f'{v:.3g}' for v in x['xs'])} ({x['summary']})"
            elif shared and all(x["gpu_pts"][b] > x["cpu_pts"][b] for b in shared):
                cross = f"the GPU is ahead at every batch size both measured ({shared[0]} to {shared[-1]}), so the " \
                        f"crossover lies below batch {shared[0]}"
            elif shared:
                cross = f"the CPU is ahead at every batch size both measured ({shared[0]} to {shared[-1]}): no crossover"
            else:
                cross = "the runs share no batch size, so no crossover can be stated"
            fix = " The GPU figures are a committed fixture standing in for a real run, not a measurement." \
                if is_fixture(x["gpu_run"]) else ""
            page.answer(f"{x['model']}: {where}, the GPU ({gname}, {x['gpu']}) is {sp} as the CPU ({cname}); "
                        f"{cross}.{fix}")
        return
    ss = training_series(runs)
    if not ss:
        return
    for model, series in ss.items():
        for r, dev, pts, unit in series:
            at = ", ".join(f"{fmt(pts[b], 4)} {unit} at batch {b}" for b in (64, 2) if b in pts) or \
                ", ".join(f"{fmt(v, 4)} {unit} at batch {b}" for b, v in sorted(pts.items())[:3])
            lec = " (the lecture's desktop CPU: 1474 and 860)" if dev == "cpu" and model == "net128" else ""
            page.answer(f"{model} on {device_name(r, dev)} ({dev}, {r.label}): {at}{lec}. Only "
                        f"{'the CPU' if dev == 'cpu' else 'this GPU'} was measured, so there is no crossover here: "
                        "pass a run with the other device too, e.g. `dlbench report RUN "
                        "reports/baselines/<gpu>/lecture.json`.")
        break  # one model is the answer; the rest are in the tables


def sec_crossover(page, runs):
    """The cross-machine table and plot (also for one run with both devices)."""
    rows = cross_rows(runs)
    if not rows:
        return
    page.section("GPU against CPU: crossover",
                 "Per model: the GPU's training throughput over the CPU's at batch 64 and 2, and the batch size "
                 "where the GPU overtakes the CPU (log-log interpolation between measured batch sizes). The CPU and "
                 "the GPU may come from different results folders (machines).")
    t = []
    for x in rows:
        t.append([x["model"], f"{device_name(x['cpu_run'], 'cpu')} ({x['cpu_run'].label})",
                  f"{device_name(x['gpu_run'], x['gpu'])} ({x['gpu_run'].label}"
                  + (", FIXTURE)" if is_fixture(x["gpu_run"]) else ")"),
                  *(f"{x['sp'][b]:.2f}x" if b in x["sp"] else "-" for b in (64, 2)),
                  ", ".join(f"{v:.3g}" for v in x["xs"]) or "-", x["summary"]])
    page.table(Table("crossover_machines", "GPU speed-up over the CPU and crossover batch",
                     ["Model", "CPU", "GPU", "Speed-up at batch 64", "Speed-up at batch 2", "Crossover batch",
                      "Verdict"], t))
    for x in rows:
        fig, (ax,) = plt_new(8, 4.4)
        for pts, lab, mk in ((x["cpu_pts"], f"CPU ({x['cpu_run'].label})", "o-"),
                             (x["gpu_pts"], f"GPU {x['gpu']} ({x['gpu_run'].label})", "s-")):
            bs = sorted(pts)
            ax.plot(bs, [pts[b] for b in bs], mk, label=lab)
        for v in x["xs"]:
            ax.axvline(v, color="#b3261e", linestyle=":", linewidth=1.5)
            ax.annotate(f"crossover ~{v:.3g}", (v, 0.96), xycoords=("data", "axes fraction"), rotation=90,
                        ha="right", va="top", fontsize=8, color="#b3261e")
        batch_axis(ax)
        zero_based(ax)
        ax.set_xlabel("batch size")
        ax.set_ylabel(f"train throughput ({x['unit']})")
        ax.set_title(f"{x['model']}: GPU against CPU")
        dedupe_legend(ax, loc="best")
        page.figure(fig, f"crossover_{x['model']}", f"{x['model']}: training throughput of the CPU and the GPU "
                    "against batch size" + (" (GPU: committed fixture, not a measurement)" if is_fixture(x["gpu_run"])
                                            else "") + ".")
