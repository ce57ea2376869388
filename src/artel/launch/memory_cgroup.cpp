#include "artel/launch/memory_cgroup.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "artel/core/error.h"

namespace artel::launch {
namespace {

namespace fs = std::filesystem;

// Writes text to a cgroup file; "" or the reason it failed (the kernel's
// errno for a value it refuses comes from write()).
std::string write_file(const fs::path& file, const std::string& text) {
  int fd = ::open(file.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return std::strerror(errno);
  ssize_t n = ::write(fd, text.data(), text.size());
  int e = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(text.size())) return n < 0 ? std::strerror(e) : "short write";
  return "";
}

std::string read_file(const fs::path& file) {
  std::ifstream in(file);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The value after `key` on its line of a "key value" file; -1 when absent.
long long keyed_value(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  for (std::string k; in >> k;) {
    long long v = -1;
    if (!(in >> v)) return -1;
    if (k == key) return v;
  }
  return -1;
}

[[noreturn]] void fail(const std::string& what) {
  throw Error("cannot limit each worker's memory: " + what, kNoCgroupHint);
}

// cgroup v2 gives a child the memory controller only when its parent lists
// it in cgroup.subtree_control.
void enable_memory_for_children(const fs::path& dir) {
  std::string enabled = read_file(dir / "cgroup.subtree_control");
  std::istringstream in(enabled);
  for (std::string c; in >> c;)
    if (c == "memory") return;
  std::string e = write_file(dir / "cgroup.subtree_control", "+memory");
  if (!e.empty()) fail("writing +memory to " + (dir / "cgroup.subtree_control").string() + ": " + e);
}

// Empty artel-<pid>-* cgroups in dir whose launcher no longer runs.
void remove_stale(const fs::path& dir) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::string name = entry.path().filename().string();
    long pid = 0;
    if (std::sscanf(name.c_str(), "artel-%ld-", &pid) != 1 || pid <= 0) continue;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    ::rmdir(entry.path().c_str());  // fails, harmlessly, while processes are in it
  }
}

}  // namespace

CgroupParent prepare_cgroup_parent(const CgroupPlace& place) {
  std::vector<fs::path> candidates{place.own};
  if (place.own != place.hierarchy) candidates.push_back(place.hierarchy);
  std::string why_not;
  for (const fs::path& dir : candidates) {
    CgroupParent parent{place.version, dir};
    try {
      // The cheapest proof that workers' cgroups will work here: make one.
      MemoryCgroup probe = MemoryCgroup::create(parent, "artel-" + std::to_string(::getpid()) + "-probe", 64 << 20);
      std::string e = probe.remove();
      if (!e.empty()) fail(e);
      remove_stale(dir);
      return parent;
    } catch (const Error& e) {
      if (why_not.empty()) why_not = e.what();  // the own cgroup's reason: the more telling one
    }
  }
  // The first failure, hint included, is the message.
  throw Error(why_not);
}

MemoryCgroup MemoryCgroup::create(const CgroupParent& parent, const std::string& name, int64_t limit_bytes) {
  if (parent.version == 2) enable_memory_for_children(parent.dir);
  fs::path path = parent.dir / name;
  if (::mkdir(path.c_str(), 0755) != 0) {
    // A name left by an earlier launcher with our pid that was killed: reuse is safe once it is empty.
    if (errno != EEXIST || ::rmdir(path.c_str()) != 0 || ::mkdir(path.c_str(), 0755) != 0) {
      int e = errno;
      fail("cannot create a cgroup in " + parent.dir.string() + ": " + std::strerror(e));
    }
  }
  MemoryCgroup cg(parent.version, path, limit_bytes, -1);  // from here on, failures remove it
  std::string bytes = std::to_string(limit_bytes);
  std::vector<std::pair<std::string, std::string>> limits;
  if (parent.version == 2) limits = {{"memory.max", bytes}, {"memory.swap.max", "0"}};
  else limits = {{"memory.limit_in_bytes", bytes}, {"memory.memsw.limit_in_bytes", bytes}};
  for (size_t i = 0; i < limits.size(); ++i) {
    fs::path file = path / limits[i].first;
    // Swap is limited when the kernel accounts it (the second file exists); the first is required.
    std::error_code ec;
    if (i > 0 && !fs::exists(file, ec)) continue;
    std::string e = write_file(file, limits[i].second);
    if (!e.empty()) fail("writing " + limits[i].second + " to " + file.string() + ": " + e);
  }
  cg.procs_fd_ = ::open((path / "cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
  if (cg.procs_fd_ < 0) {
    int e = errno;
    fail("cannot open " + (path / "cgroup.procs").string() + ": " + std::strerror(e));
  }
  return cg;
}

MemoryCgroup::MemoryCgroup(MemoryCgroup&& other) noexcept
    : version_(other.version_), path_(std::move(other.path_)), limit_(other.limit_), procs_fd_(other.procs_fd_) {
  other.path_.clear();
  other.procs_fd_ = -1;
}

MemoryCgroup::~MemoryCgroup() { (void)remove(); }

bool MemoryCgroup::oom_killed() const {
  if (path_.empty()) return false;
  if (version_ == 2) return keyed_value(read_file(path_ / "memory.events"), "oom_kill") > 0;
  long long kills = keyed_value(read_file(path_ / "memory.oom_control"), "oom_kill");  // Linux >= 4.13
  if (kills >= 0) return kills > 0;
  return std::strtoll(read_file(path_ / "memory.failcnt").c_str(), nullptr, 10) > 0;
}

std::string MemoryCgroup::remove() {
  if (procs_fd_ >= 0) ::close(procs_fd_);
  procs_fd_ = -1;
  if (path_.empty()) return "";
  // A process still inside (a worker's child that outlived it) keeps the
  // directory busy: kill it, then wait a little for the kernel to let go.
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::seconds(2);
  for (;;) {
    if (::rmdir(path_.c_str()) == 0 || errno == ENOENT) break;
    int e = errno;
    if (e != EBUSY || Clock::now() >= deadline)
      return "cannot remove the cgroup " + path_.string() + ": " + std::strerror(e);
    std::istringstream procs(read_file(path_ / "cgroup.procs"));
    for (long pid = 0; procs >> pid;) ::kill(static_cast<pid_t>(pid), SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  path_.clear();
  return "";
}

}  // namespace artel::launch
