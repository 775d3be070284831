// Freed-block tags (pool_free_tag in allockit/detail/shared_pool.hpp): the fast free writes a
// block's tag without reading the block, so a double free that is not a repeat of the last free
// is caught where the block leaves its bin: at the pop that would hand it out a second time, at
// a walk of the bin (a full bin sending blocks home, thread exit, ak_collect), or at exit. Each
// case must abort before a block is handed out twice. Debug builds check every free of their
// checked slabs at the call, so the same cases die there too, earlier.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <thread>
#include <vector>

#include "allockit/allockit.h"
#include "allockit/pool.hpp"
#include "pool/free_tags.hpp"
#include "pool/pool.hpp"

namespace {

constexpr const char* kDoubleFree = "double free detected|freed twice";

// A medium block never sealed at free (16 KiB < size < kSealableMediumBytes): checked as small
// blocks are.
constexpr std::size_t kMedium = 40000;

// `n` live blocks of `size` bytes that sit in ordinary slabs, not the starter slab (whose frees
// all take the checked slow path; medium blocks never do).
std::vector<void*> slab_blocks(std::size_t size, std::size_t n) {
  std::vector<void*> out;
  while (out.size() < n) {
    void* p = ak_malloc(size);
    if (size > ak::detail::kMaxPooledSize || !ak::detail::slab_of(p)->starter)
      out.push_back(p);  // starter blocks stay live: fine
  }
  return out;
}

// Frees block A of `size` bytes, then `between` other blocks, then A again: A is in the bin twice,
// not as its newest block, so the free does not report it.
void free_twice_with_others_between(std::size_t size, std::size_t between) {
  const std::vector<void*> b = slab_blocks(size, 1 + between);
  for (void* p : b) ak_free(p);
  ak_free(b[0]);
}

}  // namespace

TEST(FreeTagDeathTest, RepeatedFreeIsReportedAtTheCall) {
  // 8 bytes: no room for a tag; the bin's head still tells
  for (std::size_t size : {std::size_t(8), std::size_t(48), kMedium}) {
    void* p = slab_blocks(size, 1)[0];
    ak_free(p);
    EXPECT_DEATH(ak_free(p), "double free");  // debug builds: the checked slab's report
  }
}

TEST(FreeTagDeathTest, DoubleFreeIsCaughtBeforeTheBlockIsHandedOutTwice) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        free_twice_with_others_between(48, 1);            // A B A
        for (int i = 0; i < 3; ++i) (void)ak_malloc(48);  // the third would be A again
        std::_Exit(0);                                    // not reported: the death test fails
      },
      kDoubleFree);
}

TEST(FreeTagDeathTest, DoubleFreeOfAMediumBlockIsCaughtBeforeItIsHandedOutTwice) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        free_twice_with_others_between(kMedium, 1);            // A B A
        for (int i = 0; i < 3; ++i) (void)ak_malloc(kMedium);  // the third would be A again
        std::_Exit(0);
      },
      kDoubleFree);
}

TEST(FreeTagDeathTest, DoubleFreeLeftInTheBinIsReportedAtExit) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        free_twice_with_others_between(64, 1);
        std::exit(0);  // nothing allocated since: the audit at exit finds it
      },
      kDoubleFree);
}

TEST(FreeTagDeathTest, DoubleFreeIsFoundWhenTheBinIsWalked) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        std::thread([] { free_twice_with_others_between(96, 2); }).join();  // bins go home at exit
        std::_Exit(0);
      },
      kDoubleFree);
  EXPECT_DEATH(
      {
        free_twice_with_others_between(96, 1);
        ak_collect(1);
        std::_Exit(0);
      },
      kDoubleFree);
}

TEST(FreeTagDeathTest, DoubleFreeOfAnotherThreadsBlockIsFoundWhenTheBinIsWalked) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        // The owner stays alive, so no one sorts the frees it is handed before _Exit.
        ak_free(slab_blocks(112, 1)[0]);  // this thread gets a heap: its frees go into a bin
        std::vector<void*> b;
        std::atomic<bool> made{false};
        std::atomic<bool> done{false};
        std::thread owner([&] {
          b = slab_blocks(112, 3);
          made = true;
          while (!done) std::this_thread::yield();
        });
        while (!made) std::this_thread::yield();
        ak_free(b[0]);
        ak_free(b[1]);
        ak_free(b[0]);  // into this thread's bin twice
        ak_collect(1);  // the walk batches A for its owner, then meets it again
        done = true;
        owner.join();
        std::_Exit(0);
      },
      kDoubleFree);
}

