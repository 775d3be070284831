// Freed large-block mappings kept for reuse: a small page heap over address ranges. A request
// takes the smallest cached range that holds it and leaves the rest cached (split); a freed
// range merges with a cached neighbour; when no resident range holds it, the largest resident
// range is grown with mremap (rather than a known-zero range carved), so its pages move instead
// of faulting in again. Ranges stay resident (as the program left them) up to a budget tied to
// recent use: the larger of kMinBudget and the peak of live large bytes since the last purge, so
// a program that frees and reallocates its large blocks never faults them back, and one that
// shrinks returns the memory within two purge delays (the purger releases ranges idle longer than
// the delay). Ranges emptied at free are kept as known-zero address space. Ranges freed sealed
// (freed_guard.hpp) stay sealed until handed out and merge only with sealed neighbours; the range
// sealed last is not handed to the next request when another will do. The secure build's blocks end
// in a guard page: a range remembers whether its last page is one and whether all before it is
// accessible, and requests are carved from a range's end, so a block freed and handed out again
// keeps its guard with no system call. A block that would be emptied at free may instead have its
// pages moved out to a range of their own (os::move_pages_out), kept as a draining range until the
// background purger releases it (pop_draining): the free then costs microseconds instead of
// milliseconds, and a request meanwhile may take the range with its pages. Not thread-safe: the
// caller (large.cpp) holds its lock.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "allockit/config.hpp"
#include "malloc/range_index.hpp"

