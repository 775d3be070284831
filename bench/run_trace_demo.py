#!/usr/bin/env python3
"""`make demo`, part one: the trace lab's whole story on a real program that ships with Debian.
1. `allockit record` python3 (PYTHONMALLOC=malloc) running bench/trace/demo_workload.py;
2. `allockit compare` the journal against every allocator installed here, allockit included;
3. `allockit top` and `allockit advise` of the journal (its call sites, which want a pool or an
   arena, measured by a what-if replay; the advice lands beside the comparison);
4. `allockit report` -> OUT/report.html (and OUT/report.png, a screenshot, when Chromium is here);
   the table and the fidelity line are printed and kept in OUT/compare/compare.md."""
import argparse
import os
import shutil
import subprocess
import sys

import benchlib

HERE = os.path.dirname(os.path.abspath(__file__))


def run(cmd, **kw):
    print("+", " ".join(cmd), flush=True)
    return subprocess.run(cmd, check=True, **kw)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default="build")
    p.add_argument("--out", default="out/demo")
    a = p.parse_args()
    ak = os.path.join(os.path.abspath(a.build), "allockit")
    os.makedirs(a.out, exist_ok=True)
    python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else shutil.which("python3")
    journal = os.path.join(a.out, "python.akj")
    env = dict(os.environ, PYTHONMALLOC="malloc")
    run([ak, "record", "-o", journal, "--", python, os.path.join(HERE, "trace", "demo_workload.py")],
        env=env)
    run([ak, "stats", journal])
    results = os.path.join(a.out, "compare")
    if os.path.exists(results):
        shutil.rmtree(results)
    run([ak, "compare", journal, "--allocators", "all", "--repeat", "3", "--out", results])
    run([ak, "top", journal, "-n", "10"])
    run([ak, "advise", journal, "--out", results])
    report = os.path.join(a.out, "report.html")
    run([ak, "report", results, "-o", report])
    print(f"\nreport: {os.path.abspath(report)}")
    chromium = benchlib.headless_chromium()
    if chromium:  # what docs/report-demo.png shows
        shot = os.path.join(a.out, "report.png")
        subprocess.run(chromium + ["--window-size=1200,2600", "--virtual-time-budget=20000",
                                   f"--screenshot={os.path.abspath(shot)}", "file://" + os.path.abspath(report)],
                       check=False, capture_output=True, timeout=120)
        if os.path.exists(shot):
            print(f"screenshot: {os.path.abspath(shot)}")


if __name__ == "__main__":
    sys.exit(main())
