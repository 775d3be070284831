// Journal codec: varints, every op round-trips, and no byte string crashes the decoder.
#include <gtest/gtest.h>

#include <random>

#include "trace/codec.hpp"

namespace ak::trace {
namespace {

TEST(Codec, VarintRoundTripsEdgeValues) {
  for (uint64_t v :
       std::initializer_list<uint64_t>{0, 1, 127, 128, 16383, 16384, UINT32_MAX, UINT64_MAX}) {
    uint8_t buf[16];
    uint8_t* end = put_varint(buf, v);
    const uint8_t* p = buf;
    uint64_t got;
    ASSERT_TRUE(get_varint(p, end, got));
    EXPECT_EQ(got, v);
    EXPECT_EQ(p, end);
  }
  for (int64_t v : std::initializer_list<int64_t>{0, -1, 1, INT64_MIN, INT64_MAX})
    EXPECT_EQ(unzigzag(zigzag(v)), v);
}

TEST(Codec, VarintRejectsOverlongAndTruncated) {
  uint8_t over[11];
  std::fill(std::begin(over), std::end(over), 0xff);
  const uint8_t* p = over;
  uint64_t v;
  EXPECT_FALSE(get_varint(p, over + 11, v));
  uint8_t cut[2] = {0x80, 0x80};
  p = cut;
  EXPECT_FALSE(get_varint(p, cut + 2, v));
}

Event random_event(std::mt19937_64& rng, uint64_t& t) {
  Event e;
  e.op = static_cast<Op>(rng() % kOpCount);
  t += rng() % 5000;
  e.time_ns = t;
  e.a = rng() % 3 == 0 ? rng() : rng() % 100000;
  e.b = rng() % 100000;
  e.c = e.op == Op::kPosixMemalign || e.op == Op::kReallocarray ? rng() % 64 : 0;
  e.result = e.op == Op::kFree ? 0 : (rng() % 4 == 0 ? 0 : 0x7f0000000000ull + (rng() % (1 << 30)));
  if (e.op == Op::kFree || e.op == Op::kMalloc || e.op == Op::kValloc || e.op == Op::kPvalloc)
    e.b = 0;
  if (!is_realloc(e.op) && e.op != Op::kPosixMemalign) e.c = 0;
  if (is_realloc(e.op)) e.duration_ns = static_cast<uint32_t>(rng() % 100000);
  if (e.op == Op::kRealloc) e.c = 0;
  if (e.op == Op::kFree && rng() % 4 == 0) e.c = 1, e.b = rng() % 5000;  // resident pages (v5)
  return e;
}

TEST(Codec, RandomEventsRoundTrip) {
  std::mt19937_64 rng(7);
  std::vector<uint8_t> buf(kMaxEventBytes * 10000);
  std::vector<Event> events;
  CodecState enc{1000, 0};
  uint8_t* out = buf.data();
  uint64_t t = 1000;
  for (int i = 0; i < 10000; ++i) {
    events.push_back(random_event(rng, t));
    uint8_t* before = out;
    out = encode_event(events.back(), enc, out);
    ASSERT_LE(static_cast<size_t>(out - before), kMaxEventBytes);
  }
  CodecState dec{1000, 0};
  const uint8_t* p = buf.data();
  for (const Event& want : events) {
    Event got;
    ASSERT_TRUE(decode_event(p, out, dec, got));
    EXPECT_EQ(got.op, want.op);
    EXPECT_EQ(got.time_ns, want.time_ns);
    EXPECT_EQ(got.a, want.a);
    EXPECT_EQ(got.b, want.b);
    EXPECT_EQ(got.c, want.c);
    EXPECT_EQ(got.result, want.result);
    EXPECT_EQ(got.duration_ns, want.duration_ns);
  }
  EXPECT_EQ(p, out);
}

TEST(Codec, AnUnstampedEventStoresNoTimeAndReadsThePreviousOne) {
  uint8_t buf[3 * kMaxEventBytes];
  CodecState enc{1000, 0x5000};
  Event stamped;
  stamped.op = Op::kMalloc, stamped.time_ns = 1300, stamped.a = 32, stamped.result = 0x5040;
  Event loose = stamped;
  loose.time_ns = 999999, loose.unstamped = true, loose.result = 0x5060;  // its time is not kept
  Event again = stamped;
  again.time_ns = 1700, again.result = 0x50c0;
  uint8_t* mid = encode_event(stamped, enc, buf);
  uint8_t* end = encode_event(loose, enc, mid);
  EXPECT_EQ(end - mid, 3);  // op byte, size, pointer delta: no time
  end = encode_event(again, enc, end);
  CodecState dec{1000, 0x5000};
  const uint8_t* p = buf;
  Event a, b, c;
  ASSERT_TRUE(decode_event(p, end, dec, a));
  ASSERT_TRUE(decode_event(p, end, dec, b));
  ASSERT_TRUE(decode_event(p, end, dec, c));
  EXPECT_FALSE(a.unstamped);
  EXPECT_TRUE(b.unstamped);
  EXPECT_FALSE(c.unstamped);
  EXPECT_EQ(b.time_ns, 1300u);
  EXPECT_EQ(b.result, 0x5060u);
  EXPECT_EQ(c.time_ns, 1700u);
  EXPECT_EQ(p, end);
}

TEST(Codec, TypicalEventsStayCompact) {
  // A malloc/free pair of nearby addresses a few hundred ns apart: the common case.
  uint8_t buf[2 * kMaxEventBytes];
  CodecState s{0, 0x555500000000};
  Event m;
  m.op = Op::kMalloc, m.time_ns = 300, m.a = 48, m.result = 0x555500000040;
  Event f;
  f.op = Op::kFree, f.time_ns = 700, f.a = 0x555500000040;
  uint8_t* end = encode_event(f, s, encode_event(m, s, buf));
  EXPECT_LE(end - buf, 10);
}

TEST(Codec, RepeatedStackIdsCostNoBytes) {
  // Stacks 7, 7, none (a free), 7, 300, 300: ids written for the first 7 and the first 300 only.
  const uint32_t ids[] = {7, 7, 0, 7, 300, 300};
  uint8_t buf[6 * kMaxEventBytes];
  CodecState enc{0, 0x1000};
  uint8_t* out = buf;
  size_t sizes[6];
  for (int i = 0; i < 6; ++i) {
    Event e;
    e.op = ids[i] ? Op::kMalloc : Op::kFree;
    e.time_ns = 100 * (i + 1), e.a = ids[i] ? 32 : 0x1000, e.result = ids[i] ? 0x1000 : 0;
    uint8_t* next = encode_event(e, enc, out, ids[i]);
    sizes[i] = size_t(next - out);
    out = next;
  }
  EXPECT_EQ(sizes[1], sizes[0] - 1);  // 7 is one varint byte
  EXPECT_EQ(sizes[3], sizes[0] - 1);  // the free between kept it
  EXPECT_EQ(sizes[5], sizes[4] - 2);  // 300 is two
  CodecState dec{0, 0x1000};
  const uint8_t* p = buf;
  for (uint32_t id : ids) {
    Event got;
    uint32_t stack = 99;
    ASSERT_TRUE(decode_event(p, out, dec, got, &stack));
    EXPECT_EQ(stack, id);
  }
  EXPECT_EQ(p, out);
  // "Same stack" with nothing before it in the block, or with an id after it, is malformed.
  const uint8_t orphan[] = {uint8_t(uint8_t(Op::kFree) | kSameStackFlag), 0, 0};
  const uint8_t both[] = {uint8_t(uint8_t(Op::kFree) | kSameStackFlag | kStackFlag), 0, 0, 1};
  for (const auto& bad :
       {std::vector<uint8_t>(orphan, orphan + 3), std::vector<uint8_t>(both, both + 4)}) {
    CodecState d{};
    Event got;
    uint32_t stack;
    const uint8_t* q = bad.data();
    EXPECT_FALSE(decode_event(q, bad.data() + bad.size(), d, got, &stack));
  }
}

// A free carries its block's resident pages only when measured (c = 1): one varint more; one
// without costs nothing for it, and the flag on any other op is malformed.
TEST(Codec, FreesCarryResidentPagesWhenMeasured) {
  uint8_t plain[kMaxEventBytes], paged[kMaxEventBytes];
  Event f;
  f.op = Op::kFree, f.time_ns = 700, f.a = 0x555500000040;
  CodecState s1{0, 0x555500000000}, s2{0, 0x555500000000};
  uint8_t* plain_end = encode_event(f, s1, plain);
  f.b = 300, f.c = 1;
  uint8_t* paged_end = encode_event(f, s2, paged);
  EXPECT_EQ(paged_end - paged, plain_end - plain + 2);  // 300 is two varint bytes
  EXPECT_EQ(paged[0], uint8_t(Op::kFree) | kPagesFlag);
  CodecState d{0, 0x555500000000};
  const uint8_t* p = paged;
  Event got;
  ASSERT_TRUE(decode_event(p, paged_end, d, got));
  EXPECT_EQ(got.b, 300u);
  EXPECT_EQ(got.c, 1u);
  CodecState d2{0, 0x555500000000};
  p = plain;
  ASSERT_TRUE(decode_event(p, plain_end, d2, got));
  EXPECT_EQ(got.c, 0u);
  const uint8_t bad[] = {uint8_t(uint8_t(Op::kMalloc) | kPagesFlag), 0, 16, 0, 1};
  CodecState d3{};
  p = bad;
  EXPECT_FALSE(decode_event(p, bad + sizeof bad, d3, got));
}

TEST(Codec, DecoderSurvivesEveryTruncationAndBadOp) {
  std::mt19937_64 rng(11);
  uint8_t buf[kMaxEventBytes];
  uint64_t t = 0;
  for (int i = 0; i < 2000; ++i) {
    CodecState s{};
    Event e = random_event(rng, t);
    uint8_t* end = encode_event(e, s, buf);
    for (uint8_t* cut = buf; cut < end; ++cut) {
      CodecState d{};
      const uint8_t* p = buf;
      Event got;
      EXPECT_FALSE(decode_event(p, cut, d, got));
    }
  }
  uint8_t bad[4] = {kOpCount, 0, 0, 0};
  const uint8_t* p = bad;
  CodecState d{};
  Event got;
  EXPECT_FALSE(decode_event(p, bad + 4, d, got));
}

}  // namespace
}  // namespace ak::trace
