#!/usr/bin/env bash
# Installs allockit into a temporary prefix and uses it the four ways docs/using.md describes,
# as a user would: find_package, pkg-config, add_subdirectory/FetchContent, and a C program
# linked against the overriding library. Then the Debian package, unpacked with dpkg -x, and
# the trace lab run from the installed prefix. Usage: install_test.sh BUILD_DIR SOURCE_DIR
# No pipefail: `cmd | grep -q` checks what cmd printed; grep stopping early must not fail it.
set -eu
BUILD=$(realpath "$1")
SRC=$(realpath "$2")
T=$(mktemp -d /tmp/allockit-install.XXXXXX)
trap 'rm -rf "$T"' EXIT
P=$T/prefix
fail() { echo "FAIL: $*" >&2; exit 1; }
step() { echo "== $*"; }
cp -r "$SRC/examples" "$T/examples"
cfg() { cmake -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >"$T/cmake.log" 2>&1 || { cat "$T/cmake.log"; return 1; }; }

step "cmake --install into $P"
cmake --install "$BUILD" --prefix "$P" >/dev/null
(cd "$P" && find . -type f -o -type l | sort) >"$T/tree"
for f in include/allockit/allockit.h include/allockit/version.h include/allockit/detail \
         lib/liballockit.so lib/liballockit.so.0.2 lib/liballockit.a \
         lib/liballockit-secure.so lib/liballockit-secure.so.0.2 lib/liballockit-secure.a \
         lib/liballockit-prefixed.so lib/liballockit-prefixed.a \
         lib/cmake/allockit/allockitConfig.cmake lib/cmake/allockit/allockitConfigVersion.cmake \
         lib/pkgconfig/allockit.pc lib/pkgconfig/allockit-override.pc \
         bin/allockit libexec/allockit/allockit-replay libexec/allockit/liballockit_record.so \
         share/allockit/python/allockit_report/__main__.py share/doc/allockit/README.md \
         share/doc/allockit/using.md; do
  [ -e "$P/$f" ] || fail "install lacks $f"
done
[ "$(readelf -d "$P/lib/liballockit.so" | grep -c NEEDED)" = 1 ] || fail "liballockit.so needs more than libc"
[ "$(readelf -d "$P/lib/liballockit-secure.so" | grep -c NEEDED)" = 1 ] || fail "liballockit-secure.so needs more than libc"
readelf -d "$P/lib/liballockit-prefixed.so" | grep -q 'SONAME.*liballockit-prefixed.so.0.2' || fail "prefixed soname"

step "exports: ak_ and ak:: names only (prefixed); libc names, operators and ak_ only (override)"
others=$(nm -D --defined-only -C "$P/lib/liballockit-prefixed.so" | cut -d' ' -f3- |
         grep -Ev '^(ak_|ak::|(vtable|typeinfo|typeinfo name|VTT) for ak::)' || true)
[ -z "$others" ] || fail "liballockit-prefixed.so exports: $others"
nm -D --defined-only "$P/lib/liballockit-prefixed.so" | grep -qw ak_malloc || fail "no ak_malloc"

internals=$(nm -D --defined-only -C "$P/lib/liballockit.so" | cut -d' ' -f3- | grep -E '^ak::' || true)
[ -z "$internals" ] || fail "liballockit.so exports its internals: $internals"
nm -D --defined-only "$P/lib/liballockit.so" | grep -qw malloc || fail "liballockit.so does not export malloc"
[ "$(nm -D --defined-only -C "$P/lib/liballockit.so" | grep -c 'operator \(new\|delete\)')" = 20 ] ||
  fail "liballockit.so does not export the 20 operators new and delete"

step "find_package (shared and static)"
cfg -S "$T/examples/find-package" -B "$T/fp" -DCMAKE_PREFIX_PATH="$P"
cmake --build "$T/fp" >/dev/null
"$T/fp/inventory"
"$T/fp/inventory_static"
ldd "$T/fp/inventory" | grep -q "$P/lib/liballockit-prefixed.so" || fail "inventory does not load the installed library"

step "find_package(allockit 9.0) fails with CMake's version message"
mkdir -p "$T/v9"
printf 'cmake_minimum_required(VERSION 3.24)\nproject(v9 LANGUAGES CXX)\nfind_package(allockit 9.0 CONFIG REQUIRED)\n' >"$T/v9/CMakeLists.txt"
if cmake -S "$T/v9" -B "$T/v9/b" -DCMAKE_PREFIX_PATH="$P" >"$T/v9.log" 2>&1; then fail "9.0 was accepted"; fi
grep -q 'compatible with requested version "9.0"' "$T/v9.log" && grep -q 'version: 0.2.0' "$T/v9.log" || { cat "$T/v9.log"; fail "no version message"; }

step "pkg-config"
PKG_CONFIG_PATH=$P/lib/pkgconfig make -s -C "$T/examples/pkg-config" >/dev/null
"$T/examples/pkg-config/inventory"
[ "$(PKG_CONFIG_PATH=$P/lib/pkgconfig pkg-config --modversion allockit)" = 0.2.0 ] || fail "pc version"

