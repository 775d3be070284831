// Importers and the exporter on the small fixtures in tests/trace/fixtures.
#include <gtest/gtest.h>
#include <unistd.h>

#include <zlib.h>

#include <fstream>
#include <iterator>
#include <sstream>

#include "trace/convert.hpp"
#include "trace/sites.hpp"
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

// A heaptrack 1.4 recording of `ls /` (zstd, file format 3). heaptrack_print on the same file
// reads: 241 calls to allocation functions, peak heap memory consumption 138.77K, total memory
// leaked 33.82K.
TEST(Import, HeaptrackFileMatchesHeaptracksOwnSummary) {
  std::string out = tmp("ht.akj");
  ImportResult r = import_heaptrack(AK_FIXTURES "/ls.heaptrack.zst", out);
  EXPECT_EQ(r.events, 314u);
  Trace t = load_trace(out);
  ASSERT_EQ(t.threads.size(), 1u);
  TraceStats s = compute_stats(t, resolve(t));
  EXPECT_EQ(s.allocations, 241u);
  EXPECT_EQ(s.peak_live_bytes, 138771u);
  EXPECT_EQ(s.leaked_bytes, 33817u);
  EXPECT_EQ(s.problems.unknown_frees, 0u);
  EXPECT_EQ(s.problems.reused_live, 0u);
  const auto& e = t.threads[0].events;
  for (size_t i = 1; i < e.size(); ++i) EXPECT_LE(e[i - 1].time_ns, e[i].time_ns);
  // heaptrack's stacks: every allocation has one; by module, ls's own code and libselinux.
  Symbolizer sym(t.modules, {}, t.names);
  const SiteTable sites = top_sites(t, resolve(t), sym, {SiteKey::kModule, 1, SiteSort::kCalls});
  EXPECT_EQ(sites.without_stack, 0u);
  ASSERT_GE(sites.rows.size(), 2u);
  EXPECT_EQ(sites.rows[0].name, "ls");
  EXPECT_EQ(sites.rows[0].calls, 237u);
  EXPECT_EQ(sites.rows[1].name, "libselinux.so.1");
  EXPECT_EQ(sites.rows[1].calls, 3u);
  std::remove(out.c_str());
}

// The same data uncompressed and gzip-compressed (older heaptrack), and the ways it can be bad.
TEST(Import, HeaptrackPlainGzipAndBadInput) {
  std::string in = tmp("ht.txt"), gz = tmp("ht.gz"), out = tmp("ht2.akj");
  const std::string good =
      "v 10400 3\nX prog\ns 4 prog\ns 4 main\ni 401000 1 2\nt 1 0\ni 401100 1\nt 2 1\n"
      "a 40 1\na 8 2\n+ 0\nc a\n+ 1\n+ 0\n- 0\n- 1\n";
  std::ofstream(in) << good;
  ImportResult r = import_heaptrack(in, out);
  EXPECT_EQ(r.events, 5u);  // three allocations, two frees
  Trace t = load_trace(out);
  TraceStats s = compute_stats(t, resolve(t));
  EXPECT_EQ(s.peak_live_bytes, 0x40u * 2 + 8);
  EXPECT_EQ(s.leaked_bytes, 0x40u);
  EXPECT_EQ(t.threads[0].events[1].time_ns, 10'000'000u);  // `c a`: 10 ms
  // Each allocation info's trace is its stack, innermost first, named by heaptrack's strings.
  EXPECT_EQ(t.threads[0].stacks[0], 1u);
  EXPECT_EQ(t.threads[0].stacks[1], 2u);
  ASSERT_EQ(t.stacks.frames(2).size(), 2u);
  EXPECT_EQ(t.stacks.frames(2)[0], 0x401100u);
  EXPECT_EQ(t.names.at(0x401000).frames.at(0).function, "main");
  EXPECT_EQ(t.names.at(0x401100).module, "prog");
  gzFile g = gzopen(gz.c_str(), "wb");
  gzwrite(g, good.data(), unsigned(good.size()));
  gzclose(g);
  EXPECT_EQ(import_heaptrack(gz, out).events, 5u);
  auto error_of = [&](const std::string& text) {
    std::ofstream(in) << text;
    try {
      import_heaptrack(in, out);
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error_of("v 10400 1\n").find("line 1: heaptrack file format 1 is not supported"),
            std::string::npos);
  EXPECT_NE(error_of("v 10400 3\na 8 0\n+ 1\n").find("line 3: allocation info 1 was never defined"),
            std::string::npos);
  EXPECT_NE(
      error_of("v 10400 3\na 8 0\n- 0\n").find("line 3: free of allocation info 0 with none live"),
      std::string::npos);
  EXPECT_NE(error_of("v 10400 3\n+ zz\n").find("line 2: malformed allocation"), std::string::npos);
  EXPECT_NE(error_of("v 10400 3\na 8 5\n").find("line 2: trace 5 was never defined"),
            std::string::npos);
  EXPECT_NE(error_of("v 10400 3\nt 9 0\na 8 1\n").find("instruction pointer 9 was never defined"),
            std::string::npos);
  EXPECT_NE(error_of("v 10400 3\ns 9 short\n").find("line 2: malformed string"), std::string::npos);
  EXPECT_NE(error_of("a 8 0\n+ 0\n").find("not heaptrack data"), std::string::npos);
  // A zstd file cut short.
  std::ifstream f(AK_FIXTURES "/ls.heaptrack.zst", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::ofstream(in, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  try {
    import_heaptrack(in, out);
    FAIL() << "a truncated file was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("zstd stream truncated"), std::string::npos) << e.what();
  }
  std::remove(in.c_str());
  std::remove(gz.c_str());
  std::remove(out.c_str());
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
