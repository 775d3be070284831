#!/usr/bin/env python3
"""`make bench-trace` (its call-site part): issue 12's figures. Writes bench/results/sites.{json,md}.
- recording with call stacks: wall time of each program alone, under `allockit record --stack N`
  for N = 0, 4, 8 (the default), 16, 64, with `--unwind fp`, and under heaptrack, interleaved,
  median of 5; journal bytes per event at the default;
- `allockit top` on a journal of at least 10M events, and on a program with 10,000 distinct call
  stacks (each symbolised through libdw), best of 3;
- `allockit advise` on the demo's python3 run and on two programs of this repository's own
  (bench/trace/parser_workload.cpp, server_workload.cpp): each site, its advice and the measured
  change of its calls and of peak RSS (glibc, 3 interleaved runs)."""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import benchlib  # noqa: E402
import table  # noqa: E402

DEPTHS = (0, 4, 8, 16, 64)


def wall(cmd, env=None):
    t = time.perf_counter()
    subprocess.run(cmd, env=env, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t


def recording(ak, tmp, name, cmd, env, runs=5):
    journal = os.path.join(tmp, name + ".akj")
    variants = {"native": lambda: wall(cmd, env)}
    for n in DEPTHS:
        variants[f"--stack {n}"] = (lambda n=n: wall([ak, "record", "-o", f"{journal}.{n}", "--stack", str(n),
                                                      "--"] + cmd, env))
    variants["--unwind fp"] = lambda: wall([ak, "record", "-o", journal + ".fp", "--unwind", "fp", "--"] + cmd, env)
    if shutil.which("heaptrack"):
        variants["heaptrack"] = lambda: wall(["heaptrack", "-o", os.path.join(tmp, name + ".ht")] + cmd, env)
    times = {k: [] for k in variants}
    for _ in range(runs):
        for k, f in variants.items():
            for stale in os.listdir(tmp):
                if stale.startswith(name + ".akj.") or stale.startswith(name + ".ht"):
                    os.remove(os.path.join(tmp, stale))
            times[k].append(f())
    subprocess.run([ak, "record", "-o", journal, "--"] + cmd, env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    stats = json.loads(subprocess.run([ak, "stats", "--json", journal], check=True, capture_output=True,
                                      text=True).stdout)
    med = {k: statistics.median(v) for k, v in times.items()}
    return {"program": name, "command": " ".join(cmd), "events": stats["events"], "median_s": med,
            "ratio": {k: med[k] / med["native"] for k in med},
            "bytes_per_event": os.path.getsize(journal) / stats["events"], "journal": journal}


def stacks_program(tmp):
    """A program with 10,000 distinct call stacks and as many distinct return addresses: 100
    callers, each calling each of 100 allocating callees from a call site of its own."""
    n = 100
    src = ["#include <cstdlib>"]
    src += [f"__attribute__((noinline)) void* b{j}(unsigned long n) {{ void* volatile p = malloc(n + {j}); "
            "return p; }" for j in range(n)]
    src += [f"__attribute__((noinline)) void a{i}() {{ " + " ".join(f"free(b{j}(16));" for j in range(n)) + " }"
            for i in range(n)]
    src.append("typedef void (*A)(); A as[] = {" + ", ".join(f"a{i}" for i in range(n)) + "};")
    src.append("int main() { for (int r = 0; r < 3; ++r) for (A a : as) a(); return 0; }")
    path = os.path.join(tmp, "stacks_program.cpp")
    open(path, "w").write("\n".join(src) + "\n")
    exe = os.path.join(tmp, "stacks_program")
    subprocess.run(["g++", "-O1", "-g", "-o", exe, path], check=True)
    return exe


def best_of(cmd, runs=3):
    return min(wall(cmd) for _ in range(runs))


def advise(ak, journal, out):
    subprocess.run([ak, "advise", journal, "--out", out, "--repeat", "3"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return json.load(open(os.path.join(out, "advice.json")))


def fmt_pct(s):
    return f"{s['p50']:.0f} / {s['p99']:.0f} / {s['p99.9']:.0f}"


def render(doc):
    lines = table.header(doc, "Call sites: recording, top and advise (issue 12)") + table.targets_table(
        [(t["target"], t["measured"], t["met"]) for t in doc["targets"]])
    cols = [f"--stack {n}" for n in DEPTHS] + ["--unwind fp", "heaptrack"]
    lines += ["", "## Recording with call stacks (median wall time of 5 interleaved runs, / the program alone)", "",
              "| program | events | native s | " + " | ".join(cols) + " | bytes/event (8 frames) |",
              "|---|---:|---:|" + "---:|" * len(cols) + "---:|"]
    for r in doc["recording"]:
        cells = [f"{r['ratio'][c]:.2f}x" if c in r["ratio"] else "-" for c in cols]
        lines.append(f"| {r['program']} | {r['events']} | {r['median_s']['native']:.3f} | " + " | ".join(cells) +
                     f" | {r['bytes_per_event']:.2f} |")
    lines += ["", "`--stack 8` is the default. `--unwind fp` walks frame pointers (8 frames): cheaper, but a "
              "caller of code built without them (Debian's libc, libstdc++, python3) is lost.", "",
              "## top", "", "| journal | events | distinct stacks | `allockit top` s (best of 3) |", "|---|---:|---:|---:|"]
    for t in doc["top"]:
        lines.append(f"| {t['journal']} | {t['events']} | {t['stacks']} | {t['seconds']:.2f} |")
    lines += ["", "## advise (glibc, 3 interleaved runs of each replay)", "",
              "Each site's calls (its allocations and frees), p50 / p99 / p99.9 ns, as recorded -> with the advice "
              "taken; peak RSS of the replay with that site alone routed.", "",
              "| program | site | calls | pattern | advice | its calls before -> after | peak RSS MiB |",
              "|---|---|---:|---|---|---|---|"]
    for a in doc["advise"]:
        for s in a["sites"]:
            measured = (f"{fmt_pct(s['before'])} -> {fmt_pct(s['after'])}" if "before" in s
                        else (s["not_routed"] or "-"))
            rss = f"{s['rss_before'] / 1048576:.2f} -> {s['rss_after'] / 1048576:.2f}" if "before" in s else "-"
            change = (s["change"] or s["why"]).replace("|", "/")
            lines.append(f"| {a['program']} | {s['site']} | {s['calls']} | {s['pattern']} | {change} | "
                         f"{measured} | {rss} |")
        m = a.get("measured")
        if m:
            lines.append(f"| {a['program']} | **all advice taken** | | | semantics "
                         f"{'kept' if m['verified'] else 'NOT kept'} | {fmt_pct(m['before'])} -> "
                         f"{fmt_pct(m['after'])} | {m['rss_before'] / 1048576:.2f} -> {m['rss_after'] / 1048576:.2f} |")
    return "\n".join(lines) + "\n"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default="build")
    p.add_argument("--out", default="bench/results")
    a = p.parse_args()
    build = os.path.abspath(a.build)
    ak = os.path.join(build, "allockit")
    workloads = os.path.join(build, "bench", "malloc_workloads")
    py = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else shutil.which("python3")
    with tempfile.TemporaryDirectory() as tmp:
        parser = os.path.join(tmp, "parser_workload")
        server = os.path.join(tmp, "server_workload")
        subprocess.run(["g++", "-O2", "-g", "-o", parser, os.path.join(HERE, "trace", "parser_workload.cpp")], check=True)
        subprocess.run(["g++", "-O2", "-g", "-o", server, os.path.join(HERE, "trace", "server_workload.cpp"),
                        "-lpthread"], check=True)
        progs = [("python3 demo_workload.py (4 threads)", [py, os.path.join(HERE, "trace", "demo_workload.py")],
                  {"PYTHONMALLOC": "malloc"}),
                 ("malloc_workloads larson 0.05", [workloads, "larson", "0.05"], {}),
                 ("malloc_workloads xmalloc 0.02", [workloads, "xmalloc", "0.02"], {}),
                 ("parser_workload", [parser], {})]
        rec = []
        for name, cmd, env in progs:
            print(f"+ recording: {name}", flush=True)
            rec.append(recording(ak, tmp, f"p{len(rec)}", cmd, dict(os.environ, **env)))
            rec[-1]["program"] = name
        print("+ top", flush=True)
        big = os.path.join(tmp, "larson-big.akj")
        subprocess.run([ak, "record", "-o", big, "--", workloads, "larson", "0.09"], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        exe = stacks_program(tmp)
        many = os.path.join(tmp, "stacks.akj")
        subprocess.run([ak, "record", "-o", many, "--", exe], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        top = []
        for label, j, depth in (("larson 0.09 (2 threads)", big, "1"), ("10,000 distinct stacks, 8 frames each", many, "8")):
            events = json.loads(subprocess.run([ak, "stats", "--json", j], check=True, capture_output=True,
                                               text=True).stdout)["events"]
            sites = json.loads(subprocess.run([ak, "top", j, "--json", "--stack-depth", depth, "-n", "100000"],
                                              check=True, capture_output=True, text=True).stdout)["sites"]
            top.append({"journal": label, "events": events, "stacks": len(sites),
                        "seconds": best_of([ak, "top", j, "--stack-depth", depth, "-n", "20"])})
        print("+ advise", flush=True)
        server_journal = os.path.join(tmp, "server.akj")
        subprocess.run([ak, "record", "-o", server_journal, "--", server], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        adv = []
        for label, j in (("python3 demo", rec[0]["journal"]), ("parser_workload", rec[3]["journal"]),
                         ("server_workload", server_journal)):
            doc = advise(ak, j, os.path.join(tmp, "adv-" + label.split()[0]))
            doc["program"] = label
            adv.append(doc)
        for r in rec:
            r.pop("journal", None)
        worst = max(r["ratio"]["--stack 8"] for r in rec)
        size = max(r["bytes_per_event"] for r in rec)
        big_top = top[0]
        targets = [
            {"target": "recording with 8 frames (the default) <= 2.0x each program", "measured": f"{worst:.2f}x (worst)",
             "met": worst <= 2.0},
            {"target": "journal with stacks <= 10 bytes per event", "measured": f"{size:.2f} (largest)",
             "met": size <= 10},
            {"target": "top on a journal of >= 10M events <= 5 s",
             "measured": f"{big_top['seconds']:.2f} s ({big_top['events'] / 1e6:.1f}M events)",
             "met": big_top["seconds"] <= 5 and big_top["events"] >= 10e6},
            {"target": "symbolising 10,000 distinct stacks <= 5 s",
             "measured": f"{top[1]['seconds']:.2f} s ({top[1]['stacks']} stacks)",
             "met": top[1]["seconds"] <= 5 and top[1]["stacks"] >= 10000},
            {"target": "advise names the sites and measures each advised change (3 programs)",
             "measured": ", ".join(f"{d['program']}: {sum(1 for s in d['sites'] if 'before' in s)} measured, "
                                   f"semantics {'kept' if d.get('measured', {}).get('verified') else 'NOT kept'}"
                                   for d in adv),
             "met": all(d.get("measured", {}).get("verified") for d in adv)},
        ]
        doc = benchlib.result_doc(sys.argv, [], "make bench-trace", recording=rec, top=top, advise=adv,
                                  targets=targets)
        benchlib.write_results(a.out, "sites", doc, render(doc))


if __name__ == "__main__":
    main()
