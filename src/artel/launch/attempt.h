// One attempt of a launched job: start all workers, pump their output, watch
// for the first failure or an interrupt, stop the rest, reap everyone. The
// restart policy around it lives in launcher.cpp.
//
//   AttemptResult r = run_attempt(config, relay, {.restart_count = 0, .job_id = make_job_id(0)});
//   if (r.outcome == AttemptResult::kWorkerFailed) ... r.rank, r.wait_status
#pragma once

#include <string>
#include <vector>

#include "artel/launch/launcher.h"

namespace artel::launch {

class SignalRelay;
struct CgroupParent;

struct AttemptSpec {
  int restart_count = 0;                 // ARTEL_RESTART_COUNT
  std::string job_id;                    // ARTEL_JOB_ID
  // With config.memory_per_worker or cpus_per_worker: where the workers' cgroups go.
  const std::vector<CgroupParent>* cgroups = nullptr;
};

struct AttemptResult {
  enum Outcome { kSucceeded, kWorkerFailed, kInterrupted };
  Outcome outcome = kSucceeded;
  int rank = -1;               // kWorkerFailed: the first worker that failed
  int wait_status = 0;         // kWorkerFailed: its wait status
  bool out_of_memory = false;  // kWorkerFailed: its memory cgroup recorded an OOM kill
  int signal = 0;              // kInterrupted: the signal the launcher received
};

// Throws artel::Error when a worker cannot be started (after stopping those
// that were). With spec.cgroups, worker r runs in its own cgroup
// artel-<launcher pid>-<restart count>-w<r> under each of them, made before
// any worker starts and removed once all have been reaped (or, on an
// exception, by RAII).
AttemptResult run_attempt(const LaunchConfig& config, SignalRelay& relay, const AttemptSpec& spec);

// The environment of worker `rank`: the launcher's own, minus any ARTEL_*
// launch variables it inherited, plus this attempt's.
std::vector<std::string> worker_environment(const LaunchConfig& config, const AttemptSpec& spec, int rank);

}  // namespace artel::launch
