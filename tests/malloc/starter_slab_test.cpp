// The starter slab (pool/starter_slab.hpp): a process's first small blocks of each class share
// one slab, are aligned and sized as their classes promise, are reused only through the bins of a
// thread with a heap, and are freed, measured, reallocated and checked like any other block. Each
// case runs in a fresh process (threadsafe death tests re-execute the binary), where the starter
// slab is still unused. Debug builds, whose slabs are checked, have no starter slab.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "allockit/allockit.h"
#include "fresh_process.hpp"
#include "pool/pool.hpp"

namespace {

using ak::detail::kStarterClassBytes;
using ak::detail::slab_of;

std::uintptr_t addr(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p);
}

// Runs `body` in a fresh process, where the starter slab is still unused.
template <class F>
void in_fresh_process(F body) {
  if (ak::kDebugBuild) GTEST_SKIP() << "checked (debug) slabs: no starter slab";
  ak::testing::in_fresh_process(body);
}

// Gives the calling thread a heap: a class too big for the starter slab needs a slab of its own.
void take_a_heap() {
  void* big = ak_malloc(kStarterClassBytes + 1);
  REQUIRE(big != nullptr && !slab_of(big)->starter, 60);
  ak_free(big);
}

}  // namespace

TEST(StarterSlab, FirstBlocksOfManyClassesShareOneSlab) {
  in_fresh_process([] {
    ak_stats before;
    ak_stats_get(&before);
    REQUIRE(before.starter_slabs == 0, 10);
    const std::size_t sizes[] = {8, 24, 40, 64, 100, 200, 512, 1000, 3000};
    std::vector<char*> blocks;
    for (std::size_t n : sizes) blocks.push_back(static_cast<char*>(ak_malloc(n)));
    for (std::size_t i = 0; i < blocks.size(); ++i) {
      REQUIRE(blocks[i] != nullptr, 11);
      REQUIRE(slab_of(blocks[i]) == slab_of(blocks[0]), 12);      // one slab for all
      REQUIRE(addr(blocks[i]) % 16 == 0, 13);                     // malloc's alignment
      REQUIRE(ak_malloc_usable_size(blocks[i]) >= sizes[i], 14);  // its class's size
      std::memset(blocks[i], int(i + 1), sizes[i]);
    }
    for (std::size_t i = 0; i < blocks.size(); ++i)  // no block overlaps another
      for (std::size_t k = 0; k < sizes[i]; ++k) REQUIRE(blocks[i][k] == char(i + 1), 15);
    ak_stats during;
    ak_stats_get(&during);
    REQUIRE(during.starter_slabs == 1 && during.slabs_in_use >= 1, 16);
    REQUIRE(during.heaps == 0, 17);  // a thread served by the starter slab needs no heap yet
    for (char* p : blocks) ak_free(p);
  });
}

TEST(StarterSlab, AlignedRequestsKeepTheirAlignment) {
  in_fresh_process([] {
    for (std::size_t align : {16, 32, 64}) {
      void* p = nullptr;
      REQUIRE(ak_posix_memalign(&p, align, align * 3) == 0, 20);
      REQUIRE(addr(p) % align == 0, 21);
      void* q = ak::detail::pool_alloc(ak::detail::class_for(align, align));
      REQUIRE(q != nullptr && addr(q) % align == 0, 22);
    }
  });
}

TEST(StarterSlab, BlocksAreNotReusedAndAClassMovesOnAfterItsShare) {
  in_fresh_process([] {
    void* a = ak_malloc(48);
    ak_free(a);
    void* b = ak_malloc(48);
    REQUIRE(b != a, 30);  // the starter slab never hands a block out twice
    const std::size_t share = kStarterClassBytes / ak_malloc_usable_size(b);
    std::vector<void*> v;
    for (std::size_t i = 0; i < share + 2; ++i) v.push_back(ak_malloc(48));
    REQUIRE(slab_of(v.back()) != slab_of(b), 31);  // past its share: a slab of its own
    ak_free(v.back());
    void* c = ak_malloc(48);
    REQUIRE(c == v.back(), 32);  // and there blocks are reused
    for (void* p : v) ak_free(p);
    ak_free(b);
  });
}

