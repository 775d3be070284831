#!/usr/bin/env python3
"""The soak runner (bench/soak_workloads.py) as `make soak` uses it: runs that pass are counted
and their directories removed; a run that crashes stops it with exit status 1, naming the
workload and the signal, and its directory is kept with the core named in it.

  soak_test.py SOAK_SCRIPT BUILD_DIR ALLOCKIT_PRELOAD CRASHING_PRELOAD
"""
import glob
import os
import subprocess
import sys
import tempfile


def soak(script, build, library, keep, workloads):
    return subprocess.run([sys.executable, script, "--build", build, "--library", library,
                           "--rounds", "2", "--scale", "0.02", "--workloads", workloads,
                           "--keep", keep], capture_output=True, text=True)


def main():
    script, build, allockit, crashing = sys.argv[1:5]
    failures = []
    with tempfile.TemporaryDirectory() as keep:
        ok = soak(script, build, allockit, keep, "sh6bench,larson")
        if ok.returncode != 0 or "4 runs passed" not in ok.stdout:
            failures.append(f"passing runs: {ok.returncode}\n{ok.stdout}{ok.stderr}")
        if glob.glob(os.path.join(keep, "soak-*")):
            failures.append("a passing run's directory was kept")
        bad = soak(script, build, crashing, keep, "xmalloc")
        if bad.returncode != 1:
            failures.append(f"a crashing run: exit status {bad.returncode}, expected 1")
        for want in ("xmalloc", "signal SIGSEGV", "run 1 (round 1) failed"):
            if want not in bad.stderr:
                failures.append(f"the report lacks {want!r}:\n{bad.stderr}")
        if len(glob.glob(os.path.join(keep, "soak-xmalloc-*"))) != 1:
            failures.append("the crashed run's directory was not kept")
        # The core is named where it is kept (or as not written, when core_pattern sends cores
        # elsewhere).
        core = [ln for ln in bad.stderr.splitlines() if ln.startswith("core: ")]
        if not core or not (core[0].startswith("core: none written") or
                            core[0].startswith("core: " + os.path.join(keep, "soak-xmalloc-"))):
            failures.append(f"the core is not named in the kept directory: {core}")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
