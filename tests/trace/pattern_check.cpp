// Checks a journal of pattern_program against the counts it wrote: every call the program made
// between its markers (sizes in [3000, 4000)) must be in the journal exactly once.
// Usage: pattern_check JOURNAL EXPECTED [CHILD_JOURNAL]   (exit 0: all counts match)
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>

#include "trace/timeline.hpp"

using namespace ak::trace;

namespace {

bool tagged(uint64_t bytes) {
  return bytes >= 3000 && bytes < 4000;
}

// Counts tagged calls per op between the markers (all threads, by time); with no markers
// (the child's journal) counts everything tagged.
std::map<std::string, uint64_t> count(const Trace& t, const char* prefix) {
  Timeline tl = resolve(t);
  uint64_t begin = 0, end = UINT64_MAX;
  for (const auto& th : t.threads)
    for (const Event& e : th.events) {
      if (e.op == Op::kMalloc && e.a == 777777) begin = e.time_ns;
      if (e.op == Op::kMalloc && e.a == 777778) end = e.time_ns;
    }
  std::map<std::string, uint64_t> c;
  for (size_t ti = 0; ti < t.threads.size(); ++ti)
    for (size_t i = 0; i < t.threads[ti].events.size(); ++i) {
      const Event& e = t.threads[ti].events[i];
      if (e.time_ns < begin || e.time_ns > end) continue;
      const Resolved& r = tl.per_thread[ti][i];
      bool released_tagged = r.old_slot != kNoSlot && tagged(tl.slot_bytes[r.old_slot]);
      if (e.op == Op::kFree) {
        // The runtime frees NULL on its own threads' exit: count the main thread's only.
        if (e.a == 0 && t.threads[ti].thread == 1) ++c[std::string(prefix) + "free_null"];
        if (released_tagged) {
          ++c[std::string(prefix) + "free"];
          if (tl.slot_thread[r.old_slot] != ti) ++c[std::string(prefix) + "cross_thread_frees"];
        }
      } else if (tagged(requested_bytes(e)) || released_tagged) {
        ++c[std::string(prefix) + op_name(e.op)];
      }
    }
  return c;
}

// The recorder's stamps (recorder_log.hpp, sampled_stamp): before the program's second thread
// exists some calls go unstamped; from its first call on, every call of every thread is stamped.
// Returns the number of violations (printed).
int check_stamps(const Trace& t) {
  if (t.threads.size() < 2) return 0;
  uint64_t threaded_from = UINT64_MAX;  // the second thread's first stamp
  for (size_t ti = 1; ti < t.threads.size(); ++ti)
    if (!t.threads[ti].events.empty())
      threaded_from = std::min(threaded_from, t.threads[ti].events.front().time_ns);
  uint64_t before = 0, after = 0;
  for (const auto& th : t.threads)
    for (const Event& e : th.events) {
      if (!e.unstamped) continue;
      (e.time_ns < threaded_from ? before : after) += 1;
    }
  int bad = 0;
  if (before == 0)
    std::printf("MISMATCH no unstamped call while the program had one thread\n"), ++bad;
  if (after != 0)
    std::printf("MISMATCH %llu unstamped calls once it had two\n", (unsigned long long)after),
        ++bad;
  if (!bad)
    std::printf("ok       stamps: %llu unstamped calls, none once threaded\n",
                (unsigned long long)before);
  return bad;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  try {
    const Trace journal = load_trace(argv[1]);
    auto got = count(journal, "");
    if (argc > 3) {
      auto child = count(load_trace(argv[3]), "child_");
      got["child_malloc"] = child["child_malloc"];
      got["child_free"] = child["child_free"];
    }
    std::ifstream f(argv[2]);
    std::string op;
    uint64_t want;
    int bad = 0, checked = 0;
    while (f >> op >> want) {
      if (argc <= 3 && op.rfind("child_", 0) == 0) continue;
      ++checked;
      if (got[op] != want) {
        std::printf("MISMATCH %-20s journal %llu, program %llu\n", op.c_str(),
                    (unsigned long long)got[op], (unsigned long long)want);
        ++bad;
      } else {
        std::printf("ok       %-20s %llu\n", op.c_str(), (unsigned long long)want);
      }
    }
    bad += check_stamps(journal);
    return bad == 0 && checked > 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::printf("error: %s\n", e.what());
    return 1;
  }
}
