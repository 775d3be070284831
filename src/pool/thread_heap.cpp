// Thread heaps: hand-out and hand-back at thread exit, lock-free remote frees and their
// collection, and the slow paths the inline fast paths call. Slabs (setup, carving, refills,
// retirement) are in heap_slabs.cpp, the bins' limits and walks in bins.cpp; the three share
// heap_internal.hpp. Invariants: include/allockit/detail/shared_pool.hpp.
#include <algorithm>
#include <new>
#include <utility>

#include "core/core.hpp"
#include "os/os.hpp"
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

AK_EARLY_DATA constinit os::Lock g_heaps_lock;
AK_EARLY_DATA Heap* g_abandoned = nullptr;
AK_EARLY_DATA char* g_heap_chunk = nullptr;
AK_EARLY_DATA std::size_t g_heap_chunk_left = 0;
AK_EARLY_DATA std::size_t g_heap_count = 0;
AK_EARLY_DATA AbandonHook g_on_abandon = nullptr;  // set once at load

void on_thread_exit(void* heap);

constinit os::ThreadExitHook g_exit_hook(&on_thread_exit);

// ---------------------------------------------------------------------------------------------
// Remote frees: other threads push chains onto the owner heap's stack; the owner sorts them
// ---------------------------------------------------------------------------------------------

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

}  // namespace

void flush_outgoing(Heap* h) {
  if (h->outgoing_used == 0) return;
  for (RemoteBatch& e : h->outgoing)
    if (e.slab) flush_batch(h, e);
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
  h->medium_bin_bytes = 0;
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

// The bytes of live blocks in h's slabs (listed ones: abandon_heap has put the current ones on
// the lists), which other threads may free into h after its thread exits.
std::size_t live_bytes(const Heap* h) {
  std::size_t bytes = 0;
  for (unsigned cls = 0; cls < kHeapClasses; ++cls)
    for (const Slab* list : {h->avail[cls], h->full[cls]})
      for (const Slab* s = list; s != nullptr; s = s->next)
        bytes += std::size_t(s->used) * s->block_size;
  return bytes;
}

// Returns: the bytes of live blocks h keeps (live_bytes).
std::size_t abandon_heap(Heap* h) {
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
  const std::size_t live = live_bytes(h);
  g_live_heaps.fetch_sub(1, std::memory_order_relaxed);
  os::LockGuard guard(g_heaps_lock);
  h->next_abandoned = g_abandoned;
  g_abandoned = h;
  return live;
}

void on_thread_exit(void* heap) {
  tl_heap = const_cast<Heap*>(&g_empty_heap);  // later frees in this thread take the remote path
  const std::size_t live = abandon_heap(static_cast<Heap*>(heap));
  if (live != 0 && g_on_abandon) g_on_abandon(live);
}

// The bin of class `cls` is empty: a block from the current slab, or, after taking remote frees
// home, from another slab with free blocks or a new one (a shortage other heaps answer: bins.cpp),
// which becomes current. First it answers the shortages other heaps noted. Null when out of memory.
void* refill(Heap* h, unsigned cls, bool* untouched) {
  check_shortages(h, "allocation");
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
  } else {
    note_shortage(cls);
    if ((s = new_slab(h, cls)) == nullptr && (s = full_with_free(h, cls)) == nullptr)
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

void pool_reopen_bin(Heap* h, Slab* s, void* p) noexcept {
  open_bin(h, s->bin_class);
  pool_tag_freed_in(s, p);
  bin_push(h->bins[s->bin_class], p);
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

// Borrowing spares a program that uses many medium sizes a few blocks at a time a resident block
// per class (ssh's replay: 0.94 MiB peak RSS without it, 0.82 with); but where a class is short
// for good, as in random churn of 16-64 KiB blocks among 256 slots, it borrowed on every fifth
// request: 16 instructions more a pair, 42-45 ns against 39-40 once a class carves after 32
// borrows (peak RSS 12.5 -> 12.9 MiB; ssh, scp, syn-mix-realloc, the compiler's and
// mc_server_small's replays within noise).
constexpr std::uint8_t kBorrowsBeforeFresh = 32;

unsigned pool_medium_class(unsigned cls) noexcept {
  const Heap* h = tl_heap;
  if (h->bins[cls].count != 0 || h->avail[cls] != nullptr) return cls;
  Slab* const s = h->current[cls];
  if (s != nullptr && s->free != nullptr) return cls;
  if (s != nullptr && s->borrows >= kBorrowsBeforeFresh &&
      s->carve.load(std::memory_order_relaxed) < s->end) {
    s->borrows = 0;
    return cls;
  }
  for (unsigned k = cls + 1; k < kHeapClasses && class_size(k) <= 2 * class_size(cls); ++k)
    if (h->bins[k].count != 0) {
      if (s != nullptr && s->borrows < kBorrowsBeforeFresh) ++s->borrows;
      return k;
    }
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

AbandonHook pool_on_abandon(AbandonHook hook) noexcept {
  return std::exchange(g_on_abandon, hook);
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
