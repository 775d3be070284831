// Fuzz target: any byte string given to the journal reader, the timeline and stats must end in
// a result or a JournalError, never a crash, a hang or unbounded memory.
#include <cstddef>
#include <cstdint>

#include "trace/journal.hpp"
#include "trace/stats.hpp"
#include "trace/timeline.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    ak::trace::JournalReader r(data, size);
    ak::trace::Trace t = ak::trace::load_trace(r);
    ak::trace::Timeline tl = ak::trace::resolve(t);
    (void)ak::trace::compute_stats(t, tl);
  } catch (const ak::trace::JournalError&) {
  }
  return 0;
}
