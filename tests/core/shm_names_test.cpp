#include "artel/core/shm_names.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <gtest/gtest.h>

namespace artel {
namespace {

bool exists(const std::string& name) {
  int fd = shm_open(name.c_str(), O_RDONLY, 0);
  if (fd < 0) return false;
  close(fd);
  return true;
}

void make(const std::string& name) {
  int fd = shm_open(name.c_str(), O_CREAT | O_RDWR, 0600);
  ASSERT_GE(fd, 0) << name;
  close(fd);
}

TEST(ShmNames, RemovesTheJobsSegmentsAndNoOneElses) {
  const std::string id = "shm-test-" + std::to_string(::getpid());
  const std::string job = shm_job_name(id);
  EXPECT_EQ(job, "/artel-" + id);
  const std::vector<std::string> mine = {job, job + ".g00ff-0"};
  const std::vector<std::string> others = {job + "x", job + "-1.g00ff-0"};  // ids that merely begin with ours
  for (const auto& n : mine) make(n);
  for (const auto& n : others) make(n);
  EXPECT_EQ(remove_job_shm(id), 2);
  for (const auto& n : mine) EXPECT_FALSE(exists(n)) << n;
  for (const auto& n : others) {
    EXPECT_TRUE(exists(n)) << n;
    shm_unlink(n.c_str());
  }
  EXPECT_EQ(remove_job_shm(id), 0);
}

}  // namespace
}  // namespace artel
