// Per-thread bins of the shared pools: the block freed last is handed out next whichever slab or
// heap it comes from, a bin holds a bounded number of blocks, and a trim or a thread's exit sends
// what bins keep home, so empty slabs go back. Each test runs in a fresh thread, so it starts with
// empty bins at their start limits.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <initializer_list>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "allockit/pool.hpp"
#include "pool/heap_internal.hpp"
#include "pool/pool.hpp"
#include "pool/slab_source.hpp"
#include "pool/starter_slab.hpp"

namespace {

constexpr std::size_t kSize = 200;  // one class, 64 KiB slabs of 208-byte blocks

template <class F>
void in_new_thread(F f) {
  std::thread(f).join();
}

TEST(Bins, TheBlockFreedLastIsHandedOutNextWhicheverSlabItIsIn) {
  if (ak::kDebugBuild) GTEST_SKIP() << "checked slabs keep their blocks out of the bins";
  in_new_thread([] {
    std::vector<void*> v;
    for (int i = 0; i < 2000; ++i) v.push_back(ak::pool_allocate(kSize, 8));  // several slabs
    // Past the class's first blocks, which the starter slab serves and never reuses.
    const std::size_t first = 200, middle = 1000, last = 1999;
    ASSERT_NE(ak::detail::slab_of(v[first]), ak::detail::slab_of(v[last]));
    for (std::size_t i : {first, middle, last}) {
      ak::pool_deallocate(v[i], kSize, 8);
      void* again = ak::pool_allocate(kSize, 8);
      EXPECT_EQ(again, v[i]);
      v[i] = again;
    }
    for (void* p : v) ak::pool_deallocate(p, kSize, 8);
  });
}

TEST(Bins, BlocksOfAnotherThreadAreReusedByTheThreadThatFreedThem) {
  if (ak::kDebugBuild) GTEST_SKIP() << "checked slabs keep their blocks out of the bins";
  std::vector<void*> v(100);
  in_new_thread([&] {
    for (auto& p : v) p = ak::pool_allocate(kSize, 8);
  });
  in_new_thread([&] {
    // Enough blocks of its own that this thread has a heap (the starter slab needs none), so its
    // frees are cached.
    std::vector<void*> own;
    for (std::size_t i = 0; i <= ak::detail::kStarterClassBytes / 64; ++i)
      own.push_back(ak::pool_allocate(64, 8));
    for (void* p : v) ak::pool_deallocate(p, kSize, 8);
    // Handed out again here, last freed first, without a round trip to the slabs' owner.
    for (std::size_t i = 100; i-- > 90;) {
      void* p = ak::pool_allocate(kSize, 8);
      EXPECT_EQ(p, v[i]);
      ak::pool_deallocate(p, kSize, 8);  // and straight back: the same block next time
      EXPECT_EQ(ak::pool_allocate(kSize, 8), p);
    }
    for (std::size_t i = 90; i < 100; ++i) ak::pool_deallocate(v[i], kSize, 8);
    for (void* p : own) ak::pool_deallocate(p, 64, 8);
  });
}

// A thread that frees another thread's blocks keeps them in its bin. When the other thread then
// takes a new slab of their class, the keeper's next slow path sends them home, down to the bin's
// start limit (bins.cpp, shortages); a bin of the keeper's own blocks stays as it is.
void keep_blocks_across_a_shortage(bool own) {
  const unsigned cls = ak::detail::class_for(kSize, 8);
  const std::uint32_t start = ak::detail::start_limit(cls);
  std::atomic<int> phase{0};
  std::vector<void*> given;
  std::uint32_t before = 0, after = 0;
  auto wait_for = [&](int p) {
    while (phase.load() != p) std::this_thread::yield();
  };
  std::thread keeper([&] {
    // A slab of a class of its own, past the starter slab: a heap, so its frees are cached.
    std::vector<void*> mine;
    for (std::size_t i = 0; i <= ak::detail::kStarterClassBytes / 64; ++i)
      mine.push_back(ak::pool_allocate(64, 8));
    if (own)
      for (int i = 0; i < 1000; ++i) given.push_back(ak::pool_allocate(kSize, 8));
    else
      wait_for(1);
    std::shuffle(given.begin(), given.end(), std::mt19937(5));  // scattered: the bin stays open
    for (void* p : given) ak::pool_deallocate(p, kSize, 8);
    before = ak::detail::tl_heap->bins[cls].count;
    phase = 2;
    wait_for(3);
    for (int i = 0; i < 200; ++i) mine.push_back(ak::pool_allocate(64, 8));  // a slow path
    after = ak::detail::tl_heap->bins[cls].count;
    phase = 4;
    for (void* p : mine) ak::pool_deallocate(p, 64, 8);
  });
  in_new_thread([&] {
    // Slabs of the class, past the starter slab: their blocks go to the keeper or stay here.
    std::vector<void*> more;
    for (int i = 0; i < 1000; ++i) (own ? more : given).push_back(ak::pool_allocate(kSize, 8));
    if (!own) phase = 1;
    wait_for(2);
    // Until this thread takes a new slab of the class: the blocks it had are out, or in the
    // keeper's bin.
    const std::size_t slabs = ak::pool_stats().slabs_in_use;
    while (ak::pool_stats().slabs_in_use == slabs) more.push_back(ak::pool_allocate(kSize, 8));
    phase = 3;
    wait_for(4);
    for (void* p : more) ak::pool_deallocate(p, kSize, 8);
  });
  keeper.join();
  ASSERT_GT(before, start);
  if (own)
    EXPECT_EQ(after, before);
  else
    EXPECT_LE(after, start);
}

TEST(Bins, AShortageSendsAnotherThreadsBlocksHomeFromABin) {
  if (ak::kDebugBuild) GTEST_SKIP() << "checked slabs keep their blocks out of the bins";
  keep_blocks_across_a_shortage(false);
}

TEST(Bins, AShortageLeavesABinOfTheThreadsOwnBlocks) {
  if (ak::kDebugBuild) GTEST_SKIP() << "checked slabs keep their blocks out of the bins";
  keep_blocks_across_a_shortage(true);
}

// A thread's bins grow to its bursts; the thread that next adopts its heap (thread exit hands heaps
// on) starts at the start limits, as with a new heap.
TEST(Bins, AThreadAdoptingAHeapStartsAtTheStartLimits) {
  if (ak::kDebugBuild) GTEST_SKIP() << "checked slabs keep their blocks out of the bins";
  const unsigned cls = ak::detail::class_for(kSize, 8);
  in_new_thread([cls] {
    std::vector<void*> v;
    for (int i = 0; i < 4000; ++i) v.push_back(ak::pool_allocate(kSize, 8));
    for (int round = 0; round < 4; ++round) {  // empties and refills: the limit grows
      for (void* p : v) ak::pool_deallocate(p, kSize, 8);
      for (void*& p : v) p = ak::pool_allocate(kSize, 8);
    }
    EXPECT_GT(ak::detail::pool_bin_limit(cls), ak::detail::pool_start_limit(cls));
    for (void* p : v) ak::pool_deallocate(p, kSize, 8);
  });
  const std::size_t heaps = ak::detail::heap_count();
  in_new_thread([cls, heaps] {
    // Blocks of another class until the starter slab runs out and the thread takes a heap.
    std::vector<void*> own;
    while (!ak::detail::tl_heap->is_real) own.push_back(ak::pool_allocate(64, 8));
    ASSERT_EQ(ak::detail::heap_count(), heaps);  // adopted, not new
    EXPECT_EQ(ak::detail::pool_bin_limit(cls), ak::detail::pool_start_limit(cls));
    for (void* p : own) ak::pool_deallocate(p, 64, 8);
  });
}

// A bin that fills after running empty swings through its whole limit between refills: the
// program's bursts are larger than it. Its first overflow doubles the limit and the bin keeps
// every block; the overflows after that send its most recent half home. (Halving a limit after
// three overflows instead sent a fifth of xmalloc's frees home and back.)
TEST(Bins, TheFirstOverflowAfterTheBinRanEmptyDoublesItsLimit) {
  if (ak::kDebugBuild) GTEST_SKIP() << "checked slabs keep their blocks out of the bins";
  in_new_thread([] {
    const unsigned cls = ak::detail::class_for(kSize, 8);
    std::vector<void*> v;
    // Fresh slabs hand out untouched blocks, so the bin stays empty; its limit grows each time
    // the bin runs dry (to 512 here), about as fast as this thread takes blocks, so its own can
    // never be twice the limit and one. Another thread's blocks make up the rest, freed last:
    // they join this thread's bin as its own do, but one past a full bin goes to its owner. (A
    // heap adopted from an earlier test has partly used slabs, whose short refills double the
    // limit faster: the loop stops while it can still double, and while half the doubled limit
    // is at most what one overflow sends, kMaxSentHome.)
    for (int i = 0; i < 600 && ak::detail::pool_bin_limit(cls) < ak::detail::kMaxSentHome; ++i)
      v.push_back(ak::pool_allocate(kSize, 8));
    const ak::detail::Bin& bin = ak::detail::tl_heap->bins[cls];
    const std::uint32_t limit = bin.limit;
    ASSERT_GE(limit, 64u);
    ASSERT_LE(limit, 4096u);                     // so it can double (bins stop at 8,192 blocks)
    ASSERT_LE(limit, ak::detail::kMaxSentHome);  // so its overflows send half of twice it
    std::vector<void*> other;
    std::thread([&] {
      while (v.size() + other.size() < 2 * limit + 1) other.push_back(ak::pool_allocate(kSize, 8));
    }).join();
    v.insert(v.begin(), other.begin(), other.end());  // freed last
    ASSERT_EQ(bin.limit, limit);
    ASSERT_LE(2 * limit + 1, v.size());
    // The shortages noted so far (the other thread's new slabs, or an earlier test's, whose heap
    // this thread may have adopted) are not this test's: answered at the overflow, they would
    // send the other thread's blocks home first (AShortageSendsAnotherThreadsBlocksHomeFromABin).
    ak::detail::tl_heap->seen_shortage = ak::detail::g_shortages.load();
    auto free_one = [&] {
      ak::pool_deallocate(v.back(), kSize, 8);
      v.pop_back();
    };
    while (bin.count < bin.limit) free_one();
    free_one();
    EXPECT_EQ(bin.limit, 2 * limit);
    EXPECT_EQ(bin.count, limit + 1);  // nothing sent home
    while (bin.count < bin.limit) free_one();
    free_one();
    EXPECT_EQ(bin.limit, 2 * limit);          // the next overflow keeps the limit
    EXPECT_EQ(bin.count, bin.limit / 2 + 1);  // and sends the most recent half home
    for (void* p : v) ak::pool_deallocate(p, kSize, 8);
  });
}

// However far a bin's limit has grown, an overflow sends at most kMaxSentHome blocks home: one
// free walks a bounded run (a teardown freeing a program's nodes in random order walked 4,096
// blocks in one free, 13-155 us, most of their lines out of cache).
TEST(Bins, AnOverflowSendsABoundedRunHome) {
  if (ak::kDebugBuild) GTEST_SKIP() << "checked slabs keep their blocks out of the bins";
  in_new_thread([] {
    const unsigned cls = ak::detail::class_for(kSize, 8);
    std::mt19937 rng(3);
    std::uint32_t most_sent = 0, largest_limit = 0;
    for (int round = 0; round < 10; ++round) {  // each round empties the bin: its limit doubles
      std::vector<void*> v;
      for (int i = 0; i < 20000; ++i) v.push_back(ak::pool_allocate(kSize, 8));
      const ak::detail::Bin& bin = ak::detail::tl_heap->bins[cls];  // the heap exists by now
      std::shuffle(v.begin(), v.end(), rng);  // scattered: the bin never closes
      for (void* p : v) {
        const std::uint32_t before = bin.count;
        ak::pool_deallocate(p, kSize, 8);
        if (bin.count <= before) most_sent = std::max(most_sent, before + 1 - bin.count);
        largest_limit = std::max(largest_limit, bin.limit);
      }
    }
    ASSERT_GE(largest_limit, 4 * ak::detail::kMaxSentHome);  // half of it would be more
    EXPECT_EQ(most_sent, ak::detail::kMaxSentHome);
  });
}

// 100,000 blocks of kSize from the pools, in a thread whose starter slab is made and trimmed:
// sets `before`, the slabs in use before them, and `busy`, the slabs they take.
std::vector<void*> allocate_many(std::size_t& before, std::size_t& busy) {
  ak::pool_deallocate(ak::pool_allocate(kSize, 8), kSize, 8);  // the starter slab is made
  ak::pool_trim();
  before = ak::pool_stats().slabs_in_use;
  std::vector<void*> v;
  for (int i = 0; i < 100000; ++i) v.push_back(ak::pool_allocate(kSize, 8));
  busy = ak::pool_stats().slabs_in_use - before;
  return v;
}

// Freed in allocation order, blocks go home a slab at a time: what the bin keeps at the end are
// blocks of a few slabs, and the rest of the slabs go back.
TEST(Bins, FreesInAllocationOrderLetSlabsGo) {
  in_new_thread([] {
    std::size_t before, busy;
    std::vector<void*> v = allocate_many(before, busy);
    for (void* p : v) ak::pool_deallocate(p, kSize, 8);
    EXPECT_LE(ak::pool_stats().slabs_in_use - before, busy / 8);
    ak::pool_trim();
    EXPECT_LE(ak::pool_stats().slabs_in_use, before + 1);  // at most the current slab stays
  });
}

// A refill from a reused slab carves at least 16 blocks of a large class, not one page's worth:
// a 4 KiB class carved a page at a time took a slow-path call per block, its bin never holding
// one. (Fresh slabs from the OS hand out untouched blocks one at a time, the bin empty.)
TEST(Bins, ARefillCarvesSeveralBlocksOfALargeClass) {
  if (ak::kDebugBuild) GTEST_SKIP() << "checked slabs keep their blocks out of the bins";
  constexpr std::size_t kLarge = 4096;
  ak::pool_set_purge_delay_ms(60'000);  // the cached slabs stay resident however slow the build
  in_new_thread([] {                    // leaves its emptied slabs cached, resident
    std::vector<void*> v;
    for (int i = 0; i < 300; ++i) v.push_back(ak::pool_allocate(kLarge, 8));
    for (void* p : v) ak::pool_deallocate(p, kLarge, 8);
  });
  in_new_thread([] {
    const unsigned cls = ak::detail::class_for(kLarge, 8);
    std::vector<void*> v;
    std::uint32_t most = 0;
    for (int i = 0; i < 300; ++i) {
      v.push_back(ak::pool_allocate(kLarge, 8));
      most = std::max(most, ak::detail::tl_heap->bins[cls].count);
    }
    EXPECT_GE(most, 8u);
    for (void* p : v) ak::pool_deallocate(p, kLarge, 8);
  });
  ak::pool_set_purge_delay_ms(1000);
}

// Freed in random order, blocks of every slab pass through the bin; what it keeps at the end
// pins a bounded number of slabs, and a trim sends even those home.
TEST(Bins, RandomOrderFreesLetSlabsGoAndATrimEmptiesTheBin) {
  in_new_thread([] {
    std::size_t before, busy;
    std::vector<void*> v = allocate_many(before, busy);
    ASSERT_GE(busy, 100000u * 208 / ak::detail::kSlabSize);
    std::shuffle(v.begin(), v.end(), std::mt19937(7));
    for (void* p : v) ak::pool_deallocate(p, kSize, 8);
    // The bin's limit shrank during the long run of frees; it pins at most that many slabs.
    EXPECT_LE(ak::pool_stats().slabs_in_use - before, busy / 4);
    ak::pool_trim();
    EXPECT_LE(ak::pool_stats().slabs_in_use, before + 1);  // at most the current slab stays
  });
}

// Grows this thread's bins of blocks of `sizes`, in that order, six rounds: every second block
// freed fills a bin and sends blocks home to slabs that stay in use; allocating them again runs
// the bin dry with slabs to refill from (its limit doubles); then everything is freed.
void grow_bins(std::initializer_list<std::size_t> sizes) {
  for (int round = 0; round < 6; ++round)
    for (const std::size_t size : sizes) {
      std::vector<void*> v;
      for (int i = 0; i < 1000; ++i) v.push_back(ak::pool_allocate(size, 8));
      for (std::size_t i = 0; i < v.size(); i += 2) ak::pool_deallocate(v[i], size, 8);
      for (std::size_t i = 0; i < v.size(); i += 2) v[i] = ak::pool_allocate(size, 8);
      for (void* p : v) ak::pool_deallocate(p, size, 8);
    }
}

// However many classes a thread's bins grow in, together they grow past their start limits by
// at most the heap's budget; a class that wants more takes it from the others.
TEST(Bins, GrownBinsTogetherStayWithinTheHeapsBudget) {
  if (ak::kDebugBuild) GTEST_SKIP() << "checked slabs keep their blocks out of the bins";
  in_new_thread([] {
    using namespace ak::detail;
    std::uint32_t start[kHeapClasses];
    for (unsigned c = 0; c < kHeapClasses; ++c) start[c] = pool_start_limit(c);
    grow_bins({16384, 8192, 4096, 2048, 1024});  // the largest grows first
    std::size_t grown = 0, held = 0, start_bytes = 0;
    for (unsigned c = 0; c < kHeapClasses; ++c) {
      const Bin& bin = tl_heap->bins[c];
      const std::uint32_t limit = pool_bin_limit(c);  // a closed bin's when it opens
      ASSERT_GE(limit, start[c]);
      ASSERT_LE(bin.count, limit);
      grown += std::size_t(limit - start[c]) * class_size(c);
      held += std::size_t(bin.count) * class_size(c);
      start_bytes += std::size_t(start[c]) * class_size(c);
    }
    EXPECT_EQ(grown, tl_heap->bin_bytes);
    EXPECT_LE(grown, kHeapBinBytes);
    EXPECT_GE(grown, kHeapBinBytes / 2);  // the budget, not the exercise, stopped the growth
    EXPECT_LE(held, kHeapBinBytes + start_bytes);
    // The class that grew first gave its growth up to the classes in use after it.
    EXPECT_LT(pool_bin_limit(class_of(16384)) * std::size_t(16384), kHeapBinBytes / 2);
    ak::pool_trim();
  });
}

// Many threads holding heaps share kAllBinBytes: each heap's bins grow by an equal share at most.
TEST(Bins, ManyThreadsShareOneBudgetForGrownBins) {
  if (ak::kDebugBuild) GTEST_SKIP() << "checked slabs keep their blocks out of the bins";
  constexpr int kOthers = 15;
  std::atomic<int> ready{0};
  std::atomic<bool> done{false};
  std::vector<std::thread> others;
  for (int i = 0; i < kOthers; ++i)
    others.emplace_back([&] {
      std::vector<void*> v;  // enough blocks of one class to leave the starter slab: a heap
      for (int j = 0; j < 200; ++j) v.push_back(ak::pool_allocate(kSize, 8));
      for (void* p : v) ak::pool_deallocate(p, kSize, 8);
      ready.fetch_add(1);
      while (!done.load()) std::this_thread::yield();
    });
  while (ready.load() < kOthers) std::this_thread::yield();
  in_new_thread([] {
    using namespace ak::detail;
    grow_bins({16384, 8192, 4096});
    // 16 heaps at least (the others and this one): a share of at most kAllBinBytes / 16.
    EXPECT_LE(tl_heap->bin_bytes, kAllBinBytes / (kOthers + 1));
    EXPECT_GE(tl_heap->bin_bytes, kMinHeapBinBytes / 2);  // the share, not the exercise, stopped it
    ak::pool_trim();
  });
  done.store(true);
  for (auto& t : others) t.join();
}

// A thread's exit sends its bins home: the slabs of a thread that freed everything go back.
// The 8-byte class has no freed tag, so its bin sends blocks home in a single walk that counts
// them: after runs of frees in allocation order and in random order, across many slabs, the bin's
// list holds exactly its count of distinct freed blocks, and every block comes back once.
TEST(Bins, TheUntaggedClassSendsExactlyItsMostRecentBlocksHome) {
  if (ak::kDebugBuild) GTEST_SKIP() << "checked slabs keep their blocks out of the bins";
  in_new_thread([] {
    constexpr std::size_t kTiny = 8, kCount = 30000;
    const unsigned cls = ak::detail::class_for(kTiny, 8);
    ASSERT_FALSE(ak::detail::class_has_tag(cls));
    std::vector<void*> v;
    for (std::size_t i = 0; i < kCount; ++i) v.push_back(ak::pool_allocate(kTiny, 8));
    // The first half freed in allocation order (runs of one slab), the rest shuffled.
    std::shuffle(v.begin() + kCount / 2, v.end(), std::mt19937(11));
    const std::set<void*> freed(v.begin(), v.end());
    ASSERT_EQ(freed.size(), kCount);
    for (void* p : v) ak::pool_deallocate(p, kTiny, 8);
    const ak::detail::Bin& bin = ak::detail::tl_heap->bins[cls];
    ASSERT_LE(bin.count, bin.limit);
    std::set<void*> in_bin;
    std::size_t listed = 0;
    for (ak::detail::PoolBlock* b = bin.free; b != nullptr && listed <= bin.count;
         b = ak::detail::link_of(b), ++listed) {
      EXPECT_TRUE(freed.count(b));
      in_bin.insert(b);
    }
    EXPECT_EQ(listed, bin.count);
    EXPECT_EQ(in_bin.size(), listed);
    std::set<void*> again;
    for (std::size_t i = 0; i < kCount; ++i) again.insert(ak::pool_allocate(kTiny, 8));
    EXPECT_EQ(again.size(), kCount);  // no block handed out twice
    for (void* p : again) ak::pool_deallocate(p, kTiny, 8);
  });
}

// The slab source's hook (liballockit starts its purger there, and pthread_create callocs the new
// thread's TLS vector) may allocate from the class whose bin sent the slab's blocks home. It runs
// once the heap is whole again. Run from inside the trim, it was handed the head of the bin being
// trimmed, whose count was cut before its chain: the block went home too and was handed out twice,
// and the emptied bin's count wrapped below zero (a real sh6bench run died of it).
std::vector<void*> g_hook_blocks;
void allocate_in_hook(std::size_t) {
  g_hook_blocks.push_back(ak::pool_allocate(kSize, 8));
}

TEST(Bins, TheCachedSlabHookMayAllocateFromTheClassBeingTrimmed) {
  if (ak::kDebugBuild) GTEST_SKIP() << "checked slabs keep their blocks out of the bins";
  in_new_thread([] {
    const unsigned cls = ak::detail::class_for(kSize, 8);
    std::vector<void*> v;
    for (int i = 0; i < 3000; ++i) v.push_back(ak::pool_allocate(kSize, 8));  // ten slabs
    g_hook_blocks.clear();
    const ak::detail::CacheHook before = ak::detail::slab_source_on_cache(allocate_in_hook);
    // Slabs empty as full bins send blocks home, and as the trim empties the bins.
    for (void* p : v) ak::pool_deallocate(p, kSize, 8);
    ak::pool_trim();
    ak::detail::slab_source_on_cache(before);
    ASSERT_FALSE(g_hook_blocks.empty());
    const std::set<void*> held(g_hook_blocks.begin(), g_hook_blocks.end());
    EXPECT_EQ(held.size(), g_hook_blocks.size());
    const ak::detail::Bin& bin = ak::detail::tl_heap->bins[cls];
    std::uint32_t listed = 0;
    for (ak::detail::PoolBlock* b = bin.free; b != nullptr && listed <= bin.count;
         b = ak::detail::link_of(b), ++listed)
      EXPECT_FALSE(held.count(b));
    EXPECT_EQ(listed, bin.count);
    std::set<void*> again;
    for (std::size_t i = 0; i < v.size(); ++i) {
      void* p = ak::pool_allocate(kSize, 8);
      EXPECT_FALSE(held.count(p)) << "a block the hook holds handed out again";
      again.insert(p);
    }
    EXPECT_EQ(again.size(), v.size());
    for (void* p : again) ak::pool_deallocate(p, kSize, 8);
    for (void* p : g_hook_blocks) ak::pool_deallocate(p, kSize, 8);
  });
}

TEST(Bins, ThreadExitEmptiesTheBins) {
  ak::pool_deallocate(ak::pool_allocate(kSize, 8), kSize, 8);  // the starter slab is made
  ak::pool_trim();
  const std::size_t before = ak::pool_stats().slabs_in_use;
  in_new_thread([] {
    std::vector<void*> v;
    for (int i = 0; i < 20000; ++i) v.push_back(ak::pool_allocate(kSize, 8));
    std::shuffle(v.begin(), v.end(), std::mt19937(9));
    for (void* p : v) ak::pool_deallocate(p, kSize, 8);
  });
  EXPECT_LE(ak::pool_stats().slabs_in_use, before + 1);
}

}  // namespace
