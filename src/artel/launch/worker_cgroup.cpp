#include "artel/launch/worker_cgroup.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <utility>

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

[[noreturn]] void fail(Controller c, const std::string& what) {
  throw Error(cannot_limit(c) + what, no_cgroup_hint(c));
}

bool limits_memory(const std::vector<Controller>& controllers) {
  return std::find(controllers.begin(), controllers.end(), Controller::kMemory) != controllers.end();
}

// cgroup v2 gives a child a controller only when its parent lists it in
// cgroup.subtree_control.
void enable_for_children(const fs::path& dir, Controller c) {
  const std::string name = controller_name(c);
  std::istringstream enabled(read_file(dir / "cgroup.subtree_control"));
  for (std::string word; enabled >> word;)
    if (word == name) return;
  std::string e = write_file(dir / "cgroup.subtree_control", "+" + name);
  if (!e.empty()) fail(c, "writing +" + name + " to " + (dir / "cgroup.subtree_control").string() + ": " + e);
}

// The files that set controller c's limit, in the order they are written.
std::vector<std::pair<std::string, std::string>> limit_files(int version, Controller c, const WorkerLimits& limits) {
  if (c == Controller::kMemory) {
    std::string bytes = std::to_string(*limits.memory_bytes);
    if (version == 2) return {{"memory.max", bytes}, {"memory.swap.max", "0"}};
    return {{"memory.limit_in_bytes", bytes}, {"memory.memsw.limit_in_bytes", bytes}};
  }
  CpuQuota q = cpu_quota(*limits.cpus);
  if (version == 2) return {{"cpu.max", std::to_string(q.quota_us) + " " + std::to_string(q.period_us)}};
  // The period first: the kernel checks a quota against the period in force.
  return {{"cpu.cfs_period_us", std::to_string(q.period_us)}, {"cpu.cfs_quota_us", std::to_string(q.quota_us)}};
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

// The launcher's own cgroup in the hierarchy when a limited cgroup can be
// made there, else the hierarchy's root.
CgroupParent prepare_cgroup_parent(const CgroupPlace& place, const std::vector<Controller>& controllers,
                                   const WorkerLimits& limits) {
  std::vector<fs::path> candidates{place.own};
  if (place.own != place.hierarchy) candidates.push_back(place.hierarchy);
  std::string why_not;
  for (const fs::path& dir : candidates) {
    CgroupParent parent{place.version, dir, controllers};
    try {
      // The cheapest proof that workers' cgroups will work here: make one.
      WorkerCgroup probe = WorkerCgroup::create(parent, "artel-" + std::to_string(::getpid()) + "-probe", limits);
      std::string e = probe.remove();
      if (!e.empty()) fail(controllers.front(), e);
      remove_stale(dir);
      return parent;
    } catch (const Error& e) {
      if (why_not.empty()) why_not = e.what();  // the own cgroup's reason: the more telling one
    }
  }
  // The first failure, hint included, is the message.
  throw Error(why_not);
}

}  // namespace

CpuQuota cpu_quota(double cpus) {
  constexpr int64_t kPeriodUs = 10'000, kMinQuotaUs = 1'000, kMaxPeriodUs = 1'000'000;
  ARTEL_CHECK(cpus > 0, "a CPU share must be > 0, got ", cpus);
  const int64_t period =
      std::clamp(static_cast<int64_t>(std::ceil(static_cast<double>(kMinQuotaUs) / cpus)), kPeriodUs, kMaxPeriodUs);
  return {std::max(kMinQuotaUs, static_cast<int64_t>(std::llround(cpus * static_cast<double>(period)))), period};
}

std::vector<CgroupParent> prepare_cgroup_parents(const WorkerLimits& limits) {
  std::vector<std::pair<CgroupPlace, std::vector<Controller>>> places;
  for (Controller c : {Controller::kMemory, Controller::kCpu}) {
    if (c == Controller::kMemory ? !limits.memory_bytes : !limits.cpus) continue;
    CgroupPlace place = find_cgroup(c);
    // cgroup v2, or v1 controllers mounted together: one cgroup holds both limits.
    auto same = std::find_if(places.begin(), places.end(), [&](const auto& p) { return p.first.own == place.own; });
    if (same != places.end()) same->second.push_back(c);
    else places.push_back({place, {c}});
  }
  std::vector<CgroupParent> parents;
  for (const auto& [place, controllers] : places) parents.push_back(prepare_cgroup_parent(place, controllers, limits));
  return parents;
}

WorkerCgroup WorkerCgroup::create(const CgroupParent& parent, const std::string& name, const WorkerLimits& limits) {
  ARTEL_CHECK(!parent.controllers.empty(), "a worker's cgroup needs a controller to limit");
  const Controller first = parent.controllers.front();
  if (parent.version == 2)
    for (Controller c : parent.controllers) enable_for_children(parent.dir, c);
  fs::path path = parent.dir / name;
  if (::mkdir(path.c_str(), 0755) != 0) {
    // A name left by an earlier launcher with our pid that was killed: reuse is safe once it is empty.
    if (errno != EEXIST || ::rmdir(path.c_str()) != 0 || ::mkdir(path.c_str(), 0755) != 0) {
      int e = errno;
      fail(first, "cannot create a cgroup in " + parent.dir.string() + ": " + std::strerror(e));
    }
  }
  WorkerCgroup cg(parent.version, path, parent.controllers);  // from here on, failures remove it
  for (Controller c : parent.controllers) {
    std::vector<std::pair<std::string, std::string>> files = limit_files(parent.version, c, limits);
    for (size_t i = 0; i < files.size(); ++i) {
      fs::path file = path / files[i].first;
      // Swap is limited when the kernel accounts it (the memory's second file exists).
      std::error_code ec;
      if (i > 0 && c == Controller::kMemory && !fs::exists(file, ec)) continue;
      std::string e = write_file(file, files[i].second);
      if (!e.empty()) fail(c, "writing " + files[i].second + " to " + file.string() + ": " + e);
    }
  }
  cg.procs_fd_ = ::open((path / "cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
  if (cg.procs_fd_ < 0) {
    int e = errno;
    fail(first, "cannot open " + (path / "cgroup.procs").string() + ": " + std::strerror(e));
  }
  return cg;
}

WorkerCgroup::WorkerCgroup(WorkerCgroup&& other) noexcept
    : version_(other.version_),
      path_(std::move(other.path_)),
      controllers_(std::move(other.controllers_)),
      procs_fd_(other.procs_fd_) {
  other.path_.clear();
  other.procs_fd_ = -1;
}

WorkerCgroup::~WorkerCgroup() { (void)remove(); }

bool WorkerCgroup::oom_killed() const {
  if (path_.empty() || !limits_memory(controllers_)) return false;
  if (version_ == 2) return keyed_value(read_file(path_ / "memory.events"), "oom_kill") > 0;
  long long kills = keyed_value(read_file(path_ / "memory.oom_control"), "oom_kill");  // Linux >= 4.13
  if (kills >= 0) return kills > 0;
  return std::strtoll(read_file(path_ / "memory.failcnt").c_str(), nullptr, 10) > 0;
}

std::string WorkerCgroup::remove() {
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
