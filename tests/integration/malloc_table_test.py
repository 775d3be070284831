#!/usr/bin/env python3
"""The malloc table's geomeans (bench/run_malloc_bench.py summary) on made-up cells: each
allocator's time and peak RSS geomeans, and each without its own worst workload (the one where
it is furthest behind the best, or holds the most against the leanest).

  malloc_table_test.py RUN_MALLOC_BENCH_SCRIPT
"""
import importlib.util
import math
import sys


def load(path):
    spec = importlib.util.spec_from_file_location("run_malloc_bench", path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(__import__("pathlib").Path(path).parent))  # its benchlib, table
    spec.loader.exec_module(module)
    return module


def main():
    bench = load(sys.argv[1])
    # (seconds, peak RSS KiB) per allocator and workload.
    # w4 holds the most for both, yet is not the worst of either against the leanest.
    made_up = {("a", "w1"): (1.0, 100), ("a", "w2"): (2.0, 900), ("a", "w3"): (4.0, 100),
               ("a", "w4"): (1.0, 5000),
               ("b", "w1"): (2.0, 300), ("b", "w2"): (2.0, 100), ("b", "w3"): (1.0, 100),
               ("b", "w4"): (1.0, 4000)}
    cells = {k: {"seconds": s, "peak_rss_kib": r} for k, (s, r) in made_up.items()}
    sm, fair = bench.summary(cells, ["a", "b"], ["w1", "w2", "w3", "w4"])
    failures = []

    def expect(what, got, want):
        ok = math.isclose(got, want, rel_tol=1e-9) if isinstance(want, float) else got == want
        if not ok:
            failures.append(f"{what}: {got!r}, expected {want!r}")

    expect("a's worst time", sm["a"]["worst"], "w3")          # 4x the best
    expect("a's time without it", sm["a"]["without_worst"], 2.0 ** (1 / 3))
    expect("b's worst time", sm["b"]["worst"], "w1")          # 2x the best
    expect("a's worst RSS", sm["a"]["rss_worst"], "w2")       # 9x the leanest
    expect("a's RSS", sm["a"]["rss"], (100 * 900 * 100 * 5000) ** (1 / 4))
    expect("a's RSS without it", sm["a"]["rss_without_worst"], (100 * 100 * 5000) ** (1 / 3))
    expect("b's worst RSS", sm["b"]["rss_worst"], "w1")       # 3x the leanest
    expect("b's RSS without it", sm["b"]["rss_without_worst"], (100 * 100 * 4000) ** (1 / 3))
    expect("within 10x", fair, ["w1", "w2", "w3", "w4"])
    for f in failures:
        print("FAIL:", f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
