// `allockit stats`: exact call counts, sizes, lifetimes, threads and leaks of one journal.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "trace/timeline.hpp"

namespace ak::trace {

struct Histogram {
  std::vector<std::string> labels;
  std::vector<uint64_t> counts;
};

// The recorded process's memory, from its RSS samples: the heap's share of RssAnon is each
// sample's RssAnon less the recorder's own buffers, less the program's non-heap memory (data
// segments and stacks, nonheap.hpp; v4 journals) and less the same of the first sample (taken
// before the program's first allocation: the loader's and libc's own memory).
struct RecordedMemory {
  uint64_t samples = 0;
  uint64_t baseline_anon = 0;    // RssAnon of the first sample, recorder and non-heap excluded
  uint64_t peak_anon = 0;        // RssAnon, recorder and non-heap excluded
  uint64_t peak_heap_anon = 0;   // the same above the baseline
  uint64_t nonheap_at_peak = 0;  // non-heap bytes left out at that peak
  uint64_t peak_rss = 0;         // VmRSS
  double peak_at_s = 0;          // when peak_heap_anon was sampled, from the first sample
};
RecordedMemory recorded_memory(const std::vector<RssSample>& rss);

// A sample's RssAnon less the recorder's own buffers and the program's non-heap memory.
inline uint64_t program_anon(const RssSample& r) {
  const uint64_t other = r.recorder_bytes + r.nonheap_bytes;
  return r.anon_bytes - std::min(r.anon_bytes, other);
}
// The heap's share of sample `r`: program_anon above that of `first`, the sample taken before the
// program's first call.
inline uint64_t heap_anon(const RssSample& r, const RssSample& first) {
  const uint64_t a = program_anon(r), base = program_anon(first);
  return a - std::min(a, base);
}

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
  // Big blocks whose free carried their resident pages (v5): how many, the pages their requests
  // span, and those resident when freed (what the program wrote of them).
  uint64_t paged_blocks = 0, paged_span_pages = 0, paged_resident_pages = 0;
  double duration_s = 0;
  Problems problems;
  int64_t truncated_at = -1;
  RecordedMemory memory;
};

TraceStats compute_stats(const Trace& trace, const Timeline& tl);
std::string stats_text(const TraceStats& s);
std::string stats_json(const TraceStats& s);

}  // namespace ak::trace
