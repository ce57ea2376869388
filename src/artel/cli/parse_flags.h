// One way for every subcommand to read its flags with CLI11: --help prints
// the help and ends the command successfully; a bad flag is an artel::Error
// (one line, with a hint), like every other bad input.
//
//   CLI::App app{"...", "artel train"};
//   if (!parse_flags(app, argc, argv, "see `artel train --help`")) return 0;   // --help was printed
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace artel::cli {

// False when --help was asked for (and printed to stdout).
bool parse_flags(CLI::App& app, int argc, char** argv, const std::string& hint);

}  // namespace artel::cli
