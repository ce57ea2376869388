// LaunchConfig checks and the environment each worker gets, in process.
#include "artel/launch/launcher.h"

#include <algorithm>

#include <gtest/gtest.h>

#include "artel/core/error.h"
#include "artel/core/threads.h"
#include "artel/launch/attempt.h"
#include "artel/launch/core_binding.h"

namespace artel::launch {
namespace {

LaunchConfig valid() {
  LaunchConfig c;
  c.command = {"true"};
  c.nproc = 2;
  return c;
}

void expect_invalid(const LaunchConfig& c, const std::string& fragment) {
  try {
    c.validate();
    ADD_FAILURE() << "accepted; expected an error mentioning " << fragment;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(LaunchConfig, ChecksEveryField) {
  EXPECT_NO_THROW(valid().validate());
  auto c = valid();
  c.command.clear();
  expect_invalid(c, "no command to launch");
  c = valid();
  c.nproc = 0;
  expect_invalid(c, "-n) must be in [1, 4096], got 0");
  c = valid();
  c.max_restarts = -1;
  expect_invalid(c, "--max-restarts must be >= 0, got -1");
  c = valid();
  c.threads = 0;
  expect_invalid(c, "--threads must be in [1, 65536], got 0");
  c = valid();
  c.grace_s = 0;
  expect_invalid(c, "--timeout-grace");
  c = valid();
  c.memory_per_worker = 1000;
  expect_invalid(c, "--memory-per-worker must be at least 1 MiB, got 1000 bytes");
  c.memory_per_worker = 1 << 20;
  EXPECT_NO_THROW(c.validate());
}

TEST(LaunchConfig, SplitsTheCoresUnlessToldOtherwise) {
  auto c = valid();
  c.nproc = 1;
  EXPECT_EQ(c.threads_per_worker(), available_cores());
  c.nproc = 1000;
  EXPECT_EQ(c.threads_per_worker(), 1);
  c.threads = 7;
  EXPECT_EQ(c.threads_per_worker(), 7);
}

TEST(CoreBinding, GivesEachWorkerItsOwnRunOfCoresWhenTheyFit) {
  using Cores = std::vector<std::vector<int>>;
  EXPECT_EQ(core_binding(2, 1, {0, 1}), (Cores{{0}, {1}}));
  EXPECT_EQ(core_binding(2, 2, {0, 2, 4, 6, 8}), (Cores{{0, 2}, {4, 6}}));  // the allowed ids, not 0..n-1
  EXPECT_EQ(core_binding(1, 1, {3}), (Cores{{3}}));
  EXPECT_EQ(core_binding(4, 1, {0, 1}), (Cores(4))) << "oversubscribed workers stay unbound";
  EXPECT_EQ(core_binding(2, 2, {0, 1, 2}), (Cores(2)));
}

TEST(Launcher, JobIdsDifferBetweenAttempts) {
  std::string a = make_job_id(0), b = make_job_id(1), c = make_job_id(1);
  EXPECT_NE(a, b);
  EXPECT_NE(b, c);  // the random part: a relaunch with the same pid and attempt differs too
  EXPECT_EQ(b.substr(0, b.find('-')), std::to_string(::getpid()));
}

TEST(Launcher, WorkerEnvironmentReplacesInheritedLaunchVariables) {
  ::setenv("ARTEL_RANK", "5", 1);  // as if this process were itself a launched worker
  ::setenv("ARTEL_LAUNCH_TEST_KEEP", "yes", 1);
  auto c = valid();
  c.nproc = 3;
  c.threads = 2;
  auto env = worker_environment(c, {4, "job-x"}, 1);
  auto has = [&](const std::string& kv) { return std::count(env.begin(), env.end(), kv); };
  EXPECT_EQ(has("ARTEL_RANK=1"), 1);
  EXPECT_EQ(has("ARTEL_RANK=5"), 0);
  EXPECT_EQ(has("ARTEL_WORLD_SIZE=3"), 1);
  EXPECT_EQ(has("ARTEL_LOCAL_RANK=1"), 1);
  EXPECT_EQ(has("ARTEL_JOB_ID=job-x"), 1);
  EXPECT_EQ(has("ARTEL_NUM_THREADS=2"), 1);
  EXPECT_EQ(has("ARTEL_RESTART_COUNT=4"), 1);
  EXPECT_EQ(has("ARTEL_LAUNCH_TEST_KEEP=yes"), 1);
  ::unsetenv("ARTEL_RANK");
}

TEST(Launcher, WorkerEnvironmentCarriesTheMemoryLimitOnlyWhenSet) {
  ::setenv("ARTEL_MEMORY_LIMIT", "123", 1);  // inherited: never passed on as it is
  auto c = valid();
  auto count = [](const std::vector<std::string>& env, const std::string& prefix) {
    return std::count_if(env.begin(), env.end(), [&](const std::string& kv) { return kv.rfind(prefix, 0) == 0; });
  };
  EXPECT_EQ(count(worker_environment(c, {0, "j"}, 0), "ARTEL_MEMORY_LIMIT="), 0);
  c.memory_per_worker = 3LL << 30;
  auto env = worker_environment(c, {0, "j"}, 0);
  EXPECT_EQ(count(env, "ARTEL_MEMORY_LIMIT="), 1);
  EXPECT_EQ(count(env, "ARTEL_MEMORY_LIMIT=3221225472"), 1);
  ::unsetenv("ARTEL_MEMORY_LIMIT");
}

TEST(Launcher, CurrentExecutableIsThisTest) {
  std::string exe = current_executable();
  EXPECT_NE(exe.find("artel_launch_tests"), std::string::npos) << exe;
}

}  // namespace
}  // namespace artel::launch
