// `allockit`: the trace lab's command line. Subcommands record, import, export, stats, replay,
// compare and report; each reads journals through the one journal library (tools/trace).
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "allockit/version.h"
#include "cli/record.hpp"
#include "replay/advice.hpp"
#include "replay/build_plan.hpp"
#include "replay/fidelity.hpp"
#include "replay/runner.hpp"
#include "replay/whatif.hpp"
#include "trace/convert.hpp"
#include "trace/json.hpp"
#include "trace/paths.hpp"
#include "trace/sites.hpp"
#include "trace/stats.hpp"

namespace {

using namespace ak;

const char* kUsage =
    "usage: allockit COMMAND [ARGS]   (allockit --version: the version)\n"
    "  record [-o FILE] [--follow-forks] [--stack N] [--unwind libunwind|fp] -- CMD [ARGS...]\n"
    "                                                        journal every allocation of CMD,\n"
    "                                                        with N call-stack frames (default 8)\n"
    "  import --format text|valgrind|heaptrack IN -o OUT    convert a trace to a journal\n"
    "  export --format text IN -o OUT                        write a journal as text\n"
    "  stats FILE [--json]                                   counts, sizes, lifetimes, leaks\n"
    "  top FILE [--by site|function|module] [--stack-depth K] [--sort COLUMN] [-n N] [--json]\n"
    "         [--debug-dir DIR]                              the heaviest call sites\n"
    "  replay FILE --allocator NAME|PATH.so [--speed 1|10|max] [--touch auto|page|full|none]\n"
    "         [--repeat N] [--out DIR]                       replay against one allocator\n"
    "  compare FILE [--allocators LIST|all] [same options]   replay against several, side by side\n"
    "  advise FILE [--out DIR] [--allocator NAME] [--repeat N] [--touch MODE] [-n SITES]\n"
    "         [--no-replay] [--debug-dir DIR]                pool and arena advice, measured\n"
    "  report DIR -o report.html                             plots and tables as one HTML page\n"
    "  allocators                                            list the allocators found here\n";

struct UsageError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// Options of the form --name VALUE, -o VALUE and flags; the rest are positional.
struct Args {
  std::vector<std::string> pos;
  std::vector<std::pair<std::string, std::string>> opts;
  std::string get(const std::string& k, const std::string& def = "") const {
    for (const auto& [key, v] : opts)
      if (key == k) return v;
    return def;
  }
  bool has(const std::string& k) const {
    for (const auto& [key, v] : opts)
      if (key == k) return true;
    return false;
  }
};

Args parse(int argc, char** argv, int from, const std::vector<std::string>& valued,
           const std::vector<std::string>& flags) {
  Args a;
  for (int i = from; i < argc; ++i) {
    std::string s = argv[i];
    if (std::find(valued.begin(), valued.end(), s) != valued.end()) {
      if (i + 1 >= argc) throw UsageError(s + " needs a value");
      a.opts.emplace_back(s, argv[++i]);
    } else if (std::find(flags.begin(), flags.end(), s) != flags.end()) {
      a.opts.emplace_back(s, "");
    } else if (s.size() > 1 && s[0] == '-') {
      throw UsageError("unknown option " + s);
    } else {
      a.pos.push_back(s);
    }
  }
  return a;
}

int cmd_stats(const Args& a) {
  if (a.pos.size() != 1) throw UsageError("stats needs one journal");
  trace::Trace t = trace::load_trace(a.pos[0]);
  trace::Timeline tl = trace::resolve(t);
  trace::TraceStats s = trace::compute_stats(t, tl);
  if (a.has("--json"))
    std::fputs(trace::stats_json(s).c_str(), stdout);
  else {
    std::printf("journal           %s\ncommand           %s\nallocator         %s\n",
                a.pos[0].c_str(), trace::meta_get(t.meta, "command", "?").c_str(),
                trace::meta_get(t.meta, "allocator", "?").c_str());
    std::fputs(trace::stats_text(s).c_str(), stdout);
  }
  if (t.truncated_at >= 0)
    std::fprintf(
        stderr, "allockit: warning: %s is truncated at offset %lld; stats cover what precedes it\n",
        a.pos[0].c_str(), static_cast<long long>(t.truncated_at));
  return 0;
}

int cmd_import(const Args& a) {
  std::string fmt = a.get("--format"), out = a.get("-o");
  if (a.pos.size() != 1 || out.empty()) throw UsageError("import needs IN and -o OUT");
  trace::ImportResult r;
  if (fmt == "valgrind")
    r = trace::import_valgrind(a.pos[0], out);
  else if (fmt == "text")
    r = trace::import_text(a.pos[0], out);
  else if (fmt == "heaptrack")
    r = trace::import_heaptrack(a.pos[0], out);
  else
    throw UsageError("import --format must be text, valgrind or heaptrack");
  std::fprintf(stderr, "allockit import: %llu events from %llu lines", (unsigned long long)r.events,
               (unsigned long long)r.lines);
  if (r.skipped)
    std::fprintf(stderr, "; %llu lines skipped (first: line %llu)", (unsigned long long)r.skipped,
                 (unsigned long long)r.first_skipped);
  std::fprintf(stderr, "\n");
  return 0;
}

int cmd_export(const Args& a) {
  std::string out = a.get("-o");
  if (a.get("--format", "text") != "text") throw UsageError("export --format must be text");
  if (a.pos.size() != 1 || out.empty()) throw UsageError("export needs IN and -o OUT");
  uint64_t n = trace::export_text(trace::load_trace(a.pos[0]), out);
  std::fprintf(stderr, "allockit export: %llu lines\n", (unsigned long long)n);
  return 0;
}

replay::ReplayOptions replay_options(const Args& a) {
  replay::ReplayOptions o;
  std::string speed = a.get("--speed", "max");
  if (speed == "max")
    o.speed = 0;
  else if (speed == "1" || speed == "10")
    o.speed = std::stod(speed);
  else
    throw UsageError("--speed must be 1, 10 or max");
  // The default (`auto`) writes one byte per page of every block but calloc's, as the program
  // that used it would have (bench/results/trace.md, fidelity): with `none`, memory the program
  // wrote is never resident in the replay (`git log`: 0.89x the recorded heap); with `page`, the
  // zero pages of tables the program calloc'd and wrote sparsely are (1.15x; `auto` 1.06x).
  o.touch = a.get("--touch", "auto");
  if (o.touch != "none" && o.touch != "page" && o.touch != "full" && o.touch != "auto")
    throw UsageError("--touch must be auto, page, full or none");
  std::string rep = a.get("--repeat", "1");
  if (rep.empty() || rep.find_first_not_of("0123456789") != std::string::npos ||
      std::stoi(rep) < 1 || std::stoi(rep) > 100)
    throw UsageError("--repeat must be a number from 1 to 100");
  o.repeat = std::stoi(rep);
  o.progress = isatty(2);
  return o;
}

// Replays the journal against each allocator into DIR and prints the table.
int run_compare(const std::string& journal, const std::vector<replay::AllocatorSpec>& allocs,
                const replay::ReplayOptions& opt, const std::string& dir) {
  trace::Trace t = trace::load_trace(journal);
  if (t.truncated_at >= 0)
    std::fprintf(stderr,
                 "allockit: warning: %s is truncated at offset %lld; replaying what precedes it\n",
                 journal.c_str(), static_cast<long long>(t.truncated_at));
  trace::Timeline tl = trace::resolve(t);
  trace::TraceStats st = trace::compute_stats(t, tl);
  trace::make_output_dir(dir);
  std::string plan = dir + "/plan.bin";
  replay::PlanInfo info = replay::write_plan(t, tl, plan);
  if (tl.problems.total())
    std::fprintf(stderr, "allockit: repaired %llu replay problems (see stats.json)\n",
                 (unsigned long long)tl.problems.total());
  std::ofstream(dir + "/stats.json") << trace::stats_json(st);
  if (!t.stacks.empty()) {  // the report's call-site view: the top table and the flame graphs
    trace::Symbolizer sym(t.modules, {}, t.names);
    const trace::SiteOptions by_site{trace::SiteKey::kSite, 1, trace::SiteSort::kCalls};
    std::ofstream(dir + "/sites.json")
        << trace::sites_json(trace::top_sites(t, tl, sym, by_site), 50);
    std::ofstream(dir + "/stacks.json") << trace::stack_tree_json(t, tl, sym);
  }
  std::vector<std::string> dirs;
  for (const auto& a : allocs) dirs.push_back(dir + "/" + a.name);
  std::vector<replay::ReplayResult> results =
      replay::run_replays(plan, allocs, opt, st.peak_live_bytes, dirs);
  for (const auto& r : results)
    if (!r.ok)
      std::fprintf(stderr, "allockit: %s: %s\n", r.allocator.name.c_str(), r.error.c_str());
  std::remove(plan.c_str());
  const std::string recorded_alloc = trace::meta_get(t.meta, "allocator");
  const replay::Curve recorded = replay::recorded_curve(t.rss);
  const replay::Fidelity fid = replay::measure_fidelity(recorded_alloc, recorded, results, dir);
  if (!recorded.empty()) {
    std::ofstream csv(dir + "/recorded_rss.csv");
    for (const auto& [ms, bytes] : recorded) csv << ms << "," << bytes << "\n";
  }
  std::string json =
      "{\"journal\": " + trace::json_str(journal) +
      ", \"command\": " + trace::json_str(trace::meta_get(t.meta, "command")) +
      ", \"recorded_allocator\": " + trace::json_str(recorded_alloc) +
      ", \"fidelity\": " + replay::fidelity_json(fid) +
      ", \"speed\": " + trace::json_num(opt.speed) + ", \"touch\": " + trace::json_str(opt.touch) +
      ", \"repeat\": " + std::to_string(opt.repeat) + ", \"ops\": " + std::to_string(info.ops) +
      ", \"threads\": " + std::to_string(info.threads) + ", \"results\": [";
  for (size_t i = 0; i < results.size(); ++i)
    json += (i ? ", " : "") + replay::summary_json(results[i]);
  json += "]}\n";
  std::ofstream(dir + "/compare.json") << json;
  std::string table =
      replay::compare_table(results) + "\n" + replay::fidelity_line(fid, recorded_alloc);
  char head[512];
  std::snprintf(
      head, sizeof head,
      "Journal %s: %llu calls replayed on %llu thread(s), speed %s, touch %s, %d run(s)\n\n",
      journal.c_str(), (unsigned long long)info.ops, (unsigned long long)info.threads,
      opt.speed == 0 ? "max" : std::to_string(static_cast<int>(opt.speed)).c_str(),
      opt.touch.c_str(), opt.repeat);
  std::ofstream(dir + "/compare.md") << head << table;
  std::fputs(head, stdout);
  std::fputs(table.c_str(), stdout);
  for (const auto& r : results)
    if (!r.ok) return 1;
  return 0;
}

int cmd_replay(const Args& a) {
  if (a.pos.size() != 1 || !a.has("--allocator"))
    throw UsageError("replay needs FILE and --allocator");
  replay::AllocatorSpec spec = replay::find_allocator(a.get("--allocator"));
  return run_compare(a.pos[0], {spec}, replay_options(a), a.get("--out", "replay-" + spec.name));
}

int cmd_compare(const Args& a) {
  if (a.pos.size() != 1) throw UsageError("compare needs one journal");
  std::string list = a.get("--allocators", "all");
  std::vector<replay::AllocatorSpec> allocs;
  if (list == "all")
    allocs = replay::available_allocators();
  else
    for (size_t pos = 0; pos <= list.size();) {
      size_t comma = list.find(',', pos);
      if (comma == std::string::npos) comma = list.size();
      if (comma > pos) allocs.push_back(replay::find_allocator(list.substr(pos, comma - pos)));
      pos = comma + 1;
    }
  return run_compare(a.pos[0], allocs, replay_options(a), a.get("--out", "compare-out"));
}

// The report is a Python package; a missing piece is named with the way to install it.
int cmd_report(const Args& a) {
  std::string out = a.get("-o", "report.html");
  if (a.pos.size() != 1) throw UsageError("report needs a results folder");
  const std::string& py = trace::tool_paths().report_python;
  if (access((py + "/allockit_report/__main__.py").c_str(), R_OK) != 0)
    throw std::runtime_error("the report package allockit_report is missing from " + py +
                             "; reinstall allockit (cmake --install, or the allockit .deb)");
  const char* old = getenv("PYTHONPATH");
  setenv("PYTHONPATH", (py + (old && *old ? ":" + std::string(old) : "")).c_str(), 1);
  std::vector<const char*> argv = {"python3",   "-m",   "allockit_report", a.pos[0].c_str(), "-o",
                                   out.c_str(), nullptr};
  execvp("python3", const_cast<char**>(argv.data()));
  throw std::runtime_error(std::string("cannot run python3 for the report (") +
                           std::strerror(errno) +
                           "); install it: sudo apt-get install python3 python3-numpy");
}

uint64_t parse_count(const std::string& what, const std::string& v, uint64_t lo, uint64_t hi) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long n = std::strtoull(v.c_str(), &end, 10);
  if (v.empty() || v[0] == '-' || *end || errno || n < lo || n > hi)
    throw UsageError(what + " takes a number from " + std::to_string(lo) + " to " +
                     std::to_string(hi) + ", not '" + v + "'");
  return n;
}

