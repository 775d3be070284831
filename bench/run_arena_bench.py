#!/usr/bin/env python3
"""Runs the arena benchmarks side by side in one run and writes bench/results/arenas.{json,md}.
new/delete rows are re-run in processes started with LD_PRELOAD (jemalloc, mimalloc, tcmalloc).
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
from arena_table import render_markdown  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--build", default="build")
    ap.add_argument("--out", default="bench/results")
    args = ap.parse_args()
    tmp = os.path.join(args.out, ".raw", "arenas")
    os.makedirs(tmp, exist_ok=True)
    rows = benchlib.run_suite(os.path.join(args.build, "bench", "arena_bench"), tmp,
                              "/new_delete/", counters=("chunk_maps_per_iter",
                                                        "chunk_unmaps_per_iter", "destructors",
                                                        "ns_per_alloc"))
    result = benchlib.result_doc(sys.argv, rows)
    benchlib.write_results(args.out, "arenas", result, render_markdown(result))


if __name__ == "__main__":
    main()
