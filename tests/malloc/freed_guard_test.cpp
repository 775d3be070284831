// Misuse the default build catches (malloc/freed_guard.hpp, pool_is_carved_block): freed big
// blocks are sealed, so a stale access faults; a block is never handed to the next request of the
// thread that sealed it; the adaptive bar rises an eighth past each sealed size; a free of an
// address past a slab's carve point is reported. Cases that depend on the bar run in a fresh
// process (threadsafe death tests re-execute the binary), where no block was sealed yet.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "allockit/allockit.h"
#include "fresh_process.hpp"
#include "memory_probe.hpp"
#include "pool/pool.hpp"

namespace {

constexpr std::size_t kKiB = 1024, kMiB = 1024 * kKiB;

using ak::testing::in_fresh_process;
using ak::testing::readable;

}  // namespace

// From 32 MiB every freed block is sealed, whatever the bar; the next request gets another range,
// and the one after it may take the sealed range back, accessible again.
TEST(FreedGuard, LargeBlocksAreSealedAtFree) {
  auto* p = static_cast<char*>(ak_malloc(40 * kMiB));
  ASSERT_NE(p, nullptr);
  std::memset(p, 1, 40 * kMiB);
  ASSERT_TRUE(readable(p + 20 * kMiB));
  ak_free(p);
  EXPECT_FALSE(readable(p));
  EXPECT_FALSE(readable(p + 20 * kMiB));
  auto* q = static_cast<char*>(ak_malloc(40 * kMiB));
  EXPECT_NE(q, p);  // not the block just sealed
  EXPECT_FALSE(readable(p));
  auto* r = static_cast<char*>(ak_malloc(40 * kMiB));
  ASSERT_NE(r, nullptr);
  std::memset(q, 2, 40 * kMiB);
  std::memset(r, 3, 40 * kMiB);  // unsealed wherever it came from
  EXPECT_EQ(r[40 * kMiB - 1], 3);
  ak_free(q);
  ak_free(r);
  ak_collect(1);
}

// A 256 KiB block (a medium one) is sealed past its first page at its first free; the thread's
// next request of its size gets another block; a later one gets it back, whole and writable.
TEST(FreedGuard, MediumBlocksAreSealedPastTheirFirstPage) {
  in_fresh_process([] {
    auto* p = static_cast<char*>(ak_malloc(256 * kKiB));
    REQUIRE(p != nullptr, 10);
    std::memset(p, 1, 256 * kKiB);
    ak_free(p);
    REQUIRE(readable(p), 11);  // the first page holds the free-list link
    REQUIRE(!readable(p + 4096), 12);
    REQUIRE(!readable(p + 256 * kKiB - 1), 13);
    auto* q = static_cast<char*>(ak_malloc(256 * kKiB));
    REQUIRE(q != nullptr && q != p, 14);
    REQUIRE(!readable(p + 64 * kKiB), 15);
    auto* r = static_cast<char*>(ak_malloc(256 * kKiB));
    REQUIRE(r == p, 16);  // the sealed block, handed out again
    std::memset(r, 2, 256 * kKiB);
    ak_free(q);
    ak_free(r);
  });
}

// A medium block sealed at free is emptied first, past its first page: its memory goes back to the
// OS at once (the next request passes over it), and when it is handed out again those pages read
// zero. The first page, with the free-list link and the freed tag, stays as it was.
TEST(FreedGuard, ASealedMediumBlockIsEmptiedPastItsFirstPage) {
  in_fresh_process([] {
    auto* p = static_cast<char*>(ak_malloc(200 * kKiB));
    REQUIRE(p != nullptr, 10);
    const std::size_t size = ak_malloc_usable_size(p);
    std::memset(p, 1, size);
    ak_free(p);  // the first free of its size in this process: sealed
    std::vector<unsigned char> pages(size / 4096);
    REQUIRE(mincore(p, size, pages.data()) == 0, 11);
    REQUIRE((pages[0] & 1) == 1, 12);
    for (std::size_t i = 1; i < pages.size(); ++i) REQUIRE((pages[i] & 1) == 0, 13);
    auto* q = static_cast<char*>(ak_malloc(200 * kKiB));  // not the block this thread sealed
    auto* r = static_cast<char*>(ak_malloc(200 * kKiB));
    REQUIRE(q != p && r == p, 14);
    REQUIRE(r[4096] == 0 && r[size / 2] == 0 && r[size - 1] == 0, 15);
    REQUIRE(r[64] == 1, 16);  // the first page kept its bytes past the link and the tag
    ak_free(q);
    ak_free(r);
  });
}

