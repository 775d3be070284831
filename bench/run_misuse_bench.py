#!/usr/bin/env python3
"""Runs the misuse suites under each allocator, every case in its own process, and writes
bench/results/misuse.{json,md}:
- bench/misuse/misuse_cases: 30 bad pointers handed to free, realloc and malloc_usable_size. A
  case counts as detected when the allocator aborts the process (SIGABRT, its own report on
  stderr); a SIGSEGV is a crash, a clean exit a miss.
- bench/misuse/hardening_cases: the kinds of heap bug a hardening suite checks (overflows, use
  after free, zero-size access, sized-delete mismatches, bad pointers) and valid programs that
  must keep working. A misuse case counts when the allocator reports it (SIGABRT); an access
  case (the program itself touches memory it does not own) also counts when it faults, as a
  guard page or a sealed block makes it."""
import argparse
import os
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
import table  # noqa: E402


def run_case(binary, case, allocator):
    """`allocator`: (preload or None, extra environment)."""
    preload, extra_env = allocator
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if preload:
        env["LD_PRELOAD"] = preload
    env["MALLOC_CHECK_"] = "0"  # glibc's defaults, not its debugging mode (unless asked below)
    env.update(extra_env)
    return subprocess.run([binary, str(case)], env=env, capture_output=True, text=True, timeout=120)


def outcome(r):
    if r.returncode == -signal.SIGABRT:
        return "detected", (r.stderr.strip().splitlines() or [""])[-1][:120]
    if r.returncode < 0:
        return "crash", signal.Signals(-r.returncode).name
    return "missed", f"exit {r.returncode}"


def hardening_mark(kind, r):
    """abort / fault / - / pass / FAIL, and whether it counts (detected, or a valid pass)."""
    if kind == "valid":
        return ("pass", True) if r.returncode == 0 else ("FAIL", False)
    if r.returncode == -signal.SIGABRT:
        return "abort", True
    if r.returncode in (-signal.SIGSEGV, -signal.SIGBUS):
        return "fault", kind == "access"
    if r.returncode < 0:
        return signal.Signals(-r.returncode).name, False
    return ("-" if r.returncode == 0 else f"exit {r.returncode}"), False


def misuse_table(doc, binary, allocators):
    names = dict(line.split("\t", 1) for line in
                 subprocess.run([binary, "list"], capture_output=True, text=True, check=True).stdout.splitlines())
    cells = {n: {c: outcome(run_case(binary, c, lib)) for c in names} for n, lib in allocators.items()}
    doc["cases"] = names
    doc["cells"] = {n: {c: list(v) for c, v in d.items()} for n, d in cells.items()}
    mark = {"detected": "abort", "crash": "SEGV", "missed": "-"}
    lines = ["## Bad pointers (bench/misuse/misuse_cases.c)", "",
             "Each case runs in its own process under each allocator (LD_PRELOAD; glibc with none, "
             "MALLOC_CHECK_=0; glibc-check3: libc_malloc_debug.so with MALLOC_CHECK_=3). `abort`: the allocator stopped the program with its own report "
             "(detected); `SEGV`: it crashed; `-`: the misuse passed silently.", "",
             "| # | case | " + " | ".join(allocators) + " |", "|---|---|" + "---|" * len(allocators)]
    for c, name in names.items():
        lines.append(f"| {c} | {name} | " + " | ".join(mark[cells[n][c][0]] for n in allocators) + " |")
    lines.append("| | **detected** | " + " | ".join(
        f"**{sum(v[0] == 'detected' for v in cells[n].values())} / {len(names)}**" for n in allocators) + " |")
    return lines


def hardening_table(doc, binary, allocators):
    cases = [line.split("\t") for line in
             subprocess.run([binary, "list"], capture_output=True, text=True, check=True).stdout.splitlines()]
    cells = {n: {c[0]: hardening_mark(c[1], run_case(binary, c[0], lib)) for c in cases}
             for n, lib in allocators.items()}
    doc["hardening"] = {n: {c: list(v) for c, v in d.items()} for n, d in cells.items()}
    lines = ["## Hardening suite (bench/misuse/hardening_cases.cpp)", "",
             "The kinds of heap bug an allocator-hardening suite checks, modelled on the public "
             "description of such suites. `misuse`: a bad pointer or size handed to the allocator, "
             "detected by its report (`abort`); a `fault` there is a crash. `access`: the program "
             "itself reads or writes memory it does not own; an `abort` or a `fault` (a guard page, "
             "a sealed freed block) both detect it. `valid`: programs that must exit cleanly. "
             "\"Large\" blocks are 256 KiB, above glibc's first mmap threshold.", "",
             "| case | kind | what | " + " | ".join(allocators) + " |",
             "|---|---|---|" + "---|" * len(allocators)]
    for name, kind, what in cases:
        lines.append(f"| {name} | {kind} | {what} | " + " | ".join(cells[n][name][0] for n in allocators) + " |")
    bad = [c for c in cases if c[1] != "valid"]
    good = [c for c in cases if c[1] == "valid"]
    lines.append(f"| **detected** | | of {len(bad)} | " + " | ".join(
        f"**{sum(cells[n][c[0]][1] for c in bad)}**" for n in allocators) + " |")
    stopped = lambda mark: mark != "-" and not mark.startswith("exit")  # noqa: E731 (killed by a signal)
    lines.append(f"| stopped by any signal (a count that takes every crash for a detection) | | of {len(bad)} | " +
                 " | ".join(str(sum(stopped(cells[n][c[0]][0]) for c in bad)) for n in allocators) + " |")
    lines.append(f"| **valid programs passing** | | of {len(good)} | " + " | ".join(
        f"**{sum(cells[n][c[0]][1] for c in good)}**" for n in allocators) + " |")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--build", default="build")
    ap.add_argument("--out", default="bench/results")
    a = ap.parse_args()
    allocators = {n: (lib, {}) for n, lib in benchlib.malloc_allocators(a.build).items()}
    allocators.update(benchlib.hardened_variants(a.build))
    doc = benchlib.result_doc(sys.argv, [], "make bench-misuse", allocators=allocators)
    lines = table.header(doc, "Misuse detection (issues 4 and 11)")
    lines += misuse_table(doc, os.path.join(a.build, "bench", "misuse_cases"), allocators) + [""]
    lines += hardening_table(doc, os.path.join(a.build, "bench", "hardening_cases"), allocators)
    benchlib.write_results(a.out, "misuse", doc, "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
