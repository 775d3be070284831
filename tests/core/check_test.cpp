// Checks that never allocate: messages are formatted on the stack and abort with the text intact.
#include <gtest/gtest.h>

#include "core/core.hpp"

TEST(CheckDeathTest, AkCheckAbortsWithMessage) {
  EXPECT_DEATH(AK_CHECK(1 + 1 == 3, "arithmetic is broken"), "check failed: arithmetic is broken");
}

TEST(CheckDeathTest, MessageFormatsNumbersAndPointers) {
  EXPECT_DEATH(ak::detail::Message().str("n=").num(12345).str(" p=").ptr((void*)0x1f).fail(),
               "n=12345 p=0x000000000000001f");
}

TEST(Check, LongMessagesAreTruncatedNotOverflowed) {
  ak::detail::Message m;
  for (int i = 0; i < 100; ++i) m.str("0123456789");
  m.num(~0ull).ptr(nullptr);  // must not write past the buffer (ASan would report it)
  SUCCEED();
}
