// Randomized differential tests: millions of operations on the pools checked against a simple
// model (a vector of live blocks, each filled with a tag that must survive until it is freed).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "allockit/block_pool.hpp"
#include "allockit/pool.hpp"
#include "test_scale.hpp"

namespace {

struct Live {
  unsigned char* p;
  std::size_t size, align;
  unsigned char tag;
};

void fill(const Live& b) {
  std::memset(b.p, b.tag, b.size < 64 ? b.size : 64);
}

bool intact(const Live& b) {
  for (std::size_t i = 0; i < (b.size < 64 ? b.size : 64); ++i)
    if (b.p[i] != b.tag) return false;
  return true;
}

void run_block_pool(bool checked, std::size_t ops, unsigned seed) {
  std::mt19937_64 rng(seed);
  ak::BlockPoolOptions opt;
  opt.checked = checked;
  opt.first_page_bytes = 4096;
  opt.max_page_bytes = 1 << 16;
  ak::BlockPool pool(40, 8, opt);
  std::vector<Live> model;
  for (std::size_t i = 0; i < ops; ++i) {
    const unsigned r = unsigned(rng() % 1000);
    if (r < 520 || model.empty()) {
      Live b{static_cast<unsigned char*>(pool.allocate()), 40, 8,
             static_cast<unsigned char>(rng())};
      ASSERT_EQ(reinterpret_cast<std::uintptr_t>(b.p) % 8, 0u);
      fill(b);
      model.push_back(b);
    } else if (r < 999 || rng() % 32 != 0) {
      const std::size_t k = rng() % model.size();
      ASSERT_TRUE(intact(model[k])) << "block overwritten at op " << i;
      pool.deallocate(model[k].p);
      model[k] = model.back();
      model.pop_back();
    } else {
      pool.trim();
      for (const Live& b : model) ASSERT_TRUE(pool.owns(b.p)) << "trim dropped a live page";
    }
    if (i % 4096 == 0) {
      ASSERT_EQ(pool.stats().live_blocks, model.size());
    }
  }
  for (const Live& b : model) {
    ASSERT_TRUE(intact(b));
    pool.deallocate(b.p);
  }
  EXPECT_EQ(pool.stats().live_blocks, 0u);
}

}  // namespace

TEST(Differential, BlockPoolUnchecked) {
  run_block_pool(false, ak::test::scaled(3'000'000), 1);
}
TEST(Differential, BlockPoolChecked) {
  run_block_pool(true, ak::test::scaled(1'000'000), 2);
}

TEST(Differential, SharedPoolsMixedSizesAndAlignments) {
  std::mt19937_64 rng(3);
  std::vector<Live> model;
  const std::size_t ops = ak::test::scaled(2'000'000);
  for (std::size_t i = 0; i < ops; ++i) {
    if (rng() % 2 == 0 || model.empty()) {
      // Mostly small sizes, some past the pooled range.
      std::size_t size = (rng() % 8 == 0) ? 1 + rng() % 6000 : 1 + rng() % 256;
      std::size_t align = std::size_t(1) << (rng() % 8);
      auto* p = static_cast<unsigned char*>(ak::pool_allocate(size, align));
      ASSERT_EQ(reinterpret_cast<std::uintptr_t>(p) % align, 0u);
      Live b{p, size, align, static_cast<unsigned char>(rng())};
      fill(b);
      model.push_back(b);
    } else {
      const std::size_t k = rng() % model.size();
      ASSERT_TRUE(intact(model[k])) << "block overwritten at op " << i;
      ak::pool_deallocate(model[k].p, model[k].size, model[k].align);
      model[k] = model.back();
      model.pop_back();
    }
  }
  for (const Live& b : model) {
    ASSERT_TRUE(intact(b));
    ak::pool_deallocate(b.p, b.size, b.align);
  }
}
