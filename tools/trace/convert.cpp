// Text importers and exporter (see convert.hpp). Parsing is by hand with strtoull so that a
// malformed line is rejected, never misread.
#include "trace/convert.hpp"

#include <zlib.h>
#include <zstd.h>

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

namespace {

// Reads lines from a plain, gzip- or zstd-compressed file (zstd: heaptrack's default).
class LineReader {
 public:
  explicit LineReader(const std::string& path) : path_(path) {
    unsigned char magic[4] = {};
    if (FILE* f = std::fopen(path.c_str(), "rb")) {
      zstd_ = std::fread(magic, 1, 4, f) == 4 && magic[0] == 0x28 && magic[1] == 0xb5 &&
              magic[2] == 0x2f && magic[3] == 0xfd;
      std::fclose(f);
    }
    if (zstd_) {
      file_ = std::fopen(path.c_str(), "rb");
      dctx_ = ZSTD_createDCtx();
      if (!file_ || !dctx_)
        throw std::runtime_error(path + ": cannot open (" + std::strerror(errno) + ")");
      return;
    }
    gz_ = gzopen(path.c_str(), "rb");
    if (!gz_) throw std::runtime_error(path + ": cannot open (" + std::strerror(errno) + ")");
    gzbuffer(gz_, 1 << 17);
  }
  ~LineReader() {
    if (gz_) gzclose(gz_);
    if (file_) std::fclose(file_);
    if (dctx_) ZSTD_freeDCtx(dctx_);
  }
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  bool next(std::string& line) { return zstd_ ? next_zstd(line) : next_gz(line); }

 private:
  static bool take_line(std::string& line) {
    if (line.empty() || line.back() != '\n') return false;
    line.pop_back();
    if (!line.empty() && line.back() == '\r') line.pop_back();
    return true;
  }

  bool next_gz(std::string& line) {
    line.clear();
    char buf[4096];
    while (gzgets(gz_, buf, sizeof buf)) {
      line += buf;
      if (take_line(line)) return true;
    }
    int err = 0;
    const char* msg = gzerror(gz_, &err);
    if (err != Z_OK && err != Z_STREAM_END)
      throw std::runtime_error(path_ + ": read error (" + msg + ")");
    return !line.empty();
  }

  // Decompresses into `text_` as lines are asked for; a frame cut short is an error.
  bool next_zstd(std::string& line) {
    for (;;) {
      const std::size_t nl = text_.find('\n', pos_);
      if (nl != std::string::npos) {
        line.assign(text_, pos_, nl + 1 - pos_);
        pos_ = nl + 1;
        take_line(line);
        return true;
      }
      text_.erase(0, pos_);
      pos_ = 0;
      if (!fill()) {
        if (!frame_done_) throw std::runtime_error(path_ + ": read error (zstd stream truncated)");
        line = text_;
        text_.clear();
        return !line.empty();
      }
    }
  }

  bool fill() {  // false at the end of the file
    if (in_.pos == in_.size) {
      const std::size_t n = std::fread(in_buf_, 1, sizeof in_buf_, file_);
      if (n == 0) return false;
      in_ = {in_buf_, n, 0};
    }
    char out[1 << 16];
    ZSTD_outBuffer o{out, sizeof out, 0};
    const std::size_t rc = ZSTD_decompressStream(dctx_, &o, &in_);
    if (ZSTD_isError(rc))
      throw std::runtime_error(path_ + ": read error (zstd: " + ZSTD_getErrorName(rc) + ")");
    frame_done_ = rc == 0;
    text_.append(out, o.pos);
    return true;
  }

  std::string path_;
  bool zstd_ = false;
  gzFile gz_ = nullptr;
  FILE* file_ = nullptr;
  ZSTD_DCtx* dctx_ = nullptr;
  char in_buf_[1 << 16];
  ZSTD_inBuffer in_{in_buf_, 0, 0};
  std::string text_;
  std::size_t pos_ = 0;
  bool frame_done_ = true;
};

// A cursor over one line.
struct Cursor {
  const char* p;
  bool lit(const char* s) {
    size_t n = std::strlen(s);
    if (std::strncmp(p, s, n) != 0) return false;
    p += n;
    return true;
  }
  void spaces() {
    while (*p == ' ' || *p == '\t') ++p;
  }
  bool num(uint64_t& v, int base = 0) {
    spaces();
    if (!std::isxdigit(static_cast<unsigned char>(*p))) return false;
    char* end;
    errno = 0;
    v = std::strtoull(p, &end, base);
    if (end == p || errno == ERANGE) return false;
    p = end;
    return true;
  }
  bool end() {
    spaces();
    return *p == 0;
  }
};

Meta import_meta(const std::string& format, const std::string& in, const std::string& timing) {
  return {{"source", "allockit import --format " + format},
          {"command", in},
          {"allocator", "unknown (imported)"},
          {"timing", timing}};
}

void finish_check(const ImportResult& r, const std::string& in) {
  if (r.events == 0 && r.skipped > 0)
    throw std::runtime_error(in + ": line " + std::to_string(r.first_skipped) +
                             ": no allocation call found in the file");
}

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

// heaptrack's interpreted data (file format 2 and 3): `a SIZE TRACE` defines allocation info
// number n (in order), `+ n` and `- n` allocate and free one block of info n, `c MS` sets the
// time; every other line (strings, traces, instruction pointers, RSS, ...) is skipped. heaptrack
// keeps no addresses and no threads: each block gets a synthetic address, one thread does all,
// and `- n` frees the most recent live block of info n. Blocks of one info have one size, so
// the live bytes over time are exact whichever block a free is given; lifetimes of blocks of
// the same size and stack are approximate.
ImportResult import_heaptrack(const std::string& in, const std::string& out) {
  LineReader lines(in);
  JournalWriter w(out, import_meta("heaptrack", in,
                                   "recorded, 1 ms resolution (calls within 1 ms 1 ns apart)"));
  ImportResult r;
  std::vector<uint64_t> sizes;              // by allocation info number
  std::vector<std::vector<uint64_t>> live;  // by allocation info number: addresses, newest last
  uint64_t next_addr = 0x10000, ms = 0, in_ms = 0;
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
      if (!(c.num(x, 16) && c.num(y, 16) && c.end())) throw bad("malformed version line");
      if (y < 2 || y > 3)
        throw bad("heaptrack file format " + std::to_string(y) +
                  " is not supported (2 and 3 are: heaptrack 1.1 and later)");
      versioned = true;
    } else if (c.lit("a ")) {
      if (!(c.num(x, 16) && c.num(y, 16) && c.end())) throw bad("malformed allocation info");
      sizes.push_back(x);
      live.emplace_back();
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
      w.add(1, 1, e);
      ++r.events;
    } else if (++r.skipped == 1) {
      r.first_skipped = r.lines;
    }
  }
  if (!versioned) throw std::runtime_error(in + ": not heaptrack data (no `v` line)");
  finish_check(r, in);
  w.finish();
  return r;
}

uint64_t export_text(const Trace& trace, const std::string& out) {
  std::ofstream f(out);
  if (!f) throw std::runtime_error(out + ": cannot create");
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
