// The what-if replay behind `allockit advise`: the journal replayed as recorded and as if the
// advice were taken (advised sites routed to allockit pools and arenas, liballockit-prefixed
// loaded by the worker like any allocator under test), in the same process setup as `compare`,
// runs interleaved; per site and in total, the change in time per call and in peak RSS, and the
// proof that the routed replay freed every block once and kept the journal's peak live bytes.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "replay/advice.hpp"
#include "replay/runner.hpp"

namespace ak::replay {

struct RouteFigures {
  KindSummary before, after;               // the calls on the site's blocks (allocations and frees)
  uint64_t rss_before = 0, rss_after = 0;  // peak RSS with only this site routed
};

struct WhatIf {
  std::string allocator;
  int runs = 0;
  std::vector<RouteFigures> routes;  // by route id - 1
  KindSummary before, after;         // every call, every site routed
  uint64_t rss_before = 0, rss_after = 0;
  // The check: both replays made the same allocations and frees, with the same peak of live
  // requested bytes, equal to the journal's.
  bool verified = false;
  std::string check;
};

// Runs the replays under `dir` (plans and each run's worker files). Throws std::runtime_error
// when a replay fails, naming it.
WhatIf measure(const trace::Trace& trace, const trace::Timeline& tl, const Advice& advice,
               const AllocatorSpec& alloc, const ReplayOptions& opt, const std::string& dir);

std::string advice_text(const Advice& a, const WhatIf* w);
std::string advice_json(const Advice& a, const WhatIf* w);

}  // namespace ak::replay
