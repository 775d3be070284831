// Randomised differential test of the ak_ API against a model of live blocks, weighted toward the
// medium (16 KiB..256 KiB) and large classes and the boundaries between them: every block carries
// a pattern that must survive until its free, realloc keeps the common prefix, alignment and
// usable size hold, calloc reads zero. A multi-threaded variant frees through other threads.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "allockit/allockit.h"
#include "test_scale.hpp"

namespace {

struct Block {
  unsigned char* p;
  std::size_t n, align;
  unsigned char tag;
};

std::size_t pick_size(std::mt19937_64& rng) {
  switch (rng() % 8) {
    case 0:
      return rng() % 256;  // small
    case 1:
      return 16384 - 64 + rng() % 128;  // small/medium boundary
    case 2:
      return (256 << 10) - 64 + rng() % 128;  // medium/large boundary
    case 3:
      return (std::size_t(1) << 20) + rng() % (3 << 20);  // large
    default:
      return 16385 + rng() % ((256 << 10) - 16384);  // medium
  }
}

// Pattern positions of an n-byte block: the first and last 64 bytes and one byte per 4 KiB.
template <class F>
void for_pattern(std::size_t n, F f) {
  for (std::size_t i = 0; i < n; i += (i < 64 || i + 64 >= n) ? 1 : 4096) f(i);
}
void fill(const Block& b) {
  for_pattern(b.n, [&](std::size_t i) { b.p[i] = static_cast<unsigned char>(b.tag + i); });
}
// Whether the pattern of `b` holds at every position below `limit`.
bool intact(const Block& b, std::size_t limit) {
  bool ok = true;
  for_pattern(b.n, [&](std::size_t i) {
    if (i < limit && b.p[i] != static_cast<unsigned char>(b.tag + i)) ok = false;
  });
  return ok;
}

Block make(std::mt19937_64& rng) {
  Block b{nullptr, pick_size(rng), 16, static_cast<unsigned char>(rng())};
  switch (rng() % 4) {
    case 0: {
      b.p = static_cast<unsigned char*>(ak_calloc(1, b.n));
      for (std::size_t i = 0; i < b.n; i += 997)
        if (b.p[i] != 0) ADD_FAILURE() << "calloc gave non-zero memory at " << i;
      break;
    }
    case 1: {
      b.align = std::size_t(1) << (3 + rng() % 19);  // 8 .. 2 MiB: small, medium, large
      void* p = nullptr;
      EXPECT_EQ(ak_posix_memalign(&p, b.align, b.n), 0);
      b.p = static_cast<unsigned char*>(p);
      break;
    }
    default:
      b.p = static_cast<unsigned char*>(ak_malloc(b.n));
      break;
  }
  EXPECT_NE(b.p, nullptr);
  const std::size_t want = b.n >= 16 ? b.align : 8;
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b.p) % want, 0u) << b.n << " " << b.align;
  EXPECT_GE(ak_malloc_usable_size(b.p), b.n);
  fill(b);
  return b;
}

// Frees `b` by free or by a sized free (C23 free_sized, C++ sized delete), at random.
void release(std::mt19937_64& rng, const Block& b) {
  if (rng() % 2)
    ak_free_sized(b.p, b.n);
  else
    ak_free(b.p);
}

// One random step against `model`: allocate, free, or realloc (keeps the common prefix).
void step(std::mt19937_64& rng, std::vector<Block>& model) {
  const unsigned op = rng() % 3;
  if (op == 0 || model.empty()) {
    model.push_back(make(rng));
    return;
  }
  const std::size_t k = rng() % model.size();
  Block b = model[k];
  ASSERT_TRUE(intact(b, b.n)) << "block of " << b.n << " bytes damaged";
  if (op == 1) {
    release(rng, b);
    model[k] = model.back();
    model.pop_back();
    return;
  }
  const std::size_t n = pick_size(rng);
  auto* q = static_cast<unsigned char*>(ak_realloc(b.p, n));
  if (n == 0) {  // glibc: realloc(p, 0) frees
    model[k] = model.back();
    model.pop_back();
    return;
  }
  ASSERT_NE(q, nullptr);
  b.p = q;
  model[k] = Block{q, n, 16, b.tag};  // the model follows the block before anything can fail
  ASSERT_TRUE(intact(b, b.n < n ? b.n : n)) << "realloc lost the contents";
  Block moved{q, n, 16, static_cast<unsigned char>(rng())};
  fill(moved);
  model[k] = moved;
}

TEST(MallocDifferential, MediumAndLargeAgainstAModel) {
  std::mt19937_64 rng(20261123);
  std::vector<Block> model;
  const std::size_t ops = ak::test::scaled(20'000);
  for (std::size_t i = 0; i < ops && !HasFatalFailure(); ++i) {
    step(rng, model);
    if (model.size() > 300) {  // keep the footprint bounded: drop a random half
      for (std::size_t j = 0; j < 150; ++j) {
        const std::size_t k = rng() % model.size();
        ASSERT_TRUE(intact(model[k], model[k].n));
        ak_free(model[k].p);
        model[k] = model.back();
        model.pop_back();
      }
    }
  }
  for (const Block& b : model) {
    EXPECT_TRUE(intact(b, b.n));
    ak_free(b.p);
  }
}

// Blocks pass between threads through a shared list, so medium slabs see remote frees and heaps
// of exited threads are adopted with medium slabs in them.
TEST(MallocDifferential, MediumBlocksFreedByOtherThreads) {
  std::mutex lock;
  std::vector<Block> shared;
  const std::size_t ops = ak::test::scaled(6'000);
  for (int round = 0; round < 4; ++round) {
    std::vector<std::thread> threads;
    for (int t = 0; t < 3; ++t)
      threads.emplace_back([&, seed = round * 10 + t] {
        std::mt19937_64 rng(seed);
        for (std::size_t i = 0; i < ops; ++i) {
          if (rng() % 2) {
            Block b = make(rng);
            std::lock_guard g(lock);
            shared.push_back(b);
            continue;
          }
          Block b{};
          {
            std::lock_guard g(lock);
            if (shared.empty()) continue;
            const std::size_t k = rng() % shared.size();
            b = shared[k];
            shared[k] = shared.back();
            shared.pop_back();
          }
          EXPECT_TRUE(intact(b, b.n));
          release(rng, b);
        }
      });
    for (auto& th : threads) th.join();
  }
  for (const Block& b : shared) {
    EXPECT_TRUE(intact(b, b.n));
    ak_free(b.p);
  }
}

}  // namespace
