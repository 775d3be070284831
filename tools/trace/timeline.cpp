// Loading a journal whole, its unstamped calls placed between their stamps (timeline.hpp);
// the global order is timeline_resolve.cpp's.
#include "trace/timeline.hpp"

#include <algorithm>
#include <map>

namespace ak::trace {

namespace {

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

}  // namespace ak::trace
