#!/usr/bin/env python3
"""Real programs under each allocator, as mimalloc-bench runs its program benchmarks (lua, redis,
ruby, z3, ghostscript): Debian's own binaries, each allocator preloaded, one process per run, the
allocators taking turns in a rotating order each round. Written to bench/results/programs.{json,md}.

Each program runs under bench/programs/measure (CPU time and peak RSS of the program alone, from
wait4). The cell is the median over rounds; `paired` is the median over rounds of allockit's CPU
time over that allocator's in the same round (load that drifts between rounds cancels). CPU time
(user + system), not wall time: two shared cores, and redis's client runs beside its server.
redis: the server is the measured program (a Unix socket, no persistence); redis-benchmark drives
it with pipelined requests of eight kinds and is not preloaded."""
import argparse
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
import table  # noqa: E402
from run_malloc_bench import geomean, middle, paired_ratios  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
INPUTS = os.path.join(HERE, "programs")
# The Debian packages the programs come from (scripts/install-deps.sh --programs installs them).
PACKAGES = {"lua5.4": "lua5.4", "ruby": "ruby", "perl": "perl", "sqlite3": "sqlite3", "z3": "z3",
            "gs": "ghostscript", "redis-server": "redis-server", "redis-benchmark": "redis-tools"}
PROGRAMS = {"lua trees": ["lua5.4"], "lua tables": ["lua5.4"], "lua strings": ["lua5.4"],
            "ruby objects": ["ruby"], "perl hashes": ["perl"], "sqlite rows": ["sqlite3"],
            "z3 search": ["z3"], "gs render": ["gs"],
            "redis server": ["redis-server", "redis-benchmark"]}  # name -> executables it needs


def z3_problem(path, variables=14, problems=6):
    """Six satisfiability problems over 14 bounded integers, all different, under random pairwise
    constraints (each unsatisfiable, found by search: z3's clause and term allocations)."""
    lines = ["(set-logic QF_LIA)"]
    lines += [f"(declare-fun x{i} () Int)" for i in range(variables)]
    lines += [f"(assert (and (>= x{i} 0) (<= x{i} {variables})))" for i in range(variables)]
    for seed in range(problems):
        rng = random.Random(seed)
        lines.append("(push 1)")
        for _ in range(variables * 3):
            a, b, c = rng.sample(range(variables), 3)
            lines.append(f"(assert (or (< (+ x{a} x{b}) {rng.randint(variables // 2, variables)}) "
                         f"(> (- x{c} x{a}) {rng.randint(-5, 5)})))")
        lines.append(f"(assert (distinct {' '.join(f'x{i}' for i in range(variables))}))")
        lines += ["(check-sat)", "(pop 1)"]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def commands(tmp, scale):
    """name -> argv (or "redis", run by run_redis), for every name of PROGRAMS; the z3 problem is
    written into `tmp`. `scale` multiplies each program's work."""
    z3_problem(os.path.join(tmp, "problem.smt2"))
    lua = os.path.join(INPUTS, "lua_churn.lua")
    return {
        "lua trees": ["lua5.4", lua, "trees", str(scale)],
        "lua tables": ["lua5.4", lua, "tables", str(scale)],
        "lua strings": ["lua5.4", lua, "strings", str(scale)],
        "ruby objects": ["ruby", os.path.join(INPUTS, "ruby_objects.rb"), str(int(400_000 * scale))],
        "perl hashes": ["perl", os.path.join(INPUTS, "perl_hashes.pl"), str(int(600_000 * scale))],
        "sqlite rows": ["sqlite3", ":memory:", ".read " + os.path.join(INPUTS, "sqlite_rows.sql")],
        "z3 search": ["z3", os.path.join(tmp, "problem.smt2")],
        "gs render": ["gs", "-q", "-dNOPAUSE", "-dBATCH", "-dSAFER", "-sDEVICE=ppmraw", "-r300",
                      "-sOutputFile=/dev/null", os.path.join(INPUTS, "gs_paths.ps")],
        "redis server": "redis",
    }


