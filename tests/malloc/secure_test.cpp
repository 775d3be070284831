// The secure build (AK_SECURE, src/malloc/secure.hpp): every kind of heap bug it detects is
// reported with the call, the kind and the address, and aborts (a death test per kind); valid
// use is untouched; a corruption fuzzer checks that each single corruption in a random run is
// reported and that a run without one never is.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "allockit/allockit.h"
#include "allockit/config.hpp"
#include "allockit/detail/shared_pool.hpp"
#include "malloc/secure.hpp"
#include "memory_probe.hpp"

namespace {

static_assert(ak::kSecureBuild, "this test is built against the secure layers");

constexpr std::size_t kKiB = 1024;
using ak::testing::readable;

// Writes through a volatile pointer, so the compiler keeps a write the program has no right to.
void poke(void* p, std::size_t at, char v = 1) {
  static_cast<volatile char*>(p)[at] = v;
}

// Frees and allocates blocks of `size` until a quarantined block must have left the quarantine.
void churn(std::size_t size) {
  for (int i = 0; i < 20000; ++i) ak_free(ak_malloc(size));
}

class SecureDeath : public ::testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

}  // namespace

// ---- valid use ------------------------------------------------------------------------------

TEST(Secure, UsableSizeIsTheRequest) {
  const std::size_t sizes[] = {1, 7, 8, 9, 24, 100, 4000, 20 * kKiB, 200 * kKiB, 300 * kKiB};
  for (std::size_t n : sizes) {
    auto* p = static_cast<char*>(ak_malloc(n));
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(ak_malloc_usable_size(p), n);
    std::memset(p, 0x5a, n);
    ak_free_sized(p, n);
  }
}

TEST(Secure, ReallocKeepsDataAndMovesTheCanary) {
  auto* p = static_cast<char*>(ak_malloc(100));
  for (int i = 0; i < 100; ++i) p[i] = char(i);
  p = static_cast<char*>(ak_realloc(p, 110));  // in place: the canary moves past byte 110
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(ak_malloc_usable_size(p), 110u);
  std::memset(p + 100, 7, 10);
  p = static_cast<char*>(ak_realloc(p, 100 * kKiB));
  ASSERT_NE(p, nullptr);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(p[i], char(i));
  p = static_cast<char*>(ak_realloc(p, 600 * kKiB));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p[99], char(99));
  EXPECT_EQ(ak_malloc_usable_size(p), 600 * kKiB);
  p = static_cast<char*>(ak_realloc(p, 40));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p[39], char(39));
  ak_free(p);
}

TEST(Secure, CallocIsZeroOnReusedMemory) {
  for (int round = 0; round < 600; ++round) {  // past the quarantine: blocks come back filled
    auto* p = static_cast<unsigned char*>(ak_calloc(1, 200));
    ASSERT_NE(p, nullptr);
    for (int i = 0; i < 200; ++i) ASSERT_EQ(p[i], 0);
    std::memset(p, 0xff, 200);
    ak_free(p);
  }
}

TEST(Secure, ZeroSizeBlocksAreDistinctAndInaccessible) {
  void* a = ak_malloc(0);
  void* b = ak_malloc(0);
  void* c = ak_calloc(0, 8);
  ASSERT_NE(a, nullptr);
  EXPECT_NE(a, b);
  EXPECT_NE(b, c);
  EXPECT_FALSE(readable(a));
  EXPECT_EQ(ak_malloc_usable_size(a), 0u);
  ak_free_sized(a, 0);
  ak_free(b);
  void* d = ak_realloc(c, 10);  // grows out of the zero region
  ASSERT_NE(d, nullptr);
  EXPECT_TRUE(readable(d));
  ak_free(d);
}

// On a thread of its own: its quarantine starts empty, so none of the 16 frees below can push
// the first block out of it (a full quarantine lets one leave at random each free).
TEST(Secure, FreedBlocksAreNotReusedAtOnce) {
  std::thread([] {
    void* p = ak_malloc(48);
    ak_free(p);
    for (int i = 0; i < 16; ++i) {
      void* q = ak_malloc(48);
      EXPECT_NE(q, p);
      ak_free(q);
    }
  }).join();
}

