// The large-block page heap (src/malloc/large_cache.hpp) on its own, and its effect through
// ak_malloc: reuse without page faults, split and merge, growth by moving pages, calloc getting
// emptied pages, the resident budget, and the purge that returns everything.
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "allockit/allockit.h"
#include "fresh_process.hpp"
#include "malloc/large_cache.hpp"
#include "memory_probe.hpp"
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

// A block sealed at free that merges with the sealed range before it is passed over by the next
// request as a block on its own is: that request gets none of the merged range (it would cover
// the block just sealed), and the one after it may take it.
TEST(LargeCache, ASealedBlockMergedIntoTheRangeBeforeItIsPassedOver) {
  LargeCache c;
  char* base = written_mapping(4 * kMiB, 'g');
  c.put(base, 2 * kMiB, false, true);
  EXPECT_EQ(c.take(8 * kMiB, false).base, nullptr);  // passes over it; nothing else to take
  c.put(base + 2 * kMiB, 2 * kMiB, false, true);     // sealed now: joins [base, base + 4 MiB)
  EXPECT_EQ(c.take(3 * kMiB, false).base, nullptr);
  const LargeCache::Taken t = c.take(3 * kMiB, false);
  EXPECT_EQ(t.base, base);
  EXPECT_TRUE(t.sealed);
  ak::os::release(base, 4 * kMiB);
}

// take_at hands out the start of the open range beginning at an address (a live block's end),
// leaving the rest cached, and nothing for a sealed range, a draining one, one too short, or
// an address no range starts at.
TEST(LargeCache, TakeAtCarvesTheOpenRangeStartingThere) {
  if (ak::kSecureBuild) GTEST_SKIP() << "the secure build's blocks end in a guard page";
  LargeCache c;
  char* base = written_mapping(8 * kMiB, 'h');
  c.put(base, 2 * kMiB, false);
  c.put(base + 4 * kMiB, 2 * kMiB, false, true);  // sealed
  c.put_draining(base + 6 * kMiB, 2 * kMiB);
  EXPECT_EQ(c.take_at(base + kMiB, kMiB).base, nullptr);      // no range starts there
  EXPECT_EQ(c.take_at(base, 3 * kMiB).base, nullptr);         // too short
  EXPECT_EQ(c.take_at(base + 4 * kMiB, kMiB).base, nullptr);  // sealed
  EXPECT_EQ(c.take_at(base + 6 * kMiB, kMiB).base, nullptr);  // draining
  const LargeCache::Taken t = c.take_at(base, kMiB);
  EXPECT_EQ(t.base, base);
  EXPECT_EQ(t.bytes, kMiB);
  EXPECT_EQ(c.take_at(base + kMiB, kMiB).base, base + kMiB);  // the rest, still cached
  ak::os::release(base, 8 * kMiB);
}

