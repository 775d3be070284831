// Importers and the exporter on the small fixtures in tests/trace/fixtures.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "trace/convert.hpp"
#include "trace/stats.hpp"

#ifndef AK_FIXTURES
#error "AK_FIXTURES must name tests/trace/fixtures"
#endif

namespace ak::trace {
namespace {

std::string tmp(const char* name) {
  return ::testing::TempDir() + "/" + name + std::to_string(getpid());
}

TEST(Import, ValgrindFixture) {
  std::string out = tmp("vg.akj");
  ImportResult r = import_valgrind(AK_FIXTURES "/small.vgtrace", out);
  EXPECT_EQ(r.events, 11u);
  EXPECT_EQ(r.skipped, 2u);
  EXPECT_EQ(r.first_skipped, 1u);
  Trace t = load_trace(out);
  ASSERT_EQ(t.threads.size(), 1u);
  const auto& e = t.threads[0].events;
  EXPECT_EQ(e[1].op, Op::kCalloc);
  EXPECT_EQ(e[1].a, 11u);
  EXPECT_EQ(e[2].op, Op::kRealloc);
  EXPECT_EQ(e[2].a, 0x100000A0u);
  EXPECT_EQ(e[3].op, Op::kMemalign);
  EXPECT_EQ(e[3].a, 64u);
  EXPECT_EQ(e[5].op, Op::kMalloc);  // operator new
  TraceStats s = compute_stats(t, resolve(t));
  EXPECT_EQ(s.problems.unknown_frees, 1u);  // free(0x12345678)
  EXPECT_EQ(s.problems.reused_live, 1u);    // 0x100000C0 returned while the memalign block lives
  EXPECT_EQ(s.free_null, 1u);
  std::remove(out.c_str());
}

TEST(Import, TextFixtureRoundTripsThroughExport) {
  std::string out = tmp("txt.akj"), back = tmp("back.txt");
  ImportResult r = import_text(AK_FIXTURES "/two_threads.txt", out);
  EXPECT_EQ(r.events, 6u);
  EXPECT_EQ(r.skipped, 1u);
  Trace t = load_trace(out);
  ASSERT_EQ(t.threads.size(), 2u);
  TraceStats s = compute_stats(t, resolve(t));
  EXPECT_EQ(s.cross_thread_frees, 2u);
  EXPECT_EQ(s.problems.unknown_frees, 1u);  // 0x3000
  EXPECT_EQ(export_text(t, back), 6u);      // every call, the unknown free included
  std::ifstream f(back);
  std::stringstream ss;
  ss << f.rdbuf();
  EXPECT_EQ(
      ss.str(),
      "a 64 0x1000 1 100\na 32 0x2000 2 150\nf 0x1000 2 200\na 16 0x1000 1 300\nf 0x2000 1 400\n"
      "f 0x3000 2 500\n");
  std::remove(out.c_str());
  std::remove(back.c_str());
}

TEST(Import, GarbageGetsAnErrorNamingTheLine) {
  std::string in = tmp("garbage.txt"), out = tmp("garbage.akj");
  std::ofstream(in) << "hello\nworld\n";
  try {
    import_valgrind(in, out);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("line 1"), std::string::npos) << e.what();
  }
  EXPECT_THROW(import_text("/nonexistent/in.txt", out), std::runtime_error);
  std::remove(in.c_str());
  std::remove(out.c_str());
}

}  // namespace
}  // namespace ak::trace
