// `allockit advise`: what each hot call site's allocations do, which allockit type fits it, and
// the routing that replays the journal as if the advice were taken (build_plan.hpp).
//
// Patterns, judged per site from the resolved timeline (a site is the first source frame of its
// stacks, as `allockit top` shows it):
//  - groups: each thread's blocks of the site fall into groups, every lifetime of a group ending
//    before the next group's first allocation; with four or more blocks per group on average,
//    an ak::Arena reset when the group's last block is freed, if the arenas would hold at most
//    twice the site's live bytes (a long-lived block that keeps its group open makes an arena
//    hold everything allocated meanwhile); blocks never freed stay with malloc;
//  - temporaries: nine in ten blocks freed before their thread's next allocation: a stack buffer
//    or an ak::Arena as scratch, reset at each free (the same route, groups of one);
//  - fixed-size churn: every request in one size class (within 16 bytes up to 512, else within
//    1/8) and most blocks freed: an ak::ObjectPool / ak::BlockPool of that size;
//  - growth: blocks grown by realloc: a reserve hint of the size they reached (not replayed: it
//    changes the sizes asked for).
// Never routed: a site with a block freed by another thread, released by realloc, allocated by
// an aligned call, or freed by a repair (a damaged journal); a pool for sizes beyond one class;
// an arena whose blocks would outlive their group (the groups are cut so none can).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "replay/build_plan.hpp"
#include "trace/sites.hpp"

namespace ak::replay {

enum class Pattern { kNone, kGroups, kTemporaries, kFixedSize, kGrowth };
const char* pattern_name(Pattern p);

struct SiteAdvice {
  std::string site;  // "function (file:line)"
  uint64_t calls = 0, bytes = 0;
  Pattern pattern = Pattern::kNone;
  std::string why;         // the figures the pattern was judged on
  std::string change;      // the code change, naming the allockit type
  std::string not_routed;  // why a fitting pattern is not replayed, when it is not
  uint16_t route = 0;      // route id in the what-if replay, 0: not replayed
  uint64_t min_size = 0, max_size = 0;
  uint64_t groups = 0;    // kGroups/kTemporaries: groups found
  double mean_group = 0;  // blocks per group
  double temporary_share = 0;
};

struct AdviceOptions {
  size_t max_sites = 10;    // hot sites judged, by calls
  double min_share = 0.01;  // of all allocations
  uint64_t min_calls = 100;
};

struct Advice {
  std::vector<SiteAdvice> sites;  // hot sites, most calls first
  Routing routing;                // every advised site routed
  uint64_t allocations = 0;
};

// Judges the hot sites and builds the routing. Throws std::runtime_error without stacks.
Advice advise(const trace::Trace& trace, const trace::Timeline& tl, trace::Symbolizer& sym,
              const AdviceOptions& opt = {});

// The routing with only route `route` kept (the per-site what-if).
Routing only_route(const Routing& all, uint16_t route);

}  // namespace ak::replay
