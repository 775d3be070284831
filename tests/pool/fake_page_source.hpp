// A PageSource for tests: counts mappings and fails on demand, to reach out-of-memory paths.
#pragma once

#include "allockit/page_source.hpp"

namespace ak::test {

class FakePageSource final : public PageSource {
 public:
  void* map(std::size_t bytes, std::size_t align) noexcept override {
    if (fail_after_ == 0) return nullptr;
    if (fail_after_ > 0) --fail_after_;
    ++maps;
    live_bytes += bytes;
    return os_page_source().map(bytes, align);
  }
  void unmap(void* p, std::size_t bytes) noexcept override {
    ++unmaps;
    live_bytes -= bytes;
    os_page_source().unmap(p, bytes);
  }
  void fail_after(long n) { fail_after_ = n; }  // -1: never fail

  long maps = 0, unmaps = 0;
  std::size_t live_bytes = 0;

 private:
  long fail_after_ = -1;
};

}  // namespace ak::test
