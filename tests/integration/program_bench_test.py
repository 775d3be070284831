#!/usr/bin/env python3
"""The real-program benchmark's parts (bench/run_program_bench.py):
- bench/programs/measure reports the program's own peak RSS (not its Python parent's, which
  Linux would carry across fork and execve), its exit status, and runs it with the preload asked
  for and no other;
- the table's paired ratios and geomeans on made-up cells;
- one program (sqlite, which `make test` installs anyway) run end to end, glibc and allockit.

  program_bench_test.py RUN_PROGRAM_BENCH_SCRIPT BUILD_DIR PRELOAD
"""
import importlib.util
import json
import math
import os
import subprocess
import sys
import tempfile

failures = []


def expect(what, ok, detail=""):
    if not ok:
        failures.append(f"{what} {detail}".rstrip())


def load(path):
    spec = importlib.util.spec_from_file_location("run_program_bench", path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, os.path.dirname(path))  # its benchlib, table, run_malloc_bench
    spec.loader.exec_module(module)
    return module


def measure(binary, preload, argv):
    p = subprocess.run([binary, preload] + argv, capture_output=True, text=True, timeout=60)
    return p.returncode, json.loads(p.stdout)


def check_measure(binary, preload):
    ballast = bytearray(64 << 20)  # this process's RSS, which the child must not inherit
    ballast[::4096] = b"x" * len(ballast[::4096])
    code, r = measure(binary, "-", ["true"])
    expect("measure: `true` exits 0", code == 0 and r["status"] == 0, str(r))
    expect("measure: `true`'s peak RSS is its own, not this process's 64 MiB",
           0 < r["maxrss_kib"] < 16 << 10, str(r))
    code, r = measure(binary, "-", ["python3", "-c", "b = bytearray(96 << 20); b[::4096] = "
                                    "b'x' * len(b[::4096])"])
    expect("measure: a program writing 96 MiB peaks past it", r["maxrss_kib"] > 96 << 10, str(r))
    expect("measure: its CPU time counted", r["user"] + r["sys"] > 0, str(r))
    code, r = measure(binary, "-", ["sh", "-c", "exit 3"])
    expect("measure: the program's exit status", code == 3 and r["status"] == 3, str(r))
    code, r = measure(binary, preload, ["sh", "-c", f'test "$LD_PRELOAD" = "{preload}"'])
    expect("measure: LD_PRELOAD is the one asked for", code == 0, str(r))
    os.environ["LD_PRELOAD"] = preload
    code, r = measure(binary, "-", ["sh", "-c", 'test -z "$LD_PRELOAD"'])
    del os.environ["LD_PRELOAD"]
    expect("measure: '-' runs without the caller's LD_PRELOAD", code == 0, str(r))
    p = subprocess.run([binary, "-", "/nonexistent/program"], capture_output=True, text=True)
    expect("measure: a program that cannot run is an error", p.returncode == 127, p.stderr)
    del ballast


def check_table(bench):
    run = lambda cpu, rss: {"cpu_s": cpu, "wall_s": cpu, "peak_rss_kib": rss}  # noqa: E731
    cells = {}
    # allockit against peers p and q on programs x and y, three rounds each.
    for a, n, rounds in [("allockit", "x", [(1.0, 1000), (2.0, 1000), (1.5, 1000)]),
                         ("p", "x", [(2.0, 500)] * 3), ("q", "x", [(4.0, 2000)] * 3),
                         ("allockit", "y", [(3.0, 4000)] * 3), ("p", "y", [(1.0, 2000)] * 3),
                         ("q", "y", [(2.0, 1000)] * 3)]:
        rs = [run(c, m) for c, m in rounds]
        cells[f"{a}|{n}"] = {"cpu_s": bench.middle([r["cpu_s"] for r in rs]),
                             "peak_rss_kib": bench.middle([r["peak_rss_kib"] for r in rs]),
                             "runs": rs}
    p, lo, hi = bench.paired(cells, "allockit", "p", "x")
    expect("paired: median of the rounds' ratios", math.isclose(p, 0.75) and lo == 0.5 and hi == 1.0,
           f"{p} {lo} {hi}")
    doc = {"command": "c", "machine": "m", "build_type": "b", "versions": {}, "cells": cells,
           "allocators": ["allockit", "p", "q"], "programs": ["x", "y"], "rounds": 3, "scale": 1.0}
    text = bench.render(doc)
    expect("table: x's best peer is p", "| 0.75 (p) | 0.50-1.00 |" in text, text)
    expect("table: y's best peer is p, 3x", "| 3.00 (p) | 3.00-3.00 |" in text, text)
    expect("table: y's leanest peer is q, 4x", "| 4.00 (q) |" in text, text)
    expect("table: the paired geomean", f"geomean {math.sqrt(0.75 * 3.0):.2f}x" in text, text)


def check_one_program(script, build, preload):
    with tempfile.TemporaryDirectory() as out:
        p = subprocess.run([sys.executable, script, "--build", build, "--out", out, "--rounds",
                            "1", "--only", "sqlite rows"], capture_output=True, text=True,
                           timeout=600)
        expect("one program end to end", p.returncode == 0, p.stderr[-2000:])
        if p.returncode == 0:
            doc = json.load(open(os.path.join(out, "programs.json")))
            rss = doc["cells"]["allockit|sqlite rows"]["peak_rss_kib"]
            expect("sqlite's 300,000 rows take over 64 MiB under allockit", rss > 64 << 10,
                   str(rss))


def main():
    script, build, preload = sys.argv[1:4]
    bench = load(script)
    check_measure(os.path.join(build, "bench", "measure"), preload)
    check_table(bench)
    check_one_program(script, build, preload)
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
