// The large-block page heap (large_cache.hpp). At most kMaxSlots ranges: up to kInlineSlots scanned
// linearly (a large allocation already costs microseconds), past them found through an index
// (range_index.hpp) for best fit and merges; the rarer walks (the oldest range, the largest, the
// purge) stay linear.
#include "malloc/large_cache.hpp"

#include <algorithm>
#include <cstring>

#include "os/os.hpp"

namespace ak::detail {

void unmap_range(char* base, std::size_t bytes, bool empty) noexcept {
  if (!empty) os::decommit(base, bytes);
  os::release(base, bytes);
}

void LargeCache::append(const Range& r) noexcept {
  if (index_ != nullptr) index_->add(std::uint32_t(len_), r.base, r.bytes, r.zero);
  ranges()[len_++] = r;
  count_of(r) += r.bytes;
}

// The last range takes slot i.
void LargeCache::remove(std::size_t i) noexcept {
  Range* const rs = ranges();
  count_of(rs[i]) -= rs[i].bytes;
  const std::size_t last = --len_;
  if (index_ != nullptr) {
    index_->remove(std::uint32_t(i), rs[i].base, rs[i].bytes, rs[i].zero);
    if (i != last) {
      index_->remove(std::uint32_t(last), rs[last].base, rs[last].bytes, rs[last].zero);
      index_->add(std::uint32_t(i), rs[last].base, rs[last].bytes, rs[last].zero);
    }
  }
  rs[i] = rs[last];
}

void LargeCache::reshape(std::size_t i, char* base, std::size_t bytes) noexcept {
  Range& r = ranges()[i];
  if (index_ != nullptr) index_->remove(std::uint32_t(i), r.base, r.bytes, r.zero);
  count_of(r) -= r.bytes;
  r.base = base;
  r.bytes = bytes;
  count_of(r) += bytes;
  if (index_ != nullptr) index_->add(std::uint32_t(i), r.base, r.bytes, r.zero);
}

std::size_t LargeCache::ending_at(const char* p) const noexcept {
  if (index_ != nullptr) {
    const std::uint32_t i = index_->ending_at(p);
    return i == RangeIndex::kNone ? len_ : i;
  }
  for (std::size_t i = 0; i < len_; ++i)
    if (ranges()[i].base + ranges()[i].bytes == p) return i;
  return len_;
}

std::size_t LargeCache::starting_at(const char* p) const noexcept {
  if (index_ != nullptr) {
    const std::uint32_t i = index_->starting_at(p);
    return i == RangeIndex::kNone ? len_ : i;
  }
  for (std::size_t i = 0; i < len_; ++i)
    if (ranges()[i].base == p) return i;
  return len_;
}

std::size_t LargeCache::release(std::size_t i) noexcept {
  const std::size_t bytes = ranges()[i].bytes;
  unmap_range(ranges()[i].base, bytes, ranges()[i].zero);
  remove(i);
  return bytes;
}

bool LargeCache::grow_slots() noexcept {
  const std::size_t old_cap = cap(), new_cap = old_cap * 4;
  if (new_cap > kMaxSlots) return false;
  auto* grown = static_cast<Range*>(os::map(grown_bytes(new_cap), os::page_size()));
  if (grown == nullptr) return false;
  std::memcpy(static_cast<void*>(grown), ranges(), len_ * sizeof(Range));
  if (grown_ != nullptr) os::release(grown_, grown_bytes(old_cap));
  grown_ = grown;
  grown_cap_ = new_cap;
  index_ = RangeIndex::create(grown + new_cap, new_cap);
  for (std::size_t i = 0; i < len_; ++i)
    index_->add(std::uint32_t(i), grown[i].base, grown[i].bytes, grown[i].zero);
  return true;
}

void LargeCache::make_room() noexcept {
  if (len_ == cap() && !grow_slots()) release_oldest(Kind::kAny);
}

void LargeCache::release_oldest(Kind kind) noexcept {
  std::size_t oldest = len_;
  for (std::size_t i = 0; i < len_; ++i) {
    // A draining range counts against no budget, but a slot may be needed.
    const Range& r = ranges()[i];
    if (kind != Kind::kAny && (r.draining || r.zero != (kind == Kind::kZero))) continue;
    if (oldest == len_ || ranges()[i].since < ranges()[oldest].since) oldest = i;
  }
  if (oldest < len_) release(oldest);
}

// Hands out the first `need` bytes of range i (the last ones when kCarveFromEnd); a rest of
// kMinSplit or more stays cached.
LargeCache::Taken LargeCache::carve(std::size_t i, std::size_t need) noexcept {
  Range& r = ranges()[i];
  Taken t{r.base, r.bytes, r.zero, r.sealed, r.layout()};
  if (r.bytes - need >= kMinSplit) {
    t.bytes = need;
    if (kCarveFromEnd) {
      // The block keeps the range's end; the rest ends where the block began, open as far as
      // the range's open bytes reach past the block.
      t.base = r.base + r.bytes - need;
      const std::size_t guard = t.layout.guard_end ? os::page_size() : 0;
      const std::size_t open_from_end = t.layout.open_tail + guard;
      t.layout.open_tail = std::min(t.layout.open_tail, need - guard);
      r.set_layout(Layout{false, open_from_end > need ? open_from_end - need : 0});
      reshape(i, r.base, r.bytes - need);
    } else {
      t.layout = Layout{};
      reshape(i, r.base + need, r.bytes - need);
    }
  } else {
    remove(i);
  }
  return t;
}

// No resident range holds `need`: the largest one grows to it with mremap, so its pages move
// (no copy, no fault) and only the rest is new, for which as many draining bytes are released
// first (release_draining). A range of several kernel mappings (merged neighbours, pages moved
// before) moves a mapping at a time (os::remap). When even that fails, the range stays cached.
LargeCache::Taken LargeCache::grow(std::size_t need) noexcept {
  std::size_t best = len_;
  for (std::size_t i = 0; i < len_; ++i)
    if (!ranges()[i].zero && ranges()[i].base != last_sealed_ &&
        (best == len_ || ranges()[i].bytes > ranges()[best].bytes))
      best = i;
  if (best == len_) return {};
  const Range r = ranges()[best];
  remove(best);
  release_draining(need - r.bytes);  // the pages past r's end are new
  auto* moved = static_cast<char*>(os::remap(r.base, r.bytes, need));
  if (moved == nullptr) {
    append(r);  // a slot is free: r's own, and releasing only empties more
    return {};
  }
  return Taken{moved, need, false, r.sealed, {}};
}

// Best fit, the preferred kind first: resident, but known zero for calloc where the kernel
// cannot say which pages hold data (clear_resident_range); then the smallest. Past the inline
// slots, from the size bins: of the preferred kind, the smallest range of the first bin from
// need's that holds one; then of the other kind. (The first such range instead, a fit within a
// quarter: 2,000 live blocks of 1-3 MiB 0.9x the time, 3,000 of 300 KiB-1 MiB 1.2x the time and
// peak RSS, their blocks less tightly packed.)
template <class Fits>
std::size_t LargeCache::best_fit_where(std::size_t need, bool want_zero, Fits fits) const noexcept {
  const bool resident = !want_zero || os::page_scan_may_work();
  const Range* const rs = ranges();
  // A draining range holds the pages its last block wrote: calloc would clear and keep them
  // (large_calloc: peak RSS 32 -> 44 MiB), where the purger is about to give them back.
  auto serves = [&](const Range& r) {
    return r.bytes >= need && may_serve(r, want_zero) && fits(r);
  };
  if (index_ == nullptr) {
    std::size_t best = len_;
    for (std::size_t i = 0; i < len_; ++i)
      if (serves(rs[i]) && (best == len_ || better(rs[i], rs[best], resident))) best = i;
    return best;
  }
  for (const bool zero : {!resident, resident}) {
    for (unsigned b = index_->next_bin(zero, RangeIndex::bin_of(need)); b < RangeIndex::kBins;
         b = index_->next_bin(zero, b + 1)) {
      std::size_t best = len_;
      for (std::uint32_t i = index_->first(zero, b); i != RangeIndex::kNone; i = index_->next(i))
        if (serves(rs[i]) && (best == len_ || rs[i].bytes < rs[best].bytes)) best = i;
      if (best != len_) return best;
    }
  }
  return len_;
}

std::size_t LargeCache::best_fit(std::size_t need, bool want_zero) const noexcept {
  return best_fit_where(need, want_zero, [](const Range&) { return true; });
}

LargeCache::Taken LargeCache::take_aligned(std::size_t need, std::size_t align, std::size_t lead,
                                           bool want_zero) noexcept {
  if constexpr (kCarveFromEnd) return {};
  // Where range r's block would start: the first address whose sum with `lead` is aligned.
  auto start_in = [&](const Range& r) {
    return reinterpret_cast<char*>(
        ((reinterpret_cast<std::uintptr_t>(r.base) + lead + align - 1) & ~(align - 1)) - lead);
  };
  // Called for ranges of `need` bytes or more only (best_fit_where), so the subtraction holds.
  const std::size_t best = best_fit_where(need, want_zero, [&](const Range& r) {
    return std::size_t(start_in(r) - r.base) <= r.bytes - need;
  });
  last_sealed_ = nullptr;  // passed over once, as take() does
  if (best == len_) return {};
  Range& r = ranges()[best];
  char* const start = start_in(r);
  if (start != r.base) {  // the head stays cached as it was, a range of its own
    Range head = r;
    head.bytes = std::size_t(start - r.base);
    reshape(best, start, r.bytes - head.bytes);
    if (len_ < cap() || grow_slots())
      append(head);
    else
      unmap_range(head.base, head.bytes, head.zero);
  }
  return carve(best, need);
}

LargeCache::Taken LargeCache::take(std::size_t need, bool want_zero) noexcept {
  std::size_t best = best_fit(need, want_zero);
  // No resident range holds it: the largest resident one grows to it, its pages moved, rather
  // than a known-zero one faulting every page in. py-euler's replay: two 76 MiB lists were carved
  // from known-zero ranges while 44 MiB of its freed 1-20 MiB lists stayed resident beside them,
  // peak RSS 373-376 MiB; grown from those, 325 MiB (jemalloc's 335), and malloc_large 550 ->
  // 510 MiB. calloc: fresh pages beat a memset of grown ones.
  Taken t;
  if (!want_zero && (best == len_ || ranges()[best].zero)) {
    t = grow(need);
    if (t.base == nullptr) best = best_fit(need, want_zero);  // grow may release ranges
  }
  if (t.base == nullptr && best < len_) t = carve(best, need);
  last_sealed_ = nullptr;  // passed over once: the range may serve any later request
  return t;
}

LargeCache::Taken LargeCache::take_at(const char* at, std::size_t need) noexcept {
  if constexpr (kSecureBuild) return {};
  const std::size_t i = starting_at(at);
  if (i == len_) return {};
  const Range& r = ranges()[i];
  if (r.sealed || r.draining || r.bytes < need) return {};
  return carve(i, need);
}

void LargeCache::put(char* base, std::size_t bytes, bool zero, bool sealed,
                     Layout layout) noexcept {
  const std::uint64_t now = os::coarse_now_ns();
  // Merge with a neighbour of the same kind: the range before it and the one after it. A merged
  // range ends as its last part does.
  auto same_kind = [&](std::size_t i) {
    if (i == len_) return false;
    const Range& r = ranges()[i];
    return r.zero == zero && r.sealed == sealed && !r.draining;
  };
  if (const std::size_t i = ending_at(base); same_kind(i)) {
    base = ranges()[i].base;
    bytes += ranges()[i].bytes;
    remove(i);
  }
  if (const std::size_t i = starting_at(base + bytes); same_kind(i)) {
    bytes += ranges()[i].bytes;
    layout = ranges()[i].layout();
    remove(i);
  }
  // The next request passes over the range holding the block sealed now, wherever a merge with
  // the range before it put its start.
  if (sealed) last_sealed_ = base;
  make_room();
  Range r{base, bytes, now, 0, zero, sealed, false, false};
  r.set_layout(layout);
  append(r);
  while (resident_ > budget()) release_oldest(Kind::kResident);
  while (zero_ > kZeroMax) release_oldest(Kind::kZero);
}

void LargeCache::put_draining(char* base, std::size_t bytes) noexcept {
  make_room();
  append(Range{base, bytes, os::coarse_now_ns(), 0, false, false, false, true});
}

LargeCache::Span LargeCache::pop_draining(std::size_t most) noexcept {
  for (std::size_t i = 0; i < len_; ++i) {
    Range& r = ranges()[i];
    if (!r.draining) continue;
    if (r.bytes <= most) {
      const Span s{r.base, r.bytes};
      remove(i);
      return s;
    }
    reshape(i, r.base, r.bytes - most);
    return Span{r.base + r.bytes, most};
  }
  return {};
}

std::size_t LargeCache::release_draining(std::size_t need) noexcept {
  std::size_t released = 0;
  for (Span s; released < need && (s = pop_draining(need - released)).base;) {
    unmap_range(s.base, s.bytes, false);
    released += s.bytes;
  }
  return released;
}

ClearWay clear_resident_range(char* p, std::size_t bytes, bool scan) noexcept {
  if (bytes == 0) return ClearWay::kScan;
  if (scan && os::zero_backed_pages(p, bytes)) return ClearWay::kScan;
  if ((bytes >= kDecommitForZero || 2 * os::resident_bytes(p, bytes) < bytes) &&
      os::decommit(p, bytes))
    return ClearWay::kEmpty;
  std::memset(p, 0, bytes);
  return ClearWay::kByHand;
}

std::size_t LargeCache::purge_older_than(std::uint64_t age_ns, std::size_t live) noexcept {
  const std::uint64_t now = os::coarse_now_ns();
  std::size_t purged = 0;
  for (std::size_t i = 0; i < len_;)
    if (ranges()[i].draining || now - ranges()[i].since >= age_ns)
      purged += release(i);
    else
      ++i;
  peak_live_ = live;  // the budget follows use since this purge
  return purged;
}

}  // namespace ak::detail
