// The size-class table lives in include/allockit/detail/size_classes.hpp so the public inline fast
// paths can fold classes at compile time; the core layer re-exports it under its usual name.
#pragma once

#include "allockit/detail/size_classes.hpp"
