// Non-heap memory (trace/nonheap.hpp): dirtied static data, named thread stacks and exited
// threads' cached stacks count, heap does not; unmeasured samples take the larger neighbouring
// measure.
#include "trace/nonheap.hpp"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace ak::trace {
namespace {

constexpr uint64_t kMiB = 1 << 20;
char g_static[8 << 20];  // .bss: an anonymous mapping after the test binary's data

TEST(NonHeap, DirtiedStaticDataCounts) {
  const uint64_t before = nonheap_bytes(nullptr, 0, 0);
  volatile char* data = g_static;  // stores the compiler must keep
  for (size_t i = 0; i < sizeof g_static; i += 4096) data[i] = 1;
  const uint64_t after = nonheap_bytes(nullptr, 0, 0);
  EXPECT_GE(after, before + 7 * kMiB);
}

// The allocator's own object is heap: with this test binary named as the allocator, its dirtied
// .bss does not count.
char g_allocator_static[4 << 20];

TEST(NonHeap, TheAllocatorsOwnDataIsHeap) {
  const unsigned long long self = object_inode(reinterpret_cast<const void*>(&g_allocator_static));
  ASSERT_NE(self, 0u);
  const uint64_t before = nonheap_bytes(nullptr, 0, self);
  volatile char* data = g_allocator_static;
  for (size_t i = 0; i < sizeof g_allocator_static; i += 4096) data[i] = 1;
  EXPECT_LT(nonheap_bytes(nullptr, 0, self), before + 512 * 1024);
  EXPECT_GE(nonheap_bytes(nullptr, 0, 0), before + 3 * kMiB);  // named as no allocator: counted
}

TEST(NonHeap, HeapDoesNotCount) {
  const uint64_t before = nonheap_bytes(nullptr, 0, 0);
  std::vector<char*> blocks;
  for (int i = 0; i < 16; ++i) {  // 16 MiB, small and large blocks
    blocks.push_back(static_cast<char*>(std::malloc(i % 2 ? 2 * kMiB : 64 * 1024)));
    for (size_t off = 0; off < (i % 2 ? 2 * kMiB : 64 * 1024); off += 4096) blocks.back()[off] = 1;
  }
  const uint64_t after = nonheap_bytes(nullptr, 0, 0);
  for (char* b : blocks) std::free(b);
  EXPECT_LT(after, before + kMiB);
}

// The calling thread's stack; empty when unknown.
AddressRange own_stack() {
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) != 0) return {};
  void* addr = nullptr;
  size_t size = 0;
  const bool known = pthread_attr_getstack(&attr, &addr, &size) == 0;
  pthread_attr_destroy(&attr);
  if (!known) return {};
  return {reinterpret_cast<uintptr_t>(addr), reinterpret_cast<uintptr_t>(addr) + size};
}

TEST(NonHeap, NamedThreadStacksCount) {
  std::atomic<int> stage{0};
  AddressRange stack;
  std::thread t([&] {
    stack = own_stack();
    // alloca, not an array: a sanitizer may move fixed-size locals off the stack.
    auto* frame = static_cast<volatile char*>(__builtin_alloca(2 << 20));
    for (size_t i = 0; i < (2 << 20); i += 4096) frame[i] = 1;
    stage.store(1);
    while (stage.load() != 2) std::this_thread::yield();
  });
  while (stage.load() != 1) std::this_thread::yield();
  const uint64_t without = nonheap_bytes(nullptr, 0, 0);
  const uint64_t with = nonheap_bytes(&stack, 1, 0);
  stage.store(2);
  t.join();
  EXPECT_GE(with, without + 2 * kMiB - 64 * 1024);
}

// Memory mapped right after the test binary's .bss (the kernel merges it with the .bss mapping)
// is not .bss: only what the program headers say the .bss spans counts.
extern "C" char end;  // the end of the executable's .bss (the linker defines it)

