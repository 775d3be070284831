// Shared size-class pools: every size and alignment, the fall-through for big requests, bad
// arguments, stats, and heap hand-back when threads exit.
#include <gtest/gtest.h>

#include <cstring>
#include <stdexcept>
#include <thread>
#include <vector>

#include "allockit/pool.hpp"
#include "pool/pool.hpp"

TEST(SharedPool, EverySizeFrom1To4096IsAlignedAndWritable) {
  std::vector<std::pair<char*, std::size_t>> v;
  for (std::size_t size = 1; size <= 4096; ++size) {
    for (std::size_t align : {1, 8, 16, 32, 64}) {
      auto* p = static_cast<char*>(ak::pool_allocate(size, align));
      ASSERT_EQ(reinterpret_cast<std::uintptr_t>(p) % align, 0u) << size << "/" << align;
      std::memset(p, int(size & 0xff), size);
      v.emplace_back(p, size);
      if (v.size() > 64) {
        auto [q, n] = v.front();
        ASSERT_EQ(static_cast<unsigned char>(q[n - 1]), n & 0xff) << "corrupted block";
        ak::pool_deallocate(q, n, 1);  // any pooled size/align pair frees through the slab
        v.erase(v.begin());
      }
    }
  }
  for (auto [q, n] : v) ak::pool_deallocate(q, n, 1);
}

TEST(SharedPool, LargeSizesAndAlignmentsFallThrough) {
  for (std::size_t size : {16385, 20000, 1 << 20}) {
    void* p = ak::pool_allocate(size, 16);
    std::memset(p, 1, size);
    EXPECT_FALSE(ak::detail::in_pool_region(p));
    ak::pool_deallocate(p, size, 16);
  }
  for (std::size_t align : {128, 4096, 1 << 16}) {
    void* p = ak::pool_allocate(64, align);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % align, 0u);
    ak::pool_deallocate(p, 64, align);
  }
}

TEST(SharedPool, BadArguments) {
  EXPECT_THROW(ak::pool_allocate(0, 8), std::invalid_argument);
  EXPECT_THROW(ak::pool_allocate(16, 3), std::invalid_argument);
  EXPECT_THROW(ak::pool_allocate(16, 0), std::invalid_argument);
  EXPECT_THROW(ak::pool_allocate(std::size_t(-1), 8), std::bad_alloc);
  EXPECT_THROW(ak::pool_allocate(std::size_t(1) << 62, 8), std::bad_alloc);
  EXPECT_EQ(ak::try_pool_allocate(0, 8), nullptr);
  EXPECT_EQ(ak::try_pool_allocate(16, 6), nullptr);
  EXPECT_EQ(ak::try_pool_allocate(std::size_t(-1), 8), nullptr);
  EXPECT_EQ(ak::try_pool_allocate(std::size_t(1) << 62, 8), nullptr);
  ak::pool_deallocate(nullptr, 16);  // ignored
}

TEST(SharedPool, FreedBlocksAreReused) {
  // A class's first blocks may come from the starter slab, which never reuses a block: get the
  // class past its share of it first.
  std::vector<void*> first;
  for (std::size_t i = 0; i <= ak::detail::kStarterClassBytes / 48; ++i)
    first.push_back(ak::pool_allocate(40, 8));
  for (void* p : first) ak::pool_deallocate(p, 40, 8);
  void* a = ak::pool_allocate(40, 8);
  ak::pool_deallocate(a, 40, 8);
  void* b = ak::pool_allocate(40, 8);
  EXPECT_EQ(a, b);
  ak::pool_deallocate(b, 40, 8);
}

TEST(SharedPool, EmptySlabsAreRetiredAndTrimmed) {
  std::vector<void*> v;
  for (int i = 0; i < 100000; ++i) {
    v.push_back(ak::pool_allocate(200, 8));
    std::memset(v.back(), 1, 200);  // used, so resident (fresh blocks are handed out untouched)
  }
  const auto busy = ak::pool_stats();
  EXPECT_GE(busy.slabs_in_use, 100000u * 224 / ak::detail::kSlabSize);
  for (void* p : v) ak::pool_deallocate(p, 200, 8);
  const auto idle = ak::pool_stats();
  EXPECT_LT(idle.slabs_in_use, busy.slabs_in_use);  // all but the current slab went back
  EXPECT_GT(idle.slabs_cached, 0u);
  ak::pool_trim();
  EXPECT_LT(ak::pool_stats().resident_bytes, busy.resident_bytes);
}

TEST(SharedPool, ExitedThreadsHandBackTheirHeaps) {
  std::thread([] {  // enough blocks to need a heap (not just the starter slab)
    std::vector<void*> v;
    for (int i = 0; i < 1000; ++i) v.push_back(ak::pool_allocate(8, 8));
    for (void* p : v) ak::pool_deallocate(p, 8, 8);
  })
      .join();
  const std::size_t heaps = ak::pool_stats().heaps;
  for (int i = 0; i < 50; ++i)
    std::thread([] { ak::pool_deallocate(ak::pool_allocate(8, 8), 8, 8); }).join();
  EXPECT_EQ(ak::pool_stats().heaps, heaps);  // every new thread adopted a handed-back heap
}

TEST(SharedPool, BlocksOfExitedThreadsCanBeFreedAnywhere) {
  std::vector<void*> v(1000);
  std::thread([&] {
    for (auto& p : v) p = ak::pool_allocate(64, 8);
  }).join();
  for (void* p : v) ak::pool_deallocate(p, 64, 8);
  std::thread([] {
    // The adopting thread collects those remote frees and reuses the blocks.
    std::vector<void*> w;
    for (int i = 0; i < 1000; ++i) w.push_back(ak::pool_allocate(64, 8));
    for (void* p : w) ak::pool_deallocate(p, 64, 8);
  }).join();
}

// Blocks of an exited thread freed by a live one: the frees wait in the freeing thread's batch,
// then on the exited thread's heap; pool_trim hands them over and sorts them home, so the
// slabs empty and go back without any new thread adopting the heap.
TEST(SharedPool, TrimReclaimsSlabsOfExitedThreadsFreedElsewhere) {
  ak::pool_trim();
  const std::size_t before = ak::pool_stats().slabs_in_use;
  std::vector<void*> v(20000);
  std::thread([&] {
    for (auto& p : v) p = ak::pool_allocate(520, 8);
  }).join();
  const std::size_t busy = ak::pool_stats().slabs_in_use;
  ASSERT_GE(busy, before + 20000 * 520 / ak::detail::kSlabSize);
  for (void* p : v) ak::pool_deallocate(p, 520, 8);
  ak::pool_trim();
  // At most the exited thread's last current slab stays (it is never retired while current).
  EXPECT_LE(ak::pool_stats().slabs_in_use, before + 1);
}

TEST(SharedPool, PurgeDelayReturnsIdleSlabsWithoutTrim) {
  ak::pool_trim();
  ak::pool_set_purge_delay_ms(0);
  std::vector<void*> v;
  for (int i = 0; i < 50000; ++i) {
    v.push_back(ak::pool_allocate(1000, 8));
    std::memset(v.back(), 1, 1000);  // fresh blocks are handed out untouched: make them resident
  }
  const std::size_t busy = ak::pool_stats().resident_bytes;
  for (void* p : v) ak::pool_deallocate(p, 1000, 8);
  // With no delay, each slab's memory went back as soon as the slab emptied.
  EXPECT_LT(ak::pool_stats().resident_bytes + 40 * 1000 * 1000, busy);
  ak::pool_set_purge_delay_ms(1000);
}
