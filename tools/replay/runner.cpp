// Replay runner (see runner.hpp). Workers are separate processes so that each allocator is the
// only one in its process and its peak RSS is its own.
#include "replay/runner.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "replay/plan.hpp"
#include "trace/event.hpp"
#include "trace/json.hpp"
#include "trace/paths.hpp"

extern char** environ;

namespace ak::replay {

using trace::json_num;
using trace::json_str;

const char* const kPercentileNames[kPercentiles] = {"best",  "p1",     "p10",     "p25",  "p50",
                                                    "p75",   "p90",    "p95",     "p98",  "p99",
                                                    "p99.9", "p99.99", "p99.999", "worst"};
static const double kPercentileValues[kPercentiles] = {0,  1,  10, 25,   50,    75,     90,
                                                       95, 98, 99, 99.9, 99.99, 99.999, 100};

namespace {

bool exists(const std::string& p) {
  return access(p.c_str(), R_OK) == 0;
}

const char* kLibDir = "/usr/lib/x86_64-linux-gnu/";

struct Candidate {
  const char* name;
  std::vector<std::string> paths;
};

std::vector<Candidate> candidates() {
  std::string lib = kLibDir;
  return {{"glibc", {""}},
          {"allockit", {trace::tool_paths().liballockit}},
          {"jemalloc", {lib + "libjemalloc.so.2"}},
          {"mimalloc", {lib + "libmimalloc.so.2"}},
          {"tcmalloc", {lib + "libtcmalloc_minimal.so.4", lib + "libtcmalloc.so.4"}}};
}

int group_of(uint8_t kind) {  // index into kGroups (0 is "all")
  auto op = static_cast<trace::Op>(kind);
  if (op == trace::Op::kMalloc) return 1;
  if (op == trace::Op::kFree) return 2;
  if (trace::is_realloc(op)) return 3;
  if (op == trace::Op::kCalloc) return 4;
  return 5;
}
const char* const kGroups[] = {"all", "malloc", "free", "realloc", "calloc", "aligned"};

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Pulls a number that follows "key": in a flat JSON text written by the worker.
double json_field(const std::string& text, const std::string& key) {
  size_t at = text.find("\"" + key + "\"");
  if (at == std::string::npos) return 0;
  at = text.find(':', at);
  return std::strtod(text.c_str() + at + 1, nullptr);
}

void show_progress(const std::string& name, const std::atomic<uint64_t>* counter, uint64_t total,
                   int rep, int reps) {
  uint64_t done = std::min(counter->load(std::memory_order_relaxed), total);
  int width = 30;
  int fill = total ? static_cast<int>(width * done / total) : width;
  std::fprintf(stderr, "\r  %-10s run %d/%d [%s%s] %3d%%", name.c_str(), rep + 1, reps,
               std::string(static_cast<size_t>(fill), '#').c_str(),
               std::string(static_cast<size_t>(width - fill), ' ').c_str(),
               total ? static_cast<int>(100 * done / total) : 100);
}

// Runs one worker; returns "" or an error message.
std::string run_worker(const std::string& plan, const AllocatorSpec& a, const ReplayOptions& opt,
                       const std::string& dir, uint64_t total_ops, int rep) {
  std::string worker = trace::tool_paths().worker;
  char speed[32];
  std::snprintf(speed, sizeof speed, "%g", opt.speed);
  std::vector<std::string> args = {worker, plan, dir, speed, opt.touch};
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "LD_PRELOAD=", 11) != 0) env.emplace_back(*e);
  if (!a.preload.empty()) env.push_back("LD_PRELOAD=" + a.preload);
  env.insert(env.end(), opt.env.begin(), opt.env.end());
  std::vector<char*> argv, envp;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  for (auto& s : env) envp.push_back(s.data());
  envp.push_back(nullptr);
  // Reset the progress file before the worker maps it.
  std::string progress_path = dir + "/.progress";
  int pfd = open(progress_path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
  std::atomic<uint64_t>* counter = nullptr;
  if (pfd >= 0 && ftruncate(pfd, 8) == 0) {
    void* m = mmap(nullptr, 8, PROT_READ, MAP_SHARED, pfd, 0);
    if (m != MAP_FAILED) counter = static_cast<std::atomic<uint64_t>*>(m);
  }
  if (pfd >= 0) close(pfd);
  pid_t pid;
  int rc = posix_spawn(&pid, worker.c_str(), nullptr, nullptr, argv.data(), envp.data());
  if (rc != 0) return "cannot start " + worker + ": " + std::strerror(rc);
  int status = 0;
  for (;;) {
    pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) return "waitpid failed";
    if (opt.progress && counter) show_progress(a.name, counter, total_ops, rep, opt.repeat);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (opt.progress) {
    if (counter) show_progress(a.name, counter, total_ops, rep, opt.repeat);
    std::fprintf(stderr, "\n");
  }
  if (counter) munmap(counter, 8);
  unlink(progress_path.c_str());
  if (WIFSIGNALED(status))
    return std::string("replay worker killed by signal ") + strsignal(WTERMSIG(status));
  if (WEXITSTATUS(status) != 0)
    return "replay worker exited with status " + std::to_string(WEXITSTATUS(status));
  return "";
}

}  // namespace

