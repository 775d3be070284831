// Text importers and exporter (see convert.hpp). Parsing is by hand with strtoull so that a
// malformed line is rejected, never misread.
#include "trace/convert.hpp"
#include "trace/text_input.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <stdexcept>
#include <tuple>

namespace ak::trace {

using text::Cursor;
using text::finish_check;
using text::import_meta;
using text::LineReader;

namespace {

// Parses a valgrind --trace-malloc line body such as `malloc(120) = 0x10000000`.
bool parse_valgrind_call(Cursor c, Event& e) {
  auto result = [&](Event& ev) {
    c.spaces();
    return c.lit("=") && c.num(ev.result, 16) && c.end();
  };
  if (c.lit("malloc(") || c.lit("_Znwm(") || c.lit("_Znam(") || c.lit("__builtin_new(") ||
      c.lit("__builtin_vec_new(")) {
    e.op = Op::kMalloc;
    return c.num(e.a, 10) && c.lit(")") && result(e);
  }
  if (c.lit("calloc(")) {
    e.op = Op::kCalloc;
    return c.num(e.a, 10) && c.lit(",") && c.num(e.b, 10) && c.lit(")") && result(e);
  }
  if (c.lit("realloc(")) {
    e.op = Op::kRealloc;
    return c.num(e.a, 16) && c.lit(",") && c.num(e.b, 10) && c.lit(")") && result(e);
  }
  if (c.lit("memalign(")) {
    e.op = Op::kMemalign;
    return c.lit("al ") && c.num(e.a, 10) && c.lit(",") && (c.spaces(), c.lit("size ")) &&
           c.num(e.b, 10) && c.lit(")") && result(e);
  }
  if (c.lit("free(") || c.lit("_ZdlPv(") || c.lit("_ZdaPv(") || c.lit("__builtin_delete(") ||
      c.lit("__builtin_vec_delete(")) {
    e.op = Op::kFree;
    return c.num(e.a, 16) && c.lit(")") && c.end();
  }
  return false;
}

}  // namespace

ImportResult import_valgrind(const std::string& in, const std::string& out) {
  LineReader lines(in);
  JournalWriter w(out, import_meta("valgrind", in, "synthetic: calls 1 us apart"));
  ImportResult r;
  std::string line;
  while (lines.next(line)) {
    ++r.lines;
    Cursor c{line.c_str()};
    uint64_t pid;
    Event e;
    if (c.lit("--") && c.num(pid, 10) && c.lit("--") && (c.spaces(), parse_valgrind_call(c, e))) {
      e.time_ns = (r.events + 1) * 1000;
      w.add(1, static_cast<uint32_t>(pid), e);
      ++r.events;
    } else if (++r.skipped == 1) {
      r.first_skipped = r.lines;
    }
  }
  finish_check(r, in);
  w.finish();
  return r;
}

ImportResult import_text(const std::string& in, const std::string& out) {
  LineReader lines(in);
  ImportResult r;
  struct Pending {
    uint32_t ordinal;
    std::vector<Event> events;
  };
  std::map<uint64_t, Pending> threads;  // by the file's TID
  std::string line;
  while (lines.next(line)) {
    ++r.lines;
    Cursor c{line.c_str()};
    Event e;
    uint64_t tid = 0;
    bool ok = false;
    if (c.lit("a ")) {
      e.op = Op::kMalloc;
      ok = c.num(e.a, 10) && c.num(e.result, 16) && c.num(tid, 10) && c.num(e.time_ns, 10) &&
           c.end();
    } else if (c.lit("f ")) {
      e.op = Op::kFree;
      ok = c.num(e.a, 16) && c.num(tid, 10) && c.num(e.time_ns, 10) && c.end();
    }
    if (!ok) {
      if (++r.skipped == 1) r.first_skipped = r.lines;
      continue;
    }
    auto [it, fresh] = threads.try_emplace(tid);
    if (fresh) it->second.ordinal = static_cast<uint32_t>(threads.size());
    it->second.events.push_back(e);
    ++r.events;
  }
  finish_check(r, in);
  JournalWriter w(out, import_meta("text", in, "recorded"));
  for (auto& [tid, p] : threads) {
    std::stable_sort(p.events.begin(), p.events.end(),
                     [](const Event& x, const Event& y) { return x.time_ns < y.time_ns; });
    for (const Event& e : p.events) w.add(p.ordinal, static_cast<uint32_t>(tid), e);
  }
  w.finish();
  return r;
}

uint64_t export_text(const Trace& trace, const std::string& out) {
  std::ofstream f(out);
  if (!f) throw std::runtime_error(out + ": cannot create (" + std::strerror(errno) + ")");
  struct Line {
    uint64_t time;
    uint32_t thread, index;
    bool alloc;
    bool operator<(const Line& o) const {
      return std::tie(time, thread, index, alloc) < std::tie(o.time, o.thread, o.index, o.alloc);
    }
  };
  std::vector<Line> order;
  for (uint32_t t = 0; t < trace.threads.size(); ++t) {
    const auto& evs = trace.threads[t].events;
    for (uint32_t i = 0; i < evs.size(); ++i) {
      const Event& e = evs[i];
      if (e.op == Op::kFree) {
        if (e.a) order.push_back({e.time_ns, t, i, false});
      } else if (is_realloc(e.op)) {
        if (e.a && (e.result || requested_bytes(e) == 0))
          order.push_back({e.time_ns - std::min<uint64_t>(e.duration_ns, e.time_ns), t, i, false});
        if (e.result) order.push_back({e.time_ns, t, i, true});
      } else if (e.result) {
        order.push_back({e.time_ns, t, i, true});
      }
    }
  }
  std::sort(order.begin(), order.end());
  char buf[128];
  for (const Line& l : order) {
    const auto& th = trace.threads[l.thread];
    const Event& e = th.events[l.index];
    unsigned tid = th.os_tid ? th.os_tid : th.thread;
    if (l.alloc)
      std::snprintf(buf, sizeof buf, "a %llu 0x%llx %u %llu\n",
                    (unsigned long long)requested_bytes(e), (unsigned long long)e.result, tid,
                    (unsigned long long)l.time);
    else
      std::snprintf(buf, sizeof buf, "f 0x%llx %u %llu\n", (unsigned long long)e.a, tid,
                    (unsigned long long)l.time);
    f << buf;
  }
  if (!f.flush()) throw std::runtime_error(out + ": write failed");
  return order.size();
}

}  // namespace ak::trace
