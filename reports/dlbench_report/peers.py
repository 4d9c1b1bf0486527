"""Section: ours against PyTorch eager, round by round (the gpt2 and seq suites' speedup_vs_pytorch)."""
from .common import num, series_label
from .style import Table, plt_new


def sec_vs_pytorch(page, runs):
    cases = [c for r in runs for c in r.cases if c.status == "ok" and num(c.rec.get("speedup_vs_pytorch")) is not None]
    if not cases:
        return
    page.section("Ours against PyTorch",
                 "Our training throughput over PyTorch eager's at the same point (device, dtype, model and its sizes, "
                 "batch) in the same run: the median, lowest and highest ratio of one of our repetitions to the peer's "
                 "repetition in the same round (runs before 2026-11-27's evening: the ratio of the medians; on a "
                 "shared machine the peer's repetitions can move more than ours). Above 1: ours is faster.")
    multi_run = len({c.run.label for c in cases}) > 1
    rows, bars = [], []
    for c in cases:
        x = num(c.rec["speedup_vs_pytorch"])
        rng = c.rec.get("speedup_vs_pytorch_range")
        lo, hi = (num(rng[0]), num(rng[1])) if isinstance(rng, list) and len(rng) == 2 else (None, None)
        have_range = lo is not None and hi is not None
        label = series_label(([c.run.label] if multi_run else []) +
                             [c.suite, c.model_label(), c.device, c.dtype, f"batch {c.params.get('batch', '-')}"])
        rows.append(([c.run.label] if multi_run else []) +
                    [c.suite, c.model_label(), c.device, c.dtype, str(c.params.get("batch", "-")), f"{x:.2f}x",
                     f"{lo:.2f}x to {hi:.2f}x" if have_range else "-"])
        bars.append((label, x, lo if have_range else x, hi if have_range else x))
    page.table(Table("vs_pytorch", "Ours over PyTorch eager (tokens/s), same run",
                     (["Run"] if multi_run else []) + ["Suite", "Model", "Device", "dtype", "Batch", "Median ratio",
                                                       "Paired repetitions"], rows))
    fig, (ax,) = plt_new(8, 0.9 + 0.32 * len(bars))
    ys = list(range(len(bars)))
    # An older run's medians' ratio can lie outside the paired range (extra repetitions have no partner).
    below, above = [max(0.0, b[1] - b[2]) for b in bars], [max(0.0, b[3] - b[1]) for b in bars]
    ax.errorbar([b[1] for b in bars], ys, xerr=[below, above], fmt="o", color="#2f6db5", ecolor="#333333", capsize=3)
    ax.axvline(1.0, color="#b3261e", linestyle=":", linewidth=1.5)
    ax.set_yticks(ys)
    ax.set_yticklabels([b[0] for b in bars], fontsize=7)
    ax.invert_yaxis()
    ax.set_xscale("log")  # ratios from below 1 to tens
    ax.set_xlabel("ours / PyTorch eager (log): dot, the median ratio; whiskers, the paired range")
    ax.set_title("Ours against PyTorch")
    page.figure(fig, "vs_pytorch", "Ours over PyTorch eager per case; the dotted line is parity.")
