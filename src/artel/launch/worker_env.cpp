#include "artel/launch/worker_env.h"

#include <charconv>
#include <cstdlib>

#include "artel/core/error.h"

namespace artel::launch {
namespace {

constexpr const char* kLaunchedHint = "these are set by `artel launch`; unset them to run a single process";

int parse_int(const char* name, const std::string& text, int min, int max) {
  int value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end)
    throw Error(detail::concat(name, "='", text, "' is not an integer"), kLaunchedHint);
  if (value < min || value > max)
    throw Error(detail::concat(name, "=", value, " is out of range [", min, ", ", max, "]"), kLaunchedHint);
  return value;
}

std::string require(const EnvLookup& lookup, const char* name) {
  auto value = lookup(name);
  if (!value) throw Error(detail::concat(name, " is not set, but other ARTEL_* launch variables are"), kLaunchedHint);
  return *value;
}

void check_job_id(const std::string& id) {
  bool ok = !id.empty() && id.size() <= 200;
  for (char c : id)
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                c == '_' || c == '-');
  if (!ok)
    throw Error(detail::concat(kEnvJobId, "='", id, "' must be 1 to 200 characters of [A-Za-z0-9._-]"), kLaunchedHint);
}

}  // namespace

std::optional<std::string> process_env(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

std::optional<WorkerEnv> read_worker_env(const EnvLookup& lookup) {
  const char* all[] = {kEnvRank, kEnvWorldSize, kEnvLocalRank, kEnvJobId, kEnvNumThreads, kEnvRestartCount};
  bool any = false;
  for (const char* name : all) any = any || lookup(name).has_value();
  if (!any) return std::nullopt;

  constexpr int kMax = 1 << 24;
  WorkerEnv env;
  env.world_size = parse_int(kEnvWorldSize, require(lookup, kEnvWorldSize), 1, kMax);
  env.rank = parse_int(kEnvRank, require(lookup, kEnvRank), 0, env.world_size - 1);
  env.job_id = require(lookup, kEnvJobId);
  check_job_id(env.job_id);
  auto local = lookup(kEnvLocalRank);
  env.local_rank = local ? parse_int(kEnvLocalRank, *local, 0, env.world_size - 1) : env.rank;
  if (auto threads = lookup(kEnvNumThreads)) env.num_threads = parse_int(kEnvNumThreads, *threads, 1, 1 << 16);
  if (auto restarts = lookup(kEnvRestartCount)) env.restart_count = parse_int(kEnvRestartCount, *restarts, 0, kMax);
  return env;
}

}  // namespace artel::launch
