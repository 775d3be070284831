// `allockit record` (see record.hpp). The recorder library does the recording inside the
// program, compressing as it goes; this side sets it up, forwards signals, and checks the
// journals when the program ends.
#include "cli/record.hpp"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "trace/journal.hpp"
#include "trace/paths.hpp"

namespace ak::cli {

namespace {

pid_t g_child = 0;
void forward(int sig) {
  if (g_child > 0) kill(g_child, sig);
}

std::string absolute(const std::string& p) {
  if (!p.empty() && p[0] == '/') return p;
  char cwd[4096];
  if (!getcwd(cwd, sizeof cwd)) return p;
  return std::string(cwd) + "/" + p;
}

bool is_journal(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return false;
  char magic[8] = {};
  bool ok = std::fread(magic, 1, 8, f) == 8 && std::memcmp(magic, trace::kFileMagic, 8) == 0;
  std::fclose(f);
  return ok;
}

// OUT and OUT.<digits>[.<digits>...] that are journals.
std::vector<std::string> journals_of(const std::string& out) {
  std::vector<std::string> found;
  std::string dir = ".", base = out;
  if (auto slash = out.rfind('/'); slash != std::string::npos) {
    dir = out.substr(0, slash);
    base = out.substr(slash + 1);
  }
  DIR* d = opendir(dir.c_str());
  if (!d) return found;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name != base) {
      if (name.rfind(base + ".", 0) != 0) continue;
      std::string rest = name.substr(base.size() + 1);
      if (rest.empty() || rest.find_first_not_of("0123456789.") != std::string::npos) continue;
    }
    std::string path = dir + "/" + name;
    if (is_journal(path)) found.push_back(path);
  }
  closedir(d);
  std::sort(found.begin(), found.end());
  return found;
}

}  // namespace

uint64_t check_journal(const std::string& path) {
  const trace::JournalSkim skim = trace::skim_journal(path);
  const int64_t cut = skim.truncated_at;
  if (cut >= 0) {
    if (truncate(path.c_str(), cut) != 0)
      throw std::runtime_error("cannot cut " + path + ": " + std::strerror(errno));
    std::fprintf(stderr, "allockit record: %s: incomplete last block at offset %lld dropped\n",
                 path.c_str(), static_cast<long long>(cut));
  }
  return skim.events;
}

int record(const RecordOptions& opt) {
  if (opt.command.empty()) throw std::invalid_argument("record: no command given after --");
  std::string out = absolute(opt.out);
  std::string lib = trace::tool_paths().recorder;
  if (access(lib.c_str(), R_OK) != 0)
    throw std::runtime_error("recorder library not found: " + lib);
  for (const auto& stale : journals_of(out)) std::remove(stale.c_str());

  pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
  if (pid == 0) {
    const char* old = getenv("LD_PRELOAD");
    std::string preload = lib + (old && *old ? ":" + std::string(old) : "");
    setenv("LD_PRELOAD", preload.c_str(), 1);
    setenv("ALLOCKIT_RECORD_OUT", out.c_str(), 1);
    setenv("ALLOCKIT_RECORD_PID", std::to_string(getpid()).c_str(), 1);
    setenv("ALLOCKIT_RECORD_FOLLOW_FORKS", opt.follow_forks ? "1" : "0", 1);
    setenv("ALLOCKIT_RECORD_STACK", std::to_string(opt.stack_depth).c_str(), 1);
    setenv("ALLOCKIT_RECORD_UNWIND", opt.unwind.c_str(), 1);
    std::vector<char*> argv;
    for (const auto& a : opt.command) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    std::fprintf(stderr, "allockit record: cannot run %s: %s\n", argv[0], std::strerror(errno));
    _exit(127);
  }
  g_child = pid;
  struct sigaction sa {};
  sa.sa_handler = forward;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);
  int status = 0;
  bool tty = isatty(2);
  for (int tick = 0;; ++tick) {  // a live line on a terminal: journal bytes written so far
    pid_t w = waitpid(pid, &status, tty ? WNOHANG : 0);
    if (w == pid || (w < 0 && errno != EINTR)) break;
    if (w == 0) {
      if (tick % 5 == 0) {
        uint64_t bytes = 0;
        for (const auto& f : journals_of(out)) {
          struct stat st {};
          if (stat(f.c_str(), &st) == 0) bytes += static_cast<uint64_t>(st.st_size);
        }
        std::fprintf(stderr, "\r  recording %s: %.1f MB journaled (~%.1fM events)   ",
                     opt.command[0].c_str(), static_cast<double>(bytes) / 1e6,
                     static_cast<double>(bytes) / 7e6);
      }
      usleep(100000);
    }
  }
  if (tty) std::fprintf(stderr, "\n");
  int code = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
  if (WIFSIGNALED(status))
    std::fprintf(stderr,
                 "allockit record: %s was killed by signal %d (%s); the journal keeps "
                 "everything up to then\n",
                 opt.command[0].c_str(), WTERMSIG(status), strsignal(WTERMSIG(status)));
  if (code == 127 && access(out.c_str(), F_OK) != 0) return code;

  auto files = journals_of(out);
  if (files.empty()) {
    std::fprintf(stderr,
                 "allockit record: no journal was written (is the program statically linked?)\n");
    return code ? code : 1;
  }
  for (const auto& f : files) {
    uint64_t events = check_journal(f);
    struct stat st {};
    stat(f.c_str(), &st);
    std::fprintf(stderr, "allockit record: %s: %llu events, %lld bytes (%.2f bytes/event)\n",
                 f.c_str(), static_cast<unsigned long long>(events),
                 static_cast<long long>(st.st_size),
                 events ? static_cast<double>(st.st_size) / static_cast<double>(events) : 0.0);
  }
  return code;
}

}  // namespace ak::cli