namespace ak::detail {

// How a cached range's pages are protected, as far as the cache knows (the secure build's
// guards): `guard_end`, its last page is inaccessible; `open_tail`, the bytes before that page
// (before the range's end without one) known accessible. A freed block's range is open up to its
// guard, a sealed one is a guard with nothing open; unknown is {false, 0}.
struct RangeLayout {
  bool guard_end = false;
  std::size_t open_tail = 0;
};

// How clear_resident_range cleared a range.
enum class ClearWay {
  kScan,    // only the pages holding data were cleared; none faults in again
  kEmpty,   // emptied (MADV_DONTNEED): its pages fault back in one by one, as zero
  kByHand,  // all of it written with zeros
};
// Without the kernel's page scan, a range this big, or one less than half resident, is emptied
// rather than cleared by hand (which would fault every missing page in).
inline constexpr std::size_t kDecommitForZero = std::size_t(16) << 20;

// Makes accessible range [p, p+bytes) (page-aligned; a resident cached range handed to calloc)
// read zero at the least cost. With the kernel's page scan (os::zero_backed_pages; `scan` false
// skips it), only its pages resident or swapped out are cleared: the pages the program wrote
// before stay resident and never fault again, those it never wrote stay unresident. On
// large_calloc (8-128 MiB tables, an eighth of their pages written), emptying a 128 MiB table
// and faulting its pages back cost 8-10 ms, the scan and clear 1.5 ms; a 128 MiB memset, as
// tcmalloc's calloc does, 10 ms. Without the scan: emptied or cleared by hand as
// kDecommitForZero says.
ClearWay clear_resident_range(char* p, std::size_t bytes, bool scan = true) noexcept;

// Unmaps range [base, base+bytes) (page-aligned), emptied first unless `empty` (known to hold no
// page): munmap frees a range's pages with the process's mmap lock held for writing and may yield
// the CPU meanwhile, so every other thread's page fault or mapping call waits (a thread moving
// 4 MiB blocks beside a 256 MiB release waited 7.8 ms at worst, 0.3 ms with the range emptied
// first); MADV_DONTNEED frees them under the lock's read side.
void unmap_range(char* base, std::size_t bytes, bool empty) noexcept;

class LargeCache {
 public:
  LargeCache() = default;
  LargeCache(const LargeCache&) = delete;  // one cache per arena
  LargeCache& operator=(const LargeCache&) = delete;
  // Ranges kept: kInlineSlots in the cache itself, then in a mapped array grown fourfold up to
  // kMaxSlots, with an index (range_index.hpp); past that the oldest is released. With 64 slots
  // and no more, a program holding more live large blocks than that, freed and reallocated at
  // random, released the oldest range at nearly every free, as each free adds a range and a
  // carve leaves one (200 live blocks of 300 KiB-1 MiB: 5.3 us a pair, mimalloc 0.87; 1,000:
  // 11.7 us, mimalloc 1.6). With more slots scanned linearly, 0.82 and 1.75 us, and 3,000 live
  // blocks 3.3 us (mimalloc 2.4), 37% of it in the scans; with the index 2.3 (tcmalloc 2.2).
  static constexpr std::size_t kInlineSlots = 64;
  static constexpr std::size_t kMaxSlots = 4096;
  // Resident bytes kept, at least. A program with few large blocks live frees many sizes of them
  // as its buffers grow (Lua's tables and string buffers, 16-19 MiB live): at 64 MiB its cache
  // held 56-62 MiB resident beside 15 MiB live, peak RSS 162-165 MiB against mimalloc's 133; at
  // 16 MiB, 138-141 MiB at the same time. realloc_growth 70.4 -> 64.4 MiB; large_blocks,
  // malloc_large, large_calloc and the traces' replays within noise.
  static constexpr std::size_t kMinBudget = std::size_t(16) << 20;
  // Resident bytes kept, as a multiple of the recent peak of live large bytes. At 1x, a program
  // touching its blocks sparsely (large_blocks: 1..8 MiB blocks written at both ends) had ranges
  // released and remapped all along, a page fault per allocation: 0.64 s; at 2x, 0.15 s.
  static constexpr std::size_t kPeakFactor = 2;
  static constexpr std::size_t kZeroMax = std::size_t(4) << 30;  // known-zero address space
  // A freed block this big is emptied at free and cached as known-zero address space, as glibc
  // (whose mmap threshold stops rising here) unmaps it and jemalloc purges it: a program's
  // biggest buffers are rarely reused whole, and 1 in 8 pages written (large_calloc) left the
  // rest of a 128 MiB table resident for nothing. 1.19 s -> 1.08 s there, peak RSS unchanged.
  // (A block mostly unwritten, as those tables are, is kept resident instead: large.cpp,
  // mostly_unwritten.)
  static constexpr std::size_t kEmptyAtFree = std::size_t(32) << 20;
  // The same from this size for a block sealed at free (freed_guard.hpp: the first free of each
  // size past the adaptive bar, as glibc unmaps blocks past its rising mmap threshold): the next
  // request passes over it, so its pages would stay resident beside the new block's. A
  // program's growing buffers and tables (grep's 3-4 MiB buffers, a compiler's doubling table)
  // left the cache holding every old size: peak RSS on those replays 18-21 -> 7.3 MiB and
  // 31.5 -> 22.4 MiB. The zap lands in the free: mc_server_small's one-off 1-6 MiB blocks cost
  // its mean call 8%. Below 1 MiB, a server's medium blocks would pay it more often.
  static constexpr std::size_t kEmptySealedAtFree = std::size_t(1) << 20;
  // A block this big that free empties has its pages moved out instead (os::move_pages_out)
  // while the background purger runs, which releases them (see pop_draining): every block that
  // free empties. Emptying costs 65, 130, 270 us for 1, 2, 4 MiB in the free, moving 18, 28,
  // 44 us. Moved from 8 MiB only, grep's growing 1-4 MiB buffers and mc_server_small's one-off
  // 1-6 MiB blocks paid the emptying: moved from 1 MiB, the replays' mean call went 46-49 ->
  // 43-45 ns on grep, 67-72 -> 66-68 on mc_server_small and 69 -> 58 on haskell-web-server,
  // peak RSS within 3%. A thread that maps new pages first releases as many draining bytes
  // (release_draining), so the process never holds both.
  static constexpr std::size_t kMoveOutAtFree = kEmptySealedAtFree;
  static constexpr std::size_t kMinSplit = std::size_t(64) << 10;  // smaller rests stay attached
  // The secure build carves a request from a range's end, where a freed block's guard page is.
  static constexpr bool kCarveFromEnd = kSecureBuild;
  using Layout = RangeLayout;

