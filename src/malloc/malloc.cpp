// The C allocation API with glibc semantics (errno, overflow, alignment, realloc edge cases) over
// the shared pools (small classes up to 16 KiB with alignment up to 2 KiB; medium classes up to
// 256 KiB with alignment up to 256 KiB) and large blocks (large.hpp). Exported with
// the ak_ prefix only; src/override maps the libc names onto these. Thread-safe; never allocates
// through anything but itself.
#include <algorithm>
#include <cerrno>
#include <cstring>

#include "allockit/allockit.h"
#include "core/core.hpp"
#include "malloc/freed_guard.hpp"
#include "malloc/large.hpp"
#include "malloc/new_block.hpp"
#include "malloc/options.hpp"
#include "malloc/secure.hpp"
#include "os/os.hpp"
#include "pool/pool.hpp"

namespace ak::detail {
namespace {

// malloc guarantees 16-byte alignment from 16 bytes up (like glibc), 8 below: what malloc and
// calloc ask alloc_any for is kMallocRequest, which only they may pass.
constexpr std::size_t kMallocAlign = 16;
constexpr std::size_t kMallocRequest = 8;

// malloc's class of each size up to kMaxPooledSize, indexed in 8-byte steps so sizes up to 8
// (class 0, 8-aligned) need no branch of their own: 2 KiB, three instructions less per malloc.
struct MallocClasses {
  unsigned char of[kMaxPooledSize / 8 + 1];  // index: (size + 7) / 8
  constexpr MallocClasses() : of{} {
    for (std::size_t i = 2; i <= kMaxPooledSize / 8; ++i)
      of[i] = (unsigned char)class_for((i * 8 + 15) / 16 * 16, 16);
  }
};
AK_FORK_KEPT_CONST constexpr MallocClasses kClasses;

inline unsigned malloc_class(std::size_t size) {
  return kClasses.of[(size + 7) >> 3];
}

// A free block of 16 bytes or more carries the pools' freed-block tag (pool_free_tag) in its
// second word; malloc checks it when it pops the block and clears it.

// A pooled block being handed out loses its freed-block tag.
inline void* clear_tag(void* p, unsigned cls) {
  if (class_has_tag(cls)) static_cast<std::uintptr_t*>(p)[1] = 0;
  return p;
}

// Block `p` of small class `cls`, just popped from a bin, untagged after checking its tag: a
// block handed out already (freed twice, so in the bin twice) or written after free has none.
inline void* take_popped(void* p, unsigned cls) {
  if (class_has_tag(cls) && !pool_popped_carries_tag(p)) [[unlikely]]
    pool_lost_tag("malloc()", p);
  return clear_tag(p, cls);
}

// A pointer into a pool region that is a block its slab ever handed out: at a block boundary,
// before the carve point (pool_is_carved_block). Anything else there is a bad pointer.
inline bool carved_pooled(const void* p) {
  return pool_is_carved_block(slab_of(p), p);
}

// Tags well-formed pooled block `p` of slab `s` as freed. Returns false, changing nothing, when it
// already carries the tag: a double free. Slow paths only: the fast free reads nothing of the
// block (pool_try_free_to).
inline bool tag_freed(const Slab* s, void* p) {
  if (s->block_size < 16) return true;  // no room for a tag
  if (pool_carries_tag(p)) return false;
  pool_tag_freed(p);
  return true;
}

// A block of small class `cls`, untagged; `*zeroed` is set when it is a never-written one
// (pool_alloc_slow's `untouched`): zero, and left unwritten so no page faults in here.
inline void* alloc_small(unsigned cls, bool* zeroed) {
  if (void* p = pool_pop(cls)) return take_popped(p, cls);
  void* p = pool_alloc_slow(cls, zeroed);  // checks the tag of a block it pops
  return p && !*zeroed ? clear_tag(p, cls) : p;
}

// A medium block freed sealed (freed_guard.hpp) carries this tag instead of pool_free_tag.
inline std::uintptr_t sealed_tag(const void* p) {
  return pool_free_tag(p) ^ kSealedTagBit;
}

// Whether block `p` (16 bytes or more) carries a freed-block tag, sealed or not, whatever walk
// marked it. True of a live block only with odds of 2^-48 (pool_free_tag).
inline bool carries_freed_tag(const void* p) {
  return tag_bits(static_cast<const PoolBlock*>(p)) == 0;
}

// Whether free block `p`, which carries a freed-block tag, was sealed (any walk's epoch).
inline bool is_sealed(const void* p) {
  return (std::uint32_t(static_cast<const std::uintptr_t*>(p)[1] ^ pool_free_tag(p)) &
          kSealedTagBit) != 0;
}

// Medium blocks serve alignments up to their largest class's (medium_class_align): a request
// aligned past a page takes the smallest class at or above its size whose blocks are aligned to
// it, never a mapping of its own (posix_memalign of 8-192 KiB at 8-64 KiB alignments among 2,000
// slots: 15-17 us a call, each a large block; mimalloc 0.15-0.4).
constexpr std::size_t kMaxMediumAlign = medium_class_align(kHeapClasses - 1);
static_assert(kSecureBuild || kMaxMediumAlign == kMaxMediumSize);

// of[k][c - kClassCount]: the smallest medium class at or above medium class `c` whose blocks are
// aligned to 2^(k+12) (a page .. kMaxMediumAlign); the largest class always is.
struct AlignedMediumClasses {
  static constexpr unsigned kAligns = std::countr_zero(kMaxMediumAlign) - 11;
  std::uint8_t of[kAligns][kHeapClasses - kClassCount];
};
constexpr AlignedMediumClasses make_aligned_medium_classes() {
  AlignedMediumClasses t{};
  for (unsigned k = 0; k < AlignedMediumClasses::kAligns; ++k)
    for (unsigned c = kClassCount; c < kHeapClasses; ++c) {
      unsigned d = c;
      while (d < kHeapClasses && medium_class_align(d) < (std::size_t(4096) << k)) ++d;
      t.of[k][c - kClassCount] = std::uint8_t(d);
    }
  return t;
}
constexpr AlignedMediumClasses kAlignedMediumClasses = make_aligned_medium_classes();

// The medium class serving `size` bytes (at most kMaxMediumSize) at alignment `align` (at most
// kMaxMediumAlign): there always is one, the largest class aligned to kMaxMediumAlign.
constexpr unsigned medium_class_for(std::size_t size, std::size_t align) {
  const unsigned c = class_of(std::max(size, kMaxPooledSize + 1));
  return align <= kMediumDataOffset
             ? c
             : kAlignedMediumClasses.of[std::countr_zero(align) - 12][c - kClassCount];
}
static_assert(kSecureBuild || (class_size(medium_class_for(1, 8192)) == 24 << 10 &&
                               class_size(medium_class_for(40 << 10, 16 << 10)) == 48 << 10 &&
                               class_size(medium_class_for(100 << 10, 64 << 10)) == 128 << 10 &&
                               medium_class_for((192 << 10) + 1, 128 << 10) == kHeapClasses - 1 &&
                               class_size(medium_class_for(1, kMaxMediumAlign)) == kMaxMediumSize));
static_assert(medium_class_for(kMaxMediumSize, 4096) == kHeapClasses - 1);
// realloc growing a block by steps past this moves it to a mapping of its own (ak_realloc). On
// realloc_growth (200 buffers grown by 10% steps to 560 KiB): 1.00 s and 189 MiB peak RSS
// with growth copied within the medium classes; 0.55 s, 97 MiB from 64 KiB; 0.52 s, 57 MiB
// from 16 KiB, where every buffer a program grows past its small classes would take the large
// blocks' lock and registry, as a server's medium blocks did before the medium classes.
constexpr std::size_t kReallocLargeMin = std::size_t(64) << 10;
// Growth of a block this big or bigger gets headroom (realloc_target); below it a copy costs
// about what a call does.
constexpr std::size_t kReallocHeadroomMin = 1024;

// The size to give a pooled block of `usable` bytes (kReallocHeadroomMin or more) that must now
// hold `size`: a growth step (to less than twice the size) within the small classes gets twice
// the old size, so the block is copied once per doubling; past them the large blocks' headroom
// (grown_size: 1.5x). Python's lists grow by 1/8 per step and the classes by 1/4 to 1/7: from
// 4 KiB, 7 of every 10 steps of py-euler's 1.6M reallocs copied the block (100-205 ns each,
// glibc growing in place at 55 ns); with 1.5x headroom 3 in 10, with 2x 2 in 10 (its p99 call
// 160-180 -> 90 ns, glibc's), and realloc_growth (10% steps) ran 0.79x at 85 MiB, not 98.
// Shrinking or keeping the size: `size`.
inline std::size_t realloc_target(std::size_t usable, std::size_t size) {
  if (usable < kMaxPooledSize && size > usable && size < 2 * usable) return 2 * usable;
  return grown_size(usable, size);
}

// The medium slab holding block `p`, or null when `p` is not the start of one of its blocks that
// was ever handed out.
inline Slab* medium_block(const void* p) {
  Slab* s = medium_slab_of(p);
  return pool_is_carved_block(s, p) ? s : nullptr;
}

inline bool is_large(const void* p) {
  return !in_pool_region(p) && !in_medium_region(p);
}

// Reports `p`, which `call` took for a large block and is not a live one: a block freed already
// while its memory waits in the large cache, or else no block of allockit's.
[[noreturn]] void bad_large_pointer(const char* call, const void* p, const char* if_freed) {
  bad_pointer(call, large_was_freed(p) ? if_freed : "invalid pointer (not allocated by allockit)",
              p);
}

// The block this thread sealed last: its next request of the class gets another one.
thread_local const void* tl_last_sealed [[gnu::tls_model("initial-exec")]] = nullptr;

// A medium block of a class that may be sealed: unsealed if it was, and never the one this thread
// sealed last while another can be had.
// `p`: a block of the class taken from the pools (null when none), `*zeroed` set when it is a
// never-used one.
[[gnu::noinline]] void* ready_sealable(void* p, unsigned cls, bool* zeroed) {
  if (p != nullptr && p == tl_last_sealed) {  // popped, so not untouched
    if (void* q = pool_alloc<true>(cls, zeroed)) {
      pool_free_in(medium_slab_of(p), p);  // still tagged: the next request unseals it
      p = q;
    }
  }
  tl_last_sealed = nullptr;
  if (p == nullptr || *zeroed) return p;
  if (!carries_freed_tag(p)) pool_lost_tag("malloc()", p);
  auto* w = static_cast<std::uintptr_t*>(p);
  if (is_sealed(p) && !os::set_accessible(static_cast<char*>(p) + kMediumDataOffset,
                                          class_size(cls) - kMediumDataOffset, true)) {
    pool_free_in(medium_slab_of(p), p);  // stays sealed; no mapping left to split (ENOMEM)
    return nullptr;
  }
  w[1] = 0;
  return p;
}
// A block of sealable class `cls` from the pools, made ready by ready_sealable.
void* alloc_sealable(unsigned cls, bool* zeroed) {
  return ready_sealable(pool_alloc<true>(cls, zeroed), cls, zeroed);
}

// Block `p` of sealable class `cls`, just popped from this thread's bin: the common case (tagged
// as freed, not sealed, not the block this thread sealed last) made ready here, the rest by
// ready_sealable. Where 128-256 KiB blocks churn among 64 slots, a malloc ran 99 instructions on
// average, 142 when every one took alloc_any.
inline void* take_popped_sealable(void* p, unsigned cls) {
  const void* const last = tl_last_sealed;
  if (p != last && pool_popped_carries_tag(p)) [[likely]] {  // a sealed tag fails the compare
    if (last != nullptr) tl_last_sealed = nullptr;
    static_cast<std::uintptr_t*>(p)[1] = 0;
    return p;
  }
  bool zeroed = false;
  return ready_sealable(p, cls, &zeroed);
}

// Tags medium block `p` of slab `s` as freed, sealing it past its first page when the guard says
// so; the seal comes first, so no other thread can take the block before it is sealed. A block
// sealed is emptied first (its first page, with the link and the tag, stays), as glibc unmaps
// the chunks its rising mmap threshold passes: the next request passes over it, the adaptive
// guard seals only a new largest size, so it is mostly a buffer the program grew past, and an
// mprotect of an empty range touches no page-table entry (figures: docs/architecture.md, sealed
// freed blocks). A block of a class never sealed is checked as a small one is (pool_try_free_to),
// without a load of the block, whose line is seldom in cache by its free (alloc_test, 1 call in
// 100 a medium free: 0.887 -> 0.843 s): a repeat of the last free is caught here, another double
// free where the block leaves its bin (the pop that would hand it out twice, a walk of the bin).
// A checked slab's block (AK_DEBUG builds, no bin) still has its tag read here. free_medium
// takes the common case before this.
[[gnu::noinline]] void free_medium_slow(const char* call, Slab* s, void* p) {
  const bool sealable = s->block_size >= kSealableMediumBytes;
  // A closed bin (a run of frees) sends the block straight home, past the checks a bin makes.
  if (sealable || s->bin_class == kNoBin || tl_heap->bins[s->bin_class].limit == 0
          ? carries_freed_tag(p)
          : pool_is_newest_free(s, p))
    bad_pointer(call, "double free detected", p);
  auto* w = static_cast<std::uintptr_t*>(p);
  bool seal = sealable && should_seal(s->block_size);
  if (seal) {
    char* const rest = static_cast<char*>(p) + kMediumDataOffset;
    const std::size_t rest_bytes = s->block_size - kMediumDataOffset;
    os::decommit(rest, rest_bytes);
    seal = os::set_accessible(rest, rest_bytes, false);
    if (seal) s->sealed_any.store(true, std::memory_order_relaxed);
  }
  w[1] = seal ? sealed_tag(p) : pool_free_tag(p);
  if (seal) tl_last_sealed = p;
  pool_free_in(s, p);
}

// Frees medium block `p` of slab `s`: most frees push a block of a class never sealed onto its
// open bin with room, as a small block is (pool_try_free_to); the rest take free_medium_slow, out
// of line, so the common case saves no register (with the test inside it, after its prologue, 83
// instructions a free against 67 where 16-64 KiB blocks churn among 256 slots).
// A block of a sealable class that no seal awaits (may_seal) has its tag read for a double free,
// which its free must catch before it rewrites the tag, and is pushed as well.
inline void free_medium(const char* call, Slab* s, void* p) {
  const bool sealable = s->block_size >= kSealableMediumBytes;
  if (s->bin_class != kNoBin &&
      (!sealable || (!may_seal(s->block_size) && !carries_freed_tag(p))) &&
      pool_try_free_to(tl_heap->bins[s->bin_class], s, p))
    return;
  free_medium_slow(call, s, p);
}

// The pooled class (small or medium) serving `size` bytes at alignment `align`, or kHeapClasses
// when a large block must.
inline unsigned pooled_class(std::size_t size, std::size_t align) {
  if (size <= kMaxPooledSize && align <= kMaxPooledAlign) {
    // malloc's table serves malloc's own guarantee only: an explicit 16-byte alignment of a
    // request of 8 bytes or less must not get the 8-byte class.
    const unsigned cls = align <= kMallocRequest ? malloc_class(size) : class_for(size, align);
    if (cls < kClassCount) return cls;
  }
  // A small request aligned past the small classes' alignment takes a medium block: up to a page,
  // any class's (a larger class's free block, pool_medium_class); past it, one of a class
  // aligned to it.
  if (size <= kMaxMediumSize && align <= kMaxMediumAlign) {
    const unsigned cls = medium_class_for(size, align);
    return align <= kMediumDataOffset ? pool_medium_class(cls) : cls;
  }
  return kHeapClasses;
}

// The first class whose blocks may be sealed (kSealableMediumBytes and more): classes grow with
// their index, so the test is a compare with a constant, no load of the class's size.
constexpr unsigned kFirstSealableClass = class_of(kSealableMediumBytes);
static_assert(class_size(kFirstSealableClass) >= kSealableMediumBytes &&
              class_size(kFirstSealableClass - 1) < kSealableMediumBytes);
constexpr bool may_be_sealed(unsigned cls) {
  return cls >= kFirstSealableClass;
}

// A block of pooled class `cls`; classes that may be sealed go through alloc_sealable. `*zeroed`
// (false on entry) is set when the block is known zero.
inline void* alloc_pooled(unsigned cls, bool* zeroed) {
  return may_be_sealed(cls) ? alloc_sealable(cls, zeroed) : alloc_small(cls, zeroed);
}

inline void* secure_alloc(std::size_t size, std::size_t align, bool* zeroed, bool want_zero);

// Any size and any power-of-two alignment >= 8. `*zeroed` says whether the memory is known zero;
// `want_zero` (calloc) asks the large blocks for memory that is.
void* alloc_any(std::size_t size, std::size_t align, bool* zeroed, bool want_zero = false) {
  if (background_purge_wanted()) [[unlikely]]
    start_wanted_background_purge();  // deferred by a free (start_background_purge_now)
  *zeroed = false;
  if constexpr (kSecureBuild) return secure_alloc(size, align, zeroed, want_zero);
  const unsigned cls = pooled_class(size, align);
  void* p = cls < kHeapClasses
                ? alloc_pooled(cls, zeroed)
                : large_alloc(size, std::max(align, kMallocAlign), zeroed, want_zero);
  if (p == nullptr) errno = ENOMEM;
  if (!background_purge_settled()) [[unlikely]]
    anticipate_background_purge(slab_source_carved_bytes() + large_mapped_bytes());
  return p;
}

// ---- the secure build (kSecureBuild; secure.hpp) -------------------------------------------
// Every pooled block ends in a trailer and its slack is filled; freed blocks are checked, filled
// and quarantined; malloc(0) gets an inaccessible address; sized frees are checked. Inline, so
// the default build, which names them only in discarded `if constexpr` branches, never emits them
// (secure.cpp is not part of it).

// A pooled block of class `cls` for a request of `size` bytes, armed (secure.hpp).
inline void* secure_pooled(unsigned cls, std::size_t size) {
  bool zeroed = false;  // never: the secure build carves no untouched blocks
  void* p = alloc_pooled(cls, &zeroed);
  if (p == nullptr) return nullptr;
  (void)os::process_secret();  // drawn before the first block is armed (trailer_check)
  arm_new(p, class_size(cls), size);
  return p;
}

inline void* secure_alloc(std::size_t size, std::size_t align, bool* zeroed, bool want_zero) {
  if (size == 0 && align <= kMallocAlign)
    if (void* p = zero_alloc()) return p;
  // Room for the trailer, and never the 8-byte class (no room for the freed-block tag).
  const unsigned cls = size > kMaxMediumSize
                           ? kHeapClasses
                           : pooled_class(std::max(size + kTrailerBytes, std::size_t(16)), align);
  void* p = nullptr;
  if (cls < kHeapClasses) {
    p = secure_pooled(cls, size);
    // Out of memory: what waits in this thread's quarantine is still memory.
    if (p == nullptr && quarantine_drain()) p = secure_pooled(cls, size);
  } else {
    p = large_alloc(size, std::max(align, kMallocAlign), zeroed, want_zero);
  }
  if (p == nullptr) errno = ENOMEM;
  return p;
}

// The slab of pooled block `p` and its size, after the checks every call makes (a block its slab
// handed out, not freed); null slab when `p` is not pooled.
struct Pooled {
  Slab* slab;
  std::size_t bytes;
};
[[gnu::always_inline]] inline Pooled secure_pooled_block(
    const char* call, const void* p, const char* if_freed = "invalid pointer (a freed block)") {
  Slab* s = nullptr;
  if (in_pool_region(p))
    s = carved_pooled(p) ? slab_of(p) : nullptr;
  else if (in_medium_region(p))
    s = medium_block(p);
  else
    return Pooled{nullptr, 0};
  const std::size_t bytes = s ? pool_block_size(s, p) : 0;
  if (bytes == 0) bad_pointer(call, "invalid pointer (not the start of a block)", p);
  if (carries_freed_tag(p)) bad_pointer(call, if_freed, p);
  return Pooled{s, bytes};
}

// The size asked for of the block at `p` (pooled: `b`, from secure_pooled_block), its canaries
// checked.
inline std::size_t secure_request(const char* call, const void* p, Pooled b) {
  if (b.slab != nullptr) return checked_request(call, p, b.bytes);
  if (in_zero_region(p)) {
    zero_check_live(call, p);
    return 0;
  }
  const std::size_t n = large_checked_request(call, p);
  if (n == kAnySize) bad_large_pointer(call, p, "invalid pointer (a freed block)");
  return n;
}

// secure_free of a pointer that is not a pooled block: a zero-size block, a large one, or a bad
// pointer. Out of line, so the pooled path calls nothing but the quarantine, as a tail call;
// inline, so the default build, which never calls it, never emits it.
[[gnu::noinline]] inline void secure_free_unpooled(const char* call, void* p, std::size_t size) {
  if (in_zero_region(p)) {
    if (size != kAnySize && size != 0) bad_pointer(call, "sized free with the wrong size", p);
    return zero_free(call, p);
  }
  if (!large_free(p, call, size)) bad_large_pointer(call, p, "double free detected");
}

// Whether `p` lacks the alignment a sized free states: a power of two (every alignment
// aligned_alloc and aligned new take) needs no division; 0 and 1 state none.
inline bool misaligned_for(const void* p, std::size_t align) {
  return is_pow2(align) ? (addr(p) & (align - 1)) != 0 : align > 1 && addr(p) % align != 0;
}

// Frees `p` after checking it, and, unless kAnySize / 0, the size and alignment the call states.
inline void secure_free(const char* call, void* p, std::size_t size = kAnySize,
                        std::size_t align = 0) {
  if (misaligned_for(p, align))
    bad_pointer(call, "invalid pointer (misaligned for the alignment given)", p);
  const Pooled b = secure_pooled_block(call, p, "double free detected");
  if (b.slab == nullptr) return secure_free_unpooled(call, p, size);
  const std::size_t request = checked_request(call, p, b.bytes);
  if (size != kAnySize && size != request) bad_pointer(call, "sized free with the wrong size", p);
  if (b.bytes >= kSealableMediumBytes) return free_medium(call, b.slab, p);
  fill_freed(p, b.bytes, pool_free_tag(p));
  quarantine_put(p, b.bytes);
}

// realloc of a live block (p and size not 0): in place while the new size fits the block without
// wasting half of it, else a new block, the old one freed with every check.
inline void* secure_realloc(void* p, std::size_t size) {
  const Pooled b = secure_pooled_block("realloc()", p);
  const std::size_t request = secure_request("realloc()", p, b);
  if (b.slab != nullptr) {
    const std::size_t room = b.bytes - kTrailerBytes;
    if (size <= room && (size > room / 2 || room <= 24)) {
      arm_block(p, b.bytes, size);
      return p;
    }
  } else if (size > kMaxMediumSize && !in_zero_region(p)) {
    if (void* q = large_realloc(p, size)) return q;  // in place only
  }
  std::size_t want = size;
  if (size > kMaxPooledSize) {
    want = grown_size(request, size);
    if (size <= kMaxMediumSize) want = std::min(want, kMaxMediumSize);
  }
  bool zeroed;
  void* q = secure_alloc(want, kMallocRequest, &zeroed, false);
  if (q == nullptr) return nullptr;  // p stays valid, errno is ENOMEM
  // The headroom stays slack: the block's request (and so its sized free) is `size`.
  if (const Pooled b = secure_pooled_block("realloc()", q); b.slab != nullptr)
    arm_block(q, b.bytes, size);
  else if (want != size)
    large_realloc(q, size);  // in place: `size` is more than half of `want`
  std::memcpy(q, p, request < size ? request : size);
  secure_free("realloc()", p);
  return q;
}

// The usable size of a block, aborting on a pointer allockit did not hand out.
std::size_t usable_or_die(const char* call, const void* p) {
  if (in_pool_region(p)) {
    if (!carved_pooled(p)) bad_pointer(call, "invalid pointer (not the start of a block)", p);
    const std::size_t n = pool_block_size(slab_of(p), p);
    if (n == 0) bad_pointer(call, "invalid pointer (not the start of a block)", p);
    if (n >= 16 && carries_freed_tag(p)) bad_pointer(call, "invalid pointer (a freed block)", p);
    return n;
  }
  if (in_medium_region(p)) {
    const Slab* s = medium_block(p);
    if (s == nullptr) bad_pointer(call, "invalid pointer (not the start of a block)", p);
    if (carries_freed_tag(p)) bad_pointer(call, "invalid pointer (a freed block)", p);
    return s->block_size;
  }
  const std::size_t n = large_usable_size(p);
  if (n == 0) bad_large_pointer(call, p, "invalid pointer (a freed block)");
  return n;
}

// A pointer into a medium region: its block freed, or `p` reported when it is not the start of a
// block ever handed out, or when a sized free states more than the live block holds (`most`;
// 0 for free, and the test folds away).
inline void free_in_medium_region(const char* call, void* p, std::size_t most = 0) {
  Slab* s = medium_block(p);
  if (s == nullptr) bad_pointer(call, "invalid pointer (not the start of a block)", p);
  if (most > s->block_size && !carries_freed_tag(p))
    bad_pointer(call, "sized free with the wrong size", p);
  free_medium(call, s, p);
}

// Any free the fast path left, checked whole. `most`: a sized free's size (0 for free), which a
// live block must hold: a larger one is reported (the type deleted is not the type allocated).
void free_any(const char* call, void* p, std::size_t most = 0) {
  if (p == nullptr) return;
  if (in_pool_region(p)) [[likely]] {
    // What the fast free skipped (block boundaries), then the freed-block tag (double free).
    if (!carved_pooled(p)) bad_pointer(call, "invalid pointer (not the start of a block)", p);
    Slab* s = slab_of(p);
    if (!tag_freed(s, p) || (s->bin_class != kNoBin && pool_is_newest_free(s, p)))
      bad_pointer(call, "double free detected", p);
    if (most > pool_block_size(s, p)) bad_pointer(call, "sized free with the wrong size", p);
    return pool_free_in(s, p);
  }
  if (in_medium_region(p)) return free_in_medium_region(call, p, most);
  if (!large_free(p, call, most != 0 ? most : kAnySize))
    bad_large_pointer(call, p, "double free detected");
}

// free() of a pointer the small blocks' fast path did not take: a medium block straight to
// free_medium, anything else through free_any. Out of line, with no stack frame: where 16-64 KiB
// blocks churn among 256 slots, 66 instructions a free (the slow ones counted), against 99
// through free_any's frame and its second look at the region map.
[[gnu::noinline]] void free_past_small(void* p) {
  if (in_medium_region(p)) return free_in_medium_region("free()", p);
  free_any("free()", p);
}

// A free the fast path did not take, of a block that passed pool_may_fast_free: straight home
// when its bin is closed (a run of frees: bins.cpp close_bin), else as any free. One jump
// from free: with the send home inlined there, the larger free ran rptest 1.10x the time with
// the same instructions. It takes the heap and bin free found, in the argument registers after
// the slab and block: sh6bench, whose long runs of frees mostly end here, ran 2.5% fewer
// instructions and 0.988x the time (paired, 7 rounds) than when this read them again.
[[gnu::noinline]] void free_past_bin(Slab* s, void* p, Heap* h, const Bin* bin) {
  if (bin->limit == 0 && slab_owner(s) == h) {
    if (!pool_continues_run(h, s)) return pool_reopen_bin(h, s, p);
    if (pool_send_home(s, s->bin_class, p)) return;
  }
  free_any("free()", p);
}

// A sized free (C++ sized delete, free_sized) the fast path did not take: free_any with the size.
// Only a size past the block is caught there: a block may hold more than its request (a size
// class, realloc's headroom, an alignment). Its arguments come in the order of the sized free's
// own, so the fast path keeps them in place.
[[gnu::noinline]] void free_sized_slow(void* p, std::size_t size, const char* call) {
  free_any(call, p, size);
}

// free's fast path: a well-formed pointer into a pool slab, not freed twice, pushed onto this
// thread's bin (free_past_bin when the bin is full); else `past()`, out of line. A sized free
// passes its size as `most`, which must not exceed the block's: the header line holding the
// block size is the one the range test reads, so the check costs a compare (larson_sized, whose
// every free is sized: see docs/security.md). Plain free passes 0, and the test folds away.
template <class Past>
[[gnu::always_inline]] inline void free_fast(void* p, std::size_t most, Past past) {
  if (in_pool_region(p) && pool_may_fast_free(slab_of(p), p) && most <= slab_of(p)->block_size)
      [[likely]] {
    Slab* const s = slab_of(p);
    Heap* const h = tl_heap;
    Bin& bin = h->bins[s->bin_class];  // not kNoBin: pool_may_fast_free passed
    if (pool_try_free_to(bin, s, p)) [[likely]]
      return;
    return free_past_bin(s, p, h, &bin);
  }
  past();
}

// A block of medium class `cls` popped from this thread's bin and made ready, or null when the
// bin is empty: what alloc_pooled would return first.
inline void* pop_medium(unsigned cls) {
  void* p = pool_pop(cls);
  if (p == nullptr) return nullptr;
  return may_be_sealed(cls) ? take_popped_sealable(p, cls) : take_popped(p, cls);
}

// malloc's slow path for every size: a medium block from its bin, else alloc_any.
[[gnu::noinline]] void* malloc_slow(std::size_t size) {
  if constexpr (!kSecureBuild) {
    if (size > kMaxPooledSize && size <= kMaxMediumSize)
      if (void* p = pop_medium(class_of(size))) return p;
  }
  bool zeroed;
  return alloc_any(size, kMallocRequest, &zeroed);
}

// operator new's slow path: malloc's, then, if that fails too, the new-handler loop.
[[gnu::noinline]] void* new_slow(std::size_t size) {
  if (void* p = malloc_slow(size)) return p;
  return new_failed(size);
}

// The slow path of a pooled size whose bin (class `cls`, in this thread's heap `h`) is empty: a
// never-used block of the current slab (zero: no freed-block tag to clear), as a growing program
// takes every fresh block, else `Slow`. It takes the class and heap the fast path found, in the
// argument registers after the size, and needs no stack frame (18 instructions to a fresh block,
// was 27): sh6bench, whose mallocs take fresh blocks six times in ten, ran 2.6% fewer
// instructions (callgrind, a twentieth of its sweeps); its time moved within noise (1.006x
// paired, 7 rounds), as did glibc_simple's and xmalloc's (1.005x, 0.994x).
template <void* (*Slow)(std::size_t)>
[[gnu::noinline]] void* take_fresh_or(std::size_t size, unsigned cls, Heap* h) {
  if (void* p = pool_take_fresh(h, cls)) return p;
  return Slow(size);
}

// ak_malloc's body, for malloc and operator new: a pooled block popped from this thread's bin,
// else take_fresh_or, else `Slow` (both out of line, so the fast path needs no stack frame). `call`
// names the caller in a report of the secure build.
template <void* (*Slow)(std::size_t)>
[[gnu::always_inline]] inline void* malloc_with(std::size_t size, const char* call) {
  if constexpr (kSecureBuild) {
    const PoolCall name(call);
    // A pooled block with room for the trailer (so never the 8-byte class), popped and armed.
    if (size - 1 < kMaxPooledSize - kTrailerBytes) [[likely]] {
      const unsigned cls = malloc_class(size + kTrailerBytes);
      PoolBlock* head;
      if (void* p = pool_pop_unchecked(cls, &head)) [[likely]] {
        p = take_popped(p, cls);
        arm_new(p, kSecureClassBytes.of[cls], size);
        return pool_checked_head(p, head);
      }
    }
    return Slow(size);
  }
  if (size <= kMaxPooledSize) [[likely]] {
    const unsigned cls = malloc_class(size);
    Heap* const h = tl_heap;
    if (void* p = pool_pop(h, cls)) [[likely]]
      return take_popped(p, cls);
    return take_fresh_or<Slow>(size, cls, h);
  }
  return Slow(size);  // out of line, so the fast path above needs no stack frame
}

// An aligned request's block (`align` a power of two >= 8): a small one popped from this
// thread's bin of the smallest class whose blocks all have that alignment (class_for), as
// malloc's fast path pops, else alloc_any. (Through alloc_any every time, 64-byte-aligned blocks
// of 16-256 bytes churning among 64 slots cost 14.2 ns a pair, tcmalloc 7.1; with class_for's
// walk up the classes here, 12.5.)
void* aligned_any(std::size_t align, std::size_t size) {
  if constexpr (!kSecureBuild) {
    if (size <= kMaxPooledSize && align <= kMaxPooledAlign) [[likely]] {
      // class_for(size, align) from malloc's table: the smallest class of a multiple of 16
      // holding the size rounded up to `align`, then the smallest at or above it of a multiple
      // of `align` (size_classes.hpp).
      const std::size_t rounded = (size + align - 1) & ~(align - 1);
      const unsigned cls =
          align <= 8 ? malloc_class(size)
                     : kAlignedClasses.of[std::countr_zero(align) - 4][malloc_class(rounded)];
      if (void* p = pool_pop(tl_heap, cls)) [[likely]]
        return take_popped(p, cls);
    } else if (size <= kMaxMediumSize && align <= kMaxMediumAlign) {
      // The class of the size (of a medium one at least), as malloc_slow pops, or of a larger
      // size aligned further. Page-aligned blocks of 4-64 KiB churning among 256 slots: 171 ->
      // 125 instructions a pair (tcmalloc 113; the time within noise: the rest is memory).
      if (void* p = pop_medium(medium_class_for(size, align))) return p;
    }
  }
  bool zeroed;
  return alloc_any(size, align, &zeroed);
}

// Alignments past this are never served: a valid one (a power of two) fails as out of memory,
// as glibc's does, having no address space that aligned to spare; past half the address space,
// where no power of two rounds up to, it is invalid (EINVAL), as glibc has it.
constexpr std::size_t kMaxAlign = std::size_t(1) << 40;

void* memalign_impl(std::size_t align, std::size_t size) {
  if (align > kMaxAlign) {
    errno = align > SIZE_MAX / 2 + 1 ? EINVAL : ENOMEM;
    return nullptr;
  }
  if (align < 8) align = 8;
  if (!is_pow2(align)) align = std::size_t(1) << std::bit_width(align);  // glibc rounds up
  return aligned_any(align, size);
}

// At load: options, fork handlers and the purge delay. Nothing a short process would pay for: no
// thread (purger.cpp says when it starts), no mapping, no file read.
__attribute__((constructor)) void init_at_load() {
  load_options();
  note_load_time();
  install_fork_handlers();
  slab_source_on_cache(start_background_purge);
  pool_on_abandon(start_background_purge_at_exit);
  const Options& o = options();
  slab_source_set_purge_delay(o.purge_delay_ms * 1'000'000);
  if (o.verbose)
    Message()
        .str("allockit: options: purge delay ")
        .num(o.purge_delay_ms)
        .str(" ms, background purge ")
        .str(o.background_purge ? "on" : "off")
        .str(", stats at exit ")
        .str(o.stats_at_exit ? "on" : "off")
        .print();
}

// At exit: the blocks still in this thread's bins have their tags checked (a double free whose
// block was never handed out again is reported here at the latest).
__attribute__((destructor)) void report_at_exit() {
  if constexpr (kSecureBuild) quarantine_check();
  pool_audit_bins();
  if (options().stats_at_exit) ak_stats_print();
}

}  // namespace
}  // namespace ak::detail

