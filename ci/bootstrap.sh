#!/usr/bin/env bash
# ci/bootstrap.sh [build|report|test|asan|dataset-fashion-mnist]...: installs the Debian packages a step
# needs, only those missing, and says which (once). Used by ./dlbench and by CI.
set -euo pipefail

declare -A PKGS=(
  [build]="cmake make g++ pkg-config libopenblas-dev libbenchmark-dev libgtest-dev nlohmann-json3-dev libcli11-dev zlib1g-dev libopenmpi-dev openmpi-bin libdnnl-dev"
  [report]="python3 python3-matplotlib"
  [test]="python3 python3-matplotlib python3-pil chromium slurm-wlm munge iproute2"
  [asan]="clang libclang-rt-14-dev"
  [dataset-fashion-mnist]="dataset-fashion-mnist"
)

want=()
for step in "$@"; do
  [ -n "${PKGS[$step]+x}" ] || { echo "ci/bootstrap.sh: unknown step '$step'" >&2; exit 2; }
  for p in ${PKGS[$step]}; do want+=("$p"); done
done

missing=()
for p in $(printf '%s\n' "${want[@]}" | sort -u); do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "dlbench: installing missing packages: ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo -n"; else
    echo "dlbench: error: missing packages (${missing[*]}) and not root; install them with apt-get" >&2
    exit 2
  fi
fi
export DEBIAN_FRONTEND=noninteractive
log=$(mktemp)
if ! { $SUDO apt-get update && $SUDO apt-get install -y --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
  tail -20 "$log" >&2
  echo "dlbench: error: apt-get could not install: ${missing[*]} (log above)" >&2
  rm -f "$log"
  exit 2
fi
rm -f "$log"
