// `allockit stats`: exact call counts, sizes, lifetimes, threads and leaks of one journal.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "trace/timeline.hpp"

namespace ak::trace {

struct Histogram {
  std::vector<std::string> labels;
  std::vector<uint64_t> counts;
};

struct TraceStats {
  uint64_t events = 0;
  uint64_t calls[kOpCount] = {};
  uint64_t free_null = 0;    // free(NULL) calls, included in calls[free]
  uint64_t allocations = 0;  // calls that returned a block
  uint64_t total_bytes = 0;  // requested by those calls
  uint64_t peak_live_bytes = 0, peak_live_count = 0;
  double mean_size = 0;
  uint64_t median_size = 0;
  Histogram sizes, lifetimes;
  uint32_t threads = 0;
  uint64_t cross_thread_frees = 0;
  uint64_t leaked_blocks = 0, leaked_bytes = 0;  // live when the journal ends
  double duration_s = 0;
  Problems problems;
  int64_t truncated_at = -1;
};

TraceStats compute_stats(const Trace& trace, const Timeline& tl);
std::string stats_text(const TraceStats& s);
std::string stats_json(const TraceStats& s);

}  // namespace ak::trace
