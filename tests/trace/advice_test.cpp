// Site advice: each pattern is recognised on a hand-built journal, the routing marks the right
// slots (an arena reset only where a group's last block dies), nothing unsafe is routed, and a
// routed plan carries its routes and flags.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>

#include "replay/advice.hpp"
#include "replay/build_plan.hpp"
#include "trace/journal.hpp"

namespace ak::replay {
namespace {

using trace::Event;
using trace::Op;

Event ev(Op op, uint64_t t, uint64_t a, uint64_t b, uint64_t result) {
  Event e;
  e.op = op, e.time_ns = t, e.a = a, e.b = b, e.result = result;
  return e;
}

// Stack 1: 20 groups of 5 blocks, each group freed whole. Stack 2: 200 fixed 40-byte blocks, 20
// live at a time. Stack 3: 150 temporaries of varied sizes. Stack 4: 120 32-byte blocks freed by
// thread 2. Stack 5: 110 realloc growth steps.
std::string write_patterns() {
  const std::string path = ::testing::TempDir() + "/advice" + std::to_string(getpid()) + ".akj";
  trace::JournalWriter w(path, {{"command", "patterns"}}, false);
  uint64_t t = 1, addr = 0x100000;
  for (int g = 0; g < 20; ++g) {
    uint64_t first = addr;
    for (int i = 0; i < 5; ++i) w.add(1, 1, ev(Op::kMalloc, t++, 24 + 8 * i, 0, addr += 0x100), 1);
    for (int i = 0; i < 5; ++i) w.add(1, 1, ev(Op::kFree, t++, first + 0x100 * (i + 1), 0, 0));
  }
  std::vector<uint64_t> live;
  for (int i = 0; i < 200; ++i) {
    w.add(1, 1, ev(Op::kMalloc, t++, 40, 0, addr += 0x100), 2);
    live.push_back(addr);
    if (live.size() > 20) {
      w.add(1, 1, ev(Op::kFree, t++, live.front(), 0, 0));
      live.erase(live.begin());
    }
  }
  for (uint64_t p : live) w.add(1, 1, ev(Op::kFree, t++, p, 0, 0));
  for (int i = 0; i < 150; ++i) {
    w.add(1, 1, ev(Op::kMalloc, t++, 64 + 32 * (i % 20), 0, addr += 0x1000), 3);
    w.add(1, 1, ev(Op::kFree, t++, addr, 0, 0));
  }
  std::vector<uint64_t> handed;
  for (int i = 0; i < 120; ++i) {
    w.add(1, 1, ev(Op::kMalloc, t++, 32, 0, addr += 0x100), 4);
    handed.push_back(addr);
  }
  for (uint64_t p : handed) w.add(2, 2, ev(Op::kFree, t++, p, 0, 0));
  for (int i = 0; i < 10; ++i) {
    uint64_t p = 0;
    for (int k = 0; k < 11; ++k) {
      const uint64_t next = addr += 0x10000;
      w.add(1, 1, ev(Op::kRealloc, t++, p, 64u << k, next), 5);
      p = next;
    }
    w.add(1, 1, ev(Op::kFree, t++, p, 0, 0));
  }
  const uint64_t f[] = {0x1000, 0x2000, 0x3000, 0x4000, 0x5000};
  for (uint32_t id = 1; id <= 5; ++id) w.add_stack(id, f + id - 1, 1);
  w.finish();
  return path;
}

const SiteAdvice& site(const Advice& a, const char* name) {
  for (const SiteAdvice& s : a.sites)
    if (s.site == name) return s;
  ADD_FAILURE() << "no site " << name;
  return a.sites.front();
}

TEST(Advice, RecognisesEachPatternAndRoutesOnlyWhatIsSafe) {
  const std::string path = write_patterns();
  trace::Trace t = trace::load_trace(path);
  trace::Timeline tl = trace::resolve(t);
  trace::Symbolizer none(std::vector<trace::Module>{});  // sites read ?+0xADDR-1
  const Advice a = advise(t, tl, none);
  ASSERT_EQ(a.sites.size(), 5u);
  const SiteAdvice& groups = site(a, "?+0xfff");
  EXPECT_EQ(groups.pattern, Pattern::kGroups);
  EXPECT_EQ(groups.groups, 20u);
  EXPECT_DOUBLE_EQ(groups.mean_group, 5.0);
  const SiteAdvice& pool = site(a, "?+0x1fff");
  EXPECT_EQ(pool.pattern, Pattern::kFixedSize);
  EXPECT_EQ(pool.max_size, 40u);
  const SiteAdvice& temps = site(a, "?+0x2fff");
  EXPECT_EQ(temps.pattern, Pattern::kTemporaries);
  const SiteAdvice& handoff = site(a, "?+0x3fff");
  EXPECT_EQ(handoff.pattern, Pattern::kFixedSize);
  EXPECT_EQ(handoff.route, 0);  // freed by another thread: never routed
  EXPECT_NE(handoff.not_routed.find("another thread"), std::string::npos);
  const SiteAdvice& growth = site(a, "?+0x4fff");
  EXPECT_EQ(growth.pattern, Pattern::kGrowth);
  EXPECT_EQ(growth.route, 0);
  EXPECT_EQ(growth.max_size, 64u << 10);

  ASSERT_EQ(a.routing.routes.size(), 3u);
  EXPECT_EQ(a.routing.routes[groups.route - 1].kind, kRouteArena);
  EXPECT_EQ(a.routing.routes[pool.route - 1].kind, kRoutePool);
  EXPECT_EQ(a.routing.routes[pool.route - 1].block_size, 48u);
  // Resets: one per group (its last block), one per temporary; none elsewhere.
  uint64_t resets = 0, routed = 0;
  for (uint32_t s = 0; s < tl.slots; ++s) {
    resets += a.routing.reset_after_free[s];
    routed += a.routing.slot_route[s] != 0;
    if (a.routing.reset_after_free[s]) {
      EXPECT_TRUE(a.routing.slot_route[s] == groups.route ||
                  a.routing.slot_route[s] == temps.route);
    }
  }
  EXPECT_EQ(resets, 20u + 150u);
  EXPECT_EQ(routed, 100u + 200u + 150u);
  std::remove(path.c_str());
}

TEST(Advice, ARoutedPlanCarriesItsRoutesAndFlags) {
  const std::string path = write_patterns();
  trace::Trace t = trace::load_trace(path);
  trace::Timeline tl = trace::resolve(t);
  trace::Symbolizer none(std::vector<trace::Module>{});
  const Advice a = advise(t, tl, none);
  const std::string plan = path + ".plan";
  std::vector<uint16_t> plain_routes, routed_routes;
  write_plan(t, tl, plan + "0", &a.routing, false, &plain_routes);
  write_plan(t, tl, plan, &a.routing, true, &routed_routes);
  EXPECT_EQ(plain_routes, routed_routes);  // the same ops in the same order
  std::ifstream f(plan, std::ios::binary);
  std::vector<char> bytes{std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
  PlanHeader h;
  std::memcpy(&h, bytes.data(), sizeof h);
  EXPECT_EQ(h.routes, 3u);
  const auto* ops = reinterpret_cast<const PlanOp*>(bytes.data() + sizeof h + 8 * h.threads +
                                                    sizeof(PlanRoute) * h.routes);
  ASSERT_EQ(bytes.size(),
            sizeof h + 8 * h.threads + sizeof(PlanRoute) * h.routes + sizeof(PlanOp) * h.ops);
  uint64_t flagged = 0, resets = 0;
  for (uint64_t i = 0; i < h.ops; ++i) {
    EXPECT_EQ((ops[i].flags & kRouted) != 0, routed_routes[i] != 0) << i;
    if (ops[i].flags & kRouted) {
      EXPECT_EQ(ops[i].route, routed_routes[i]);
    }
    flagged += (ops[i].flags & kRouted) != 0;
    resets += (ops[i].flags & kResetAfter) != 0;
  }
  EXPECT_EQ(flagged, 2u * (100 + 200 + 150));  // each routed block's allocation and free
  EXPECT_EQ(resets, 170u);
  std::remove(plan.c_str());
  std::remove((plan + "0").c_str());
  std::remove(path.c_str());
}

// The replay worker's check: a routed plan whose arena reset would free a live block stops the
// replay with a message; the advised plan replays and counts every allocation and free.
TEST(Advice, TheWorkerStopsAtAResetOfALiveBlock) {
  const std::string worker = std::string(AK_BINARY_DIR) + "/allockit-replay";
  const std::string lib = std::string(AK_BINARY_DIR) + "/src/liballockit-prefixed.so";
  if (access(worker.c_str(), X_OK) != 0 || access(lib.c_str(), R_OK) != 0)
    GTEST_SKIP() << "no replay worker in this build (sanitizer builds have none)";
  const std::string path = write_patterns();
  trace::Trace t = trace::load_trace(path);
  trace::Timeline tl = trace::resolve(t);
  trace::Symbolizer none(std::vector<trace::Module>{});
  Advice a = advise(t, tl, none);
  const std::string dir = path + ".out";
  mkdir(dir.c_str(), 0755);
  const std::string run = "ALLOCKIT_REPLAY_ROUTES=" + lib + " ALLOCKIT_REPLAY_CHECK=1 " + worker +
                          " " + path + ".plan " + dir + " 0 none 2> " + dir + "/err";
  write_plan(t, tl, path + ".plan", &a.routing, true);
  ASSERT_EQ(std::system(run.c_str()), 0);
  std::ifstream w(dir + "/worker.json");
  const std::string json{std::istreambuf_iterator<char>(w), std::istreambuf_iterator<char>()};
  EXPECT_NE(json.find("\"allocs\": " + std::to_string(tl.slots)), std::string::npos) << json;
  // Route the 40-byte site (20 blocks live at a time) to an arena reset at its first free.
  const uint16_t pool = site(a, "?+0x1fff").route;
  a.routing.routes[pool - 1] = {kRouteArena, 16, 0};
  for (uint32_t s = 0; s < tl.slots; ++s)
    if (a.routing.slot_route[s] == pool) {
      a.routing.reset_after_free[s] = 1;
      break;
    }
  write_plan(t, tl, path + ".plan", &a.routing, true);
  EXPECT_NE(std::system(run.c_str()), 0);
  std::ifstream e(dir + "/err");
  const std::string err{std::istreambuf_iterator<char>(e), std::istreambuf_iterator<char>()};
  EXPECT_NE(err.find("an arena reset would free blocks still live"), std::string::npos) << err;
  std::system(("rm -rf " + dir + " " + path + "*").c_str());
}

}  // namespace
}  // namespace ak::replay
