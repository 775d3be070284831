"""python3 -m allockit_report DIR -o report.html"""
import argparse
import sys

try:
    import matplotlib  # noqa: F401  (checked here so a missing one is named, not a traceback)
    import numpy  # noqa: F401
except ImportError as missing:
    sys.exit(f"allockit report: the Python module '{missing.name}' is missing; install it with "
             "'sudo apt-get install python3-numpy python3-matplotlib' "
             "(or 'pip install numpy matplotlib')")

from . import data, html, plots  # noqa: E402


def progress(step, total, what):
    if sys.stderr.isatty():
        done = int(30 * step / total)
        sys.stderr.write(f"\r  report [{'#' * done}{' ' * (30 - done)}] {what:<24}")
        if step == total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def build(folder, out):
    results = data.load(folder)
    ok = [a for a in results.allocators if a.summary.get("ok")]
    total = len(ok) + 3
    figures = {"density": []}
    for i, a in enumerate(ok):
        progress(i, total, a.name)
        figures["density"].append((a.name, plots.scatter_density(a.name, a.samples)))
    progress(len(ok), total, "percentiles")
    figures["percentiles"] = plots.percentile_chart(ok)
    progress(len(ok) + 1, total, "rss")
    figures["rss"] = plots.rss_chart(ok, results.recorded_rss)
    progress(len(ok) + 2, total, "sizes")
    figures["sizes"] = plots.size_histogram(results.stats)
    progress(total, total, "done")
    with open(out, "w") as f:
        f.write(html.page(results, figures))


def main(argv=None):
    p = argparse.ArgumentParser(prog="allockit report")
    p.add_argument("folder")
    p.add_argument("-o", "--out", default="report.html")
    a = p.parse_args(argv)
    try:
        build(a.folder, a.out)
    except data.ResultsError as e:
        print(f"allockit report: {e}", file=sys.stderr)
        return 1
    print(f"allockit report: wrote {a.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
