// A small real program on allockit's prefixed library: an inventory of items in an object pool,
// their names in a per-request arena, a tag index in a pooled std::map, and a buffer from
// ak_malloc. It checks its own results and exits non-zero on any mismatch.
#include <allockit/allockit.h>

#include <allockit/version.h>
#include <allockit/arena.hpp>
#include <allockit/object_pool.hpp>
#include <allockit/pool.hpp>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace {

struct Item {
  int id;
  double price;
  std::string_view name;  // lives in the request arena
};

int failures = 0;

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "FAIL: %s\n", what);
    ++failures;
  }
}

}  // namespace

int main() {
  check(ak_version() == AK_VERSION, "ak_version() matches the header");

  ak::ObjectPool<Item> items;
  ak::Arena request;
  ak::map<int, Item*> by_id;  // std::map on the shared size-class pools
  std::vector<Item*> live;
  for (int round = 0; round < 50; ++round) {
    for (int i = 0; i < 200; ++i) {
      int id = round * 1000 + i;
      std::string_view name = request.make_string("item-" + std::to_string(id));
      Item* it = items.create(Item{id, id * 0.5, name});
      by_id[id] = it;
      live.push_back(it);
    }
    long sum = 0;
    for (Item* it : live) sum += it->id;
    long expect = 0;
    for (int i = 0; i < 200; ++i) expect += round * 1000 + i;
    check(sum == expect, "every item of the round is intact");
    check(by_id.size() == 200, "the index holds the round's items");
    check(by_id.at(round * 1000 + 7)->name == "item-" + std::to_string(round * 1000 + 7),
          "a name read back from the arena");
    for (Item* it : live) items.destroy(it);
    live.clear();
    by_id.clear();
    request.reset();  // every name at once
  }

  auto* buf = static_cast<unsigned char*>(ak_malloc(100000));
  check(buf != nullptr, "ak_malloc(100000)");
  std::memset(buf, 0xab, 100000);
  buf = static_cast<unsigned char*>(ak_realloc(buf, 300000));
  check(buf != nullptr && buf[99999] == 0xab, "ak_realloc keeps the contents");
  check(ak_malloc_usable_size(buf) >= 300000, "usable size covers the request");
  ak_free(buf);
  void* zero = ak_calloc(1000, 8);
  check(zero != nullptr && static_cast<unsigned char*>(zero)[7999] == 0, "ak_calloc zeroes");
  ak_free(zero);
  void* aligned = ak_aligned_alloc(4096, 4096);
  check(aligned != nullptr && reinterpret_cast<uintptr_t>(aligned) % 4096 == 0, "aligned");
  ak_free(aligned);

  if (failures) return 1;
  std::printf("inventory: ok (allockit %s)\n", AK_VERSION_STRING);
  return 0;
}
