// Where this process sits in the memory controller's cgroup hierarchy, from
// the text of /proc/self/cgroup and the directory cgroups are mounted under
// (both arguments, so that a test can hand in fake ones without root):
//
//   cgroup v2 (one unified hierarchy): the line "0::/some/path", with
//     "memory" among <mount root>/cgroup.controllers;
//   cgroup v1 (a hierarchy per controller, as on Debian 12 VMs booted with
//     systemd's hybrid layout): the line "4:memory:/some/path", mounted at
//     <mount root>/memory (or <mount root>/<its controller list>).
//
//   CgroupPlace p = find_memory_cgroup();  // v1: {1, /sys/fs/cgroup/memory, /sys/fs/cgroup/memory/some/path}
#pragma once

#include <filesystem>
#include <string>

namespace artel::launch {

struct CgroupPlace {
  int version = 0;                  // 1 or 2
  std::filesystem::path hierarchy;  // the root of the hierarchy holding the memory controller
  std::filesystem::path own;        // this process's cgroup in it; the root when that path is not there
                                    // (a container that mounts its own cgroup as the root)
};

// What to do when cgroups cannot limit a worker's memory.
inline constexpr const char* kNoCgroupHint =
    "--memory-per-worker needs a writable cgroup memory controller (root, or a delegated cgroup); without one, "
    "limit each worker's address space instead: prlimit --as=BYTES artel ...";

// Throws artel::Error naming what is missing when no hierarchy has the memory
// controller.
CgroupPlace find_memory_cgroup(const std::string& proc_self_cgroup, const std::filesystem::path& mount_root);

// The same, for this process: /proc/self/cgroup under /sys/fs/cgroup.
CgroupPlace find_memory_cgroup();

}  // namespace artel::launch
