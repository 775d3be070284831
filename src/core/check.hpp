// Checks that never allocate. AK_CHECK is always on and aborts on corruption; AK_DEBUG_ASSERT only
// in AK_DEBUG builds. Messages are built in a stack buffer and handed to the OS layer's reporter,
// so a check is safe inside the allocator, from any thread.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ak::detail {

// Defined by the OS layer (src/os/linux_report.cpp): writes `len` bytes to stderr, never allocates.
void report_write(const char* msg, std::size_t len) noexcept;
[[noreturn]] void report_abort() noexcept;

// A fixed-size message under construction on the stack. Truncates silently when full.
class Message {
 public:
  Message& str(const char* s) noexcept {
    while (s && *s && len_ < kCap) buf_[len_++] = *s++;
    return *this;
  }
  Message& num(std::uint64_t v) noexcept {
    char tmp[24];
    int n = 0;
    do tmp[n++] = char('0' + v % 10);
    while ((v /= 10) != 0);
    while (n > 0 && len_ < kCap) buf_[len_++] = tmp[--n];
    return *this;
  }
  Message& ptr(const void* p) noexcept {
    static constexpr char kHex[] = "0123456789abcdef";
    auto v = reinterpret_cast<std::uintptr_t>(p);
    str("0x");
    for (int shift = 60; shift >= 0; shift -= 4)
      if (len_ < kCap) buf_[len_++] = kHex[(v >> shift) & 0xf];
    return *this;
  }
  void print() noexcept {
    buf_[len_ < kCap ? len_ : kCap - 1] = '\n';
    report_write(buf_, (len_ < kCap ? len_ : kCap - 1) + 1);
  }
  [[noreturn]] void fail() noexcept {
    print();
    report_abort();
  }

 private:
  static constexpr std::size_t kCap = 255;
  char buf_[kCap + 1];
  std::size_t len_ = 0;
};

// Reports a bad pointer or a corrupted block handed to allocation call `call` ("free()"), and
// aborts: "allockit: free(): double free detected: 0x...".
[[noreturn, gnu::cold]] inline void bad_pointer(const char* call, const char* what,
                                                const void* p) noexcept {
  Message().str("allockit: ").str(call).str(": ").str(what).str(": ").ptr(p).fail();
}

}  // namespace ak::detail

#if defined(AK_DEBUG) && AK_DEBUG
#define AK_DEBUG_ENABLED 1
#else
#define AK_DEBUG_ENABLED 0
#endif

#define AK_CHECK(cond, what)               \
  do {                                     \
    if (!(cond)) [[unlikely]]              \
      ::ak::detail::Message()              \
          .str("allockit: check failed: ") \
          .str(what)                       \
          .str(" (")                       \
          .str(__FILE__)                   \
          .str(":")                        \
          .num(__LINE__)                   \
          .str(")")                        \
          .fail();                         \
  } while (0)

#if AK_DEBUG_ENABLED
#define AK_DEBUG_ASSERT(cond, what) AK_CHECK(cond, what)
#else
#define AK_DEBUG_ASSERT(cond, what) \
  do {                              \
  } while (0)
#endif
