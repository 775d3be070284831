"""The plotting library the page embeds: Plotly's cartesian bundle (npm plotly.js-cartesian-dist-min,
1.5 MB minified: scatter, bar and heatmap, with zoom, pan and tooltips). Debian's python3-plotly
carries only the unminified full library (8.6 MB), which would push a report past 10 MB, so
scripts/install-deps.sh installs the bundle from npm into tools/report/node_modules, and an install
copies it next to this package (vendor/)."""
import os

BUNDLE = "plotly-cartesian.min.js"
_HERE = os.path.dirname(os.path.abspath(__file__))
_PLACES = [os.path.join(_HERE, "vendor", BUNDLE),
           os.path.join(_HERE, "..", "node_modules", "plotly.js-cartesian-dist-min", BUNDLE)]


class MissingAsset(Exception):
    """The plotting library is not where the report looks; the message says how to get it."""


def plotly_js():
    """The bundle's text. ALLOCKIT_PLOTLY_JS names another copy."""
    places = ([os.environ["ALLOCKIT_PLOTLY_JS"]] if os.environ.get("ALLOCKIT_PLOTLY_JS") else []) + _PLACES
    for p in places:
        if os.path.isfile(p):
            with open(p, encoding="utf-8") as f:
                return f.read()
    raise MissingAsset("the plotting library " + BUNDLE + " is missing (looked in " +
                       ", ".join(os.path.normpath(p) for p in places) +
                       "); run scripts/install-deps.sh, or set ALLOCKIT_PLOTLY_JS to a copy of it")
