"""The one look of the report: HTML page, tables (also written as CSV and Markdown), CSS and plot helpers."""
import csv
import html
import math
import os
import re

from .common import METRICS, fmt

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
        self.lead = []  # the paragraphs that open the page, above the contents (the short answer)

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

    def answer(self, s, cls="answer"):
        """A paragraph of the opening answer, shown first on the page."""
        self.lead.append(f'<p class="{esc(cls)}">{esc(s)}</p>')

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
                if not num_like and any(len(w) > 40 for w in str(cell).split()):
                    cls = (cls + " wrap").strip()  # a long case name wraps instead of widening the table
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
                f"<h1>{esc(title)}</h1>{''.join(self.lead)}<p class=\"files\">From {esc(sources)}</p>"
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
p.answer{font-size:16px;background:#eef4fb;border-left:5px solid #2f6db5;padding:10px 12px}
td.wrap{overflow-wrap:anywhere;min-width:16em}
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


def case_throughput(c):
    if c.status != "ok":
        return Cell(c.status_text(), "bad")
    if c.value is None:
        return "-"
    return f"{fmt(c.value)} {METRICS[c.metric]}"


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


def wrap_label(s, width=38):
    """A long case name on several lines, broken after '/' or ',' (never inside a key=value)."""
    s = str(s)
    if len(s) <= width:
        return s
    lines, cur = [], ""
    for part in re.split(r"(?<=[/,])", s):
        if cur and len(cur) + len(part) > width:
            lines.append(cur)
            cur = ""
        cur += part
    lines.append(cur)
    return "\n".join(lines)


def zero_based(ax):
    """Throughput on a linear axis that starts at zero (so bar and line heights compare)."""
    ax.set_yscale("linear")
    ax.set_ylim(bottom=0, top=max(ax.get_ylim()[1], 1e-9))


def ratio_axis(ax, values, axis="x"):
    """A log ratio axis with readable ticks (0.5x, 1x, 2x ...) over the range of `values`."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator
    vals = [v for v in values if v and v > 0] or [1.0]
    lo, hi = min(min(vals), 1.0) / 1.15, max(max(vals), 1.0) * 1.15
    cands = [0.01, 0.02, 0.05, 0.1, 0.2, 0.25, 0.5, 0.67, 0.8, 0.9, 1, 1.1, 1.25, 1.5, 2, 3, 4, 5, 10, 20, 50, 100]
    ticks = [t for t in cands if lo <= t <= hi]
    if len(ticks) > 9:  # keep every other one, always 1x
        ticks = sorted(set(ticks[::2]) | {1})
    a = ax.xaxis if axis == "x" else ax.yaxis
    (ax.set_xscale if axis == "x" else ax.set_yscale)("log")
    (ax.set_xlim if axis == "x" else ax.set_ylim)(lo, hi)
    a.set_major_locator(FixedLocator(ticks))
    a.set_minor_locator(NullLocator())
    a.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}x"))


def batch_axis(ax):
    """Log2 batch axis with plain numbers (1, 2, 4, ... not 2^n)."""
    from matplotlib.ticker import FuncFormatter
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
