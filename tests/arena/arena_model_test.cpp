// Random mark/rewind/reset/allocate sequences checked against a model: a stack of live
// allocations (each with a fill tag), a stack of markers, and the set of live destructor ids.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <set>
#include <vector>

#include "allockit/arena.hpp"
#include "test_scale.hpp"

namespace {

std::set<int>* g_alive;

struct Obj {
  int id;
  explicit Obj(int i) : id(i) { g_alive->insert(i); }
  ~Obj() { g_alive->erase(id); }
};

struct Live {
  unsigned char* p;
  std::size_t size;
  unsigned char tag;
  int obj_id;  // -1 for raw bytes
};

struct Mark {
  ak::ArenaMarker marker;
  std::size_t live_count;
};

}  // namespace

TEST(ArenaModel, RandomMarkRewindReset) {
  std::set<int> alive;
  g_alive = &alive;
  std::mt19937_64 rng(11);
  ak::Arena arena({.chunk_bytes = 16 << 10});
  std::vector<Live> live;
  std::vector<Mark> marks;
  int next_id = 0;
  const std::size_t ops = ak::test::scaled(400'000);
  for (std::size_t i = 0; i < ops; ++i) {
    const unsigned r = unsigned(rng() % 1000);
    if (r < 700) {
      Live l{nullptr, 1 + rng() % (rng() % 50 == 0 ? 20000 : 200),
             static_cast<unsigned char>(rng()), -1};
      if (rng() % 4 == 0) {
        l.obj_id = next_id++;
        l.p = reinterpret_cast<unsigned char*>(arena.make<Obj>(l.obj_id));
        l.size = 0;
      } else {
        l.p = static_cast<unsigned char*>(arena.allocate(l.size, std::size_t(1) << (rng() % 5)));
        std::memset(l.p, l.tag, l.size);
      }
      live.push_back(l);
    } else if (r < 850) {
      marks.push_back({arena.mark(), live.size()});
    } else if (r < 995) {
      if (marks.empty()) continue;
      const std::size_t k = rng() % marks.size();  // any live marker, not only the latest
      arena.rewind(marks[k].marker);
      live.resize(marks[k].live_count);
      marks.resize(k + 1);  // markers after k are now invalid
    } else {
      arena.reset();
      live.clear();
      marks.clear();
    }
    if (i % 997 == 0) {
      std::set<int> expect;
      for (const Live& l : live) {
        if (l.obj_id >= 0) {
          expect.insert(l.obj_id);
          ASSERT_EQ(reinterpret_cast<Obj*>(l.p)->id, l.obj_id);
        } else {
          for (std::size_t b = 0; b < l.size; b += 7) ASSERT_EQ(l.p[b], l.tag) << "op " << i;
        }
      }
      ASSERT_EQ(alive, expect) << "destructors out of step with the model at op " << i;
      ASSERT_EQ(arena.stats().destructors, expect.size());
    }
  }
  arena.reset();
  EXPECT_TRUE(alive.empty());
}
