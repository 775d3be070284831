// The large-block cache's index (src/malloc/range_index.hpp) against a plain model: random adds
// and removes of disjoint ranges at slots, checked after every step for the boundary map
// (starting_at, ending_at) and the size bins (each range in the bin of its size and kind, bins
// ordered by size, the bitmap naming exactly the bins in use).
#include <sys/mman.h>

#include <map>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "malloc/range_index.hpp"

namespace {

using ak::detail::RangeIndex;

struct Entry {
  char* base;
  std::size_t bytes;
  bool zero;
};

// Every range of the model is found where it starts and ends, in its bin, and nothing else is.
void expect_matches(const RangeIndex& x, const std::map<std::uint32_t, Entry>& model) {
  std::size_t listed = 0;
  for (const bool zero : {false, true}) {
    unsigned prev_bin = 0;
    std::size_t prev_max = 0;
    for (unsigned b = x.next_bin(zero, 0); b < RangeIndex::kBins; b = x.next_bin(zero, b + 1)) {
      ASSERT_NE(x.first(zero, b), RangeIndex::kNone) << "bit set for an empty bin " << b;
      std::size_t lo = ~std::size_t(0), hi = 0;
      for (std::uint32_t i = x.first(zero, b); i != RangeIndex::kNone; i = x.next(i)) {
        const auto it = model.find(i);
        ASSERT_NE(it, model.end()) << "slot " << i << " listed but not added";
        ASSERT_EQ(it->second.zero, zero);
        ASSERT_EQ(RangeIndex::bin_of(it->second.bytes), b);
        lo = std::min(lo, it->second.bytes);
        hi = std::max(hi, it->second.bytes);
        ++listed;
      }
      ASSERT_TRUE(b > prev_bin || prev_max == 0);
      ASSERT_GT(lo, prev_max) << "bin " << b << " holds a range no bigger than a lower bin's";
      prev_bin = b;
      prev_max = hi;
    }
  }
  ASSERT_EQ(listed, model.size());
  for (const auto& [slot, e] : model) {
    ASSERT_EQ(x.starting_at(e.base), slot);
    ASSERT_EQ(x.ending_at(e.base + e.bytes), slot);
    ASSERT_EQ(x.starting_at(e.base + e.bytes), RangeIndex::kNone) << "adjacent ranges are not made";
  }
}

TEST(RangeIndex, FollowsRandomAddsAndRemoves) {
  constexpr std::size_t kCap = 256, kPage = 4096;
  std::vector<std::uint64_t> memory(RangeIndex::bytes_for(kCap) / 8 + 1, 0);
  RangeIndex* x = RangeIndex::create(memory.data(), kCap);
  // Ranges are never touched: addresses in a made-up space, page multiples, a gap after each.
  char* const space = reinterpret_cast<char*>(std::uintptr_t(1) << 40);
  std::map<std::uint32_t, Entry> model;
  std::vector<std::uint32_t> free_slots;
  for (std::uint32_t i = 0; i < kCap; ++i) free_slots.push_back(i);
  std::mt19937_64 rng(7);
  for (int step = 0; step < 20000; ++step) {
    if (!free_slots.empty() && (model.empty() || rng() % 2)) {
      const std::uint32_t slot = free_slots.back();
      free_slots.pop_back();
      // Each slot owns its own stretch of the space, so ranges never overlap or touch.
      const std::size_t pages = 1 + rng() % (rng() % 4 == 0 ? 100000 : 64);
      Entry e{space + std::size_t(slot) * (std::size_t(1) << 30) + (rng() % 8) * kPage,
              pages * kPage, rng() % 3 == 0};
      x->add(slot, e.base, e.bytes, e.zero);
      model[slot] = e;
    } else {
      auto it = model.begin();
      std::advance(it, rng() % model.size());
      x->remove(it->first, it->second.base, it->second.bytes, it->second.zero);
      free_slots.push_back(it->first);
      model.erase(it);
    }
    if (step % 97 == 0 || model.size() > kCap - 4) {
      expect_matches(*x, model);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
  expect_matches(*x, model);
}

TEST(RangeIndex, BinsGrowWithSize) {
  for (std::size_t pages = 1; pages < (std::size_t(1) << 36); pages += pages / 3 + 1) {
    EXPECT_LE(RangeIndex::bin_of(pages * 4096), RangeIndex::bin_of((pages + 1) * 4096));
    EXPECT_LT(RangeIndex::bin_of(pages * 4096), RangeIndex::kBins);
  }
}

}  // namespace
