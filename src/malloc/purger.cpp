// The background purger: one thread that returns idle memory (cached empty slabs, cached large
// mappings) to the OS once it has been idle for the purge delay, also when the program itself has
// gone quiet and no allocator call would trigger a purge. It wakes once per purge delay (at least
// every 10 ms, at most every second when the delay is 0), so memory leaves within two delays, and
// allocator threads never signal it: an earlier version woke it on every cached slab, and the
// wake-ups disturbed programs whose threads hand work back and forth. It never allocates.
//
// It starts when memory is cached for purging (a slab or a large mapping), never at load, and
// only once the process has cached 1 MiB in all (kWorthAThreadBytes) if 50 ms old, or 16 MiB
// (kEagerBytes) if younger. A thread costs a short process more than it saves: creating it and
// tearing it down at exit cost about 60 us here, while `sort` on an empty file (which frees an 8
// MiB buffer) runs 1 ms in all, and nothing cached can be purged before the purge delay (1 s)
// anyway. Below 1 MiB, what it could return is less than its own start costs in time: started at
// the first cached block at any size, ssh's replay paid 40-60 us for it in the free of its one
// 257 KiB large block (23,008 calls, 1-2.5 ns on its mean call). But a free that had to empty a
// block of 1 MiB or more itself (large.cpp) starts it at once, so that the next such free hands its
// pages over instead. What a young process caches below 16 MiB is purged by the first later cache
// event that starts the purger, or by allocator activity. A forked child never has a purger,
// neither its parent's nor one of its own: it purges on allocator activity. A child of a
// multi-threaded parent may call only async-signal-safe functions (POSIX), which pthread_create is
// not, and ThreadSanitizer kills a process that tries.
//
// It also releases the large blocks' draining ranges (large_cache.hpp) as soon as a free hands
// one over (request_drain): the one wake-up allocator threads send, only for frees that empty a
// block (one of 32 MiB or more, or of 1 MiB or more sealed at free), each of which saves the
// freeing thread 50 us to milliseconds for a wake-up's microseconds. That holds only because the
// thread runs at nice 19 (named allockit-purge): woken at nice 0, it took the CPU from the thread
// that woke it, and a loop freeing a block of a new size from 1.6 to 9 MiB each time spent
// 50-1,000 us in each free (3.5-5.7 ms in 12 frees) against 30-150 us (0.7-1.1 ms).
#include <atomic>

#include "allockit/allockit.h"
#include "core/core.hpp"
#include "malloc/large.hpp"
#include "malloc/options.hpp"
#include "os/os.hpp"
#include "pool/pool.hpp"

namespace ak::detail {

AK_EARLY_DATA std::atomic<bool> g_purge_start_wanted{false};
// Set once the purger started, was refused, or never will (its option off).
AK_EARLY_DATA std::atomic<bool> g_purge_settled{false};

namespace {

constexpr std::uint64_t kYoungNs = 50'000'000;
constexpr std::size_t kEagerBytes = std::size_t(16) << 20;
constexpr std::size_t kWorthAThreadBytes = std::size_t(1) << 20;

AK_EARLY_DATA std::atomic<bool> g_started{false};
AK_EARLY_DATA std::atomic<bool> g_running{false};  // the thread exists (in this process)
constinit os::Wakeup g_wakeup;
AK_EARLY_DATA std::atomic<std::size_t> g_cached_before_start{0};
// Set before any thread exists; 0: loaded long ago (treated as old).
AK_EARLY_DATA std::uint64_t g_load_ns = 0;
AK_EARLY_DATA int g_load_pid = 0;  // the process that loaded the library; 0: unknown

void purger_main() {
  g_running.store(true, std::memory_order_release);
  os::become_background_thread("allockit-purge");
  for (;;) {
    const std::uint64_t delay = slab_source_purge_delay();
    const std::uint64_t period = delay == 0           ? 1'000'000'000
                                 : delay < 10'000'000 ? 10'000'000
                                                      : delay;
    const std::uint64_t due = os::coarse_now_ns() + period;
    for (std::uint64_t now = os::coarse_now_ns(); now < due; now = os::coarse_now_ns())
      if (g_wakeup.wait_ns(due - now)) large_drain();
    const std::size_t bytes = ak_collect(0);
    if (bytes && options().verbose)
      Message().str("allockit: background purge returned ").num(bytes).str(" bytes").print();
  }
}

// Bytes a process must have cached (or left in an exited thread's heap) before the purger is
// worth its thread.
std::size_t worth_a_thread() noexcept {
  return os::coarse_now_ns() - g_load_ns < kYoungNs ? kEagerBytes : kWorthAThreadBytes;
}

void forget_purger_in_child() {
  g_running.store(false, std::memory_order_relaxed);
}

}  // namespace

bool background_purge_running() noexcept {
  return g_running.load(std::memory_order_acquire);
}

void request_drain() noexcept {
  g_wakeup.raise();
}

void note_load_time() noexcept {
  g_load_ns = os::coarse_now_ns_by_syscall();  // no vDSO page faults at load
  g_load_pid = os::process_id();
  if (!options().background_purge) g_purge_settled.store(true, std::memory_order_relaxed);
}

void start_background_purge(std::size_t bytes) noexcept {
  if (g_started.load(std::memory_order_relaxed) || !options().background_purge) return;
  if (g_cached_before_start.fetch_add(bytes, std::memory_order_relaxed) + bytes < worth_a_thread())
    return;
  start_background_purge_now();
}

// Creates the purger thread, once.
void create_purger() noexcept {
  if (g_started.load(std::memory_order_relaxed) || !options().background_purge ||
      g_started.exchange(true))
    return;
  g_purge_settled.store(true, std::memory_order_relaxed);
  // One system call per process, here rather than in a fork handler: a write in every child
  // would cost each fork+exec a copy-on-write fault.
  if (g_load_pid != 0 && os::process_id() != g_load_pid) return;  // a forked child
  if (!os::on_fork_child(forget_purger_in_child)) return;         // a child must not hand it work
  if (os::start_thread(purger_main))
    g_running.store(true, std::memory_order_release);  // frees may hand it ranges before it runs
  else if (options().verbose)
    Message().str("allockit: no background purge (thread refused)").print();
}

void start_background_purge_now() noexcept {
  if (g_started.load(std::memory_order_relaxed) || !options().background_purge) return;
  // A free may run under a lock of glibc's that pthread_create takes: pthread_join and
  // pthread_create free the thread-local storage of exited threads' cached stacks holding the
  // stack cache's lock (__nptl_free_stacks), and a purger started from that free waited for the
  // lock its own thread held (8 threads churning small blocks, then joined: a hang at the join in
  // 3 runs of 3). So once the process has had a second thread, the start waits for the next
  // allocation's slow path (start_wanted_background_purge), which glibc never runs under it.
  if (!os::single_threaded()) {
    g_purge_start_wanted.store(true, std::memory_order_relaxed);
    return;
  }
  create_purger();
}

void start_wanted_background_purge() noexcept {
  if (g_purge_start_wanted.exchange(false, std::memory_order_relaxed)) create_purger();
}

void anticipate_background_purge(std::size_t taken_bytes) noexcept {
  if (os::single_threaded() || taken_bytes < kEagerBytes) return;
  create_purger();
}

void start_background_purge_at_exit(std::size_t live_bytes) noexcept {
  if (live_bytes >= worth_a_thread() || g_purge_start_wanted.exchange(false)) create_purger();
}

}  // namespace ak::detail
