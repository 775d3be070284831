// glibc's introspection calls as liballockit answers them (malloc/glibc_info.hpp): mallinfo's
// figures follow the pooled and large blocks the program holds, the int form holds at INT_MAX,
// malloc_info writes glibc's XML, mallopt answers as glibc's does.
#include "malloc/glibc_info.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "allockit/allockit.h"

namespace {

using ak::detail::glibc_mallinfo;

TEST(GlibcInfo, LargeBlocksReadAsMmappedChunks) {
  const auto before = glibc_mallinfo();
  void* p = ak_malloc(10 << 20);
  std::memset(p, 1, 4096);
  const auto during = glibc_mallinfo();
  EXPECT_EQ(during.hblks, before.hblks + 1);
  EXPECT_GE(during.hblkhd, before.hblkhd + (10 << 20));
  ak_free(p);
  const auto after = glibc_mallinfo();
  EXPECT_EQ(after.hblks, before.hblks);
  EXPECT_LE(after.hblkhd + (10 << 20), during.hblkhd);
  EXPECT_GE(after.keepcost, after.fordblks);  // a trim would give back the cached mapping too
}

TEST(GlibcInfo, PooledBlocksReadAsTheArena) {
  const auto before = glibc_mallinfo();
  std::vector<void*> blocks;
  for (int i = 0; i < 10'000; ++i) blocks.push_back(std::memset(ak_malloc(100), 2, 100));
  const auto during = glibc_mallinfo();
  EXPECT_GE(during.uordblks, before.uordblks + 10'000 * 100);
  EXPECT_EQ(during.arena, during.uordblks + during.fordblks);
  EXPECT_EQ(during.smblks + during.usmblks + during.fsmblks, 0u);
  for (void* p : blocks) ak_free(p);
  ak_collect(1);  // every cached slab and mapping decommitted: nothing left to trim
  const auto trimmed = glibc_mallinfo();
  EXPECT_EQ(trimmed.fordblks, 0u);
  EXPECT_EQ(trimmed.keepcost, 0u);
}

TEST(GlibcInfo, IntsHoldAtIntMaxInsteadOfWrapping) {
  void* p = ak_malloc(std::size_t(3) << 30);  // address space only: never written
  ASSERT_NE(p, nullptr);
  const auto wide = glibc_mallinfo();
  const auto ints = ak::detail::glibc_mallinfo_ints();
  ak_free(p);
  ASSERT_GT(wide.hblkhd, std::size_t(INT_MAX));
  EXPECT_EQ(ints.hblkhd, INT_MAX);
  EXPECT_EQ(std::size_t(ints.hblks), wide.hblks);
}

// Read while other threads allocate and free blocks of every kind: each read is one snapshot under
// the pools' and the large blocks' locks (TSan checks the reads against the writers).
TEST(GlibcInfo, ReadsWhileOtherThreadsAllocate) {
  std::atomic<bool> stop{false};
  auto churn = [&](std::size_t seed) {
    std::vector<void*> held(64, nullptr);
    for (std::size_t i = seed; !stop.load(std::memory_order_relaxed);
         i = i * 6364136223846793005u + 1) {
      void*& p = held[(i >> 33) % held.size()];
      ak_free(p);
      const std::size_t sizes[] = {24, 700, 40'000, 300'000, 3 << 20};
      p = ak_malloc(sizes[(i >> 40) % 5]);
    }
    for (void* p : held) ak_free(p);
  };
  std::thread a(churn, 1), b(churn, 2);
  for (int i = 0; i < 2000; ++i) {
    const auto m = glibc_mallinfo();
    EXPECT_EQ(m.arena, m.uordblks + m.fordblks);
    EXPECT_GE(m.keepcost, m.fordblks);
  }
  stop = true;
  a.join();
  b.join();
}

std::string malloc_info_text(int options, int* result, int* error) {
  std::FILE* f = std::tmpfile();
  errno = 0;
  *result = ak::detail::glibc_malloc_info(options, f);
  *error = errno;
  std::rewind(f);
  std::string text;
  for (int c; (c = std::fgetc(f)) != EOF;) text += char(c);
  std::fclose(f);
  return text;
}

TEST(GlibcInfo, MallocInfoWritesGlibcsXml) {
  void* p = ak_malloc(8 << 20);
  const auto m = glibc_mallinfo();
  int result, error;
  const std::string xml = malloc_info_text(0, &result, &error);
  ak_free(p);
  EXPECT_EQ(result, 0);
  EXPECT_EQ(xml.rfind("<malloc version=\"1\">\n<heap nr=\"0\">", 0), 0u) << xml;
  EXPECT_NE(xml.find("<total type=\"mmap\" count=\"" + std::to_string(m.hblks) + "\" size=\"" +
                     std::to_string(m.hblkhd) + "\"/>"),
            std::string::npos)
      << xml;
  EXPECT_EQ(xml.substr(xml.size() - 10), "</malloc>\n");
}

TEST(GlibcInfo, MallocInfoRefusesOptionsAndNoStream) {
  int result, error;
  EXPECT_EQ(malloc_info_text(1, &result, &error), "");
  EXPECT_EQ(result, -1);
  EXPECT_EQ(error, EINVAL);
  errno = 0;
  EXPECT_EQ(ak::detail::glibc_malloc_info(0, nullptr), -1);
  EXPECT_EQ(errno, EINVAL);
}

// glibc 2.36's answers, checked against it: 1 for every parameter, known or not, but M_MXFAST
// (1) outside 0..160.
TEST(GlibcInfo, MalloptAnswersAsGlibcDoes) {
  for (int param : {-1, -2, -3, -4, -5, -6, -7, -8, 0, 2, -9, 12345})  // M_TRIM_THRESHOLD ..
    EXPECT_EQ(ak::detail::glibc_mallopt(param, 1 << 30), 1) << param;
  EXPECT_EQ(ak::detail::glibc_mallopt(1, 160), 1);
  EXPECT_EQ(ak::detail::glibc_mallopt(1, 0), 1);
  EXPECT_EQ(ak::detail::glibc_mallopt(1, 161), 0);
  EXPECT_EQ(ak::detail::glibc_mallopt(1, -1), 0);
}

}  // namespace
