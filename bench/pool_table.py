"""Turns bench/results/pools.json into the markdown ratio table and the target verdicts.

Pure functions of the result document, so they can be re-run on committed results:
    python3 bench/pool_table.py bench/results/pools.json
"""
import json
import sys
from collections import defaultdict

AK_REF = {"interleaved": "ak_object_pool", "bulk_front": "ak_object_pool",
          "bulk_back": "ak_object_pool", "bulk_random": "ak_object_pool"}


def _by_group(rows):
    groups = defaultdict(dict)
    for r in rows:
        groups[r["group"]][r["contender"]] = r
    return groups


def _ref(group):
    return AK_REF.get(group.split("/")[0], "ak_pool_allocator")


def _fmt_ns(ns):
    for unit, div in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if ns >= div:
            return f"{ns / div:.3g} {unit}"
    return f"{ns:.3g} ns"


def targets(doc):
    """Returns [(target, measured, ok)] for the issue's targets."""
    g = _by_group(doc["timings"])
    out = []
    for size in ("8", "64", "280"):
        grp = g.get(f"interleaved/{size}", {})
        if "ak_object_pool" in grp and "boost_object_pool" in grp:
            r = grp["ak_object_pool"]["time_ns"] / grp["boost_object_pool"]["time_ns"]
            out.append((f"suite 1 @{size}: ak_object_pool <= boost::object_pool", f"{r:.2f}x", r <= 1.0))
        if "ak_small_object" in grp and "boost_object_pool" in grp:
            r = grp["ak_small_object"]["time_ns"] / grp["boost_object_pool"]["time_ns"]
            out.append((f"suite 1 @{size}: ak_small_object <= boost::object_pool", f"{r:.2f}x", r <= 1.0))
        front = g.get(f"bulk_front/{size}", {}).get("boost_object_pool")
        for order in ("front", "back", "random"):
            ak = g.get(f"bulk_{order}/{size}", {}).get("ak_object_pool")
            if ak and front:
                r = front["time_ns"] / ak["time_ns"]
                out.append((f"suite 2 @{size} {order}: >= 100x faster than boost front-to-back",
                            f"{r:.0f}x", r >= 100))
    lst = g.get("list_10M", {})
    if "ak_pool_allocator" in lst and "std_allocator" in lst:
        r = lst["std_allocator"]["time_ns"] / lst["ak_pool_allocator"]["time_ns"]
        out.append(("list: >= 2x faster than std::allocator on glibc", f"{r:.2f}x", r >= 2))
    if "ak_pool_allocator" in lst and "std_allocator@mimalloc" in lst:
        r = lst["std_allocator@mimalloc"]["time_ns"] / lst["ak_pool_allocator"]["time_ns"]
        out.append(("list: faster than std::allocator under mimalloc", f"{r:.2f}x", r > 1))
    for m in doc.get("memory", []):
        if m["contender"] == "ak_pool_allocator":
            v = m["rss_bytes_per_node"]
            out.append((f"list memory @{m['elements'] // 1_000_000}M: <= 25 resident bytes/node",
                        f"{v:.2f} B", v <= 25))
    thr = g.get("threads_8x1M_map", {})
    if "ak_pool_allocator" in thr and "std_allocator" in thr:
        r = thr["ak_pool_allocator"]["time_ns"] / thr["std_allocator"]["time_ns"]
        out.append(("threads: <= 0.8x glibc wall time", f"{r:.2f}x", r <= 0.8))
    return out


def render_markdown(doc):
    lines = ["# Pool benchmarks (issue 2)", "",
             f"Command: `{doc['command']}`  ", f"Machine: {doc['machine']}  ",
             f"Build: {doc['build_type']}  ",
             "Versions: " + ", ".join(f"{k} {v}" for k, v in doc["versions"].items()), "",
             "Each row is the median of 3 repetitions (1 for umap) from one run. `ratio` is the row's",
             "time over the allockit reference row of its group (ak_object_pool for the object suites,",
             "ak_pool_allocator for containers): above 1 means slower than allockit. Rows tagged",
             "`@jemalloc` etc. ran in a process started with LD_PRELOAD.", "", "## Targets", "",
             "| target | measured | met |", "|---|---|---|"]
    for name, measured, ok in targets(doc):
        lines.append(f"| {name} | {measured} | {'yes' if ok else '**no**'} |")
    lines += ["", "## Timings", ""]
    for group, rows in sorted(_by_group(doc["timings"]).items()):
        ref = rows.get(_ref(group))
        extra = "create (s)" if group.startswith("bulk") else "insert / iterate / clear (ms)"
        lines += [f"### {group}", "", f"| contender | time | ratio | {extra} |", "|---|---|---|---|"]
        for c, r in sorted(rows.items(), key=lambda kv: kv[1]["time_ns"]):
            ratio = f"{r['time_ns'] / ref['time_ns']:.2f}" if ref else "-"
            if "insert_ms" in r:
                ex = f"{r['insert_ms']:.0f} / {r['iterate_ms']:.0f} / {r['clear_ms']:.0f}"
            elif "create_s" in r:
                ex = f"{r['create_s']:.2e}"
            else:
                ex = ""
            lines.append(f"| {c} | {_fmt_ns(r['time_ns'])} | {ratio} | {ex} |")
        lines.append("")
    if doc.get("memory"):
        lines += ["## Resident bytes per std::list<int> node", "",
                  "| contender | elements | bytes/node |", "|---|---|---|"]
        for m in sorted(doc["memory"], key=lambda m: (m["elements"], m["rss_bytes_per_node"])):
            lines.append(f"| {m['contender']} | {m['elements']:,} | {m['rss_bytes_per_node']:.2f} |")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        print(render_markdown(json.load(f)))
