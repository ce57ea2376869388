// `artel bench SUBJECT`: dispatches to the benchmark subjects registered in
// bench_registry.h (bench_comm_command.cpp: `comm`).
#include <cstring>
#include <iostream>

#include "artel/cli/bench_registry.h"

namespace artel::cli {
namespace {

std::vector<Command>& subjects() {
  static std::vector<Command> s;
  return s;
}

void usage(std::ostream& os) {
  os << "usage: artel bench SUBJECT [OPTIONS]\n\nsubjects:\n";
  for (const auto& s : bench_subjects()) os << "  " << s.name << std::string(8 - std::min<size_t>(7, s.name.size()), ' ') << s.help << "\n";
  os << "\n`artel bench SUBJECT --help` describes each.\n";
}

int run_bench(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    usage(argc < 2 ? std::cerr : std::cout);
    return argc < 2 ? 2 : 0;
  }
  for (const auto& s : bench_subjects())
    if (s.name == argv[1]) return s.fn(argc - 1, argv + 1);
  std::string names;
  for (const auto& s : bench_subjects()) names += (names.empty() ? "" : " or ") + s.name;
  std::cerr << "artel bench: error: unknown subject '" << argv[1] << "' (hint: use " << names << ")\n";
  return 2;
}

}  // namespace

bool register_bench(const std::string& name, const std::string& help, CommandFn fn) {
  subjects().push_back({name, help, fn});
  return true;
}

const std::vector<Command>& bench_subjects() { return subjects(); }

static const bool kBenchRegistered = register_command("bench", "benchmarks: `bench comm` (collectives), `bench train` (ms/step)", run_bench);

}  // namespace artel::cli
