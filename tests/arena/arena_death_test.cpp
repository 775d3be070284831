// Markers that cannot be honoured abort with a clear message; in ASan builds a use after reset
// is reported by ASan itself (debug mode poisons freed memory).
#include <gtest/gtest.h>

#include "allockit/arena.hpp"
#include "core/core.hpp"

TEST(ArenaDeathTest, MarkerFromAnotherArena) {
  ak::Arena a({.name = "frame"}), b({.name = "request"});
  a.allocate(8);
  auto m = a.mark();
  EXPECT_DEATH(b.rewind(m), "arena 'request': rewind to a marker from another arena");
}

TEST(ArenaDeathTest, MarkerInvalidatedByReset) {
  ak::Arena a({.name = "frame"});
  a.allocate(8);
  auto m = a.mark();
  a.reset();
  EXPECT_DEATH(a.rewind(m), "arena 'frame': rewind to a marker invalidated by reset");
}

TEST(ArenaDeathTest, MarkerInvalidatedByEarlierRewind) {
  ak::Arena a({.name = "frame"});
  a.allocate(8);
  auto early = a.mark();
  a.allocate(8);
  auto late = a.mark();
  a.rewind(early);
  EXPECT_DEATH(a.rewind(late), "past the current position");
}

#if AK_ASAN
TEST(ArenaDeathTest, UseAfterResetIsCaughtByAsan) {
  ak::Arena a({.debug = true});
  int* p = a.make<int>(7);
  a.reset();
  EXPECT_DEATH(*static_cast<volatile int*>(p) = 1, "use-after-poison");
}

TEST(ArenaDeathTest, UseAfterRewindIsCaughtByAsan) {
  ak::Arena a({.debug = true});
  a.allocate(64);
  auto m = a.mark();
  auto* p = static_cast<char*>(a.allocate(64));
  a.rewind(m);
  EXPECT_DEATH(static_cast<volatile char*>(p)[10] = 1, "use-after-poison");
}

TEST(ArenaDeathTest, OverrunPastTheLatestAllocationIsCaughtByAsan) {
  ak::Arena a({.debug = true});
  auto* p = static_cast<char*>(a.allocate(32, 8));
  EXPECT_DEATH(static_cast<volatile char*>(p)[40] = 1, "use-after-poison");
}
#endif
