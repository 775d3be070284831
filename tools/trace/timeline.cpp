// Global ordering and slot assignment (see timeline.hpp).
#include "trace/timeline.hpp"

#include <algorithm>
#include <map>
#include <unordered_map>

namespace ak::trace {

namespace {

// When a call began: a realloc's entry (its return stamp less its duration), else its stamp.
uint64_t call_start(const Event& e) {
  return is_realloc(e.op) ? e.time_ns - std::min<uint64_t>(e.duration_ns, e.time_ns) : e.time_ns;
}

// Places a thread's unstamped calls (kUnstampedFlag: each holds its previous stamp, a lower
// bound) evenly between the stamps around them, so the thread's calls keep distinct times in
// call order; a run after the thread's last stamp gets 1 ns steps. Where a call really was in
// that span is unknown: the resolver matches across threads within it (resolve's `latest`).
void place_unstamped(std::vector<Event>& evs) {
  for (size_t i = 0; i < evs.size();) {
    if (!evs[i].unstamped) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < evs.size() && evs[j].unstamped) ++j;
    const uint64_t n = j - i + 1, lo = evs[i].time_ns;
    uint64_t hi = lo + n;
    if (j < evs.size()) hi = std::max(hi, call_start(evs[j]));
    for (size_t k = i; k < j; ++k)
      evs[k].time_ns =
          lo + static_cast<uint64_t>(static_cast<long double>(hi - lo) * (k - i + 1) / n);
    i = j;
  }
}

}  // namespace

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
  for (auto& [id, te] : by_thread) {
    place_unstamped(te.events);
    t.threads.push_back(std::move(te));
  }
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
// recorder 9 ns a call. Such an acquire of a still-live address is matched with that release,
// and a release of an address not live with the acquire that returned it (a free's entry stamp
// may be read before the load that gave it the pointer).
constexpr uint64_t kStampSlackNs = 2000;

bool releases(const Event& e) {
  return e.op == Op::kFree ? e.a != 0 : is_realloc(e.op) && e.a != 0;
}

// Whether a realloc released its old block: glibc's realloc(p, 0) frees p and returns null;
// a failed realloc (null for a nonzero size) keeps it.
bool realloc_released(const Event& e) {
  return e.result != 0 || requested_bytes(e) == 0;
}

