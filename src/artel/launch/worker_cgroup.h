// One worker's cgroup: `--memory-per-worker` (like Slurm's --mem-per-cpu or
// docker's --memory) and `--cpus-per-worker` (like docker's --cpus). A
// directory in a controller's hierarchy with the limits, which the worker
// joins between fork and exec, and which is removed once the worker has been
// reaped. cgroup v2 puts a process in one cgroup, holding both limits; v1 has
// a hierarchy per controller, so a worker limited in both joins two.
//
//   std::vector<CgroupParent> parents = prepare_cgroup_parents(limits);  // once per launch; throws when unusable
//   WorkerCgroup cg = WorkerCgroup::create(parents[0], "artel-123-0-w1", limits);
//   WorkerProcess::spawn(..., {cg.join()});  // the child writes its pid into cgroup.procs
//   ... reap the worker ...
//   if (cg.oom_killed()) ...;               // read before removing
//   cg.remove();                            // also done, quietly, by the destructor
//
// Memory: v2 memory.max (and memory.swap.max = 0); v1 memory.limit_in_bytes
// (and memory.memsw.limit_in_bytes, when the kernel accounts swap). CPU: a
// quota per period (v2 cpu.max; v1 cpu.cfs_quota_us and cpu.cfs_period_us),
// see cpu_quota(). Every failure is an artel::Error of one line naming the
// file and the reason, with the controller's no_cgroup_hint().
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "artel/launch/cgroup_place.h"
#include "artel/launch/worker_process.h"

namespace artel::launch {

// What each worker may use; an unset field is not limited.
struct WorkerLimits {
  std::optional<int64_t> memory_bytes;  // >= 1 MiB
  std::optional<double> cpus;           // CPUs' worth of time, > 0 (0.5: half of one core)
};

// The CFS bandwidth for `cpus`: quota_us of CPU time per period_us. The
// period is 10 ms, not the kernel's default 100 ms: a worker whose step takes
// a few ms would otherwise run at full speed for cpus × 100 ms and then stall
// for the rest, so that one step in several pays the whole wait. It grows
// where the quota would fall under the kernel's 1 ms minimum.
struct CpuQuota {
  int64_t quota_us = 0;
  int64_t period_us = 0;
};
CpuQuota cpu_quota(double cpus);

// Where the workers' cgroups are made: one hierarchy, and the controllers
// the limits need there.
struct CgroupParent {
  int version = 0;                      // 1 or 2
  std::filesystem::path dir;            // the launcher's own cgroup, or the hierarchy's root
  std::vector<Controller> controllers;  // non-empty
};

// The places the limits need: none without limits, one on cgroup v2, one per
// limited controller on v1. Each is the launcher's own cgroup when a limited
// cgroup can be made in it (checked by making one), else the hierarchy's root
// (cgroup v2 allows child cgroups with controllers only in a cgroup without
// processes — the launcher is in its own). Removes empty artel-<pid>-*
// cgroups there whose launcher is gone (one killed by SIGKILL cannot clean
// up). Throws artel::Error when a controller has no usable place.
std::vector<CgroupParent> prepare_cgroup_parents(const WorkerLimits& limits);

class WorkerCgroup {
 public:
  // Makes parent.dir / name with the limits of parent's controllers. Throws
  // artel::Error, leaving nothing behind.
  static WorkerCgroup create(const CgroupParent& parent, const std::string& name, const WorkerLimits& limits);

  WorkerCgroup(WorkerCgroup&& other) noexcept;
  WorkerCgroup& operator=(WorkerCgroup&&) = delete;
  WorkerCgroup(const WorkerCgroup&) = delete;
  ~WorkerCgroup();  // remove(), its result ignored

  const std::filesystem::path& path() const { return path_; }
  // What the child needs to join (cgroup.procs, open for writing).
  CgroupJoin join() const { return {procs_fd_, path_.string(), no_cgroup_hint(controllers_.front())}; }

  // Whether the kernel OOM-killed a process in it (v2: oom_kill in
  // memory.events; v1: oom_kill in memory.oom_control, or, on kernels without
  // that line, memory.failcnt > 0); false when it does not limit memory.
  // Read it before remove().
  bool oom_killed() const;

  // Removes the directory. Its processes must be gone: any still there (one a
  // worker left running) are killed first. "" when removed (or already gone),
  // else why not.
  std::string remove();

 private:
  WorkerCgroup(int version, std::filesystem::path path, std::vector<Controller> controllers)
      : version_(version), path_(std::move(path)), controllers_(std::move(controllers)) {}

  int version_ = 0;
  std::filesystem::path path_;  // empty once removed (or moved from)
  std::vector<Controller> controllers_;
  int procs_fd_ = -1;
};

}  // namespace artel::launch