  struct Taken {
    char* base = nullptr;
    std::size_t bytes = 0;
    bool zeroed = false;  // every byte reads zero
    bool sealed = false;  // inaccessible: the caller unseals it
    Layout layout;        // the secure build's guard page already in place, the rest open
  };

  // A range of at least `need` bytes (page multiple) from the cache, or {} when none fits and
  // none can be grown. `want_zero`: the caller needs zeroed memory (calloc) and clears a
  // resident range (clear_resident_range); resident ranges are still preferred, as their pages
  // written again do not fault, unless the kernel cannot scan pages: known-zero ones then.
  Taken take(std::size_t need, bool want_zero) noexcept;
  // As take(), for a block whose start plus `lead` must be aligned to `align`: `need` bytes from
  // that phase within a range, the bytes before them cached as a range of their own (released
  // when no slot is free), or {} when no range holds them (no range grows). Not in the secure
  // build, whose ranges carve from their end.
  Taken take_aligned(std::size_t need, std::size_t align, std::size_t lead,
                     bool want_zero) noexcept;
  // The first `need` bytes (page multiple) of the open (not sealed, not draining) range starting
  // at `at`, the whole range when the rest would be smaller than kMinSplit, or {} when no such
  // range holds them: a live block ending at `at` grows in place into it (large_realloc), its
  // pages mapped already. Not in the secure build, whose blocks end in a guard page.
  Taken take_at(const char* at, std::size_t need) noexcept;
  // Keeps a freed range (resident, or known zero; sealed or not), merging it with a cached
  // neighbour of the same kind; releases the oldest ranges beyond the budget or the slot count.
  void put(char* base, std::size_t bytes, bool zero, bool sealed = false,
           Layout layout = {}) noexcept;
  // Keeps resident range [base, base+bytes) (not sealed, no guard) to be released soon: the
  // purger takes it with pop_draining. Until then a request may take it; it never merges and
  // does not count against the budget.
  void put_draining(char* base, std::size_t bytes) noexcept;
  // Removes the last `most` bytes (a page multiple) of a draining range from the cache, or all
  // of it when smaller, and returns them for the caller to release; {} when none is left. The
  // rest stays cached meanwhile, for a request to take with its pages.
  struct Span {
    char* base = nullptr;
    std::size_t bytes = 0;
  };
  Span pop_draining(std::size_t most) noexcept;
  // Releases `need` bytes (a page multiple) of draining ranges, or all of them when they hold
  // less, before the caller maps or grows into that many new pages: the process never holds both.
  // Only as much as the new pages: releasing every draining range made a 50 KiB realloc growth on
  // py-euler's replay release 32-128 MiB (2.4-9.5 ms) that the purger was about to release
  // anyway. Returns bytes released; nothing to do when none is left, which the background purger
  // sees to within microseconds of a free.
  std::size_t release_draining(std::size_t need) noexcept;
  bool has_draining() const noexcept { return draining_ != 0; }
  // Releases draining ranges and those freed at least `age_ns` ago, and restarts the budget's peak
  // from `live` (the live large bytes now). Returns bytes released.
  std::size_t purge_older_than(std::uint64_t age_ns, std::size_t live) noexcept;
  // The live large bytes now: raises the budget's recent peak. Cost: one compare.
  void note_live(std::size_t live) noexcept {
    if (live > peak_live_) peak_live_ = live;
  }

  // Whether `p` lies in a cached range: memory of a large block freed and not reused since.
  // Cost: a scan of every cached range (error paths only).
  bool holds(const void* p) const noexcept {
    for (std::size_t i = 0; i < len_; ++i)
      if (p >= ranges()[i].base && p < ranges()[i].base + ranges()[i].bytes) return true;
    return false;
  }

  std::size_t resident_bytes() const noexcept { return resident_; }
  std::size_t bytes() const noexcept { return resident_ + zero_ + draining_; }

