// Non-heap anonymous memory: the part of a process's RssAnon that no allocator call made. The
// recorder and the replay worker measure it the same way and take it out of their memory curves,
// so a replay's heap is held against the recorded program's heap, not against its data segments
// and stacks (replay/fidelity.hpp).
//
// Counted: copy-on-write pages of private file mappings (an executable's and its libraries' data,
// relocations and lazily bound symbols), each loaded object's .bss (the unnamed anonymous mapping
// that starts where the object's writable file mapping ends, as far as the object's program
// headers say its .bss reaches: an anonymous mapping placed right after it, such as the
// recorder's own tables, is not its .bss), the main thread's stack ([stack]),
// the resident pages of the thread stacks the caller names, and, from the stacks of threads that
// have exited (glibc caches them for its next threads, their top pages resident), the mapping
// that still holds each one, while it is a stack's (writable, anonymous, a guard page below it;
// a range glibc unmapped and something else reuses is not). Not counted, so taken for heap:
// the allocator's own object (its data and .bss hold its metadata: jemalloc's and tcmalloc's
// .bss are about 2 MB, liballockit's region map 2.5 MB), stacks of threads the caller does not
// know, and anonymous mappings a program makes with mmap itself (an allocator of its own).
//
// How: /proc/self/maps names the mappings that count, and PAGEMAP_SCAN (Linux 6.7) counts each
// one's pages that are present, anonymous and not the shared zero page: what smaps calls
// "Anonymous", without walking the page tables of the heap. Kernels without it read
// /proc/self/smaps, whose cost grows with the whole address space (1-3 ms on a 2-thread server
// with a 50 MiB heap, 14 ms with a 1 GiB one; the maps route about 0.1 ms).
//
// Header-only and heap-free (the recorder calls it inside a traced program). Cost: one read of
// /proc/self/maps, one walk of the loaded objects' program headers (dl_iterate_phdr, under the
// loader's list lock), one ioctl per counted mapping, one mincore(2) per 16 MiB of named stacks.
#pragma once
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace ak::trace {

// A memory sample's non-heap bytes when they were not measured at that sample (measures are
// taken less often than samples: see fill_unmeasured).
inline constexpr uint64_t kNonheapUnmeasured = UINT64_MAX;

// Fills the unmeasured non-heap entries of n samples in time order (at(i): the i-th entry) with
// the larger of the nearest measures before and after: memory that became non-heap between two
// measures (a data segment dirtied, a stack grown) never reads as heap. 0 without any measure.
template <class At>
void fill_unmeasured(size_t n, At&& at) {
  uint64_t before = kNonheapUnmeasured;
  for (size_t i = 0; i < n;) {
    if (at(i) != kNonheapUnmeasured) {
      before = at(i++);
      continue;
    }
    size_t j = i;
    while (j < n && at(j) == kNonheapUnmeasured) ++j;
    const uint64_t after = j < n ? at(j) : kNonheapUnmeasured;
    auto known = [](uint64_t v) { return v == kNonheapUnmeasured ? 0 : v; };
    const uint64_t fill = known(before) > known(after) ? known(before) : known(after);
    for (; i < j; ++i) at(i) = fill;
  }
}

struct AddressRange {
  uintptr_t lo = 0, hi = 0;  // [lo, hi)
};

namespace nonheap_detail {

// One /proc/self/smaps mapping header: "lo-hi perms offset dev inode [path]".
struct Mapping {
  uintptr_t lo = 0, hi = 0;
  bool writable = false, is_private = false, inaccessible = false;
  unsigned long long inode = 0;
  bool named = false, main_stack = false;
};

inline bool parse_mapping(const char* line, Mapping& m) {
  char* p = nullptr;
  m.lo = std::strtoull(line, &p, 16);
  if (*p != '-') return false;
  m.hi = std::strtoull(p + 1, &p, 16);
  if (*p != ' ' || std::strlen(p) < 6) return false;
  m.writable = p[2] == 'w';
  m.is_private = p[4] == 'p';
  m.inaccessible = p[1] == '-' && p[2] == '-' && p[3] == '-';
  p += 6;
  std::strtoull(p, &p, 16);  // offset
  while (*p == ' ') ++p;     // device
  while (*p && *p != ' ') ++p;
  m.inode = std::strtoull(p, &p, 10);
  while (*p == ' ') ++p;
  m.named = *p != 0;
  m.main_stack = std::strcmp(p, "[stack]") == 0;
  return true;
}

// The loaded objects' .bss extents, page-aligned: from each writable PT_LOAD segment, the pages
// past its file contents (dl_iterate_phdr; nothing allocated).
constexpr size_t kMaxObjects = 256;
struct BssExtents {
  AddressRange of[kMaxObjects];
  size_t n = 0;

  void collect() {
    n = 0;
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void* self) {
          auto& b = *static_cast<BssExtents*>(self);
          const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
          for (int i = 0; i < info->dlpi_phnum && b.n < kMaxObjects; ++i) {
            const ElfW(Phdr)& ph = info->dlpi_phdr[i];
            if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_W) || ph.p_memsz <= ph.p_filesz) continue;
            const uintptr_t start = info->dlpi_addr + ph.p_vaddr;
            const uintptr_t lo = (start + ph.p_filesz + page - 1) & ~(page - 1);
            const uintptr_t hi = (start + ph.p_memsz + page - 1) & ~(page - 1);
            if (hi > lo) b.of[b.n++] = {lo, hi};
          }
          return 0;
        },
        this);
  }

  // Where the .bss that starts at `lo` ends; lo when none does.
  uintptr_t end_from(uintptr_t lo) const {
    for (size_t i = 0; i < n; ++i)
      if (of[i].lo == lo) return of[i].hi;
    return lo;
  }
};

