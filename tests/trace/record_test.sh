#!/usr/bin/env bash
# Record round trip: journals of a program with a known pattern (threads, cross-thread frees,
# realloc, calloc, aligned calls, new/delete, fork) hold exactly its calls; a crash or _exit
# keeps the journal; replay completes; damaged journals get clear errors.
# Usage: record_test.sh BUILD_DIR   (run by ctest)
export PYTHONPATH="$(realpath "$(dirname "$0")")${PYTHONPATH:+:$PYTHONPATH}"  # journal_blocks.py
source "$(dirname "$0")/common.sh"

step "record the pattern program with --follow-forks"
"$ak" record -o p.akj --follow-forks -- "$build/pattern_program" expected.txt
ls p.akj*
child=$(ls p.akj.* | head -1)
"$build/pattern_check" p.akj expected.txt "$child"

step "the recorder compresses as it writes: zstd blocks with TSC times, nothing rewritten after"
python3 - p.akj <<'PY'
import sys
from journal_blocks import blocks
found = list(blocks(sys.argv[1]))
assert not found[-1][2], f"{len(found[-1][2])} bytes after the last whole block"
codecs = {codec for codec, _, _ in found[:-1]}
assert 0x101 in codecs, f"no zstd block with TSC times: {sorted(codecs)}"
PY

step "stats agree with the journal and the program"
"$ak" stats p.akj > stats.txt
grep -q "posix_memalign" stats.txt || fail "stats lacks posix_memalign"
"$ak" stats --json p.akj > stats.json
python3 - <<'PY'
import json
s = json.load(open("stats.json"))
assert s["calls"]["posix_memalign"] == 10, s["calls"]
assert s["calls"]["valloc"] == 5 and s["calls"]["pvalloc"] == 5, s["calls"]
assert s["cross_thread_frees"] >= 400, s
assert s["threads"] >= 3, s
m = s["recorded_memory"]
assert m["samples"] >= 2, m  # one before the first call, one at exit at least
assert m["peak_rss_bytes"] > m["peak_anon_bytes"] > 0, m
PY

step "replay completes against glibc and allockit"
"$ak" compare p.akj --allocators glibc,allockit --out cmp > table.md
grep -q "| allockit |" table.md || fail "no allockit row"
grep -q "^Fidelity (glibc, the recorded allocator): peak heap RssAnon recorded" table.md ||
  fail "no fidelity line: $(tail -2 table.md)"
[ -s cmp/recorded_rss.csv ] || fail "no recorded_rss.csv for the report"
"$ak" compare p.akj --allocators allockit --out cmp1 > one.md
grep -q "^Fidelity: not measured (the recorded allocator" one.md || fail "$(tail -1 one.md)"
python3 -c "
import json; c = json.load(open('cmp/compare.json'))
assert all(r['ok'] for r in c['results']), c
assert c['results'][0]['kinds']['aligned']['count'] > 0"
"$ak" replay p.akj --allocator glibc --touch page --speed 10 --out one > /dev/null

step "the replay runs the program's main thread on its own main thread"
# glibc serves the main thread from its brk arena and every other thread from an mmap'd one.
ALLOCKIT_TEST_THREAD_PROBE="$PWD/probe.txt" \
  "$ak" compare p.akj --allocators "$build/libak_thread_probe.so" --out probe > /dev/null
[ "$(cat probe.txt)" = "main libak_thread_probe.so" ] ||
  fail "the main thread's first call replayed on: $(cat probe.txt)"

step "compare runs its repeats in rounds, every allocator once a round, each starting one further"
cp "$build/libak_thread_probe.so" probe_a.so
cp "$build/libak_thread_probe.so" probe_b.so
rm -f order.txt
ALLOCKIT_TEST_THREAD_PROBE="$PWD/order.txt" \
  "$ak" compare p.akj --allocators "$PWD/probe_a.so,$PWD/probe_b.so" --repeat 3 --out order > /dev/null
order=$(cut -d' ' -f2 order.txt | tr '\n' ' ')
[ "$order" = "probe_a.so probe_b.so probe_b.so probe_a.so probe_a.so probe_b.so " ] ||
  fail "runs went in the order: $order"

