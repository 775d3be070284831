// Global ordering and slot assignment (see timeline.hpp).
#include "trace/timeline.hpp"

#include <algorithm>
#include <map>
#include <unordered_map>

namespace ak::trace {

Trace load_trace(JournalReader& reader) {
  Trace t;
  t.meta = reader.meta();
  t.rss = reader.rss();
  t.stacks = reader.stacks();
  t.modules = reader.modules();
  t.names = reader.names();
  const bool stacks = !t.stacks.empty();
  std::map<uint32_t, ThreadEvents> by_thread;
  Block b;
  while (reader.next(b)) {
    ThreadEvents& te = by_thread[b.thread];
    te.thread = b.thread;
    if (te.os_tid == 0) te.os_tid = b.os_tid;
    te.events.insert(te.events.end(), b.events.begin(), b.events.end());
    if (stacks) te.stacks.insert(te.stacks.end(), b.stacks.begin(), b.stacks.end());
    t.events += b.events.size();
  }
  t.truncated_at = reader.truncated_at();
  for (auto& [id, te] : by_thread) t.threads.push_back(std::move(te));
  return t;
}

Trace load_trace(const std::string& path) {
  JournalReader r(path);
  return load_trace(r);
}

namespace {

// One step of the global order: the release or the acquire half of an event.
struct Key {
  uint64_t time;
  uint32_t thread;
  uint32_t index;  // event index; top bit set for the acquire half
  bool operator<(const Key& o) const {
    if (time != o.time) return time < o.time;
    if (thread != o.thread) return thread < o.thread;
    // Same thread: call order, and within a call its release half before its acquire half.
    const uint32_t a = index & 0x7fffffffu, b = o.index & 0x7fffffffu;
    return a != b ? a < b : index < o.index;
  }
};
constexpr uint32_t kAcquire = 1u << 31;

// How much earlier than the call's loads a return stamp may be read. The recorder stamps returns
// with rdtsc, which does not wait for the instructions before it: the stamp of a malloc that got
// a block another thread just freed can precede that free's entry stamp by the time the load of
// the block took (a cache miss, tens to hundreds of ns). Waiting for it (rdtscp) cost the
// recorder 9 ns a call. Such an acquire of a still-live address is matched with that release.
constexpr uint64_t kStampSlackNs = 2000;

bool releases(const Event& e) {
  return e.op == Op::kFree ? e.a != 0 : is_realloc(e.op) && e.a != 0;
}

// Whether a realloc released its old block: glibc's realloc(p, 0) frees p and returns null;
// a failed realloc (null for a nonzero size) keeps it.
bool realloc_released(const Event& e) {
  return e.result != 0 || requested_bytes(e) == 0;
}

}  // namespace

Timeline resolve(const Trace& trace) {
  Timeline tl;
  std::vector<Key> keys;
  keys.reserve(trace.events + trace.events / 8);
  tl.per_thread.resize(trace.threads.size());
  for (uint32_t ti = 0; ti < trace.threads.size(); ++ti) {
    const auto& evs = trace.threads[ti].events;
    tl.per_thread[ti].resize(evs.size());
    // A thread's calls happen in its call order, whatever their stamps say: an entry stamp
    // (rdtsc) may be read a few cycles before the previous call's return stamp, so times are
    // made non-decreasing along the thread. Raising a stamp to its predecessor's keeps it before
    // anything the call makes visible to other threads.
    uint64_t last = 0;
    for (uint32_t i = 0; i < evs.size(); ++i) {
      const Event& e = evs[i];
      if (releases(e)) {
        uint64_t start =
            is_realloc(e.op) ? e.time_ns - std::min<uint64_t>(e.duration_ns, e.time_ns) : e.time_ns;
        last = std::max(start, last);
        keys.push_back({last, ti, i});
      }
      if (returns_block(e.op)) {
        last = std::max(e.time_ns, last);
        keys.push_back({last, ti, i | kAcquire});
      }
    }
  }
  std::sort(keys.begin(), keys.end());
  if (!keys.empty()) tl.first_ns = keys.front().time, tl.last_ns = keys.back().time;

  std::vector<uint8_t> done;  // keys handled out of order (early_release); empty until one is
  std::unordered_map<uint64_t, uint32_t> live;  // live address -> its slot
  live.reserve(1024);
  uint64_t live_bytes = 0, live_count = 0;
  auto release_slot = [&](uint32_t slot, uint32_t by_thread, uint64_t t) {
    tl.slot_died_ns[slot] = t;
    live_bytes -= tl.slot_bytes[slot];
    --live_count;
    if (tl.slot_thread[slot] != by_thread) ++tl.cross_thread_frees;
  };
  // The release half of key k: frees the block at its address.
  auto release = [&](const Key& k) {
    const Event& e = trace.threads[k.thread].events[k.index];
    if (is_realloc(e.op) && !realloc_released(e)) return;
    auto it = live.find(e.a);
    if (it == live.end()) {
      if (e.op == Op::kFree)
        ++tl.problems.unknown_frees;
      else
        ++tl.problems.unknown_reallocs;
      return;
    }
    Resolved& r = tl.per_thread[k.thread][k.index];
    r.old_slot = it->second;
    if (e.op == Op::kFree && e.c != 0)
      tl.slot_pages[r.old_slot] = uint32_t(std::min<uint64_t>(e.b, UINT32_MAX - 1) + 1);
    release_slot(r.old_slot, k.thread, k.time);
    live.erase(it);
  };
  // Another thread's release of `address` stamped at most kStampSlackNs after keys[i], not yet
  // done: its index, or keys.size().
  auto early_release = [&](size_t i, uint64_t address) {
    const Key& k = keys[i];
    for (size_t j = i + 1; j < keys.size() && keys[j].time <= k.time + kStampSlackNs; ++j) {
      const Key& o = keys[j];
      if ((o.index & kAcquire) || o.thread == k.thread || (!done.empty() && done[j])) continue;
      const Event& e = trace.threads[o.thread].events[o.index];
      if (e.a == address && (!is_realloc(e.op) || realloc_released(e))) return j;
    }
    return keys.size();
  };
  for (size_t i = 0; i < keys.size(); ++i) {
    const Key& k = keys[i];
    if (!done.empty() && done[i]) continue;
    if (!(k.index & kAcquire)) {
      release(k);
      continue;
    }
    const Event& e = trace.threads[k.thread].events[k.index & ~kAcquire];
    Resolved& r = tl.per_thread[k.thread][k.index & ~kAcquire];
    if (e.result == 0) {  // acquire half of a call that returned nothing
      if (!(is_realloc(e.op) && requested_bytes(e) == 0)) ++tl.problems.failed_allocs;
      continue;
    }
    auto [it, fresh] = live.try_emplace(e.result, tl.slots);
    if (!fresh) {
      if (const size_t j = early_release(i, e.result); j < keys.size()) {
        // This return stamp was read before another thread's free of the block it returned
        // completed (see kStampSlackNs): that free came first.
        if (done.empty()) done.resize(keys.size());
        done[j] = 1;
        release(keys[j]);
        it = live.try_emplace(e.result, tl.slots).first;
      } else {  // the program freed this block but the journal lost the free
        ++tl.problems.reused_live;
        r.repair_slot = it->second;
        release_slot(r.repair_slot, k.thread, k.time);
        it->second = tl.slots;
      }
    }
    r.slot = tl.slots++;
    tl.slot_bytes.push_back(requested_bytes(e));
    tl.slot_born_ns.push_back(k.time);
    tl.slot_died_ns.push_back(UINT64_MAX);
    tl.slot_thread.push_back(k.thread);
    tl.slot_pages.push_back(0);
    live_bytes += tl.slot_bytes.back();
    ++live_count;
    if (live_bytes > tl.peak_live_bytes) {
      tl.peak_live_bytes = live_bytes;
      tl.peak_ns = k.time;
      tl.peak_slot = r.slot;
    }
    tl.peak_live_count = std::max(tl.peak_live_count, live_count);
  }
  return tl;
}

}  // namespace ak::trace
