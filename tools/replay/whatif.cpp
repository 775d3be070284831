// What-if replays (see whatif.hpp). Plans: plan.base (as recorded), plan.all (every advised site
// routed), plan.siteN (site N alone, for its own peak RSS). The runs take turns, so a noisy host
// hits both sides alike; latencies are pooled over the runs.
#include "replay/whatif.hpp"

#include <cstdio>
#include <stdexcept>

#include "trace/format.hpp"
#include "trace/json.hpp"
#include "trace/paths.hpp"

namespace ak::replay {

using trace::json_num;
using trace::json_str;

namespace {

constexpr size_t kMaxSiteRuns = 8;  // sites measured alone (peak RSS each)

// One replay of `plan`, its latencies kept; throws when it fails.
ReplayResult run_one(const std::string& plan, const AllocatorSpec& alloc, const ReplayOptions& opt,
                     uint64_t peak_live, const std::string& dir) {
  ReplayResult r = run_replay(plan, alloc, opt, peak_live, dir);
  if (!r.ok) throw std::runtime_error(dir + ": " + r.error);
  return r;
}

std::string pct_text(const KindSummary& k) {
  char b[96];
  std::snprintf(b, sizeof b, "%.0f / %.0f / %.0f ns", k.pct_ns[kP50], k.pct_ns[kP99],
                k.pct_ns[kP999]);
  return b;
}

std::string summary_json(const KindSummary& k) {
  return "{\"count\": " + std::to_string(k.count) + ", \"mean_ns\": " + json_num(k.mean_ns) +
         ", \"p50\": " + json_num(k.pct_ns[kP50]) + ", \"p99\": " + json_num(k.pct_ns[kP99]) +
         ", \"p99.9\": " + json_num(k.pct_ns[kP999]) + "}";
}

}  // namespace

WhatIf measure(const trace::Trace& trace, const trace::Timeline& tl, const Advice& advice,
               const AllocatorSpec& alloc, const ReplayOptions& opt, const std::string& dir) {
  WhatIf w;
  w.allocator = alloc.name;
  const size_t nroutes = advice.routing.routes.size();
  w.routes.resize(nroutes);
  std::vector<uint16_t> op_routes;
  write_plan(trace, tl, dir + "/plan.base", &advice.routing, false, &op_routes);
  write_plan(trace, tl, dir + "/plan.all", &advice.routing, true);
  const bool alone = nroutes > 1 && nroutes <= kMaxSiteRuns;
  if (alone)
    for (uint16_t r = 1; r <= nroutes; ++r) {
      const Routing one = only_route(advice.routing, r);
      write_plan(trace, tl, dir + "/plan.site" + std::to_string(r), &one, true);
    }
  ReplayOptions one = opt;  // one run at a time, taking turns; latencies kept, counts checked
  one.repeat = 1;
  one.keep_latencies = true;
  one.env.push_back("ALLOCKIT_REPLAY_ROUTES=" + trace::tool_paths().prefixed);
  one.env.push_back("ALLOCKIT_REPLAY_CHECK=1");
  std::vector<uint32_t> before, after;
  std::vector<std::vector<uint32_t>> r_before(nroutes), r_after(nroutes);
  ReplayResult b, a;
  for (int rep = 0; rep < std::max(1, opt.repeat); ++rep) {
    b = run_one(dir + "/plan.base", alloc, one, tl.peak_live_bytes, dir + "/base");
    a = run_one(dir + "/plan.all", alloc, one, tl.peak_live_bytes, dir + "/all");
    if (b.latency_ns.size() != op_routes.size() || a.latency_ns.size() != op_routes.size())
      throw std::runtime_error("a replay wrote samples of another plan");
    for (size_t i = 0; i < op_routes.size(); ++i) {
      before.push_back(b.latency_ns[i]);
      after.push_back(a.latency_ns[i]);
      if (op_routes[i]) {
        r_before[op_routes[i] - 1].push_back(b.latency_ns[i]);
        r_after[op_routes[i] - 1].push_back(a.latency_ns[i]);
      }
    }
    w.rss_before = std::max(w.rss_before, b.peak_rss);
    w.rss_after = std::max(w.rss_after, a.peak_rss);
    for (uint16_t r = 1; alone && r <= nroutes; ++r) {
      const ReplayResult s = run_one(dir + "/plan.site" + std::to_string(r), alloc, one,
                                     tl.peak_live_bytes, dir + "/site" + std::to_string(r));
      w.routes[r - 1].rss_after = std::max(w.routes[r - 1].rss_after, s.peak_rss);
    }
    ++w.runs;
  }
  std::remove((dir + "/plan.base").c_str());  // the plans are as large as the journal's ops
  std::remove((dir + "/plan.all").c_str());
  for (uint16_t r = 1; alone && r <= nroutes; ++r)
    std::remove((dir + "/plan.site" + std::to_string(r)).c_str());
  w.before = summarise("all", before);
  w.after = summarise("all", after);
  for (size_t r = 0; r < nroutes; ++r) {
    w.routes[r].before = summarise("site", r_before[r]);
    w.routes[r].after = summarise("site", r_after[r]);
    w.routes[r].rss_before = w.rss_before;
    if (!alone) w.routes[r].rss_after = w.rss_after;
  }
  // Routing changes no block's lifetime, only who serves it: the journal's allocations, frees
  // and so its peak of live bytes hold if the routed replay made every allocation and free the
  // plain one made, and the worker stopped at no arena reset of a live block (it would have).
  uint64_t expect_allocs = 0, expect_frees = 0;
  for (uint32_t s = 0; s < tl.slots; ++s) {
    ++expect_allocs;
    if (tl.slot_died_ns[s] != UINT64_MAX) ++expect_frees;
  }
  const uint64_t allocs = b.checked_allocs, frees = b.checked_frees;
  const uint64_t r_allocs = a.checked_allocs, r_frees = a.checked_frees;
  w.verified = allocs == r_allocs && frees == r_frees && r_allocs == expect_allocs &&
               r_frees == expect_frees;
  w.check = "the journal's " + std::to_string(expect_allocs) + " allocations and " +
            std::to_string(expect_frees) + " frees; replayed " + std::to_string(allocs) + " and " +
            std::to_string(frees) + ", routed " + std::to_string(r_allocs) + " and " +
            std::to_string(r_frees) + "; no arena reset freed a live block; peak live bytes " +
            std::to_string(tl.peak_live_bytes) + " in both (no lifetime changed)";
  return w;
}

std::string advice_text(const Advice& a, const WhatIf* w) {
  std::string o;
  char buf[512];
  int n = 0;
  for (const SiteAdvice& s : a.sites) {
    std::snprintf(buf, sizeof buf, "%d. %s\n   %llu calls, %s; %s: %s\n", ++n, s.site.c_str(),
                  static_cast<unsigned long long>(s.calls), trace::mib(s.bytes).c_str(),
                  pattern_name(s.pattern), s.why.c_str());
    o += buf;
    if (!s.change.empty()) o += "   change: " + s.change + "\n";
    if (!s.not_routed.empty()) o += "   not replayed: " + s.not_routed + "\n";
    if (w && s.route) {
      const RouteFigures& f = w->routes[s.route - 1];
      o += "   measured (" + w->allocator +
           ", p50 / p99 / p99.9 of its calls): " + pct_text(f.before) + " -> " + pct_text(f.after) +
           "; peak RSS " + trace::mib(f.rss_before) + " -> " + trace::mib(f.rss_after) + "\n";
    }
    o += "\n";
  }
  if (a.sites.empty()) o += "no site has 1% of the allocations and 100 calls: nothing to advise\n";
  if (w) {
    o += "All advice taken (" + std::to_string(w->runs) + " runs each, " + w->allocator +
         "): every call " + pct_text(w->before) + " -> " + pct_text(w->after) + "; peak RSS " +
         trace::mib(w->rss_before) + " -> " + trace::mib(w->rss_after) + "\n";
    o += std::string("Semantics ") + (w->verified ? "kept" : "NOT kept") + ": " + w->check + "\n";
  }
  return o;
}

std::string advice_json(const Advice& a, const WhatIf* w) {
  std::string o = "{\"allocations\": " + std::to_string(a.allocations) + ", \"sites\": [";
  for (size_t i = 0; i < a.sites.size(); ++i) {
    const SiteAdvice& s = a.sites[i];
    o += std::string(i ? ",\n  " : "\n  ") + "{\"site\": " + json_str(s.site) +
         ", \"calls\": " + std::to_string(s.calls) + ", \"bytes\": " + std::to_string(s.bytes) +
         ", \"pattern\": " + json_str(pattern_name(s.pattern)) + ", \"why\": " + json_str(s.why) +
         ", \"change\": " + json_str(s.change) + ", \"not_routed\": " + json_str(s.not_routed) +
         ", \"min_size\": " + std::to_string(s.min_size) +
         ", \"max_size\": " + std::to_string(s.max_size) +
         ", \"groups\": " + std::to_string(s.groups) +
         ", \"mean_group\": " + json_num(s.mean_group) +
         ", \"temporary_share\": " + json_num(s.temporary_share) +
         ", \"route\": " + std::to_string(s.route);
    if (w && s.route) {
      const RouteFigures& f = w->routes[s.route - 1];
      o += ", \"before\": " + summary_json(f.before) + ", \"after\": " + summary_json(f.after) +
           ", \"rss_before\": " + std::to_string(f.rss_before) +
           ", \"rss_after\": " + std::to_string(f.rss_after);
    }
    o += "}";
  }
  o += "\n]";
  if (w)
    o += ", \"measured\": {\"allocator\": " + json_str(w->allocator) +
         ", \"runs\": " + std::to_string(w->runs) + ", \"before\": " + summary_json(w->before) +
         ", \"after\": " + summary_json(w->after) +
         ", \"rss_before\": " + std::to_string(w->rss_before) +
         ", \"rss_after\": " + std::to_string(w->rss_after) +
         ", \"verified\": " + (w->verified ? "true" : "false") +
         ", \"check\": " + json_str(w->check) + "}";
  return o + "}\n";
}

}  // namespace ak::replay
