// The background purger: one thread that returns idle memory (cached empty slabs, cached large
// mappings) to the OS once it has been idle for the purge delay, also when the program itself has
// gone quiet and no allocator call would trigger a purge. It wakes once per purge delay (at least
// every 10 ms, at most every second when the delay is 0), so memory leaves within two delays, and
// allocator threads never signal it: an earlier version woke it on every cached slab, and the
// wake-ups disturbed programs whose threads hand work back and forth. It never allocates. It
// starts the first time memory is cached for purging (a slab or a large mapping), never at load:
// a short process that never frees a slab pays for no thread. A forked child has no purger: it
// purges on allocator activity.
#include <atomic>

#include "allockit/allockit.h"
#include "core/core.hpp"
#include "malloc/options.hpp"
#include "os/os.hpp"
#include "pool/pool.hpp"

namespace ak::detail {
namespace {

std::atomic<bool> g_started{false};

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

void start_background_purge() noexcept {
  if (g_started.load(std::memory_order_relaxed) || !options().background_purge) return;
  if (g_started.exchange(true)) return;
  if (!os::start_thread(purger_main) && options().verbose)
    Message().str("allockit: no background purge (thread refused)").print();
}

}  // namespace ak::detail
