// artel: the program. `artel COMMAND ...` dispatches to a registered command;
// with no arguments it runs the main job (`artel train` with its defaults).
#include <cstring>
#include <exception>
#include <new>
#include <iostream>

#include "artel/cli/command.h"
#include "artel/core/error.h"

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
      std::cerr << "artel " << name << ": error: out of memory (hint: a smaller model or batch, or more memory)\n";
      return 1;
    } catch (const std::exception& e) {
      std::cerr << "artel " << name << ": error: " << e.what() << "\n";
      return 1;
    }
  }
  std::cerr << "artel: unknown command '" << name << "' (hint: `artel --help` lists the commands)\n";
  return 2;
}