step "recorded memory leaves out static data and stacks; the replay's matches it"
"$ak" record -o nh.akj --stack 0 -- "$build/pattern_program" x nonheap
"$ak" stats --json nh.akj > nh.json
"$ak" compare nh.akj --allocators glibc --touch page --out nhc > nh.md
python3 - <<'PY'
import json
m = json.load(open("nh.json"))["recorded_memory"]
mib = 1 << 20
# 4 MiB of heap beside 16 MiB of dirtied static data and 2 MiB of thread stack.
assert 3 * mib < m["peak_heap_anon_bytes"] < 7 * mib, m
# The thread stack may be only partly dirtied at the sample that sees the heap's peak.
assert m["nonheap_at_peak_bytes"] > 15 * mib, m
f = json.load(open("nhc/compare.json"))["fidelity"]
assert f["state"] == "measured" and 0.75 < f["ratio"] < 1.33, f
PY

step "a program that allocates without pause is sampled at least every 10 ms"
"$ak" record -o churn.akj --stack 0 -- "$build/pattern_program" x churn
python3 - churn.akj <<'PY'
import sys
from journal_blocks import ms_per_tick, rss_samples
ticks = [r[0] for r in rss_samples(sys.argv[1])]
span_ms = (max(ticks) - min(ticks)) * ms_per_tick(sys.argv[1])
# The flushes of the program's own logs sample while it runs, so this holds on a loaded machine
# too, where the sampler thread may wait for a core.
assert span_ms > 250 and len(ticks) >= span_ms / 10, (len(ticks), span_ms)
PY

step "blocks handed to the writer thread reach the file in each thread's order, none lost"
# The churn's two threads fill a 64 KiB log every millisecond or so: their blocks go to the
# recorder's writer, or are written by their threads when it falls behind.
"$ak" stats --json churn.akj > churn.json
python3 - churn.akj churn.json <<'PY'
import json, sys
from journal_blocks import event_blocks
last, per_thread = {}, {}
for thread, base in event_blocks(sys.argv[1]):
    assert base >= last.get(thread, 0), ("a block out of its thread's order", thread)
    last[thread] = base
    per_thread[thread] = per_thread.get(thread, 0) + 1
assert sum(n >= 20 for n in per_thread.values()) >= 2, per_thread
s = json.load(open(sys.argv[2]))
assert not any(s["problems"].values()), s["problems"]
PY

step "the recorder counts its compression context as soon as it compresses"
# A thread allocating in bursts fills its log slowly enough that every block is compressed. The
# context's pages, resident from the first compression, are the recorder's from then on: counted
# 0.2 s late, they read as heap in the program's recorded curve until then.
"$ak" record -o paced.akj --stack 0 -- "$build/pattern_program" x paced
python3 - paced.akj <<'PY'
import sys
from journal_blocks import blocks, ms_per_tick, rss_samples
path = sys.argv[1]
assert any(c == 0x101 for c, _, _ in blocks(path) if c is not None), "no compressed block"
s, ms = rss_samples(path), ms_per_tick(path)
at_100ms = next(r for r in s if (r[0] - s[0][0]) * ms >= 100)
# Against the sample before the last: the flushes at exit compress blocks of their own. Counted
# late, the context is missing 100 ms in (0.59 of it then); counted at once, 0.95-1.0 of it.
assert at_100ms[3] >= 0.8 * s[-2][3], (at_100ms[3], s[-2][3])
PY

step "threads that exit hand their logs on: the recorder's memory does not grow with them"
"$ak" record -o t100.akj --stack 0 -- "$build/pattern_program" x threads 100
"$ak" record -o t400.akj --stack 0 -- "$build/pattern_program" x threads 400
python3 - t100.akj t400.akj <<'PY'
import sys
from journal_blocks import rss_samples
# The recorder's own bytes at the last sample.
few, many = (max(rss_samples(p))[3] for p in sys.argv[1:])
# A log kept by each exited thread adds a page or more per thread: 1.2 MiB for 300 more.
assert many - few < 256 << 10, (few, many)
PY

step "big blocks' frees carry the pages written; the replay writes as many"
"$ak" record -o big.akj --stack 0 -- "$build/pattern_program" x bigblocks
"$ak" stats --json big.akj > big.json
"$ak" compare big.akj --allocators glibc --speed 1 --out bigc > big.md
python3 - <<'PY'
import json
b = json.load(open("big.json"))["big_blocks"]
# 4 MiB with 100 pages written and a 2 MiB calloc with 10 (glibc maps both fresh).
assert b["freed_with_pages"] == 2 and b["span_pages"] == 1536, b
assert 110 <= b["resident_pages"] <= 114, b
# Touching every page of the 4 MiB block would read about 9x the recorded peak.
f = json.load(open("bigc/compare.json"))["fidelity"]
assert f["state"] == "measured" and 0.6 < f["ratio"] < 1.6, f
PY

