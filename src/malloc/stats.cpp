// The stats and collection API (allockit.h: ak_stats_get, ak_stats_print, ak_stats_json,
// ak_collect) and what ALLOCKIT_STATS / ALLOCKIT_VERBOSE print. Formatting is by hand into
// stack or caller buffers: never allocates, so it can run at exit or inside a signal-free hook.
#include <cstring>

#include "allockit/allockit.h"
#include "core/core.hpp"
#include "malloc/large.hpp"
#include "malloc/options.hpp"
#include "os/os.hpp"
#include "pool/pool.hpp"

namespace ak::detail {
namespace {

static_assert(kHeapClasses <= AK_STATS_MAX_CLASSES, "ak_stats.classes too small");

// Appends to a caller buffer like snprintf: counts every byte, writes what fits, NUL-terminates.
struct Out {
  char* buf;
  std::size_t cap, len = 0;
  Out& str(const char* s) {
    for (; *s; ++s, ++len)
      if (len + 1 < cap) buf[len] = *s;
    return *this;
  }
  Out& num(std::uint64_t v) {
    char tmp[24];
    int n = 0;
    do tmp[n++] = char('0' + v % 10);
    while ((v /= 10) != 0);
    while (n > 0) {
      char c[2] = {tmp[--n], 0};
      str(c);
    }
    return *this;
  }
  std::size_t finish() {
    if (cap) buf[len < cap ? len : cap - 1] = 0;
    return len;
  }
};

}  // namespace
}  // namespace ak::detail

using namespace ak::detail;

extern "C" {

void ak_stats_get(ak_stats* out) noexcept {
  if (out == nullptr) return;
  std::memset(out, 0, sizeof *out);
  const SlabSourceStats pool = slab_source_stats();
  const LargeStats large = large_stats();
  out->mapped = pool.reserved_bytes + large.mapped_bytes;
  out->resident = pool.resident_bytes + (large.mapped_bytes - large.cached_bytes);
  out->active = pool.in_use_bytes + (large.mapped_bytes - large.cached_bytes);
  out->allocated = pool.in_use_bytes + large.live_bytes;
  out->large_blocks = large.live_blocks;
  out->large_bytes = large.live_bytes;
  out->large_cached_bytes = large.cached_bytes;
  out->slabs_in_use = pool.slabs_in_use;
  out->slabs_cached = pool.slabs_cached;
  out->starter_slabs = starter_slab_count();
  out->heaps = heap_count();
  out->class_count = kHeapClasses;
  for (unsigned c = 0; c < kHeapClasses; ++c) {
    out->classes[c].block_size = class_size(c);
    out->classes[c].slabs = pool_class_slabs(c);
  }
}

size_t ak_stats_json(char* buf, size_t size) noexcept {
  ak_stats s;
  ak_stats_get(&s);
  Out o{buf, buf ? size : 0};
  o.str("{\"mapped\": ").num(s.mapped).str(", \"resident\": ").num(s.resident);
  o.str(", \"active\": ").num(s.active).str(", \"allocated\": ").num(s.allocated);
  o.str(", \"large\": {\"blocks\": ").num(s.large_blocks).str(", \"bytes\": ").num(s.large_bytes);
  o.str(", \"cached_bytes\": ").num(s.large_cached_bytes).str("}");
  o.str(", \"slabs\": {\"in_use\": ").num(s.slabs_in_use).str(", \"cached\": ").num(s.slabs_cached);
  o.str(", \"starter\": ").num(s.starter_slabs);
  o.str("}, \"heaps\": ").num(s.heaps).str(", \"classes\": [");
  for (size_t c = 0; c < s.class_count; ++c) {
    o.str(c ? ", " : "").str("{\"block_size\": ").num(s.classes[c].block_size);
    o.str(", \"slabs\": ").num(s.classes[c].slabs).str("}");
  }
  o.str("]}");
  return o.finish();
}

void ak_stats_print(void) noexcept {
  ak_stats s;
  ak_stats_get(&s);
  Message()
      .str("allockit: stats: mapped ")
      .num(s.mapped)
      .str(", resident ")
      .num(s.resident)
      .str(", active ")
      .num(s.active)
      .str(", allocated ")
      .num(s.allocated)
      .print();
  Message()
      .str("allockit: stats: large blocks ")
      .num(s.large_blocks)
      .str(" (")
      .num(s.large_bytes)
      .str(" bytes, ")
      .num(s.large_cached_bytes)
      .str(" cached); slabs in use ")
      .num(s.slabs_in_use)
      .str(", cached ")
      .num(s.slabs_cached)
      .str("; thread heaps ")
      .num(s.heaps)
      .print();
  for (size_t c = 0; c < s.class_count; ++c)
    if (s.classes[c].slabs)
      Message()
          .str("allockit: stats: class ")
          .num(c)
          .str(" (")
          .num(s.classes[c].block_size)
          .str(" B): ")
          .num(s.classes[c].slabs)
          .str(" slabs")
          .print();
}

size_t ak_collect(int force) noexcept {
  pool_settle_remote();
  if (force) return slab_source_trim() + large_trim();
  return slab_source_purge_expired() + large_purge_older_than(slab_source_purge_delay());
}

}  // extern "C"