TEST(Secure, LargeBlocksEndAtAGuardPage) {
  const std::size_t page = std::size_t(sysconf(_SC_PAGESIZE));
  for (std::size_t n : {300 * kKiB, 300 * kKiB + 1000, 2048 * kKiB}) {
    auto* p = static_cast<char*>(ak_malloc(n));
    ASSERT_NE(p, nullptr);
    const auto end = (reinterpret_cast<std::uintptr_t>(p) + n + page - 1) / page * page;
    EXPECT_TRUE(readable(p + n - 1));
    EXPECT_FALSE(readable(reinterpret_cast<char*>(end)));
    ak_free(p);
  }
  auto* big = static_cast<char*>(ak_malloc(40 << 20));  // from 32 MiB every freed block is sealed
  ASSERT_NE(big, nullptr);
  big[(40 << 20) - 1] = 1;
  ak_free(big);
  EXPECT_FALSE(readable(big));
  EXPECT_FALSE(readable(big + (40 << 20) - 1));
}

// Blocks of a fresh page come in a random order: an overflow cannot aim at the next block.
TEST(Secure, AllocationOrderInASlabIsRandom) {
  std::vector<char*> got;
  for (int i = 0; i < 200; ++i) got.push_back(static_cast<char*>(ak_malloc(200)));
  int next_in_line = 0;
  for (size_t i = 1; i < got.size(); ++i) {
    const std::ptrdiff_t d = got[i] - got[i - 1];
    next_in_line += d > 0 && d <= 256;  // the very next block of the class
  }
  for (char* p : got) ak_free(p);
  // In address order all but a few would be (the default build: 198); shuffled in batches of a
  // refill (a few to a page of blocks), about one in five.
  EXPECT_LT(next_in_line, 100) << "blocks came in address order";
}

// Large blocks handed out again from the cache, carved from the end of ranges that freed blocks,
// merges and splits left behind, are open up to their slack and end in a guard page, as fresh
// ones do: the cache's record of which pages are protected (large_cache.hpp) never skips a
// system call it needed.
TEST(Secure, ReusedLargeBlocksKeepTheirGuardPage) {
  constexpr std::size_t kPage = 4096;
  std::mt19937 rng(17);
  std::vector<std::pair<char*, std::size_t>> live(8, {nullptr, 0});
  for (int i = 0; i < 4000; ++i) {
    auto& [p, n] = live[rng() % live.size()];
    ak_free(p);
    n = 300 * kKiB + rng() % (2 << 20);
    p = static_cast<char*>(ak_malloc(n));
    ASSERT_NE(p, nullptr);
    for (std::size_t at = 0; at < n; at += kPage) p[at] = 1;  // open (a guard would fault here)
    p[n - 1] = 1;
    // The slack up to the guard holds the slack byte; the guard is at most a split's worth on.
    auto* c = reinterpret_cast<char*>((reinterpret_cast<std::uintptr_t>(p + n) + kPage - 1) &
                                      ~std::uintptr_t(kPage - 1));
    const char* limit = c + (64 * kKiB) + kPage;
    while (c < limit && readable(c)) c += kPage;
    ASSERT_LT(c, limit) << "no guard page after a " << n << "-byte block";
    for (const char* q = p + n; q < c; ++q)
      ASSERT_EQ(static_cast<unsigned char>(*q), ak::detail::kSlackByte) << n;
  }
  for (auto& [p, n] : live) ak_free(p);
}

