// Symbolisation through elfutils libdwfl (see symbols.hpp). Each recorded object gets a Dwfl of
// its own, reported at its recorded load bias, so objects that replaced one another at the same
// addresses (dlclose, dlopen) never clash.
#include "trace/symbols.hpp"

#include <cxxabi.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <libelf.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <tuple>

namespace ak::trace {

std::string demangle(const std::string& name) {
  if (name.rfind("_Z", 0) != 0) return name;
  int status = 0;
  char* out = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
  if (status != 0 || !out) return name;
  std::string s(out);
  std::free(out);
  return s;
}

std::string SourceFrame::label() const {
  if (function.empty() && file.empty()) {
    char off[32];
    std::snprintf(off, sizeof off, absolute ? "@0x%llx" : "+0x%llx",
                  static_cast<unsigned long long>(offset));
    return (module.empty() ? std::string("?") : module) + off;
  }
  std::string s = function.empty() ? "??" : function;
  if (!file.empty()) s += " (" + file + ":" + std::to_string(line) + ")";
  return s;
}

namespace {

std::string hex(const std::string& bytes) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (unsigned char c : bytes) s += d[c >> 4], s += d[c & 15];
  return s;
}

std::string base_name(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// The GNU build-id of the ELF file at `path` (raw bytes), empty if none or not ELF.
std::string file_build_id(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  std::string id;
  if (Elf* elf = elf_begin(fd, ELF_C_READ_MMAP, nullptr)) {
    const void* bits = nullptr;
    const ssize_t n = dwelf_elf_gnu_build_id(elf, &bits);
    if (n > 0) id.assign(static_cast<const char*>(bits), static_cast<size_t>(n));
    elf_end(elf);
  }
  close(fd);
  return id;
}

// A file whose build-id is `id`: DIR/.build-id/xx/rest[.debug], then any file under DIR.
std::string find_by_build_id(const std::string& dir, const std::string& id) {
  namespace fs = std::filesystem;
  const std::string h = hex(id);
  for (const char* suffix : {"", ".debug"}) {
    const std::string p = dir + "/.build-id/" + h.substr(0, 2) + "/" + h.substr(2) + suffix;
    if (file_build_id(p) == id) return p;
  }
  std::error_code ec;
  int budget = 20000;  // files looked at per directory, so a huge tree cannot stall a report
  for (fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec),
       end;
       !ec && it != end && budget-- > 0; it.increment(ec)) {
    if (it->is_regular_file(ec) && file_build_id(it->path().string()) == id)
      return it->path().string();
  }
  return {};
}

const Dwfl_Callbacks kCallbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .section_address = dwfl_offline_section_address,
    .debuginfo_path = nullptr,
};

// The name of a subprogram or inlined-subroutine DIE: its linkage name demangled, else its name.
std::string die_function(Dwarf_Die* die) {
  Dwarf_Attribute a;
  for (int at : {DW_AT_linkage_name, DW_AT_MIPS_linkage_name})
    if (dwarf_attr_integrate(die, at, &a))
      if (const char* s = dwarf_formstring(&a)) return demangle(s);
  if (dwarf_attr_integrate(die, DW_AT_name, &a))
    if (const char* s = dwarf_formstring(&a)) return s;
  return {};
}

}  // namespace

struct Symbolizer::Loaded {
  Dwfl* dwfl = nullptr;
  Dwfl_Module* mod = nullptr;
  std::string note;
  ~Loaded() {
    if (dwfl) dwfl_end(dwfl);
  }
};

Symbolizer::Symbolizer(std::vector<Module> modules, std::vector<std::string> debug_dirs,
                       FrameNames names)
    : debug_dirs_(std::move(debug_dirs)), names_(std::move(names)) {
  elf_version(EV_CURRENT);
  // One entry per distinct object (snapshots repeat them), latest snapshot first on a clash.
  std::stable_sort(modules.begin(), modules.end(),
                   [](const Module& a, const Module& b) { return a.time_ns > b.time_ns; });
  for (Module& m : modules) {
    const bool seen = std::any_of(modules_.begin(), modules_.end(), [&](const Module& o) {
      return o.start == m.start && o.end == m.end && o.path == m.path && o.build_id == m.build_id;
    });
    if (!seen) modules_.push_back(std::move(m));
  }
}

Symbolizer::~Symbolizer() = default;

const Module* Symbolizer::module_of(uint64_t addr) const {
  for (const Module& m : modules_)
    if (addr >= m.start && addr < m.end) return &m;
  return nullptr;
}

