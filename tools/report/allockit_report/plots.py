"""The report's figures, each returned as PNG bytes. Every plot bins whole numpy columns."""
import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

PERCENTILES = ["best", "p1", "p10", "p25", "p50", "p75", "p90", "p95", "p98", "p99", "p99.9",
               "p99.99", "p99.999", "worst"]


def _png(fig):
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def density_image(t, latency, size, xbins=600, ybins=220):
    """Bins (time, log latency) into a grid; returns (rgba, extent). Colour is the mean log2
    size of the calls in a cell, brightness the log of their count."""
    t = t.astype(np.float64) * 1e-6  # seconds
    y = np.log10(np.maximum(latency, 1).astype(np.float64))
    s = np.log2(np.maximum(size, 1).astype(np.float64))
    tmax = max(float(t.max()) if len(t) else 1.0, 1e-6)
    ylo, yhi = 0.5, max(float(y.max()) + 0.1 if len(y) else 3.0, 2.0)
    xi = np.minimum((t / tmax * xbins).astype(np.int64), xbins - 1)
    yi = np.clip(((y - ylo) / (yhi - ylo) * ybins).astype(np.int64), 0, ybins - 1)
    cell = yi * xbins + xi
    count = np.bincount(cell, minlength=xbins * ybins).astype(np.float64)
    ssum = np.bincount(cell, weights=s, minlength=xbins * ybins)
    mean_s = np.divide(ssum, count, out=np.zeros_like(ssum), where=count > 0)
    cmap = plt.get_cmap("viridis")
    rgba = cmap(np.clip(mean_s / 24.0, 0, 1))
    alpha = np.log1p(count) / np.log1p(count.max() if count.max() > 0 else 1)
    rgba[:, 3] = np.where(count > 0, 0.25 + 0.75 * alpha, 0)
    return rgba.reshape(ybins, xbins, 4), (0, tmax, ylo, yhi)


def scatter_density(name, samples):
    fig, ax = plt.subplots(figsize=(9, 3.4))
    if samples is None or len(samples.latency_ns) == 0:
        ax.text(0.5, 0.5, "no samples", ha="center", transform=ax.transAxes)
        return _png(fig)
    img, extent = density_image(samples.t_us, samples.latency_ns, samples.size)
    ax.imshow(img, origin="lower", aspect="auto", extent=extent, interpolation="nearest")
    lo, hi = int(np.floor(extent[2])), int(np.ceil(extent[3]))
    ticks = list(range(max(lo, 1), hi + 1))
    ax.set_yticks(ticks)
    ax.set_yticklabels([fmt_ns(10 ** k) for k in ticks])
    ax.set_xlabel("replay time (s)")
    ax.set_ylabel("call latency")
    ax.set_title(f"{name}: every call over replay time (colour: request size)")
    sm = plt.cm.ScalarMappable(cmap="viridis", norm=matplotlib.colors.Normalize(0, 24))
    cb = fig.colorbar(sm, ax=ax, pad=0.01)
    cb.set_ticks([0, 4, 8, 12, 16, 20, 24])
    cb.set_ticklabels(["1", "16", "256", "4K", "64K", "1M", "16M"])
    cb.set_label("bytes")
    return _png(fig)


def fmt_ns(v, us_from=1e3, spec="g", unit=" ns"):
    """A latency for people: ns below `us_from`, then us, then ms."""
    if v >= 1e6:
        return f"{v / 1e6:{spec}} ms"
    if v >= us_from:
        return f"{v / 1e3:{spec}} us"
    return f"{v:{spec}}{unit}"


def percentile_chart(allocators, kind="all"):
    fig, ax = plt.subplots(figsize=(9, 4))
    for a in allocators:
        k = a.summary.get("kinds", {}).get(kind)
        if not k:
            continue
        ax.plot(range(len(PERCENTILES)), [max(k[p], 1) for p in PERCENTILES], marker="o", label=a.name)
    ax.set_yscale("log")
    ax.set_xticks(range(len(PERCENTILES)))
    ax.set_xticklabels(PERCENTILES, rotation=30)
    ax.set_ylabel("latency (ns)")
    ax.set_title(f"latency percentiles ({kind} calls)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    return _png(fig)


def rss_chart(allocators, recorded=None):
    """RssAnon over time of each replay and, dashed, of the recorded program (its heap share:
    less the recorder's own buffers and what it held before its first call), each on its own
    time: the curves line up where the replay ran at the recorded pace (--speed 1)."""
    fig, ax = plt.subplots(figsize=(9, 3.6))
    for a in allocators:
        if len(a.rss):
            ax.plot(a.rss[:, 0], a.rss[:, 1] / 1048576.0, label=a.name)
    if recorded is not None and len(recorded):
        ax.plot(recorded[:, 0], recorded[:, 1] / 1048576.0, "k--", label="recorded program")
    ax.set_xlabel("time (ms)")
    ax.set_ylabel("resident (MiB)")
    ax.set_title("resident memory over time (RssAnon above each process's start)")
    ax.grid(True, alpha=0.3)
    if any(len(a.rss) for a in allocators) or (recorded is not None and len(recorded)):
        ax.legend()
    return _png(fig)


def size_histogram(stats):
    hist = stats.get("size_histogram", {})
    fig, ax = plt.subplots(figsize=(9, 3.4))
    labels, counts = list(hist.keys()), list(hist.values())
    ax.bar(range(len(counts)), counts)
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, rotation=45)
    ax.set_yscale("log")
    ax.set_ylabel("allocations")
    ax.set_title("request sizes (bytes)")
    return _png(fig)