// No linear overflow reaches slab metadata: a small slab's header sits in its region's header
// table, between inaccessible pages, not in the slab; a medium slab's last page, before the next
// slab's header page, is inaccessible.
TEST(Secure, SlabHeadersSitApartFromEveryBlock) {
  constexpr std::uintptr_t kSlab = std::uintptr_t(64) << 10, kMedium = std::uintptr_t(2) << 20;
  for (std::size_t n : {std::size_t(24), std::size_t(1000), std::size_t(9000)}) {
    auto* p = static_cast<char*>(ak_malloc(n));
    const auto base = reinterpret_cast<std::uintptr_t>(p) & ~(kSlab - 1);
    const auto header = reinterpret_cast<std::uintptr_t>(ak::detail::slab_of(p));
    EXPECT_TRUE(header < base || header >= base + kSlab) << n;
    EXPECT_EQ(header % 128, 0u);
    const std::uintptr_t table = header & ~(kSlab - 1);  // the region's first slot
    EXPECT_FALSE(readable(reinterpret_cast<void*>(table))) << "guard before the header table";
    EXPECT_FALSE(readable(reinterpret_cast<void*>(table + kSlab - 1))) << "guard after it";
    EXPECT_TRUE(readable(reinterpret_cast<void*>(header)));
    ak_free(p);
  }
  for (std::size_t n : {std::size_t(40) << 10, std::size_t(250) << 10}) {
    auto* p = static_cast<char*>(ak_malloc(n));
    const auto base = reinterpret_cast<std::uintptr_t>(p) & ~(kMedium - 1);
    EXPECT_FALSE(readable(reinterpret_cast<void*>(base + kMedium - 1))) << n;
    EXPECT_LE(reinterpret_cast<std::uintptr_t>(p) + n, base + kMedium - 4096);
    ak_free(p);
  }
}

TEST(Secure, SizedFreesOfTheRightSizePass) {
  const std::size_t sizes[] = {1, 16, 100, 5000, 70 * kKiB, 400 * kKiB};
  for (std::size_t n : sizes) {
    ak_free_sized(ak_malloc(n), n);
    ak_free_aligned_sized(ak_aligned_alloc(64, n), 64, n);
    ak_free_aligned_sized(ak_aligned_alloc(4096, n), 4096, n);
  }
}

// ---- every kind detected --------------------------------------------------------------------

TEST_F(SecureDeath, DoubleFrees) {
  EXPECT_DEATH(
      {
        void* p = ak_malloc(24);
        ak_free(p);
        ak_free(p);
      },
      "free\\(\\): double free detected: 0x");
  EXPECT_DEATH(
      {
        void* p = ak_malloc(0);
        ak_free(p);
        ak_free(p);
      },
      "double free detected \\(a zero-size block\\)");
  EXPECT_DEATH(
      {
        void* p = ak_malloc(50 * kKiB);
        ak_free(p);
        ak_free(p);
      },
      "double free detected");
}

TEST_F(SecureDeath, OverflowIntoTheSlackOrTheCanary) {
  EXPECT_DEATH(
      {
        void* p = ak_malloc(10);  // slack after byte 10
        poke(p, 10);
        ak_free(p);
      },
      "free\\(\\): heap overflow detected \\(a write past the requested size\\)");
  EXPECT_DEATH(
      {
        void* p = ak_malloc(8);  // no slack: the canary is next
        poke(p, ak_malloc_usable_size(p));
        ak_free(p);
      },
      "heap overflow detected \\(the canary after the block was overwritten\\)");
  EXPECT_DEATH(
      {
        void* p = ak_malloc(40 * kKiB);  // a medium block
        poke(p, 40 * kKiB);
        ak_free(p);
      },
      "heap overflow detected");
  EXPECT_DEATH(
      {
        void* p = ak_malloc(300 * kKiB);  // a large block: the bytes before its guard page
        poke(p, 300 * kKiB + 3);
        ak_free(p);
      },
      "free\\(\\): heap overflow detected \\(a write past the requested size\\)");
  EXPECT_DEATH(
      {
        void* p = ak_malloc(100);
        poke(p, 100);
        (void)ak_realloc(p, 20);  // realloc checks before it moves or shrinks
      },
      "realloc\\(\\): heap overflow detected");
}

