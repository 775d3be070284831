// fork from a multi-threaded process: the child must be able to allocate and free even if another
// thread held an allocator lock at the moment of fork.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <thread>
#include <vector>

#include "allockit/allockit.h"

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
