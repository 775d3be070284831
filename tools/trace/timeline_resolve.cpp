// resolve(): the global order of every thread's calls, and the slots it gives blocks
// (timeline.hpp). Each call is split into halves (a release at entry, an acquire at return),
// sorted by time and run in that order against a map of live addresses; unstamped calls, whose
// time is only bounded, are matched across threads by the addresses they share.
#include <algorithm>
#include <map>
#include <unordered_map>

#include "trace/timeline.hpp"

namespace ak::trace {

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

// Another thread's half on an address, met looking ahead of keys[i] (scan_address).
struct Ahead {
  size_t j;
  bool acquires;
  bool before;  // can have happened no later than keys[i]'s call can have
  bool pinned;  // stamped or `before`: else it may as well follow keys[i]'s call
};

class Resolver {
 public:
  explicit Resolver(const Trace& trace);
  Timeline run();

 private:
  const Event& event(const Key& k) const {
    return trace_.threads[k.thread].events[k.index & ~kAcquire];
  }
  bool unstamped(const Key& k) const { return event(k).unstamped; }
  uint64_t placed(const Key& k) const;
  uint64_t latest(const Key& k) const;
  static uint32_t fingerprint(uint64_t address) { return uint32_t(address >> 3); }
  bool acquires(size_t j, uint64_t address) const;
  bool releases_at(size_t j, uint64_t address) const;
  template <class Visit>
  void scan_ahead(size_t i, Visit&& visit) const;
  template <class Visit>
  void scan_address(size_t i, uint64_t address, bool past_own_run, Visit&& visit) const;
  size_t release_before(size_t i, uint64_t address, bool fresh) const;
  void track_acquire(size_t& found, const Ahead& h) const;
  size_t acquire_before(size_t i, uint64_t address) const;
  size_t acquire_after(size_t i, uint64_t address) const;
  void release_slot(uint32_t slot, uint32_t by_thread, uint64_t t);
  void release(const Key& k, uint64_t floor);
  bool acquire(size_t i, bool may_defer, uint64_t floor);
  void run_waiting(size_t i);
  void release_half(size_t i);

