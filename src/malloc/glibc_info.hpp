// glibc's malloc introspection calls (mallinfo2, mallinfo, malloc_stats, malloc_info, mallopt)
// answered with liballockit's figures, for the override shim. Left to glibc, they described
// glibc's own arena, which a preloaded liballockit leaves empty: every count read 0 (a 10 MiB
// block and 10,000 small ones live), and the call first set up that unused arena. Thread-safe;
// none allocates but malloc_info's stdio.
#pragma once

#include <cstddef>
#include <cstdio>

namespace ak::detail {

// struct mallinfo2's layout (glibc 2.33), field for field. The pools play glibc's main arena:
// `arena` is their slabs in use and cached resident, `uordblks` the slabs in use (an upper bound
// of the pooled bytes live, as ak_stats.allocated), `fordblks` the cached slabs still resident,
// `ordblks` the cached slabs; the large blocks play glibc's mmapped chunks: `hblks` those live,
// `hblkhd` their mapped bytes. `keepcost` is what malloc_trim(0) would give back: the cached
// slabs and cached large ranges still resident. `smblks`, `usmblks` and `fsmblks` read 0, as
// glibc's usmblks always does: there are no fastbins.
struct GlibcMallinfo {
  std::size_t arena, ordblks, smblks, hblks, hblkhd, usmblks, fsmblks, uordblks, fordblks, keepcost;
};
// Effects: none. Returns: the figures above, read now (no mincore: a lock and a few loads).
GlibcMallinfo glibc_mallinfo() noexcept;

// struct mallinfo: the same figures as ints, each held at INT_MAX rather than wrapped past it
// as glibc's are (a heap past 2 GiB read negative there).
struct GlibcMallinfoInts {
  int arena, ordblks, smblks, hblks, hblkhd, usmblks, fsmblks, uordblks, fordblks, keepcost;
};
GlibcMallinfoInts glibc_mallinfo_ints() noexcept;

// malloc_info: writes the figures to `out` as glibc's XML (<malloc version="1">, one heap, its
// totals and the mmapped ones). Returns 0; -1 with errno EINVAL for `options` other than 0, as
// the manual page has it (glibc 2.36 returns EINVAL itself, errno untouched), or a null `out`
// (on which glibc's faults).
int glibc_malloc_info(int options, std::FILE* out) noexcept;

// mallopt: every parameter is accepted and changes nothing, returning 1: liballockit sizes its
// caches and thresholds itself, and a program tuning glibc's arenas must not fail for it. As
// glibc 2.36 (checked), that includes parameters it does not know, and only M_MXFAST (1) outside
// 0..160 bytes returns 0.
int glibc_mallopt(int param, int value) noexcept;

}  // namespace ak::detail
