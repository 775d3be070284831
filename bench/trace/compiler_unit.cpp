// A fixed translation unit whose compile `make bench-trace` records (`allockit record
// --follow-forks`) and replays against every allocator: the C++ compiler proper (cc1plus) parsing
// the standard library's headers and instantiating its templates, a compiler's allocation pattern
// (many classes of small nodes, most freed together at the end of each phase) as the held-out
// compiler trace of issue 10 shows it. Its input is this file and the system's headers, so the
// trace stays the same from one build of allockit to the next. It is never built.
#include <algorithm>
#include <iostream>
#include <map>
#include <regex>
#include <string>
#include <unordered_map>
#include <vector>

int main(int argc, char** argv) {
  std::vector<std::string> words(argv, argv + argc);
  std::map<std::string, int> counts;
  std::unordered_map<std::string, std::vector<int>> at;
  const std::regex word("[a-z]+");
  for (int i = 0; i < argc; ++i)
    if (std::regex_match(words[i], word)) ++counts[words[i]], at[words[i]].push_back(i);
  std::sort(words.begin(), words.end());
  for (auto& [w, n] : counts) std::cout << w << ' ' << n << ' ' << at[w].size() << '\n';
}