// A medium slab with a block sealed in it is made accessible whole when it retires: a slab of
// another class taken from the cache writes its blocks over the sealed one's pages.
TEST(FreedGuard, ARetiredSlabWithASealedBlockIsAccessibleToTheNextClass) {
  in_fresh_process([] {
    constexpr int kBig = 8;  // 7 blocks of 256 KiB to a 2 MiB slab: two slabs
    char* big[kBig];
    for (auto& b : big) REQUIRE((b = static_cast<char*>(ak_malloc(256 * kKiB))) != nullptr, 10);
    ak_free(big[0]);  // the first free of its size: sealed
    REQUIRE(!readable(big[0] + 8192), 11);
    for (int i = 1; i < kBig; ++i) ak_free(big[i]);
    ak_collect(1);  // the bins emptied: the first slab, not its class's current one, retires
    constexpr int kSmaller = 40;  // 100 KiB blocks (another class): more than two slabs' worth
    char* other[kSmaller];
    for (auto& o : other) {
      REQUIRE((o = static_cast<char*>(ak_malloc(100 * kKiB))) != nullptr, 12);
      std::memset(o, 3, 100 * kKiB);
    }
    REQUIRE(readable(big[0] + 8192), 13);  // the sealed block's pages: another class's now
    for (auto* o : other) ak_free(o);
  });
}

// Adaptive mode: a sealed size raises the bar past itself, so the same size freed again is not
// sealed (a program freeing big blocks over and over pays once), and a bigger one still is.
TEST(FreedGuard, TheBarRisesPastEachSealedSize) {
  in_fresh_process([] {
    auto* a = static_cast<char*>(ak_malloc(1 * kMiB));
    ak_free(a);
    REQUIRE(!readable(a + 8192), 10);
    auto* b = static_cast<char*>(ak_malloc(1 * kMiB));
    ak_free(b);
    REQUIRE(readable(b + 8192), 11);  // not sealed: below the bar now
    auto* c = static_cast<char*>(ak_malloc(4 * kMiB));
    ak_free(c);
    REQUIRE(!readable(c + 8192), 12);
  });
}

// A sealed size raises the bar an eighth past itself (kSealStep): a size within that eighth is
// not sealed (a program whose largest block creeps up pays once per eighth, not at every round),
// and one past it is.
TEST(FreedGuard, SizesWithinAnEighthOfASealedSizeAreNotSealedAgain) {
  in_fresh_process([] {
    auto* a = static_cast<char*>(ak_malloc(1 * kMiB));
    ak_free(a);
    REQUIRE(!readable(a + 8192), 10);
    auto* b = static_cast<char*>(ak_malloc(1 * kMiB + 64 * kKiB));
    ak_free(b);
    REQUIRE(readable(b + 8192), 11);  // within an eighth of 1 MiB
    auto* c = static_cast<char*>(ak_malloc(1 * kMiB + 192 * kKiB));
    ak_free(c);
    REQUIRE(!readable(c + 8192), 12);  // past it
  });
}

namespace {

// Raises the adaptive bar past every medium class: the first free of a 256 KiB block seals it.
void raise_the_bar_past_medium_blocks() {
  void* p = ak_malloc(256 * kKiB);
  ak_free(p);
  REQUIRE(!readable(static_cast<char*>(p) + 8192), 20);
}

// Runs the bin of the class of `bytes` empty a few times, so its limit grows past a few blocks,
// and leaves blocks of that class in it (frees and requests of the class then take the bin).
void grow_the_bin_of(std::size_t bytes) {
  void* b[4];
  for (int round = 0; round < 8; ++round) {
    for (auto& x : b) x = ak_malloc(bytes);
    for (auto* x : b) ak_free(x);
  }
}

}  // namespace

