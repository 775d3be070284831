// ak::SharedArena: concurrent allocation from several threads (run under TSan by `make test`),
// then one reset; and the chunk pool's retention bound.
#include "allockit/shared_arena.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <set>
#include <thread>
#include <vector>

#include "pool/fake_page_source.hpp"
#include "test_scale.hpp"

namespace {
std::atomic<int> g_destroyed{0};
struct Counted {
  int v;
  explicit Counted(int x) : v(x) {}
  ~Counted() { ++g_destroyed; }
};
}  // namespace

TEST(SharedArena, ConcurrentAllocationsAreDisjointAndAligned) {
  ak::SharedArena arena({.chunk_bytes = 16 << 10});
  constexpr int kThreads = 4;
  const int per_thread = int(ak::test::scaled(100'000));
  std::vector<std::vector<char*>> got(kThreads);
  for (int round = 0; round < 3; ++round) {
    g_destroyed = 0;
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&, t] {
        got[t].clear();
        for (int i = 0; i < per_thread; ++i) {
          const std::size_t size = 8 + (i % 5) * 8;
          auto* p = static_cast<char*>(arena.allocate(size, 8));
          std::memset(p, t, size);
          got[t].push_back(p);
          if (i % 100 == 0) arena.make<Counted>(i);
          if (i % 1000 == 0) arena.allocate(10000, 16);  // large chunk path
        }
      });
    for (auto& th : threads) th.join();
    for (int t = 0; t < kThreads; ++t)
      for (std::size_t i = 0; i < got[t].size(); ++i) {
        ASSERT_EQ(reinterpret_cast<std::uintptr_t>(got[t][i]) % 8, 0u);
        ASSERT_EQ(got[t][i][0], char(t)) << "allocations of two threads overlap";
      }
    EXPECT_EQ(arena.stats().destructors, std::size_t(kThreads * ((per_thread + 99) / 100)));
    arena.reset();
    EXPECT_EQ(g_destroyed.load(), kThreads * ((per_thread + 99) / 100));
    EXPECT_EQ(arena.stats().used_bytes, 0u);
  }
}

TEST(SharedArena, LimitAndBadAlignment) {
  ak::SharedArena arena({.chunk_bytes = 16 << 10, .limit = 64 << 10});
  while (arena.try_allocate(512, 8)) {
  }
  EXPECT_THROW(arena.allocate(512, 8), std::bad_alloc);
  EXPECT_THROW(arena.allocate(8, 6), std::invalid_argument);
  arena.reset();
  EXPECT_NE(arena.try_allocate(512, 8), nullptr);
}

TEST(ChunkPool, RetentionIsBoundedAndExcessGoesBackToTheOs) {
  ak::test::FakePageSource source;
  ak::ChunkPool pool(&source, /*retention_bytes=*/256 << 10);
  std::vector<std::pair<void*, std::size_t>> chunks;
  for (int i = 0; i < 10; ++i) {
    std::size_t bytes = 64 << 10;
    chunks.emplace_back(pool.acquire(&bytes), bytes);
  }
  EXPECT_EQ(source.maps, 10);
  for (auto [p, n] : chunks) pool.release(p, n);
  auto s = pool.stats();
  EXPECT_EQ(s.cached_bytes, 256u << 10);  // four chunks kept ...
  EXPECT_EQ(source.unmaps, 6);            // ... the other six unmapped
  std::size_t bytes = 64 << 10;
  void* again = pool.acquire(&bytes);
  EXPECT_EQ(source.maps, 10);  // served from the cache
  pool.release(again, bytes);
  pool.set_retention(64 << 10);
  EXPECT_EQ(pool.stats().cached_bytes, 64u << 10);
  EXPECT_EQ(pool.trim(), 64u << 10);
  EXPECT_EQ(source.live_bytes, 0u);
}

TEST(ChunkPool, LargeRequestsDoNotTakeSmallCachedChunksNorHugeOnes) {
  ak::test::FakePageSource source;
  ak::ChunkPool pool(&source);
  std::size_t small = 64 << 10, huge = 8 << 20;
  void* a = pool.acquire(&small);
  void* b = pool.acquire(&huge);
  pool.release(a, small);
  pool.release(b, huge);
  std::size_t want = 1 << 20;
  void* c = pool.acquire(&want);
  EXPECT_NE(c, a);
  EXPECT_NE(c, b);  // 8 MiB is more than twice 1 MiB: not handed out
  EXPECT_EQ(want, 1u << 20);
  pool.release(c, want);
}
