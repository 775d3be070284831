// ak::ObjectPool<T>: construction, destruction in any order, destructors of leftovers at pool
// destruction (each exactly once), exception safety and out-of-memory.
#include "allockit/object_pool.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "pool/fake_page_source.hpp"

namespace {

struct Counted {
  static inline int alive = 0;
  std::string name;
  explicit Counted(std::string n) : name(std::move(n)) { ++alive; }
  ~Counted() { --alive; }
};

struct Throws {
  explicit Throws(bool fail) {
    if (fail) throw std::runtime_error("constructor failed");
  }
};

struct alignas(64) Wide {
  char bytes[64];
};

}  // namespace

TEST(ObjectPool, CreateDestroyAnyOrder) {
  ak::ObjectPool<Counted> pool;
  std::vector<Counted*> v;
  for (int i = 0; i < 10000; ++i) v.push_back(pool.create(std::to_string(i)));
  EXPECT_EQ(Counted::alive, 10000);
  EXPECT_EQ(pool.size(), 10000u);
  std::mt19937 rng(7);
  std::shuffle(v.begin(), v.end(), rng);
  for (Counted* c : v) pool.destroy(c);
  EXPECT_EQ(Counted::alive, 0);
  EXPECT_EQ(pool.size(), 0u);
}

TEST(ObjectPool, DestructorDestroysLeftoversExactlyOnce) {
  {
    ak::ObjectPool<Counted> pool;
    std::vector<Counted*> v;
    for (int i = 0; i < 5000; ++i) v.push_back(pool.create("x"));
    for (int i = 0; i < 5000; i += 2) pool.destroy(v[i]);
    EXPECT_EQ(Counted::alive, 2500);
  }
  EXPECT_EQ(Counted::alive, 0);
}

TEST(ObjectPool, ThrowingConstructorReturnsTheBlock) {
  ak::ObjectPool<Throws> pool;
  EXPECT_THROW(pool.create(true), std::runtime_error);
  EXPECT_EQ(pool.size(), 0u);
  Throws* ok = pool.create(false);
  EXPECT_EQ(pool.size(), 1u);
  pool.destroy(ok);
}

TEST(ObjectPool, OverAlignedTypes) {
  ak::ObjectPool<Wide> pool;
  for (int i = 0; i < 100; ++i) EXPECT_EQ(reinterpret_cast<std::uintptr_t>(pool.create()) % 64, 0u);
}

TEST(ObjectPool, OutOfMemory) {
  ak::test::FakePageSource source;
  ak::BlockPoolOptions opt;
  opt.source = &source;
  source.fail_after(0);
  ak::ObjectPool<Counted> pool(opt);
  EXPECT_EQ(pool.try_create("a"), nullptr);
  EXPECT_THROW(pool.create("b"), std::bad_alloc);
  EXPECT_EQ(Counted::alive, 0);
}

TEST(ObjectPool, DestroyNullIsIgnored) {
  ak::ObjectPool<int> pool;
  pool.destroy(nullptr);
  EXPECT_EQ(pool.size(), 0u);
}
