// The process-wide supply of slabs for the shared pools: small (64 KiB) and medium (2 MiB) slabs,
// each kind carved from 16 MiB regions of its own that are never unmapped, so "is this address
// ours, and which kind" is one bit test per kind. Empty slabs are cached resident and decommitted
// once idle longer than the purge delay (checked whenever a slab is taken or given back, and by
// pool_trim), so a program that frees and refills stays fast and a program that shrinks returns its
// memory. Thread-safe: every function takes one internal mutex (slow paths only) except
// in_pool_region.
#pragma once

#include <cstddef>
#include <cstdint>

#include <atomic>

#include "allockit/detail/shared_pool.hpp"

namespace ak::detail {

inline constexpr std::size_t kRegionShift = kSlabRegionShift;  // the header tables' regions
inline constexpr std::size_t kRegionSize = std::size_t(1) << kRegionShift;
inline constexpr std::uint64_t kDefaultPurgeDelayNs = 1'000'000'000;  // 1 s, as jemalloc-ish

// Returns: a slab-aligned block of memory of kSlabSize (or kMediumSlabSize when `medium`), or null
// when out of memory; the caller places the slab's header in it. Its contents are stale (a reused
// slab) or zero (fresh or decommitted); `*zeroed` says which. A medium slab for class `cls` is one
// that last held that class when one of the recently cached is (slab_source.cpp).
void* slab_acquire(bool medium, bool* zeroed, unsigned cls = kNoBin) noexcept;
// Effects: takes back the empty slab whose header is `header` (small_slab_base finds a small one's
// base; a medium one's header is at its base) for reuse. The hook set by slab_source_on_cache
// hears of it at the next slab_source_report_cached.
void slab_release(Slab* header) noexcept;
// Effects: `hook` hears of the slabs cached for reuse, with their bytes (liballockit starts its
// purger there). Set once, before any thread exists. Returns: the hook it replaces.
using CacheHook = void (*)(std::size_t bytes);
CacheHook slab_source_on_cache(CacheHook hook) noexcept;

// Bytes of slabs ever carved from fresh address space: what the pools have taken from the OS.
// One relaxed load.
extern std::atomic<std::size_t> g_slab_bytes_carved;
inline std::size_t slab_source_carved_bytes() noexcept {
  return g_slab_bytes_carved.load(std::memory_order_relaxed);
}
// Bytes of slabs cached since the hook last heard (slab_source_report_cached).
extern std::atomic<std::size_t> g_slab_bytes_unreported;
void slab_source_report_cached_slow() noexcept;
// Effects: calls the hook with the bytes of the slabs cached since it last ran, if any. The heaps
// call it at the end of their slow paths, never while a bin or a slab is half updated: the hook
// may allocate (the purger's pthread_create callocs the new thread's TLS vector), and called from
// inside a trim it was handed the head of the bin being trimmed, whose count was cut before its
// chain: the block went both to the program and home to its slab, a block handed out twice.
// Cost: one load when nothing was cached.
inline void slab_source_report_cached() noexcept {
  if (g_slab_bytes_unreported.load(std::memory_order_relaxed) != 0) [[unlikely]]
    slab_source_report_cached_slow();
}
inline constexpr std::size_t kRegionSlots = std::size_t(1) << (47 - kRegionShift);
// The region map: one byte per 16 MiB region of the 47-bit address space, 0 or its kind + 1
// (kSmallRegions, kMediumRegions): 8 MiB of zero-fill address space, of which a process touches
// a page or two (one per 64 GiB of addresses it asks about). A byte, not a bit per kind: a lookup
// is a shift, a bound check and a compare with memory, three instructions less per free than
// the bitmap it replaced.
inline constexpr unsigned kSmallRegions = 0, kMediumRegions = 1;
extern std::atomic<std::uint8_t> g_region_kinds[kRegionSlots];

// The region map's entry for the region holding `p`: 0, or its kind + 1. Slot 0 (the lowest
// 16 MiB, where no region can start) is never read, so free(NULL) touches no page of the map: a
// process that frees null before any other pointer paid a page fault (about 5 us here) for it.
inline unsigned region_entry(const void* p) noexcept {
  const std::size_t slot = reinterpret_cast<std::uintptr_t>(p) >> kRegionShift;
  if (slot - 1 >= kRegionSlots - 1) return 0;  // slot 0 wraps round
  return g_region_kinds[slot].load(std::memory_order_acquire);
}

inline bool in_region_of(unsigned kind, const void* p) noexcept {
  return region_entry(p) == kind + 1;
}

// Returns: whether `p` lies in a region of small slabs. Lock-free: one shift, one load.
inline bool in_pool_region(const void* p) noexcept {
  return in_region_of(kSmallRegions, p);
}
// Returns: whether `p` lies in a region of medium slabs. Lock-free: one shift, one load.
inline bool in_medium_region(const void* p) noexcept {
  return in_region_of(kMediumRegions, p);
}
inline Slab* medium_slab_of(const void* p) noexcept {
  return reinterpret_cast<Slab*>(reinterpret_cast<std::uintptr_t>(p) & ~(kMediumSlabSize - 1));
}
// The slab of a block of either kind (slow paths: one region-map read more than slab_of).
inline Slab* slab_of_any(const void* p) noexcept {
  return in_medium_region(p) ? medium_slab_of(p) : slab_of(p);
}
// Whether `p` is a block some pooled slab (small or medium) handed out: at a block boundary
// before its slab's carve point; any address in the starter slab passes (its map decides).
inline bool pool_is_handed_out_block(const void* p) noexcept {
  const unsigned entry = region_entry(p);  // read once
  const Slab* s = entry == kSmallRegions + 1    ? slab_of(p)
                  : entry == kMediumRegions + 1 ? medium_slab_of(p)
                                                : nullptr;
  return s != nullptr && (pool_is_carved_block(s, p) || s->starter);
}

struct SlabSourceStats {
  std::size_t regions, slabs_in_use, slabs_cached, reserved_bytes, resident_bytes;
  std::size_t in_use_bytes;  // bytes of the slabs in use, both kinds
  std::size_t cached_bytes;  // bytes of the cached slabs not yet decommitted (a trim's to give)
};
// `with_resident`: measures resident_bytes (mincore over every region, under the slab lock: about
// 10 us a 16 MiB region); without, it reads 0 and the call costs a lock and a few loads.
SlabSourceStats slab_source_stats(bool with_resident = true) noexcept;
// Fork support: take / release the slab source's lock around fork().
void slab_source_lock() noexcept;
void slab_source_unlock() noexcept;
// Effects: sets how long an empty slab stays resident before it is decommitted.
void slab_source_set_purge_delay(std::uint64_t ns) noexcept;
// Effects: decommits every cached slab. Returns: bytes given back to the OS.
std::size_t slab_source_trim() noexcept;
// Effects: decommits cached slabs idle longer than the purge delay. Returns: bytes given back.
std::size_t slab_source_purge_expired() noexcept;
std::uint64_t slab_source_purge_delay() noexcept;

}  // namespace ak::detail