// take_aligned carves a block whose start plus its lead is aligned, from the best range that
// holds one: the bytes before it stay cached as a range of their own, those after it as the rest.
// With `fillers` one-page ranges cached first (past the inline slots: the index's path).
void take_aligned_carves_at_the_phase(std::size_t fillers) {
  LargeCache c;
  char* const filler_pages = written_mapping(2 * fillers * 4096 + 4096, 'f');
  for (std::size_t i = 0; i < fillers; ++i) c.put(filler_pages + 2 * i * 4096, 4096, false);
  const std::size_t filler_bytes = fillers * 4096;
  char* const mapping = written_mapping(12 * kMiB, 'k');
  // Ranges inside, a 2 MiB-aligned: [a + 4 KiB, a + 3 MiB - 4 KiB) and [a + 4 MiB, a + 8 MiB).
  char* const a = reinterpret_cast<char*>(
      (reinterpret_cast<std::uintptr_t>(mapping) + 2 * kMiB - 1) & ~(2 * kMiB - 1));
  c.put(a + 4096, 3 * kMiB - 8192, false);
  c.put(a + 4 * kMiB, 4 * kMiB, false);
  // A block of 1 MiB + 4 KiB whose start plus 4 KiB is 2 MiB-aligned: not in the first range
  // (its only such start, a + 2 MiB - 4 KiB, leaves too little after it), in the second at a +
  // 6 MiB - 4 KiB.
  const LargeCache::Taken t = c.take_aligned(kMiB + 4096, 2 * kMiB, 4096, false);
  EXPECT_EQ(t.base, a + 6 * kMiB - 4096);
  EXPECT_EQ(t.bytes, kMiB + 4096);
  EXPECT_EQ(c.bytes(), filler_bytes + 7 * kMiB - 8192 - (kMiB + 4096));
  EXPECT_TRUE(c.holds(a + 4 * kMiB));          // the head, cached
  EXPECT_TRUE(c.holds(a + 6 * kMiB - 8192));   // its last page
  EXPECT_FALSE(c.holds(a + 6 * kMiB - 4096));  // the block
  EXPECT_TRUE(c.holds(a + 7 * kMiB));          // the rest
  // The first range's aligned start serves a block that fits there.
  const LargeCache::Taken u = c.take_aligned(kMiB - 4096, 2 * kMiB, 4096, false);
  EXPECT_EQ(u.base, a + 2 * kMiB - 4096);
  EXPECT_EQ(c.take_aligned(4 * kMiB, 2 * kMiB, 4096, false).base, nullptr);  // none holds it
  ak::os::release(mapping, 12 * kMiB);
  ak::os::release(filler_pages, 2 * fillers * 4096 + 4096);
}

TEST(LargeCache, TakeAlignedCarvesAtThePhaseAndKeepsTheHead) {
  if (ak::kSecureBuild) GTEST_SKIP() << "the secure build maps aligned blocks fresh";
  take_aligned_carves_at_the_phase(0);
  take_aligned_carves_at_the_phase(2 * LargeCache::kInlineSlots);  // through the index
}

// The cache keeps a range per gap between live blocks, past its inline slots, up to kMaxSlots;
// only then is the oldest released. (With 64 slots, a program holding more live large blocks
// than that released a range at nearly every free.)
TEST(LargeCache, KeepsThousandsOfRangesBeforeReleasingTheOldest) {
  LargeCache c;
  const std::size_t n = LargeCache::kMaxSlots + 1, page = 4096;
  char* const mapping = written_mapping(2 * n * page, 'm');
  for (std::size_t i = 0; i < n - 1; ++i) c.put(mapping + 2 * i * page, page, false);
  EXPECT_EQ(c.bytes(), (n - 1) * page);  // every one kept, none merged
  EXPECT_TRUE(c.holds(mapping));
  EXPECT_TRUE(c.holds(mapping + 2 * (n - 2) * page));
  c.put(mapping + 2 * (n - 1) * page, page, false);  // one past the slots: the oldest goes
  EXPECT_EQ(c.bytes(), (n - 1) * page);
  EXPECT_FALSE(c.holds(mapping));
  EXPECT_TRUE(c.holds(mapping + 2 * page));
  EXPECT_EQ(c.take(page, false).base != nullptr, true);
  ak::os::release(mapping + page, 2 * n * page - page);  // the first page went with its range
}

