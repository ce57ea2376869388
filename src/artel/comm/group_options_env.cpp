#include <cstdlib>
#include <string>

#include "artel/comm/process_group.h"

namespace artel::comm {
namespace {

int env_int(const char* name) {
  const char* v = std::getenv(name);
  if (!v) throw Error(std::string(name) + " is not set", "start workers with `artel launch`, which sets ARTEL_RANK, ARTEL_WORLD_SIZE and ARTEL_JOB_ID");
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  if (*v == '\0' || *end != '\0' || x < 0 || x > 1 << 20)
    throw Error(std::string(name) + "='" + v + "' is not a non-negative integer");
  return static_cast<int>(x);
}

}  // namespace

GroupOptions group_options_from_env(GroupOptions base) {
  base.rank = env_int("ARTEL_RANK");
  base.world_size = env_int("ARTEL_WORLD_SIZE");
  const char* job = std::getenv("ARTEL_JOB_ID");
  if (!job) throw Error("ARTEL_JOB_ID is not set", "start workers with `artel launch`, which sets it");
  base.job_id = job;
  return base;
}

bool launched_as_worker() { return std::getenv("ARTEL_RANK") && std::getenv("ARTEL_WORLD_SIZE"); }

}  // namespace artel::comm
