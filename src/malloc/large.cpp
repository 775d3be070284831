// Large blocks (large.hpp): one mapping each, a 32-byte header before the user pointer, a registry
// of live user pointers (open addressing with tombstones, grown by doubling, memory from the OS)
// and a FIFO cache of freed mappings bounded in count and bytes. One mutex guards all three.
#include "malloc/large.hpp"

#include <cstdint>
#include <cstring>
#include <mutex>

#include "core/core.hpp"
#include "os/os.hpp"

namespace ak::detail {
namespace {

constexpr std::uint64_t kMagic = 0x616b2d6c61726765;  // "ak-large"
constexpr std::size_t kCacheSlots = 32;
constexpr std::size_t kCacheBytes = std::size_t(64) << 20;
constexpr std::uintptr_t kTombstone = 1;

struct Header {
  std::uint64_t magic;
  std::size_t map_bytes;  // the whole mapping
  std::size_t offset;     // user pointer - mapping start
  std::size_t align;
};
static_assert(sizeof(Header) == 32);

struct Cached {
  char* base;
  std::size_t bytes;
  std::uint64_t since;  // coarse time it was freed
};

std::mutex g_lock;
std::uintptr_t* g_table = nullptr;  // user pointers; 0 empty, 1 tombstone
std::size_t g_cap = 0, g_used = 0, g_live = 0;
std::size_t g_live_bytes = 0, g_mapped = 0, g_cached_bytes = 0;
Cached g_cache[kCacheSlots];
std::size_t g_cache_len = 0;

Header* header_of(const void* p) {
  return reinterpret_cast<Header*>(const_cast<char*>(static_cast<const char*>(p)) - sizeof(Header));
}

std::size_t slot_of(std::uintptr_t key) {
  return (key >> 4) * 0x9E3779B97F4A7C15ull >> 20;
}

// Registry, caller holds g_lock. `find` returns the slot holding key, or g_cap when absent.
std::size_t find(std::uintptr_t key) {
  if (g_cap == 0) return 0;
  for (std::size_t i = slot_of(key) & (g_cap - 1);; i = (i + 1) & (g_cap - 1)) {
    if (g_table[i] == key) return i;
    if (g_table[i] == 0) return g_cap;
  }
}

bool grow_table() {
  const std::size_t cap = g_cap ? g_cap * 2 : 1024;
  auto* t = static_cast<std::uintptr_t*>(os::map(cap * sizeof(std::uintptr_t), 4096));
  if (t == nullptr) return false;
  for (std::size_t i = 0; i < g_cap; ++i) {
    if (g_table[i] <= kTombstone) continue;
    std::size_t j = slot_of(g_table[i]) & (cap - 1);
    while (t[j] != 0) j = (j + 1) & (cap - 1);
    t[j] = g_table[i];
  }
  if (g_table) os::release(g_table, g_cap * sizeof(std::uintptr_t));
  g_table = t;
  g_used = g_live;
  g_cap = cap;
  return true;
}

bool insert(std::uintptr_t key) {
  if ((g_used + 1) * 2 > g_cap && !grow_table()) return false;
  std::size_t i = slot_of(key) & (g_cap - 1);
  while (g_table[i] > kTombstone) i = (i + 1) & (g_cap - 1);
  if (g_table[i] == 0) ++g_used;
  g_table[i] = key;
  ++g_live;
  return true;
}

void erase(std::size_t slot) {
  g_table[slot] = kTombstone;
  --g_live;
}

// Cache, caller holds g_lock.
char* take_cached(std::size_t need, std::size_t* bytes) {
  for (std::size_t i = 0; i < g_cache_len; ++i) {
    if (g_cache[i].bytes < need || g_cache[i].bytes / 2 > need) continue;
    char* base = g_cache[i].base;
    *bytes = g_cache[i].bytes;
    g_cached_bytes -= *bytes;
    g_cache[i] = g_cache[--g_cache_len];
    return base;
  }
  return nullptr;
}

// Keeps a freed mapping if it fits the bounds; otherwise unmaps it. Caller holds g_lock.
void cache_or_unmap(char* base, std::size_t bytes) {
  if (bytes <= kCacheBytes / 4) {
    while (g_cache_len > 0 &&
           (g_cache_len == kCacheSlots || g_cached_bytes + bytes > kCacheBytes)) {
      Cached old = g_cache[0];  // oldest first out
      std::memmove(g_cache, g_cache + 1, --g_cache_len * sizeof(Cached));
      g_cached_bytes -= old.bytes;
      g_mapped -= old.bytes;
      os::release(old.base, old.bytes);
    }
    g_cache[g_cache_len++] = Cached{base, bytes, os::coarse_now_ns()};
    g_cached_bytes += bytes;
    return;
  }
  g_mapped -= bytes;
  os::release(base, bytes);
}

}  // namespace

void* large_alloc(std::size_t size, std::size_t align, bool* zeroed) noexcept {
  const std::size_t page = os::page_size();
  if (align < 16) align = 16;
  const std::size_t offset = align <= sizeof(Header) ? sizeof(Header) : align;
  if (size > (std::size_t(1) << 47) || offset > (std::size_t(1) << 40)) return nullptr;
  std::size_t bytes = align_up(offset + size, page);
  char* base = nullptr;
  std::lock_guard guard(g_lock);
  if (align <= page && (base = take_cached(bytes, &bytes)) != nullptr) {
    *zeroed = false;
  } else {
    base = static_cast<char*>(os::map_accounted(bytes, align > page ? align : page));
    if (base == nullptr) return nullptr;
    g_mapped += bytes;
    *zeroed = true;
  }
  char* p = base + offset;
  if (!insert(addr(p))) {
    cache_or_unmap(base, bytes);
    return nullptr;
  }
  *header_of(p) = Header{kMagic, bytes, offset, align};
  g_live_bytes += bytes - offset;
  return p;
}

bool large_free(void* p) noexcept {
  std::lock_guard guard(g_lock);
  const std::size_t slot = find(addr(p));
  if (slot == g_cap) return false;
  Header* h = header_of(p);
  AK_CHECK(h->magic == kMagic, "large block header overwritten (heap corruption)");
  erase(slot);
  g_live_bytes -= h->map_bytes - h->offset;
  h->magic = 0;
  cache_or_unmap(static_cast<char*>(p) - h->offset, h->map_bytes);
  return true;
}

std::size_t large_usable_size(const void* p) noexcept {
  std::lock_guard guard(g_lock);
  if (find(addr(p)) == g_cap) return 0;
  const Header* h = header_of(p);
  return h->map_bytes - h->offset;
}

void* large_realloc(void* p, std::size_t size) noexcept {
  std::lock_guard guard(g_lock);
  if (find(addr(p)) == g_cap) return nullptr;
  Header* h = header_of(p);
  const std::size_t usable = h->map_bytes - h->offset;
  if (size <= usable && size >= usable / 2) return p;  // fits without wasting half
  if (h->align > os::page_size() || size > (std::size_t(1) << 47)) return nullptr;
  // Room in the registry first: once the mapping has moved there is no way back.
  if ((g_used + 1) * 2 > g_cap && !grow_table()) return nullptr;
  // Growth gets headroom (half the old size): a run of small growths, as vectors and Python
  // lists make, then costs one mremap per 1.5x instead of one per step. The headroom is address
  // space only until written.
  const std::size_t want = size > usable && size < usable + usable / 2 ? usable + usable / 2 : size;
  const std::size_t bytes = align_up(h->offset + want, os::page_size());
  char* base = static_cast<char*>(p) - h->offset;
  auto* moved = static_cast<char*>(os::remap(base, h->map_bytes, bytes));
  if (moved == nullptr) return nullptr;
  char* q = moved + (static_cast<char*>(p) - base);
  erase(find(addr(p)));
  insert(addr(q));  // cannot fail: room was made above
  g_mapped += bytes - header_of(q)->map_bytes;
  g_live_bytes += (bytes - header_of(q)->offset) - usable;
  header_of(q)->map_bytes = bytes;
  return q;
}

std::size_t large_purge_older_than(std::uint64_t age_ns) noexcept {
  std::lock_guard guard(g_lock);
  const std::uint64_t now = os::coarse_now_ns();
  std::size_t bytes = 0, kept = 0;
  for (std::size_t i = 0; i < g_cache_len; ++i) {  // oldest first; keeps the order of the rest
    const Cached c = g_cache[i];
    if (now - c.since >= age_ns) {
      g_mapped -= c.bytes;
      g_cached_bytes -= c.bytes;
      bytes += c.bytes;
      os::release(c.base, c.bytes);
    } else {
      g_cache[kept++] = c;
    }
  }
  g_cache_len = kept;
  return bytes;
}

std::size_t large_trim() noexcept {
  return large_purge_older_than(0);
}

void large_lock() noexcept {
  g_lock.lock();
}
void large_unlock() noexcept {
  g_lock.unlock();
}

LargeStats large_stats() noexcept {
  std::lock_guard guard(g_lock);
  return LargeStats{g_live, g_live_bytes, g_mapped, g_cached_bytes};
}

}  // namespace ak::detail
