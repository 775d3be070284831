#!/usr/bin/env python3
"""The paired comparison (bench/paired.py) as a change's quick check uses it: one line per
allocator, the first the base of every ratio; an unknown allocator or a crashing run stops it
with exit status 1 and a message naming the cause.

  paired_test.py PAIRED_SCRIPT BUILD_DIR CRASHING_PRELOAD
"""
import subprocess
import sys


def paired(script, build, *args):
    return subprocess.run([sys.executable, script, "larson", "--scale", "0.02", "--build", build,
                           *args], capture_output=True, text=True)


def main():
    script, build, crashing = sys.argv[1:4]
    failures = []
    ok = paired(script, build, "--rounds", "2", "allockit", "glibc")
    lines = ok.stdout.splitlines()
    if ok.returncode != 0 or len(lines) != 3 or not lines[0].startswith("larson, 2 rounds"):
        failures.append(f"two allocators: {ok.returncode}\n{ok.stdout}{ok.stderr}")
    elif not (lines[1].split()[0] == "allockit" and "paired 1.000x [1.000-1.000]" in lines[1]
              and lines[2].split()[0] == "glibc" and " MiB " in lines[2]):
        failures.append(f"rows:\n{ok.stdout}")
    unknown = paired(script, build, "allockit", "no-such-allocator")
    if unknown.returncode != 1 or "'no-such-allocator' is neither" not in unknown.stderr:
        failures.append(f"unknown allocator: {unknown.returncode}\n{unknown.stderr}")
    crash = paired(script, build, "--rounds", "1", "allockit", crashing)
    if crash.returncode != 1 or "failed (-11)" not in crash.stderr:
        failures.append(f"crashing run: {crash.returncode}\n{crash.stderr}")
    for f in failures:
        print("FAIL:", f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
