// fork safety: every allocator lock is taken before fork() and released in parent and child, so a
// child of a multi-threaded parent never inherits a lock held by a thread that no longer exists.
// Registered at load time from malloc.cpp (a static archive would otherwise drop this file). The
// order (heaps, slab source, large blocks) matches the one nesting elsewhere: collecting abandoned
// heaps retires slabs under the heaps lock.
#include "malloc/large.hpp"
#include "os/os.hpp"
#include "pool/pool.hpp"

namespace ak::detail {
namespace {

// Whether before_fork took the locks. A single-threaded process (a shell, most short programs)
// skips them: no other thread can hold one, and unlocking after fork wrote three lock pages on
// each side, three copy-on-write faults per fork in the parent and three in the child.
AK_EARLY_DATA bool g_locked = false;

void before_fork() {
  // Written only when it changes: a write on every fork was one more page fault per fork in the
  // parent (its pages are copy-on-write again after each fork).
  if (const bool lock = !os::single_threaded(); lock != g_locked) g_locked = lock;
  if (!g_locked) return;
  heaps_lock();
  slab_source_lock();
  large_lock();
}

void after_fork() {
  if (!g_locked) return;
  large_unlock();
  slab_source_unlock();
  heaps_unlock();
}

}  // namespace

void install_fork_handlers() noexcept {
  os::on_fork(before_fork, after_fork);
}

}  // namespace ak::detail
