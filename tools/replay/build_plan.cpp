// Plan compilation (see build_plan.hpp): per thread, in call order, each event becomes at most
// two ops (a repair free, then the call). Frees of NULL and calls that failed when recorded are
// not replayed; a free of a slot filled by another thread is flagged to wait for it.
#include "replay/build_plan.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "replay/plan.hpp"

namespace ak::replay {

using trace::Event;
using trace::Op;

namespace {

// Flags `op` for the route of its block, when routing applies. Returns the route id, 0 if none.
uint16_t route_op(PlanOp& op, const Routing* routing, bool apply) {
  if (!routing) return 0;
  const uint32_t slot = op.slot != kNone ? op.slot : op.old_slot;
  if (slot == kNone || slot >= routing->slot_route.size()) return 0;
  const uint16_t route = routing->slot_route[slot];
  if (route == 0 || !apply) return route;
  op.flags |= kRouted;
  op.route = route;
  if (op.slot == kNone && routing->reset_after_free[slot]) op.flags |= kResetAfter;
  return route;
}

}  // namespace

PlanInfo write_plan(const trace::Trace& trace, const trace::Timeline& tl, const std::string& path,
                    const Routing* routing, bool apply, std::vector<uint16_t>* op_routes) {
  if (routing && routing->routes.size() > kMaxRoutes)
    throw std::invalid_argument("more than " + std::to_string(kMaxRoutes) + " routes");
  PlanInfo info;
  if (op_routes) op_routes->clear();
  info.slots = tl.slots;
  std::vector<std::vector<PlanOp>> per_thread(trace.threads.size());
  auto wait_flag = [&](uint32_t slot, uint32_t thread) -> uint8_t {
    return slot != kNone && tl.slot_thread[slot] != thread ? kWaitOld : 0;
  };
  for (uint32_t t = 0; t < trace.threads.size(); ++t) {
    const auto& evs = trace.threads[t].events;
    auto& ops = per_thread[t];
    ops.reserve(evs.size());
    for (size_t i = 0; i < evs.size(); ++i) {
      const Event& e = evs[i];
      const trace::Resolved& r = tl.per_thread[t][i];
      uint64_t rel = e.time_ns >= tl.first_ns ? e.time_ns - tl.first_ns : 0;
      if (r.repair_slot != kNone) {
        PlanOp f{};
        f.time_ns = rel;
        f.slot = kNone;
        f.old_slot = r.repair_slot;
        f.kind = static_cast<uint8_t>(Op::kFree);
        f.flags = wait_flag(r.repair_slot, t);
        const uint16_t route = route_op(f, routing, apply);
        if (op_routes) op_routes->push_back(route);
        ops.push_back(f);
        ++info.repairs;
      }
      PlanOp op{};
      op.time_ns = rel;
      op.kind = static_cast<uint8_t>(e.op);
      op.slot = r.slot;
      op.old_slot = r.old_slot;
      if (e.op == Op::kFree && r.old_slot == kNone) {
        if (e.a == 0) ++info.skipped_free_null;
        continue;  // free(NULL), or an unknown address (counted by the timeline)
      }
      const trace::CallArgs args = trace::call_args(e);
      op.size = args.size;
      op.arg = args.arg;
      if (e.op != Op::kFree && r.slot == kNone && r.old_slot == kNone) {
        ++info.skipped_failed;  // returned null when recorded and released nothing
        continue;
      }
      op.flags = wait_flag(r.old_slot, t);
      if (r.slot != kNone) op.pages = tl.slot_pages[r.slot];
      const uint16_t route = route_op(op, routing, apply);
      if (op_routes) op_routes->push_back(route);
      ops.push_back(op);
    }
    info.ops += ops.size();
  }
  info.threads = trace.threads.size();

  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) throw std::runtime_error(path + ": cannot create (" + std::strerror(errno) + ")");
  PlanHeader h{};
  std::memcpy(h.magic, kPlanMagic, 8);
  h.threads = static_cast<uint32_t>(per_thread.size());
  const bool with_routes = routing && apply;
  h.routes = with_routes ? static_cast<uint32_t>(routing->routes.size()) : 0;
  h.slots = tl.slots;
  h.ops = info.ops;
  bool ok = std::fwrite(&h, sizeof h, 1, f) == 1;
  for (const auto& ops : per_thread) {
    uint64_t n = ops.size();
    ok = ok && std::fwrite(&n, sizeof n, 1, f) == 1;
  }
  if (h.routes)
    ok = ok && std::fwrite(routing->routes.data(), sizeof(PlanRoute), h.routes, f) == h.routes;
  for (const auto& ops : per_thread)
    ok =
        ok && (ops.empty() || std::fwrite(ops.data(), sizeof(PlanOp), ops.size(), f) == ops.size());
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) throw std::runtime_error(path + ": write failed");
  return info;
}

}  // namespace ak::replay
