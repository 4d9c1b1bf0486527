#!/usr/bin/env bash
# ci/bootstrap.sh [build|report|test|asan|dataset-fashion-mnist]...: installs the Debian packages a step
# needs, only those missing, and says which (once). Used by ./dlbench and by CI.
# Step test also gets, from PyPI only, check-jsonschema (validates .github/workflows and the Bencher
# export) and benchadapt (Conbench's Google Benchmark adapter, which tests/trackers reads results.json
# with) in the venv .venv-tools/ (git ignores it; DLBENCH_TOOLS_VENV moves it).
set -euo pipefail
TOOLS_VENV=${DLBENCH_TOOLS_VENV:-$(cd "$(dirname "$0")/.." && pwd)/.venv-tools}
pip_tools() {  # the PyPI tools of the test step, pinned, into TOOLS_VENV (Debian's python3 -m venv)
  [[ " $* " == *" test "* ]] || return 0
  local want="check-jsonschema==0.39.0 benchadapt==2024.3.20" log
  "$TOOLS_VENV/bin/check-jsonschema" --version 2>/dev/null | grep -q " 0\.39\.0$" &&
    "$TOOLS_VENV/bin/pip" show benchadapt 2>/dev/null | grep -q "^Version: 2024\.3\.20$" && return 0
  echo "dlbench: installing $want (PyPI) into $TOOLS_VENV" >&2
  log=$(mktemp)
  if ! { /usr/bin/python3 -m venv "$TOOLS_VENV" &&
         "$TOOLS_VENV/bin/pip" install -q --disable-pip-version-check $want; } >"$log" 2>&1; then
    tail -20 "$log" >&2
    echo "dlbench: error: could not install $want into $TOOLS_VENV (log above)" >&2
    rm -f "$log"
    exit 2
  fi
  rm -f "$log"
}

# Step build, where nvcc exists: cudnn-frontend's headers (header-only, MIT; the attention suite's
# impl=cudnn) from PyPI's nvidia-cudnn-frontend wheel (a zip whose include/ holds them), unpacked to
# CUDNN_FE_PREFIX/include when missing. Not fatal: without them that impl skips with the reason.
CUDNN_FE_PREFIX=${DLBENCH_CUDNN_FE_PREFIX:-/opt/cudnn-frontend}
CUDNN_FE_PIN="nvidia-cudnn-frontend==1.32.0"
cudnn_frontend() {
  [[ " $* " == *" build "* ]] || return 0
  command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ] || return 0
  [ -f "$CUDNN_FE_PREFIX/include/cudnn_frontend.h" ] && return 0
  echo "dlbench: fetching $CUDNN_FE_PIN's headers (PyPI) into $CUDNN_FE_PREFIX/include" >&2
  local tmp
  tmp=$(mktemp -d)
  if { /usr/bin/python3 -m venv "$tmp/venv" &&
       "$tmp/venv/bin/pip" download -q --disable-pip-version-check --no-deps --only-binary=:all: \
         --platform manylinux_2_28_x86_64 --python-version 3.11 --implementation cp -d "$tmp" "$CUDNN_FE_PIN" &&
       mkdir -p "$CUDNN_FE_PREFIX" &&
       /usr/bin/python3 -c 'import sys, zipfile, glob
z = zipfile.ZipFile(glob.glob(sys.argv[1] + "/*.whl")[0])
z.extractall(sys.argv[2], [n for n in z.namelist() if n.startswith("include/")])' "$tmp" "$CUDNN_FE_PREFIX"; } >"$tmp/log" 2>&1; then
    :
  else
    tail -5 "$tmp/log" >&2
    echo "dlbench: note: no cudnn-frontend headers (log above): attention impl cudnn will skip" >&2
  fi
  rm -rf "$tmp"
}

declare -A PKGS=(
  [build]="cmake make g++ ccache pkg-config libopenblas-dev libbenchmark-dev libgtest-dev nlohmann-json3-dev libcli11-dev zlib1g-dev libpng-dev libjpeg62-turbo-dev libopenmpi-dev openmpi-bin libdnnl-dev"
  [report]="python3 python3-matplotlib"
  [test]="python3 python3-matplotlib python3-pil chromium slurm-wlm munge iproute2 python3-venv libbenchmark-tools python3-scipy git"
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
[ ${#missing[@]} -eq 0 ] && { pip_tools "$@"; cudnn_frontend "$@"; exit 0; }

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
pip_tools "$@"
cudnn_frontend "$@"
