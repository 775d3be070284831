// Slab supply: bump-carves slabs out of 16 MiB regions, caches empty ones in a stack (low bit of
// an entry: decommitted), and records every region in a bitmap over the 47-bit address space.
#include "pool/slab_source.hpp"

#include <atomic>
#include <cstring>
#include <mutex>

#include "os/os.hpp"

namespace ak::detail {
namespace {

constexpr std::size_t kAddressBits = 47;
constexpr std::size_t kRegionSlots = std::size_t(1) << (kAddressBits - kRegionShift);
constexpr std::size_t kMaxRegions = 1 << 16;  // 1 TiB of slabs

std::atomic<std::uint64_t> g_region_bits[kRegionSlots / 64];  // BSS: touched pages only
char* g_regions[kMaxRegions];                                 // guarded by g_lock

std::mutex g_lock;
std::size_t g_region_count = 0;
char* g_carve = nullptr;
char* g_carve_end = nullptr;
std::uintptr_t* g_cache = nullptr;  // stack of empty slabs; bit 0 set when decommitted
std::size_t g_cache_len = 0, g_cache_cap = 0, g_cache_resident = 0;
std::size_t g_in_use = 0;

bool add_region() {
  if (g_region_count == kMaxRegions) return false;
  auto* r = static_cast<char*>(os::map(kRegionSize, kRegionSize));
  if (r == nullptr) return false;
  os::huge_page_hint(r, kRegionSize);
  const std::size_t slot = addr(r) >> kRegionShift;
  g_region_bits[slot / 64].fetch_or(std::uint64_t(1) << (slot % 64), std::memory_order_release);
  g_regions[g_region_count++] = r;
  g_carve = r;
  g_carve_end = r + kRegionSize;
  return true;
}

bool grow_cache() {
  const std::size_t cap = g_cache_cap ? g_cache_cap * 2 : 4096;
  auto* c = static_cast<std::uintptr_t*>(os::map(cap * sizeof(std::uintptr_t), 0x1000));
  if (c == nullptr) return false;
  if (g_cache) {
    std::memcpy(c, g_cache, g_cache_len * sizeof(std::uintptr_t));
    os::release(g_cache, g_cache_cap * sizeof(std::uintptr_t));
  }
  g_cache = c;
  g_cache_cap = cap;
  return true;
}

}  // namespace

Slab* slab_acquire(bool* zeroed) noexcept {
  std::lock_guard guard(g_lock);
  if (g_cache_len > 0) {
    const std::uintptr_t e = g_cache[--g_cache_len];
    *zeroed = (e & 1) != 0;
    if (!*zeroed) --g_cache_resident;
    ++g_in_use;
    return reinterpret_cast<Slab*>(e & ~std::uintptr_t(1));
  }
  if (g_carve == g_carve_end && !add_region()) return nullptr;
  auto* s = reinterpret_cast<Slab*>(g_carve);
  g_carve += kSlabSize;
  *zeroed = true;
  ++g_in_use;
  return s;
}

void slab_release(Slab* slab) noexcept {
  std::lock_guard guard(g_lock);
  --g_in_use;
  if (g_cache_len == g_cache_cap && !grow_cache()) {
    // No room to remember it: give its memory back and leak only the address range.
    os::decommit(slab, kSlabSize);
    return;
  }
  std::uintptr_t e = addr(slab);
  if (g_cache_resident < kRetainedSlabs) {
    ++g_cache_resident;
  } else {
    os::decommit(slab, kSlabSize);
    e |= 1;
  }
  g_cache[g_cache_len++] = e;
}

bool in_pool_region(const void* p) noexcept {
  const std::size_t slot = addr(p) >> kRegionShift;
  if (slot >= kRegionSlots) return false;
  return (g_region_bits[slot / 64].load(std::memory_order_acquire) >> (slot % 64)) & 1;
}

SlabSourceStats slab_source_stats() noexcept {
  std::lock_guard guard(g_lock);
  SlabSourceStats s{g_region_count, g_in_use, g_cache_len, g_region_count * kRegionSize, 0};
  for (std::size_t i = 0; i < g_region_count; ++i)
    s.resident_bytes += os::resident_bytes(g_regions[i], kRegionSize);
  return s;
}

std::size_t slab_source_trim() noexcept {
  std::lock_guard guard(g_lock);
  std::size_t bytes = 0;
  for (std::size_t i = 0; i < g_cache_len; ++i) {
    if (g_cache[i] & 1) continue;
    os::decommit(reinterpret_cast<void*>(g_cache[i]), kSlabSize);
    g_cache[i] |= 1;
    bytes += kSlabSize;
  }
  g_cache_resident = 0;
  return bytes;
}

}  // namespace ak::detail
