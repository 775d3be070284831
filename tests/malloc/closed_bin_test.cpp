// liballockit's bins in a run of frees: a bin that overflows on blocks freed in allocation order
// (runs of one slab) closes (thread_heap.cpp close_bin), on its first overflow when its newest
// blocks show the runs, else on its second when its walk home finds them. Its blocks and every
// block freed while it is closed go straight home; the next allocation opens it. The pools' own
// frees, which cannot check a block's tag, open it instead (pool_free_untagged).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "allockit/allockit.h"
#include "allockit/pool.hpp"
#include "pool/pool.hpp"

namespace {

using namespace ak::detail;

template <class F>
void in_new_thread(F f) {
  std::thread(f).join();
}

constexpr std::size_t kSize = 200;  // one class, 208-byte blocks

// `n` blocks of `size` bytes from ak_malloc.
std::vector<void*> malloc_many(int n, std::size_t size = kSize) {
  std::vector<void*> v;
  for (int i = 0; i < n; ++i) v.push_back(ak_malloc(size));
  return v;
}

// Frees v's blocks from the back until `stop` says so; returns how many are left.
template <class Stop>
std::size_t free_from_back_until(std::vector<void*>& v, Stop stop) {
  while (!v.empty() && !stop()) {
    ak_free(v.back());
    v.pop_back();
  }
  return v.size();
}

TEST(ClosedBin, ARunOfFreesClosesTheBinAndSendsBlocksStraightHome) {
  if (ak::kDebugBuild) GTEST_SKIP() << "checked slabs keep their blocks out of the bins";
  in_new_thread([] {
    const unsigned cls = class_for(kSize, 8);
    std::vector<void*> v = malloc_many(40000);
    const Bin& bin = tl_heap->bins[cls];
    std::uint32_t open_limit = bin.limit, last_count = bin.count;
    bool trimmed = false;
    const std::size_t left = free_from_back_until(v, [&] {
      if (bin.limit == 0) return true;
      trimmed = trimmed || bin.count < last_count;
      open_limit = bin.limit;
      last_count = bin.count;
      return false;
    });
    ASSERT_GT(left, 2u) << "a run of 40,000 frees left the bin open";
    EXPECT_FALSE(trimmed) << "the bin overflowed before it closed";
    EXPECT_EQ(bin.count, 0u);  // its blocks went home as it closed
    // Kept for when it opens: raised, as a first overflow raises it, and a power of two times
    // its start limit.
    const std::uint32_t reopen = pool_bin_limit(cls);
    EXPECT_GE(reopen, open_limit);
    EXPECT_EQ(reopen % pool_start_limit(cls), 0u);
    EXPECT_TRUE(std::has_single_bit(reopen / pool_start_limit(cls)));
    for (int i = 0; i < 2; ++i) {
      void* const p = v.back();
      ak_free(p);
      v.pop_back();
      EXPECT_EQ(slab_of(p)->free, p);  // past the bin, onto its slab's list
      EXPECT_EQ(bin.count, 0u);
    }
    void* const p = ak_malloc(kSize);  // finds it empty: opens it
    EXPECT_GE(bin.limit, open_limit);
    ak_free(p);
    for (void* q : v) ak_free(q);
  });
}

// A closed bin's run of frees may move on from slab to slab, as blocks freed in the order they
// were handed out do; frees that change slabs three times in a row are scattered (blocks freed in
// random order, each read cold for its tag on the way home): the third opens the bin and joins it.
TEST(ClosedBin, ARunMovesAcrossSlabsButThreeScatteredFreesOpenTheBin) {
  if (ak::kDebugBuild) GTEST_SKIP() << "checked slabs keep their blocks out of the bins";
  in_new_thread([] {
    const unsigned cls = class_for(kSize, 8);
    std::vector<void*> v = malloc_many(40000);
    const Bin& bin = tl_heap->bins[cls];
    ASSERT_GT(free_from_back_until(v, [&] { return bin.limit == 0; }), 3000u);
    const std::size_t per_slab = kSlabSize / class_size(cls);
    for (std::size_t i = 0; i < 4 * per_slab; ++i) {  // the run goes on through four slabs
      void* const p = v.back();
      ak_free(p);
      v.pop_back();
      ASSERT_EQ(bin.limit, 0u) << "the run reopened the bin after " << i << " frees";
      ASSERT_EQ(slab_of(p)->free, p);
    }
    void* scattered[3];
    for (int i = 0; i < 3; ++i) {  // from the front (past the starter slab's), one slab each
      scattered[i] = std::exchange(v[100 + std::size_t(i) * 400], nullptr);
      ASSERT_NE(slab_of(scattered[i]), slab_of(v.back()));
    }
    for (int i = 0; i < 2; ++i) {
      ak_free(scattered[i]);
      EXPECT_EQ(bin.limit, 0u);
      EXPECT_EQ(slab_of(scattered[i])->free, scattered[i]);  // home, its tag checked
    }
    ak_free(scattered[2]);
    EXPECT_NE(bin.limit, 0u);  // open again
    EXPECT_EQ(bin.free, scattered[2]);
    EXPECT_EQ(bin.count, 1u);
    for (void* q : v) ak_free(q);
  });
}

// When the bin's newest blocks, at its first overflow, come from scattered slabs, it stays open;
// a later overflow closes it when its walk home finds runs.
TEST(ClosedBin, ScatteredNewestBlocksLeaveTheClosingToTheWalk) {
  if (ak::kDebugBuild) GTEST_SKIP() << "checked slabs keep their blocks out of the bins";
  in_new_thread([] {
    const unsigned cls = class_for(kSize, 8);
    std::vector<void*> v = malloc_many(60000);
    const Bin& bin = tl_heap->bins[cls];
    const std::uint32_t limit = bin.limit;
    ASSERT_GT(limit, 16u + bin.count);
    free_from_back_until(v, [&] { return bin.count == limit - 16; });
    for (int i = 0; i < 16; ++i) {  // from the front, 400 blocks apart: one slab each
      ak_free(std::exchange(v[std::size_t(i) * 400], nullptr));
    }
    ASSERT_EQ(bin.count, limit);
    ak_free(v.back());  // the first overflow: the newest 16 are one slab each
    v.pop_back();
    ASSERT_NE(bin.limit, 0u);  // raised, or its newest half sent home
    const std::size_t left = free_from_back_until(v, [&] { return bin.limit == 0; });
    EXPECT_GT(left, 2u) << "the walk of the second overflow left the bin open";
    for (void* q : v) ak_free(q);
  });
}

// The 8-byte class carries no freed tag: its blocks go straight home unchecked, as its bin's walk
// sends them, and its bin closes as the others do.
TEST(ClosedBin, TheBinOfTheUntaggedClassClosesToo) {
  if (ak::kDebugBuild) GTEST_SKIP() << "checked slabs keep their blocks out of the bins";
  in_new_thread([] {
    const unsigned cls = class_for(8, 8);
    std::vector<void*> v = malloc_many(40000, 8);
    ASSERT_GT(free_from_back_until(v, [&] { return tl_heap->bins[cls].limit == 0; }), 1u);
    void* const p = v.back();
    ak_free(p);
    v.pop_back();
    EXPECT_EQ(slab_of(p)->free, p);
    for (void* q : v) ak_free(q);
  });
}

// Blocks freed in random order reach the bin from scattered slabs: that is churn, or a bin
// that would pin a slab a block if it stayed full, not a program freeing what it built in order.
// The bin stays open and its walks send them home, its limit halving in the long run
// (tests/pool/bins_test.cpp).
TEST(ClosedBin, FreesInRandomOrderLeaveTheBinOpen) {
  if (ak::kDebugBuild) GTEST_SKIP() << "checked slabs keep their blocks out of the bins";
  in_new_thread([] {
    std::vector<void*> v = malloc_many(100000);
    std::shuffle(v.begin(), v.end(), std::mt19937(7));
    for (void* p : v) ak_free(p);
    EXPECT_NE(tl_heap->bins[class_for(kSize, 8)].limit, 0u);
  });
}

// A free by the pools (which leave the tag in the blocks they hand out, so it cannot be checked)
// opens a closed bin and joins it, rather than going home unchecked.
TEST(ClosedBin, APoolFreeOpensTheBin) {
  if (ak::kDebugBuild) GTEST_SKIP() << "checked slabs keep their blocks out of the bins";
  in_new_thread([] {
    const unsigned cls = class_for(kSize, 8);
    std::vector<void*> v = malloc_many(40000);
    void* const q = ak::pool_allocate(kSize, 8);
    free_from_back_until(v, [&] { return tl_heap->bins[cls].limit == 0; });
    ASSERT_EQ(tl_heap->bins[cls].limit, 0u);
    ak::pool_deallocate(q, kSize, 8);
    EXPECT_NE(tl_heap->bins[cls].limit, 0u);
    EXPECT_EQ(tl_heap->bins[cls].free, q);
    for (void* p : v) ak_free(p);
  });
}

}  // namespace
