// glibc's malloc introspection calls answered with liballockit's figures (glibc_info.hpp): the
// pools and the large blocks read as glibc's arena and mmapped chunks.
#include "malloc/glibc_info.hpp"

#include <cerrno>
#include <climits>

#include "malloc/large.hpp"
#include "pool/pool.hpp"

namespace ak::detail {
namespace {

// The figures, with the address space the pools and the large blocks hold (malloc_info's aspace),
// from one read of each.
struct Snapshot {
  GlibcMallinfo m{};
  std::size_t pool_space = 0, large_space = 0;
};

Snapshot snapshot() noexcept {
  const SlabSourceStats pool = slab_source_stats(false);
  const LargeStats large = large_stats();
  Snapshot s;
  GlibcMallinfo& m = s.m;
  m.arena = pool.in_use_bytes + pool.cached_bytes;
  m.ordblks = pool.slabs_cached;
  m.hblks = large.live_blocks;
  m.hblkhd = large.mapped_bytes - large.cached_bytes;
  m.uordblks = pool.in_use_bytes;
  m.fordblks = pool.cached_bytes;
  m.keepcost = pool.cached_bytes + large.cached_resident_bytes;
  s.pool_space = pool.reserved_bytes;
  s.large_space = large.mapped_bytes;
  return s;
}

}  // namespace

GlibcMallinfo glibc_mallinfo() noexcept {
  return snapshot().m;
}

GlibcMallinfoInts glibc_mallinfo_ints() noexcept {
  const GlibcMallinfo m = glibc_mallinfo();
  auto held = [](std::size_t v) { return v > std::size_t(INT_MAX) ? INT_MAX : int(v); };
  return GlibcMallinfoInts{held(m.arena),    held(m.ordblks), held(m.smblks),  held(m.hblks),
                           held(m.hblkhd),   held(m.usmblks), held(m.fsmblks), held(m.uordblks),
                           held(m.fordblks), held(m.keepcost)};
}

int glibc_malloc_info(int options, std::FILE* out) noexcept {
  if (options != 0 || out == nullptr) {
    errno = EINVAL;
    return -1;
  }
  const Snapshot s = snapshot();
  const GlibcMallinfo& m = s.m;
  const auto z = [](std::size_t v) { return static_cast<unsigned long long>(v); };
  std::fprintf(out,
               "<malloc version=\"1\">\n<heap nr=\"0\">\n<sizes>\n</sizes>\n"
               "<total type=\"fast\" count=\"0\" size=\"0\"/>\n"
               "<total type=\"rest\" count=\"%llu\" size=\"%llu\"/>\n"
               "<system type=\"current\" size=\"%llu\"/>\n"
               "<aspace type=\"total\" size=\"%llu\"/>\n</heap>\n"
               "<total type=\"fast\" count=\"0\" size=\"0\"/>\n"
               "<total type=\"rest\" count=\"%llu\" size=\"%llu\"/>\n"
               "<total type=\"mmap\" count=\"%llu\" size=\"%llu\"/>\n"
               "<system type=\"current\" size=\"%llu\"/>\n"
               "<aspace type=\"total\" size=\"%llu\"/>\n</malloc>\n",
               z(m.ordblks), z(m.fordblks), z(m.arena), z(s.pool_space), z(m.ordblks),
               z(m.fordblks), z(m.hblks), z(m.hblkhd), z(m.arena + m.hblkhd),
               z(s.pool_space + s.large_space));
  return 0;
}

int glibc_mallopt(int param, int value) noexcept {
  constexpr int kMxFast = 1, kMaxFast = 160;  // M_MXFAST, glibc's MAX_FAST_SIZE on 64 bits
  return param == kMxFast && (value < 0 || value > kMaxFast) ? 0 : 1;
}

}  // namespace ak::detail