// The fill and check every canary and freed-block fill goes through: every length up to 130 at
// every alignment is filled exactly (nothing before or after touched) and passes, and a change
// of any one byte inside fails.
TEST(Secure, FillAndCheckCoverExactlyTheirBytes) {
  using ak::detail::fill_with;
  using ak::detail::holds_only;
  alignas(16) unsigned char buf[192];
  for (std::size_t align = 0; align < 16; ++align)
    for (std::size_t n = 0; n <= 130; ++n) {
      std::memset(buf, 0x11, sizeof buf);
      unsigned char* p = buf + align + 8;
      fill_with(p, n, 0xdf);
      ASSERT_TRUE(holds_only(p, n, 0xdf)) << n << " at " << align;
      ASSERT_EQ(p[-1], 0x11) << n << " at " << align;
      ASSERT_EQ(p[n], 0x11) << n << " at " << align;
      for (std::size_t i = 0; i < n; ++i) {
        p[i] ^= 0x40;
        ASSERT_FALSE(holds_only(p, n, 0xdf)) << "byte " << i << " of " << n << " at " << align;
        p[i] ^= 0x40;
      }
    }
}

// The checks on the malloc and free paths, over every block size a slab has (multiples of 8 from
// 16) and every request: arm_new's window makes slack_intact pass, and a change of any byte in
// the slack's first 16 fails it; fill_freed covers exactly the block's first 128 bytes, and
// holds_freed_fill fails on a change of any of them, the tag included.
TEST(Secure, BlockChecksSeeEveryByteTheyCover) {
  using namespace ak::detail;
  alignas(16) unsigned char buf[320];
  for (std::size_t bytes = 16; bytes <= 256; bytes += 8) {
    unsigned char* p = buf + 16;
    for (std::size_t request = 0; request + kTrailerBytes <= bytes; ++request) {
      std::memset(buf, 0x11, sizeof buf);
      arm_new(p, bytes, request);
      ASSERT_EQ(buf[15], 0x11) << bytes;
      ASSERT_EQ(p[bytes], 0x11) << bytes;
      ASSERT_TRUE(slack_intact(p, bytes, request)) << bytes << " " << request;
      const std::size_t slack = std::min<std::size_t>(bytes - kTrailerBytes - request, 16);
      for (std::size_t i = request; i < request + slack; ++i) {
        p[i] ^= 0x40;
        ASSERT_FALSE(slack_intact(p, bytes, request)) << bytes << " " << request << " " << i;
        p[i] ^= 0x40;
      }
    }
    std::memset(buf, 0x11, sizeof buf);
    const std::uint64_t tag = pool_free_tag(p);
    fill_freed(p, bytes, tag);
    ASSERT_TRUE(holds_freed_fill(p, bytes, tag)) << bytes;
    ASSERT_EQ(buf[15], 0x11) << bytes;
    const std::size_t filled = std::min(bytes, kFilledBytes);
    ASSERT_EQ(p[filled], 0x11) << bytes;
    for (std::size_t i = 0; i < filled; ++i) {
      p[i] ^= 0x40;
      ASSERT_FALSE(holds_freed_fill(p, bytes, tag)) << bytes << " byte " << i;
      p[i] ^= 0x40;
    }
  }
}

// Every small request's slack holds the canary over its first 16 bytes (or all of it, when
// shorter), so a one-byte overflow of any request is seen (OverflowIntoTheSlackOrTheCanary).
TEST(Secure, SlackHoldsTheCanaryAfterEveryRequest) {
  for (std::size_t request = 1; request <= 600; ++request) {
    auto* p = static_cast<unsigned char*>(ak_malloc(request));
    ASSERT_NE(p, nullptr);
    const std::size_t room = ak::detail::pool_block_size(ak::detail::slab_of(p), p) -
                             ak::detail::kTrailerBytes - request;
    EXPECT_TRUE(ak::detail::holds_only(p + request, std::min<std::size_t>(room, 16),
                                       ak::detail::kSlackByte))
        << request;
    ak_free(p);
  }
}

