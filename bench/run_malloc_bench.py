#!/usr/bin/env python3
"""Runs bench/workloads under each allocator in its own process (LD_PRELOAD) and writes
bench/results/malloc.{json,md}: median wall time and peak RSS of 5 runs per cell, the ratio to
the best peer, geometric means (all, without each allocator's worst workload, within 10x of the
best) and issue 10's targets. --only runs a subset (for a quick look; not for the results; "python" names the python3 workload)."""
import argparse
import json
import math
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
import table  # noqa: E402

# The standard suite's models first (standard_suite.cpp), then the project's own workloads.
STANDARD = ["larson", "larson_sized", "xmalloc", "glibc_simple", "glibc_thread", "alloc_test1",
            "alloc_test2", "malloc_large", "cache_thrash", "cache_scratch", "mstress", "rptest",
            "mleak", "cfrac", "espresso", "sh6bench", "sh8bench"]
OWN = ["thread_churn", "mixed_lifetimes", "random_sizes", "large_blocks", "realloc_growth",
       "large_calloc"]
WORKLOADS = STANDARD + OWN


def run_json(args, preload, extra_env=None):
    """Runs a benchmark program under `preload` (glibc when None) and returns the JSON line it
    prints; stops the script with the program's error output when it fails."""
    env = dict(os.environ, **(extra_env or {}))
    env.pop("LD_PRELOAD", None)
    if preload:
        env["LD_PRELOAD"] = preload
    done = subprocess.run(args, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(args[1:])} under {preload or 'glibc'} failed ({done.returncode}):\n"
                 f"{done.stderr[-2000:]}")
    return json.loads(done.stdout)


def run_once(binary, workload, preload, extra_env=None, scale=None):
    return run_json([binary, workload] + ([str(scale)] if scale is not None else []), preload,
                    extra_env)


