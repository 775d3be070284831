#include "pool/starter_slab.hpp"

#include <atomic>

#include "core/core.hpp"
#include "os/os.hpp"
#include "pool/hot_page.hpp"
#include "pool/slab_source.hpp"

namespace ak::detail {
namespace {

constexpr std::uint8_t kFreedBit = 0x80;  // map byte: class + 1, | kFreedBit once freed
// class_bytes of a closed class: above any share, so no block of it is bumped out again.
constexpr std::uint16_t kClosed = std::uint16_t(kStarterClassBytes + 1);

constexpr StarterState& g_starter = g_pool_hot.starter;

// Makes the slab; false when no memory (the caller falls back to ordinary slabs for good).
bool make_starter() {
  bool zeroed = false;
  auto* base = static_cast<char*>(slab_acquire(false, &zeroed));
  if (base == nullptr) return false;
  auto* s = ::new (slab_of(base)) Slab{};
  char* data = base;  // its header sits apart, in its region's table
  s->owner_tag = 1;   // odd: no heap's address, so every free leaves the fast path
  s->starter = true;
  s->block_size = 16;  // blocks vary; the smallest a free tag fits in (liballockit's checks)
  s->data = data;
  s->end = data + kStarterBlockBytes;
  // The map, not a carve point, says which blocks were handed out.
  s->carve.store(s->end, std::memory_order_relaxed);
  g_starter.data = data;
  g_starter.next.store(data, std::memory_order_relaxed);
  return true;
}

// A compare-exchange, not a load, comes first: the first touch of the hot page is then a write,
// one page fault, not a read fault (zero page) and a copy-on-write fault.
bool ready() {
  int st = 0;
  if (!g_starter.state.compare_exchange_strong(st, 1, std::memory_order_acquire))
    return st == 2;  // ready, or being made by another thread (it falls back meanwhile), or gone
  const bool ok = make_starter();
  g_starter.state.store(ok ? 2 : 3, std::memory_order_release);
  return ok;
}

std::size_t map_index(const void* p) {
  return std::size_t(static_cast<const char*>(p) - g_starter.data) / kStarterLine;
}

// The map byte of `p` if it can be a block of starter slab `s` (inside its blocks, on a line),
// else 0, as for an address no block starts at.
std::uint8_t entry_of(const Slab* s, const void* p) {
  auto* c = static_cast<const char*>(p);
  if (c < s->data || c >= s->end || std::size_t(c - s->data) % kStarterLine != 0) return 0;
  return g_starter.map[map_index(p)].load(std::memory_order_relaxed);
}

}  // namespace

void* starter_alloc(unsigned cls) noexcept {
  // A class bigger than any share is turned away before ready(), which would make the slab.
  if (cls >= kClassCount || class_size(cls) > kStarterClassBytes || !ready()) return nullptr;
  const std::size_t size = class_size(cls);
  // Every block starts a cache line: blocks of different classes never share one. Packed at
  // 16 bytes, a program's first, long-lived objects (a queue and its lock, per-thread state) sat
  // side by side, and threads writing them took each other's lines (xmalloc 7% slower).
  const std::size_t bytes = align_up(size, kStarterLine);
  std::atomic<std::uint16_t>& used = g_starter.class_bytes[cls];
  if (used.load(std::memory_order_relaxed) + bytes > starter_share(bytes)) return nullptr;
  // Every block is whole lines: the bump pointer stays on a line. A block starts at a multiple
  // of its class's alignment (class_align), as in a slab of its own; the lines skipped to get
  // there are no block's (map entry 0).
  const std::size_t align = std::max<std::size_t>(class_align(cls), kStarterLine);
  char* const end = g_starter.data + kStarterBlockBytes;
  char* next = g_starter.next.load(std::memory_order_relaxed);
  char* p;
  do {
    p = reinterpret_cast<char*>(align_up(addr(next), align));
    if (p + bytes > end) return nullptr;
  } while (!g_starter.next.compare_exchange_weak(next, p + bytes, std::memory_order_relaxed));
  used.fetch_add(std::uint16_t(bytes), std::memory_order_relaxed);
  g_starter.map[map_index(p)].store(std::uint8_t(cls + 1), std::memory_order_relaxed);
  return p;
}

namespace {

[[noreturn]] void bad_starter_free(const char* what, const void* p) {
  Message().str("allockit: ").str(what).ptr(p).str(" in the starter slab").fail();
}

}  // namespace

unsigned starter_block_class(const Slab* s, const void* p) noexcept {
  const std::uint8_t m = entry_of(s, p);
  if (m == 0) bad_starter_free("free of a pointer that is not a block of ", p);
  if ((m & kFreedBit) != 0) bad_starter_free("double free of ", p);
  return unsigned(m) - 1;
}

bool starter_may_bin(unsigned cls) noexcept {
  if (g_starter.class_bytes[cls].load(std::memory_order_relaxed) > kStarterClassBytes) return false;
  if (g_starter.class_binned[cls].fetch_add(1, std::memory_order_relaxed) + 1u < kStarterBinFrees)
    return true;
  g_starter.class_bytes[cls].store(kClosed, std::memory_order_relaxed);
  return false;
}

void starter_drop(void* p, unsigned cls) noexcept {
  g_starter.map[map_index(p)].store(std::uint8_t((cls + 1) | kFreedBit), std::memory_order_relaxed);
  if (g_starter.class_frees[cls].fetch_add(1, std::memory_order_relaxed) + 1 == kStarterClassFrees)
    g_starter.class_bytes[cls].store(kClosed, std::memory_order_relaxed);
}

std::size_t starter_slab_count() noexcept {
  return g_starter.state.load(std::memory_order_acquire) == 2 ? 1 : 0;
}

std::size_t pool_starter_block_size(const Slab* s, const void* p) noexcept {
  const std::uint8_t m = entry_of(s, p);
  return m == 0 ? 0 : class_size(unsigned(m & ~kFreedBit) - 1);
}

}  // namespace ak::detail
