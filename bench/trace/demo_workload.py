"""The demo's recorded program: a small multi-threaded request handler in pure Python (run with
PYTHONMALLOC=malloc so every object comes from malloc). Three worker threads parse JSON
requests, build responses, keep an LRU cache and hand results to the main thread, which frees
them: short-lived objects, long-lived cache entries and cross-thread frees. Argument: how many
requests (default 12000)."""
import collections
import json
import queue
import re
import threading

WORDS = re.compile(r"[a-z]+")


def make_request(i):
    return json.dumps({"id": i, "user": f"user{i % 97}", "tags": [f"t{j}" for j in range(i % 13)],
                       "body": " ".join(f"word{(i * j) % 101}" for j in range(30))})


def handle(raw, cache):
    req = json.loads(raw)
    counts = collections.Counter(WORDS.findall(req["body"]))
    key = req["user"]
    entry = cache.get(key)
    if entry is None:
        entry = cache[key] = {"seen": 0, "history": collections.deque(maxlen=50)}
    entry["seen"] += 1
    entry["history"].append(req["id"])
    if len(cache) > 64:
        cache.pop(next(iter(cache)))
    return json.dumps({"id": req["id"], "top": counts.most_common(5), "seen": entry["seen"]})


def worker(inbox, outbox):
    cache = {}
    while True:
        raw = inbox.get()
        if raw is None:
            break
        outbox.put(handle(raw, cache))


def main(n=12000, threads=3):
    inbox, outbox = queue.Queue(maxsize=256), queue.Queue()
    pool = [threading.Thread(target=worker, args=(inbox, outbox)) for _ in range(threads)]
    for t in pool:
        t.start()
    done, total = 0, 0
    for i in range(n):
        inbox.put(make_request(i))
        while not outbox.empty():
            total += len(json.loads(outbox.get())["top"])
            done += 1
    for _ in pool:
        inbox.put(None)
    for t in pool:
        t.join()
    while not outbox.empty():
        total += len(json.loads(outbox.get())["top"])
        done += 1
    print(f"handled {done} requests, {total} top words")


if __name__ == "__main__":
    import sys
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 12000)
