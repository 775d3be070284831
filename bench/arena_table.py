"""Turns bench/results/arenas.json into the markdown ratio table and issue 3's target verdicts.
    python3 bench/arena_table.py bench/results/arenas.json
"""
import json
import sys

from table import by_group, render


def targets(doc):
    g = by_group(doc["timings"])
    out = []
    for shape in ("small", "large"):
        for threads in ("threads:1", "threads:2"):
            rows = g.get(f"{shape}/{threads}", {})
            ak = rows.get("ak_arena")
            if not ak:
                continue
            nd = rows.get("new_delete")
            if nd:
                r = nd["time_ns"] / ak["time_ns"]
                out.append((f"{shape} {threads}: >= 10x faster than new/delete on glibc",
                            f"{r:.1f}x", r >= 10))
            pmr = [rows[c]["time_ns"] for c in ("pmr_monotonic_recreated", "pmr_monotonic_reused")
                   if c in rows]
            if pmr:
                r = ak["time_ns"] / min(pmr)
                out.append((f"{shape} {threads}: <= 0.5x the faster monotonic_buffer_resource",
                            f"{r:.2f}x", r <= 0.5))
            calls = ak.get("chunk_maps_per_iter", 0) + ak.get("chunk_unmaps_per_iter", 0)
            out.append((f"{shape} {threads}: mmap+munmap per iteration (steady state)",
                        f"{calls:g}", calls == 0))
            if "destructors" in ak:
                out.append((f"{shape} {threads}: trivially destructible types register nothing",
                            f"{ak['destructors']:g} records", ak["destructors"] == 0))
    a16 = g.get("alloc16", {}).get("ak_arena")
    if a16 and "ns_per_alloc" in a16:
        v = a16["ns_per_alloc"] * 1e9
        out.append(("allocate(16, 8) <= 1 ns", f"{v:.2f} ns", v <= 1))
    return out


def _extra(r):
    parts = []
    if "ns_per_alloc" in r:
        parts.append(f"{r['ns_per_alloc'] * 1e9:.2f} ns/alloc")
    if "chunk_maps_per_iter" in r:
        parts.append(f"{r['chunk_maps_per_iter']:g} maps, {r['chunk_unmaps_per_iter']:g} unmaps /iter")
    return "; ".join(parts)


def render_markdown(doc):
    intro = [
        "Each row is the median of 9 randomly interleaved repetitions from one run; `ratio` is the",
        "row's time over ak_arena in its group (above 1: slower than allockit). `threads:2` rows run",
        "two threads, each with its own allocator object; the time is wall time per iteration.",
        "Rows tagged `@jemalloc` etc. ran in a process started with LD_PRELOAD."]
    return "\n".join(render(doc, "Arena benchmarks (issue 3)", intro, targets(doc),
                            lambda g: "ak_arena", _extra, lambda g: "notes"))


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        print(render_markdown(json.load(f)))
