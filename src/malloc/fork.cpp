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

void before_fork() {
  heaps_lock();
  slab_source_lock();
  large_lock();
}

void after_fork() {
  large_unlock();
  slab_source_unlock();
  heaps_unlock();
}

}  // namespace

void install_fork_handlers() noexcept {
  os::on_fork(before_fork, after_fork);
}

}  // namespace ak::detail
