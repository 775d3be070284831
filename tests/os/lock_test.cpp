// The allocator's mutex (os::Lock): exclusion under contention, and a waiter that has spun out
// sleeps until the holder lets go.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "os/os.hpp"

namespace os = ak::os;

namespace {
constinit os::Lock g_lock;
}  // namespace

TEST(OsLock, CountsExactlyUnderContention) {
  constexpr int kThreads = 4, kRounds = 100'000;
  long counter = 0;  // plain: only the lock keeps the increments apart
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < kRounds; ++i) {
        os::LockGuard guard(g_lock);
        counter = counter + 1;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(counter, long(kThreads) * kRounds);
}

TEST(OsLock, AWaiterGetsTheLockOnlyAfterALongHold) {
  std::atomic<bool> released{false}, waiting{false};
  bool saw_released = false;
  g_lock.lock();
  std::thread waiter([&] {
    waiting.store(true);
    os::LockGuard guard(g_lock);  // spins out, then sleeps
    saw_released = released.load();
  });
  while (!waiting.load()) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(30));  // far past the spinning
  released.store(true);
  g_lock.unlock();
  waiter.join();
  EXPECT_TRUE(saw_released);
  // Free again: an uncontended lock and unlock.
  g_lock.lock();
  g_lock.unlock();
}
