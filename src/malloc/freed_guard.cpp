// The sealing policy (freed_guard.hpp).
#include "malloc/freed_guard.hpp"

#include <atomic>
#include <cstdint>

#include "malloc/options.hpp"
#include "pool/pool.hpp"

namespace ak::detail {

std::atomic<std::size_t> g_seal_from{kSealableMediumBytes};

bool should_seal(std::size_t bytes) noexcept {
  const unsigned mode = options().guard_freed;
  if (mode == 0) {
    g_seal_from.store(SIZE_MAX, std::memory_order_relaxed);  // may_seal says no from now on
    return false;
  }
  if (bytes < kSealableMediumBytes) return false;
  if (mode == 2 || bytes >= kSealAlwaysBytes) return true;
  if (bytes < g_seal_from.load(std::memory_order_relaxed)) return false;
  g_seal_from.store(bytes + bytes / kSealStep, std::memory_order_relaxed);
  return true;
}

}  // namespace ak::detail