TEST(StarterSlab, ASmallClassHasSixteenBlocksThereAndABigOneItsBytes) {
  in_fresh_process([] {
    // 16 blocks of a small class: the 17th comes from a slab of its own. (With 8 KiB of lines
    // for every class, a 24-byte class had 128 blocks there, each allocation and free a slow
    // call: about 1% of a short program's calls, its p99.)
    std::vector<void*> v;
    for (int i = 0; i < 17; ++i) v.push_back(ak_malloc(24));
    for (int i = 0; i < 16; ++i) REQUIRE(slab_of(v[i])->starter, 70);
    REQUIRE(!slab_of(v[16])->starter, 71);
    // A class of 4 KiB still has its two blocks there (8 KiB: a shell's fork buffer).
    void* a = ak_malloc(4096);
    void* b = ak_malloc(4096);
    void* c = ak_malloc(4096);
    REQUIRE(slab_of(a)->starter && slab_of(b)->starter && !slab_of(c)->starter, 72);
    for (void* p : {a, b, c}) ak_free(p);
    for (void* p : v) ak_free(p);
  });
}

TEST(StarterSlab, WhenItsBlocksRunOutClassesGetSlabsOfTheirOwn) {
  in_fresh_process([] {
    // Classes of 2 to 8 KiB take their whole share each: the starter's blocks (48 KiB) run out
    // before the last class comes, whose first block then comes from a slab of its own. Every
    // block is whole and usable.
    const ak::detail::Slab* starter = nullptr;
    std::size_t from_starter = 0;
    bool last_class_first_from_starter = true;
    std::vector<char*> blocks;
    for (std::size_t n = 2048; n <= 8192; n += 512)
      for (std::size_t i = 0; i < kStarterClassBytes / n + 1; ++i) {
        auto* p = static_cast<char*>(ak_malloc(n));
        REQUIRE(p != nullptr && ak_malloc_usable_size(p) >= n, 40);
        std::memset(p, int(blocks.size() % 251), n);
        if (slab_of(p)->starter) {
          REQUIRE(starter == nullptr || slab_of(p) == starter, 41);
          starter = slab_of(p);
          from_starter += ak_malloc_usable_size(p);
        }
        if (n == 8192 && i == 0) last_class_first_from_starter = slab_of(p)->starter;
        blocks.push_back(p);
      }
    REQUIRE(starter != nullptr, 42);
    REQUIRE(from_starter <= ak::detail::kStarterBlockBytes, 43);  // never past its block area
    REQUIRE(!last_class_first_from_starter, 44);                  // used up before the last
    for (std::size_t i = 0; i < blocks.size(); ++i) {             // no block overlapped another
      REQUIRE(blocks[i][0] == char(i % 251) && blocks[i][2047] == char(i % 251), 45);
      ak_free(blocks[i]);
    }
  });
}

TEST(StarterSlab, AThreadWithAHeapReusesStarterBlocksThroughItsBins) {
  in_fresh_process([] {
    take_a_heap();
    ak_free(ak_malloc(16));  // the starter slab exists
    ak_stats before;
    ak_stats_get(&before);
    REQUIRE(before.heaps == 1 && before.starter_slabs == 1, 61);
    for (std::size_t size : {8, 24, 200, 4000}) {  // class 0 too: its freed tag is cleared
      void* first = ak_malloc(size);
      REQUIRE(slab_of(first)->starter, 62);
      // Churn, within the class's frees into bins: the same block, never a slab of its own.
      for (std::uint32_t i = 0; i < ak::detail::kStarterBinFrees / 2; ++i) {
        std::memset(first, 0x5a, size);
        ak_free(first);
        void* again = ak_malloc(size);
        REQUIRE(again == first, 63);
      }
      ak_free(first);
    }
    ak_stats after;
    ak_stats_get(&after);
    REQUIRE(after.slabs_in_use == before.slabs_in_use, 64);  // all of it on the starter slab
    // A class that keeps churning moves to a slab of its own, whose frees take the fast path.
    void* hot = ak_malloc(300);
    REQUIRE(slab_of(hot)->starter, 66);
    for (std::uint32_t i = 0; i < ak::detail::kStarterBinFrees + 2; ++i) {
      ak_free(hot);
      hot = ak_malloc(300);
    }
    REQUIRE(!slab_of(hot)->starter, 67);
    ak_free(hot);
    // A trim sends bins home: starter blocks are dropped, and the next block is a new one.
    void* p = ak_malloc(200);
    ak_free(p);
    ak_collect(1);
    void* q = ak_malloc(200);
    REQUIRE(q != p && slab_of(q)->starter, 65);
    ak_free(q);
  });
}

