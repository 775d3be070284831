// liballockit's bins in a run of frees: a bin of blocks of 16 bytes or more that overflows a
// second time since it last ran empty, its walk finding the blocks in runs of one slab (freed in
// allocation order), closes (thread_heap.cpp close_bin), its blocks and every block freed while
// it is closed going straight home; the next allocation opens it. The pools' own frees, which
// cannot check a block's tag, open it instead (pool_free_untagged).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <random>
#include <thread>
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
    std::uint32_t open_limit = bin.limit;
    const std::size_t left = free_from_back_until(v, [&] {
      if (bin.limit != 0) open_limit = bin.limit;
      return bin.limit == 0;
    });
    ASSERT_GT(left, 2u) << "a run of 40,000 frees left the bin open";
    EXPECT_EQ(bin.count, 0u);  // its blocks went home as it closed
    EXPECT_EQ(pool_bin_limit(cls), std::bit_floor(open_limit / pool_start_limit(cls)) *
                                       pool_start_limit(cls));  // kept for when it opens
    for (int i = 0; i < 2; ++i) {
      void* const p = v.back();
      ak_free(p);
      v.pop_back();
      EXPECT_EQ(slab_of(p)->free, p);  // past the bin, onto its slab's list
      EXPECT_EQ(bin.count, 0u);
    }
    void* const p = ak_malloc(kSize);  // finds it empty: opens it
    EXPECT_GT(bin.limit, open_limit / 2);
    ak_free(p);
    for (void* q : v) ak_free(q);
  });
}

// The 8-byte class carries no freed tag to check a block by on its way straight home: its bin
// never closes.
TEST(ClosedBin, TheBinOfTheUntaggedClassStaysOpen) {
  if (ak::kDebugBuild) GTEST_SKIP() << "checked slabs keep their blocks out of the bins";
  in_new_thread([] {
    const unsigned cls = class_for(8, 8);
    std::vector<void*> v = malloc_many(40000, 8);
    EXPECT_EQ(free_from_back_until(v, [&] { return tl_heap->bins[cls].limit == 0; }), 0u);
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
