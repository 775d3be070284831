// heaptrack's interpreted data (file format 2 and 3) to a journal (see convert.hpp):
//  - `s` strings (v3: `s LEN TEXT`, v2: `s TEXT`), numbered from 1;
//  - `i IP MODULE [FUNCTION [FILE LINE]]...` instruction pointers, numbered from 1: the module's
//    string, then heaptrack's own symbolisation, inlined frames first;
//  - `t IP PARENT` trace nodes, numbered from 1: a stack is a node and its parents;
//  - `a SIZE TRACE` allocation info n (in order); `+ n` and `- n` allocate and free one block of
//    info n; `c MS` sets the time; other lines (RSS, ...) are skipped.
// heaptrack keeps no addresses and no threads: each block gets a synthetic address, one thread
// does all, and `- n` frees the most recent live block of info n. Blocks of one info have one
// size, so the live bytes over time are exact whichever block a free is given; lifetimes of
// blocks of the same size and stack are approximate. Each info's trace becomes the allocation's
// stack (v2), its leading frames in the C and C++ runtimes dropped as the recorder drops them,
// and each frame's names go into a names block, so `top` and `advise` work on the import without
// the recorded binaries.
#include <algorithm>
#include <array>

#include "trace/text_input.hpp"

namespace ak::trace {

namespace {

using text::Cursor;

struct HeaptrackIp {
  uint64_t ip = 0, module = 0;
  std::vector<std::array<uint64_t, 3>> frames;  // string numbers: function, file; line
};

// The recorder's rule (is_runtime_object), and heaptrack's own preload library.
bool is_runtime(const std::string& module) {
  return is_runtime_object(module.c_str()) ||
         module.substr(module.rfind('/') + 1).rfind("libheaptrack", 0) == 0;
}

// The stacks and names of one file, built as allocation infos name their traces.
class HeaptrackStacks {
 public:
  std::vector<std::string> strings{""};
  std::vector<HeaptrackIp> ips{HeaptrackIp{}};
  std::vector<std::pair<uint64_t, uint64_t>> traces{{0, 0}};  // ip number, parent trace

  // The stack id of trace `t` (itself), defining it and its frames' names on first use; 0 for
  // the empty trace. Throws on a trace or ip never defined.
  uint32_t stack_of(uint64_t t, JournalWriter& w) {
    if (t == 0) return 0;
    if (t >= traces.size())
      throw std::runtime_error("trace " + std::to_string(t) + " was never defined");
    if (t < defined_.size() && defined_[t]) return static_cast<uint32_t>(t);
    // The frames, innermost first; leading runtime frames dropped unless nothing else is left.
    // Walked at most 2 * kMaxStackDepth nodes deep (a cycle or a deeper stack ends there).
    std::vector<uint64_t> chain;
    for (uint64_t n = t; n != 0 && chain.size() < 2 * kMaxStackDepth; n = traces[n].second) {
      if (n >= traces.size())
        throw std::runtime_error("trace " + std::to_string(n) + " was never defined");
      const uint64_t ip = traces[n].first;
      if (ip == 0 || ip >= ips.size())
        throw std::runtime_error("instruction pointer " + std::to_string(ip) +
                                 " was never defined");
      chain.push_back(ip);
    }
    size_t first = 0;
    while (first < chain.size() && is_runtime(string(ips[chain[first]].module))) ++first;
    if (first == chain.size()) first = 0;
    std::vector<uint64_t> frames;
    for (size_t k = first; k < chain.size() && frames.size() < kMaxStackDepth; ++k) {
      frames.push_back(ips[chain[k]].ip);
      name(chain[k], w);
    }
    if (frames.empty()) return 0;
    if (t >= defined_.size()) defined_.resize(t + 1, false);
    defined_[t] = true;
    w.add_stack(static_cast<uint32_t>(t), frames.data(), static_cast<uint32_t>(frames.size()));
    return static_cast<uint32_t>(t);
  }

