#!/usr/bin/env python3
"""The hardening suite (bench/misuse/hardening_cases) under the default liballockit, as a user
runs it: every valid program exits 0, and every kind the default build detects stays detected,
by its report (SIGABRT) or, for a stale access to a sealed block, by a fault.
Usage: hardening_test.py LIBALLOCKIT HARDENING_CASES"""
import os
import signal
import subprocess
import sys

# What the default build catches (docs/security.md); the rest is the secure build's.
REPORTED = {
    "double_free_small", "double_free_small_delayed", "double_free_large", "double_free_large_delayed",
    "unaligned_free_small", "unaligned_free_large", "free_unused_small_near", "free_unused_small_far",
    "free_protected_mapping", "free_unprotected_mapping", "free_uninitialised", "realloc_uninitialised",
    "usable_size_uninitialised", "usable_size_freed_small", "usable_size_unused_small",
    "usable_size_unaligned_small",
}
FAULTS = {"read_after_free_large", "write_after_free_large", "write_after_free_large_reuse"}


def main():
    lib, binary = sys.argv[1], sys.argv[2]
    env = dict(os.environ, LD_PRELOAD=os.path.abspath(lib))
    cases = [line.split("\t") for line in
             subprocess.run([binary, "list"], capture_output=True, text=True, check=True).stdout.splitlines()]
    failures = []
    for name, kind, what in cases:
        r = subprocess.run([binary, name], env=env, capture_output=True, text=True, timeout=120)
        if kind == "valid":
            ok = r.returncode == 0
        elif name in REPORTED:
            ok = r.returncode == -signal.SIGABRT and r.stderr.startswith("allockit: ")
        elif name in FAULTS:
            ok = r.returncode == -signal.SIGSEGV
        else:
            continue
        print(f"{'ok  ' if ok else 'FAIL'} {name} ({what}): exit {r.returncode} {r.stderr.strip()[:100]}")
        if not ok:
            failures.append(name)
    if failures:
        sys.exit(f"{len(failures)} hardening case(s) failed: {', '.join(failures)}")


if __name__ == "__main__":
    main()
