// Fuzz target: any byte string given to the journal reader, the timeline, stats and the call-site
// table (v2 stacks, symbolised against no files) must end in a result or a JournalError (or, for
// a journal without stacks, top's runtime_error), never a crash, a hang or unbounded memory.
#include <cstddef>
#include <cstdint>

#include "trace/journal.hpp"
#include "trace/sites.hpp"
#include "trace/stats.hpp"
#include "trace/timeline.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    ak::trace::JournalReader r(data, size);
    ak::trace::Trace t = ak::trace::load_trace(r);
    ak::trace::Timeline tl = ak::trace::resolve(t);
    (void)ak::trace::compute_stats(t, tl);
    if (!t.stacks.empty()) {
      ak::trace::Symbolizer none(
          std::vector<ak::trace::Module>{});  // the journal's module paths are not opened
      (void)ak::trace::top_sites(t, tl, none, {ak::trace::SiteKey::kSite, 4});
    }
  } catch (const ak::trace::JournalError&) {
  }
  return 0;
}
