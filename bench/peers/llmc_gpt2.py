#!/usr/bin/env python3
"""llm.c peer of the gpt2 suite: llm.c's own plain-C CPU trainer (train_gpt2.c, built by its own
Makefile) on the checkpoint and token files dlbench wrote, answering the serve protocol PeerCase
speaks (bench/training_cases.h): a {"ready": true, ...} line, then one {"seconds", "loss", ...} line
per line "steps" on stdin. Python standard library only.

The checkout is $DLBENCH_LLMC_DIR (github.com/karpathy/llm.c; nothing of it is in dlbench). This
script runs `make train_gpt2` there when the binary is missing or older than its sources (the
Makefile marks the target .PHONY, so an unconditional make would recompile every case), and records
the Makefile's compile command (`make -n`), the compiler and the checkout's commit ("unknown"
outside git). train_gpt2's main() fixes B=4, T=64 and reads, relative to its working directory,
gpt2_124M.bin and dev/data/tinyshakespeare/tiny_shakespeare_{train,val}.bin (TinyStories when those
are missing; gpt2_tokenizer.bin is optional): --run-dir gets symlinks under those names.

Its loop: `val loss X` at steps 0, 10, 20, ... (5 consecutive unshuffled batches of the val file,
the weights as loaded at step 0), text generation before steps 20 and 40, and
`step N: train loss X (took Y ms)` with Y timed around the batch load, forward, zero_grad, backward
and AdamW only. Timing is not polluted by interleaving with dlbench's own cases: between requests
the process is SIGSTOPped; a request SIGCONTs it, discards the next step line (that step may have
been in flight while the process was stopped, and its "took" would include the stopped time),
answers the one after it (which ran entirely while running: its "took" is the "seconds"), then
SIGSTOPs again. Generation (63 forwards, untimed) is kept out: when a request would reach step 20
the process is restarted from the checkpoint (step 0 again). The step-0 val loss goes into the
ready line and --val-loss-file, for dlbench's check against its own forward on the same batches.

Exit 3 with one line when the checkout is missing or does not build; 1 when train_gpt2 fails."""
import argparse
import ctypes
import glob
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time

STEP = re.compile(r"^step (\d+): train loss (\S+) \(took (\S+) ms\)")
VAL = re.compile(r"^val loss (\S+)")
# The names train_gpt2.c's main() opens (relative to its working directory).
RUN_FILES = {"checkpoint": "gpt2_124M.bin",
             "train": "dev/data/tinyshakespeare/tiny_shakespeare_train.bin",
             "val": "dev/data/tinyshakespeare/tiny_shakespeare_val.bin"}
FIRST_GENERATION_STEP = 20  # main() generates text before steps 20 and 40


def unavailable(msg):
    print(msg, flush=True)
    sys.exit(3)


def checkout():
    d = os.environ.get("DLBENCH_LLMC_DIR", "")
    if not d:
        unavailable("DLBENCH_LLMC_DIR is not set (a checkout of github.com/karpathy/llm.c, docs/peers.md)")
    if not (os.path.isfile(os.path.join(d, "train_gpt2.c")) and os.path.isfile(os.path.join(d, "Makefile"))):
        unavailable(f"DLBENCH_LLMC_DIR={d}: no train_gpt2.c and Makefile there (not an llm.c checkout)")
    return os.path.abspath(d)


def build(d):
    """make train_gpt2 when stale (under a lock on the checkout: parallel cases share it); the
    Makefile's compile command as `make -n` prints it, and the compiler's version."""
    exe = os.path.join(d, "train_gpt2")
    sources = [os.path.join(d, f) for f in ("train_gpt2.c", "Makefile")] + glob.glob(os.path.join(d, "llmc", "*.h"))
    lock = os.open(d, os.O_RDONLY)
    try:
        import fcntl
        fcntl.flock(lock, fcntl.LOCK_EX)
        dry = subprocess.run(["make", "-n", "train_gpt2"], cwd=d, capture_output=True, text=True)
        cmd = next((ln.strip() for ln in dry.stdout.splitlines() if "train_gpt2.c" in ln and "-o" in ln), "")
        stale = not os.path.exists(exe) or os.path.getmtime(exe) < max(os.path.getmtime(s) for s in sources)
        if stale:
            made = subprocess.run(["make", "train_gpt2"], cwd=d, capture_output=True, text=True)
            if made.returncode != 0 or not os.access(exe, os.X_OK):
                tail = (made.stderr or made.stdout).strip().splitlines()
                unavailable(f"make train_gpt2 failed in {d}: {tail[-1] if tail else made.returncode}")
    finally:
        os.close(lock)
    cc = shlex.split(cmd)[0] if cmd else "cc"
    ver = subprocess.run([cc, "--version"], capture_output=True, text=True).stdout.splitlines()
    git = subprocess.run(["git", "-C", d, "rev-parse", "HEAD"], capture_output=True, text=True)
    with open(os.path.join(d, "train_gpt2.c"), "rb") as f:
        src = hashlib.sha256(f.read()).hexdigest()
    return exe, {"llmc_commit": git.stdout.strip() if git.returncode == 0 else "unknown",
                 "llmc_cflags": cmd, "llmc_cc": ver[0] if ver else cc, "llmc_source_sha256": src[:16]}


