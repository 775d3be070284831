// operator new's allocation, shared by the override shim (override.cpp) and malloc.cpp: ak_malloc's
// fast path, its failure going to the C++ new-handler loop as a tail call, so the shared library's
// operator new is this function itself (src/CMakeLists.txt, AK_LINKER_ALIASES) and needs no frame.
#pragma once

#include <cstddef>

namespace ak::detail {

// A block of `size` bytes, as ak_malloc gives it; when there is none, what new_failed returns.
void* new_block(std::size_t size);

// operator new's answer to an allocation that failed: the new-handler loop, which returns a block
// or does not return (throws std::bad_alloc or reports and aborts). override.cpp defines it; the
// prefixed libraries, which have no operator new and so never call new_block, keep malloc.cpp's
// weak stand-in, which returns null.
void* new_failed(std::size_t size);

}  // namespace ak::detail
