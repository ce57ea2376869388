#include "artel/launch/launcher.h"

#include <limits.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

#include "artel/core/error.h"
#include "artel/core/threads.h"
#include "artel/launch/attempt.h"
#include "artel/launch/exit_status.h"
#include "artel/launch/line_prefixer.h"
#include "artel/launch/memory_size.h"
#include "artel/launch/signal_relay.h"
#include "artel/launch/worker_cgroup.h"

namespace artel::launch {
namespace {

void say(const LaunchConfig& config, std::string line) {
  line.push_back('\n');
  write_all(config.err_fd, line.data(), line.size());
}

std::string failure_text(const LaunchConfig& config, const AttemptResult& r) {
  return config.name_of(r.rank) + " " +
         (r.out_of_memory ? describe_out_of_memory(r.wait_status, config.memory_per_worker.value_or(0))
                          : describe_exit(r.wait_status));
}

}  // namespace

void LaunchConfig::validate() const {
  ARTEL_CHECK(!command.empty() && !command[0].empty(),
              "no command to launch (hint: put it after `--`, e.g. `artel launch -n 2 -- python train.py`)");
  ARTEL_CHECK(nproc >= 1 && nproc <= kMaxWorkers, "the number of workers (-n) must be in [1, ", kMaxWorkers,
              "], got ", nproc);
  ARTEL_CHECK(max_restarts >= 0, "--max-restarts must be >= 0, got ", max_restarts);
  ARTEL_CHECK(!threads || (*threads >= 1 && *threads <= 65536), "--threads must be in [1, 65536], got ",
              threads.value_or(0), " (hint: leave it out to split the cores evenly)");
  for (int r : may_fail) ARTEL_CHECK(r >= 0 && r < nproc, "a rank that may fail (", r, ") is not in [0, ", nproc, ")");
  ARTEL_CHECK(grace_s > 0 && grace_s <= 3600, "--timeout-grace must be in (0, 3600] seconds, got ", grace_s);
  if (memory_per_worker && *memory_per_worker < (1 << 20))
    throw Error("--memory-per-worker must be at least 1 MiB, got " + format_memory_size(*memory_per_worker),
                "a worker needs tens of MiB just to start; try 1G");
  if (cpus_per_worker && !(*cpus_per_worker >= 0.01 && *cpus_per_worker <= available_cores()))
    throw Error(detail::concat("--cpus-per-worker must be in [0.01, ", available_cores(),
                               "] (the cores this process may use), got ", *cpus_per_worker),
                "0.5 gives each worker half of one core's time");
}

std::string LaunchConfig::name_of(int rank) const {
  auto it = rank_names.find(rank);
  return it != rank_names.end() ? it->second : "worker " + std::to_string(rank);
}

int LaunchConfig::threads_per_worker() const {
  if (threads) return *threads;
  if (cpus_per_worker) return std::max(1, static_cast<int>(*cpus_per_worker));
  return std::max(1, available_cores() / nproc);
}

std::string make_job_id(int attempt) {
  std::random_device rd;
  char suffix[16];
  std::snprintf(suffix, sizeof suffix, "%08x", static_cast<unsigned>(rd()));
  return std::to_string(::getpid()) + "-" + std::to_string(attempt) + "-" + suffix;
}

std::string current_executable() {
  char path[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", path, sizeof path - 1);
  ARTEL_CHECK(n > 0, "cannot find the running program: readlink /proc/self/exe: ", std::strerror(errno));
  return std::string(path, static_cast<size_t>(n));
}

int launch(const LaunchConfig& config) {
  config.validate();
  // Before any worker starts: a machine without usable cgroups fails here.
  const std::vector<CgroupParent> cgroups = prepare_cgroup_parents({config.memory_per_worker, config.cpus_per_worker});
  SignalRelay relay;
  for (int attempt = 0;; ++attempt) {
    AttemptResult r = run_attempt(config, relay, {attempt, make_job_id(attempt), cgroups.empty() ? nullptr : &cgroups});
    switch (r.outcome) {
      case AttemptResult::kSucceeded:
        return 0;
      case AttemptResult::kInterrupted:
        return 128 + r.signal;
      case AttemptResult::kWorkerFailed:
        break;
    }
    if (attempt < config.max_restarts) {
      say(config, "artel launch: restarting all " + std::to_string(config.nproc) + " workers (restart " +
                      std::to_string(attempt + 1) + " of " + std::to_string(config.max_restarts) + ")");
      continue;
    }
    if (config.max_restarts > 0)
      say(config, "artel launch: giving up after " + std::to_string(config.max_restarts) + " restart" +
                      (config.max_restarts == 1 ? "" : "s") + "; the last failure: " + failure_text(config, r));
    return exit_code_of(r.wait_status);
  }
}

}  // namespace artel::launch
