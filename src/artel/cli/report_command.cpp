// `artel report RUN_DIR`: draws RUN_DIR/report.svg from RUN_DIR/metrics.jsonl
// (train/run_report.h) — loss, throughput, and compute against exposed
// synchronisation per step — for any run, one still writing included.
#include <filesystem>
#include <iostream>

#include <CLI/CLI.hpp>

#include "artel/cli/command.h"
#include "artel/cli/parse_flags.h"
#include "artel/core/error.h"
#include "artel/train/run_report.h"

namespace artel::cli {
namespace {

int run_report(int argc, char** argv) {
  std::string dir;
  CLI::App app{"Draw a run's report: loss, throughput, and T_comp against exposed T_sync per step.", "artel report"};
  app.add_option("run", dir, "a run directory (it holds metrics.jsonl), or its metrics.jsonl; report.svg is written beside it")->required();
  app.footer("example: artel report runs/gpt   # then open runs/gpt/report.svg");
  if (!parse_flags(app, argc, argv, "see `artel report --help`")) return 0;
  // The metrics file itself names its run: the report goes beside it.
  if (std::filesystem::path(dir).filename() == "metrics.jsonl" && std::filesystem::is_regular_file(dir))
    dir = std::filesystem::path(dir).parent_path().string();
  else if (std::filesystem::is_regular_file(dir))
    throw Error(dir + " is a file, not a run directory", "pass the --out directory of an `artel train` run");
  if (dir.empty()) dir = ".";
  const std::string written = train::write_run_report(dir);  // nothing printed when it fails
  std::cout << "wrote " << written << "\n";
  return 0;
}

const bool kReportRegistered =
    register_command("report", "`report RUN_DIR`: draw RUN_DIR/report.svg from its metrics", run_report);

}  // namespace
}  // namespace artel::cli
