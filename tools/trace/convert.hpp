// Importers and exporters between journals and text trace formats:
//  - valgrind: the output of `valgrind --trace-malloc=yes` (one thread, no times; calls are
//    given synthetic times 1 us apart);
//  - text: one call per line, `a SIZE PTR TID TIME_NS` or `f PTR TID TIME_NS`, PTR in hex;
//  - heaptrack: heaptrack's own files (heaptrack.PROGRAM.PID.zst or .gz, file format 2 and 3):
//    sizes and times exact to the millisecond, synthetic addresses, one thread, and each
//    allocation's stack with heaptrack's names for its frames (heaptrack_import.cpp).
// Inputs may be gzip- or zstd-compressed. Lines that are not calls are skipped and counted.
#pragma once
#include <cstdint>
#include <string>

#include "trace/timeline.hpp"

namespace ak::trace {

struct ImportResult {
  uint64_t events = 0;
  uint64_t lines = 0;
  uint64_t skipped = 0;        // lines that are not allocation calls
  uint64_t first_skipped = 0;  // line number of the first skipped line, 0 if none
};

// Converts `in` to a journal at `out`. Throws std::runtime_error naming the line on an
// unreadable input, or when nothing in it parses as a call.
ImportResult import_valgrind(const std::string& in, const std::string& out);
ImportResult import_text(const std::string& in, const std::string& out);
ImportResult import_heaptrack(const std::string& in, const std::string& out);

// Writes `trace` in the text format. realloc becomes `f` then `a`; calloc and reallocarray
// write their product; alignments are lost. Returns the lines written.
uint64_t export_text(const Trace& trace, const std::string& out);

}  // namespace ak::trace
