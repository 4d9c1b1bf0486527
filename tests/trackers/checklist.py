"""The tally the tracker checks share: check(ok, what) prints an ok/FAIL line; done() prints the count
and exits 1 if any check failed."""
import sys

failures = []


def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what)
    if not ok:
        failures.append(what)
    return ok


def done():
    print(f"{len(failures)} failure(s)")
    sys.exit(1 if failures else 0)
