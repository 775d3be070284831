// ak::BlockPool: alignment for every size, O(1) reuse, geometric growth, stats, trim, release,
// bad arguments and out-of-memory.
#include "allockit/block_pool.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <stdexcept>
#include <vector>

#include "pool/fake_page_source.hpp"

using ak::BlockPool;
using ak::BlockPoolOptions;

TEST(BlockPool, EverySizeIsAlignedAndDistinct) {
  for (std::size_t size = 1; size <= 4096; size += (size < 64 ? 1 : 37)) {
    for (std::size_t align : {1, 8, 16, 64, 4096}) {
      BlockPool pool(size, align);
      std::vector<char*> blocks;
      for (int i = 0; i < 40; ++i) {
        auto* p = static_cast<char*>(pool.allocate());
        ASSERT_EQ(reinterpret_cast<std::uintptr_t>(p) % align, 0u) << size << "/" << align;
        std::memset(p, i, size);
        blocks.push_back(p);
      }
      for (int i = 0; i < 40; ++i)
        for (std::size_t k = 0; k < size; k += 13)
          ASSERT_EQ(blocks[i][k], char(i)) << "blocks overlap: size " << size;
      for (char* p : blocks) pool.deallocate(p);
      EXPECT_EQ(pool.stats().live_blocks, 0u);
    }
  }
}

TEST(BlockPool, ReusesFreedBlocksLastInFirstOut) {
  BlockPool pool(32, 8);
  void* a = pool.allocate();
  void* b = pool.allocate();
  pool.deallocate(a);
  pool.deallocate(b);
  EXPECT_EQ(pool.allocate(), b);
  EXPECT_EQ(pool.allocate(), a);
}

TEST(BlockPool, PagesGrowGeometricallyUpToCap) {
  ak::test::FakePageSource source;
  BlockPoolOptions opt;
  opt.source = &source;
  opt.first_page_bytes = 4096;
  opt.max_page_bytes = 32768;
  BlockPool pool(64, 8, opt);
  std::size_t last_reserved = 0, pages = 0;
  std::vector<std::size_t> growth;
  for (int i = 0; i < 5000; ++i) {
    pool.allocate();
    auto s = pool.stats();
    if (s.pages != pages) {
      growth.push_back(s.reserved_bytes - last_reserved);
      last_reserved = s.reserved_bytes;
      pages = s.pages;
    }
  }
  ASSERT_GE(growth.size(), 6u);
  EXPECT_EQ(growth[0], 4096u);
  EXPECT_EQ(growth[1], 8192u);
  EXPECT_EQ(growth[2], 16384u);
  EXPECT_EQ(growth[3], 32768u);
  EXPECT_EQ(growth[4], 32768u);  // capped
}

TEST(BlockPool, StatsTrackLiveBlocksAndResidency) {
  BlockPool pool(100, 4);
  EXPECT_EQ(pool.stats().block_size, 104u);  // rounded to pointer alignment
  std::vector<void*> v;
  for (int i = 0; i < 1000; ++i) v.push_back(pool.allocate());
  auto s = pool.stats();
  EXPECT_EQ(s.live_blocks, 1000u);
  EXPECT_GE(s.reserved_bytes, 1000u * 104);
  EXPECT_GT(s.resident_bytes, 0u);
  EXPECT_LE(s.resident_bytes, s.reserved_bytes);
  for (void* p : v) pool.deallocate(p);
  EXPECT_EQ(pool.stats().live_blocks, 0u);
}

TEST(BlockPool, TrimReturnsWhollyFreePagesOnly) {
  ak::test::FakePageSource source;
  BlockPoolOptions opt;
  opt.source = &source;
  opt.first_page_bytes = opt.max_page_bytes = 4096;
  BlockPool pool(64, 8, opt);
  std::vector<void*> v;
  for (int i = 0; i < 1000; ++i) v.push_back(pool.allocate());
  const std::size_t pages = pool.stats().pages;
  ASSERT_GT(pages, 10u);
  // Keep one block alive in the first page; free everything else.
  void* keep = v[0];
  for (std::size_t i = 1; i < v.size(); ++i) pool.deallocate(v[i]);
  EXPECT_GT(pool.trim(), 0u);
  EXPECT_EQ(pool.stats().pages, 1u);
  EXPECT_TRUE(pool.owns(keep));
  EXPECT_FALSE(pool.owns(v.back()));
  // The pool still works, and the kept block is untouched by reuse.
  std::memset(keep, 0x5a, 64);
  std::set<void*> fresh;
  for (int i = 0; i < 500; ++i) fresh.insert(pool.allocate());
  EXPECT_EQ(fresh.count(keep), 0u);
  EXPECT_EQ(static_cast<unsigned char*>(keep)[63], 0x5a);
  EXPECT_EQ(pool.trim(), 0u);  // nothing wholly free now
}

