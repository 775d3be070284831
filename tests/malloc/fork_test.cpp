// fork from a multi-threaded process: the child must be able to allocate and free even if another
// thread held an allocator lock at the moment of fork, and must start no thread of its own.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "allockit/allockit.h"
#include "thread_probe.hpp"

using ak::testing::threads_of_this_process;

TEST(MallocFork, ChildOfABusyMultiThreadedParentAllocates) {
  std::atomic<bool> stop{false};
  std::vector<std::thread> busy;
  for (int t = 0; t < 2; ++t)
    busy.emplace_back([&] {
      while (!stop) ak_free(ak_malloc(1 << 20));  // keeps the large-block lock hot
    });
  for (int i = 0; i < 20; ++i) {
    const pid_t pid = fork();
    if (pid == 0) {
      for (int k = 0; k < 1000; ++k) ak_free(ak_malloc(k % 3 ? 100 : 1 << 20));
      _exit(0);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child " << i << " failed";
  }
  stop = true;
  for (auto& t : busy) t.join();
}

// A forked child starts no background purger, even one old enough and caching enough to start one:
// a child of a multi-threaded parent may not create threads (POSIX allows it async-signal-safe
// calls only). Its cached memory is purged by its own allocator calls.
TEST(MallocFork, AChildStartsNoThreadOfItsOwn) {
  const pid_t pid = fork();
  if (pid == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(60));  // past the young process's wait
    // Counted here, not taken as 1: a sanitizer's runtime may run a thread of its own.
    const int before = threads_of_this_process();
    void* blocks[16];
    for (void*& b : blocks) b = ak_malloc(std::size_t(4) << 20);
    for (void* b : blocks) ak_free(b);  // 64 MiB cached: enough to start a purger at any age
    for (int k = 0; k < 100000; ++k) ak_free(ak_malloc(std::size_t(k % 64 + 1) * 1024));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    _exit(before > 0 && threads_of_this_process() == before ? 0 : 3);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "child died";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child runs a thread of its own";
}
