"""python3 -m allockit_report DIR -o report.html"""
import argparse
import sys

try:
    import numpy  # noqa: F401  (checked here so a missing one is named, not a traceback)
except ImportError as missing:
    sys.exit(f"allockit report: the Python module '{missing.name}' is missing; install it with "
             "'sudo apt-get install python3-numpy' (or 'pip install numpy')")

from . import assets, data, html, plots, sites  # noqa: E402


def progress(step, total, what):
    if sys.stderr.isatty():
        done = int(30 * step / total)
        sys.stderr.write(f"\r  report [{'#' * done}{' ' * (30 - done)}] {what:<24}")
        if step == total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def build(folder, out):
    results = data.load(folder)
    js = assets.plotly_js()
    ok = [a for a in results.allocators if a.summary.get("ok")]
    progress(0, 4, "density")
    figures = {"density": plots.density_figure(ok)}
    progress(1, 4, "percentiles")
    figures["percentiles"] = plots.percentile_figure(ok)
    progress(2, 4, "rss")
    figures["rss"] = plots.rss_figure(ok, results.recorded_rss)
    progress(3, 4, "histograms")
    figures["sizes"] = plots.histogram_figure(results.stats, "size_histogram", "request sizes (bytes)", " bytes")
    figures["lifetimes"] = plots.histogram_figure(results.stats, "lifetime_histogram",
                                                  "lifetimes (from allocation to free)", "")
    if results.stacks:
        figures["flame_calls"] = sites.flame_figure(results.stacks["stacks"], "calls",
                                                    "allocations by call stack", "allocations")
        figures["flame_peak"] = sites.flame_figure(results.stacks["stacks"], "peak_bytes",
                                                   "bytes live at the peak by call stack", "bytes")
    progress(4, 4, "done")
    with open(out, "w") as f:
        f.write(html.page(results, figures, js))


def main(argv=None):
    p = argparse.ArgumentParser(prog="allockit report")
    p.add_argument("folder")
    p.add_argument("-o", "--out", default="report.html")
    a = p.parse_args(argv)
    try:
        build(a.folder, a.out)
    except (data.ResultsError, assets.MissingAsset) as e:
        print(f"allockit report: {e}", file=sys.stderr)
        return 1
    print(f"allockit report: wrote {a.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
