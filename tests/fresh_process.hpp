// Runs a test body in a fresh process (a threadsafe death test re-executes the binary), for
// cases that need the allocator's process-wide state as a new program finds it. gtest's own
// checks do not cross the process boundary, so the body checks with REQUIRE(cond, exit code).
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>

namespace ak::testing {

template <class F>
void in_fresh_process(F body) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        body();
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace ak::testing

#define REQUIRE(cond, code) \
  if (!(cond)) std::exit(code)