def die_with_parent():
    """In the child: SIGKILL when this script dies (a SIGSTOPped train_gpt2 must not outlive it)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class Trainer:
    """One running train_gpt2, stopped between requests."""

    def __init__(self, exe, run_dir, threads):
        self.exe, self.run_dir, self.threads = exe, run_dir, threads
        self.proc, self.next_step, self.dead_cpu, self.val_loss = None, 0, 0.0, None
        self.start()

    def start(self):
        env = dict(os.environ)
        if self.threads:
            env["OMP_NUM_THREADS"] = str(self.threads)
        stdbuf = shutil.which("stdbuf")
        if not stdbuf:
            unavailable("stdbuf (coreutils) not found: train_gpt2's output would be block-buffered")
        self.proc = subprocess.Popen([stdbuf, "-oL", self.exe], cwd=self.run_dir, env=env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     preexec_fn=die_with_parent)
        self.next_step, self.lines = 0, []
        while True:  # up to step 0's val loss, then stopped: step 0 may start before the stop lands
            m = VAL.match(self.line())
            if m:
                self.val_loss = float(m.group(1))
                break
        self.proc.send_signal(signal.SIGSTOP)

    def line(self):
        ln = self.proc.stdout.readline()
        if not ln:
            self.proc.wait()
            first = next((x for x in self.lines if x.strip()), "no output")
            print(f"train_gpt2 ended (status {self.proc.returncode}) before its next step: {first.strip()}", flush=True)
            sys.exit(1)
        self.lines = (self.lines + [ln])[-20:]
        return ln

    def step_line(self, want):
        while True:
            m = STEP.match(self.line())
            if m and int(m.group(1)) == want:
                return m

    def request(self):
        if self.next_step + 1 >= FIRST_GENERATION_STEP:
            self.stop()
            self.start()
        self.proc.send_signal(signal.SIGCONT)
        self.step_line(self.next_step)  # possibly in flight while stopped: discarded
        m = self.step_line(self.next_step + 1)
        self.proc.send_signal(signal.SIGSTOP)
        self.next_step += 2
        return int(m.group(1)), float(m.group(2)), float(m.group(3)) / 1e3

    def cpu_seconds(self):
        """This script's, the finished trainers' and the running one's CPU time (all its threads)."""
        live = 0.0
        try:
            with open(f"/proc/{self.proc.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            live = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime
        except (OSError, IndexError, ValueError):
            pass
        return time.process_time() + self.dead_cpu + live

    def stop(self):
        if self.proc and self.proc.poll() is None:
            before = os.times()
            self.proc.kill()  # SIGKILL ends a stopped process too
            self.proc.wait()
            after = os.times()
            self.dead_cpu += (after.children_user - before.children_user) + (after.children_system - before.children_system)


def link(run_dir, name, target):
    path = os.path.join(run_dir, name)
    os.makedirs(os.path.dirname(path) or run_dir, exist_ok=True)
    if os.path.lexists(path):
        os.remove(path)
    os.symlink(os.path.abspath(target), path)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--checkpoint", required=True, help="llm.c checkpoint (its header sets the config)")
    ap.add_argument("--train-tokens", required=True, help="llm.c token file for training (shuffled by llm.c)")
    ap.add_argument("--val-tokens", required=True, help="llm.c token file for the val loss (5 x B T + 1 tokens read)")
    ap.add_argument("--run-dir", required=True, help="train_gpt2's working directory (made; symlinks)")
    ap.add_argument("--val-loss-file", help="where to write {\"val_loss\": step 0's} as JSON")
    ap.add_argument("--threads", type=int, default=0, help="OMP_NUM_THREADS (0: OpenMP's default)")
    ap.add_argument("--serve", action="store_true", help="one step per line 'steps' on stdin")
    a = ap.parse_args()
    for f in (a.checkpoint, a.train_tokens, a.val_tokens):
        if not os.path.isfile(f):
            print(f"{f}: not found")
            return 2
    exe, keys = build(checkout())
    os.makedirs(a.run_dir, exist_ok=True)
    for what, target in (("checkpoint", a.checkpoint), ("train", a.train_tokens), ("val", a.val_tokens)):
        link(a.run_dir, RUN_FILES[what], target)
    threads = a.threads or int(os.environ.get("OMP_NUM_THREADS", "0") or 0) or len(os.sched_getaffinity(0))
    keys["llmc_omp_threads"] = threads
    t = Trainer(exe, a.run_dir, a.threads)
    signal.signal(signal.SIGTERM, lambda *_: (t.stop(), sys.exit(143)))
    try:
        if a.val_loss_file:
            with open(a.val_loss_file, "w") as f:
                json.dump({"val_loss": t.val_loss, "val_batches": 5}, f)
        print(json.dumps({"ready": True, "val_loss": t.val_loss, "threads": threads, "keys": keys,
                          "cpu_seconds": t.cpu_seconds()}), flush=True)
        for req in sys.stdin:
            if req.strip() != "steps" or not a.serve:
                continue
            step, loss, seconds = t.request()
            print(json.dumps({"seconds": seconds, "steps": 1, "loss": loss, "llmc_step": step,
                              "cpu_seconds": t.cpu_seconds()}), flush=True)
    finally:
        t.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