KindSummary summarise(const char* kind, std::vector<uint32_t>& v) {
  KindSummary s;
  s.kind = kind;
  s.count = v.size();
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (uint32_t x : v) sum += x;
  s.mean_ns = sum / static_cast<double>(v.size());
  for (int i = 0; i < kPercentiles; ++i) {
    double rank = kPercentileValues[i] / 100.0 * static_cast<double>(v.size() - 1);
    s.pct_ns[i] = v[static_cast<size_t>(std::llround(rank))];
  }
  return s;
}

std::vector<AllocatorSpec> available_allocators() {
  std::vector<AllocatorSpec> out;
  for (const auto& c : candidates())
    for (const auto& p : c.paths)
      if (p.empty() || exists(p)) {
        out.push_back({c.name, p});
        break;
      }
  return out;
}

AllocatorSpec find_allocator(const std::string& name) {
  for (const auto& a : available_allocators())
    if (a.name == name) return a;
  if (name.find('/') != std::string::npos || name.ends_with(".so") ||
      name.find(".so.") != std::string::npos) {
    if (!exists(name)) throw std::invalid_argument("allocator library " + name + " not found");
    std::string base = name.substr(name.rfind('/') + 1);
    return {base.substr(0, base.find('.')), name};
  }
  std::string list;
  for (const auto& a : available_allocators()) list += (list.empty() ? "" : ", ") + a.name;
  throw std::invalid_argument("unknown allocator '" + name + "'; available here: " + list +
                              ", or a path to a malloc .so");
}

