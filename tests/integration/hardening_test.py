#!/usr/bin/env python3
"""The hardening suite (bench/misuse/hardening_cases) under liballockit, as a user runs it: every
valid program exits 0, and every kind the build detects stays detected, by its report (SIGABRT)
or, for an access to a sealed block or a zero-size block, by a fault. With --secure the library
is liballockit-secure, which detects every kind.
Usage: hardening_test.py [--secure] LIBALLOCKIT HARDENING_CASES"""
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
    "usable_size_unaligned_small", "sized_delete_wrong_size", "aligned_sized_delete_wrong_size_small",
    "aligned_sized_delete_wrong_size_large",
}
FAULTS = {"read_after_free_large", "write_after_free_large", "write_after_free_large_reuse"}
SECURE_REPORTED = REPORTED | {
    "overflow_small_1", "overflow_small_8", "overflow_large_1",
    "overflow_large_8", "write_after_free_small", "write_after_free_small_reuse",
}
SECURE_FAULTS = FAULTS | {"read_zero_size", "write_zero_size"}


def main():
    args = sys.argv[1:]
    secure = args[0] == "--secure"
    lib, binary = args[1:] if secure else args
    reported, faults = (SECURE_REPORTED, SECURE_FAULTS) if secure else (REPORTED, FAULTS)
    env = dict(os.environ, LD_PRELOAD=os.path.abspath(lib))
    cases = [line.split("\t") for line in
             subprocess.run([binary, "list"], capture_output=True, text=True, check=True).stdout.splitlines()]
    failures = []
    for name, kind, what in cases:
        r = subprocess.run([binary, name], env=env, capture_output=True, text=True, timeout=120)
        if kind == "valid":
            ok = r.returncode == 0
        elif name in reported:
            ok = r.returncode == -signal.SIGABRT and r.stderr.startswith("allockit: ")
        elif name in faults:
            ok = r.returncode == -signal.SIGSEGV
        elif secure:
            ok = False  # the secure build detects every kind
        else:
            continue
        print(f"{'ok  ' if ok else 'FAIL'} {name} ({what}): exit {r.returncode} {r.stderr.strip()[:100]}")
        if not ok:
            failures.append(name)
    if failures:
        sys.exit(f"{len(failures)} hardening case(s) failed: {', '.join(failures)}")


if __name__ == "__main__":
    main()