// Which mappings are not heap (see above), mapping by mapping in address order, and which part
// of each: counts() returns the range to count, empty when none. `left`: the stacks of exited
// threads; left_seen[i] is set when left[i] is still a stack's mapping.
struct Classifier {
  unsigned long long allocator_inode = 0;  // the allocator's object file (0: none)
  const AddressRange* left = nullptr;
  size_t n_left = 0;
  bool* left_seen = nullptr;
  const BssExtents* bss = nullptr;
  uintptr_t writable_file_end = 0;  // where the last writable private file mapping ended
  uintptr_t guard_end = 0;          // where the last inaccessible mapping ended

  // Ready for one pass over the mappings: the allocator's object file and this instant's .bss
  // extents, collected into `extents`, which must outlive the pass.
  void start(unsigned long long inode, BssExtents& extents) {
    extents.collect();
    allocator_inode = inode;
    bss = &extents;
  }

  AddressRange counts(const Mapping& m) {
    const bool file = m.inode != 0 && m.inode != allocator_inode;
    const bool anon = m.inode == 0 && !m.named && m.is_private;
    const bool after_data = anon && m.lo == writable_file_end;
    writable_file_end = file && m.writable && m.is_private ? m.hi : 0;
    const bool guarded = m.lo == guard_end;
    guard_end = m.inaccessible ? m.hi : 0;
    if (file || m.main_stack || (anon && m.writable && guarded && holds_left(m)))
      return {m.lo, m.hi};
    if (after_data) {
      const uintptr_t end = bss ? bss->end_from(m.lo) : m.hi;
      return {m.lo, end < m.hi ? end : m.hi};
    }
    return {};
  }

  // Whether m is the mapping of one of the left stacks: holds it and is not much larger (not
  // merged with a neighbour).
  bool holds_left(const Mapping& m) {
    constexpr uintptr_t kSlack = uintptr_t(1) << 20;
    bool any = false;
    for (size_t i = 0; i < n_left; ++i)
      if (left[i].lo >= m.lo && left[i].hi <= m.hi && left[i].hi > left[i].lo &&
          m.hi - m.lo <= left[i].hi - left[i].lo + kSlack) {
        if (left_seen) left_seen[i] = true;
        any = true;
      }
    return any;
  }
};

