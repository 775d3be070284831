#!/usr/bin/env python3
"""Runs the pool benchmarks side by side in one run and writes bench/results/pools.{json,md}.

The glibc process runs every contender; processes started with LD_PRELOAD re-run the rows backed
by malloc (new_delete, std_allocator) under jemalloc, mimalloc and tcmalloc. The JSON keeps every
raw result with the command, machine, build type and versions; the markdown is derived from it.
"""
import argparse
import datetime
import json
import os
import platform
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pool_table import render_markdown  # noqa: E402

LIBDIR = "/usr/lib/x86_64-linux-gnu"
PRELOADS = {
    "jemalloc": (f"{LIBDIR}/libjemalloc.so.2", "libjemalloc2"),
    "mimalloc": (f"{LIBDIR}/libmimalloc.so.2", "libmimalloc2.0"),
    "tcmalloc": (f"{LIBDIR}/libtcmalloc_minimal.so.4", "libgoogle-perftools4"),
}
MALLOC_ROWS = "/(new_delete|std_allocator)(/|$)"
PACKAGES = ["libc6", "libboost-dev", "libloki-dev", "libbenchmark-dev", "g++",
            "libjemalloc2", "libmimalloc2.0", "libtcmalloc-minimal4"]


def pkg_version(name):
    r = subprocess.run(["dpkg-query", "-W", "-f=${Version}", name], capture_output=True, text=True)
    return r.stdout.strip() or "not installed"


def machine():
    cpu = "unknown"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"host": platform.node(), "kernel": platform.release(), "cpu": cpu,
            "cores": os.cpu_count(), "date": datetime.datetime.now().isoformat(timespec="seconds")}


def run_gbench(binary, extra_env, filt, out_path):
    env = dict(os.environ, **extra_env)
    cmd = [binary, f"--benchmark_filter={filt}", "--benchmark_format=json",
           f"--benchmark_out={out_path}", "--benchmark_out_format=json",
           "--benchmark_repetitions=3", "--benchmark_report_aggregates_only=true"]
    print("+", " ".join(f"{k}={v}" for k, v in extra_env.items()), " ".join(cmd), flush=True)
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
    with open(out_path) as f:
        return json.load(f)


def median_rows(doc, allocator):
    """Median aggregate of each benchmark, tagged with the allocator the process ran under."""
    rows = []
    for b in doc["benchmarks"]:
        if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
            continue
        name = b.get("run_name", b["name"]).split("/iterations:")[0].split("/repeats:")[0]
        name = name.split("/manual_time")[0]
        parts = name.split("/")
        if parts[-1].isdigit() and parts[0] in ("list_10M", "umap_string_10M", "map_1M"):
            parts = parts[:-1]  # drop the element-count argument
        contender = parts[1] if allocator == "glibc" else f"{parts[1]}@{allocator}"
        group = "/".join([parts[0]] + parts[2:])
        row = {"group": group, "contender": contender, "time_ns": b["real_time"] * {
            "ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}[b["time_unit"]]}
        for k in ("insert_ms", "iterate_ms", "clear_ms", "create_s"):
            if k in b:
                row[k] = b[k]
        rows.append(row)
    return rows


def rss_rows(binary, sizes):
    rows = []
    runs = [("std_allocator", None), ("ak_pool_allocator", None), ("pmr_unsynchronized_pool", None),
            ("boost_fast_pool_allocator", None)] + [("std_allocator", a) for a in PRELOADS]
    for n in sizes:
        for family, alloc in runs:
            if n > 10_000_000 and family == "boost_fast_pool_allocator":
                continue  # its per-node cost is the same at any size; saves a minute
            env = dict(os.environ)
            if alloc:
                env["LD_PRELOAD"] = PRELOADS[alloc][0]
            cmd = [binary, f"--rss-list={n}", f"--family={family}"]
            print("+", f"LD_PRELOAD={env['LD_PRELOAD']}" if alloc else "", " ".join(cmd), flush=True)
            out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
            r = json.loads(out)
            rows.append({"elements": n, "contender": family + (f"@{alloc}" if alloc else ""),
                         "rss_bytes_per_node": r["rss_bytes_per_node"]})
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--build", default="build")
    ap.add_argument("--out", default="bench/results")
    ap.add_argument("--filter", default=".", help="Google Benchmark filter for the glibc run")
    ap.add_argument("--rss-sizes", default="10000000,100000000")
    args = ap.parse_args()
    binary = os.path.join(args.build, "bench", "pool_bench")
    os.makedirs(args.out, exist_ok=True)
    tmp = os.path.join(args.out, ".raw")
    os.makedirs(tmp, exist_ok=True)

    rows = median_rows(run_gbench(binary, {}, args.filter, f"{tmp}/glibc.json"), "glibc")
    for name, (lib, _) in PRELOADS.items():
        if not os.path.exists(lib):
            print(f"skipping {name}: {lib} not installed", flush=True)
            continue
        doc = run_gbench(binary, {"LD_PRELOAD": lib}, MALLOC_ROWS, f"{tmp}/{name}.json")
        rows += median_rows(doc, name)
    sizes = [int(s) for s in args.rss_sizes.split(",") if s]
    memory = rss_rows(binary, sizes)

    result = {
        "command": "make demo  (= " + " ".join([sys.executable] + sys.argv) + ")",
        "machine": machine(),
        "build_type": "RelWithDebInfo (-O2 -g), AK_DEBUG off",
        "versions": {p: pkg_version(p) for p in PACKAGES},
        "preloads": {k: v[0] for k, v in PRELOADS.items()},
        "timings": rows,
        "memory": memory,
    }
    with open(os.path.join(args.out, "pools.json"), "w") as f:
        json.dump(result, f, indent=1)
    md = render_markdown(result)
    with open(os.path.join(args.out, "pools.md"), "w") as f:
        f.write(md)
    print(md)


if __name__ == "__main__":
    main()
