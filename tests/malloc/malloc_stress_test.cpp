// Multi-threaded stress of the ak_ API: random sizes up to 1 MiB, cross-thread frees through a
// shared pool of blocks, thread churn; and out-of-memory under an address-space cap. Run under TSan
// by the `make test` sanitizer variant (the prefixed library, side by side with the system malloc).
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "allockit/allockit.h"
#include "test_scale.hpp"

TEST(MallocStress, RandomSizesCrossThreadFreesAndChurn) {
  struct Item {
    unsigned char* p;
    std::size_t n;
    unsigned char tag;
  };
  std::mutex lock;
  std::vector<Item> shared;
  std::atomic<long> corrupt{0};
  auto worker = [&](unsigned seed, std::size_t ops) {
    std::mt19937_64 rng(seed);
    for (std::size_t i = 0; i < ops; ++i) {
      if (rng() % 2) {
        const std::size_t n = rng() % 64 == 0 ? rng() % (1 << 20) : rng() % 600;
        Item it{static_cast<unsigned char*>(ak_malloc(n)), n, static_cast<unsigned char>(rng())};
        if (n) {
          it.p[0] = it.tag;
          it.p[n - 1] = it.tag;
        }
        std::lock_guard g(lock);
        shared.push_back(it);
      } else {
        Item it{};
        {
          std::lock_guard g(lock);
          if (shared.empty()) continue;
          const std::size_t k = rng() % shared.size();
          it = shared[k];
          shared[k] = shared.back();
          shared.pop_back();
        }
        if (it.n && (it.p[0] != it.tag || it.p[it.n - 1] != it.tag)) ++corrupt;
        if (rng() % 8 == 0) {
          it.p = static_cast<unsigned char*>(ak_realloc(it.p, it.n + 100));
          if (it.n && it.p[it.n - 1] != it.tag) ++corrupt;
        }
        ak_free(it.p);
      }
    }
  };
  const std::size_t ops = ak::test::scaled(100'000);
  for (int round = 0; round < 6; ++round) {  // thread churn: new threads every round
    std::vector<std::thread> threads;
    for (int t = 0; t < 3; ++t) threads.emplace_back(worker, round * 10 + t, ops / 6);
    for (auto& th : threads) th.join();
  }
  for (const Item& it : shared) ak_free(it.p);
  EXPECT_EQ(corrupt.load(), 0);
}

namespace {
[[noreturn]] void exhaust() {
  rlimit lim{std::size_t(1) << 30, RLIM_INFINITY};  // 1 GiB of address space
  if (setrlimit(RLIMIT_AS, &lim) != 0) std::_Exit(10);
  errno = 0;
  if (ak_malloc(std::size_t(2) << 30) != nullptr || errno != ENOMEM) std::_Exit(11);
  std::size_t got = 0;
  void* last = nullptr;
  while (void* p = ak_malloc(100000)) {
    last = p;
    if (++got > 100000) std::_Exit(12);  // the cap did not bite
  }
  if (errno != ENOMEM) std::_Exit(13);
  while (void* p = ak_malloc(64)) {  // small blocks run out too, cleanly
    if (++got > 100000000) std::_Exit(14);
    (void)p;
  }
  ak_free(last);
  if (ak_malloc(100000) == nullptr) std::_Exit(15);  // freed memory serves again
  std::_Exit(0);
}
}  // namespace

TEST(MallocOom, FailsWithEnomemNeverCrashes) {
  if (ak::test::kScale != 1) GTEST_SKIP() << "address-space cap is incompatible with sanitizers";
  EXPECT_EXIT(exhaust(), testing::ExitedWithCode(0), "");
}
