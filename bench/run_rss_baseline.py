#!/usr/bin/env python3
"""Issue 10's memory target, "peak RSS geomean no higher than today's", on today's suite: the
liballockit of the commit the issue started from (BASELINE, built here in a git worktree under
the build folder) against the current one, with glibc for scale, on every bench/workloads
workload. Each workload runs once per allocator per round, in a rotating order, 5 rounds; the
cell is the median. Written to bench/results/rss_baseline.{json,md}.

The issue quoted 0.94x glibc from its day's suite: eight workloads of 10 to 100 ms, since
replaced by models of the field's suites running for seconds. On today's suite that figure
does not exist; the baseline build measured beside the current one does."""
import argparse
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
from run_malloc_bench import WORKLOADS, geomean, middle, run_once  # noqa: E402

# The last commit before issue 10's work (medium classes, the large cache, per-thread bins).
BASELINE = "007516d"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def build_baseline(build, commit):
    """liballockit.so of `commit`, built once in a worktree under `build`; its path."""
    src = os.path.abspath(os.path.join(build, f"baseline-{commit}"))
    lib = os.path.join(src, "build", "liballockit.so")
    if os.path.exists(lib):
        return lib
    if not os.path.isdir(src):
        subprocess.run(["git", "-C", ROOT, "worktree", "add", "--detach", "-f", src, commit],
                       check=True)
    subprocess.run(["cmake", "-S", src, "-B", os.path.join(src, "build"), "-G", "Ninja",
                    "-DCMAKE_BUILD_TYPE=RelWithDebInfo"], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["ninja", "-C", os.path.join(src, "build"), "liballockit.so"], check=True,
                   stdout=subprocess.DEVNULL)
    return lib


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--build", default="build")
    ap.add_argument("--out", default="bench/results")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--baseline", default=BASELINE)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    binary = os.path.join(args.build, "bench", "malloc_workloads")
    allocators = {"glibc": None, f"allockit {args.baseline}": build_baseline(args.build, args.baseline),
                  "allockit": os.path.abspath(os.path.join(args.build, "liballockit.so"))}
    names = list(allocators)
    start = time.monotonic()
    cells = {}
    for w in WORKLOADS:
        runs = {n: [] for n in names}
        for rep, order in benchlib.rotations(names, args.rounds):
            for n in order:
                print(f"+ {n} {w} ({rep + 1}/{args.rounds})", flush=True)
                runs[n].append(run_once(binary, w, allocators[n]))
        for n in names:
            cells[(n, w)] = {"peak_rss_kib": middle([r["peak_rss_kib"] for r in runs[n]]),
                             "seconds": middle([r["seconds"] for r in runs[n]])}

    base, cur = names[1], names[2]
    ratio = {w: cells[(cur, w)]["peak_rss_kib"] / cells[(base, w)]["peak_rss_kib"]
             for w in WORKLOADS}
    worst = max(WORKLOADS, key=lambda w: ratio[w])
    geo = {n: {k: geomean([cells[(n, w)][k] for w in WORKLOADS]) for k in ("peak_rss_kib", "seconds")}
           for n in names}
    geo_rss = geo[cur]["peak_rss_kib"] / geo[base]["peak_rss_kib"]
    without = geomean([ratio[w] for w in WORKLOADS if w != worst])
    lines = [
        "# Peak RSS against the allockit issue 10 started from",
        "",
        f"Command: `make bench-rss-baseline  (= python3 {' '.join(sys.argv)})`  ",
        f"Machine: {benchlib.machine()}  ",
        f"Baseline: liballockit at {args.baseline}, built in a worktree of this repository. "
        f"Median of {args.rounds} rounds, the allocators taking turns in a rotating order.",
        "",
        "| target | measured | met |",
        "|---|---|---|",
        f"| peak RSS geomean no higher than at {args.baseline} | {geo_rss:.2f}x "
        f"({without:.2f}x without {worst}) | {'yes' if geo_rss <= 1 else '**no**'} |",
        "",
        "| workload | glibc MiB | " + f"{base} MiB | {cur} MiB | RSS now/then | "
        f"time {base} s | time {cur} s | time now/then |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for w in WORKLOADS:
        g, b, c = (cells[(n, w)] for n in names)
        lines.append(f"| {w} | {g['peak_rss_kib'] / 1024:.1f} | {b['peak_rss_kib'] / 1024:.1f} | "
                     f"{c['peak_rss_kib'] / 1024:.1f} | {ratio[w]:.2f} | {b['seconds']:.3f} | "
                     f"{c['seconds']:.3f} | {c['seconds'] / b['seconds']:.2f} |")
    lines.append(
        f"| **geomean** | {geo['glibc']['peak_rss_kib'] / 1024:.1f} | "
        f"{geo[base]['peak_rss_kib'] / 1024:.1f} | {geo[cur]['peak_rss_kib'] / 1024:.1f} | "
        f"{geo_rss:.2f} | {geo[base]['seconds']:.3f} | {geo[cur]['seconds']:.3f} | "
        f"{geo[cur]['seconds'] / geo[base]['seconds']:.2f} |")
    lines += ["", f"Against glibc: {base} {geo[base]['peak_rss_kib'] / geo['glibc']['peak_rss_kib']:.2f}x, "
              f"{cur} {geo[cur]['peak_rss_kib'] / geo['glibc']['peak_rss_kib']:.2f}x.", ""]
    doc = benchlib.result_doc(sys.argv, {"total_s": time.monotonic() - start},
                              make_target="make bench-rss-baseline", baseline=args.baseline,
                              cells=[{"allocator": n, "workload": w, **cells[(n, w)]}
                                     for n in names for w in WORKLOADS])
    benchlib.write_results(args.out, "rss_baseline", doc, "\n".join(lines))


if __name__ == "__main__":
    main()