namespace ak::detail {

AK_HOT_ENTRY void* new_block(std::size_t size) {
  return malloc_with<new_slow>(size, "operator new");
}

[[gnu::weak]] void* new_failed(std::size_t) {
  return nullptr;
}

}  // namespace ak::detail

using namespace ak::detail;
using ak::kSecureBuild;

extern "C" {

AK_HOT_ENTRY void* ak_malloc(size_t size) noexcept {
  return malloc_with<malloc_slow>(size, "malloc()");
}

// free: free_fast. Everything else (null, large blocks, bad pointers, which free_any reports)
// goes out of line, so this path needs no stack frame. Null's region lookup reads a page of the
// region map no other pointer uses: one page fault (a read: the zero page) in a process that
// frees null, for two instructions less in every free.
AK_HOT_ENTRY void ak_free(void* p) noexcept {
  if constexpr (kSecureBuild) {
    if (p == nullptr) return;
    const PoolCall name("free()");
    return secure_free("free()", p);
  }
  free_fast(p, 0, [p] { free_past_small(p); });
}

// calloc's fast path is malloc's: a small block popped from this thread's bin, then cleared (a
// popped block was written before). An empty bin takes alloc_any, which hands out never-used
// blocks unwritten and known zero.
void* ak_calloc(size_t n, size_t size) noexcept {
  std::size_t total;
  if (!mul_fits(n, size, &total)) {
    errno = ENOMEM;
    return nullptr;
  }
  if constexpr (!kSecureBuild) {
    if (total <= kMaxPooledSize) [[likely]] {
      const unsigned cls = malloc_class(total);
      if (void* p = pool_pop(tl_heap, cls)) [[likely]]
        return std::memset(take_popped(p, cls), 0, total);
    }
  }
  const PoolCall name("calloc()");
  bool zeroed;
  void* p = alloc_any(total, kMallocRequest, &zeroed, true);
  if (p != nullptr && !zeroed) std::memset(p, 0, total);  // fresh OS pages are never touched
  return p;
}

void* ak_realloc(void* p, size_t size) noexcept {
  const PoolCall name("realloc()");
  if (p == nullptr) return ak_malloc(size);
  if (size == 0) {  // glibc: frees and returns NULL
    if constexpr (kSecureBuild)
      secure_free("realloc()", p);
    else
      free_any("realloc()", p);
    return nullptr;
  }
  if constexpr (kSecureBuild) return secure_realloc(p, size);
  const std::size_t usable = usable_or_die("realloc()", p);
  if (size <= usable && (size > usable / 2 || usable <= 16)) return p;  // fits, wasting < half
  // A large block resized to kReallocLargeMin or less moves into the pools: left in its own
  // mapping, every later shrink or growth past half would be an mremap (Python's buffers did
  // this 1.2M times in the py-euler trace).
  if (size > kReallocLargeMin && is_large(p))
    if (void* q = large_realloc(p, size)) return q;

  // Growth of a block of kReallocHeadroomMin or more gets headroom (realloc_target), so a run of
  // small growths copies once per doubling rather than at every class boundary. A growing buffer
  // (a step of at most 2x) past kReallocLargeMin moves to a mapping of its own, where later
  // growth moves pages (mremap) instead of copying and faulting in a new block. A jump in size is
  // no sign of more growth to come: it takes the block malloc would give (syn-mix-realloc's jumps
  // to 70-250 KiB, as mappings of their own: mean call 279 -> 463 ns, from the system calls).
  std::size_t want = size;
  void* q = nullptr;
  if (size > kReallocLargeMin && size > usable && size <= 2 * usable) {
    bool zeroed;
    q = large_alloc(grown_size(usable, size), kMallocAlign, &zeroed, false);
  } else if (usable >= kReallocHeadroomMin) {
    want = realloc_target(usable, size);
    if (size <= kMaxMediumSize) want = std::min(want, kMaxMediumSize);
  }
  if (q == nullptr) q = ak_malloc(want);
  if (q == nullptr) return nullptr;  // p stays valid, errno is ENOMEM
  std::memcpy(q, p, usable < size ? usable : size);
  ak_free(p);  // `p` passed usable_or_die: a small block takes free's fast path, reading none of it
  return q;
}

void* ak_reallocarray(void* p, size_t n, size_t size) noexcept {
  std::size_t total;
  if (!mul_fits(n, size, &total)) {
    errno = ENOMEM;
    return nullptr;
  }
  return ak_realloc(p, total);
}

int ak_posix_memalign(void** out, size_t align, size_t size) noexcept {
  const PoolCall name("posix_memalign()");
  if (!is_pow2(align) || align % sizeof(void*) != 0) return EINVAL;
  if (align > kMaxAlign) return ENOMEM;  // valid, but never served (memalign_impl)
  const int saved = errno;
  void* p = aligned_any(align, size);
  errno = saved;  // posix_memalign reports through its result, not errno
  if (p == nullptr) return ENOMEM;
  *out = p;
  return 0;
}

void* ak_aligned_alloc(size_t align, size_t size) noexcept {
  const PoolCall name("aligned_alloc()");
  if (!is_pow2(align)) {
    errno = EINVAL;
    return nullptr;
  }
  return memalign_impl(align, size);
}

void* ak_memalign(size_t align, size_t size) noexcept {
  const PoolCall name("memalign()");
  return memalign_impl(align, size);
}

void* ak_valloc(size_t size) noexcept {
  const PoolCall name("valloc()");
  return memalign_impl(ak::os::page_size(), size);
}

void* ak_pvalloc(size_t size) noexcept {
  const PoolCall name("pvalloc()");
  const std::size_t page = ak::os::page_size();
  const std::size_t rounded = align_up(size ? size : 1, page);
  if (rounded < size) {
    errno = ENOMEM;
    return nullptr;
  }
  return memalign_impl(page, rounded);
}

size_t ak_malloc_usable_size(void* p) noexcept {
  const PoolCall name("malloc_usable_size()");
  if (p == nullptr) return 0;
  if constexpr (kSecureBuild)
    return secure_request("malloc_usable_size()", p,
                          secure_pooled_block("malloc_usable_size()", p));
  return usable_or_die("malloc_usable_size()", p);
}

AK_HOT_ENTRY void ak_free_sized(void* p, size_t size) noexcept {
  if constexpr (kSecureBuild) {
    const PoolCall name("free_sized()");
    if (p != nullptr) secure_free("free_sized()", p, size);
    return;
  }
  free_fast(p, size, [p, size] { free_sized_slow(p, size, "free_sized()"); });
}

void ak_free_aligned_sized(void* p, size_t align, size_t size) noexcept {
  if constexpr (kSecureBuild) {
    const PoolCall name("free_aligned_sized()");
    if (p != nullptr) secure_free("free_aligned_sized()", p, size, align);
    return;
  }
  if (misaligned_for(p, align)) [[unlikely]]
    bad_pointer("free_aligned_sized()", "invalid pointer (misaligned for the alignment given)", p);
  free_fast(p, size, [p, size] { free_sized_slow(p, size, "free_aligned_sized()"); });
}

int ak_malloc_trim(size_t) noexcept {
  return ak_collect(1) > 0 ? 1 : 0;
}

}  // extern "C"
