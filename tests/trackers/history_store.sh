#!/usr/bin/env bash
# history_store.sh DLBENCH WORK: ci/history_store.sh (what the example workflow runs after each
# benchmark run) against a local bare repository standing in for GitHub: the first call makes the
# history branch (holding only runs/), the second adds to it, a checkout of it reads with
# `dlbench history --html`; a run folder without results.json exits 2.
set -u
cli=$1 work=$2
src=$(cd "$(dirname "$0")/../.." && pwd)
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$work" && mkdir -p "$work" || exit 1
export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@example.invalid GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@example.invalid
git init -q --bare "$work/origin.git" && git clone -q "$work/origin.git" "$work/repo" 2>/dev/null || fail "git setup"
echo code >"$work/repo/code.txt" && git -C "$work/repo" add -A && git -C "$work/repo" commit -qm code &&
  git -C "$work/repo" push -q origin HEAD:refs/heads/main || fail "first commit"
data=$src/tests/data/compare
for i in 1 2 3; do
  mkdir -p "$work/run$i"
  sed "s/2026-11-20T10:00:00+0000/2026-11-2${i}T10:00:00+0000/" "$data/base.json" >"$work/run$i/results.json"
  (cd "$work/repo" && bash "$src/ci/history_store.sh" "$work/run$i") || fail "store run $i"
  sleep 1  # the runs' folder names carry the time to the second
done
git clone -q -b dlbench-history "$work/origin.git" "$work/history" 2>/dev/null || fail "no dlbench-history branch on the remote"
[ "$(git -C "$work/history" ls-files | grep -c '^runs/.*/results.json$')" = 3 ] || fail "want 3 runs on the branch"
[ "$(git -C "$work/history" ls-files | grep -vc '^runs/')" = 0 ] || fail "the branch holds files besides runs/"
[ -z "$(git -C "$work/repo" worktree list | sed 1d)" ] || fail "a worktree was left behind"
"$cli" history "$work/history/runs" --html "$work/dash" || fail "history --html on the branch's runs"
grep -q '"runs":3' "$work/dash/index.html" || fail "the dashboard does not hold the 3 runs"
(cd "$work/repo" && bash "$src/ci/history_store.sh" "$work/no-such-run" 2>"$work/err"); rc=$?
[ $rc = 2 ] && [ "$(grep -c '' "$work/err")" = 1 ] || fail "a folder without results.json: exit $rc, want 2 with one line"
echo "ok: 3 runs stored on dlbench-history and read back by history --html"
