// Call-site table (see sites.hpp). One pass over the resolved timeline groups every allocation by
// its stack's key; symbols are looked up once per distinct return address.
#include "trace/sites.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <stdexcept>
#include <unordered_map>

#include "trace/format.hpp"
#include "trace/json.hpp"

namespace ak::trace {

namespace {

struct Acc {
  SiteRow row;
  std::vector<uint64_t> lifetimes;
  std::unordered_map<uint64_t, uint64_t> sizes;
};

uint64_t sort_value(const SiteRow& r, SiteSort s) {
  switch (s) {
    case SiteSort::kCalls:
      return r.calls;
    case SiteSort::kBytes:
      return r.bytes;
    case SiteSort::kPeak:
      return r.peak_bytes;
    case SiteSort::kTemporary:
      return r.temporary;
    case SiteSort::kLeaked:
      return r.leaked_bytes;
    case SiteSort::kLifetime:
      return r.median_lifetime_ns;
  }
  return 0;
}

// The group name and frame labels of stack `id` under `opt`.
std::pair<std::string, std::vector<std::string>> key_of(const Trace& trace, uint32_t id,
                                                        Symbolizer& sym, const SiteOptions& opt) {
  const auto frames = trace.stacks.frames(id);
  if (frames.empty()) return {"[no stack recorded]", {}};
  const SourceFrame& inner = sym.frames(frames[0]).front();
  if (opt.by == SiteKey::kModule) return {inner.module.empty() ? "?" : inner.module, {}};
  if (opt.by == SiteKey::kFunction)
    return {inner.function.empty() ? inner.label() : inner.function, {}};
  // Inlined library code (templates from system headers: std::vector's allocate, say) is not the
  // program's site: leading frames from /usr/include are passed over, unless nothing else is left.
  std::vector<const SourceFrame*> all;
  for (uint64_t ret : frames)
    for (const SourceFrame& f : sym.frames(ret)) all.push_back(&f);
  size_t first = 0;
  while (first + 1 < all.size() && all[first]->file.rfind("/usr/include/", 0) == 0) ++first;
  std::vector<std::string> labels;
  std::string name;
  for (size_t i = first; i < all.size() && labels.size() < opt.depth; ++i) {
    labels.push_back(all[i]->label());
    name += (name.empty() ? "" : " <- ") + labels.back();
  }
  return {name, labels};
}

}  // namespace

SiteGroups group_sites(const Trace& trace, const Timeline& tl, Symbolizer& sym,
                       const SiteOptions& opt) {
  if (trace.stacks.empty())
    throw std::runtime_error(
        "the journal has no call stacks: record it with `allockit record --stack N` (N > 0)");
  SiteGroups g;
  g.slot_group.assign(tl.slots, 0);
  std::vector<uint32_t> group_of_stack(trace.stacks.ids() + 1, UINT32_MAX);  // memo
  std::map<std::string, uint32_t> by_name;
  for (size_t ti = 0; ti < trace.threads.size(); ++ti) {
    const ThreadEvents& te = trace.threads[ti];
    for (size_t i = 0; i < te.events.size(); ++i) {
      const uint32_t slot = tl.per_thread[ti][i].slot;
      if (slot == kNoSlot) continue;
      const uint32_t id = te.stacks.empty() ? 0 : te.stacks[i];
      const uint32_t memo = id < group_of_stack.size() ? id : 0;
      if (trace.stacks.frames(memo).empty()) ++g.without_stack;
      if (group_of_stack[memo] == UINT32_MAX) {
        auto [name, frames] = key_of(trace, memo, sym, opt);
        auto [it, fresh] = by_name.try_emplace(name, static_cast<uint32_t>(g.names.size()));
        if (fresh) g.names.push_back(name), g.frames.push_back(std::move(frames));
        group_of_stack[memo] = it->second;
      }
      g.slot_group[slot] = group_of_stack[memo];
    }
  }
  return g;
}

SiteTable top_sites(const Trace& trace, const Timeline& tl, Symbolizer& sym,
                    const SiteOptions& opt) {
  return top_sites(trace, tl, group_sites(trace, tl, sym, opt), sym, opt.sort);
}

SiteTable top_sites(const Trace& trace, const Timeline& tl, const SiteGroups& sg,
                    const Symbolizer& sym, SiteSort sort) {
  SiteTable t;
  t.without_stack = sg.without_stack;
  std::vector<Acc> groups(sg.names.size());
  for (size_t k = 0; k < groups.size(); ++k) {
    groups[k].row.name = sg.names[k];
    groups[k].row.frames = sg.frames[k];
    groups[k].row.group = static_cast<uint32_t>(k);
  }
  for (size_t ti = 0; ti < trace.threads.size(); ++ti) {
    const auto& res = tl.per_thread[ti];
    uint32_t last_slot = kNoSlot;  // this thread's latest allocation, while no other followed it
    for (size_t i = 0; i < res.size(); ++i) {
      const Resolved& r = res[i];
      if (r.old_slot != kNoSlot && r.old_slot == last_slot)
        ++groups[sg.slot_group[last_slot]].row.temporary;
      if (r.slot == kNoSlot) continue;
      Acc& a = groups[sg.slot_group[r.slot]];
      const uint64_t bytes = tl.slot_bytes[r.slot];
      ++a.row.calls;
      a.row.bytes += bytes;
      ++a.sizes[bytes];
      const uint64_t died = tl.slot_died_ns[r.slot];
      if (died == UINT64_MAX) {
        ++a.row.leaked_blocks;
        a.row.leaked_bytes += bytes;
      } else {
        a.lifetimes.push_back(died - tl.slot_born_ns[r.slot]);
      }
      if (live_at_peak(tl, r.slot)) {
        ++a.row.peak_blocks;
        a.row.peak_bytes += bytes;
      }
      last_slot = r.slot;
    }
  }
  for (Acc& a : groups) {
    if (!a.lifetimes.empty()) {
      auto mid = a.lifetimes.begin() + static_cast<long>(a.lifetimes.size() / 2);
      std::nth_element(a.lifetimes.begin(), mid, a.lifetimes.end());
      a.row.median_lifetime_ns = *mid;
    }
    std::vector<std::pair<uint64_t, uint64_t>> sizes(a.sizes.begin(), a.sizes.end());
    std::sort(sizes.begin(), sizes.end(), [](const auto& x, const auto& y) {
      return x.second != y.second ? x.second > y.second : x.first < y.first;
    });
    if (sizes.size() > 3) sizes.resize(3);
    a.row.common_sizes = std::move(sizes);
    t.calls += a.row.calls;
    t.bytes += a.row.bytes;
    t.peak_bytes += a.row.peak_bytes;
    t.rows.push_back(std::move(a.row));
  }
  std::stable_sort(t.rows.begin(), t.rows.end(), [&](const SiteRow& x, const SiteRow& y) {
    const uint64_t a = sort_value(x, sort), b = sort_value(y, sort);
    return a != b ? a > b : x.calls > y.calls;
  });
  t.peak_at_s = tl.peak_ns > tl.first_ns ? static_cast<double>(tl.peak_ns - tl.first_ns) / 1e9 : 0;
  t.notes = sym.notes();
  return t;
}

std::string sites_text(const SiteTable& t, size_t rows, const SiteOptions& opt) {
  std::string out;
  char buf[512];
  std::snprintf(
      buf, sizeof buf, "%llu allocations, %s; peak %s live at %.3f s; %zu %s%s\n\n",
      static_cast<unsigned long long>(t.calls), human_bytes(t.bytes).c_str(),
      human_bytes(t.peak_bytes).c_str(), t.peak_at_s, t.rows.size(),
      opt.by == SiteKey::kModule     ? "modules"
      : opt.by == SiteKey::kFunction ? "functions"
                                     : "call sites",
      t.without_stack
          ? (", " + std::to_string(t.without_stack) + " allocations without a stack").c_str()
          : "");
  out += buf;
  std::snprintf(buf, sizeof buf, "%10s %11s %11s %6s %10s %10s %10s  %-22s %s\n", "calls", "bytes",
                "at peak", "peak%", "temporary", "leaked", "lifetime", "common sizes",
                opt.by == SiteKey::kModule     ? "module"
                : opt.by == SiteKey::kFunction ? "function"
                                               : "site");
  out += buf;
  for (size_t i = 0; i < t.rows.size() && i < rows; ++i) {
    const SiteRow& r = t.rows[i];
    std::string sizes;
    for (const auto& [size, n] : r.common_sizes)
      sizes += (sizes.empty() ? "" : ",") + std::to_string(size) + "x" + std::to_string(n);
    const double share =
        t.peak_bytes ? 100.0 * static_cast<double>(r.peak_bytes) / static_cast<double>(t.peak_bytes)
                     : 0;
    std::snprintf(buf, sizeof buf, "%10llu %11s %11s %5.1f%% %10llu %10s %10s  %-22s ",
                  static_cast<unsigned long long>(r.calls), human_bytes(r.bytes).c_str(),
                  human_bytes(r.peak_bytes).c_str(), share,
                  static_cast<unsigned long long>(r.temporary), human_bytes(r.leaked_bytes).c_str(),
                  r.median_lifetime_ns || r.leaked_blocks < r.calls
                      ? human_time(r.median_lifetime_ns).c_str()
                      : "never",
                  sizes.c_str());
    out += buf;
    if (r.frames.size() > 1) {
      out += r.frames[0] + "\n";
      for (size_t f = 1; f < r.frames.size(); ++f)
        out += std::string(104, ' ') + "<- " + r.frames[f] + "\n";
    } else {
      out += r.name + "\n";
    }
  }
  if (t.rows.size() > rows)
    out += "... " + std::to_string(t.rows.size() - rows) + " more (-n to show them)\n";
  return out;
}

std::string stack_tree_json(const Trace& trace, const Timeline& tl, Symbolizer& sym) {
  std::vector<uint64_t> calls(trace.stacks.ids() + 1, 0), peak(trace.stacks.ids() + 1, 0);
  for (size_t ti = 0; ti < trace.threads.size(); ++ti) {
    const ThreadEvents& te = trace.threads[ti];
    for (size_t i = 0; i < te.events.size() && !te.stacks.empty(); ++i) {
      const uint32_t slot = tl.per_thread[ti][i].slot;
      if (slot == kNoSlot) continue;
      const uint32_t id = te.stacks[i] < calls.size() ? te.stacks[i] : 0;
      ++calls[id];
      if (live_at_peak(tl, slot)) peak[id] += tl.slot_bytes[slot];
    }
  }
  std::map<std::vector<std::string>, std::pair<uint64_t, uint64_t>> paths;  // merged by labels
  for (uint32_t id = 0; id < calls.size(); ++id) {
    if (!calls[id]) continue;
    std::vector<std::string> path;
    const auto frames = trace.stacks.frames(id);
    for (auto it = frames.rbegin(); it != frames.rend(); ++it) {
      const auto& fs = sym.frames(*it);
      for (auto f = fs.rbegin(); f != fs.rend(); ++f) path.push_back(f->label());
    }
    if (path.empty()) path.push_back("[no stack recorded]");
    auto& v = paths[path];
    v.first += calls[id];
    v.second += peak[id];
  }
  std::string out = "{\"stacks\": [";
  bool first = true;
  for (const auto& [path, v] : paths) {
    out += first ? "\n  {\"frames\": [" : ",\n  {\"frames\": [";
    first = false;
    for (size_t i = 0; i < path.size(); ++i) out += (i ? ", " : "") + json_str(path[i]);
    out += "], \"calls\": " + std::to_string(v.first) +
           ", \"peak_bytes\": " + std::to_string(v.second) + "}";
  }
  return out + "\n]}\n";
}

std::string sites_json(const SiteTable& t, size_t rows) {
  std::string out = "{\"calls\": " + std::to_string(t.calls) +
                    ", \"bytes\": " + std::to_string(t.bytes) +
                    ", \"peak_bytes\": " + std::to_string(t.peak_bytes) +
                    ", \"peak_at_s\": " + json_num(t.peak_at_s) +
                    ", \"without_stack\": " + std::to_string(t.without_stack) + ", \"sites\": [";
  for (size_t i = 0; i < t.rows.size() && i < rows; ++i) {
    const SiteRow& r = t.rows[i];
    out += i ? ",\n  " : "\n  ";
    out += "{\"name\": " + json_str(r.name) + ", \"frames\": [";
    for (size_t f = 0; f < r.frames.size(); ++f) out += (f ? ", " : "") + json_str(r.frames[f]);
    out += "], \"calls\": " + std::to_string(r.calls) + ", \"bytes\": " + std::to_string(r.bytes) +
           ", \"peak_bytes\": " + std::to_string(r.peak_bytes) +
           ", \"peak_blocks\": " + std::to_string(r.peak_blocks) +
           ", \"temporary\": " + std::to_string(r.temporary) +
           ", \"leaked_blocks\": " + std::to_string(r.leaked_blocks) +
           ", \"leaked_bytes\": " + std::to_string(r.leaked_bytes) +
           ", \"median_lifetime_ns\": " + std::to_string(r.median_lifetime_ns) +
           ", \"common_sizes\": [";
    for (size_t s = 0; s < r.common_sizes.size(); ++s)
      out += (s ? ", " : "") + std::string("[") + std::to_string(r.common_sizes[s].first) + ", " +
             std::to_string(r.common_sizes[s].second) + "]";
    out += "]}";
  }
  out += "\n], \"symbols\": [";
  for (size_t i = 0; i < t.notes.size(); ++i) out += (i ? ", " : "") + json_str(t.notes[i]);
  return out + "]}\n";
}

}  // namespace ak::trace
