// Large blocks (large.hpp): one mapping each, a 32-byte header before the user pointer, a registry
// of live user pointers (open addressing with tombstones, grown by doubling, memory from the OS)
// and two FIFO caches of freed mappings: `dirty` keeps mappings up to 16 MiB resident as they
// were (bounded in bytes), `zeroed` keeps bigger ones as address space only, emptied with
// MADV_DONTNEED at free, so a later calloc reuses them without a system call or a memset. One
// mutex guards all of it.
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
constexpr std::size_t kCacheBytes = std::size_t(64) << 20;  // dirty: resident bytes kept
constexpr std::size_t kDirtyMax = kCacheBytes / 4;          // bigger mappings go to `zeroed`
constexpr std::size_t kZeroedBytes = std::size_t(4) << 30;  // zeroed: address space kept
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

// Freed mappings, oldest first, bounded in count and bytes. Caller holds g_lock.
struct MappingCache {
  constexpr explicit MappingCache(std::size_t max) : max_bytes(max) {}
  Cached slots[kCacheSlots]{};
  std::size_t len = 0;
  std::size_t bytes = 0;
  const std::size_t max_bytes;

  // A mapping of at least `need` bytes that wastes at most half of itself, or null.
  char* take(std::size_t need, std::size_t* got) {
    for (std::size_t i = 0; i < len; ++i) {
      if (slots[i].bytes < need || slots[i].bytes / 2 > need) continue;
      char* base = slots[i].base;
      *got = slots[i].bytes;
      bytes -= *got;
      std::memmove(slots + i, slots + i + 1, (--len - i) * sizeof(Cached));
      return base;
    }
    return nullptr;
  }
  // Unmaps the oldest entries until one of `room` bytes fits. Returns bytes unmapped.
  std::size_t make_room(std::size_t room);
  void put(char* base, std::size_t size) {
    slots[len++] = Cached{base, size, os::coarse_now_ns()};
    bytes += size;
  }
  // Unmaps entries freed at least `age_ns` ago. Returns bytes unmapped.
  std::size_t purge_older_than(std::uint64_t age_ns);
};

std::mutex g_lock;
std::uintptr_t* g_table = nullptr;  // user pointers; 0 empty, 1 tombstone
std::size_t g_cap = 0, g_used = 0, g_live = 0;
std::size_t g_live_bytes = 0, g_mapped = 0;
constinit MappingCache g_dirty(kCacheBytes);
constinit MappingCache g_zeroed(kZeroedBytes);

std::size_t MappingCache::make_room(std::size_t room) {
  std::size_t freed = 0;
  while (len > 0 && (len == kCacheSlots || bytes + room > max_bytes)) {
    const Cached old = slots[0];
    std::memmove(slots, slots + 1, --len * sizeof(Cached));
    bytes -= old.bytes;
    freed += old.bytes;
    os::release(old.base, old.bytes);
  }
  g_mapped -= freed;
  return freed;
}

std::size_t MappingCache::purge_older_than(std::uint64_t age_ns) {
  const std::uint64_t now = os::coarse_now_ns();
  std::size_t freed = 0, kept = 0;
  for (std::size_t i = 0; i < len; ++i) {  // keeps the order of the rest
    const Cached c = slots[i];
    if (now - c.since >= age_ns) {
      freed += c.bytes;
      os::release(c.base, c.bytes);
    } else {
      slots[kept++] = c;
    }
  }
  len = kept;
  bytes -= freed;
  g_mapped -= freed;
  return freed;
}

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

// Keeps a freed mapping in the cache its size belongs to, or unmaps it. Caller holds g_lock.
void cache_or_unmap(char* base, std::size_t bytes) {
  if (bytes <= kDirtyMax) {
    g_dirty.make_room(bytes);
    return g_dirty.put(base, bytes);
  }
  if (bytes <= kZeroedBytes && os::decommit(base, bytes)) {
    g_zeroed.make_room(bytes);
    return g_zeroed.put(base, bytes);
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
  if (align <= page && (base = g_zeroed.take(bytes, &bytes)) != nullptr) {
    *zeroed = true;
  } else if (align <= page && (base = g_dirty.take(bytes, &bytes)) != nullptr) {
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
  return g_dirty.purge_older_than(age_ns) + g_zeroed.purge_older_than(age_ns);
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
  return LargeStats{g_live, g_live_bytes, g_mapped, g_dirty.bytes + g_zeroed.bytes};
}

}  // namespace ak::detail