inline bool is_mapping_header(const char* s) {
  return (*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f');
}

// Calls on_line for each line of /proc file `path` (the newline cut off); false when it cannot
// be opened. Lines longer than 16 KiB are dropped (no mapping header is that long).
template <class OnLine>
bool for_each_line(const char* path, OnLine&& on_line) {
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[16384];
  size_t have = 0;
  for (;;) {
    const ssize_t got = read(fd, buf + have, sizeof buf - 1 - have);
    if (got <= 0) break;
    have += static_cast<size_t>(got);
    buf[have] = 0;
    char* line = buf;
    for (char* nl; (nl = std::strchr(line, '\n')) != nullptr; line = nl + 1) {
      *nl = 0;
      on_line(line);
    }
    have = static_cast<size_t>(buf + have - line);
    if (have == sizeof buf - 1) have = 0;
    std::memmove(buf, line, have);
  }
  close(fd);
  return true;
}

// PAGEMAP_SCAN's interface (linux/fs.h from 6.7; older headers lack it).
struct PageRegion {
  uint64_t start, end, categories;
};
struct PmScanArg {
  uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages;
  uint64_t category_inverted, category_mask, category_anyof_mask, return_mask;
};
constexpr unsigned long kPagemapScan = _IOWR('f', 16, PmScanArg);
constexpr uint64_t kPageIsFile = 1 << 2, kPageIsPresent = 1 << 3, kPageIsPfnZero = 1 << 5;

// Bytes of [lo, hi) in pages that are present, anonymous and not the zero page, through
// pagemap file `fd`; false when the kernel has no PAGEMAP_SCAN.
inline bool anonymous_bytes(int fd, uintptr_t lo, uintptr_t hi, uint64_t& bytes) {
  PageRegion vec[128];
  while (lo < hi) {
    PmScanArg arg{};
    arg.size = sizeof arg;
    arg.start = lo;
    arg.end = hi;
    arg.vec = reinterpret_cast<uintptr_t>(vec);
    arg.vec_len = sizeof vec / sizeof vec[0];
    arg.category_mask = kPageIsPresent | kPageIsFile | kPageIsPfnZero;
    arg.category_inverted = kPageIsFile | kPageIsPfnZero;
    arg.return_mask = kPageIsPresent;
    const int n = ioctl(fd, kPagemapScan, &arg);
    if (n < 0) return false;
    for (int i = 0; i < n; ++i) bytes += vec[i].end - vec[i].start;
    if (arg.walk_end <= lo) break;  // no progress: a kernel that will not walk further
    lo = static_cast<uintptr_t>(arg.walk_end);
  }
  return true;
}

// Resident bytes of [lo, hi) by mincore(2), page-aligned inward; 0 for pages not mapped.
inline uint64_t resident_bytes(uintptr_t lo, uintptr_t hi) {
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  lo = (lo + page - 1) & ~(page - 1);
  hi &= ~(page - 1);
  uint64_t bytes = 0;
  unsigned char vec[4096];
  while (lo < hi) {
    const uintptr_t pages = (hi - lo) / page < sizeof vec ? (hi - lo) / page : sizeof vec;
    if (mincore(reinterpret_cast<void*>(lo), pages * page, vec) == 0)
      for (uintptr_t i = 0; i < pages; ++i) bytes += (vec[i] & 1) ? page : 0;
    lo += pages * page;
  }
  return bytes;
}

}  // namespace nonheap_detail

// The inode of the object file that defines `symbol` (the allocator's malloc), to leave its
// mappings to the heap; 0 when unknown. Call outside any allocation path (dladdr may lock).
inline unsigned long long object_inode(const void* symbol) {
  Dl_info info{};
  struct stat st {};
  if (dladdr(symbol, &info) == 0 || info.dli_fname == nullptr || stat(info.dli_fname, &st) != 0)
    return 0;
  return static_cast<unsigned long long>(st.st_ino);
}

