"""The report package on synthetic results folders: plots are produced, the page is well formed
and self-contained, and damaged inputs get an error naming the file."""
import html.parser
import json
import os
import re
import struct
import tempfile
import unittest

import numpy as np

from allockit_report import __main__ as report
from allockit_report import data

PCT = ["best", "p1", "p10", "p25", "p50", "p75", "p90", "p95", "p98", "p99", "p99.9", "p99.99",
       "p99.999", "worst"]


def write_samples(path, n, seed=1):
    rng = np.random.default_rng(seed)
    lat = rng.lognormal(3.5, 1.0, n).astype("<u4")
    t_us = np.sort(rng.integers(0, 200000, n)).astype("<u4")
    size = rng.integers(1, 1 << 16, n).astype("<u4")
    kind = rng.integers(0, 4, n).astype("u1")
    with open(path, "wb") as f:
        f.write(b"AKSAMP01" + struct.pack("<Q", n))
        for col in (lat, t_us, size, kind):
            f.write(col.tobytes())


def add_call_sites(root):
    """The call-site files of a journal recorded with --stack, and an advise result."""
    stacks = [{"frames": ["_start", "main (a.c:10)", "parse (a.c:40)"], "calls": 600, "peak_bytes": 4096},
              {"frames": ["_start", "main (a.c:10)", "emit (a.c:70)"], "calls": 300, "peak_bytes": 0},
              {"frames": ["_start", "main (a.c:12)"], "calls": 100, "peak_bytes": 1024},
              {"frames": ["_start", "tiny (a.c:99)"], "calls": 1, "peak_bytes": 0}]
    with open(os.path.join(root, "stacks.json"), "w") as f:
        json.dump({"stacks": stacks}, f)
    site = {"name": "parse (a.c:40) <b>", "frames": [], "calls": 600, "bytes": 9600, "peak_bytes": 4096,
            "peak_blocks": 4, "temporary": 10, "leaked_blocks": 0, "leaked_bytes": 0,
            "median_lifetime_ns": 1500, "common_sizes": [[16, 600]]}
    with open(os.path.join(root, "sites.json"), "w") as f:
        json.dump({"calls": 1001, "bytes": 20000, "peak_bytes": 5120, "peak_at_s": 0.5, "sites": [site]}, f)
    summary = {"count": 1200, "mean_ns": 30, "p50": 22, "p99": 80, "p99.9": 300}
    advice = {"allocations": 1001, "sites": [
        {"site": "parse (a.c:40)", "calls": 600, "bytes": 9600, "pattern": "fixed-size churn", "why": "w",
         "change": "take them from an ak::ObjectPool<T>", "not_routed": "", "route": 1,
         "before": summary, "after": dict(summary, p50=18), "rss_before": 1 << 20, "rss_after": 1 << 19},
        {"site": "emit (a.c:70)", "calls": 300, "bytes": 100, "pattern": "realloc growth", "why": "w",
         "change": "reserve 1 KiB", "not_routed": "a reserve changes the sizes asked for", "route": 0}],
        "measured": {"allocator": "glibc", "runs": 3, "before": summary, "after": summary,
                     "rss_before": 1 << 20, "rss_after": 1 << 19, "verified": True, "check": "counts agree"}}
    with open(os.path.join(root, "advice.json"), "w") as f:
        json.dump(advice, f)


