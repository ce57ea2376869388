#include "artel/launch/worker_env.h"

#include <map>

#include <gtest/gtest.h>

#include "artel/core/error.h"

namespace artel::launch {
namespace {

EnvLookup fake(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

std::map<std::string, std::string> full() {
  return {{"ARTEL_RANK", "2"},       {"ARTEL_WORLD_SIZE", "4"}, {"ARTEL_LOCAL_RANK", "2"},
          {"ARTEL_JOB_ID", "77-1-ab"}, {"ARTEL_NUM_THREADS", "3"}, {"ARTEL_RESTART_COUNT", "1"}};
}

TEST(WorkerEnv, NotLaunchedIsNullopt) { EXPECT_FALSE(read_worker_env(fake({})).has_value()); }

TEST(WorkerEnv, ReadsEveryVariable) {
  auto env = read_worker_env(fake(full()));
  ASSERT_TRUE(env.has_value());
  EXPECT_EQ(env->rank, 2);
  EXPECT_EQ(env->world_size, 4);
  EXPECT_EQ(env->local_rank, 2);
  EXPECT_EQ(env->job_id, "77-1-ab");
  EXPECT_EQ(env->num_threads, 3);
  EXPECT_EQ(env->restart_count, 1);
}

TEST(WorkerEnv, OptionalVariablesHaveDefaults) {
  auto env = read_worker_env(fake({{"ARTEL_RANK", "1"}, {"ARTEL_WORLD_SIZE", "2"}, {"ARTEL_JOB_ID", "j"}}));
  ASSERT_TRUE(env.has_value());
  EXPECT_EQ(env->local_rank, 1);
  EXPECT_FALSE(env->num_threads.has_value());
  EXPECT_EQ(env->restart_count, 0);
}

void expect_error(std::map<std::string, std::string> vars, const std::string& fragment) {
  try {
    read_worker_env(fake(std::move(vars)));
    ADD_FAILURE() << "no error; expected one mentioning " << fragment;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(WorkerEnv, RejectsBadValues) {
  auto with = [](const char* name, const char* value) {
    auto v = full();
    v[name] = value;
    return v;
  };
  expect_error(with("ARTEL_RANK", "4"), "ARTEL_RANK=4 is out of range [0, 3]");
  expect_error(with("ARTEL_RANK", "-1"), "ARTEL_RANK=-1 is out of range");
  expect_error(with("ARTEL_RANK", "1x"), "ARTEL_RANK='1x' is not an integer");
  expect_error(with("ARTEL_WORLD_SIZE", "0"), "ARTEL_WORLD_SIZE=0");
  expect_error(with("ARTEL_WORLD_SIZE", ""), "ARTEL_WORLD_SIZE='' is not an integer");
  expect_error(with("ARTEL_LOCAL_RANK", "9"), "ARTEL_LOCAL_RANK=9");
  expect_error(with("ARTEL_NUM_THREADS", "0"), "ARTEL_NUM_THREADS=0");
  expect_error(with("ARTEL_RESTART_COUNT", "-2"), "ARTEL_RESTART_COUNT=-2");
  expect_error(with("ARTEL_JOB_ID", "a/b"), "ARTEL_JOB_ID='a/b'");
  expect_error(with("ARTEL_JOB_ID", ""), "ARTEL_JOB_ID=''");
}

TEST(WorkerEnv, PartialEnvironmentNamesTheMissingVariable) {
  auto v = full();
  v.erase("ARTEL_JOB_ID");
  expect_error(v, "ARTEL_JOB_ID is not set");
  expect_error({{"ARTEL_NUM_THREADS", "2"}}, "ARTEL_WORLD_SIZE is not set");
}

}  // namespace
}  // namespace artel::launch
