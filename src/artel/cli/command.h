// The `artel` program's subcommands. Each lives in its own file and registers
// itself, so adding a command touches nothing else:
//
//   static const bool kLaunchRegistered = artel::cli::register_command(
//       "launch", "start N workers (like torchrun)", run_launch);
//
// The program compiles as one translation unit (CMakeLists.txt), so a
// command's file-local names carry its name.
#pragma once

#include <string>
#include <vector>

namespace artel::cli {

// argv[0] is the subcommand's name; returns the process exit code.
using CommandFn = int (*)(int argc, char** argv);

bool register_command(const std::string& name, const std::string& help, CommandFn fn);

struct Command {
  std::string name, help;
  CommandFn fn;
};
const std::vector<Command>& commands();

// Writes "artel COMMAND: error: MESSAGE" and a newline to stderr in one
// write(): the workers of one mpirun share the terminal, and a line written
// piece by piece (as `std::cerr << a << b` does) came out interleaved with
// another rank's ("artel artel train: error: train..."). Under mpirun or
// srun with several ranks the line starts with "[rankR]: ".
void say_error(const std::string& command, const std::string& message);

}  // namespace artel::cli