// Whether the release half of `e` (a free, or a realloc's entry) let go of the block at e.a.
bool frees_old_block(const Event& e) {
  return !is_realloc(e.op) || realloc_released(e);
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
    // anything the call makes visible to other threads. An unstamped call is ordered at its
    // thread's previous stamp, the earliest it can have happened (not where place_unstamped put
    // it): the matching across threads below looks ahead from there to its latest.
    uint64_t last = 0;
    for (uint32_t i = 0; i < evs.size(); ++i) {
      const Event& e = evs[i];
      if (releases(e)) {
        if (!e.unstamped) last = std::max(call_start(e), last);
        keys.push_back({last, ti, i});
      }
      if (returns_block(e.op)) {
        if (!e.unstamped) last = std::max(e.time_ns, last);
        keys.push_back({last, ti, i | kAcquire});
      }
    }
  }
  std::sort(keys.begin(), keys.end());
  if (!keys.empty()) tl.first_ns = keys.front().time, tl.last_ns = keys.back().time;

  std::vector<uint8_t> taken;  // acquires taken early (acquire_before); empty until one is
  std::unordered_map<uint64_t, uint32_t> live;  // live address -> its slot
  live.reserve(1024);
  uint64_t live_bytes = 0, live_count = 0;
  auto release_slot = [&](uint32_t slot, uint32_t by_thread, uint64_t t) {
    tl.slot_died_ns[slot] = t;
    live_bytes -= tl.slot_bytes[slot];
    --live_count;
    if (tl.slot_thread[slot] != by_thread) ++tl.cross_thread_frees;
  };
  // When key k's half happened as the journal places it: its order time, or for an unstamped
  // call the time place_unstamped gave it. What slots are born and die at.
  auto placed = [&](const Key& k) -> uint64_t {
    const Event& e = trace.threads[k.thread].events[k.index & ~kAcquire];
    if (!e.unstamped) return k.time;
    return std::max((k.index & kAcquire) ? e.time_ns : call_start(e), k.time);
  };
  // The release half of key k: frees the block at its address, no earlier than `floor` (the
  // half it was deferred behind).
  auto release = [&](const Key& k, uint64_t floor) {
    const Event& e = trace.threads[k.thread].events[k.index];
    if (!frees_old_block(e)) return;
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
    release_slot(r.old_slot, k.thread, std::max(placed(k), floor));
    live.erase(it);
  };
  // The recorder's memory samples, in time order: each follows a tick of the clock that makes
  // the next call of every thread stamp itself (sampled_stamp).
  std::vector<uint64_t> ticks;
  for (const RssSample& r : trace.rss) ticks.push_back(r.time_ns);
  std::sort(ticks.begin(), ticks.end());
  // The latest time key k's call can have happened at: its stamp, or for an unstamped call the
  // earlier of the start of its thread's next stamped call and the second memory sample after
  // its order time. (Its thread saw the tick of its last stamp, taken after that tick's increment:
  // the next increment, the one the call came before, precedes the sample after it. A thread
  // that blocks, in a join or waiting for Python's GIL, stamps again only when it wakes.)
  // UINT64_MAX when neither is known.
  auto latest = [&](const Key& k) -> uint64_t {
    const auto& evs = trace.threads[k.thread].events;
    uint64_t next_stamp = UINT64_MAX;
    for (uint32_t i = k.index & ~kAcquire; i < evs.size(); ++i) {
      const Event& e = evs[i];
      if (e.unstamped) continue;
      if (i == (k.index & ~kAcquire)) return k.time;
      next_stamp = std::max(call_start(e), k.time);
      break;
    }
    const auto after = std::upper_bound(ticks.begin(), ticks.end(), k.time);
    const uint64_t tick = ticks.end() - after >= 2 ? after[1] : UINT64_MAX;
    return std::min(next_stamp, tick);
  };
  // Whether keys[j]'s half acquires or releases `address`.
  auto acquires = [&](size_t j, uint64_t address) {
    const Key& o = keys[j];
    return (o.index & kAcquire) &&
           trace.threads[o.thread].events[o.index & ~kAcquire].result == address;
  };
  auto releases_at = [&](size_t j, uint64_t address) {
    const Key& o = keys[j];
    if (o.index & kAcquire) return false;
    const Event& e = trace.threads[o.thread].events[o.index];
    return e.a == address && frees_old_block(e);
  };
  // Visits the keys after keys[i], not taken early, placed no later than keys[i]'s call can have
  // happened (latest) plus kStampSlackNs, until `visit` returns false.
  auto scan_ahead = [&](size_t i, auto&& visit) {
    if (trace.threads.size() < 2) return;
    const uint64_t l = latest(keys[i]),
                   until = l > UINT64_MAX - kStampSlackNs ? l : l + kStampSlackNs;
    for (size_t j = i + 1; j < keys.size() && keys[j].time <= until; ++j)
      if ((taken.empty() || !taken[j]) && !visit(j)) return;
  };
  // scan_ahead over the other threads' halves on `address`: visit(Ahead) for each, until one
  // returns false or a half of keys[i]'s own thread on the address is met (its own order decides
  // from there); with `past_own_run`, the search goes on past the later calls of keys[i]'s own
  // run of unstamped calls (between the same two stamps), which tell nothing of other threads.
  struct Ahead {
    size_t j;
    bool acquires;
    bool before;  // can have happened no later than keys[i]'s call can have
    bool pinned;  // stamped or `before`: else it may as well follow keys[i]'s call
  };
  auto unstamped = [&](const Key& k) {
    return trace.threads[k.thread].events[k.index & ~kAcquire].unstamped;
  };
  auto scan_address = [&](size_t i, uint64_t address, bool past_own_run, auto&& visit) {
    const uint64_t mine = latest(keys[i]);
    scan_ahead(i, [&](size_t j) {
      const bool acq = acquires(j, address);
      if (!acq && !releases_at(j, address)) return true;
      const Key& o = keys[j];
      const uint64_t theirs = latest(o);
      if (o.thread == keys[i].thread)
        return past_own_run && unstamped(keys[i]) && unstamped(o) && o.time == keys[i].time &&
               theirs == mine;
      return visit(Ahead{j, acq, theirs <= mine, !unstamped(o) || theirs <= mine});
    });
  };
  // The release of `address` by another thread after which keys[i]'s acquire belongs (see
  // kStampSlackNs and kUnstampedFlag), or keys.size(): the last one ahead that no other
  // thread's acquire of it follows, else the first. An unstamped call may lie a long way past
  // its order time (its thread ran on without a stamp, or was descheduled) while other threads
  // took and freed blocks at that address. A later call of the acquiring thread on the address
  // ends the search: its own order decides.
  // `fresh`: the address is not live, so the acquire may simply stand; it waits only when
  // another thread takes the address ahead, and not when another thread's release of it comes
  // first (that thread frees the block this acquire returned).
  auto release_before = [&](size_t i, uint64_t address, bool fresh) {
    size_t first = keys.size(), last = keys.size();
    bool taken_ahead = false;
    scan_address(i, address, false, [&](const Ahead& h) {
      if (fresh && !taken_ahead && !(h.acquires && h.before)) return false;
      taken_ahead |= h.acquires;
      if (!h.acquires && first == keys.size()) first = h.j;
      if (h.pinned) last = h.acquires ? keys.size() : h.j;
      return true;
    });
    return last != keys.size() ? last : first;
  };
  // Tracks, in `found`, the last acquire seen that no pinned release follows; a pinned acquire
  // replaces an earlier one, an unpinned one only fills an empty `found` (it may follow the call).
  auto track_acquire = [&](size_t& found, const Ahead& h) {
    if (h.acquires && (h.pinned || found == keys.size()))
      found = h.j;
    else if (!h.acquires && h.pinned)
      found = keys.size();
  };
  // Another thread's acquire of `address` that keys[i]'s release of an address not live must
  // follow, or keys.size(): the last one ahead that no other thread's release follows (the block
  // this thread was handed; see track_acquire). An unstamped free's order time may precede the
  // malloc it frees by as long as its thread went without a stamp (blocked in a join, say).
  // Taken early, that acquire binds to this release alone.
  auto acquire_before = [&](size_t i, uint64_t address) {
    size_t found = keys.size();
    scan_address(i, address, true, [&](const Ahead& h) {
      track_acquire(found, h);
      return true;
    });
    return found;
  };
  // The acquire by another thread after which keys[i]'s unstamped release of a live `address`
  // belongs, or keys.size(). When another thread frees the live block within the call's span,
  // this call freed a later block there (a thread that waited for Python's GIL frees an object
  // another thread made): the last acquire ahead that no other release follows.
  auto acquire_after = [&](size_t i, uint64_t address) {
    size_t found = keys.size();
    bool freed_ahead = false;
    scan_address(i, address, false, [&](const Ahead& h) {
      if (!freed_ahead) {
        if (h.acquires) return false;
        if (!h.pinned) return true;  // it may free a later block than the live one
        freed_ahead = true;
      }
      track_acquire(found, h);
      return true;
    });
    return found;
  };
  std::multimap<size_t, size_t> deferred;  // key -> halves to run right after it
  // The acquire half of keys[i], no earlier than `floor`; `may_defer`: once, it may wait for a
  // release ahead. False when it waits.
  auto acquire = [&](size_t i, bool may_defer, uint64_t floor) -> bool {
    const Key& k = keys[i];
    const Event& e = trace.threads[k.thread].events[k.index & ~kAcquire];
    Resolved& r = tl.per_thread[k.thread][k.index & ~kAcquire];
    if (e.result == 0) {  // acquire half of a call that returned nothing
      if (!(is_realloc(e.op) && requested_bytes(e) == 0)) ++tl.problems.failed_allocs;
      return true;
    }
    auto [it, fresh] = live.try_emplace(e.result, tl.slots);
    if (fresh && may_defer && e.unstamped && !deferred.contains(i)) {
      // An unstamped call lies anywhere up to its latest: when another thread takes and frees
      // the address within that span, this call got the block after it (unless a release
      // already waits for this very call).
      if (const size_t j = release_before(i, e.result, true); j < keys.size()) {
        live.erase(it);
        deferred.emplace(j, i);
        return false;
      }
    }
    if (!fresh) {
      if (const size_t j = may_defer ? release_before(i, e.result, false) : keys.size();
          j < keys.size()) {
        // By the stamps, this call returned the block before another thread's free of it: that
        // free came first.
        deferred.emplace(j, i);
        return false;
      } else {  // the program freed this block but the journal lost the free
        ++tl.problems.reused_live;
        r.repair_slot = it->second;
        release_slot(r.repair_slot, k.thread, std::max(placed(k), floor));
        it->second = tl.slots;
      }
    }
    r.slot = tl.slots++;
    tl.slot_bytes.push_back(requested_bytes(e));
    const uint64_t born = std::max(placed(k), floor);
    tl.slot_born_ns.push_back(born);
    tl.slot_died_ns.push_back(UINT64_MAX);
    tl.slot_thread.push_back(k.thread);
    tl.slot_pages.push_back(0);
    live_bytes += tl.slot_bytes.back();
    ++live_count;
    if (live_bytes > tl.peak_live_bytes) {
      tl.peak_live_bytes = live_bytes;
      tl.peak_ns = born;
      tl.peak_slot = r.slot;
    }
    tl.peak_live_count = std::max(tl.peak_live_count, live_count);
    return true;
  };
  // Runs the halves that wait for key i, once it ran, then those that wait for them: each once,
  // with no further wait, no earlier than the half it waited for.
  std::vector<size_t> ran;
  auto run_waiting = [&](size_t i) {
    ran.assign(1, i);
    while (!ran.empty()) {
      const size_t before = ran.back();
      ran.pop_back();
      const uint64_t floor = placed(keys[before]);
      for (auto d = deferred.find(before); d != deferred.end(); d = deferred.find(before)) {
        const size_t h = d->second;
        deferred.erase(d);
        if (keys[h].index & kAcquire)
          acquire(h, false, floor);
        else
          release(keys[h], floor);
        ran.push_back(h);
      }
    }
  };
  for (size_t i = 0; i < keys.size(); ++i) {
    const Key& k = keys[i];
    bool ran_now = true;
    if (k.index & kAcquire) {
      if (taken.empty() || !taken[i]) ran_now = acquire(i, true, 0);
    } else {
      const Event& e = trace.threads[k.thread].events[k.index];
      size_t after = keys.size();
      if (frees_old_block(e) && !live.contains(e.a)) {
        if (const size_t j = acquire_before(i, e.a); j < keys.size()) {
          if (taken.empty()) taken.resize(keys.size());
          taken[j] = 1;
          if (acquire(j, false, 0)) run_waiting(j);
        }
      } else if (frees_old_block(e) && e.unstamped) {
        after = acquire_after(i, e.a);
      }
      if (after < keys.size()) {
        deferred.emplace(after, i);
        ran_now = false;
      } else {
        release(k, 0);
      }
    }
    if (ran_now) run_waiting(i);
  }
  return tl;
}

}  // namespace ak::trace
