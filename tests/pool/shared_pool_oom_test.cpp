// Out of memory in the shared pools: with the address space capped (RLIMIT_AS, in a child process
// so the test runner is unaffected), allocation fails cleanly (null or std::bad_alloc), nothing is
// lost, and the pools recover once memory is freed. Skipped under sanitizers, whose shadow memory
// cannot live under an address-space cap.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "allockit/pool.hpp"
#include "test_scale.hpp"

namespace {

std::size_t current_vm_bytes() {
  long pages = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld", &pages) != 1) pages = 0;
    std::fclose(f);
  }
  return std::size_t(pages) * 4096;
}

[[noreturn]] void exhaust_and_recover() {
  // Reserve the bookkeeping first so only pool memory runs out.
  std::vector<void*> blocks;
  blocks.reserve(1 << 20);
  rlimit lim{current_vm_bytes() + (64u << 20), RLIM_INFINITY};
  if (setrlimit(RLIMIT_AS, &lim) != 0) std::_Exit(10);
  while (void* p = ak::try_pool_allocate(2048, 8)) {
    static_cast<char*>(p)[2047] = 1;
    blocks.push_back(p);
    if (blocks.size() == blocks.capacity()) std::_Exit(11);  // the cap did not bite
  }
  if (blocks.size() < 1000) std::_Exit(12);  // failed far too early
  bool threw = false;
  try {
    (void)ak::pool_allocate(2048, 8);
  } catch (const std::bad_alloc&) {
    threw = true;
  }
  if (!threw) std::_Exit(13);
  for (std::size_t i = 0; i < blocks.size(); i += 2) ak::pool_deallocate(blocks[i], 2048, 8);
  for (std::size_t i = 0; i < 100; ++i)
    if (ak::try_pool_allocate(2048, 8) == nullptr) std::_Exit(14);  // freed blocks are reused
  for (std::size_t i = 1; i < blocks.size(); i += 2)
    if (static_cast<char*>(blocks[i])[2047] != 1) std::_Exit(15);  // nothing was lost
  std::_Exit(0);
}

}  // namespace

TEST(SharedPoolOom, FailsCleanlyAndRecovers) {
  if (ak::test::kScale != 1) GTEST_SKIP() << "address-space cap is incompatible with sanitizers";
  EXPECT_EXIT(exhaust_and_recover(), testing::ExitedWithCode(0), "");
}