def make_folder(root, names=("glibc", "allockit"), n=5000):
    results = []
    for i, name in enumerate(names):
        os.makedirs(os.path.join(root, name))
        write_samples(os.path.join(root, name, "samples.bin"), n, seed=i)
        with open(os.path.join(root, name, "rss.csv"), "w") as f:
            f.write("".join(f"{t:.3f},{t * 1000}\n" for t in range(100)))
        kinds = {"all": dict({p: 10.0 * (j + 1) for j, p in enumerate(PCT)}, count=n, mean_ns=42.0)}
        results.append({"allocator": name, "library": "system", "ok": True, "ops": n, "wall_s": 0.1,
                        "touch_s": 0, "timer_floor_ns": {"min": 20, "mean": 21},
                        "peak_rss_bytes": 1 << 20, "peak_live_bytes": 1 << 19, "overhead": 2.0,
                        "kinds": kinds})
    results.append({"allocator": "broken", "library": "/x.so", "ok": False, "error": "killed <b>"})
    with open(os.path.join(root, "compare.json"), "w") as f:
        json.dump({"journal": "j.akj", "command": "prog <arg>", "ops": n, "threads": 1, "speed": 0,
                   "touch": "none", "repeat": 1, "recorded_allocator": "glibc", "results": results}, f)
    with open(os.path.join(root, "stats.json"), "w") as f:
        json.dump({"calls": {"malloc": n}, "size_histogram": {"<=8": 3, "<=16": 9},
                   "lifetime_histogram": {"<100 ns": 4, "<1 us": 7, "leaked": 1},
                   "allocations": n}, f)


class TagChecker(html.parser.HTMLParser):
    VOID = {"meta", "img", "br", "hr", "link", "input"}

    def __init__(self):
        super().__init__()
        self.stack, self.errors = [], []

    def handle_starttag(self, tag, attrs):
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"unexpected </{tag}>, open: {self.stack[-3:]}")
        else:
            self.stack.pop()


