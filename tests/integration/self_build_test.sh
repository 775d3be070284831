#!/usr/bin/env bash
# allockit built by a toolchain running under LD_PRELOAD=liballockit.so (cmake, ninja, the
# compiler and linker: whole real programs that allocate hard), against the same targets built
# without it: the machine code must come out byte for byte the same, and the tests built under
# the preload must pass. Part of `make soak` (about four minutes on two cores).
# Usage: self_build_test.sh LIBALLOCKIT_SO SOURCE_DIR
set -euo pipefail
lib=$(realpath "$1")
src=$(realpath "$2")
work=$(mktemp -d /tmp/allockit-self-build.XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
targets=(liballockit.so allockit test_malloc test_pool)

build() {  # build DIR [PRELOAD]
  local dir=$1 preload=${2:-}
  LD_PRELOAD=$preload cmake -S "$src" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    >"$dir.log" 2>&1 || { cat "$dir.log"; fail "cmake in $dir"; }
  LD_PRELOAD=$preload cmake --build "$dir" --target "${targets[@]}" >>"$dir.log" 2>&1 ||
    { tail -50 "$dir.log"; fail "the build in $dir"; }
}

echo "== building ${targets[*]} without, then with, liballockit preloaded"
build "$work/plain"
build "$work/preloaded" "$lib"

echo "== the machine code is the same"
text() { objcopy -O binary --only-section=.text "$1" "$2"; }
for t in liballockit.so.0.2.0 allockit tests/test_malloc tests/test_pool; do
  plain=$(find "$work/plain" -path "*/$t" -type f | head -1)
  pre=$(find "$work/preloaded" -path "*/$t" -type f | head -1)
  [ -n "$plain" ] && [ -n "$pre" ] || fail "$t was not built"
  text "$plain" "$work/a.text"
  text "$pre" "$work/b.text"
  cmp -s "$work/a.text" "$work/b.text" || fail "$t: .text differs between the two builds"
  echo "$t: $(stat -c %s "$work/a.text") bytes of .text, identical"
done

echo "== the tests built under the preload pass"
(cd "$work/preloaded" && ./tests/test_malloc --gtest_brief=1 >"$work/t1.log" 2>&1) ||
  { tail -30 "$work/t1.log"; fail "test_malloc"; }
(cd "$work/preloaded" && ./tests/test_pool --gtest_brief=1 >"$work/t2.log" 2>&1) ||
  { tail -30 "$work/t2.log"; fail "test_pool"; }
echo "self build ok"
