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

// The recorder's stamps (recorder_log.hpp, sampled_stamp): every thread stamps one plain call
// in 8 at least (kStampEvery), and every realloc; its other calls go unstamped. Returns the
// number of violations (printed).
int check_stamps(const Trace& t) {
  uint64_t unstamped = 0, threads_unstamped = 0, longest_run = 0, realloc_unstamped = 0;
  for (const auto& th : t.threads) {
    uint64_t run = 0, mine = 0;
    for (const Event& e : th.events) {
      run = e.unstamped ? run + 1 : 0;
      mine += e.unstamped;
      longest_run = std::max(longest_run, run);
      realloc_unstamped += e.unstamped && is_realloc(e.op);
    }
    unstamped += mine;
    threads_unstamped += mine != 0;
  }
  int bad = 0;
  if (t.threads.size() >= 2 && threads_unstamped < 2)
    std::printf("MISMATCH unstamped calls in %llu thread(s) of %zu\n",
                (unsigned long long)threads_unstamped, t.threads.size()),
        ++bad;
  if (longest_run > 7)
    std::printf("MISMATCH %llu unstamped calls in a row\n", (unsigned long long)longest_run), ++bad;
  if (realloc_unstamped)
    std::printf("MISMATCH %llu unstamped reallocs\n", (unsigned long long)realloc_unstamped), ++bad;
  if (!bad)
    std::printf("ok       stamps: %llu unstamped calls in %llu threads, at most 7 in a row\n",
                (unsigned long long)unstamped, (unsigned long long)threads_unstamped);
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