def middle(xs, key=None):
    """The median element of xs (the upper one of an even count), by `key`."""
    return sorted(xs, key=key)[len(xs) // 2]


def summarise(workload, runs):
    """The cell of one allocator and workload: median time (and that run's calloc time), median
    peak RSS, every run kept in round order (paired_ratio pairs them by round)."""
    mid = middle(runs, key=lambda r: r["seconds"])
    return {"workload": workload, "seconds": mid["seconds"],
            "peak_rss_kib": middle([r["peak_rss_kib"] for r in runs]),
            "calloc_us": mid["calloc_us"], "runs": runs}


def run_workload(binary, workload, allocators, reps, envs=None, scale=None, progress=True):
    """Runs every allocator once per round, in a rotating order, so drift on a shared machine
    hits all of them alike. `envs`: extra environment per allocator name; `scale`: the fraction
    of the workload's work (its default when None)."""
    runs = {n: [] for n in allocators}
    for rep, order in benchlib.rotations(allocators, reps):
        for n in order:
            if progress:
                print(f"+ {n} {workload} ({rep + 1}/{reps})", flush=True)
            runs[n].append(run_once(binary, workload, allocators[n], (envs or {}).get(n), scale))
    return [dict(summarise(workload, runs[n]), allocator=n) for n in allocators]


# Issue 11's python3 workload: the trace demo's request handler (3 threads, JSON, an LRU cache,
# cross-thread frees), 120,000 requests (about 3 s), in two modes: as python3 runs by default
# (objects up to 512 bytes from its own pymalloc arenas, the rest from malloc), and with every
# object from malloc (PYTHONMALLOC=malloc, the harshest case for an allocator).
HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_CMD = ["/usr/bin/python3", os.path.join(HERE, "trace", "demo_workload.py"), "120000"]
PYTHON_ROW = "python3 demo_workload.py"
PYTHON_MODES = {"as run (pymalloc)": {}, "PYTHONMALLOC=malloc": {"PYTHONMALLOC": "malloc"}}


def run_python(preload, mode_env, extra_env=None):
    """Wall and CPU seconds (user + system, from wait4: the child's alone) of one run."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONMALLOC"}
    env.update(mode_env, **(extra_env or {}))
    if preload:
        env["LD_PRELOAD"] = preload
    start = time.monotonic()
    proc = subprocess.Popen(PYTHON_CMD, env=env, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - start
    if status != 0:
        raise RuntimeError(f"{PYTHON_CMD} failed under {preload}: status {status}")
    return {"seconds": wall, "cpu_s": usage.ru_utime + usage.ru_stime}


def run_python_rows(runs, envs, reps):
    """The python3 workload in each mode under each base and hardened build, rotating: the median
    run of each, by mode."""
    names = ["glibc", "glibc-check3", "allockit", "allockit-secure"]
    out = {}
    for mode, mode_env in PYTHON_MODES.items():
        got = {n: [] for n in names if n in runs}
        for rep, order in benchlib.rotations(got, reps):
            for n in order:
                print(f"+ {n} {PYTHON_ROW}, {mode} ({rep + 1}/{reps})", flush=True)
                got[n].append(run_python(runs[n], mode_env, envs.get(n)))
        out[mode] = {n: dict(middle(rs, key=lambda r: r["seconds"]),
                             cpu_s=middle([r["cpu_s"] for r in rs]), runs=rs)
                     for n, rs in got.items()}
    return out


def paired_ratios(v, b, key="seconds"):
    """v's wall time (or another figure, `key`) over b's in each round."""
    return [x[key] / y[key] for x, y in zip(v["runs"], b["runs"])]


def paired_ratio(v, b):
    """The median over rounds of v's wall time over b's in the same round."""
    return middle(paired_ratios(v, b))


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def summary(cells, allocs, workloads):
    """Per allocator: geomean time over every workload, without its own worst one (worst against
    the best allocator on that workload), and over the workloads where every allocator finishes
    within 10x of the best; geomean peak RSS, and without its own worst one (against the leanest).
    So no single pathology decides the ranking."""
    best = {w: min(cells[(a, w)]["seconds"] for a in allocs) for w in workloads}
    leanest = {w: min(cells[(a, w)]["peak_rss_kib"] for a in allocs) for w in workloads}
    fair = [w for w in workloads if all(cells[(a, w)]["seconds"] <= 10 * best[w] for a in allocs)]
    out = {}
    for a in allocs:
        times = {w: cells[(a, w)]["seconds"] for w in workloads}
        worst = max(workloads, key=lambda w: times[w] / best[w])
        rss = {w: cells[(a, w)]["peak_rss_kib"] for w in workloads}
        rss_worst = max(workloads, key=lambda w: rss[w] / leanest[w])
        out[a] = {"all": geomean(times.values()),
                  "worst": worst,
                  "without_worst": geomean([times[w] for w in workloads if w != worst]),
                  "fair": geomean([times[w] for w in fair]),
                  "rss": geomean(rss.values()),
                  "rss_worst": rss_worst,
                  "rss_without_worst": geomean([rss[w] for w in workloads if w != rss_worst])}
    return out, fair


def hardened_section(doc, cells):
    """Each hardened build against its base, per workload and as geomeans with and without the
    worst row; issue 11's targets for the secure build."""
    pairs = [(v, base) for v, base in (("allockit-secure", "allockit"), ("glibc-check3", "glibc"))
             if v in doc.get("variants", {})]
    if not pairs:
        return []
    lines = ["", "## Hardened builds (issue 11)", "",
             "Each hardened build against its base, in the same rounds: time and peak RSS ratios. "
             "glibc-check3 is glibc with MALLOC_CHECK_=3 (libc_malloc_debug.so); Debian's "
             "mimalloc ships no secure build.", "",
             "| workload | " + " | ".join(f"{v}/{b} time | {v}/{b} RSS" for v, b in pairs) + " |",
             "|---|" + "---|---|" * len(pairs)]
    ratio = {(v, k, w): cells[(v, w)][k] / cells[(b, w)][k]
             for v, b in pairs for k in ("seconds", "peak_rss_kib") for w in WORKLOADS}
    for w in WORKLOADS:
        lines.append(f"| {w} | " + " | ".join(f"{ratio[(v, 'seconds', w)]:.2f} | "
                                              f"{ratio[(v, 'peak_rss_kib', w)]:.2f}" for v, _ in pairs) + " |")
    geo = {}
    for v, _ in pairs:
        for k in ("seconds", "peak_rss_kib"):
            xs = {w: ratio[(v, k, w)] for w in WORKLOADS}
            worst = max(xs, key=xs.get)
            geo[(v, k)] = (geomean(xs.values()), worst, geomean([x for w, x in xs.items() if w != worst]))
    lines += ["", "| build | time geomean | without its worst (which) | peak RSS geomean | without its worst (which) |",
              "|---|---|---|---|---|"]
    for v, b in pairs:
        t, r = geo[(v, "seconds")], geo[(v, "peak_rss_kib")]
        lines.append(f"| {v} / {b} | {t[0]:.2f}x | {t[2]:.2f}x ({t[1]}) | {r[0]:.2f}x | {r[2]:.2f}x ({r[1]}) |")
    modes = doc.get("python", {})
    if modes:
        lines += ["", f"{PYTHON_ROW}: `{' '.join(os.path.basename(c) for c in PYTHON_CMD)}`, as python3 runs "
                  "by default (objects up to 512 bytes from its pymalloc arenas) and with `PYTHONMALLOC=malloc` "
                  f"(every object from malloc); median of {doc.get('reps', 5)} runs, rotating; wall time, and "
                  "CPU time (user and system). Its three threads take turns at the GIL on two shared cores, "
                  "so a run swings by up to 20% (as run) with the scheduling: `paired` is the median of each "
                  "round's own ratio (both builds ran in that round), which the targets use.", "",
                  "| mode | build | wall (s) | base wall (s) | wall ratio | paired | CPU ratio |",
                  "|---|---|---|---|---|---|---|"]
        for mode, py in modes.items():
            for v, b in [(v, b) for v, b in pairs if v in py and b in py]:
                lines.append(f"| {mode} | {v} / {b} | {py[v]['seconds']:.3f} | {py[b]['seconds']:.3f} | "
                             f"{py[v]['seconds'] / py[b]['seconds']:.2f}x | {paired_ratio(py[v], py[b]):.2f}x | "
                             f"{py[v]['cpu_s'] / py[b]['cpu_s']:.2f}x |")
    if ("allockit-secure", "seconds") in geo:
        t, r = geo[("allockit-secure", "seconds")], geo[("allockit-secure", "peak_rss_kib")]
        rows = [("secure: geomean time <= 1.10x the default build", f"{t[0]:.2f}x", t[0] <= 1.10),
                ("secure: peak RSS geomean <= 1.25x the default build", f"{r[0]:.2f}x", r[0] <= 1.25)]
        for mode, py in modes.items():
            if "allockit-secure" in py and "allockit" in py:
                x = paired_ratio(py["allockit-secure"], py["allockit"])
                rows.append((f"secure: the python3 workload, {mode}, <= 1.15x the default build",
                             f"{x:.2f}x", x <= 1.15))
        lines += [""] + table.targets_table(rows)
    return lines


def render(doc, rendered_by=None):
    """malloc.md from a result doc; `rendered_by`: the command that wrote it again from a saved
    doc, said under the header."""
    allocs = list(doc["allocators"])
    cells = {(c["allocator"], c["workload"]): c for c in doc["cells"]}
    ak = "allockit"
    peers = [a for a in allocs if a != ak]
    sm, fair = summary(cells, allocs, WORKLOADS)
    lines = table.header(doc, "malloc workloads (issue 10)") + [
        f"Each cell is the median of {doc.get('reps', 5)} runs, each allocator in its own process",
        "(LD_PRELOAD; glibc runs without), the allocators taking turns in a rotating order. The",
        "standard suite's models (bench/workloads/standard_suite.cpp) come first, then the",
        "project's own workloads.", ""]
    if rendered_by:
        lines[-1:-1] = ["", f"Tables written again from the saved runs by `{rendered_by}`: the "
                        "measurements are those of the command above."]

    def best_peer(key):
        return min(sm[a][key] for a in peers)

    def best_of(w):
        return min(peers, key=lambda a: cells[(a, w)]["seconds"])

    def behind(w):
        return cells[(ak, w)]["seconds"] / cells[(best_of(w), w)]["seconds"]

    def behind_paired(w):
        return paired_ratio(cells[(ak, w)], cells[(best_of(w), w)])

    def round_range(w):
        rs = paired_ratios(cells[(ak, w)], cells[(best_of(w), w)])
        return min(rs), max(rs)

    # Rows behind in every round tell a gap from a row that crossed the bar with the host's load.
    behind_always = [w for w in WORKLOADS if round_range(w)[0] > 1.10]

    worst_w = max(WORKLOADS, key=behind)
    worst_paired = max(WORKLOADS, key=behind_paired)
    bp_thread = behind("glibc_thread")
    targets = [
        ("geomean time <= 0.85x the best peer's", f"{sm[ak]['all'] / best_peer('all'):.2f}x",
         sm[ak]["all"] <= 0.85 * best_peer("all")),
        ("... each without its worst workload", f"{sm[ak]['without_worst'] / best_peer('without_worst'):.2f}x",
         sm[ak]["without_worst"] <= 0.85 * best_peer("without_worst")),
        ("no workload > 1.10x the best peer",
         f"worst: {worst_w} {behind(worst_w):.2f}x (paired: {worst_paired} "
         f"{behind_paired(worst_paired):.2f}x); past 1.10x in every round: "
         f"{', '.join(behind_always) or 'none'}",
         behind(worst_w) <= 1.10),
        ("malloc_large no slower than glibc",
         f"{cells[(ak, 'malloc_large')]['seconds'] / cells[('glibc', 'malloc_large')]['seconds']:.2f}x",
         cells[(ak, "malloc_large")]["seconds"] <= cells[("glibc", "malloc_large")]["seconds"]),
        ("larson at least as fast as tcmalloc",
         f"{cells[(ak, 'larson')]['seconds'] / cells[('tcmalloc', 'larson')]['seconds']:.2f}x",
         cells[(ak, "larson")]["seconds"] <= cells[("tcmalloc", "larson")]["seconds"]),
        ("glibc_thread within 1.05x the best peer", f"{bp_thread:.2f}x", bp_thread <= 1.05),
        ("peak RSS geomean <= 0.94x glibc", f"{sm[ak]['rss'] / sm['glibc']['rss']:.2f}x",
         sm[ak]["rss"] <= 0.94 * sm["glibc"]["rss"]),
    ]
    lines += table.targets_table(targets)
    lines += ["", "## Geomeans", "",
              f"Within 10x: the {len(fair)} workloads where every allocator finishes within 10x of "
              "the best (" + ", ".join(w for w in WORKLOADS if w not in fair) + " left out).", "",
              "Peak RSS without its worst: each allocator's geomean without the workload where it "
              "holds the most against the leanest allocator (not a target; the target counts every "
              "workload).", "",
              "| allocator | time, all | without its worst | its worst | within 10x | peak RSS (MiB) "
              "| peak RSS without its worst | its worst (RSS) |",
              "|---|---|---|---|---|---|---|---|"]
    for a in allocs:
        lines.append(f"| {a} | {sm[a]['all']:.3f} | {sm[a]['without_worst']:.3f} | {sm[a]['worst']} | "
                     f"{sm[a]['fair']:.3f} | {sm[a]['rss'] / 1024:.1f} | "
                     f"{sm[a]['rss_without_worst'] / 1024:.1f} "
                     f"({sm[a]['rss_without_worst'] / sm['glibc']['rss_without_worst']:.2f}x glibc's) | "
                     f"{sm[a]['rss_worst']} |")
    lines += ["", "## Time (seconds)", "",
              "`ak/best peer`: of the medians; `paired`: the median over rounds of allockit's time over "
              "that peer's in the same round (the allocators take turns within a round, so load that "
              "drifts between rounds cancels); `rounds`: the lowest and highest of those per-round "
              "ratios, how far this host moves one cell.", "",
              "| workload | " + " | ".join(allocs) + " | ak/best peer | paired | rounds |",
              "|---|" + "---|" * (len(allocs) + 3)]
    for w in WORKLOADS:
        lo, hi = round_range(w)
        lines.append(f"| {w} | " + " | ".join(f"{cells[(a, w)]['seconds']:.3f}" for a in allocs) +
                     f" | {behind(w):.2f} | {behind_paired(w):.2f} | {lo:.2f}-{hi:.2f} |")
    lines += ["", "## Peak RSS (MiB)", "", "| workload | " + " | ".join(allocs) + " |",
              "|---|" + "---|" * len(allocs)]
    for w in WORKLOADS:
        lines.append(f"| {w} | " + " | ".join(f"{cells[(a, w)]['peak_rss_kib'] / 1024:.1f}"
                                              for a in allocs) + " |")
    lines += ["", "large_calloc: the calloc call alone (8..128 MiB), mean per call (us): " +
              ", ".join(f"{a} {cells[(a, 'large_calloc')]['calloc_us']:.1f}" for a in allocs)]
    lines += hardened_section(doc, cells) + [""]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--build", default="build")
    ap.add_argument("--out", default="bench/results")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--only", nargs="*", help="workloads to run (the table needs them all)")
    ap.add_argument("--render", metavar="JSON",
                    help="write malloc.md again from a malloc.json this script wrote (its runs and "
                    "command kept), measuring nothing")
    args = ap.parse_args()
    if args.render:
        with open(args.render) as f:
            doc = json.load(f)
        cmd = "python3 bench/run_malloc_bench.py " + " ".join(sys.argv[1:])
        benchlib.write_results(args.out, "malloc", doc, render(doc, rendered_by=cmd))
        return
    binary = os.path.join(args.build, "bench", "malloc_workloads")
    allocators = benchlib.malloc_allocators(args.build)
    variants = benchlib.hardened_variants(args.build)
    runs = dict(allocators, **{n: lib for n, (lib, _) in variants.items()})
    envs = {n: env for n, (_, env) in variants.items()}
    cells = []
    for w in [w for w in (args.only or WORKLOADS) if w != "python"]:
        cells += run_workload(binary, w, runs, args.reps, envs)
    python = run_python_rows(runs, envs, args.reps) if not args.only or "python" in args.only else {}
    if args.only:
        for mode, py in python.items():
            for n, c in py.items():
                print(f"{PYTHON_ROW}, {mode:20} {n:16} {c['seconds']:8.3f} s  CPU {c['cpu_s']:.3f} s")
        for c in cells:
            print(f"{c['workload']:16} {c['allocator']:10} {c['seconds']:8.3f} s "
                  f"{c['peak_rss_kib'] / 1024:7.1f} MiB")
        return
    doc = benchlib.result_doc(sys.argv, [], "make bench-malloc", allocators=allocators,
                               variants=variants, cells=cells, python=python, reps=args.reps)
    benchlib.write_results(args.out, "malloc", doc, render(doc))


if __name__ == "__main__":
    main()
