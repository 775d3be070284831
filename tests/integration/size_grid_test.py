#!/usr/bin/env python3
"""The size grid's cell program (bench/grid/size_grid.cpp) as run_size_grid.py runs it: one JSON
line with the time of a pair and the peak RSS, under liballockit and under glibc; bad arguments
stop it with status 2 and a usage message.

  size_grid_test.py SIZE_GRID LIBALLOCKIT_SO
"""
import json
import os
import subprocess
import sys


def run(binary, args, preload=None):
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    if preload:
        env["LD_PRELOAD"] = preload
    return subprocess.run([binary, *map(str, args)], env=env, capture_output=True, text=True)


def main():
    binary, lib = sys.argv[1:3]
    failures = []
    for preload in (lib, None):
        for cell in ([8, 256, 1, 64, 20000], [16384, 262144, 2, 16, 2000], [1 << 20, 4 << 20, 1, 4, 50]):
            done = run(binary, cell, preload)
            try:
                got = json.loads(done.stdout)
                ok = done.returncode == 0 and got["ns_per_pair"] > 0 and got["peak_rss_kib"] > 0
            except (ValueError, KeyError):
                ok = False
            if not ok:
                failures.append(f"{cell} under {preload or 'glibc'}: {done.returncode}\n"
                                f"{done.stdout}{done.stderr}")
    for bad in ([], [256, 8, 1, 1, 1], [8, 256, 0, 1, 1], [8, 256, 1, 0, 1]):
        done = run(binary, bad)
        if done.returncode != 2 or "size_grid" not in done.stderr:
            failures.append(f"bad arguments {bad}: {done.returncode}\n{done.stderr}")
    for f in failures:
        print("FAIL:", f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
