#!/usr/bin/env bash
# ci/history_store.sh RUN_DIR [BRANCH] [REMOTE]: adds a results folder's results.json to the run
# history kept in a git branch (default dlbench-history on origin) as runs/<UTC time>-<sha>/results.json,
# and pushes it. The branch holds nothing else, so it grows by one small file per run. Run from the
# repository's checkout (CI: after actions/checkout, whose credentials the push uses); the nightly
# dashboard job checks the branch out and runs `dlbench history runs --html dashboard`
# (.github/workflows/dashboard.yml, docs/trackers.md). Exit 2 when RUN_DIR has no results.json.
set -euo pipefail
run=$1 branch=${2:-dlbench-history} remote=${3:-origin}
[ -f "$run/results.json" ] || { echo "history_store: error: $run has no results.json" >&2; exit 2; }
work=$(mktemp -d "${TMPDIR:-/tmp}/dlbench-history.XXXXXX")
cleanup() { git worktree remove --force "$work/h" >/dev/null 2>&1 || true; rm -rf "$work"; git worktree prune; }
trap cleanup EXIT
name=$(date -u +%Y%m%dT%H%M%SZ)-$(git rev-parse --short=10 HEAD)
if git fetch -q --depth=1 "$remote" "refs/heads/$branch" 2>/dev/null; then
  git worktree add -q --detach "$work/h" FETCH_HEAD
else  # the first run: a branch of its own history
  git worktree add -q --detach "$work/h" HEAD
  git -C "$work/h" checkout -q --orphan "$branch"
  git -C "$work/h" rm -rqf --cached .
  git -C "$work/h" clean -fdqx
fi
mkdir -p "$work/h/runs/$name"
cp "$run/results.json" "$work/h/runs/$name/results.json"
git -C "$work/h" add runs
git -C "$work/h" commit -qm "history: $name"
git -C "$work/h" push -q "$remote" "HEAD:refs/heads/$branch"
echo "stored $run as runs/$name on $branch"
