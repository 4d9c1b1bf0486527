#!/usr/bin/env python3
"""Renders a report in headless Chromium (Debian's `chromium`) and checks the screenshot is a real
page: the PNG decodes at the window size, it is not blank (many distinct colours, a good share of
non-white pixels) and the page's own styling (the blue headings and table headers) was applied.

    check_screenshot.py DLBENCH DATA_DIR OUT_DIR
"""
import os
import shutil
import subprocess
import sys
import tempfile

from PIL import Image

DLBENCH, DATA, OUT = sys.argv[1:4]
chromium = shutil.which("chromium") or shutil.which("chromium-browser")
if not chromium:
    print("FAIL: chromium is not installed (ci/bootstrap.sh test installs it; ./dlbench test runs that)")
    sys.exit(1)

rep = os.path.join(OUT, "report")
shutil.rmtree(OUT, ignore_errors=True)
os.makedirs(OUT)
runs = [os.path.join(DATA, d) for d in ("lecture_a", "lecture_b", "kernels", "transfer", "amp")]
p = subprocess.run([DLBENCH, "report", *runs, "--out", rep], capture_output=True, text=True, timeout=300)
if p.returncode != 0:
    print(f"FAIL: dlbench report exit {p.returncode}: {p.stderr}")
    sys.exit(1)

shot = os.path.join(OUT, "screenshot.png")
with tempfile.TemporaryDirectory(prefix="dlb-chromium-") as profile:  # own profile: tests run in parallel
    cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
           f"--user-data-dir={profile}", f"--screenshot={shot}", "--window-size=1280,2000",
           "file://" + os.path.abspath(os.path.join(rep, "index.html"))]
    try:
        c = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    except subprocess.TimeoutExpired:
        print("FAIL: chromium did not finish in 180 s")
        sys.exit(1)
if not os.path.isfile(shot):
    print(f"FAIL: chromium wrote no screenshot (exit {c.returncode}): {c.stderr[-2000:]}")
    sys.exit(1)

failures = []
with Image.open(shot) as im:
    im.load()
    rgb = im.convert("RGB")
print(f"screenshot {shot}: {rgb.size}")
if rgb.size != (1280, 2000):
    failures.append(f"size {rgb.size}, want 1280x2000")
small = rgb.resize((320, 500))
colours = small.getcolors(1 << 20) or []
nonwhite = sum(n for n, c in colours if sum(c) < 720) / (320 * 500)
print(f"distinct colours (downscaled): {len(colours)}, non-white share: {nonwhite:.3f}")
if len(colours) < 64:
    failures.append(f"only {len(colours)} distinct colours: a blank or error page")
if nonwhite < 0.05:
    failures.append(f"only {nonwhite:.1%} non-white pixels")
# The headings and table headers are #2f6db5: the stylesheet was applied, so the HTML was rendered.
blue_px = sum(n for n, c in (rgb.getcolors(1 << 22) or []) if abs(c[0] - 0x2f) < 12 and abs(c[1] - 0x6d) < 12
              and abs(c[2] - 0xb5) < 12)
print(f"heading-blue pixels: {blue_px}")
if blue_px < 2000:
    failures.append(f"only {blue_px} pixels of the page's heading blue: styling not applied")
for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
