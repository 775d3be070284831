// `allockit record`: runs a command under the recorder and compacts the journals it leaves.
#pragma once
#include <string>
#include <vector>

namespace ak::cli {

struct RecordOptions {
  std::string out = "allockit.akj";
  bool follow_forks = false;
  std::vector<std::string> command;
};

// Returns the command's exit status (128 + signal if it was killed).
int record(const RecordOptions& opt);

// Rewrites a raw journal with zstd blocks in place; a truncated tail is dropped with a warning.
// Returns the number of events. Throws trace::JournalError on damage.
uint64_t compact_journal(const std::string& path);

}  // namespace ak::cli
