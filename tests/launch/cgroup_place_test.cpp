// Finding the memory and cpu controllers from a fake /proc/self/cgroup and a fake
// mount root (a temporary directory holding the files the kernel would show).
#include "artel/launch/cgroup_place.h"

#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "artel/core/error.h"
#include "launch/artel_process.h"

namespace artel::launch {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

void touch(const fs::path& file, const std::string& text = "") {
  fs::create_directories(file.parent_path());
  std::ofstream(file) << text;
}

// /proc/self/cgroup of a Debian 12 VM with systemd's hybrid layout (this project's CI machines).
constexpr const char* kHybrid =
    "9:name=systemd:/\n8:pids:/\n4:memory:/process_api/a934\n3:cpuset:/\n1:cpu:/\n0::/\n";

TEST(CgroupPlace, FindsTheV1MemoryHierarchyAndOwnCgroup) {
  testing::TempDir root;
  touch(fs::path(root.path()) / "memory/memory.limit_in_bytes");
  fs::create_directories(fs::path(root.path()) / "memory/process_api/a934");
  CgroupPlace p = find_cgroup(Controller::kMemory, kHybrid, root.path());
  EXPECT_EQ(p.version, 1);
  EXPECT_EQ(p.hierarchy, fs::path(root.path()) / "memory");
  EXPECT_EQ(p.own, fs::path(root.path()) / "memory/process_api/a934");
}

TEST(CgroupPlace, V1OwnCgroupMissingFallsBackToTheRoot) {
  // A container that mounts its own cgroup as the hierarchy's root still shows the host's path.
  testing::TempDir root;
  touch(fs::path(root.path()) / "memory/memory.limit_in_bytes");
  CgroupPlace p = find_cgroup(Controller::kMemory, kHybrid, root.path());
  EXPECT_EQ(p.own, fs::path(root.path()) / "memory");
}

TEST(CgroupPlace, V1ControllersMountedTogether) {
  testing::TempDir root;
  touch(fs::path(root.path()) / "cpu,memory/memory.limit_in_bytes");
  fs::create_directories(fs::path(root.path()) / "cpu,memory/job");
  CgroupPlace p = find_cgroup(Controller::kMemory, "3:cpu,memory:/job\n0::/\n", root.path());
  EXPECT_EQ(p.version, 1);
  EXPECT_EQ(p.own, fs::path(root.path()) / "cpu,memory/job");
}

TEST(CgroupPlace, FindsTheUnifiedHierarchyWithMemory) {
  testing::TempDir root;
  touch(fs::path(root.path()) / "cgroup.controllers", "cpuset cpu io memory hugetlb pids rdma misc\n");
  fs::create_directories(fs::path(root.path()) / "user.slice/session-1.scope");
  CgroupPlace p = find_cgroup(Controller::kMemory, "0::/user.slice/session-1.scope\n", root.path());
  EXPECT_EQ(p.version, 2);
  EXPECT_EQ(p.hierarchy, fs::path(root.path()));
  EXPECT_EQ(p.own, fs::path(root.path()) / "user.slice/session-1.scope");
}

TEST(CgroupPlace, V2AtTheRoot) {
  testing::TempDir root;
  touch(fs::path(root.path()) / "cgroup.controllers", "memory pids\n");
  CgroupPlace p = find_cgroup(Controller::kMemory, "0::/\n", root.path());
  EXPECT_EQ(p.version, 2);
  EXPECT_EQ(p.own, fs::path(root.path()));
}

TEST(CgroupPlace, FindsTheV1CpuHierarchyMountedWithCpuacct) {
  // systemd's usual v1 layout: cpu and cpuacct together at cpu,cpuacct (and not cpuset, which also starts with "cpu").
  testing::TempDir root;
  touch(fs::path(root.path()) / "cpu,cpuacct/cpu.cfs_quota_us");
  fs::create_directories(fs::path(root.path()) / "cpu,cpuacct/job");
  CgroupPlace p = find_cgroup(Controller::kCpu, "5:cpuset:/other\n4:cpu,cpuacct:/job\n0::/\n", root.path());
  EXPECT_EQ(p.version, 1);
  EXPECT_EQ(p.hierarchy, fs::path(root.path()) / "cpu,cpuacct");
  EXPECT_EQ(p.own, fs::path(root.path()) / "cpu,cpuacct/job");
}

TEST(CgroupPlace, FindsTheV1CpuHierarchyOfThisProjectsMachines) {
  testing::TempDir root;
  touch(fs::path(root.path()) / "cpu/cpu.cfs_quota_us");
  CgroupPlace p = find_cgroup(Controller::kCpu, kHybrid, root.path());
  EXPECT_EQ(p.version, 1);
  EXPECT_EQ(p.own, fs::path(root.path()) / "cpu");
}

TEST(CgroupPlace, FindsCpuInTheUnifiedHierarchy) {
  testing::TempDir root;
  touch(fs::path(root.path()) / "cgroup.controllers", "cpuset cpu io memory pids\n");
  CgroupPlace p = find_cgroup(Controller::kCpu, "0::/\n", root.path());
  EXPECT_EQ(p.version, 2);
  EXPECT_EQ(p.own, fs::path(root.path()));
}

TEST(CgroupPlace, NoCpuControllerIsAnErrorNamingTheAlternative) {
  testing::TempDir root;
  touch(fs::path(root.path()) / "cgroup.controllers", "cpuset memory pids\n");  // v2 without cpu
  try {
    find_cgroup(Controller::kCpu, "0::/\n", root.path());
    ADD_FAILURE() << "found";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("cannot limit each worker's CPU: no cgroup cpu controller"));
    EXPECT_THAT(e.what(), HasSubstr("--bind-to core"));
  }
}

std::string error_of(const std::string& proc_self_cgroup, const std::string& root) {
  try {
    find_cgroup(Controller::kMemory, proc_self_cgroup, root);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(CgroupPlace, NoMemoryControllerIsAnErrorNamingTheAlternative) {
  testing::TempDir root;
  touch(fs::path(root.path()) / "cgroup.controllers", "cpu pids\n");  // v2 without memory
  std::string e = error_of("0::/\n", root.path());
  EXPECT_THAT(e, HasSubstr("cannot limit each worker's memory: no cgroup memory controller"));
  EXPECT_THAT(e, HasSubstr("prlimit --as"));
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  EXPECT_THAT(error_of("", root.path()), HasSubstr("no cgroup memory controller"));
}

TEST(CgroupPlace, V1LineWithoutItsMountIsAnError) {
  testing::TempDir root;
  EXPECT_THAT(error_of(kHybrid, root.path()), HasSubstr("has no memory.limit_in_bytes"));
}

}  // namespace
}  // namespace artel::launch
