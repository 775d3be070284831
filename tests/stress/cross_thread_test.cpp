// Multi-threaded stress of the shared pools: producer/consumer cross-thread frees with bounded
// memory, thread churn with bounded heaps, and random cross-thread traffic. Run under TSan by the
// `make test` sanitizer variant.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "allockit/pool.hpp"
#include "pool/pool.hpp"
#include "test_scale.hpp"

namespace {

// A bounded single-producer single-consumer ring of pointers.
class Ring {
 public:
  bool push(void* p) {
    const std::size_t h = head_.load(std::memory_order_relaxed);
    if (h - tail_.load(std::memory_order_acquire) == kCap) return false;
    slots_[h % kCap] = p;
    head_.store(h + 1, std::memory_order_release);
    return true;
  }
  void* pop() {
    const std::size_t t = tail_.load(std::memory_order_relaxed);
    if (t == head_.load(std::memory_order_acquire)) return nullptr;
    void* p = slots_[t % kCap];
    tail_.store(t + 1, std::memory_order_release);
    return p;
  }

 private:
  static constexpr std::size_t kCap = 4096;
  void* slots_[kCap];
  std::atomic<std::size_t> head_{0}, tail_{0};
};

}  // namespace

TEST(CrossThread, ProducerConsumerMemoryStaysBounded) {
  const std::size_t total = ak::test::scaled(4'000'000);
  Ring ring;
  std::atomic<bool> done{false};
  std::size_t peak_slabs = 0;
  std::thread consumer([&] {
    std::size_t got = 0;
    while (got < total) {
      if (void* p = ring.pop()) {
        ASSERT_EQ(*static_cast<std::size_t*>(p), got) << "payload lost in transit";
        ak::pool_deallocate(p, 48, 8);
        ++got;
      } else {
        std::this_thread::yield();
      }
    }
    done = true;
  });
  for (std::size_t i = 0; i < total; ++i) {
    void* p = ak::pool_allocate(48, 8);
    *static_cast<std::size_t*>(p) = i;
    while (!ring.push(p)) std::this_thread::yield();
    if (i % 65536 == 0) peak_slabs = std::max(peak_slabs, ak::pool_stats().slabs_in_use);
  }
  consumer.join();
  // At most 4096 blocks are in flight: a handful of slabs, not total * 48 bytes of them.
  EXPECT_LT(peak_slabs, 64u) << "remote frees are not being reused";
}

TEST(CrossThread, ThreadChurnReusesHeaps) {
  const std::size_t before = ak::pool_stats().heaps;
  for (int round = 0; round < 40; ++round) {
    std::vector<void*> handoff(2000);
    std::thread a([&] {
      for (auto& p : handoff) p = ak::pool_allocate(24 + round % 200, 8);
    });
    a.join();
    std::thread b([&] {
      for (void* p : handoff) ak::pool_deallocate(p, 24 + round % 200, 8);
    });
    b.join();
  }
  EXPECT_LE(ak::pool_stats().heaps, before + 2);
}

TEST(CrossThread, RandomTrafficBetweenFourThreads) {
  constexpr int kThreads = 4;
  const std::size_t ops = ak::test::scaled(400'000);
  struct Item {
    unsigned char* p;
    std::size_t size;
    unsigned char tag;
  };
  std::mutex lock;
  std::vector<Item> shared;
  std::atomic<long> corrupt{0};
  auto worker = [&](unsigned seed) {
    std::mt19937 rng(seed);
    std::vector<Item> mine;
    for (std::size_t i = 0; i < ops; ++i) {
      const unsigned r = rng() % 100;
      if (r < 45) {
        Item it{nullptr, 1 + rng() % 512, static_cast<unsigned char>(rng())};
        it.p = static_cast<unsigned char*>(ak::pool_allocate(it.size, 8));
        std::memset(it.p, it.tag, it.size);
        if (rng() % 2) {
          std::lock_guard g(lock);
          shared.push_back(it);
        } else {
          mine.push_back(it);
        }
      } else {
        Item it{};
        if (r < 75 && !mine.empty()) {
          it = mine.back();
          mine.pop_back();
        } else {
          std::lock_guard g(lock);
          if (shared.empty()) continue;
          it = shared.back();
          shared.pop_back();
        }
        if (it.p[0] != it.tag || it.p[it.size - 1] != it.tag) ++corrupt;
        ak::pool_deallocate(it.p, it.size, 8);
      }
    }
    for (const Item& it : mine) ak::pool_deallocate(it.p, it.size, 8);
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(worker, 100 + t);
  for (auto& t : threads) t.join();
  for (const Item& it : shared) ak::pool_deallocate(it.p, it.size, 8);
  EXPECT_EQ(corrupt.load(), 0);
}