TEST_F(SecureDeath, WriteAfterFree) {
  EXPECT_DEATH(
      {
        void* p = ak_malloc(128);
        ak_free(p);
        poke(p, 65);
        churn(128);
      },
      "write after free detected");
  EXPECT_DEATH(
      {
        void* p = ak_malloc(64);
        ak_free(p);
        poke(p, 0);
        std::exit(0);  // still in quarantine: checked at exit
      },
      "write after free detected");
}

// A freed block past the quarantine sits on a free list, its first word the encoded link: a
// write there (after free, or an overflow from the block before) is caught when the link is
// read, before it is followed.
TEST_F(SecureDeath, OverwrittenFreeListLinks) {
  EXPECT_DEATH(
      {
        void* p = ak_malloc(96);
        ak_free(p);
        churn(200);  // another class: p leaves the quarantine for a free list
        std::memset(p, 0x41, 8);
        for (int i = 0; i < 20000; ++i) (void)ak_malloc(96);
        std::exit(0);
      },
      "malloc\\(\\): heap corruption detected: free-list link overwritten in freed block 0x");
  // The report names the call that read the link, calloc's too.
  EXPECT_DEATH(
      {
        void* p = ak_malloc(96);
        ak_free(p);
        churn(200);
        std::memset(p, 0x41, 8);
        for (int i = 0; i < 20000; ++i) (void)ak_calloc(1, 96);
        std::exit(0);
      },
      "calloc\\(\\): heap corruption detected: free-list link overwritten");
}

TEST_F(SecureDeath, WrongSizeOrAlignmentInASizedFree) {
  EXPECT_DEATH(ak_free_sized(ak_malloc(1), 32), "free_sized\\(\\): sized free with the wrong size");
  EXPECT_DEATH(ak_free_sized(ak_malloc(0), 1), "sized free with the wrong size");
  EXPECT_DEATH(ak_free_sized(ak_malloc(400 * kKiB), 404 * kKiB), "sized free with the wrong size");
  EXPECT_DEATH(
      {
        void* p = ak_aligned_alloc(64, 64);
        ak_free_aligned_sized(p, 64, 128);
      },
      "free_aligned_sized\\(\\): sized free with the wrong size");
  EXPECT_DEATH(
      {
        auto* p = static_cast<char*>(ak_aligned_alloc(64, 64));  // p + 16: never 64-aligned
        ak_free_aligned_sized(p + 16, 64, 48);
      },
      "misaligned for the alignment given");
}

TEST_F(SecureDeath, UseOfFreedOrForeignPointers) {
  EXPECT_DEATH(
      {
        void* p = ak_malloc(32);
        ak_free(p);
        (void)ak_malloc_usable_size(p);
      },
      "malloc_usable_size\\(\\): invalid pointer \\(a freed block\\)");
  EXPECT_DEATH(
      {
        void* p = ak_malloc(0);
        ak_free(p);
        (void)ak_malloc_usable_size(p);
      },
      "a freed zero-size block");
  EXPECT_DEATH(
      {
        auto* p = static_cast<char*>(ak_malloc(32));
        ak_free(p + 16);
      },
      "invalid pointer \\(not the start of a block\\)");
  EXPECT_DEATH(
      {
        int local = 0;
        ak_free(&local);
      },
      "invalid pointer \\(not allocated by allockit\\)");
}

TEST_F(SecureDeath, ZeroSizeAccessFaults) {
  EXPECT_DEATH(
      {
        void* p = ak_malloc(0);
        poke(p, 0);
      },
      "");
}

// ---- the corruption fuzzer ------------------------------------------------------------------
// Each run is a random sequence of malloc/calloc/realloc/free over up to 64 live blocks of sizes
// from 0 to 600 KiB, in a child process. A run with a corruption makes exactly one, at a random
// step, of a random kind; the child then goes on and frees everything. The child must abort with
// that kind's report; a clean run must exit 0.

