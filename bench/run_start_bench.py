#!/usr/bin/env python3
"""Process-start cost under each allocator (issue 14), written to bench/results/start.{json,md}:
1. one short program (`git --version`) started 500 times per allocator by bench/start/spawn_loop,
   in rounds of 100 with the allocators taking turns in a rotating order; the cell is the median
   of the rounds' mean milliseconds per process;
2. a shell script that starts 2,000 short processes (bench/start/short_processes.sh), the whole
   script preloaded, 5 rounds, median wall time.
"glibc" runs without LD_PRELOAD; "empty .so" preloads an empty library: the floor of any preload."""
import argparse
import os
import resource
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
import table  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAM = ["git", "--version"]


def spawn_rounds(spawn_loop, allocators, rounds, runs):
    per = {n: [] for n in allocators}
    for r, order in benchlib.rotations(allocators, rounds):
        for n in order:
            out = subprocess.run([spawn_loop, str(runs), allocators[n] or "-"] + PROGRAM,
                                 check=True, capture_output=True, text=True).stdout
            per[n].append(float(out) / 1000)
            print(f"+ {n} round {r + 1}: {per[n][-1]:.3f} ms/process", flush=True)
    return per


def children_cpu_s():
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def script_rounds(allocators, rounds):
    """Per allocator: the script's wall times and CPU times (user + system of every process it
    started; less disturbed by other load on a shared machine than wall time)."""
    script = os.path.join(HERE, "start", "short_processes.sh")
    wall = {n: [] for n in allocators}
    cpu = {n: [] for n in allocators}
    for r, order in benchlib.rotations(allocators, rounds):
        for n in order:
            env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
            if allocators[n]:
                env["LD_PRELOAD"] = allocators[n]
            c, t = children_cpu_s(), time.perf_counter()
            out = subprocess.run(["sh", script], env=env, check=True, capture_output=True,
                                 text=True).stdout
            wall[n].append(time.perf_counter() - t)
            cpu[n].append(children_cpu_s() - c)
            if out.strip() != "3000":
                raise SystemExit(f"{n}: the script printed {out!r}, not 3000")
            print(f"+ {n} script round {r + 1}: {wall[n][-1]:.2f} s, CPU {cpu[n][-1]:.2f} s",
                  flush=True)
    return wall, cpu


def render(doc):
    start, script = doc["start_ms"], doc["script_s"]
    med = {n: statistics.median(v) for n, v in start.items()}
    smed = {n: statistics.median(v) for n, v in script.items()}
    cmed = {n: statistics.median(v) for n, v in doc["script_cpu_s"].items()}
    base, sbase = med["glibc"], smed["glibc"]
    ak = "allockit"
    peers = [n for n in start if n not in ("glibc", "empty .so", ak)]
    lines = table.header(doc, "process start (issue 14)") + [
        f"`{' '.join(PROGRAM)}` started {doc['runs'] * doc['rounds']} times per allocator "
        f"(rounds of {doc['runs']}, allocators rotating); cell: median over rounds of the mean per",
        "process. The script: bench/start/short_processes.sh (2,000 short processes), whole script",
        f"preloaded, median of {doc['script_rounds']} rounds: wall time, and CPU time (user and "
        "system time of",
        "all its processes, which other load on the machine disturbs less).", ""]
    targets = [
        ("process start <= glibc + 0.2 ms", f"{med[ak] - base:+.3f} ms", med[ak] - base <= 0.2),
        ("2,000-process script <= 1.10x glibc", f"{smed[ak] / sbase:.3f}x",
         smed[ak] / sbase <= 1.10),
        ("script faster than under every peer",
         ", ".join(f"{smed[ak] / smed[p]:.3f}x {p}" for p in peers),
         all(smed[ak] < smed[p] for p in peers)),
    ]
    lines += table.targets_table(targets)
    lines += ["", "| preload | ms per process | above glibc | rounds (ms) | script (s) | script / glibc "
              "| script CPU (s) | CPU / glibc |", "|---|---|---|---|---|---|---|---|"]
    for n in start:
        lines.append(f"| {n} | {med[n]:.3f} | {med[n] - base:+.3f} | "
                     + ", ".join(f"{x:.3f}" for x in start[n])
                     + f" | {smed[n]:.2f} | {smed[n] / sbase:.3f}"
                     + f" | {cmed[n]:.2f} | {cmed[n] / cmed['glibc']:.3f} |")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--build", default="build")
    ap.add_argument("--out", default="bench/results")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--script-rounds", type=int, default=9)
    args = ap.parse_args()
    allocators = {"glibc": None,
                  "empty .so": os.path.abspath(os.path.join(args.build, "libak_empty_preload.so"))}
    allocators.update({k: v for k, v in benchlib.malloc_allocators(args.build).items() if v})
    spawn_loop = os.path.join(args.build, "bench", "spawn_loop")
    doc = benchlib.result_doc(sys.argv, [], "make bench-malloc", allocators=allocators,
                              rounds=args.rounds, runs=args.runs, script_rounds=args.script_rounds,
                              program=PROGRAM)
    doc["start_ms"] = spawn_rounds(spawn_loop, allocators, args.rounds, args.runs)
    doc["script_s"], doc["script_cpu_s"] = script_rounds(allocators, args.script_rounds)
    benchlib.write_results(args.out, "start", doc, render(doc))


if __name__ == "__main__":
    main()
