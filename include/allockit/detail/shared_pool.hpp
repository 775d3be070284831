// Inline fast paths of the shared size-class pools (pool.hpp). Internal: only pool.hpp includes it.
// A slab is a 64 KiB-aligned run of same-class blocks whose header sits at a place its address
// gives (slab_of), so a block's slab is computed, never looked up. Each slab
// belongs to one thread heap. In front of the slabs, each thread heap keeps a bin per class: a
// bounded LIFO list of free blocks of that class from any slab, its own or another heap's. Frees
// push onto the freeing thread's bin and allocations pop from it, so a block freed is the next
// one handed out, still in cache, and neither path branches on which slab a block is in. A full
// bin sends its most recent half home; an empty one refills from the heap's slabs. Invariants:
// - only the owner thread touches its bins and its slabs' `free`, `used`, `settle_at`, `full`
//   (a heap no thread owns is touched only under the hand-out lock, by pool_settle_remote);
// - other threads never write a slab header (a debug slab's atomic live bits aside): blocks they
//   send home go onto the owning heap's `remote_blocks` stack, in chains (one CAS per chain), and
//   the owner sorts them back into their slabs;
// - `used` counts a slab's carved blocks that are not on its own `free` list: with users, in any
//   heap's bin, or on their way home. Only slow paths change it; a slab that is not its class's
//   current one is retired when it reaches zero;
// - a bin holds at most `limit` blocks, so a thread keeps a bounded amount of free memory (and
//   pins at most that many otherwise empty slabs) until it next frees or exits.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "allockit/config.hpp"
#include "allockit/detail/size_classes.hpp"

