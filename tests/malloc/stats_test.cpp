// The stats and collection API: the numbers follow what the program holds, per-class slab counts
// and the starter slab add up to the slab total, JSON output behaves like snprintf, ak_collect(1)
// empties the caches.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "allockit/allockit.h"

namespace {

size_t class_slab_sum(const ak_stats& s) {
  size_t n = 0;
  for (size_t c = 0; c < s.class_count; ++c) n += s.classes[c].slabs;
  return n;
}

TEST(MallocStats, FollowLargeAndPooledBlocks) {
  ak_stats before;
  ak_stats_get(&before);
  std::vector<void*> small, large;
  for (int i = 0; i < 2000; ++i) small.push_back(ak_malloc(100));
  for (int i = 0; i < 3; ++i) large.push_back(ak_malloc(1 << 20));
  ak_stats during;
  ak_stats_get(&during);
  EXPECT_EQ(during.large_blocks, before.large_blocks + 3);
  EXPECT_GE(during.large_bytes, before.large_bytes + 3 * (1u << 20));
  EXPECT_GE(during.slabs_in_use, before.slabs_in_use + 2);  // 200 KB of 112-byte blocks
  EXPECT_EQ(class_slab_sum(during) + during.starter_slabs, during.slabs_in_use);
  EXPECT_GE(during.allocated, during.large_bytes);
  EXPECT_GE(during.mapped, during.active);
  EXPECT_GT(during.heaps, 0u);
  for (void* p : small) ak_free(p);
  for (void* p : large) ak_free(p);
  ak_stats after;
  ak_stats_get(&after);
  EXPECT_EQ(after.large_blocks, before.large_blocks);
  EXPECT_EQ(class_slab_sum(after) + after.starter_slabs, after.slabs_in_use);
}

TEST(MallocStats, LargeBlockShrunkToPooledSizeLeavesItsMapping) {
  ak_stats before, after;
  ak_stats_get(&before);
  auto* p = static_cast<char*>(ak_malloc(1 << 20));
  std::memcpy(p, "shrink me", 10);
  p = static_cast<char*>(ak_realloc(p, 100));  // from here on, growth and shrinks stay in pools
  ASSERT_NE(p, nullptr);
  EXPECT_STREQ(p, "shrink me");
  ak_stats_get(&after);
  EXPECT_EQ(after.large_blocks, before.large_blocks);
  p = static_cast<char*>(ak_realloc(p, 3000));
  EXPECT_STREQ(p, "shrink me");
  ak_free(p);
}

TEST(MallocStats, CollectForceEmptiesTheCaches) {
  void* p = ak_malloc(4 << 20);
  ak_free(p);  // its mapping goes to the large cache
  ak_stats s;
  ak_stats_get(&s);
  ASSERT_GT(s.large_cached_bytes, 0u);
  EXPECT_GT(ak_collect(1), 0u);
  ak_stats_get(&s);
  EXPECT_EQ(s.large_cached_bytes, 0u);
  EXPECT_EQ(ak_collect(1), 0u);  // nothing left to give back
}

TEST(MallocStats, JsonIsCompleteAndTruncatesLikeSnprintf) {
  size_t need = ak_stats_json(nullptr, 0);
  ASSERT_GT(need, 100u);
  std::string buf(need + 1, '#');
  EXPECT_EQ(ak_stats_json(buf.data(), buf.size()), need);
  buf.resize(need);
  EXPECT_EQ(buf.front(), '{');
  EXPECT_EQ(buf.back(), '}');
  int depth = 0;
  for (char c : buf) depth += (c == '{' || c == '[') - (c == '}' || c == ']');
  EXPECT_EQ(depth, 0);
  for (const char* key :
       {"\"mapped\"", "\"resident\"", "\"active\"", "\"allocated\"", "\"classes\""})
    EXPECT_NE(buf.find(key), std::string::npos) << key;
  char small[10];
  EXPECT_GE(ak_stats_json(small, sizeof small), need - 64);  // the length of the whole text
  EXPECT_EQ(small[9], '\0');
}

}  // namespace

// The library in the process reports the version its header was written with.
TEST(Version, LibraryMatchesHeader) {
  EXPECT_EQ(ak_version(), AK_VERSION);
  EXPECT_EQ(AK_VERSION, AK_VERSION_MAJOR * 10000 + AK_VERSION_MINOR * 100 + AK_VERSION_PATCH);
}
