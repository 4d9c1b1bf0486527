#!/usr/bin/env python3
"""dlbench report generator: results folders -> one static HTML page with PNG plots beside it.

    report.py RUN_DIR|results.json|results.jsonl [...] --out DIR

Writes DIR/index.html, DIR/*.png and every table also as DIR/<table>.csv and DIR/<table>.md.
Reads results.json (Google Benchmark layout: context + benchmarks); a folder without it but with
results.jsonl (an interrupted run) is read from the jsonl. Sections appear only when there is data:
machines, lecture table, throughput vs batch, GFLOP/s vs size, transfer GB/s, AMP, comparison,
and every case of every suite. Failed, skipped and unverified cases are listed as such and never
drawn as numbers. Bad input exits 2 with one line `dlbench: error: <file>: ...` on stderr.
Python 3 standard library + matplotlib (Agg) only.
"""
import argparse
import csv
import html
import json
import math
import os
import re
import sys

# The lecture's published training throughput (seed 000: desktop CPU vs GeForce RTX 3080 Ti), imgs/sec.
LECTURE_FIGURES = {("CPU", 64): 1474, ("GPU", 64): 5369, ("CPU", 4): 1350,
                   ("GPU", 4): 1633, ("CPU", 2): 860, ("GPU", 2): 937}
LECTURE_HW = "desktop CPU vs GeForce RTX 3080 Ti"

METRICS = {"gflops": "GFLOP/s", "gb_per_s": "GB/s", "imgs_per_s": "imgs/s"}
# Keys of an entry that are not sweep parameters (Google Benchmark's own and dlbench's record keys).
FIXED_KEYS = {"suite", "op", "device", "dtype"}
TRAINING_SUITES = {"lecture", "train", "amp"}
TIME_UNITS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
BAD = ("FAILED", "out of memory", "skipped", "unverified")


class InputError(Exception):
    """Bad input: the message names the file; the CLI prints it on one line and exits 2."""


def one_line(text):
    return re.sub(r"[\x00-\x1f\x7f]+", " ", str(text)).strip()


