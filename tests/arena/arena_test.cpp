// ak::Arena: bump allocation, destructor order, arrays and strings, in-place growth, reset that
// keeps chunks, large allocations, limits, out-of-memory and the adapters.
#include "allockit/arena.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <list>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/core.hpp"
#include "pool/fake_page_source.hpp"

namespace {

std::vector<int> g_order;

struct Tracked {
  int id;
  explicit Tracked(int i) : id(i) {}
  ~Tracked() { g_order.push_back(id); }
};

struct Plain {
  int a, b;
};

struct Id {
  static inline int next = 0;
  int id = next++;
  ~Id() { g_order.push_back(id); }
};

struct ThrowsAt {
  static inline int built = 0;
  ThrowsAt() {
    if (built == 2) throw std::runtime_error("third element fails");
    ++built;
  }
  ~ThrowsAt() { --built; }
};

}  // namespace

TEST(Arena, AllocationsAreAlignedDistinctAndHeaderless) {
  ak::Arena arena;
  char* prev = nullptr;
  for (std::size_t align : {1, 2, 4, 8, 16, 64, 256, 4096}) {
    for (int i = 0; i < 50; ++i) {
      auto* p = static_cast<char*>(arena.allocate(24, align));
      ASSERT_EQ(reinterpret_cast<std::uintptr_t>(p) % align, 0u);
      std::memset(p, i, 24);
      if (prev && align == 1) {
        EXPECT_EQ(p, prev + 24);  // no header between allocations
      }
      prev = p;
    }
  }
  EXPECT_TRUE(arena.owns(prev));
  int local = 0;
  EXPECT_FALSE(arena.owns(&local));
}

TEST(Arena, DestructorsRunInReverseOrderOnResetAndDestruction) {
  g_order.clear();
  {
    ak::Arena arena;
    for (int i = 0; i < 5; ++i) arena.make<Tracked>(i);
    EXPECT_EQ(arena.stats().destructors, 5u);
    arena.reset();
    EXPECT_EQ(g_order, (std::vector<int>{4, 3, 2, 1, 0}));
    g_order.clear();
    arena.make<Tracked>(10);
    arena.make<Tracked>(11);
  }
  EXPECT_EQ(g_order, (std::vector<int>{11, 10}));
}

TEST(Arena, TriviallyDestructibleTypesRegisterNothing) {
  ak::Arena arena;
  const std::size_t before = arena.stats().used_bytes;
  arena.make<Plain>(Plain{1, 2});
  arena.make_array<int>(100);
  EXPECT_EQ(arena.stats().destructors, 0u);
  EXPECT_EQ(arena.stats().used_bytes - before, sizeof(Plain) + 100 * sizeof(int));
}

TEST(Arena, MakeArrayValueInitialisesAndDestroysInReverse) {
  g_order.clear();
  ak::Arena arena;
  int* zeros = arena.make_array<int>(1000);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(zeros[i], 0);
  Id::next = 0;
  arena.make_array<Id>(3);
  arena.reset();
  EXPECT_EQ(g_order, (std::vector<int>{2, 1, 0}));
}

TEST(Arena, MakeArrayOverflowAndThrowingElements) {
  ak::Arena arena;
  EXPECT_THROW(arena.make_array<std::uint64_t>(std::size_t(-1) / 4), std::bad_array_new_length);
  EXPECT_EQ(arena.try_make_array<std::uint64_t>(std::size_t(-1) / 4), nullptr);
  EXPECT_THROW(arena.make_array<ThrowsAt>(5), std::runtime_error);
  EXPECT_EQ(ThrowsAt::built, 0);  // the two built elements were destroyed
  EXPECT_EQ(arena.stats().destructors, 0u);
}

TEST(Arena, MakeString) {
  ak::Arena arena;
  std::string source = "hello, arena";
  std::string_view s = arena.make_string(source);
  source[0] = 'X';
  EXPECT_EQ(s, "hello, arena");
  EXPECT_EQ(s.data()[s.size()], '\0');
  EXPECT_EQ(arena.make_string("").size(), 0u);
}

TEST(Arena, BadAlignmentIsAnError) {
  ak::Arena arena;
  EXPECT_THROW(arena.allocate(8, 3), std::invalid_argument);
  EXPECT_THROW(arena.allocate(8, 0), std::invalid_argument);
  EXPECT_EQ(arena.try_allocate(8, 12), nullptr);
  EXPECT_NE(arena.allocate(8, 8), nullptr);  // still usable
  EXPECT_THROW(ak::Arena({.chunk_bytes = 100}), std::invalid_argument);
}

TEST(Arena, TryGrowExtendsOnlyTheLatestAllocation) {
  ak::Arena arena;
  auto* a = static_cast<char*>(arena.allocate(16, 8));
  EXPECT_TRUE(arena.try_grow(a, 16, 64));
  auto* b = static_cast<char*>(arena.allocate(16, 8));
  EXPECT_EQ(b, a + 64);
  EXPECT_FALSE(arena.try_grow(a, 64, 128));      // no longer the latest
  EXPECT_FALSE(arena.try_grow(b, 16, 1 << 20));  // no room in the chunk
}

TEST(Arena, ArenaVectorGrowsInPlace) {
  ak::Arena arena;
  ak::arena_vector<int> v(arena);
  for (int i = 0; i < 1000; ++i) v.push_back(i);
  const std::size_t used = arena.stats().used_bytes;
  // In place growth: storage is one run of capacity ints, not a chain of copies.
  EXPECT_LE(used, v.capacity() * sizeof(int) + 64);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(v[i], i);
  ak::arena_vector<std::string> s(arena);
  for (int i = 0; i < 100; ++i) s.emplace_back(std::to_string(i) + " is a long enough string");
  arena.allocate(1);  // breaks in-place growth: the next growth moves the strings
  for (int i = 100; i < 300; ++i) s.emplace_back(std::to_string(i));
  EXPECT_EQ(s[42], "42 is a long enough string");
  EXPECT_EQ(s[299], "299");
}