namespace {

// One allocator's runs so far: its result, and its samples pooled over the runs (a latency and
// a kGroups index each: 5 bytes a sample while every allocator's runs are held, split by kind
// only when its summary is made).
struct Pool {
  ReplayResult r;
  std::string dir;
  std::vector<uint32_t> latency;
  std::vector<uint8_t> group;
};

// Adds the run (number `rep`) whose files the worker just wrote under p.dir; sets p.r.error when
// they are damaged.
void add_run(Pool& p, const ReplayOptions& opt, int rep) {
  ReplayResult& r = p.r;
  std::string w = read_file(p.dir + "/worker.json");
  const double wall = json_field(w, "wall_s");
  r.wall_best_s = rep == 0 ? wall : std::min(r.wall_best_s, wall);
  r.wall_s += wall;
  r.touch_s += json_field(w, "touch_s");
  r.floor_min_ns = json_field(w, "min");
  r.floor_mean_ns = json_field(w, "mean");
  r.peak_rss = std::max(r.peak_rss, static_cast<uint64_t>(json_field(w, "peak_rss_bytes")));
  r.checked_allocs = static_cast<uint64_t>(json_field(w, "allocs"));
  r.checked_frees = static_cast<uint64_t>(json_field(w, "frees"));
  std::string s = read_file(p.dir + "/samples.bin");
  uint64_t n = 0;
  if (s.size() < 16 || std::memcmp(s.data(), kSamplesMagic, 8) != 0 ||
      (std::memcpy(&n, s.data() + 8, 8), s.size() != 16 + n * 13)) {
    r.error = "replay worker wrote a damaged samples.bin";
    return;
  }
  r.ops = n;
  const auto* lat = reinterpret_cast<const uint32_t*>(s.data() + 16);
  if (opt.keep_latencies) {
    r.latency_ns.resize(n);
    std::memcpy(r.latency_ns.data(), lat, n * 4);
  }
  const auto* kind = reinterpret_cast<const uint8_t*>(s.data() + 16 + n * 12);
  const size_t at = p.latency.size();
  p.latency.resize(at + n);
  std::memcpy(p.latency.data() + at, lat, n * 4);
  p.group.reserve(at + n);
  for (uint64_t i = 0; i < n; ++i) p.group.push_back(static_cast<uint8_t>(group_of(kind[i])));
}

// Turns p's pooled runs into its result (means over `reps` runs, per-kind summaries) and writes
// summary.json. Frees the samples.
void finish(Pool& p, int reps) {
  ReplayResult& r = p.r;
  r.wall_s /= reps;
  r.touch_s /= reps;
  std::vector<std::vector<uint32_t>> groups(std::size(kGroups));
  for (size_t i = 0; i < p.latency.size(); ++i) groups[p.group[i]].push_back(p.latency[i]);
  std::vector<uint8_t>().swap(p.group);
  r.kinds.push_back(summarise(kGroups[0], p.latency));
  std::vector<uint32_t>().swap(p.latency);
  for (size_t g = 1; g < groups.size(); ++g)
    if (!groups[g].empty()) r.kinds.push_back(summarise(kGroups[g], groups[g]));
  r.overhead = r.peak_live ? static_cast<double>(r.peak_rss) / static_cast<double>(r.peak_live) : 0;
  r.ok = true;
  std::ofstream(p.dir + "/summary.json") << summary_json(r);
}

}  // namespace

std::vector<ReplayResult> run_replays(const std::string& plan,
                                      const std::vector<AllocatorSpec>& allocs,
                                      const ReplayOptions& opt, uint64_t peak_live_bytes,
                                      const std::vector<std::string>& dirs) {
  std::vector<Pool> pools(allocs.size());
  for (size_t i = 0; i < allocs.size(); ++i) {
    pools[i].r.allocator = allocs[i];
    pools[i].r.peak_live = peak_live_bytes;
    pools[i].dir = dirs[i];
    trace::make_output_dir(dirs[i]);
  }
  uint64_t total_ops = 0;
  {
    std::ifstream f(plan, std::ios::binary);
    PlanHeader h{};
    f.read(reinterpret_cast<char*>(&h), sizeof h);
    total_ops = h.ops;
  }
  // Round by round, every allocator once, starting one further each round: load that drifts on
  // the machine while the runs go meets every allocator alike, not the ones that ran last.
  const int reps = std::max(1, opt.repeat);
  const size_t n = allocs.size();
  for (int rep = 0; rep < reps; ++rep)
    for (size_t k = 0; k < n; ++k) {
      Pool& p = pools[(k + static_cast<size_t>(rep)) % n];
      if (!p.r.error.empty()) continue;
      std::string err = run_worker(plan, p.r.allocator, opt, p.dir, total_ops, rep);
      if (!err.empty())
        p.r.error = err;
      else
        add_run(p, opt, rep);
    }
  std::vector<ReplayResult> out;
  for (Pool& p : pools) {
    if (p.r.error.empty()) finish(p, reps);
    out.push_back(std::move(p.r));
  }
  return out;
}

ReplayResult run_replay(const std::string& plan, const AllocatorSpec& alloc,
                        const ReplayOptions& opt, uint64_t peak_live_bytes,
                        const std::string& dir) {
  return run_replays(plan, {alloc}, opt, peak_live_bytes, {dir}).front();
}

