// Models of the benchmarks allocator authors publish against (mimalloc-bench's self-contained
// programs and glibc's benchtests), written here from their public descriptions, at their usual
// parameters, each running for seconds. Fixed work, not fixed time: the wall time is the figure.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "common.hpp"

namespace workloads {
namespace {

constexpr int kThreads = 2;  // this machine's cores; mimalloc-bench runs one thread per core

template <class F>
void on_threads(int n, F f) {
  std::vector<std::thread> ts;
  for (int i = 0; i < n; ++i) ts.emplace_back(f, i);
  for (auto& t : ts) t.join();
}

// larson (Larson & Krishnan's server simulation), `larson 5 8 1000 5000 100 4141 T`: each thread
// owns 5,000 slots of 8..1000-byte blocks and replaces random slots; after a round the thread
// exits and a new thread inherits its slots, so frees hit blocks of threads that are gone.
// kSized: the same with C++ sized delete, as mimalloc-bench's larson-sized.
template <bool kSized>
void larson_model() {
  constexpr int kSlots = 5000, kGenerations = kSized ? 80 : 60, kOpsPerGeneration = 500'000;
  struct Slot {
    char* p;
    std::size_t n;
  };
  auto make = [](std::size_t n) {
    return kSized ? new char[n] : static_cast<char*>(std::malloc(n));
  };
  auto drop = [](const Slot& e) {
    if constexpr (kSized)
      ::operator delete[](e.p, e.n);
    else
      std::free(e.p);
  };
  std::vector<std::vector<Slot>> slots(kThreads, std::vector<Slot>(kSlots));
  Rng seed(4141);
  for (auto& s : slots)
    for (auto& e : s) e.n = seed.range(8, 1000), e.p = make(e.n);
  for (int g = 0; g < kGenerations; ++g)
    on_threads(kThreads, [&](int t) {
      Rng rng(4141 + g * kThreads + t);
      auto& s = slots[t];
      for (int i = 0, n = scaled(kOpsPerGeneration); i < n; ++i) {
        Slot& e = s[rng.below(kSlots)];
        drop(e);
        e.n = rng.range(8, 1000);
        e.p = make(e.n);
        e.p[0] = char(i);
      }
    });
  for (auto& s : slots)
    for (auto& e : s) drop(e);
}
void larson() {
  larson_model<false>();
}
void larson_sized() {
  larson_model<true>();
}

// xmalloc-test (Lever and Boreham): every thread allocates batches of small blocks and hands
// each batch to the next thread, which frees it: all frees are cross-thread. The exchange is
// bounded (kMaxQueued batches per thread) as in the original: unbounded, a thread the scheduler
// left running piled up batches for a descheduled one, and peak RSS measured the scheduler.
void xmalloc() {
  constexpr int kBatches = 240'000, kBatch = 100;
  constexpr std::size_t kMaxQueued = 16;
  struct Queue {
    std::mutex m;
    std::vector<std::vector<void*>> batches;
  };
  std::vector<Queue> queues(kThreads);
  std::atomic<int> done{0};
  on_threads(kThreads, [&](int t) {
    Rng rng(t + 1);
    Queue& next = queues[(t + 1) % kThreads];
    Queue& mine = queues[t];
    auto drain = [&] {
      std::vector<std::vector<void*>> got;
      {
        std::lock_guard g(mine.m);
        got.swap(mine.batches);
      }
      for (auto& b : got)
        for (void* p : b) std::free(p);
    };
    for (int i = 0, n = scaled(kBatches); i < n; ++i) {
      std::vector<void*> b(kBatch);
      for (auto& p : b) {
        const std::size_t n = rng.range(8, 128);
        p = std::malloc(n);
        static_cast<char*>(p)[n - 1] = 1;
      }
      for (;;) {
        {
          std::lock_guard g(next.m);
          if (next.batches.size() < kMaxQueued) {
            next.batches.push_back(std::move(b));
            break;
          }
        }
        drain();  // the neighbour is behind: free what it sent, let it run
        std::this_thread::yield();
      }
      if (i % 8 == 0) drain();
    }
    done.fetch_add(1);
    while (done.load() < kThreads) drain();
    drain();
  });
}

// glibc benchtests/bench-malloc-simple: one thread allocates N blocks of one size, then frees
// them all, for N in 25..1600 and sizes 16..4096 bytes.
void glibc_simple() {
  constexpr int kRounds = 60'000;
  const std::size_t sizes[] = {16, 32, 64, 128, 256, 512, 1024, 4096};
  const int counts[] = {25, 100, 400, 1600};
  std::vector<void*> blocks(1600);
  for (std::size_t size : sizes)
    for (int n : counts)
      for (int r = 0; r < kRounds * 25 / n; ++r) {
        for (int i = 0; i < n; ++i) blocks[i] = std::malloc(size);
        for (int i = 0; i < n; ++i) std::free(blocks[i]);
      }
}

// glibc benchtests/bench-malloc-thread: each thread replaces random entries of a 1,024-entry
// working set with blocks of 4 B to 32 KiB, sizes distributed as 1/x.
void glibc_thread() {
  constexpr int kWorkingSet = 1024, kIterations = 20'000'000;
  on_threads(kThreads, [](int t) {
    Rng rng(t + 7);
    std::vector<void*> set(kWorkingSet, nullptr);
    for (int i = 0; i < kIterations; ++i) {
      void*& p = set[rng.below(kWorkingSet)];
      std::free(p);
      p = std::malloc(rng.inverse(4, 32768));
    }
    for (void* p : set) std::free(p);
  });
}

// alloc-test: random sizes (mostly small, a tail up to 64 KiB) allocated and freed in random
// order against a working set per thread; run on 1 and on 2 threads.
void alloc_test_on(int threads) {
  constexpr int kSet = 1 << 14, kIterations = 60'000'000;
  on_threads(threads, [threads](int t) {
    Rng rng(t + 11);
    std::vector<void*> set(kSet, nullptr);
    for (int i = 0; i < kIterations / threads; ++i) {
      void*& p = set[rng.below(kSet)];
      if (p) {
        std::free(p);
        p = nullptr;
      } else {
        const std::size_t n = rng.below(16) == 0 ? rng.inverse(1024, 65536) : rng.range(8, 256);
        p = std::malloc(n);
        static_cast<char*>(p)[0] = 1;
      }
    }
    for (void* p : set) std::free(p);
  });
}
void alloc_test1() {
  alloc_test_on(1);
}
void alloc_test2() {
  alloc_test_on(2);
}

// malloc-large: 20 buffers of 5 to 25 MiB, one replaced per iteration by a new zero-filled
// buffer (as std::make_unique<char[]>(n) value-initialises it).
void malloc_large() {
  constexpr int kBuffers = 20, kIterations = 1500;
  std::vector<char*> buf(kBuffers, nullptr);
  Rng rng(42);
  for (int i = 0; i < kIterations; ++i) {
    char*& b = buf[rng.below(kBuffers)];
    delete[] b;
    // new char[n]() is operator new plus a clear the compiler cannot turn into calloc (as it
    // would malloc plus memset): every page is written, as in the original program.
    b = new char[rng.range(std::size_t(5) << 20, std::size_t(25) << 20)]();
  }
  for (char* b : buf) delete[] b;
}

// cache-thrash (Hoard): each thread allocates a tiny object, writes it many times, frees it:
// an allocator that hands threads objects on one cache line makes them share it (actively).
void cache_thrash() {
  constexpr int kIterations = 6000, kRepetitions = 200'000;
  on_threads(kThreads, [](int) {
    for (int i = 0; i < kIterations; ++i) {
      auto* p = static_cast<volatile char*>(std::malloc(8));
      for (int r = 0; r < kRepetitions; ++r) p[r & 7] = char(p[r & 7] + 1);
      std::free(const_cast<char*>(p));
    }
  });
}

// cache-scratch (Hoard): the main thread allocates one tiny object per thread and each thread
// frees it, then allocates, writes and frees its own: an allocator that reuses the freed
// object for the thread makes threads share the main thread's cache line (passively).
void cache_scratch() {
  constexpr int kIterations = 6000, kRepetitions = 200'000;
  std::vector<void*> first(kThreads);
  for (auto& p : first) p = std::malloc(8);
  on_threads(kThreads, [&](int t) {
    std::free(first[t]);
    for (int i = 0; i < kIterations; ++i) {
      auto* p = static_cast<volatile char*>(std::malloc(8));
      for (int r = 0; r < kRepetitions; ++r) p[r & 7] = char(p[r & 7] + 1);
      std::free(const_cast<char*>(p));
    }
  });
}

// sh6bench (MicroQuill's SmartHeap benchmark; mimalloc-bench's sh6benchN runs two threads per
// core): each thread fills a ring of block pointers with sizes swept from 1 to 1,000 bytes (a
// base grown by half each step, then halved down to 1; sizes below 100 allocated 250 times,
// larger ones 50, so small blocks dominate). When the ring wraps, a fifth of it (a window that
// moves on each wrap) stays live; the blocks below the window are freed in allocation order, those
// above it in reverse, and the next pass skips the window. Long runs of frees of mixed classes,
// in both orders, with a live set that shifts.
void sh6bench() {
  constexpr std::size_t kRing = 1'000'000;
  const int sweeps = scaled(2000);
  on_threads(2 * kThreads, [&](int) {
    std::vector<char*> ring(kRing, nullptr);
    std::size_t keep_lo = kRing, keep_hi = kRing, i = 0;
    for (int sweep = 0; sweep < sweeps; ++sweep)
      for (std::size_t base = 1; base < 1000; base = base * 3 / 2 + 1)
        for (std::size_t size = base; size != 0; size /= 2)
          for (int reps = size < 100 ? 250 : 50; reps > 0; --reps) {
            ring[i] = static_cast<char*>(std::malloc(size));
            ring[i][0] = char(size);
            if (++i == keep_lo) i = keep_hi;
            if (i < kRing) continue;
            keep_lo = keep_hi < kRing ? keep_hi : 0;
            keep_hi = std::min(keep_lo + kRing / 5, kRing);
            for (std::size_t j = 0; j < keep_lo; ++j) std::free(std::exchange(ring[j], nullptr));
            for (std::size_t j = kRing; j > keep_hi; --j)
              std::free(std::exchange(ring[j - 1], nullptr));
            i = keep_lo == 0 ? keep_hi : 0;
          }
    for (char* p : ring) std::free(p);
  });
}

// sh8bench (MicroQuill; mimalloc-bench's sh8benchN, two threads per core): sh6bench with objects
// migrating between threads. Each thread allocates rounds of blocks with sizes drawn mostly small
// (8 to 1,000 bytes, each storing a pointer in its first word); of each round it frees a quarter
// itself in reverse order, keeps half live until its next round, and swaps a quarter into a
// table shared by all threads, freeing the blocks it displaces (mostly other threads'). No thread
// waits for another, so the time is the allocator's, not the scheduler's.
void sh8bench() {
  constexpr int kRound = 1000;
  constexpr std::size_t kTable = 8192;
  const int rounds = scaled(15'000);
  const std::size_t sizes[] = {8, 8, 8, 16, 16, 24, 32, 32, 48, 64, 96, 128, 200, 400, 1000};
  std::vector<std::atomic<void*>> table(kTable);
  on_threads(2 * kThreads, [&](int t) {
    Rng rng(t + 8);
    std::vector<void*> b(kRound), kept;
    for (int r = 0; r < rounds; ++r) {
      for (auto& p : b) {
        p = std::malloc(sizes[rng.below(std::size(sizes))]);
        *static_cast<void**>(p) = &b;
      }
      for (int i = kRound / 2; i-- > kRound / 4;) std::free(b[i]);
      for (void* p : kept) std::free(p);
      kept.assign(b.begin() + kRound / 2, b.end());
      for (int i = 0; i < kRound / 4; ++i) std::free(table[rng.below(kTable)].exchange(b[i]));
    }
    for (void* p : kept) std::free(p);
  });
  for (auto& p : table) std::free(p.load());
}

// mstress (mimalloc's stress test): threads allocate objects of random sizes (mostly small, some
// up to 256 KiB), keep a fraction, free others, and hand a share to other threads through a
// transfer table; lifetimes overlap rounds.
void mstress() {
  constexpr int kRounds = 300, kSteps = 60'000, kTransfer = 1000;
  std::vector<std::atomic<void*>> transfer(kTransfer);
  for (int round = 0; round < kRounds; ++round)
    on_threads(kThreads, [&](int t) {
      Rng rng(round * 31 + t);
      std::vector<void*> kept;
      kept.reserve(kSteps / 4);
      for (int i = 0; i < kSteps; ++i) {
        std::size_t n = rng.range(1, 40) * 8;
        if (rng.below(100) == 0) n *= 100;
        if (rng.below(10000) == 0) n = rng.range(64 << 10, 256 << 10);
        void* p = std::malloc(n);
        std::memset(p, 0, n < 64 ? n : 64);
        const std::size_t action = rng.below(8);
        if (action < 3) {
          kept.push_back(p);
        } else if (action == 3) {
          std::free(transfer[rng.below(kTransfer)].exchange(p));
        } else {
          std::free(p);
        }
        if (!kept.empty() && rng.below(4) == 0) {
          const std::size_t k = rng.below(kept.size());
          std::free(kept[k]);
          kept[k] = kept.back();
          kept.pop_back();
        }
      }
      for (void* p : kept) std::free(p);
    });
  for (auto& p : transfer) std::free(p.exchange(nullptr));
}

// rptest (rpmalloc's benchmark): threads allocate loops of blocks (16 B to 16 KiB, smaller ones
// more likely), free most of them in another order, and free part of each batch on another
// thread, with a working set that persists across loops.
void rptest() {
  constexpr int kLoops = 4000, kBatch = 4000;
  std::vector<std::vector<void*>> handoff(kThreads);
  std::vector<std::mutex> locks(kThreads);
  on_threads(kThreads, [&](int t) {
    Rng rng(t + 3);
    std::vector<void*> set(kBatch, nullptr);
    for (int loop = 0; loop < kLoops; ++loop) {
      for (auto& p : set) {
        std::free(p);
        const std::size_t n = rng.inverse(16, 16384);
        p = std::malloc(n);
        touch(p, n);
      }
      std::vector<void*> give;
      for (int i = 0; i < kBatch / 8; ++i) {
        void*& p = set[rng.below(kBatch)];
        if (p) give.push_back(p), p = nullptr;
      }
      std::vector<void*> got;
      {
        std::lock_guard g(locks[(t + 1) % kThreads]);
        handoff[(t + 1) % kThreads].swap(give);
        got.swap(give);  // what the neighbour's slot held before
      }
      for (void* p : got) std::free(p);
    }
    for (void* p : set) std::free(p);
  });
  for (auto& h : handoff)
    for (void* p : h) std::free(p);
}

// mleak: a long-running loop that frees almost everything it allocates but leaks one block in
// a hundred, so leaked blocks pin memory among the freed ones.
void mleak() {
  constexpr int kIterations = 24'000'000, kSet = 2048;
  Rng rng(5);
  std::vector<void*> set(kSet, nullptr);
  for (int i = 0; i < kIterations; ++i) {
    void*& p = set[rng.below(kSet)];
    if (rng.below(100) != 0) std::free(p);  // else: leaked
    p = std::malloc(rng.inverse(8, 1024));
    static_cast<char*>(p)[0] = 1;
  }
  for (void* p : set) std::free(p);
}

// cfrac-like: continued-fraction factoring does multi-precision arithmetic where every
// intermediate number is a fresh small heap object freed soon after: 8..64-byte digit arrays,
// one thread.
void cfrac() {
  constexpr int kIterations = 24'000'000;
  struct Num {
    std::uint32_t len;
    std::uint32_t digit[1];
  };
  auto make = [](std::uint32_t len) {
    auto* n = static_cast<Num*>(std::malloc(sizeof(Num) + (len - 1) * sizeof(std::uint32_t)));
    n->len = len;
    return n;
  };
  Rng rng(17);
  Num* acc = make(2);
  acc->digit[0] = 1, acc->digit[1] = 0;
  for (int i = 0; i < kIterations; ++i) {
    Num* a = make(std::uint32_t(rng.range(1, 12)));
    for (std::uint32_t k = 0; k < a->len; ++k) a->digit[k] = std::uint32_t(rng.next());
    const std::uint32_t len = std::min<std::uint32_t>(std::max(acc->len, a->len) + 1, 14);
    Num* sum = make(len);
    std::uint64_t carry = 0;
    for (std::uint32_t k = 0; k < len; ++k) {
      carry += std::uint64_t(k < acc->len ? acc->digit[k] : 0) + (k < a->len ? a->digit[k] : 0);
      sum->digit[k] = std::uint32_t(carry);
      carry >>= 32;
    }
    std::free(a);
    std::free(acc);
    acc = sum;
  }
  std::free(acc);
}

// espresso-like: a logic minimiser keeps covers of cubes as bit-set arrays that grow with
// realloc, and creates and drops many short-lived sets of a few words; one thread.
void espresso() {
  constexpr int kRounds = 8000, kCubes = 2000;
  Rng rng(23);
  for (int round = 0; round < kRounds; ++round) {
    std::vector<std::uint64_t*> cover;
    std::size_t cap = 16, words = rng.range(1, 8);
    auto** list = static_cast<std::uint64_t**>(std::malloc(cap * sizeof(void*)));
    std::size_t n = 0;
    for (int c = 0; c < kCubes; ++c) {
      auto* cube = static_cast<std::uint64_t*>(std::malloc(words * 8));
      for (std::size_t w = 0; w < words; ++w) cube[w] = rng.next();
      if (n == cap)
        list = static_cast<std::uint64_t**>(std::realloc(list, (cap *= 2) * sizeof(void*)));
      list[n++] = cube;
      // Short-lived temporaries: intersections with random earlier cubes.
      for (int k = 0; k < 4; ++k) {
        auto* tmp = static_cast<std::uint64_t*>(std::malloc(words * 8));
        const std::uint64_t* other = list[rng.below(n)];
        for (std::size_t w = 0; w < words; ++w) tmp[w] = cube[w] & other[w];
        if (tmp[0] == 0 && n > 1) {  // a redundant cube leaves the cover
          const std::size_t victim = rng.below(n);
          std::free(list[victim]);
          list[victim] = list[--n];
        }
        std::free(tmp);
      }
    }
    for (std::size_t i = 0; i < n; ++i) std::free(list[i]);
    std::free(list);
  }
}

}  // namespace

void register_standard(Registry& r) {
  r["larson"] = larson;
  r["larson_sized"] = larson_sized;
  r["xmalloc"] = xmalloc;
  r["glibc_simple"] = glibc_simple;
  r["glibc_thread"] = glibc_thread;
  r["alloc_test1"] = alloc_test1;
  r["alloc_test2"] = alloc_test2;
  r["malloc_large"] = malloc_large;
  r["cache_thrash"] = cache_thrash;
  r["cache_scratch"] = cache_scratch;
  r["sh6bench"] = sh6bench;
  r["sh8bench"] = sh8bench;
  r["mstress"] = mstress;
  r["rptest"] = rptest;
  r["mleak"] = mleak;
  r["cfrac"] = cfrac;
  r["espresso"] = espresso;
}

}  // namespace workloads
