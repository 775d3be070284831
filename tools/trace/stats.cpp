// Journal statistics (see stats.hpp). Histograms use power-of-two size buckets and decade
// lifetime buckets, so their labels are stable across journals.
#include "trace/stats.hpp"

#include <algorithm>
#include <bit>
#include <cstdio>

#include "trace/json.hpp"

namespace ak::trace {

namespace {

std::string size_label(int b) {
  auto human = [](uint64_t v) {
    if (v >= (1ull << 30)) return std::to_string(v >> 30) + "G";
    if (v >= (1ull << 20)) return std::to_string(v >> 20) + "M";
    if (v >= (1ull << 10)) return std::to_string(v >> 10) + "K";
    return std::to_string(v);
  };
  if (b == 0) return "0";
  return "<=" + human(1ull << (b - 1));
}

const char* const kLifeLabels[] = {"<100ns", "<1us", "<10us", "<100us", "<1ms",       "<10ms",
                                   "<100ms", "<1s",  "<10s",  ">=10s",  "never freed"};

}  // namespace

TraceStats compute_stats(const Trace& trace, const Timeline& tl) {
  TraceStats s;
  s.events = trace.events;
  s.threads = static_cast<uint32_t>(trace.threads.size());
  s.truncated_at = trace.truncated_at;
  for (const auto& t : trace.threads)
    for (const Event& e : t.events) {
      ++s.calls[static_cast<int>(e.op)];
      if (e.op == Op::kFree && e.a == 0) ++s.free_null;
    }
  s.allocations = tl.slots;
  std::vector<uint64_t> sizes(tl.slot_bytes);
  int max_bucket = 0;
  std::vector<uint64_t> size_hist(65, 0);
  for (uint64_t b : sizes) {
    s.total_bytes += b;
    int bucket = b <= 1 ? static_cast<int>(b) : 1 + std::bit_width(b - 1);
    ++size_hist[bucket];
    max_bucket = std::max(max_bucket, bucket);
  }
  for (int b = 0; b <= max_bucket; ++b) {
    s.sizes.labels.push_back(size_label(b));
    s.sizes.counts.push_back(size_hist[b]);
  }
  if (!sizes.empty()) {
    s.mean_size = static_cast<double>(s.total_bytes) / static_cast<double>(sizes.size());
    auto mid = sizes.begin() + static_cast<long>(sizes.size() / 2);
    std::nth_element(sizes.begin(), mid, sizes.end());
    s.median_size = *mid;
  }
  s.lifetimes.counts.assign(std::size(kLifeLabels), 0);
  for (const char* l : kLifeLabels) s.lifetimes.labels.push_back(l);
  for (uint32_t i = 0; i < tl.slots; ++i) {
    if (tl.slot_died_ns[i] == UINT64_MAX) {
      ++s.leaked_blocks;
      s.leaked_bytes += tl.slot_bytes[i];
      ++s.lifetimes.counts.back();
      continue;
    }
    if (tl.slot_pages[i] != 0) {
      ++s.paged_blocks;
      s.paged_span_pages += (tl.slot_bytes[i] + 4095) / 4096;
      s.paged_resident_pages += tl.slot_pages[i] - 1;
    }
    uint64_t life = tl.slot_died_ns[i] - tl.slot_born_ns[i];
    size_t bucket = 0;
    for (uint64_t limit = 100; bucket < 9 && life >= limit; limit *= 10) ++bucket;
    ++s.lifetimes.counts[bucket];
  }
  s.peak_live_bytes = tl.peak_live_bytes;
  s.peak_live_count = tl.peak_live_count;
  s.cross_thread_frees = tl.cross_thread_frees;
  s.problems = tl.problems;
  s.duration_s = static_cast<double>(tl.last_ns - tl.first_ns) * 1e-9;
  s.memory = recorded_memory(trace.rss);
  return s;
}

RecordedMemory recorded_memory(const std::vector<RssSample>& rss) {
  RecordedMemory m;
  if (rss.empty()) return m;
  m.samples = rss.size();
  m.baseline_anon = program_anon(rss.front());
  for (const RssSample& r : rss) {
    const uint64_t heap = heap_anon(r, rss.front());
    m.peak_anon = std::max(m.peak_anon, program_anon(r));
    m.peak_rss = std::max(m.peak_rss, r.rss_bytes);
    if (heap > m.peak_heap_anon) {
      m.peak_heap_anon = heap;
      m.nonheap_at_peak = r.nonheap_bytes;
      m.peak_at_s = static_cast<double>(r.time_ns - rss.front().time_ns) * 1e-9;
    }
  }
  return m;
}

std::string stats_text(const TraceStats& s) {
  std::string out;
  char line[256];
  auto add = [&](const char* fmt, auto... args) {
    std::snprintf(line, sizeof line, fmt, args...);
    out += line;
  };
  using ull = unsigned long long;
  add("events            %llu over %.3f s, %u thread(s)\n", (ull)s.events, s.duration_s, s.threads);
  if (s.truncated_at >= 0)
    add("truncated         at offset %lld (the rest is lost)\n", (long long)s.truncated_at);
  out += "calls\n";
  for (int i = 0; i < kOpCount; ++i)
    if (s.calls[i]) add("  %-16s %llu\n", op_name(static_cast<Op>(i)), (ull)s.calls[i]);
  if (s.free_null) add("  (free(NULL)      %llu)\n", (ull)s.free_null);
  add("allocations       %llu, %llu bytes requested\n", (ull)s.allocations, (ull)s.total_bytes);
  add("size              mean %.1f, median %llu\n", s.mean_size, (ull)s.median_size);
  add("peak live         %llu bytes in %llu blocks\n", (ull)s.peak_live_bytes,
      (ull)s.peak_live_count);
  add("cross-thread free %llu\n", (ull)s.cross_thread_frees);
  add("leaked at end     %llu blocks, %llu bytes\n", (ull)s.leaked_blocks, (ull)s.leaked_bytes);
  if (s.paged_blocks)
    add("big blocks        %llu freed (64 KiB or more): %llu of the %llu pages they span were "
        "resident (%.0f%%)\n",
        (ull)s.paged_blocks, (ull)s.paged_resident_pages, (ull)s.paged_span_pages,
        100.0 * double(s.paged_resident_pages) / double(std::max<uint64_t>(s.paged_span_pages, 1)));
  if (s.memory.samples)
    add("recorded memory   peak heap RssAnon %.2f MiB above the %.2f MiB before the first call "
        "(at %.3f s; non-heap %.2f MiB left out), VmRSS peak %.2f MiB; %llu samples\n",
        static_cast<double>(s.memory.peak_heap_anon) / 1048576.0,
        static_cast<double>(s.memory.baseline_anon) / 1048576.0, s.memory.peak_at_s,
        static_cast<double>(s.memory.nonheap_at_peak) / 1048576.0,
        static_cast<double>(s.memory.peak_rss) / 1048576.0, (ull)s.memory.samples);
  else
    add("recorded memory   not sampled (an import, or a journal from an older recorder)\n");
  if (s.problems.total() || s.problems.failed_allocs)
    add("repaired          %llu unknown frees dropped, %llu unknown reallocs, %llu live addresses "
        "reused; %llu failed calls\n",
        (ull)s.problems.unknown_frees, (ull)s.problems.unknown_reallocs,
        (ull)s.problems.reused_live, (ull)s.problems.failed_allocs);
  auto hist = [&](const char* title, const Histogram& h) {
    out += title;
    out += "\n";
    uint64_t max = 1;
    for (uint64_t c : h.counts) max = std::max(max, c);
    for (size_t i = 0; i < h.counts.size(); ++i) {
      if (!h.counts[i]) continue;
      int bar =
          static_cast<int>(40.0 * static_cast<double>(h.counts[i]) / static_cast<double>(max));
      add("  %-12s %10llu %s\n", h.labels[i].c_str(), (ull)h.counts[i],
          std::string(bar, '#').c_str());
    }
  };
  hist("sizes (bytes)", s.sizes);
  hist("lifetimes", s.lifetimes);
  return out;
}

std::string stats_json(const TraceStats& s) {
  std::string o = "{\n";
  auto kv = [&](const char* k, const std::string& v, bool comma = true) {
    o += std::string("  ") + json_str(k) + ": " + v + (comma ? ",\n" : "\n");
  };
  auto n = [](uint64_t v) { return std::to_string(v); };
  kv("events", n(s.events));
  std::string calls = "{";
  for (int i = 0; i < kOpCount; ++i)
    calls += (i ? ", " : "") + json_str(op_name(static_cast<Op>(i))) + ": " + n(s.calls[i]);
  kv("calls", calls + "}");
  kv("free_null", n(s.free_null));
  kv("allocations", n(s.allocations));
  kv("total_bytes", n(s.total_bytes));
  kv("peak_live_bytes", n(s.peak_live_bytes));
  kv("peak_live_count", n(s.peak_live_count));
  kv("mean_size", json_num(s.mean_size));
  kv("median_size", n(s.median_size));
  auto hist = [&](const Histogram& h) {
    std::string v = "{";
    for (size_t i = 0; i < h.counts.size(); ++i)
      v += (i ? ", " : "") + json_str(h.labels[i]) + ": " + n(h.counts[i]);
    return v + "}";
  };
  kv("size_histogram", hist(s.sizes));
  kv("lifetime_histogram", hist(s.lifetimes));
  kv("threads", n(s.threads));
  kv("cross_thread_frees", n(s.cross_thread_frees));
  kv("leaked_blocks", n(s.leaked_blocks));
  kv("leaked_bytes", n(s.leaked_bytes));
  kv("big_blocks", "{\"freed_with_pages\": " + n(s.paged_blocks) +
                       ", \"span_pages\": " + n(s.paged_span_pages) +
                       ", \"resident_pages\": " + n(s.paged_resident_pages) + "}");
  kv("duration_s", json_num(s.duration_s));
  kv("problems", "{\"unknown_frees\": " + n(s.problems.unknown_frees) +
                     ", \"unknown_reallocs\": " + n(s.problems.unknown_reallocs) +
                     ", \"reused_live\": " + n(s.problems.reused_live) +
                     ", \"failed_allocs\": " + n(s.problems.failed_allocs) + "}");
  kv("recorded_memory", "{\"samples\": " + n(s.memory.samples) +
                            ", \"baseline_anon_bytes\": " + n(s.memory.baseline_anon) +
                            ", \"peak_anon_bytes\": " + n(s.memory.peak_anon) +
                            ", \"nonheap_at_peak_bytes\": " + n(s.memory.nonheap_at_peak) +
                            ", \"peak_heap_anon_bytes\": " + n(s.memory.peak_heap_anon) +
                            ", \"peak_rss_bytes\": " + n(s.memory.peak_rss) +
                            ", \"peak_at_s\": " + json_num(s.memory.peak_at_s) + "}");
  kv("truncated_at", std::to_string(s.truncated_at), false);
  return o + "}\n";
}

}  // namespace ak::trace
