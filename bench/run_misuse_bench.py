#!/usr/bin/env python3
"""Runs bench/misuse/misuse_cases (30 classic misuse cases) under each allocator in its own
process and writes bench/results/misuse.{json,md}: a case counts as detected when the allocator
aborts the process (SIGABRT, its own report on stderr); a SIGSEGV is a crash, a clean exit a miss."""
import argparse
import os
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
import table  # noqa: E402


def outcome(binary, case, preload):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if preload:
        env["LD_PRELOAD"] = preload
    env["MALLOC_CHECK_"] = "0"  # glibc's defaults, not its debugging mode
    r = subprocess.run([binary, str(case)], env=env, capture_output=True, text=True, timeout=60)
    if r.returncode == -signal.SIGABRT:
        return "detected", (r.stderr.strip().splitlines() or [""])[-1][:120]
    if r.returncode < 0:
        return "crash", signal.Signals(-r.returncode).name
    return "missed", f"exit {r.returncode}"


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--build", default="build")
    ap.add_argument("--out", default="bench/results")
    a = ap.parse_args()
    binary = os.path.join(a.build, "bench", "misuse_cases")
    names = dict(line.split("\t", 1) for line in
                 subprocess.run([binary, "list"], capture_output=True, text=True, check=True).stdout.splitlines())
    allocators = benchlib.malloc_allocators(a.build)
    cells = {name: {c: outcome(binary, c, lib) for c in names} for name, lib in allocators.items()}
    doc = benchlib.result_doc(sys.argv, [], "make bench-misuse", allocators=allocators, cases=names,
                              cells={n: {c: list(v) for c, v in d.items()} for n, d in cells.items()})
    mark = {"detected": "abort", "crash": "SEGV", "missed": "-"}
    lines = table.header(doc, "Misuse detection (issue 4)") + [
             "Each case runs in its own process under each allocator (LD_PRELOAD; glibc with none, "
             "MALLOC_CHECK_=0). `abort`: the allocator stopped the program with its own report "
             "(detected); `SEGV`: it crashed; `-`: the misuse passed silently.", "",
             "| # | case | " + " | ".join(allocators) + " |", "|---|---|" + "---|" * len(allocators)]
    for c, name in names.items():
        lines.append(f"| {c} | {name} | " + " | ".join(mark[cells[n][c][0]] for n in allocators) + " |")
    lines.append("| | **detected** | " + " | ".join(
        f"**{sum(v[0] == 'detected' for v in cells[n].values())} / {len(names)}**" for n in allocators) + " |")
    benchlib.write_results(a.out, "misuse", doc, "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