def measured(measure, preload, argv, **popen):
    return subprocess.Popen([measure, preload or "-"] + argv, stdout=subprocess.PIPE, text=True,
                            **popen)


def result_of(proc, name):
    out, _ = proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"{name}: exit status {proc.returncode}")
    r = json.loads(out)
    return {"cpu_s": r["user"] + r["sys"], "wall_s": r["wall"], "peak_rss_kib": r["maxrss_kib"]}


def run_redis(measure, preload, tmp, scale):
    """The server under `preload`, driven by redis-benchmark through a Unix socket, then shut
    down: the server's own CPU time and peak RSS."""
    sock = os.path.join(tmp, "redis.sock")
    if os.path.exists(sock):
        os.unlink(sock)
    server = measured(measure, preload, ["redis-server", "--port", "0", "--unixsocket", sock,
                                         "--save", "", "--appendonly", "no", "--daemonize", "no"],
                      start_new_session=True)  # a group of its own: launcher and server
    try:
        deadline = time.time() + 10
        while not os.path.exists(sock):
            if server.poll() is not None or time.time() > deadline:
                raise SystemExit("redis server: did not start")
            time.sleep(0.01)
        requests = str(int(100_000 * scale))
        subprocess.run(["redis-benchmark", "-s", sock, "-n", requests, "-P", "16", "-q", "-r",
                        "100000", "-d", "100", "-t", "set,get,lpush,lpop,lrange_100,hset,sadd,zadd"],
                       check=True, stdout=subprocess.DEVNULL)
        with socket.socket(socket.AF_UNIX) as s:  # SHUTDOWN NOSAVE, without redis-cli
            s.connect(sock)
            s.sendall(b"*2\r\n$8\r\nSHUTDOWN\r\n$6\r\nNOSAVE\r\n")
            s.recv(64)
    except BaseException:
        os.killpg(server.pid, signal.SIGKILL)  # no server left behind
        server.communicate()
        raise
    return result_of(server, "redis server")


def run_all(build, allocators, names, rounds, scale):
    measure = os.path.abspath(os.path.join(build, "bench", "measure"))
    cells = {}
    with tempfile.TemporaryDirectory() as tmp:
        cmds = commands(tmp, scale)
        assert list(cmds) == list(PROGRAMS)
        for name in names:
            runs = {a: [] for a in allocators}
            for r, order in benchlib.rotations(allocators, rounds):
                for a in order:
                    if cmds[name] == "redis":
                        got = run_redis(measure, allocators[a], tmp, scale)
                    else:
                        got = result_of(measured(measure, allocators[a], cmds[name], cwd=tmp), name)
                    runs[a].append(got)
                    print(f"+ {name} round {r + 1} {a}: {got['cpu_s']:.2f} s CPU, "
                          f"{got['peak_rss_kib'] / 1024:.1f} MiB", flush=True)
            for a, rs in runs.items():
                cells[f"{a}|{name}"] = {"cpu_s": middle([x["cpu_s"] for x in rs]),
                                        "peak_rss_kib": middle([x["peak_rss_kib"] for x in rs]),
                                        "runs": rs}
    return cells


def paired(cells, a, b, name):
    """The median over rounds of a's CPU time over b's on `name`, with the lowest and highest."""
    rs = paired_ratios(cells[f"{a}|{name}"], cells[f"{b}|{name}"], "cpu_s")
    return middle(rs), min(rs), max(rs)


