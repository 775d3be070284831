// `allockit record`: runs a command under the recorder and checks the journals it leaves.
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

// Reads a journal through (every block's header and checksum, nothing decoded) and cuts an
// incomplete last block off with a warning. Returns the number of events. Throws
// trace::JournalError on damage.
uint64_t check_journal(const std::string& path);

}  // namespace ak::cli
