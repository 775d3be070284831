// A program with a known allocation pattern, for the record round-trip test. Every block it
// allocates between two marker calls (malloc(777777) and malloc(777778)) has a size in
// [3000, 4000), so the checker can count exactly what the program called. It writes the
// expected counts to argv[1].  Modes (argv[2]): "pattern" (default), "crash", "exit", "nonheap"
// (memory that is not heap beside 4 MiB that is), "bigblocks" (big blocks written in part),
// "churn" (two threads that allocate without pause for 300 ms), "paced" (one thread allocating
// in bursts for 600 ms), "threads N" (N threads one after
// another, each allocating once), "main_exits" (main calls pthread_exit while a thread allocates).
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <thread>
#include <vector>

namespace {

// Calls go through volatile pointers so the compiler cannot elide allocation/free pairs.
void* (*volatile malloc_)(size_t) = malloc;
void* (*volatile calloc_)(size_t, size_t) = calloc;
void* (*volatile realloc_)(void*, size_t) = realloc;
void* (*volatile reallocarray_)(void*, size_t, size_t) = reallocarray;
int (*volatile posix_memalign_)(void**, size_t, size_t) = posix_memalign;
void* (*volatile aligned_alloc_)(size_t, size_t) = aligned_alloc;
void* (*volatile memalign_)(size_t, size_t) = memalign;
void* (*volatile valloc_)(size_t) = valloc;
void* (*volatile pvalloc_)(size_t) = pvalloc;
void (*volatile free_)(void*) = free;
void* (*volatile new_array_)(size_t) = ::operator new[];
void (*volatile delete_array_)(void*) = ::operator delete[];
void* (*volatile new_aligned_)(size_t, std::align_val_t) = ::operator new;
void (*volatile delete_aligned_)(void*, std::align_val_t) = ::operator delete;
void* keep(void* p) {
  return p;
}

int pattern(const char* expected_path) {
  std::vector<void*> handed;
  handed.reserve(1000);
  std::mutex mu;
  free_(keep(malloc_(777777)));  // start marker
  std::vector<void*> v(1000);
  for (int i = 0; i < 1000; ++i) v[i] = keep(malloc_(3000 + i % 100));
  usleep(20000);  // 3 MiB live for ten of the recorder's memory samples: its peak is seen
  for (int i = 0; i < 1000; ++i) free_(v[i]);
  for (int i = 0; i < 100; ++i) free_(keep(calloc_(1, 3000 + i)));
  void* p = keep(malloc_(3000));
  for (int i = 0; i < 50; ++i) p = keep(realloc_(p, 3001 + 10 * i));
  free_(p);
  for (int i = 0; i < 5; ++i) free_(keep(realloc_(nullptr, 3500)));
  for (int i = 0; i < 5; ++i) keep(realloc_(keep(malloc_(3600)), 0));
  for (int i = 0; i < 10; ++i) free_(keep(reallocarray_(nullptr, 3, 1001)));
  for (int i = 0; i < 10; ++i) {
    void* q = nullptr;
    if (posix_memalign_(&q, 64, 3100) != 0) return 1;
    free_(keep(q));
    free_(keep(aligned_alloc_(128, 3200)));
    free_(keep(memalign_(256, 3300)));
  }
  for (int i = 0; i < 5; ++i) free_(keep(valloc_(3400)));
  for (int i = 0; i < 5; ++i) free_(keep(pvalloc_(3500)));
  for (int i = 0; i < 20; ++i) delete_array_(keep(new_array_(3600)));
  for (int i = 0; i < 10; ++i) {
    void* q = keep(new_aligned_(3712, std::align_val_t(64)));
    delete_aligned_(q, std::align_val_t(64));
  }
  for (int i = 0; i < 7; ++i) free_(nullptr);
  auto producer = [&] {
    for (int i = 0; i < 50; ++i) free_(keep(malloc_(3800)));
    for (int i = 0; i < 200; ++i) {
      void* q = keep(malloc_(3900));
      std::lock_guard<std::mutex> g(mu);
      handed.push_back(q);
    }
  };
  std::thread a(producer), b(producer);
  a.join();
  b.join();
  for (void* q : handed) free_(q);  // 400 cross-thread frees
  free_(keep(malloc_(777778)));     // end marker

  // A forked child allocates on its own (journaled with --follow-forks).
  pid_t pid = fork();
  if (pid == 0) {
    for (int i = 0; i < 3; ++i) free_(keep(malloc_(3950)));
    _exit(0);
  }
  int st = 0;
  waitpid(pid, &st, 0);

  FILE* f = std::fopen(expected_path, "w");
  if (!f) return 1;
  // malloc: 1000 + 1 + 5 (realloc(p, 0) sources) + 250 * 2 threads + 20 (new[]).
  std::fprintf(f,
               "malloc 1526\ncalloc 100\nrealloc 60\nreallocarray 10\nposix_memalign 10\n"
               "aligned_alloc 20\nmemalign 10\nvalloc 5\npvalloc 5\n"
               "free 1686\nfree_null 7\ncross_thread_frees 400\nchild_malloc 3\nchild_free 3\n");
  return std::fclose(f) == 0 && WIFEXITED(st) ? 0 : 1;
}

// Memory that is not heap: 16 MiB of static data dirtied after the recorder's first sample, a
// thread that touches 2 MiB of its stack, and 4 MiB of heap, all resident together for 60 ms.
char g_static_data[16 << 20];

std::atomic<bool> g_stack_touched{false};
std::atomic<bool> g_heap_freed{false};

// Writes 2 MiB of its stack, then lives until 20 ms after the main thread freed its heap: a fixed
// wait let a slow main thread free the heap after this thread had exited, and its cached stack's
// pages then read as heap (recorded peak 6.4 MiB against 4, on a loaded machine).
void touch_stack_and_wait() {
  volatile char frame[2 << 20];
  for (size_t i = 0; i < sizeof frame; i += 4096) frame[i] = 1;
  g_stack_touched.store(true);
  while (!g_heap_freed.load()) usleep(1000);
  usleep(20000);
}

int nonheap() {
  std::thread t(touch_stack_and_wait);
  for (size_t i = 0; i < sizeof g_static_data; i += 4096) g_static_data[i] = 1;
  // The heap's peak comes after the stack is written, however late the thread runs, so the
  // sample at the peak holds both (on a loaded machine it once came first: 16.2 MiB non-heap).
  while (!g_stack_touched.load()) usleep(1000);
  auto* heap = static_cast<char*>(keep(malloc_(4 << 20)));
  std::memset(heap, 1, 4 << 20);
  // Freed 20 ms before the thread exits: the few stack pages glibc keeps resident for an exited
  // thread's cached stack no longer count as non-heap, and must not raise a later sample's heap.
  usleep(40000);
  free_(heap);
  g_heap_freed.store(true);
  t.join();
  return g_static_data[4096] == 1 ? 0 : 1;
}

// Big blocks written in part: 4 MiB with its first 100 pages written and a 2 MiB calloc with 10,
// both live for 30 ms (the recorder samples memory every 2 ms), then freed.
int bigblocks() {
  auto* a = static_cast<char*>(keep(malloc_(4 << 20)));
  for (int k = 0; k < 100; ++k) a[k * 4096] = 1;
  auto* b = static_cast<char*>(keep(calloc_(1, 2 << 20)));
  for (int k = 0; k < 10; ++k) b[k * 4096] = 1;
  usleep(30000);
  free_(a);
  free_(b);
  return 0;
}

// Two threads that allocate, write and free small blocks without pause for 300 ms (a few million
// calls): their logs fill and flush every millisecond or so, and the flushes take the memory
// samples (recorder_rss.cpp), system calls inside the program's free. free must leave errno as
// it was (POSIX); exits 1 when one did not.
int churn() {
  std::atomic<int> errno_changed{0};
  auto work = [&] {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
    void* held[64] = {};
    for (unsigned i = 0; std::chrono::steady_clock::now() < end; ++i)
      for (int k = 0; k < 64; ++k, ++i) {
        errno = EDOM;
        free_(held[k]);
        if (errno != EDOM) errno_changed.fetch_add(1, std::memory_order_relaxed);
        const size_t n = 1024 + i % 4096;
        held[k] = keep(malloc_(n));
        std::memset(held[k], int(i), n);
      }
    for (void* p : held) free_(p);
  };
  std::thread t(work);
  work();
  t.join();
  if (errno_changed.load() != 0)
    std::fprintf(stderr, "free changed errno %d times\n", errno_changed.load());
  return errno_changed.load() != 0 ? 1 : 0;
}

// One thread that allocates in bursts with a millisecond's pause after each, for 600 ms: its log
// fills in a few milliseconds, slowly enough that the recorder compresses every block.
int paced() {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(600);
  while (std::chrono::steady_clock::now() < end) {
    for (int i = 0; i < 2000; ++i) free_(keep(malloc_(64 + i % 512)));
    usleep(1000);
  }
  return 0;
}

// N threads, one after another, each allocating and freeing once: glibc frees each thread's
// buffers after its key destructors ran, so every thread calls free once its log was flushed.
int threads(int n) {
  for (int i = 0; i < n; ++i) std::thread([] { free_(keep(malloc_(100))); }).join();
  return 0;
}

// Main leaves by pthread_exit while a detached thread allocates 200,000 blocks of 3001 bytes (a
// few of the recorder's 64 KiB logs): the process ends when that thread does.
int main_exits() {
  std::thread([] {
    for (int i = 0; i < 200000; ++i) free_(keep(malloc_(3001)));
  }).detach();
  pthread_exit(nullptr);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const char* mode = argc > 2 ? argv[2] : "pattern";
  if (std::strcmp(mode, "pattern") == 0) return pattern(argv[1]);
  if (std::strcmp(mode, "nonheap") == 0) return nonheap();
  if (std::strcmp(mode, "bigblocks") == 0) return bigblocks();
  if (std::strcmp(mode, "churn") == 0) return churn();
  if (std::strcmp(mode, "paced") == 0) return paced();
  if (std::strcmp(mode, "threads") == 0) return threads(argc > 3 ? std::atoi(argv[3]) : 1);
  if (std::strcmp(mode, "main_exits") == 0) return main_exits();
  for (int i = 0; i < 5000; ++i) keep(malloc_(3001));
  if (std::strcmp(mode, "crash") == 0) {
    volatile int* null = nullptr;
    *null = 1;  // SIGSEGV: the recorder must flush before the process dies
  }
  if (std::strcmp(mode, "exit") == 0) _exit(3);
  return 2;
}
