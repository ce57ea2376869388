#include "artel/cli/plan_calibrate.h"

#include <CLI/CLI.hpp>
#include <chrono>
#include <iostream>
#include <string>
#include <vector>

#include "artel/cli/machine_calibration.h"
#include "artel/cli/parse_flags.h"
#include "artel/core/error.h"
#include "artel/core/regular_file.h"
#include "artel/train/checkpoint_format.h"

namespace artel::cli {

int run_plan_calibrate(int argc, char** argv) {
  std::string out;
  int workers = 0;
  std::vector<std::string> workloads = CalibrationOptions{}.workloads;
  CLI::App app{"Measure this machine's GEMM rates by shape, fused attention, memory bandwidth, shared-memory link and "
               "a worker's own memory, and write them as a cluster file for `artel plan --cluster`.",
               "artel plan calibrate"};
  app.add_option("--out", out, "write the cluster file here [stdout]");
  app.add_option("--workers", workers,
                 "workers_per_host of the file: the most `artel plan --workers` can ask of it; more than the cores "
                 "share them [the cores]");
  app.add_option("--workloads", workloads, "the GPTs whose products are timed: w2, gpt-50m, gpt2 [all three]");
  int hosts = 1;
  std::string hosts_command;
  app.add_option("--hosts", hosts,
                 "a cluster harness of this many hosts on this machine, sharing its cores (with --hosts-command) [1]");
  app.add_option("--hosts-command", hosts_command,
                 "the launcher that runs a command on the harness's hosts, {ranks} standing for the ranks of each "
                 "host, e.g. 'scripts/cluster.sh --rate 1gbit --ranks {ranks} --': the links are then MPI "
                 "all-reduces through it");
  app.footer("example:\n  artel plan calibrate --out this_machine.json\n"
             "docs/PLAN.md says what is measured and how the planner uses it.");
  if (!parse_flags(app, argc, argv, "see `artel plan calibrate --help`")) return 0;
  ARTEL_CHECK(workers >= 0, "--workers must be >= 1 (or left out: the cores), got ", workers);
  require(hosts >= 1, "give --hosts 1 or more", "--hosts must be >= 1, got ", hosts);
  require((hosts > 1) == !hosts_command.empty(), "give --hosts N (N >= 2) together with --hosts-command CMD",
          "--hosts and --hosts-command go together");
  require(hosts_command.empty() || hosts_command.find("{ranks}") != std::string::npos,
          "write {ranks} where the launcher takes each host's ranks (e.g. --ranks {ranks})",
          "--hosts-command has no {ranks}");
  for (const std::string& w : workloads)
    if (w != "w2" && w != "gpt-50m" && w != "gpt2")
      throw Error("unknown workload '" + w + "' for --workloads", "use w2, gpt-50m or gpt2");

  if (!out.empty()) check_writable(out, "cluster file");  // a minute of measuring must not end in "cannot write"

  std::string command = "artel plan calibrate";
  for (int i = 1; i < argc; ++i) command += std::string(" ") + argv[i];
  const auto start = std::chrono::steady_clock::now();
  const plan::Cluster cluster = calibrate_machine(this_machine_facts(command), {.workers = workers, .workloads = workloads, .hosts = hosts, .hosts_command = hosts_command});
  const std::string text = plan::to_json(cluster).dump(2) + "\n";
  if (out.empty()) {
    std::cout << text;
  } else {
    // Whole or not at all: a cluster file already there stays until the new one is complete.
    train::write_atomically(out, [&](int fd, const std::string& tmp) { train::write_all(fd, text.data(), text.size(), tmp); });
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cerr << "calibrated " << cluster.device.gemm_table.size() << " GEMM shapes, memory bandwidth "
            << cluster.device.memory_bandwidth.value / 1e9 << " GB/s, link beta " << cluster.intra_host.beta.value / 1e9
            << " GB/s" << (hosts > 1 ? ", inter-host beta " + std::to_string(cluster.inter_host.beta.value / 1e9) + " GB/s" : "")
            << " in " << static_cast<int>(seconds) << " s" << (out.empty() ? "" : " -> " + out) << "\n";
  return 0;
}

}  // namespace artel::cli
