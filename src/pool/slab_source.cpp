// Slab supply: bump-carves slabs out of 16 MiB regions, caches empty ones in a stack (low bit of
// an entry: decommitted), and records every region in a bitmap over the 47-bit address space.
#include "pool/slab_source.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "os/os.hpp"

namespace ak::detail {
namespace {

constexpr std::size_t kMaxRegions = 1 << 16;  // 1 TiB of slabs
char* g_regions[kMaxRegions];                 // guarded by g_lock

constinit os::Lock g_lock;
std::size_t g_region_count = 0;
char* g_carve = nullptr;
char* g_carve_end = nullptr;
// Stack of empty slabs, oldest at the bottom; bit 0 of an entry is set once it is decommitted.
// g_cache_time[i] is when entry i was released; entries below g_purged are all decommitted.
std::uintptr_t* g_cache = nullptr;
std::uint64_t* g_cache_time = nullptr;
std::size_t g_cache_len = 0, g_cache_cap = 0, g_purged = 0;
std::uint64_t g_purge_delay = kDefaultPurgeDelayNs;
std::size_t g_in_use = 0;
void (*g_on_cache)() = nullptr;  // set once at load

bool add_region() {
  if (g_region_count == kMaxRegions) return false;
  auto* r = static_cast<char*>(os::map(kRegionSize, kRegionSize));
  if (r == nullptr) return false;
  // No MADV_HUGEPAGE: with THP defrag set to "madvise" (Debian's default) every fault in a hinted
  // region may compact memory synchronously, which made a cold 10M-node list fill 4x slower.
  const std::size_t slot = addr(r) >> kRegionShift;
  g_region_bits[slot / 64].fetch_or(std::uint64_t(1) << (slot % 64), std::memory_order_release);
  g_regions[g_region_count++] = r;
  g_carve = r;
  g_carve_end = r + kRegionSize;
  return true;
}

bool grow_cache() {
  const std::size_t cap = g_cache_cap ? g_cache_cap * 2 : 4096;
  const std::size_t bytes = cap * (sizeof(std::uintptr_t) + sizeof(std::uint64_t));
  auto* mem = static_cast<char*>(os::map(bytes, 0x1000));
  if (mem == nullptr) return false;
  auto* c = reinterpret_cast<std::uintptr_t*>(mem);
  auto* t = reinterpret_cast<std::uint64_t*>(mem + cap * sizeof(std::uintptr_t));
  if (g_cache) {
    std::memcpy(c, g_cache, g_cache_len * sizeof(std::uintptr_t));
    std::memcpy(t, g_cache_time, g_cache_len * sizeof(std::uint64_t));
    os::release(g_cache, g_cache_cap * (sizeof(std::uintptr_t) + sizeof(std::uint64_t)));
  }
  g_cache = c;
  g_cache_time = t;
  g_cache_cap = cap;
  return true;
}

// Decommits cached slabs released before `cutoff`. The expired entries are sorted by address so
// that slabs freed together (usually neighbours) go back in one madvise per contiguous run rather
// than one per slab; their order no longer matters once all of them are purged. Caller holds
// g_lock. Returns bytes purged.
std::size_t purge_older_than(std::uint64_t cutoff) {
  std::size_t end = g_purged;
  while (end < g_cache_len && g_cache_time[end] <= cutoff) ++end;
  if (end == g_purged) return 0;
  std::sort(g_cache + g_purged, g_cache + end);
  std::size_t bytes = 0;
  for (std::size_t i = g_purged; i < end;) {
    if (g_cache[i] & 1) {
      ++i;
      continue;
    }
    std::size_t run = i + 1;
    while (run < end && g_cache[run] == g_cache[run - 1] + kSlabSize) ++run;
    os::decommit(reinterpret_cast<void*>(g_cache[i]), (run - i) * kSlabSize);
    for (std::size_t k = i; k < run; ++k) g_cache[k] |= 1;
    bytes += (run - i) * kSlabSize;
    i = run;
  }
  g_purged = end;
  return bytes;
}

std::size_t purge_expired() {
  const std::uint64_t now = os::coarse_now_ns();
  return now > g_purge_delay ? purge_older_than(now - g_purge_delay) : 0;
}

}  // namespace

std::atomic<std::uint64_t> g_region_bits[kRegionSlots / 64];  // BSS: touched pages only

Slab* slab_acquire(bool* zeroed) noexcept {
  os::LockGuard guard(g_lock);
  purge_expired();
  ++g_in_use;
  if (g_cache_len > 0) {  // the most recently released slab: likely still resident and warm
    const std::uintptr_t e = g_cache[--g_cache_len];
    if (g_purged > g_cache_len) g_purged = g_cache_len;
    *zeroed = (e & 1) != 0;
    return reinterpret_cast<Slab*>(e & ~std::uintptr_t(1));
  }
  if (g_carve == g_carve_end && !add_region()) {
    --g_in_use;
    return nullptr;
  }
  auto* s = reinterpret_cast<Slab*>(g_carve);
  g_carve += kSlabSize;
  *zeroed = true;
  return s;
}

void slab_release(Slab* slab) noexcept {
  {
    os::LockGuard guard(g_lock);
    --g_in_use;
    if (g_cache_len == g_cache_cap && !grow_cache()) {
      // No room to remember it: give its memory back and leak only the address range.
      os::decommit(slab, kSlabSize);
      return;
    }
    g_cache_time[g_cache_len] = os::coarse_now_ns();
    g_cache[g_cache_len++] = addr(slab);
    purge_expired();
  }
  if (g_on_cache) g_on_cache();
}

void slab_source_on_cache(void (*hook)()) noexcept {
  g_on_cache = hook;
}

std::size_t slab_source_purge_expired() noexcept {
  os::LockGuard guard(g_lock);
  return purge_expired();
}

std::uint64_t slab_source_purge_delay() noexcept {
  os::LockGuard guard(g_lock);
  return g_purge_delay;
}

void slab_source_lock() noexcept {
  g_lock.lock();
}
void slab_source_unlock() noexcept {
  g_lock.unlock();
}

void slab_source_set_purge_delay(std::uint64_t ns) noexcept {
  os::LockGuard guard(g_lock);
  g_purge_delay = ns;
  purge_expired();
}

SlabSourceStats slab_source_stats() noexcept {
  os::LockGuard guard(g_lock);
  SlabSourceStats s{g_region_count, g_in_use, g_cache_len, g_region_count * kRegionSize, 0};
  for (std::size_t i = 0; i < g_region_count; ++i)
    s.resident_bytes += os::resident_bytes(g_regions[i], kRegionSize);
  return s;
}

std::size_t slab_source_trim() noexcept {
  os::LockGuard guard(g_lock);
  return purge_older_than(~std::uint64_t(0));
}

}  // namespace ak::detail
