#!/usr/bin/env python3
"""Runs the standard suite's churning workloads again and again under one preloaded allocator
and stops at the first run that fails, reporting the workload, the run, how it ended (exit
status or signal), the end of its stderr and where its core file is. A bug that shows once in
hundreds of runs (it depends on addresses or timing) needs this many runs to be seen, and a
core to be found: each run gets a directory of its own with core dumps allowed, kept only when
the run fails.

  python3 bench/soak_workloads.py --build build --rounds 20 [--minutes 30] [--library L]
"""
import argparse
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

# Workloads with long runs of frees, cross-thread frees and bins swinging between empty and
# full: where the allocator's lists and counts change most often.
CHURN = ["sh6bench", "sh8bench", "larson", "xmalloc", "mstress", "rptest", "glibc_thread",
         "alloc_test2", "thread_churn", "cache_scratch"]


def allow_cores():
    resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))


def how_it_ended(rc):
    if rc < 0:
        return f"signal {signal.Signals(-rc).name}"
    return f"exit status {rc}"


def run(binary, workload, scale, library, where):
    """One run in directory `where`. Returns None when it passed, else its failure report."""
    env = dict(os.environ, LD_PRELOAD=library)
    done = subprocess.run([binary, workload, str(scale)], env=env, cwd=where, capture_output=True,
                          text=True, preexec_fn=allow_cores)
    if done.returncode == 0:
        return None
    cores = [f for f in os.listdir(where) if f.startswith("core")]
    core = os.path.join(where, cores[0]) if cores else "none written (see core_pattern)"
    return (f"{workload} (scale {scale}) under {library} failed: {how_it_ended(done.returncode)}\n"
            f"core: {core}\nstderr (end):\n{done.stderr[-2000:]}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--library", help="the allocator to preload (default: the build's "
                    "liballockit.so)")
    ap.add_argument("--rounds", type=int, default=20, help="runs of each workload")
    ap.add_argument("--minutes", type=float, default=0, help="stop after this long (0: never)")
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--workloads", default=",".join(CHURN))
    ap.add_argument("--keep", default=".", help="where a failed run's directory is kept")
    args = ap.parse_args()
    binary = os.path.abspath(os.path.join(args.build, "bench", "malloc_workloads"))
    library = os.path.abspath(args.library or benchlib.malloc_allocators(args.build)["allockit"])
    for path in (binary, library):
        if not os.path.exists(path):
            sys.exit(f"soak: {path} not found (build first)")
    workloads = [w for w in args.workloads.split(",") if w]
    deadline = time.monotonic() + args.minutes * 60 if args.minutes > 0 else None
    runs = 0
    for rnd in range(1, args.rounds + 1):
        for w in workloads:
            if deadline is not None and time.monotonic() > deadline:
                print(f"soak: {runs} runs passed (time bound reached in round {rnd})")
                return 0
            where = tempfile.mkdtemp(prefix=f"soak-{w}-")
            failure = run(binary, w, args.scale, library, where)
            if failure is not None:
                kept = os.path.join(os.path.abspath(args.keep), os.path.basename(where))
                shutil.move(where, kept)
                failure = failure.replace(where, kept)  # the core's path, where it is kept
                print(f"soak: run {runs + 1} (round {rnd}) failed; its directory: {kept}\n"
                      f"{failure}", file=sys.stderr)
                return 1
            shutil.rmtree(where)
            runs += 1
    print(f"soak: {runs} runs passed ({args.rounds} rounds of {len(workloads)} workloads)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