def num(x):
    """A finite float, or None (strings, booleans, NaN and inf are not numbers here)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    x = float(x)
    return x if math.isfinite(x) else None


# ---------------------------------------------------------------------------------------------
# Loading

class Run:
    """One results folder (or file): its context and its cases in file order."""

    def __init__(self, arg, path, context, entries, note):
        self.arg, self.path, self.context, self.note = arg, path, context, note
        self.label = ""
        self.cases = build_cases(self, entries)

    @property
    def suites(self):
        out = []
        for c in self.cases:
            if c.suite not in out:
                out.append(c.suite)
        return out


def read_text(path):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror or e}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{path}: not a dlbench results file (not UTF-8 text)")


def parse_json(path, text):
    if not text.strip():
        raise InputError(f"{path}: empty file")
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        cut = e.pos >= len(text.rstrip()) or e.msg.startswith("Unterminated")
        what = "truncated JSON (the file ends early)" if cut else "invalid JSON"
        raise InputError(f"{path}: {what} at line {e.lineno}, column {e.colno}: {e.msg}")
    except RecursionError:
        raise InputError(f"{path}: invalid JSON (nested too deeply)")


def check_entries(path, entries):
    if not entries:
        raise InputError(f"{path}: no benchmark entries (no results)")
    for i, e in enumerate(entries):
        if not isinstance(e, dict) or not isinstance(e.get("name"), str):
            raise InputError(f"{path}: not a dlbench results file (benchmark entry {i} has no name)")
    if not any(all(isinstance(e.get(k), str) for k in ("suite", "op", "device")) for e in entries):
        raise InputError(f"{path}: not a dlbench results file (no entry has suite/op/device keys)")


def load_json_file(path):
    doc = parse_json(path, read_text(path))
    if not isinstance(doc, dict) or not isinstance(doc.get("benchmarks"), list):
        raise InputError(f"{path}: not a dlbench results file (no 'benchmarks' list)")
    ctx = doc.get("context")
    if ctx is not None and not isinstance(ctx, dict):
        raise InputError(f"{path}: not a dlbench results file ('context' is not an object)")
    check_entries(path, doc["benchmarks"])
    return ctx or {}, doc["benchmarks"], ""


def load_jsonl_file(path):
    text = read_text(path)
    lines = text.split("\n")
    entries, note, header = [], "results.json missing: read from results.jsonl (interrupted run?)", None
    last = max((i for i, l in enumerate(lines) if l.strip()), default=-1)
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            e = json.loads(line)
        except (json.JSONDecodeError, RecursionError) as ex:
            if i == last and entries and not text.endswith("\n"):
                note += "; its last line was cut off and is ignored"  # a write interrupted mid-line
                continue
            msg = ex.msg if isinstance(ex, json.JSONDecodeError) else "nested too deeply"
            raise InputError(f"{path}: invalid JSON on line {i + 1} ({msg})")
        if not isinstance(e, dict):
            raise InputError(f"{path}: not a dlbench results file (line {i + 1} is not an object)")
        if isinstance(e.get("dlbench_run"), dict):  # the run header: planned cases and options
            header = e["dlbench_run"]
            continue
        entries.append(e)
    if not entries and not text.strip():
        raise InputError(f"{path}: empty file (no results)")
    check_entries(path, entries)
    return ({"run": header} if header else {}), entries, note


def load_run(arg):
    if not os.path.exists(arg):
        raise InputError(f"{arg}: no such file or folder")
    if os.path.isdir(arg):
        js, jl = os.path.join(arg, "results.json"), os.path.join(arg, "results.jsonl")
        if os.path.isfile(js):
            path, loader = js, load_json_file
        elif os.path.isfile(jl):
            path, loader = jl, load_jsonl_file
        else:
            raise InputError(f"{arg}: no results here (no results.json or results.jsonl)")
    else:
        path = arg
        loader = load_jsonl_file if arg.endswith(".jsonl") else load_json_file
    ctx, entries, note = loader(path)
    try:
        return Run(arg, path, ctx, entries, note)
    except InputError:
        raise
    except Exception as e:  # a shape we did not expect inside otherwise valid JSON
        raise InputError(f"{path}: not a dlbench results file ({one_line(e)})")


def label_runs(runs):
    seen = {}
    for r in runs:
        base = r.arg.rstrip("/")
        if os.path.isfile(base):
            parent = os.path.basename(os.path.dirname(os.path.abspath(base)))
            base = parent or os.path.basename(base)
        name = os.path.basename(os.path.abspath(base)) or base
        seen[name] = seen.get(name, 0) + 1
        r.label = name if seen[name] == 1 else f"{name} #{seen[name]}"


# ---------------------------------------------------------------------------------------------
# Cases: one per run_name, with its status and its median throughput

def parse_value(s):
    for conv in (int, float):
        try:
            return conv(s)
        except ValueError:
            pass
    return s


def split_name(name):
    """suite/op/device/dtype/k=v/... -> ([suite, op, device, dtype], {k: v})."""
    parts = name.split("/")
    head, params, last = parts[:4], {}, None
    for p in parts[4:]:
        if "=" in p:
            k, v = p.split("=", 1)
            params[k], last = v, k
        elif last is not None:
            params[last] += "/" + p
    return head, params


class Case:
    def __init__(self, run, name, entries):
        self.run, self.name = run, name
        first = entries[0]
        head, named = split_name(name)
        head += [""] * (4 - len(head))
        self.suite = str(first.get("suite", head[0]))
        self.op = str(first.get("op", head[1]))
        self.device = str(first.get("device", head[2]))
        self.dtype = str(first.get("dtype", head[3]))
        self.params = {}
        for k, v in named.items():
            val = first.get(k, parse_value(v))
            self.params[k] = val if isinstance(val, (int, float, str)) else v
        self.status, self.message = "ok", ""
        for e in entries:
            if e.get("skipped") is not None:
                self.status, self.message = "skipped", str(e.get("skipped"))
            elif e.get("error") == "out of memory" and self.status != "skipped":
                self.status, self.message = "out of memory", str(e.get("error_message", ""))
            elif e.get("error_occurred") is True and self.status == "ok":
                self.status, self.message = "FAILED", str(e.get("error_message", ""))
        medians = [e for e in entries if e.get("run_type") == "aggregate" and e.get("aggregate_name") == "median"]
        iters = [e for e in entries if e.get("run_type", "iteration") != "aggregate"]
        if medians:
            rep = medians[0]
        elif iters:
            iters.sort(key=lambda e: num(e.get("real_time")) or 0.0)
            rep = iters[len(iters) // 2]
        else:
            rep = first
        self.rec = rep
        if self.status == "ok" and rep.get("verified") is not True:
            self.status, self.message = "unverified", "not verified against the reference"
        # Training suites carry gflops too; their headline is imgs/s.
        prefer = ("imgs_per_s", "gflops", "gb_per_s") if self.suite in TRAINING_SUITES else tuple(METRICS)
        self.metric = next((m for m in prefer if m in rep or m in first), None)
        self.value = num(rep.get(self.metric)) if (self.metric and self.status == "ok") else None
        t = num(rep.get("real_time"))
        self.time_s = t * TIME_UNITS.get(rep.get("time_unit", "us"), 1e-6) if (t and self.status == "ok") else None
        self.pct = num(rep.get("pct_of_peak")) if self.status == "ok" else None
        self.err = num(rep.get("max_rel_err"))

    @property
    def ok(self):
        return self.status == "ok" and self.value is not None

    def get(self, key, default=None):
        if key in self.params:
            return self.params[key]
        v = self.rec.get(key, default)
        return v

    def short(self):
        return "/".join(self.name.split("/")[1:])

    def status_text(self):
        return self.status if not self.message else f"{self.status}: {self.message}"


def build_cases(run, entries):
    groups, order = {}, []
    for e in entries:
        key = e.get("run_name") if isinstance(e.get("run_name"), str) else e["name"]
        if e.get("run_type") == "aggregate" and not isinstance(e.get("run_name"), str):
            key = re.sub(r"_(mean|median|stddev|cv)$", "", key)
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(e)
    cases = [Case(run, k, groups[k]) for k in order if any(isinstance(e.get("suite"), str) for e in groups[k])]
    # A failed case carries no throughput key: it takes its suite/op's metric, so that it is listed
    # (as failed) in the same table and plot as its siblings.
    known = {}
    for c in cases:
        if c.metric:
            known.setdefault((c.suite, c.op), c.metric)
            known.setdefault((c.suite, None), c.metric)
    for c in cases:
        if c.metric is None:
            c.metric = known.get((c.suite, c.op), known.get((c.suite, None)))
    return cases


# ---------------------------------------------------------------------------------------------
# Formatting and tables

def fmt(x, digits=4):
    if x is None:
        return "-"
    if x == 0:
        return "0"
    mag = math.floor(math.log10(abs(x)))
    if mag >= digits:
        return f"{x:,.0f}"
    return f"{x:,.{max(0, digits - 1 - mag)}f}"


def fmt_time(s):
    if s is None:
        return "-"
    for unit, scale in (("s", 1), ("ms", 1e-3), ("us", 1e-6)):
        if s >= scale:
            return f"{fmt(s / scale)} {unit}"
    return f"{fmt(s / 1e-9)} ns"


def fmt_bytes(b):
    b = float(b)
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= scale:
            v = b / scale
            return f"{v:.0f} {unit}" if v == int(v) else f"{v:.3g} {unit}"
    return f"{b:.0f} B"


def case_throughput(c):
    if c.status != "ok":
        return Cell(c.status_text(), "bad")
    if c.value is None:
        return "-"
    return f"{fmt(c.value)} {METRICS[c.metric]}"


class Cell:
    """A table cell with a CSS class (bad = failed/skipped/unverified, shown in red)."""

    def __init__(self, text, cls=""):
        self.text, self.cls = str(text), cls

    def __str__(self):
        return self.text


class Table:
    def __init__(self, slug, title, headers, rows, note=""):
        self.slug, self.title, self.headers, self.rows, self.note = slug, title, headers, rows, note


class Page:
    def __init__(self, out):
        self.out, self.parts, self.toc, self.slugs, self.figs = out, [], [], set(), 0

    def uniq(self, slug):
        slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", slug).strip("_") or "table"
        s, i = slug, 2
        while s in self.slugs:
            s, i = f"{slug}_{i}", i + 1
        self.slugs.add(s)
        return s

    def section(self, title, intro=""):
        anchor = self.uniq("sec_" + title.lower())
        self.toc.append((anchor, title))
        self.parts.append(f'<h2 id="{esc(anchor)}">{esc(title)}</h2>')
        if intro:
            self.parts.append(f"<p>{esc(intro)}</p>")

    def text(self, s, cls=""):
        c = f' class="{esc(cls)}"' if cls else ""
        self.parts.append(f"<p{c}>{esc(s)}</p>")

    def table(self, t, collapsed=False):
        t.slug = self.uniq(t.slug)
        write_csv(os.path.join(self.out, t.slug + ".csv"), t)
        write_md(os.path.join(self.out, t.slug + ".md"), t)
        h = ['<div class="scroll"><table class="data"><thead><tr>']
        h += [f"<th>{esc(x)}</th>" for x in t.headers]
        h.append("</tr></thead><tbody>")
        for row in t.rows:
            h.append("<tr>")
            for cell in row:
                cls = getattr(cell, "cls", "")
                num_like = isinstance(cell, str) and re.match(r"^[-+]?[0-9][0-9,.]*(x| [A-Za-z/%]+)?$", cell)
                cls = (cls + " num").strip() if num_like else cls
                h.append(f'<td class="{esc(cls)}">{esc(cell)}</td>' if cls else f"<td>{esc(cell)}</td>")
            h.append("</tr>")
        h.append("</tbody></table></div>")
        links = (f'<p class="files">{esc(t.title)}: <a href="{esc(t.slug)}.csv">CSV</a> · '
                 f'<a href="{esc(t.slug)}.md">Markdown</a>'
                 + (f" — {esc(t.note)}" if t.note else "") + "</p>")
        body = "".join(h)
        if collapsed:
            self.parts.append(f"<details><summary>{esc(t.title)} ({len(t.rows)} rows)</summary>{body}</details>{links}")
        else:
            self.parts.append(f"<h3>{esc(t.title)}</h3>{body}{links}")

    def figure(self, fig, name, caption, notes=()):
        import matplotlib.pyplot as plt
        from matplotlib.ticker import FuncFormatter, NullFormatter
        for ax in fig.axes:  # log y axes: plain numbers (1,000 not 10^3); minor labels when under 1.5 decades
            if ax.get_yscale() == "log":
                lo, hi = ax.get_ylim()
                plain = FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 10 else f"{v:.3g}")
                ax.yaxis.set_major_formatter(plain)
                narrow = lo > 0 and math.log10(hi / lo) < 1.5
                ax.yaxis.set_minor_formatter(plain if narrow else NullFormatter())
                ax.tick_params(axis="y", which="minor", labelsize=7)
            if ax.get_xscale() == "log" and not isinstance(ax.xaxis.get_major_formatter(), FuncFormatter):
                lo, hi = ax.get_xlim()
                plain = FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 10 else f"{v:.3g}")
                ax.xaxis.set_major_formatter(plain)
                narrow = lo > 0 and math.log10(hi / lo) < 1.5
                ax.xaxis.set_minor_formatter(plain if narrow else NullFormatter())
                ax.tick_params(axis="x", which="minor", labelsize=7)
        self.figs += 1
        fname = self.uniq(f"fig{self.figs:02d}_{name}") + ".png"
        fig.savefig(os.path.join(self.out, fname), dpi=90, bbox_inches="tight")
        plt.close(fig)
        extra = "".join(f'<br><span class="bad">{esc(n)}</span>' for n in notes)
        self.parts.append(f'<figure><img src="{esc(fname)}" alt="{esc(caption)}">'
                          f"<figcaption>{esc(caption)}{extra}</figcaption></figure>")

    def html(self, title, runs):
        toc = "".join(f'<li><a href="#{esc(a)}">{esc(t)}</a></li>' for a, t in self.toc)
        sources = ", ".join(r.path for r in runs)
        return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                f"<title>{esc(title)}</title><style>{CSS}</style></head><body>"
                f"<h1>{esc(title)}</h1><p class=\"files\">From {esc(sources)}</p>"
                f"<nav><ul>{toc}</ul></nav>{''.join(self.parts)}"
                f"<footer>dlbench report · failed, skipped and unverified cases are listed, never plotted "
                f"as numbers</footer></body></html>\n")


CSS = """
body{font-family:DejaVu Sans,Helvetica,Arial,sans-serif;margin:24px auto;max-width:1150px;color:#1d2330;
background:#fff;padding:0 16px}
h1{border-bottom:3px solid #2f6db5;padding-bottom:6px}h2{margin-top:36px;color:#2f6db5;
border-bottom:1px solid #ccd}h3{margin-bottom:4px}
table.data{border-collapse:collapse;margin:6px 0;font-size:13px}
table.data th{background:#2f6db5;color:#fff;padding:4px 8px;text-align:left}
table.data td{border:1px solid #ccd;padding:3px 8px}table.data tr:nth-child(even){background:#f1f4fa}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}div.scroll{overflow-x:auto}td.bad,span.bad{color:#b3261e;font-weight:bold}
td.good{color:#1b7f3b}p.files{font-size:12px;color:#556}p.warn{background:#fff3cd;padding:6px;
border-left:4px solid #e0a800}nav ul{columns:3;font-size:14px}figure{margin:14px 0}
figure img{max-width:100%;border:1px solid #dde}figcaption{font-size:13px;color:#334}
footer{margin-top:40px;font-size:12px;color:#667}details{margin:8px 0}summary{cursor:pointer;font-weight:bold}
"""


def esc(s):
    return html.escape(str(s), quote=True)


def write_csv(path, t):
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(t.headers)
        for row in t.rows:
            w.writerow([str(c) for c in row])


def md_cell(s):
    return str(s).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def write_md(path, t):
    lines = [f"## {md_cell(t.title)}", "", "| " + " | ".join(md_cell(h) for h in t.headers) + " |",
             "|" + "|".join("---" for _ in t.headers) + "|"]
    lines += ["| " + " | ".join(md_cell(c) for c in row) + " |" for row in t.rows]
    if t.note:
        lines += ["", md_cell(t.note)]
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


# ---------------------------------------------------------------------------------------------
# Plot helpers

def plt_new(w=8.0, h=4.6, ncols=1):
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, ncols, figsize=(w * (1 if ncols == 1 else 0.62 * ncols), h), squeeze=False)
    for ax in axes[0]:
        ax.grid(True, which="major", alpha=0.35)
        ax.grid(True, which="minor", alpha=0.12)
    return fig, list(axes[0])


def mark_failed(ax, xs, label_once=[True]):
    """Failed/skipped points: a red x on the x axis, not a value."""
    if not xs:
        return
    ax.plot(xs, [0.0] * len(xs), "x", color="#b3261e", markersize=9, mew=2, clip_on=False,
            transform=ax.get_xaxis_transform(), label="failed/skipped (no number)", linestyle="none")


def dedupe_legend(ax, **kw):
    h, l = ax.get_legend_handles_labels()
    seen, hh, ll = set(), [], []
    for a, b in zip(h, l):
        if b not in seen:
            seen.add(b)
            hh.append(a)
            ll.append(b)
    if hh:
        ax.legend(hh, ll, fontsize=8, **kw)


def device_kind(dev):
    return "CPU" if dev == "cpu" else "GPU" if dev.startswith("cuda") else dev


def sortval(v):
    return (0, v, "") if isinstance(v, (int, float)) else (1, 0, str(v))


def gpu_facts(run, dev):
    m = re.match(r"cuda:(\d+)$", dev)
    gpus = (run.context.get("cuda") or {}).get("gpus") or []
    if not m or not isinstance(gpus, list):
        return {}
    idx = int(m.group(1))
    for g in gpus:
        if isinstance(g, dict) and g.get("index", -1) == idx:
            return g
    return gpus[idx] if idx < len(gpus) and isinstance(gpus[idx], dict) else {}


def device_name(run, dev):
    if dev == "cpu":
        return str((run.context.get("cpu") or {}).get("model", "CPU"))
    return str(gpu_facts(run, dev).get("name", dev))


def fp32_peak(run, dev):
    """(GFLOP/s, what) for a device, from the run's context."""
    if dev == "cpu":
        p = num((run.context.get("peaks") or {}).get("cpu_fp32_gflops"))
        return p, "measured FMA peak"
    p = num(gpu_facts(run, dev).get("peak_fp32_gflops"))
    return p, "theoretical fp32 peak"


def series_label(parts):
    flat = []
    for p in parts:
        flat += list(p) if isinstance(p, (tuple, list)) else [p]
    return ", ".join(str(p) for p in flat if p not in (None, ""))


def batch_axis(ax):
    """Log2 batch axis with plain numbers (1, 2, 4, ... not 2^n)."""
    from matplotlib.ticker import FuncFormatter
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))


# ---------------------------------------------------------------------------------------------
# Sections

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


def sec_lecture(page, runs):
    cases = [c for r in runs for c in r.cases if c.suite == "lecture" and c.metric in (None, "imgs_per_s")]
    cases = [c for c in cases if "batch" in c.params]
    if not cases:
        return
    page.section("Lecture: training throughput",
                 f"Net(hidden_num_chans=128) on CIFAR-10, one training epoch. Lecture figures: {LECTURE_HW}.")
    multi_run = len({c.run.label for c in cases}) > 1
    multi_gpu = len({c.device for c in cases if c.device != "cpu"}) > 1
    varying = {k for k in {k for c in cases for k in c.params}
               if k != "batch" and len({str(c.params.get(k)) for c in cases}) > 1}
    variant = lambda c: series_label([c.op if len({x.op for x in cases}) > 1 else ""]
                                     + [f"{k}={v}" for k, v in c.params.items() if k in varying]
                                     + ([c.dtype] if len({x.dtype for x in cases}) > 1 else []))
    has_variant = any(variant(c) for c in cases)

    def order(c):
        b = c.params["batch"]
        pref = {64: 0, 4: 1, 2: 2}.get(b, 3)
        return (c.run.label if multi_run else "", pref, -b if isinstance(b, (int, float)) else 0,
                0 if c.device == "cpu" else 1, c.device, variant(c))
    cases.sort(key=order)
    headers = (["Run"] if multi_run else []) + ["Device", "Batchsize"] + (["Variant"] if has_variant else []) + \
              ["Train throughput", "Lecture", "Ours / lecture", "Hardware"]
    rows = []
    for c in cases:
        kind = device_kind(c.device)
        dev = f"{kind} ({c.device})" if multi_gpu and kind == "GPU" else kind
        lec = LECTURE_FIGURES.get((kind, c.params["batch"]))
        ours = Cell(c.status_text(), "bad") if not c.ok else f"{fmt(c.value, 4)} imgs/sec"
        ratio = f"{c.value / lec:.2f}x" if (c.ok and lec) else "-"
        rows.append(([c.run.label] if multi_run else []) + [dev, str(c.params["batch"])]
                    + ([variant(c)] if has_variant else [])
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
        s = series_label([c.run.label if multi_run else who(c), c.device if multi_gpu else "", variant(c)])
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
                cs = series_label([c.run.label if multi_run else who(c), c.device if multi_gpu else "", variant(c)])
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
    cases = [c for r in runs for c in r.cases if c.metric == "imgs_per_s" and isinstance(c.params.get("batch"), (int, float))]
    groups = {}
    for c in cases:
        model = c.get("model", c.get("net", ""))
        groups.setdefault((c.suite, c.op, str(model)), []).append(c)
    groups = {k: v for k, v in groups.items() if len({c.params["batch"] for c in v}) >= 2}
    if not groups:
        return
    page.section("Throughput against batch size",
                 "Images per second against batch size (log axes), one line per device and setting; the dotted "
                 "vertical lines mark where the GPU curve crosses the CPU curve.")
    multi_run = len({c.run.label for c in cases}) > 1
    xrows = []
    for (suite, op, model), cs in groups.items():
        var_keys = [k for k in sorted({k for c in cs for k in c.params}) if k not in ("batch", "model", "net")
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
                ok = sorted([c for c in by_dev[dev] if c.ok], key=lambda c: c.params["batch"])
                for c in by_dev[dev]:
                    if not c.ok:
                        failed_x.append(c.params["batch"])
                        notes.append(f"not plotted: {c.device} batch {c.params['batch']} {series_label(key)}: {c.status}")
                if ok:
                    pts[dev] = {c.params["batch"]: c.value for c in ok}
                    ax.plot([c.params["batch"] for c in ok], [c.value for c in ok],
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
        ax.set_yscale("log")
        ax.set_xlabel("batch size")
        ax.set_ylabel("imgs/s")
        ax.set_title(series_label([suite, op, model]))
        dedupe_legend(ax, loc="best")
        page.figure(fig, f"batch_{suite}_{op}_{model}", f"{series_label([suite, op, model])}: throughput against batch size.", notes)
    if xrows:
        page.table(Table("crossover", "CPU/GPU crossover", ["Suite", "Op", "Model", "Setting", "GPU", "Verdict",
                                                            "Crossing batch (interpolated)"], xrows))


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
                 "Per implementation and device; horizontal dashed lines are the device's fp32 peak "
                 "(CPU: measured FMA peak; GPU: theoretical).")
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
            p, what = fp32_peak(c.run, c.device)
            if p:
                peaks[(c.run.label if multi_run else "", c.device)] = (p, what)
        for i, ((rl, dev), (p, what)) in enumerate(sorted(peaks.items())):
            ax.axhline(p, linestyle="--", color=["#555", "#b3261e", "#1b7f3b", "#7b3fa0"][i % 4], linewidth=1.2,
                       label=series_label([rl, dev, f"{what} {fmt(p)} GFLOP/s"]))
        mark_failed(ax, failed_x)
        if kind == "cat":
            ax.set_xticks(range(len(cats)))
            ax.set_xticklabels(cats, rotation=30, ha="right", fontsize=8)
        else:
            batch_axis(ax)
        ax.set_yscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(f"GFLOP/s ({dtype})")
        ax.set_title(f"{suite} {op} {dtype}" + (f" by {xlabel}" if shape != "size" else ""))
        dedupe_legend(ax, loc="best")
        page.figure(fig, f"gflops_{suite}_{op}_{dtype}_{shape}", f"{suite} {op} {dtype}: GFLOP/s against {xlabel}.", notes)


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
        ax.set_xticklabels(settings, rotation=25, ha="right", fontsize=7)
        ax.set_ylabel("speedup over fp32 (x)" if what == "speedup" else "peak device memory (MiB)")
        ax.set_title("AMP speedup" if what == "speedup" else "AMP peak memory")
        dedupe_legend(ax, loc="best")
    page.figure(fig, "amp", "Speedup over fp32 and peak device memory per dtype.", notes)


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
    import matplotlib.pyplot as plt  # noqa: F401
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
            fig, (ax,) = plt_new(9, max(2.2, 0.28 * len(shown) + 1.2))
            ys = range(len(shown))
            ax.barh(list(ys), [q for _, q in shown], color=["#1b7f3b" if q >= 1 else "#b3261e" for _, q in shown])
            ax.axvline(1.0, color="#333", linewidth=1)
            ax.set_xscale("log")
            ax.set_yticks(list(ys))
            ax.set_yticklabels([n for n, _ in shown], fontsize=7)
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


# ---------------------------------------------------------------------------------------------

def build(args):
    runs = [load_run(a) for a in args.runs]  # validate every input before touching the output
    label_runs(runs)
    out = args.out
    try:
        os.makedirs(out, exist_ok=True)
    except OSError as e:
        raise InputError(f"{out}: cannot create the report folder: {e.strerror or e}")
    if not os.access(out, os.W_OK):
        raise InputError(f"{out}: report folder is not writable")

    import logging
    import warnings
    logging.getLogger("matplotlib").setLevel(logging.ERROR)  # no font-cache chatter on stderr
    warnings.filterwarnings("ignore")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot  # noqa: F401
    except Exception as e:
        raise EnvironmentError(f"report: matplotlib does not import ({one_line(e)}); install python3-matplotlib")

    for f in os.listdir(out):  # plots of an earlier report in the same folder would be stale
        if re.match(r"^fig\d\d+_.*\.png$", f):
            os.remove(os.path.join(out, f))
    page = Page(out)
    sec_machines(page, runs)
    for sec in (sec_lecture, sec_batch, sec_gflops, sec_transfer, sec_amp, sec_compare, sec_cases):
        sec(page, runs)
    title = "dlbench report: " + ", ".join(r.label for r in runs)
    tmp = os.path.join(out, ".index.html.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(page.html(title, runs))
    os.replace(tmp, os.path.join(out, "index.html"))


class Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageErr(message)


class UsageErr(Exception):
    pass


def main(argv):
    p = Parser(prog="report.py", description="dlbench HTML report from results folders")
    p.add_argument("runs", nargs="+", help="results folders, results.json or results.jsonl files")
    p.add_argument("--out", "-o", default=None, help="report folder (default: FIRST_RUN/report)")
    try:
        args = p.parse_args(argv)
        if args.out is None:
            first = args.runs[0]
            args.out = os.path.join(first if os.path.isdir(first) else os.path.dirname(first) or ".", "report")
        build(args)
        return 0
    except UsageErr as e:
        print(f"dlbench: error: report: {one_line(e)}", file=sys.stderr)
        return 2
    except InputError as e:
        print(f"dlbench: error: {one_line(e)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("dlbench: error: report: interrupted", file=sys.stderr)
        return 130
    except OSError as e:
        where = getattr(e, "filename", None)
        print(f"dlbench: error: {one_line(where) + ': ' if where else ''}{one_line(e.strerror or e)}", file=sys.stderr)
        return 2 if where else 1
    except BaseException as e:  # never a traceback: one line, exit 1 (a bug here, not bad input)
        if isinstance(e, SystemExit):
            return e.code if isinstance(e.code, int) else 1
        print(f"dlbench: error: report: internal error: {type(e).__name__}: {one_line(e)}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
