// The ak_ allocation API: glibc semantics for every entry point, alignment, errno, overflow and
// the realloc edge cases, run side by side with the system malloc in one process.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <semaphore>
#include <thread>
#include <utility>
#include <vector>

#include "allockit/allockit.h"
#include "allockit/config.hpp"
#include "allockit/detail/shared_pool.hpp"
#include "fresh_process.hpp"
#include "pool/pool.hpp"
#include "pool/slab_source.hpp"

namespace {
bool aligned(const void* p, std::size_t a) {
  return reinterpret_cast<std::uintptr_t>(p) % a == 0;
}
// The index of the small (64 KiB) or medium slab-sized stretch of address space holding `p`: two
// blocks with the same index are in the same slab.
std::uintptr_t small_slab_index(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) / ak::detail::kSlabSize;
}
std::uintptr_t medium_slab_index(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) / ak::detail::kMediumSlabSize;
}
}  // namespace

TEST(Malloc, EverySizeIsAlignedWritableAndUsable) {
  std::vector<std::pair<unsigned char*, std::size_t>> v;
  for (std::size_t n = 0; n < 70000; n += (n < 4200 ? 1 : 997)) {
    auto* p = static_cast<unsigned char*>(ak_malloc(n));
    ASSERT_NE(p, nullptr) << n;
    ASSERT_TRUE(aligned(p, n <= 8 ? 8 : 16)) << n;
    ASSERT_GE(ak_malloc_usable_size(p), n);
    std::memset(p, int(n & 0xff), n);
    v.emplace_back(p, n);
  }
  for (auto [p, n] : v) {
    if (n) {
      ASSERT_EQ(p[n - 1], n & 0xff) << "blocks overlap at size " << n;
    }
    ak_free(p);
  }
}

TEST(Malloc, FreeNullAndMallocZero) {
  ak_free(nullptr);
  void* a = ak_malloc(0);
  void* b = ak_malloc(0);
  EXPECT_NE(a, nullptr);
  EXPECT_NE(a, b);
  ak_free(a);
  ak_free(b);
  EXPECT_EQ(ak_malloc_usable_size(nullptr), 0u);
}

// free(NULL) reads nothing: the region map's first page (which only addresses below 64 GiB would
// look up) stays out of memory, where a lookup of null used to fault it in (a page fault, about
// 5 us, in every process that frees null). Checked in a fresh process, where nothing else has
// looked up such an address.
TEST(Malloc, FreeNullTouchesNoPageOfTheRegionMap) {
  ak::testing::in_fresh_process([] {
    const long page = sysconf(_SC_PAGESIZE);
    auto* first =
        reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(&ak::detail::g_region_kinds[0]) &
                                ~std::uintptr_t(page - 1));
    unsigned char resident = 1;
    REQUIRE(mincore(first, std::size_t(page), &resident) == 0, 10);
    REQUIRE((resident & 1) == 0, 11);
    for (int i = 0; i < 3; ++i) ak_free(nullptr);
    REQUIRE(mincore(first, std::size_t(page), &resident) == 0, 12);
    REQUIRE((resident & 1) == 0, 13);
  });
}

TEST(Malloc, CallocZeroesReusedMemoryAndRejectsOverflow) {
  // In a fresh process, so the bins are open as a new program finds them: a small block just
  // freed is the next one calloc pops (its fast path), and must come back zero.
  ak::testing::in_fresh_process([] {
    for (std::size_t n : {16, 100, 4000, 100000, 5000000, 40000000}) {
      // Past the starter slab's blocks of the class (a process's first 16), whose frees skip bins.
      std::vector<void*> first;
      for (int i = 0; i < 20; ++i) first.push_back(ak_malloc(n));
      auto* p = static_cast<unsigned char*>(ak_malloc(n));
      std::memset(p, 0xab, n);
      ak_free(p);
      auto* q = static_cast<unsigned char*>(ak_calloc(1, n));
      REQUIRE(n > 4000 || q == p, 1);
      for (std::size_t i = 0; i < n; ++i) REQUIRE(q[i] == 0, 2);
      ak_free(q);
      for (void* b : first) ak_free(b);
    }
  });
  errno = 0;
  EXPECT_EQ(ak_calloc(std::size_t(1) << 40, std::size_t(1) << 40), nullptr);
  EXPECT_EQ(errno, ENOMEM);
}

TEST(Malloc, LargeCallocLeavesFreshPagesUntouched) {
  const std::size_t n = std::size_t(128) << 20;
  auto* p = static_cast<unsigned char*>(ak_calloc(1, n));
  ASSERT_NE(p, nullptr);
  std::vector<unsigned char> vec(64);
  const std::size_t page = std::size_t(sysconf(_SC_PAGESIZE));
  auto* start = reinterpret_cast<unsigned char*>(reinterpret_cast<std::uintptr_t>(p) & ~(page - 1));
  ASSERT_EQ(mincore(start + 16 * page, vec.size() * page, vec.data()), 0);
  for (unsigned char r : vec) EXPECT_EQ(r & 1, 0) << "calloc touched fresh pages";
  EXPECT_EQ(p[n - 1], 0);
  ak_free(p);
}

