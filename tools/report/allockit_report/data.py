"""Loading of a results folder: compare.json, stats.json and per allocator samples.bin,
rss.csv and summary.json (formats: docs/journal-format.md, "Replay results")."""
import json
import os
from dataclasses import dataclass, field

import numpy as np

SAMPLES_MAGIC = b"AKSAMP01"
KIND_NAMES = ["malloc", "calloc", "realloc", "free", "posix_memalign", "aligned_alloc",
              "memalign", "valloc", "pvalloc", "reallocarray"]


class ResultsError(Exception):
    """A results folder that cannot be read; the message names the file."""


@dataclass
class Samples:
    latency_ns: np.ndarray
    t_us: np.ndarray
    size: np.ndarray
    kind: np.ndarray


@dataclass
class AllocatorResult:
    name: str
    summary: dict
    samples: Samples = None
    rss: np.ndarray = field(default_factory=lambda: np.zeros((0, 2)))


@dataclass
class Results:
    folder: str
    compare: dict
    stats: dict
    allocators: list
    # The recorded program's heap share of RssAnon over its own time (ms, bytes); empty when the
    # journal has no memory samples.
    recorded_rss: np.ndarray = field(default_factory=lambda: np.zeros((0, 2)))
    # The call-site view: `allockit top` and the stacks of a journal recorded with --stack
    # (sites.json, stacks.json, written by compare), and `allockit advise --out` into the same
    # folder (advice.json); None when absent.
    sites: dict = None
    stacks: dict = None
    advice: dict = None


def read_samples(path):
    with open(path, "rb") as f:
        head = f.read(16)
        if len(head) < 16 or head[:8] != SAMPLES_MAGIC:
            raise ResultsError(f"{path}: not a samples file (bad magic at offset 0)")
        n = int(np.frombuffer(head[8:16], dtype="<u8")[0])
        body = f.read()
    if len(body) != n * 13:
        raise ResultsError(f"{path}: {n} samples need {n * 13} bytes after offset 16, found {len(body)}")
    lat = np.frombuffer(body, dtype="<u4", count=n, offset=0)
    t_us = np.frombuffer(body, dtype="<u4", count=n, offset=4 * n)
    size = np.frombuffer(body, dtype="<u4", count=n, offset=8 * n)
    kind = np.frombuffer(body, dtype="u1", count=n, offset=12 * n)
    return Samples(lat, t_us, size, kind)


def read_rss(path):
    if not os.path.exists(path) or os.path.getsize(path) == 0:
        return np.zeros((0, 2))
    data = np.loadtxt(path, delimiter=",", ndmin=2)
    return data


def _load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        raise ResultsError(f"{path}: missing (is this a results folder of allockit compare?)")
    except json.JSONDecodeError as e:
        raise ResultsError(f"{path}: not valid JSON at offset {e.pos}: {e.msg}")


def load(folder):
    compare = _load_json(os.path.join(folder, "compare.json"))
    stats = _load_json(os.path.join(folder, "stats.json"))
    allocators = []
    for summary in compare.get("results", []):
        name = summary["allocator"]
        r = AllocatorResult(name, summary)
        sub = os.path.join(folder, name)
        if summary.get("ok"):
            r.samples = read_samples(os.path.join(sub, "samples.bin"))
            r.rss = read_rss(os.path.join(sub, "rss.csv"))
        allocators.append(r)
    recorded = read_rss(os.path.join(folder, "recorded_rss.csv"))
    optional = {name: _load_json(os.path.join(folder, f"{name}.json"))
                if os.path.exists(os.path.join(folder, f"{name}.json")) else None
                for name in ("sites", "stacks", "advice")}
    return Results(folder, compare, stats, allocators, recorded, **optional)
