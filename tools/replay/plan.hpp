// The replay plan: a journal compiled for replay, one flat op array per recorded thread with
// every address replaced by a dense slot. Written by `allockit replay`, mapped read-only by the
// replay worker, so the worker's tables never come from the allocator under test.
#pragma once
#include <cstdint>
#include <string>

#include "trace/event.hpp"

namespace ak::replay {

inline constexpr char kPlanMagic[8] = {'A', 'K', 'P', 'L', 'A', 'N', '0', '1'};
inline constexpr uint32_t kNone = UINT32_MAX;

enum PlanFlags : uint8_t {
  kWaitOld = 1,  // old_slot is filled by another thread: wait until it is
};

// One call to replay. `kind` is a trace::Op value.
struct PlanOp {
  uint64_t time_ns;   // recorded time since the first call, for --speed
  uint64_t size;      // size; count for calloc and reallocarray
  uint64_t arg;       // calloc/reallocarray element size; alignment for aligned calls
  uint32_t slot;      // slot the result goes to (kNone: none)
  uint32_t old_slot;  // slot freed or reallocated (kNone: none)
  uint8_t kind;
  uint8_t flags;
  uint8_t pad[6];
};
static_assert(sizeof(PlanOp) == 40);

// The bytes an op asks for: count * size for calloc and reallocarray.
inline uint64_t op_bytes(const PlanOp& op) {
  return trace::is_counted(trace::Op(op.kind)) ? op.size * op.arg : op.size;
}

struct PlanHeader {
  char magic[8];
  uint32_t threads;
  uint32_t reserved;
  uint64_t slots;
  uint64_t ops;
  // followed by uint64_t op_count[threads], then the ops of thread 0, thread 1, ...
};
static_assert(sizeof(PlanHeader) == 32);

inline constexpr char kSamplesMagic[8] = {'A', 'K', 'S', 'A', 'M', 'P', '0', '1'};
// samples.bin: magic, uint64_t n, then columns: uint32_t latency_ns[n], uint32_t t_us[n],
// uint32_t size[n] (saturated), uint8_t kind[n]; ops in thread order.

}  // namespace ak::replay
