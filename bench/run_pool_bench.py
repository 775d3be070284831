#!/usr/bin/env python3
"""Runs the pool benchmarks side by side in one run and writes bench/results/pools.{json,md}.

The glibc process runs every contender; processes started with LD_PRELOAD re-run the rows backed
by malloc (new_delete, std_allocator) under jemalloc, mimalloc and tcmalloc. Separate processes
measure resident bytes per std::list<int> node. The JSON keeps every raw result with the command,
machine, build type and versions; the markdown is derived from it by pool_table.py.
"""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
from pool_table import render_markdown  # noqa: E402

MALLOC_ROWS = "/(new_delete|std_allocator)(/|$)"


def rss_rows(binary, sizes):
    rows = []
    runs = [("std_allocator", None), ("ak_pool_allocator", None), ("pmr_unsynchronized_pool", None),
            ("boost_fast_pool_allocator", None)] + [("std_allocator", a) for a in benchlib.PRELOADS]
    for n in sizes:
        for family, alloc in runs:
            if n > 10_000_000 and family == "boost_fast_pool_allocator":
                continue  # its per-node cost is the same at any size; saves a minute
            env = dict(os.environ)
            if alloc:
                env["LD_PRELOAD"] = benchlib.PRELOADS[alloc]
            cmd = [binary, f"--rss-list={n}", f"--family={family}"]
            print("+", f"LD_PRELOAD={env['LD_PRELOAD']}" if alloc else "", " ".join(cmd), flush=True)
            out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
            rows.append({"elements": n, "contender": family + (f"@{alloc}" if alloc else ""),
                         "rss_bytes_per_node": json.loads(out)["rss_bytes_per_node"]})
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--build", default="build")
    ap.add_argument("--out", default="bench/results")
    ap.add_argument("--filter", default=".", help="Google Benchmark filter for the glibc run")
    ap.add_argument("--layout-processes", type=int, default=6,
                    help="extra processes for the interleaved rows (median over all)")
    ap.add_argument("--rss-sizes", default="10000000,100000000")
    args = ap.parse_args()
    binary = os.path.join(args.build, "bench", "pool_bench")
    tmp = os.path.join(args.out, ".raw", "pools")
    os.makedirs(tmp, exist_ok=True)
    rows = benchlib.run_suite(binary, tmp, MALLOC_ROWS,
                              drop_numeric_heads=("list_10M", "umap_string_10M", "map_1M"),
                              counters=("insert_ms", "iterate_ms", "clear_ms", "create_s"),
                              filt=args.filter)
    benchlib.remeasure_across_processes(binary, tmp, rows, "^interleaved/", args.layout_processes)
    memory = rss_rows(binary, [int(s) for s in args.rss_sizes.split(",") if s])
    result = benchlib.result_doc(sys.argv, rows, memory=memory,
                                 layout_processes=args.layout_processes + 1)
    benchlib.write_results(args.out, "pools", result, render_markdown(result))


if __name__ == "__main__":
    main()
