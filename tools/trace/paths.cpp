#include "trace/paths.hpp"

#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <stdexcept>
#include <system_error>

// Set by tools/CMakeLists.txt: the install layout relative to the installed bin directory, the
// overriding library's soname file, and the source tree (for the build tree's report package).
#ifndef AK_INSTALL_HELPER_DIR
#define AK_INSTALL_HELPER_DIR "../libexec/allockit"
#define AK_INSTALL_LIB_DIR "../lib"
#define AK_INSTALL_PYTHON_DIR "../share/allockit/python"
#define AK_LIBALLOCKIT_SONAME "liballockit.so"
#define AK_PREFIXED_SONAME "liballockit-prefixed.so"
#define AK_SOURCE_DIR "."
#endif

namespace ak::trace {

void make_output_dir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (!ec && !std::filesystem::is_directory(dir, ec))
    ec = std::make_error_code(std::errc::not_a_directory);
  if (ec)
    throw std::runtime_error(dir + ": cannot create the output directory (" + ec.message() + ")");
}

namespace {

std::string exe_dir() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  std::string p(buf, static_cast<size_t>(n));
  return p.substr(0, p.rfind('/'));
}

// dir/rel without "..": the install's folders as a user would write them.
std::string join(const std::string& dir, const char* rel) {
  std::string p = dir + "/" + rel;
  char buf[PATH_MAX];
  return realpath(p.c_str(), buf) ? std::string(buf) : p;
}

ToolPaths resolve() {
  std::string dir = exe_dir();
  ToolPaths p;
  if (access((dir + "/allockit-replay").c_str(), X_OK) == 0) {  // the build tree
    p.recorder = dir + "/liballockit_record.so";
    p.worker = dir + "/allockit-replay";
    p.liballockit = dir + "/liballockit.so";
    p.prefixed = dir + "/src/liballockit-prefixed.so";
    p.report_python = std::string(AK_SOURCE_DIR) + "/tools/report";
    return p;
  }
  std::string helpers = join(dir, AK_INSTALL_HELPER_DIR);
  p.recorder = helpers + "/liballockit_record.so";
  p.worker = helpers + "/allockit-replay";
  p.liballockit = join(dir, AK_INSTALL_LIB_DIR) + "/" AK_LIBALLOCKIT_SONAME;
  p.prefixed = join(dir, AK_INSTALL_LIB_DIR) + "/" AK_PREFIXED_SONAME;
  p.report_python = join(dir, AK_INSTALL_PYTHON_DIR);
  return p;
}

}  // namespace

const ToolPaths& tool_paths() {
  static const ToolPaths paths = resolve();
  return paths;
}

}  // namespace ak::trace
