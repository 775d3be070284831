#!/usr/bin/env python3
"""Paired comparison of malloc builds on one workload of bench/workloads, for the quick checks a
change needs before the full suites run:

    python3 bench/paired.py larson --scale 0.5 --rounds 7 allockit tcmalloc /tmp/candidate.so

Each allocator is a name `make bench-malloc` knows (glibc, jemalloc, mimalloc, tcmalloc,
allockit: this build's liballockit.so) or the path of a library to preload. Every round runs each
allocator once in its own process, the order rotated by one each round (benchlib.rotations), so
load that drifts on a shared host hits all alike. Printed per allocator: the median wall time
and peak RSS (the workload's own measurement, from its JSON line), and the median over rounds of
its time over the first allocator's in the same round, with the lowest and highest of those
ratios (how far this host moves one cell).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

import benchlib


def resolve(build, name):
    """(label, preload or None) for an allocator name or a library path."""
    known = benchlib.malloc_allocators(build)
    if name in known:
        return name, known[name]
    if os.path.isfile(name):
        return os.path.basename(name), os.path.abspath(name)
    sys.exit(f"paired.py: {name!r} is neither an allocator ({', '.join(known)}) nor a file")


def run_once(binary, workload, scale, preload):
    """The workload's JSON line (seconds, peak_rss_kib) in a process of its own."""
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if preload:
        env["LD_PRELOAD"] = preload
    args = [binary, workload] + ([str(scale)] if scale is not None else [])
    done = subprocess.run(args, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"paired.py: {' '.join(args)} failed ({done.returncode}): {done.stderr.strip()}")
    return json.loads(done.stdout.strip().splitlines()[-1])


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
    libs = [resolve(args.build, a) for a in args.allocators]
    labels = [label for label, _ in libs]
    if len(set(labels)) != len(labels):
        sys.exit("paired.py: two allocators share a name; copy one library under another name")
    runs = {label: [None] * args.rounds for label in labels}
    for r, order in benchlib.rotations(libs, args.rounds):
        for label, preload in order:
            runs[label][r] = run_once(binary, args.workload, args.scale, preload)
    base = labels[0]
    print(f"{args.workload}, {args.rounds} rounds, ratios over {base} in the same round")
    for label in labels:
        secs = [x["seconds"] for x in runs[label]]
        rss = [x["peak_rss_kib"] / 1024 for x in runs[label]]
        ratios = [a["seconds"] / b["seconds"] for a, b in zip(runs[label], runs[base])]
        print(f"  {label:16s} {statistics.median(secs):8.3f} s  {statistics.median(rss):7.1f} MiB  "
              f"paired {statistics.median(ratios):.3f}x [{min(ratios):.3f}-{max(ratios):.3f}]")


if __name__ == "__main__":
    main()
