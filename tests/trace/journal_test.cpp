// Journal files: round trips through the writer and reader, and damaged files get an error
// that names the offset (or a truncation mark), never a crash.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <iterator>

#include "trace/journal.hpp"
#include "trace/nonheap.hpp"
#include "trace/sites.hpp"
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

// Loads `bytes` with the header's version byte set to `version`: the error it gets, or
// "accepted" when it loads.
std::string load_error_as_version(std::vector<uint8_t> bytes, uint8_t version) {
  bytes[8] = version;
  try {
    JournalReader r(bytes.data(), bytes.size());
    load_trace(r);
  } catch (const JournalError& e) {
    return e.what();
  }
  return "accepted";
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

TEST(Journal, UnstampedCallsArePlacedBetweenTheStampsAroundThem) {
  std::string path = temp_path("unstamped");
  JournalWriter w(path, {{"command", "sample"}}, false);
  auto loose = [](Event e) {
    e.unstamped = true;
    return e;
  };
  w.add(1, 101, ev(Op::kMalloc, 1000, 16, 0, 0x1000));
  w.add(1, 101, loose(ev(Op::kMalloc, 0, 16, 0, 0x1100)));
  w.add(1, 101, loose(ev(Op::kFree, 0, 0x1000, 0, 0)));
  w.add(1, 101, ev(Op::kFree, 1300, 0x1100, 0, 0));
  w.add(1, 101, loose(ev(Op::kMalloc, 0, 16, 0, 0x1200)));  // after the thread's last stamp
  w.finish();
  Trace t = load_trace(path);
  ASSERT_EQ(t.threads.size(), 1u);
  const auto& e = t.threads[0].events;
  ASSERT_EQ(e.size(), 5u);
  EXPECT_EQ(e[1].time_ns, 1100u);
  EXPECT_EQ(e[2].time_ns, 1200u);
  EXPECT_EQ(e[3].time_ns, 1300u);
  EXPECT_EQ(e[4].time_ns, 1301u);
  EXPECT_TRUE(e[1].unstamped && e[2].unstamped && !e[3].unstamped && e[4].unstamped);
  EXPECT_EQ(resolve(t).problems.total(), 0u);
  std::remove(path.c_str());
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

// skim_journal, what `allockit record` runs when the program ends: the event count from the
// block headers, a cut-off tail found wherever the cut falls, and a damaged last block or
// header named.
TEST(Journal, SkimCountsEventsAndFindsACutOffTail) {
  std::string path = write_sample(true);
  const std::vector<uint8_t> bytes = slurp(path);
  JournalSkim s = skim_journal(path);
  EXPECT_EQ(s.events, 6000u);
  EXPECT_EQ(s.truncated_at, -1);
  // The offsets where blocks start, as the full reader sees them.
  std::vector<uint64_t> starts;
  {
    JournalReader r(path);
    for (Block b; r.next(b);) starts.push_back(b.offset);
  }
  ASSERT_GE(starts.size(), 2u);
  const std::string cut = temp_path("cut");
  for (size_t n = starts[0] + 1; n < bytes.size(); n += 331) {
    std::ofstream(cut, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(n));
    const JournalSkim c = skim_journal(cut);
    uint64_t last_start = 0;
    for (uint64_t b : starts)
      if (b < n) last_start = b;
    if (c.truncated_at >= 0) {
      EXPECT_EQ(uint64_t(c.truncated_at), last_start) << "length " << n;
    }
    EXPECT_LT(c.events, 6000u) << "length " << n;
  }
  // A flipped byte in the last block's payload, or a block header that is no header.
  std::vector<uint8_t> bad = bytes;
  bad.back() ^= 0xff;
  std::ofstream(cut, std::ios::binary)
      .write(reinterpret_cast<const char*>(bad.data()), static_cast<std::streamsize>(bad.size()));
  EXPECT_THROW(skim_journal(cut), JournalError);
  bad = bytes;
  bad[starts[1]] ^= 0xff;
  std::ofstream(cut, std::ios::binary)
      .write(reinterpret_cast<const char*>(bad.data()), static_cast<std::streamsize>(bad.size()));
  try {
    skim_journal(cut);
    FAIL() << "a damaged block header was accepted";
  } catch (const JournalError& e) {
    EXPECT_EQ(e.offset(), starts[1]);
  }
  std::remove(cut.c_str());
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
// event count its header claims. Sample i: RssAnon 4 + i MiB, VmRSS 9 + i MiB, the recorder's
// 1 MiB after the first, non-heap measured at the first (1 MiB) and fourth (2 MiB) only. With
// `record_bytes` 32 (a v1 to v3 journal) the records stop before the non-heap field.
void append_rss(const std::string& path, uint32_t n, uint32_t count,
                size_t record_bytes = sizeof(RssRecord)) {
  std::vector<uint8_t> payload(n * record_bytes);
  for (uint32_t i = 0; i < n; ++i) {
    const RssRecord r{1000 + 10 * i, (4ull + i) << 20, (9ull + i) << 20, i == 0 ? 0 : 1ull << 20,
                      i == 0   ? 1ull << 20
                      : i == 3 ? 2ull << 20
                               : kNonheapUnmeasured};
    std::memcpy(payload.data() + i * record_bytes, &r, record_bytes);
  }
  BlockHeader h{};
  std::memcpy(h.magic, kBlockMagic, 4);
  h.codec = kCodecRss;
  h.stored_len = h.raw_len = static_cast<uint32_t>(payload.size());
  h.event_count = count;
  h.crc = block_crc(h, payload.data(), h.stored_len);
  std::ofstream f(path, std::ios::binary | std::ios::app);
  f.write(reinterpret_cast<const char*>(&h), sizeof h);
  f.write(reinterpret_cast<const char*>(payload.data()),
          static_cast<std::streamsize>(h.stored_len));
}

TEST(Journal, MemorySamplesAreReadAheadAndSummarised) {
  std::string path = write_sample(true);
  append_rss(path, 5, 5);
  Trace t = load_trace(path);
  EXPECT_EQ(t.events, 6000u);  // the events around the samples read as before
  ASSERT_EQ(t.rss.size(), 5u);
  EXPECT_EQ(t.rss[2].time_ns, 1020u);
  EXPECT_EQ(t.rss[2].anon_bytes, 6u << 20);
  // Non-heap between two measures is the larger of them; after the last, the last.
  EXPECT_EQ(t.rss[1].nonheap_bytes, 2u << 20);
  EXPECT_EQ(t.rss[2].nonheap_bytes, 2u << 20);
  EXPECT_EQ(t.rss[4].nonheap_bytes, 2u << 20);
  // The heap's share: RssAnon less the recorder's own (1 MiB after the first sample), less
  // non-heap and less the same of the first sample (4 - 1 MiB): 0, 0, 0, 1, 2 MiB.
  RecordedMemory m = recorded_memory(t.rss);
  EXPECT_EQ(m.samples, 5u);
  EXPECT_EQ(m.baseline_anon, 3u << 20);
  EXPECT_EQ(m.peak_heap_anon, 2u << 20);
  EXPECT_EQ(m.nonheap_at_peak, 2u << 20);
  EXPECT_EQ(m.peak_rss, 13u << 20);
  std::remove(path.c_str());
}

TEST(Journal, VersionThreeMemorySamplesReadWithoutNonHeap) {
  std::string path = write_sample(false);
  append_rss(path, 3, 3, kRssRecordV3Bytes);
  auto bytes = slurp(path);
  bytes[8] = 3;  // the header's version: v3 RSS records are 32 bytes
  JournalReader r(bytes.data(), bytes.size());
  Trace t = load_trace(r);
  ASSERT_EQ(t.rss.size(), 3u);
  EXPECT_EQ(t.rss[2].anon_bytes, 6u << 20);
  EXPECT_EQ(t.rss[2].nonheap_bytes, 0u);
  EXPECT_EQ(recorded_memory(t.rss).peak_heap_anon, 1u << 20);
  // The same 32-byte records in a v4 journal are a damaged block.
  bytes[8] = 4;
  EXPECT_THROW(
      {
        JournalReader v4(bytes.data(), bytes.size());
        load_trace(v4);
      },
      JournalError);
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

// A v2 journal: thread 1 allocates 16 bytes 100 times at stack 1 (each freed at once: temporary),
// 64 bytes 10 times at stack 2 (kept: live at the peak, leaked), one 32-byte block at stack 3
// freed by thread 2; two stacks share their innermost frame.
std::string write_stacked(bool compress) {
  std::string path = temp_path(compress ? "sz" : "sraw");
  JournalWriter w(path, {{"command", "stacked"}}, compress);
  uint64_t t = 1;
  for (uint64_t i = 0; i < 100; ++i) {
    w.add(1, 101, ev(Op::kMalloc, t++, 16, 0, 0x1000), 1);
    w.add(1, 101, ev(Op::kFree, t++, 0x1000, 0, 0));
  }
  for (uint64_t i = 0; i < 10; ++i)
    w.add(1, 101, ev(Op::kMalloc, t++, 64, 0, 0x9000 + 0x100 * i), 2);
  w.add(1, 101, ev(Op::kMalloc, t++, 32, 0, 0x20000), 3);
  w.add(2, 102, ev(Op::kFree, t++, 0x20000, 0, 0));
  const uint64_t a[] = {0x401010, 0x402020}, b[] = {0x401010, 0x403030}, c[] = {0x7f0000002000};
  w.add_stack(1, a, 2);
  w.add_stack(2, b, 2);
  w.add_stack(3, c, 1);
  w.add_modules(5, {{0, 0x400000, 0x410000, 0, "\xab\xcd", "/opt/app"},
                    {0, 0x7f0000000000, 0x7f0000010000, 0x7f0000000000, "", "/lib/libx.so"}});
  w.finish();
  return path;
}

TEST(Journal, StacksAndModulesRoundTrip) {
  for (bool compress : {false, true}) {
    std::string path = write_stacked(compress);
    JournalReader r(path);
    EXPECT_EQ(r.version(), kVersion);
    ASSERT_EQ(r.stacks().ids(), 3u);
    const auto s2 = r.stacks().frames(2);
    ASSERT_EQ(s2.size(), 2u);
    EXPECT_EQ(s2[1], 0x403030u);
    EXPECT_TRUE(r.stacks().frames(4).empty());
    ASSERT_EQ(r.modules().size(), 2u);
    EXPECT_EQ(r.modules()[0].path, "/opt/app");
    EXPECT_EQ(r.modules()[0].build_id, "\xab\xcd");
    EXPECT_EQ(r.modules()[1].bias, 0x7f0000000000u);
    Trace t = load_trace(r);
    ASSERT_EQ(t.threads[0].stacks.size(), t.threads[0].events.size());
    EXPECT_EQ(t.threads[0].stacks[0], 1u);
    EXPECT_EQ(t.threads[0].stacks[1], 0u);  // a free carries none
    EXPECT_EQ(t.threads[0].stacks[200], 2u);
    std::remove(path.c_str());
  }
}

TEST(Journal, VersionOneJournalsStillRead) {
  std::string path = write_sample(true);
  auto bytes = slurp(path);
  bytes[8] = 1;  // the header's version: v1 events are v2 events without a stack flag
  JournalReader r(bytes.data(), bytes.size());
  EXPECT_EQ(r.version(), 1u);
  Trace t = load_trace(r);
  EXPECT_EQ(t.events, 6000u);
  EXPECT_TRUE(t.stacks.empty());
  EXPECT_TRUE(t.threads[0].stacks.empty());
  std::remove(path.c_str());
}

TEST(Journal, VersionTwoContentInAVersionOneJournalIsNamed) {
  // Stack and module blocks are unknown codecs to v1 ...
  std::string path = write_stacked(false);
  const std::string modules = load_error_as_version(slurp(path), 1);
  EXPECT_NE(modules.find("unknown block codec 5"), std::string::npos) << modules;
  // ... and an event with a stack id is malformed.
  {
    JournalWriter w(path, {}, false);
    w.add(1, 1, ev(Op::kMalloc, 1, 8, 0, 0x10), 7);
    w.finish();
  }
  const std::string stack_id = load_error_as_version(slurp(path), 1);
  EXPECT_NE(stack_id.find("malformed event 0"), std::string::npos) << stack_id;
  std::remove(path.c_str());
}

TEST(Journal, AnUnstampedEventInAVersionFiveJournalIsNamed) {
  std::string path = temp_path("v5unstamped");
  {
    JournalWriter w(path, {}, false);
    w.add(1, 1, ev(Op::kMalloc, 1, 8, 0, 0x10));
    Event loose = ev(Op::kFree, 0, 0x10, 0, 0);
    loose.unstamped = true;
    w.add(1, 1, loose);
    w.finish();
  }
  EXPECT_EQ(load_trace(path).events, 2u);  // as written: v6
  const std::string v5 = load_error_as_version(slurp(path), 5);
  EXPECT_NE(v5.find("malformed event 1"), std::string::npos) << v5;
  std::remove(path.c_str());
}

TEST(Journal, AStackBlockThatDoesNotDecodeIsNamed) {
  std::string path = temp_path("badstack");
  {
    JournalWriter w(path, {}, false);
    w.add(1, 1, ev(Op::kMalloc, 1, 8, 0, 0x10), 1);
    w.finish();
  }
  const auto at = slurp(path).size();
  // A stack block whose one entry claims depth 65 (kMaxStackDepth is 64), checksum correct.
  const uint8_t payload[] = {1, 65, 0, 0};
  BlockHeader h{};
  std::memcpy(h.magic, kBlockMagic, 4);
  h.codec = kCodecStacks;
  h.stored_len = h.raw_len = sizeof payload;
  h.event_count = 1;
  h.crc = block_crc(h, payload, sizeof payload);
  std::ofstream(path, std::ios::binary | std::ios::app)
      .write(reinterpret_cast<const char*>(&h), sizeof h)
      .write(reinterpret_cast<const char*>(payload), sizeof payload);
  try {
    JournalReader r(path);
    FAIL() << "a malformed stack block was accepted";
  } catch (const JournalError& e) {
    EXPECT_NE(std::string(e.what()).find("malformed stack 0"), std::string::npos) << e.what();
    EXPECT_EQ(e.offset(), at);
  }
  std::remove(path.c_str());
}

TEST(Journal, WriterRejectsStacksOutOfRange) {
  std::string path = temp_path("range");
  JournalWriter w(path, {});
  const uint64_t f[65] = {};
  EXPECT_THROW(w.add_stack(1, f, 0), std::invalid_argument);
  EXPECT_THROW(w.add_stack(1, f, 65), std::invalid_argument);
  EXPECT_THROW(w.add_stack(0, f, 1), std::invalid_argument);
  w.finish();
  std::remove(path.c_str());
}

TEST(Sites, GroupsCountsPeakTemporariesAndLeaks) {
  std::string path = write_stacked(true);
  Trace t = load_trace(path);
  Timeline tl = resolve(t);
  Symbolizer none(std::vector<Module>{});  // no files: frames read module+offset
  SiteTable st = top_sites(t, tl, none, {SiteKey::kSite, 1, SiteSort::kCalls});
  // Stacks 1 and 2 share their innermost frame: one site at depth 1.
  ASSERT_EQ(st.rows.size(), 2u);
  const SiteRow& r = st.rows[0];
  EXPECT_EQ(r.calls, 110u);
  EXPECT_EQ(r.bytes, 100u * 16 + 10u * 64);
  EXPECT_EQ(r.temporary, 100u);
  EXPECT_EQ(r.leaked_blocks, 10u);
  EXPECT_EQ(r.leaked_bytes, 640u);
  EXPECT_EQ(r.peak_bytes, 640u);  // the peak: the 64-byte blocks and the 32-byte one
  EXPECT_EQ(r.peak_blocks, 10u);
  EXPECT_EQ(r.common_sizes.front(), std::make_pair(uint64_t{16}, uint64_t{100}));
  EXPECT_EQ(r.name, "?+0x40100f");  // no module map entry is loaded: address - 1
  EXPECT_EQ(st.rows[1].peak_bytes, 32u);
  EXPECT_EQ(st.rows[1].temporary, 0u);
  EXPECT_EQ(st.peak_bytes, tl.peak_live_bytes);
  // Two frames tell stacks 1 and 2 apart; sorted by bytes, stack 1 (1600 B) leads.
  st = top_sites(t, tl, none, {SiteKey::kSite, 2, SiteSort::kBytes});
  ASSERT_EQ(st.rows.size(), 3u);
  EXPECT_EQ(st.rows[0].bytes, 1600u);
  EXPECT_EQ(st.rows[0].frames.size(), 2u);
  // With the module map (its files are not on this machine): the object's name and offset.
  Symbolizer mapped(t.modules);
  st = top_sites(t, tl, mapped, {SiteKey::kModule, 1, SiteSort::kCalls});
  ASSERT_EQ(st.rows.size(), 2u);
  EXPECT_EQ(st.rows[0].name, "app");
  EXPECT_EQ(st.rows[1].name, "libx.so");
  EXPECT_EQ(top_sites(t, tl, mapped, {}).rows[1].name, "libx.so+0x1fff");
  std::remove(path.c_str());
}

TEST(Sites, AJournalWithoutStacksIsAClearError) {
  std::string path = write_sample(false);
  Trace t = load_trace(path);
  Timeline tl = resolve(t);
  Symbolizer none(std::vector<Module>{});
  try {
    top_sites(t, tl, none, {});
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("--stack"), std::string::npos) << e.what();
  }
  std::remove(path.c_str());
}

}  // namespace
}  // namespace ak::trace