// Past its inline slots the cache finds neighbours and fits through its index: a range freed
// between two cached ones merges with both, the best fit of a size is the one range that holds
// it, and take_at finds the range starting at an address.
TEST(LargeCache, PastItsInlineSlotsMergesAndFitsThroughItsIndex) {
  LargeCache c;
  constexpr std::size_t kPage = 4096, kRanges = 2 * LargeCache::kInlineSlots;
  char* const mapping = written_mapping(2 * kRanges * kPage, 'i');
  for (std::size_t i = 0; i < kRanges; ++i) c.put(mapping + 2 * i * kPage, kPage, false);
  c.put(mapping + 11 * kPage, kPage, false);  // between the ranges at pages 10 and 12
  EXPECT_EQ(c.bytes(), (kRanges + 1) * kPage);
  const LargeCache::Taken t = c.take(3 * kPage, false);
  EXPECT_EQ(t.base, mapping + 10 * kPage);
  EXPECT_EQ(t.bytes, 3 * kPage);
  if (!ak::kSecureBuild) {
    const LargeCache::Taken u = c.take_at(mapping + 20 * kPage, kPage);
    EXPECT_EQ(u.base, mapping + 20 * kPage);
    EXPECT_EQ(c.take_at(mapping + 21 * kPage, kPage).base, nullptr);  // no range starts there
  }
  EXPECT_FALSE(c.holds(mapping + 10 * kPage));
  EXPECT_TRUE(c.holds(mapping + 14 * kPage));
  ak::os::release(mapping, 2 * kRanges * kPage);
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

// With no resident range big enough, the largest resident one grows rather than a known-zero
// one being carved: its pages move, where the known-zero one's would all fault in (and the freed
// resident ones would stay beside them). The known-zero range stays cached.
TEST(LargeCache, GrowingAResidentRangeBeatsCarvingAKnownZeroOne) {
  LargeCache c;
  char* resident = written_mapping(4 * kMiB, 'f');
  c.put(resident, 4 * kMiB, false);
  auto* zero = static_cast<char*>(ak::os::map(16 * kMiB, 4096));
  c.put(zero, 16 * kMiB, true);
  const LargeCache::Taken t = c.take(10 * kMiB, false);
  ASSERT_NE(t.base, nullptr);
  EXPECT_EQ(t.base[0], 'f');
  EXPECT_EQ(resident_pages(t.base, 4 * kMiB), 4 * kMiB / 4096);
  EXPECT_EQ(c.resident_bytes(), 0u);
  EXPECT_EQ(c.bytes(), 16 * kMiB);  // the known-zero range
  EXPECT_EQ(c.take(16 * kMiB, false).base, zero);
  ak::os::release(t.base, t.bytes);
  ak::os::release(zero, 16 * kMiB);
}

// A resident range of two kernel mappings side by side, merged in the cache (mremap resizes
// within one), grows as one: its pages move a mapping at a time with their bytes, and the
// known-zero range stays cached for a later request.
TEST(LargeCache, ARangeOfTwoMappingsGrowsWithItsPages) {
  LargeCache c;
  char* resident = written_mapping(4 * kMiB, 'g');
  char* other = written_mapping(2 * kMiB, 'h');  // written: moved, it stays a mapping apart
  ASSERT_NE(::mremap(other, 2 * kMiB, 2 * kMiB, MREMAP_MAYMOVE | MREMAP_FIXED, resident + 2 * kMiB),
            MAP_FAILED);
  c.put(resident, 2 * kMiB, false);
  c.put(resident + 2 * kMiB, 2 * kMiB, false);  // merges into one range of two mappings
  auto* zero = static_cast<char*>(ak::os::map(16 * kMiB, 4096));
  c.put(zero, 16 * kMiB, true);
  const LargeCache::Taken t = c.take(10 * kMiB, false);
  ASSERT_NE(t.base, nullptr);
  ASSERT_NE(t.base, zero);
  EXPECT_EQ(t.base[0], 'g');
  EXPECT_EQ(t.base[2 * kMiB], 'h');
  EXPECT_EQ(resident_pages(t.base, 4 * kMiB), 4 * kMiB / 4096);
  EXPECT_EQ(c.resident_bytes(), 0u);
  EXPECT_EQ(c.take(16 * kMiB, false).base, zero);
  ak::os::release(t.base, t.bytes);
  ak::os::release(zero, 16 * kMiB);
}

// Whether os::zero_backed_pages works here (Linux 6.7 and /proc).
bool kernel_scans_pages() {
  char* probe = written_mapping(4096, 'p');
  const bool scans = ak::os::zero_backed_pages(probe, 4096);
  ak::os::release(probe, 4096);
  return scans;
}

// calloc prefers a resident range (clear_resident_range clears only what the program wrote, and
// those pages do not fault again), or, where the kernel cannot scan pages, a known-zero one.
TEST(LargeCache, CallocPrefersResidentRangesIfScannedAndNeverGrowsThem) {
  const bool scans = kernel_scans_pages();
  LargeCache c;
  char* resident = written_mapping(4 * kMiB, 'd');
  c.put(resident, 4 * kMiB, false);
  auto* zero = static_cast<char*>(ak::os::map(4 * kMiB, 4096));
  c.put(zero, 4 * kMiB, true);
  const LargeCache::Taken first = c.take(4 * kMiB, true);  // both hold it
  ASSERT_EQ(first.base, scans ? resident : zero);
  EXPECT_EQ(first.zeroed, !scans);  // the caller clears a resident range
  const LargeCache::Taken second = c.take(4 * kMiB, true);
  ASSERT_EQ(second.base, scans ? zero : resident);
  EXPECT_EQ(resident[12345], 'd');  // the cache itself clears nothing
  // A calloc never grows a resident range (its pages would need clearing).
  char* small = written_mapping(kMiB, 'e');
  c.put(small, kMiB, false);
  EXPECT_EQ(c.take(2 * kMiB, true).base, nullptr);
  ak::os::release(resident, 4 * kMiB);
  ak::os::release(zero, 4 * kMiB);
  c.purge_older_than(0, 0);
}

// A mapping of `n` bytes with one page in `stride` written.
char* sparse_mapping(std::size_t n, std::size_t stride, char fill) {
  auto* p = static_cast<char*>(ak::os::map(n, 4096));
  for (std::size_t i = 0; i < n; i += stride) p[i + 100] = fill;
  return p;
}

bool all_zero(const char* p, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i)
    if (p[i] != 0) return false;
  return true;
}

