"""Results loading and the shared vocabulary of every section: runs, cases, number formatting, devices."""
import json
import math
import os
import re

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

    def rate_unit(self):
        """The unit of this case's throughput against batch size: "imgs/s" (image models), "tokens/s"
        (sequence models, GPT-2; their headline metric may be GFLOP/s), or None (kernels, transfers)."""
        if self.metric == "imgs_per_s" or "imgs_per_s" in self.rec:
            return "imgs/s"
        if "tokens_per_s" in self.rec or self.suite in ("seq", "gpt2"):
            return "tokens/s"
        return None

    def rate(self):
        """The throughput in rate_unit(), or None when the case did not run."""
        u = self.rate_unit()
        if u is None or self.status != "ok":
            return None
        return num(self.rec.get("imgs_per_s" if u == "imgs/s" else "tokens_per_s"))

    def model_label(self):
        """The model and, for models whose sizes are axes (seq, gpt2), the sizes: "lstm (emb=64, hidden=128,
        layers=2, seq=32, vocab=128)"; a series only ever meets the same label on another device."""
        model = str(self.get("model", self.get("config", self.get("net", ""))))
        sizes = [f"{k}={v}" for k, v in sorted(self.params.items())
                 if k not in ("batch", "impl", "model", "config", "net", "images", "input", "loader")]
        return model + (f" ({', '.join(sizes)})" if sizes and self.suite in ("seq", "gpt2") else "")

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


def machine_key(run):
    """What tells machines apart in a run's fingerprint: host name, CPU model and count, GPU names."""
    c = run.context
    gpus = tuple(sorted(str(g.get("name", "")) for g in ((c.get("cuda") or {}).get("gpus") or [])))
    return (c.get("host_name"), (c.get("cpu") or {}).get("model"), c.get("num_cpus"), gpus)


def same_machine(a, b):
    return a is b or machine_key(a) == machine_key(b)


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


def flops_peak(c):
    """(GFLOP/s, what): the ceiling a case's pct_of_peak was taken against, which the harness picks by
    device and dtype (harness/records.cpp: the CPU's measured FMA peak, twice it for a bf16 row that ran
    on bf16 dot products; a GPU's fp32 or tensor-core peak for that dtype); else the device's fp32 peak
    (a bf16 line against an fp32 ceiling would show a CPU above its peak)."""
    g = num(c.rec.get("gflops")) if c.status == "ok" else None
    if g and c.pct:
        p = g * 100.0 / c.pct
        if c.device == "cpu":
            fma = num(c.rec.get("cpu_peak_gflops"))  # the FMA peak itself: twice it only on bf16 dot products
            twice = p > 1.5 * fma if fma else c.dtype == "bf16"
            return p, f"{c.dtype} peak (2 x the measured FMA peak)" if twice else "measured FMA peak"
        return p, f"theoretical {c.dtype} peak"
    return fp32_peak(c.run, c.device)


def series_label(parts):
    flat = []
    for p in parts:
        flat += list(p) if isinstance(p, (tuple, list)) else [p]
    return ", ".join(str(p) for p in flat if p not in (None, ""))
