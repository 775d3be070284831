#!/usr/bin/env bash
# Installs what allockit builds, tests and benchmarks with and is missing here (with --programs,
# also the real programs of `make bench-programs`): Debian packages
# (apt-get, as root or through sudo), numpy from PyPI only when the python3 on PATH is not
# Debian's and lacks it, and the report's plotting library from npm. `make`, `make test` and `make demo` run it first; when
# nothing is missing it installs nothing and prints nothing.
set -euo pipefail
PACKAGES=(
  build-essential cmake ninja-build git clang-format python3 python3-pip pkg-config
  libgtest-dev libbenchmark-dev libboost-dev libloki-dev
  libjemalloc-dev libmimalloc-dev libgoogle-perftools-dev
  libzstd-dev zlib1g-dev libunwind-dev libdw-dev clang libclang-rt-14-dev python3-numpy
  libpython3.11-testsuite sqlite3 heaptrack hyperfine dpkg-dev file chromium
)
# --programs: also the real programs `make bench-programs` runs under every allocator.
if [ "${1:-}" = "--programs" ]; then
  PACKAGES+=(lua5.4 ruby perl z3 ghostscript redis-server redis-tools)
fi
# npm for the report's plotting library (below), from Debian when the machine has none.
command -v npm >/dev/null || PACKAGES+=(npm)

missing=()
for p in "${PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  [ "$status" = "installed" ] || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
    SUDO="sudo"
  fi
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! python3 -c 'import numpy' 2>/dev/null; then
  echo "install-deps: installing numpy for $(command -v python3) from PyPI"
  python3 -m pip install -q numpy
fi

# The plotting library the report embeds (tools/report/assets.py says why it comes from npm):
# the version package-lock.json pins, into tools/report/node_modules.
report=$(cd "$(dirname "$0")/../tools/report" && pwd)
if [ ! -f "$report/node_modules/plotly.js-cartesian-dist-min/plotly-cartesian.min.js" ]; then
  echo "install-deps: installing the report's plotting library from npm"
  (cd "$report" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
fi
