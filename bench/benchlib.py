"""Shared parts of the benchmark runners: machine and version capture, Google Benchmark runs
(optionally under LD_PRELOAD), and reduction of raw results to one median row per benchmark.

Row names follow `group-head/contender[/rest...]`; the group is the head plus the rest, so
`small/ak_arena/threads:2` is contender `ak_arena` in group `small/threads:2`.
"""
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess

LIBDIR = "/usr/lib/x86_64-linux-gnu"
PRELOADS = {
    "jemalloc": f"{LIBDIR}/libjemalloc.so.2",
    "mimalloc": f"{LIBDIR}/libmimalloc.so.2",
    "tcmalloc": f"{LIBDIR}/libtcmalloc_minimal.so.4",
}
PACKAGES = ["libc6", "libboost-dev", "libloki-dev", "libbenchmark-dev", "g++",
            "libjemalloc2", "libmimalloc2.0", "libtcmalloc-minimal4"]
_UNIT_NS = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}
_DROP = ("iterations:", "repeats:", "manual_time", "real_time")


def pkg_version(name):
    r = subprocess.run(["dpkg-query", "-W", "-f=${Version}", name], capture_output=True, text=True)
    return r.stdout.strip() or "not installed"


def versions():
    return {p: pkg_version(p) for p in PACKAGES}


def machine():
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"host": platform.node(), "kernel": platform.release(), "cpu": cpu,
            "cores": os.cpu_count(), "date": datetime.datetime.now().isoformat(timespec="seconds")}


def run_gbench(binary, extra_env, filt, out_path, repetitions=9):
    """Runs one Google Benchmark process and returns its JSON document."""
    env = dict(os.environ, **extra_env)
    cmd = [binary, f"--benchmark_filter={filt}", "--benchmark_format=json",
           f"--benchmark_out={out_path}", "--benchmark_out_format=json",
           f"--benchmark_repetitions={repetitions}", "--benchmark_enable_random_interleaving=true",
           "--benchmark_report_aggregates_only=true"]
    print("+", " ".join(f"{k}={v}" for k, v in extra_env.items()), " ".join(cmd), flush=True)
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
    with open(out_path) as f:
        return json.load(f)


def split_name(name, drop_numeric_heads=()):
    """('group', 'contender') of a benchmark name; a trailing element-count argument is dropped
    for the groups listed in drop_numeric_heads."""
    parts = [p for p in name.split("/") if p and not p.startswith(_DROP)]
    if parts[0] in drop_numeric_heads and parts[-1].isdigit():
        parts = parts[:-1]
    return "/".join([parts[0]] + parts[2:]), parts[1]


def median_rows(doc, allocator, drop_numeric_heads=(), counters=()):
    """One row per benchmark (its median aggregate), tagged with the process's allocator."""
    rows = []
    for b in doc["benchmarks"]:
        if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
            continue
        group, contender = split_name(b.get("run_name", b["name"]), drop_numeric_heads)
        if allocator != "glibc":
            contender = f"{contender}@{allocator}"
        row = {"group": group, "contender": contender,
               "time_ns": b["real_time"] * _UNIT_NS[b["time_unit"]]}
        for k in counters:
            if k in b:
                row[k] = b[k]
        rows.append(row)
    return rows


def run_suite(binary, tmp, malloc_rows_filter, drop_numeric_heads=(), counters=(), filt="."):
    """The glibc process with every row, then LD_PRELOAD processes for the malloc-backed rows."""
    rows = median_rows(run_gbench(binary, {}, filt, f"{tmp}/glibc.json"), "glibc",
                       drop_numeric_heads, counters)
    for name, lib in PRELOADS.items():
        if not os.path.exists(lib):
            print(f"skipping {name}: {lib} not installed", flush=True)
            continue
        doc = run_gbench(binary, {"LD_PRELOAD": lib}, malloc_rows_filter, f"{tmp}/{name}.json")
        rows += median_rows(doc, name, drop_numeric_heads, counters)
    return rows


def remeasure_across_processes(binary, tmp, rows, filt, processes, drop_numeric_heads=()):
    """Re-runs the rows matching `filt` in `processes` more glibc processes and sets each row's
    time to the median over every process (the first included), keeping the per-process values
    in process order (so two rows' values pair up process by process).
    For nanosecond rows whose speed depends on where the process's stack and heap happen to land
    (store-to-load aliasing, memory renaming): ASLR gives every process a different layout."""
    per_process = {}
    for i in range(processes):
        doc = run_gbench(binary, {}, filt, f"{tmp}/layout{i}.json")
        for r in median_rows(doc, "glibc", drop_numeric_heads):
            per_process.setdefault((r["group"], r["contender"]), []).append(r["time_ns"])
    for r in rows:
        extra = per_process.get((r["group"], r["contender"]))
        if extra:
            times = [r["time_ns"]] + extra
            r["process_times_ns"] = times
            r["time_ns"] = statistics.median(times)
    return rows


def write_results(out_dir, stem, result, markdown):
    with open(os.path.join(out_dir, f"{stem}.json"), "w") as f:
        json.dump(result, f, indent=1)
    with open(os.path.join(out_dir, f"{stem}.md"), "w") as f:
        f.write(markdown)
    print(markdown)


def rotations(names, rounds):
    """(round, order) for each round: every name once, the order rotated by one each round, so
    drift on a shared machine hits every allocator alike."""
    names = list(names)
    for r in range(rounds):
        k = r % len(names)
        yield r, names[k:] + names[:k]


def hardened_variants(build):
    """The hardened builds shown beside the allocators (issue 11), never counted as peers: name ->
    (preload, extra environment). glibc's checks live in libc_malloc_debug.so since 2.34. Debian's
    mimalloc ships no secure build."""
    return {"allockit-secure": (os.path.abspath(os.path.join(build, "liballockit-secure.so")), {}),
            "glibc-check3": (f"{LIBDIR}/libc_malloc_debug.so.0", {"MALLOC_CHECK_": "3"})}


def malloc_allocators(build):
    """Every malloc the suites compare, by name: glibc (no preload), the Debian peers, allockit."""
    return {"glibc": None, **PRELOADS, "allockit": os.path.abspath(os.path.join(build, "liballockit.so"))}


def result_doc(argv, timings, make_target="make demo", **extra):
    """The self-describing result document every suite writes."""
    doc = {
        "command": f"{make_target}  (= " + " ".join(["python3"] + argv) + ")",
        "machine": machine(),
        "build_type": "RelWithDebInfo (-O2 -g), AK_DEBUG off",
        "versions": versions(),
        "preloads": PRELOADS,
        "timings": timings,
    }
    doc.update(extra)
    return doc


def headless_chromium():
    """Debian's Chromium as the benchmarks run it (headless, as root), or None when absent."""
    exe = shutil.which("chromium")
    return [exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"] if exe else None
