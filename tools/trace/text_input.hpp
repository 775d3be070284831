// Text input shared by the importers (convert.cpp, heaptrack_import.cpp): a line reader over
// plain, gzip- or zstd-compressed files, a strict number cursor, and the journal metadata and
// final check every import writes. Internal to ak_trace.
#pragma once
#include <zlib.h>
#include <zstd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "trace/convert.hpp"
#include "trace/journal.hpp"

namespace ak::trace::text {

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

inline Meta import_meta(const std::string& format, const std::string& in,
                        const std::string& timing) {
  return {{"source", "allockit import --format " + format},
          {"command", in},
          {"allocator", "unknown (imported)"},
          {"timing", timing}};
}

inline void finish_check(const ImportResult& r, const std::string& in) {
  if (r.events == 0 && r.skipped > 0)
    throw std::runtime_error(in + ": line " + std::to_string(r.first_skipped) +
                             ": no allocation call found in the file");
}

}  // namespace ak::trace::text
