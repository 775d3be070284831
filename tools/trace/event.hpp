// The journal's event model: one record per allocation call, as the program made it.
// Plain data, no heap; shared by the recorder (inside traced programs), the codec and every tool.
#pragma once
#include <cstdint>

namespace ak::trace {

// Every entry point the recorder captures. Values are part of the journal format (v1).
enum class Op : uint8_t {
  kMalloc = 0,         // a = size
  kCalloc = 1,         // a = count, b = size
  kRealloc = 2,        // a = old pointer, b = size; duration = call time
  kFree = 3,           // a = pointer (0 for free(NULL)); c = 1: b = pages resident at free
  kPosixMemalign = 4,  // a = alignment, b = size, c = return code
  kAlignedAlloc = 5,   // a = alignment, b = size
  kMemalign = 6,       // a = alignment, b = size
  kValloc = 7,         // a = size
  kPvalloc = 8,        // a = size
  kReallocarray = 9,   // a = old pointer, b = count, c = size; duration = call time
};
inline constexpr int kOpCount = 10;

const char* op_name(Op op);

// True for calls that may release an old block (realloc, reallocarray).
constexpr bool is_realloc(Op op) {
  return op == Op::kRealloc || op == Op::kReallocarray;
}
// True for calls that take an alignment argument or imply one.
constexpr bool is_aligned(Op op) {
  return op == Op::kPosixMemalign || op == Op::kAlignedAlloc || op == Op::kMemalign ||
         op == Op::kValloc || op == Op::kPvalloc;
}
// True for calls that return a new block (everything but free).
constexpr bool returns_block(Op op) {
  return op != Op::kFree;
}

// One decoded call. `time_ns` is CLOCK_MONOTONIC when the call returned (allocations) or was
// entered (free, and the release half of realloc: `time_ns - duration_ns`).
struct Event {
  uint64_t time_ns = 0;
  uint64_t a = 0, b = 0, c = 0;
  uint64_t result = 0;  // returned pointer; 0 for free
  uint32_t duration_ns = 0;
  Op op = Op::kMalloc;
  // The recorder did not read the clock for this call (kUnstampedFlag): time_ns is its thread's
  // previous time, a lower bound; the thread's next stamped event bounds it from above.
  bool unstamped = false;
  uint8_t pad[2] = {};
};

// A call's request, in the order its entry point takes it: `size` is the byte count, or the
// element count for calloc and reallocarray; `arg` is then the element size, or the alignment
// for posix_memalign, aligned_alloc and memalign, else 0. Both 0 for free.
struct CallArgs {
  uint64_t size = 0;
  uint64_t arg = 0;
};
CallArgs call_args(const Event& e);

// True for calls whose request is count * size (calloc, reallocarray).
constexpr bool is_counted(Op op) {
  return op == Op::kCalloc || op == Op::kReallocarray;
}

// The bytes a call asked for (count * size for calloc/reallocarray, saturating).
uint64_t requested_bytes(const Event& e);

}  // namespace ak::trace
