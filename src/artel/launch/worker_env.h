// What a worker started by `artel launch` learns from its environment: its
// rank, the world size, the job id (unique per launch attempt, safe to put in a
// shared-memory segment name), its thread budget and how often the job was
// restarted. Read once, at the program's edge, and passed on as a value.
//
//   if (auto env = artel::launch::read_worker_env()) {
//     set_num_threads(env->num_threads.value_or(1));
//     if (env->restart_count > 0) resume_from_newest_checkpoint();
//   }
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace artel::launch {

// The variable names, shared by the launcher (which sets them) and the reader.
inline constexpr const char* kEnvRank = "ARTEL_RANK";
inline constexpr const char* kEnvWorldSize = "ARTEL_WORLD_SIZE";
inline constexpr const char* kEnvLocalRank = "ARTEL_LOCAL_RANK";
inline constexpr const char* kEnvJobId = "ARTEL_JOB_ID";
inline constexpr const char* kEnvNumThreads = "ARTEL_NUM_THREADS";
inline constexpr const char* kEnvRestartCount = "ARTEL_RESTART_COUNT";
// With --cpus-per-worker: the CPUs' worth of time the worker's cgroup allows.
inline constexpr const char* kEnvCpusPerWorker = "ARTEL_CPUS_PER_WORKER";

struct WorkerEnv {
  int rank = 0;                     // in [0, world_size)
  int world_size = 1;               // >= 1
  int local_rank = 0;               // rank among the workers of this host, in [0, world_size)
  std::string job_id;               // non-empty, only [A-Za-z0-9._-]
  std::optional<int> num_threads;   // >= 1; unset when the launcher left it to the worker
  int restart_count = 0;            // >= 0; > 0 means: resume from a checkpoint
};

// Looks a variable up; nullopt when it is unset.
using EnvLookup = std::function<std::optional<std::string>(const char* name)>;

// The process environment (getenv).
std::optional<std::string> process_env(const char* name);

// nullopt when none of the ARTEL_* variables above is set (not launched).
// Throws artel::Error naming the variable when one is malformed or out of range,
// or when ARTEL_RANK, ARTEL_WORLD_SIZE or ARTEL_JOB_ID is missing while others
// are set. ARTEL_LOCAL_RANK defaults to the rank, ARTEL_RESTART_COUNT to 0.
std::optional<WorkerEnv> read_worker_env(const EnvLookup& lookup = process_env);

}  // namespace artel::launch
