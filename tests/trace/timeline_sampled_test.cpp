// Timeline, differential: a simulated multi-threaded program's journal with every call stamped
// (its true order) against the same journal with most stamps dropped, as the recorder drops them
// (sampled_stamp). Resolving the second must pair nearly every free as the first does.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <utility>
#include <vector>

#include "trace/timeline.hpp"

namespace ak::trace {
namespace {

constexpr uint64_t kTickNs = 2'000'000;  // the memory sampler's period
constexpr uint32_t kStampEvery = 8;      // one plain call in 8 keeps its stamp
constexpr uint32_t kClasses = 16;        // size classes, each with its own free-list

// A program of `threads` threads on a shared clock, each with its own cache of freed addresses
// (LIFO, as glibc's tcache): a free goes to the freeing thread's cache, so blocks freed by another
// thread move between threads and come back at other threads' allocations. Threads take turns in
// bursts of calls (time slices, a GIL), and now and then block for up to `max_block_ns` (a join,
// a wait for the GIL), which leaves their next calls far from their last stamp.
Trace simulate(uint32_t seed, uint32_t threads, uint32_t calls, uint64_t max_block_ns) {
  std::mt19937_64 rng(seed);
  Trace t;
  for (uint32_t i = 0; i < threads; ++i) t.threads.push_back({i + 1, 100 + i, {}, {}});
  std::vector<std::vector<std::vector<uint64_t>>> cache(
      threads, std::vector<std::vector<uint64_t>>(kClasses));
  std::vector<std::vector<uint64_t>> live(threads);  // each thread's blocks
  std::vector<uint64_t> blocked_until(threads, 0);
  uint64_t now = 1'000'000, next_address = 0x10000;
  uint32_t th = 0, burst = 0;
  for (uint32_t n = 0; n < calls; ++n) {
    now += 20 + rng() % 200;
    if (burst == 0) {  // the next thread's turn
      th = static_cast<uint32_t>(rng() % threads);
      for (uint32_t tries = 0; blocked_until[th] > now && tries < threads; ++tries)
        th = (th + 1) % threads;
      now = std::max(now, blocked_until[th]);
      burst = 1 + static_cast<uint32_t>(rng() % 64);
      if (rng() % 8 == 0) blocked_until[th] = now + rng() % max_block_ns;
    }
    --burst;
    Event e;
    e.time_ns = now;
    if (live[th].size() < 256 && (live[th].empty() || rng() % 2 == 0)) {
      uint64_t address;
      const uint32_t c = static_cast<uint32_t>(rng() % kClasses);
      if (!cache[th][c].empty()) {
        address = cache[th][c].back();
        cache[th][c].pop_back();
      } else {
        address = (next_address += 1024) + c;
      }
      e.op = Op::kMalloc, e.a = 16 * (c + 1), e.result = address;
      // One block in eight is handed to another thread, which frees it.
      live[rng() % 8 == 0 ? rng() % threads : th].push_back(address);
    } else {
      auto& mine = live[th];
      const size_t pick = mine.size() - 1 - rng() % std::min<size_t>(mine.size(), 16);
      e.op = Op::kFree, e.a = mine[pick];
      cache[th][mine[pick] % 1024].push_back(mine[pick]);
      mine.erase(mine.begin() + static_cast<long>(pick));
    }
    t.threads[th].events.push_back(e);
    ++t.events;
  }
  for (uint64_t s = 1'000'000; s <= now + kTickNs; s += kTickNs) t.rss.push_back({s, 0, 0, 0, 0});
  return t;
}

// The journal the recorder writes with sampled stamps: a call keeps its stamp when it is the
// first of 8 or the first after a memory sample; the others carry their thread's previous stamp.
Trace drop_stamps(Trace t) {
  for (ThreadEvents& th : t.threads) {
    uint64_t previous = 0;
    uint32_t left = 0;
    size_t tick_seen = 0;
    for (Event& e : th.events) {
      const size_t tick = static_cast<size_t>(
          std::upper_bound(t.rss.begin(), t.rss.end(), e.time_ns,
                           [](uint64_t v, const RssSample& r) { return v < r.time_ns; }) -
          t.rss.begin());
      if (left == 0 || tick != tick_seen) {
        left = kStampEvery - 1, tick_seen = tick, previous = e.time_ns;
        continue;
      }
      --left;
      e.unstamped = true;
      e.time_ns = previous;
    }
  }
  return t;
}

// The releases that `tl` pairs with another allocation than `exact` does (or with none).
uint64_t differing(const Timeline& exact, const Timeline& tl) {
  auto births = [](const Timeline& x) {
    std::vector<std::pair<uint32_t, uint32_t>> born(x.slots);
    for (uint32_t th = 0; th < x.per_thread.size(); ++th)
      for (uint32_t i = 0; i < x.per_thread[th].size(); ++i)
        if (x.per_thread[th][i].slot != kNoSlot) born[x.per_thread[th][i].slot] = {th, i};
    return born;
  };
  const auto a = births(exact), b = births(tl);
  uint64_t n = 0;
  for (uint32_t th = 0; th < exact.per_thread.size(); ++th)
    for (uint32_t i = 0; i < exact.per_thread[th].size(); ++i) {
      const uint32_t sa = exact.per_thread[th][i].old_slot, sb = tl.per_thread[th][i].old_slot;
      if (sa != kNoSlot && (sb == kNoSlot || a[sa] != b[sb])) ++n;
    }
  return n;
}

// A fully stamped journal pairs every free exactly (the simulation's truth). With 7 stamps in 8
// dropped, a thread that blocked leaves calls of unknown time while other threads reuse the same
// addresses: where two threads' spans overlap on one address, more than one order fits the
// stamps, and the resolver picks one. What it must keep small: pairings that differ from the
// truth, and repairs (a call that fits no order it found). With one block in eight freed by
// another thread and 16 size classes, both are far rarer than in this simulation's worst case.
TEST(TimelineSampled, DroppedStampsPairFreesAsTheFullJournalDoes) {
  uint64_t calls = 0, frees = 0, differ = 0, repaired = 0;
  for (uint32_t seed = 1; seed <= 12; ++seed) {
    const Trace full = simulate(seed, 2 + seed % 3, 60'000, seed % 2 ? 400'000 : 3'000'000);
    const Timeline exact = resolve(full);
    ASSERT_EQ(exact.problems.total(), 0u) << "seed " << seed;
    const Trace sampled = drop_stamps(full);
    uint64_t dropped = 0;
    for (const ThreadEvents& th : sampled.threads)
      for (const Event& e : th.events) dropped += e.unstamped;
    ASSERT_GT(dropped, full.events * 3 / 4) << "seed " << seed;
    const Timeline tl = resolve(sampled);
    calls += full.events;
    for (const auto& per : exact.per_thread)
      for (const Resolved& r : per) frees += r.old_slot != kNoSlot;
    differ += differing(exact, tl);
    repaired += tl.problems.total();
  }
  EXPECT_LE(differ * 1000, frees) << differ << " of " << frees << " frees paired otherwise";
  EXPECT_LE(repaired * 20000, calls) << repaired << " of " << calls << " calls repaired";
}

}  // namespace
}  // namespace ak::trace
