// Thread heaps and every slow path of the shared pools: heap hand-out and hand-back at thread exit,
// slab setup and retirement, lazy carving, lock-free remote frees and their collection, and the
// checked (debug) slabs. Invariants are listed in include/allockit/detail/shared_pool.hpp.
#include <algorithm>
#include <bit>
#include <cstring>
#include <new>

#include "core/core.hpp"
#include "os/os.hpp"
#include "pool/free_tags.hpp"
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
constinit std::atomic<std::uint32_t> g_live_heaps{0};  // threads holding a heap now
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

// `n` blocks of slab `s` of `h` came home: a slab that is not current settles if its count
// crossed `settle_at`.
void after_frees(Heap* h, Slab* s, std::uint32_t n) {
  const std::uint32_t before = s->used;
  s->used -= n;
  if (!s->current && before > s->settle_at && s->used <= s->settle_at) settle(h, s);
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

// The entry of h's outgoing batches that frees into slab `s` go to.
RemoteBatch& batch_entry(Heap* h, const Slab* s) {
  return h->outgoing[(addr(s) >> kSlabShift) % kRemoteBatches];
}

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
// Bins: bounded per-class caches of free blocks in front of the slabs
// ---------------------------------------------------------------------------------------------

// Bin limits adapt as tcmalloc's free lists do. A bin starts at start_limit(); each time it runs
// empty its limit doubles (the program wanted more blocks of the class than it kept), up to
// kMaxBinBlocks and while the heap's bins together grow within heap_bin_budget(). A full bin
// sends its most recent half home. The first time it fills after running empty its limit doubles
// instead: a bin that swings from empty to full between refills is too small for the program's
// bursts (xmalloc's consumers free a neighbour's batches 100 to 1600 blocks at a time; halving
// such bins after three overflows, as before, took 150,000 overflows, sent about a fifth of all
// frees home and back, and xmalloc ran 1.15x slower; now about 1,000 overflows when the two
// threads run side by side). Once its overflows have sent kShrinkBlocks blocks home without it
// running empty (a long run of frees: the program is giving memory back), its limit halves.
// A bin that overflows on a block of its own heap in a run of frees (blocks of one slab in runs
// of kLongRun or more: freed in allocation order, as a program frees what it built) closes
// (close_bin): on its first overflow since it ran empty when its 16 newest blocks are such runs
// (bin_top_in_runs), else on its second when the walk home finds them (trim_bin). It sends its
// blocks home, and until it next runs empty, its heap's blocks freed past it go straight onto
// their slabs' lists (pool_try_send_home, which checks a tagged class's tag), other heaps' to
// their owners. A run of frees then reads each block once, not again in a walk (sh6bench
// 0.91-0.93x the time, paired, when bins came to close on the second overflow; then 0.96x with
// the untagged 8-byte class closing too, and 0.93-0.94x with the first overflow closing as well,
// against the build before both), and the closed bin pins no slab. Blocks freed in random order
// (scattered slabs: churn, or a bin that would pin a slab a block) keep the walks. What a thread
// that frees everything and goes idle keeps is its bins: their start limits and at most
// kHeapBinBytes (shared_pool.hpp) more, all threads' together kAllBinBytes more (up to 64
// threads; past that, kMinHeapBinBytes each), each block pinning at most one otherwise empty
// slab; a long run of frees first shrinks them to their start limits (100,000 blocks freed in
// random order leave a 64-block bin).
constexpr std::uint32_t kMaxBinBlocks = 8192;
constexpr std::uint32_t kShrinkBlocks = kMaxBinBlocks / 2;

// A bin's first limit: about 16 KiB of blocks, at least 8 and at most 64; a medium class starts
// at one block.
struct StartLimits {
  std::uint32_t of[kHeapClasses];
  constexpr StartLimits() : of{} {
    for (unsigned c = 0; c < kHeapClasses; ++c)
      of[c] = c >= kClassCount
                  ? 1
                  : std::uint32_t(std::clamp<std::size_t>((16 << 10) / class_size(c), 8, 64));
  }
};
constexpr StartLimits kStartLimits;

std::uint32_t start_limit(unsigned cls) {
  return kStartLimits.of[cls];
}

// The limit a bin of class `cls` closed with `doublings` opens at.
std::uint32_t reopen_limit(unsigned cls, std::uint8_t doublings) {
  return std::min(start_limit(cls) << doublings, kMaxBinBlocks);
}

// The limit of h's bin of class `cls`, or, closed, the one it opens at.
std::uint32_t limit_of(const Heap* h, unsigned cls) {
  const std::uint32_t limit = h->bins[cls].limit;
  return limit != 0 ? limit : reopen_limit(cls, h->bin_overflows[cls]);
}

// What the limit of h's bin of class `cls` has grown past its start, in bytes.
std::size_t grown_bytes(const Heap* h, unsigned cls) {
  return std::size_t(limit_of(h, cls) - start_limit(cls)) * class_size(cls);
}

// Sets the limit of h's bin of class `cls` (`limit` at least its start limit), or, closed, the
// one it opens at, rounded down to its start limit doubled a whole number of times; the heap's
// budget counts what limits have grown past their start.
void set_limit(Heap* h, unsigned cls, std::uint32_t limit) {
  h->bin_bytes -= grown_bytes(h, cls);
  if (h->bins[cls].limit != 0)
    h->bins[cls].limit = limit;
  else
    h->bin_overflows[cls] = std::uint8_t(std::bit_width(limit / start_limit(cls)) - 1);
  h->bin_bytes += grown_bytes(h, cls);
}

bool trim_bin(Heap* h, unsigned cls, std::uint32_t keep, const char* call);
constexpr std::uint32_t kLongRun = 4;

// A block's slab, as the address a run's blocks share: one mask.
template <bool kMedium>
std::uintptr_t run_key(const void* p) {
  return kMedium ? reinterpret_cast<std::uintptr_t>(medium_slab_of(p)) : slab_base(p);
}

// Closes h's bin of class `cls` for a run of frees: sends its blocks home and sets its limit to
// 0, so every free of the class takes the way past a full bin, straight home. It keeps its limit
// for when it opens (open_bin), as set_limit rounds it.
void close_bin(Heap* h, unsigned cls) {
  trim_bin(h, cls, 0, "free()");
  const std::uint32_t limit = h->bins[cls].limit;
  set_limit(h, cls, start_limit(cls));
  h->bins[cls].limit = 0;  // closed at its start limit (no doublings): grown_bytes unchanged
  h->bin_overflows[cls] = 0;
  set_limit(h, cls, limit);
}

// Whether the kProbe newest blocks of the full bin `bin` of class `cls` are runs of one slab,
// kLongRun or more a run on average. Reads lines the frees just wrote.
constexpr std::uint32_t kProbe = 16;
bool bin_top_in_runs(const Bin& bin, unsigned cls) {
  if (bin.count < kProbe) return false;
  const auto base_of = cls >= kClassCount ? run_key<true> : run_key<false>;
  const PoolBlock* b = bin.free;
  std::uintptr_t base = base_of(b);
  std::uint32_t runs = 1;
  for (std::uint32_t i = 1; i < kProbe; ++i) {
    b = link_of(b);
    if (const std::uintptr_t next = base_of(b); next != base) ++runs, base = next;
  }
  return kProbe >= kLongRun * runs;
}

// Opens h's bin of class `cls` if closed: an allocation found it empty.
void open_bin(Heap* h, unsigned cls) {
  if (h->bins[cls].limit != 0) return;
  h->bins[cls].limit = reopen_limit(cls, h->bin_overflows[cls]);
  h->bin_overflows[cls] = 0;
}

// What one heap's bin limits may grow past their start now: kAllBinBytes shared among the threads
// holding a heap, between kMinHeapBinBytes and kHeapBinBytes. A heap grown past a budget that
// shrank (more threads) gives the excess back one class at a time, as its classes next grow.
std::size_t heap_bin_budget() {
  const std::uint32_t live =
      std::max<std::uint32_t>(1, g_live_heaps.load(std::memory_order_relaxed));
  return std::clamp(kAllBinBytes / live, kMinHeapBinBytes, kHeapBinBytes);
}

// Whether the heap's budget has room for `bytes` more of bin limits. When it has not, the next
// class in turn with a grown limit gives up half of it (its bin trimmed to fit): one class per
// call, so a class that can never fit costs its underflows a constant, and the budget drifts to
// the classes in use. It looks at kStealTries classes at most.
constexpr unsigned kStealTries = 8;
bool steal_budget(Heap* h, unsigned cls, std::size_t bytes) {
  const std::size_t budget = heap_bin_budget();
  if (h->bin_bytes + bytes <= budget) return true;
  // Nothing to take when only this class has grown.
  if (h->bin_bytes == grown_bytes(h, cls)) return false;
  for (unsigned tried = 0; tried < kStealTries; ++tried) {
    const unsigned c = h->steal_next;
    h->steal_next = (c + 1) % kHeapClasses;
    if (c == cls || limit_of(h, c) <= start_limit(c)) continue;
    set_limit(h, c, std::max(start_limit(c), limit_of(h, c) / 2));  // a closed bin's when it opens
    trim_bin(h, c, h->bins[c].limit, "allocation");                 // none in a closed bin
    break;
  }
  return h->bin_bytes + bytes <= budget;
}

// Doubles the limit of h's bin of class `cls` if the heap's budget allows; returns whether it did.
bool raise_limit(Heap* h, unsigned cls) {
  const std::uint32_t limit = h->bins[cls].limit;
  const std::uint32_t grown = std::min(limit * 2, kMaxBinBlocks);
  if (grown > limit && steal_budget(h, cls, (grown - limit) * class_size(cls))) {
    set_limit(h, cls, grown);
    return true;
  }
  return false;
}

// The bin of class `cls` ran empty: its limit doubles, within the heap's budget. (So it does after
// a short refill too, from a slab with a few blocks free: a heap adopted with such slabs took a
// bin from 64 to 8,192 blocks in 150 allocations. Doubling only after a full refill, half a bin or
// half a slab, measured slower on xmalloc, whose refills from slabs its blocks came home to are
// short: 1.31x tcmalloc paired against 1.00x, on a noisy host.)
void grow_limit(Heap* h, unsigned cls) {
  h->bin_overflows[cls] = 0;
  raise_limit(h, cls);
}

// Overflows (each sending half the limit home) after which a bin's limit halves: enough to send
// kShrinkBlocks home, at most 254.
std::uint32_t shrink_after(std::uint32_t limit) {
  return std::clamp<std::uint32_t>(kShrinkBlocks / std::max<std::uint32_t>(1, limit / 2), 1, 254);
}

// The bin of class `cls` is full. Returns true when its limit doubled (the first overflow since it
// ran empty) and the bin has room; false when its most recent half must go home, after halving
// its limit if its overflows have sent kShrinkBlocks home since it last ran empty.
bool after_overflow(Heap* h, unsigned cls) {
  std::uint8_t& count = h->bin_overflows[cls];
  if (count == 0 && raise_limit(h, cls)) {
    count = 1;
    return true;
  }
  const std::uint32_t limit = h->bins[cls].limit;
  if (count < 1 + shrink_after(limit)) {
    ++count;
    return false;
  }
  count = 1;
  set_limit(h, cls, std::max(start_limit(cls), limit / 2));
  return false;
}

// Block `b` of slab `s`, sent home by h's walk in `call`, carries the walk's epoch
// (free_tags.hpp): it was met before in this walk, a double free, or marked by a walk with the
// same epoch long ago or in another heap. Reports the double free after finding the block where
// the walk may have sent it: the starter slab's dropped blocks, the slab's own list or the run of
// `run_length` blocks from `run` not yet on it, or the batch for the slab's owner (once handed
// over, the repeat is caught at its second pop instead). Slow path: walks whole lists.
[[gnu::cold, gnu::noinline]] void recheck_walked(Heap* h, Slab* s, const PoolBlock* run,
                                                 std::uint32_t run_length, PoolBlock* b,
                                                 const char* call) {
  note_walk_recheck();
  if (s->starter) {
    (void)starter_block_class(s, b);  // reports a block dropped already
    return;
  }
  // A block in a bin counts in its slab's `used`: a slab with none out was emptied by this walk
  // (and may be retired already), so `b` went home before.
  if (s->used == 0) walk_met_twice(b, call);
  if (slab_owner(s) == h) {
    if (on_list(run, run_length, b) || on_list(s->free, s->capacity, b)) walk_met_twice(b, call);
    return;
  }
  const RemoteBatch& e = batch_entry(h, s);
  if (e.slab == s && on_list(e.head, e.count, b)) walk_met_twice(b, call);
}

// Sends the first `n` blocks (at least one) of the bin chain of class `cls` starting at `b` home,
// for `call`: each block of one of h's slabs goes back onto that slab's list (settling it), each
// block of another heap's slab into the batch for that heap; a block of the starter slab is
// dropped. A block of a tagged class is checked and marked with a new epoch of h's on the way, so
// a block met twice (freed twice) is caught before it reaches a list twice. Returns the block
// after the n-th (null at the chain's end); `*splices` counts the runs of one slab it sent home
// whole and the blocks it sent elsewhere. `kTagged`, `kMedium`: the class's, fixed per loop, so
// a run's end is one mask and compare and a walk's key is computed once (sh6bench's walks: 3.7G
// instructions -> 2.0G, 19.7G -> 18.0G in all; its time moved by 1%, within noise: the walk is
// not bound by its instruction count).
template <bool kTagged, bool kMedium>
PoolBlock* release_chain_of(Heap* h, PoolBlock* b, unsigned cls, std::uint32_t n, const char* call,
                            std::uint32_t* splices) {
  const auto base_of = run_key<kMedium>;
  const std::uintptr_t key = kTagged ? walk_key(next_walk_epoch(*h)) : 0;
  while (n != 0) {
    Slab* s = kMedium ? medium_slab_of(b) : slab_of(b);
    if (kTagged && !tag_visit(b, key, call)) [[unlikely]]
      recheck_walked(h, s, nullptr, 0, b, call);
    --n;
    ++*splices;
    if (s->starter || slab_owner(s) != h) {
      PoolBlock* next = link_of(b);
      if (s->starter) {
        // No home to go to (starter_slab.hpp). Its map tells a block dropped already (met
        // twice); its tag is left as a free writes it, so a later free of it is caught there.
        (void)starter_block_class(s, b);
        if (kTagged) pool_tag_freed(b);
        starter_drop(b, cls);
      } else {
        batch_remote(h, s, b);
      }
      b = next;
      continue;
    }
    // A run of blocks of one slab (blocks freed in allocation order come in runs) goes home as
    // one splice and one count.
    const std::uintptr_t base = base_of(b);
    const std::uint32_t left = n;  // the run is 1 + left - n blocks
    PoolBlock* last = b;
    PoolBlock* next = link_of(last);
    while (n != 0 && base_of(next) == base) {
      if (kTagged && !tag_visit(next, key, call)) [[unlikely]]
        recheck_walked(h, s, b, 1 + left - n, next, call);
      last = next;
      next = link_of(last);
      --n;
    }
    set_link(last, s->free);
    s->free = b;
    after_frees(h, s, 1 + left - n);
    b = next;
  }
  return b;
}

PoolBlock* release_chain(Heap* h, PoolBlock* b, unsigned cls, std::uint32_t n, const char* call,
                         std::uint32_t* splices) {
  if (cls >= kClassCount) return release_chain_of<true, true>(h, b, cls, n, call, splices);
  if (class_has_tag(cls)) return release_chain_of<true, false>(h, b, cls, n, call, splices);
  return release_chain_of<false, false>(h, b, cls, n, call, splices);
}

// The bin of class `cls` keeps `keep` blocks and sends the rest home: its most recent ones, the
// blocks the walk finds in cache (the older ones stay, cold, and are handed out in turn). `call`
// names what trims, for a report. One walk over the blocks sent (release_chain checks and marks
// them on the way): with a first walk to check and mark them and a second to send them home and
// unmark them, 200,000 24-byte blocks freed in allocation order took 1.3x the time a free.
// Returns whether the blocks sent came in runs of kLongRun or more a splice on average: blocks
// freed in allocation order, as a program frees what it built.
bool trim_bin(Heap* h, unsigned cls, std::uint32_t keep, const char* call) {
  Bin& bin = h->bins[cls];
  if (bin.count <= keep) return false;
  const std::uint32_t sent = bin.count - keep;
  std::uint32_t splices = 0;
  bin.count = keep;
  bin.free = release_chain(h, bin.free, cls, sent, call, &splices);
  return sent >= kLongRun * splices;
}

// Sends every block in h's bins home (for `call`, named in a report).
void empty_bins(Heap* h, const char* call) {
  for (unsigned cls = 0; cls < kHeapClasses; ++cls) trim_bin(h, cls, 0, call);
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
// h's bin of class `cls` is full on a free: makes room for the block (its limit doubled, or its
// most recent half sent home) and returns whether the bin closes instead, a run of frees of h's
// own blocks (`own_run`: the freed block is h's and the caller checks tags while a bin is closed)
// seen in its newest blocks on its first overflow since it ran empty, else in the walk of its
// second. Closing on the first raises the limit as that overflow would: it opens at the same.
bool overflow(Heap* h, unsigned cls, bool own_run) {
  if (own_run && h->bin_overflows[cls] == 0 && bin_top_in_runs(h->bins[cls], cls)) {
    raise_limit(h, cls);
    return true;
  }
  return !after_overflow(h, cls) && trim_bin(h, cls, h->bins[cls].limit / 2, "free()") && own_run &&
         h->bin_overflows[cls] >= 2;
}

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
