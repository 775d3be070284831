// Linux implementation of the OS memory contract (os.hpp): mmap/munmap/mprotect/madvise/mincore.
// Aligned reservations over-map by `align` and unmap the slack, so no address space is held twice.
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "os/os.hpp"

namespace ak::os {
namespace {

constexpr std::size_t kPageTableSpan = std::size_t(2) << 20;  // one page table's reach (x86-64)
// move_pages_out keeps a range's offset within kPageTableSpan from this size (see os.hpp).
constexpr std::size_t kPhaseMoveMin = 4 * kPageTableSpan;

constexpr std::size_t kTryPlainMapAlign = std::size_t(1) << 16;

struct Linux {
  static std::size_t page_size() noexcept {
    // Cached in a constant-initialised atomic: no guarded static, no C++ runtime call.
    AK_EARLY_DATA static std::atomic<std::size_t> size{0};
    std::size_t n = size.load(std::memory_order_relaxed);
    if (n == 0) size.store(n = std::size_t(::sysconf(_SC_PAGESIZE)), std::memory_order_relaxed);
    return n;
  }

  static void* map_aligned(std::size_t bytes, std::size_t align, int prot,
                           int extra = MAP_NORESERVE) noexcept {
    if (bytes == 0 || !detail::is_pow2(align)) return nullptr;
    const std::size_t page = page_size();
    if (align < page) align = page;
    bytes = detail::align_up(bytes, page);
    if (bytes + align < bytes) return nullptr;  // overflow
    const int flags = MAP_PRIVATE | MAP_ANONYMOUS | extra;
    // Fast case for small alignments: the kernel often hands back aligned addresses already.
    // Large ones (the pools' 16 MiB regions) rarely are: over-map at once, saving a map/unmap.
    void* p;
    if (align <= kTryPlainMapAlign) {
      p = ::mmap(nullptr, bytes, prot, flags, -1, 0);
      if (p == MAP_FAILED) return nullptr;
      if (detail::addr(p) % align == 0) return p;
      ::munmap(p, bytes);
    }
    const std::size_t span = bytes + align - page;
    p = ::mmap(nullptr, span, prot, flags, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    const std::uintptr_t start = detail::align_up(detail::addr(p), align);
    const std::size_t head = start - detail::addr(p), tail = span - head - bytes;
    if (head) ::munmap(p, head);
    if (tail) ::munmap(reinterpret_cast<char*>(start) + bytes, tail);
    return reinterpret_cast<void*>(start);
  }

  static void* reserve(std::size_t bytes, std::size_t align) noexcept {
    return map_aligned(bytes, align, PROT_NONE);
  }
  static bool commit(void* p, std::size_t bytes) noexcept {
    return ::mprotect(p, bytes, PROT_READ | PROT_WRITE) == 0;
  }
  static bool decommit(void* p, std::size_t bytes) noexcept {
    return ::madvise(p, bytes, MADV_DONTNEED) == 0;
  }
  static void release(void* p, std::size_t bytes) noexcept {
    if (p) ::munmap(p, detail::align_up(bytes, page_size()));
  }
};
static_assert(MemoryPrimitives<Linux>);

constexpr int kMoveOut = MREMAP_MAYMOVE | MREMAP_DONTUNMAP | MREMAP_FIXED;

// Moves the pages of [p, p+bytes) to [at, at+bytes), a reservation the moves replace, one
// mapping at a time: mremap moves within one mapping only (EFAULT past its end), and a cached
// range merged from blocks that moved before spans several (grep's replay: 1 or 2 of 5-7 moves of
// 1-4 MiB buffers, each emptied in place at 250-300 us instead). A piece that fails so is halved
// until it fits; the rest follows: one system call for a single mapping, about 2 log2(pages) a
// boundary between mappings at worst (Linux 6.17 and later move several mappings in one call to
// a fixed address). Returns the bytes moved: fewer than `bytes` when a piece cannot move at all
// (a hole, the mapping count limit), the pieces moved so far being in the reservation then.
std::size_t move_in_pieces(char* p, std::size_t bytes, char* at) noexcept {
  const std::size_t page = Linux::page_size();
  std::size_t done = 0, piece = bytes;
  while (done < bytes) {
    if (::mremap(p + done, piece, piece, kMoveOut, at + done) != MAP_FAILED) {
      done += piece;
      piece = bytes - done;
    } else if (errno == EFAULT && piece > page) {
      piece = detail::align_up(piece / 2, page);
    } else {
      break;
    }
  }
  return done;
}

// move_pages_out into a reservation: one page table larger when `phase`, to hold an address of
// p's offset within kPageTableSpan (the rest is given back).
void* move_to_reservation(char* p, std::size_t bytes, bool phase) noexcept {
  const std::size_t span = bytes + (phase ? kPageTableSpan : 0);
  void* res = ::mmap(nullptr, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (res == MAP_FAILED) return nullptr;
  const std::size_t head = phase ? (detail::addr(p) - detail::addr(res)) & (kPageTableSpan - 1) : 0;
  char* const at = static_cast<char*>(res) + head;
  if (move_in_pieces(p, bytes, at) < bytes) {
    ::munmap(res, span);
    return nullptr;
  }
  if (head) ::munmap(res, head);
  if (span > head + bytes) ::munmap(at + bytes, span - head - bytes);
  return at;
}

}  // namespace

std::size_t page_size() noexcept {
  return Linux::page_size();
}
void* reserve(std::size_t bytes, std::size_t align) noexcept {
  return Linux::reserve(bytes, align);
}
bool commit(void* p, std::size_t bytes) noexcept {
  return Linux::commit(p, bytes);
}
bool decommit(void* p, std::size_t bytes) noexcept {
  return Linux::decommit(p, bytes);
}
void release(void* p, std::size_t bytes) noexcept {
  Linux::release(p, bytes);
}

void* map(std::size_t bytes, std::size_t align) noexcept {
  return Linux::map_aligned(bytes, align, PROT_READ | PROT_WRITE);
}

void* map_accounted(std::size_t bytes, std::size_t align) noexcept {
  return Linux::map_aligned(bytes, align, PROT_READ | PROT_WRITE, 0);
}

void* remap(void* p, std::size_t old_bytes, std::size_t new_bytes) noexcept {
  const int saved = errno;
  void* q = ::mremap(p, old_bytes, new_bytes, MREMAP_MAYMOVE);
  if (q != MAP_FAILED) return q;
  if (errno != EFAULT || new_bytes < old_bytes) return nullptr;
  // [p, p+old_bytes) spans several mappings (cached ranges merged, or pieces moved apart before):
  // its pages move piece by piece to the head of a new mapping (move_in_pieces), and any a
  // piece could not take (the mapping count limit) are copied.
  auto* const to = static_cast<char*>(map_accounted(new_bytes, Linux::page_size()));
  if (to == nullptr) return nullptr;
  char* const from = static_cast<char*>(p);
  const std::size_t moved = move_in_pieces(from, old_bytes, to);
  if (moved < old_bytes) std::memcpy(to + moved, from + moved, old_bytes - moved);
  Linux::release(p, old_bytes);
  errno = saved;
  return to;
}

void* move_pages_out(void* p, std::size_t bytes) noexcept {
  const int saved = errno;
  char* const from = static_cast<char*>(p);
  void* q = nullptr;
  if (bytes >= kPhaseMoveMin) {
    q = move_to_reservation(from, bytes, true);
  } else {
    // The kernel reads the address argument.
    q = ::mremap(p, bytes, bytes, MREMAP_MAYMOVE | MREMAP_DONTUNMAP, nullptr);
    if (q == MAP_FAILED) q = errno == EFAULT ? move_to_reservation(from, bytes, false) : nullptr;
  }
  errno = saved;
  return q;
}

bool set_accessible(void* p, std::size_t bytes, bool accessible) noexcept {
  const int saved = errno;
  const bool ok = ::mprotect(p, bytes, accessible ? PROT_READ | PROT_WRITE : PROT_NONE) == 0;
  errno = saved;
  return ok;
}

void huge_page_hint(void* p, std::size_t bytes) noexcept {
#ifdef MADV_HUGEPAGE
  const int saved = errno;
  ::madvise(p, bytes, MADV_HUGEPAGE);
  errno = saved;
#else
  (void)p, (void)bytes;
#endif
}

std::size_t resident_bytes(const void* p, std::size_t bytes) noexcept {
  const std::size_t page = page_size();
  unsigned char vec[256];
  std::size_t resident = 0;
  auto* cur = static_cast<const char*>(p);
  std::size_t pages = detail::align_up(bytes, page) / page;
  while (pages > 0) {
    const std::size_t batch = pages < sizeof vec ? pages : sizeof vec;
    if (::mincore(const_cast<char*>(cur), batch * page, vec) != 0) return resident;
    for (std::size_t i = 0; i < batch; ++i) resident += (vec[i] & 1) ? page : 0;
    cur += batch * page;
    pages -= batch;
  }
  return resident;
}

}  // namespace ak::os
