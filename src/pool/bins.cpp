// Bin limits and walks: how each thread heap's per-class bins (shared_pool.hpp) grow, shrink,
// close for a run of frees and open again, the walk that sends a bin's blocks home, and the
// answers to shortages (other heaps' blocks a bin keeps while they take new slabs). Called by
// the heap's owner thread only, on slow paths (thread_heap.cpp). The invariants are listed in
// include/allockit/detail/shared_pool.hpp.
#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>

#include "core/core.hpp"
#include "pool/free_tags.hpp"
#include "pool/heap_internal.hpp"
#include "pool/pool.hpp"
#include "pool/slab_source.hpp"
#include "pool/starter_slab.hpp"

namespace ak::detail {
namespace {

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
// their slabs' lists (pool_send_home, which checks a tagged class's tag), other heaps' to
// their owners; three such frees in a row on three other slabs end the run, and the third opens
// the bin (pool_continues_run). A run of frees then reads each block once, not again in a walk
// (sh6bench 0.91-0.93x the time, paired, when bins came to close on the second overflow; then 0.96x
// with the untagged 8-byte class closing too, and 0.93-0.94x with the first overflow closing as
// well, against the build before both), and the closed bin pins no slab. Blocks freed in random
// order (scattered slabs: churn, or a bin that would pin a slab a block) keep the walks. What a
// thread that frees everything and goes idle keeps is its bins: their start limits and at most
// kHeapBinBytes (shared_pool.hpp) more, all threads' together kAllBinBytes more (up to 64
// threads; past that, kMinHeapBinBytes each), each block pinning at most one otherwise empty
// slab; a long run of frees first shrinks them to their start limits (100,000 blocks freed in
// random order leave a 64-block bin).
constexpr std::uint32_t kShrinkBlocks = kMaxBinBlocks / 2;

// What the limit of h's bin of class `cls` has grown past its start, in bytes.
std::size_t grown_bytes(const Heap* h, unsigned cls) {
  return std::size_t(limit_of(h, cls) - start_limit(cls)) * class_size(cls);
}

// The kinds' counters are 32 bits: one bin's growth fits, however far its limit went.
static_assert(std::uint64_t(kMaxBinBlocks) * class_size(kHeapClasses - 1) <= UINT32_MAX);

// What the limits of h's bins of the kind of class `cls` (small or medium) have grown past their
// start, in bytes: what that kind's budget counts.
std::uint32_t& grown_of_kind(Heap* h, unsigned cls) {
  return cls >= kClassCount ? h->medium_bin_bytes : h->bin_bytes;
}

// Sets the limit of h's bin of class `cls` (`limit` at least its start limit), or, closed, the
// one it opens at, rounded down to its start limit doubled a whole number of times; the budget
// of the class's kind counts what limits have grown past their start.
void set_limit(Heap* h, unsigned cls, std::uint32_t limit) {
  grown_of_kind(h, cls) -= std::uint32_t(grown_bytes(h, cls));
  if (h->bins[cls].limit != 0)
    h->bins[cls].limit = limit;
  else
    h->bin_overflows[cls] = std::uint8_t(std::bit_width(limit / start_limit(cls)) - 1);
  grown_of_kind(h, cls) += std::uint32_t(grown_bytes(h, cls));
}

bool trim_bin(Heap* h, unsigned cls, std::uint32_t keep, const char* call);
constexpr std::uint32_t kLongRun = 4;

// A block's slab, as the address a run's blocks share: one mask.
template <bool kMedium>
std::uintptr_t run_key(const void* p) {
  return kMedium ? reinterpret_cast<std::uintptr_t>(medium_slab_of(p)) : slab_base(p);
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

// What one heap's bin limits of a kind (small, or `medium`) may grow past their start now: the
// kind's all-threads budget shared among the threads holding a heap, within its per-heap bounds.
// A heap grown past a budget that shrank (more threads) gives the excess back one class at a
// time, as its classes next grow.
std::size_t heap_bin_budget(bool medium) {
  const std::uint32_t live =
      std::max<std::uint32_t>(1, g_live_heaps.load(std::memory_order_relaxed));
  return medium ? std::clamp(kAllMediumBinBytes / live, kMinHeapMediumBinBytes, kHeapMediumBinBytes)
                : std::clamp(kAllBinBytes / live, kMinHeapBinBytes, kHeapBinBytes);
}

// Whether the budget of class `cls`'s kind has room for `bytes` more of bin limits. When it has
// not, the next class of the kind in turn with a grown limit gives up half of it (its bin trimmed
// to fit): one class per call, so a class that can never fit costs its underflows a constant, and
// the budget drifts to the classes in use. It looks at kStealTries classes at most.
constexpr unsigned kStealTries = 8;
bool steal_budget(Heap* h, unsigned cls, std::size_t bytes) {
  const bool medium = cls >= kClassCount;
  const std::size_t budget = heap_bin_budget(medium);
  const std::uint32_t& grown = grown_of_kind(h, cls);
  if (grown + bytes <= budget) return true;
  // Nothing to take when only this class has grown.
  if (grown == grown_bytes(h, cls)) return false;
  const unsigned first = medium ? kClassCount : 0;
  const unsigned classes = medium ? kHeapClasses - kClassCount : kClassCount;
  std::uint8_t& next = h->steal_next[medium];
  for (unsigned tried = 0; tried < kStealTries; ++tried) {
    const unsigned c = first + next;
    next = std::uint8_t((next + 1) % classes);
    if (c == cls || limit_of(h, c) <= start_limit(c)) continue;
    set_limit(h, c, std::max(start_limit(c), limit_of(h, c) / 2));  // a closed bin's when it opens
    trim_bin(h, c, h->bins[c].limit, "allocation");                 // none in a closed bin
    break;
  }
  return grown + bytes <= budget;
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

// What an overflow of a bin of `limit` blocks sends home: half of it (rounded up), at most
// kMaxSentHome blocks. A bin grown to 8,192 blocks sent 4,096 at once, a walk of 13-155 us inside
// one free over blocks of scattered slabs, their headers out of cache: bdd-aa32's teardown (its BDD
// nodes freed in random order) had 6-8 frees over 5 us, 170-260 us in all, its worst calls. At 512,
// 6-7 frees over 5 us took 60-76 us and 45 more 1-5 us (a scratch replayer, two runs each), the
// mean free 36.5 -> 35 ns; xmalloc, larson, alloc_test1, mstress, rptest, sh6bench, sh8bench,
// glibc_thread, random_sizes within noise (paired, 5-9 rounds: 0.89-1.01x).
std::uint32_t overflow_sends(std::uint32_t limit) {
  return std::min(limit - limit / 2, kMaxSentHome);  // a bin of one block sends it
}

// Overflows (each sending overflow_sends home) after which a bin's limit halves: enough to send
// kShrinkBlocks home, at most 254.
std::uint32_t shrink_after(std::uint32_t limit) {
  return std::clamp<std::uint32_t>(
      kShrinkBlocks / std::max<std::uint32_t>(1, overflow_sends(limit)), 1, 254);
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

}  // namespace

// ---------------------------------------------------------------------------------------------
// What thread_heap.cpp calls (heap_internal.hpp)
// ---------------------------------------------------------------------------------------------

// With its limit 0, every free of the class takes the way past a full bin, straight home. The
// limit it had waits for open_bin, as set_limit rounds it.
void close_bin(Heap* h, unsigned cls) {
  trim_bin(h, cls, 0, "free()");
  const std::uint32_t limit = h->bins[cls].limit;
  set_limit(h, cls, start_limit(cls));
  h->bins[cls].limit = 0;  // closed at its start limit (no doublings): grown_bytes unchanged
  h->bin_overflows[cls] = 0;
  set_limit(h, cls, limit);
  h->home_run_breaks = 0;  // a run of frees starts (pool_continues_run)
}

// The limit doubles after a short refill too, from a slab with a few blocks free: a heap adopted
// with such slabs took a bin from 64 to 8,192 blocks in 150 allocations. Doubling only after a
// full refill, half a bin or half a slab, measured slower on xmalloc, whose refills from slabs its
// blocks came home to are short: 1.31x tcmalloc paired against 1.00x, on a noisy host.
void grow_limit(Heap* h, unsigned cls) {
  h->bin_overflows[cls] = 0;
  raise_limit(h, cls);
}

// ---------------------------------------------------------------------------------------------
// Shortages: blocks of a class kept in other threads' bins
// ---------------------------------------------------------------------------------------------
//
// A thread that frees another's blocks keeps them in its bin (cross-thread frees) and reuses them;
// its bin's count then drifts as its frees and mallocs of the class do, and each time it runs
// empty its limit doubles. In producer/consumer xmalloc the two threads' bins of a class wandered
// up to limits of 4,096-8,192 blocks, and the thread whose blocks one held took new slabs: slabs
// in use grew all run long (40 to 66 in 0.7 s; 12-18 slabs for each class of 80-128 bytes, whose
// live blocks fill one or two). So a heap about to take a new slab of a class notes a shortage of
// it (a process-wide 16-bit count, which wraps; per class, the count at its last shortage), and
// each heap looks on its next slow path: a bin of that class holding more than its start limit, at
// least half of its kProbe newest blocks other heaps', sends half its blocks home (at most
// kMaxSentHome; other heaps' blocks reach their owners' remote stacks at once), and its limit drops
// to what it kept or half, whichever is less. A bin of its own heap's blocks keeps them: threads
// that never exchange blocks lose nothing to each other's growth. xmalloc's peak RSS 7.1-8.9
// -> 6.4-6.5 MiB (medians of three paired runs, 5 rounds each; 8.8 -> 7.1 MiB at four times the
// work) at the same time; larson, larson_sized, sh8bench, sh6bench, glibc_thread, alloc_test2,
// mstress, rptest, thread_churn, mixed_lifetimes and mleak 0.99-1.03x, within their noise. Bins
// still hold 1-2 MiB of the other thread's blocks at times: xmalloc's own churn, which smaller bins
// trade for time (bins of at most 512 blocks: 5.0 MiB at 1.3x the time; of 64: 4.0 MiB at 2.3x).
// Lowering the answered bin's limit to half of what it keeps measured the same RSS.
constinit std::atomic<std::uint16_t> g_shortages{0};

namespace {

constinit std::atomic<std::uint16_t> g_class_shortage[kHeapClasses] = {};

// Whether at least half of the kProbe newest blocks of bin `bin` (of class `cls`) are of other
// heaps' slabs. Reads lines the frees just wrote, and their slabs' headers.
bool bin_top_foreign(const Heap* h, const Bin& bin, unsigned cls) {
  if (bin.count < kProbe) return false;
  std::uint32_t foreign = 0;
  const PoolBlock* b = bin.free;
  for (std::uint32_t i = 0; i < kProbe; ++i, b = link_of(b)) {
    const Slab* s = cls >= kClassCount ? medium_slab_of(b) : slab_of(b);
    foreign += !s->starter && slab_owner(s) != h;
  }
  return 2 * foreign >= kProbe;
}

}  // namespace

void note_shortage(unsigned cls) {
  if (g_live_heaps.load(std::memory_order_relaxed) < 2) return;  // no other bins to look in
  const auto n = std::uint16_t(g_shortages.fetch_add(1, std::memory_order_relaxed) + 1);
  g_class_shortage[cls].store(n, std::memory_order_relaxed);
}

void answer_shortages(Heap* h, const char* call) {
  const std::uint16_t seen = h->seen_shortage;
  h->seen_shortage = g_shortages.load(std::memory_order_relaxed);
  bool sent = false;
  for (unsigned cls = 0; cls < kHeapClasses; ++cls) {
    // The heap's own bin first: most hold too little to answer, and the shared counts stay unread.
    const Bin& bin = h->bins[cls];
    if (bin.limit == 0 || bin.count <= start_limit(cls)) continue;
    const std::uint16_t at = g_class_shortage[cls].load(std::memory_order_relaxed);
    if (std::int16_t(std::uint16_t(at - seen)) <= 0) continue;  // none since h last looked
    if (!bin_top_foreign(h, bin, cls)) continue;
    const std::uint32_t keep =
        std::max(start_limit(cls), bin.count - std::min(bin.count / 2, kMaxSentHome));
    set_limit(h, cls, std::max(start_limit(cls), std::min(bin.limit / 2, keep)));
    trim_bin(h, cls, keep, call);
    sent = true;
  }
  if (sent) flush_outgoing(h);
}

void empty_bins(Heap* h, const char* call) {
  for (unsigned cls = 0; cls < kHeapClasses; ++cls) trim_bin(h, cls, 0, call);
}

// Room comes from the limit doubled or the bin's most recent half sent home. It closes on a run of
// h's own blocks seen in its newest blocks on its first overflow since it ran empty, else in the
// walk of its second; closing on the first raises the limit as that overflow would, so it opens
// at the same.
bool overflow(Heap* h, unsigned cls, bool own_run) {
  check_shortages(h, "free()");
  if (h->bins[cls].count < h->bins[cls].limit) return false;  // an answer made room
  if (own_run && h->bin_overflows[cls] == 0 && bin_top_in_runs(h->bins[cls], cls)) {
    raise_limit(h, cls);
    return true;
  }
  if (after_overflow(h, cls)) return false;
  // Down to half its limit, at most kMaxSentHome blocks a free (overflow_sends of a full bin): a
  // bin over a limit just halved sends the rest over the frees that follow.
  const Bin& bin = h->bins[cls];
  const std::uint32_t sent = std::min(bin.count - bin.limit / 2, kMaxSentHome);
  return trim_bin(h, cls, bin.count - sent, "free()") && own_run && h->bin_overflows[cls] >= 2;
}

}  // namespace ak::detail
