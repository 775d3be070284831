// Large blocks: requests above the pools' range (over 256 KiB, or aligned beyond a page) get a
// mapping of their own (the secure build: and a guard page after it), with a 32-byte header just
// before the user pointer (at most a page into the mapping, whatever the alignment), and are
// recorded in their arena's registry (an open-addressing set under the arena's lock) so a free of
// any other pointer is caught before its header is read. Freed mappings are kept for reuse
// (large_cache.hpp), in the cache of the arena that registered the block (large.cpp). Thread-safe.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace ak::detail {

// Returns: a block of `size` bytes aligned to `align` (a power of two >= 16), or null.
// `*zeroed` says whether its bytes are known to be zero. `want_zero` (calloc): prefer memory
// that is, emptying a big cached range rather than leaving the caller to clear it.
void* large_alloc(std::size_t size, std::size_t align, bool* zeroed,
                  bool want_zero = false) noexcept;
// The size to give a block of `usable` bytes that must now hold `size`: growth gets half the old
// size again as headroom, so a run of small growths (vectors, Python lists) moves or copies once
// per 1.5x instead of at every step. Shrinking or keeping the size: `size`.
inline std::size_t grown_size(std::size_t usable, std::size_t size) noexcept {
  const std::size_t headroom = usable + usable / 2;
  return size > usable && size < headroom ? headroom : size;
}
// Bytes of fresh mappings large_alloc ever made: what the large blocks have taken from the OS.
// One relaxed load.
extern std::atomic<std::size_t> g_large_bytes_mapped;
inline std::size_t large_mapped_bytes() noexcept {
  return g_large_bytes_mapped.load(std::memory_order_relaxed);
}
// Effects: frees a block from large_alloc. Returns false (doing nothing) if `p` is not one.
// Unless `expect_size` is kAnySize (secure.hpp), a sized free's size is checked: it must not
// exceed the block's usable size, and in the secure build, which first checks the bytes past the
// request, it must be the size asked for; an error is reported naming `call`.
bool large_free(void* p, const char* call = "free()",
                std::size_t expect_size = ~std::size_t(0)) noexcept;
// Returns: whether `p` lies in the memory of a large block freed and not handed out since (a
// double free or a use after free, when a call names it). Error paths only.
bool large_was_freed(const void* p) noexcept;
// Returns: the usable size of large block `p` (the secure build: the size asked for), or 0 if `p`
// is not one.
std::size_t large_usable_size(const void* p) noexcept;
// Secure build: the size asked for of large block `p` after checking the bytes past it (an
// overflow is reported naming `call`), or ~0 if `p` is not one.
std::size_t large_checked_request(const char* call, const void* p) noexcept;
// Effects: resizes large block `p` in place or by moving its mapping (mremap). Returns the block,
// possibly moved, or null (leaving `p` intact) when it cannot; never copies through malloc.
void* large_realloc(void* p, std::size_t size) noexcept;
// Effects: unmaps every cached mapping. Returns bytes given back.
std::size_t large_trim() noexcept;
// Effects: releases the draining ranges of the large-block cache (large_cache.hpp), each outside
// the lock. Called by the background purger.
void large_drain() noexcept;
// Effects: unmaps cached mappings freed at least `age_ns` ago. Returns bytes given back.
std::size_t large_purge_older_than(std::uint64_t age_ns) noexcept;

struct LargeStats {
  std::size_t live_blocks, live_bytes, mapped_bytes, cached_bytes;
  std::size_t cached_resident_bytes;  // of cached_bytes, ranges kept as the program left them
};
LargeStats large_stats() noexcept;
// Registers the fork handlers of every allocator lock (fork.cpp). Called once at load time.
void install_fork_handlers() noexcept;
// Fork support: take / release every arena's lock around fork().
void large_lock() noexcept;
void large_unlock() noexcept;

}  // namespace ak::detail
