// The launcher behind `artel launch` (like torchrun): starts N workers of one
// command, tells each its rank through the environment (see worker_env.h),
// prefixes every line they print with "[rank] ", passes SIGINT/SIGTERM on, and
// fails fast: when one worker fails, the others are stopped (SIGTERM, then
// SIGKILL after a grace period) and the launcher exits with the worker's code —
// or, with max_restarts > 0, all workers are started again. With
// memory_per_worker or cpus_per_worker, each worker runs in its own cgroup
// with those limits.
// docs/LAUNCH.md has the whole story.
//
//   LaunchConfig cfg;
//   cfg.nproc = 4;
//   cfg.command = {current_executable(), "train", "--steps", "100"};
//   return launch(cfg);  // 0 when every worker exited 0
#pragma once

#include <unistd.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace artel::launch {

struct LaunchConfig {
  std::vector<std::string> command;  // argv of every worker; non-empty; command[0] is looked up on PATH
  int nproc = 1;                     // workers, in [1, kMaxWorkers]
  int max_restarts = 0;              // times to restart all workers after a failure, >= 0
  std::optional<int> threads;        // ARTEL_NUM_THREADS, >= 1; unset: max(1, cores / nproc)
  bool bind_to_core = false;         // each worker on its own cores when they fit (core_binding.h)
  double grace_s = 5.0;              // SIGTERM -> SIGKILL when stopping workers, in (0, 3600] seconds
  // Bytes each worker may use, >= 1 MiB: its own memory cgroup with this limit
  // (worker_cgroup.h) and ARTEL_MEMORY_LIMIT (core/memory_limit.h); unset: no limit.
  std::optional<int64_t> memory_per_worker;
  // CPUs' worth of time each worker may use, in [0.01, the cores this process
  // may use]: its own cpu cgroup with this quota (worker_cgroup.h) and
  // ARTEL_CPUS_PER_WORKER, so that workers sharing few cores run as on
  // machines of their own, a sleeping one leaving its share unused; unset: no limit.
  std::optional<double> cpus_per_worker;
  // Ranks whose failure the job survives (a parameter server's workers under
  // bounded or no staleness, which the servers drop): the launcher says so,
  // with `may_fail_reason`, and lets the others go on.
  std::vector<int> may_fail;
  std::string may_fail_reason;
  // What the launcher's messages call a rank that is not a plain worker
  // (rank 4 -> "parameter server 0 (rank 4)"); the others are "worker R".
  std::map<int, std::string> rank_names;
  std::string name_of(int rank) const;
  int out_fd = STDOUT_FILENO;        // where the workers' prefixed stdout lines go
  int err_fd = STDERR_FILENO;        // their stderr lines, and the launcher's own messages

  static constexpr int kMaxWorkers = 4096;

  // Throws artel::Error naming the field, its value and the allowed range.
  void validate() const;
  // The value of ARTEL_NUM_THREADS for each worker: threads, else the
  // whole cores of cpus_per_worker (at least 1), else cores / nproc.
  int threads_per_worker() const;
};

// Runs the job to the end and returns the exit code for the launcher: 0 when
// all workers exited 0 (those of may_fail aside); the failing worker's exit status, or 128 + signal when
// it was killed; 128 + signal when the launcher itself got SIGINT/SIGTERM.
// Throws artel::Error for a bad config or a command that cannot be run.
int launch(const LaunchConfig& config);

// "<launcher pid>-<attempt>-<8 random hex digits>": distinct for every attempt,
// so a restarted job never meets the shared-memory segments of the last one.
std::string make_job_id(int attempt);

// The path of the running program (/proc/self/exe), for a program that
// launches itself (`artel train --nproc N`).
std::string current_executable();

}  // namespace artel::launch