// A journal loaded for its call sites (top, advise): events, timeline and symbols, the latter
// also from each --debug-dir.
struct SiteInput {
  trace::Trace trace;
  trace::Timeline tl;
  trace::Symbolizer sym;
  explicit SiteInput(const Args& a)
      : trace(trace::load_trace(a.pos[0])),
        tl(trace::resolve(trace)),
        sym(trace.modules, debug_dirs(a), trace.names) {}
  static std::vector<std::string> debug_dirs(const Args& a) {
    std::vector<std::string> dirs;
    for (const auto& [k, v] : a.opts)
      if (k == "--debug-dir") dirs.push_back(v);
    return dirs;
  }
};

int cmd_top(const Args& a) {
  if (a.pos.size() != 1) throw UsageError("top takes one journal");
  trace::SiteOptions o;
  const std::string by = a.get("--by", "site");
  if (by == "site")
    o.by = trace::SiteKey::kSite;
  else if (by == "function")
    o.by = trace::SiteKey::kFunction;
  else if (by == "module")
    o.by = trace::SiteKey::kModule;
  else
    throw UsageError("--by takes site, function or module, not '" + by + "'");
  o.depth = static_cast<uint32_t>(parse_count("--stack-depth", a.get("--stack-depth", "1"), 1, 64));
  const std::string sort = a.get("--sort", "calls");
  const std::pair<const char*, trace::SiteSort> sorts[] = {
      {"calls", trace::SiteSort::kCalls},   {"bytes", trace::SiteSort::kBytes},
      {"peak", trace::SiteSort::kPeak},     {"temporary", trace::SiteSort::kTemporary},
      {"leaked", trace::SiteSort::kLeaked}, {"lifetime", trace::SiteSort::kLifetime}};
  bool known = false;
  for (const auto& [name, s] : sorts)
    if (sort == name) o.sort = s, known = true;
  if (!known)
    throw UsageError("--sort takes calls, bytes, peak, temporary, leaked or lifetime, not '" +
                     sort + "'");
  const size_t rows = parse_count("-n", a.get("-n", "20"), 1, UINT32_MAX);
  SiteInput in(a);
  const trace::Trace& t = in.trace;
  const trace::SiteTable table = trace::top_sites(t, in.tl, in.sym, o);
  const std::string out =
      a.has("--json") ? trace::sites_json(table, rows) : trace::sites_text(table, rows, o);
  std::fputs(out.c_str(), stdout);
  if (t.truncated_at >= 0)
    std::fprintf(stderr, "allockit: warning: journal truncated at offset %lld; shown up to there\n",
                 static_cast<long long>(t.truncated_at));
  return 0;
}

