#!/usr/bin/env bash
# Installs everything allockit builds, tests and benchmarks with, from Debian packages (and
# PyPI for matplotlib/numpy when the python3 on PATH is not Debian's). Run as root or with sudo.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends \
  build-essential cmake ninja-build git clang-format python3 python3-pip pkg-config \
  libgtest-dev libbenchmark-dev libboost-dev libloki-dev \
  libjemalloc-dev libmimalloc-dev libgoogle-perftools-dev \
  libzstd-dev zlib1g-dev clang libclang-rt-14-dev python3-matplotlib python3-numpy \
  libpython3.11-testsuite sqlite3 heaptrack hyperfine >/dev/null
if ! python3 -c 'import matplotlib, numpy' 2>/dev/null; then
  python3 -m pip install -q matplotlib numpy
fi
