// Adapters over the shared pools: std allocator, pmr resource, container aliases, SmallObject.
#include <gtest/gtest.h>

#include <memory_resource>
#include <string>
#include <vector>

#include "allockit/pool.hpp"
#include "pool/pool.hpp"

TEST(PoolAllocator, IsEmptySoContainersDoNotGrow) {
  static_assert(std::is_empty_v<ak::pool_allocator<int>>);
  EXPECT_EQ(sizeof(ak::list<int>), sizeof(std::list<int>));
  EXPECT_EQ(sizeof(ak::map<int, int>), sizeof(std::map<int, int>));
  EXPECT_EQ(sizeof(ak::unordered_map<int, int>), sizeof(std::unordered_map<int, int>));
}

TEST(PoolAllocator, Containers) {
  ak::list<int> l;
  ak::map<int, std::string> m;
  ak::set<int> s;
  ak::unordered_map<int, std::string> u;
  for (int i = 0; i < 20000; ++i) {
    l.push_back(i);
    m.emplace(i, std::to_string(i));
    s.insert(i);
    u.emplace(i, std::to_string(i));
  }
  long sum = 0;
  for (int x : l) sum += x;
  EXPECT_EQ(sum, 20000L * 19999 / 2);
  EXPECT_EQ(m.at(1234), "1234");
  EXPECT_EQ(u.at(19999), "19999");
  EXPECT_TRUE(s.count(777));
  for (int i = 0; i < 20000; i += 2) {
    m.erase(i);
    u.erase(i);
    s.erase(i);
  }
  EXPECT_EQ(m.size(), 10000u);
  EXPECT_EQ(u.size(), 10000u);
  EXPECT_EQ(s.size(), 10000u);
}

TEST(PoolAllocator, ArraysAndBadLengths) {
  ak::pool_allocator<double> a;
  double* p = a.allocate(1000);  // 8000 bytes: falls through to operator new
  p[999] = 1.0;
  a.deallocate(p, 1000);
  double* q = a.allocate(0);
  a.deallocate(q, 0);
  EXPECT_THROW(a.allocate(std::size_t(-1) / 4), std::bad_array_new_length);
  std::vector<int, ak::pool_allocator<int>> v(100, 7);
  EXPECT_EQ(v[99], 7);
}

TEST(PoolResource, PmrContainers) {
  ak::pool_resource* r = ak::get_pool_resource();
  std::pmr::list<int> l(r);
  std::pmr::unordered_map<int, int> m(r);
  for (int i = 0; i < 10000; ++i) {
    l.push_back(i);
    m[i] = i * 2;
  }
  EXPECT_EQ(m[500], 1000);
  ak::pool_resource other;
  EXPECT_TRUE(r->is_equal(other));
  EXPECT_FALSE(r->is_equal(*std::pmr::new_delete_resource()));
  void* z = r->allocate(0, 1);  // zero bytes still gives a usable pointer
  EXPECT_NE(z, nullptr);
  r->deallocate(z, 0, 1);
  EXPECT_THROW((void)r->allocate(8, 3), std::invalid_argument);
}

namespace {
struct Base : ak::SmallObject<Base> {
  virtual ~Base() = default;
  int x = 1;
};
struct Derived : Base {
  double payload[20] = {};
};
struct alignas(128) Aligned : ak::SmallObject<Aligned> {
  char c[8];
};
}  // namespace

TEST(SmallObject, RoutesThroughSharedPools) {
  Base* b = new Base;
  EXPECT_TRUE(ak::detail::in_pool_region(b));
  Base* d = new Derived;  // larger subclass: sized delete receives the dynamic size
  EXPECT_TRUE(ak::detail::in_pool_region(d));
  static_cast<Derived*>(d)->payload[19] = 3.0;
  delete b;
  delete d;
  auto* a = new Aligned;  // over-aligned: the aligned operator new, served by the fall-through
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a) % 128, 0u);
  delete a;
}