TEST(StarterSlab, AChurningClassMovesOnAfterAFewFrees) {
  in_fresh_process([] {
    void* first = ak_malloc(200);
    void* p = first;
    for (std::uint32_t i = 0; i < ak::detail::kStarterClassFrees; ++i) {
      REQUIRE(slab_of(p) == slab_of(first), 50);  // still the starter slab
      ak_free(p);
      p = ak_malloc(200);
    }
    REQUIRE(slab_of(p) != slab_of(first), 51);  // churn: a slab of its own
    ak_free(p);
    REQUIRE(ak_malloc(200) == p, 52);  // which reuses blocks
  });
}

TEST(StarterSlab, ReallocFreeFromOtherThreadsAndStats) {
  in_fresh_process([] {
    auto* p = static_cast<char*>(ak_malloc(100));
    for (int i = 0; i < 100; ++i) p[i] = char(i);
    p = static_cast<char*>(ak_realloc(p, 5000));
    REQUIRE(p != nullptr, 40);
    for (int i = 0; i < 100; ++i) REQUIRE(p[i] == char(i), 41);
    ak_free(p);
    std::vector<void*> mine;
    for (int i = 0; i < 20; ++i) mine.push_back(ak_malloc(16 + 16 * i));
    std::thread([&] {
      for (void* q : mine) ak_free(q);  // remote frees of starter blocks
    }).join();
    ak_stats s;
    ak_stats_get(&s);
    std::size_t classes = 0;
    for (std::size_t c = 0; c < s.class_count; ++c) classes += s.classes[c].slabs;
    REQUIRE(classes + s.starter_slabs == s.slabs_in_use, 42);
  });
}

TEST(StarterSlabDeathTest, DoubleAndInteriorFreesAreReported) {
  if (ak::kDebugBuild) GTEST_SKIP() << "checked (debug) slabs: no starter slab";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        void* p = ak_malloc(64);
        ak_free(p);
        ak_free(p);
      },
      "free\\(\\): double free detected");
  EXPECT_DEATH(
      {
        auto* p = static_cast<char*>(ak_malloc(64));
        ak_free(p + 16);
      },
      "free of a pointer that is not a block of 0x[0-9a-f]+ in the starter slab");
  EXPECT_DEATH(
      {
        auto* p = static_cast<char*>(ak_malloc(64));
        (void)ak_malloc_usable_size(p + 8);  // inside a block, not at its start
      },
      "malloc_usable_size\\(\\): invalid pointer \\(not the start of a block\\)");
  EXPECT_DEATH(
      {
        take_a_heap();
        void* p = ak_malloc(64);
        ak_free(p);  // into the bin
        ak_free(p);
      },
      "free\\(\\): double free detected");
  EXPECT_DEATH(
      {
        take_a_heap();
        void* p = ak_malloc(64);
        ak_free(p);
        ak_collect(1);  // dropped
        ak_free(p);
      },
      "free\\(\\): double free detected");
  EXPECT_DEATH(
      {
        auto* p = static_cast<char*>(ak_malloc(64));
        ak::detail::pool_free(p);  // the pools' own free: the block map catches it
        ak::detail::pool_free(p);
      },
      "double free of 0x[0-9a-f]+ in the starter slab");
}
