// The OS layer: aligned mapping, zero-fill, decommit, residency and failure as null.
#include <gtest/gtest.h>

#include <sys/mman.h>

#include <cerrno>
#include <cstring>

#include "os/os.hpp"

namespace os = ak::os;

TEST(OsMemory, MapIsAlignedAndZeroed) {
  for (std::size_t align : {std::size_t(4096), std::size_t(1) << 16, std::size_t(1) << 21}) {
    auto* p = static_cast<unsigned char*>(os::map(3 * 4096, align));
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % align, 0u);
    for (std::size_t i = 0; i < 3 * 4096; i += 511) EXPECT_EQ(p[i], 0);
    os::release(p, 3 * 4096);
  }
}

TEST(OsMemory, ReserveCommitDecommit) {
  const std::size_t size = 64 * os::page_size();
  auto* p = static_cast<char*>(os::reserve(size, os::page_size()));
  ASSERT_NE(p, nullptr);
  ASSERT_TRUE(os::commit(p, size));
  std::memset(p, 0xab, size);
  EXPECT_EQ(os::resident_bytes(p, size), size);
  ASSERT_TRUE(os::decommit(p, size));
  EXPECT_EQ(os::resident_bytes(p, size), 0u);
  EXPECT_EQ(p[100], 0);  // decommitted memory reads zero and stays usable
  p[100] = 1;
  os::release(p, size);
}

TEST(OsMemory, FailureIsNull) {
  EXPECT_EQ(os::map(0, 4096), nullptr);
  EXPECT_EQ(os::map(4096, 3000), nullptr);  // alignment not a power of two
  EXPECT_EQ(os::map(std::size_t(-1) - 4096, 4096), nullptr);
  EXPECT_EQ(os::reserve(std::size_t(1) << 60, 4096), nullptr);
}

TEST(OsMemory, PageSizeIsPowerOfTwo) {
  EXPECT_TRUE(ak::detail::is_pow2(os::page_size()));
}

TEST(OsMemory, HugePageHintIsHarmless) {
  void* p = os::map(std::size_t(4) << 20, std::size_t(2) << 20);
  ASSERT_NE(p, nullptr);
  os::huge_page_hint(p, std::size_t(4) << 20);
  os::release(p, std::size_t(4) << 20);
}

// Pages moved out land in a new range with their contents, at the old offset within 2 MiB for a
// range of 8 MiB or more (whole page tables move); the old range stays mapped, empty, reading
// zero. The sizes take their own paths (kernel-chosen address, or a reservation of the phase).
TEST(OsMemory, MovePagesOutKeepsTheOldRangeMappedAndEmpty) {
  const std::size_t page = os::page_size(), span = std::size_t(2) << 20;
  for (std::size_t bytes : {16 * page, 3 * span + 5 * page, 4 * span + 5 * page}) {
    auto* mapping = static_cast<unsigned char*>(os::map(bytes + span, span));
    ASSERT_NE(mapping, nullptr);
    unsigned char* p = mapping + 3 * page;  // off the 2 MiB boundary
    for (std::size_t i = 0; i < bytes; i += page) p[i] = static_cast<unsigned char>(i / page + 1);
    auto* q = static_cast<unsigned char*>(os::move_pages_out(p, bytes));
    if (q == nullptr) GTEST_SKIP() << "this kernel has no MREMAP_DONTUNMAP (Linux 5.7)";
    EXPECT_NE(q, p);
    if (bytes >= 4 * span) {
      EXPECT_EQ(reinterpret_cast<std::uintptr_t>(q) % span, 3 * page);
    }
    EXPECT_EQ(os::resident_bytes(p, bytes), 0u);
    EXPECT_EQ(os::resident_bytes(q, bytes), bytes);
    for (std::size_t i = 0; i < bytes; i += page) {
      ASSERT_EQ(q[i], static_cast<unsigned char>(i / page + 1)) << i;
      ASSERT_EQ(p[i], 0) << i;
    }
    p[0] = 7;  // still writable
    os::release(q, bytes);
    os::release(mapping, bytes + span);
  }
}

