// Large blocks (large.hpp): one mapping each, a 32-byte header before the user pointer, kept in
// arenas: each has a registry of the live user pointers it handed out (open addressing with
// tombstones, grown by doubling, memory from the OS) and a cache of freed mappings
// (large_cache.hpp), which hands them out again without page faults, under one lock. A thread
// allocates from its arena (the threads take the kArenas arenas in turn), a free looks the block
// up in its own arena first and then in the others, and the mapping goes back to the arena that
// registered it. Only fork holds more than one arena's lock.
#include "malloc/large.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>

#include "allockit/config.hpp"
#include "core/core.hpp"
#include "malloc/freed_guard.hpp"
#include "malloc/large_cache.hpp"
#include "malloc/options.hpp"
#include "malloc/secure.hpp"
#include "os/os.hpp"

namespace ak::detail {

AK_EARLY_DATA std::atomic<std::size_t> g_large_bytes_mapped{0};

namespace {

constexpr std::uint64_t kMagic = 0x616b2d6c61726765;  // "ak-large"
constexpr std::uintptr_t kTombstone = 1;
// large_drain releases a draining range a piece at a time, from its end: releasing 128 MiB takes
// 7-10 ms, and meanwhile a request may take the rest with its pages. Each piece is emptied before
// it is unmapped (unmap_range, large_cache.hpp), so the program's threads do not wait on the mmap
// lock while its pages are freed, as every other range the cache releases is. A program
// that faulted in new pages while a whole range drained had both resident: py-euler's replay
// peaked at 366-379 MiB instead of 331-346 (LargeCache::release_draining closes that gap).
constexpr std::size_t kDrainPiece = std::size_t(2) << 20;

struct Header {
  std::uint64_t magic;
  std::size_t map_bytes;  // the whole mapping (in the secure build, its guard page included)
  std::size_t request;    // the size asked for (the secure build's usable size)
  std::size_t align;
};
static_assert(sizeof(Header) == 32);

// The secure build ends every large block's mapping with a guard page (PROT_NONE) and fills the
// bytes between the request and the guard with kSlackByte, checked at free and realloc.
const std::size_t kGuardPages = kSecureBuild ? 1 : 0;

// The user pointer's distance from its mapping's start: the header, or the alignment above it,
// at most a page: a block aligned past a page starts its mapping's second page, its mapping placed
// so (a cached range carved at that phase, LargeCache::take_aligned), the header page alone
// before it, rather than a mapping starting at an aligned address with the whole alignment before
// the block (address space only when fresh, but resident when carved from a cached range).
std::size_t offset_for(std::size_t align) {
  return align <= sizeof(Header) ? sizeof(Header) : std::min(align, os::page_size());
}

// A fresh mapping of `bytes` whose address plus `offset` is aligned to `align` (past a page):
// mapped `align - offset` longer at `align`, the head given back.
char* map_at_phase(std::size_t bytes, std::size_t align, std::size_t offset) {
  auto* m = static_cast<char*>(os::map_accounted(bytes + align - offset, align));
  if (m == nullptr) return nullptr;
  os::release(m, align - offset);
  return m + align - offset;
}

// With one lock for the cache and the registry, two threads churning 256 KiB-1 MiB blocks waited
// on each other at every call (the cache's work, 600-900 instructions a free-malloc pair, is all
// under it): 682 ns a pair each, against 258 on one thread (mimalloc 375). With a registry shared
// by arenas, each call still wrote its lock and counters, and the pair ran 380-430 ns in some runs,
// 740-820 in others (the two threads' cores far apart). An arena's cache keeps its own budget
// (large_cache.hpp), so the arenas in use may hold that much each until purged.
// An arena fills one page of .lbss, its registry's first table in it: a thread's first large
// block faults that page in once (written first: see `written`) and maps nothing for the
// registry, where a table mapped apart cost an mmap and two faults more (a first malloc of
// 300,000 bytes: 13-15 us before, 6.5-7.7 now, glibc's 5.3-6.4).
constexpr std::size_t kFirstTableSlots = 128;
struct alignas(4096) Arena {
  // Set before anything of the arena is read: the first touch of its page, a zero page until
  // then, is a write, one fault (a read maps the shared zero page, and the write after it faults
  // again).
  bool written = false;
  LargeCache cache;
  std::uintptr_t* table = nullptr;  // user pointers of its live blocks; 0 empty, 1 tombstone
  std::size_t cap = 0, used = 0, live = 0;
  std::size_t live_bytes = 0;
  std::size_t mapped = 0;  // mappings of live blocks; the cache counts its own
  std::uintptr_t first_table[kFirstTableSlots] = {};
};
static_assert(sizeof(Arena) == 4096);
constexpr unsigned kArenas = 4;
// The locks share the early data's page (a multi-threaded process's fork takes and releases
// them all, which would write three pages more on each side in the arenas themselves).
AK_EARLY_DATA constinit os::Lock g_arena_locks[kArenas];
AK_LARGE_ZEROED constinit Arena g_arenas[kArenas];
AK_EARLY_DATA std::atomic<unsigned> g_next_arena{0};
thread_local unsigned tl_arena [[gnu::tls_model("initial-exec")]] = kArenas;  // none yet

// This thread's arena: the next in turn at its first large block.
unsigned my_arena() {
  unsigned a = tl_arena;
  if (a == kArenas) [[unlikely]]
    tl_arena = a = g_next_arena.fetch_add(1, std::memory_order_relaxed) % kArenas;
  return a;
}

Header* header_of(const void* p) {
  return reinterpret_cast<Header*>(const_cast<char*>(static_cast<const char*>(p)) - sizeof(Header));
}
// The header of live block `p` (a registry holds it), checked: a write before the user pointer
// may have overwritten it, and its sizes decide what is unmapped, moved or reported usable.
Header* live_header(const void* p) {
  Header* h = header_of(p);
  AK_CHECK(h->magic == kMagic, "large block header overwritten (heap corruption)");
  return h;
}

std::size_t slot_of(std::uintptr_t key) {
  return (key >> 4) * 0x9E3779B97F4A7C15ull >> 20;
}

// Registry of arena `a`, caller holds its lock. `find` returns the slot holding key, or a.cap
// when absent.
std::size_t find(const Arena& a, std::uintptr_t key) {
  if (a.cap == 0) return 0;
  for (std::size_t i = slot_of(key) & (a.cap - 1);; i = (i + 1) & (a.cap - 1)) {
    if (a.table[i] == key) return i;
    if (a.table[i] == 0) return a.cap;
  }
}

bool grow_table(Arena& a) {
  const std::size_t cap = a.cap ? a.cap * 2 : kFirstTableSlots;
  auto* t = a.cap ? static_cast<std::uintptr_t*>(os::map(cap * sizeof(std::uintptr_t), 4096))
                  : a.first_table;
  if (t == nullptr) return false;
  for (std::size_t i = 0; i < a.cap; ++i) {
    if (a.table[i] <= kTombstone) continue;
    std::size_t j = slot_of(a.table[i]) & (cap - 1);
    while (t[j] != 0) j = (j + 1) & (cap - 1);
    t[j] = a.table[i];
  }
  if (a.table != a.first_table) os::release(a.table, a.cap * sizeof(std::uintptr_t));
  a.table = t;
  a.used = a.live;
  a.cap = cap;
  return true;
}

bool insert(Arena& a, std::uintptr_t key) {
  if ((a.used + 1) * 2 > a.cap && !grow_table(a)) return false;
  std::size_t i = slot_of(key) & (a.cap - 1);
  while (a.table[i] > kTombstone) i = (i + 1) & (a.cap - 1);
  if (a.table[i] == 0) ++a.used;
  a.table[i] = key;
  ++a.live;
  return true;
}

void erase(Arena& a, std::size_t slot) {
  a.table[slot] = kTombstone;
  --a.live;
}

// Live block `p`'s arena and registry slot, that arena's lock held until this goes out of scope;
// arena kArenas (no lock held) when no registry has it. This thread's arena is tried first: a
// thread mostly frees its own blocks, and then writes no line another thread's calls write.
struct LockedEntry {
  unsigned arena;
  std::size_t slot;
  LockedEntry(unsigned a, std::size_t s) : arena(a), slot(s) {}
  LockedEntry(const LockedEntry&) = delete;
  ~LockedEntry() {
    if (arena < kArenas) g_arena_locks[arena].unlock();
  }
};
LockedEntry find_locked(const void* p) {
  const unsigned first = my_arena();
  for (unsigned k = 0; k < kArenas; ++k) {
    const unsigned i = (first + k) % kArenas;
    g_arena_locks[i].lock();
    const std::size_t slot = find(g_arenas[i], addr(p));
    if (slot != g_arenas[i].cap) return LockedEntry{i, slot};
    g_arena_locks[i].unlock();
  }
  return LockedEntry{kArenas, 0};
}

// The usable bytes of large block `h`: to its mapping's end, or to its guard page.
std::size_t capacity_of(const Header* h) {
  return h->map_bytes - kGuardPages * os::page_size() - offset_for(h->align);
}

// Secure build: fills the slack of block `p` past `request` up to its guard page.
void fill_slack(char* p, const Header* h, std::size_t request) {
  std::memset(p + request, kSlackByte, capacity_of(h) - request);
}

// Secure build: the request of live large block `p` after checking its slack; caller holds
// its arena's lock. A write past the request is reported naming `call`.
std::size_t large_checked_request_locked(const char* call, const void* p) {
  const Header* h = live_header(p);
  const auto* c = static_cast<const unsigned char*>(p);
  if (!holds_only(c + h->request, capacity_of(h) - h->request, kSlackByte))
    bad_pointer(call, "heap overflow detected (a write past the requested size)", p);
  return h->request;
}

// Secure build: readies range [base, base + bytes) for a block: accessible but for its last
// page, the guard. A range from the cache may be sealed whole, or hold the guard pages of the
// blocks merged into it; what `known` says is in place already costs nothing, the rest a
// system call each. False when mprotect fails (no mapping left to split).
bool open_guarded(char* base, std::size_t bytes, LargeCache::Layout known) {
  const std::size_t page = os::page_size();
  // Without a guard at the end, the open bytes known reach the range's end: the body is open
  // only when all of it is.
  const bool body_open = known.open_tail >= bytes - (known.guard_end ? page : 0);
  return (body_open || os::set_accessible(base, bytes - page, true)) &&
         (known.guard_end || os::set_accessible(base + bytes - page, page, false));
}

// The layout of a block's mapping of `bytes` while it is live (in the secure build, open up to
// its guard page), or sealed.
LargeCache::Layout live_layout(std::size_t bytes, bool sealed) {
  if (!kSecureBuild) return {};
  return LargeCache::Layout{true, sealed ? 0 : bytes - os::page_size()};
}

// large_alloc's work: a mapping from this thread's arena's cache or a fresh one, registered
// there.
void* large_alloc_mapped(std::size_t size, std::size_t align, bool* zeroed, bool want_zero) {
  const std::size_t page = os::page_size();
  if (align < 16) align = 16;
  const std::size_t offset = offset_for(align);
  if (size > (std::size_t(1) << 47) || offset > (std::size_t(1) << 40)) return nullptr;
  // At least one byte: a zero-size request aligned to a page or more (posix_memalign(&p, 4096,
  // 0)) has its header fill the offset, so its block would start at its mapping's end, outside
  // it: a pointer no call recognised, and a write through it landed in the next mapping.
  std::size_t bytes = align_up(offset + std::max<std::size_t>(size, 1), page) + kGuardPages * page;
  char* base = nullptr;
  const unsigned arena = my_arena();
  Arena& a = g_arenas[arena];
  os::Lock& lock = g_arena_locks[arena];
  // The system calls (unsealing a cached range, mapping a fresh one) come after the arena's
  // lock is dropped: a thread freeing into this arena need not wait for them.
  LargeCache::Taken t;
  {
    os::LockGuard guard(lock);
    a.written = true;
    t = align <= page ? a.cache.take(bytes, want_zero)
                      : a.cache.take_aligned(bytes, align, offset, want_zero);
    if (t.base == nullptr) a.cache.release_draining(bytes);  // the new pages replace draining ones
  }
  if (t.base != nullptr) {
    const bool opened = kSecureBuild ? open_guarded(t.base, t.bytes, t.layout)
                                     : !t.sealed || os::set_accessible(t.base, t.bytes, true);
    if (opened) {
      base = t.base;
      bytes = t.bytes;
      *zeroed = t.zeroed;
    } else {  // no mapping left to split: fresh pages
      os::LockGuard guard(lock);
      a.cache.put(t.base, t.bytes, t.zeroed, t.sealed);
      a.cache.release_draining(bytes);
    }
  }
  if (base == nullptr) {
    base = align <= page ? static_cast<char*>(os::map_accounted(bytes, page))
                         : map_at_phase(bytes, align, offset);
    if (base == nullptr) return nullptr;
    if (kSecureBuild && !open_guarded(base, bytes, LargeCache::Layout{false, bytes})) {
      os::release(base, bytes);
      return nullptr;
    }
    *zeroed = true;
    g_large_bytes_mapped.fetch_add(bytes, std::memory_order_relaxed);
  }
  char* p = base + offset;
  os::LockGuard guard(lock);
  if (!insert(a, addr(p))) {  // the range goes back as it came: nothing written
    a.cache.put(base, bytes, *zeroed, false, live_layout(bytes, false));
    return nullptr;
  }
  Header* h = header_of(p);
  *h = Header{kMagic, bytes, size, align};
  if (kSecureBuild) fill_slack(p, h, size);
  a.mapped += bytes;
  a.live_bytes += bytes - offset;
  a.cache.note_live(a.live_bytes);
  return p;
}

// Whether block [base, base+bytes) (page-aligned, 1 MiB or more) is mostly pages the program
// never wrote, as a sparsely filled table: at most a quarter of the pages of three windows (its
// start, middle and end, a quarter of it each, at most 256 pages) resident. Three mincore calls,
// about 1 us each. Emptying such a block at free saves little memory and costs its next user a
// fault per page it writes again: large_calloc (8-128 MiB tables, 1 page in 8 written) faulted
// 490,000 times and ran 1.25 s; kept resident, 270,000 times and 0.86 s (a table sealed at free
// is passed over by the next request, which then maps fresh pages: 0.31 s unsealed).
bool mostly_unwritten(char* base, std::size_t bytes) {
  const std::size_t page = os::page_size();
  const std::size_t window = std::min<std::size_t>(256 * page, bytes / 4 / page * page);
  if (window == 0) return false;
  // A written block answers at its first window: more than a quarter of all three is resident
  // already (one mincore, not three: grep's replay frees a written buffer of a new largest
  // size at every step).
  const char* const windows[] = {base, base + (bytes / 2) / page * page, base + bytes - window};
  std::size_t resident = 0;
  for (const char* w : windows) {
    resident += os::resident_bytes(w, window);
    if (4 * resident > 3 * window) return false;
  }
  return true;
}

// large_free's caching of freed block [base, base+bytes) in arena `a`. A block of
// kEmptyAtFree or more, or one of kEmptySealedAtFree or more sealed now, gives its pages back
// (see large_cache.hpp) unless mostly unwritten: from kMoveOutAtFree while the background purger
// runs, by moving them out to a draining range it releases, the old range staying cached empty
// (sealed or not); otherwise by emptying the range here, before it is sealed (an mprotect of an
// empty range touches no page table entries). The secure build's blocks end in a guard page, a
// mapping of its own that cannot move with the rest: they are emptied here. The system calls come
// before the arena's lock: the range is no other thread's until it is cached.
enum class Emptied { kNo, kDraining, kHere };
Emptied cache_freed(unsigned arena, char* base, std::size_t bytes) {
  const bool seal = should_seal(bytes);
  const bool empty = bytes >= (seal ? LargeCache::kEmptySealedAtFree : LargeCache::kEmptyAtFree) &&
                     !mostly_unwritten(base, bytes);
  char* moved = nullptr;
  if (empty && bytes >= LargeCache::kMoveOutAtFree && !kSecureBuild && background_purge_running())
    moved = static_cast<char*>(os::move_pages_out(base, bytes));
  const bool emptied = moved != nullptr || (empty && os::decommit(base, bytes));
  const bool sealed = seal && os::set_accessible(base, bytes, false);
  {
    os::LockGuard guard(g_arena_locks[arena]);
    LargeCache& cache = g_arenas[arena].cache;
    cache.put(base, bytes, emptied, sealed, live_layout(bytes, sealed));
    if (moved) cache.put_draining(moved, bytes);
  }
  return moved != nullptr ? Emptied::kDraining : emptied ? Emptied::kHere : Emptied::kNo;
}

}  // namespace

// A block from the cache that calloc needs zeroed is cleared after the lock is dropped: only
// its first `size` bytes (the secure build's slack and guard stay as they are), its whole pages
// by clear_resident_range, the partial ones at its ends (the header's page) by hand.
void* large_alloc(std::size_t size, std::size_t align, bool* zeroed, bool want_zero) noexcept {
  void* p = large_alloc_mapped(size, align, zeroed, want_zero);
  if (p == nullptr || !want_zero || *zeroed) return p;
  const std::size_t page = os::page_size();
  char* const begin = static_cast<char*>(p);
  char* const end = begin + size;
  char* const first = reinterpret_cast<char*>(align_up(addr(begin), page));
  char* const last = reinterpret_cast<char*>(addr(end) & ~(page - 1));
  if (first >= last) {
    std::memset(begin, 0, size);
  } else {
    std::memset(begin, 0, std::size_t(first - begin));
    clear_resident_range(first, std::size_t(last - first));
    std::memset(last, 0, std::size_t(end - last));
  }
  *zeroed = true;
  return p;
}

bool large_free(void* p, const char* call, std::size_t expect_size) noexcept {
  std::size_t cached;
  char* base;
  unsigned arena;
  {
    const LockedEntry found = find_locked(p);
    arena = found.arena;
    if (arena == kArenas) return false;
    Arena& a = g_arenas[arena];
    Header* h = live_header(p);
    if (kSecureBuild) {
      large_checked_request_locked(call, p);
      if (expect_size != kAnySize && expect_size != h->request)
        bad_pointer(call, "sized free with the wrong size", p);
    } else if (expect_size != kAnySize && expect_size > capacity_of(h)) {
      bad_pointer(call, "sized free with the wrong size", p);
    }
    erase(a, found.slot);
    const std::size_t offset = offset_for(h->align);
    a.live_bytes -= h->map_bytes - offset;
    h->magic = 0;
    a.mapped -= h->map_bytes;  // the cache's from now on
    cached = h->map_bytes;
    base = static_cast<char*>(p) - offset;
  }
  const Emptied emptied = cache_freed(arena, base, cached);
  if (emptied == Emptied::kDraining) request_drain();
  // A block big enough to move out was emptied here, the purger not running (a young process):
  // start it, so the next such free moves its pages out. A process freeing 12 written buffers of
  // a new size each, 1.6 to 9 MiB, from its start spent 1.6-2.4 ms in those frees (9 runs), so
  // 0.5-1.3 ms in 6 of 9 runs and 1.5-2.6 ms in the others (its first free 60-100 us slower: it
  // creates the thread).
  if (emptied == Emptied::kHere && cached >= LargeCache::kMoveOutAtFree && !kSecureBuild)
    start_background_purge_now();
  else
    start_background_purge(cached);  // the cache now holds memory to return later
  return true;
}

void large_drain() noexcept {
  for (unsigned i = 0; i < kArenas; ++i)
    for (;;) {
      LargeCache::Span s;
      {
        os::LockGuard guard(g_arena_locks[i]);
        s = g_arenas[i].cache.pop_draining(kDrainPiece);
      }
      if (s.base == nullptr) break;
      unmap_range(s.base, s.bytes, false);
    }
}

bool large_was_freed(const void* p) noexcept {
  for (unsigned i = 0; i < kArenas; ++i) {
    os::LockGuard guard(g_arena_locks[i]);
    if (g_arenas[i].cache.holds(p)) return true;
  }
  return false;
}

std::size_t large_usable_size(const void* p) noexcept {
  const LockedEntry found = find_locked(p);
  if (found.arena == kArenas) return 0;
  const Header* h = live_header(p);
  return kSecureBuild ? h->request : capacity_of(h);
}

std::size_t large_checked_request(const char* call, const void* p) noexcept {
  const LockedEntry found = find_locked(p);
  if (found.arena == kArenas) return kAnySize;
  return large_checked_request_locked(call, p);
}

void* large_realloc(void* p, std::size_t size) noexcept {
  const LockedEntry found = find_locked(p);
  if (found.arena == kArenas) return nullptr;
  Arena& a = g_arenas[found.arena];
  Header* h = live_header(p);
  const std::size_t usable = capacity_of(h);
  if (size <= usable && size >= usable / 2) {  // fits without wasting half
    if (kSecureBuild) fill_slack(static_cast<char*>(p), h, size);
    h->request = size;
    return p;
  }
  if (size > (std::size_t(1) << 47)) return nullptr;
  // Room in the registry first: once the mapping has moved there is no way back.
  if ((a.used + 1) * 2 > a.cap && !grow_table(a)) return nullptr;
  // Growth gets headroom (grown_size): one mremap per 1.5x; address space only until written.
  // The secure build moves the block without its guard page (a mapping of its own), then gives
  // the old guard back and makes the new mapping's last page the guard.
  const std::size_t page = os::page_size(), guard_bytes = kGuardPages * page;
  const std::size_t offset = offset_for(h->align);
  const std::size_t want = grown_size(usable, size);
  const std::size_t bytes = align_up(offset + want, page) + guard_bytes;
  char* base = static_cast<char*>(p) - offset;
  const std::size_t old_bytes = h->map_bytes;  // h moves with the mapping
  if (!kSecureBuild && bytes > old_bytes) {
    // The open cached range right after the block (the rest of the range it was carved from, or
    // a freed neighbour) is grown into in place: no system call, its pages mapped already. A
    // string built up to 1 MiB by appends of up to 64 bytes, 300 times: each moved by mremap
    // into new pages while the rest of the cached range it had started in stayed resident
    // beside it, 0.33 s and 60 MiB peak RSS; 0.19 s and 2.8 MiB now (mimalloc 0.15 s and 7 MiB,
    // glibc 0.16 s and 2.6).
    const LargeCache::Taken t = a.cache.take_at(base + old_bytes, bytes - old_bytes);
    if (t.base != nullptr) {
      h->map_bytes = old_bytes + t.bytes;
      h->request = size;
      a.mapped += t.bytes;
      // The cache's budget notes the peak of live bytes at the next malloc, as after a move:
      // noted here at every growth, it let the cache keep what each round of realloc_growth's
      // buffers freed (36 -> 61 MiB resident after a round).
      a.live_bytes += capacity_of(h) - usable;
      return p;
    }
  }
  if (bytes > old_bytes) a.cache.release_draining(bytes - old_bytes);  // growth maps new pages
  auto* moved = static_cast<char*>(os::remap(base, old_bytes - guard_bytes, bytes));
  if (moved == nullptr) return nullptr;
  if (kSecureBuild) {
    os::release(base + old_bytes - guard_bytes, guard_bytes);
    os::set_accessible(moved + bytes - guard_bytes, guard_bytes, false);
  }
  char* q = moved + offset;
  erase(a, find(a, addr(p)));
  insert(a, addr(q));  // cannot fail: room was made above
  Header* hq = header_of(q);
  a.mapped += bytes - hq->map_bytes;
  a.live_bytes += (bytes - offset) - usable;
  hq->map_bytes = bytes;
  hq->request = size;
  if (kSecureBuild) fill_slack(q, hq, size);
  return q;
}

std::size_t large_purge_older_than(std::uint64_t age_ns) noexcept {
  std::size_t released = 0;
  for (unsigned i = 0; i < kArenas; ++i) {
    os::LockGuard guard(g_arena_locks[i]);
    released += g_arenas[i].cache.purge_older_than(age_ns, g_arenas[i].live_bytes);
  }
  return released;
}

std::size_t large_trim() noexcept {
  return large_purge_older_than(0);
}

void large_lock() noexcept {
  for (os::Lock& l : g_arena_locks) l.lock();
}
void large_unlock() noexcept {
  for (unsigned i = kArenas; i-- > 0;) g_arena_locks[i].unlock();
}

LargeStats large_stats() noexcept {
  LargeStats s{0, 0, 0, 0, 0};
  for (unsigned i = 0; i < kArenas; ++i) {
    os::LockGuard guard(g_arena_locks[i]);
    const Arena& a = g_arenas[i];
    s.live_blocks += a.live;
    s.live_bytes += a.live_bytes;
    s.cached_bytes += a.cache.bytes();
    s.cached_resident_bytes += a.cache.resident_bytes();
    s.mapped_bytes += a.mapped + a.cache.bytes();
  }
  return s;
}

}  // namespace ak::detail
