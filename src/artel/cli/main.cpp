// artel: the program. `artel COMMAND ...` dispatches to a registered command;
// with no arguments it runs the main job (`artel train` with its defaults).
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <iostream>

#include "artel/cli/command.h"
#include "artel/core/error.h"
#include "artel/launch/line_prefixer.h"

namespace artel::cli {

namespace {
std::vector<Command>& registry() {
  static std::vector<Command> r;
  return r;
}
}  // namespace

bool register_command(const std::string& name, const std::string& help, CommandFn fn) {
  registry().push_back({name, help, fn});
  return true;
}

const std::vector<Command>& commands() { return registry(); }

namespace {
// "[rankR]: " when mpirun or srun started this process as one of several:
// their ranks share a terminal with no prefix of their own (artel launch
// prefixes every line itself, and sets ARTEL_RANK). PyTorch marks its
// ranks' errors the same way. Read from the starter's variables, so a flag
// error said before MPI starts names its rank too.
std::string rank_prefix() {
  if (std::getenv("ARTEL_RANK") != nullptr) return "";
  const char* pairs[][2] = {{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                            {"PMI_RANK", "PMI_SIZE"},
                            {"SLURM_PROCID", "SLURM_NTASKS"}};
  for (const auto& [rank, size] : pairs) {
    const char* r = std::getenv(rank);
    const char* n = std::getenv(size);
    if (r != nullptr && n != nullptr && std::atol(n) > 1) return std::string("[rank") + r + "]: ";
  }
  return "";
}
}  // namespace

void say_error(const std::string& command, const std::string& message) {
  std::cerr.flush();
  const std::string line = rank_prefix() + "artel " + command + ": error: " + message + "\n";
  launch::write_all(STDERR_FILENO, line.data(), line.size());
}

}  // namespace artel::cli

namespace {
void usage(std::ostream& os) {
  os << "usage: artel COMMAND [OPTIONS]   (no arguments: train the main job)\n\ncommands:\n";
  for (const auto& c : artel::cli::commands()) os << "  " << c.name << std::string(10 - std::min<size_t>(9, c.name.size()), ' ') << c.help << "\n";
  os << "\n`artel COMMAND --help` describes each.\n";
}
}  // namespace

int main(int argc, char** argv) {
  using artel::cli::commands;
  static char train_name[] = "train";
  char* default_argv[] = {train_name, nullptr};
  const char* name = argc > 1 ? argv[1] : "train";
  if (argc > 1 && (!std::strcmp(name, "--help") || !std::strcmp(name, "-h"))) {
    usage(std::cout);
    return 0;
  }
  for (const auto& c : commands()) {
    if (c.name != name) continue;
    try {
      return argc > 1 ? c.fn(argc - 1, argv + 1) : c.fn(1, default_argv);
    } catch (const std::bad_alloc&) {  // an allocation no memory limit of artel's saw coming
      artel::cli::say_error(name, "out of memory (hint: a smaller model or batch, or more memory)");
      return 1;
    } catch (const std::exception& e) {
      artel::cli::say_error(name, e.what());
      return 1;
    }
  }
  std::cerr << "artel: error: unknown command '" << name << "' (hint: `artel --help` lists the commands)\n";
  return 2;
}
