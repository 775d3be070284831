"""Assembles the self-contained report page: inline CSS, the plotting library inline, each
figure a div and its Plotly specification as JSON. Nothing is fetched when the page is viewed."""
import html
import json

from . import sites
from .plots import PERCENTILES, fmt_ns


def _figure(div_id):
    """A figure's div; the page's script draws it (_script)."""
    return f'<div class="plot" id="{div_id}"></div>'


def _script(figures):
    """Draws every figure: Plotly.newPlot for each (id, spec), responsive, no logo, no toolbar
    link to Plotly's site (the page works offline)."""
    specs = json.dumps([[k, v] for k, v in figures], separators=(",", ":"), allow_nan=False)
    # </script> inside JSON would end the element early; JSON allows escaping the slash.
    specs = specs.replace("</", "<\\/")
    return "<script>(function(){var figs=" + specs + ";" + _JS + "})();</script>"


# Draws the figures; keeps the memory chart's time range in step with the call timeline's (both
# are replay time); sorts a table by the column whose header is clicked.
_JS = """var cfg={responsive:true,displaylogo:false,modeBarButtonsToRemove:['sendDataToCloud']};
figs.forEach(function(f){Plotly.newPlot(f[0],f[1].data,f[1].layout,cfg);});
var tl=document.getElementById('density'),mem=document.getElementById('rss'),busy=false;
function xrange(e){for(var k in e){var m=/^(xaxis\\d*)\\.(range\\[0\\]|range|autorange)$/.exec(k);if(!m)continue;
 if(m[2]==='autorange')return{'xaxis.autorange':true};
 return{'xaxis.range':m[2]==='range'?e[k]:[e[k],e[m[1]+'.range[1]']]};}return null;}
function follow(from,to){from.on('plotly_relayout',function(e){var u=xrange(e);if(busy||!u)return;
 busy=true;Promise.resolve(Plotly.relayout(to,u)).then(function(){busy=false;});});}
if(tl&&mem&&tl.on&&mem.on){follow(tl,mem);follow(mem,tl);}
function cell(r,i){var t=r.cells[i]?r.cells[i].textContent:'';var n=parseFloat(t.replace(/[^0-9.eE+-]/g,''));
 var k=/ms$/.test(t)?1e6:/us$/.test(t)?1e3:1;return isNaN(n)?t:n*k;}
document.querySelectorAll('table.sortable th').forEach(function(th){var i=th.cellIndex;
 th.title='click to sort';th.addEventListener('click',function(){var tb=th.closest('table'),rows=[].slice.call(tb.rows,1),
 up=th.dataset.up!=='1';th.dataset.up=up?'1':'0';rows.sort(function(a,b){var x=cell(a,i),y=cell(b,i);
 return (x<y?-1:x>y?1:0)*(up?1:-1);});rows.forEach(function(r){r.parentNode.appendChild(r);});});});"""


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
    return (f"<table class='sortable'><tr><th>allocator</th>{head}<th>mean</th><th>peak RSS MiB</th>"
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
    return f"<table class='sortable'><tr><th>allocator</th>{head}</tr>{''.join(rows)}</table>"


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
table{border-collapse:collapse;font-size:13px;margin:1em 0}td,th{border:1px solid #ccc;cursor:default;
padding:3px 6px;text-align:right}td:first-child,th:first-child{text-align:left}
img{max-width:100%}.plot{width:100%;min-height:300px}dt{font-weight:bold;float:left;width:9em}dd{margin-left:10em}
.note{color:#666;font-size:13px}td.text{text-align:left}"""


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


def call_site_view(results):
    """Where the allocations come from (journals recorded with --stack) and, when `allockit
    advise --out` wrote into this folder, what to change."""
    parts = []
    if results.stacks:
        parts += ["<h2 id='call-sites'>Call sites</h2>",
                  "<p class='note'>Each bar is a frame, its callers above it; its width is the allocations "
                  "made under it (first graph) or the bytes they held live at the program's peak (second). "
                  "Hover a bar for its figures; drag to zoom.</p>",
                  _figure("flame_calls"), _figure("flame_peak")]
    if results.sites:
        parts += ["<h3>Heaviest sites (allockit top)</h3>", sites.top_table(results.sites)]
    if results.advice:
        parts += ["<h2 id='advice'>Advice (allockit advise)</h2>", sites.advice_table(results.advice)]
    return parts


def page(results, figures, plotly_js):
    """The whole page. `figures` maps a div id to its Plotly specification."""
    c = results.compare
    title = f"allockit replay report: {c.get('command') or c.get('journal', '')}"
    js = plotly_js.replace("</script", "<\\/script")
    parts = [f"<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
             f"<style>{CSS}</style><script>{js}</script></head><body>",
             f"<h1>{html.escape(title)}</h1>",
             f"<p class='note'>Journal {html.escape(str(c.get('journal', '')))}; {c.get('ops', 0)} calls on "
             f"{c.get('threads', 0)} thread(s); speed {'max' if not c.get('speed') else c.get('speed')}, "
             f"touch {html.escape(str(c.get('touch', '')))}, {c.get('repeat', 1)} run(s) per allocator; "
             f"recorded with {html.escape(str(c.get('recorded_allocator', '')))}. Each allocator ran in "
             "its own process; latency is serialised rdtsc around each call. Every plot zooms (drag), "
             "pans (shift-drag) and resets (double-click); hover a point or cell for its values.</p>",
             "<h2>Summary (all calls, ns)</h2>", summary_table(results),
             "<h2>By kind: p50 / p99 / p99.9 / worst</h2>", kind_table(results),
             "<h2>Latency percentiles</h2>", _figure("percentiles"),
             "<h2>Resident memory over time</h2>", fidelity_note(c), _figure("rss"),
             "<h2>Calls over replay time</h2>", _figure("density"),
             "<h2>The journal</h2>", stats_list(results.stats), _figure("sizes"),
             _figure("lifetimes")]
    parts += call_site_view(results)
    parts += [_script(figures.items()), "</body></html>\n"]
    return "\n".join(parts)
