// The large blocks' arenas (src/malloc/large.cpp): each thread allocates from its own arena's
// cache, a freed block goes back to the arena it came from whichever thread frees it, and the
// calls that see every cache (stats, trim) see every arena. Each test runs in a fresh process,
// where the threads take the arenas in turn from the first.
#include <cstring>
#include <thread>

#include <gtest/gtest.h>

#include "allockit/allockit.h"
#include "fresh_process.hpp"

namespace {

constexpr std::size_t kMiB = std::size_t(1) << 20;

// Frees a written 8 MiB block: the first free of that size is sealed, and the sealing bar
// (freed_guard.hpp) rises past it, so the smaller blocks freed after it are cached resident.
void raise_the_sealing_bar() {
  auto* big = static_cast<char*>(ak_malloc(8 * kMiB));
  std::memset(big, 1, 8 * kMiB);
  ak_free(big);
}

char* written_block(std::size_t bytes) {
  auto* p = static_cast<char*>(ak_malloc(bytes));
  std::memset(p, 2, bytes);
  return p;
}

std::size_t large_cached_bytes() {
  ak_stats s{};
  ak_stats_get(&s);
  return s.large_cached_bytes;
}

// A producer hands its buffers to a consumer that frees them: the producer's next buffer is the
// one it made before, its pages resident, not a fresh mapping while the consumer's arena fills.
TEST(LargeArenas, ABlockFreedByAnotherThreadGoesBackToItsOwnersArena) {
  ak::testing::in_fresh_process([] {
    raise_the_sealing_bar();
    char* p = written_block(3 * kMiB);
    std::thread([p] { ak_free(p); }).join();
    char* q = written_block(3 * kMiB);
    REQUIRE(q == p, 1);
    ak_free(q);
  });
}

// Two threads allocate from arenas of their own: a block one of them freed is not the other's
// next block (each would take the other's lock at every call otherwise).
TEST(LargeArenas, EachThreadAllocatesFromItsOwnArena) {
  ak::testing::in_fresh_process([] {
    raise_the_sealing_bar();
    char* p = written_block(3 * kMiB);
    ak_free(p);
    char* q = nullptr;
    std::thread([&q] { q = written_block(3 * kMiB); }).join();
    REQUIRE(q != nullptr && q != p, 1);
    char* r = written_block(3 * kMiB);  // this thread's own freed block
    REQUIRE(r == p, 2);
    ak_free(q);
    ak_free(r);
  });
}

// Blocks freed in two arenas are counted once each, and a trim returns both.
TEST(LargeArenas, StatsAndTrimSeeEveryArena) {
  ak::testing::in_fresh_process([] {
    raise_the_sealing_bar();
    ak_malloc_trim(0);
    REQUIRE(large_cached_bytes() == 0, 1);
    ak_free(written_block(2 * kMiB));
    const std::size_t one = large_cached_bytes();
    REQUIRE(one >= 2 * kMiB, 2);
    std::thread([] { ak_free(written_block(2 * kMiB)); }).join();
    REQUIRE(large_cached_bytes() >= one + 2 * kMiB, 3);
    ak_malloc_trim(0);
    REQUIRE(large_cached_bytes() == 0, 4);
  });
}

}  // namespace
