// liballockit's run-time options, read once from ALLOCKIT_* environment variables when the
// library loads (docs/options.md). Reading them never allocates; a bad value is reported on
// stderr and the default kept.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace ak::detail {

struct Options {
  std::uint64_t purge_delay_ms = 1000;  // ALLOCKIT_PURGE_DELAY_MS
  bool background_purge = true;         // ALLOCKIT_BACKGROUND_PURGE
  bool stats_at_exit = false;           // ALLOCKIT_STATS
  bool verbose = false;                 // ALLOCKIT_VERBOSE
  unsigned guard_freed = 1;             // ALLOCKIT_GUARD_FREED: 0 off, 1 adaptive, 2 always
};

// The options in force: defaults until load_options() ran (the library's constructor calls it).
const Options& options() noexcept;
// Effects: parses the ALLOCKIT_* variables. Called once, at load, before any thread exists.
void load_options() noexcept;

// Called after `bytes` of memory were cached for purging, never with an allocator lock held
// (creating a thread allocates). Starts the background purger (purger.cpp) once the options allow
// it and the process is old enough or has cached enough to need it. Cost once started: one
// relaxed load.
void start_background_purge(std::size_t bytes) noexcept;
// The same whatever the process's age: after a free emptied a block of 1 MiB or more itself (a
// page-table walk of 60-100 us a MiB), so that the next such free moves its pages out instead.
// Once the process has had a second thread, only notes the start as wanted (a free may run under
// a lock of glibc's that creating a thread takes): the next allocation's slow path starts it.
void start_background_purge_now() noexcept;
// Whether a start waits for an allocation's slow path (one relaxed load), and that start: call
// only from an allocation's slow path, before any allocator lock is taken.
extern std::atomic<bool> g_purge_start_wanted;
inline bool background_purge_wanted() noexcept {
  return g_purge_start_wanted.load(std::memory_order_relaxed);
}
void start_wanted_background_purge() noexcept;
// Called at the exit of a thread whose heap keeps `live_bytes` of live blocks (pool_on_abandon):
// blocks other threads may free later, which only the purger sorts back into their slabs and
// returns when the process goes idle (a thread's workers fill a cache, exit, and the main thread
// empties it: 950 MiB stayed resident for good). Starts the purger once they are worth a thread,
// by start_background_purge's measure (1 MiB; 16 MiB in a process younger than 50 ms), and any
// start that waits for an allocation: a thread's exit holds no lock of glibc's that creating a
// thread takes.
void start_background_purge_at_exit(std::size_t live_bytes) noexcept;
// For an allocation's slow path, before any allocator lock is taken: in a process that has had
// a second thread and has taken `taken_bytes` from the OS (slabs and large mappings), starts the
// purger once they reach 16 MiB (kEagerBytes: nothing is cached yet, whatever the process's
// age). Its frees may not start it (above), and a program whose threads free what they filled
// and then wait, allocating nothing more, would keep it all for good (two threads freeing 900
// MiB of small blocks and idling: 400 MiB stayed). Cost until started: one relaxed load
// (background_purge_settled) and a call.
extern std::atomic<bool> g_purge_settled;
inline bool background_purge_settled() noexcept {
  return g_purge_settled.load(std::memory_order_relaxed);
}
void anticipate_background_purge(std::size_t taken_bytes) noexcept;
// Whether the background purger runs in this process (never in a forked child). One load.
bool background_purge_running() noexcept;
// Wakes the background purger to release the large blocks' draining ranges (large_drain).
// Call only once it runs, without an allocator lock held.
void request_drain() noexcept;
// Effects: notes the time the library was loaded (the constructor calls it).
void note_load_time() noexcept;

}  // namespace ak::detail
