// skim_journal (journal.hpp): a journal's event count and cut-off tail from its block headers.
#include <cstdio>
#include <cstring>

#include "trace/journal.hpp"

namespace ak::trace {

namespace {

struct File {
  FILE* f;
  ~File() {
    if (f) std::fclose(f);
  }
};

}  // namespace

JournalSkim skim_journal(const std::string& path) {
  File in{std::fopen(path.c_str(), "rb")};
  if (!in.f) throw JournalError("cannot open " + path, 0);
  FileHeader fh;
  check_file_header(fh, std::fread(&fh, 1, sizeof fh, in.f));
  std::fseek(in.f, 0, SEEK_END);
  const auto size = static_cast<uint64_t>(std::ftell(in.f));
  JournalSkim s;
  uint64_t at = sizeof fh + fh.meta_len;
  if (at > size) {
    s.truncated_at = static_cast<int64_t>(sizeof fh);
    return s;
  }
  while (at < size) {
    BlockHeader h;
    std::fseek(in.f, static_cast<long>(at), SEEK_SET);
    const uint64_t end = at + sizeof h;
    const bool whole_header = end <= size && std::fread(&h, 1, sizeof h, in.f) == sizeof h;
    if (whole_header && std::memcmp(h.magic, kBlockMagic, 4) != 0)
      throw JournalError("bad block magic", at);
    if (!whole_header || end + h.stored_len > size) {  // cut off: a killed program's last write
      s.truncated_at = static_cast<int64_t>(at);
      return s;
    }
    const uint32_t codec = h.codec & kCodecMask;
    if (codec == kCodecRaw || codec == kCodecZstd) s.events += h.event_count;
    if (end + h.stored_len == size) {  // the last block: whole, and what it says it is
      std::vector<uint8_t> payload(h.stored_len);
      if (std::fread(payload.data(), 1, payload.size(), in.f) != payload.size() ||
          block_crc(h, payload.data(), payload.size()) != h.crc)
        throw JournalError("block checksum mismatch", at);
    }
    at = end + h.stored_len;
  }
  return s;
}

}  // namespace ak::trace
