// Compiles a journal's timeline into a replay plan file (plan.hpp).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "replay/plan.hpp"
#include "trace/timeline.hpp"

namespace ak::replay {

struct PlanInfo {
  uint64_t ops = 0, slots = 0, threads = 0;
  uint64_t skipped_failed = 0;  // calls that failed in the recording: not replayed
  uint64_t skipped_free_null = 0;
  uint64_t repairs = 0;  // frees inserted for lost ones
};

// What-if routing (`allockit advise`): the slots whose allocation and free go to a route.
struct Routing {
  std::vector<PlanRoute> routes;          // route id i + 1 is routes[i]
  std::vector<uint16_t> slot_route;       // per slot: 0 (malloc) or a route id
  std::vector<uint8_t> reset_after_free;  // per slot: its free ends its arena's group
};

// Writes the plan to `path`. With `routing` and `apply`, the routed slots' allocations and frees
// are flagged for their routes (route table in the plan); with `op_routes`, each op's route id
// (its block's, 0 for none) is stored in plan order, whether applied or not, so the samples of a
// plain and a routed replay of one journal compare op by op. Throws std::runtime_error on an I/O
// error.
PlanInfo write_plan(const trace::Trace& trace, const trace::Timeline& tl, const std::string& path,
                    const Routing* routing = nullptr, bool apply = false,
                    std::vector<uint16_t>* op_routes = nullptr);

}  // namespace ak::replay
