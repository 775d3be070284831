// Umbrella header of the pool layer for the layers above: the shared size-class pools' internals
// (fast paths, slab source, the hooks below). The public pool headers (allockit/block_pool.hpp,
// object_pool.hpp, pool.hpp) are included by whoever uses them: they throw, and the malloc layer,
// built without exceptions, must not see them.
#pragma once

#include "allockit/detail/shared_pool.hpp"
#include "pool/free_tags.hpp"
#include "pool/slab_source.hpp"
#include "pool/starter_slab.hpp"

namespace ak::detail {

// The allocator call this thread is in or was last in ("malloc()"), for heap-corruption reports
// made deep in the pool layer, where the call is not known: the secure build's link check. Null
// before its first one.
extern constinit thread_local const char* tl_pool_call __attribute__((tls_model("initial-exec")));

// Names the allocator call: every public entry point (and thread exit, and trim) names itself
// before it reaches the pools, so the name a report reads is always the running call's. Set, never
// restored: one store per call (setting and restoring an outermost name cost the secure build 18
// instructions per malloc/free pair, 5% of its cost). No entry point calls another's named path
// (realloc's new block and free are internal calls). The secure build only: elsewhere it compiles
// to nothing.
class PoolCall {
 public:
  explicit PoolCall(const char* name) noexcept {
    if constexpr (kSecureBuild) tl_pool_call = name;
  }
  PoolCall(const PoolCall&) = delete;
  PoolCall& operator=(const PoolCall&) = delete;
};

std::size_t heap_count() noexcept;                    // thread heaps ever created (thread_heap.cpp)
std::size_t pool_class_slabs(unsigned cls) noexcept;  // slabs in use for size class `cls`
std::uint32_t pool_start_limit(unsigned cls) noexcept;  // a new heap's bin limit for class `cls`
// The limit of this thread's bin of class `cls`, or, closed (limit 0, in a run of frees), the one
// it opens at; the heap's budget counts these.
std::uint32_t pool_bin_limit(unsigned cls) noexcept;
// Settles cross-thread frees before a trim: hands this thread's batches to their owners,
// retires the empty slabs this thread's heap kept for reuse, then sorts the frees that reached
// heaps of exited threads back into their slabs, retiring the slabs that empty, so their memory can
// go back to the OS before a new thread adopts the heap.
void pool_settle_remote() noexcept;
// Effects: `hook` hears of each thread that exits while its heap holds live blocks, with their
// bytes: blocks other threads may free into that heap, which only pool_settle_remote (a trim,
// liballockit's purger) or a thread adopting the heap sorts back into their slabs. It runs at the
// thread's exit, holding no lock of the pools' or glibc's (a thread may be created there). Set
// once, before any thread exists. Returns: the hook it replaces.
using AbandonHook = void (*)(std::size_t live_bytes);
AbandonHook pool_on_abandon(AbandonHook hook) noexcept;
// The medium class to serve a request of medium class `cls` from: `cls`, unless this thread has
// no free block of it at hand (bin, current slab, other slabs) and its bin of a larger class of
// at most twice the size has one: then that class, whose free block is resident already, where a
// block of `cls` would be fresh memory faulting in (thread_heap.cpp). A class that has borrowed
// kBorrowsBeforeFresh times since its current slab last gave it a block of its own takes a fresh
// one: a class short of blocks for good grows to what it needs.
unsigned pool_medium_class(unsigned cls) noexcept;
void heaps_lock() noexcept;  // fork support: the heap hand-out lock
void heaps_unlock() noexcept;
}  // namespace ak::detail
