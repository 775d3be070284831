// Journal files: round trips through the writer and reader, and damaged files get an error
// that names the offset (or a truncation mark), never a crash.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <iterator>

#include "trace/journal.hpp"
#include "trace/stats.hpp"
#include "trace/timeline.hpp"

namespace ak::trace {
namespace {

std::string temp_path(const char* name) {
  return ::testing::TempDir() + "/" + name + std::to_string(getpid()) + ".akj";
}

std::vector<uint8_t> slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

Event ev(Op op, uint64_t t, uint64_t a, uint64_t b, uint64_t result) {
  Event e;
  e.op = op, e.time_ns = t, e.a = a, e.b = b, e.result = result;
  return e;
}

// Two threads, 3000 events each, with a cross-thread free.
std::string write_sample(bool compress) {
  std::string path = temp_path(compress ? "z" : "raw");
  JournalWriter w(path, {{"command", "sample"}, {"allocator", "test"}}, compress);
  for (uint64_t i = 0; i < 3000; ++i) {
    w.add(1, 101, ev(Op::kMalloc, 10 * i + 1, 16 + i % 100, 0, 0x1000 + 0x100 * i));
    w.add(2, 102, ev(Op::kFree, 10 * i + 5, 0x1000 + 0x100 * i, 0, 0));
  }
  w.finish();
  EXPECT_EQ(w.events(), 6000u);
  return path;
}

TEST(Journal, RoundTripsThreadsEventsAndMeta) {
  for (bool compress : {false, true}) {
    std::string path = write_sample(compress);
    Trace t = load_trace(path);
    EXPECT_EQ(meta_get(t.meta, "command"), "sample");
    ASSERT_EQ(t.threads.size(), 2u);
    EXPECT_EQ(t.threads[0].os_tid, 101u);
    ASSERT_EQ(t.threads[0].events.size(), 3000u);
    EXPECT_EQ(t.threads[0].events[2999].a, 16u + 2999 % 100);
    EXPECT_EQ(t.threads[1].events[7].a, 0x1000u + 0x700);
    EXPECT_EQ(t.truncated_at, -1);
    Timeline tl = resolve(t);
    EXPECT_EQ(tl.cross_thread_frees, 3000u);
    EXPECT_EQ(tl.problems.total(), 0u);
    EXPECT_EQ(tl.peak_live_count, 1u);
    std::remove(path.c_str());
  }
}

TEST(Journal, CompressedJournalIsUnderEightBytesPerEvent) {
  std::string path = write_sample(true);
  EXPECT_LT(slurp(path).size(), 6000u * 8);
  std::remove(path.c_str());
}

TEST(Journal, MissingFileAndWrongMagicAreNamed) {
  EXPECT_THROW(JournalReader("/nonexistent/x.akj"), JournalError);
  const char text[] = "--1-- malloc(1) = 0x10\n";
  try {
    JournalReader r(text, sizeof text);
    FAIL() << "accepted a text file";
  } catch (const JournalError& e) {
    EXPECT_NE(std::string(e.what()).find("bad magic at offset 0"), std::string::npos) << e.what();
  }
}

TEST(Journal, EveryTruncationIsReportedNotFatal) {
  std::string path = write_sample(true);
  std::vector<uint8_t> bytes = slurp(path);
  size_t header_end = sizeof(FileHeader) + 30;  // meta is "command=sample\nallocator=test\n"
  for (size_t n = 0; n < bytes.size(); n += (n < 200 ? 1 : 97)) {
    try {
      JournalReader r(bytes.data(), n);
      Trace t = load_trace(r);
      EXPECT_GE(n, header_end);
      if (n < bytes.size() && n > header_end) {
        EXPECT_GE(t.truncated_at, 0) << "length " << n;
      }
    } catch (const JournalError& e) {
      EXPECT_LT(n, header_end) << e.what();
    }
  }
  std::remove(path.c_str());
}

TEST(Journal, EveryFlippedByteIsCaughtOrHarmless) {
  std::string path = write_sample(false);
  std::vector<uint8_t> bytes = slurp(path);
  int caught = 0;
  for (size_t i = 0; i < bytes.size(); i += 7) {
    std::vector<uint8_t> bad = bytes;
    bad[i] ^= 0x5a;
    try {
      JournalReader r(bad.data(), bad.size());
      load_trace(r);
    } catch (const JournalError& e) {
      ++caught;
      EXPECT_NE(std::string(e.what()).find("offset"), std::string::npos);
    }
  }
  // The CRCs cover header, metadata and payloads: every flip outside reserved fields is caught.
  EXPECT_GT(caught, static_cast<int>(bytes.size() / 7) - 4);
  std::remove(path.c_str());
}

// Appends an RSS block of `n` samples (times in ns) to the journal at `path`; `count` is the
// event count its header claims.
void append_rss(const std::string& path, uint32_t n, uint32_t count) {
  std::vector<RssRecord> r(n);
  for (uint32_t i = 0; i < n; ++i)
    r[i] = {1000 + 10 * i, (4 + i) << 20, (9 + i) << 20, i == 0 ? 0 : uint64_t(1) << 20};
  BlockHeader h{};
  std::memcpy(h.magic, kBlockMagic, 4);
  h.codec = kCodecRss;
  h.stored_len = h.raw_len = static_cast<uint32_t>(n * sizeof(RssRecord));
  h.event_count = count;
  h.crc = block_crc(h, r.data(), h.stored_len);
  std::ofstream f(path, std::ios::binary | std::ios::app);
  f.write(reinterpret_cast<const char*>(&h), sizeof h);
  f.write(reinterpret_cast<const char*>(r.data()), static_cast<std::streamsize>(h.stored_len));
}

TEST(Journal, MemorySamplesAreReadAheadAndSummarised) {
  std::string path = write_sample(true);
  append_rss(path, 3, 3);
  Trace t = load_trace(path);
  EXPECT_EQ(t.events, 6000u);  // the events around the samples read as before
  ASSERT_EQ(t.rss.size(), 3u);
  EXPECT_EQ(t.rss[2].time_ns, 1020u);
  EXPECT_EQ(t.rss[2].anon_bytes, 6u << 20);
  // The heap's share: RssAnon less the recorder's own (1 MiB after the first sample) and less
  // the first sample's 4 MiB: 0, 0, 1 MiB.
  RecordedMemory m = recorded_memory(t.rss);
  EXPECT_EQ(m.samples, 3u);
  EXPECT_EQ(m.baseline_anon, 4u << 20);
  EXPECT_EQ(m.peak_heap_anon, 1u << 20);
  EXPECT_EQ(m.peak_rss, 11u << 20);
  std::remove(path.c_str());
}

TEST(Journal, AnRssBlockWhoseCountDisagreesIsNamed) {
  std::string path = write_sample(false);
  const auto at = slurp(path).size();
  append_rss(path, 2, 3);
  try {
    load_trace(path);
    FAIL() << "a damaged RSS block was accepted";
  } catch (const JournalError& e) {
    EXPECT_NE(std::string(e.what()).find("RSS block"), std::string::npos) << e.what();
    EXPECT_EQ(e.offset(), at);
  }
  std::remove(path.c_str());
}

}  // namespace
}  // namespace ak::trace