// With the bar past its class, a 200 KiB block freed goes to its bin unsealed, whole, and the next
// request of its class gets it back as it was (the sealable classes' fast paths, both ways).
TEST(FreedGuard, BelowTheBarASealableBlockIsBinnedAndHandedOutAgainWhole) {
  in_fresh_process([] {
    raise_the_bar_past_medium_blocks();
    auto* p = static_cast<char*>(ak_malloc(200 * kKiB));
    REQUIRE(p != nullptr, 10);
    std::memset(p, 7, 200 * kKiB);
    ak_free(p);
    REQUIRE(readable(p + 8192) && p[100 * kKiB] == 7, 11);  // neither sealed nor emptied
    auto* q = static_cast<char*>(ak_malloc(200 * kKiB));
    REQUIRE(q == p, 12);
    REQUIRE(q[8] == 0 && q[15] == 0 && q[16] == 7 && q[100 * kKiB] == 7, 13);  // tag cleared
    ak_free(q);
  });
}

// The same frees and pops still catch a double free and a write after free.
TEST(FreedGuardDeathTest, BelowTheBarSealableBlocksStillCatchMisuse) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        raise_the_bar_past_medium_blocks();
        grow_the_bin_of(200 * kKiB);
        void* p = ak_malloc(200 * kKiB);
        void* q = ak_malloc(200 * kKiB);
        ak_free(p);  // the bin has room for more than p
        ak_free(p);
        ak_free(q);
      },
      "free\\(\\): double free detected");
  EXPECT_DEATH(
      {
        raise_the_bar_past_medium_blocks();
        grow_the_bin_of(200 * kKiB);
        auto* p = static_cast<char*>(ak_malloc(200 * kKiB));
        ak_free(p);
        std::memset(p, 0x5a, 64);  // over the free-list link and the freed tag
        (void)ak_malloc(200 * kKiB);
      },
      "malloc\\(\\): heap corruption .*written after free");
}

// The fault itself (a plain SIGSEGV; under ASan its handler reports it and exits 1).
TEST(FreedGuardDeathTest, StaleAccessToASealedBlockFaults) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        auto* p = static_cast<volatile char*>(ak_malloc(256 * kKiB));
        ak_free(const_cast<char*>(p));
        p[64 * kKiB + 1] = 'a';
        std::exit(0);
      },
      "");
}

// A slab's blocks past its carve point were never handed out: freeing one is reported, in a small
// slab of a thread's own (not the starter slab) and in a medium one.
TEST(FreedGuardDeathTest, FreeOfABlockNeverHandedOutIsReported) {
  std::vector<void*> blocks;
  char* p = nullptr;
  for (int i = 0; i < 4096; ++i) {  // until a fresh slab of this class starts
    p = static_cast<char*>(ak_malloc(48));
    blocks.push_back(p);
    if (i > 0 && ak::detail::slab_of(p) != ak::detail::slab_of(blocks[i - 1]) &&
        !ak::detail::slab_of(p)->starter)
      break;
  }
  EXPECT_DEATH(ak_free(p + 48 * 300), "free\\(\\): invalid pointer \\(not the start of a block\\)");
  EXPECT_DEATH(ak_malloc_usable_size(p + 48 * 300), "malloc_usable_size\\(\\): invalid pointer");
  // Between blocks: the slow paths check block boundaries (the fast free does not).
  EXPECT_DEATH(ak_realloc(p + 16, 10),
               "realloc\\(\\): invalid pointer \\(not the start of a block\\)");
  EXPECT_DEATH(ak_malloc_usable_size(p + 16), "malloc_usable_size\\(\\): invalid pointer");
  auto* m = static_cast<char*>(ak_malloc(100 * kKiB));
  EXPECT_DEATH(ak_free(m + 5 * 100 * kKiB),
               "free\\(\\): invalid pointer \\(not the start of a block\\)");
  ak_free(m);
  for (void* b : blocks) ak_free(b);
}

TEST(FreedGuardDeathTest, UsableSizeOfAFreedBlockIsReported) {
  auto* p = ak_malloc(64);
  ak_free(p);
  EXPECT_DEATH(ak_malloc_usable_size(p),
               "malloc_usable_size\\(\\): invalid pointer \\(a freed block\\)");
  ak_free(ak_malloc(64));  // p is handed out again or not: either way the heap is intact
}