class ReportTest(unittest.TestCase):
    def test_page_is_well_formed_and_self_contained(self):
        with tempfile.TemporaryDirectory() as d:
            make_folder(d)
            out = os.path.join(d, "report.html")
            self.assertEqual(report.main([d, "-o", out]), 0)
            page = open(out).read()
        checker = TagChecker()
        checker.feed(page)
        self.assertEqual(checker.errors, [])
        self.assertEqual(checker.stack, [])
        # Five figures, each a div and a Plotly specification; the library inline, nothing loaded
        # from elsewhere when the page is viewed.
        self.assertEqual(re.findall(r'<div class="plot" id="(\w+)">', page),
                         ["percentiles", "rss", "density", "sizes", "lifetimes"])
        self.assertIn("Plotly.newPlot", page)
        self.assertIsNone(re.search(r"<(script|img|link|iframe)[^>]*\s(src|href)=", page))
        specs = json.loads(re.search(r"var figs=(\[.*?\]);var cfg", page, re.S).group(1))
        density = dict(specs)["density"]
        self.assertEqual([t["name"] for t in density["data"]], ["glibc", "allockit"])
        self.assertEqual(density["layout"]["xaxis2"]["matches"], "x")  # one shared time axis
        self.assertIn("prog &lt;arg&gt;", page)
        self.assertIn("failed: killed &lt;b&gt;", page)

    def test_fidelity_is_stated_and_the_recorded_curve_drawn(self):
        with tempfile.TemporaryDirectory() as d:
            make_folder(d)
            out = os.path.join(d, "report.html")
            report.main([d, "-o", out])
            self.assertIn("Fidelity unknown: the journal has no memory samples", open(out).read())
            c = json.load(open(os.path.join(d, "compare.json")))
            c["fidelity"] = {"state": "measured", "allocator": "glibc", "recorded_peak_bytes": 4 << 20,
                             "replayed_peak_bytes": 5 << 20, "ratio": 1.25, "largest_gap_bytes": 1 << 20}
            json.dump(c, open(os.path.join(d, "compare.json"), "w"))
            with open(os.path.join(d, "recorded_rss.csv"), "w") as f:
                f.write("".join(f"{t:.3f},{t * 2000}\n" for t in range(50)))
            results = data.load(d)
            self.assertEqual(results.recorded_rss.shape, (50, 2))
            report.main([d, "-o", out])
            page = open(out).read()
        self.assertIn("peak heap RssAnon recorded 4.00 MiB, replayed 5.00 MiB (1.25x)", page)

    def test_call_sites_flame_graphs_and_tables(self):
        with tempfile.TemporaryDirectory() as d:
            make_folder(d)
            add_call_sites(d)
            out = os.path.join(d, "report.html")
            self.assertEqual(report.main([d, "-o", out]), 0)
            page = open(out).read()
        self.assertEqual(re.findall(r'<div class="plot" id="(\w+)">', page)[-2:], ["flame_calls", "flame_peak"])
        specs = dict(json.loads(re.search(r"var figs=(\[.*?\]);var cfg", page, re.S).group(1)))
        bars = specs["flame_calls"]["data"][0]
        nodes = {(y, t): (x, b) for x, b, y, t in zip(bars["x"], bars["base"], bars["y"], bars["text"])}
        # Callers above callees, each as wide as the allocations under it, children side by side.
        self.assertEqual(nodes[(0, "all")], (1001, 0))
        # Bars read "function:line"; the hover has the whole frame.
        self.assertEqual(nodes[(2, "main:10")], (900, 0))
        self.assertEqual(nodes[(3, "parse:40")], (600, 0))
        self.assertEqual(nodes[(3, "emit:70")], (300, 600))
        self.assertEqual(nodes[(2, "main:12")], (100, 900))
        self.assertNotIn((2, "tiny:99"), nodes)  # under 0.2% of the whole: not drawn
        self.assertIn("parse (a.c:40)", bars["hovertext"][3])
        from allockit_report import sites
        self.assertEqual(sites._short("std::vector<int, std::allocator<int> >::push_back(int const&) "
                                      "(/usr/include/c++/12/bits/stl_vector.h:1287)"), "std::vector::push_back:1287")
        self.assertEqual(sites._short("libz.so.1+0x3f2a"), "libz.so.1+0x3f2a")
        peak = specs["flame_peak"]["data"][0]
        self.assertEqual(peak["x"][0], 5120)
        self.assertIn("parse (a.c:40) &lt;b&gt;", page)  # the top table, escaped
        self.assertIn("take them from an ak::ObjectPool&lt;T&gt;", page)
        self.assertIn("a reserve changes the sizes asked for", page)
        self.assertIn("Semantics kept: counts agree", page)

    def test_density_bins_every_sample(self):
        n = 20000
        rng = np.random.default_rng(3)
        from allockit_report import plots
        count, mean = plots.density_grid(rng.integers(0, 10**6, n), rng.integers(1, 10**5, n),
                                         rng.integers(1, 4096, n), 1000.0, 10.0, 1e6)
        self.assertEqual(count.shape, (5 * plots.BINS_PER_DECADE, plots.TIME_BINS))
        self.assertEqual(count.sum(), n)
        self.assertTrue(((mean > 0) == (count > 0)).all())

    def test_a_missing_plotting_library_is_named(self):
        with tempfile.TemporaryDirectory() as d:
            make_folder(d, names=("glibc",))
            old = os.environ.get("ALLOCKIT_PLOTLY_JS")
            os.environ["ALLOCKIT_PLOTLY_JS"] = "/nonexistent/plotly.js"
            from allockit_report import assets
            saved, assets._PLACES = assets._PLACES, []
            try:
                with self.assertRaisesRegex(assets.MissingAsset, "install-deps.sh"):
                    assets.plotly_js()
                self.assertEqual(report.main([d, "-o", os.path.join(d, "r.html")]), 1)
            finally:
                assets._PLACES = saved
                if old is None:
                    del os.environ["ALLOCKIT_PLOTLY_JS"]
                else:
                    os.environ["ALLOCKIT_PLOTLY_JS"] = old

    def test_damaged_samples_name_the_file(self):
        with tempfile.TemporaryDirectory() as d:
            make_folder(d, names=("glibc",))
            path = os.path.join(d, "glibc", "samples.bin")
            with open(path, "r+b") as f:
                f.truncate(100)
            with self.assertRaisesRegex(data.ResultsError, "samples.bin.*after offset 16"):
                data.load(d)
            self.assertEqual(report.main([d, "-o", os.path.join(d, "r.html")]), 1)

    def test_missing_folder_is_a_clear_error(self):
        with self.assertRaisesRegex(data.ResultsError, "compare.json: missing"):
            data.load("/nonexistent-folder")


if __name__ == "__main__":
    unittest.main()
