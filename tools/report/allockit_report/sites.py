"""The call-site view: flame graphs (icicles: callers above callees, width = allocations or bytes
live at the peak) laid out here as bars of one Plotly bar trace, and the tables of `allockit top`
(sites.json) and `allockit advise` (advice.json) when the results folder holds them."""
import html
import zlib

MIN_SHARE = 0.002  # nodes narrower than this share of the whole are not drawn
MAX_DEPTH = 24


def _tree(stacks, metric):
    """{label: [value, children]} from stacks of frames, outermost first."""
    root = [0, {}]
    for s in stacks:
        v = s.get(metric, 0)
        if v <= 0:
            continue
        root[0] += v
        node = root
        for label in s["frames"][:MAX_DEPTH]:
            child = node[1].setdefault(label, [0, {}])
            child[0] += v
            node = child
    return root


def _short(label):
    """A bar's text: the function without its parameters and template arguments, and its
    line (the hover has the whole frame)."""
    fn, _, where = label.partition(" (")
    depth, out = 0, []
    for ch in fn.split("(")[0]:
        depth += ch == "<"
        if depth == 0:
            out.append(ch)
        depth -= ch == ">" and depth > 0
    name = "".join(out)
    if len(name) > 40:
        name = name.split("::")[-1]
    line = where.rstrip(")").rsplit(":", 1)[-1] if where else ""
    return f"{name}:{line}" if line.isdigit() else name


def _colour(label):
    """A stable warm colour per function (the part before its file and line)."""
    h = zlib.crc32(label.split(" (")[0].encode()) % 360
    return f"hsl({20 + h % 40},{60 + h % 30}%,{55 + h % 20}%)"


def flame_figure(stacks, metric, title, unit):
    """An icicle of `stacks` weighted by `metric` ("calls" or "peak_bytes")."""
    root = _tree(stacks, metric)
    total = root[0]
    xs, bases, ys, texts, hovers, colours = [], [], [], [], [], []

    def place(label, node, depth, offset):
        value = node[0]
        xs.append(value)
        bases.append(offset)
        ys.append(depth)
        texts.append(_short(label))
        share = 100.0 * value / total if total else 0
        hovers.append(f"{html.escape(label)}<br>{value:,} {unit} ({share:.1f}%)")
        colours.append("#bbbbbb" if depth == 0 else _colour(label))
        at = offset
        for child_label, child in sorted(node[1].items(), key=lambda kv: -kv[1][0]):
            if child[0] >= total * MIN_SHARE:
                place(child_label, child, depth + 1, at)
            at += child[0]

    if total:
        place("all", root, 0, 0)
    depth = max(ys) + 1 if ys else 1
    return {"data": [{"type": "bar", "orientation": "h", "x": xs, "base": bases, "y": ys,
                      "text": texts, "hovertext": hovers, "hoverinfo": "text",
                      "textposition": "inside", "insidetextanchor": "start",
                      "marker": {"color": colours, "line": {"color": "white", "width": 0.5}},
                      "width": 0.95}],
            "layout": {"title": {"text": title}, "height": 120 + 24 * depth, "bargap": 0,
                       "uniformtext": {"mode": "hide", "minsize": 9}, "showlegend": False,
                       "xaxis": {"title": {"text": unit}, "range": [0, total or 1]},
                       "yaxis": {"autorange": "reversed", "showticklabels": False,
                                 "title": {"text": "callers above callees"}},
                       "margin": {"l": 40, "r": 20, "t": 40, "b": 50}}}


def _bytes(b):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= 10 * div:
            return f"{b / div:.1f} {unit}"
    return f"{b} B"


def _ns(v):
    return f"{v / 1e6:.2f} ms" if v >= 1e6 else f"{v / 1e3:.1f} us" if v >= 1e4 else f"{v:.0f} ns"


def top_table(sites):
    """`allockit top` (sites.json): one row per call site."""
    rows = []
    peak = sites.get("peak_bytes", 0) or 1
    for s in sites.get("sites", []):
        sizes = ", ".join(f"{size} B x{n}" for size, n in s.get("common_sizes", []))
        rows.append(f"<tr><td>{html.escape(s['name'])}</td><td>{s['calls']}</td><td>{_bytes(s['bytes'])}</td>"
                    f"<td>{_bytes(s['peak_bytes'])}</td><td>{100.0 * s['peak_bytes'] / peak:.1f}%</td>"
                    f"<td>{s['temporary']}</td><td>{_bytes(s['leaked_bytes'])}</td>"
                    f"<td>{_ns(s['median_lifetime_ns'])}</td><td class='text'>{html.escape(sizes)}</td></tr>")
    return ("<table class='sortable'><tr><th>site</th><th>calls</th><th>bytes</th><th>at peak</th>"
            "<th>peak share</th><th>temporary</th><th>leaked</th><th>median lifetime</th>"
            f"<th>common sizes</th></tr>{''.join(rows)}</table>")


def advice_table(advice):
    """`allockit advise` (advice.json): each hot site's pattern, change and measured effect."""
    rows = []
    for s in advice.get("sites", []):
        if "before" in s:
            b, a = s["before"], s["after"]
            measured = (f"{_ns(b['p50'])} / {_ns(b['p99'])} / {_ns(b['p99.9'])} &rarr; "
                        f"{_ns(a['p50'])} / {_ns(a['p99'])} / {_ns(a['p99.9'])}")
            rss = f"{s['rss_before'] / 1048576:.2f} &rarr; {s['rss_after'] / 1048576:.2f}"
        else:
            measured = html.escape(s.get("not_routed") or "not measured")
            rss = "-"
        rows.append(f"<tr><td>{html.escape(s['site'])}</td><td>{s['calls']}</td>"
                    f"<td class='text'>{html.escape(s['pattern'])}</td>"
                    f"<td class='text'>{html.escape(s['change'] or s['why'])}</td>"
                    f"<td>{measured}</td><td>{rss}</td></tr>")
    m = advice.get("measured")
    note = ""
    if m:
        b, a = m["before"], m["after"]
        note = (f"<p class='note'>All advice taken ({html.escape(m['allocator'])}, {m['runs']} run(s)): every call "
                f"p50 / p99 / p99.9 {_ns(b['p50'])} / {_ns(b['p99'])} / {_ns(b['p99.9'])} &rarr; "
                f"{_ns(a['p50'])} / {_ns(a['p99'])} / {_ns(a['p99.9'])}; peak RSS "
                f"{m['rss_before'] / 1048576:.2f} &rarr; {m['rss_after'] / 1048576:.2f} MiB. Semantics "
                f"{'kept' if m['verified'] else 'NOT kept'}: {html.escape(m['check'])}.</p>")
    return (note + "<table><tr><th>site</th><th>calls</th><th>pattern</th><th>change</th>"
            "<th>its calls p50 / p99 / p99.9</th><th>peak RSS MiB</th></tr>" + "".join(rows) + "</table>")
