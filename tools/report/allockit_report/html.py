"""Assembles the self-contained report page: inline CSS, figures embedded as base64 PNG."""
import base64
import html

from .plots import PERCENTILES, fmt_ns


def _img(png, alt):
    data = base64.b64encode(png).decode("ascii")
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'


def _fmt_ns(v):
    return fmt_ns(v, us_from=1e4, spec=".1f", unit="") if v >= 1e4 else f"{v:.0f}"


def summary_table(results):
    head = "".join(f"<th>{p}</th>" for p in PERCENTILES)
    rows = []
    for a in results.allocators:
        s = a.summary
        if not s.get("ok"):
            rows.append(f"<tr><td>{html.escape(a.name)}</td><td colspan='{len(PERCENTILES) + 4}'>"
                        f"failed: {html.escape(s.get('error', ''))}</td></tr>")
            continue
        k = s["kinds"]["all"]
        cells = "".join(f"<td>{_fmt_ns(k[p])}</td>" for p in PERCENTILES)
        rows.append(f"<tr><td>{html.escape(a.name)}</td>{cells}<td>{k['mean_ns']:.1f}</td>"
                    f"<td>{s['peak_rss_bytes'] / 1048576:.2f}</td><td>{s['overhead']:.2f}x</td>"
                    f"<td>{s['wall_s']:.3f}</td></tr>")
    return (f"<table><tr><th>allocator</th>{head}<th>mean</th><th>peak RSS MiB</th>"
            f"<th>overhead</th><th>wall s</th></tr>{''.join(rows)}</table>")


def kind_table(results):
    kinds = []
    for a in results.allocators:
        for k in a.summary.get("kinds", {}):
            if k != "all" and k not in kinds:
                kinds.append(k)
    rows = []
    for a in results.allocators:
        if not a.summary.get("ok"):
            continue
        cells = []
        for k in kinds:
            v = a.summary["kinds"].get(k)
            cells.append("<td>-</td>" if not v else
                         f"<td>{v['count']} calls: {_fmt_ns(v['p50'])} / {_fmt_ns(v['p99'])} / "
                         f"{_fmt_ns(v['p99.9'])} / {_fmt_ns(v['worst'])}</td>")
        rows.append(f"<tr><td>{html.escape(a.name)}</td>{''.join(cells)}</tr>")
    head = "".join(f"<th>{html.escape(k)}</th>" for k in kinds)
    return f"<table><tr><th>allocator</th>{head}</tr>{''.join(rows)}</table>"


def stats_list(stats):
    calls = ", ".join(f"{k} {v}" for k, v in stats.get("calls", {}).items() if v)
    items = [("calls", calls),
             ("allocations", f"{stats.get('allocations', 0)} ({stats.get('total_bytes', 0)} bytes)"),
             ("size", f"mean {stats.get('mean_size', 0):.1f}, median {stats.get('median_size', 0)}"),
             ("peak live", f"{stats.get('peak_live_bytes', 0)} bytes in {stats.get('peak_live_count', 0)} blocks"),
             ("threads", f"{stats.get('threads', 0)}, cross-thread frees {stats.get('cross_thread_frees', 0)}"),
             ("leaked at end", f"{stats.get('leaked_blocks', 0)} blocks, {stats.get('leaked_bytes', 0)} bytes")]
    return "<dl>" + "".join(f"<dt>{k}</dt><dd>{html.escape(str(v))}</dd>" for k, v in items) + "</dl>"


CSS = """body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222}
table{border-collapse:collapse;font-size:13px;margin:1em 0}td,th{border:1px solid #ccc;
padding:3px 6px;text-align:right}td:first-child,th:first-child{text-align:left}
img{max-width:100%}dt{font-weight:bold;float:left;width:9em}dd{margin-left:10em}
.note{color:#666;font-size:13px}"""


def fidelity_note(compare):
    """The replay of the recorded allocator against the program's own memory (compare.json)."""
    f = compare.get("fidelity") or {}
    if f.get("state") == "measured":
        mib = 1048576.0
        text = (f"Fidelity ({html.escape(f['allocator'])}, the recorded allocator): peak heap RssAnon "
                f"recorded {f['recorded_peak_bytes'] / mib:.2f} MiB, replayed "
                f"{f['replayed_peak_bytes'] / mib:.2f} MiB ({f['ratio']:.2f}x); largest gap between "
                f"the curves {f['largest_gap_bytes'] / mib:.2f} MiB, each run's time scaled to its length.")
    elif f.get("state") == "not_replayed":
        text = "Fidelity not measured: the recorded allocator was not among those replayed."
    else:
        text = "Fidelity unknown: the journal has no memory samples (an import, or an older recorder)."
    return f"<p class='note'>{text}</p>"


def page(results, figures):
    c = results.compare
    title = f"allockit replay report: {c.get('command') or c.get('journal', '')}"
    parts = [f"<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
             f"<style>{CSS}</style></head><body>",
             f"<h1>{html.escape(title)}</h1>",
             f"<p class='note'>Journal {html.escape(str(c.get('journal', '')))}; {c.get('ops', 0)} calls on "
             f"{c.get('threads', 0)} thread(s); speed {'max' if not c.get('speed') else c.get('speed')}, "
             f"touch {html.escape(str(c.get('touch', '')))}, {c.get('repeat', 1)} run(s) per allocator; "
             f"recorded with {html.escape(str(c.get('recorded_allocator', '')))}. Each allocator ran in "
             "its own process; latency is serialised rdtsc around each call.</p>",
             "<h2>Summary (all calls, ns)</h2>", summary_table(results),
             "<h2>By kind: p50 / p99 / p99.9 / worst</h2>", kind_table(results),
             "<h2>Latency percentiles</h2>", _img(figures["percentiles"], "percentile chart"),
             "<h2>Resident memory over time</h2>", fidelity_note(c), _img(figures["rss"], "RSS over time"),
             "<h2>Calls over replay time</h2>"]
    for name, png in figures["density"]:
        parts.append(_img(png, f"latency density for {name}"))
    parts += ["<h2>The journal</h2>", stats_list(results.stats),
              _img(figures["sizes"], "size histogram"), "</body></html>\n"]
    return "\n".join(parts)