 private:
  const std::string& string(uint64_t n) const {
    static const std::string none;
    return n < strings.size() ? strings[n] : none;
  }
  void name(uint64_t ip, JournalWriter& w) {
    if (ip < named_.size() && named_[ip]) return;
    if (ip >= named_.size()) named_.resize(ip + 1, false);
    named_[ip] = true;
    const HeaptrackIp& x = ips[ip];
    NamedAddress a;
    a.module = string(x.module);
    for (const auto& [fn, file, line] : x.frames)
      a.frames.push_back({string(fn), string(file), static_cast<uint32_t>(line)});
    w.add_name(x.ip, a);
  }
  std::vector<bool> defined_, named_;
};

}  // namespace

ImportResult import_heaptrack(const std::string& in, const std::string& out) {
  text::LineReader lines(in);
  JournalWriter w(out,
                  text::import_meta("heaptrack", in,
                                    "recorded, 1 ms resolution (calls within 1 ms 1 ns apart)"));
  ImportResult r;
  HeaptrackStacks stacks;
  std::vector<uint64_t> sizes;              // by allocation info number
  std::vector<uint32_t> info_stack;         // by allocation info number
  std::vector<std::vector<uint64_t>> live;  // by allocation info number: addresses, newest last
  uint64_t next_addr = 0x10000, ms = 0, in_ms = 0, format = 0;
  bool versioned = false;
  std::string line;
  auto bad = [&](const std::string& what) {
    return std::runtime_error(in + ": line " + std::to_string(r.lines) + ": " + what);
  };
  while (lines.next(line)) {
    ++r.lines;
    Cursor c{line.c_str()};
    uint64_t x = 0, y = 0;
    if (c.lit("v ")) {
      if (!(c.num(x, 16) && c.num(format, 16) && c.end())) throw bad("malformed version line");
      if (format < 2 || format > 3)
        throw bad("heaptrack file format " + std::to_string(format) +
                  " is not supported (2 and 3 are: heaptrack 1.1 and later)");
      versioned = true;
    } else if (c.lit("s ")) {
      if (format >= 3) {  // s LEN TEXT: the length in hex, so a string may hold anything
        if (!c.num(x, 16) || *c.p != ' ' || std::strlen(c.p + 1) != x)
          throw bad("malformed string");
        ++c.p;
      }
      stacks.strings.emplace_back(c.p);
    } else if (c.lit("i ")) {
      HeaptrackIp ip;
      if (!(c.num(ip.ip, 16) && c.num(ip.module, 16))) throw bad("malformed instruction pointer");
      while (!c.end()) {
        std::array<uint64_t, 3> f{};
        if (!c.num(f[0], 16) || (!c.end() && !(c.num(f[1], 16) && c.num(f[2], 16))))
          throw bad("malformed instruction pointer frame");
        ip.frames.push_back(f);
      }
      stacks.ips.push_back(std::move(ip));
    } else if (c.lit("t ")) {
      if (!(c.num(x, 16) && c.num(y, 16) && c.end())) throw bad("malformed trace");
      stacks.traces.emplace_back(x, y);
    } else if (c.lit("a ")) {
      if (!(c.num(x, 16) && c.num(y, 16) && c.end())) throw bad("malformed allocation info");
      sizes.push_back(x);
      live.emplace_back();
      try {
        info_stack.push_back(stacks.stack_of(y, w));
      } catch (const std::runtime_error& e) {
        throw bad(e.what());
      }
    } else if (c.lit("c ")) {
      if (!(c.num(x, 16) && c.end())) throw bad("malformed time");
      if (x > ms) ms = x, in_ms = 0;
    } else if (c.lit("+ ") || c.lit("- ")) {
      const bool alloc = line[0] == '+';
      if (!(c.num(x, 16) && c.end())) throw bad("malformed allocation");
      if (x >= sizes.size())
        throw bad("allocation info " + std::to_string(x) + " was never defined");
      Event e;
      e.time_ns = ms * 1'000'000 + std::min<uint64_t>(in_ms++, 999'999);
      if (alloc) {
        e.op = Op::kMalloc;
        e.a = sizes[x];
        e.result = next_addr;
        next_addr += (sizes[x] + 31) / 16 * 16;  // distinct, 16-aligned, never reused
        live[x].push_back(e.result);
      } else {
        if (live[x].empty())
          throw bad("free of allocation info " + std::to_string(x) + " with none live");
        e.op = Op::kFree;
        e.a = live[x].back();
        live[x].pop_back();
      }
      w.add(1, 1, e, alloc ? info_stack[x] : 0);
      ++r.events;
    } else if (++r.skipped == 1) {
      r.first_skipped = r.lines;
    }
  }
  if (!versioned) throw std::runtime_error(in + ": not heaptrack data (no `v` line)");
  text::finish_check(r, in);
  w.finish();
  return r;
}

}  // namespace ak::trace
