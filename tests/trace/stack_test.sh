#!/usr/bin/env bash
# Call-stack round trip: `allockit record --stack N` of a program with known call sites
# (stack_program.cpp), with libunwind and with frame pointers, then `allockit top` finds each site
# by function and line with its exact counts, the dlopen'ed library through the module map, the
# symbols after the binary is rebuilt elsewhere (by build-id), and a crashed run's stacks.
# Usage: stack_test.sh BUILD_DIR SOURCE_DIR   (run by ctest)
source "$(dirname "$0")/common.sh"

line_of() { grep -n "SITE $1\$" "$src/tests/trace/stack_program.cpp" | cut -d: -f1; }
# JSON of `top --json` on stdin: every site with its count, function and line. With `direct`, only
# the sites that call malloc themselves: frame pointers lose a caller of a runtime function built
# without them (operator new, strdup), as documented.
check_sites() {
  python3 -c '
import json, sys
t = json.load(sys.stdin)
want = {"churn": (1000, "churn_site()", 48, 1000), "list": (500, "list_site()", 64, 0),
        "copy": (200, "copy_site(", 32, 0), "thread": (300, "thread_site()", 4000, 0)}
lines = dict(zip(want, sys.argv[1:5]))
if sys.argv[5:] == ["direct"]:
    del want["list"], want["copy"]
for key, (calls, fn, size, temporary) in want.items():
    rows = [s for s in t["sites"] if s["name"].startswith(fn) and s["name"].endswith(f"stack_program.cpp:{lines[key]})")]
    assert len(rows) == 1, (key, [s["name"] for s in t["sites"]])
    r = rows[0]
    assert r["calls"] == calls and r["common_sizes"][0] == [size, calls], (key, r)
    assert r["temporary"] == temporary, (key, r)
lst = [s for s in t["sites"] if s["name"].startswith("list_site()")]
assert not want.get("list") or lst[0]["peak_blocks"] == 500, lst
thr = [s for s in t["sites"] if s["name"].startswith("thread_site()")][0]
assert thr["leaked_blocks"] == 300, thr
' "$(line_of churn)" "$(line_of list)" "$(line_of copy)" "$(line_of thread)" "$@"
}

g++ -O1 -g -fno-omit-frame-pointer -o prog "$src/tests/trace/stack_program.cpp" -lpthread -ldl

step "record --stack 8 (libunwind): every site by function and line"
"$ak" record -o s-libunwind.akj --stack 8 -- ./prog > /dev/null
"$ak" top s-libunwind.akj --json -n 1000 | check_sites
step "record --stack 8 --unwind fp: the sites that call malloc directly"
"$ak" record -o s-fp.akj --stack 8 --unwind fp -- ./prog > /dev/null
"$ak" top s-fp.akj --json -n 1000 | check_sites direct

step "the dlopen'ed library is in the module map"
"$ak" top s-libunwind.akj --by module --json | python3 -c '
import json, sys
names = [s["name"] for s in json.load(sys.stdin)["sites"]]
assert any(n.startswith("libz.so") for n in names), names'

step "text table, deeper sites, other sort orders"
"$ak" top s-libunwind.akj --stack-depth 2 --sort peak -n 3 > top.txt
sed -n 4p top.txt | grep -q "thread_site()" || fail "the peak's top site is not thread_site: $(cat top.txt)"
grep -A1 "list_site()" top.txt | grep -q "<- main (.*stack_program.cpp" || fail "no caller: $(cat top.txt)"
"$ak" top s-libunwind.akj --by function > fn.txt
grep -q "churn_site()$" fn.txt || fail "$(cat fn.txt)"

step "symbols by build-id after the binary moved"
mkdir syms && mv prog syms/renamed
"$ak" top s-libunwind.akj --json -n 1000 --debug-dir syms | check_sites
"$ak" top s-libunwind.akj | grep -q "prog+0x" || fail "no module+offset without the binary"

step "a crashed recording keeps its stacks"
set +e
"$ak" record -o crash.akj --stack 4 -- syms/renamed crash > /dev/null 2>&1
set -e
"$ak" top crash.akj --json -n 1000 --debug-dir syms | check_sites

step "bad input"
"$ak" record -o none.akj --stack 0 -- syms/renamed > /dev/null
if "$ak" top none.akj 2> none.err; then fail "top of a stackless journal succeeded"; fi
grep -q "no call stacks" none.err || fail "$(cat none.err)"
for bad in "--stack 65" "--stack x" "--unwind gdb"; do
  if "$ak" record -o x.akj $bad -- true 2> bad.err; then fail "record $bad accepted"; fi
  grep -q "record: --" bad.err || fail "$(cat bad.err)"
done
for bad in "--by file" "--stack-depth 0" "--sort size" "-n -1"; do
  if "$ak" top s-fp.akj $bad 2> bad.err; then fail "top $bad accepted"; fi
  grep -q "takes" bad.err || fail "$(cat bad.err)"
done
echo "stack round trip ok"