// Judges the hot sites, then measures the advice by a what-if replay (unless --no-replay).
int cmd_advise(const Args& a) {
  if (a.pos.size() != 1) throw UsageError("advise takes one journal");
  replay::AdviceOptions ao;
  ao.max_sites = parse_count("-n", a.get("-n", "10"), 1, 1000);
  Args with_defaults = a;  // the what-if's default: 3 runs
  if (!a.has("--repeat")) with_defaults.opts.emplace_back("--repeat", "3");
  const replay::ReplayOptions ro = replay_options(with_defaults);
  const replay::AllocatorSpec alloc = replay::find_allocator(a.get("--allocator", "glibc"));
  const std::string out = a.get("--out", "advice");
  SiteInput in(a);
  const replay::Advice advice = replay::advise(in.trace, in.tl, in.sym, ao);
  trace::make_output_dir(out);
  std::unique_ptr<replay::WhatIf> w;
  if (!a.has("--no-replay") && !advice.routing.routes.empty())
    w = std::make_unique<replay::WhatIf>(replay::measure(in.trace, in.tl, advice, alloc, ro, out));
  const std::string text = replay::advice_text(advice, w.get());
  std::fputs(text.c_str(), stdout);
  std::ofstream(out + "/advice.json") << replay::advice_json(advice, w.get());
  std::ofstream(out + "/advice.txt") << text;
  if (w && !w->verified) {
    std::fprintf(stderr, "allockit: error: the routed replay changed the journal's semantics\n");
    return 1;
  }
  return 0;
}

