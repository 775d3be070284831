// ak::PageSource: where pools get their pages. The default maps from the OS; tests pass a failing
// or counting source to reach out-of-memory paths. Called only on slow paths (page growth, trim).
#pragma once

#include <cstddef>

namespace ak {

class PageSource {
 public:
  // Effects: maps `bytes` (a multiple of the OS page size) aligned to `align` (a power of two, at
  // least the OS page size). Returns: zero-filled memory, or null when out of memory. Never throws.
  // Thread-safety: the OS source may be called from any thread.
  virtual void* map(std::size_t bytes, std::size_t align) noexcept = 0;
  // Effects: returns a whole range obtained from map() to its source.
  virtual void unmap(void* p, std::size_t bytes) noexcept = 0;

 protected:
  ~PageSource() = default;
};

// The process-wide source backed by mmap. Thread-safe; lives for the whole program.
PageSource& os_page_source() noexcept;

}  // namespace ak
