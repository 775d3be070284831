#!/usr/bin/env python3
"""The size grid: one size band at a time (8 B to 8 MiB, log-uniform within a band), churned on
1 and on 2 threads, under every allocator in its own process (LD_PRELOAD), allocators rotated,
5 rounds. Writes bench/results/size_grid.{json,md}: the median time of a free-malloc pair per
cell, allockit's ratio to the best peer (of the medians, and paired: the median of each round's
own ratio), and peak RSS. Not a suite of the field's: a map of where allockit stands by block
size and thread count, so a band the standard suites touch little (16 KiB-1 MiB: medium and
large blocks) is measured too.

  run_size_grid.py [--build DIR] [--out DIR] [--rounds N] [--scale F]
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
import table  # noqa: E402
from run_malloc_bench import middle, run_json  # noqa: E402

KIB, MIB = 1024, 1024 * 1024
# (low, high, slots, pairs per thread): the slots keep a working set of some MiB; the pairs make a
# cell run 0.1-0.5 s under the faster allocators.
BANDS = [(8, 256, 1024, 3_000_000), (256, 4 * KIB, 1024, 2_000_000),
         (4 * KIB, 16 * KIB, 512, 1_000_000), (16 * KIB, 64 * KIB, 256, 1_000_000),
         (64 * KIB, 256 * KIB, 64, 500_000), (256 * KIB, MIB, 16, 200_000),
         (MIB, 8 * MIB, 8, 50_000)]
THREADS = [1, 2]


def size_name(n):
    return f"{n // MIB} MiB" if n >= MIB else f"{n // KIB} KiB" if n >= KIB else f"{n} B"


def cell_name(lo, hi, threads):
    return f"{size_name(lo)}-{size_name(hi)}, {threads} thread{'s' if threads > 1 else ''}"


def measure(binary, allocators, rounds, scale):
    cells = []
    for lo, hi, slots, pairs in BANDS:
        for threads in THREADS:
            n = max(1, int(pairs * scale))
            runs = {a: [] for a in allocators}
            for r, order in benchlib.rotations(allocators, rounds):
                for a in order:
                    print(f"+ {a} {cell_name(lo, hi, threads)} ({r + 1}/{rounds})", flush=True)
                    args = [binary] + [str(x) for x in (lo, hi, threads, slots, n)]
                    runs[a].append(run_json(args, allocators[a]))
            cells.append({"low": lo, "high": hi, "threads": threads, "slots": slots, "pairs": n,
                          "runs": runs})
    return cells


def render(doc):
    allocs = list(doc["allocators"])
    peers = [a for a in allocs if a != "allockit"]
    lines = table.header(doc, "Size grid: churn by block size and thread count") + [
        "Each thread frees a random slot's block and allocates one of a log-uniform size in the "
        "band there, writing its first and last byte (bench/grid/size_grid.cpp). Cells: the "
        f"median of {doc['rounds']} runs, each allocator in its own process, the allocators "
        "taking turns in a rotating order; ns per free-malloc pair (per thread). `paired`: the "
        "median over rounds of allockit's time over the best peer's in the same round; "
        "`rounds`: the lowest and highest of those. Not a target of any issue: a map of where "
        "allockit stands by size.", "",
        "## Time (ns per pair)", "",
        "| cell | " + " | ".join(allocs) + " | ak/best peer | paired | rounds |",
        "|---|" + "---|" * (len(allocs) + 3)]
    rss_lines = ["", "## Peak RSS (MiB)", "", "| cell | " + " | ".join(allocs) + " |",
                 "|---|" + "---|" * len(allocs)]
    for c in doc["cells"]:
        runs = c["runs"]
        med = {a: middle([r["ns_per_pair"] for r in runs[a]]) for a in allocs}
        best = min(peers, key=lambda a: med[a])
        rounds = [x["ns_per_pair"] / min(runs[p][i]["ns_per_pair"] for p in peers)
                  for i, x in enumerate(runs["allockit"])]
        name = cell_name(c["low"], c["high"], c["threads"])
        lines.append(f"| {name} | " + " | ".join(f"{med[a]:.1f}" for a in allocs) +
                     f" | {med['allockit'] / med[best]:.2f} ({best}) | {middle(rounds):.2f} | "
                     f"{min(rounds):.2f}-{max(rounds):.2f} |")
        rss_lines.append(f"| {name} | " + " | ".join(
            f"{middle([r['peak_rss_kib'] for r in runs[a]]) / 1024:.1f}" for a in allocs) + " |")
    return "\n".join(lines + rss_lines + [""])


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--out", default="bench/results")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--scale", type=float, default=1.0, help="the fraction of each cell's pairs")
    args = ap.parse_args()
    binary = os.path.join(args.build, "bench", "size_grid")
    allocators = benchlib.malloc_allocators(args.build)
    cells = measure(binary, allocators, args.rounds, args.scale)
    doc = benchlib.result_doc(sys.argv, [], "make bench-grid", allocators=allocators,
                              rounds=args.rounds, cells=cells)
    benchlib.write_results(args.out, "size_grid", doc, render(doc))


if __name__ == "__main__":
    main()
