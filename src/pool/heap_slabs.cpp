// Slabs of the thread heaps: setup (header, colour offset, debug bitmap), lazy carving, refills of
// a bin from a slab, the checked (debug) slabs' bookkeeping, and retirement of empty slabs to the
// slab source. Called by the heap's owner thread only, on slow paths (thread_heap.cpp, bins.cpp).
// Invariants: include/allockit/detail/shared_pool.hpp.
#include <algorithm>
#include <cstring>
#include <new>

#include "core/core.hpp"
#include "os/os.hpp"
#include "pool/free_tags.hpp"
#include "pool/heap_internal.hpp"
#include "pool/pool.hpp"
#include "pool/slab_source.hpp"

namespace ak::detail {
namespace {

constexpr std::size_t kCarvePage = 4096;  // blocks are carved lazily, one page's worth at a time
// ... but at least this many when they are larger: carving a 4 KiB class a page at a time took a
// slow-path call per block (a fifth of bench-malloc-simple's 4 KiB mallocs went slow).
constexpr std::size_t kMinCarveBlocks = 16;

[[noreturn]] void fail_block(const char* what, const Slab* s, const void* p) {
  Message()
      .str("allockit: ")
      .str(what)
      .str(" of ")
      .ptr(p)
      .str(" in shared pool (class ")
      .num(s->size_class)
      .str(", ")
      .num(s->block_size)
      .str("-byte blocks)")
      .fail();
}

std::size_t block_index(const Slab* s, const void* p) {
  auto* c = static_cast<const char*>(p);
  // Bounded by `end`, not `carve`: other threads may free here while the owner carves. A
  // never-carved block has a clear bit and is reported as a double free.
  if (c < s->data || c >= s->end) fail_block("free of a pointer outside every block", s, p);
  const std::size_t offset = std::size_t(c - s->data);
  if (offset % s->block_size != 0)
    fail_block("free of an interior pointer (not the start of a block)", s, p);
  return offset / s->block_size;
}

void mark_live(Slab* s, void* p) {
  const std::size_t i = std::size_t(static_cast<char*>(p) - s->data) / s->block_size;
  const std::uint64_t bit = std::uint64_t(1) << (i % 64);
  if (s->live_bits[i / 64].fetch_or(bit, std::memory_order_relaxed) & bit)
    fail_block("free list corrupted: block handed out twice", s, p);
}

#if AK_SECURE
// Secure build: the carved blocks go on the list in a random order (Fisher-Yates, a per-thread
// xorshift seeded from the process secret), so an overflow cannot count on which block the
// program gets next to the one it overflows. Cost: a shuffle of at most 256 indices per page.
constinit thread_local std::uint64_t tl_carve_rng __attribute__((tls_model("initial-exec"))) = 0;

void link_shuffled(char* from, std::size_t n, std::uint32_t block, PoolBlock*& list) {
  std::uint16_t order[kCarvePage / 16 + 1];
  for (std::size_t i = 0; i < n; ++i) order[i] = std::uint16_t(i);
  std::uint64_t& x = tl_carve_rng;
  if (x == 0) x = (os::process_secret() ^ addr(&x)) | 1;
  for (std::size_t i = n - 1; i > 0; --i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    std::swap(order[i], order[x % (i + 1)]);
  }
  for (std::size_t i = 0; i < n; ++i) {
    auto* b = reinterpret_cast<PoolBlock*>(from + std::size_t(order[i]) * block);
    set_link(b, list);
    pool_tag_freed(b);
    list = b;
  }
}
#endif

// Threads the never-used blocks that start in the carve point's page onto `list` (at least one,
// at most `most`): carving writes each block's first word, so it touches exactly one new page.
// (Carving a fixed 4 KiB from just after the header touched two pages per slab, a fault more
// for every size class a short process uses.)
void carve(Slab* s, PoolBlock*& list, std::size_t most) {
  char* const from = s->carve.load(std::memory_order_relaxed);
  const std::size_t n_fit = std::size_t(s->end - from) / s->block_size;
  const std::size_t page_left = kCarvePage - (addr(from) & (kCarvePage - 1));
  std::size_t n = std::max((page_left + s->block_size - 1) / s->block_size, kMinCarveBlocks);
  if (n > n_fit) n = n_fit;
  if (n > most) n = most;
#if AK_SECURE
  if (s->block_size >= 16 && n <= kCarvePage / 16 + 1) {
    link_shuffled(from, n, s->block_size, list);
    s->carve.store(from + n * s->block_size, std::memory_order_relaxed);
    return;
  }
#endif
  // Each block gets its link and, 16 bytes or more, its freed tag: a free block like any other.
  char* p = from;
  const bool tagged = s->block_size >= 16;
  for (std::size_t i = 0; i + 1 < n; ++i, p += s->block_size) {
    set_link(reinterpret_cast<PoolBlock*>(p), reinterpret_cast<PoolBlock*>(p + s->block_size));
    if (tagged) pool_tag_freed(p);
  }
  set_link(reinterpret_cast<PoolBlock*>(p), list);
  if (tagged) pool_tag_freed(p);
  list = reinterpret_cast<PoolBlock*>(from);
  s->carve.store(from + n * s->block_size, std::memory_order_relaxed);
}

// Takes `s` off whichever list it is on and out of the full state.
void unlink_unfull(Heap* h, Slab* s) {
  unlink(h, s);
  s->full = false;
  s->settle_at = 0;
}

// Moves free blocks of slab `s` onto the empty bin `bin`: all its blocks home if the bin can hold
// them, else up to `want` (its own list first, then newly carved ones); returns how many. Carving
// stops at the carve point's page or after kMinCarveBlocks blocks, whichever is further.
std::uint32_t refill_from(Slab* s, Bin& bin, std::uint32_t want) {
  // Blocks home: every carved one not counted in `used`. All of them move when the bin can hold
  // them, in one splice.
  const auto home = std::uint32_t(
      std::size_t(s->carve.load(std::memory_order_relaxed) - s->data) / s->block_size - s->used);
  if (home > 0 && home <= bin.limit) {
    bin.free = s->free;
    bin.count = home;
    s->free = nullptr;
    s->used += home;
    return home;
  }
  PoolBlock* list = nullptr;
  std::uint32_t n = 0;
  for (PoolBlock* b = s->free; b != nullptr && n < want; b = s->free, ++n) {
    s->free = link_of(b);
    set_link(b, list);
    list = b;
  }
  // Fresh blocks go first, in address order, as carved: nodes allocated in a row stay in a row.
  // A zero_tail slab's are handed out untouched instead (take_untouched).
  if (char* const from = s->carve.load(std::memory_order_relaxed);
      n < want && from != s->end && !s->zero_tail) {
    carve(s, list, want - n);
    n +=
        std::uint32_t(std::size_t(s->carve.load(std::memory_order_relaxed) - from) / s->block_size);
  }
  s->used += n;
  bin.free = list;
  bin.count = n;
  return n;
}

// Hands out one block of checked (debug) slab `s`, carving if needed; null when it is exhausted.
// Checked blocks never enter a bin: every allocation and free of them takes the slow path.
void* take_checked_block(Slab* s) {
  PoolBlock*& list = s->checked_free;
#if AK_SECURE
  constexpr std::size_t kCarveAtOnce = kCarvePage;  // a page's blocks, shuffled (carve)
#else
  constexpr std::size_t kCarveAtOnce = 1;
#endif
  if (list == nullptr && s->carve.load(std::memory_order_relaxed) != s->end)
    carve(s, list, kCarveAtOnce);
  PoolBlock* b = list;
  if (b == nullptr) return nullptr;
  list = link_of(b);
  ++s->used;
  mark_live(s, b);
  return b;
}

}  // namespace

bool g_checked_slabs = kDebugBuild;  // debug builds check every slab (heap_internal.hpp)

// Slabs in use per size class (stats only; slow paths only).
AK_EARLY_DATA std::atomic<std::uint32_t> g_class_slabs[kHeapClasses];

void mark_free(Slab* s, void* p) {
  const std::size_t i = block_index(s, p);
  const std::uint64_t bit = std::uint64_t(1) << (i % 64);
  if (!(s->live_bits[i / 64].fetch_and(~bit, std::memory_order_relaxed) & bit))
    fail_block("double free (or free of a never-allocated block)", s, p);
}

void retire_slab(Slab* s) {
  g_class_slabs[s->size_class].fetch_sub(1, std::memory_order_relaxed);
  if (s->sealed_any.load(std::memory_order_relaxed))
    os::set_accessible(s->data, std::size_t(s->end - s->data), true);
  slab_release(s);
}

// A small slab's header goes in its region's table and its blocks start at its colour offset
// (shared_pool.hpp), after its debug bitmap if any; a medium slab's header is at its start and its
// blocks end at its end (a secure slab's: at its guard page), the slack before them, so each
// medium block has its class's natural alignment (medium_class_align).
Slab* new_slab(Heap* h, unsigned cls) {
  const bool medium = cls >= kClassCount;
  bool zeroed = false;
  auto* base = static_cast<char*>(slab_acquire(medium, &zeroed, cls));
  if (base == nullptr) return nullptr;
  g_class_slabs[cls].fetch_add(1, std::memory_order_relaxed);
  const std::size_t block = class_size(cls);
  const std::size_t slab_bytes = medium ? kMediumSlabSize : kSlabSize;
  const std::size_t max_blocks = (slab_bytes - sizeof(Slab)) / block;
  const std::size_t bitmap = g_checked_slabs ? (max_blocks + 63) / 64 * 8 : 0;
  static_assert(sizeof(Slab) + (kMediumSlabSize / class_size(kClassCount) + 63) / 64 * 8 <=
                kMediumDataOffset);
  // A small slab's header is in its region's table (slab_of); its debug bitmap (if any) and then
  // its blocks start at its colour offset. A secure medium slab's last page is a guard
  // (slab_source.cpp).
  const std::size_t tail_guard = kSecureBuild && medium ? os::page_size() : 0;
  char* header = medium ? base : reinterpret_cast<char*>(slab_of(base));
  auto* s = reinterpret_cast<Slab*>(header);
  // Its blocks start at a multiple of the class's alignment (class_align), so the colour offset
  // of a class aligned to 256 bytes or more is one of fewer colours (two at 2 KiB).
  const std::size_t block_align = std::max<std::size_t>(class_align(cls), 64);
  char* bits =
      medium ? header + sizeof(Slab) : base + (slab_color_offset(addr(base)) & ~(block_align - 1));
  char* const blocks_end = base + slab_bytes - tail_guard;
  char* data = medium ? base + kMediumDataOffset
                      : reinterpret_cast<char*>(align_up(addr(bits) + bitmap, block_align));
  const std::size_t capacity = std::size_t(blocks_end - data) / block;
  if (medium) data = blocks_end - capacity * block;
  ::new (s) Slab{};
  s->size_class = std::uint8_t(cls);
  s->tag_word = class_has_tag(cls) ? 1 : 0;
  s->checked = g_checked_slabs;
  s->bin_class = s->checked ? kNoBin : std::uint8_t(cls);
  s->owner_tag = addr(h) | (s->checked ? 1 : 0);
  s->block_size = std::uint32_t(block);
  s->capacity = std::uint32_t(capacity);
  s->data = data;
  if (s->bin_class != kNoBin) s->fast_from = data;
  s->carve.store(data, std::memory_order_relaxed);
  s->end = data + capacity * block;
  // The secure build carves a page at a time in a random order (carve), never block by block;
  // checked slabs hand out blocks their own way (take_checked_block).
  s->zero_tail = zeroed && !kSecureBuild && !s->checked;
  if (s->checked) {
    s->live_bits = reinterpret_cast<std::atomic<std::uint64_t>*>(bits);
    if (!zeroed) std::memset(static_cast<void*>(s->live_bits), 0, bitmap);
  }
  return s;
}

// An empty small slab stays on the avail list when it is its class's only one there and its owner
// is the running thread: a program whose use of a class swings between one and two slabs (a shell's
// fork loop, glibc's bench-malloc-simple) would otherwise hand a slab to the slab source and take
// it back on every swing, each time through its lock and, in a fresh fork, a copied page. At most
// one such slab per small class per heap (64 KiB); pool_settle_remote and thread exit retire it.
void settle(Heap* h, Slab* s) {
  unlink_unfull(h, s);
  if (s->used == 0 &&
      !(s->size_class < kClassCount && h->avail[s->size_class] == nullptr && h == tl_heap))
    return retire_slab(s);
  link(h, s);
}

void retire_kept_empty(Heap* h) {
  for (unsigned cls = 0; cls < kClassCount; ++cls)
    for (Slab *s = h->avail[cls], *next; s; s = next) {
      next = s->next;
      if (s->used == 0) {
        unlink(h, s);
        retire_slab(s);
      }
    }
}

Slab* full_with_free(Heap* h, unsigned cls) {
  for (Slab* s = h->full[cls]; s; s = s->next) {
    if (s->free == nullptr && s->checked_free == nullptr) continue;
    unlink_unfull(h, s);
    return s;
  }
  return nullptr;
}

void* take_from_current(Heap* h, unsigned cls, bool* untouched) {
  Slab* s = h->current[cls];
  if (s == nullptr) return nullptr;
  if (s->checked) return take_checked_block(s);
  if (pool_gives_untouched(s)) return take_untouched(s, untouched);
  Bin& bin = h->bins[cls];
  return refill_from(s, bin, std::max<std::uint32_t>(1, bin.limit / 2)) > 0 ? pool_pop_checked(cls)
                                                                            : nullptr;
}

}  // namespace ak::detail