 private:
  struct Range {
    char* base;
    std::size_t bytes;
    std::uint64_t since;  // coarse time it was freed
    // layout.open_tail in 4 KiB units (exact for any page multiple; capped, so a lower bound),
    // so a Range stays 32 bytes and the cache within the library's one page of globals.
    std::uint32_t open_units;
    bool zero;
    bool sealed;
    bool guard_end;  // layout.guard_end
    bool draining;   // put_draining's: resident, released soon
    static constexpr unsigned kUnitShift = 12;
    Layout layout() const noexcept {
      return Layout{guard_end, std::size_t(open_units) << kUnitShift};
    }
    void set_layout(Layout l) noexcept {
      guard_end = l.guard_end;
      open_units = std::uint32_t(std::min<std::size_t>(l.open_tail >> kUnitShift, UINT32_MAX));
    }
  };
  static_assert(sizeof(Range) == 32);
  std::size_t budget() const noexcept {
    return kPeakFactor * peak_live_ > kMinBudget ? kPeakFactor * peak_live_ : kMinBudget;
  }
  // The count range `r`'s bytes belong to.
  std::size_t& count_of(const Range& r) noexcept {
    return r.draining ? draining_ : r.zero ? zero_ : resident_;
  }
  void remove(std::size_t i) noexcept;
  void append(const Range& r) noexcept;         // into a free slot, counted (remove's inverse)
  std::size_t release(std::size_t i) noexcept;  // unmaps range i, removes it; returns its bytes
  enum class Kind { kAny, kResident, kZero };
  void release_oldest(Kind kind) noexcept;
  // The index of the range take() carves `need` bytes from, or len_ when none holds them.
  std::size_t best_fit(std::size_t need, bool want_zero) const noexcept;
  // Whether range r is preferred to range b for a request (the kind `resident` names first, then
  // the smaller).
  static bool better(const Range& r, const Range& b, bool resident) noexcept {
    const bool pref_r = r.zero != resident, pref_b = b.zero != resident;
    return pref_r != pref_b ? pref_r : r.bytes < b.bytes;
  }
  // Whether range r may serve a request: not the range sealed last, not a draining one for calloc.
  bool may_serve(const Range& r, bool want_zero) const noexcept {
    return r.base != last_sealed_ && !(want_zero && r.draining);
  }
  Taken carve(std::size_t i, std::size_t need) noexcept;
  Taken grow(std::size_t need) noexcept;

  // A slot for one range more: the array grown (grow_slots), else the oldest range released.
  void make_room() noexcept;
  bool grow_slots() noexcept;
  // The grown array's mapping: `cap` ranges, then their index.
  static std::size_t grown_bytes(std::size_t cap) noexcept {
    return cap * sizeof(Range) + RangeIndex::bytes_for(cap);
  }
  // Range i's start and size become `base` and `bytes` (its kind's count and the index follow).
  void reshape(std::size_t i, char* base, std::size_t bytes) noexcept;
  // best_fit among the ranges for which `fits` holds too (take_aligned: an aligned start fits).
  template <class Fits>
  std::size_t best_fit_where(std::size_t need, bool want_zero, Fits fits) const noexcept;
  // The range ending at `p`, the range starting at `p`; len_ when none does (merges, take_at).
  std::size_t ending_at(const char* p) const noexcept;
  std::size_t starting_at(const char* p) const noexcept;

  // The slots in use: first_, or grown_ once grown (with index_ over them). These members read
  // zero at first, as the library's zero-filled data is laid out (large.cpp's arenas).
  Range* ranges() noexcept { return grown_ != nullptr ? grown_ : first_; }
  const Range* ranges() const noexcept { return grown_ != nullptr ? grown_ : first_; }
  std::size_t cap() const noexcept { return grown_ != nullptr ? grown_cap_ : kInlineSlots; }

  Range first_[kInlineSlots]{};
  Range* grown_ = nullptr;
  std::size_t grown_cap_ = 0;
  RangeIndex* index_ = nullptr;
  std::size_t len_ = 0;
  std::size_t resident_ = 0, zero_ = 0, draining_ = 0;
  std::size_t peak_live_ = 0;
  const char* last_sealed_ = nullptr;  // the next take() passes over a range starting here
};

}  // namespace ak::detail
