// `artel bench SUBJECT ...`: each benchmark subject (comm, train) lives in
// its own file and registers itself here, like the top-level commands:
//
//   static const bool kBenchTrainRegistered = artel::cli::register_bench(
//       "train", "time training steps", run_bench_train);
#pragma once

#include <string>
#include <vector>

#include "artel/cli/command.h"

namespace artel::cli {

// argv[0] is the subject's name ("comm"); returns the exit code.
bool register_bench(const std::string& name, const std::string& help, CommandFn fn);
const std::vector<Command>& bench_subjects();

}  // namespace artel::cli