TEST(NonHeap, AMappingAfterTheBssIsNotBss) {
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t after = (reinterpret_cast<uintptr_t>(&end) + page - 1) & ~(page - 1);
  constexpr size_t kBytes = 4 << 20;
  const uint64_t before = nonheap_bytes(nullptr, 0, 0);
  void* m = mmap(reinterpret_cast<void*>(after), kBytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  if (m != reinterpret_cast<void*>(after)) {
    if (m != MAP_FAILED) munmap(m, kBytes);
    GTEST_SKIP() << "the pages after the .bss are taken";
  }
  for (size_t i = 0; i < kBytes; i += 4096) static_cast<volatile char*>(m)[i] = 1;
  const uint64_t with = nonheap_bytes(nullptr, 0, 0);
  munmap(m, kBytes);
  EXPECT_LT(with, before + kMiB);
}

// An exited thread's stack, which glibc keeps mapped (and its top pages resident) for its next
// thread, counts while a stack's mapping holds it; an anonymous mapping without a guard page
// below it does not, though named as one (a range glibc unmapped and something else took).
TEST(NonHeap, AnExitedThreadsCachedStackCounts) {
  AddressRange stack;
  std::thread([&] { stack = own_stack(); }).join();
  ASSERT_GT(stack.hi, stack.lo);
  bool seen = false;
  const uint64_t without = nonheap_bytes(nullptr, 0, 0);
  const uint64_t with = nonheap_bytes(nullptr, 0, 0, &stack, 1, &seen);
  EXPECT_TRUE(seen);
  EXPECT_GE(with, without + 4096);

  // Below the named range: a read-only page, not a guard.
  constexpr size_t kBytes = 4 << 20;
  auto* m = static_cast<char*>(
      mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(m, MAP_FAILED);
  for (size_t i = 0; i < kBytes; i += 4096) m[i] = 1;
  ASSERT_EQ(mprotect(m, 4096, PROT_READ), 0);
  const AddressRange not_a_stack{reinterpret_cast<uintptr_t>(m) + 4096,
                                 reinterpret_cast<uintptr_t>(m) + kBytes};
  seen = false;
  const uint64_t before = nonheap_bytes(nullptr, 0, 0);
  const uint64_t named = nonheap_bytes(nullptr, 0, 0, &not_a_stack, 1, &seen);
  munmap(m, kBytes);
  EXPECT_FALSE(seen);
  EXPECT_LT(named, before + kMiB);
}

// The maps and PAGEMAP_SCAN route reads what smaps's "Anonymous:" lines read: pages read but never
// written (the shared zero page) do not count, pages written do, and so do pages a fork shares.
char g_read_only[4 << 20];
char g_written[2 << 20];

// |by pagemap - by smaps| in bytes, -1 when either route fails.
int64_t route_gap(unsigned long long allocator_inode) {
  uint64_t by_pagemap = 0, by_smaps = 0;
  if (!nonheap_bytes_by_pagemap(allocator_inode, by_pagemap) ||
      !nonheap_bytes_by_smaps(allocator_inode, by_smaps))
    return -1;
  return by_pagemap > by_smaps ? int64_t(by_pagemap - by_smaps) : int64_t(by_smaps - by_pagemap);
}

// Whether a .bss mapping goes on past what its object's program headers say (a neighbour mapped
// right after it and merged, as a sanitizer's mappings are): the two routes count such a mapping
// differently by design (smaps counts whole mappings and leaves it out).
bool a_bss_shares_its_mapping() {
  nonheap_detail::BssExtents bss;
  nonheap_detail::Classifier classify;
  classify.start(0, bss);
  bool shares = false;
  nonheap_detail::for_each_line("/proc/self/maps", [&](const char* line) {
    nonheap_detail::Mapping m;
    if (!nonheap_detail::parse_mapping(line, m)) return;
    const AddressRange r = classify.counts(m);
    shares = shares || (r.hi > r.lo && (r.lo != m.lo || r.hi != m.hi));
  });
  return shares;
}

TEST(NonHeap, PagemapRouteMatchesSmaps) {
  uint64_t probe = 0;
  if (!nonheap_bytes_by_pagemap(0, probe))
    GTEST_SKIP() << "no PAGEMAP_SCAN (Linux < 6.7): smaps only";
  if (a_bss_shares_its_mapping())
    GTEST_SKIP() << "a .bss shares its mapping with a neighbour: the routes differ by design";
  volatile char* ro = g_read_only;
  volatile char* rw = g_written;
  char sum = 0;
  for (size_t i = 0; i < sizeof g_read_only; i += 4096) sum = static_cast<char>(sum + ro[i]);
  for (size_t i = 0; i < sizeof g_written; i += 4096) rw[i] = static_cast<char>(sum + 1);
  constexpr int64_t kSlack = 16 * 1024;  // the main stack between the two reads
  EXPECT_LE(route_gap(0), kSlack);
  const unsigned long long self = object_inode(reinterpret_cast<const void*>(&g_written));
  EXPECT_LE(route_gap(self), kSlack);
  uint64_t with_zero_pages = 0;
  ASSERT_TRUE(nonheap_bytes_by_pagemap(0, with_zero_pages));
  EXPECT_LT(with_zero_pages, probe + 3 * kMiB);  // 4 MiB read, 2 MiB written
  EXPECT_GE(with_zero_pages, probe + 2 * kMiB - kSlack);
  const pid_t child = fork();
  if (child == 0) _exit(route_gap(0) >= 0 && route_gap(0) <= kSlack ? 0 : 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "routes differ in a forked child";
}

TEST(NonHeap, UnmeasuredSamplesTakeTheLargerNeighbour) {
  const uint64_t u = kNonheapUnmeasured;
  std::vector<uint64_t> v = {u, 5, u, u, 3, u, 9, u};
  fill_unmeasured(v.size(), [&](size_t i) -> uint64_t& { return v[i]; });
  EXPECT_EQ(v, (std::vector<uint64_t>{5, 5, 5, 5, 3, 9, 9, 9}));
  std::vector<uint64_t> none = {u, u};
  fill_unmeasured(none.size(), [&](size_t i) -> uint64_t& { return none[i]; });
  EXPECT_EQ(none, (std::vector<uint64_t>{0, 0}));
}

}  // namespace
}  // namespace ak::trace
