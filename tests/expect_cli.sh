#!/usr/bin/env bash
# expect_cli.sh CODE CMD ARGS...: runs CMD, passes when it exits with CODE; for a non-zero CODE also
# requires exactly one line on stderr that starts with "dlbench: error:" (the CLI error contract).
set -u
want=$1; shift
err=$(mktemp)
"$@" >/dev/null 2>"$err"
got=$?
lines=$(grep -c '' "$err")
if [ "$got" != "$want" ]; then
  echo "expected exit $want, got $got; stderr:"; cat "$err"; rm -f "$err"; exit 1
fi
if [ "$want" != 0 ]; then
  if [ "$lines" != 1 ] || ! grep -q '^dlbench: error: ' "$err"; then
    echo "expected one 'dlbench: error:' line on stderr, got $lines line(s):"; cat "$err"; rm -f "$err"; exit 1
  fi
fi
cat "$err" >&2
rm -f "$err"
echo "ok: exit $got"
