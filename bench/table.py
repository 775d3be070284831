"""Markdown rendering shared by the suites' table modules: a header with the provenance of the
run, the target verdicts, then one ratio table per benchmark group."""
from collections import defaultdict


def by_group(rows):
    groups = defaultdict(dict)
    for r in rows:
        groups[r["group"]][r["contender"]] = r
    return groups


def fmt_ns(ns):
    for unit, div in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if ns >= div:
            return f"{ns / div:.3g} {unit}"
    return f"{ns:.3g} ns"


def header(doc, title):
    """The title and the run's provenance: command, machine, build, versions."""
    return [f"# {title}", "", f"Command: `{doc['command']}`  ", f"Machine: {doc['machine']}  ",
            f"Build: {doc['build_type']}  ",
            "Versions: " + ", ".join(f"{k} {v}" for k, v in doc["versions"].items()), ""]


def targets_table(targets):
    """targets: [(name, measured text, ok)]."""
    return ["## Targets", "", "| target | measured | met |", "|---|---|---|"] + [
        f"| {name} | {measured} | {'yes' if ok else '**no**'} |" for name, measured, ok in targets]


def render(doc, title, intro, targets, ref_of, extra_of, extra_header):
    """targets: [(name, measured, ok)]; ref_of(group) -> reference contender; extra_of(row) -> str."""
    lines = header(doc, title) + intro + [""] + targets_table(targets) + ["", "## Timings", ""]
    for group, rows in sorted(by_group(doc["timings"]).items()):
        ref = rows.get(ref_of(group))
        lines += [f"### {group}", "", f"| contender | time | ratio | {extra_header(group)} |",
                  "|---|---|---|---|"]
        for c, r in sorted(rows.items(), key=lambda kv: kv[1]["time_ns"]):
            ratio = f"{r['time_ns'] / ref['time_ns']:.2f}" if ref else "-"
            lines.append(f"| {c} | {fmt_ns(r['time_ns'])} | {ratio} | {extra_of(r)} |")
        lines.append("")
    return lines
