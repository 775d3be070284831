#!/usr/bin/env bash
# liballockit's ALLOCKIT_* options under LD_PRELOAD: idle memory goes back to the OS after the
# purge delay with the background purge (a thread named allockit-purge at nice 19, started at
# once by a free that empties a big block itself, in a threaded process by an allocation once
# 16 MiB are taken, or by the exit of a thread whose heap keeps blocks), also when threads that
# filled it exited or wait, and stays without it; ALLOCKIT_STATS prints at exit; a bad value is
# reported and ignored.
# Usage: options_test.sh LIBALLOCKIT_SO IDLE_PURGE_PROGRAM
set -euo pipefail
lib=$(realpath "$1")
prog=$(realpath "$2")
fail() { echo "FAIL: $*"; exit 1; }

echo "== idle memory returns within the delay (100 ms) with the background purge"
out=$(LD_PRELOAD="$lib" ALLOCKIT_PURGE_DELAY_MS=100 "$prog" 20) || fail "memory not returned while idle: $out"
echo "$out"
echo "== and so does memory left in the heaps of exited threads, freed by the main thread"
out=$(LD_PRELOAD="$lib" ALLOCKIT_PURGE_DELAY_MS=100 "$prog" 20 threads) ||
  fail "exited threads' memory not returned while idle: $out"
echo "$out"
echo "== and so does memory that threads freed before waiting, allocating nothing more"
out=$(LD_PRELOAD="$lib" ALLOCKIT_PURGE_DELAY_MS=100 "$prog" 20 waiting) ||
  fail "waiting threads' memory not returned while idle: $out"
echo "$out"
echo "== the purge thread is named and runs at nice 19 (so waking it never preempts the program)"
grep -qx "thread allockit-purge nice 19" <<<"$out" || fail "no allockit-purge thread at nice 19: $out"

echo "== a young process's free that empties a 2 MiB block itself starts the purge thread"
LD_PRELOAD="$lib" "$prog" young || fail "no purge thread after a big free"
if LD_PRELOAD="$lib" ALLOCKIT_BACKGROUND_PURGE=0 "$prog" young; then
  fail "a purge thread without the background purge: the test would prove nothing"
fi

echo "== and stays without it (negative control)"
if LD_PRELOAD="$lib" ALLOCKIT_PURGE_DELAY_MS=100 ALLOCKIT_BACKGROUND_PURGE=0 "$prog" 1.5; then
  fail "memory returned without the background purge: the test would prove nothing"
fi

if LD_PRELOAD="$lib" ALLOCKIT_PURGE_DELAY_MS=100 ALLOCKIT_BACKGROUND_PURGE=0 "$prog" 1.5 threads; then
  fail "exited threads' memory returned without the background purge: the test would prove nothing"
fi

if LD_PRELOAD="$lib" ALLOCKIT_PURGE_DELAY_MS=100 ALLOCKIT_BACKGROUND_PURGE=0 "$prog" 1.5 waiting; then
  fail "waiting threads' memory returned without the background purge: the test would prove nothing"
fi

echo "== ALLOCKIT_STATS=1 prints stats at exit"
out=$(LD_PRELOAD="$lib" ALLOCKIT_STATS=1 /bin/true 2>&1)
grep -q "allockit: stats: mapped" <<<"$out" || fail "no stats: $out"

echo "== a bad value is reported and the default kept"
out=$(LD_PRELOAD="$lib" ALLOCKIT_PURGE_DELAY_MS=soon ALLOCKIT_VERBOSE=1 /bin/true 2>&1)
grep -q "ignoring ALLOCKIT_PURGE_DELAY_MS=soon" <<<"$out" || fail "no warning: $out"
grep -q "purge delay 1000 ms" <<<"$out" || fail "default not kept: $out"
echo "options ok"