// The resident bytes of `stacks` (thread stacks other than the main thread's): one mincore(2)
// per 16 MiB, no read of /proc.
inline uint64_t stack_bytes(const AddressRange* stacks, size_t n_stacks) {
  uint64_t bytes = 0;
  for (size_t i = 0; i < n_stacks; ++i)
    if (stacks[i].hi > stacks[i].lo)
      bytes += nonheap_detail::resident_bytes(stacks[i].lo, stacks[i].hi);
  return bytes;
}

// This instant's non-heap bytes but named stacks, from /proc/self/smaps's "Anonymous:" lines;
// false when it cannot be read. The route of kernels before 6.7, and the reference the maps
// route is tested against.
inline bool nonheap_bytes_by_smaps(unsigned long long allocator_inode, uint64_t& bytes,
                                   nonheap_detail::Classifier classify = {}) {
  nonheap_detail::BssExtents bss;
  classify.start(allocator_inode, bss);
  bool counting = false;
  return nonheap_detail::for_each_line("/proc/self/smaps", [&](const char* s) {
    nonheap_detail::Mapping m;
    if (nonheap_detail::is_mapping_header(s)) {
      // smaps counts whole mappings: one counted only in part is left out.
      const AddressRange r =
          nonheap_detail::parse_mapping(s, m) ? classify.counts(m) : AddressRange{};
      counting = r.lo == m.lo && r.hi == m.hi && r.hi > r.lo;
    } else if (counting && std::strncmp(s, "Anonymous:", 10) == 0)
      bytes += std::strtoull(s + 10, nullptr, 10) * 1024;
  });
}

// The same from /proc/self/maps and PAGEMAP_SCAN; false when the kernel lacks PAGEMAP_SCAN.
inline bool nonheap_bytes_by_pagemap(unsigned long long allocator_inode, uint64_t& bytes,
                                     nonheap_detail::Classifier classify = {}) {
  const int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  nonheap_detail::BssExtents bss;
  classify.start(allocator_inode, bss);
  bool scans = true;
  const bool read = nonheap_detail::for_each_line("/proc/self/maps", [&](const char* s) {
    nonheap_detail::Mapping m;
    if (!scans || !nonheap_detail::parse_mapping(s, m)) return;
    const AddressRange r = classify.counts(m);
    if (r.hi > r.lo) scans = nonheap_detail::anonymous_bytes(fd, r.lo, r.hi, bytes);
  });
  close(fd);
  return read && scans;
}

// This instant's non-heap anonymous bytes (see above), with the resident pages of `stacks`
// (thread stacks other than the main thread's) and the mappings still holding `left` (stacks of
// exited threads; left_seen[i], when given, is set for each one found), leaving the object file
// `allocator_inode` (object_inode) to the heap. 0 when /proc cannot be read.
inline uint64_t nonheap_bytes(const AddressRange* stacks, size_t n_stacks,
                              unsigned long long allocator_inode,
                              const AddressRange* left = nullptr, size_t n_left = 0,
                              bool* left_seen = nullptr) {
  nonheap_detail::Classifier classify;
  classify.left = left;
  classify.n_left = n_left;
  classify.left_seen = left_seen;
  // Set once PAGEMAP_SCAN failed (a kernel before 6.7): later measures go straight to smaps
  // instead of reading the maps and failing again first.
  static std::atomic<bool> no_pagemap_scan{false};
  uint64_t mapped = 0;
  if (no_pagemap_scan.load(std::memory_order_relaxed) ||
      !nonheap_bytes_by_pagemap(allocator_inode, mapped, classify)) {
    no_pagemap_scan.store(true, std::memory_order_relaxed);
    mapped = 0;
    if (!nonheap_bytes_by_smaps(allocator_inode, mapped, classify)) return 0;
  }
  return mapped + stack_bytes(stacks, n_stacks);
}

}  // namespace ak::trace
