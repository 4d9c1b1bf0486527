#!/usr/bin/env python3
"""dlbench report generator: results folders -> one static HTML page with PNG plots beside it.

    report.py RUN_DIR|results.json|results.jsonl [...] --out DIR

Writes DIR/index.html, DIR/*.png and every table also as DIR/<table>.csv and DIR/<table>.md.
Reads results.json (Google Benchmark layout: context + benchmarks); a folder without it but with
results.jsonl (an interrupted run) is read from the jsonl. Sections appear only when there is data:
an opening answer (GPU against CPU: speed-up at batch 64 and 2, crossover; also across results
folders from different machines), machines, crossover, lecture table, throughput vs batch, per-layer
profile, memory and energy, roofline, GFLOP/s vs size, transfer GB/s, AMP, dist, comparison, and every
case of every suite. Failed, skipped and unverified cases are listed as such and never
drawn as numbers. Bad input exits 2 with one line `dlbench: error: <file>: ...` on stderr.
Python 3 standard library + matplotlib (Agg) only. The sections live in the dlbench_report package
beside this file, one module each; this file is the entry point the harness runs.
"""
import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from dlbench_report.cases import sec_cases, sec_compare  # noqa: E402
from dlbench_report.common import InputError, label_runs, load_run, one_line  # noqa: E402
from dlbench_report.dist import sec_dist  # noqa: E402
from dlbench_report.kernels import sec_gflops  # noqa: E402
from dlbench_report.loader import sec_loader  # noqa: E402
from dlbench_report.lecture import opening_answer, sec_amp, sec_batch, sec_crossover, sec_lecture  # noqa: E402
from dlbench_report.machines import sec_machines  # noqa: E402
from dlbench_report.peers import sec_vs_pytorch  # noqa: E402
from dlbench_report.profile import sec_memory_energy, sec_profile  # noqa: E402
from dlbench_report.roofline import sec_roofline  # noqa: E402
from dlbench_report.style import Page  # noqa: E402
from dlbench_report.transfers import sec_transfer  # noqa: E402


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
    opening_answer(page, runs)
    sec_machines(page, runs)
    for sec in (sec_crossover, sec_lecture, sec_batch, sec_vs_pytorch, sec_profile, sec_memory_energy, sec_roofline, sec_gflops,
                sec_transfer, sec_loader, sec_amp, sec_dist, sec_compare, sec_cases):
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
