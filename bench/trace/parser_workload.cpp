// A compiler front end in miniature, for `allockit advise` (bench/run_trace_bench.py): it reads
// 40,000 generated statements; each is split into token strings (temporaries), parsed into an
// AST whose nodes all die when the statement has been checked (groups: an arena per statement),
// and every declared name goes into a symbol table that lives to the end (std::map nodes of one
// size: a pool). Usage: parser_workload [STATEMENTS]
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace {

struct Node {
  std::string text;
  std::vector<std::unique_ptr<Node>> kids;
};

std::vector<std::string> tokenize(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : line) {
    if (c == ' ') {
      if (!cur.empty()) out.push_back(cur), cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

__attribute__((noinline)) std::unique_ptr<Node> parse(const std::vector<std::string>& toks,
                                                      size_t& at, int depth) {
  auto n = std::make_unique<Node>();
  n->text = toks[at++ % toks.size()];
  while (depth < 4 && at < toks.size() && toks[at] != ";")
    n->kids.push_back(parse(toks, at, depth + 1));
  return n;
}

size_t check(const Node& n) {
  size_t k = n.text.size();
  for (const auto& c : n.kids) k += check(*c);
  return k;
}

}  // namespace

int main(int argc, char** argv) {
  const long statements = argc > 1 ? std::atol(argv[1]) : 40000;
  std::map<std::string, long> symbols;
  unsigned seed = 7;
  size_t total = 0;
  for (long s = 0; s < statements; ++s) {
    std::string line = "let name_" + std::to_string(s % 5000) + " =";
    for (int t = 0; t < 12; ++t) {
      seed = seed * 1103515245u + 12345u;
      line += " term_with_a_longer_name_" + std::to_string(seed % 97) + " +";
    }
    line += " 1 ;";
    const std::vector<std::string> toks = tokenize(line);
    size_t at = 0;
    const std::unique_ptr<Node> ast = parse(toks, at, 0);
    total += check(*ast);
    symbols[toks[1]] += static_cast<long>(at);
  }
  std::printf("%zu %zu\n", total, symbols.size());
  return 0;
}