TEST(Arena, ResetKeepsEveryChunkSoTheSteadyStateMapsNothing) {
  ak::test::FakePageSource source;
  ak::ChunkPool pool(&source);
  ak::Arena arena({.pool = &pool});
  for (int round = 0; round < 20; ++round) {
    for (int i = 0; i < 20000; ++i) arena.allocate(48, 8);
    if (round == 0) {
      EXPECT_GT(arena.stats().chunks, 10u);
    }
    arena.reset();
  }
  EXPECT_EQ(source.maps, long(arena.stats().chunks));  // chunks were mapped in round 0 only
  EXPECT_EQ(source.unmaps, 0);
  EXPECT_EQ(arena.stats().used_bytes, 0u);
}

TEST(Arena, LargeAllocationGetsItsOwnChunkAndDoesNotInflateLaterOnes) {
  ak::Arena arena;
  arena.allocate(10);
  void* big = arena.allocate(1 << 20);
  std::memset(big, 1, 1 << 20);
  arena.allocate(10);
  const auto s = arena.stats();
  EXPECT_EQ(s.chunks, 2u);
  EXPECT_LT(s.reserved_bytes, (1u << 20) + 2 * (64u << 10) + 8192);  // not 3 MB
  arena.reset();
  EXPECT_EQ(arena.stats().chunks, 1u);  // the large chunk went back to the pool
}

TEST(Arena, LimitFailsCleanlyAndLeavesTheArenaUsable) {
  ak::Arena arena({.chunk_bytes = 64 << 10, .limit = 256 << 10});
  std::size_t got = 0;
  while (arena.try_allocate(1000, 8)) got += 1000;
  EXPECT_GT(got, 150u << 10);
  EXPECT_LE(arena.stats().reserved_bytes, 256u << 10);
  EXPECT_THROW(arena.allocate(1000, 8), std::bad_alloc);
  EXPECT_EQ(arena.try_make_array<char>(1000), nullptr);
  EXPECT_THROW(arena.make_array<char>(1000), std::bad_alloc);
  arena.reset();
  EXPECT_NE(arena.allocate(1000, 8), nullptr);
  arena.set_limit(std::size_t(-1));
  for (int i = 0; i < 1000; ++i) arena.allocate(1000, 8);
}

TEST(Arena, OutOfMemoryFailsCleanlyAndLeavesTheArenaUsable) {
  ak::test::FakePageSource source;
  ak::ChunkPool pool(&source);
  ak::Arena arena({.pool = &pool});
  void* first = arena.allocate(100);
  source.fail_after(0);
  while (arena.try_allocate(1000)) {
  }
  EXPECT_THROW(arena.allocate(1000), std::bad_alloc);
  EXPECT_THROW(arena.make_array<std::string>(1000), std::bad_alloc);
  EXPECT_EQ(arena.stats().destructors, 0u);
  EXPECT_EQ(arena.try_allocate(1 << 20), nullptr);  // large path fails too
  EXPECT_TRUE(arena.owns(first));
  arena.reset();
  EXPECT_EQ(arena.allocate(100), first);  // the kept chunk serves again
  source.fail_after(-1);
}

TEST(Arena, StdAllocatorAndPmrAdapters) {
  ak::Arena arena;
  {
    std::list<int, ak::arena_allocator<int>> l{ak::arena_allocator<int>(arena)};
    for (int i = 0; i < 1000; ++i) l.push_back(i);
    EXPECT_EQ(l.back(), 999);
    EXPECT_TRUE(arena.owns(&l.back()));
  }
  ak::arena_resource res(arena);
  std::pmr::map<int, std::pmr::string> m(&res);
  for (int i = 0; i < 100; ++i) m.emplace(i, std::pmr::string(40, 'x'));
  EXPECT_TRUE(arena.owns(m.at(7).data()));
  EXPECT_TRUE(res.is_equal(res));
  ak::Arena other;
  ak::arena_resource res2(other);
  EXPECT_FALSE(res.is_equal(res2));
  ak::arena_allocator<int> a(arena);
  EXPECT_THROW(a.allocate(std::size_t(-1) / 2), std::bad_array_new_length);
}

TEST(Arena, DebugModeFillsFreedMemory) {
  if (AK_ASAN) GTEST_SKIP() << "ASan builds poison instead of filling";
  ak::Arena arena({.debug = true});
  auto* p = static_cast<unsigned char*>(arena.allocate(64, 8));
  std::memset(p, 0x11, 64);
  auto m = arena.mark();
  auto* q = static_cast<unsigned char*>(arena.allocate(64, 8));
  std::memset(q, 0x22, 64);
  arena.rewind(m);
  EXPECT_EQ(q[0], 0xdd);  // rewound memory is poisoned
  EXPECT_EQ(p[0], 0x11);  // memory before the marker is kept
  arena.reset();
  EXPECT_EQ(p[63], 0xdd);
}

TEST(Arena, ArenaVectorOfTrivialTypesIsTriviallyDestructible) {
  static_assert(std::is_trivially_destructible_v<ak::arena_vector<int*>>);
  static_assert(!std::is_trivially_destructible_v<ak::arena_vector<std::string>>);
  ak::Arena arena;
  struct Holder {
    explicit Holder(ak::Arena& a) : v(a) {}
    ak::arena_vector<int> v;
  };
  arena.make<Holder>(arena)->v.push_back(1);
  EXPECT_EQ(arena.stats().destructors, 0u);
}