std::string summary_json(const ReplayResult& r) {
  std::string o = "{\"allocator\": " + json_str(r.allocator.name) + ", \"library\": " +
                  json_str(r.allocator.preload.empty() ? "system" : r.allocator.preload) +
                  ", \"ok\": " + (r.ok ? "true" : "false");
  if (!r.ok) return o + ", \"error\": " + json_str(r.error) + "}\n";
  o += ", \"ops\": " + std::to_string(r.ops) + ", \"wall_s\": " + json_num(r.wall_s) +
       ", \"wall_best_s\": " + json_num(r.wall_best_s) + ", \"touch_s\": " + json_num(r.touch_s) +
       ", \"timer_floor_ns\": {\"min\": " + json_num(r.floor_min_ns) +
       ", \"mean\": " + json_num(r.floor_mean_ns) +
       "}, \"peak_rss_bytes\": " + std::to_string(r.peak_rss) +
       ", \"peak_live_bytes\": " + std::to_string(r.peak_live) +
       ", \"overhead\": " + json_num(r.overhead) + ", \"kinds\": {";
  for (size_t k = 0; k < r.kinds.size(); ++k) {
    const auto& s = r.kinds[k];
    o += (k ? ", " : "") + json_str(s.kind) + ": {\"count\": " + std::to_string(s.count) +
         ", \"mean_ns\": " + json_num(s.mean_ns);
    for (int i = 0; i < kPercentiles; ++i)
      o += ", " + json_str(kPercentileNames[i]) + ": " + json_num(s.pct_ns[i]);
    o += "}";
  }
  return o + "}}\n";
}

std::string compare_table(const std::vector<ReplayResult>& results) {
  auto ns = [](double v) {
    char b[32];
    if (v >= 1e6)
      std::snprintf(b, sizeof b, "%.1f ms", v / 1e6);
    else if (v >= 1e4)
      std::snprintf(b, sizeof b, "%.1f us", v / 1e3);
    else
      std::snprintf(b, sizeof b, "%.0f", v);
    return std::string(b);
  };
  std::string o =
      "Latency of every call in ns (all kinds), one process per allocator\n\n| allocator |";
  for (int i = 0; i < kPercentiles; ++i) o += std::string(" ") + kPercentileNames[i] + " |";
  o += " mean | peak RSS MiB | overhead | wall s | touch s |\n|---|";
  for (int i = 0; i < kPercentiles + 5; ++i) o += "---:|";
  o += "\n";
  for (const auto& r : results) {
    o += "| " + r.allocator.name + " |";
    if (!r.ok) {
      o += " failed: " + r.error + " |\n";
      continue;
    }
    const KindSummary& all = r.kinds[0];
    for (int i = 0; i < kPercentiles; ++i) o += " " + ns(all.pct_ns[i]) + " |";
    char tail[128];
    std::snprintf(tail, sizeof tail, " %.1f | %.2f | %.2fx | %.3f | %.3f |\n", all.mean_ns,
                  static_cast<double>(r.peak_rss) / 1048576.0, r.overhead, r.wall_s, r.touch_s);
    o += tail;
  }
  o += "\nBy kind: p50 / p99 / p99.9 / worst (ns)\n\n| allocator |";
  std::vector<std::string> kinds;
  for (const auto& r : results)
    for (const auto& k : r.kinds)
      if (k.kind != "all" && std::find(kinds.begin(), kinds.end(), k.kind) == kinds.end())
        kinds.push_back(k.kind);
  for (const auto& k : kinds) o += " " + k + " |";
  o += "\n|---|";
  for (size_t i = 0; i < kinds.size(); ++i) o += "---:|";
  o += "\n";
  for (const auto& r : results) {
    if (!r.ok) continue;
    o += "| " + r.allocator.name + " |";
    for (const auto& k : kinds) {
      auto it = std::find_if(r.kinds.begin(), r.kinds.end(),
                             [&](const KindSummary& s) { return s.kind == k; });
      if (it == r.kinds.end()) {
        o += " - |";
        continue;
      }
      o += " " + ns(it->pct_ns[4]) + " / " + ns(it->pct_ns[9]) + " / " + ns(it->pct_ns[10]) +
           " / " + ns(it->pct_ns[13]) + " |";
    }
    o += "\n";
  }
  return o;
}

}  // namespace ak::replay
