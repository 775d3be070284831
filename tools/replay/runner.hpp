// Runs replay workers (one process per allocator and repetition) and reduces their samples to
// latency percentiles, peak RSS and overhead. Used by `allockit replay` and `allockit compare`.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace ak::replay {

struct AllocatorSpec {
  std::string name;
  std::string preload;  // empty: the system allocator (glibc)
};

// The allocators found on this machine, glibc and allockit first.
std::vector<AllocatorSpec> available_allocators();
// Resolves a name or a path to a .so. Throws std::invalid_argument listing the available names.
AllocatorSpec find_allocator(const std::string& name_or_path);

struct ReplayOptions {
  double speed = 0;  // 0: as fast as possible; else 1 = recorded pace, 10 = ten times faster
  std::string touch = "auto";  // the CLI's default (main.cpp says why)
  int repeat = 1;
  bool progress = false;
  std::vector<std::string> env;  // NAME=VALUE set for the workers beside the caller's environment
  bool keep_latencies = false;   // ReplayResult::latency_ns: the last run's, in plan order
};

inline constexpr int kPercentiles = 14;
extern const char* const kPercentileNames[kPercentiles];  // best, p1, ... p99.999, worst

struct KindSummary {
  std::string kind;  // all, malloc, free, realloc, calloc, aligned
  uint64_t count = 0;
  double mean_ns = 0;
  double pct_ns[kPercentiles] = {};
};

struct ReplayResult {
  AllocatorSpec allocator;
  bool ok = false;
  std::string error;
  uint64_t ops = 0;
  double wall_s = 0, touch_s = 0;  // means over the runs
  double wall_best_s = 0;          // the fastest run
  double floor_min_ns = 0, floor_mean_ns = 0;
  uint64_t peak_rss = 0, peak_live = 0;
  double overhead = 0;  // peak RSS / peak live bytes
  std::vector<KindSummary> kinds;
  std::vector<uint32_t> latency_ns;  // with ReplayOptions::keep_latencies
  // With ALLOCKIT_REPLAY_CHECK=1 in ReplayOptions::env: the last run's allocations and frees.
  uint64_t checked_allocs = 0, checked_frees = 0;
};

// Sorts `v` and summarises it: count, mean and the kPercentiles percentiles.
KindSummary summarise(const char* kind, std::vector<uint32_t>& v);
// Percentile indices into KindSummary::pct_ns.
inline constexpr int kP50 = 4, kP99 = 9, kP999 = 10;

// Replays `plan` against `alloc`, writing samples.bin, rss.csv, worker.json and summary.json
// under `dir`. Never throws for a failing allocator: the result carries the error.
ReplayResult run_replay(const std::string& plan, const AllocatorSpec& alloc,
                        const ReplayOptions& opt, uint64_t peak_live_bytes, const std::string& dir);
// Replays `plan` against each of `allocs`, allocator i under dirs[i], as run_replay does. With
// several runs each, the runs go in rounds (every allocator once a round, each round starting
// with the next one), so a change in the machine's load while they run falls on every allocator
// alike. Results in the order of `allocs`; a failing allocator's carries its error and runs no
// more.
std::vector<ReplayResult> run_replays(const std::string& plan,
                                      const std::vector<AllocatorSpec>& allocs,
                                      const ReplayOptions& opt, uint64_t peak_live_bytes,
                                      const std::vector<std::string>& dirs);

std::string summary_json(const ReplayResult& r);
// The side-by-side table of several results, in markdown.
std::string compare_table(const std::vector<ReplayResult>& results);

}  // namespace ak::replay
