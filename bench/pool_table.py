"""Turns bench/results/pools.json into the markdown ratio table and the target verdicts.

Pure functions of the result document, so they can be re-run on committed results:
    python3 bench/pool_table.py bench/results/pools.json
"""
import json
import sys

from table import by_group, render

OBJECT_SUITES = ("interleaved", "bulk_front", "bulk_back", "bulk_random")


def _ref(group):
    return "ak_object_pool" if group.split("/")[0] in OBJECT_SUITES else "ak_pool_allocator"


def _ratio(g, group, a, b):
    rows = g.get(group, {})
    return rows[a]["time_ns"] / rows[b]["time_ns"] if a in rows and b in rows else None


def _paired_ratios(g, group, a, b):
    """Per-process ratios a/b of two rows measured in the same processes, sorted."""
    rows = g.get(group, {})
    ta, tb = rows.get(a, {}).get("process_times_ns"), rows.get(b, {}).get("process_times_ns")
    if not ta or not tb or len(ta) != len(tb):
        return []
    return sorted(x / y for x, y in zip(ta, tb))


def targets(doc):
    """Returns [(target, measured, ok)] for issue 2's targets."""
    g = by_group(doc["timings"])
    out = []
    for size in ("8", "64", "280"):
        for ak in ("ak_object_pool", "ak_small_object"):
            r = _ratio(g, f"interleaved/{size}", ak, "boost_object_pool")
            if r is None:
                continue
            pr = _paired_ratios(g, f"interleaved/{size}", ak, "boost_object_pool")
            spread = f" (per process {pr[0]:.2f}-{pr[-1]:.2f})" if pr else ""
            out.append((f"suite 1 @{size}: {ak} <= boost::object_pool", f"{r:.2f}x{spread}",
                        r <= 1.0))
        for order in ("front", "back", "random"):
            front = g.get(f"bulk_front/{size}", {}).get("boost_object_pool")
            ak = g.get(f"bulk_{order}/{size}", {}).get("ak_object_pool")
            if ak and front:
                r = front["time_ns"] / ak["time_ns"]
                out.append((f"suite 2 @{size} {order}: >= 100x faster than boost front-to-back",
                            f"{r:.0f}x", r >= 100))
    r = _ratio(g, "list_10M", "std_allocator", "ak_pool_allocator")
    if r is not None:
        out.append(("list: >= 2x faster than std::allocator on glibc", f"{r:.2f}x", r >= 2))
    r = _ratio(g, "list_10M", "std_allocator@mimalloc", "ak_pool_allocator")
    if r is not None:
        out.append(("list: faster than std::allocator under mimalloc", f"{r:.2f}x", r > 1))
    for m in doc.get("memory", []):
        if m["contender"] == "ak_pool_allocator":
            v = m["rss_bytes_per_node"]
            out.append((f"list memory @{m['elements'] // 1_000_000}M: <= 25 resident bytes/node",
                        f"{v:.2f} B", v <= 25))
    r = _ratio(g, "threads_8x1M_map", "ak_pool_allocator", "std_allocator")
    if r is not None:
        out.append(("threads: <= 0.8x glibc wall time", f"{r:.2f}x", r <= 0.8))
    return out


def _extra(r):
    if "insert_ms" in r:
        return f"{r['insert_ms']:.0f} / {r['iterate_ms']:.0f} / {r['clear_ms']:.0f}"
    return f"{r['create_s']:.2e}" if "create_s" in r else ""


def render_markdown(doc):
    intro = [
        "Each row is the median of 9 randomly interleaved repetitions (3 for list, map and threads,",
        "1 for umap and Boost's quadratic bulk rows) from one run. `ratio` is the row's time over",
        "the allockit reference row of its group (ak_object_pool for the object suites,",
        "ak_pool_allocator for containers): above 1 means slower than allockit. Rows tagged",
        "`@jemalloc` etc. ran in a process started with LD_PRELOAD. Bulk rows time the destroy",
        "phase only (the create phase is the last column). Interleaved rows take about 1 ns per",
        "pair; their time is the median over "
        f"{doc.get('layout_processes', 1)} processes (each a median of 9 repetitions), so",
        "no single process's placement of stack, pool and blocks decides a ratio.",
        "`*_global` rows hold the same pool in static storage instead of the benchmark's frame."]
    lines = render(doc, "Pool benchmarks (issue 2)", intro, targets(doc), _ref, _extra,
                   lambda g: "create (s)" if g.startswith("bulk") else "insert / iterate / clear (ms)")
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