Symbolizer::Loaded* Symbolizer::load(const Module& m) {
  auto [it, fresh] = loaded_.try_emplace(&m);
  if (!fresh) return it->second.get();
  it->second = std::make_unique<Loaded>();
  Loaded& l = *it->second;
  std::string file;
  if (!m.path.empty() && m.path[0] == '/') {
    const std::string have = file_build_id(m.path);
    if (!have.empty() && (m.build_id.empty() || have == m.build_id)) file = m.path;
  }
  if (file.empty() && !m.build_id.empty()) {
    std::vector<std::string> dirs = debug_dirs_;
    dirs.push_back("/usr/lib/debug");
    for (const std::string& d : dirs)
      if (!(file = find_by_build_id(d, m.build_id)).empty()) break;
  }
  if (file.empty()) {
    l.note = m.path + ": no file with build-id " + hex(m.build_id) + " found; shown as " +
             base_name(m.path) + "+offset";
    return &l;
  }
  l.dwfl = dwfl_begin(&kCallbacks);
  if (l.dwfl) {
    dwfl_report_begin(l.dwfl);
    l.mod = dwfl_report_elf(l.dwfl, base_name(m.path).c_str(), file.c_str(), -1, m.bias, false);
    dwfl_report_end(l.dwfl, nullptr, nullptr);
  }
  l.note = m.path + ": symbols from " + file + (l.mod ? "" : " (unreadable)");
  return &l;
}

const std::vector<SourceFrame>& Symbolizer::frames(uint64_t ret) {
  auto [it, fresh] = cache_.try_emplace(ret);
  if (!fresh) return it->second;
  std::vector<SourceFrame>& out = it->second;
  if (auto named = names_.find(ret); named != names_.end()) {
    for (const NamedFrame& f : named->second.frames)
      out.push_back({f.function, f.file, static_cast<int>(f.line), true,
                     base_name(named->second.module), 0, false});
    if (out.empty()) out.push_back({"", "", 0, true, base_name(named->second.module), ret, true});
    out.back().inlined = false;
    return out;
  }
  const uint64_t pc = ret - 1;
  const Module* m = module_of(pc);
  SourceFrame base;
  base.module = m ? base_name(m->path) : "";
  base.offset = m ? pc - m->bias : pc;
  Loaded* l = m ? load(*m) : nullptr;
  if (!l || !l->mod) {
    out.push_back(base);
    return out;
  }
  // The function from the symbol table, the innermost file and line from the line table.
  SourceFrame inner = base;
  GElf_Off off = 0;
  GElf_Sym sym;
  if (const char* name = dwfl_module_addrinfo(l->mod, pc, &off, &sym, nullptr, nullptr, nullptr))
    inner.function = demangle(name);
  if (Dwfl_Line* line = dwfl_module_getsrc(l->mod, pc)) {
    Dwarf_Addr a;
    int lineno = 0, col = 0;
    if (const char* f = dwfl_lineinfo(line, &a, &lineno, &col, nullptr, nullptr))
      inner.file = f, inner.line = lineno;
  }
  // Inlined frames from the DWARF scopes at pc: each inlined subroutine is one frame; its call
  // site (DW_AT_call_file, DW_AT_call_line) is where the next frame out stands.
  Dwarf_Addr bias = 0;
  Dwarf_Die* cu = dwfl_module_addrdie(l->mod, pc, &bias);
  Dwarf_Die* scopes = nullptr;
  int n = cu ? dwarf_getscopes(cu, pc - bias, &scopes) : 0;
  if (n > 0) {  // the innermost scope's own chain holds the inlined instances it nests in
    Dwarf_Die inner_die = scopes[0];
    std::free(scopes);
    scopes = nullptr;
    n = dwarf_getscopes_die(&inner_die, &scopes);
  }
  Dwarf_Files* files = nullptr;
  size_t nfiles = 0;
  if (cu) dwarf_getsrcfiles(cu, &files, &nfiles);
  SourceFrame cur = inner;
  bool named = false;
  for (int i = 0; i < n; ++i) {
    const int tag = dwarf_tag(&scopes[i]);
    if (tag != DW_TAG_inlined_subroutine && tag != DW_TAG_subprogram) continue;
    const std::string fn = die_function(&scopes[i]);
    if (!fn.empty()) cur.function = fn;
    named = true;
    if (tag == DW_TAG_subprogram) break;
    cur.inlined = true;
    out.push_back(cur);
    cur = base;
    Dwarf_Attribute a;
    Dwarf_Word file_idx = 0, line = 0;
    if (dwarf_attr(&scopes[i], DW_AT_call_file, &a) && dwarf_formudata(&a, &file_idx) == 0 && files)
      if (const char* f = dwarf_filesrc(files, file_idx, nullptr, nullptr)) cur.file = f;
    if (dwarf_attr(&scopes[i], DW_AT_call_line, &a) && dwarf_formudata(&a, &line) == 0)
      cur.line = static_cast<int>(line);
    cur.function = inner.function;  // until an outer scope names it
  }
  std::free(scopes);
  if (!named) cur = inner;
  cur.inlined = false;
  out.push_back(cur);
  return out;
}

std::vector<std::string> Symbolizer::notes() const {
  std::vector<std::string> v;
  for (const auto& [m, l] : loaded_) v.push_back(l->note);
  std::sort(v.begin(), v.end());
  return v;
}

}  // namespace ak::trace