step "the overriding library from C (shared and static)"
PKG_CONFIG_PATH=$P/lib/pkgconfig make -s -C "$T/examples/override-c" >/dev/null
O=$T/examples/override-c
"$O/main_shared"
"$O/main_static"
nm "$O/main_static" | grep -q ' T malloc$' || fail "main_static does not define malloc"
! nm -D "$O/main_static" | grep -q 'U _Zn\|stdc++' || fail "a C program linked with liballockit.a needs the C++ runtime"
step "linked twice, and preloaded into a program already linked with it"
cc -O2 -I"$P/include" -o "$O/twice" "$O/main.c" -L"$P/lib" -lallockit -lallockit -Wl,-rpath,"$P/lib"
"$O/twice"
cc -O2 -I"$P/include" -o "$O/both" "$O/main.c" "$P/lib/liballockit.a" -L"$P/lib" -lallockit -lpthread -Wl,-rpath,"$P/lib"
"$O/both"
LD_PRELOAD=$P/lib/liballockit.so "$O/main_shared"
LD_PRELOAD=$P/lib/liballockit.so "$O/main_static"
LD_PRELOAD=$P/lib/liballockit.so "$O/both"

step "add_subdirectory: only the libraries, none of the tests' dependencies"
cfg -S "$T/examples/subdirectory" -B "$T/sub" -DALLOCKIT_SOURCE_DIR="$SRC"
! grep -Eq '^(GTest_DIR|benchmark_DIR|Boost_DIR|ZLIB_INCLUDE_DIR)' "$T/sub/CMakeCache.txt" || fail "subproject looked for test dependencies"
! ninja -C "$T/sub" -t targets all | grep -Eq '^(test_pool|pool_bench|allockit_cli):' || fail "subproject builds tests/tools"
grep -q 'CMAKE_CXX_STANDARD' "$T/sub/CMakeCache.txt" && fail "allockit leaked its standard into the cache"
cmake --build "$T/sub" --target inventory >/dev/null
"$T/sub/inventory"

step "FetchContent"
cfg -S "$T/examples/subdirectory" -B "$T/fetch" -DALLOCKIT_SOURCE_DIR="$SRC" -DUSE_FETCHCONTENT=ON
cmake --build "$T/fetch" --target inventory >/dev/null
"$T/fetch/inventory"

step "make package: the .deb, unpacked with dpkg -x, builds a consumer"
(cd "$BUILD" && cpack -G DEB -B "$T/deb" >"$T/cpack.log" 2>&1) || { cat "$T/cpack.log"; fail "cpack"; }
DEB=$T/deb/allockit_0.2.0_amd64.deb
[ -f "$DEB" ] || { ls "$T/deb"; fail "no $DEB"; }
deps=$(dpkg-deb -f "$DEB" Depends)
for d in libc6 libzstd1 python3-numpy libunwind8; do
  echo "$deps" | grep -q "$d" || fail "the .deb does not depend on $d: $deps"
done
dpkg -x "$DEB" "$T/root"
cfg -S "$T/examples/find-package" -B "$T/fpdeb" -DCMAKE_PREFIX_PATH="$T/root/usr"
cmake --build "$T/fpdeb" --target inventory >/dev/null
LD_LIBRARY_PATH=$T/root/usr/lib "$T/fpdeb/inventory"
ldd "$T/fpdeb/inventory" 2>/dev/null | grep -q "$T/root/usr/lib/liballockit-prefixed" ||
  echo "(resolved through the rpath CMake set)"

step "the trace lab from the installed prefix"
AK=$P/bin/allockit
"$AK" --version | grep -q '^allockit 0.2.0$' || fail "installed --version"
"$AK" allocators | grep -q "^allockit.*$P/lib/liballockit.so" || { "$AK" allocators; fail "installed allockit allocator"; }
"$AK" record -o "$T/inv.akj" -- "$T/fp/inventory" >/dev/null
"$AK" compare "$T/inv.akj" --allocators glibc,allockit --out "$T/cmp" >/dev/null
"$AK" report "$T/cmp" -o "$T/report.html" >/dev/null
grep -q '<html' "$T/report.html" || fail "no report written"
grep -q 'Plotly.newPlot' "$T/report.html" || fail "the installed report lacks its plotting library"

step "an install without its report package or its plotting library, and a python3 without numpy"
mv "$P/share/allockit/python" "$T/python.away"
if "$AK" report "$T/cmp" -o "$T/r2.html" >"$T/r2.log" 2>&1; then fail "report ran without its package"; fi
grep -q 'report package allockit_report is missing' "$T/r2.log" || { cat "$T/r2.log"; fail "unclear message"; }
mv "$T/python.away" "$P/share/allockit/python"
vendor=$P/share/allockit/python/allockit_report/vendor
mv "$vendor" "$T/vendor.away"
if "$AK" report "$T/cmp" -o "$T/r4.html" >"$T/r4.log" 2>&1; then fail "report ran without its plotting library"; fi
grep -q 'plotly-cartesian.min.js is missing' "$T/r4.log" || { cat "$T/r4.log"; fail "unclear message"; }
mv "$T/vendor.away" "$vendor"
mkdir -p "$T/nonp/numpy"
echo 'raise ModuleNotFoundError("No module named numpy", name="numpy")' >"$T/nonp/numpy/__init__.py"
if PYTHONPATH=$T/nonp "$AK" report "$T/cmp" -o "$T/r3.html" >"$T/r3.log" 2>&1; then fail "report ran without numpy"; fi
grep -q "module 'numpy' is missing; install it" "$T/r3.log" || { cat "$T/r3.log"; fail "unclear message"; }
! grep -q Traceback "$T/r2.log" "$T/r3.log" "$T/r4.log" || fail "a Python traceback"

echo "install tree:"
sed 's/^/  /' "$T/tree"
echo "install test: ok"