  const Trace& trace_;
  Timeline tl_;
  std::vector<Key> keys_;
  // Of the address each key's half takes or lets go of (0: none), its bits 3-34, beside keys_:
  // the scans ahead (scan_address) compare it for every key in their window and read the event
  // only when it matches. Reading the events, in the threads' arrays, cost a cache miss a key:
  // 34% of `allockit top` on 10.8M events. Half an address's size, half the memory it costs.
  std::vector<uint32_t> fingerprint_;
  std::vector<uint64_t> ticks_;  // the memory samples' times, sorted (see latest)
  std::vector<uint8_t> taken_;   // acquires taken early (acquire_before); empty until one is
  std::unordered_map<uint64_t, uint32_t> live_;  // live address -> its slot
  std::multimap<size_t, size_t> deferred_;       // key -> halves to run right after it
  std::vector<size_t> ran_;                      // run_waiting's work list
  uint64_t live_bytes_ = 0, live_count_ = 0;
};

// Sorts `keys`, made of sorted runs starting at `runs` (ending with keys.size()): each thread's
// keys are in order already (times made non-decreasing along the thread, then call order), so
// merging the runs pairwise, between `keys` and one buffer of its size, costs n log(threads)
// comparisons. std::sort cost n log(n) and went to its heapsort fallback on these runs: 17% of
// `allockit top` on 10.8M events from 121 threads.
void merge_runs(std::vector<Key>& keys, std::vector<size_t> runs) {
  if (runs.size() <= 2) return;
  std::vector<Key> other(keys.size());
  while (runs.size() > 2) {
    std::vector<size_t> merged{runs[0]};
    size_t r = 0;
    for (; r + 2 < runs.size(); r += 2) {
      std::merge(keys.begin() + runs[r], keys.begin() + runs[r + 1], keys.begin() + runs[r + 1],
                 keys.begin() + runs[r + 2], other.begin() + runs[r]);
      merged.push_back(runs[r + 2]);
    }
    if (r + 1 < runs.size()) {  // an odd run left over
      std::copy(keys.begin() + runs[r], keys.begin() + runs[r + 1], other.begin() + runs[r]);
      merged.push_back(runs[r + 1]);
    }
    keys.swap(other);
    runs = std::move(merged);
  }
}

Resolver::Resolver(const Trace& trace) : trace_(trace) {
  keys_.reserve(trace.events + trace.events / 8);
  tl_.per_thread.resize(trace.threads.size());
  std::vector<size_t> runs;  // where each thread's keys start
  for (uint32_t ti = 0; ti < trace.threads.size(); ++ti) {
    const auto& evs = trace.threads[ti].events;
    tl_.per_thread[ti].resize(evs.size());
    // A thread's calls happen in its call order, whatever their stamps say: an entry stamp
    // (rdtsc) may be read a few cycles before the previous call's return stamp, so times are
    // made non-decreasing along the thread. Raising a stamp to its predecessor's keeps it before
    // anything the call makes visible to other threads. An unstamped call is ordered at its
    // thread's previous stamp, the earliest it can have happened (not where place_unstamped put
    // it): the matching across threads looks ahead from there to its latest.
    uint64_t last = 0;
    runs.push_back(keys_.size());
    for (uint32_t i = 0; i < evs.size(); ++i) {
      const Event& e = evs[i];
      if (releases(e)) {
        if (!e.unstamped) last = std::max(call_start(e), last);
        keys_.push_back({last, ti, i});
      }
      if (returns_block(e.op)) {
        if (!e.unstamped) last = std::max(e.time_ns, last);
        keys_.push_back({last, ti, i | kAcquire});
      }
    }
  }
  runs.push_back(keys_.size());
  merge_runs(keys_, runs);
  fingerprint_.resize(keys_.size());
  for (size_t j = 0; j < keys_.size(); ++j) {
    const Event& e = event(keys_[j]);
    if (keys_[j].index & kAcquire)
      fingerprint_[j] = fingerprint(e.result);
    else if (frees_old_block(e))
      fingerprint_[j] = fingerprint(e.a);
  }
  if (!keys_.empty()) tl_.first_ns = keys_.front().time, tl_.last_ns = keys_.back().time;
  // The recorder's memory samples, in time order: each follows a tick of the clock that makes
  // the next call of every thread stamp itself (sampled_stamp).
  for (const RssSample& r : trace.rss) ticks_.push_back(r.time_ns);
  std::sort(ticks_.begin(), ticks_.end());
  live_.reserve(1024);
}

// When key k's half happened as the journal places it: its order time, or for an unstamped call
// the time place_unstamped gave it. What slots are born and die at.
uint64_t Resolver::placed(const Key& k) const {
  const Event& e = event(k);
  if (!e.unstamped) return k.time;
  return std::max((k.index & kAcquire) ? e.time_ns : call_start(e), k.time);
}

// The latest time key k's call can have happened at: its stamp, or for an unstamped call the
// earlier of the start of its thread's next stamped call and the second memory sample after its
// order time. (Its thread saw the tick of its last stamp, taken after that tick's increment: the
// next increment, the one the call came before, precedes the sample after it. A thread that
// blocks, in a join or waiting for Python's GIL, stamps again only when it wakes.) UINT64_MAX
// when neither is known.
uint64_t Resolver::latest(const Key& k) const {
  const auto& evs = trace_.threads[k.thread].events;
  uint64_t next_stamp = UINT64_MAX;
  for (uint32_t i = k.index & ~kAcquire; i < evs.size(); ++i) {
    const Event& e = evs[i];
    if (e.unstamped) continue;
    if (i == (k.index & ~kAcquire)) return k.time;
    next_stamp = std::max(call_start(e), k.time);
    break;
  }
  const auto after = std::upper_bound(ticks_.begin(), ticks_.end(), k.time);
  const uint64_t tick = ticks_.end() - after >= 2 ? after[1] : UINT64_MAX;
  return std::min(next_stamp, tick);
}

// Whether keys_[j]'s half acquires, or releases, `address`.
bool Resolver::acquires(size_t j, uint64_t address) const {
  return (keys_[j].index & kAcquire) && event(keys_[j]).result == address;
}
bool Resolver::releases_at(size_t j, uint64_t address) const {
  if (keys_[j].index & kAcquire) return false;
  const Event& e = event(keys_[j]);
  return e.a == address && frees_old_block(e);
}

// Visits the keys after keys_[i], not taken early, placed no later than keys_[i]'s call can have
// happened (latest) plus kStampSlackNs, until `visit` returns false.
template <class Visit>
void Resolver::scan_ahead(size_t i, Visit&& visit) const {
  if (trace_.threads.size() < 2) return;
  const uint64_t l = latest(keys_[i]),
                 until = l > UINT64_MAX - kStampSlackNs ? l : l + kStampSlackNs;
  for (size_t j = i + 1; j < keys_.size() && keys_[j].time <= until; ++j)
    if ((taken_.empty() || !taken_[j]) && !visit(j)) return;
}

// scan_ahead over the other threads' halves on `address`: visit(Ahead) for each, until one
// returns false or a half of keys_[i]'s own thread on the address is met (its own order decides
// from there); with `past_own_run`, the search goes on past the later calls of keys_[i]'s own run
// of unstamped calls (between the same two stamps), which tell nothing of other threads.
template <class Visit>
void Resolver::scan_address(size_t i, uint64_t address, bool past_own_run, Visit&& visit) const {
  const Key& k = keys_[i];
  const uint64_t mine = latest(k);
  const uint32_t print = fingerprint(address);
  scan_ahead(i, [&](size_t j) {
    if (fingerprint_[j] != print) return true;
    const bool acq = acquires(j, address);
    if (!acq && !releases_at(j, address)) return true;
    const Key& o = keys_[j];
    const uint64_t theirs = latest(o);
    if (o.thread == k.thread)
      return past_own_run && unstamped(k) && unstamped(o) && o.time == k.time && theirs == mine;
    return visit(Ahead{j, acq, theirs <= mine, !unstamped(o) || theirs <= mine});
  });
}

// The release of `address` by another thread after which keys_[i]'s acquire belongs (see
// kStampSlackNs and kUnstampedFlag), or keys_.size(): the last pinned one ahead that no pinned
// acquire follows, else the first. An unstamped call may lie a long way past its order time (its
// thread ran on without a stamp, or was descheduled) while other threads took and freed blocks
// at that address. A later call of the acquiring thread on the address ends the search: its own
// order decides. `fresh`: the address is not live, so the acquire may simply stand; it waits only
// when another thread surely takes the address first, not when another thread's release of it
// comes first (that thread frees the block this acquire returned).
size_t Resolver::release_before(size_t i, uint64_t address, bool fresh) const {
  size_t first = keys_.size(), last = keys_.size();
  bool taken_ahead = false;
  scan_address(i, address, false, [&](const Ahead& h) {
    if (fresh && !taken_ahead && !(h.acquires && h.before)) return false;
    taken_ahead |= h.acquires;
    if (!h.acquires && first == keys_.size()) first = h.j;
    if (h.pinned) last = h.acquires ? keys_.size() : h.j;
    return true;
  });
  return last != keys_.size() ? last : first;
}

// Tracks, in `found`, the last acquire seen that no pinned release follows; a pinned acquire
// replaces an earlier one, an unpinned one only fills an empty `found` (it may follow the call).
void Resolver::track_acquire(size_t& found, const Ahead& h) const {
  if (h.acquires && (h.pinned || found == keys_.size()))
    found = h.j;
  else if (!h.acquires && h.pinned)
    found = keys_.size();
}

// Another thread's acquire of `address` that keys_[i]'s release of an address not live must
// follow, or keys_.size(): the last one ahead that no other thread's release follows (the block
// this thread was handed; see track_acquire). An unstamped free's order time may precede the
// malloc it frees by as long as its thread went without a stamp (blocked in a join, say). Taken
// early, that acquire binds to this release alone.
size_t Resolver::acquire_before(size_t i, uint64_t address) const {
  size_t found = keys_.size();
  scan_address(i, address, true, [&](const Ahead& h) {
    track_acquire(found, h);
    return true;
  });
  return found;
}

// The acquire by another thread after which keys_[i]'s unstamped release of a live `address`
// belongs, or keys_.size(). When another thread frees the live block within the call's span,
// this call freed a later block there (a thread that waited for Python's GIL frees an object
// another thread made): the last acquire ahead that no other release follows.
size_t Resolver::acquire_after(size_t i, uint64_t address) const {
  size_t found = keys_.size();
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
}

void Resolver::release_slot(uint32_t slot, uint32_t by_thread, uint64_t t) {
  tl_.slot_died_ns[slot] = t;
  live_bytes_ -= tl_.slot_bytes[slot];
  --live_count_;
  if (tl_.slot_thread[slot] != by_thread) ++tl_.cross_thread_frees;
}

// The release half of key k: frees the block at its address, no earlier than `floor` (the half
// it waited for).
void Resolver::release(const Key& k, uint64_t floor) {
  const Event& e = event(k);
  if (!frees_old_block(e)) return;
  auto it = live_.find(e.a);
  if (it == live_.end()) {
    if (e.op == Op::kFree)
      ++tl_.problems.unknown_frees;
    else
      ++tl_.problems.unknown_reallocs;
    return;
  }
  Resolved& r = tl_.per_thread[k.thread][k.index];
  r.old_slot = it->second;
  if (e.op == Op::kFree && e.c != 0)
    tl_.slot_pages[r.old_slot] = uint32_t(std::min<uint64_t>(e.b, UINT32_MAX - 1) + 1);
  release_slot(r.old_slot, k.thread, std::max(placed(k), floor));
  live_.erase(it);
}

// The acquire half of keys_[i], no earlier than `floor`; `may_defer`: once, it may wait for a
// release ahead. False when it waits.
bool Resolver::acquire(size_t i, bool may_defer, uint64_t floor) {
  const Key& k = keys_[i];
  const Event& e = event(k);
  Resolved& r = tl_.per_thread[k.thread][k.index & ~kAcquire];
  if (e.result == 0) {  // acquire half of a call that returned nothing
    if (!(is_realloc(e.op) && requested_bytes(e) == 0)) ++tl_.problems.failed_allocs;
    return true;
  }
  auto [it, fresh] = live_.try_emplace(e.result, tl_.slots);
  if (fresh && may_defer && e.unstamped && !deferred_.contains(i)) {
    // An unstamped call lies anywhere up to its latest: when another thread takes and frees the
    // address within that span, this call got the block after it (unless a release already
    // waits for this very call).
    if (const size_t j = release_before(i, e.result, true); j < keys_.size()) {
      live_.erase(it);
      deferred_.emplace(j, i);
      return false;
    }
  }
  if (!fresh) {
    if (const size_t j = may_defer ? release_before(i, e.result, false) : keys_.size();
        j < keys_.size()) {
      // By the stamps, this call returned the block before another thread's free of it: that
      // free came first.
      deferred_.emplace(j, i);
      return false;
    }
    // The program freed this block but the journal lost the free.
    ++tl_.problems.reused_live;
    r.repair_slot = it->second;
    release_slot(r.repair_slot, k.thread, std::max(placed(k), floor));
    it->second = tl_.slots;
  }
  r.slot = tl_.slots++;
  tl_.slot_bytes.push_back(requested_bytes(e));
  const uint64_t born = std::max(placed(k), floor);
  tl_.slot_born_ns.push_back(born);
  tl_.slot_died_ns.push_back(UINT64_MAX);
  tl_.slot_thread.push_back(k.thread);
  tl_.slot_pages.push_back(0);
  live_bytes_ += tl_.slot_bytes.back();
  ++live_count_;
  if (live_bytes_ > tl_.peak_live_bytes) {
    tl_.peak_live_bytes = live_bytes_;
    tl_.peak_ns = born;
    tl_.peak_slot = r.slot;
  }
  tl_.peak_live_count = std::max(tl_.peak_live_count, live_count_);
  return true;
}

// Runs the halves that wait for key i, once it ran, then those that wait for them: each once,
// with no further wait, no earlier than the half it waited for.
void Resolver::run_waiting(size_t i) {
  ran_.assign(1, i);
  while (!ran_.empty()) {
    const size_t before = ran_.back();
    ran_.pop_back();
    const uint64_t floor = placed(keys_[before]);
    for (auto d = deferred_.find(before); d != deferred_.end(); d = deferred_.find(before)) {
      const size_t h = d->second;
      deferred_.erase(d);
      if (keys_[h].index & kAcquire)
        acquire(h, false, floor);
      else
        release(keys_[h], floor);
      ran_.push_back(h);
    }
  }
}

// The release half keys_[i] in its turn: of an address not live, it first takes the acquire it
// frees (acquire_before); unstamped, of a live address another thread frees first, it waits for
// the acquire of the block it freed (acquire_after).
void Resolver::release_half(size_t i) {
  const Key& k = keys_[i];
  const Event& e = event(k);
  size_t after = keys_.size();
  if (frees_old_block(e) && !live_.contains(e.a)) {
    if (const size_t j = acquire_before(i, e.a); j < keys_.size()) {
      if (taken_.empty()) taken_.resize(keys_.size());
      taken_[j] = 1;
      if (acquire(j, false, 0)) run_waiting(j);
    }
  } else if (frees_old_block(e) && e.unstamped) {
    after = acquire_after(i, e.a);
  }
  if (after < keys_.size()) {
    deferred_.emplace(after, i);
    return;
  }
  release(k, 0);
  run_waiting(i);
}

Timeline Resolver::run() {
  for (size_t i = 0; i < keys_.size(); ++i) {
    if (!(keys_[i].index & kAcquire))
      release_half(i);
    else if (!taken_.empty() && taken_[i])  // ran already, taken early by a release
      run_waiting(i);
    else if (acquire(i, true, 0))
      run_waiting(i);
  }
  return std::move(tl_);
}

}  // namespace

Timeline resolve(const Trace& trace) {
  return Resolver(trace).run();
}

}  // namespace ak::trace
