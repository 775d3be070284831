// Slab supply: two kinds (small 64 KiB and medium 2 MiB slabs), each bump-carving its slabs out of
// 16 MiB regions of its own, caching empty ones in a stack (low bit of an entry: decommitted), and
// recording its regions in a bitmap over the 47-bit address space. One lock guards both kinds.
#include "pool/slab_source.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <utility>

#include "os/os.hpp"

namespace ak::detail {

// Zero-initialised: only the pages of the slots in use are ever touched.
AK_LARGE_ZEROED std::atomic<std::uint8_t> g_region_kinds[kRegionSlots];
AK_EARLY_DATA std::atomic<std::size_t> g_slab_bytes_unreported{0};
AK_EARLY_DATA std::atomic<std::size_t> g_slab_bytes_carved{0};

namespace {

constexpr std::size_t kMaxRegions = 1 << 16;  // 1 TiB of slabs, both kinds together

// A cache entry is a slab's base (64 KiB-aligned at least) with, in bits 1-8, the class it last
// held and, in bit 0, whether it is decommitted: the cache is searched by class without reading
// a header (a small slab's is in its region's table, a cache line of its own).
constexpr std::uintptr_t kPurgedBit = 1;
constexpr unsigned kClassShift = 1;
constexpr std::uintptr_t kEntryBits = 0x1ff;
static_assert(kHeapClasses <= 0xff && kNoBin == 0xff);
inline std::uintptr_t entry_base(std::uintptr_t e) {
  return e & ~kEntryBits;
}
inline unsigned entry_class(std::uintptr_t e) {
  return unsigned(e >> kClassShift) & 0xff;
}

// One kind of slab: its size, its regions' bitmap, the region being carved and the cache of empty
// slabs. Caller holds g_lock.
struct Supply {
  const std::size_t slab_size;
  const unsigned region_kind;  // kSmallRegions or kMediumRegions
  char* carve = nullptr;
  char* carve_end = nullptr;
  // Stack of empty slabs, oldest at the bottom (entries: see entry_base).
  // cache_time[i] is when entry i was released; entries below `purged` are all decommitted.
  std::uintptr_t* cache = nullptr;
  std::uint64_t* cache_time = nullptr;
  std::size_t cache_len = 0, cache_cap = 0, purged = 0;
  std::size_t in_use = 0;

