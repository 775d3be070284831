// Fidelity: how closely a replay with the allocator that was recorded reproduces the memory the
// program really used. The recorded side is the journal's RSS samples (RssAnon less the
// recorder's own buffers and less the first sample, taken before the program's first call); the
// replayed side is the worker's rss.csv (RssAnon above the replayer's own, taken after its tables
// and threads exist). Used by `allockit compare` and `replay`.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "replay/runner.hpp"
#include "trace/journal.hpp"

namespace ak::replay {

using Curve = std::vector<std::pair<double, uint64_t>>;  // (ms from the start, bytes)

// The recorded heap's share of RssAnon over time (see above); empty without samples.
Curve recorded_curve(const std::vector<trace::RssSample>& rss);
// A worker's rss.csv; empty when missing.
Curve read_rss_csv(const std::string& path);

struct Fidelity {
  enum class State { kUnknown, kNotReplayed, kMeasured } state = State::kUnknown;
  std::string allocator;  // the recorded allocator's name among the replayed ones
  uint64_t recorded_peak = 0, replayed_peak = 0;
  double ratio = 0;          // replayed / recorded peak
  uint64_t largest_gap = 0;  // between the curves, each run's time scaled to [0, 1]
};

// Finds the result whose library served the recording (meta `allocator`) and compares its
// rss.csv under `dir`/NAME with the recorded curve.
Fidelity measure_fidelity(const std::string& recorded_allocator, const Curve& recorded,
                          const std::vector<ReplayResult>& results, const std::string& dir);
std::string fidelity_line(const Fidelity& f, const std::string& recorded_allocator);
std::string fidelity_json(const Fidelity& f);

}  // namespace ak::replay
