// A process's first calls of each kind (src/pool/slab_source.cpp's spare region,
// src/malloc/large.cpp's arenas): what each maps. A binary of its own: it counts the mappings the
// allocator makes by defining mmap, which the allocator's objects, linked into this executable,
// call instead of libc's. ctest runs each test in a process of its own, so the allocator is as a
// new program finds it.
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "allockit/allockit.h"

namespace {
std::atomic<int> g_maps{0};
}  // namespace

extern "C" void* mmap(void* addr, size_t len, int prot, int flags, int fd, off_t off) {
  g_maps.fetch_add(1, std::memory_order_relaxed);
  return reinterpret_cast<void*>(syscall(SYS_mmap, addr, len, prot, flags, fd, off));
}

namespace {

constexpr std::size_t kSmall = 64;
constexpr std::size_t kMedium = 72704;  // a medium class (16-256 KiB)
constexpr std::size_t kLarge = 300000;  // past the medium classes

// Mappings made by `call`.
template <class F>
int maps_of(F call) {
  const int before = g_maps.load();
  call();
  return g_maps.load() - before;
}

// The first block of size `first`, then the first of size `second`, a slab of the other kind:
// the second maps nothing, as the first region mapped a spare beside it.
void expect_the_second_kind_maps_nothing(std::size_t first, std::size_t second) {
  void* a = ak_malloc(first);
  ASSERT_NE(a, nullptr);
  void* b = nullptr;
  EXPECT_EQ(maps_of([&] { b = ak_malloc(second); }), 0);
  ASSERT_NE(b, nullptr);
  ak_free(b);
  ak_free(a);
}

TEST(FirstCalls, TheFirstMediumBlockMapsNothingAfterTheFirstSmallOne) {
  expect_the_second_kind_maps_nothing(kSmall, kMedium);
}

TEST(FirstCalls, TheFirstSmallBlockMapsNothingAfterTheFirstMediumOne) {
  expect_the_second_kind_maps_nothing(kMedium, kSmall);
}

// Its arena's registry starts in the arena itself: the block's mapping is the only one.
TEST(FirstCalls, TheFirstLargeBlockMapsItselfAlone) {
  ak_free(ak_malloc(kSmall));
  void* large = nullptr;
  EXPECT_EQ(maps_of([&] { large = ak_malloc(kLarge); }), 1);
  ASSERT_NE(large, nullptr);
  ak_free(large);
}

// Past its first table the registry moves to a mapped one: every block is still found, freed
// once, in any order, and its usable size is its own.
TEST(FirstCalls, AnArenaKeepsMoreLiveBlocksThanItsFirstTableHolds) {
  std::vector<char*> blocks;
  for (std::size_t i = 0; i < 600; ++i) {
    auto* p = static_cast<char*>(ak_malloc(kLarge + i * 4096));
    ASSERT_NE(p, nullptr);
    p[0] = char(i);
    blocks.push_back(p);
  }
  ak_stats s{};
  ak_stats_get(&s);
  EXPECT_EQ(s.large_blocks, 600u);
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    EXPECT_GE(ak_malloc_usable_size(blocks[i]), kLarge + i * 4096);
    EXPECT_EQ(blocks[i][0], char(i));
  }
  std::shuffle(blocks.begin(), blocks.end(), std::mt19937(3));
  for (char* p : blocks) ak_free(p);
  ak_stats_get(&s);
  EXPECT_EQ(s.large_blocks, 0u);
}

}  // namespace