// With the kernel's page scan, clearing a range for calloc writes only the pages the program
// wrote: they stay resident (no fault when written again), the others stay unresident.
TEST(ClearResidentRange, ClearsOnlyThePagesHoldingData) {
  const std::size_t n = 4 * kMiB;
  char* sparse = sparse_mapping(n, 8 * 4096, 'f');  // an eighth of its pages
  if (!kernel_scans_pages()) {
    ak::os::release(sparse, n);
    GTEST_SKIP() << "this kernel has no PAGEMAP_SCAN (Linux 6.7): the fallbacks are tested below";
  }
  EXPECT_EQ(ak::detail::clear_resident_range(sparse, n), ak::detail::ClearWay::kScan);
  EXPECT_EQ(resident_pages(sparse, n), n / 4096 / 8);  // nothing faulted in
  EXPECT_TRUE(all_zero(sparse, n));                    // (reading maps the others to the zero page)
  char* dense = written_mapping(n, 'g');
  EXPECT_EQ(ak::detail::clear_resident_range(dense, n), ak::detail::ClearWay::kScan);
  EXPECT_TRUE(all_zero(dense, n));
  EXPECT_EQ(resident_pages(dense, n), n / 4096);
  // A page only read maps the shared zero page: it is not written, so it stays unbacked.
  auto* read_only = static_cast<volatile char*>(ak::os::map(n, 4096));
  for (std::size_t i = 0; i < n; i += 4096) (void)read_only[i];
  EXPECT_EQ(ak::detail::clear_resident_range(const_cast<char*>(read_only), n),
            ak::detail::ClearWay::kScan);
  EXPECT_TRUE(all_zero(const_cast<char*>(read_only), n));
  ak::os::release(sparse, n);
  ak::os::release(dense, n);
  ak::os::release(const_cast<char*>(read_only), n);
}

