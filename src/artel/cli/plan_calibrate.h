// `artel plan calibrate [--out FILE.json] [--workers N]`: measure this machine
// (cli/machine_calibration.h) and write it as a cluster file for `artel plan
// --cluster`, every number with its source. About a minute on 2 quiet cores.
//
//   artel plan calibrate --out this_machine.json
//   artel plan --model gpt --cluster this_machine.json --workers 2 --global-batch 12
#pragma once

namespace artel::cli {

// argv[0] is "calibrate"; returns the exit code.
int run_plan_calibrate(int argc, char** argv);

}  // namespace artel::cli
