// The replay plan: a journal compiled for replay, one flat op array per recorded thread with
// every address replaced by a dense slot. Written by `allockit replay`, mapped read-only by the
// replay worker, so the worker's tables never come from the allocator under test.
#pragma once
#include <cstdint>
#include <string>

#include "trace/event.hpp"

namespace ak::replay {

inline constexpr char kPlanMagic[8] = {'A', 'K', 'P', 'L', 'A', 'N', '0', '3'};
inline constexpr uint32_t kNone = UINT32_MAX;

enum PlanFlags : uint8_t {
  kWaitOld = 1,     // old_slot is filled by another thread: wait until it is
  kRouted = 2,      // the block comes from, or goes back to, route `route` instead of malloc
  kResetAfter = 4,  // a routed free that ends its arena's group: reset the arena after it
};

// A what-if route (`allockit advise`): blocks of advised sites served by a real allockit pool or
// arena from liballockit-prefixed, one instance per replay thread.
enum RouteKind : uint32_t {
  kRoutePool = 1,   // ak_pool of block_size-byte blocks
  kRouteArena = 2,  // ak_arena; frees are dropped, kResetAfter resets it
};
struct PlanRoute {
  uint32_t kind;
  uint32_t align;
  uint64_t block_size;  // pools: every request of the route fits
};
static_assert(sizeof(PlanRoute) == 16);
inline constexpr uint32_t kMaxRoutes = 64;

// One call to replay. `kind` is a trace::Op value.
struct PlanOp {
  uint64_t time_ns;   // recorded time since the first call, for --speed
  uint64_t size;      // size; count for calloc and reallocarray
  uint64_t arg;       // calloc/reallocarray element size; alignment for aligned calls
  uint32_t slot;      // slot the result goes to (kNone: none)
  uint32_t old_slot;  // slot freed or reallocated (kNone: none)
  uint8_t kind;
  uint8_t flags;
  uint16_t route;  // 1..kMaxRoutes with kRouted
  // An allocation's block: 1 + its pages resident when the program freed it (Timeline's
  // slot_pages), which `--touch auto` touches instead of all; 0: unknown.
  uint32_t pages;
};
static_assert(sizeof(PlanOp) == 40);

// The bytes an op asks for: count * size for calloc and reallocarray.
inline uint64_t op_bytes(const PlanOp& op) {
  return trace::is_counted(trace::Op(op.kind)) ? op.size * op.arg : op.size;
}

struct PlanHeader {
  char magic[8];
  uint32_t threads;
  uint32_t routes;  // at most kMaxRoutes
  uint64_t slots;
  uint64_t ops;
  // followed by uint64_t op_count[threads], PlanRoute route[routes] (route id i + 1), then the
  // ops of thread 0, thread 1, ...
};
static_assert(sizeof(PlanHeader) == 32);

inline constexpr char kSamplesMagic[8] = {'A', 'K', 'S', 'A', 'M', 'P', '0', '1'};
// samples.bin: magic, uint64_t n, then columns: uint32_t latency_ns[n], uint32_t t_us[n],
// uint32_t size[n] (saturated), uint8_t kind[n]; ops in thread order.

}  // namespace ak::replay
