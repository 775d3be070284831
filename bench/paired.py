#!/usr/bin/env python3
"""Paired comparison of malloc builds on one workload of bench/workloads, for the quick checks a
change needs before the full suites run:

    python3 bench/paired.py larson --scale 0.5 --rounds 7 allockit tcmalloc /tmp/candidate.so

Each allocator is a name `make bench-malloc` knows (glibc, jemalloc, mimalloc, tcmalloc,
allockit: this build's liballockit.so) or the path of a library to preload. Every round runs each
allocator once in its own process, the order rotated by one each round (benchlib.rotations), so
load that drifts on a shared host hits all alike. The runs and cells are `make bench-malloc`'s
(run_malloc_bench.run_workload): per allocator the median wall time and peak RSS (the
workload's own measurement), and the median over rounds of its time over the first allocator's
in the same round, with the lowest and highest of those ratios (how far this host moves a cell).
"""
import argparse
import os
import sys

import benchlib
from run_malloc_bench import middle, paired_ratios, run_workload


def resolve(build, name):
    """(label, preload or None) for an allocator name or a library path."""
    known = benchlib.malloc_allocators(build)
    if name in known:
        return name, known[name]
    if os.path.isfile(name):
        return os.path.basename(name), os.path.abspath(name)
    sys.exit(f"paired.py: {name!r} is neither an allocator ({', '.join(known)}) nor a file")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("workload")
    ap.add_argument("allocators", nargs="+", help="names or library paths; the first is the base")
    ap.add_argument("--scale", type=float, help="the fraction of the workload's work (SCALE)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--build", default="build")
    args = ap.parse_args()
    if args.rounds < 1:
        sys.exit("paired.py: --rounds must be at least 1")
    binary = os.path.join(args.build, "bench", "malloc_workloads")
    if not os.access(binary, os.X_OK):
        sys.exit(f"paired.py: {binary} not found (make all first, or pass --build)")
    libs = dict(resolve(args.build, a) for a in args.allocators)
    if len(libs) != len(args.allocators):
        sys.exit("paired.py: two allocators share a name; copy one library under another name")
    cells = run_workload(binary, args.workload, libs, args.rounds, scale=args.scale,
                         progress=False)
    base = cells[0]
    print(f"{args.workload}, {args.rounds} rounds, ratios over {base['allocator']} in the same round")
    for c in cells:
        ratios = paired_ratios(c, base)
        print(f"  {c['allocator']:16s} {c['seconds']:8.3f} s  {c['peak_rss_kib'] / 1024:7.1f} MiB  "
              f"paired {middle(ratios):.3f}x [{min(ratios):.3f}-{max(ratios):.3f}]")


if __name__ == "__main__":
    main()
