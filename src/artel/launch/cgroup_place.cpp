#include "artel/launch/cgroup_place.h"

#include <fstream>
#include <sstream>
#include <vector>

#include "artel/core/error.h"

namespace artel::launch {
namespace {

namespace fs = std::filesystem;

struct CgroupLine {
  std::string controllers;  // "memory", "cpu,cpuacct", "" for v2
  std::string path;         // "/user.slice/..." 
};

// "4:memory:/a/b" -> {"memory", "/a/b"}; the path may itself hold ':'.
std::vector<CgroupLine> parse_lines(const std::string& text) {
  std::vector<CgroupLine> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    size_t first = line.find(':');
    size_t second = first == std::string::npos ? first : line.find(':', first + 1);
    if (second == std::string::npos) continue;
    lines.push_back({line.substr(first + 1, second - first - 1), line.substr(second + 1)});
  }
  return lines;
}

bool has_word(const std::string& list, const std::string& word, char sep) {
  std::istringstream in(list);
  for (std::string w; std::getline(in, w, sep);)
    if (w == word) return true;
  return false;
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// hierarchy / path, or the hierarchy itself when that cgroup is not there.
fs::path own_cgroup(const fs::path& hierarchy, const std::string& path) {
  fs::path rel = fs::path(path).relative_path();
  std::error_code ec;
  if (!rel.empty() && fs::is_directory(hierarchy / rel, ec)) return hierarchy / rel;
  return hierarchy;
}

// The file that only the controller's v1 hierarchy has.
const char* v1_marker(Controller c) { return c == Controller::kMemory ? "memory.limit_in_bytes" : "cpu.cfs_quota_us"; }

}  // namespace

std::string cannot_limit(Controller c) {
  return std::string("cannot limit each worker's ") + (c == Controller::kMemory ? "memory" : "CPU") + ": ";
}

const char* controller_name(Controller c) { return c == Controller::kMemory ? "memory" : "cpu"; }

const char* no_cgroup_hint(Controller c) {
  return c == Controller::kMemory
             ? "--memory-per-worker needs a writable cgroup memory controller (root, or a delegated cgroup); "
               "without one, limit each worker's address space instead: prlimit --as=BYTES artel ..."
             : "--cpus-per-worker needs a writable cgroup cpu controller (root, or a delegated cgroup); without "
               "one, give each worker cores of its own instead: --bind-to core with --threads";
}

CgroupPlace find_cgroup(Controller c, const std::string& proc_self_cgroup, const fs::path& mount_root) {
  const std::string name = controller_name(c);
  std::vector<CgroupLine> lines = parse_lines(proc_self_cgroup);
  std::error_code ec;
  for (const CgroupLine& l : lines) {
    if (!has_word(l.controllers, name, ',')) continue;
    for (const fs::path& h : {mount_root / l.controllers, mount_root / name})
      if (fs::exists(h / v1_marker(c), ec)) return {1, h, own_cgroup(h, l.path)};
    throw Error(cannot_limit(c) + "/proc/self/cgroup names a v1 " + name + " cgroup, but " +
                    (mount_root / name).string() + " has no " + v1_marker(c) + " (not mounted there?)",
                no_cgroup_hint(c));
  }
  for (const CgroupLine& l : lines) {
    if (!l.controllers.empty() || l.path.empty()) continue;  // "0::/path": the unified hierarchy
    std::string controllers = read_text(mount_root / "cgroup.controllers");
    for (char& ch : controllers)
      if (ch == '\n') ch = ' ';
    if (has_word(controllers, name, ' ')) return {2, mount_root, own_cgroup(mount_root, l.path)};
  }
  throw Error(cannot_limit(c) + "no cgroup " + name + " controller (no '" + name + "' line in /proc/self/cgroup, no '" +
                  name + "' in " + (mount_root / "cgroup.controllers").string() + ")",
              no_cgroup_hint(c));
}

CgroupPlace find_cgroup(Controller c) { return find_cgroup(c, read_text("/proc/self/cgroup"), "/sys/fs/cgroup"); }

}  // namespace artel::launch
