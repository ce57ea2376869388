// Where this process sits in a controller's cgroup hierarchy, from the text of
// /proc/self/cgroup and the directory cgroups are mounted under (both
// arguments, so that a test can hand in fake ones without root):
//
//   cgroup v2 (one unified hierarchy): the line "0::/some/path", with the
//     controller among <mount root>/cgroup.controllers;
//   cgroup v1 (a hierarchy per controller, as on Debian 12 VMs booted with
//     systemd's hybrid layout): the line "4:memory:/some/path", mounted at
//     <mount root>/memory (or <mount root>/<its controller list>, as
//     "cpu,cpuacct").
//
//   CgroupPlace p = find_cgroup(Controller::kMemory);  // v1: {1, /sys/fs/cgroup/memory, /sys/fs/cgroup/memory/some/path}
#pragma once

#include <filesystem>
#include <string>

namespace artel::launch {

// What a worker's cgroup limits: its memory (--memory-per-worker) or its
// share of the CPUs (--cpus-per-worker).
enum class Controller { kMemory, kCpu };

// "memory", "cpu": the controller's name in /proc/self/cgroup and cgroup.controllers.
const char* controller_name(Controller c);

// What to do when cgroups cannot limit that controller.
const char* no_cgroup_hint(Controller c);

// How every message about a controller that cannot limit begins:
// "cannot limit each worker's memory: " or "... CPU: ".
std::string cannot_limit(Controller c);

struct CgroupPlace {
  int version = 0;                  // 1 or 2
  std::filesystem::path hierarchy;  // the root of the hierarchy holding the controller
  std::filesystem::path own;        // this process's cgroup in it; the root when that path is not there
                                    // (a container that mounts its own cgroup as the root)
};

// Throws artel::Error naming what is missing when no hierarchy has the controller.
CgroupPlace find_cgroup(Controller c, const std::string& proc_self_cgroup, const std::filesystem::path& mount_root);

// The same, for this process: /proc/self/cgroup under /sys/fs/cgroup.
CgroupPlace find_cgroup(Controller c);

}  // namespace artel::launch
