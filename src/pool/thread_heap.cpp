// Thread heaps and the shared pools' slow paths: heap hand-out and hand-back at thread exit, slab
// setup and retirement, lazy carving, lock-free remote frees and their collection, the checked
// (debug) slabs, and the entry points the inline fast paths call. The bins' limits and walks are
// in bins.cpp (heap_internal.hpp). Invariants: include/allockit/detail/shared_pool.hpp.
#include <algorithm>
#include <bit>
#include <cstring>
#include <new>

#include "core/core.hpp"
#include "os/os.hpp"
#include "pool/free_tags.hpp"
#include "pool/heap_internal.hpp"
#include "pool/hot_page.hpp"
#include "pool/pool.hpp"
#include "pool/slab_source.hpp"
#include "pool/starter_slab.hpp"

namespace ak::detail {

static_assert(kPoolClasses == kClassCount);

// The sentinel heap of threads without one: never written, so it is read-only memory, where a
// write to it would fault at once. In .rodata, not RELRO (AK_FORK_KEPT_CONST): its 3 KiB made
// RELRO two pages, both written by relocation, one copy-on-write fault more in every process
// (a 200-process shell script: 34,530 -> 34,330 faults, none more in its fork children).
constexpr Heap g_empty_heap{};
// The first heap is static, on the hot page (pool/hot_page.hpp); the rest are carved from 64 KiB
// chunks, never unmapped.
AK_LARGE_ZEROED constinit HotPage g_pool_hot;
constinit thread_local Heap* tl_heap __attribute__((tls_model("initial-exec"))) =
    const_cast<Heap*>(&g_empty_heap);
constinit thread_local const char* tl_pool_call __attribute__((tls_model("initial-exec"))) =
    nullptr;
#if AK_SECURE
std::uintptr_t g_link_key = 0;  // set by acquire_heap: no block is linked before a heap exists
#endif

constinit std::atomic<std::uint32_t> g_live_heaps{0};  // threads holding a heap (heap_internal.hpp)

namespace {

constexpr std::size_t kCarvePage = 4096;  // blocks are carved lazily, one page's worth at a time
// ... but at least this many when they are larger: carving a 4 KiB class a page at a time took a
// slow-path call per block (a fifth of bench-malloc-simple's 4 KiB mallocs went slow).
constexpr std::size_t kMinCarveBlocks = 16;

AK_EARLY_DATA constinit os::Lock g_heaps_lock;
AK_EARLY_DATA Heap* g_abandoned = nullptr;
AK_EARLY_DATA char* g_heap_chunk = nullptr;
AK_EARLY_DATA std::size_t g_heap_chunk_left = 0;
AK_EARLY_DATA std::size_t g_heap_count = 0;
bool g_checked_slabs = kDebugBuild;

void on_thread_exit(void* heap);

constinit os::ThreadExitHook g_exit_hook(&on_thread_exit);

// ---------------------------------------------------------------------------------------------
// Bin lists: the slabs of one class with free space, excluding the current one
// ---------------------------------------------------------------------------------------------

// A slab that is not current is on exactly one of its class's two lists: `avail` (free space)
// or `full` (full, or not yet free enough to rejoin). Doubly linked through prev/next.
Slab*& list_of(Heap* h, const Slab* s) {
  return s->full ? h->full[s->size_class] : h->avail[s->size_class];
}

void link(Heap* h, Slab* s) {
  Slab*& head = list_of(h, s);
  s->prev = nullptr;
  s->next = head;
  if (head) head->prev = s;
  head = s;
}

void unlink(Heap* h, Slab* s) {
  if (s->prev)
    s->prev->next = s->next;
  else
    list_of(h, s) = s->next;
  if (s->next) s->next->prev = s->prev;
  s->prev = s->next = nullptr;
}

// ---------------------------------------------------------------------------------------------
// Checked slabs (debug): one bit per block, set while allocated
// ---------------------------------------------------------------------------------------------

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

#if AK_SECURE
[[noreturn]] void fail_link(const char* what, const void* block, const void* found) {
  Message()
      .str("allockit: ")
      .str(tl_pool_call ? tl_pool_call : "pool call")
      .str(": heap corruption detected: ")
      .str(what)
      .str(" in freed block ")
      .ptr(block)
      .str(" (it reads ")
      .ptr(found)
      .str("): a write past a block or after a free")
      .fail();
}
#endif

// A remote chain's tail and length, which its head of kChainInfoMin bytes or more carries in
// words 2 and 3, encoded as its links are (link_mask).
struct ChainInfo {
  PoolBlock* last;
  std::uint32_t count;
};

void write_chain_info(PoolBlock* head, ChainInfo c) {
  auto* w = reinterpret_cast<std::uintptr_t*>(head);
  w[2] = addr(c.last) ^ link_mask(head);
  w[3] = c.count ^ link_mask(head);
}

// Checked in the secure build: the tail a block of `s`, the length one that fits the slab.
ChainInfo read_chain_info(const PoolBlock* head, const Slab* s) {
  const auto* w = reinterpret_cast<const std::uintptr_t*>(head);
  const std::uintptr_t last = w[2] ^ link_mask(head), n = w[3] ^ link_mask(head);
#if AK_SECURE
  if (slab_of_any(reinterpret_cast<void*>(last)) != s ||
      !pool_is_carved_block(s, reinterpret_cast<void*>(last)))
    fail_link("remote chain tail overwritten", head, reinterpret_cast<void*>(last));
  if (n == 0 || n > s->capacity)
    fail_link("remote chain length overwritten", head, reinterpret_cast<void*>(n));
#else
  (void)s;
#endif
  return ChainInfo{reinterpret_cast<PoolBlock*>(last), std::uint32_t(n)};
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

void mark_free(Slab* s, void* p) {
  const std::size_t i = block_index(s, p);
  const std::uint64_t bit = std::uint64_t(1) << (i % 64);
  if (!(s->live_bits[i / 64].fetch_and(~bit, std::memory_order_relaxed) & bit))
    fail_block("double free (or free of a never-allocated block)", s, p);
}

// Slabs in use per size class (stats only; slow paths only).
AK_EARLY_DATA std::atomic<std::uint32_t> g_class_slabs[kHeapClasses];

void retire_slab(Slab* s) {
  g_class_slabs[s->size_class].fetch_sub(1, std::memory_order_relaxed);
  if (s->block_size >= kSealableMediumBytes)
    os::set_accessible(s->data, std::size_t(s->end - s->data), true);
  slab_release(s);
}

// ---------------------------------------------------------------------------------------------
// Slabs: setup, carving, retirement
// ---------------------------------------------------------------------------------------------

// A small slab's header goes in its region's table and its blocks start at its colour offset
// (shared_pool.hpp), after its debug bitmap if any; a medium slab's header is at its start and its
// blocks at its second page, so medium blocks (multiples of 4 KiB) are page-aligned.
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
  char* data = medium ? base + kMediumDataOffset
                      : reinterpret_cast<char*>(align_up(addr(bits) + bitmap, block_align));
  const std::size_t capacity = std::size_t(base + slab_bytes - tail_guard - data) / block;
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

// Threads the never-used blocks that start in the carve point's page onto `list` (at least one,
// at most `most`): carving writes each block's first word, so it touches exactly one new page.
// (Carving a fixed 4 KiB from just after the header touched two pages per slab, a fault more
// for every size class a short process uses.)
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

// The list a slab keeps its free blocks on while they are home (not in a bin).
PoolBlock*& own_list(Slab* s) {
  return s->checked ? s->checked_free : s->free;
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

// A never-used block of zero_tail slab `s` (pool_take_untouched), setting `*untouched` (if given);
// null when none is left to carve. Costs a slow-path call per fresh block instead of one per page.
void* take_untouched(Slab* s, bool* untouched) {
  void* p = pool_take_untouched(s);
  if (p != nullptr && untouched != nullptr) *untouched = true;
  return p;
}

// Whether slab `s` has nothing left to give: no block home and none left to carve.
bool exhausted(const Slab* s) {
  return s->free == nullptr && s->checked_free == nullptr &&
         s->carve.load(std::memory_order_relaxed) == s->end;
}

// `s` becomes its class's current slab in `h`: refills come from it, and it is never retired.
void make_current(Heap* h, Slab* s) {
  s->current = true;
  h->current[s->size_class] = s;
}

// The current slab `s` stops being current. The caller puts it on a list or retires it.
void stop_current(Heap* h, Slab* s) {
  s->current = false;
  h->current[s->size_class] = nullptr;
}

// A full slab waits on its class's full list until rejoin_at() says enough of it is free again.
void mark_full(Heap* h, Slab* s) {
  s->full = true;
  s->settle_at = rejoin_at(s);
  link(h, s);
}

// Takes `s` off whichever list it is on and out of the full state.
void unlink_unfull(Heap* h, Slab* s) {
  unlink(h, s);
  s->full = false;
  s->settle_at = 0;
}

}  // namespace

// A non-current slab of `h` whose use count just reached `settle_at`: it is empty, or full with
// enough free to rejoin the avail list. An empty small slab stays on the avail list when it is its
// class's only one there and its owner is the running thread: a program whose use of a class
// swings between one and two slabs (a shell's fork loop, glibc's bench-malloc-simple) would
// otherwise hand a slab to the slab source and take it back on every swing, each time through its
// lock and, in a fresh fork, a copied page. At most one such slab per small class per heap
// (64 KiB); pool_settle_remote and thread exit retire it.
void settle(Heap* h, Slab* s) {
  unlink_unfull(h, s);
  if (s->used == 0 &&
      !(s->size_class < kClassCount && h->avail[s->size_class] == nullptr && h == tl_heap))
    return retire_slab(s);
  link(h, s);
}

namespace {

// Retires the empty slabs settle() kept on h's avail lists.
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

// Out of memory for a new slab: a full slab of class `cls` that has any free block at all (it
// had not gathered enough to rejoin the avail list), taken off the full list. Null if none.
Slab* full_with_free(Heap* h, unsigned cls) {
  for (Slab* s = h->full[cls]; s; s = s->next) {
    if (s->free == nullptr && s->checked_free == nullptr) continue;
    unlink_unfull(h, s);
    return s;
  }
  return nullptr;
}

// ---------------------------------------------------------------------------------------------
// Remote frees: other threads push chains onto the owner heap's stack; the owner sorts them
// ---------------------------------------------------------------------------------------------

// Pushes the chain first..last (linked by `next`), `count` blocks of slab `s`, onto the owner's
// remote stack: one CAS. Blocks of kChainInfoMin bytes or more get the chain's tail and length in
// the head's words 2 and 3, which collect_remote reads instead of walking the chain.
void remote_push(Slab* s, PoolBlock* first, PoolBlock* last, std::uint32_t count) {
  if (s->block_size >= kChainInfoMin) write_chain_info(first, ChainInfo{last, count});
  Heap* owner = slab_owner(s);
  PoolBlock* head = owner->remote_blocks.load(std::memory_order_relaxed);
  do {
    set_link(last, head);
  } while (!owner->remote_blocks.compare_exchange_weak(head, first, std::memory_order_release,
                                                       std::memory_order_relaxed));
}

void flush_batch(Heap* h, RemoteBatch& e) {
  remote_push(e.slab, e.head, e.tail, e.count);
  e = RemoteBatch{};
  --h->outgoing_used;
}

void flush_outgoing(Heap* h) {
  if (h->outgoing_used == 0) return;
  for (RemoteBatch& e : h->outgoing)
    if (e.slab) flush_batch(h, e);
}

}  // namespace

// A free into slab `s` of another heap, from a thread with a heap of its own: added to the batch
// for that slab, so frees to one slab hand over with one CAS per kRemoteBatchMax blocks.
// Bounded: at most kRemoteBatches * kRemoteBatchMax blocks wait, and only until this thread next
// allocates slowly, frees to another slab with the same entry, trims, or exits.
void batch_remote(Heap* h, Slab* s, void* p) {
  RemoteBatch& e = batch_entry(h, s);
  if (e.slab != s) {
    if (e.slab) flush_batch(h, e);
    e.slab = s;
    ++h->outgoing_used;
  }
  auto* b = static_cast<PoolBlock*>(p);
  set_link(b, e.head);
  e.head = b;
  if (e.tail == nullptr) e.tail = b;
  if (++e.count == kRemoteBatchMax) flush_batch(h, e);
}

namespace {

// Takes every block other threads freed into h's slabs and puts it back on its slab's list: a
// chain with its tail and length in its head (blocks of kChainInfoMin bytes or more) is spliced
// whole, two block reads however long; smaller blocks are visited one by one. A slab whose count
// reaches zero is retired: all its blocks are home by then, since `used` counts the ones still on
// their way.
void collect_remote(Heap* h) {
  PoolBlock* b = h->remote_blocks.exchange(nullptr, std::memory_order_acquire);
  while (b) {
    Slab* s = slab_of_any(b);
    PoolBlock* last = b;
    std::uint32_t n = 1;
    if (s->block_size >= kChainInfoMin) {
      const ChainInfo c = read_chain_info(b, s);
      last = c.last;
      n = c.count;
    }
    PoolBlock* next = link_of(last);
    PoolBlock*& list = own_list(s);
    set_link(last, list);
    list = b;
    after_frees(h, s, n);
    b = next;
  }
}

// ---------------------------------------------------------------------------------------------
// Heaps: one per thread, handed back at thread exit and reused by the next new thread
// ---------------------------------------------------------------------------------------------

// A heap never used before: the static first one, then one carved from a chunk. Null when out of
// memory. Caller holds g_heaps_lock.
Heap* new_heap() {
  if (g_heap_count == 0) return &g_pool_hot.first_heap;  // heaps are never freed: none made yet
  if (g_heap_chunk_left < sizeof(Heap)) {
    g_heap_chunk = static_cast<char*>(os::map(kSlabSize, 64));
    if (g_heap_chunk == nullptr) return nullptr;
    g_heap_chunk_left = kSlabSize;
  }
  Heap* h = ::new (g_heap_chunk) Heap();
  g_heap_chunk += align_up(sizeof(Heap), 64);
  g_heap_chunk_left -= std::min(g_heap_chunk_left, align_up(sizeof(Heap), 64));
  // Heaps' walk epochs start apart, so a block one heap marked rarely meets another's walk with
  // that walk's own epoch (each such meeting costs a recheck).
  h->walk_epoch = std::uint16_t(g_heap_count * 0x9E37u);
  return h;
}

// Gives h's empty bins their start limits, open, as a new heap's: a thread adopting a heap starts
// where a new one would, not with the bursts of the thread before it (whose grown limits a new
// thread of a pool may never need, and which decided when its bins overflowed).
void start_bins(Heap* h) {
  for (unsigned cls = 0; cls < kHeapClasses; ++cls) {
    h->bins[cls].limit = start_limit(cls);
    h->bin_overflows[cls] = 0;
  }
  h->bin_bytes = 0;
}

Heap* acquire_heap() {
  Heap* h = nullptr;
  {
    os::LockGuard guard(g_heaps_lock);
#if AK_SECURE
    if (g_link_key == 0) g_link_key = os::process_secret();
#endif
    if (g_abandoned) {
      h = g_abandoned;
      g_abandoned = h->next_abandoned;
    } else {
      if ((h = new_heap()) == nullptr) return nullptr;
      h->is_real = true;
      ++g_heap_count;
    }
    start_bins(h);
  }
  g_live_heaps.fetch_add(1, std::memory_order_relaxed);
  tl_heap = h;
  g_exit_hook.arm(h);
  return h;
}

void abandon_heap(Heap* h) {
  const PoolCall name("thread exit");
  empty_bins(h, "thread exit");
  flush_outgoing(h);
  collect_remote(h);
  retire_kept_empty(h);
  for (Slab* s : h->current) {
    if (s == nullptr) continue;
    stop_current(h, s);
    if (s->used == 0) {
      retire_slab(s);
    } else if (!exhausted(s)) {
      link(h, s);
    } else {
      mark_full(h, s);
    }
  }
  g_live_heaps.fetch_sub(1, std::memory_order_relaxed);
  os::LockGuard guard(g_heaps_lock);
  h->next_abandoned = g_abandoned;
  g_abandoned = h;
}

void on_thread_exit(void* heap) {
  tl_heap = const_cast<Heap*>(&g_empty_heap);  // later frees in this thread take the remote path
  abandon_heap(static_cast<Heap*>(heap));
}

// A block of class `cls` from h's current slab: its free blocks (up to half a bin's worth) refill
// the bin, which hands out the first; a checked slab, or a zero_tail one with nothing home, hands
// out one block straight. Null when there is no current slab or it is exhausted.
void* take_from_current(Heap* h, unsigned cls, bool* untouched) {
  Slab* s = h->current[cls];
  if (s == nullptr) return nullptr;
  if (s->checked) return take_checked_block(s);
  if (pool_gives_untouched(s)) return take_untouched(s, untouched);
  Bin& bin = h->bins[cls];
  return refill_from(s, bin, std::max<std::uint32_t>(1, bin.limit / 2)) > 0 ? pool_pop_checked(cls)
                                                                            : nullptr;
}

// The bin of class `cls` is empty: a block from the current slab, or, after taking remote frees
// home, from another slab with free blocks or a new one, which becomes current. Null when out of
// memory.
void* refill(Heap* h, unsigned cls, bool* untouched) {
  // Handing out untouched blocks one by one is not the bin running dry: its limit stays.
  if (Slab* s = h->current[cls]; s != nullptr && pool_gives_untouched(s))
    if (void* p = take_untouched(s, untouched)) return p;
  open_bin(h, cls);
  grow_limit(h, cls);
  if (void* p = take_from_current(h, cls, untouched)) return p;
  flush_outgoing(h);
  collect_remote(h);
  if (void* p = take_from_current(h, cls, untouched)) return p;
  if (Slab* s = h->current[cls]; s != nullptr) {
    stop_current(h, s);
    mark_full(h, s);  // exhausted: every block is out
  }
  Slab* s = h->avail[cls];
  if (s) {
    unlink(h, s);
  } else if ((s = new_slab(h, cls)) == nullptr && (s = full_with_free(h, cls)) == nullptr) {
    return nullptr;
  }
  make_current(h, s);
  return take_from_current(h, cls, untouched);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Slow paths called from the inline fast paths
// ---------------------------------------------------------------------------------------------

#if AK_SECURE
namespace {
// Reports heap corruption unless `decoded`, the link read from `block`, is null or a block that
// was handed out.
inline void check_link(const void* block, const PoolBlock* decoded) noexcept {
  if (decoded != nullptr && !pool_is_handed_out_block(decoded)) [[unlikely]]
    fail_link("free-list link overwritten", block, decoded);
}
}  // namespace

void* pool_checked_head(void* p, const PoolBlock* head) noexcept {
  check_link(p, head);
  return p;
}

PoolBlock* pool_checked_link(const PoolBlock* block, PoolBlock* decoded) noexcept {
  check_link(block, decoded);
  return decoded;
}
#endif

void* pool_alloc_slow(unsigned cls, bool* untouched) noexcept {
  Heap* h = tl_heap;
  // A class this thread has no slab of yet starts in the starter slab; a thread that stays there
  // never needs a heap.
  if (h->current[cls] == nullptr && h->avail[cls] == nullptr && h->full[cls] == nullptr &&
      !g_checked_slabs)
    if (void* p = starter_alloc(cls)) return p;
  if (!h->is_real && (h = acquire_heap()) == nullptr) return nullptr;
  void* p = refill(h, cls, untouched);
  slab_source_report_cached();  // the heap is whole again (slab_source.hpp)
  return p;
}

std::uint32_t pool_start_limit(unsigned cls) noexcept {
  return start_limit(cls);
}

std::uint32_t pool_bin_limit(unsigned cls) noexcept {
  return limit_of(tl_heap, cls);
}

namespace {

// pool_free_other's work; its caller reports the slabs it cached once it returns. `may_close`:
// the caller checks blocks' tags while a bin is closed (pool_free_in).
void free_other(Slab* s, void* p, bool may_close) {
  Heap* h = tl_heap;
  if (s->starter) {
    // Into this thread's bin if it has room and the class is not churning (starter_slab.hpp),
    // else dropped.
    const unsigned cls = starter_block_class(s, p);
    Bin& bin = h->bins[cls];
    if (bin.count >= bin.limit || !starter_may_bin(cls)) return starter_drop(p, cls);
    // A class-0 block here spans a cache line. Frees tag the second word of every starter block
    // (its header's block size is 16), but only blocks of 16 bytes or more are untagged when
    // handed out: a class-0 one is cleared here, so it is handed out untagged, as class-0 blocks
    // elsewhere are.
    if (cls == 0) static_cast<std::uintptr_t*>(p)[1] = 0;
    return bin_push(bin, p);
  }
  if (s->checked) mark_free(s, p);
  auto* b = static_cast<PoolBlock*>(p);
  if (!h->is_real) {
    // A thread without a heap (or past its exit) has nowhere to cache or batch: straight home.
    return remote_push(s, b, b, 1);
  }
  if (s->checked) {
    if (slab_owner(s) != h) return batch_remote(h, s, p);
    set_link(b, s->checked_free);
    s->checked_free = b;
    return after_frees(h, s, 1);
  }
  // A closed bin: the block goes home itself. A full one: its most recent half goes home and the
  // block joins it, unless a run of frees closes it.
  const unsigned cls = s->bin_class;
  Bin& bin = h->bins[cls];
  if (bin.limit != 0) {
    const bool closes = overflow(h, cls, may_close && slab_owner(s) == h);
    bin_push(bin, p);  // a closing bin checks it in its walk with the rest
    if (closes) close_bin(h, cls);
    return;
  }
  // Closed: the caller checked the block's tag (pool_free_in).
  if (slab_owner(s) != h) return batch_remote(h, s, p);
  set_link(b, s->free);
  s->free = b;
  after_frees(h, s, 1);
}
}  // namespace

void pool_after_sent_home(Slab* s) noexcept {
  settle(tl_heap, s);
  slab_source_report_cached();  // the heap is whole again (slab_source.hpp)
}

void pool_free_other(Slab* s, void* p) noexcept {
  free_other(s, p, true);
  slab_source_report_cached();  // the heap is whole again (slab_source.hpp)
}

void pool_free_untagged(Slab* s, void* p) noexcept {
  if (s->block_size >= 16) pool_tag_freed(p);
  Heap* h = tl_heap;
  if (h->is_real && s->bin_class != kNoBin && h->bins[s->bin_class].limit == 0) {
    open_bin(h, s->bin_class);  // no tag to check: the pools leave it in blocks they hand out
    return bin_push(h->bins[s->bin_class], p);
  }
  free_other(s, p, false);
  slab_source_report_cached();  // the heap is whole again (slab_source.hpp)
}

// ---------------------------------------------------------------------------------------------
// Medium requests served from a larger class's free block
// ---------------------------------------------------------------------------------------------

unsigned pool_medium_class(unsigned cls) noexcept {
  const Heap* h = tl_heap;
  if (h->bins[cls].count != 0 || h->avail[cls] != nullptr) return cls;
  if (const Slab* s = h->current[cls]; s != nullptr && s->free != nullptr) return cls;
  for (unsigned k = cls + 1; k < kHeapClasses && class_size(k) <= 2 * class_size(cls); ++k)
    if (h->bins[k].count != 0) return k;
  return cls;
}

void pool_check_pointer(const void* p) noexcept {
  if (!in_pool_region(p))
    Message()
        .str("allockit: free of ")
        .ptr(p)
        .str(" which the shared pools never allocated (foreign pointer)")
        .fail();
}

void pool_settle_remote() noexcept {
  const PoolCall name("trim");
  if (tl_heap->is_real) empty_bins(tl_heap, "trim");  // gives back what this thread keeps, too
  flush_outgoing(tl_heap);                            // the sentinel heap never holds any
  retire_kept_empty(tl_heap);
  // Holding the hand-out lock makes this thread the abandoned heaps' only user: none can be
  // adopted meanwhile. Lock order: heaps, then the slab source (retire_slab).
  {
    os::LockGuard guard(g_heaps_lock);
    for (Heap* h = g_abandoned; h; h = h->next_abandoned) collect_remote(h);
  }
  slab_source_report_cached();  // the heaps are whole again and their lock free (slab_source.hpp)
}

void heaps_lock() noexcept {
  g_heaps_lock.lock();
}
void heaps_unlock() noexcept {
  g_heaps_lock.unlock();
}

std::size_t heap_count() noexcept {
  os::LockGuard guard(g_heaps_lock);
  return g_heap_count;
}

std::size_t pool_class_slabs(unsigned cls) noexcept {
  return cls < kHeapClasses ? g_class_slabs[cls].load(std::memory_order_relaxed) : 0;
}

}  // namespace ak::detail