TEST(BlockPool, ReleaseReturnsEverything) {
  ak::test::FakePageSource source;
  BlockPoolOptions opt;
  opt.source = &source;
  {
    BlockPool pool(48, 16, opt);
    for (int i = 0; i < 10000; ++i) pool.allocate();
    EXPECT_GT(source.live_bytes, 0u);
    pool.release();
    EXPECT_EQ(source.live_bytes, 0u);
    EXPECT_EQ(pool.stats().pages, 0u);
    EXPECT_NE(pool.allocate(), nullptr);  // usable after release
  }
  EXPECT_EQ(source.live_bytes, 0u);  // destructor returned the rest
}

TEST(BlockPool, BadArgumentsAreRejected) {
  EXPECT_THROW(BlockPool(0, 8), std::invalid_argument);
  EXPECT_THROW(BlockPool(16, 3), std::invalid_argument);
  EXPECT_THROW(BlockPool(16, 0), std::invalid_argument);
  EXPECT_THROW(BlockPool(BlockPool::kMaxBlockSize + 1, 8), std::invalid_argument);
  EXPECT_THROW(BlockPool(std::size_t(-1), 8), std::invalid_argument);
  EXPECT_THROW(BlockPool(16, BlockPool::kMaxAlignment * 2), std::invalid_argument);
}

TEST(BlockPool, OutOfMemoryThrowsOrReturnsNullAndPoolStaysUsable) {
  ak::test::FakePageSource source;
  BlockPoolOptions opt;
  opt.source = &source;
  opt.first_page_bytes = opt.max_page_bytes = 4096;
  BlockPool pool(512, 8, opt);
  source.fail_after(2);  // one page plus the page directory
  std::vector<void*> v;
  while (void* p = pool.try_allocate()) v.push_back(p);
  EXPECT_FALSE(v.empty());
  EXPECT_EQ(pool.try_allocate(), nullptr);
  EXPECT_THROW(pool.allocate(), std::bad_alloc);
  EXPECT_EQ(pool.stats().live_blocks, v.size());
  pool.deallocate(v.back());
  EXPECT_EQ(pool.allocate(), v.back());  // freed blocks still recycle
  source.fail_after(-1);
  EXPECT_NE(pool.allocate(), nullptr);  // and growth resumes once memory is back
}

TEST(BlockPool, NullDeallocateIsIgnored) {
  BlockPool pool(8, 8);
  pool.deallocate(nullptr);
  EXPECT_EQ(pool.stats().live_blocks, 0u);
}

TEST(BlockPool, ForEachLiveVisitsExactlyTheLiveBlocks) {
  BlockPool pool(24, 8);
  std::vector<void*> v;
  for (int i = 0; i < 3000; ++i) v.push_back(pool.allocate());
  std::set<void*> live;
  for (std::size_t i = 0; i < v.size(); ++i)
    if (i % 3 == 0)
      pool.deallocate(v[i]);
    else
      live.insert(v[i]);
  std::set<void*> seen;
  ASSERT_TRUE(pool.for_each_live(
      [](void* p, void* ctx) { static_cast<std::set<void*>*>(ctx)->insert(p); }, &seen));
  EXPECT_EQ(seen, live);
}

TEST(BlockPool, BlocksLargerThanThePageCapGetTheirOwnPage) {
  BlockPoolOptions opt;
  opt.max_page_bytes = 4096;
  BlockPool pool(100000, 64, opt);
  void* a = pool.allocate();
  void* b = pool.allocate();
  std::memset(a, 1, 100000);
  std::memset(b, 2, 100000);
  EXPECT_EQ(static_cast<char*>(a)[99999], 1);
  pool.deallocate(a);
  pool.deallocate(b);
}
