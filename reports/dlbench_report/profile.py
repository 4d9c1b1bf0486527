"""Section: where a training step's time goes (`dlbench run --profile`): the per-layer table of each
profiled case, CPU and GPU side by side, and one stacked bar per case; plus host and device memory
and energy per training case."""
from .common import device_kind, fmt, num
from .style import Table, dedupe_legend, plt_new, wrap_label

COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
          "#17becf", "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94", "#f7b6d2", "#dbdb8d"]


def profiled(runs):
    out = []
    for r in runs:
        for c in r.cases:
            p = c.rec.get("profile") if c.status == "ok" else None
            if isinstance(p, dict) and isinstance(p.get("rows"), list):
                out.append((c, p))
    return out


def setting(c):
    return (c.suite, str(c.get("model", "")), c.params.get("batch"), c.dtype)


def sec_profile(page, runs):
    cases = profiled(runs)
    errors = [(c, c.rec["profile"]["error"]) for r in runs for c in r.cases
              if isinstance(c.rec.get("profile"), dict) and "error" in c.rec["profile"]]
    if not cases and not errors:
        return
    page.section("Where the time goes: one profiled step",
                 "One extra training step per case after the timing (it never changes the timed numbers), region by "
                 "region: CPU regions by wall clock, GPU regions by CUDA events. Forward and backward per layer, "
                 "loss, optimizer, data copy and synchronisation; GFLOP/s from each layer's napkin FLOPs. Traces: "
                 "traces/<case>.json in the results folder (open in ui.perfetto.dev or chrome://tracing).")
    for c, e in errors:
        page.text(f"{c.short()}: profile failed: {e}", "warn")
    multi_run = len({c.run.label for c, _ in cases}) > 1
    groups = {}
    for c, p in cases:
        groups.setdefault(setting(c), []).append((c, p))
    for (suite, model, batch, dtype), cps in groups.items():
        cols = []
        for c, p in cps:
            lab = device_kind(c.device) + (f" {c.device}" if c.device != "cpu" else "") + \
                (f" ({c.run.label})" if multi_run else "")
            cols.append((lab, c, p))
        regions = []
        for _, _, p in cols:
            for row in p["rows"]:
                if row.get("region") not in regions:
                    regions.append(row.get("region"))
        headers = ["Region"]
        for lab, _, _ in cols:
            headers += [f"{lab} fwd ms", f"{lab} bwd ms", f"{lab} ms", f"{lab} % of step", f"{lab} GFLOP/s"]
        rows = []
        for reg in regions:
            row = [reg]
            for _, _, p in cols:
                hit = next((x for x in p["rows"] if x.get("region") == reg), None)
                if hit is None:
                    row += ["-"] * 5
                    continue
                row += [fmt(num(hit.get("forward_ms")), 3), fmt(num(hit.get("backward_ms")), 3),
                        fmt(num(hit.get("ms")), 3), f"{num(hit.get('pct_of_step')) or 0:.1f}%",
                        fmt(num(hit.get("gflops")), 3)]
            rows.append(row)
        step = ["step"]
        for _, _, p in cols:
            step += ["", "", fmt(num(p.get("step_ms")), 3), "100%", ""]
        rows.append(step)
        notes = []
        for lab, c, p in cols:
            v = "verified" if p.get("verified") else "NOT verified"
            notes.append(f"{lab}: {p.get('clock', '?')} clock, {v} ({p.get('check', '')}), trace {p.get('trace', '-')}")
        page.table(Table(f"profile_{suite}_{model}_b{batch}_{dtype}",
                         f"{suite} {model} batch {batch} {dtype}: one step per layer", headers, rows,
                         note="; ".join(notes)))
    # One stacked bar per profiled case: the step's share per region.
    shown = cases[:24]
    fig, (ax,) = plt_new(9.5, max(2.4, 0.42 * len(shown) + 1.6))
    names = []
    for _, p in shown:
        for row in p["rows"]:
            if row.get("region") not in names:
                names.append(row.get("region"))
    labels = [wrap_label(f"{c.device} {c.get('model', '')} batch {c.params.get('batch')}"
                         + (f" ({c.run.label})" if multi_run else ""), 40) for c, _ in shown]
    for y, (c, p) in enumerate(shown):
        left = 0.0
        for row in p["rows"]:
            w = max(0.0, num(row.get("pct_of_step")) or 0.0)
            i = names.index(row.get("region"))
            ax.barh(y, w, left=left, color=COLORS[i % len(COLORS)], label=row.get("region"),
                    edgecolor="white", linewidth=0.5)
            if w >= 6:
                ax.text(left + w / 2, y, str(row.get("region")), ha="center", va="center", fontsize=6, color="white")
            left += w
    ax.set_yticks(range(len(shown)))
    ax.set_yticklabels(labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlim(0, 100)
    ax.set_xlabel("% of one training step")
    ax.set_title("Where a training step's time goes")
    dedupe_legend(ax, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    page.figure(fig, "profile_share", "Share of one training step per region (layers are forward + backward).",
                [f"{len(cases) - len(shown)} more profiled cases in the tables"] if len(cases) > len(shown) else [])


def sec_memory_energy(page, runs):
    """Host peak RSS beside the GPU's peak allocated bytes, and energy, per training case."""
    cases = [c for r in runs for c in r.cases if c.status == "ok" and c.metric == "imgs_per_s"
             and any(k in c.rec for k in ("host_peak_rss_bytes", "peak_device_bytes", "energy_j", "energy_note"))]
    if not cases:
        return
    page.section("Memory and energy per case",
                 "Host: peak resident set size (VmHWM) during the case (scope 'case': reset before it; 'process': "
                 "the process's peak so far). Device: peak bytes of our tracked GPU allocations. Energy per timed "
                 "iteration from RAPL (the whole CPU package) or NVML (the GPU), where the machine exposes it.")
    multi_run = len({c.run.label for c in cases}) > 1
    rows = []
    for c in cases:
        rss, dev = num(c.rec.get("host_peak_rss_bytes")), num(c.rec.get("peak_device_bytes"))
        ej, ipj = num(c.rec.get("energy_j")), num(c.rec.get("imgs_per_j"))
        rows.append(([c.run.label] if multi_run else []) + [
            c.short(), f"{fmt(rss / 2**20)} MiB" if rss is not None else "-", str(c.rec.get("host_peak_rss_scope", "-")),
            f"{fmt(dev / 2**20)} MiB" if dev is not None else ("-" if c.device == "cpu" else "not recorded"),
            f"{fmt(ej)} J" if ej is not None else str(c.rec.get("energy_note", "-")),
            fmt(ipj) if ipj is not None else "-"])
    page.table(Table("memory_energy", "Peak memory and energy per training case",
                     (["Run"] if multi_run else []) + ["Case", "Host peak RSS", "RSS scope", "GPU peak allocated",
                                                      "Energy per iteration", "imgs per joule"], rows),
               collapsed=len(rows) > 40)
