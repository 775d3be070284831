#!/usr/bin/env python3
"""Runs bench/workloads under each allocator in its own process (LD_PRELOAD) and writes
bench/results/malloc.{json,md}: median wall time and peak RSS of 3 runs per cell, ratios against
every peer, geometric means and issue 4's targets."""
import argparse
import json
import math
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
import table  # noqa: E402

WORKLOADS = ["larson", "xmalloc", "thread_churn", "mixed_lifetimes", "random_sizes",
             "large_blocks", "realloc_growth", "large_calloc"]


def run_once(binary, workload, preload):
    env = dict(os.environ)
    if preload:
        env["LD_PRELOAD"] = preload
    out = subprocess.run([binary, workload], env=env, check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out)


def summarise(workload, runs):
    """The cell of one allocator and workload: median time (and that run's calloc time), median
    peak RSS, every run kept."""
    runs = sorted(runs, key=lambda r: r["seconds"])
    mid = runs[len(runs) // 2]
    return {"workload": workload, "seconds": mid["seconds"],
            "peak_rss_kib": sorted(r["peak_rss_kib"] for r in runs)[len(runs) // 2],
            "calloc_us": mid["calloc_us"], "runs": runs}


def run_workload(binary, workload, allocators, reps):
    """Runs every allocator once per round, in a rotating order, so drift on a shared machine
    hits all of them alike."""
    names = list(allocators)
    runs = {n: [] for n in names}
    for rep in range(reps):
        for n in names[rep % len(names):] + names[:rep % len(names)]:
            print(f"+ {n} {workload} ({rep + 1}/{reps})", flush=True)
            runs[n].append(run_once(binary, workload, allocators[n]))
    return [dict(summarise(workload, runs[n]), allocator=n) for n in names]


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def render(doc):
    allocs = list(doc["allocators"])
    cells = {(c["allocator"], c["workload"]): c for c in doc["cells"]}
    lines = table.header(doc, "malloc workloads (issue 4)") + [
             f"Each cell is the median of {doc.get('reps', 3)} runs, each allocator in its own process",
             "(LD_PRELOAD; glibc runs without), the allocators taking turns in a rotating order. Time",
             "ratio columns: allockit over the peer (below 1: allockit faster).",
             "", "## Targets", "", "| target | measured | met |", "|---|---|---|"]
    t = {a: geomean([cells[(a, w)]["seconds"] for w in WORKLOADS]) for a in allocs}
    r = {a: geomean([cells[(a, w)]["peak_rss_kib"] for w in WORKLOADS]) for a in allocs}
    ak = "allockit"
    targets = [
        ("geomean time <= 0.85x mimalloc", t[ak] / t["mimalloc"], t[ak] / t["mimalloc"] <= 0.85),
        ("geomean time <= 0.7x glibc", t[ak] / t["glibc"], t[ak] / t["glibc"] <= 0.7),
        ("geomean peak RSS <= glibc", r[ak] / r["glibc"], r[ak] / r["glibc"] <= 1.0),
    ]
    for name, v, ok in targets:
        lines.append(f"| {name} | {v:.2f}x | {'yes' if ok else '**no**'} |")
    cu = cells[(ak, "large_calloc")]["calloc_us"]
    lines.append(f"| calloc(128 MiB) <= 10 us | {cu:.1f} us | {'yes' if cu <= 10 else '**no**'} |")
    worst = max(WORKLOADS, key=lambda w: cells[(ak, w)]["seconds"] /
                min(cells[(a, w)]["seconds"] for a in allocs if a != ak))
    wr = cells[(ak, worst)]["seconds"] / min(cells[(a, worst)]["seconds"] for a in allocs if a != ak)
    lines.append(f"| no workload > 1.25x the best peer | worst: {worst} {wr:.2f}x | "
                 f"{'yes' if wr <= 1.25 else '**no**'} |")
    lines += ["", "## Time (seconds)", "",
              "| workload | " + " | ".join(allocs) + " | ak/best peer |",
              "|---|" + "---|" * (len(allocs) + 1)]
    for w in WORKLOADS:
        best = min(cells[(a, w)]["seconds"] for a in allocs if a != ak)
        lines.append(f"| {w} | " + " | ".join(f"{cells[(a, w)]['seconds']:.3f}" for a in allocs) +
                     f" | {cells[(ak, w)]['seconds'] / best:.2f} |")
    lines.append("| **geomean** | " + " | ".join(f"{t[a]:.3f}" for a in allocs) + " | |")
    lines += ["", "## Peak RSS (MiB)", "", "| workload | " + " | ".join(allocs) + " |",
              "|---|" + "---|" * len(allocs)]
    for w in WORKLOADS:
        lines.append(f"| {w} | " + " | ".join(f"{cells[(a, w)]['peak_rss_kib'] / 1024:.1f}"
                                              for a in allocs) + " |")
    lines.append("| **geomean** | " + " | ".join(f"{r[a] / 1024:.1f}" for a in allocs) + " |")
    lines += ["", "calloc(128 MiB), mean per call (us): " +
              ", ".join(f"{a} {cells[(a, 'large_calloc')]['calloc_us']:.1f}" for a in allocs), ""]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--build", default="build")
    ap.add_argument("--out", default="bench/results")
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    binary = os.path.join(args.build, "bench", "malloc_workloads")
    allocators = benchlib.malloc_allocators(args.build)
    cells = []
    for w in WORKLOADS:
        cells += run_workload(binary, w, allocators, args.reps)
    doc = benchlib.result_doc(sys.argv, [], "make bench-malloc", allocators=allocators, cells=cells,
                               reps=args.reps)
    benchlib.write_results(args.out, "malloc", doc, render(doc))


if __name__ == "__main__":
    main()