// Without the scan, a big or mostly unresident range is emptied (a clear by hand would fault
// every missing page in) and a small, mostly resident one cleared by hand.
TEST(ClearResidentRange, WithoutTheScanEmptiesSparseOrBigRangesAndClearsDenseOnes) {
  using ak::detail::ClearWay;
  using ak::detail::kDecommitForZero;
  const std::size_t n = 4 * kMiB;
  char* sparse = sparse_mapping(n, 8 * 4096, 'f');
  EXPECT_EQ(ak::detail::clear_resident_range(sparse, n, false), ClearWay::kEmpty);
  EXPECT_EQ(resident_pages(sparse, n), 0u);
  EXPECT_TRUE(all_zero(sparse, n));
  char* dense = written_mapping(n, 'g');
  EXPECT_EQ(ak::detail::clear_resident_range(dense, n, false), ClearWay::kByHand);
  EXPECT_EQ(resident_pages(dense, n), n / 4096);
  EXPECT_TRUE(all_zero(dense, n));
  char* big = written_mapping(kDecommitForZero, 'h');
  EXPECT_EQ(ak::detail::clear_resident_range(big, kDecommitForZero, false), ClearWay::kEmpty);
  EXPECT_EQ(resident_pages(big, kDecommitForZero), 0u);
  EXPECT_EQ(big[12345], 0);
  ak::os::release(sparse, n);
  ak::os::release(dense, n);
  ak::os::release(big, kDecommitForZero);
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

// A draining range (pages moved out at free) counts against no budget, may be handed out with
// its pages, is released a piece at a time from its end, and by any purge.
TEST(LargeCache, DrainingRangesAreReleasedInPiecesOrTakenWhole) {
  LargeCache c;
  c.note_live(0);
  char* a = written_mapping(8 * kMiB, 1);
  c.put_draining(a, 8 * kMiB);
  EXPECT_TRUE(c.has_draining());
  EXPECT_EQ(c.resident_bytes(), 0u);
  EXPECT_EQ(c.bytes(), 8 * kMiB);
  const LargeCache::Span piece = c.pop_draining(2 * kMiB);
  EXPECT_EQ(piece.base, a + 6 * kMiB);
  EXPECT_EQ(piece.bytes, 2 * kMiB);
  ak::os::release(piece.base, piece.bytes);
  EXPECT_EQ(c.bytes(), 6 * kMiB);
  const LargeCache::Taken t = c.take(6 * kMiB, false);  // the rest, pages and all
  EXPECT_EQ(t.base, a);
  EXPECT_FALSE(t.zeroed);
  EXPECT_EQ(resident_pages(a, 6 * kMiB), 6 * kMiB / 4096);
  EXPECT_FALSE(c.has_draining());
  EXPECT_EQ(c.pop_draining(2 * kMiB).base, nullptr);
  c.put_draining(a, 6 * kMiB);
  EXPECT_EQ(c.purge_older_than(std::uint64_t(1) << 62, 0), 6 * kMiB);  // however young
  EXPECT_EQ(c.bytes(), 0u);
}

// A thread about to map `need` new pages releases that many bytes of draining ranges, from
// their ends, and leaves the rest to the purger (or to a request that takes them whole).
TEST(LargeCache, ANewMappingReleasesOnlyAsManyDrainingBytesAsItNeeds) {
  LargeCache c;
  c.note_live(0);
  char* a = written_mapping(8 * kMiB, 1);
  char* b = written_mapping(8 * kMiB, 2);
  c.put_draining(a, 8 * kMiB);
  c.put_draining(b, 8 * kMiB);
  EXPECT_EQ(c.release_draining(2 * kMiB), 2 * kMiB);
  EXPECT_EQ(c.bytes(), 14 * kMiB);
  std::vector<unsigned char> vec(1);
  EXPECT_EQ(mincore(a + 6 * kMiB, 4096, vec.data()), -1);  // gone: released from the end
  EXPECT_EQ(resident_pages(a, 6 * kMiB), 6 * kMiB / 4096);
  EXPECT_EQ(c.release_draining(10 * kMiB), 10 * kMiB);  // the rest of one, part of the other
  EXPECT_EQ(c.bytes(), 4 * kMiB);
  EXPECT_TRUE(c.has_draining());
  EXPECT_EQ(c.release_draining(64 * kMiB), 4 * kMiB);  // all that is left
  EXPECT_FALSE(c.has_draining());
  EXPECT_EQ(c.bytes(), 0u);
  EXPECT_EQ(c.release_draining(2 * kMiB), 0u);
}

// With the background purger running, a freed block emptied at free of kMoveOutAtFree or more
// (one of kEmptyAtFree or more, or a smaller one sealed at free) has its pages moved out to a
// draining range the purger releases: the block's address is sealed and empty at once, and the
// cache soon holds only the emptied ranges.
TEST(LargeCache, BiggestBlocksDrainInTheBackground) {
  ak::testing::in_fresh_process([] {
    const std::size_t n = LargeCache::kEmptyAtFree + 8 * kMiB;
    ak_free(ak_malloc(n));  // caches more than enough to start the purger
    usleep(100'000);
    const std::size_t sizes[] = {n + 8 * kMiB, LargeCache::kMoveOutAtFree + 4 * kMiB};
    for (const std::size_t size : sizes) {
      ak_stats before;
      ak_stats_get(&before);
      auto* a = static_cast<char*>(ak_malloc(size));
      REQUIRE(a != nullptr, 10);
      std::memset(a, 5, size);
      ak_free(a);  // the first free of its size: sealed (freed_guard.hpp)
      REQUIRE(!ak::testing::readable(a), 11);
      REQUIRE(resident_pages(a, size - 8192) == 0, 12);
      ak_stats s;
      for (int i = 0; i < 500; ++i) {  // drained within microseconds; 5 s before failing
        ak_stats_get(&s);
        if (s.large_cached_bytes < before.large_cached_bytes + size + kMiB) break;
        usleep(10'000);
      }
      REQUIRE(s.large_cached_bytes < before.large_cached_bytes + size + kMiB, 13);
    }
  });
}

// Through ak_malloc: a freed large block comes back with its pages resident, whether the next
// request is smaller or larger (the standard suite's malloc-large pattern).
// A large block carved from the start of a cached range grows by realloc into the rest of it, in
// place: the same address, its pages resident already (in a fresh process, where the bar of the
// sealing guard is raised first, so the 4 MiB block freed is cached open).
TEST(LargeCache, ReallocGrowsABlockIntoTheRestOfItsCachedRangeInPlace) {
  if (ak::kSecureBuild) GTEST_SKIP() << "the secure build's blocks end in a guard page";
  ak::testing::in_fresh_process([] {
    ak_free(ak_malloc(8 * kMiB));  // sealed: the bar rises past 8 MiB
    auto* r = static_cast<char*>(ak_malloc(4 * kMiB));
    std::memset(r, 1, 4 * kMiB);
    ak_free(r);
    auto* p = static_cast<char*>(ak_malloc(300 * 1024));  // past the medium classes
    REQUIRE(p != nullptr, 10);
    std::memset(p, 2, 300 * 1024);
    auto* q = static_cast<char*>(ak_realloc(p, kMiB));
    REQUIRE(q == p, 11);
    REQUIRE(q[300 * 1024 - 1] == 2, 12);
    REQUIRE(resident_pages(q, kMiB) == kMiB / 4096, 13);  // the range's pages, written before
    std::memset(q, 3, kMiB);
    ak_free(q);
  });
}

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

// A block aligned past a page is carved from a cached range at that alignment: the block freed
// before is handed out again, at its address, its pages resident (each took a fresh mapping:
// 12-28 us a call where 256 KiB-1 MiB blocks aligned to 256 KiB-2 MiB churned, mimalloc 0.5-1.1).
// realloc moves it as any large block.
TEST(LargeCache, AlignedBlocksReuseFreedRangesAtTheirAlignment) {
  if (ak::kSecureBuild) GTEST_SKIP() << "the secure build maps aligned blocks fresh";
  for (std::size_t align : {std::size_t(1) << 16, std::size_t(1) << 18, 2 * kMiB})
    ak::testing::in_fresh_process([align] {
      // The first free of a size is sealed (freed_guard.hpp) and passed over by the next request;
      // the bar then rises past 650 KiB.
      void* warm = ak_aligned_alloc(align, 650 * 1024);
      std::memset(warm, 1, 650 * 1024);
      ak_free(warm);
      void* p = nullptr;
      REQUIRE(ak_posix_memalign(&p, align, 600 * 1024) == 0, 1);
      REQUIRE(reinterpret_cast<std::uintptr_t>(p) % align == 0, 2);
      std::memset(p, 1, 600 * 1024);
      ak_free(p);
      void* q = ak_aligned_alloc(align, 500 * 1024);
      REQUIRE(q == p, 3);
      REQUIRE(resident_pages(q, 500 * 1024) == 500 * 1024 / 4096, 4);
      REQUIRE(ak_malloc_usable_size(q) >= 500 * 1024, 5);
      auto* r = static_cast<char*>(ak_realloc(q, 900 * 1024));
      REQUIRE(r != nullptr && r[500 * 1024 - 1] == 1, 6);
      REQUIRE(ak_malloc_usable_size(r) >= 900 * 1024, 7);
      ak_free(r);
    });
}

// 300 large blocks freed between 300 live ones are all cached, each a range of its own, and
// handed out again without a mapping: the cache holds more ranges than its inline slots.
TEST(LargeCache, HundredsOfFreedBlocksBetweenLiveOnesStayCached) {
  ak::testing::in_fresh_process([] {
    constexpr int kBlocks = 300;
    constexpr std::size_t kBytes = 300 * 1024;
    std::vector<char*> kept, freed;
    for (int i = 0; i < kBlocks; ++i) {
      freed.push_back(static_cast<char*>(ak_malloc(kBytes)));
      kept.push_back(static_cast<char*>(ak_malloc(kBytes)));
      freed.back()[0] = kept.back()[0] = 1;
    }
    for (char* p : freed) ak_free(p);
    ak_stats s{};
    ak_stats_get(&s);
    REQUIRE(s.large_cached_bytes >= kBlocks * kBytes, 1);
    ak_collect(1);
    for (char* p : kept) ak_free(p);
  });
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

// A block of kEmptyAtFree or more of which the program wrote few pages (a sparse table) keeps
// them at free: emptying saves little memory and its next user would fault them in again.
TEST(LargeCache, MostlyUnwrittenBlocksKeepTheirPagesAtFree) {
  ak_collect(1);
  const std::size_t n = LargeCache::kEmptyAtFree + 4 * kMiB;
  auto* a = static_cast<char*>(ak_malloc(n));
  for (std::size_t i = 0; i < n; i += 8 * 4096) a[i] = 7;
  const std::size_t written = resident_pages(a, n - 8192);
  ASSERT_GE(written, (n - 8192) / 4096 / 8);
  ak_free(a);
  EXPECT_EQ(resident_pages(a, n - 8192), written);
  auto* z = static_cast<char*>(ak_calloc(1, n));  // not a's range (sealed last): reads zero
  ASSERT_NE(z, nullptr);
  for (std::size_t i = 0; i < n; i += 4096) ASSERT_EQ(z[i], 0) << i;
  auto* y = static_cast<char*>(ak_calloc(1, n));  // a's range, its written pages cleared
  ASSERT_NE(y, nullptr);
  for (std::size_t i = 0; i < n; i += 4096) ASSERT_EQ(y[i], 0) << i;
  ak_free(z);
  ak_free(y);
  ak_collect(1);
}

// Through ak_calloc: a freed block handed out again reads zero, and with the kernel's page scan
// only the pages the program wrote were cleared (the others were never faulted in).
TEST(LargeCache, CallocOfAFreedBlockClearsOnlyItsWrittenPages) {
  ak_collect(1);
  const std::size_t n = 12 * kMiB;
  void* first = ak_malloc(n);  // its free raises the sealing bar past n; it is cached empty
  ak_free(first);
  auto* b = static_cast<char*>(ak_malloc(n));
  void* held = ak_malloc(n);  // takes first's range, so b's is the only one left
  for (std::size_t i = 0; i < n; i += 8 * 4096) b[i] = 9;
  b[5] = 9;
  b[n - 1] = 9;
  ak_free(b);
  auto* c = static_cast<char*>(ak_calloc(1, n));
  ASSERT_EQ(c, b);
  if (kernel_scans_pages()) {
    // The pages written (1 in 8, and the last) and the header's.
    EXPECT_LE(resident_pages(c, n), n / 4096 / 8 + 2);
  }
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(c[i], 0) << i;
  ak_free(c);
  ak_free(held);
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
