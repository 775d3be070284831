"""The report's figures as Plotly specifications (data and layout, plain dicts the page hands to
Plotly.newPlot). Every plot bins whole numpy columns first: the page gets cells, never calls."""
import numpy as np

PERCENTILES = ["best", "p1", "p10", "p25", "p50", "p75", "p90", "p95", "p98", "p99", "p99.9",
               "p99.99", "p99.999", "worst"]

# Density grid: time bins across the shared axis, latency bins per decade.
TIME_BINS = 400
BINS_PER_DECADE = 16


def fmt_ns(v, us_from=1e3, spec="g", unit=" ns"):
    """A latency for people: ns below `us_from`, then us, then ms."""
    if v >= 1e6:
        return f"{v / 1e6:{spec}} ms"
    if v >= us_from:
        return f"{v / 1e3:{spec}} us"
    return f"{v:{spec}}{unit}"


def _rounded(a, digits=4):
    """A list of floats with `digits` significant digits, None for NaN: a smaller page."""
    out = np.asarray(a, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        mag = np.where(np.isfinite(out) & (out != 0),
                       10 ** (digits - 1 - np.floor(np.log10(np.abs(out)))), 1)
    out = np.round(out * mag) / mag
    return [None if not np.isfinite(v) else float(v) for v in out.ravel()]


def density_grid(t_us, latency, size, t_max_ms, lat_lo, lat_hi):
    """Counts and mean request sizes of the calls in each (time, log latency) cell, rows by
    latency: (count[ybins][xbins], mean_size[ybins][xbins]). Cells are TIME_BINS wide across
    [0, t_max_ms] and BINS_PER_DECADE per decade of latency across [lat_lo, lat_hi] ns."""
    ybins = max(1, int(round((np.log10(lat_hi) - np.log10(lat_lo)) * BINS_PER_DECADE)))
    t = t_us.astype(np.float64) * 1e-3
    y = np.log10(np.maximum(latency, 1).astype(np.float64))
    xi = np.clip((t / t_max_ms * TIME_BINS).astype(np.int64), 0, TIME_BINS - 1)
    yi = np.clip(((y - np.log10(lat_lo)) * BINS_PER_DECADE).astype(np.int64), 0, ybins - 1)
    cell = yi * TIME_BINS + xi
    count = np.bincount(cell, minlength=TIME_BINS * ybins).astype(np.float64)
    ssum = np.bincount(cell, weights=size.astype(np.float64), minlength=TIME_BINS * ybins)
    mean = np.divide(ssum, count, out=np.zeros_like(ssum), where=count > 0)
    return count.reshape(ybins, TIME_BINS), mean.reshape(ybins, TIME_BINS)


def density_figure(allocators):
    """Every call of every allocator over replay time, one heatmap row per allocator on one
    shared, zoomable time axis; colour is the log of the calls in a cell; a cell's tooltip gives
    its time and latency range, its calls and their mean request size."""
    runs = [a for a in allocators if a.samples is not None and len(a.samples.latency_ns)]
    if not runs:
        return {"data": [], "layout": {"title": {"text": "no samples"}}}
    t_max = max(float(a.samples.t_us.max()) for a in runs) * 1e-3 or 1.0
    lat_lo = 10.0
    lat_hi = max(10 ** np.ceil(np.log10(max(float(a.samples.latency_ns.max()), 100.0))) for a in runs)
    width = t_max / TIME_BINS
    xs = _rounded((np.arange(TIME_BINS) + 0.5) * width)
    factor = 10 ** (1 / BINS_PER_DECADE)
    data, layout = [], {"height": 170 + 190 * len(runs), "margin": {"l": 70, "r": 20, "t": 40, "b": 50},
                        "title": {"text": "every call over replay time (drag to zoom, double-click to reset)"},
                        "hoverlabel": {"align": "left"}}
    gap = 0.06 / max(len(runs), 1)
    for i, a in enumerate(runs):
        count, mean = density_grid(a.samples.t_us, a.samples.latency_ns, a.samples.size, t_max, lat_lo, lat_hi)
        ybins = count.shape[0]
        ys = _rounded(lat_lo * factor ** (np.arange(ybins) + 0.5))
        z = np.where(count > 0, np.log10(np.maximum(count, 1)) + 0.1, np.nan)
        custom = np.stack([count, np.round(mean)], axis=-1).astype(np.int64).tolist()
        ax = "" if i == 0 else str(i + 1)
        data.append({
            "type": "heatmap", "name": a.name, "x": xs, "y": ys,
            "z": [_rounded(row, 3) for row in z], "customdata": custom,
            "xaxis": f"x{ax}", "yaxis": f"y{ax}", "colorscale": "Viridis", "zmin": 0,
            "zmax": float(np.log10(max(count.max(), 10))) + 0.1, "showscale": i == 0,
            "colorbar": {"title": {"text": "calls"}, "tickvals": [0.1, 1.1, 2.1, 3.1, 4.1, 5.1, 6.1],
                         "ticktext": ["1", "10", "100", "1K", "10K", "100K", "1M"]},
            "hovertemplate": (f"<b>{a.name}</b><br>time %{{x:.3f}} ms ± {width / 2:.3g} ms"
                              f"<br>latency %{{y:.0f}} ns (×/÷ {factor ** 0.5:.3f})"
                              "<br>calls %{customdata[0]}<br>mean size %{customdata[1]} B<extra></extra>"),
        })
        top = 1 - i / len(runs)
        layout[f"yaxis{ax}"] = {"type": "log", "domain": [top - 1 / len(runs) + gap, top - gap],
                                "title": {"text": f"{a.name}<br>latency (ns)"}, "fixedrange": True}
        last = i == len(runs) - 1
        layout[f"xaxis{ax}"] = {"anchor": f"y{ax}", "showticklabels": last,
                                **({"matches": "x"} if i else {"range": [0, t_max]}),
                                **({"title": {"text": "replay time (ms)"}} if last else {})}
    return {"data": data, "layout": layout}


def percentile_figure(allocators, kind="all"):
    data = []
    for a in allocators:
        k = a.summary.get("kinds", {}).get(kind)
        if k:
            data.append({"type": "scatter", "mode": "lines+markers", "name": a.name, "x": PERCENTILES,
                         "y": [max(k[p], 1) for p in PERCENTILES],
                         "hovertemplate": f"{a.name} %{{x}}: %{{y:.0f}} ns<extra></extra>"})
    return {"data": data, "layout": {
        "title": {"text": f"latency percentiles ({kind} calls)"}, "height": 380,
        "yaxis": {"type": "log", "title": {"text": "latency (ns)"}}, "hovermode": "x unified",
        "margin": {"l": 70, "r": 20, "t": 40, "b": 60}}}


def rss_figure(allocators, recorded=None):
    """RssAnon over time of each replay and, dashed, of the recorded program (its heap share:
    less the recorder's own buffers and what it held before its first call), each on its own
    time: the curves line up where the replay ran at the recorded pace (--speed 1)."""
    data = []
    for a in allocators:
        if len(a.rss):
            data.append({"type": "scatter", "mode": "lines", "name": a.name, "x": _rounded(a.rss[:, 0]),
                         "y": _rounded(a.rss[:, 1] / 1048576.0),
                         "hovertemplate": f"{a.name} %{{x:.1f}} ms: %{{y:.2f}} MiB<extra></extra>"})
    if recorded is not None and len(recorded):
        data.append({"type": "scatter", "mode": "lines", "name": "recorded program",
                     "line": {"dash": "dash", "color": "black"}, "x": _rounded(recorded[:, 0]),
                     "y": _rounded(recorded[:, 1] / 1048576.0),
                     "hovertemplate": "recorded %{x:.1f} ms: %{y:.2f} MiB<extra></extra>"})
    return {"data": data, "layout": {
        "title": {"text": "resident memory over time (RssAnon above each process's start)"},
        "height": 380, "xaxis": {"title": {"text": "time (ms)"}},
        "yaxis": {"title": {"text": "resident (MiB)"}}, "margin": {"l": 70, "r": 20, "t": 40, "b": 50}}}


def histogram_figure(stats, key, title, unit):
    """A histogram of the journal's stats (`size_histogram`, `lifetime_histogram`)."""
    hist = stats.get(key, {})
    return {"data": [{"type": "bar", "x": list(hist.keys()), "y": list(hist.values()),
                      "hovertemplate": f"%{{x}}{unit}: %{{y}} allocations<extra></extra>"}],
            "layout": {"title": {"text": title}, "height": 340,
                       "yaxis": {"type": "log", "title": {"text": "allocations"}},
                       "margin": {"l": 70, "r": 20, "t": 40, "b": 70}}}