// A range made of several mappings (the large cache merges ranges whose pages moved before, and
// the kernel keeps those apart) still moves out whole: mremap alone refuses it (EFAULT), so the
// move goes one mapping at a time. Pieces of another mapping sit off any halving point.
TEST(OsMemory, MovePagesOutMovesARangeOfSeveralMappings) {
  const std::size_t page = os::page_size(), span = std::size_t(2) << 20;
  for (std::size_t bytes : {24 * page, 4 * span + 5 * page}) {
    auto* p = static_cast<unsigned char*>(os::map(bytes, page));
    ASSERT_NE(p, nullptr);
    for (std::size_t at : {std::size_t(3), std::size_t(13)}) {  // foreign pieces of 5 pages
      auto* other = static_cast<unsigned char*>(os::map(5 * page, page));
      ASSERT_NE(other, nullptr);
      other[0] = 1;  // pages of its own: moved, it stays a mapping apart
      ASSERT_NE(::mremap(other, 5 * page, 5 * page, MREMAP_MAYMOVE | MREMAP_FIXED, p + at * page),
                MAP_FAILED);
    }
    for (std::size_t i = 0; i < bytes; i += page) p[i] = static_cast<unsigned char>(i / page + 1);
    void* whole = ::mremap(p, bytes, bytes, MREMAP_MAYMOVE | MREMAP_DONTUNMAP, nullptr);
    if (whole != MAP_FAILED) {
      os::release(whole, bytes);
      os::release(p, bytes);
      GTEST_SKIP() << "the kernel merged the mappings, or moves across them";
    }
    if (errno != EFAULT) GTEST_SKIP() << "this kernel has no MREMAP_DONTUNMAP (Linux 5.7)";
    auto* q = static_cast<unsigned char*>(os::move_pages_out(p, bytes));
    ASSERT_NE(q, nullptr);
    EXPECT_EQ(os::resident_bytes(p, bytes), 0u);
    EXPECT_EQ(os::resident_bytes(q, bytes), bytes);
    for (std::size_t i = 0; i < bytes; i += page) {
      ASSERT_EQ(q[i], static_cast<unsigned char>(i / page + 1)) << i;
      ASSERT_EQ(p[i], 0) << i;
    }
    os::release(q, bytes);
    os::release(p, bytes);
  }
}

// Growing such a range (the large cache grows its largest resident range for a request none
// holds) keeps every byte and its pages: mremap alone refuses a range of several mappings, so
// its pages move one mapping at a time into a new mapping, which gets the rest; the old range is
// given back.
TEST(OsMemory, RemapGrowsARangeOfSeveralMappings) {
  const std::size_t page = os::page_size();
  const std::size_t bytes = 24 * page, grown = 40 * page;
  auto* p = static_cast<unsigned char*>(os::map(bytes, page));
  ASSERT_NE(p, nullptr);
  auto* other = static_cast<unsigned char*>(os::map(5 * page, page));
  ASSERT_NE(other, nullptr);
  other[0] = 1;  // pages of its own: moved, it stays a mapping apart
  ASSERT_NE(::mremap(other, 5 * page, 5 * page, MREMAP_MAYMOVE | MREMAP_FIXED, p + 7 * page),
            MAP_FAILED);
  for (std::size_t i = 0; i < bytes; i += page) p[i] = static_cast<unsigned char>(i / page + 1);
  void* probe = ::mremap(p, bytes, grown, MREMAP_MAYMOVE);
  if (probe != MAP_FAILED) {
    os::release(probe, grown);
    GTEST_SKIP() << "the kernel merged the mappings, or grows across them";
  }
  ASSERT_EQ(errno, EFAULT);
  errno = 0;
  auto* q = static_cast<unsigned char*>(os::remap(p, bytes, grown));
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(errno, 0);
  for (std::size_t i = 0; i < bytes; i += page)
    ASSERT_EQ(q[i], static_cast<unsigned char>(i / page + 1)) << i;
  for (std::size_t i = bytes; i < grown; i += page) ASSERT_EQ(q[i], 0) << i;
  q[grown - 1] = 1;                                // the new tail is writable
  EXPECT_EQ(os::resident_bytes(q, bytes), bytes);  // moved, not copied and faulted back
  EXPECT_EQ(::msync(p, page, 0), -1);              // the old range is gone (ENOMEM: unmapped)
  os::release(q, grown);
}

// The coarse clock read by a system call (at load, where the vDSO's pages would fault in) is the
// clock the vDSO reads: the two agree to within a few of its ticks, and both move forward.
TEST(OsClock, CoarseClockBySyscallIsTheVdsoClock) {
  const std::uint64_t a = ak::os::coarse_now_ns();
  const std::uint64_t b = ak::os::coarse_now_ns_by_syscall();
  const std::uint64_t c = ak::os::coarse_now_ns();
  EXPECT_GT(b, 0u);
  EXPECT_LE(a, b);
  EXPECT_LE(b, c);
}
