// Site advice (see advice.hpp): one pass over the timeline for each slot's call and end, then
// each hot site's blocks are judged thread by thread.
#include "replay/advice.hpp"

#include <algorithm>
#include <cstdio>

#include "trace/format.hpp"

namespace ak::replay {

using trace::kNoSlot;
using trace::Op;

const char* pattern_name(Pattern p) {
  switch (p) {
    case Pattern::kGroups:
      return "groups";
    case Pattern::kTemporaries:
      return "temporaries";
    case Pattern::kFixedSize:
      return "fixed-size churn";
    case Pattern::kGrowth:
      return "realloc growth";
    case Pattern::kNone:
      break;
  }
  return "none";
}

namespace {

enum End : uint8_t { kLive = 0, kFreed = 1, kByRealloc = 2, kByRepair = 3 };

struct SlotFacts {
  std::vector<uint8_t> op;      // the call that allocated it (trace::Op)
  std::vector<uint8_t> end;     // End
  std::vector<uint32_t> freer;  // thread index that released it
};

SlotFacts slot_facts(const trace::Trace& trace, const trace::Timeline& tl) {
  SlotFacts f;
  f.op.assign(tl.slots, 0);
  f.end.assign(tl.slots, kLive);
  f.freer.assign(tl.slots, UINT32_MAX);
  for (uint32_t ti = 0; ti < trace.threads.size(); ++ti) {
    const auto& evs = trace.threads[ti].events;
    for (size_t i = 0; i < evs.size(); ++i) {
      const trace::Resolved& r = tl.per_thread[ti][i];
      if (r.repair_slot != kNoSlot) f.end[r.repair_slot] = kByRepair, f.freer[r.repair_slot] = ti;
      if (r.old_slot != kNoSlot) {
        f.end[r.old_slot] = trace::is_realloc(evs[i].op) ? kByRealloc : kFreed;
        f.freer[r.old_slot] = ti;
      }
      if (r.slot != kNoSlot) f.op[r.slot] = static_cast<uint8_t>(evs[i].op);
    }
  }
  return f;
}

// Sizes in one class: within 16 bytes up to 512, else within an eighth.
bool one_class(uint64_t lo, uint64_t hi) {
  return hi <= 512 ? (hi + 15) / 16 == (lo + 15) / 16 || hi - lo < 16 : hi - lo <= hi / 8;
}

// Groups of one site's blocks on one thread (freed slots in allocation order; a block never freed
// cannot be in an arena that is ever reset, so leaked ones are left to malloc): each group's
// lifetimes end before the next group's first allocation; `ends` holds each group's last-freed
// slot, where an arena would be reset. `held` is what arenas would hold: per group the bytes
// allocated, against the most the group had live at once (`live`); a long-lived block that keeps
// a group open makes them differ.
struct GroupScan {
  uint64_t groups = 0, blocks = 0;
  uint64_t held = 0, live = 0;
  uint64_t worst_held = 0, worst_live = 0;  // the group holding most beyond its live bytes
  std::vector<uint32_t> ends;