step "a crashing program leaves a readable journal"
set +e
"$ak" record -o crash.akj -- "$build/pattern_program" x crash 2> crash.err
rc=$?
set -e
[ "$rc" -eq 139 ] || fail "expected exit 139 from SIGSEGV, got $rc"
grep -q "killed by signal" crash.err || fail "no crash message"
n=$("$ak" stats --json crash.akj | python3 -c "import json,sys; print(json.load(sys.stdin)['calls']['malloc'])")
[ "$n" -ge 5000 ] || fail "crash journal lost events: $n mallocs"

step "_exit keeps the journal"
set +e
"$ak" record -o exit.akj -- "$build/pattern_program" x exit
rc=$?
set -e
[ "$rc" -eq 3 ] || fail "expected exit 3, got $rc"
n=$("$ak" stats --json exit.akj | python3 -c "import json,sys; print(json.load(sys.stdin)['calls']['malloc'])")
[ "$n" -ge 5000 ] || fail "_exit journal lost events: $n mallocs"

step "a main thread that leaves by pthread_exit: the process still ends, its journal whole"
# The recorder's own thread (memory samples, the logs' writer) leaves once the program's last
# thread has: the main thread, gone, still counts in /proc/self/stat as a zombie, and the
# recorder's thread registers its own stack, neither of which may keep it waiting. (It blocks
# every signal, so a process it outlived could not even be stopped by SIGTERM.)
timeout -k 10 60 "$ak" record -o mainexit.akj --stack 0 -- "$build/pattern_program" x main_exits ||
  fail "the recording of a program whose main thread called pthread_exit did not end"
n=$("$ak" stats --json mainexit.akj | python3 -c "import json,sys; print(json.load(sys.stdin)['calls']['malloc'])")
[ "$n" -ge 200000 ] || fail "pthread_exit journal lost events: $n mallocs"

step "damaged journals get an error naming the offset"
size=$(stat -c %s p.akj)
head -c $((size - 10)) p.akj > cut.akj
"$ak" stats cut.akj > /dev/null 2> cut.err
grep -q "truncated at offset" cut.err || fail "no truncation warning"
python3 -c "
d = bytearray(open('p.akj','rb').read()); d[len(d)//2] ^= 0xff; open('bad.akj','wb').write(d)"
if "$ak" stats bad.akj > /dev/null 2> bad.err; then fail "corrupt journal accepted"; fi
grep -q "offset" bad.err || fail "error does not name the offset: $(cat bad.err)"
echo "hello" > text.akj
if "$ak" stats text.akj 2> text.err; then fail "text accepted as a journal"; fi
grep -q "bad magic at offset 0" text.err || fail "$(cat text.err)"

step "an unknown allocator lists the available ones"
if "$ak" replay p.akj --allocator nosuch 2> unknown.err; then fail "unknown allocator accepted"; fi
grep -q "available here: glibc" unknown.err || fail "$(cat unknown.err)"

step "--out makes missing folders and names what stands in its way"
"$ak" replay p.akj --allocator glibc --out runs/today/glibc > /dev/null
[ -s runs/today/glibc/compare.md ] || fail "no results under a new nested --out"
touch taken
if "$ak" replay p.akj --allocator glibc --out taken/x 2> taken.err; then
  fail "an --out below a file accepted"
fi
grep -q "taken/x: cannot create the output directory (Not a directory)" taken.err ||
  fail "$(cat taken.err)"

step "import, export"
printf -- '--1-- malloc(10) = 0x10\n--1-- free(0x10)\n' > t.vg
"$ak" import --format valgrind t.vg -o t.akj
"$ak" export --format text t.akj -o t.txt
"$ak" compare t.akj --allocators glibc --out timp > imp.md
grep -q "^Fidelity: unknown (the journal has no memory samples" imp.md || fail "$(tail -1 imp.md)"
[ "$(cat t.txt)" = "$(printf 'a 10 0x10 1 1000\nf 0x10 1 2000')" ] || fail "export: $(cat t.txt)"
echo "record round trip ok"