// Pooled blocks never used before are handed out unwritten: malloc faults no page in (the
// program's first write does), and calloc of them clears nothing. In a fresh process, whose slabs
// are new; the first blocks of a small class come from the starter slab and share the page of
// their slab's header, so the pages checked are those past the first four blocks. Through calloc
// (alloc_any) and through malloc, whose slow path takes fresh blocks first (pool_take_fresh).
void check_fresh_blocks_untouched(void* (*alloc)(std::size_t)) {
  ak::testing::in_fresh_process([alloc] {
    const std::size_t page = std::size_t(sysconf(_SC_PAGESIZE));
    int code = 10;
    for (std::size_t n :
         {std::size_t(24), std::size_t(3000), std::size_t(48) << 10, std::size_t(200) << 10}) {
      std::vector<unsigned char*> v;
      // Small blocks: enough to fill the starter slab's share of the class and pass a page.
      const int count = n < 64 ? 600 : 16;
      for (int i = 0; i < count; ++i) v.push_back(static_cast<unsigned char*>(alloc(n)));
      // Blocks of a page or more: the pages inside each. Smaller ones lie in a row in one slab:
      // the pages inside the row (past the starter slab's blocks, the first half of tiny ones).
      const int skip = n < 64 ? count / 2 : 4;
      std::sort(v.begin() + skip, v.end());
      std::vector<std::pair<std::uintptr_t, std::uintptr_t>> ranges;
      for (auto p = v.begin() + skip; p != v.end(); ++p)
        if (n >= page || p + 1 == v.end())
          ranges.emplace_back(reinterpret_cast<std::uintptr_t>(n >= page ? *p : v[skip]),
                              reinterpret_cast<std::uintptr_t>(*p) + n);
      for (auto [from, to] : ranges) {
        const std::uintptr_t lo = (from + page - 1) & ~(page - 1), hi = to & ~(page - 1);
        REQUIRE(hi > lo && hi - lo < (std::size_t(1) << 20), code + 1);
        std::vector<unsigned char> vec((hi - lo) / page);
        REQUIRE(mincore(reinterpret_cast<void*>(lo), hi - lo, vec.data()) == 0, code + 2);
        for (unsigned char r : vec) REQUIRE((r & 1) == 0, code + 3);  // a fresh page was written
      }
      for (unsigned char* p : v) {
        for (std::size_t i = 0; i < n; i += 97) REQUIRE(p[i] == 0, code + 4);
        std::memset(p, 0xab, n);
        ak_free(p);
      }
      // Blocks used before come back cleared by calloc.
      for (auto& p : v) {
        p = static_cast<unsigned char*>(ak_calloc(1, n));
        for (std::size_t i = 0; i < n; i += 97) REQUIRE(p[i] == 0, code + 5);
      }
      for (unsigned char* p : v) ak_free(p);
      code += 10;
    }
  });
}

TEST(Malloc, FreshPooledBlocksAreHandedOutUntouched) {
  if (ak::kDebugBuild) GTEST_SKIP() << "checked (debug) slabs carve their blocks";
  check_fresh_blocks_untouched([](std::size_t n) { return ak_calloc(1, n); });
  check_fresh_blocks_untouched([](std::size_t n) { return ak_malloc(n); });
}

// A freed mapping above the resident cache's limit is emptied (MADV_DONTNEED) and kept: a calloc
// of its size reuses it, reads zero everywhere and finds its pages still non-resident.
TEST(Malloc, LargeCallocReusesEmptiedMappingsWithoutTouchingThem) {
  const std::size_t n = std::size_t(32) << 20;
  auto* p = static_cast<unsigned char*>(ak_malloc(n));
  ASSERT_NE(p, nullptr);
  std::memset(p, 0xcd, n);
  ak_free(p);
  auto* q = static_cast<unsigned char*>(ak_calloc(1, n));
  ASSERT_NE(q, nullptr);
  const std::size_t page = std::size_t(sysconf(_SC_PAGESIZE));
  auto* start = reinterpret_cast<unsigned char*>(reinterpret_cast<std::uintptr_t>(q) & ~(page - 1));
  std::vector<unsigned char> vec(n / page - 2);
  ASSERT_EQ(mincore(start + page, vec.size() * page, vec.data()), 0);
  std::size_t resident = 0;
  for (unsigned char r : vec) resident += r & 1;
  EXPECT_EQ(resident, 0u) << "calloc wrote pages the OS had already emptied";
  for (std::size_t i = 0; i < n; i += 509) ASSERT_EQ(q[i], 0) << i;
  ak_free(q);
}