namespace {

// Frees A, C, B, D, A, where A and B are the last blocks out of one medium slab and C and D are
// of others: the walk home sends A and B home in runs of their own, which empties their slab,
// before it meets A again.
void free_twice_after_its_slab_empties() {
  std::vector<void*> b = slab_blocks(kMedium, 120);
  ak::detail::Slab* const first = ak::detail::medium_slab_of(b[0]);
  std::vector<void*> mine, others;
  for (void* p : b) (ak::detail::medium_slab_of(p) == first ? mine : others).push_back(p);
  ASSERT_GE(mine.size(), 3u);
  ASSERT_GE(others.size(), 2u);
  for (std::size_t i = 2; i < mine.size(); ++i) ak_free(mine[i]);
  ak_collect(1);  // all of the slab's blocks home but A and B
  for (void* p : {mine[0], others[0], mine[1], others[1], mine[0]}) ak_free(p);
  ak_collect(1);
}

// The top 16 bits of free block `p`'s second word: the epoch of the last walk that sent it home.
std::uint16_t walk_epoch_of(const void* p) {
  return std::uint16_t((static_cast<const std::uintptr_t*>(p)[1] ^ ak::detail::pool_free_tag(p)) >>
                       48);
}

// Frees blocks b[from..], each sent home by a walk of its own (ak_collect), never closing the bin,
// which a run of frees does (its blocks then go home without a walk: pool_send_home). Exits
// with 3 when the last is not marked: the case is not set up.
void free_each_through_a_walk(const std::vector<void*>& b, std::size_t from) {
  for (std::size_t i = from; i < b.size(); ++i) {
    ak_free(b[i]);
    ak_collect(1);
  }
  if (walk_epoch_of(b.back()) == 0) std::_Exit(3);
}

// A walk that meets blocks marked by an older walk with the same epoch (2^32 walks ago, or
// another heap's) looks where it sent them and reports nothing; the blocks stay whole.
void walk_over_blocks_of_an_older_walk_with_its_own_epoch(std::size_t size) {
  std::vector<void*> b = slab_blocks(size, 300);
  free_each_through_a_walk(b, 50);  // 50 stay live: the slab stays
  ak::detail::Heap* h = ak::detail::tl_heap;
  // The epoch of the walk before the last: the last block goes out and back in below, this one
  // stays on the slab's list.
  const std::uint16_t old = walk_epoch_of(b[b.size() - 2]);
  const std::uint64_t rechecks = ak::detail::pool_walk_rechecks();
  h->walk_epoch = std::uint16_t(old - 1);  // the next walk's epoch is the old one again
  ak_free(ak_malloc(size));                // the slab's free blocks refill the bin, one `old`
  ak_collect(1);                           // the only bin with blocks: its walk has epoch `old`
  if (ak::detail::pool_walk_rechecks() <= rechecks) std::_Exit(4);  // the walk did not look
  std::vector<void*> again;
  for (int i = 0; i < 250; ++i) again.push_back(ak_malloc(size));
  std::sort(again.begin(), again.end());
  if (std::adjacent_find(again.begin(), again.end()) != again.end()) std::_Exit(5);  // twice
  for (void* p : again) ak_free(p);
  for (std::size_t i = 0; i < 50; ++i) ak_free(b[i]);
}

}  // namespace

TEST(FreeTag, AWalkMeetingItsOwnEpochOnBlocksOfAnOlderWalkReportsNothing) {
  if (ak::kDebugBuild) GTEST_SKIP() << "checked slabs keep freed blocks out of the bins: no walk";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  for (std::size_t size : {std::size_t(96), kMedium})
    EXPECT_EXIT(
        {
          walk_over_blocks_of_an_older_walk_with_its_own_epoch(size);
          std::exit(0);
        },
        ::testing::ExitedWithCode(0), "")
        << size;
}

TEST(FreeTagDeathTest, DoubleFreeIsFoundWhenItsSlabEmptiesInTheWalk) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        free_twice_after_its_slab_empties();
        std::_Exit(0);
      },
      kDoubleFree);
}

TEST(FreeTagDeathTest, DoubleFreeOfABlockSentHomeIsCaughtAtItsSecondPop) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        const std::vector<void*> b = slab_blocks(160, 20000);
        ak_free(b[0]);
        for (std::size_t i = 1; i < b.size(); ++i) ak_free(b[i]);  // overflows the bin
        ak_free(b[0]);  // home in its slab by now, and in the bin again
        for (int i = 0; i < 20000; ++i) ak_malloc(160);
        std::exit(0);
      },
      kDoubleFree);
}