namespace {

enum Corruption { kNone, kOverflow, kWriteAfterFree, kDoubleFree, kWrongSizedFree, kKinds };

const char* expected_report(Corruption c) {
  switch (c) {
    case kOverflow:
      return "heap overflow detected";
    case kWriteAfterFree:
      return "write after free detected";
    case kDoubleFree:
      return "double free detected";
    case kWrongSizedFree:
      return "sized free with the wrong size";
    default:
      return "";
  }
}

struct Live {
  char* p;
  std::size_t n;
};

std::size_t random_size(std::mt19937_64& rng) {
  switch (rng() % 8) {
    case 0:
      return 0;
    case 1:
      return rng() % 600 * kKiB + rng() % 4096;
    case 2:
      return rng() % (64 * kKiB);
    default:
      return rng() % 512;
  }
}

[[noreturn]] void run(std::uint64_t seed, Corruption kind) {
  std::mt19937_64 rng(seed);
  std::vector<Live> live;
  const int steps = 400, corrupt_at = int(rng() % 300);
  for (int step = 0; step < steps; ++step) {
    if (step == corrupt_at && kind != kNone) {
      Live b{static_cast<char*>(ak_malloc(1 + rng() % 300)), 0};
      b.n = ak_malloc_usable_size(b.p);
      switch (kind) {
        case kOverflow: {  // one byte changed within 8 past the request: slack or trailer
          const std::size_t at = b.n + rng() % 8;
          poke(b.p, at, char(~b.p[at]));
          live.push_back(b);
          break;
        }
        case kWriteAfterFree:
          ak_free(b.p);
          // Within the bytes a freed block has filled (its first 128).
          poke(b.p, b.n > 16 ? 16 + rng() % (std::min<std::size_t>(b.n, 128) - 16) : 0);
          break;
        case kDoubleFree:
          ak_free(b.p);
          for (int i = 0; i < 3; ++i) ak_free(ak_malloc(rng() % 300));
          ak_free(b.p);
          break;
        case kWrongSizedFree:
          ak_free_sized(b.p, b.n + 1 + rng() % 64);
          break;
        default:
          break;
      }
      continue;
    }
    const unsigned op = unsigned(rng() % 4);
    if (live.size() < 64 && (op == 0 || live.empty())) {
      const std::size_t n = random_size(rng);
      auto* p = static_cast<char*>(rng() % 4 ? ak_malloc(n) : ak_calloc(1, n));
      if (p == nullptr) std::_Exit(3);
      std::memset(p, int(step), n);
      live.push_back({p, n});
    } else if (op == 1) {
      Live& b = live[rng() % live.size()];
      const std::size_t n = random_size(rng);
      auto* q = static_cast<char*>(ak_realloc(b.p, n));
      if (q == nullptr && n != 0) std::_Exit(3);
      if (n == 0) {  // realloc(p, 0) freed it
        b = live.back();
        live.pop_back();
        continue;
      }
      std::memset(q, int(step), n);
      b = {q, n};
    } else {
      const std::size_t i = rng() % live.size();
      if (rng() % 2)
        ak_free_sized(live[i].p, live[i].n);
      else
        ak_free(live[i].p);
      live[i] = live.back();
      live.pop_back();
    }
  }
  for (const Live& b : live) ak_free(b.p);
  churn(64);  // what a write after free hit leaves the quarantine, if it has not yet
  std::exit(0);
}

}  // namespace

TEST(SecureFuzz, EveryCorruptionIsReportedAndNothingElse) {
  const int runs = 150;
  for (int i = 0; i < runs; ++i) {
    const auto kind = Corruption(i % kKinds);
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      dup2(fds[1], 2);
      close(fds[0]);
      run(std::uint64_t(i) * 7919 + 1, kind);
    }
    close(fds[1]);
    std::string err;
    char buf[512];
    for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) err.append(buf, std::size_t(n));
    close(fds[0]);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    if (kind == kNone) {
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "run " << i << ": " << err;
    } else {
      EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT)
          << "run " << i << " (" << expected_report(kind) << "): status " << status << " " << err;
      EXPECT_NE(err.find(expected_report(kind)), std::string::npos) << "run " << i << ": " << err;
    }
  }
}
