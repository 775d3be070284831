// The large-block page heap (src/malloc/large_cache.hpp) on its own, and its effect through
// ak_malloc: reuse without page faults, split and merge, growth by moving pages, calloc getting
// emptied pages, the resident budget, and the purge that returns everything.
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "allockit/allockit.h"
#include "malloc/large_cache.hpp"
#include "os/os.hpp"

namespace {

using ak::detail::LargeCache;
constexpr std::size_t kMiB = std::size_t(1) << 20;

std::size_t resident_pages(const void* p, std::size_t bytes) {
  const std::size_t page = std::size_t(sysconf(_SC_PAGESIZE));
  auto* start = reinterpret_cast<char*>(reinterpret_cast<std::uintptr_t>(p) & ~(page - 1));
  std::vector<unsigned char> vec(bytes / page);
  EXPECT_EQ(mincore(start, vec.size() * page, vec.data()), 0);
  std::size_t n = 0;
  for (unsigned char v : vec) n += v & 1;
  return n;
}

char* written_mapping(std::size_t bytes, char fill) {
  auto* p = static_cast<char*>(ak::os::map(bytes, 4096));
  std::memset(p, fill, bytes);
  return p;
}

TEST(LargeCache, TakeSplitsAndLeavesTheRestCached) {
  LargeCache c;
  char* base = written_mapping(8 * kMiB, 'a');
  c.put(base, 8 * kMiB, false);
  const LargeCache::Taken t = c.take(3 * kMiB, false);
  EXPECT_EQ(t.base, base);
  EXPECT_EQ(t.bytes, 3 * kMiB);
  EXPECT_FALSE(t.zeroed);
  EXPECT_EQ(c.bytes(), 5 * kMiB);
  const LargeCache::Taken rest = c.take(5 * kMiB, false);
  EXPECT_EQ(rest.base, base + 3 * kMiB);
  EXPECT_EQ(c.bytes(), 0u);
  ak::os::release(base, 8 * kMiB);
}

TEST(LargeCache, NeighboursMergeIntoOneRange) {
  LargeCache c;
  char* base = written_mapping(6 * kMiB, 'b');
  c.put(base + 4 * kMiB, 2 * kMiB, false);
  c.put(base, 2 * kMiB, false);
  c.put(base + 2 * kMiB, 2 * kMiB, false);  // joins both
  const LargeCache::Taken t = c.take(6 * kMiB, false);
  EXPECT_EQ(t.base, base);
  EXPECT_EQ(t.bytes, 6 * kMiB);
  ak::os::release(base, 6 * kMiB);
}

TEST(LargeCache, GrowthMovesTheResidentPages) {
  LargeCache c;
  char* base = written_mapping(4 * kMiB, 'c');
  c.put(base, 4 * kMiB, false);
  const LargeCache::Taken t = c.take(10 * kMiB, false);
  ASSERT_NE(t.base, nullptr);
  EXPECT_EQ(t.bytes, 10 * kMiB);
  EXPECT_EQ(t.base[0], 'c');  // the old pages came along, still resident
  EXPECT_EQ(t.base[4 * kMiB - 1], 'c');
  EXPECT_EQ(resident_pages(t.base, 4 * kMiB), 4 * kMiB / 4096);
  EXPECT_EQ(t.base[10 * kMiB - 1], 0);
  ak::os::release(t.base, t.bytes);
}

TEST(LargeCache, CallocPrefersZeroAndEmptiesBigResidentRanges) {
  LargeCache c;
  char* big = written_mapping(LargeCache::kDecommitForZero, 'd');
  c.put(big, LargeCache::kDecommitForZero, false);
  const LargeCache::Taken t = c.take(LargeCache::kDecommitForZero, true);
  ASSERT_EQ(t.base, big);
  EXPECT_TRUE(t.zeroed);
  EXPECT_EQ(resident_pages(t.base, t.bytes), 0u);
  EXPECT_EQ(t.base[12345], 0);
  // A calloc never grows a resident range (its pages would need clearing by hand).
  char* small = written_mapping(kMiB, 'e');
  c.put(small, kMiB, false);
  EXPECT_EQ(c.take(2 * kMiB, true).base, nullptr);
  ak::os::release(big, LargeCache::kDecommitForZero);
  c.purge_older_than(0, 0);
}

// Below kDecommitForZero, a calloc empties a range that is mostly unresident (a clear by hand
// would fault every missing page in) and leaves a mostly resident one for clearing by hand.
TEST(LargeCache, CallocEmptiesSparseRangesAndKeepsDenseOnes) {
  LargeCache c;
  const std::size_t n = 4 * kMiB;
  auto* sparse = static_cast<char*>(ak::os::map(n, 4096));
  for (std::size_t i = 0; i < n; i += 8 * 4096) sparse[i] = 'f';  // an eighth of its pages
  c.put(sparse, n, false);
  const LargeCache::Taken t = c.take(n, true);
  ASSERT_EQ(t.base, sparse);
  EXPECT_TRUE(t.zeroed);
  EXPECT_EQ(resident_pages(t.base, t.bytes), 0u);
  EXPECT_EQ(t.base[8 * 4096], 0);
  char* dense = written_mapping(n, 'g');
  c.put(dense, n, false);
  const LargeCache::Taken d = c.take(n, true);
  ASSERT_EQ(d.base, dense);
  EXPECT_FALSE(d.zeroed);  // the caller clears it
  EXPECT_EQ(resident_pages(d.base, d.bytes), n / 4096);
  ak::os::release(sparse, n);
  ak::os::release(dense, n);
}

// An 8 MiB range the cache will not merge with the next one: each mapping ends in a spacer page
// that is never put (and stays mapped: the test leaks it).
char* separate_range() {
  return static_cast<char*>(ak::os::map(8 * kMiB + 4096, 4096));
}

TEST(LargeCache, ResidentBytesStayWithinTheBudget) {
  LargeCache c;
  c.note_live(0);  // no large block was live: the budget is its minimum
  const std::size_t n = LargeCache::kMinBudget / (8 * kMiB) + 4;
  for (std::size_t i = 0; i < n; ++i) c.put(separate_range(), 8 * kMiB, false);
  EXPECT_LE(c.resident_bytes(), LargeCache::kMinBudget);
  EXPECT_GT(c.resident_bytes(), LargeCache::kMinBudget - 8 * kMiB);
  // A program that recently had more live may keep kPeakFactor times as much cached.
  const std::size_t live = LargeCache::kMinBudget;
  c.note_live(live);
  const std::size_t m = live * LargeCache::kPeakFactor / (8 * kMiB) + 4;
  for (std::size_t i = 0; i < m; ++i) c.put(separate_range(), 8 * kMiB, false);
  EXPECT_LE(c.resident_bytes(), live * LargeCache::kPeakFactor);
  EXPECT_GT(c.resident_bytes(), live * LargeCache::kPeakFactor - 8 * kMiB);
  EXPECT_GT(c.purge_older_than(0, 0), 0u);
  EXPECT_EQ(c.bytes(), 0u);
}

// Through ak_malloc: a freed large block comes back with its pages resident, whether the next
// request is smaller or larger (the standard suite's malloc-large pattern).
TEST(LargeCache, MallocReusesFreedBlocksWithoutFaults) {
  ak_collect(1);
  // The first free of this size is sealed (freed_guard.hpp) and passed over by the next request.
  void* w = ak_malloc(20 * kMiB);
  std::memset(w, 1, 20 * kMiB);
  ak_free(w);
  auto* a = static_cast<char*>(ak_malloc(20 * kMiB));
  std::memset(a, 1, 20 * kMiB);
  ak_free(a);
  auto* b = static_cast<char*>(ak_malloc(12 * kMiB));
  EXPECT_EQ(resident_pages(b, 12 * kMiB - 8192), (12 * kMiB - 8192) / 4096);
  ak_free(b);
  auto* c = static_cast<char*>(ak_malloc(18 * kMiB));
  EXPECT_EQ(resident_pages(c, 18 * kMiB - 8192), (18 * kMiB - 8192) / 4096);
  ak_free(c);
  ak_stats s;
  ak_stats_get(&s);
  EXPECT_GT(s.large_cached_bytes, 0u);
  ak_collect(1);
  ak_stats_get(&s);
  EXPECT_EQ(s.large_cached_bytes, 0u);
}

// A block of kEmptyAtFree or more gives its pages back at free: they are not resident while
// cached, the range stays cached (as known-zero address space), and a calloc of it needs no
// clearing: it reads zero.
TEST(LargeCache, BiggestBlocksGiveTheirPagesBackAtFree) {
  ak_collect(1);
  const std::size_t n = LargeCache::kEmptyAtFree + 4 * kMiB;
  auto* a = static_cast<char*>(ak_malloc(n));
  std::memset(a, 7, n);
  ASSERT_EQ(resident_pages(a, n - 8192), (n - 8192) / 4096);
  ak_free(a);
  EXPECT_EQ(resident_pages(a, n - 8192), 0u);
  ak_stats s;
  ak_stats_get(&s);
  EXPECT_GE(s.large_cached_bytes, n);
  auto* z = static_cast<char*>(ak_calloc(1, n));
  ASSERT_NE(z, nullptr);
  for (std::size_t i = 0; i < n; i += 4096) ASSERT_EQ(z[i], 0) << i;
  ak_free(z);
  ak_collect(1);
}

// A freed block sealed at free (the first of its size past the adaptive bar, freed_guard.hpp)
// gives its pages back from kEmptySealedAtFree on: the next request passes over it, so they
// would stay resident beside the new block's.
TEST(LargeCache, SealedBlocksGiveTheirPagesBackAtFree) {
  ak_collect(1);
  const std::size_t n = LargeCache::kEmptyAtFree - kMiB;  // past every size freed before here
  static_assert(LargeCache::kEmptyAtFree - kMiB > LargeCache::kEmptySealedAtFree);
  auto* a = static_cast<char*>(ak_malloc(n));
  std::memset(a, 7, n);
  ak_free(a);
  EXPECT_EQ(resident_pages(a, n - 8192), 0u);
  auto* b = static_cast<char*>(ak_malloc(n));  // not a's range: it was sealed last
  EXPECT_NE(b, a);
  std::memset(b, 1, n);
  ak_free(b);  // the bar has risen past n: b stays resident, cached for the next request
  EXPECT_EQ(resident_pages(b, n - 8192), (n - 8192) / 4096);
  ak_collect(1);
}

}  // namespace
