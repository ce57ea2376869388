// One worker's memory cgroup (`--memory-per-worker`), like Slurm's
// --mem-per-cpu or docker's --memory: a directory in the memory controller's
// hierarchy with a limit, which the worker joins between fork and exec, and
// which is removed once the worker has been reaped.
//
//   CgroupParent parent = prepare_cgroup_parent(find_memory_cgroup());   // once per launch; throws when unusable
//   MemoryCgroup cg = MemoryCgroup::create(parent, "artel-123-0-w1", 3ll << 30);
//   WorkerProcess::spawn(..., cg.join());   // the child writes its pid into cgroup.procs
//   ... reap the worker ...
//   if (cg.oom_killed()) ...;               // read before removing
//   cg.remove();                            // also done, quietly, by the destructor
//
// The limit: v2 memory.max (and memory.swap.max = 0); v1
// memory.limit_in_bytes (and memory.memsw.limit_in_bytes, when the kernel
// accounts swap). Every failure is an artel::Error of one line naming the file
// and the reason, with kNoCgroupHint.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "artel/launch/cgroup_place.h"
#include "artel/launch/worker_process.h"

namespace artel::launch {

// Where the workers' cgroups are made.
struct CgroupParent {
  int version = 0;            // 1 or 2
  std::filesystem::path dir;  // the launcher's own cgroup, or the hierarchy's root
};

// The launcher's own cgroup when a limited cgroup can be made in it (checked
// by making one), else the hierarchy's root (cgroup v2 allows child cgroups
// with controllers only in a cgroup without processes — the launcher is in
// its own). Removes empty artel-<pid>-* cgroups there whose launcher is gone
// (one killed by SIGKILL cannot clean up). Throws artel::Error when neither
// place works.
CgroupParent prepare_cgroup_parent(const CgroupPlace& place);

class MemoryCgroup {
 public:
  // Makes parent.dir / name with the limit. Throws artel::Error, leaving nothing behind.
  static MemoryCgroup create(const CgroupParent& parent, const std::string& name, int64_t limit_bytes);

  MemoryCgroup(MemoryCgroup&& other) noexcept;
  MemoryCgroup& operator=(MemoryCgroup&&) = delete;
  MemoryCgroup(const MemoryCgroup&) = delete;
  ~MemoryCgroup();  // remove(), its result ignored

  const std::filesystem::path& path() const { return path_; }
  int64_t limit_bytes() const { return limit_; }
  // What the child needs to join (cgroup.procs, open for writing).
  CgroupJoin join() const { return {procs_fd_, path_.string()}; }

  // Whether the kernel OOM-killed a process in it (v2: oom_kill in
  // memory.events; v1: oom_kill in memory.oom_control, or, on kernels without
  // that line, memory.failcnt > 0). Read it before remove().
  bool oom_killed() const;

  // Removes the directory. Its processes must be gone: any still there (one a
  // worker left running) are killed first. "" when removed (or already gone),
  // else why not.
  std::string remove();

 private:
  MemoryCgroup(int version, std::filesystem::path path, int64_t limit, int procs_fd)
      : version_(version), path_(std::move(path)), limit_(limit), procs_fd_(procs_fd) {}

  int version_ = 0;
  std::filesystem::path path_;  // empty once removed (or moved from)
  int64_t limit_ = 0;
  int procs_fd_ = -1;
};

}  // namespace artel::launch
