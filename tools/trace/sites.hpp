// `allockit top`: where a journal's allocations come from. Each allocation is attributed to its
// call site (the innermost K recorded frames), its function or its module, and each group gets
// calls, bytes, its share of the program's peak, temporaries, leaks, lifetimes and sizes.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "trace/symbols.hpp"
#include "trace/timeline.hpp"

namespace ak::trace {

enum class SiteKey { kSite, kFunction, kModule };
enum class SiteSort { kCalls, kBytes, kPeak, kTemporary, kLeaked, kLifetime };

struct SiteOptions {
  SiteKey by = SiteKey::kSite;
  uint32_t depth = 1;  // frames that make a site (kSite)
  SiteSort sort = SiteSort::kCalls;
};

struct SiteRow {
  uint32_t group = 0;               // index into the SiteGroups the table was made from
  std::string name;                 // the group: "function (file:line)" frames joined by " <- "
  std::vector<std::string> frames;  // kSite: each frame's label, innermost first
  uint64_t calls = 0, bytes = 0;
  uint64_t peak_bytes = 0, peak_blocks = 0;  // live when the whole program's live bytes peaked
  uint64_t temporary = 0;  // freed by the allocating thread before its next allocation
  uint64_t leaked_blocks = 0, leaked_bytes = 0;
  uint64_t median_lifetime_ns = 0;                          // of the blocks freed; 0 when none was
  std::vector<std::pair<uint64_t, uint64_t>> common_sizes;  // (size, calls), most common first
};

struct SiteTable {
  std::vector<SiteRow> rows;  // sorted by the chosen column, largest first
  uint64_t calls = 0, bytes = 0, peak_bytes = 0;
  double peak_at_s = 0;            // from the first call
  uint64_t without_stack = 0;      // allocations with no recorded stack
  std::vector<std::string> notes;  // where each module's symbols came from
};

// Each allocation's group under `opt`: slot_group[slot] indexes names and frames.
struct SiteGroups {
  std::vector<std::string> names;
  std::vector<std::vector<std::string>> frames;  // kSite: each frame's label, innermost first
  std::vector<uint32_t> slot_group;
  uint64_t without_stack = 0;  // allocations with no recorded stack
};

// Both throw std::runtime_error when the journal has no call stacks.
SiteGroups group_sites(const Trace& trace, const Timeline& tl, Symbolizer& symbols,
                       const SiteOptions& opt);
SiteTable top_sites(const Trace& trace, const Timeline& tl, Symbolizer& symbols,
                    const SiteOptions& opt);
// The same from groups already made (`symbols` gives the table its notes).
SiteTable top_sites(const Trace& trace, const Timeline& tl, const SiteGroups& groups,
                    const Symbolizer& symbols, SiteSort sort);
// The flame-graph data of `allockit report`: every distinct symbolised stack (outermost frame
// first, inlined frames as frames of their own) with its allocations and its bytes live at the
// peak, as JSON: {"stacks": [{"frames": [...], "calls": N, "peak_bytes": B}, ...]}.
std::string stack_tree_json(const Trace& trace, const Timeline& tl, Symbolizer& symbols);

std::string sites_text(const SiteTable& t, size_t rows, const SiteOptions& opt);
std::string sites_json(const SiteTable& t, size_t rows);

}  // namespace ak::trace