def render(doc):
    cells, allocs, names = doc["cells"], doc["allocators"], doc["programs"]
    ak = "allockit"
    peers = [a for a in allocs if a != ak]
    cell = lambda a, n: cells[f"{a}|{n}"]  # noqa: E731
    lines = table.header(doc, "Real programs under each allocator") + [
        __doc__.split("\n\n")[0].replace("\n", " "), "",
        f"{doc['rounds']} rounds, scale {doc['scale']}. `ak/best peer`: allockit's median CPU time "
        "over the best peer's; `paired`: the median of allockit's time over that peer's in the same "
        "round, with the rounds' lowest and highest. Peak RSS: the program's, from wait4.", "",
        "## CPU time (s)", "",
        "| program | " + " | ".join(allocs) + " | ak/best peer | paired (best peer) | rounds |",
        "|---|" + "---|" * (len(allocs) + 3)]
    ratios, rss_ratios = {}, {}
    for n in names:
        best = min(peers, key=lambda a: cell(a, n)["cpu_s"])
        p, lo, hi = paired(cells, ak, best, n)
        ratios[n] = p
        lines.append(f"| {n} | " + " | ".join(f"{cell(a, n)['cpu_s']:.3f}" for a in allocs)
                     + f" | {cell(ak, n)['cpu_s'] / cell(best, n)['cpu_s']:.2f} | {p:.2f} ({best}) "
                     f"| {lo:.2f}-{hi:.2f} |")
    lines += ["", "## Peak RSS (MiB)", "",
              "| program | " + " | ".join(allocs) + " | ak/leanest peer |",
              "|---|" + "---|" * (len(allocs) + 1)]
    for n in names:
        lean = min(peers, key=lambda a: cell(a, n)["peak_rss_kib"])
        rss_ratios[n] = cell(ak, n)["peak_rss_kib"] / cell(lean, n)["peak_rss_kib"]
        lines.append(f"| {n} | " + " | ".join(f"{cell(a, n)['peak_rss_kib'] / 1024:.1f}"
                                                for a in allocs)
                     + f" | {rss_ratios[n]:.2f} ({lean}) |")
    lines += ["", "## Geomeans", "", "Each allocator over every program, and without its own worst "
              "program (against the best allocator there).", "",
              "| allocator | CPU time | without its worst | its worst | peak RSS (MiB) |",
              "|---|---|---|---|---|"]
    best = {n: min(cell(a, n)["cpu_s"] for a in allocs) for n in names}
    for a in allocs:
        t = {n: cell(a, n)["cpu_s"] for n in names}
        worst = max(names, key=lambda n: t[n] / best[n])
        rest = [t[n] for n in names if n != worst]
        lines.append(f"| {a} | {geomean(t.values()):.3f} | "
                     f"{f'{geomean(rest):.3f}' if rest else '-'} | {worst} | "
                     f"{geomean([cell(a, n)['peak_rss_kib'] / 1024 for n in names]):.1f} |")
    g = geomean(ratios.values())
    lines += ["", f"allockit against the best peer on each program, paired: geomean {g:.2f}x "
              f"(worst {max(ratios.values()):.2f}x, {max(ratios, key=ratios.get)}); peak RSS "
              f"against the leanest peer: geomean {geomean(rss_ratios.values()):.2f}x (worst "
              f"{max(rss_ratios.values()):.2f}x, {max(rss_ratios, key=rss_ratios.get)})."]
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--out", default="bench/results")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--scale", type=float, default=1.0, help="each program's work, as a fraction")
    ap.add_argument("--only", nargs="+", help="a subset of the programs (not for the results)")
    args = ap.parse_args()
    names = list(PROGRAMS)
    if args.only:
        unknown = [n for n in args.only if n not in names]
        if unknown:
            sys.exit(f"run_program_bench: unknown program(s) {unknown}; known: {names}")
        names = args.only
    missing = sorted({PACKAGES[exe] for n in names for exe in PROGRAMS[n] if not shutil.which(exe)})
    if missing:
        sys.exit("run_program_bench: missing the Debian packages " + ", ".join(missing)
                 + " (scripts/install-deps.sh --programs installs them)")
    if not os.access(os.path.join(args.build, "bench", "measure"), os.X_OK):
        sys.exit(f"run_program_bench: {args.build}/bench/measure not found (make all first)")
    allocators = benchlib.malloc_allocators(args.build)
    cells = run_all(args.build, allocators, names, args.rounds, args.scale)
    doc = benchlib.result_doc(sys.argv, [], "make bench-programs", allocators=list(allocators),
                              programs=names, rounds=args.rounds, scale=args.scale, cells=cells)
    benchlib.write_results(args.out, "programs", doc, render(doc))


if __name__ == "__main__":
    main()
