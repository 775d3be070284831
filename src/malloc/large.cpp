// Large blocks (large.hpp): one mapping each, a 32-byte header before the user pointer, a registry
// of live user pointers (open addressing with tombstones, grown by doubling, memory from the OS)
// and the cache of freed mappings (large_cache.hpp), which hands them out again without page
// faults. One lock guards all of it.
#include "malloc/large.hpp"

#include <cstdint>
#include <cstring>

#include "core/core.hpp"
#include "malloc/freed_guard.hpp"
#include "malloc/large_cache.hpp"
#include "malloc/options.hpp"
#include "os/os.hpp"

namespace ak::detail {
namespace {

constexpr std::uint64_t kMagic = 0x616b2d6c61726765;  // "ak-large"
constexpr std::uintptr_t kTombstone = 1;

struct Header {
  std::uint64_t magic;
  std::size_t map_bytes;  // the whole mapping
  std::size_t offset;     // user pointer - mapping start
  std::size_t align;
};
static_assert(sizeof(Header) == 32);

constinit os::Lock g_lock;
std::uintptr_t* g_table = nullptr;  // user pointers; 0 empty, 1 tombstone
std::size_t g_cap = 0, g_used = 0, g_live = 0;
std::size_t g_live_bytes = 0;
std::size_t g_mapped = 0;  // mappings of live blocks; the cache counts its own
constinit LargeCache g_cache;

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

}  // namespace

void* large_alloc(std::size_t size, std::size_t align, bool* zeroed, bool want_zero) noexcept {
  const std::size_t page = os::page_size();
  if (align < 16) align = 16;
  const std::size_t offset = align <= sizeof(Header) ? sizeof(Header) : align;
  if (size > (std::size_t(1) << 47) || offset > (std::size_t(1) << 40)) return nullptr;
  std::size_t bytes = align_up(offset + size, page);
  char* base = nullptr;
  os::LockGuard guard(g_lock);
  if (align <= page) {
    const LargeCache::Taken t = g_cache.take(bytes, want_zero);
    if (t.sealed && !os::set_accessible(t.base, t.bytes, true)) {
      g_cache.put(t.base, t.bytes, t.zeroed, true);  // no mapping left to split: take fresh pages
    } else if (t.base) {
      base = t.base;
      bytes = t.bytes;
      *zeroed = t.zeroed;
    }
  }
  if (base == nullptr) {
    base = static_cast<char*>(os::map_accounted(bytes, align > page ? align : page));
    if (base == nullptr) return nullptr;
    *zeroed = true;
  }
  char* p = base + offset;
  if (!insert(addr(p))) {
    g_cache.put(base, bytes, *zeroed);
    return nullptr;
  }
  g_mapped += bytes;
  *header_of(p) = Header{kMagic, bytes, offset, align};
  g_live_bytes += bytes - offset;
  g_cache.note_live(g_live_bytes);
  return p;
}

bool large_free(void* p) noexcept {
  std::size_t cached;
  {
    os::LockGuard guard(g_lock);
    const std::size_t slot = find(addr(p));
    if (slot == g_cap) return false;
    Header* h = header_of(p);
    AK_CHECK(h->magic == kMagic, "large block header overwritten (heap corruption)");
    erase(slot);
    g_live_bytes -= h->map_bytes - h->offset;
    h->magic = 0;
    g_mapped -= h->map_bytes;  // the cache's from now on
    cached = h->map_bytes;
    char* base = static_cast<char*>(p) - h->offset;
    const bool seal = should_seal(cached) && os::set_accessible(base, cached, false);
    g_cache.put(base, cached, false, seal);
  }
  start_background_purge(cached);  // the cache now holds memory to return later
  return true;
}

std::size_t large_usable_size(const void* p) noexcept {
  os::LockGuard guard(g_lock);
  if (find(addr(p)) == g_cap) return 0;
  const Header* h = header_of(p);
  return h->map_bytes - h->offset;
}

void* large_realloc(void* p, std::size_t size) noexcept {
  os::LockGuard guard(g_lock);
  if (find(addr(p)) == g_cap) return nullptr;
  Header* h = header_of(p);
  const std::size_t usable = h->map_bytes - h->offset;
  if (size <= usable && size >= usable / 2) return p;  // fits without wasting half
  if (h->align > os::page_size() || size > (std::size_t(1) << 47)) return nullptr;
  // Room in the registry first: once the mapping has moved there is no way back.
  if ((g_used + 1) * 2 > g_cap && !grow_table()) return nullptr;
  // Growth gets headroom (grown_size): one mremap per 1.5x; address space only until written.
  const std::size_t want = grown_size(usable, size);
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
  os::LockGuard guard(g_lock);
  return g_cache.purge_older_than(age_ns, g_live_bytes);
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
  os::LockGuard guard(g_lock);
  return LargeStats{g_live, g_live_bytes, g_mapped + g_cache.bytes(), g_cache.bytes()};
}

}  // namespace ak::detail