int cmd_record(int argc, char** argv) {
  cli::RecordOptions o;
  int i = 2;
  for (; i < argc; ++i) {
    std::string s = argv[i];
    if (s == "--") {
      ++i;
      break;
    }
    if (s == "-o" && i + 1 < argc)
      o.out = argv[++i];
    else if (s == "--follow-forks")
      o.follow_forks = true;
    else if (s == "--stack" && i + 1 < argc)
      o.stack_depth = static_cast<int>(parse_count("record: --stack", argv[++i], 0, 64));
    else if (s == "--unwind" && i + 1 < argc) {
      o.unwind = argv[++i];
      if (o.unwind != "libunwind" && o.unwind != "fp")
        throw UsageError("record: --unwind takes libunwind or fp, not '" + o.unwind + "'");
    } else
      throw UsageError("record: unknown option " + s + " (the command goes after --)");
  }
  for (; i < argc; ++i) o.command.emplace_back(argv[i]);
  return cli::record(o);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && !std::strcmp(argv[1], "--version")) {
    std::printf("allockit %s\n", AK_VERSION_STRING);
    return 0;
  }
  if (argc < 2 || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "--help")) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  std::string cmd = argv[1];
  try {
    const std::vector<std::string> replay_valued = {"--allocator", "--allocators", "--speed",
                                                    "--touch",     "--repeat",     "--out"};
    if (cmd == "record") return cmd_record(argc, argv);
    if (cmd == "stats") return cmd_stats(parse(argc, argv, 2, {}, {"--json"}));
    if (cmd == "advise") {
      std::vector<std::string> valued = replay_valued;
      for (const char* v : {"-n", "--debug-dir"}) valued.emplace_back(v);
      return cmd_advise(parse(argc, argv, 2, valued, {"--no-replay"}));
    }
    if (cmd == "top")
      return cmd_top(parse(argc, argv, 2, {"--by", "--stack-depth", "--sort", "-n", "--debug-dir"},
                           {"--json"}));
    if (cmd == "import") return cmd_import(parse(argc, argv, 2, {"--format", "-o"}, {}));
    if (cmd == "export") return cmd_export(parse(argc, argv, 2, {"--format", "-o"}, {}));
    if (cmd == "replay") return cmd_replay(parse(argc, argv, 2, replay_valued, {}));
    if (cmd == "compare") return cmd_compare(parse(argc, argv, 2, replay_valued, {}));
    if (cmd == "report") return cmd_report(parse(argc, argv, 2, {"-o"}, {}));
    if (cmd == "allocators") {
      for (const auto& a : replay::available_allocators())
        std::printf("%-10s %s\n", a.name.c_str(),
                    a.preload.empty() ? "(system malloc)" : a.preload.c_str());
      return 0;
    }
    throw UsageError("unknown command '" + cmd + "'");
  } catch (const UsageError& e) {
    std::fprintf(stderr, "allockit: %s\n%s", e.what(), kUsage);
    return 2;
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "allockit: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "allockit: error: %s\n", e.what());
    return 1;
  }
}
