// Compiles a journal's timeline into a replay plan file (plan.hpp).
#pragma once
#include <string>

#include "trace/timeline.hpp"

namespace ak::replay {

struct PlanInfo {
  uint64_t ops = 0, slots = 0, threads = 0;
  uint64_t skipped_failed = 0;  // calls that failed in the recording: not replayed
  uint64_t skipped_free_null = 0;
  uint64_t repairs = 0;  // frees inserted for lost ones
};

// Writes the plan to `path`. Throws std::runtime_error on an I/O error.
PlanInfo write_plan(const trace::Trace& trace, const trace::Timeline& tl, const std::string& path);

}  // namespace ak::replay