namespace ak::detail {

inline constexpr std::size_t kSlabShift = 16;
inline constexpr std::size_t kSlabSize = std::size_t(1) << kSlabShift;
inline constexpr unsigned kPoolClasses = kClassCount;  // the public pools' classes
// Medium slabs (liballockit's classes kClassCount..kHeapClasses-1) are 2 MiB, 2 MiB-aligned, in
// regions of their own; their header page and then the slack precede blocks that end where the
// slab ends (new_slab).
inline constexpr std::size_t kMediumSlabShift = 21;
inline constexpr std::size_t kMediumSlabSize = std::size_t(1) << kMediumSlabShift;
inline constexpr std::size_t kMediumDataOffset = 4096;
// The alignment of every block of medium class `c`: its size's natural alignment (a 24 KiB block
// is aligned to 8 KiB, a 96 KiB one to 32 KiB, a 256 KiB one to 256 KiB), as its blocks end at
// the slab's 2 MiB-aligned end. The secure build ends them a guard page earlier: a page.
constexpr std::size_t medium_class_align(unsigned c) noexcept {
  return kSecureBuild ? kMediumDataOffset : natural_alignment(class_size(c));
}
// liballockit may leave a freed medium block of this size or more inaccessible past its first page
// (src/malloc/freed_guard.hpp); a retired slab that had one sealed (Slab::sealed_any) is made
// accessible again.
inline constexpr std::size_t kSealableMediumBytes = std::size_t(128) << 10;

inline constexpr std::uint8_t kNoBin = 0xff;  // Slab::bin_class of slabs whose frees go slow
static_assert(kHeapClasses < kNoBin);
static_assert(kHeapClasses - kClassCount <= 256 && kClassCount <= 256);  // Heap::steal_next

struct PoolBlock {
  PoolBlock* next;  // read and written through link_of / set_link only
};
struct Heap;

// Free-list links (bins, slab lists, remote chains). The secure build stores each one encoded,
// XORed with a per-process key and with its own address shifted right 12 (as glibc's
// safe-linking), and checks every link it decodes: an overflow or a write after free that
// overwrites a freed block's first word leaves a link that decodes to no block at all, which is
// reported before it is followed. Every other build stores plain pointers.
#if AK_SECURE
extern std::uintptr_t g_link_key;  // set before the first heap exists, never changed
// Returns `decoded`, the link read from `block`, after checking that it is null or a block a slab
// handed out; reports heap corruption and aborts otherwise.
PoolBlock* pool_checked_link(const PoolBlock* block, PoolBlock* decoded) noexcept;
#endif

// Freed-block tags. Every free block of 16 bytes or more in a bin or on a slab's list carries, in
// its second word, a value keyed by its address (one XOR: the key is a constant, as code inlined
// into programs computes it too, and a data symbol would be copied into a program's executable
// away from the library's own reference to it). Frees write it without reading the block, and
// every path a free block leaves by checks it (liballockit's malloc when it pops one, the
// allocation slow path, a bin sending blocks home, the audit at exit). A tag found missing there
// means the block was handed out twice (freed twice) or written after free.
// Checks compare the low 48 bits (kTagCheckBits): a bin's walk writes its epoch into the top 16
// bits of each block it sends home, so a block met twice in one walk (freed twice) is seen
// (pool/free_tags.hpp). User data matches by accident with odds of about 2^-48; the key's bit 47
// is set, so for any user-space address (below 2^47) the compared bits are never 0, and a live
// block's cleared word (0) or a small number never matches. Bit 0 set marks liballockit's sealed
// medium blocks.
inline constexpr std::uintptr_t kTagCheckBits = (std::uintptr_t(1) << 48) - 1;
inline std::uintptr_t pool_free_tag(const void* p) noexcept {
  return 0xA55A'9CED'F4EE'0B50ull ^ reinterpret_cast<std::uintptr_t>(p);  // never an address
}
inline void pool_tag_freed(void* p) noexcept {
  static_cast<std::uintptr_t*>(p)[1] = pool_free_tag(p);
}
// Whether block `p` carries its freed-block tag, unsealed, whatever walk marked it. Checks all 48
// bits: for a block that may be live.
inline bool pool_carries_tag(const void* p) noexcept {
  static_assert(kTagCheckBits == ~std::uintptr_t(0) >> 16);  // a shift tests them: no mask constant
  return ((static_cast<const std::uintptr_t*>(p)[1] ^ pool_free_tag(p)) << 16) == 0;
}
// Whether free block `p`, just popped from a bin, carries its freed-block tag, unsealed: the low 32
// bits alone, one compare with memory (three instructions fewer a pop than 48 bits). A false match
// can only miss a write after free (odds of 2^-32 for data that is not a tag); it cannot take a
// live block for a freed one, as nothing but free blocks are popped.
inline bool pool_popped_carries_tag(const void* p) noexcept {
  return std::uint32_t(static_cast<const std::uintptr_t*>(p)[1]) == std::uint32_t(pool_free_tag(p));
}
// Whether blocks of class `cls` carry a tag: all but class 0, whose 8 bytes leave no room.
constexpr bool class_has_tag(unsigned cls) noexcept {
  return cls != 0;
}
static_assert(class_size(0) < 16 && class_size(1) >= 16);

inline std::uintptr_t link_mask(const PoolBlock* b) noexcept {
#if AK_SECURE
  return g_link_key ^ (reinterpret_cast<std::uintptr_t>(b) >> 12);
#else
  (void)b;
  return 0;
#endif
}

// The block after `b` on its list, as stored (not checked).
inline PoolBlock* decoded_link(const PoolBlock* b) noexcept {
  return reinterpret_cast<PoolBlock*>(reinterpret_cast<std::uintptr_t>(b->next) ^ link_mask(b));
}

// The block after `b` on its list.
inline PoolBlock* link_of(const PoolBlock* b) noexcept {
  PoolBlock* n = decoded_link(b);
#if AK_SECURE
  return pool_checked_link(b, n);
#else
  return n;
#endif
}

// Makes `n` the block after `b`.
inline void set_link(PoolBlock* b, PoolBlock* n) noexcept {
  b->next = reinterpret_cast<PoolBlock*>(reinterpret_cast<std::uintptr_t>(n) ^ link_mask(b));
}

struct alignas(64) Slab {
  // Read-mostly line: set when the slab is set up (`current` flips only when the slab stops or
  // starts being its class's current one; `carve` moves once per page of blocks, or once per
  // fresh block of a zero_tail slab, only while it has none home). Every free reads it, so
  // nothing that runs per call writes it.
  std::uintptr_t owner_tag;  // owning Heap address; | 1 when checked
  // The bin the fast free pushes this slab's blocks onto: its class, or kNoBin (the starter slab,
  // checked slabs), which sends every free out of line.
  std::uint8_t bin_class = kNoBin;
  bool current;  // its class's current slab in its owner heap: refills come from it
  bool checked;  // debug slab: state bits kept, every operation takes the slow path
  bool starter;  // the starter slab: blocks of many classes, never reused (pool/starter_slab.hpp)
  std::uint8_t size_class;
  // Blocks at and past `carve` are zero and were never written: the slab's memory came zero from
  // the OS. They are handed out one at a time, unwritten (pool_alloc_slow's `*untouched`).
  bool zero_tail;
  // The word of a freed block the fast frees write its tag into: 1, or 0 for the class without a
  // tag (8 bytes), whose link is then stored over it. No test of the class there: a program
  // freeing 8-byte blocks among others in random order mispredicted that branch on about one
  // free in three (sh8bench, 20% of its blocks 8 bytes: 0.87-0.96x the time without it).
  std::uint8_t tag_word;
  std::uint32_t capacity;
  // A word, not 32 bits: a sized free compares the size it is given with it in one instruction.
  std::size_t block_size;
  char* data;  // first block
  char* end;   // end of the last whole block
  // Next never-used block; blocks are carved lazily. The owner moves it (a page at a time, or a
  // block at a time while a zero_tail slab hands out untouched blocks: a write to this line per
  // fresh block); any freeing thread reads it (relaxed: a block handed out was carved before, so
  // its thread sees at least that much).
  std::atomic<char*> carve;
  // Where the fast free's range starts: `data`, or past every address for a slab without a bin
  // (kNoBin), so its frees fail the range test and the fast path needs no bin_class test.
  char* fast_from = reinterpret_cast<char*>(~std::uintptr_t(0));
  // Owner line: written by the owner thread only.
  alignas(64) PoolBlock* free;  // free blocks home in this slab (not in any bin)
  std::uint32_t used;           // carved blocks not on `free` (see the invariants above)
  std::uint32_t settle_at;  // `used` at which a free settles the slab: 0, or rejoin_at() if full
  bool full;                // not current, (almost) nothing free: off the avail list
  // A medium slab: one of its blocks was sealed (liballockit's freed_guard.hpp) since it was set
  // up, so retiring it makes its blocks accessible again. Set by the thread sealing it, before
  // the block goes home; read by the owner at retirement.
  std::atomic<bool> sealed_any;
  // Medium: requests of its class served from a larger class's free block while it was current
  // and had none (pool_medium_class), since it last handed out a fresh block for that reason.
  std::uint8_t borrows = 0;
  Slab* prev;  // the owner heap's avail or full list of its class (not while current)
  Slab* next;
  PoolBlock* checked_free;  // debug slabs keep free blocks here, out of the fast path's reach
  std::atomic<std::uint64_t>* live_bits;  // debug slabs: one bit per block, set while allocated
};
static_assert(sizeof(Slab) == 128, "slab header: a read-mostly line and the owner's line");
static_assert(offsetof(Slab, free) == 64, "the read-mostly line holds everything a free reads");

inline Heap* slab_owner(const Slab* s) noexcept {
  return reinterpret_cast<Heap*>(s->owner_tag & ~std::uintptr_t(1));
}

// What the fast paths need of one size class, in 16 bytes so it never straddles a cache line.
struct alignas(16) Bin {
  PoolBlock* free = nullptr;  // free blocks of this class, any slab's, most recently freed first
  std::uint32_t count = 0;    // blocks on `free`
  std::uint32_t limit = 0;    // most blocks `free` may hold; 0 in the sentinel heap
};

// Frees this thread made into one slab of another heap, not yet handed over: pushed onto that
// heap's `remote_blocks` as one chain (one CAS) when full, when another slab needs the entry,
// and on the freeing thread's allocation slow path, pool_trim/ak_collect and exit. A chain of
// blocks of kChainInfoMin bytes or more carries its tail and length in its head's third and
// fourth words (the second is the freed-block tag of liballockit), so the owner splices it onto
// the slab's list whole instead of visiting every block.
struct RemoteBatch {
  Slab* slab = nullptr;
  PoolBlock* head = nullptr;
  PoolBlock* tail = nullptr;
  std::uint32_t count = 0;
};
inline constexpr std::uint32_t kChainInfoMin = 32;

// Entries, indexed by slab (batch_entry). 8: indexed by the header's 64 KiB slot, as they were,
// every slab took the first of 16 entries (small slabs' headers share their region's first slot,
// medium ones are 2 MiB-aligned), and xmalloc, larson, sh8bench, mstress and glibc_thread ran
// alike (0.98-1.02x paired, 5 rounds) with 8 entries neighbouring slabs do not share, which leave
// the first heap room on its page for more size classes (pool/hot_page.hpp).
inline constexpr unsigned kRemoteBatches = 8;
inline constexpr unsigned kRemoteBatchMax = 32;  // blocks per entry before it is handed over

// What a heap's bin limits together may grow past their start limits, in bytes (bins.cpp:
// a bin that runs empty doubles its limit within it), at most. 4 MiB, tcmalloc's largest thread
// cache: at 2 MiB, random sizes up to 64 KiB in random order (alloc_test) overflowed and refilled
// bins 240,000 times in 60M calls, 4-5% of its time, and mstress, larson, rptest and random_sizes
// ran 5-13% slower; peak RSS moved by -2..+1.5 MiB (fewer trims also scatter fewer blocks over
// slabs). The threads holding a heap share kAllBinBytes, each at least kMinHeapBinBytes, as
// tcmalloc's thread caches share 32 MiB: 64 threads pin at most 32 MiB of grown bins, not 256.
inline constexpr std::size_t kHeapBinBytes = std::size_t(4) << 20;
inline constexpr std::size_t kAllBinBytes = std::size_t(32) << 20;
inline constexpr std::size_t kMinHeapBinBytes = std::size_t(512) << 10;
// The medium classes' bins (liballockit's, 20-256 KiB) grow within a budget of their own, as
// the small ones do within theirs: sharing one, a class of 128-256 KiB blocks took a sixteenth of
// it a block, and where 64-256 KiB blocks churned among 64 slots the classes took it from each
// other and from the small ones at every fifth call (overflows, refills, trims): 80.1M
// instructions for 200,000 pairs, 70.6M with 8 MiB of their own (alloc_test1 and alloc_test2
// 0.97x and 0.96x the time; their peak RSS and glibc_thread's +0.4-0.6 MiB). A heap's bins may
// keep this much more of medium blocks when its thread goes idle.
inline constexpr std::size_t kHeapMediumBinBytes = std::size_t(8) << 20;
inline constexpr std::size_t kAllMediumBinBytes = std::size_t(32) << 20;
inline constexpr std::size_t kMinHeapMediumBinBytes = std::size_t(1) << 20;

// All zero when new: a static heap needs no relocation and stays in .bss until written.
struct alignas(64) Heap {
  Bin bins[kHeapClasses];
  Slab* current[kHeapClasses] = {};  // per class: the slab refills come from, or null
  // Per class: 0 when its bin ran empty since it last overflowed, else 1 + its overflows since
  // (back to 1 when its limit halves). While the bin is closed (its limit 0, in a run of frees:
  // bins.cpp close_bin), how many times its start limit doubles when it opens.
  std::uint8_t bin_overflows[kHeapClasses] = {};
  std::uint32_t home_run = 0;          // pool_continues_run: the slab of the last free sent home
  std::uint32_t bin_bytes = 0;         // what the small bins' limits grew past their start, bytes
  std::uint32_t medium_bin_bytes = 0;  // the same for the medium classes' bins
  std::uint8_t steal_next[2] = {};   // per kind (small, medium): whose budget goes next, an offset
  std::uint16_t walk_epoch = 0;      // the epoch of its last walk of a bin (pool/free_tags.hpp)
  std::uint8_t home_run_breaks = 0;  // pool_continues_run: changes of slab in a row, up to two
  Slab* avail[kHeapClasses] = {};    // per class: other slabs with free or carvable blocks
  Slab* full[kHeapClasses] = {};     // per class: slabs waiting for enough frees to rejoin
  RemoteBatch outgoing[kRemoteBatches];  // owner thread only
  unsigned outgoing_used = 0;            // entries holding blocks
  bool is_real = false;                  // false only for the sentinel heap of threads without one
  std::uint16_t seen_shortage = 0;       // the shortage count it last answered (pool/bins.cpp)
  Heap* next_abandoned = nullptr;
  // Blocks other threads freed into this heap's slabs: a stack of chains linked by `next`,
  // pushed with a CAS, taken whole by the owner with one exchange. Its own line: the pushers'
  // writes must not evict the owner's bins.
  alignas(64) std::atomic<PoolBlock*> remote_blocks{nullptr};
};

// initial-exec: one %fs-relative load even inside liballockit.so (a preloaded library always
// gets static TLS), and no __tls_get_addr call that could itself allocate.
extern constinit thread_local Heap* tl_heap __attribute__((tls_model("initial-exec")));

// The bin of class `cls` is empty: a block from the heap's slabs, or null when out of memory.
// `*untouched` (if given) is set when the block is a never-used one of a zero_tail slab: all zero
// and never written, so no page of it has faulted in yet and calloc need not clear it.
void* pool_alloc_slow(unsigned cls, bool* untouched = nullptr) noexcept;
// The frees the fast path leaves: a full bin, a thread without a heap, the starter slab, checked
// slabs.
void pool_free_other(Slab* slab, void* p) noexcept;
// As pool_free_other, for block `p` not tagged yet, whose tag cannot be checked (the pools leave
// it in the blocks they hand out): tags it; a closed bin opens and takes it, as its blocks may go
// straight home only after a check.
void pool_free_untagged(Slab* slab, void* p) noexcept;
void pool_check_pointer(const void* p) noexcept;  // aborts unless p lies in a pool region
// The size of block `p` of the starter slab `s` (0 if `p` is not one of its blocks).
std::size_t pool_starter_block_size(const Slab* s, const void* p) noexcept;

// Multipliers for a division-free divisibility test: for an offset n < 2^32, n is a multiple of
// class_size(c) exactly when n * kBlockMagic[c] <= kBlockMagic[c] - 1 (Lemire, Kaser and Kurz,
// "Faster remainder by direct computation", 2019). One multiply and one compare.
struct BlockMagic {
  std::uint64_t of[kHeapClasses];
  constexpr BlockMagic() : of{} {
    for (unsigned c = 0; c < kHeapClasses; ++c) of[c] = ~std::uint64_t(0) / class_size(c) + 1;
  }
};
inline constexpr BlockMagic kBlockMagic;

// Whether the fast free may take `p` for a block of slab `s` that was ever handed out: 8-aligned,
// at or past the first block and before the carve point, in a slab with a bin (fast_from). Two
// loads of the slab's read-mostly line, two compares. (The block-boundary test below, one
// multiply more, cost xmalloc 6%, with the carve point or without it: it is left to the slow
// paths.)
inline bool pool_may_fast_free(const Slab* s, const void* p) noexcept {
  const auto c = static_cast<const char*>(p);
  return (reinterpret_cast<std::uintptr_t>(c) & 7) == 0 && c >= s->fast_from &&
         c < s->carve.load(std::memory_order_relaxed);
}

// As pool_is_below_carve, and at a block boundary. The starter slab's blocks vary in size: this
// says yes for any 8-byte boundary there (its own map decides).
inline bool pool_is_carved_block(const Slab* s, const void* p) noexcept {
  const auto c = static_cast<const char*>(p);
  const std::uint64_t magic = kBlockMagic.of[s->size_class];
  return c >= s->data && c < s->carve.load(std::memory_order_relaxed) &&
         std::uint64_t(c - s->data) * magic <= magic - 1;
}

// The size of block `p` of slab `s`.
inline std::size_t pool_block_size(const Slab* s, const void* p) noexcept {
  return s->starter ? pool_starter_block_size(s, p) : s->block_size;
}

// Small slabs' headers sit apart from their blocks, in a table in the first 64 KiB slot of their
// 16 MiB region (a slot no slab takes), one 128-byte entry per slab; the secure build makes the
// pages around the table inaccessible, so no linear overflow reaches metadata. Dense headers keep
// a slab's pages untouched until its blocks are (100,000 never-written 3000-byte blocks: 1.5 MiB
// resident, not 20.7), and a thread's headers share a few pages. A slab's blocks start at one of
// kSlabColors offsets from its base, 128 bytes apart, chosen by its address: starting every slab's
// blocks at its 64 KiB-aligned base put them in the same cache sets and made bench-malloc-simple
// 20% slower. At most 31 * 128 bytes of each slab. The offset is rounded down to the class's
// alignment (class_align), so a class aligned to 256 bytes or more has fewer colours (2 KiB: two).
inline constexpr std::uintptr_t kSlabColors = 32;
inline constexpr std::uintptr_t kSlabHeaderBytes = 128;
inline constexpr std::size_t kSlabRegionShift = 24;         // slab_source.hpp's regions
inline constexpr std::uintptr_t kHeaderTableOffset = 4096;  // after a page (a guard when secure)
inline constexpr std::uintptr_t kSlabRegionMask = (std::uintptr_t(1) << kSlabRegionShift) - 1;
inline constexpr std::uintptr_t kSlabsPerRegion = std::uintptr_t(1)
                                                  << (kSlabRegionShift - kSlabShift);
inline constexpr std::uintptr_t kHeaderTableBytes = kSlabsPerRegion * kSlabHeaderBytes;

// The colour offset of the small slab whose 64 KiB-aligned base is `base`: where its blocks start.
constexpr std::uintptr_t slab_color_offset(std::uintptr_t base) noexcept {
  return ((base >> kSlabShift) & (kSlabColors - 1)) * kSlabHeaderBytes;
}

// The 64 KiB-aligned base of the small slab holding `p`.
inline std::uintptr_t slab_base(const void* p) noexcept {
  return reinterpret_cast<std::uintptr_t>(p) & ~(kSlabSize - 1);
}

// The header of the small slab holding `p`. Four ALU operations, no load.
inline Slab* slab_of(const void* p) noexcept {
  const std::uintptr_t base = slab_base(p);
  return reinterpret_cast<Slab*>((base & ~kSlabRegionMask) + kHeaderTableOffset +
                                 ((base >> kSlabShift) & (kSlabsPerRegion - 1)) * kSlabHeaderBytes);
}

// The base of the small slab whose header is `s` (the inverse of slab_of).
inline std::uintptr_t small_slab_base(const Slab* s) noexcept {
  const auto h = reinterpret_cast<std::uintptr_t>(s);
  const std::uintptr_t region = h & ~kSlabRegionMask;
  return region + ((h - region - kHeaderTableOffset) / kSlabHeaderBytes << kSlabShift);
}

// Pops a block of class `cls` from the bin of heap `h` (this thread's), or returns null when the
// bin is empty (nothing else is tried). Three dependent loads, one branch, a store and a decrement.
// The next block's line is fetched ahead, for writing: it is often cold or last written on another
// core (a block another thread freed or sent home), and the next malloc would wait for it there
// (producer/consumer xmalloc: 0.90-0.92x the time; glibc_simple 0.92x, sh8bench 0.95x, sh6bench
// 0.96x; larson, rptest and the rest within 2%; paired runs, 3 to 7 rounds). Not for the pools'
// own callers (`kPrefetchNext` false, pool_alloc): a program's pool cycles its own blocks, whose
// lines are in its cache, and the prefetch took ak_small_object's alloc-free pair of 8 bytes from
// 8.65 to 9.24 ns (1.26 -> 1.35x boost::object_pool), 64 and 280 bytes 1.40 -> 1.42x.
template <bool kPrefetchNext = true>
inline void* pool_pop(Heap* h, unsigned cls) noexcept {
  Bin& bin = h->bins[cls];
  PoolBlock* b = bin.free;
  if (b == nullptr) [[unlikely]]
    return nullptr;
  PoolBlock* const next = link_of(b);
  if constexpr (kPrefetchNext) __builtin_prefetch(next, 1);
  bin.free = next;
  --bin.count;
  return b;
}
inline void* pool_pop(unsigned cls) noexcept {
  return pool_pop(tl_heap, cls);
}

// The secure build's malloc fast path: pops as pool_pop, but hands the decoded link, now the bin's
// head, to the caller unchecked in `*head`. The caller checks it last (pool_checked_head), before
// the block is returned and before the head is ever followed, as a tail call: the path around it
// then keeps no register across a call.
inline void* pool_pop_unchecked(unsigned cls, PoolBlock** head) noexcept {
  Bin& bin = tl_heap->bins[cls];
  PoolBlock* b = bin.free;
  if (b == nullptr) [[unlikely]]
    return nullptr;
  *head = decoded_link(b);
  __builtin_prefetch(*head, 1);  // as pool_pop; a corrupt link is only a lost prefetch
  bin.free = *head;
  --bin.count;
  return b;
}
// Returns `p` (just popped, its link read as `head`) after checking `head` as pool_checked_link
// does; reports heap corruption and aborts otherwise.
void* pool_checked_head(void* p, const PoolBlock* head) noexcept;  // the secure build only

// Pops a block of class `cls`, or null when out of memory. Fast path: pool_pop, without its
// prefetch unless `kPrefetchNext` (malloc's callers); no lock, no atomic. `*untouched` as
// pool_alloc_slow sets it (a popped block never is).
template <bool kPrefetchNext = false>
inline void* pool_alloc(unsigned cls, bool* untouched = nullptr) noexcept {
  if (void* p = pool_pop<kPrefetchNext>(tl_heap, cls)) [[likely]]
    return p;
  return pool_alloc_slow(cls, untouched);
}

// Whether slab `s` hands out untouched blocks now: its memory came zero from the OS (zero_tail;
// never a secure or checked slab) and it has no freed block home.
inline bool pool_gives_untouched(const Slab* s) noexcept {
  return s->zero_tail && s->free == nullptr;
}

// A never-used block of zero_tail slab `s`, handed out unwritten, or null when none is left to
// carve. Carving a page of blocks onto a bin writes every block's first word: the page faults in
// inside malloc, a microsecond or more. Untouched, it faults at the program's first write, as it
// would anyway, and calloc skips clearing it.
inline void* pool_take_untouched(Slab* s) noexcept {
  char* const p = s->carve.load(std::memory_order_relaxed);
  if (p == s->end) return nullptr;
  s->carve.store(p + s->block_size, std::memory_order_relaxed);
  ++s->used;
  return p;
}

// A never-used block of class `cls` from the current slab of the class of heap `h` (this thread's)
// when that slab hands out untouched blocks, else null: what pool_alloc_slow would return first,
// without the calls in front of it. malloc's slow path tries it first: a growing program takes
// every fresh block there, and the call chain down to it (the size's class again, a second pop, the
// starter-slab tests) cost about 75 instructions per block more (100,000 fresh blocks, then
// freed: 60.3M -> 52.7M instructions in all).
inline void* pool_take_fresh(Heap* h, unsigned cls) noexcept {
  Slab* const s = h->current[cls];
  return s != nullptr && pool_gives_untouched(s) ? pool_take_untouched(s) : nullptr;
}

// `used` at which a full slab rejoins its class's avail list: when a sixteenth of it is free
// again. Rejoining on the first free made a thread switch slabs every few allocations (the most
// recent slab became current with one or two free blocks): 16% of larson's mallocs went slow,
// 2% now. A quarter or an eighth ran no faster and held more memory (mleak's peak +27%, +11%).
inline std::uint32_t rejoin_at(const Slab* s) noexcept {
  return s->capacity - (s->capacity / 16 > 0 ? s->capacity / 16 : 1);
}

// Pushes block `p` onto `bin`, which has room.
inline void bin_push(Bin& bin, void* p) noexcept {
  auto* b = static_cast<PoolBlock*>(p);
  set_link(b, bin.free);
  bin.free = b;
  ++bin.count;
}

// pool_send_home's slow part: slab `s`, not current, reached its `settle_at`.
void pool_after_sent_home(Slab* s) noexcept;

// Whether a free of a block of h's own slab `s` past h's closed bin continues the run of frees
// that closed it: its slab is the last such free's (the low 32 bits of the header's address: a
// rare false match only sends a block home), or one of the two frees before stayed on its slab.
// Three changes of slab in a row end the run: blocks freed in random order change slabs at nearly
// every free, and each would be read cold to check its tag before it goes home (mc_server_small's
// replay: 1,000-1,500 frees at 100-400 ns, against jemalloc's 50, whose free never reads the
// block), so their bin opens again and takes them as any free (pool_reopen_bin). A run, blocks
// freed in the order they were handed out, stays on a slab for hundreds of frees (sh6bench: 3
// changes in 1,000 frees; ended on two changes in a row, its runs reopened bins 1,105 times at a
// fifth of its sweeps, 1.08x the time; on three, 6 times).
inline bool pool_continues_run(Heap* h, const Slab* s) noexcept {
  const auto key = static_cast<std::uint32_t>(reinterpret_cast<std::uintptr_t>(s));
  if (key == h->home_run) [[likely]] {
    h->home_run_breaks = 0;
    return true;
  }
  h->home_run = key;
  if (h->home_run_breaks == 2) return false;
  ++h->home_run_breaks;
  return true;
}
// Opens h's closed bin of the class of slab `s` (its limit back) and pushes block `p` of `s`,
// tagged, onto it: a free past the bin that ends its run of frees (pool_continues_run).
void pool_reopen_bin(Heap* h, Slab* s, void* p) noexcept;

// Small block `p` of this thread's own slab `s` of class `cls`, freed past its closed bin of its
// class (limit 0: a run of frees, which the bin would only pass on in its walks, each block's line
// read a second time): straight onto its slab's list, returning true; or false, changing nothing,
// for a block of a tagged class that carries its freed tag already (freed twice), for the caller's
// checks to report: every block home in a small slab carries its tag, so the test covers the
// list's head too. The untagged 8-byte class checks the head alone. (That read costs little in a
// run, whose blocks come in address order: without it sh6bench ran 1.01x the time, as the link's
// store brings the line in anyway.)
inline bool pool_send_home(Slab* s, unsigned cls, void* p) noexcept {
  if (class_has_tag(cls)) {
    if (pool_carries_tag(p)) return false;
    pool_tag_freed(p);
  } else if (s->free == p) {
    return false;
  }
  auto* b = static_cast<PoolBlock*>(p);
  set_link(b, s->free);
  s->free = b;
  if (--s->used == s->settle_at && !s->current) [[unlikely]]
    pool_after_sent_home(s);
  return true;
}

// Tags block `p` of slab `s` as freed, as the fast frees do: in the word Slab::tag_word names,
// with no branch on the class; an 8-byte block's tag lands in its link's word, which the push
// then overwrites.
inline void pool_tag_freed_in(const Slab* s, void* p) noexcept {
  static_cast<std::uintptr_t*>(p)[s->tag_word] = pool_free_tag(p);
}

// liballockit's free: pushes block `p` of small slab `s` (pool_may_fast_free passed) onto `bin`,
// this thread's bin of its class, tagged, and returns true; returns false, changing nothing, for a
// full bin or a thread without a heap (as pool_free_in) and for `p` the bin's newest block, a block
// freed twice in a row. No load of the block: a double free further down the bin is found when the
// block leaves it (pool_free_tag). (Reading the tag here cost xmalloc 16%, larson 10%: the block's
// line is often cold or on another core, and a load, unlike a store, holds up everything after it.)
inline bool pool_try_free_to(Bin& bin, Slab* s, void* p) noexcept {
  if (bin.count >= bin.limit || bin.free == p) return false;
  pool_tag_freed_in(s, p);
  bin_push(bin, p);
  return true;
}

// Whether block `p` of slab `s` (a bin's class) is the newest free block of its class in this
// thread, freed just now: its bin's head, or, the bin closed (frees go straight home), the head of
// its slab's list when the slab is this thread's. The 8-byte class, with no tag, catches a
// repeated free by this alone.
inline bool pool_is_newest_free(const Slab* s, const void* p) noexcept {
  Heap* const h = tl_heap;
  const Bin& bin = h->bins[s->bin_class];
  return bin.limit != 0 ? bin.free == p : slab_owner(s) == h && s->free == p;
}

// Returns block `p` of slab `s` (small or medium), already tagged if 16 bytes or more, and, if its
// bin is closed (limit 0: a run of frees, in which the block goes straight home), checked for
// its tag before: pushed onto this thread's bin of its class, whichever heap's slab it is in. Fast
// path: the slab's bin class (a load from its read-mostly line), the bin's count against its limit,
// two stores and an increment. A full bin, a thread without a heap, the starter slab and checked
// slabs go out of line.
inline void pool_free_in(Slab* s, void* p) noexcept {
  const unsigned cls = s->bin_class;
  if (cls != kNoBin) [[likely]] {
    Bin& bin = tl_heap->bins[cls];
    if (bin.count < bin.limit) [[likely]]
      return bin_push(bin, p);
  }
  pool_free_other(s, p);
}

// As pool_free_in, for a block of a small (64 KiB) slab, tagged here (unchecked: a double free is
// found when the block leaves the bin), or, past the bin, by pool_free_untagged.
inline void pool_free(void* p) noexcept {
  if constexpr (kDebugBuild) pool_check_pointer(p);
  Slab* s = slab_of(p);
  if (const unsigned cls = s->bin_class; cls != kNoBin) [[likely]] {
    Bin& bin = tl_heap->bins[cls];
    if (bin.count < bin.limit) [[likely]] {
      pool_tag_freed_in(s, p);
      return bin_push(bin, p);
    }
  }
  pool_free_untagged(s, p);
}

// As pool_free, for callers that know the block's class at compile time (sized delete, node
// allocators): the bin is a constant offset from the heap, so the push does not wait for the slab
// header; the header's class is still compared (in parallel, predicted), so a wrong size, the
// starter slab or a checked slab takes pool_free_in's way and a block never joins a bin of
// another class. (With the bin found through the header, five create/destroy pairs took 26 ns
// instead of 16.)
inline void pool_free(void* p, unsigned cls) noexcept {
  if constexpr (kDebugBuild) return pool_free(p);  // checked slabs: every free goes slow
  Slab* s = slab_of(p);
  Bin& bin = tl_heap->bins[cls];
  if (s->bin_class == cls && bin.count < bin.limit) [[likely]] {
    if (class_has_tag(cls)) pool_tag_freed(p);
    return bin_push(bin, p);
  }
  pool_free(p);
}

}  // namespace ak::detail
