// The background purger: one thread that returns idle memory (cached empty slabs, cached large
// mappings) to the OS once it has been idle for the purge delay, also when the program itself has
// gone quiet and no allocator call would trigger a purge. It wakes once per purge delay (at least
// every 10 ms, at most every second when the delay is 0), so memory leaves within two delays, and
// allocator threads never signal it: an earlier version woke it on every cached slab, and the
// wake-ups disturbed programs whose threads hand work back and forth. It never allocates.
//
// It starts when memory is cached for purging (a slab or a large mapping), never at load, and
// only once the process is 50 ms old or has cached 16 MiB. A thread costs a short process more
// than it saves: creating it and tearing it down at exit cost about 60 us here, while `sort` on an
// empty file (which frees an 8 MiB buffer) runs 1 ms in all, and nothing cached can be purged
// before the purge delay (1 s) anyway. What a young process caches below 16 MiB is purged by the
// first later cache event that starts the purger, or by allocator activity. A forked child has no
// purger: it purges on allocator activity.
#include <atomic>

#include "allockit/allockit.h"
#include "core/core.hpp"
#include "malloc/options.hpp"
#include "os/os.hpp"
#include "pool/pool.hpp"

namespace ak::detail {
namespace {

constexpr std::uint64_t kYoungNs = 50'000'000;
constexpr std::size_t kEagerBytes = std::size_t(16) << 20;

AK_EARLY_DATA std::atomic<bool> g_started{false};
AK_EARLY_DATA std::atomic<std::size_t> g_cached_while_young{0};
// Set before any thread exists; 0: loaded long ago (treated as old).
AK_EARLY_DATA std::uint64_t g_load_ns = 0;

void purger_main() {
  for (;;) {
    const std::uint64_t delay = slab_source_purge_delay();
    os::sleep_ns(delay == 0 ? 1'000'000'000 : delay < 10'000'000 ? 10'000'000 : delay);
    const std::size_t bytes = ak_collect(0);
    if (bytes && options().verbose)
      Message().str("allockit: background purge returned ").num(bytes).str(" bytes").print();
  }
}

}  // namespace

void note_load_time() noexcept {
  g_load_ns = os::coarse_now_ns();
}

void start_background_purge(std::size_t bytes) noexcept {
  if (g_started.load(std::memory_order_relaxed) || !options().background_purge) return;
  if (os::coarse_now_ns() - g_load_ns < kYoungNs &&
      g_cached_while_young.fetch_add(bytes, std::memory_order_relaxed) + bytes < kEagerBytes)
    return;
  if (g_started.exchange(true)) return;
  if (!os::start_thread(purger_main) && options().verbose)
    Message().str("allockit: no background purge (thread refused)").print();
}

}  // namespace ak::detail
