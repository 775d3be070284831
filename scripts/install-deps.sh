#!/usr/bin/env bash
# Installs what allockit builds, tests and benchmarks with and is missing here: Debian packages
# (apt-get, as root or through sudo), and matplotlib/numpy from PyPI only when the python3 on
# PATH is not Debian's and lacks them. `make`, `make test` and `make demo` run it first; when
# nothing is missing it installs nothing and prints nothing.
set -euo pipefail
PACKAGES=(
  build-essential cmake ninja-build git clang-format python3 python3-pip pkg-config
  libgtest-dev libbenchmark-dev libboost-dev libloki-dev
  libjemalloc-dev libmimalloc-dev libgoogle-perftools-dev
  libzstd-dev zlib1g-dev clang libclang-rt-14-dev python3-matplotlib python3-numpy
  libpython3.11-testsuite sqlite3 heaptrack hyperfine dpkg-dev file
)

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

if ! python3 -c 'import matplotlib, numpy' 2>/dev/null; then
  echo "install-deps: installing matplotlib and numpy for $(command -v python3) from PyPI"
  python3 -m pip install -q matplotlib numpy
fi
