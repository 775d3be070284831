// When the background purger (src/malloc/purger.cpp) starts. Each case runs in a fresh process
// (a threadsafe death test re-executes the binary), where none runs yet.
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "allockit/allockit.h"
#include "fresh_process.hpp"
#include "malloc/options.hpp"
#include "os/os.hpp"

namespace {

using ak::detail::background_purge_running;
using ak::testing::in_fresh_process;

constexpr std::size_t kMiB = std::size_t(1) << 20;

// Frees a written 4 MiB block: the first free of its size is sealed and emptied at free, which
// wants the purger at once (so that the next such free moves its pages out instead).
void free_a_block_that_wants_the_purger() {
  auto* big = static_cast<char*>(ak_malloc(4 * kMiB));
  std::memset(big, 1, 4 * kMiB);
  ak_free(big);
}

// A single-threaded process starts it in that free.
TEST(BackgroundPurge, ASingleThreadedProcessStartsItInTheFreeThatWantsIt) {
  if (!ak::os::single_threaded()) GTEST_SKIP() << "a sanitizer's runtime runs a thread of its own";
  in_fresh_process([] {
    REQUIRE(!background_purge_running(), 10);
    free_a_block_that_wants_the_purger();
    REQUIRE(background_purge_running(), 11);
  });
}

// Once the process has had a second thread, a free may run under a lock of glibc's that creating
// a thread takes (joining a thread frees cached stacks' thread-local storage holding it): the
// start waits for the next allocation's slow path.
TEST(BackgroundPurge, AThreadedProcessStartsItAtTheNextAllocationNotInTheFree) {
  in_fresh_process([] {
    std::thread([] {}).join();
    free_a_block_that_wants_the_purger();
    REQUIRE(!background_purge_running(), 10);
    void* p = ak_malloc(300'000);  // past the medium classes: malloc's slow path
    REQUIRE(background_purge_running(), 11);
    ak_free(p);
  });
}

// A threaded process whose allocations have taken 16 MiB from the OS starts it at an allocation
// (its frees could not), so memory its threads free and leave idle goes back; one that took less
// does not.
TEST(BackgroundPurge, AThreadedProcessThatTook16MiBStartsItAtAnAllocation) {
  in_fresh_process([] {
    std::thread([] {}).join();
    std::vector<void*> blocks(12 * 1024);
    for (void*& p : blocks) p = ak_malloc(1000);
    REQUIRE(!background_purge_running(), 10);
    blocks.resize(20 * 1024);
    for (std::size_t i = 12 * 1024; i < blocks.size(); ++i) blocks[i] = ak_malloc(1000);
    REQUIRE(background_purge_running(), 11);
    for (void* p : blocks) ak_free(p);
  });
}

// A thread that exits with blocks in its heap leaves them where only the purger sorts frees back
// into their slabs (another thread may free them): its exit starts it, if they are worth a thread
// (1 MiB in a process 50 ms old; 2 MiB is less than an allocation starts it for), and a thread
// leaving none does not.
TEST(BackgroundPurge, AThreadExitingWithLiveBlocksStartsIt) {
  in_fresh_process([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(60));
    std::vector<void*> blocks(2 * 1024);
    std::thread([&] { ak_free(ak_malloc(1000)); }).join();
    REQUIRE(!background_purge_running(), 10);
    std::thread([&] {
      for (void*& p : blocks) p = ak_malloc(1000);
      REQUIRE(!background_purge_running(), 11);
    }).join();
    REQUIRE(background_purge_running(), 12);
    for (void* p : blocks) ak_free(p);
  });
}

}  // namespace
