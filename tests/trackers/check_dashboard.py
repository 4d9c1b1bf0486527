#!/usr/bin/env python3
"""`dlbench history DIR --html OUT` end to end: a history of 200 run folders of 3 machines
(make_history.py: one case planted 40% slower on one machine, one failing in the latest run of
another), the dashboard written and timed (printed, not asserted), then rendered in headless
Chromium: the DOM after the script ran (--dump-dom) has a chart per case, a linked point per timed
run of each case, the flagged step drawn, the regressions listed first (the failing case, then the
planted one), filters by suite and device; the screenshot is a real page in the page's colours.

    check_dashboard.py DLBENCH WORK_DIR
"""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from html.parser import HTMLParser

from PIL import Image

from checklist import check, done  # noqa: E402  (beside this file)

DLBENCH, WORK = sys.argv[1:3]
HERE = os.path.dirname(os.path.abspath(__file__))

shutil.rmtree(WORK, ignore_errors=True)
hist, out = os.path.join(WORK, "history"), os.path.join(WORK, "dashboard")
planted, failing = subprocess.run([sys.executable, os.path.join(HERE, "make_history.py"), hist, "--runs", "200", "--machines", "3"],
                                  check=True, capture_output=True, text=True).stdout.split()
t0 = time.monotonic()
p = subprocess.run([DLBENCH, "history", hist, "--html", out], capture_output=True, text=True, timeout=120)
took = time.monotonic() - t0
print(f"dashboard of 200 run folders, 3 machines: {took:.2f} s (dlbench history --html): {p.stdout.strip()}")
if p.returncode != 0:
    print(f"FAIL: exit {p.returncode}: {p.stderr}")
    sys.exit(1)
page = os.path.join(out, "index.html")

# What the page must show: a point per (run, timed case).
points = 0
for f in glob.glob(os.path.join(hist, "*", "results.json")):
    names = {e["run_name"] for e in json.load(open(f))["benchmarks"] if not e.get("error_occurred")}
    points += len(names)

chromium = shutil.which("chromium") or shutil.which("chromium-browser")
if not chromium:
    print("FAIL: chromium is not installed (ci/bootstrap.sh test installs it; ./dlbench test runs that)")
    sys.exit(1)


def browse(*args):
    with tempfile.TemporaryDirectory(prefix="dlb-chromium-") as profile:  # own profile: tests run in parallel
        cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
               f"--user-data-dir={profile}", "--virtual-time-budget=10000", *args, "file://" + os.path.abspath(page)]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=180)


class Dom(HTMLParser):
    def __init__(self):
        super().__init__()
        self.cases, self.points, self.steps, self.body, self.selects = 0, 0, 0, {}, {}
        self.regression_rows, self.in_table, self.row, self.text = [], False, None, []
        self.select, self.step_labels = None, []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        cls = a.get("class", "").split()
        if tag == "body":
            self.body = a
        if tag == "section" and "case" in cls:
            self.cases += 1
        if tag == "a" and "point" in cls and a.get("href"):
            self.points += 1
        if tag == "line" and "step" in cls:
            self.steps += 1
        if tag == "table" and a.get("id") == "regression-table":
            self.in_table = True
        if tag == "tr" and self.in_table:
            self.row = []
        if tag == "select":
            self.select = a.get("id")
            self.selects[self.select] = []
        if tag == "option" and self.select:
            self.selects[self.select].append(a.get("value"))

    def handle_endtag(self, tag):
        if tag == "table":
            self.in_table = False
        if tag == "tr" and self.row is not None:
            self.regression_rows.append(self.row)
            self.row = None
        if tag == "select":
            self.select = None

    def handle_data(self, data):
        if self.row is not None and data.strip():
            self.row.append(data.strip())
        if data.strip().endswith("% step"):
            self.step_labels.append(data.strip())


d = browse("--dump-dom")
dom = Dom()
dom.feed(d.stdout)
check(dom.body.get("data-rendered") == "yes", "the page's script ran to its end in Chromium")
check(dom.cases == 10, f"one chart per case: {dom.cases} of 10")
check(dom.points == points, f"one linked point per timed run of each case: {dom.points} of {points}")
check(dom.steps >= 1 and "+40.0% step" in dom.step_labels, f"the planted step is marked: {dom.step_labels}")
rows = [r for r in dom.regression_rows if r and r[0] != "case"]
check(len(rows) == 2 and rows[0][0] == failing and rows[1][0] == planted and "+40.0%" in rows[1],
      f"regressions listed: the failing case, then the planted +40% one: {rows}")
check(sorted(v for v in dom.selects.get("f-suite", []) if v) == ["amp", "conv", "lecture", "matmul", "transfer"]
      and "cuda:0" in dom.selects.get("f-device", []), f"filters by suite and device: {dom.selects}")
link = next(iter(glob.glob(os.path.join(hist, "*-m0", "report", "index.html"))))
check(os.path.relpath(link, out) in open(page).read(), "points link to their run's report where it has one")

shot = os.path.join(WORK, "screenshot.png")
browse(f"--screenshot={shot}", "--window-size=1280,1400")
if not os.path.isfile(shot):
    check(False, "chromium wrote a screenshot")
else:
    with Image.open(shot) as im:
        rgb = im.convert("RGB")
    cols = rgb.getcolors(1 << 22) or []
    def near(c0):
        return sum(n for n, c in cols if all(abs(c[i] - c0[i]) < 14 for i in range(3)))
    check(len(rgb.resize((320, 350)).getcolors(1 << 20) or []) >= 64, "the screenshot is a drawn page, not a blank one")
    check(near((0x2f, 0x6d, 0xb5)) > 2000, "the page's styling (heading blue) was applied")
    check(near((0xe6, 0x7e, 0x22)) > 200 and near((0x16, 0xa0, 0x85)) > 200, "each machine's line is drawn in its colour")
done()
