// `allockit record`: runs a command under the recorder and checks the journals it leaves.
#pragma once
#include <string>
#include <vector>

namespace ak::cli {

// Frames recorded per allocation when --stack is not given (docs/trace-lab.md says why).
constexpr int kDefaultStackDepth = 8;

struct RecordOptions {
  std::string out = "allockit.akj";
  bool follow_forks = false;
  int stack_depth = kDefaultStackDepth;  // 0..64 return addresses per allocation
  std::string unwind = "libunwind";      // or "fp": frame pointers
  std::vector<std::string> command;
};

// Returns the command's exit status (128 + signal if it was killed).
int record(const RecordOptions& opt);

// Walks a journal's block headers (trace::skim_journal) and cuts an incomplete last block off
// with a warning. Returns the number of events. Throws trace::JournalError on damage found.
uint64_t check_journal(const std::string& path);

}  // namespace ak::cli
