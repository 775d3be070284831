// The default PageSource of the pools and arenas (allockit/page_source.hpp): the OS mappings of
// os.hpp behind the virtual interface. Kept apart from the mapping primitives so liballockit.so,
// which needs no PageSource, carries no vtable or type info (and so no C++ runtime reference).
#include "allockit/page_source.hpp"
#include "os/os.hpp"

namespace ak {
namespace {

class OsPageSource final : public PageSource {
 public:
  void* map(std::size_t bytes, std::size_t align) noexcept override {
    return os::map(bytes, align);
  }
  void unmap(void* p, std::size_t bytes) noexcept override { os::release(p, bytes); }
};

}  // namespace

PageSource& os_page_source() noexcept {
  static OsPageSource source;  // constant-initialised: no guard
  return source;
}

}  // namespace ak
