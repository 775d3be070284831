// Timeline: the global order, slots, and repairs of journals that lost events.
#include <gtest/gtest.h>

#include "trace/stats.hpp"
#include "trace/timeline.hpp"

namespace ak::trace {
namespace {

Event ev(Op op, uint64_t t, uint64_t a, uint64_t b, uint64_t result, uint32_t dur = 0) {
  Event e;
  e.op = op, e.time_ns = t, e.a = a, e.b = b, e.result = result, e.duration_ns = dur;
  return e;
}

Trace two_threads(std::vector<Event> t1, std::vector<Event> t2) {
  Trace t;
  t.threads.push_back({1, 11, std::move(t1), {}});
  t.threads.push_back({2, 12, std::move(t2), {}});
  t.events = t.threads[0].events.size() + t.threads[1].events.size();
  return t;
}

TEST(Timeline, AddressReusedAcrossThreadsGetsTwoSlots) {
  // Thread 2 frees 0x100 (entry at t=20) before thread 1 gets 0x100 again (return at t=30).
  Trace t = two_threads({ev(Op::kMalloc, 10, 8, 0, 0x100), ev(Op::kMalloc, 30, 8, 0, 0x100)},
                        {ev(Op::kFree, 20, 0x100, 0, 0)});
  Timeline tl = resolve(t);
  EXPECT_EQ(tl.slots, 2u);
  EXPECT_EQ(tl.per_thread[1][0].old_slot, 0u);
  EXPECT_EQ(tl.per_thread[0][1].slot, 1u);
  EXPECT_EQ(tl.cross_thread_frees, 1u);
  EXPECT_EQ(tl.problems.total(), 0u);
}

// A free that carries its block's resident pages (v5) gives the block's slot 1 + that count,
// and stats sums them; a free without leaves 0 (unknown).
TEST(Timeline, FreedBlocksKeepTheirResidentPages) {
  Event paged = ev(Op::kFree, 20, 0x100, 25, 0);
  paged.c = 1;
  Trace t = two_threads({ev(Op::kMalloc, 10, 1 << 20, 0, 0x100), paged,
                         ev(Op::kMalloc, 30, 1 << 20, 0, 0x200), ev(Op::kFree, 40, 0x200, 0, 0)},
                        {});
  Timeline tl = resolve(t);
  ASSERT_EQ(tl.slots, 2u);
  EXPECT_EQ(tl.slot_pages[0], 26u);
  EXPECT_EQ(tl.slot_pages[1], 0u);
  const TraceStats s = compute_stats(t, tl);
  EXPECT_EQ(s.paged_blocks, 1u);
  EXPECT_EQ(s.paged_span_pages, 256u);
  EXPECT_EQ(s.paged_resident_pages, 25u);
}

TEST(Timeline, ReturnStampReadBeforeAnotherThreadsFreeIsMatchedWithIt) {
  // Thread 1's malloc returns 0x100 stamped t=30, 40 ns before thread 2's free of it (t=70): the
  // return stamp (rdtsc) ran ahead of the load that found the block. The free came first.
  Trace t = two_threads({ev(Op::kMalloc, 10, 8, 0, 0x100), ev(Op::kMalloc, 30, 16, 0, 0x100),
                         ev(Op::kFree, 90, 0x100, 0, 0)},
                        {ev(Op::kFree, 70, 0x100, 0, 0)});
  Timeline tl = resolve(t);
  EXPECT_EQ(tl.problems.total(), 0u);
  EXPECT_EQ(tl.per_thread[1][0].old_slot, 0u);  // thread 2 freed the first block
  EXPECT_EQ(tl.per_thread[0][1].slot, 1u);
  EXPECT_EQ(tl.per_thread[0][2].old_slot, 1u);  // and thread 1 the second, its own
  EXPECT_EQ(tl.slot_bytes[1], 16u);
  // Beyond the slack (kStampSlackNs), a free is not moved: the journal lost one, as before.
  Trace far = two_threads({ev(Op::kMalloc, 10, 8, 0, 0x100), ev(Op::kMalloc, 30, 16, 0, 0x100)},
                          {ev(Op::kFree, 1'000'000, 0x100, 0, 0)});
  Timeline tf = resolve(far);
  EXPECT_EQ(tf.problems.reused_live, 1u);
  // Nor is a free by the same thread: its call order is known.
  Trace same = two_threads({ev(Op::kMalloc, 10, 8, 0, 0x100), ev(Op::kMalloc, 30, 16, 0, 0x100),
                            ev(Op::kFree, 70, 0x100, 0, 0)},
                           {});
  EXPECT_EQ(resolve(same).problems.reused_live, 1u);
}

// A call the recorder did not stamp (kUnstampedFlag): its time is its thread's previous stamp.
Event loose(Event e) {
  e.unstamped = true;
  return e;
}

TEST(Timeline, AnUnstampedMallocIsMatchedWithAFreeBeforeItsThreadsNextStamp) {
  // Thread 1 got 0x100 again in a call known only to lie between its stamps t=10 and t=5000;
  // thread 2 freed 0x100 at t=3000. The free came first.
  Trace t = two_threads({ev(Op::kMalloc, 10, 8, 0, 0x100), loose(ev(Op::kMalloc, 10, 16, 0, 0x100)),
                         ev(Op::kFree, 5000, 0x100, 0, 0)},
                        {ev(Op::kFree, 3000, 0x100, 0, 0)});
  Timeline tl = resolve(t);
  EXPECT_EQ(tl.problems.total(), 0u);
  EXPECT_EQ(tl.per_thread[1][0].old_slot, 0u);
  EXPECT_EQ(tl.per_thread[0][1].slot, 1u);
  EXPECT_EQ(tl.per_thread[0][2].old_slot, 1u);
  // A free after the thread's next stamp (and the slack) is another matter: a lost free.
  Trace late =
      two_threads({ev(Op::kMalloc, 10, 8, 0, 0x100), loose(ev(Op::kMalloc, 10, 16, 0, 0x100)),
                   ev(Op::kFree, 5000, 0x40, 0, 0)},
                  {ev(Op::kFree, 9000, 0x100, 0, 0)});
  EXPECT_EQ(resolve(late).problems.reused_live, 1u);
}

// Each thread's calls are in order already; the global order merges the threads. An address
// handed along six threads in an order that interleaves them (a seventh has no call), each
// freeing what another took, with stamps tied across threads, resolves with nothing to repair:
// a call taken out of its time order would free a block before it was taken.
TEST(Timeline, CallsOfManyThreadsMergeIntoTheirTimeOrder) {
  constexpr uint32_t kRounds = 60, kOrder[] = {0, 3, 1, 5, 2, 4};
  Trace t;
  for (uint32_t i = 0; i < 7; ++i) t.threads.push_back({i + 1, i + 11, {}, {}});
  std::vector<std::pair<uint32_t, size_t>> taken, freed;  // (thread, event) per round
  for (uint32_t r = 0; r < kRounds; ++r) {
    const uint32_t th = kOrder[r % 6], next = kOrder[(r + 1) % 6];
    auto& mine = t.threads[th].events;
    taken.push_back({th, mine.size()});
    mine.push_back(ev(Op::kMalloc, 100 * r, 8, 0, 0x100));
    auto& theirs = t.threads[next].events;
    freed.push_back({next, theirs.size()});
    theirs.push_back(ev(Op::kFree, 100 * r + 50, 0x100, 0, 0));
    mine.push_back(ev(Op::kMalloc, 100 * r + 50, 16, 0, 0x10000 + 16 * r));  // a tie, kept live
  }
  for (const auto& th : t.threads) t.events += th.events.size();
  const Timeline tl = resolve(t);
  EXPECT_EQ(tl.problems.total(), 0u);
  EXPECT_EQ(tl.cross_thread_frees, kRounds);
  for (uint32_t r = 0; r < kRounds; ++r)
    EXPECT_EQ(tl.per_thread[freed[r].first][freed[r].second].old_slot,
              tl.per_thread[taken[r].first][taken[r].second].slot)
        << r;
}

TEST(Timeline, AnUnstampedMallocWaitsForTheLastFreeOfItsAddressWithinItsStamps) {
  // Thread 2's malloc of 0x100 lies between t=20 and t=1000; meanwhile thread 3 freed thread 1's
  // block at 0x100 (t=100), took it again (t=200) and freed it (t=300). Thread 2 got it after
  // the last of those frees, and frees it itself at t=1000.
  Trace t;
  t.threads.push_back({1, 11, {ev(Op::kMalloc, 10, 8, 0, 0x100)}, {}});
  t.threads.push_back({2,
                       12,
                       {ev(Op::kMalloc, 20, 8, 0, 0x900), loose(ev(Op::kMalloc, 20, 8, 0, 0x100)),
                        ev(Op::kFree, 1000, 0x100, 0, 0)},
                       {}});
  t.threads.push_back({3,
                       13,
                       {ev(Op::kFree, 100, 0x100, 0, 0), ev(Op::kMalloc, 200, 8, 0, 0x100),
                        ev(Op::kFree, 300, 0x100, 0, 0)},
                       {}});
  t.events = 7;
  Timeline tl = resolve(t);
  EXPECT_EQ(tl.problems.total(), 0u);
  EXPECT_EQ(tl.per_thread[2][0].old_slot, tl.per_thread[0][0].slot);
  EXPECT_EQ(tl.per_thread[2][2].old_slot, tl.per_thread[2][1].slot);
  EXPECT_EQ(tl.per_thread[1][2].old_slot, tl.per_thread[1][1].slot);
}

TEST(Timeline, AnUnstampedMallocOfAFreeAddressFollowsAnotherThreadsUseOfItWithinItsStamps) {
  // Thread 1's malloc of 0x100 lies between t=10 and t=1000, and 0x100 is not live at t=10;
  // meanwhile thread 2 took 0x100 (t=100) and freed it (t=200). Thread 1 got it after that free.
  Trace t = two_threads({ev(Op::kMalloc, 10, 8, 0, 0x900), loose(ev(Op::kMalloc, 10, 16, 0, 0x100)),
                         ev(Op::kFree, 1000, 0x100, 0, 0)},
                        {ev(Op::kMalloc, 100, 8, 0, 0x100), ev(Op::kFree, 200, 0x100, 0, 0)});
  Timeline tl = resolve(t);
  EXPECT_EQ(tl.problems.total(), 0u);
  EXPECT_EQ(tl.per_thread[1][1].old_slot, tl.per_thread[1][0].slot);
  EXPECT_EQ(tl.per_thread[0][2].old_slot, tl.per_thread[0][1].slot);
  EXPECT_EQ(tl.slot_bytes[tl.per_thread[0][1].slot], 16u);
  EXPECT_EQ(tl.cross_thread_frees, 0u);
  // When the other thread's first half on the address is a free, it frees this call's block
  // (handed over): the call stands at its earliest.
  Trace handed =
      two_threads({ev(Op::kMalloc, 10, 8, 0, 0x900), loose(ev(Op::kMalloc, 10, 16, 0, 0x100)),
                   ev(Op::kMalloc, 1000, 8, 0, 0xa00)},
                  {ev(Op::kFree, 200, 0x100, 0, 0), ev(Op::kMalloc, 300, 8, 0, 0x100),
                   ev(Op::kFree, 400, 0x100, 0, 0)});
  Timeline th = resolve(handed);
  EXPECT_EQ(th.problems.total(), 0u);
  EXPECT_EQ(th.per_thread[1][0].old_slot, th.per_thread[0][1].slot);
  EXPECT_EQ(th.cross_thread_frees, 1u);
}

TEST(Timeline, AnUnstampedFreeOfALiveAddressThatAnotherThreadFreesFirstFreesTheNextBlock) {
  // Thread 2's free of 0x100 lies between t=20 and t=1000, when 0x100 holds thread 1's block;
  // but thread 1 frees that block itself (t=100, stamped) and takes 0x100 again (t=200): thread
  // 2's free is of that second block, handed to it.
  Trace t = two_threads({ev(Op::kMalloc, 10, 8, 0, 0x100), ev(Op::kFree, 100, 0x100, 0, 0),
                         ev(Op::kMalloc, 200, 16, 0, 0x100)},
                        {ev(Op::kMalloc, 20, 8, 0, 0x900), loose(ev(Op::kFree, 20, 0x100, 0, 0)),
                         ev(Op::kMalloc, 1000, 8, 0, 0xa00)});
  Timeline tl = resolve(t);
  EXPECT_EQ(tl.problems.total(), 0u);
  EXPECT_EQ(tl.per_thread[0][1].old_slot, tl.per_thread[0][0].slot);
  EXPECT_EQ(tl.per_thread[1][1].old_slot, tl.per_thread[0][2].slot);
  EXPECT_EQ(tl.cross_thread_frees, 1u);
  EXPECT_GE(tl.slot_died_ns[tl.per_thread[0][2].slot], tl.slot_born_ns[tl.per_thread[0][2].slot]);
}

TEST(Timeline, AnUnstampedFreeIsMatchedWithTheMallocItFollowed) {
  // Thread 2's free of 0x300 carries its previous stamp, t=10; thread 1's malloc returned 0x300
  // at t=100, before thread 2's next stamp (t=400). The malloc came first.
  Trace t = two_threads({ev(Op::kMalloc, 100, 8, 0, 0x300)},
                        {ev(Op::kMalloc, 10, 8, 0, 0xa00), loose(ev(Op::kFree, 10, 0x300, 0, 0)),
                         ev(Op::kMalloc, 400, 8, 0, 0xb00)});
  Timeline tl = resolve(t);
  EXPECT_EQ(tl.problems.total(), 0u);
  EXPECT_EQ(tl.per_thread[1][1].old_slot, tl.per_thread[0][0].slot);
  EXPECT_EQ(tl.cross_thread_frees, 1u);
  // With the malloc after that stamp, the free is of an address not live: dropped, as before.
  Trace late = two_threads({ev(Op::kMalloc, 9000, 8, 0, 0x300)},
                           {ev(Op::kMalloc, 10, 8, 0, 0xa00), loose(ev(Op::kFree, 10, 0x300, 0, 0)),
                            ev(Op::kMalloc, 400, 8, 0, 0xb00)});
  EXPECT_EQ(resolve(late).problems.unknown_frees, 1u);
}

TEST(Timeline, ReallocReleasesAtEntryAndAcquiresAtReturn) {
  // realloc on thread 1 runs from t=10 to t=50 and moves 0x100 to 0x200; thread 2 gets 0x100
  // at t=40, after the realloc released it.
  Trace t =
      two_threads({ev(Op::kMalloc, 5, 8, 0, 0x100), ev(Op::kRealloc, 50, 0x100, 64, 0x200, 40)},
                  {ev(Op::kMalloc, 40, 8, 0, 0x100)});
  Timeline tl = resolve(t);
  EXPECT_EQ(tl.problems.total(), 0u);
  EXPECT_EQ(tl.per_thread[0][1].old_slot, 0u);
  EXPECT_EQ(tl.per_thread[1][0].slot, 1u);
  EXPECT_EQ(tl.per_thread[0][1].slot, 2u);
}

TEST(Timeline, CallOrderWinsOverStampsWithinAThread) {
  // free's entry stamp (t=95) read before the preceding malloc's return stamp (t=100).
  Trace t = two_threads({ev(Op::kMalloc, 100, 8, 0, 0x100), ev(Op::kFree, 95, 0x100, 0, 0)}, {});
  Timeline tl = resolve(t);
  EXPECT_EQ(tl.problems.total(), 0u);
  EXPECT_EQ(tl.per_thread[0][1].old_slot, 0u);
  EXPECT_EQ(tl.peak_live_count, 1u);
}

TEST(Timeline, DamagedJournalsAreRepairedAndCounted) {
  Trace t = two_threads({ev(Op::kMalloc, 10, 8, 0, 0x100), ev(Op::kMalloc, 20, 8, 0, 0x100),
                         ev(Op::kFree, 30, 0x999, 0, 0), ev(Op::kRealloc, 40, 0x777, 16, 0x300),
                         ev(Op::kMalloc, 50, 1ull << 50, 0, 0), ev(Op::kRealloc, 60, 0x300, 0, 0)},
                        {});
  Timeline tl = resolve(t);
  EXPECT_EQ(tl.problems.reused_live, 1u);  // 0x100 returned twice: first block freed first
  EXPECT_EQ(tl.per_thread[0][1].repair_slot, 0u);
  EXPECT_EQ(tl.problems.unknown_frees, 1u);     // 0x999
  EXPECT_EQ(tl.problems.unknown_reallocs, 1u);  // 0x777: replayed as an allocation
  EXPECT_EQ(tl.per_thread[0][3].slot, 2u);
  EXPECT_EQ(tl.problems.failed_allocs, 1u);     // the 2^50 malloc
  EXPECT_EQ(tl.per_thread[0][5].old_slot, 2u);  // realloc(p, 0) frees, as in glibc
  TraceStats s = compute_stats(t, tl);
  EXPECT_EQ(s.leaked_blocks, 1u);
  EXPECT_EQ(s.leaked_bytes, 8u);
  EXPECT_EQ(s.calls[static_cast<int>(Op::kMalloc)], 3u);
}

TEST(Stats, CountsSizesAndLifetimes) {
  Trace t = two_threads({ev(Op::kMalloc, 0, 100, 0, 0x100), ev(Op::kCalloc, 10, 4, 25, 0x200),
                         ev(Op::kFree, 1000, 0, 0, 0)},
                        {ev(Op::kFree, 500, 0x100, 0, 0)});
  TraceStats s = compute_stats(t, resolve(t));
  EXPECT_EQ(s.free_null, 1u);
  EXPECT_EQ(s.calls[static_cast<int>(Op::kFree)], 2u);
  EXPECT_EQ(s.total_bytes, 200u);
  EXPECT_EQ(s.peak_live_bytes, 200u);
  EXPECT_EQ(s.cross_thread_frees, 1u);
  EXPECT_EQ(s.lifetimes.counts[1], 1u);  // 500 ns: "<1us"
  EXPECT_NE(stats_json(s).find("\"allocations\": 2"), std::string::npos);
}

}  // namespace
}  // namespace ak::trace