  bool add_region();
  void guard_region(char* r);
  bool grow_cache();
  std::size_t purge_older_than(std::uint64_t cutoff);
};

AK_EARLY_DATA constinit os::Lock g_lock;
// Every region of both kinds, for the stats. The first ones are early data: a short process
// writes no page of the table.
constexpr std::size_t kEarlyRegions = 2;
AK_EARLY_DATA char* g_early_regions[kEarlyRegions] = {};
AK_LARGE_ZEROED char* g_regions[kMaxRegions - kEarlyRegions];
AK_EARLY_DATA std::size_t g_region_count = 0;

char*& region_at(std::size_t i) {
  return i < kEarlyRegions ? g_early_regions[i] : g_regions[i - kEarlyRegions];
}
std::uint64_t g_purge_delay = kDefaultPurgeDelayNs;
AK_EARLY_DATA CacheHook g_on_cache = nullptr;  // set once at load
constinit Supply g_small{kSlabSize, kSmallRegions};
constinit Supply g_medium{kMediumSlabSize, kMediumRegions};

// Secure build: metadata out of reach of a linear overflow. The pages around a small region's
// header table (slab_of) are made inaccessible; a medium slab's last page is inaccessible, so the
// next slab's header page cannot be reached from its blocks. Two to sixteen more mappings per
// 16 MiB region. Caller holds g_lock.
void Supply::guard_region(char* r) {
  const std::size_t page = os::page_size();
  if (region_kind == kSmallRegions) {
    os::set_accessible(r, kHeaderTableOffset, false);
    char* after = r + kHeaderTableOffset + kHeaderTableBytes;
    os::set_accessible(after, std::size_t(r + kSlabSize - after), false);
    return;
  }
  for (char* slab = r; slab < r + kRegionSize; slab += slab_size)
    os::set_accessible(slab + slab_size - page, page, false);
}

// A region mapped with the process's first one, not yet taken by either kind.
AK_EARLY_DATA char* g_spare_region = nullptr;

// A 16 MiB-aligned region: the spare one, else a new mapping. The process's first region is
// mapped with a neighbour, the spare: one mapping and its trims serve the first slab of each
// kind (an aligned mapping costs an mmap and one or two munmaps, 4-5 us here; a process's first
// medium malloc after its small ones took 10-12 us, 4-7 now, glibc's 2.5).
char* map_region() {
  if (char* r = std::exchange(g_spare_region, nullptr)) return r;
  if (g_region_count == 0) {
    if (auto* r = static_cast<char*>(os::map(2 * kRegionSize, kRegionSize))) {
      g_spare_region = r + kRegionSize;
      return r;
    }
  }
  return static_cast<char*>(os::map(kRegionSize, kRegionSize));
}

bool Supply::add_region() {
  if (g_region_count == kMaxRegions) return false;
  char* const r = map_region();
  if (r == nullptr) return false;
  // No MADV_HUGEPAGE: with THP defrag set to "madvise" (Debian's default) every fault in a hinted
  // region may compact memory synchronously, which made a cold 10M-node list fill 4x slower.
  const std::size_t slot = addr(r) >> kRegionShift;
  g_region_kinds[slot].store(std::uint8_t(region_kind + 1), std::memory_order_release);
  region_at(g_region_count++) = r;
  carve = r;
  carve_end = r + kRegionSize;
  if (region_kind == kSmallRegions) carve = r + kSlabSize;  // the header table's slot
  if constexpr (kSecureBuild) guard_region(r);
  return true;
}

bool Supply::grow_cache() {
  const std::size_t cap = cache_cap ? cache_cap * 2 : 4096;
  const std::size_t bytes = cap * (sizeof(std::uintptr_t) + sizeof(std::uint64_t));
  auto* mem = static_cast<char*>(os::map(bytes, 0x1000));
  if (mem == nullptr) return false;
  auto* c = reinterpret_cast<std::uintptr_t*>(mem);
  auto* t = reinterpret_cast<std::uint64_t*>(mem + cap * sizeof(std::uintptr_t));
  if (cache) {
    std::memcpy(c, cache, cache_len * sizeof(std::uintptr_t));
    std::memcpy(t, cache_time, cache_len * sizeof(std::uint64_t));
    os::release(cache, cache_cap * (sizeof(std::uintptr_t) + sizeof(std::uint64_t)));
  }
  cache = c;
  cache_time = t;
  cache_cap = cap;
  return true;
}

// Decommits cached slabs released before `cutoff`. The expired entries are sorted by address so
// that slabs freed together (usually neighbours) go back in one madvise per contiguous run rather
// than one per slab; their order no longer matters once all of them are purged. Returns bytes.
std::size_t Supply::purge_older_than(std::uint64_t cutoff) {
  std::size_t end = purged;
  while (end < cache_len && cache_time[end] <= cutoff) ++end;
  if (end == purged) return 0;
  std::sort(cache + purged, cache + end);
  std::size_t bytes = 0;
  for (std::size_t i = purged; i < end;) {
    if (cache[i] & kPurgedBit) {
      ++i;
      continue;
    }
    std::size_t run = i + 1;
    while (run < end && entry_base(cache[run]) == entry_base(cache[run - 1]) + slab_size) ++run;
    os::decommit(reinterpret_cast<void*>(entry_base(cache[i])), (run - i) * slab_size);
    for (std::size_t k = i; k < run; ++k) cache[k] |= kPurgedBit;
    bytes += (run - i) * slab_size;
    i = run;
  }
  purged = end;
  return bytes;
}

std::size_t purge_all_older_than(std::uint64_t cutoff) {
  return g_small.purge_older_than(cutoff) + g_medium.purge_older_than(cutoff);
}

// Reads the clock only when some cached slab is still resident: in a forked child the clock's
// pages fault in on first use, two faults for nothing when there is nothing to purge.
std::size_t purge_expired() {
  if (g_small.purged == g_small.cache_len && g_medium.purged == g_medium.cache_len) return 0;
  const std::uint64_t now = os::coarse_now_ns();
  return now > g_purge_delay ? purge_all_older_than(now - g_purge_delay) : 0;
}

Supply& supply_of(const Slab* slab) {
  return in_medium_region(slab) ? g_medium : g_small;
}

// A cached slab holds the pages its blocks were written on, at offsets its class's block size
// set: handed to another class, its new blocks start elsewhere and write pages of their own
// beside the old ones, so a slab reused by class after class ends up resident whole. So a slab
// goes, when one of the kAffinityScan most recently cached last held the class asked for, to that
// class again, and a resident one handed to another class is emptied first (its pages fault in
// again as the new class writes them). Medium slabs: mstress, whose rare 64-256 KiB blocks are
// written in their first 64 bytes, peaked at 16.7 MiB, 9.5 with every released medium slab
// decommitted; with medium requests served from larger classes' free blocks (pool_medium_class)
// slabs changed class more often, 13.1 MiB, and 10.1 with the emptying. Small slabs (each pair of
// thread_churn's threads sends all of theirs back to the cache as it ends): thread_churn 7.0 ->
// 5.5 MiB at 1.08x the time (affinity alone: 6.9 MiB, 0.94x; the emptying alone, 5.2 MiB, 3.5x),
// rptest 34.4 -> 25.5 MiB at 1.03x, mstress 9.9 -> 8.6 MiB. A medium slab at least half resident
// is not emptied: its pages are written again as the new class's blocks are (a program building
// strings by appends up to 64 KiB, whose slabs changed class as strings grew and restarted,
// emptied 62 MiB and faulted it back in: 0.10 s and 35.5 MiB peak RSS, now 0.069 s and 39 MiB;
// mimalloc 0.047 s and 19 MiB, tcmalloc 0.063 and 46; mstress and rptest unchanged: their
// medium blocks are written in their first bytes). The residency is one mincore of the slab,
// about as much as emptying a tenth of it costs. The scan covers 128: a pair of
// thread_churn's threads caches some 80 slabs as it ends, so with 32 the next pair found its
// class among the last thread's slabs only, and a slab changed class (emptied, its pages faulted
// back) on most acquires; 128 ran it 0.88x the time at the same peak RSS. Cost: at most 128
// entries read under the lock, once per slab taken.
constexpr std::size_t kAffinityScan = 128;

// Moves the most recent resident cached slab last used by class `cls` to the top of the cache,
// if one of the kAffinityScan most recent is.
void prefer_class(Supply& s, unsigned cls) {
  const std::size_t low =
      std::max(s.purged, s.cache_len > kAffinityScan ? s.cache_len - kAffinityScan : 0);
  for (std::size_t i = s.cache_len; i-- > low;) {
    if ((s.cache[i] & kPurgedBit) != 0 || entry_class(s.cache[i]) != cls) continue;
    std::swap(s.cache[i], s.cache[s.cache_len - 1]);
    std::swap(s.cache_time[i], s.cache_time[s.cache_len - 1]);
    return;
  }
}

}  // namespace

void* slab_acquire(bool medium, bool* zeroed, unsigned cls) noexcept {
  Supply& s = medium ? g_medium : g_small;
  char* slab;
  bool other_class = false;  // a resident cached slab last held by another class
  {
    os::LockGuard guard(g_lock);
    purge_expired();
    ++s.in_use;
    if (cls != kNoBin) prefer_class(s, cls);
    if (s.cache_len > 0) {  // the most recently released slab: likely still resident and warm
      const std::uintptr_t e = s.cache[--s.cache_len];
      if (s.purged > s.cache_len) s.purged = s.cache_len;
      slab = reinterpret_cast<char*>(entry_base(e));
      *zeroed = (e & kPurgedBit) != 0;
      other_class = !*zeroed && cls != kNoBin && entry_class(e) != cls;
    } else {
      if (s.carve == s.carve_end && !s.add_region()) {
        --s.in_use;
        return nullptr;
      }
      slab = s.carve;
      s.carve += s.slab_size;
      *zeroed = true;
      g_slab_bytes_carved.fetch_add(s.slab_size, std::memory_order_relaxed);
    }
  }
  if (other_class && !(medium && 2 * os::resident_bytes(slab, s.slab_size) >= s.slab_size)) {
    // Its old blocks' pages would stay resident beside the new class's (see kAffinityScan):
    // emptied (outside the lock), it is zero, and its never-used blocks are handed out untouched.
    // A medium slab at least half resident keeps its pages for the new class to write over.
    os::decommit(slab, s.slab_size);
    *zeroed = true;
  }
  return slab;
}

void slab_release(Slab* header) noexcept {
  Supply& s = supply_of(header);
  // Its base: a medium slab's header is at it.
  auto* slab = reinterpret_cast<void*>(&s == &g_medium ? addr(header) : small_slab_base(header));
  {
    os::LockGuard guard(g_lock);
    --s.in_use;
    if (s.cache_len == s.cache_cap && !s.grow_cache()) {
      // No room to remember it: give its memory back and leak only the address range.
      os::decommit(slab, s.slab_size);
      return;
    }
    s.cache_time[s.cache_len] = os::coarse_now_ns();
    s.cache[s.cache_len++] = addr(slab) | std::uintptr_t(header->size_class) << kClassShift;
    purge_expired();
  }
  if (g_on_cache) g_slab_bytes_unreported.fetch_add(s.slab_size, std::memory_order_relaxed);
}

CacheHook slab_source_on_cache(CacheHook hook) noexcept {
  return std::exchange(g_on_cache, hook);
}

void slab_source_report_cached_slow() noexcept {
  const std::size_t bytes = g_slab_bytes_unreported.exchange(0, std::memory_order_relaxed);
  if (bytes != 0 && g_on_cache) g_on_cache(bytes);
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

SlabSourceStats slab_source_stats(bool with_resident) noexcept {
  os::LockGuard guard(g_lock);
  SlabSourceStats s{g_region_count,
                    g_small.in_use + g_medium.in_use,
                    g_small.cache_len + g_medium.cache_len,
                    g_region_count * kRegionSize,
                    0,
                    g_small.in_use * kSlabSize + g_medium.in_use * kMediumSlabSize,
                    (g_small.cache_len - g_small.purged) * kSlabSize +
                        (g_medium.cache_len - g_medium.purged) * kMediumSlabSize};
  for (std::size_t i = 0; with_resident && i < g_region_count; ++i)
    s.resident_bytes += os::resident_bytes(region_at(i), kRegionSize);
  return s;
}

std::size_t slab_source_trim() noexcept {
  os::LockGuard guard(g_lock);
  return purge_all_older_than(~std::uint64_t(0));
}

}  // namespace ak::detail
