#!/usr/bin/env bash
# Advice round trip: `allockit advise` of a recorded program with one site per pattern
# (advise_program.cpp) names each site's pattern, type and line, routes only what is safe,
# measures the what-if replay (per site and in total) and proves the journal's semantics kept;
# bad input gets clear errors.
# Usage: advise_test.sh BUILD_DIR SOURCE_DIR   (run by ctest)
source "$(dirname "$0")/common.sh"

g++ -O1 -g -o prog "$src/tests/trace/advise_program.cpp" -lpthread -ldl
"$ak" record -o a.akj -- ./prog > /dev/null

step "advise: patterns, types and lines; the what-if replay measured and checked"
"$ak" advise a.akj --out adv --repeat 1 > adv.txt
grep -q "^Semantics kept" adv.txt || fail "$(tail -3 adv.txt)"
python3 - "$src/tests/trace/advise_program.cpp" <<'PY'
import json, sys
lines = {}
for n, text in enumerate(open(sys.argv[1]), 1):
    if "// SITE " in text:
        lines[text.split("// SITE ")[1].strip()] = n
a = json.load(open("adv/advice.json"))
def site(key):
    rows = [s for s in a["sites"] if s["site"].endswith(f"advise_program.cpp:{lines[key]})")]
    assert len(rows) == 1, (key, [s["site"] for s in a["sites"]])
    return rows[0]
want = {"groups": ("groups", "ak::Arena", True), "pool": ("fixed-size churn", "ak::ObjectPool", True),
        "temporaries": ("temporaries", "stack buffer", True),
        "growth": ("realloc growth", "reserve", False),
        "handoff": ("fixed-size churn", "ak::ObjectPool", False), "leak": ("none", "", False)}
for key, (pattern, type_name, routed) in want.items():
    s = site(key)
    assert s["pattern"] == pattern, (key, s)
    assert type_name in s["change"], (key, s["change"])
    assert (s["route"] > 0) == routed, (key, s)
    if routed:
        assert s["before"]["count"] == s["after"]["count"] > 0, (key, s)
        assert s["rss_before"] > 0 and s["rss_after"] > 0, (key, s)
        for p in ("p50", "p99", "p99.9"):
            assert s["after"][p] > 0, (key, s)
    elif key != "leak":
        assert s["not_routed"], (key, s)
assert site("groups")["groups"] == 400 and site("groups")["mean_group"] == 50, site("groups")
assert site("pool")["max_size"] == 40 and site("pool")["calls"] == 61000, site("pool")
assert not any("libz" in s["site"] for s in a["sites"]), a["sites"]  # 20 calls: not hot
assert site("leak")["change"] == "" and site("leak")["route"] == 0, site("leak")  # nothing to do
m = a["measured"]
assert m["verified"] is True and m["runs"] == 1, m
assert m["before"]["count"] == m["after"]["count"] > 0, m
PY

step "top finds the dlopen'ed library's allocations"
"$ak" top a.akj --by module --json | python3 -c '
import json, sys
names = [s["name"] for s in json.load(sys.stdin)["sites"]]
assert any(n.startswith("libz.so") for n in names), names'

step "the text names each change and its measurement"
grep -q "change: allocate them from an ak::Arena" adv.txt || fail "$(cat adv.txt)"
grep -q "measured (glibc, p50 / p99 / p99.9 of its calls)" adv.txt || fail "$(cat adv.txt)"
grep -q "not replayed: some blocks are freed by another thread" adv.txt || fail "$(cat adv.txt)"

step "--no-replay judges without measuring; another allocator measures"
"$ak" advise a.akj --out adv2 --no-replay > plain.txt
grep -q "measured" plain.txt && fail "--no-replay measured"
python3 -c "import json; assert 'measured' not in json.load(open('adv2/advice.json'))"
"$ak" advise a.akj --out adv3 --repeat 1 --allocator allockit > ak.txt
grep -q "^Semantics kept" ak.txt || fail "$(tail -2 ak.txt)"

step "bad input"
"$ak" record -o none.akj --stack 0 -- ./prog > /dev/null
if "$ak" advise none.akj --out x 2> none.err; then fail "advise without stacks succeeded"; fi
grep -q "no call stacks" none.err || fail "$(cat none.err)"
if "$ak" advise a.akj -n 0 2> n.err; then fail "-n 0 accepted"; fi
grep -q "takes a number" n.err || fail "$(cat n.err)"
if "$ak" advise a.akj --allocator nosuch 2> u.err; then fail "unknown allocator accepted"; fi
grep -q "available here" u.err || fail "$(cat u.err)"
echo "advise round trip ok"