  void merge(const GroupScan& o) {
    groups += o.groups, blocks += o.blocks, held += o.held, live += o.live;
    if (o.worst_held - o.worst_live > worst_held - worst_live)
      worst_held = o.worst_held, worst_live = o.worst_live;
    ends.insert(ends.end(), o.ends.begin(), o.ends.end());
  }
};

uint64_t peak_live(const std::vector<uint32_t>& group, const trace::Timeline& tl) {
  std::vector<std::pair<uint64_t, int64_t>> steps;  // (time, +bytes / -bytes), frees first
  for (uint32_t s : group) {
    steps.emplace_back(tl.slot_born_ns[s], static_cast<int64_t>(tl.slot_bytes[s]));
    steps.emplace_back(tl.slot_died_ns[s], -static_cast<int64_t>(tl.slot_bytes[s]));
  }
  std::sort(steps.begin(), steps.end());
  int64_t live = 0, peak = 0;
  for (const auto& [t, d] : steps) peak = std::max(peak, live += d);
  return static_cast<uint64_t>(peak);
}

GroupScan scan_groups(const std::vector<uint32_t>& slots, const trace::Timeline& tl) {
  GroupScan g;
  std::vector<uint32_t> group;
  uint64_t end = 0;
  uint32_t last = kNoSlot;
  auto close = [&] {
    if (group.empty()) return;
    g.ends.push_back(last);
    uint64_t bytes = 0;
    for (uint32_t s : group) bytes += tl.slot_bytes[s];
    const uint64_t live = peak_live(group, tl);
    g.held += bytes;
    g.live += live;
    if (bytes - live > g.worst_held - g.worst_live) g.worst_held = bytes, g.worst_live = live;
    group.clear();
  };
  for (uint32_t s : slots) {
    if (tl.slot_died_ns[s] == UINT64_MAX) continue;
    if (group.empty() || tl.slot_born_ns[s] > end) {
      close();
      ++g.groups;
      end = 0;
    }
    group.push_back(s);
    ++g.blocks;
    if (tl.slot_died_ns[s] >= end) end = tl.slot_died_ns[s], last = s;
  }
  close();
  return g;
}

// Whether arenas reset per group hold little more than the site's live bytes: in all, at most
// twice; in any one group, at most four times plus a 64 KiB chunk.
bool arena_fits(const GroupScan& g) {
  return g.held <= 2 * g.live && g.worst_held <= 4 * g.worst_live + (64u << 10);
}

}  // namespace

Advice advise(const trace::Trace& trace, const trace::Timeline& tl, trace::Symbolizer& sym,
              const AdviceOptions& opt) {
  const trace::SiteOptions by_site{trace::SiteKey::kSite, 1, trace::SiteSort::kCalls};
  const trace::SiteGroups sg = trace::group_sites(trace, tl, sym, by_site);
  const trace::SiteTable table = trace::top_sites(trace, tl, sg, sym, by_site.sort);
  const SlotFacts facts = slot_facts(trace, tl);
  Advice out;
  out.allocations = tl.slots;
  out.routing.slot_route.assign(tl.slots, 0);
  out.routing.reset_after_free.assign(tl.slots, 0);
  std::vector<std::vector<uint32_t>> slots_of(sg.names.size());
  for (uint32_t s = 0; s < tl.slots; ++s) slots_of[sg.slot_group[s]].push_back(s);

  for (const trace::SiteRow& row : table.rows) {
    if (out.sites.size() == opt.max_sites) break;
    if (row.calls < opt.min_calls ||
        static_cast<double>(row.calls) < opt.min_share * static_cast<double>(tl.slots))
      continue;
    const std::vector<uint32_t>& slots = slots_of[row.group];
    SiteAdvice a;
    a.site = row.name;
    a.calls = row.calls;
    a.bytes = row.bytes;
    a.temporary_share = static_cast<double>(row.temporary) / static_cast<double>(row.calls);
    a.min_size = UINT64_MAX;
    uint64_t reallocs = 0, freed = 0;
    std::string unroutable, arena_note;
    for (uint32_t s : slots) {
      a.min_size = std::min(a.min_size, tl.slot_bytes[s]);
      a.max_size = std::max(a.max_size, tl.slot_bytes[s]);
      const auto op = static_cast<Op>(facts.op[s]);
      if (trace::is_realloc(op)) ++reallocs;
      if (facts.end[s] != kLive) ++freed;
      if (op != Op::kMalloc && op != Op::kCalloc && unroutable.empty())
        unroutable = std::string("some blocks come from ") + trace::op_name(op);
      if (facts.end[s] == kByRealloc && unroutable.empty())
        unroutable = "some blocks are released by realloc";
      if (facts.end[s] == kByRepair && unroutable.empty())
        unroutable = "some frees were lost from the journal";
      if (facts.end[s] != kLive && facts.freer[s] != tl.slot_thread[s] && unroutable.empty())
        unroutable = "some blocks are freed by another thread";
    }
    // Groups, thread by thread.
    std::vector<std::vector<uint32_t>> per_thread(trace.threads.size());
    for (uint32_t s : slots) per_thread[tl.slot_thread[s]].push_back(s);
    GroupScan all;
    for (const auto& ts : per_thread) all.merge(scan_groups(ts, tl));
    a.groups = all.groups;
    if (unroutable.empty() && !arena_fits(all) && (a.temporary_share >= 0.9 || a.groups >= 2))
      arena_note = "an arena reset per group would hold " + trace::human_bytes(all.held) +
                   " against " + trace::human_bytes(all.live) +
                   " live (a long-lived block keeps its group open)";
    a.mean_group = a.groups ? static_cast<double>(all.blocks) / static_cast<double>(a.groups) : 0;
    char why[256];
    if (reallocs * 2 >= slots.size()) {
      a.pattern = Pattern::kGrowth;
      std::snprintf(why, sizeof why, "%llu of %llu blocks come from realloc, up to %s",
                    static_cast<unsigned long long>(reallocs),
                    static_cast<unsigned long long>(a.calls),
                    trace::human_bytes(a.max_size).c_str());
      a.change = "reserve " + trace::human_bytes(a.max_size) +
                 " up front (std::vector::reserve, or one allocation of the final size) instead "
                 "of growing by realloc";
      a.not_routed = "a reserve changes the sizes asked for; not replayed";
    } else if (a.groups >= 2 && a.mean_group >= 4 && unroutable.empty() && arena_note.empty()) {
      a.pattern = Pattern::kGroups;
      std::snprintf(why, sizeof why,
                    "%llu groups of %.1f blocks on average; every block of a group is freed before "
                    "the next group starts",
                    static_cast<unsigned long long>(a.groups), a.mean_group);
      a.change =
          "allocate them from an ak::Arena (allockit/arena.hpp) and reset() it where a "
          "group's last block is freed; drop the frees";
    } else if (a.temporary_share >= 0.9 && unroutable.empty() && arena_note.empty()) {
      a.pattern = Pattern::kTemporaries;
      std::snprintf(why, sizeof why,
                    "%.0f%% of the blocks are freed before their thread allocates again",
                    100 * a.temporary_share);
      a.change = "use a stack buffer (" + trace::human_bytes(a.max_size) +
                 " at most) or an ak::Arena as scratch, reset after use";
    } else if (one_class(a.min_size, a.max_size) && freed * 2 >= slots.size()) {
      a.pattern = Pattern::kFixedSize;
      std::snprintf(
          why, sizeof why, "every request is %llu to %llu bytes; %llu of %llu freed",
          static_cast<unsigned long long>(a.min_size), static_cast<unsigned long long>(a.max_size),
          static_cast<unsigned long long>(freed), static_cast<unsigned long long>(a.calls));
      a.change =
          "take them from an ak::ObjectPool<T> (allockit/object_pool.hpp), an "
          "ak::BlockPool of " +
          std::to_string((a.max_size + 15) & ~uint64_t{15}) +
          " bytes (block_pool.hpp), or ak::pool_allocator in a container (pool.hpp)";
      if (!unroutable.empty())
        a.not_routed = unroutable +
                       ": the replay's per-thread pools cannot take them (ak's "
                       "shared pools, pool.hpp, can)";
    } else {
      a.pattern = Pattern::kNone;
      std::snprintf(why, sizeof why,
                    "sizes %llu to %llu bytes, %.0f%% temporary, %.1f blocks per group%s%s",
                    static_cast<unsigned long long>(a.min_size),
                    static_cast<unsigned long long>(a.max_size), 100 * a.temporary_share,
                    a.mean_group, unroutable.empty() && arena_note.empty() ? "" : "; ",
                    unroutable.empty() ? arena_note.c_str() : unroutable.c_str());
    }
    a.why = why;
    if (a.pattern == Pattern::kFixedSize && !arena_note.empty() && a.not_routed.empty())
      a.why += "; " + arena_note;
    const bool arena = a.pattern == Pattern::kGroups || a.pattern == Pattern::kTemporaries;
    const bool pool = a.pattern == Pattern::kFixedSize && unroutable.empty();
    if ((arena || pool) && out.routing.routes.size() < kMaxRoutes) {
      out.routing.routes.push_back(
          {arena ? kRouteArena : kRoutePool, 16, pool ? (a.max_size + 15) & ~uint64_t{15} : 0});
      a.route = static_cast<uint16_t>(out.routing.routes.size());
      for (uint32_t s : slots)  // an arena takes the blocks that are freed (scan_groups)
        if (pool || tl.slot_died_ns[s] != UINT64_MAX) out.routing.slot_route[s] = a.route;
      if (arena)
        for (uint32_t s : all.ends) out.routing.reset_after_free[s] = 1;
    }
    out.sites.push_back(std::move(a));
  }
  return out;
}

Routing only_route(const Routing& all, uint16_t route) {
  Routing r = all;
  for (auto& s : r.slot_route)
    if (s != route) s = 0;
  return r;
}

}  // namespace ak::replay
