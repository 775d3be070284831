// The background purger: one thread that returns idle memory (cached empty slabs, cached large
// mappings) to the OS once it has been idle for the purge delay, also when the program itself has
// gone quiet and no allocator call would trigger a purge. It sleeps on a futex while nothing is
// cached; caching a slab or a mapping wakes it (one atomic exchange, a system call only when it
// was asleep). It never allocates. A forked child has no purger: it purges on allocator activity.
#include <atomic>

#include "core/core.hpp"
#include "malloc/large.hpp"
#include "malloc/options.hpp"
#include "os/os.hpp"
#include "pool/pool.hpp"

namespace ak::detail {
namespace {

std::atomic<std::uint32_t> g_asleep{0};  // 1 while the purger waits for cached memory
std::atomic<bool> g_started{false};

void wake_purger() noexcept {
  if (g_asleep.load(std::memory_order_seq_cst) && g_asleep.exchange(0) == 1)
    os::wake_all(&g_asleep);
}

void purger_main() {
  for (;;) {
    const std::uint64_t delay = slab_source_purge_delay();
    if (!slab_source_has_resident_cache() && large_stats().cached_bytes == 0) {
      g_asleep.store(1, std::memory_order_seq_cst);
      // Re-check after announcing sleep: a release between the check and the store wakes us.
      if (!slab_source_has_resident_cache() && large_stats().cached_bytes == 0)
        os::wait_while_equal(&g_asleep, 1);
      g_asleep.store(0, std::memory_order_seq_cst);
      continue;
    }
    // Purge in steps of a quarter delay (at least 5 ms), so memory leaves within 1.25 delays.
    os::sleep_ns(delay / 4 > 5'000'000 ? delay / 4 : 5'000'000);
    const std::size_t bytes = slab_source_purge_expired() + large_purge_older_than(delay);
    if (bytes && options().verbose)
      Message().str("allockit: background purge returned ").num(bytes).str(" bytes").print();
  }
}

}  // namespace

void start_background_purge() noexcept {
  if (!options().background_purge || g_started.exchange(true)) return;
  g_on_slab_cached = wake_purger;
  if (!os::start_thread(purger_main)) {
    g_on_slab_cached = nullptr;
    if (options().verbose) Message().str("allockit: no background purge (thread refused)").print();
  }
}

}  // namespace ak::detail
