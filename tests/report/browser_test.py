#!/usr/bin/env python3
"""The report as a user sees it: opened in headless Chromium (Debian's `chromium`), every plot
draws (the call-site flame graphs too), nothing is logged to the console, and a drag on the call timeline zooms every
allocator's row to the same time range. Saves a screenshot. Exits 77 (ctest: skipped) when
Chromium is not installed; scripts/install-deps.sh installs it, so CI never skips.
Usage: browser_test.py [SCREENSHOT.png]"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "report"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from allockit_report import __main__ as report  # noqa: E402
from test_report import add_call_sites, make_folder  # noqa: E402

# Collects errors before anything else on the page runs.
CATCH = """<script>window.__akErrors=[];window.addEventListener('error',function(e){
__akErrors.push('error: '+e.message);});(function(){var ce=console.error;console.error=function(){
__akErrors.push('console.error: '+[].join.call(arguments,' '));ce.apply(console,arguments);};})();
</script>"""

# After the page's own scripts: waits for the plots, checks each drew, drags across the timeline
# as a user would (mouse events on its drag layer), then writes the findings into the page.
CHECK = """<script>(function(){
function drew(id){var d=document.getElementById(id);var s=d&&d.querySelector('svg.main-svg');
 var r=s&&s.getBoundingClientRect();return !!(d&&d._fullLayout&&r&&r.width>0&&r.height>0&&
 d.querySelectorAll('.trace,.hm image,.imagelayer image,.heatmaplayer image').length>0);}
function fire(el,type,x,y){el.dispatchEvent(new MouseEvent(type,{bubbles:true,cancelable:true,
 clientX:x,clientY:y,buttons:type==='mouseup'?0:1,view:window}));}
function done(r){var p=document.createElement('pre');p.id='ak-result';p.textContent=JSON.stringify(r);
 document.body.appendChild(p);}
var t0=performance.now();
setTimeout(function(){
 var r={errors:__akErrors,drawn:{},opened_ms:performance.now()};
 ['percentiles','rss','density','sizes','lifetimes','flame_calls','flame_peak'].forEach(function(id){r.drawn[id]=drew(id);});
 var tb=document.querySelector('table.sortable');var th=tb.rows[0].cells[0];
 th.dispatchEvent(new MouseEvent('click',{bubbles:true}));
 r.sorted=[].slice.call(tb.rows,1).map(function(x){return x.cells[0].textContent;});
 var g=document.getElementById('density');
 r.before=g._fullLayout.xaxis.range.slice();
 var drag=g.querySelector('.nsewdrag');var b=drag.getBoundingClientRect();
 var y=b.top+b.height/2,x0=b.left+b.width*0.25,x1=b.left+b.width*0.5;
 fire(drag,'mousedown',x0,y);fire(document,'mousemove',x0+5,y);fire(document,'mousemove',x1,y);
 fire(document,'mouseup',x1,y);
 setTimeout(function(){var L=g._fullLayout;r.after=L.xaxis.range.slice();
  r.rss=document.getElementById('rss')._fullLayout.xaxis.range.slice();
  r.rows=Object.keys(L).filter(function(k){return /^xaxis\\d*$/.test(k);}).map(function(k){
   return L[k].range.slice();});done(r);},500);
},1500);})();</script>"""


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    return None


def run_chromium(exe, args, timeout=120):
    base = [exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--disable-dev-shm-usage", "--hide-scrollbars"]
    return subprocess.run(base + args, capture_output=True, text=True, timeout=timeout)


def main():
    exe = chromium()
    if not exe:
        print("SKIP: chromium is not installed (scripts/install-deps.sh installs Debian's)")
        return 77
    shot = sys.argv[1] if len(sys.argv) > 1 else None
    with tempfile.TemporaryDirectory() as d:
        folder = os.path.join(d, "results")
        os.makedirs(folder)
        make_folder(folder, names=("glibc", "allockit", "jemalloc"), n=200000)
        add_call_sites(folder)
        page = os.path.join(d, "report.html")
        assert report.main([folder, "-o", page]) == 0
        size = os.path.getsize(page)
        text = open(page, encoding="utf-8").read()
        probe = os.path.join(d, "probe.html")
        with open(probe, "w", encoding="utf-8") as f:
            f.write(text.replace("<head>", "<head>" + CATCH, 1).replace("</body>", CHECK + "</body>", 1))
        t = time.monotonic()
        out = run_chromium(exe, ["--virtual-time-budget=20000", "--dump-dom", "file://" + probe])
        wall = time.monotonic() - t
        m = re.search(r'<pre id="ak-result">(.*?)</pre>', out.stdout, re.S)
        if not m:
            print("FAIL: the page never reported (stderr follows)\n" + out.stderr[-3000:])
            return 1
        r = json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&"))
        print(f"page {size / 1e6:.2f} MB, plots drawn {r['drawn']}, chromium {wall:.1f} s, "
              f"x range {r['before']} -> {r['after']}")
        problems = []
        if r["errors"]:
            problems.append(f"console errors: {r['errors']}")
        problems += [f"plot {k} did not draw" for k, ok in r["drawn"].items() if not ok]
        lo0, hi0 = r["before"]
        lo1, hi1 = r["after"]
        if not (hi1 - lo1 < 0.6 * (hi0 - lo0) and lo1 > lo0):
            problems.append(f"dragging across the timeline did not zoom it: {r['before']} -> {r['after']}")
        if any(abs(a[0] - lo1) > 1e-9 or abs(a[1] - hi1) > 1e-9 for a in r["rows"]):
            problems.append(f"the allocators' rows do not share the zoomed time range: {r['rows']}")
        if any(abs(a - b) > 1e-6 * max(1.0, abs(b)) for a, b in zip(r["rss"], r["after"])):
            problems.append(f"the memory chart did not follow the timeline's zoom: {r['rss']}")
        if r["sorted"] != sorted(r["sorted"]):
            problems.append(f"a click on the allocator column did not sort the table: {r['sorted']}")
        if size > 10e6:
            problems.append(f"page is {size / 1e6:.1f} MB, above 10 MB")
        if shot:
            run_chromium(exe, ["--window-size=1200,2600", f"--screenshot={os.path.abspath(shot)}",
                               "--virtual-time-budget=20000", "file://" + page])
            if not os.path.exists(shot) or os.path.getsize(shot) < 10000:
                problems.append(f"no screenshot written to {shot}")
        for p in problems:
            print("FAIL: " + p)
        return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
