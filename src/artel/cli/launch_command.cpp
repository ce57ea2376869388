// `artel launch -n N [--max-restarts R] [--threads T] [--bind-to core|none] [--timeout-grace S]
//               [--memory-per-worker SIZE] [--cpus-per-worker F] -- CMD ARGS...`:
// starts N workers of CMD with ARTEL_RANK etc. set (see docs/LAUNCH.md). The
// work is done by artel::launch::launch; this file only turns argv into a
// LaunchConfig.
#include <CLI/CLI.hpp>

#include "artel/cli/command.h"
#include "artel/cli/parse_flags.h"
#include "artel/core/error.h"
#include "artel/launch/launcher.h"
#include "artel/launch/memory_size.h"

namespace artel::cli {
namespace {

int run_launch(int argc, char** argv) {
  launch::LaunchConfig config;
  int threads = 0;
  std::string bind_to = "none";
  std::string memory;
  double cpus = 0;
  CLI::App app{"Start N workers of a command, each told its rank (like torchrun). Workers see ARTEL_RANK, "
               "ARTEL_WORLD_SIZE, ARTEL_LOCAL_RANK, ARTEL_JOB_ID, ARTEL_NUM_THREADS, ARTEL_RESTART_COUNT (and "
               "ARTEL_MEMORY_LIMIT with --memory-per-worker, ARTEL_CPUS_PER_WORKER with --cpus-per-worker).",
               "artel launch"};
  app.add_option("-n,--nproc", config.nproc, "number of workers (>= 1)")->required();
  app.add_option("--max-restarts", config.max_restarts,
                 "after a worker fails, stop all and start them again, up to this many times (default 0)");
  auto* threads_opt = app.add_option("--threads", threads, "ARTEL_NUM_THREADS per worker (default: cores / N, at least 1)");
  app.add_option("--bind-to", bind_to, "core: each worker bound to its own T cores when N x T fit on this "
                                       "process's cores; none: unbound (default none)")
      ->check(CLI::IsMember({"core", "none"}));
  app.add_option("--timeout-grace", config.grace_s,
                 "seconds between SIGTERM and SIGKILL when stopping workers (default 5)");
  app.add_option("--memory-per-worker", memory,
                 "SIZE (3G, 512MiB, bytes): each worker in its own memory cgroup with this limit, and told it in "
                 "ARTEL_MEMORY_LIMIT (default: no limit)");
  auto* cpus_opt = app.add_option("--cpus-per-worker", cpus,
                                  "F (0.5, 2): each worker in its own cpu cgroup that allows F cores' worth of time, "
                                  "as on a machine of its own, and told it in ARTEL_CPUS_PER_WORKER (default: no limit)");
  app.add_option("command", config.command, "the command each worker runs, after `--`");
  app.footer("example: artel launch -n 4 -- sh -c 'echo rank $ARTEL_RANK of $ARTEL_WORLD_SIZE'");
  if (!parse_flags(app, argc, argv, "see `artel launch --help`; the workers' command goes after `--`")) return 0;
  if (threads_opt->count() > 0) config.threads = threads;
  config.bind_to_core = bind_to == "core";
  if (!memory.empty()) config.memory_per_worker = launch::parse_memory_size(memory);
  if (cpus_opt->count() > 0) config.cpus_per_worker = cpus;
  return launch::launch(config);
}

const bool kLaunchRegistered = register_command("launch", "start N workers of a command (like torchrun)", run_launch);

}  // namespace
}  // namespace artel::cli
