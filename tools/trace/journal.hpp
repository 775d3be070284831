// Journal files: the one streaming reader and writer every tool uses (format: codec.hpp,
// docs/journal-format.md). Not thread-safe; one object per thread. Errors throw JournalError,
// whose message names the file offset.
#pragma once
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "trace/codec.hpp"
#include "trace/event.hpp"

namespace ak::trace {

class JournalError : public std::runtime_error {
 public:
  JournalError(const std::string& what, uint64_t offset)
      : std::runtime_error(what + " at offset " + std::to_string(offset)), offset_(offset) {}
  uint64_t offset() const { return offset_; }

 private:
  uint64_t offset_;
};

using Meta = std::vector<std::pair<std::string, std::string>>;
std::string meta_get(const Meta& m, const std::string& key, const std::string& fallback = "");

// A memory sample of the recorded process (RSS blocks), times in ns.
struct RssSample {
  uint64_t time_ns = 0;
  uint64_t anon_bytes = 0;      // RssAnon
  uint64_t rss_bytes = 0;       // VmRSS
  uint64_t recorder_bytes = 0;  // of anon_bytes, the recorder's own buffers
};

struct Block {
  uint64_t offset = 0;  // of the block header in the file
  uint32_t thread = 0, os_tid = 0;
  std::vector<Event> events;
};

class JournalReader {
 public:
  // Opens `path` and reads its header. Throws JournalError on a missing file, a wrong magic or
  // version, or a damaged header.
  explicit JournalReader(const std::string& path);
  // Reads from memory (fuzzing, tests). The bytes must outlive the reader.
  JournalReader(const void* data, size_t size);
  ~JournalReader();
  JournalReader(const JournalReader&) = delete;
  JournalReader& operator=(const JournalReader&) = delete;

  const Meta& meta() const { return meta_; }
  // The recorded process's memory samples in time order (read ahead at open); empty when the
  // journal has none (imports, journals of older recorders).
  const std::vector<RssSample>& rss() const { return rss_; }
  // Reads the next block into `b`. Returns false at the end. A block cut short by the end of the
  // file ends the journal and is reported by truncated_at(); a damaged block throws.
  bool next(Block& b);
  // As next(), checking the block (header, checksum) without decoding it: its event count only.
  bool skim(uint32_t& events);
  // Offset of an incomplete block at the end of the file, or -1.
  int64_t truncated_at() const { return truncated_at_; }
  uint64_t offset() const { return offset_; }

 private:
  explicit JournalReader(FILE* f);
  void open_header();
  void scan_clocks();
  bool read_block(BlockHeader& h, uint64_t& start);
  size_t read(void* dst, size_t n);
  uint64_t ticks_to_ns(uint64_t ticks) const;

  FILE* f_ = nullptr;
  uint64_t offset_ = 0;
  int64_t truncated_at_ = -1;
  Meta meta_;
  std::vector<uint8_t> stored_, raw_;
  // TSC-to-ns fit from the first and last clock blocks (journals straight from the recorder).
  uint64_t clock_tsc0_ = 0, clock_ns0_ = 0;
  long double ns_per_tick_ = 0;
  __extension__ unsigned __int128 ns_per_tick_q32_ = 0;  // the same rate, 32 fraction bits
  int clock_points_ = 0;
  std::vector<RssSample> rss_;
};

class JournalWriter {
 public:
  // Creates `path` (replacing it) and writes the header. `compress` selects zstd blocks.
  JournalWriter(const std::string& path, const Meta& meta, bool compress = true);
  ~JournalWriter();  // finish()es if not done; errors there are lost, so call finish()
  JournalWriter(const JournalWriter&) = delete;
  JournalWriter& operator=(const JournalWriter&) = delete;

  // Appends an event of thread `thread` (>= 1); a thread's events must come in its call order.
  void add(uint32_t thread, uint32_t os_tid, const Event& e);
  // Writes all buffered blocks and closes the file. Throws std::runtime_error on an I/O error.
  void finish();
  uint64_t events() const { return events_; }
  uint64_t bytes() const { return bytes_; }

 private:
  struct Pending {
    uint32_t os_tid = 0, count = 0;
    uint64_t base_time = 0;
    CodecState state;
    std::vector<uint8_t> raw;  // raw.size() is capacity; `len` bytes are used
    size_t len = 0;
  };
  void flush(uint32_t thread, Pending& p);
  void put(const void* data, size_t n);

  std::string path_;
  FILE* f_ = nullptr;
  bool compress_;
  uint64_t events_ = 0, bytes_ = 0;
  std::unordered_map<uint32_t, Pending> pending_;
  std::vector<uint8_t> packed_;  // compression scratch
  std::vector<uint32_t> order_;  // threads in first-seen order, for deterministic output
};

}  // namespace ak::trace