TEST(Malloc, ReallocEdgeCasesFollowGlibc) {
  void* p = ak_realloc(nullptr, 40);  // realloc(NULL, n) is malloc(n)
  ASSERT_NE(p, nullptr);
  std::memcpy(p, "0123456789", 10);
  p = ak_realloc(p, 30);  // shrink within the class: same block
  EXPECT_EQ(std::memcmp(p, "0123456789", 10), 0);
  p = ak_realloc(p, 3000);
  EXPECT_EQ(std::memcmp(p, "0123456789", 10), 0);
  p = ak_realloc(p, 1 << 20);  // small to large
  EXPECT_EQ(std::memcmp(p, "0123456789", 10), 0);
  static_cast<char*>(p)[(1 << 20) - 1] = 'z';
  p = ak_realloc(p, 64 << 20);  // large growth: mremap keeps the contents
  EXPECT_EQ(std::memcmp(p, "0123456789", 10), 0);
  EXPECT_EQ(static_cast<char*>(p)[(1 << 20) - 1], 'z');
  p = ak_realloc(p, 100);  // large shrink
  EXPECT_EQ(std::memcmp(p, "0123456789", 10), 0);
  EXPECT_EQ(ak_realloc(p, 0), nullptr);  // realloc(p, 0) frees and returns NULL
  void* q = ak_malloc(50);
  errno = 0;
  EXPECT_EQ(ak_reallocarray(q, std::size_t(1) << 40, std::size_t(1) << 40), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  std::memset(q, 1, 50);  // q is still valid after the failure
  q = ak_reallocarray(q, 10, 10);
  ASSERT_NE(q, nullptr);
  ak_free(q);
}

TEST(Malloc, LargeGrowthInSmallStepsGetsHeadroom) {
  // 10% steps from 64 KiB: each growth past the mapping reserves half as much again, so most
  // steps fit in place and the contents always survive.
  std::size_t size = 64 << 10;
  auto* p = static_cast<unsigned char*>(ak_malloc(size));
  ASSERT_NE(p, nullptr);
  p[0] = 7;
  int remaps = 0;
  for (int step = 0; step < 40; ++step) {
    const std::size_t usable = ak_malloc_usable_size(p);
    size += size / 10;
    p = static_cast<unsigned char*>(ak_realloc(p, size));
    ASSERT_NE(p, nullptr);
    p[size - 1] = static_cast<unsigned char>(step);
    if (size > usable) {
      ++remaps;
      EXPECT_GE(ak_malloc_usable_size(p), usable + usable / 2);
    }
  }
  EXPECT_EQ(p[0], 7);
  EXPECT_LE(remaps, 14);  // 1.1^40 = 45x growth: about log(45) / log(1.5) = 9.4 remaps
  ak_free(p);
}

// A small block grown by realloc in small steps (Python's lists: 1/8 at a time) is copied once
// per doubling, not at every class boundary, and keeps its contents.
TEST(Malloc, ReallocGrowthInSmallStepsCopiesOncePerDoubling) {
  if (ak::kSecureBuild) GTEST_SKIP() << "the secure build keeps realloc'd blocks in their classes";
  std::size_t size = 4096;
  auto* p = static_cast<unsigned char*>(ak_malloc(size));
  ASSERT_NE(p, nullptr);
  for (std::size_t i = 0; i < size; ++i) p[i] = static_cast<unsigned char>(i % 251);
  int moves = 0;
  while (size + size / 8 < 16000) {
    size += size / 8;
    auto* q = static_cast<unsigned char*>(ak_realloc(p, size));
    ASSERT_NE(q, nullptr);
    if (q != p) ++moves;
    p = q;
    p[size - 1] = static_cast<unsigned char>((size - 1) % 251);
  }
  EXPECT_LE(moves, 2);  // 4 KiB -> 8 KiB -> 16 KiB; at every class boundary it would be 8
  for (std::size_t i = 0; i < 4096; ++i) ASSERT_EQ(p[i], i % 251) << i;
  ak_free(p);
}

// A medium block that realloc grows past 64 KiB moves to a large block of its own, so later
// growth moves pages instead of copying; shrunk to 64 KiB or less, it moves back to the pools.
TEST(Malloc, ReallocGrowthPastMediumSizesMovesToALargeBlock) {
  if (ak::kSecureBuild) GTEST_SKIP() << "the secure build keeps realloc'd blocks in their classes";
  // A fresh process: a free block of a larger medium class left in a bin by an earlier test could
  // serve the 48 KiB step (pool_medium_class) with room for 80 KiB.
  ak::testing::in_fresh_process([] {
    auto large_blocks = [] {
      ak_stats s;
      ak_stats_get(&s);
      return s.large_blocks;
    };
    auto holds_pattern = [](const unsigned char* p, std::size_t n) {
      for (std::size_t i = 0; i < n; ++i)
        if (p[i] != i % 251) return false;
      return true;
    };
    const std::size_t before = large_blocks();
    auto* p = static_cast<unsigned char*>(ak_malloc(40 << 10));
    REQUIRE(p != nullptr, 2);
    for (std::size_t i = 0; i < (40 << 10); ++i) p[i] = static_cast<unsigned char>(i % 251);
    p = static_cast<unsigned char*>(ak_realloc(p, 48 << 10));  // medium to medium
    REQUIRE(p != nullptr && large_blocks() == before, 3);
    p = static_cast<unsigned char*>(ak_realloc(p, 80 << 10));
    REQUIRE(p != nullptr && large_blocks() == before + 1, 4);
    REQUIRE(ak_malloc_usable_size(p) >= std::size_t(80) << 10, 5);
    REQUIRE(holds_pattern(p, 40 << 10), 6);
    p = static_cast<unsigned char*>(ak_realloc(p, 2 << 20));  // large growth
    REQUIRE(p != nullptr && holds_pattern(p, 40 << 10), 7);
    p = static_cast<unsigned char*>(ak_realloc(p, 30 << 10));
    REQUIRE(p != nullptr && large_blocks() == before, 8);
    REQUIRE(holds_pattern(p, 30 << 10), 9);
    ak_free(p);
  });
}

// A medium slab a thread leaves empty goes to its class again: handed to another class, it would
// keep the pages its old blocks were written on beside the new blocks' (slab_source.cpp).
TEST(Malloc, AnEmptyMediumSlabGoesBackToItsClass) {
  void* first = nullptr;
  std::thread([&] {
    first = ak_malloc(40 << 10);
    void* other = ak_malloc(100 << 10);  // another class, its slab emptied after the first's
    ASSERT_NE(first, nullptr);
    ASSERT_NE(other, nullptr);
    static_cast<char*>(first)[0] = static_cast<char*>(other)[0] = 1;
    ak_free(first);
    ak_free(other);
  }).join();  // both slabs empty at the thread's exit: cached, the other class's on top
  void* again = nullptr;
  std::thread([&] {
    again = ak_malloc(40 << 10);
    ak_free(again);
  }).join();
  EXPECT_EQ(medium_slab_index(again), medium_slab_index(first));
}

// A resident slab handed to another class is emptied first: the old class's written pages
// do not stay beside the new class's blocks, which are handed out untouched (slab_source.cpp).
TEST(Malloc, ASmallSlabHandedToAnotherClassIsEmptiedFirst) {
  if (ak::kDebugBuild) GTEST_SKIP() << "checked (debug) slabs carve blocks by linking them";
  ak::testing::in_fresh_process([] {
    constexpr std::size_t kBlock = 512, kCount = 64;  // 32 KiB: past the starter slab's share
    std::vector<char*> first(kCount);
    std::thread([&] {
      for (auto& p : first) {
        p = static_cast<char*>(ak_malloc(kBlock));
        REQUIRE(p != nullptr, 2);
        std::memset(p, 1, kBlock);
      }
      for (char* p : first) ak_free(p);
    }).join();  // its slab empty at the thread's exit: cached resident
    std::thread([&] {
      // Another class: past the starter slab's share of it, its first slab is the cached one.
      const auto page = [](const void* p) {
        return reinterpret_cast<char*>(reinterpret_cast<std::uintptr_t>(p) & ~std::uintptr_t(4095));
      };
      char* last = first.back();  // in the slab the first thread's blocks filled
      std::vector<void*> other;
      while (other.size() < kCount &&
             (other.empty() || small_slab_index(other.back()) != small_slab_index(last)))
        other.push_back(ak_malloc(1024));
      REQUIRE(small_slab_index(other.back()) == small_slab_index(last), 4);
      REQUIRE(page(other.back()) != page(last), 5);
      unsigned char resident = 0;
      REQUIRE(mincore(page(last), 4096, &resident) == 0, 6);
      REQUIRE((resident & 1) == 0, 7);
      for (void* p : other) ak_free(p);
    }).join();
  });
}

// A small slab goes back to its class even when a hundred slabs of other classes were cached
// after it, as when a pair of threads ends together (slab_source.cpp, kAffinityScan).
TEST(Malloc, ASmallSlabGoesBackToItsClassPastOthersCachedAfterIt) {
  if (ak::kDebugBuild) GTEST_SKIP() << "checked (debug) slabs carve blocks by linking them";
  ak::testing::in_fresh_process([] {
    std::binary_semaphore filled{0}, go{0};
    std::thread others([&] {
      // About a hundred slabs of another class, alive while the first slab is cached.
      std::vector<void*> blocks(6400);
      for (auto& p : blocks) p = ak_malloc(1024);
      filled.release();
      go.acquire();
      for (void* p : blocks) ak_free(p);
    });
    filled.acquire();
    std::uintptr_t first = 0;
    std::thread([&] {
      std::vector<void*> blocks(64);  // 32 KiB: past the starter slab's share of the class
      for (auto& p : blocks) p = ak_malloc(512);
      first = small_slab_index(blocks.back());
      for (void* p : blocks) ak_free(p);
    }).join();  // its slab cached
    go.release();
    others.join();  // theirs cached after it
    std::thread([&] {
      std::vector<void*> blocks;
      while (blocks.size() < 64 && (blocks.empty() || small_slab_index(blocks.back()) != first))
        blocks.push_back(ak_malloc(512));
      REQUIRE(small_slab_index(blocks.back()) == first, 2);
      for (void* p : blocks) ak_free(p);
    }).join();
  });
}

TEST(Malloc, AMediumSlabHandedToAnotherClassIsEmptiedFirst) {
  if (ak::kDebugBuild) GTEST_SKIP() << "checked (debug) slabs carve blocks by linking them";
  ak::testing::in_fresh_process([] {
    char* first = nullptr;
    std::thread([&] {
      first = static_cast<char*>(ak_malloc(40 << 10));
      REQUIRE(first != nullptr, 2);
      std::memset(first, 1, 40 << 10);  // ten pages resident
      ak_free(first);
    }).join();  // its slab empty at the thread's exit: cached resident
    char* other = nullptr;
    std::thread([&] {
      other = static_cast<char*>(ak_malloc(200 << 10));  // another class: the cached slab
      REQUIRE(other != nullptr, 3);
      REQUIRE(medium_slab_index(other) == medium_slab_index(first), 4);
      unsigned char pages[10];
      REQUIRE(mincore(first, 40 << 10, pages) == 0, 5);
      for (unsigned char page : pages) REQUIRE((page & 1) == 0, 6);
      ak_free(other);
    }).join();
  });
}

// A medium slab mostly resident keeps its pages when another class takes it: the new class's
// blocks are written over them (a program building strings by appends up to 64 KiB, its slabs
// changing class as the strings grow and restart, emptied 62 MiB and faulted it back: 0.10 s,
// now 0.069; mimalloc 0.047).
TEST(Malloc, AMostlyResidentMediumSlabHandedToAnotherClassKeepsItsPages) {
  if (ak::kDebugBuild) GTEST_SKIP() << "checked (debug) slabs carve blocks by linking them";
  constexpr std::size_t kBlock = 40 << 10;
  const std::size_t per_slab = (ak::detail::kMediumSlabSize - 4096) / kBlock;
  ak::testing::in_fresh_process([per_slab] {
    char* first = nullptr;
    std::thread([&] {
      std::vector<char*> blocks;
      for (std::size_t i = 0; i < per_slab; ++i) {
        blocks.push_back(static_cast<char*>(ak_malloc(kBlock)));
        REQUIRE(blocks.back() != nullptr, 2);
        std::memset(blocks.back(), 1, kBlock);
      }
      first = blocks.front();
      for (char* b : blocks) REQUIRE(medium_slab_index(b) == medium_slab_index(first), 3);
      for (char* b : blocks) ak_free(b);
    }).join();  // the slab, written whole, empty at the thread's exit: cached resident
    std::thread([&] {
      char* other = static_cast<char*>(ak_malloc(200 << 10));  // another class: the cached slab
      REQUIRE(other != nullptr && medium_slab_index(other) == medium_slab_index(first), 4);
      std::vector<unsigned char> pages(per_slab * kBlock / 4096);
      REQUIRE(mincore(first, per_slab * kBlock, pages.data()) == 0, 5);
      std::size_t resident = 0;
      for (unsigned char page : pages) resident += page & 1;
      REQUIRE(resident == pages.size(), 6);
      ak_free(other);
    }).join();
  });
}

// A bin never holds more than its limit, down to a medium class's bin of one block. A thread that
// frees another thread's blocks, allocating none, has its bin at its start limit (one block); its
// first overflow doubles it, and its overflows after halve it back to one after a long run of
// frees. Each overflow then sends a block home (sending half of one, rounded down, sent none,
// and the bin took a second block).
TEST(Malloc, AMediumBinHoldsNoMoreThanItsLimitInALongRunOfFrees) {
  if (ak::kDebugBuild) GTEST_SKIP() << "checked slabs keep freed blocks out of the bins";
  constexpr std::size_t kBlock = std::size_t(64) << 10;
  std::vector<void*> v;
  std::thread([&] {
    for (int i = 0; i < 700; ++i) v.push_back(ak_malloc(kBlock));
  }).join();
  std::shuffle(v.begin(), v.end(), std::mt19937(5));  // scattered slabs: the bin never closes
  std::thread([&] {
    ak_free(ak_malloc(std::size_t(100) << 10));  // this thread's heap (another class), its bins
                                                 // at their start limits
    const unsigned cls = ak::detail::class_of(kBlock);
    const ak::detail::Bin& bin = ak::detail::tl_heap->bins[cls];
    std::uint32_t largest_limit = 0, limit_after = 0;
    for (void* p : v) {
      ak_free(p);
      ASSERT_LE(bin.count, bin.limit);
      largest_limit = std::max(largest_limit, bin.limit);
      limit_after = bin.limit;
    }
    EXPECT_EQ(largest_limit, 2u);
    EXPECT_EQ(limit_after, 1u);  // the run brought it back down to one block
  }).join();
}

// A class that keeps borrowing (its own blocks all in use, a larger class's bin full) takes a fresh
// block of its own after 32 borrows, then borrows again: a class short for good grows to what it
// needs instead of borrowing at every request.
TEST(Malloc, AMediumClassThatKeepsBorrowingTakesAFreshBlockOfItsOwn) {
  if (ak::kDebugBuild) GTEST_SKIP() << "checked slabs keep freed blocks out of the bins";
  ak::testing::in_fresh_process([] {
    void* first = ak_malloc(40 << 10);  // class 40 KiB: its current slab
    REQUIRE(first != nullptr, 2);
    // 64 KiB blocks freed in random order (no run of frees to close their bin), twice: taken
    // again from their slabs, the bin's limit grows, and then it holds them.
    std::vector<void*> big;
    for (int round = 0; round < 2; ++round) {
      for (int i = 0; i < 64; ++i) big.push_back(ak_malloc(64 << 10));
      std::shuffle(big.begin(), big.end(), std::mt19937(round));
      for (void* p : big) ak_free(p);
      big.clear();
    }
    const ak::detail::Bin& bin = ak::detail::tl_heap->bins[ak::detail::class_of(64 << 10)];
    REQUIRE(bin.count >= 40, 3);
    std::vector<void*> taken;
    for (int i = 0; i < 40; ++i) taken.push_back(ak_malloc(40 << 10));
    for (int i = 0; i < 40; ++i) {
      const bool own = medium_slab_index(taken[i]) == medium_slab_index(first);
      REQUIRE(own == (i == 32), 10 + i);  // 32 borrowed 64 KiB blocks, then a fresh one
    }
    for (void* p : taken) ak_free(p);
    ak_free(first);
  });
}

// Grows this thread's bins of blocks of `sizes` (`count` blocks each), in that order, six rounds:
// every second block freed fills a bin and sends blocks home; allocating them again runs the bin
// dry (its limit doubles); then everything is freed.
void grow_bins(std::initializer_list<std::size_t> sizes, int count) {
  for (int round = 0; round < 6; ++round)
    for (const std::size_t size : sizes) {
      std::vector<void*> v;
      for (int i = 0; i < count; ++i) v.push_back(ak_malloc(size));
      for (int i = 0; i < count; i += 2) ak_free(v[i]);
      for (int i = 0; i < count; i += 2) v[i] = ak_malloc(size);
      for (void* p : v) ak_free(p);
    }
}

// The medium classes' bins grow within a budget of their own: growing them takes nothing from
// the small bins' growth, and together they stay within kHeapMediumBinBytes.
TEST(Malloc, MediumBinsGrowWithinABudgetOfTheirOwn) {
  if (ak::kDebugBuild) GTEST_SKIP() << "checked slabs keep freed blocks out of the bins";
  std::thread([] {
    using namespace ak::detail;
    grow_bins({16384, 8192, 4096, 2048}, 1000);
    const std::uint32_t small_grown = tl_heap->bin_bytes;
    ASSERT_GE(small_grown, kHeapBinBytes / 2);  // the small bins hold their budget
    grow_bins({256 << 10, 192 << 10, 128 << 10, 96 << 10, 64 << 10}, 48);
    EXPECT_EQ(tl_heap->bin_bytes, small_grown);
    std::size_t medium_grown = 0;
    for (unsigned c = kClassCount; c < kHeapClasses; ++c)
      medium_grown += std::size_t(pool_bin_limit(c) - pool_start_limit(c)) * class_size(c);
    EXPECT_EQ(medium_grown, tl_heap->medium_bin_bytes);
    EXPECT_LE(medium_grown, kHeapMediumBinBytes);
    EXPECT_GE(medium_grown, kHeapMediumBinBytes / 2);  // the budget, not the exercise, stopped it
    ak_collect(1);
  }).join();
}

// A medium request with no free block of its class at hand takes a free block of a larger class
// of at most twice its size (resident already), not a fresh one; never one of more than twice,
// and never while its own class has a free block.
TEST(Malloc, AMediumRequestTakesAFreeBlockOfAClassUpToTwiceItsSize) {
  if (ak::kDebugBuild) GTEST_SKIP() << "checked slabs keep freed blocks out of the bins";
  ak::testing::in_fresh_process([] {  // no blocks of earlier tests in the bins
    void* big = ak_malloc(40 << 10);  // class 40 KiB
    REQUIRE(big != nullptr, 2);
    std::memset(big, 1, 40 << 10);
    ak_free(big);
    void* p = ak_malloc(24 << 10);  // class 24 KiB: none free, 40 KiB <= 2 x 24 KiB
    REQUIRE(p == big, 3);
    REQUIRE(ak_malloc_usable_size(p) == std::size_t(40) << 10, 4);
    std::memset(p, 2, 24 << 10);
    ak_free(p);  // back to the 40 KiB class
    void* q = ak_malloc(40 << 10);
    REQUIRE(q == big, 5);
    void* own = ak_malloc(24 << 10);  // a block of its own class now, fresh
    REQUIRE(own != nullptr && ak_malloc_usable_size(own) == std::size_t(24) << 10, 6);
    ak_free(own);
    ak_free(q);  // both free: the 24 KiB request takes its own class's block
    void* again = ak_malloc(24 << 10);
    REQUIRE(again == own, 7);
    ak_free(again);

    void* huge = ak_malloc(64 << 10);  // more than twice 24 KiB: never taken for it
    REQUIRE(huge != nullptr, 8);
    ak_free(huge);
    void* a = ak_malloc(24 << 10);
    void* b = ak_malloc(24 << 10);
    REQUIRE(a != huge && b != huge, 9);
    ak_free(a);
    ak_free(b);
  });
}

// An explicit 16-byte alignment of a tiny request is honoured even when the 8-byte class's free
// list starts at an address that is only 8-aligned (as after freeing two malloc(0) blocks).
TEST(Malloc, SixteenByteAlignmentOfTinyRequests) {
  std::vector<void*> tiny;
  for (int i = 0; i < 8; ++i) tiny.push_back(ak_malloc(1));
  for (void* p : tiny) ak_free(p);  // the list now holds 8-aligned blocks of the 8-byte class
  for (std::size_t n : {1, 4, 8}) {
    void* p = nullptr;
    ASSERT_EQ(ak_posix_memalign(&p, 16, n), 0);
    EXPECT_TRUE(aligned(p, 16)) << n;
    void* q = ak_aligned_alloc(16, n);
    EXPECT_TRUE(aligned(q, 16)) << n;
    void* r = ak_memalign(16, n);
    EXPECT_TRUE(aligned(r, 16)) << n;
    ak_free(p);
    ak_free(q);
    ak_free(r);
  }
}

TEST(Malloc, AlignedEntryPoints) {
  for (std::size_t a = 8; a <= (std::size_t(1) << 20); a *= 2) {
    for (std::size_t n : {1, 24, 100, 5000, 70000}) {
      void* p = nullptr;
      ASSERT_EQ(ak_posix_memalign(&p, a, n), 0);
      ASSERT_TRUE(aligned(p, a)) << a << " " << n;
      std::memset(p, 3, n);
      ak_free(p);
      void* q = ak_aligned_alloc(a, n);
      ASSERT_TRUE(aligned(q, a));
      ak_free(q);
      void* r = ak_memalign(a, n);
      ASSERT_TRUE(aligned(r, a));
      ak_free(r);
    }
  }
  void* p = reinterpret_cast<void*>(0x1);
  EXPECT_EQ(ak_posix_memalign(&p, 24, 10), EINVAL);
  EXPECT_EQ(ak_posix_memalign(&p, 4, 10), EINVAL);  // not a multiple of sizeof(void*)
  EXPECT_EQ(p, reinterpret_cast<void*>(0x1));       // untouched on error
  errno = 0;
  EXPECT_EQ(ak_aligned_alloc(24, 10), nullptr);
  EXPECT_EQ(errno, EINVAL);
  // A valid alignment too large to serve is out of memory (POSIX), as glibc reports it; memalign's
  // alignment past half the address space rounds up to no power of two: invalid, as in glibc.
  EXPECT_EQ(ak_posix_memalign(&p, std::size_t(1) << 62, 10), ENOMEM);
  EXPECT_EQ(p, reinterpret_cast<void*>(0x1));
  errno = 0;
  EXPECT_EQ(ak_memalign(std::size_t(1) << 62, 1), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  errno = 0;
  EXPECT_EQ(ak_aligned_alloc(std::size_t(1) << 50, 1), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  errno = 0;
  EXPECT_EQ(ak_memalign(SIZE_MAX / 2 + 2, 1), nullptr);
  EXPECT_EQ(errno, EINVAL);
  void* m = ak_memalign(24, 10);  // glibc rounds up to 32
  EXPECT_TRUE(aligned(m, 32));
  ak_free(m);
  const std::size_t page = std::size_t(sysconf(_SC_PAGESIZE));
  void* v = ak_valloc(10);
  EXPECT_TRUE(aligned(v, page));
  void* pv = ak_pvalloc(page + 1);
  EXPECT_TRUE(aligned(pv, page));
  EXPECT_GE(ak_malloc_usable_size(pv), 2 * page);
  ak_free(v);
  ak_free(pv);
}

// An aligned request of a small size gets a block of the smallest class whose blocks all have
// the alignment (class_for; malloc's class up to 8 bytes' alignment), and one freed just before is
// popped again: aligned_any's fast path
// takes the class from malloc's table and kAlignedClasses, so a wrong row or column shows as a
// misaligned block or a larger usable size.
TEST(Malloc, AlignedRequestsTakeTheSmallestAlignedClassFromTheBin) {
  if (ak::kSecureBuild) GTEST_SKIP() << "the secure build's usable size is the request";
  ak::testing::in_fresh_process([] {  // the bins open, as a new program finds them
    for (std::size_t a = 8; a <= ak::detail::kMaxPooledAlign; a *= 2)
      for (std::size_t n = 0; n <= ak::detail::kMaxPooledSize; n += n < 300 ? 1 : 97) {
        // Up to 8 bytes' alignment, malloc's class: 16-byte alignment from 16 bytes up.
        const unsigned cls =
            ak::detail::class_for(n, a > 8 || n > 8 ? std::max<std::size_t>(a, 16) : 8);
        std::vector<void*> warm;  // past the starter slab's blocks, whose frees skip the bins
        for (int i = 0; i < 17; ++i) warm.push_back(ak_aligned_alloc(a, n));
        void* p = ak_aligned_alloc(a, n);
        REQUIRE(aligned(p, a), 1);
        REQUIRE(ak_malloc_usable_size(p) == ak::detail::class_size(cls), 2);
        ak_free(p);
        void* q = nullptr;
        REQUIRE(ak_posix_memalign(&q, a, n) == 0 && q == p, 3);
        ak_free(q);
        for (void* w : warm) ak_free(w);
      }
  });
}

// A page-aligned request up to the medium classes' end gets a block of the medium class of its
// size (of the smallest medium size at least), and one freed just before is popped again:
// aligned_any's medium branch, as malloc_slow pops. (Sizes below the classes that may be sealed:
// a sealed block is never the next request's.)
TEST(Malloc, PageAlignedRequestsTakeTheMediumClassOfTheirSizeFromTheBin) {
  if (ak::kSecureBuild) GTEST_SKIP() << "the secure build's usable size is the request";
  ak::testing::in_fresh_process([] {
    for (std::size_t n : {1, 4096, 5000, 16385, 20000, 70000, 112000}) {
      const std::size_t bytes = std::max(n, ak::detail::kMaxPooledSize + 1);
      void* first = ak_aligned_alloc(4096, n);  // the class's first block: a fresh slab's
      void* p = ak_aligned_alloc(4096, n);
      REQUIRE(aligned(p, 4096), 1);
      REQUIRE(ak_malloc_usable_size(p) == ak::detail::class_size(ak::detail::class_of(bytes)), 2);
      ak_free(p);
      void* q = nullptr;
      REQUIRE(ak_posix_memalign(&q, 4096, n) == 0 && q == p, 3);
      ak_free(q);
      ak_free(first);
    }
  });
}

// A request aligned past a page, up to the medium classes' end (size and alignment), gets a block
// of the smallest medium class at or above its size whose blocks all have the alignment, and one
// freed just before is popped again (below the classes that may be sealed): aligned_any's medium
// branch and kAlignedMediumClasses. Such
// requests took a mapping each (15-17 us a call where 8-192 KiB blocks aligned to 8-64 KiB
// churned).
TEST(Malloc, RequestsAlignedPastAPageTakeTheSmallestMediumClassAlignedToIt) {
  if (ak::kSecureBuild) GTEST_SKIP() << "the secure build's medium blocks are page-aligned only";
  using ak::detail::class_size;
  ak::testing::in_fresh_process([] {
    for (std::size_t a = 8192; a <= ak::detail::kMaxMediumSize; a *= 2)
      for (std::size_t n : {1, 4096, 8193, 16385, 24577, 40000, 65536, 100000, 196609, 262144}) {
        unsigned cls = ak::detail::class_of(std::max(n, ak::detail::kMaxPooledSize + 1));
        while (cls < ak::detail::kHeapClasses && ak::detail::natural_alignment(class_size(cls)) < a)
          ++cls;
        if (cls == ak::detail::kHeapClasses) continue;  // a large block's
        void* first = ak_aligned_alloc(a, n);           // the class's first block: a fresh slab's
        void* p = ak_aligned_alloc(a, n);
        REQUIRE(aligned(first, a) && aligned(p, a), 1);
        REQUIRE(ak_malloc_usable_size(p) == class_size(cls), 2);
        ak_free(p);
        void* q = nullptr;
        REQUIRE(ak_posix_memalign(&q, a, n) == 0 && aligned(q, a), 3);
        // A sealed block is never the next request's (freed_guard.hpp).
        REQUIRE(q == p || class_size(cls) >= ak::detail::kSealableMediumBytes, 4);
        ak_free(q);
        ak_free(first);
      }
  });
}

// Over-aligned small requests (a cache-line pair, a page, 64 KiB) come from the size classes whose
// blocks have that alignment, not from a mapping each: hundreds of them live at once are aligned,
// distinct and intact, and add no large block. (They took a page-sized mapping each: 200,000
// 64-byte blocks aligned to 128 took 1.44 s and 807 MiB.)
TEST(Malloc, OverAlignedSmallRequestsArePooled) {
  std::vector<std::size_t> aligns = {128, 256, 1024, 4096};
  if (!ak::kSecureBuild)  // its medium blocks are page-aligned only
    for (std::size_t a = 8192; a <= ak::detail::kMaxMediumSize; a *= 4) aligns.push_back(a);
  for (std::size_t a : aligns) {
    ak_stats before{};
    ak_stats_get(&before);
    std::vector<unsigned char*> v;
    for (int i = 0; i < 300; ++i) {
      const std::size_t n =
          1 + std::size_t(i) * 37 % std::min(a < 1024 ? 600 : 3 * a, ak::detail::kMaxMediumSize);
      auto* p = static_cast<unsigned char*>(ak_aligned_alloc(a, n));
      ASSERT_NE(p, nullptr);
      ASSERT_TRUE(aligned(p, a)) << a << " " << n;
      ASSERT_GE(ak_malloc_usable_size(p), n);
      std::memset(p, i & 0xff, n);
      v.push_back(p);
    }
    ak_stats during{};
    ak_stats_get(&during);
    EXPECT_EQ(during.large_blocks, before.large_blocks) << a;
    for (int i = 0; i < 300; ++i) {
      const std::size_t n =
          1 + std::size_t(i) * 37 % std::min(a < 1024 ? 600 : 3 * a, ak::detail::kMaxMediumSize);
      EXPECT_EQ(v[i][0], i & 0xff) << a << " " << i;
      EXPECT_EQ(v[i][n - 1], i & 0xff) << a << " " << i;
      ak_free(v[i]);
    }
  }
}

// A zero-size request at any alignment gets a block of its own: aligned, recognised by every call,
// with room for at least one byte. At a page or more, the large blocks' header filled the whole
// offset and the block started at its mapping's end.
TEST(Malloc, ZeroSizeAlignedRequestsGetBlocksOfTheirOwn) {
  for (std::size_t a = 8; a <= (std::size_t(1) << 20); a *= 2) {
    void* p = nullptr;
    ASSERT_EQ(ak_posix_memalign(&p, a, 0), 0);
    void* q = ak_aligned_alloc(a, 0);
    void* r = ak_memalign(a, 0);
    for (void* b : {p, q, r}) {
      ASSERT_NE(b, nullptr) << a;
      EXPECT_TRUE(aligned(b, a)) << a;
      EXPECT_GE(ak_malloc_usable_size(b), 1u) << a;
      *static_cast<volatile char*>(b) = 1;
    }
    EXPECT_TRUE(p != q && q != r && p != r) << a;
    ak_free(p);
    ak_free_sized(q, 0);
    ak_free(r);
  }
  for (void* b : {ak_valloc(0), ak_pvalloc(0)}) {
    ASSERT_NE(b, nullptr);
    EXPECT_GE(ak_malloc_usable_size(b), 1u);
    ak_free(b);
  }
}

TEST(Malloc, SizedFreesAndTrim) {
  void* a = ak_malloc(100);
  ak_free_sized(a, 100);
  void* b = ak_aligned_alloc(64, 128);
  ak_free_aligned_sized(b, 64, 128);
  std::vector<void*> big;
  for (int i = 0; i < 8; ++i) big.push_back(ak_malloc(1 << 20));
  for (void* p : big) ak_free(p);
  EXPECT_EQ(ak_malloc_trim(0), 1);  // cached mappings went back
}

// A sized free of any size up to the block's (a class holds more than its requests) pushes the
// block straight onto its class's bin: the next malloc of the class gets it back. Blocks past the
// starter slab's share of the class (8 KiB), so each is of a slab of its own class.
TEST(Malloc, SizedFreeOfAnySizeUpToTheBlockFreesIt) {
  std::vector<void*> warm;
  for (int i = 0; i < 200; ++i) warm.push_back(ak_malloc(100));
  const std::size_t usable = ak_malloc_usable_size(warm.back());
  for (std::size_t stated : {std::size_t(100), std::size_t(97), std::size_t(1), usable}) {
    void* a = ak_malloc(100);
    ak_free_sized(a, stated);
    void* b = ak_malloc(100);
    EXPECT_EQ(b, a) << stated;
    ak_free(b);
  }
  for (void* p : warm) ak_free_sized(p, 100);
}

// Blocks that hold more than their request, freed with the request's size: grown by realloc (with
// headroom), calloc'd, aligned, medium, large, and of size 0; null with any size.
TEST(Malloc, SizedFreesOfBlocksLargerThanTheirRequests) {
  for (std::size_t n :
       {std::size_t(24), std::size_t(3000), std::size_t(100) << 10, std::size_t(3) << 20}) {
    void* p = ak_malloc(n / 2);
    ASSERT_NE(p = ak_realloc(p, n), nullptr);
    ASSERT_NE(p = ak_realloc(p, n + n / 8), nullptr);
    ak_free_sized(p, n + n / 8);
    void* c = ak_calloc(3, n);
    ak_free_sized(c, 3 * n);
    void* a = ak_aligned_alloc(4096, n);
    ak_free_aligned_sized(a, 4096, n);
  }
  ak_free_sized(ak_malloc(0), 0);
  ak_free_sized(nullptr, 123);
  ak_free_aligned_sized(nullptr, 64, 123);
  void* q = ak_malloc(100);
  ak_free_aligned_sized(q, 0, 100);  // no alignment stated: nothing to check
}

TEST(Malloc, HugeRequestsFailWithEnomem) {
  errno = 0;
  EXPECT_EQ(ak_malloc(std::size_t(-1) - 100), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  errno = 0;
  EXPECT_EQ(ak_malloc(std::size_t(1) << 46), nullptr);  // beyond the address space left
  EXPECT_EQ(errno, ENOMEM);
  void* p = nullptr;
  EXPECT_EQ(ak_posix_memalign(&p, 16, std::size_t(-1) / 2), ENOMEM);
}

TEST(Malloc, SideBySideWithTheSystemMalloc) {
  void* sys = std::malloc(100);  // glibc's
  void* ours = ak_malloc(100);
  EXPECT_NE(sys, nullptr);
  EXPECT_NE(ours, nullptr);
  std::free(sys);
  ak_free(ours);
}

// ---- misuse: every case aborts with a message naming the call ----

TEST(MallocDeathTest, DoubleFreeOfASmallBlock) {
  void* p = ak_malloc(48);
  ak_free(p);
  EXPECT_DEATH(ak_free(p), "free\\(\\): double free detected");
}

// A freed large block's memory waits in the large cache: a second free, realloc or
// malloc_usable_size of it says so, rather than "not allocated".
TEST(MallocDeathTest, SizedDoubleFreeOfASmallBlock) {
  for (std::size_t stated : {std::size_t(100), std::size_t(1)}) {
    void* p = ak_malloc(100);
    ak_free_sized(p, stated);
    EXPECT_DEATH(ak_free_sized(p, stated), "double free detected") << stated;
  }
}

// A sized free stating more than the block holds (a type deleted as a larger one) is reported,
// small, medium or large; so is an aligned sized free of a pointer not aligned as stated.
TEST(MallocDeathTest, SizedFreePastTheBlock) {
  EXPECT_DEATH(ak_free_sized(ak_malloc(1), 32), "free_sized\\(\\): sized free with the wrong size");
  EXPECT_DEATH(ak_free_sized(ak_malloc(0), 17), "sized free with the wrong size");
  EXPECT_DEATH(
      {
        void* p = ak_malloc(100 << 10);
        ak_free_sized(p, ak_malloc_usable_size(p) + 1);
      },
      "free_sized\\(\\): sized free with the wrong size");
  EXPECT_DEATH(ak_free_sized(ak_malloc(400 << 10), 404 << 10), "sized free with the wrong size");
  EXPECT_DEATH(ak_free_aligned_sized(ak_aligned_alloc(64, 64), 64, 128),
               "free_aligned_sized\\(\\): sized free with the wrong size");
  EXPECT_DEATH(
      {
        auto* p = static_cast<char*>(ak_aligned_alloc(64, 64));  // p + 16: never 64-aligned
        ak_free_aligned_sized(p + 16, 64, 48);
      },
      "free_aligned_sized\\(\\): invalid pointer \\(misaligned for the alignment given\\)");
}

// A fresh process's first blocks of a class come from the starter slab, whose frees all leave the
// fast path (debug builds: checked slabs, the same): a sized free past the block is reported
// there too, and a sized double free of a medium or large block as a double free.
TEST(MallocDeathTest, SizedFreeOffTheFastPath) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        void* p = ak_malloc(24);
        ak_stats st;
        ak_stats_get(&st);
        if (!ak::kDebugBuild && st.starter_slabs != 1) std::exit(3);
        ak_free_sized(p, 64);
      },
      "free_sized\\(\\): sized free with the wrong size");
  for (std::size_t n : {std::size_t(100) << 10, std::size_t(400) << 10}) {
    void* p = ak_malloc(n);
    ak_free_sized(p, n);
    EXPECT_DEATH(ak_free_sized(p, n), "free_sized\\(\\): double free detected") << n;
  }
}

TEST(MallocDeathTest, DoubleFreeOfALargeBlock) {
  void* p = ak_malloc(1 << 20);
  ak_free(p);
  EXPECT_DEATH(ak_free(p), "free\\(\\): double free detected");
  EXPECT_DEATH(ak_realloc(p, 10), "realloc\\(\\): invalid pointer \\(a freed block\\)");
  EXPECT_DEATH(ak_malloc_usable_size(p),
               "malloc_usable_size\\(\\): invalid pointer \\(a freed block\\)");
}

// Medium blocks (16 KiB..256 KiB) get the small blocks' checks plus block boundaries.
TEST(MallocDeathTest, MediumBlockMisuse) {
  auto* p = static_cast<char*>(ak_malloc(100000));
  auto* q = static_cast<char*>(ak_malloc(100000));
  ASSERT_EQ(reinterpret_cast<std::uintptr_t>(p) % 4096, 0u);  // medium blocks are page-aligned
  EXPECT_DEATH(ak_free(p + 4096), "free\\(\\): invalid pointer \\(not the start of a block\\)");
  EXPECT_DEATH(ak_malloc_usable_size(p + 8), "malloc_usable_size\\(\\): invalid pointer");
  const auto slab = reinterpret_cast<std::uintptr_t>(p) & ~((std::uintptr_t(1) << 21) - 1);
  EXPECT_DEATH(ak_free(reinterpret_cast<void*>(slab + 64)), "invalid pointer");  // header page
  EXPECT_GE(ak_malloc_usable_size(p), 100000u);
  ak_free(q);
  EXPECT_DEATH(ak_free(q), "free\\(\\): double free detected");
  EXPECT_DEATH(ak_realloc(q, 10), "realloc\\(\\): invalid pointer \\(a freed block\\)");
  EXPECT_DEATH(ak_malloc_usable_size(q),
               "malloc_usable_size\\(\\): invalid pointer \\(a freed block\\)");
  ak_free(p);
}

// A large block's header (the 32 bytes before it) written over is reported by every call that
// reads it, before its sizes move or report anything.
TEST(MallocDeathTest, AnOverwrittenLargeHeaderIsReported) {
  auto* p = static_cast<char*>(ak_malloc(std::size_t(1) << 20));
  ASSERT_NE(p, nullptr);
  auto corrupt = [p] { std::memset(p - 32, 0x41, 32); };
  EXPECT_DEATH((corrupt(), ak_realloc(p, std::size_t(3) << 20)), "large block header overwritten");
  EXPECT_DEATH((corrupt(), ak_malloc_usable_size(p)), "large block header overwritten");
  EXPECT_DEATH((corrupt(), ak_free(p)), "large block header overwritten");
  ak_free(p);
}

TEST(MallocDeathTest, ForeignPointers) {
  int local = 0;
  EXPECT_DEATH(ak_free(&local), "free\\(\\): invalid pointer \\(not allocated by allockit\\)");
  void* sys = std::malloc(32);
  EXPECT_DEATH(ak_free(sys), "not allocated by allockit");
  std::free(sys);
}

TEST(MallocDeathTest, MisalignedAndInteriorPointers) {
  auto* p = static_cast<char*>(ak_malloc(64));
  EXPECT_DEATH(ak_free(p + 1), "free\\(\\): invalid pointer");
  auto* big = static_cast<char*>(ak_malloc(1 << 20));
  EXPECT_DEATH(ak_free(big + 16), "invalid pointer");
  EXPECT_DEATH(ak_realloc(p + 3, 100), "realloc\\(\\): invalid pointer");
  EXPECT_DEATH(ak_malloc_usable_size(big + 8), "malloc_usable_size\\(\\): invalid pointer");
  ak_free(p);
  ak_free(big);
}

TEST(MallocDeathTest, ReallocAfterFree) {
  void* p = ak_malloc(1 << 20);
  ak_free(p);
  EXPECT_DEATH(ak_realloc(p, 10), "realloc\\(\\): invalid pointer");
}
