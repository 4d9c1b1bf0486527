#!/usr/bin/env python3
"""Smoke test of `dlbench report`: builds reports from the hand-made fixtures in tests/data/report and
checks what they contain: the fingerprints, the lecture table beside the lecture's figures, one plot per
section (valid PNGs), every table as CSV and Markdown, failed/skipped cases shown as such, the
comparison of two lecture runs, HTML escaping, plots for both suites when two suites are given, the
loader suite's plot and table beside a lecture run fed by the loader (its Fed by column), and the
sequence models in tokens/s: against batch size, their crossover, ours over PyTorch.

    check_report.py DLBENCH DATA_DIR OUT_DIR
"""
import csv
import html.parser
import os
import shutil
import subprocess
import sys

from PIL import Image

DLBENCH, DATA, OUT = sys.argv[1:4]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def report(runs, out):
    shutil.rmtree(out, ignore_errors=True)
    p = subprocess.run([DLBENCH, "report", *runs, "--out", out], capture_output=True, text=True, timeout=300)
    check(p.returncode == 0, f"report {runs} exit {p.returncode}: {p.stderr.strip()}")
    check(f"report: {out}/index.html" in p.stdout, f"report path printed (got {p.stdout!r})")
    return p


class Tags(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.imgs, self.tags, self.text = [], [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag == "img":
            self.imgs.append(dict(attrs).get("src"))

    def handle_data(self, data):
        self.text.append(data)


def page(out):
    with open(os.path.join(out, "index.html"), encoding="utf-8") as f:
        doc = f.read()
    t = Tags()
    t.feed(doc)
    return doc, t


def read_csv(out, slug):
    path = os.path.join(out, slug + ".csv")
    check(os.path.isfile(path), f"{slug}.csv written")
    check(os.path.isfile(os.path.join(out, slug + ".md")), f"{slug}.md written")
    if not os.path.isfile(path):
        return [], []
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    return rows[0], rows[1:]


def check_pngs(out, tags):
    check(len(tags.imgs) > 0, "page has images")
    for src in tags.imgs:
        path = os.path.join(out, src)
        ok = os.path.isfile(path)
        check(ok, f"image {src} exists")
        if not ok:
            continue
        with open(path, "rb") as f:
            check(f.read(8) == b"\x89PNG\r\n\x1a\n", f"{src} has the PNG signature")
        with Image.open(path) as im:
            im.load()  # decodes every pixel: a truncated PNG raises here
            check(im.width >= 300 and im.height >= 150, f"{src} is a real plot ({im.size})")
            check(len(im.convert("RGB").getcolors(1 << 20) or []) > 10, f"{src} is not blank")


# 1. Everything at once: two lecture runs (the comparison), kernels, transfer, AMP, an interrupted run.
out = os.path.join(OUT, "all")
runs = [os.path.join(DATA, d) for d in ("lecture_a", "lecture_b", "kernels", "transfer", "amp", "interrupted")]
report(runs, out)
doc, tags = page(out)
text = " ".join(tags.text)
check(doc.startswith("<!DOCTYPE html>") and doc.rstrip().endswith("</html>"), "index.html is a whole page")
for s in ("Machine fingerprints", "AMD Ryzen 9 5900X", "NVIDIA H100 80GB HBM3", "NVIDIA GeForce RTX 3080 Ti",
          "Lecture: training throughput", "Throughput against batch size", "GFLOP/s against size",
          "Host <-> device transfers", "Mixed precision (AMP)", "Comparison", "All cases",
          "read from results.jsonl"):
    check(s in text, f"page mentions {s!r}")
check_pngs(out, tags)
figs = " ".join(tags.imgs)
for part in ("lecture_bars", "batch_lecture", "gflops_matmul", "gflops_conv", "transfer", "amp", "ratio_lecture"):
    check(part in figs, f"a {part} plot")
# Every table written three ways: each CSV has its Markdown twin and a link from the page.
csvs = sorted(f[:-4] for f in os.listdir(out) if f.endswith(".csv"))
check(len(csvs) >= 10, f"tables written as CSV ({len(csvs)})")
for slug in csvs:
    check(os.path.isfile(os.path.join(out, slug + ".md")), f"{slug}.md beside {slug}.csv")
    check(f'href="{slug}.csv"' in doc and f'href="{slug}.md"' in doc, f"page links {slug}.csv/.md")

# The lecture table, ours beside the lecture's figures; the failed GPU batch-1 case stays a status.
head, rows = read_csv(out, "lecture")
check(head[:6] == ["Run", "Device", "Batchsize", "Train throughput", "Lecture", "Ours / lecture"], f"lecture header {head}")
want = {("lecture_a", "CPU", "64"): ("1,630 imgs/sec", "1474 imgs/sec"), ("lecture_a", "GPU", "64"): ("5,810 imgs/sec", "5369 imgs/sec"),
        ("lecture_a", "CPU", "2"): ("905.0 imgs/sec", "860 imgs/sec"), ("lecture_b", "GPU", "2"): ("880.0 imgs/sec", "937 imgs/sec")}
got = {tuple(r[:3]): (r[3], r[4]) for r in rows}
for k, v in want.items():
    check(got.get(k) == v, f"lecture row {k}: {got.get(k)} != {v}")
check(got.get(("lecture_a", "GPU", "1"), ("",))[0].startswith("FAILED"), "failed lecture case shown as FAILED")
with open(os.path.join(out, "lecture.md"), encoding="utf-8") as f:
    md = f.read()
check("| lecture_a | CPU | 64 | 1,630 imgs/sec | 1474 imgs/sec |" in md, "lecture.md has the table row")

# Crossover: both lecture runs are CPU-faster at batch 2 and GPU-faster from batch 4.
head, rows = read_csv(out, "crossover")
lec = [r for r in rows if r[0] == "lecture"]
check(len(lec) == 2 and all(r[5] == "GPU faster from batch 4" for r in lec), f"lecture crossover rows {lec}")

# Failed, out-of-memory and skipped cases are listed as such, with no number.
head, rows = read_csv(out, "cases_matmul")
st = {r[1]: r for r in rows}
check(st.get("sgemm/cuda:0/fp32/impl=tiled/size=2048", ["", "", ""])[2].startswith("FAILED"), "failed matmul case shown")
check(st.get("sgemm/cuda:0/fp32/impl=cublas/size=65536", ["", "", ""])[2].startswith("out of memory"), "OOM case shown")
check(st.get("sgemm/cuda:0/fp32/impl=tiled/size=2048", ["", "", "", "", "1"])[4].startswith("FAILED"), "no throughput for a failed case")
head, rows = read_csv(out, "cases_conv")
check(head[0] == "Case" and any(r[1].startswith("skipped") for r in rows), "skipped conv case shown")
check('class="bad">FAILED' in doc, "failed cells styled as failed in the HTML")
head, rows = read_csv(out, "amp")
amp = {(r[0], r[1]): r for r in rows}
check(amp.get(("cuda:0, convnet, batch 256", "fp16"), ["", "", ""])[2].startswith("FAILED"), f"failed AMP case shown {list(amp)[:3]}")
check(amp.get(("cuda:0, lecture, batch 64", "bf16"), ["", "", "", ""])[3] == "1.70x", "AMP speedup")
check(amp.get(("cuda:0, lecture, batch 64", "bf16"), [""] * 5)[4] == "58.17 MiB", "AMP peak memory (61e6 bytes)")

# Comparison of the two lecture runs: shared cases with ratios, the rest listed as present in one only.
head, rows = read_csv(out, "compare_lecture")
check(head == ["Case", "Metric", "lecture_a", "lecture_b", "lecture_b / lecture_a"], f"compare header {head}")
cmp = {r[0]: r for r in rows}
check(len(rows) == 8, f"8 shared lecture cases ({len(rows)})")
check(cmp.get("train_epoch/cpu/fp32/batch=64", [""] * 5)[4] == "1.23x", "ratio 2010/1630 = 1.23x")
head, rows = read_csv(out, "only_lecture")
only = {r[0]: r[1] for r in rows}
check(only.get("train_epoch/cpu/fp32/batch=128") == "lecture_b" and only.get("train_epoch/cpu/fp32/batch=1") == "lecture_a",
      f"cases present in one run listed {only}")
check("transfer (transfer)" in text and "amp (amp)" in text, "suites present in only one run named")

# 2. Two different suites in one report: plots for both.
out2 = os.path.join(OUT, "two_suites")
report([os.path.join(DATA, "kernels"), os.path.join(DATA, "transfer")], out2)
doc2, tags2 = page(out2)
check_pngs(out2, tags2)
check(any("gflops_matmul" in s for s in tags2.imgs) and any("transfer" in s for s in tags2.imgs),
      f"plots for both suites: {tags2.imgs}")

# 3. One lecture run: the table in the lecture's own layout (no Run column).
out3 = os.path.join(OUT, "one")
report([os.path.join(DATA, "lecture_a")], out3)
head, rows = read_csv(out3, "lecture")
check(head[:3] == ["Device", "Batchsize", "Train throughput"], f"single-run lecture header {head}")
check([r[:2] for r in rows[:6]] == [["CPU", "64"], ["GPU", "64"], ["CPU", "4"], ["GPU", "4"], ["CPU", "2"], ["GPU", "2"]],
      "lecture row order 64, 4, 2 with CPU before GPU")

# 4. The data loader (issue 30): the loader suite's scaling plot and table, ours beside PyTorch; a lecture
# run with rows fed by the loader gets a Fed by column beside the resident rows.
out5 = os.path.join(OUT, "loader")
report([os.path.join(DATA, "loader"), os.path.join(DATA, "lecture_fed")], out5)
doc5, tags5 = page(out5)
check_pngs(out5, tags5)
check(any("loader_scaling" in s for s in tags5.imgs), f"loader scaling plot: {tags5.imgs}")
head, rows = read_csv(out5, "loader")
got = {(r[0], r[3]): r for r in rows}
check(got.get(("none", "off"), [""] * 7)[4:7] == ["107,926", "3,594", "30.0x"], f"loader row raw: {got.get(('none', 'off'))}")
check(got.get(("png", "off"), [""] * 7)[6] == "3.6x", f"loader row png: {got.get(('png', 'off'))}")
head, rows = read_csv(out5, "lecture")
check("Fed by" in head, f"lecture header has Fed by: {head}")
fed = [r[head.index("Fed by")] for r in rows] if "Fed by" in head else []
check(fed.count("resident tensors") == 2 and fed.count("loader: 2 workers (the lecture's)") == 2, f"fed by values {fed}")

# 5. The sequence models (issue 29) in tokens/s: a CPU seq run at the default sizes with the PyTorch peer
# (tests/data/report/seq_cpu: Zen 4, 2026-11-27) beside the committed H100 seq-peer baseline. Their
# throughput against batch size, the GPU-vs-CPU crossover per model matched by its sizes, and ours over
# PyTorch with the paired repetitions' range (the CPU rows; the baseline predates the key).
out6 = os.path.join(OUT, "seq")
h100 = os.path.join(DATA, "..", "..", "..", "reports", "baselines", "nvidia-h100-80gb-hbm3", "seq-peer.json")
report([os.path.join(DATA, "seq_cpu"), h100], out6)
doc6, tags6 = page(out6)
check_pngs(out6, tags6)
for m in ("rnn", "lstm", "transformer"):
    check(any(f"batch_seq_train_{m}" in s for s in tags6.imgs), f"seq {m} tokens/s plot: {tags6.imgs}")
head, rows = read_csv(out6, "crossover_machines")
models = sorted(r[0].split(" ")[0] for r in rows)
check(models == ["lstm", "rnn", "transformer"], f"crossover rows per sequence model: {[r[0] for r in rows]}")
check(all("hidden=128" in r[0] or "d_model=128" in r[0] for r in rows), f"crossover rows name the sizes: {rows}")
check("tokens/s" in doc6, "tokens/s named on the page")
head, rows = read_csv(out6, "vs_pytorch")
check(head[-2:] == ["Median ratio", "Paired repetitions"], f"vs_pytorch header {head}")
check(len(rows) == 9 and all(r[2] == "cpu" for r in rows), f"vs_pytorch: the 9 CPU training rows: {rows}")
check(all(r[-1].count("x to ") == 1 for r in rows), f"vs_pytorch ranges: {[r[-1] for r in rows]}")
check(any("vs_pytorch" in s for s in tags6.imgs), f"vs_pytorch plot: {tags6.imgs}")

# 6. Escaping: a folder name, a host name and an error message full of HTML.
evil_dir = os.path.join(OUT, 'evil <b>"&\'')
shutil.rmtree(evil_dir, ignore_errors=True)
os.makedirs(evil_dir)
with open(os.path.join(DATA, "kernels", "results.json"), encoding="utf-8") as f:
    src = f.read()
src = src.replace('"desk-3080ti"', '"<script>alert(1)</script>"').replace(
    "verification failed: max_rel_err", "verification <img src=x onerror=alert(2)> failed: max_rel_err")
with open(os.path.join(evil_dir, "results.json"), "w", encoding="utf-8") as f:
    f.write(src)
out4 = os.path.join(OUT, "escaped")
report([evil_dir], out4)
doc4, tags4 = page(out4)
check("<script>" not in doc4 and "&lt;script&gt;alert(1)&lt;/script&gt;" in doc4, "host name escaped")
check("<img src=x" not in doc4 and "&lt;img src=x onerror=alert(2)&gt;" in doc4, "error message escaped")
check("evil &lt;b&gt;&quot;&amp;&#x27;" in doc4, "folder name escaped")
check("script" not in tags4.tags and all(s and s.startswith("fig") for s in tags4.imgs), "no injected tags")

print(f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