// While a bin is closed in a run of frees, liballockit's free sends a block of 64 bytes or more
// straight onto its slab's list (pool_send_home) after checking its tag: a second free of
// one is reported at the call, whether it is the list's head or further down.
TEST(FreeTagDeathTest, ASecondFreeOfABlockSentStraightHomeIsReportedAtTheCall) {
  if (ak::kDebugBuild) GTEST_SKIP() << "checked slabs keep freed blocks out of the bins";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  for (const std::size_t back : {1, 10})
    EXPECT_DEATH(
        {
          const std::vector<void*> b = slab_blocks(160, 40000);
          for (void* p : b) ak_free(p);
          auto* const again = static_cast<ak::detail::PoolBlock*>(b[b.size() - back]);
          // Not in the bin: on its slab's list, the most recent block there for back == 1.
          ak::detail::Slab* const s = ak::detail::slab_of(again);
          const ak::detail::Bin& bin = ak::detail::tl_heap->bins[s->bin_class];
          if (ak::detail::on_list(bin.free, bin.count, again)) std::_Exit(3);
          if (!ak::detail::on_list(s->free, s->capacity, again)) std::_Exit(4);
          if (back == 1 && s->free != again) std::_Exit(5);
          ak_free(again);
          std::_Exit(0);
        },
        kDoubleFree)
        << back;
}

// The 8-byte class has no tag: with its bin closed, a repeat of the last free, the head of its
// slab's list, is the double free it catches, as its bin's newest block is when the bin is open.
TEST(FreeTagDeathTest, ARepeatOfTheLastUntaggedFreeSentStraightHomeIsReported) {
  if (ak::kDebugBuild) GTEST_SKIP() << "checked slabs keep freed blocks out of the bins";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        const std::vector<void*> b = slab_blocks(8, 40000);
        for (void* p : b) ak_free(p);
        auto* const again = static_cast<ak::detail::PoolBlock*>(b.back());
        ak::detail::Slab* const s = ak::detail::slab_of(again);
        if (ak::detail::tl_heap->bins[s->bin_class].limit != 0) std::_Exit(3);  // closed
        if (s->free != again) std::_Exit(4);
        ak_free(again);
        std::_Exit(0);
      },
      kDoubleFree);
}

// A live block whose second word is near its tag is not taken for a freed one: 0 (a cleared tag),
// a small number, the tag's low 32 bits, the tag but for bit 47 (checks compare 48 bits).
void use_live_blocks_whose_word_is_near_their_tag(std::size_t size) {
  std::vector<void*> b = slab_blocks(size, 3000 * 48 / size + 4);
  for (std::size_t i = 0; i < b.size(); ++i) {
    const std::uintptr_t tag = ak::detail::pool_free_tag(b[i]);
    const std::uintptr_t near[] = {0, 1, std::uint32_t(tag), tag ^ (std::uintptr_t(1) << 47)};
    static_cast<std::uintptr_t*>(b[i])[1] = near[i % 4];
  }
  for (std::size_t i = 0; i < 4; ++i)
    if (ak_malloc_usable_size(b[i]) < size) std::_Exit(3);
  for (std::size_t i = 0; i < 4; ++i) b[i] = ak_realloc(b[i], size + 16);
  for (void* p : b) ak_free(p);  // a full bin sends some through the slow free
  std::exit(0);
}

TEST(FreeTag, ALiveBlockWhoseWordIsNearItsTagIsNotFreed) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  for (std::size_t size : {std::size_t(48), kMedium, std::size_t(200000)})
    EXPECT_EXIT(use_live_blocks_whose_word_is_near_their_tag(size), ::testing::ExitedWithCode(0),
                "")
        << size;
}

// A freed block that a walk sent home (its word carrying the walk's epoch) is still known as
// freed at the call: realloc and malloc_usable_size of it are reported there.
void touch_a_block_a_walk_sent_home(std::size_t size, bool by_realloc) {
  std::vector<void*> b = slab_blocks(size, 300);
  free_each_through_a_walk(b, 50);  // 50 stay live: the slab stays
  if (by_realloc)
    (void)ak_realloc(b.back(), size * 2);
  else
    (void)ak_malloc_usable_size(b.back());
  std::_Exit(0);
}

TEST(FreeTagDeathTest, ABlockAWalkSentHomeIsReportedAtReallocAndUsableSize) {
  if (ak::kDebugBuild) GTEST_SKIP() << "checked slabs keep freed blocks out of the bins: no walk";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  for (std::size_t size : {std::size_t(96), kMedium})
    for (bool by_realloc : {false, true})
      EXPECT_DEATH(touch_a_block_a_walk_sent_home(size, by_realloc), "a freed block")
          << size << " " << by_realloc;
}

TEST(FreeTagDeathTest, WriteAfterFreeOverTheTagIsCaughtAtTheNextMalloc) {
  if (ak::kDebugBuild) GTEST_SKIP() << "checked slabs keep freed blocks out of the bins";
  void* p = slab_blocks(48, 1)[0];
  ak_free(p);
  static_cast<std::uintptr_t*>(p)[1] = 12345;  // the program writes its freed block
  EXPECT_DEATH((void)ak_malloc(48), "malloc\\(\\): heap corruption .*written after free");
  static_cast<std::uintptr_t*>(p)[1] = ak::detail::pool_free_tag(p);  // mend it for this process
  ak_free(ak_malloc(48));
}

// The fast free stores a block's tag in the word its class keeps it in (Slab::tag_word), with no
// test of the class: the second word from 16 bytes up; an 8-byte block has no second word of its
// own, so its tag goes to its first, under the link. Freed in a random mix of classes and taken
// again, 8-byte blocks leave their neighbours (other live 8-byte blocks) untouched, and blocks of
// 16 bytes or more carry the tag where every check looks for it.
TEST(FreeTag, EachClassTagsTheWordItKeepsItsTagInAndNoOther) {
  std::vector<void*> tiny = slab_blocks(8, 600);
  std::sort(tiny.begin(), tiny.end());
  auto pattern = [](void* p) { return ~reinterpret_cast<std::uintptr_t>(p); };
  for (void* p : tiny) *static_cast<std::uintptr_t*>(p) = pattern(p);
  std::vector<void*> freed, others;
  unsigned rng = 1;
  for (std::size_t i = 0; i < tiny.size(); i += 2) {
    rng = rng * 1103515245 + 12345;
    if (rng >> 30 & 1) {  // a block of a tagged class between two 8-byte frees, at random
      void* q = slab_blocks(16 + (rng >> 20) % 100, 1)[0];
      ak_free(q);
      if (!ak::kDebugBuild) {
        EXPECT_TRUE(ak::detail::pool_carries_tag(q)) << q;
      }
      others.push_back(ak_malloc(16 + (rng >> 20) % 100));
    }
    ak_free(tiny[i]);
    freed.push_back(tiny[i]);
  }
  for (std::size_t i = 1; i < tiny.size(); i += 2)
    ASSERT_EQ(*static_cast<std::uintptr_t*>(tiny[i]), pattern(tiny[i])) << i;
  std::vector<void*> again;
  for (std::size_t i = 0; i < freed.size(); ++i) {
    void* p = ak_malloc(8);
    *static_cast<std::uintptr_t*>(p) = pattern(p);
    again.push_back(p);
  }
  for (std::size_t i = 1; i < tiny.size(); i += 2)
    EXPECT_EQ(*static_cast<std::uintptr_t*>(tiny[i]), pattern(tiny[i])) << i;
  for (void* p : again) EXPECT_EQ(*static_cast<std::uintptr_t*>(p), pattern(p));
  for (void* p : again) ak_free(p);
  for (void* p : others) ak_free(p);
  for (std::size_t i = 1; i < tiny.size(); i += 2) ak_free(tiny[i]);
}

// The shared pools' frees tag blocks too: malloc pops blocks the pools freed, and the pools pop
// blocks malloc freed, without a false report, across a bin walk and at exit.
void share_bins_between_pools_and_malloc() {
  for (int round = 0; round < 4; ++round) {
    std::vector<void*> blocks;
    for (int i = 0; i < 3000; ++i) blocks.push_back(ak::pool_allocate(48, 8));
    for (void* p : blocks) ak::pool_deallocate(p, 48, 8);
    blocks.clear();
    for (int i = 0; i < 3000; ++i) blocks.push_back(ak_malloc(48));
    for (void* p : blocks) ak_free(p);
    using Node = std::uint64_t[6];  // 48 bytes: a compile-time class
    ak::pool_allocator<Node> nodes;
    std::vector<Node*> live;
    for (int i = 0; i < 3000; ++i) live.push_back(nodes.allocate(1));
    for (Node* n : live) nodes.deallocate(n, 1);
    ak_collect(1);
  }
}

TEST(FreeTag, PoolAndMallocShareBinsWithoutFalseReports) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        share_bins_between_pools_and_malloc();
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}
